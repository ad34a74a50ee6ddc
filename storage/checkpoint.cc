#include "storage/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "common/replace_file.h"

namespace pace {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kChecksumPrefix = "checksum=fnv1a64:";
constexpr size_t kMaxManifestBytes = 64 << 20;
constexpr const char* kStagingSuffix = ".partial";

uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string Double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

Status Bad(const std::string& what) { return Status::Corruption("checkpoint manifest: " + what); }

template <typename T>
Status ParseNumber(std::string_view s, std::string_view field, T* out) {
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) {
    return Bad("field '" + std::string(field) + "' has bad number '" + std::string(s) + "'");
  }
  *out = v;
  return Status::OK();
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.push_back(
        s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string EncodeTable(const TableSchema& t) {
  return "id:" + std::to_string(t.id) + " name:" + t.name +
         " kind:" + std::string(RowKindName(t.kind)) +
         " type:" + std::string(ElementTypeName(t.type)) + " width:" + std::to_string(t.width) +
         " consistency:" + std::string(ConsistencyName(t.consistency)) +
         " staleness:" + std::to_string(t.staleness) +
         " init:" + std::string(InitKindName(t.init.kind)) + " a:" + Double(t.init.a) +
         " b:" + Double(t.init.b) + " seed:" + std::to_string(t.init.seed) +
         (t.value_bound != 0 ? " value_bound:" + Double(t.value_bound) : std::string());
}

Status ParseTable(std::string_view line, TableSchema* t) {
  std::map<std::string_view, std::string_view> f;
  for (std::string_view tok : Split(line, ' ')) {
    size_t colon = tok.find(':');
    if (colon == std::string_view::npos) return Bad("table field '" + std::string(tok) + "'");
    if (!f.emplace(tok.substr(0, colon), tok.substr(colon + 1)).second) {
      return Bad("duplicate table field '" + std::string(tok.substr(0, colon)) + "'");
    }
  }
  for (const char* k : {"id", "name", "kind", "type", "width", "consistency", "staleness", "init",
                        "a", "b", "seed"}) {
    if (f.count(k) == 0) return Bad("table line lacks field '" + std::string(k) + "'");
  }
  TableSchema v;
  RETURN_IF_ERROR(ParseNumber(f["id"], "id", &v.id));
  v.name = std::string(f["name"]);
  Status s = ParseRowKind(f["kind"], &v.kind);
  if (s.ok()) s = ParseElementType(f["type"], &v.type);
  if (s.ok()) s = ParseConsistency(f["consistency"], &v.consistency);
  if (s.ok()) s = ParseInitKind(f["init"], &v.init.kind);
  if (!s.ok()) return Bad(s.message());
  RETURN_IF_ERROR(ParseNumber(f["width"], "width", &v.width));
  RETURN_IF_ERROR(ParseNumber(f["staleness"], "staleness", &v.staleness));
  RETURN_IF_ERROR(ParseNumber(f["a"], "a", &v.init.a));
  RETURN_IF_ERROR(ParseNumber(f["b"], "b", &v.init.b));
  RETURN_IF_ERROR(ParseNumber(f["seed"], "seed", &v.init.seed));
  // Written for vap tables only; an older manifest has none.
  if (f.count("value_bound") != 0) {
    RETURN_IF_ERROR(ParseNumber(f["value_bound"], "value_bound", &v.value_bound));
  }
  s = ValidateSchema(v);
  if (!s.ok()) return Bad("invalid table: " + s.message());
  if (v.id == 0) return Bad("table '" + v.name + "' has id 0");
  *t = std::move(v);
  return Status::OK();
}

Status Errno(const std::string& what) {
  return Status::IOError(what + ": " + std::strerror(errno));
}

Status FsError(const std::error_code& ec, const std::string& what) {
  return Status::IOError(what + ": " + ec.message());
}

}  // namespace

std::string EncodeCheckpointManifest(const CheckpointManifest& m) {
  std::string out(kCheckpointManifestMagic);
  out += "\n";
  auto add = [&out](std::string_view k, const std::string& v) {
    out.append(k);
    out += "=";
    out += v;
    out += "\n";
  };
  add("format_version", std::to_string(m.format_version));
  add("shard_id", std::to_string(m.identity.shard_id));
  add("num_shards", std::to_string(m.identity.num_shards));
  add("num_clients", std::to_string(m.identity.num_clients));
  add("created_unix_ms", std::to_string(m.created_unix_ms));
  add("shard_clock", std::to_string(m.shard_clock));
  std::string clocks;
  for (size_t i = 0; i < m.applied_clocks.size(); ++i) {
    if (i > 0) clocks += ",";
    clocks += std::to_string(m.applied_clocks[i]);
  }
  add("applied_clocks", clocks);
  add("table_count", std::to_string(m.tables.size()));
  for (const TableSchema& t : m.tables) add("table", EncodeTable(t));
  std::string checksum = Hex64(Fnv1a64(out));
  out.append(kChecksumPrefix);
  out += checksum;
  out += "\n";
  return out;
}

Status ParseCheckpointManifest(std::string_view text, CheckpointManifest* m) {
  if (text.empty() || text.back() != '\n') return Bad("truncated (no final newline)");
  std::string_view body = text.substr(0, text.size() - 1);
  size_t last_nl = body.rfind('\n');
  if (last_nl == std::string_view::npos) return Bad("has no checksum line");
  std::string_view checksum_line = body.substr(last_nl + 1);
  body = text.substr(0, last_nl + 1);
  if (checksum_line.substr(0, kChecksumPrefix.size()) != kChecksumPrefix) {
    return Bad("last line is not its checksum");
  }
  if (checksum_line.substr(kChecksumPrefix.size()) != Hex64(Fnv1a64(body))) {
    return Bad("checksum mismatch (the file was modified or damaged)");
  }
  std::vector<std::string_view> lines = Split(body.substr(0, body.size() - 1), '\n');
  if (lines.empty() || lines[0] != kCheckpointManifestMagic) {
    return Bad("first line is not '" + std::string(kCheckpointManifestMagic) + "'");
  }
  std::map<std::string_view, std::string_view> fields;
  CheckpointManifest v;
  for (size_t i = 1; i < lines.size(); ++i) {
    size_t eq = lines[i].find('=');
    if (eq == std::string_view::npos) return Bad("line " + std::to_string(i + 1) + " has no '='");
    std::string_view key = lines[i].substr(0, eq);
    std::string_view value = lines[i].substr(eq + 1);
    if (key == "table") {
      TableSchema t;
      RETURN_IF_ERROR(ParseTable(value, &t));
      v.tables.push_back(std::move(t));
    } else if (!fields.emplace(key, value).second) {
      return Bad("duplicate field '" + std::string(key) + "'");
    }
    // Unknown fields are ignored: later manifests may append fields.
  }
  for (const char* k : {"format_version", "shard_id", "num_shards", "num_clients",
                        "created_unix_ms", "shard_clock", "applied_clocks", "table_count"}) {
    if (fields.count(k) == 0) return Bad("missing field '" + std::string(k) + "'");
  }
  RETURN_IF_ERROR(ParseNumber(fields["format_version"], "format_version", &v.format_version));
  if (v.format_version < kOldestStorageFormatVersion || v.format_version > kStorageFormatVersion) {
    return Status::Incompatible("checkpoint has storage format version " +
                                std::to_string(v.format_version) + "; this build reads versions " +
                                std::to_string(kOldestStorageFormatVersion) + " to " +
                                std::to_string(kStorageFormatVersion));
  }
  v.identity.format_version = v.format_version;
  RETURN_IF_ERROR(ParseNumber(fields["shard_id"], "shard_id", &v.identity.shard_id));
  RETURN_IF_ERROR(ParseNumber(fields["num_shards"], "num_shards", &v.identity.num_shards));
  RETURN_IF_ERROR(ParseNumber(fields["num_clients"], "num_clients", &v.identity.num_clients));
  RETURN_IF_ERROR(ParseNumber(fields["created_unix_ms"], "created_unix_ms", &v.created_unix_ms));
  RETURN_IF_ERROR(ParseNumber(fields["shard_clock"], "shard_clock", &v.shard_clock));
  if (v.identity.num_shards == 0 || v.identity.shard_id >= v.identity.num_shards ||
      v.identity.num_clients == 0) {
    return Bad("invalid identity");
  }
  for (std::string_view c : Split(fields["applied_clocks"], ',')) {
    ClockT clock;
    RETURN_IF_ERROR(ParseNumber(c, "applied_clocks", &clock));
    if (clock < 0) return Bad("negative applied clock");
    v.applied_clocks.push_back(clock);
  }
  if (v.applied_clocks.size() != v.identity.num_clients) {
    return Bad(std::to_string(v.applied_clocks.size()) + " applied clocks for " +
               std::to_string(v.identity.num_clients) + " clients");
  }
  if (v.shard_clock != *std::min_element(v.applied_clocks.begin(), v.applied_clocks.end())) {
    return Bad("shard_clock is not the minimum of the applied clocks");
  }
  size_t table_count;
  RETURN_IF_ERROR(ParseNumber(fields["table_count"], "table_count", &table_count));
  if (table_count != v.tables.size()) {
    return Bad("table_count " + std::to_string(table_count) + " but " +
               std::to_string(v.tables.size()) + " table lines");
  }
  std::set<uint32_t> ids;
  std::set<std::string> names;
  for (const TableSchema& t : v.tables) {
    if (!ids.insert(t.id).second || !names.insert(t.name).second) {
      return Bad("duplicate table id or name: " + t.name);
    }
  }
  *m = std::move(v);
  return Status::OK();
}

Status WriteCheckpointManifest(const std::string& dir, const CheckpointManifest& m) {
  return ReplaceFile(dir + "/" + kCheckpointManifestName, EncodeCheckpointManifest(m),
                     FileSync::kDurable);
}

Status ReadCheckpointManifestFile(const std::string& dir, CheckpointManifest* m) {
  std::string path = dir + "/" + kCheckpointManifestName;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    if (errno == ENOENT) return Status::NotFound("no checkpoint manifest " + path);
    return Errno("open " + path);
  }
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
    text.append(buf, n);
    if (text.size() > kMaxManifestBytes) {
      std::fclose(f);
      return Bad(path + " is larger than " + std::to_string(kMaxManifestBytes) + " bytes");
    }
  }
  bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return Status::IOError("read " + path + " failed");
  return ParseCheckpointManifest(text, m).WithPrefix(path);
}

std::string CheckpointStagingDir(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d + kStagingSuffix;
}

bool IsCheckpointStagingName(const std::string& name) {
  const std::string_view suffix = kStagingSuffix;
  return name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Status PublishCheckpointDir(const std::string& staging, const std::string& dir) {
  if (::rename(staging.c_str(), dir.c_str()) != 0) return Errno("rename " + staging + " to " + dir);
  std::string parent = fs::path(CheckpointStagingDir(dir)).parent_path().string();
  return SyncDir(parent.empty() ? "." : parent);
}

Status CheckpointDirExists(const std::string& dir) {
  CheckpointManifest m;
  Status s = ReadCheckpointManifestFile(dir, &m);
  if (s.IsNotFound()) {
    return Status::AlreadyExists("checkpoint dir " + dir +
                                 " exists and holds no checkpoint manifest: move it away or "
                                 "choose another directory");
  }
  return Status::AlreadyExists("checkpoint dir " + dir + " exists (a checkpoint at shard clock " +
                               (s.ok() ? std::to_string(m.shard_clock) : std::string("?")) + ")");
}

Status CheckpointDiskUsage(const std::string& dir, CheckpointUsage* usage) {
  CheckpointUsage u;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    u.bytes += static_cast<uint64_t>(st.st_size);
    if (st.st_nlink == 1) u.exclusive_bytes += static_cast<uint64_t>(st.st_size);
  }
  if (ec) return FsError(ec, "list " + dir);
  *usage = u;
  return Status::OK();
}

Status CopyCheckpointFiles(const std::string& checkpoint_dir, const std::string& data_dir) {
  std::error_code ec;
  if (fs::exists(data_dir, ec)) {
    if (!fs::is_directory(data_dir, ec) || !fs::is_empty(data_dir, ec)) {
      return Status::AlreadyExists("restore target " + data_dir +
                                   " exists and is not an empty directory");
    }
  }
  std::string tmp = data_dir + ".restore-tmp";
  fs::remove_all(tmp, ec);
  if (!fs::create_directories(tmp, ec)) return FsError(ec, "create " + tmp);
  fs::directory_iterator it(checkpoint_dir, ec);
  if (ec) return FsError(ec, "list " + checkpoint_dir);
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return FsError(ec, "list " + checkpoint_dir);
    const fs::path& src = it->path();
    std::string name = src.filename().string();
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec) || name.rfind(kCheckpointManifestName, 0) == 0 ||
        name == "LOCK" || name.rfind("LOG", 0) == 0) {
      continue;
    }
    std::string dst = tmp + "/" + name;
    bool is_sst = name.size() > 4 && name.compare(name.size() - 4, 4, ".sst") == 0;
    if (is_sst) {
      std::error_code link_ec;
      fs::create_hard_link(src, dst, link_ec);
      if (!link_ec) continue;
    }
    if (!fs::copy_file(src, dst, ec)) return FsError(ec, "copy " + src.string());
    RETURN_IF_ERROR(SyncFile(dst));
  }
  if (ec) return FsError(ec, "list " + checkpoint_dir);
  RETURN_IF_ERROR(SyncDir(tmp));
  fs::remove(data_dir, ec);  // an empty directory, if any
  fs::rename(tmp, data_dir, ec);
  if (ec) return FsError(ec, "rename " + tmp + " to " + data_dir);
  std::string parent = fs::path(data_dir).parent_path().string();
  return SyncDir(parent.empty() ? "." : parent);
}

}  // namespace pace
