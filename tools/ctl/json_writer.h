// A minimal streaming JSON writer for pacectl's --json output: compact, one
// document, strings escaped per RFC 8259 (invalid UTF-8 becomes U+FFFD).
//
// Thread-compatible; the caller owns the stream, which must outlive the writer.
#ifndef PACE_TOOLS_CTL_JSON_WRITER_H_
#define PACE_TOOLS_CTL_JSON_WRITER_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace pace::ctl {

// Returns `s` as a quoted JSON string literal.
std::string JsonQuote(std::string_view s);

class JsonWriter {
 public:
  explicit JsonWriter(std::ostream* out) : out_(out) {}

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  // The next value is this member of the enclosing object.
  void Key(std::string_view key);

  void String(std::string_view s);
  void Int(int64_t v);
  void Uint(uint64_t v);
  void Bool(bool v);
  void Null();
  // Finite doubles as the shortest text that round-trips; NaN and infinities
  // as the strings "NaN", "Infinity", "-Infinity" (JSON has no such numbers).
  void Double(double v);
  // A value already rendered as JSON (a number or a quoted string).
  void Raw(std::string_view json);

  // Shorthands for a member: Key(k) then the value.
  void Member(std::string_view k, std::string_view v) {
    Key(k);
    String(v);
  }
  void Member(std::string_view k, const char* v) {
    Key(k);
    String(v);
  }
  void MemberInt(std::string_view k, int64_t v) {
    Key(k);
    Int(v);
  }
  void MemberUint(std::string_view k, uint64_t v) {
    Key(k);
    Uint(v);
  }
  void MemberBool(std::string_view k, bool v) {
    Key(k);
    Bool(v);
  }

 private:
  void BeforeValue();

  std::ostream* const out_;
  // One entry per open container: true until its first element is written.
  std::vector<bool> first_;
  bool after_key_ = false;
};

}  // namespace pace::ctl

#endif  // PACE_TOOLS_CTL_JSON_WRITER_H_
