#include "tools/bench/raw_rocksdb.h"

#include <rocksdb/merge_operator.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <unistd.h>

#include <filesystem>

#include "common/row.h"
#include "tools/bench/scratch.h"

namespace pace::bench {

namespace {

// Sums f32 rows of equal size.
class FloatAdd : public rocksdb::AssociativeMergeOperator {
 public:
  bool Merge(const rocksdb::Slice&, const rocksdb::Slice* existing, const rocksdb::Slice& value,
             std::string* new_value, rocksdb::Logger*) const override {
    if (existing == nullptr) {
      new_value->assign(value.data(), value.size());
      return true;
    }
    new_value->assign(existing->data(), existing->size());
    if (value.size() != existing->size()) return false;
    AddDenseElements(ElementType::kF32, new_value->data(), value.data(), value.size() / 4);
    return true;
  }
  const char* Name() const override { return "bench.FloatAdd"; }
};

}  // namespace

std::string TempDir(const char* name) {
  std::string dir =
      (ScratchRoot() / ("pace-bench-" + std::string(name) + "-" + std::to_string(getpid())))
          .string();
  std::error_code ignored;  // a leftover is harmless; never an exception
  std::filesystem::remove_all(dir, ignored);
  return dir;
}

std::unique_ptr<rocksdb::DB> OpenRawBaselineDb(const std::string& dir) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.write_buffer_size = 64 << 20;
  options.max_write_buffer_number = 3;
  options.merge_operator = std::make_shared<FloatAdd>();
  // The store's compression and checksum settings (storage/shard_store.cc).
  options.compression_per_level = {rocksdb::kNoCompression, rocksdb::kNoCompression,
                                   rocksdb::kSnappyCompression};
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(256 << 20);
  table.checksum = rocksdb::kXXH3;
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  rocksdb::DB* raw = nullptr;
  if (!rocksdb::DB::Open(options, dir, &raw).ok()) return nullptr;
  return std::unique_ptr<rocksdb::DB>(raw);
}

}  // namespace pace::bench
