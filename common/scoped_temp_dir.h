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
  // `prefix` names the directory: BASE/PREFIX-XXXXXX, where BASE is `base`
  // if not empty, else $TMPDIR, else /tmp.
  explicit ScopedTempDir(const std::string& prefix = "pace-test", std::string base = "") {
    if (base.empty()) {
      const char* env = ::getenv("TMPDIR");
      base = env != nullptr && *env ? env : "/tmp";
    }
    std::string tmpl = base + "/" + prefix + "-XXXXXX";
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
