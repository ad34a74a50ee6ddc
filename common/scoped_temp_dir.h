// ScopedTempDir: a fresh empty directory under $TMPDIR (or /tmp), removed with
// its contents on destruction. The one temp-dir fixture of the tests (and of
// anything else that wants scratch space). Header-only; not thread-safe.
#ifndef PACE_COMMON_SCOPED_TEMP_DIR_H_
#define PACE_COMMON_SCOPED_TEMP_DIR_H_

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace pace {

class ScopedTempDir {
 public:
  // `prefix` names the directory: $TMPDIR/PREFIX-XXXXXX.
  explicit ScopedTempDir(const std::string& prefix = "pace-test") {
    const char* base = ::getenv("TMPDIR");
    std::string tmpl =
        std::string(base != nullptr && *base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ScopedTempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  // Empty if the directory could not be created.
  const std::string& path() const { return path_; }
  // path()/name.
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace pace

#endif  // PACE_COMMON_SCOPED_TEMP_DIR_H_
