// Line-oriented text input for the apps' parsers: a line reader that knows
// its file and line number (so every parse error can say "file:line"), and
// strict number parsing.
//
// Thread-compatible.
#ifndef PACE_APPS_SHARED_TEXT_INPUT_H_
#define PACE_APPS_SHARED_TEXT_INPUT_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pace {
namespace apps {

class LineReader {
 public:
  // NotFound if the file does not exist, IOError if it cannot be opened. A
  // gzip file (by its magic bytes, whatever its name) is read decompressed.
  static Status Open(const std::string& path, std::unique_ptr<LineReader>* reader);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its "\n" or "\r\n"; false at the end of the file or
  // on a read error (see status()). The view is valid until the next call.
  bool Next(std::string_view* line);
  // IOError if reading failed; OK at a clean end of file.
  const Status& status() const { return status_; }

  const std::string& path() const { return path_; }
  // 1-based number of the line last returned by Next.
  uint64_t line_number() const { return line_number_; }
  // "path:line", for error messages.
  std::string Where() const;
  // The file's size in bytes; 0 for a gzip file (its text's size is not
  // known before the end) or a file whose size cannot be read.
  uint64_t file_bytes() const { return file_bytes_; }
  // Bytes of the lines returned so far, line ends included.
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  LineReader(std::string path, FILE* file, uint64_t file_bytes);

  const std::string path_;
  FILE* file_;
  const uint64_t file_bytes_;
  uint64_t bytes_read_ = 0;
  char* buf_ = nullptr;
  size_t cap_ = 0;
  uint64_t line_number_ = 0;
  Status status_;
};

// Counts bad lines when they may be skipped, or turns the first into the
// error. Thread-compatible.
class BadLinePolicy {
 public:
  explicit BadLinePolicy(bool skip) : skip_(skip) {}
  // Returns OK (and counts the line) when skipping, else `error`.
  Status Handle(Status error);
  uint64_t skipped() const { return skipped_; }
  // The first skipped line's error, for a summary message. Empty if none.
  const std::string& first_error() const { return first_error_; }

 private:
  bool skip_;
  uint64_t skipped_ = 0;
  std::string first_error_;
};

std::string_view Trim(std::string_view s);
// Splits on any run of spaces and tabs.
void SplitWhitespace(std::string_view line, std::vector<std::string_view>* fields);
// Splits on every occurrence of `sep` (fields may be empty); fields are trimmed.
void SplitOn(std::string_view line, std::string_view sep, std::vector<std::string_view>* fields);

// Strict parsers: the whole string must be the number. ParseDouble rejects
// NaN and infinities.
bool ParseU64(std::string_view s, uint64_t* out);
bool ParseI64(std::string_view s, int64_t* out);
bool ParseDouble(std::string_view s, double* out);
// Whether the whole string is a number of any kind, infinities and NaN
// included ("inf", "-nan", "1e999"): text that is a bad value, not a word
// such as a header's column name.
bool IsNumberText(std::string_view s);

// The line shortened for an error message, quoted: 'user,item,...'.
std::string Excerpt(std::string_view line);

}  // namespace apps
}  // namespace pace

#endif  // PACE_APPS_SHARED_TEXT_INPUT_H_
