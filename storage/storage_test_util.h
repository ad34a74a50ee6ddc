// Test-only helpers for storage tests (storage/*_test.cc, tests/storage/).
// Header-only; not part of pace_storage.
#ifndef PACE_STORAGE_STORAGE_TEST_UTIL_H_
#define PACE_STORAGE_STORAGE_TEST_UTIL_H_

#include <string>

#include "common/schema.h"
#include "common/scoped_temp_dir.h"

namespace pace {
namespace testing_util {

using ::pace::ScopedTempDir;  // common/scoped_temp_dir.h

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
