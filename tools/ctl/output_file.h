// Internal to pacectl: an export's output file, written to a temporary name
// and renamed into place when complete.
#ifndef PACE_TOOLS_CTL_OUTPUT_FILE_H_
#define PACE_TOOLS_CTL_OUTPUT_FILE_H_

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <streambuf>
#include <string>

#include "common/status.h"

namespace pace::ctl {

// Writes to a temporary file beside `path` and renames it over `path` on
// Commit, so a failed export never leaves a truncated file behind. "-" writes
// to `stdout_stream` instead.
class OutputFile {
 public:
  OutputFile(std::string path, std::ostream* stdout_stream)
      : path_(std::move(path)), stdout_(stdout_stream) {}
  ~OutputFile() {
    if (!tmp_.empty()) {
      file_.close();
      std::remove(tmp_.c_str());
    }
  }

  Status Open() {
    if (path_ == "-") return Status::OK();
    tmp_ = path_ + ".pacectl-tmp-" + std::to_string(::getpid());
    file_.rdbuf()->pubsetbuf(buffer_, sizeof(buffer_));  // must precede open()
    file_.open(tmp_, std::ios::binary | std::ios::trunc);
    if (!file_) {
      tmp_.clear();
      return Status::IOError("cannot write --out=" + path_);
    }
    return Status::OK();
  }
  std::ostream* stream() { return path_ == "-" ? stdout_ : &file_; }
  Status Commit() {
    if (path_ == "-") return Status::OK();
    file_.close();
    if (!file_) return Status::IOError("write " + tmp_ + " failed");
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
      return Status::IOError("rename " + tmp_ + " to " + path_ + " failed");
    }
    tmp_.clear();
    return Status::OK();
  }

 private:
  const std::string path_;
  std::ostream* const stdout_;
  std::string tmp_;  // non-empty while a temp file exists
  std::ofstream file_;
  char buffer_[1 << 16];
};

// Progress of a long export on `err` (pacectl's stderr): nothing during the
// first second, then at most one line per second ("pacectl: export w: 41%,
// 1.2 GiB of 2.9 GiB" when the total is known, else the bytes so far), and a
// last line at Finish if any was printed. Small exports print nothing.
class ExportProgress {
 public:
  // `rows`: the amounts are rows, not bytes.
  // `interval`: the first line's delay and the time between lines.
  ExportProgress(std::ostream* err, std::string what, uint64_t total, bool rows = false,
                 std::chrono::milliseconds interval = std::chrono::seconds(1))
      : err_(err),
        what_(std::move(what)),
        total_(total),
        rows_(rows),
        interval_(interval),
        start_(Clock::now()),
        last_(start_) {}
  // `done` bytes (or rows) are written; cheap enough to call per chunk.
  void Update(uint64_t done) {
    const auto now = Clock::now();
    if (now - last_ < interval_) return;
    last_ = now;
    Print(done);
  }
  void Finish(uint64_t done) {
    if (printed_) Print(done);
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::string Size(uint64_t b) const {
    if (rows_) return std::to_string(b) + " rows";
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(b) / (1 << 20));
    return buf;
  }
  void Print(uint64_t done) {
    printed_ = true;
    *err_ << "pacectl: " << what_ << ": ";
    if (total_ > 0) {
      *err_ << (done >= total_ ? 100 : done * 100 / total_) << "%, " << Size(done) << " of "
            << Size(total_);
    } else {
      *err_ << Size(done) << " written";
    }
    *err_ << " (" << std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start_).count()
          << " s)\n";
    err_->flush();
  }
  std::ostream* const err_;
  const std::string what_;
  const uint64_t total_;
  const bool rows_;
  const std::chrono::milliseconds interval_;
  const Clock::time_point start_;
  Clock::time_point last_;
  bool printed_ = false;
};

// An ostream that forwards to `inner`, counting the bytes and reporting them
// to `progress` (checked every 1 MiB).
class ProgressStream : public std::ostream {
 public:
  ProgressStream(std::ostream* inner, ExportProgress* progress)
      : std::ostream(&buf_), buf_(inner->rdbuf(), progress) {}
  uint64_t bytes() const { return buf_.bytes(); }

 private:
  class Buf : public std::streambuf {
   public:
    Buf(std::streambuf* inner, ExportProgress* progress) : inner_(inner), progress_(progress) {}
    uint64_t bytes() const { return bytes_; }

   protected:
    int_type overflow(int_type c) override {
      if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
      if (traits_type::eq_int_type(inner_->sputc(traits_type::to_char_type(c)),
                                   traits_type::eof())) {
        return traits_type::eof();
      }
      Count(1);
      return c;
    }
    std::streamsize xsputn(const char* s, std::streamsize n) override {
      const std::streamsize w = inner_->sputn(s, n);
      if (w > 0) Count(static_cast<uint64_t>(w));
      return w;
    }
    int sync() override { return inner_->pubsync(); }

   private:
    void Count(uint64_t n) {
      bytes_ += n;
      if (bytes_ >= next_check_) {
        next_check_ = bytes_ + (1u << 20);
        progress_->Update(bytes_);
      }
    }
    std::streambuf* const inner_;
    ExportProgress* const progress_;
    uint64_t bytes_ = 0;
    uint64_t next_check_ = 1u << 20;
  };
  Buf buf_;
};

}  // namespace pace::ctl

#endif  // PACE_TOOLS_CTL_OUTPUT_FILE_H_
