// pacectl checkpoint create|list|restore.
#include <algorithm>
#include <filesystem>

#include "storage/checkpoint.h"
#include "storage/reshard.h"
#include "tools/ctl/commands.h"
#include "tools/ctl/json_writer.h"
#include "tools/ctl/value_format.h"

namespace pace::ctl {

namespace fs = std::filesystem;

namespace {

std::string TableNames(const std::vector<TableSchema>& tables) {
  std::string names;
  for (const TableSchema& t : tables) {
    if (!names.empty()) names += ",";
    names += t.name;
  }
  return names.empty() ? "-" : names;
}

void ManifestJsonMembers(const CheckpointManifest& m, JsonWriter* w) {
  w->MemberUint("format_version", m.format_version);
  w->MemberUint("shard_id", m.identity.shard_id);
  w->MemberUint("num_shards", m.identity.num_shards);
  w->MemberUint("num_clients", m.identity.num_clients);
  w->MemberInt("shard_clock", m.shard_clock);
  w->Key("applied_clocks");
  w->BeginArray();
  for (ClockT c : m.applied_clocks) w->Int(c);
  w->EndArray();
  w->Key("tables");
  w->BeginArray();
  for (const TableSchema& t : m.tables) w->String(t.name);
  w->EndArray();
  w->MemberInt("created_unix_ms", m.created_unix_ms);
  w->Member("created", UnixMsText(m.created_unix_ms));
}

struct ListEntry {
  std::string path;
  Status status;  // of reading the manifest
  CheckpointManifest manifest;
  CheckpointUsage usage;
};

}  // namespace

Status CheckpointCreate(const CtlContext& ctx, const Args& args) {
  const std::string& dir = args[0];
  ShardStoreOptions o;
  o.read_only = false;
  o.create_if_missing = false;
  o.check_identity = false;
  o.block_cache_mb = ctx.options.block_cache_mb;
  std::unique_ptr<ShardStore> store;
  Status s = ShardStore::Open(o, ctx.options.data_dir, &store);
  if (s.code() == StatusCode::kFailedPrecondition) {
    // The store is in use (ShardStore::Open names the holder).
    return Status::FailedPrecondition(
        s.message() + "; a running paced writes checkpoints itself with --checkpoint_every=K");
  }
  RETURN_IF_ERROR(s);
  const fs::path parent = fs::path(dir).parent_path();
  std::error_code ec;
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec) return Status::IOError("create " + parent.string() + ": " + ec.message());
  }
  RETURN_IF_ERROR(store->CreateCheckpoint(dir));
  CheckpointManifest m;
  RETURN_IF_ERROR(ShardStore::ReadCheckpointManifest(dir, &m));
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Member("checkpoint", dir);
    w.Member("data_dir", ctx.options.data_dir);
    ManifestJsonMembers(m, &w);
    w.EndObject();
    ctx.out << '\n';
    return Status::OK();
  }
  ctx.out << "checkpoint of " << ctx.options.data_dir << " written to " << dir << ": shard clock "
          << m.shard_clock << ", " << m.tables.size() << " table(s) (" << TableNames(m.tables)
          << ")\n";
  return Status::OK();
}

Status CheckpointList(const CtlContext& ctx, const Args& args) {
  std::string dir;
  if (!args.empty()) {
    dir = args[0];
  } else if (!ctx.options.data_dir.empty()) {
    dir = (fs::path(ctx.options.data_dir) / "checkpoints").string();
  } else {
    return Status::InvalidArgument(
        "checkpoint list needs a directory: pacectl checkpoint list DIR (or --data_dir=D for "
        "D/checkpoints, where paced --checkpoint_every writes them)");
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::NotFound("no directory " + dir);
  std::vector<std::string> candidates = {dir};
  // increment(ec), not a range-for: its increment throws.
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) candidates.push_back(it->path().string());
  }
  if (ec) return Status::IOError("list " + dir + ": " + ec.message());
  std::sort(candidates.begin() + 1, candidates.end());
  std::vector<ListEntry> entries;
  bool corrupt = false;
  for (const std::string& c : candidates) {
    ListEntry e;
    e.path = c;
    e.status = ShardStore::ReadCheckpointManifest(c, &e.manifest);
    if (e.status.IsNotFound()) continue;  // not a checkpoint
    if (e.status.ok()) e.status = CheckpointDiskUsage(c, &e.usage);
    corrupt = corrupt || e.status.code() == StatusCode::kCorruption;
    entries.push_back(std::move(e));
  }
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Member("dir", dir);
    w.Key("checkpoints");
    w.BeginArray();
    for (const ListEntry& e : entries) {
      w.BeginObject();
      w.Member("path", e.path);
      w.MemberBool("ok", e.status.ok());
      if (e.status.ok()) {
        ManifestJsonMembers(e.manifest, &w);
        w.MemberUint("bytes", e.usage.bytes);
        w.MemberUint("exclusive_bytes", e.usage.exclusive_bytes);
      } else {
        w.Member("error", e.status.ToString());
      }
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    ctx.out << '\n';
  } else if (entries.empty()) {
    ctx.out << "no checkpoints under " << dir << "\n";
  } else {
    std::vector<std::vector<std::string>> rows = {
        {"checkpoint", "shard", "shard_clock", "size", "own", "tables", "created"}};
    CheckpointUsage total;
    for (const ListEntry& e : entries) {
      if (!e.status.ok()) {
        rows.push_back({e.path, "-", "-", "-", "-", "-", "ERROR " + e.status.ToString()});
        continue;
      }
      const CheckpointManifest& m = e.manifest;
      total.bytes += e.usage.bytes;
      total.exclusive_bytes += e.usage.exclusive_bytes;
      rows.push_back(
          {e.path,
           std::to_string(m.identity.shard_id) + "/" + std::to_string(m.identity.num_shards),
           std::to_string(m.shard_clock), BytesText(e.usage.bytes),
           BytesText(e.usage.exclusive_bytes), TableNames(m.tables),
           UnixMsText(m.created_unix_ms)});
    }
    ctx.out << AlignColumns(rows);
    ctx.out << entries.size() << " checkpoint(s): " << BytesText(total.bytes) << " in files, "
            << BytesText(total.exclusive_bytes)
            << " not shared with the store or another checkpoint (freed by deleting them)\n";
  }
  for (const ListEntry& e : entries) {
    if (!e.status.ok()) {
      if (corrupt) return Status::Corruption("bad checkpoint manifest in " + e.path);
      return e.status.WithPrefix(e.path);
    }
  }
  return Status::OK();
}

namespace {

// checkpoint restore CKPT,CKPT,... --num_shards=M --out=DIR.
Status CheckpointReshard(const CtlContext& ctx, const Args& args) {
  if (ctx.options.num_shards == 0) return Status::InvalidArgument("--num_shards must be >= 1");
  if (ctx.options.out.empty()) {
    return Status::InvalidArgument(
        "checkpoint restore --num_shards=M needs --out=DIR (where the new shards' data dirs go)");
  }
  std::vector<std::string> checkpoints;
  for (const std::string& a : args) {
    for (const std::string& c : SplitList(a)) checkpoints.push_back(c);
  }
  ReshardOptions o;
  o.num_shards = ctx.options.num_shards;
  o.block_cache_mb = ctx.options.block_cache_mb;
  ReshardResult r;
  RETURN_IF_ERROR(ReshardCheckpoints(checkpoints, ctx.options.out, o, &r));
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Member("out", ctx.options.out);
    w.MemberUint("source_shards", r.source_shards);
    w.MemberUint("num_shards", r.shard_dirs.size());
    w.MemberUint("num_clients", r.num_clients);
    w.MemberInt("shard_clock", r.shard_clock);
    w.Member("job", r.job);
    w.MemberUint("rows", r.rows);
    w.MemberUint("bytes", r.bytes);
    w.Key("shards");
    w.BeginArray();
    for (size_t j = 0; j < r.shard_dirs.size(); ++j) {
      w.BeginObject();
      w.MemberUint("shard", j);
      w.Member("data_dir", r.shard_dirs[j]);
      w.MemberUint("rows", r.shard_rows[j]);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    ctx.out << '\n';
    return Status::OK();
  }
  ctx.out << "re-sharded " << r.source_shards << " shard checkpoint(s) at shard clock "
          << r.shard_clock << " (" << r.tables.size() << " table(s), " << r.rows << " rows) onto "
          << r.shard_dirs.size() << " shard(s) in " << ctx.options.out << "\n";
  const std::string m = std::to_string(r.shard_dirs.size());
  for (size_t j = 0; j < r.shard_dirs.size(); ++j) {
    ctx.out << "  shard " << j << ": " << r.shard_rows[j]
            << " rows; start paced --data_dir=" << r.shard_dirs[j] << " --shard=" << j
            << " --num_shards=" << m << " --num_clients=" << r.num_clients << "\n";
  }
  ctx.out << "then resume the clients with --resume and --servers listing the " << m << " shards\n";
  return Status::OK();
}

}  // namespace

Status CheckpointRestore(const CtlContext& ctx, const Args& args) {
  if (ctx.options.set_flags.count("num_shards") != 0) return CheckpointReshard(ctx, args);
  if (ctx.options.set_flags.count("out") != 0) {
    return Status::InvalidArgument(
        "--out goes with --num_shards=M (re-shard); a plain restore takes --data_dir=NEWDIR");
  }
  if (args.size() > 1 || SplitList(args[0]).size() > 1) {
    return Status::InvalidArgument(
        "one checkpoint is restored into --data_dir=NEWDIR; the checkpoints of several shards "
        "are restored together only with --num_shards=M --out=DIR (re-shard)");
  }
  const std::string& checkpoint = args[0];
  CheckpointManifest m;
  RETURN_IF_ERROR(ShardStore::ReadCheckpointManifest(checkpoint, &m));
  RETURN_IF_ERROR(ShardStore::RestoreCheckpoint(checkpoint, ctx.options.data_dir));
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Member("checkpoint", checkpoint);
    w.Member("data_dir", ctx.options.data_dir);
    ManifestJsonMembers(m, &w);
    w.EndObject();
    ctx.out << '\n';
    return Status::OK();
  }
  ctx.out << "restored checkpoint " << checkpoint << " (shard clock " << m.shard_clock << ", "
          << m.tables.size() << " table(s)) into " << ctx.options.data_dir
          << "; start paced with --data_dir=" << ctx.options.data_dir
          << " --shard=" << m.identity.shard_id << " --num_shards=" << m.identity.num_shards
          << " --num_clients=" << m.identity.num_clients << "\n";
  return Status::OK();
}

}  // namespace pace::ctl
