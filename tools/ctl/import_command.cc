// pacectl import NAME FILE.npy|FILE.csv (offline): creates or fills a dense
// table from an array, as one atomic batch per shard (ShardStore::ImportBatch)
// recorded with the shard clock it was made at; all or nothing over the
// shards through the markers of common/import_marker.h.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>

#include "common/element.h"
#include "common/hash.h"
#include "common/import_marker.h"
#include "common/row.h"
#include "tools/ctl/commands.h"
#include "tools/ctl/export.h"
#include "tools/ctl/json_writer.h"

namespace pace::ctl {

namespace {

// An array read from a file: rows[i] holds the row ids, data the elements
// (row i at data[i * width * elem]).
struct InputArray {
  ElementType type = ElementType::kF32;
  bool typed = false;  // the file names its type (npy); csv takes the table's
  uint32_t width = 0;
  std::vector<uint64_t> rows;
  std::string data;
};

std::string ArrayText(const InputArray& a) {
  return std::to_string(a.rows.size()) + " rows of " +
         (a.typed ? std::string(ElementTypeName(a.type)) + " x " : "width ") +
         std::to_string(a.width);
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The value of 'key' in an npy header dict ("'descr': '<f4', ..."), raw.
std::string DictValue(const std::string& dict, const std::string& key) {
  const size_t k = dict.find("'" + key + "'");
  if (k == std::string::npos) return "";
  size_t v = dict.find(':', k);
  if (v == std::string::npos) return "";
  ++v;
  while (v < dict.size() && dict[v] == ' ') ++v;
  size_t end = v;
  if (end < dict.size() && dict[end] == '(') {
    end = dict.find(')', end);
    return end == std::string::npos ? "" : dict.substr(v, end - v + 1);
  }
  while (end < dict.size() && dict[end] != ',' && dict[end] != '}') ++end;
  std::string out = dict.substr(v, end - v);
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (out.size() >= 2 && out.front() == '\'' && out.back() == '\'')
    out = out.substr(1, out.size() - 2);
  return out;
}

Status ReadNpy(const std::string& path, InputArray* a) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + path);
  auto bad = [&](const std::string& why) { return Status::InvalidArgument(path + ": " + why); };
  char pre[10];
  if (!in.read(pre, 8) || std::memcmp(pre, "\x93NUMPY", 6) != 0) return bad("not an npy file");
  size_t header_len = 0;
  if (pre[6] == 1) {
    if (!in.read(pre + 8, 2)) return bad("truncated header");
    header_len = static_cast<uint8_t>(pre[8]) | static_cast<size_t>(static_cast<uint8_t>(pre[9]))
                                                    << 8;
  } else if (pre[6] == 2 || pre[6] == 3) {
    unsigned char n[4];
    if (!in.read(reinterpret_cast<char*>(n), 4)) return bad("truncated header");
    header_len = n[0] | n[1] << 8 | n[2] << 16 | static_cast<size_t>(n[3]) << 24;
  } else {
    return bad("npy format version " + std::to_string(pre[6]) + " is not supported");
  }
  if (header_len > (1u << 20)) return bad("header too large");
  std::string dict(header_len, '\0');
  if (!in.read(dict.data(), static_cast<std::streamsize>(header_len)))
    return bad("truncated header");
  const std::string descr = DictValue(dict, "descr");
  if (descr == "<f4") {
    a->type = ElementType::kF32;
  } else if (descr == "<f8") {
    a->type = ElementType::kF64;
  } else if (descr == "<i4") {
    a->type = ElementType::kI32;
  } else if (descr == "<i8") {
    a->type = ElementType::kI64;
  } else {
    return bad("dtype '" + descr +
               "' is not supported (float32, float64, int32, int64, little-endian)");
  }
  a->typed = true;
  if (DictValue(dict, "fortran_order") != "False") {
    return bad("Fortran-order arrays are not supported (save with numpy.ascontiguousarray)");
  }
  const std::string shape = DictValue(dict, "shape");
  uint64_t dims[2] = {0, 1};
  int ndim = 0;
  for (size_t i = 1; i < shape.size() && ndim <= 2;) {
    while (i < shape.size() && (shape[i] == ' ' || shape[i] == ',')) ++i;
    if (i >= shape.size() || shape[i] == ')') break;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(shape.c_str() + i, &end, 10);
    if (end == shape.c_str() + i) return bad("cannot read shape " + shape);
    if (ndim < 2) dims[ndim] = v;
    ++ndim;
    i = static_cast<size_t>(end - shape.c_str());
  }
  if (ndim < 1 || ndim > 2) return bad("shape " + shape + " is not 1-D or 2-D");
  if (dims[1] == 0 || dims[1] > kMaxDenseWidth) {
    return bad("rows of " + std::to_string(dims[1]) + " elements do not fit a dense table");
  }
  a->width = static_cast<uint32_t>(dims[1]);
  const uint64_t bytes = dims[0] * dims[1] * ElementSize(a->type);
  a->data.resize(bytes);
  if (!in.read(a->data.data(), static_cast<std::streamsize>(bytes))) {
    return bad("holds less data than its shape " + shape + " needs");
  }
  a->rows.resize(dims[0]);
  for (uint64_t r = 0; r < dims[0]; ++r) a->rows[r] = r;
  return Status::OK();
}

// Parses one CSV field as an element of type t into out.
bool ParseElement(ElementType t, const std::string& field, char* out) {
  const char* s = field.c_str();
  char* end = nullptr;
  errno = 0;
  switch (t) {
    case ElementType::kF32: {
      const float v = std::strtof(s, &end);
      std::memcpy(out, &v, 4);
      break;
    }
    case ElementType::kF64: {
      const double v = std::strtod(s, &end);
      std::memcpy(out, &v, 8);
      break;
    }
    case ElementType::kI32: {
      const long long v = std::strtoll(s, &end, 10);
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        return false;
      const int32_t x = static_cast<int32_t>(v);
      std::memcpy(out, &x, 4);
      break;
    }
    case ElementType::kI64: {
      const int64_t v = std::strtoll(s, &end, 10);
      std::memcpy(out, &v, 8);
      break;
    }
  }
  return end != s && *end == '\0' && errno != ERANGE;
}

// CSV as pacectl export writes it: an optional header "row,c0,...", then
// "ROW,V0,...,VW-1" per row. Elements are parsed as `type`.
Status ReadCsv(const std::string& path, ElementType type, InputArray* a) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read " + path);
  a->type = type;
  std::string line, field;
  std::vector<std::string> fields;
  const size_t elem = ElementSize(type);
  for (uint64_t lineno = 1; std::getline(in, line); ++lineno) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    fields.clear();
    std::stringstream ss(line);
    while (std::getline(ss, field, ',')) fields.push_back(field);
    const std::string where = path + ":" + std::to_string(lineno) + ": ";
    if (lineno == 1 && fields[0] == "row") {
      if (fields.size() == 3 && fields[1] == "col") {
        return Status::InvalidArgument(where +
                                       "row,col,value triples (a sparse table) cannot be "
                                       "imported; import dense rows");
      }
      continue;  // the header
    }
    if (fields.size() < 2) return Status::InvalidArgument(where + "expected ROW,V0,...");
    const uint32_t width = static_cast<uint32_t>(fields.size() - 1);
    if (a->width == 0) a->width = width;
    if (width != a->width) {
      return Status::InvalidArgument(where + std::to_string(width) +
                                     " values, but earlier lines have " + std::to_string(a->width));
    }
    uint64_t row = 0;
    RETURN_IF_ERROR(ParseRow(fields[0], &row).WithPrefix(where));
    if (!a->rows.empty() && row <= a->rows.back()) {
      return Status::InvalidArgument(where + "row " + fields[0] +
                                     " is not after the previous row (rows must increase)");
    }
    a->rows.push_back(row);
    const size_t at = a->data.size();
    a->data.resize(at + width * elem);
    for (uint32_t c = 0; c < width; ++c) {
      if (!ParseElement(type, fields[c + 1], &a->data[at + c * elem])) {
        return Status::InvalidArgument(where + "value " + std::to_string(c) + " '" + fields[c + 1] +
                                       "' is not a " + std::string(ElementTypeName(type)));
      }
    }
  }
  if (a->rows.empty()) return Status::InvalidArgument(path + ": no rows");
  return Status::OK();
}

// out = want - have, element by element (integers wrap), so have + out ==
// want exactly for integers and for floats where have is zero.
void Difference(ElementType t, const char* want, const char* have, size_t n, char* out) {
  VisitElementType(t, [&](auto zero) {
    using T = decltype(zero);
    for (size_t i = 0; i < n; ++i) {
      const T w = LoadElement<T>(want, i), h = LoadElement<T>(have, i);
      if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        StoreElement<T>(out, i, static_cast<T>(static_cast<U>(w) - static_cast<U>(h)));
      } else {
        StoreElement<T>(out, i, w - h);
      }
    }
  });
}

// With PACE_TEST_IMPORT_STOP_AT set (tests that SIGKILL an import at a known
// point), prints each stage to stderr and, at the stage named there, waits a
// minute for the kill.
void TEST_ImportStage(const char* stage) {
  const char* stop_at = std::getenv("PACE_TEST_IMPORT_STOP_AT");
  if (stop_at == nullptr) return;
  std::fprintf(stderr, "pacectl: import stage: %s\n", stage);
  std::fflush(stderr);
  if (std::strcmp(stop_at, stage) == 0) std::this_thread::sleep_for(std::chrono::minutes(1));
}

// Opens every --data_dir for writing; (*stores)[k] is shard k (also in set).
Status OpenWritable(const CtlOptions& options, OfflineSet* set, std::vector<ShardStore*>* stores) {
  const std::vector<std::string> dirs = SplitList(options.data_dir);
  for (const std::string& dir : dirs) {
    ShardStoreOptions o;
    o.check_identity = false;
    o.create_if_missing = false;
    o.block_cache_mb = options.block_cache_mb;
    o.sync = true;  // the markers go once every shard's batch is on disk
    std::unique_ptr<ShardStore> store;
    Status s = ShardStore::Open(o, dir, &store);
    if (s.IsNotFound()) return Status::NotFound(dir + " holds no store: " + s.message());
    RETURN_IF_ERROR(s);
    set->owned.push_back(std::move(store));
  }
  const size_t n = set->owned.size();
  set->shards.assign(n, nullptr);
  stores->assign(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    const ShardIdentity& id = set->owned[i]->identity();
    if (id.num_shards != n || set->shards[id.shard_id] != nullptr) {
      return Status::InvalidArgument(dirs[i] + " is shard " + std::to_string(id.shard_id) + " of " +
                                     std::to_string(id.num_shards) +
                                     ": import needs every shard of the job, once each (" +
                                     "--data_dir=A,B,...)");
    }
    set->shards[id.shard_id] = set->owned[i].get();
    (*stores)[id.shard_id] = set->owned[i].get();
  }
  return Status::OK();
}

// The table to import into: the existing one if its schema fits the array,
// else a new dense table with one id on every shard. *missing: the shards
// that lack it and must create it: all for a new table, some when an earlier
// import was stopped between the shards' CreateTable (its markers say so;
// without them shards that disagree are an error). Writes nothing.
Status PlanTable(const std::vector<ShardStore*>& stores, const std::string& name,
                 const std::string& path, const InputArray* a, TableSchema* table, bool* created,
                 std::vector<ShardStore*>* missing) {
  std::optional<TableSchema> found;
  bool interrupted = false;
  for (ShardStore* s : stores) {
    StatusOr<TableSchema> t = s->FindTable(name);
    if (!t.ok() && !t.status().IsNotFound()) return t.status();
    if (!t.ok()) {
      missing->push_back(s);
    } else if (!found.has_value()) {
      found = *t;
    } else if (t->id != found->id || t->kind != found->kind || t->type != found->type ||
               t->width != found->width) {
      return Status::InvalidArgument("table '" + name + "' differs between the shards");
    }
    interrupted |= !CheckImportComplete(s->dir()).ok();
  }
  *created = !found.has_value();
  if (found.has_value()) {
    if (!missing->empty() && !interrupted) {
      return Status::InvalidArgument(
          "table '" + name + "' exists on some shards but not on shard " +
          std::to_string(missing->front()->identity().shard_id) + ": the shards disagree");
    }
    const TableSchema& t = *found;
    if (t.kind != RowKind::kDense || (a->typed && a->type != t.type) || a->width != t.width) {
      return Status::InvalidArgument(
          path + " holds " + ArrayText(*a) + ", but table '" + name + "' is " +
          std::string(RowKindName(t.kind)) + " " + std::string(ElementTypeName(t.type)) + " x " +
          std::to_string(t.width) + ": nothing imported (import into a new table name, or " +
          "convert the array)");
    }
    *table = t;
    return Status::OK();
  }
  TableSchema t;
  t.name = name;
  t.kind = RowKind::kDense;
  t.type = a->type;
  t.width = a->width;
  uint32_t id = 1;
  for (const ShardStore* s : stores) {
    for (const TableSchema& other : s->ListTables()) id = std::max(id, other.id + 1);
  }
  t.id = id;
  RETURN_IF_ERROR(ValidateSchema(t).WithPrefix("table '" + name + "'"));
  *table = t;
  return Status::OK();
}

// The command that imports `path` into `name` on the same shards again.
std::string ImportCommand(const CtlOptions& options, const std::string& name,
                          const std::string& path) {
  return "pacectl --data_dir=" + options.data_dir + " import " + name + " " + path;
}

}  // namespace

Status OfflineImport(const CtlContext& ctx, const Args& args) {
  const std::string& name = args[0];
  const std::string& path = args[1];
  const bool npy = EndsWith(path, ".npy");
  if (!npy && !EndsWith(path, ".csv")) {
    return Status::InvalidArgument("import reads FILE.npy or FILE.csv, got '" + path + "'");
  }
  InputArray a;
  if (npy) RETURN_IF_ERROR(ReadNpy(path, &a));
  OfflineSet set;
  std::vector<ShardStore*> stores;
  RETURN_IF_ERROR(OpenWritable(ctx.options, &set, &stores));
  if (!npy) {
    // CSV values take the existing table's type, or f32 for a new table.
    StatusOr<TableSchema> t = set.shards[0]->FindTable(name);
    RETURN_IF_ERROR(ReadCsv(path, t.ok() ? t->type : ElementType::kF32, &a));
    a.typed = !t.ok();
  }
  TableSchema t;
  bool created = false;
  std::vector<ShardStore*> missing;
  RETURN_IF_ERROR(PlanTable(stores, name, path, &a, &t, &created, &missing));
  // All or nothing: until the last shard's batch is durable every shard
  // holds a marker, and a job refuses it (common/import_marker.h).
  const std::string command = ImportCommand(ctx.options, name, path);
  for (ShardStore* s : stores) RETURN_IF_ERROR(WriteImportMarker(s->dir(), command));
  TEST_ImportStage("markers written");
  for (ShardStore* s : missing) {
    TableSchema made;
    RETURN_IF_ERROR(s->CreateTable(t, &made));
    TEST_ImportStage("table created on a shard");
  }

  // Each shard's rows, their current values and the deltas that make them
  // the array's.
  const size_t n = set.shards.size();
  const size_t row_bytes = static_cast<size_t>(t.width) * ElementSize(t.type);
  std::vector<std::vector<uint64_t>> rows(n);
  std::vector<std::vector<size_t>> index(n);
  for (size_t i = 0; i < a.rows.size(); ++i) {
    const uint32_t k = n == 1 ? 0 : ShardOf(t.id, a.rows[i], static_cast<uint32_t>(n));
    rows[k].push_back(a.rows[i]);
    index[k].push_back(i);
  }
  const Version clock = [&] {
    Version c = set.shards[0]->ShardClock();
    for (const ShardStore* s : set.shards) c = std::min(c, s->ShardClock());
    return c;
  }();
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  const std::string record = "table=" + name + " rows=" + std::to_string(a.rows.size()) +
                             " shard_clock=" + std::to_string(clock) +
                             " unix_ms=" + std::to_string(now_ms) + " file=" + path;
  uint64_t inexact = 0;
  for (size_t k = 0; k < n; ++k) {
    ShardStore* store = stores[k];
    std::vector<std::string> have;
    RETURN_IF_ERROR(store->MultiGet(t.id, rows[k], &have));
    std::string deltas(rows[k].size() * row_bytes, '\0');
    std::vector<RowDelta> batch(rows[k].size());
    for (size_t j = 0; j < rows[k].size(); ++j) {
      char* d = &deltas[j * row_bytes];
      Difference(t.type, a.data.data() + index[k][j] * row_bytes, have[j].data(), t.width, d);
      batch[j] = RowDelta{t.id, rows[k][j], std::string_view(d, row_bytes)};
    }
    RETURN_IF_ERROR(store->ImportBatch(batch, record).WithPrefix(store->dir()));
    TEST_ImportStage("batch written on a shard");
    // Floats added to a nonzero stored value or initializer may round.
    RETURN_IF_ERROR(store->MultiGet(t.id, rows[k], &have));
    for (size_t j = 0; j < rows[k].size(); ++j) {
      const char* want = a.data.data() + index[k][j] * row_bytes;
      if (std::memcmp(want, have[j].data(), row_bytes) == 0) continue;
      const size_t e = ElementSize(t.type);
      for (uint32_t c = 0; c < t.width; ++c)
        inexact += std::memcmp(want + c * e, have[j].data() + c * e, e) != 0;
    }
  }
  for (ShardStore* s : stores) RETURN_IF_ERROR(RemoveImportMarker(s->dir()));
  if (inexact != 0) {
    ctx.err << "pacectl: warning: " << inexact << " value(s) of table '" << name << "' differ from "
            << path
            << " in the last bits: its rows add to a nonzero initializer or earlier values "
               "(import into a new table for exact values)\n";
  }
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Member("table", name);
    w.Member("file", path);
    w.MemberBool("created", created);
    w.MemberUint("rows", a.rows.size());
    w.MemberUint("width", t.width);
    w.Member("dtype", NpyDescr(t.type));
    w.MemberInt("shard_clock", clock);
    w.MemberUint("shards", n);
    w.MemberUint("inexact_values", inexact);
    w.EndObject();
    ctx.out << '\n';
    return Status::OK();
  }
  ctx.out << "imported " << a.rows.size() << " rows from " << path << " into "
          << (created ? "new " : "") << "table " << name << " (" << DescribeSchema(t)
          << ") at shard clock " << clock << (n > 1 ? ", one batch per shard on " : " on ") << n
          << (n == 1 ? " shard" : " shards") << "\n";
  return Status::OK();
}

}  // namespace pace::ctl
