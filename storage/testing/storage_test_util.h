// Test-only helpers for storage tests (storage/*_test.cc, tests/storage/).
// Header-only; not part of pace_storage.
#ifndef PACE_STORAGE_TESTING_STORAGE_TEST_UTIL_H_
#define PACE_STORAGE_TESTING_STORAGE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/schema.h"
#include "common/scoped_temp_dir.h"
#include "storage/shard_store.h"

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

// The store in `dir`, or nullptr after a test failure naming the error.
inline std::unique_ptr<ShardStore> OpenOrDie(const ShardStoreOptions& o, const std::string& dir) {
  std::unique_ptr<ShardStore> s;
  Status st = ShardStore::Open(o, dir, &s);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return s;
}

}  // namespace testing_util
}  // namespace pace

#endif  // PACE_STORAGE_TESTING_STORAGE_TEST_UTIL_H_
