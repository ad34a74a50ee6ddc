#include "apps/shared/text_input.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace pace {
namespace apps {

namespace {

// A gzip file as a stdio stream (glibc fopencookie), so that getline reads it
// like a plain one.
ssize_t GzRead(void* cookie, char* buf, size_t size) {
  const unsigned chunk = size > (1u << 30) ? (1u << 30) : static_cast<unsigned>(size);
  const int n = gzread(static_cast<gzFile>(cookie), buf, chunk);
  if (n < 0) errno = EIO;
  return n;
}

int GzClose(void* cookie) { return gzclose(static_cast<gzFile>(cookie)) == Z_OK ? 0 : EOF; }

bool IsGzip(FILE* f) {
  unsigned char magic[2] = {0, 0};
  const size_t n = std::fread(magic, 1, 2, f);
  std::rewind(f);
  return n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

}  // namespace

Status LineReader::Open(const std::string& path, std::unique_ptr<LineReader>* reader) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) {
    int err = errno;
    std::string msg = "cannot open '" + path + "': " + std::strerror(err);
    if (err == ENOENT) return Status::NotFound(msg);
    return Status::IOError(msg);
  }
  uint64_t file_bytes = 0;  // stays 0 for gzip: its text's size is unknown
  if (IsGzip(f)) {
    std::fclose(f);
    gzFile gz = gzopen(path.c_str(), "rb");
    if (gz == nullptr) return Status::IOError("cannot open '" + path + "' as gzip");
    gzbuffer(gz, 1 << 17);
    cookie_io_functions_t io = {GzRead, nullptr, nullptr, GzClose};
    f = fopencookie(gz, "r", io);
    if (f == nullptr) {
      gzclose(gz);
      return Status::IOError("cannot read '" + path + "' as gzip");
    }
  } else if (struct stat st; ::fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode)) {
    file_bytes = static_cast<uint64_t>(st.st_size);
  }
  reader->reset(new LineReader(path, f, file_bytes));
  return Status::OK();
}

LineReader::LineReader(std::string path, FILE* file, uint64_t file_bytes)
    : path_(std::move(path)), file_(file), file_bytes_(file_bytes) {}

LineReader::~LineReader() {
  std::free(buf_);
  std::fclose(file_);
}

bool LineReader::Next(std::string_view* line) {
  errno = 0;
  ssize_t n = ::getline(&buf_, &cap_, file_);
  if (n < 0) {
    if (std::ferror(file_)) {
      status_ = Status::IOError("reading '" + path_ + "' failed after line " +
                                std::to_string(line_number_) + ": " + std::strerror(errno));
    }
    return false;
  }
  ++line_number_;
  bytes_read_ += static_cast<uint64_t>(n);
  size_t len = static_cast<size_t>(n);
  if (len > 0 && buf_[len - 1] == '\n') --len;
  if (len > 0 && buf_[len - 1] == '\r') --len;
  *line = std::string_view(buf_, len);
  return true;
}

std::string LineReader::Where() const { return path_ + ":" + std::to_string(line_number_); }

Status BadLinePolicy::Handle(Status error) {
  if (error.ok()) return error;
  if (!skip_) return error;
  if (skipped_ == 0) first_error_ = error.message();
  ++skipped_;
  return Status::OK();
}

std::string_view Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r' || s[b] == '\n')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r' || s[e - 1] == '\n')) {
    --e;
  }
  return s.substr(b, e - b);
}

void SplitWhitespace(std::string_view line, std::vector<std::string_view>* fields) {
  fields->clear();
  size_t i = 0, n = line.size();
  while (i < n) {
    while (i < n && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == n) break;
    size_t b = i;
    while (i < n && line[i] != ' ' && line[i] != '\t') ++i;
    fields->push_back(line.substr(b, i - b));
  }
}

void SplitOn(std::string_view line, std::string_view sep, std::vector<std::string_view>* fields) {
  fields->clear();
  size_t b = 0;
  for (;;) {
    size_t e = line.find(sep, b);
    if (e == std::string_view::npos) {
      fields->push_back(Trim(line.substr(b)));
      return;
    }
    fields->push_back(Trim(line.substr(b, e - b)));
    b = e + sep.size();
  }
}

bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool ParseI64(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool ParseDouble(std::string_view s, double* out) {
  if (s.empty()) return false;
  if (s[0] == '+') s.remove_prefix(1);  // from_chars does not take a leading '+'
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(*out);
}

bool IsNumberText(std::string_view s) {
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.remove_prefix(1);
  if (s.empty()) return false;
  double v;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  // Out of range ("1e999") is still a number.
  return (ec == std::errc() || ec == std::errc::result_out_of_range) && p == s.data() + s.size();
}

std::string Excerpt(std::string_view line) {
  constexpr size_t kMax = 60;
  std::string out = "'";
  if (line.size() > kMax) {
    out.append(line.substr(0, kMax));
    out += "...";
  } else {
    out.append(line);
  }
  out += "'";
  return out;
}

}  // namespace apps
}  // namespace pace
