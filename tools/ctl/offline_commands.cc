// pacectl's offline commands on a data dir: tables, describe, get, scan, stats.
// Export and verify live in export_command.cc and verify_command.cc.
#include <algorithm>

#include "common/hash.h"
#include "common/store_damage.h"
#include "tools/ctl/commands.h"
#include "tools/ctl/json_writer.h"
#include "tools/ctl/value_format.h"

namespace pace::ctl {

namespace {

void IdentityJson(const ShardIdentity& id, JsonWriter* w) {
  w->Key("identity");
  w->BeginObject();
  w->MemberUint("format_version", id.format_version);
  w->MemberUint("shard_id", id.shard_id);
  w->MemberUint("num_shards", id.num_shards);
  w->MemberUint("num_clients", id.num_clients);
  w->EndObject();
}

void ClocksJson(const ShardStore& store, JsonWriter* w) {
  w->MemberInt("shard_clock", store.ShardClock());
  w->Key("applied_clocks");
  w->BeginArray();
  for (ClockT c : store.AppliedClocks()) w->Int(c);
  w->EndArray();
}

std::string StoreIdentityText(const ShardStore& store) {
  const ShardIdentity& id = store.identity();
  return IdentityText(id.shard_id, id.num_shards, id.num_clients);
}

// True if `row` of `table` has a stored value (it was written at least once).
StatusOr<bool> IsWritten(const ShardStore& store, uint32_t table, uint64_t row) {
  bool written = false;
  RETURN_IF_ERROR(store.Scan(table, row, [&](uint64_t r, std::string_view) {
    written = r == row;
    return false;
  }));
  return written;
}

}  // namespace

Status OpenOffline(const CtlOptions& options, std::unique_ptr<ShardStore>* store) {
  // A damaged CURRENT is corruption (exit 2), named as such, not a store
  // whose writer seems to keep changing it.
  RETURN_IF_ERROR(CheckCurrentFile(options.data_dir));
  ShardStoreOptions o;
  o.read_only = true;
  o.check_identity = false;
  o.block_cache_mb = options.block_cache_mb;
  return ClassifyStoreCorruption(options.data_dir, ShardStore::Open(o, options.data_dir, store));
}

StatusOr<TableSchema> FindOfflineTable(const ShardStore& store, std::string_view name) {
  StatusOr<TableSchema> t = store.FindTable(name);
  if (t.ok() || !t.status().IsNotFound()) return t;
  return UnknownTable(name, store.ListTables());
}

std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    if (comma > start) items.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

Status OpenOfflineSet(const CtlOptions& options, OfflineSet* set) {
  const std::vector<std::string> dirs = SplitList(options.data_dir);
  set->owned.clear();
  set->shards.clear();
  for (const std::string& dir : dirs) {
    CtlOptions one = options;
    one.data_dir = dir;
    std::unique_ptr<ShardStore> store;
    RETURN_IF_ERROR(OpenOffline(one, &store));
    set->owned.push_back(std::move(store));
  }
  if (set->owned.size() == 1) {
    set->shards.push_back(set->owned[0].get());
    return Status::OK();
  }
  const size_t n = set->owned.size();
  set->shards.assign(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    const ShardIdentity& id = set->owned[i]->identity();
    if (id.num_shards != n) {
      return Status::InvalidArgument(dirs[i] + " is shard " + std::to_string(id.shard_id) + " of " +
                                     std::to_string(id.num_shards) + ", but " + std::to_string(n) +
                                     " --data_dir were given: pass every shard of the job once");
    }
    if (set->shards[id.shard_id] != nullptr) {
      return Status::InvalidArgument(dirs[i] + " and " + set->shards[id.shard_id]->dir() +
                                     " are both shard " + std::to_string(id.shard_id));
    }
    set->shards[id.shard_id] = set->owned[i].get();
  }
  return Status::OK();
}

StatusOr<TableSchema> FindTableOnAll(const OfflineSet& set, std::string_view name) {
  ASSIGN_OR_RETURN(TableSchema t, FindOfflineTable(*set.shards[0], name));
  for (size_t k = 1; k < set.shards.size(); ++k) {
    StatusOr<TableSchema> other = set.shards[k]->FindTable(name);
    if (!other.ok() || !SameSchema(t, *other) || other->id != t.id) {
      return Status::InvalidArgument(
          "table '" + std::string(name) + "' differs between shard 0 (" + set.shards[0]->dir() +
          ") and shard " + std::to_string(k) + " (" + set.shards[k]->dir() + "): " +
          (other.ok() ? DescribeSchema(t) + " vs " + DescribeSchema(*other) : "missing there"));
    }
  }
  return t;
}

Status OfflineTables(const CtlContext& ctx, const Args&) {
  OfflineSet set;
  RETURN_IF_ERROR(OpenOfflineSet(ctx.options, &set));
  const std::vector<TableSchema> tables = set.shards[0]->ListTables();
  for (size_t k = 1; k < set.shards.size(); ++k) {
    if (set.shards[k]->ListTables().size() != tables.size()) {
      return Status::InvalidArgument("shard 0 holds " + std::to_string(tables.size()) +
                                     " tables but shard " + std::to_string(k) + " holds " +
                                     std::to_string(set.shards[k]->ListTables().size()));
    }
    for (const TableSchema& t : tables) RETURN_IF_ERROR(FindTableOnAll(set, t.name).status());
  }
  WriteTables(ctx, tables);
  return Status::OK();
}

Status OfflineDescribe(const CtlContext& ctx, const Args& args) {
  std::unique_ptr<ShardStore> store;
  RETURN_IF_ERROR(OpenOffline(ctx.options, &store));
  ASSIGN_OR_RETURN(TableSchema t, FindOfflineTable(*store, args[0]));
  uint64_t bytes = 0;
  RETURN_IF_ERROR(store->ApproximateTableSize(t.id, &bytes));
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Key("table");
    SchemaJson(t, &w);
    w.MemberUint("approximate_bytes", bytes);
    IdentityJson(store->identity(), &w);
    ClocksJson(*store, &w);
    w.EndObject();
    ctx.out << '\n';
    return Status::OK();
  }
  ctx.out << "table " << t.name << " (id " << t.id << ")\n" << SchemaText(t);
  ctx.out << AlignColumns({{"  approx size", BytesText(bytes) + " (" + std::to_string(bytes) +
                                                 " bytes, including memtables)"}});
  ctx.out << "store " << store->dir() << "\n"
          << AlignColumns({{"  identity", StoreIdentityText(*store)},
                           {"  shard clock", std::to_string(store->ShardClock())},
                           {"  applied", ClocksText(store->AppliedClocks())}});
  return Status::OK();
}

Status OfflineGet(const CtlContext& ctx, const Args& args) {
  OfflineSet set;
  RETURN_IF_ERROR(OpenOfflineSet(ctx.options, &set));
  ASSIGN_OR_RETURN(TableSchema t, FindTableOnAll(set, args[0]));
  const size_t n = set.shards.size();
  const ShardStore* store = set.shards[0];
  const ShardIdentity& id = store->identity();
  std::vector<uint64_t> rows(args.size() - 1);
  for (size_t i = 1; i < args.size(); ++i) {
    RETURN_IF_ERROR(ParseRow(args[i], &rows[i - 1]));
    if (n == 1) RETURN_IF_ERROR(CheckRowPlacement(t, rows[i - 1], id.shard_id, id.num_shards));
  }
  // Each row from the shard that owns it.
  std::vector<std::string> values(rows.size());
  std::vector<int> written(rows.size());
  // The job's clock: the least shard clock.
  Version clock = store->ShardClock();
  for (const ShardStore* s : set.shards) clock = std::min<Version>(clock, s->ShardClock());
  for (size_t i = 0; i < rows.size(); ++i) {
    const ShardStore* owner =
        n == 1 ? store : set.shards[ShardOf(t.id, rows[i], static_cast<uint32_t>(n))];
    RETURN_IF_ERROR(owner->Get(t.id, rows[i], &values[i]));
    ASSIGN_OR_RETURN(bool w, IsWritten(*owner, t.id, rows[i]));
    written[i] = w ? 1 : 0;
  }
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Member("table", t.name);
    w.MemberInt("shard_clock", clock);
    w.Key("rows");
    w.BeginArray();
    for (size_t i = 0; i < rows.size(); ++i) WriteRowJson(&w, t, rows[i], values[i], written[i]);
    w.EndArray();
    w.EndObject();
    ctx.out << '\n';
    return Status::OK();
  }
  for (size_t i = 0; i < rows.size(); ++i) WriteRowText(ctx, t, rows[i], values[i], written[i]);
  return Status::OK();
}

Status OfflineScan(const CtlContext& ctx, const Args& args) {
  std::unique_ptr<ShardStore> store;
  RETURN_IF_ERROR(OpenOffline(ctx.options, &store));
  ASSIGN_OR_RETURN(TableSchema t, FindOfflineTable(*store, args[0]));
  const uint64_t limit = ctx.options.limit;
  uint64_t listed = 0;
  bool truncated = false;
  uint64_t next_row = 0;
  std::unique_ptr<JsonWriter> w;
  if (ctx.options.json) {
    w = std::make_unique<JsonWriter>(&ctx.out);
    w->BeginObject();
    w->Member("table", t.name);
    w->MemberUint("start", ctx.options.start);
    w->MemberUint("limit", limit);
    w->Key("rows");
    w->BeginArray();
  }
  Status s = store->Scan(t.id, ctx.options.start, [&](uint64_t row, std::string_view value) {
    if (limit != 0 && listed == limit) {
      truncated = true;
      next_row = row;
      return false;
    }
    ++listed;
    if (w != nullptr) {
      WriteRowJson(w.get(), t, row, value, -1);
    } else {
      WriteRowText(ctx, t, row, value, -1);
    }
    return true;
  });
  if (w != nullptr) {
    // Close the document even on error so stdout stays well-formed JSON.
    w->EndArray();
    w->MemberUint("rows_listed", listed);
    w->MemberBool("truncated", truncated);
    if (truncated) w->MemberUint("next_row", next_row);
    w->EndObject();
    ctx.out << '\n';
  }
  RETURN_IF_ERROR(s);
  if (w == nullptr && truncated) {
    ctx.err << "pacectl: stopped after --limit=" << limit
            << " rows; continue with --start=" << next_row << "\n";
  }
  return Status::OK();
}

Status OfflineStats(const CtlContext& ctx, const Args&) {
  std::unique_ptr<ShardStore> store;
  RETURN_IF_ERROR(OpenOffline(ctx.options, &store));
  uint64_t disk_bytes = 0, keys = 0;
  RETURN_IF_ERROR(store->ApproximateSize(&disk_bytes, &keys));
  const std::vector<TableSchema> tables = store->ListTables();
  // This process's RocksDB memory reading the store (offline: pacectl's own
  // --block_cache_mb), as the shard's Stats counters name it.
  std::vector<std::pair<std::string, int64_t>> memory;
  for (const auto& [counter, property] : std::vector<std::pair<std::string, std::string>>{
           {"memory_block_cache_bytes", "rocksdb.block-cache-usage"},
           {"memory_block_cache_limit_bytes", "rocksdb.block-cache-capacity"},
           {"memory_memtables_bytes", "rocksdb.cur-size-all-mem-tables"},
           {"memory_table_readers_bytes", "rocksdb.estimate-table-readers-mem"}}) {
    uint64_t v = 0;
    if (store->GetIntProperty(property, &v)) memory.emplace_back(counter, static_cast<int64_t>(v));
  }
  std::vector<uint64_t> table_bytes(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    RETURN_IF_ERROR(store->ApproximateTableSize(tables[i].id, &table_bytes[i]));
  }
  ASSIGN_OR_RETURN(const std::string last_import, store->LastImport());
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Member("data_dir", store->dir());
    if (!last_import.empty()) w.Member("last_import", last_import);
    IdentityJson(store->identity(), &w);
    ClocksJson(*store, &w);
    w.MemberUint("approximate_row_bytes", disk_bytes);
    w.MemberUint("estimated_keys", keys);
    w.Key("memory");
    w.BeginObject();
    for (const auto& [name, value] : memory) w.MemberInt(name, value);
    w.EndObject();
    w.Key("tables");
    w.BeginArray();
    for (size_t i = 0; i < tables.size(); ++i) {
      w.BeginObject();
      w.Member("name", tables[i].name);
      w.MemberUint("id", tables[i].id);
      w.MemberUint("approximate_bytes", table_bytes[i]);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    ctx.out << '\n';
    return Status::OK();
  }
  std::vector<std::vector<std::string>> rows = {
      {"data dir", store->dir()},
      {"format", std::to_string(store->identity().format_version)},
      {"identity", StoreIdentityText(*store)},
      {"shard clock", std::to_string(store->ShardClock())},
      {"applied", ClocksText(store->AppliedClocks())},
      {"row data", "~" + BytesText(disk_bytes) + " (" + std::to_string(disk_bytes) + ")"},
      {"keys", "~" + std::to_string(keys) + " (RocksDB estimate, all key spaces)"},
      {"tables", std::to_string(tables.size())},
  };
  for (size_t i = 0; i < tables.size(); ++i) {
    rows.push_back({"  " + tables[i].name,
                    "~" + BytesText(table_bytes[i]) + " (" + std::to_string(table_bytes[i]) + ")"});
  }
  if (!last_import.empty()) rows.push_back({"last import", last_import});
  rows.push_back({"memory", "(this process reading the store: used / bound)"});
  for (auto& l : MemoryRows(memory, "  ")) rows.push_back(l);
  ctx.out << AlignColumns(rows);
  return Status::OK();
}

}  // namespace pace::ctl
