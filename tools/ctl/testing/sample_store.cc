#include "tools/ctl/testing/sample_store.h"

#include <rocksdb/db.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <utility>
#include <vector>

#include "common/row.h"
#include "storage/key_format.h"
#include "storage/row_merge.h"

namespace pace::testing {

namespace {

TableSchema Schema(std::string name, RowKind kind, ElementType type, uint32_t width, Consistency c,
                   uint32_t s, InitKind init, double a, double b, uint64_t seed) {
  TableSchema t;
  t.name = std::move(name);
  t.kind = kind;
  t.type = type;
  t.width = width;
  t.consistency = c;
  t.staleness = s;
  t.init = Initializer{init, a, b, seed};
  return t;
}

struct PlannedDelta {
  int clock;
  int client_slot;  // mapped to slot % num_clients
  std::string table;
  uint64_t row;
  std::string bytes;
};

}  // namespace

Status BuildSampleStore(const std::string& dir, uint32_t num_clients,
                        std::unique_ptr<ShardStore>* out) {
  ShardStoreOptions o;
  o.num_clients = num_clients;
  o.block_cache_mb = 8;
  o.write_buffer_mb = 4;
  std::unique_ptr<ShardStore> store;
  RETURN_IF_ERROR(ShardStore::Open(o, dir, &store));
  std::map<std::string, uint32_t> ids;
  for (const TableSchema& s : {Schema("w", RowKind::kDense, ElementType::kF32, 4,
                                      Consistency::kEssp, 2, InitKind::kUniform, -0.1, 0.1, 7),
                               Schema("counts", RowKind::kDense, ElementType::kI64, 3,
                                      Consistency::kSsp, 1, InitKind::kZeros, 0, 0, 0),
                               Schema("topics", RowKind::kSparse, ElementType::kI32, 100,
                                      Consistency::kBsp, 0, InitKind::kZeros, 0, 0, 0),
                               Schema("emb", RowKind::kDense, ElementType::kF64, 2,
                                      Consistency::kAsync, 0, InitKind::kNormal, 0, 0.5, 3)}) {
    TableSchema created;
    RETURN_IF_ERROR(store->CreateTable(s, &created));
    ids[s.name] = created.id;
  }
  const std::vector<PlannedDelta> plan = {
      {0, 0, "w", 0, EncodeDense<float>({1, 2, 3, 4})},
      {0, 0, "w", 2, EncodeDense<float>({0.5f, 0.5f, 0.5f, 0.5f})},
      {0, 0, "counts", 1, EncodeDense<int64_t>({1, 2, 3})},
      {0, 0, "topics", 0, EncodeSparse<int32_t>(std::map<uint32_t, int32_t>{{3, 5}, {10, -2}})},
      {0, 1, "counts", 1, EncodeDense<int64_t>({10, 20, 30})},
      {0, 1, "counts", 3, EncodeDense<int64_t>({-1, 0, 7})},
      {1, 0, "w", 5, EncodeDense<float>({1, 1, 1, 1})},
      {1, 0, "topics", 7, EncodeSparse<int32_t>(std::map<uint32_t, int32_t>{{1, 1}})},
      {1, 0, "emb", 10, EncodeDense<double>({0.25, -0.25})},
      {2, 1, "counts", 3, EncodeDense<int64_t>({1, 1, 1})},
  };
  for (int clock = 0; clock < kSampleClocks; ++clock) {
    for (uint32_t client = 0; client < num_clients; ++client) {
      std::vector<RowDelta> deltas;
      for (const PlannedDelta& d : plan) {
        if (d.clock == clock && static_cast<uint32_t>(d.client_slot) % num_clients == client) {
          deltas.push_back(RowDelta{ids[d.table], d.row, d.bytes});
        }
      }
      bool duplicate = false;
      RETURN_IF_ERROR(store->ApplyBatch(client, clock, deltas, &duplicate));
    }
  }
  if (out != nullptr) *out = std::move(store);
  return Status::OK();
}

Status PutRawRowValue(const std::string& dir, uint32_t table, uint64_t row,
                      const std::string& stored) {
  rocksdb::Options o;
  o.create_if_missing = false;
  // Without the store's merge operator, RocksDB would mangle the stored merge
  // operands when it flushes the recovered WAL.
  o.merge_operator = NewRowAddMergeOperator();
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(o, dir, &raw);
  if (!s.ok()) return Status::IOError("raw open of " + dir + ": " + s.ToString());
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  s = db->Put(wo, storage_format::MakeRowKey(table, row), stored);
  if (!s.ok()) return Status::IOError("raw put: " + s.ToString());
  s = db->Close();
  if (!s.ok()) return Status::IOError("raw close: " + s.ToString());
  return Status::OK();
}

Status AddBigTableAndFlush(const std::string& dir, uint32_t num_clients, uint64_t n,
                           std::string* sst) {
  {
    ShardStoreOptions o;
    o.num_clients = num_clients;
    o.block_cache_mb = 8;
    std::unique_ptr<ShardStore> store;
    RETURN_IF_ERROR(ShardStore::Open(o, dir, &store));
    TableSchema big;
    big.name = "big";
    big.kind = RowKind::kDense;
    big.type = ElementType::kF64;
    big.width = 8;
    RETURN_IF_ERROR(store->CreateTable(big, &big));
    std::vector<std::string> values(n);
    std::vector<RowDelta> deltas(n);
    for (uint64_t r = 0; r < n; ++r) {
      std::vector<double> v(8);
      for (int c = 0; c < 8; ++c)
        v[c] = static_cast<double>(r) * 1.000001 + c * 0.37 + 1e-7 * r * r;
      values[r] = EncodeDense(v);
      deltas[r] = RowDelta{big.id, r, values[r]};
    }
    bool duplicate = false;
    RETURN_IF_ERROR(store->ApplyBatch(0, store->AppliedClock(0), deltas, &duplicate));
    RETURN_IF_ERROR(store->Flush());
  }
  uintmax_t best = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".sst" && e.file_size(ec) > best) {
      best = e.file_size(ec);
      *sst = e.path().string();
    }
  }
  if (best == 0) return Status::NotFound("no SST file in " + dir);
  return Status::OK();
}

Status OverwriteBytes(const std::string& path, double fraction, size_t len) {
  std::error_code ec;
  uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return Status::IOError("size of " + path + ": " + ec.message());
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  if (!f) return Status::IOError("open " + path);
  f.seekp(static_cast<std::streamoff>(static_cast<double>(size) * fraction));
  std::string junk(len, '\x5A');
  f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  f.close();
  return f ? Status::OK() : Status::IOError("write " + path);
}

}  // namespace pace::testing
