// A small strict JSON parser for tests that check pacectl's --json output:
// it rejects anything RFC 8259 does not allow (trailing commas, NaN, bare
// control characters, invalid escapes), so "it parses" means "it is JSON".
#ifndef PACE_TOOLS_CTL_TESTING_MINI_JSON_H_
#define PACE_TOOLS_CTL_TESTING_MINI_JSON_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pace::testing {

struct Json {
  enum Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = kNull;
  bool b = false;
  double number = 0;
  std::string text;  // kString: the decoded string; kNumber: the literal
  std::vector<Json> items;
  std::map<std::string, Json> members;

  // Member lookup; a null Json if absent (tests then fail on its type).
  const Json& operator[](const std::string& key) const;
  const Json& operator[](size_t i) const;
  bool has(const std::string& key) const { return members.count(key) != 0; }
  size_t size() const { return type == kArray ? items.size() : members.size(); }
};

// Parses exactly one JSON document (surrounding whitespace allowed). On error
// returns false and sets *error to a description with the offset.
bool ParseJson(std::string_view text, Json* out, std::string* error);

}  // namespace pace::testing

#endif  // PACE_TOOLS_CTL_TESTING_MINI_JSON_H_
