// Internal to pacectl: an export's output file, written to a temporary name
// and renamed into place when complete.
#ifndef PACE_TOOLS_CTL_OUTPUT_FILE_H_
#define PACE_TOOLS_CTL_OUTPUT_FILE_H_

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <ostream>
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

}  // namespace pace::ctl

#endif  // PACE_TOOLS_CTL_OUTPUT_FILE_H_
