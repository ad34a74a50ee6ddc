#include "storage/reshard.h"

#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/table.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include "common/hash.h"
#include "common/replace_file.h"
#include "common/token_file.h"
#include "storage/checkpoint.h"
#include "storage/key_format.h"
#include "storage/rocks_logger.h"
#include "storage/rocks_status.h"
#include "storage/row_merge.h"

namespace pace {

namespace fs = std::filesystem;
namespace sf = storage_format;

namespace {

// What every source checkpoint must agree on, and what it holds besides rows.
struct SourceSet {
  std::vector<CheckpointManifest> manifests;  // index = old shard id
  std::vector<std::string> dirs;              // index = old shard id
  std::string job;                            // "" for shards of automatic job ids
  std::vector<ClockT> clocks;                 // the new job's applied clocks, index = client id
  std::string last_import;                    // "" unless every shard holds the same record
};

// The new job's applied clocks: the checkpoints', or for another number of
// clients each at the clock every old client finished.
Status TargetClocks(const ReshardOptions& options, SourceSet* set) {
  const CheckpointManifest& m0 = set->manifests[0];
  const uint32_t k = options.num_clients;
  if (k == 0 || k == m0.identity.num_clients) {
    set->clocks = m0.applied_clocks;
    return Status::OK();
  }
  if (k > 65536) return Status::InvalidArgument("--num_clients must be in [1, 65536]");
  const auto [lo, hi] = std::minmax_element(m0.applied_clocks.begin(), m0.applied_clocks.end());
  if (*lo != *hi) {
    std::string clocks;
    for (size_t p = 0; p < m0.applied_clocks.size(); ++p) {
      clocks += (p == 0 ? "" : ", ") + std::string("client ") + std::to_string(p) + ": " +
                std::to_string(m0.applied_clocks[p]);
    }
    return Status::InvalidArgument(
        "the checkpoints' clients are at different clocks (" + clocks +
        "): the number of clients changes only at a clock every client finished; use checkpoints "
        "taken when the job stopped at its last clock, or resume it with " +
        std::to_string(m0.identity.num_clients) + " clients until they agree");
  }
  set->clocks.assign(k, *lo);
  return Status::OK();
}

Status Mismatch(const std::string& a, const std::string& b, const std::string& what) {
  return Status::InvalidArgument("checkpoints " + a + " and " + b + " differ in " + what +
                                 ": re-sharding needs the checkpoints of every shard of one job "
                                 "taken at one clock");
}

// Reads every manifest and opens every checkpoint read-only once, checking
// that together they are shards 0..N-1 of one job at one clock.
Status ReadSources(const std::vector<std::string>& dirs, const ReshardOptions& options,
                   SourceSet* set) {
  if (dirs.empty()) return Status::InvalidArgument("no checkpoint to re-shard");
  std::vector<CheckpointManifest> ms(dirs.size());
  for (size_t i = 0; i < dirs.size(); ++i) {
    RETURN_IF_ERROR(ReadCheckpointManifestFile(dirs[i], &ms[i]));
  }
  const uint32_t n = ms[0].identity.num_shards;
  if (dirs.size() != n) {
    return Status::InvalidArgument(
        dirs[0] + " is a checkpoint of shard " + std::to_string(ms[0].identity.shard_id) + " of " +
        std::to_string(n) + ", but " + std::to_string(dirs.size()) +
        " checkpoint(s) were given: give one checkpoint of each of the job's " + std::to_string(n) +
        " shards");
  }
  set->manifests.assign(n, CheckpointManifest());
  set->dirs.assign(n, std::string());
  for (size_t i = 0; i < dirs.size(); ++i) {
    const CheckpointManifest& m = ms[i];
    if (m.identity.num_shards != n) return Mismatch(dirs[0], dirs[i], "their number of shards");
    if (m.identity.num_clients != ms[0].identity.num_clients) {
      return Mismatch(dirs[0], dirs[i], "their number of clients");
    }
    if (m.applied_clocks != ms[0].applied_clocks) {
      return Mismatch(dirs[0], dirs[i],
                      "their applied clocks (shard clocks " + std::to_string(ms[0].shard_clock) +
                          " and " + std::to_string(m.shard_clock) + ")");
    }
    if (m.tables.size() != ms[0].tables.size() ||
        !std::equal(m.tables.begin(), m.tables.end(), ms[0].tables.begin(), SameSchema)) {
      return Mismatch(dirs[0], dirs[i], "their tables");
    }
    const uint32_t k = m.identity.shard_id;
    if (!set->dirs[k].empty()) {
      return Status::InvalidArgument(set->dirs[k] + " and " + dirs[i] +
                                     " are both checkpoints of shard " + std::to_string(k));
    }
    set->manifests[k] = m;
    set->dirs[k] = dirs[i];
  }
  for (uint32_t k = 0; k < n; ++k) {
    std::unique_ptr<ShardStore> store;
    RETURN_IF_ERROR(ShardStore::OpenForInspection(set->dirs[k], options.block_cache_mb, &store));
    if (store->data_path_stats().replayed_records != 0) {
      return Status::InvalidArgument(
          "checkpoint " + set->dirs[k] +
          " holds rows in its clock log (not a checkpoint written by this build): restore it with "
          "--data_dir, start and stop paced on it once, and checkpoint that store");
    }
    for (ClientId p = 0; p < set->manifests[k].identity.num_clients; ++p) {
      if (store->AppliedParts(p) != 0) {
        return Status::InvalidArgument("checkpoint " + set->dirs[k] + " holds clock " +
                                       std::to_string(store->AppliedClock(p)) + " of client " +
                                       std::to_string(p) +
                                       " in part: re-shard a checkpoint between clocks");
      }
    }
    StatusOr<std::string> import = store->LastImport();
    RETURN_IF_ERROR(import.status());
    // A job named with paced --job is carried over; shards started without
    // one each have their own automatic id, and so will the new ones.
    const std::string job = IsAutoJobId(store->identity().job) ? "" : store->identity().job;
    if (k == 0) {
      set->job = job;
      set->last_import = *import;
    } else if (job != set->job) {
      return Mismatch(set->dirs[0], set->dirs[k],
                      "their job ('" + (set->job.empty() ? "automatic" : set->job) + "' and '" +
                          (job.empty() ? "automatic" : job) + "')");
    } else if (*import != set->last_import) {
      set->last_import.clear();
    }
  }
  return Status::OK();
}

rocksdb::Options RawOptions() {
  rocksdb::Options o;
  o.merge_operator = NewRowAddMergeOperator();
  o.info_log = std::make_shared<DiscardLogger>();
  o.max_open_files = 64;
  rocksdb::BlockBasedTableOptions t;
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  t.format_version = 5;
  t.checksum = rocksdb::kXXH3;  // as the store's own files (docs/storage-format.md section 8)
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  o.compression = rocksdb::kNoCompression;
  return o;
}

// How a new shard's store is opened: its identity and the job's name, small
// caches (it is written in bulk, not through them).
ShardStoreOptions TargetOptions(const SourceSet& src, uint32_t shard, uint32_t num_shards) {
  ShardStoreOptions o;
  o.shard_id = shard;
  o.num_shards = num_shards;
  o.num_clients = static_cast<uint32_t>(src.clocks.size());
  o.job = src.job;
  o.block_cache_mb = 1;
  o.row_cache_mb = 1;
  o.write_buffer_mb = 4;
  return o;
}

// Creates the empty stores of the new shards (identity, job, catalog).
Status CreateTargets(const SourceSet& src, const std::string& staging, uint32_t num_shards,
                     ReshardResult* result) {
  for (uint32_t j = 0; j < num_shards; ++j) {
    const ShardStoreOptions o = TargetOptions(src, j, num_shards);
    const std::string dir = ReshardShardDir(staging, j);
    std::unique_ptr<ShardStore> store;
    RETURN_IF_ERROR(ShardStore::Open(o, dir, &store));
    for (const TableSchema& t : src.manifests[0].tables) {
      TableSchema created;
      RETURN_IF_ERROR(store->CreateTable(t, &created));
    }
    result->shard_dirs.push_back(dir);
  }
  return Status::OK();
}

// One source's rows, in key order.
struct SourceCursor {
  std::unique_ptr<rocksdb::DB> db;
  std::unique_ptr<rocksdb::Iterator> it;
  std::string upper;
  rocksdb::Slice upper_slice;
  uint32_t shard = 0;
};

Status OpenCursor(const std::string& dir, uint32_t shard, uint64_t* next_table_id,
                  SourceCursor* c) {
  rocksdb::DB* raw = nullptr;
  RETURN_IF_ERROR(
      FromRocks(rocksdb::DB::OpenForReadOnly(RawOptions(), dir, &raw), "open checkpoint " + dir));
  c->db.reset(raw);
  std::string v;
  rocksdb::Status s = c->db->Get(rocksdb::ReadOptions(), sf::kNextTableIdKey, &v);
  RETURN_IF_ERROR(FromRocks(s, "read the next table id of " + dir));
  uint64_t next = 0;
  RETURN_IF_ERROR(sf::DecodeFixed64(v, "next table id", &next).WithPrefix(dir));
  *next_table_id = std::max(*next_table_id, next);
  c->upper = sf::KeySpaceEnd(sf::kRowPrefix);
  c->upper_slice = rocksdb::Slice(c->upper);
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  ro.readahead_size = 4 << 20;
  ro.iterate_upper_bound = &c->upper_slice;
  c->it.reset(c->db->NewIterator(ro));
  c->it->Seek(sf::TableRowsBegin(0));
  c->shard = shard;
  return FromRocks(c->it->status(), "read " + dir);
}

// Writes the meta and clock records every new shard starts with.
Status WriteHeader(const SourceSet& src, uint64_t next_table_id, rocksdb::SstFileWriter* w) {
  if (!src.last_import.empty()) {
    RETURN_IF_ERROR(FromRocks(w->Put(sf::kLastImportKey, src.last_import), "write"));
  }
  RETURN_IF_ERROR(
      FromRocks(w->Put(sf::kNextTableIdKey, sf::EncodeFixed64(next_table_id)), "write"));
  const std::vector<ClockT>& clocks = src.clocks;
  for (ClientId p = 0; p < clocks.size(); ++p) {
    if (clocks[p] == 0) continue;  // no record: 0
    RETURN_IF_ERROR(FromRocks(w->Put(sf::ClockKey(p), sf::EncodeClock(clocks[p])), "write"));
  }
  return Status::OK();
}

// Merges the sources' rows in key order into the writers, routing each row
// to the new shard the placement hash names.
Status CopyRows(const SourceSet& src, std::vector<SourceCursor>* cursors,
                std::vector<std::unique_ptr<rocksdb::SstFileWriter>>* writers,
                ReshardResult* result) {
  std::map<uint32_t, char> tags;
  for (const TableSchema& t : src.manifests[0].tables) {
    tags[t.id] = static_cast<char>(RowTag(t.kind, t.type));
  }
  const uint32_t old_shards = static_cast<uint32_t>(cursors->size());
  const uint32_t new_shards = static_cast<uint32_t>(writers->size());
  result->shard_rows.assign(new_shards, 0);
  for (;;) {
    SourceCursor* next = nullptr;
    for (SourceCursor& c : *cursors) {
      if (!c.it->Valid()) continue;
      if (next == nullptr || c.it->key().compare(next->it->key()) < 0) next = &c;
    }
    if (next == nullptr) break;
    const rocksdb::Slice key = next->it->key();
    const rocksdb::Slice value = next->it->value();
    const std::string& dir = src.dirs[next->shard];
    uint32_t table = 0;
    uint64_t row = 0;
    if (!sf::DecodeRowKey(std::string_view(key.data(), key.size()), &table, &row)) {
      return Status::Corruption(dir + ": malformed row key");
    }
    auto tag = tags.find(table);
    if (tag == tags.end()) {
      return Status::Corruption(dir + ": row " + std::to_string(row) + " of table id " +
                                std::to_string(table) + ", which its catalog lacks");
    }
    if (value.empty() || value[0] != tag->second) {
      return Status::Corruption(dir + ": row " + std::to_string(row) + " of table id " +
                                std::to_string(table) + " has another format than its table");
    }
    if (ShardOf(table, row, old_shards) != next->shard) {
      return Status::Corruption(dir + ": row " + std::to_string(row) + " of table id " +
                                std::to_string(table) + " is not placed on this shard");
    }
    const uint32_t j = ShardOf(table, row, new_shards);
    RETURN_IF_ERROR(FromRocks((*writers)[j]->Put(key, value), "write"));
    ++result->shard_rows[j];
    ++result->rows;
    result->bytes += key.size() + value.size();
    next->it->Next();
    RETURN_IF_ERROR(FromRocks(next->it->status(), "read " + dir));
  }
  return Status::OK();
}

// Ingests `sst` into the store in `dir` (moved, one MANIFEST edit).
Status Ingest(const std::string& dir, const std::string& sst) {
  rocksdb::Options o = RawOptions();
  rocksdb::DB* raw = nullptr;
  RETURN_IF_ERROR(FromRocks(rocksdb::DB::Open(o, dir, &raw), "open " + dir));
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::IngestExternalFileOptions io;
  io.move_files = true;
  io.allow_global_seqno = true;
  io.allow_blocking_flush = true;
  RETURN_IF_ERROR(FromRocks(db->IngestExternalFile({sst}, io), "ingest " + sst));
  std::error_code ec;
  fs::remove(sst, ec);  // the store holds its own link
  return FromRocks(db->Close(), "close " + dir);
}

// Opens every new shard as paced would and checks its clocks.
Status CheckTargets(const SourceSet& src, uint32_t num_shards, const ReshardResult& result) {
  const CheckpointManifest& m0 = src.manifests[0];
  for (uint32_t j = 0; j < num_shards; ++j) {
    std::unique_ptr<ShardStore> store;
    RETURN_IF_ERROR(
        ShardStore::Open(TargetOptions(src, j, num_shards), result.shard_dirs[j], &store));
    if (store->AppliedClocks() != src.clocks || store->ShardClock() != m0.shard_clock) {
      return Status::Internal("re-sharded store " + result.shard_dirs[j] +
                              " does not hold the checkpoints' applied clocks");
    }
  }
  return Status::OK();
}

}  // namespace

std::string ReshardShardDir(const std::string& out_dir, uint32_t shard) {
  return out_dir + "/shard-" + std::to_string(shard);
}

Status ReshardCheckpoints(const std::vector<std::string>& checkpoint_dirs,
                          const std::string& out_dir, const ReshardOptions& options,
                          ReshardResult* result) {
  if (options.num_shards == 0) return Status::InvalidArgument("--num_shards must be >= 1");
  std::error_code ec;
  if (fs::exists(out_dir, ec) && (!fs::is_directory(out_dir, ec) || !fs::is_empty(out_dir, ec))) {
    return Status::AlreadyExists("re-shard target " + out_dir +
                                 " exists and is not an empty directory");
  }
  SourceSet src;
  RETURN_IF_ERROR(ReadSources(checkpoint_dirs, options, &src));
  RETURN_IF_ERROR(TargetClocks(options, &src));
  *result = ReshardResult();
  const std::string staging = out_dir + ".reshard-tmp";
  fs::remove_all(staging, ec);  // a killed run's
  fs::create_directories(staging, ec);
  if (ec) return Status::IOError("create " + staging + ": " + ec.message());
  auto fail = [&staging](Status s) {
    std::error_code rm_ec;
    fs::remove_all(staging, rm_ec);
    return s;
  };
  ReshardResult r;
  Status s = CreateTargets(src, staging, options.num_shards, &r);
  if (!s.ok()) return fail(s);

  const uint32_t n = static_cast<uint32_t>(src.dirs.size());
  std::vector<SourceCursor> cursors(n);
  uint64_t next_table_id = 1;
  for (uint32_t k = 0; k < n && s.ok(); ++k) {
    s = OpenCursor(src.dirs[k], k, &next_table_id, &cursors[k]);
  }
  std::vector<std::unique_ptr<rocksdb::SstFileWriter>> writers;
  std::vector<std::string> ssts;
  const rocksdb::Options raw_options = RawOptions();
  for (uint32_t j = 0; j < options.num_shards && s.ok(); ++j) {
    writers.push_back(std::make_unique<rocksdb::SstFileWriter>(rocksdb::EnvOptions(), raw_options));
    ssts.push_back(r.shard_dirs[j] + "/reshard.sst");
    s = FromRocks(writers.back()->Open(ssts.back()), "create " + ssts.back());
    if (s.ok()) s = WriteHeader(src, next_table_id, writers.back().get());
  }
  if (s.ok()) s = CopyRows(src, &cursors, &writers, &r);
  for (size_t j = 0; j < writers.size() && s.ok(); ++j) {
    s = FromRocks(writers[j]->Finish(), "finish " + ssts[j]);
  }
  cursors.clear();
  for (size_t j = 0; j < ssts.size() && s.ok(); ++j) s = Ingest(r.shard_dirs[j], ssts[j]);
  if (s.ok()) s = CheckTargets(src, options.num_shards, r);
  if (s.ok()) s = SyncDir(staging);
  if (!s.ok()) return fail(s);

  fs::remove(out_dir, ec);  // an empty directory, if any
  fs::rename(staging, out_dir, ec);
  if (ec)
    return fail(Status::IOError("rename " + staging + " to " + out_dir + ": " + ec.message()));
  const std::string parent = fs::path(out_dir).parent_path().string();
  RETURN_IF_ERROR(SyncDir(parent.empty() ? "." : parent));
  r.source_shards = n;
  r.num_clients = static_cast<uint32_t>(src.clocks.size());
  r.shard_clock = src.manifests[0].shard_clock;
  r.job = src.job;
  r.tables = src.manifests[0].tables;
  for (uint32_t j = 0; j < options.num_shards; ++j) r.shard_dirs[j] = ReshardShardDir(out_dir, j);
  *result = std::move(r);
  return Status::OK();
}

}  // namespace pace
