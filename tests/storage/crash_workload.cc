#include "tests/storage/crash_workload.h"

#include "common/hash.h"
#include "common/row.h"

namespace pace {
namespace crash_test {

namespace {

// A small deterministic generator seeded from (seed, step).
class Gen {
 public:
  Gen(uint64_t seed, int64_t step) : state_(Mix64(seed) ^ Mix64(static_cast<uint64_t>(step))) {}
  uint64_t Next() { return state_ = Mix64(state_); }
  uint64_t Below(uint64_t n) { return Next() % n; }

 private:
  uint64_t state_;
};

}  // namespace

Status SetUpTables(ShardStore* store, Tables* tables) {
  TableSchema d;
  d.name = "crash_dense";
  d.kind = RowKind::kDense;
  d.type = ElementType::kI64;
  d.width = kDenseWidth;
  TableSchema s;
  s.name = "crash_sparse";
  s.kind = RowKind::kSparse;
  s.type = ElementType::kI32;
  s.width = kSparseWidth;
  TableSchema created;
  RETURN_IF_ERROR(store->CreateTable(d, &created));
  tables->dense = created.id;
  RETURN_IF_ERROR(store->CreateTable(s, &created));
  tables->sparse = created.id;
  return Status::OK();
}

ShardStoreOptions StoreOptions(bool sync) {
  ShardStoreOptions o;
  o.num_clients = kClients;
  o.sync = sync;
  o.block_cache_mb = 8;
  o.write_buffer_mb = 2;  // small memtables: flushes happen during the test
  // The clock log writes its rows back every three batches, so kills land in
  // log appends, in write-backs (SST written, ingested, log restarted) and
  // between them; each restart replays the committed records after the last
  // write-back exactly once.
  o.row_cache_mb = 1;
  o.writeback_every_groups = 3;
  return o;
}

void MakeBatch(uint64_t seed, int64_t step, const Tables& tables, Batch* batch) {
  Gen g(seed, step);
  batch->client = static_cast<ClientId>(step % kClients);
  batch->clock = step / kClients;
  batch->bytes.clear();
  batch->deltas.clear();
  // Mostly small batches, some large ones (so kills land inside writes).
  size_t n = g.Below(8) == 0 ? 1000 + g.Below(3000) : g.Below(60);
  batch->bytes.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t row = g.Below(kRows);
    if (g.Below(2) == 0) {
      std::vector<int64_t> v(kDenseWidth);
      for (int64_t& x : v) x = static_cast<int64_t>(g.Below(2001)) - 1000;
      batch->bytes.push_back(EncodeDense(v));
      batch->deltas.push_back({tables.dense, row, batch->bytes.back()});
    } else {
      std::map<uint32_t, int32_t> m;
      size_t k = g.Below(5);
      for (size_t j = 0; j < k; ++j) {
        m[static_cast<uint32_t>(g.Below(kSparseWidth))] = static_cast<int32_t>(g.Below(21)) - 10;
      }
      batch->bytes.push_back(EncodeSparse(m));
      batch->deltas.push_back({tables.sparse, row, batch->bytes.back()});
    }
  }
}

void Model::AdvanceTo(int64_t n) {
  Batch b;
  for (; steps_ < n; ++steps_) {
    MakeBatch(seed_, steps_, tables_, &b);
    for (const RowDelta& d : b.deltas) {
      if (d.table == tables_.dense) {
        std::vector<int64_t>& row = dense_[d.row];
        row.resize(kDenseWidth, 0);
        std::vector<int64_t> v = DecodeDense<int64_t>(d.bytes);
        for (size_t i = 0; i < kDenseWidth; ++i) row[i] += v[i];
      } else {
        std::map<uint32_t, int32_t>& row = sparse_[d.row];
        for (const auto& [col, val] : DecodeSparse<int32_t>(d.bytes)) {
          if ((row[col] += val) == 0) row.erase(col);
        }
      }
    }
  }
}

Status Model::Check(ShardStore* store) const {
  std::vector<uint64_t> rows(kRows);
  for (uint64_t r = 0; r < kRows; ++r) rows[r] = r;
  std::vector<std::string> values;
  RETURN_IF_ERROR(store->MultiGet(tables_.dense, rows, &values));
  for (uint64_t r = 0; r < kRows; ++r) {
    auto it = dense_.find(r);
    std::vector<int64_t> want =
        it == dense_.end() ? std::vector<int64_t>(kDenseWidth, 0) : it->second;
    if (DecodeDense<int64_t>(values[r]) != want) {
      return Status::Internal("dense row " + std::to_string(r) + " differs from the model of " +
                              std::to_string(steps_) + " steps");
    }
  }
  RETURN_IF_ERROR(store->MultiGet(tables_.sparse, rows, &values));
  for (uint64_t r = 0; r < kRows; ++r) {
    auto it = sparse_.find(r);
    std::map<uint32_t, int32_t> want;
    if (it != sparse_.end()) want = it->second;
    auto got = DecodeSparse<int32_t>(values[r]);
    if (std::map<uint32_t, int32_t>(got.begin(), got.end()) != want) {
      return Status::Internal("sparse row " + std::to_string(r) + " differs from the model of " +
                              std::to_string(steps_) + " steps");
    }
  }
  return Status::OK();
}

}  // namespace crash_test
}  // namespace pace
