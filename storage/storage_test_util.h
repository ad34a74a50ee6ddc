// Test-only helpers for storage tests (storage/*_test.cc, tests/storage/).
// Header-only; not part of pace_storage.
#ifndef PACE_STORAGE_STORAGE_TEST_UTIL_H_
#define PACE_STORAGE_STORAGE_TEST_UTIL_H_

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "common/schema.h"

namespace pace {
namespace testing_util {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on
// destruction. Not thread-safe.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    const char* base = ::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base ? base : "/tmp") + "/pace-test-XXXXXX";
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
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline TableSchema MakeSchema(const std::string& name, RowKind kind, ElementType type,
                              uint32_t width) {
  TableSchema s;
  s.name = name;
  s.kind = kind;
  s.type = type;
  s.width = width;
  return s;
}

}  // namespace testing_util
}  // namespace pace

#endif  // PACE_STORAGE_STORAGE_TEST_UTIL_H_
