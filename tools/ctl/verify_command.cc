// pacectl verify (offline): checks that a store's catalog, clocks and every
// stored row are well-formed. Exit code 2 when any corruption is found.
#include <cmath>
#include <cstring>

#include "common/hash.h"
#include "common/row.h"
#include "common/store_damage.h"
#include "tools/ctl/commands.h"
#include "tools/ctl/json_writer.h"
#include "tools/ctl/value_format.h"

namespace pace::ctl {

namespace {

// Problems listed per table; the rest are only counted.
constexpr size_t kMaxListedProblems = 20;

struct TableReport {
  TableSchema schema;
  uint64_t rows_checked = 0;
  uint64_t non_finite_rows = 0;  // rows holding NaN or Inf (a warning, not corruption)
  uint64_t problem_count = 0;
  std::vector<std::string> problems;  // the first kMaxListedProblems

  void AddProblem(std::string p) {
    ++problem_count;
    if (problems.size() < kMaxListedProblems) problems.push_back(std::move(p));
  }
};

struct VerifyReport {
  std::string data_dir;
  bool opened = false;
  ShardIdentity identity;
  Version shard_clock = 0;
  std::vector<ClockT> applied_clocks;
  std::vector<std::string> store_problems;  // open, catalog and clock problems
  std::vector<TableReport> tables;

  uint64_t ProblemCount() const {
    uint64_t n = store_problems.size();
    for (const TableReport& t : tables) n += t.problem_count;
    return n;
  }
};

bool HasNonFinite(const TableSchema& s, std::string_view value) {
  if (IsIntegral(s.type)) return false;
  size_t n = s.width;
  const char* data = value.data();
  if (s.kind == RowKind::kSparse) {
    n = SparseCount(value);
    data += 4 + 4 * n;
  }
  for (size_t i = 0; i < n; ++i) {
    double v;
    if (s.type == ElementType::kF32) {
      float f;
      std::memcpy(&f, data + 4 * i, 4);
      v = f;
    } else {
      std::memcpy(&v, data + 8 * i, 8);
    }
    if (!std::isfinite(v)) return true;
  }
  return false;
}

void CheckClocks(const ShardStore& store, VerifyReport* r) {
  r->applied_clocks = store.AppliedClocks();
  r->shard_clock = store.ShardClock();
  if (r->applied_clocks.size() != r->identity.num_clients) {
    r->store_problems.push_back("the store has " + std::to_string(r->applied_clocks.size()) +
                                " applied clocks for " + std::to_string(r->identity.num_clients) +
                                " clients");
  }
  Version min = r->applied_clocks.empty() ? 0 : r->applied_clocks[0];
  for (size_t i = 0; i < r->applied_clocks.size(); ++i) {
    if (r->applied_clocks[i] < 0) {
      r->store_problems.push_back("client " + std::to_string(i) + " has negative applied clock " +
                                  std::to_string(r->applied_clocks[i]));
    }
    min = std::min(min, r->applied_clocks[i]);
  }
  if (min != r->shard_clock) {
    r->store_problems.push_back("shard clock " + std::to_string(r->shard_clock) +
                                " is not the minimum applied clock " + std::to_string(min));
  }
}

// Scans one table. Returns a non-Corruption error if the scan could not run.
Status CheckTable(const ShardStore& store, const TableSchema& schema, TableReport* t) {
  t->schema = schema;
  Status valid = ValidateSchema(schema);
  if (!valid.ok()) t->AddProblem("invalid schema: " + valid.message());
  const RowFormat format = RowFormat::Of(schema);
  const ShardIdentity& id = store.identity();
  Status s = store.Scan(schema.id, 0, [&](uint64_t row, std::string_view value) {
    ++t->rows_checked;
    Status row_ok = ValidateRow(format, value);
    if (!row_ok.ok()) {
      t->AddProblem("row " + std::to_string(row) + ": " + row_ok.message());
      return true;
    }
    if (id.num_shards > 1 && ShardOf(schema.id, row, id.num_shards) != id.shard_id) {
      t->AddProblem("row " + std::to_string(row) + " belongs to shard " +
                    std::to_string(ShardOf(schema.id, row, id.num_shards)) + ", not this shard " +
                    std::to_string(id.shard_id));
    }
    if (HasNonFinite(schema, value)) ++t->non_finite_rows;
    return true;
  });
  if (s.code() == StatusCode::kCorruption) {
    t->AddProblem(ClassifyStoreCorruption(store.dir(), s).message() + " (scan stopped after " +
                  std::to_string(t->rows_checked) + " rows)");
    return Status::OK();
  }
  return s;
}

void WriteReportJson(const CtlContext& ctx, const VerifyReport& r) {
  JsonWriter w(&ctx.out);
  w.BeginObject();
  w.Member("data_dir", r.data_dir);
  w.MemberBool("ok", r.ProblemCount() == 0);
  w.MemberUint("problems_found", r.ProblemCount());
  w.MemberBool("opened", r.opened);
  if (r.opened) {
    w.MemberUint("shard_id", r.identity.shard_id);
    w.MemberUint("num_shards", r.identity.num_shards);
    w.MemberUint("num_clients", r.identity.num_clients);
    w.MemberInt("shard_clock", r.shard_clock);
    w.Key("applied_clocks");
    w.BeginArray();
    for (ClockT c : r.applied_clocks) w.Int(c);
    w.EndArray();
  }
  w.Key("store_problems");
  w.BeginArray();
  for (const std::string& p : r.store_problems) w.String(p);
  w.EndArray();
  w.Key("tables");
  w.BeginArray();
  for (const TableReport& t : r.tables) {
    w.BeginObject();
    w.Member("name", t.schema.name);
    w.MemberUint("id", t.schema.id);
    w.MemberUint("rows_checked", t.rows_checked);
    w.MemberUint("non_finite_rows", t.non_finite_rows);
    w.MemberUint("problem_count", t.problem_count);
    w.Key("problems");
    w.BeginArray();
    for (const std::string& p : t.problems) w.String(p);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  ctx.out << '\n';
}

void WriteReportText(const CtlContext& ctx, const VerifyReport& r) {
  ctx.out << "verify " << r.data_dir;
  if (r.opened) {
    ctx.out << ": "
            << IdentityText(r.identity.shard_id, r.identity.num_shards, r.identity.num_clients)
            << ", format " << r.identity.format_version << ", shard clock " << r.shard_clock;
  }
  ctx.out << "\n";
  for (const std::string& p : r.store_problems) ctx.out << "  CORRUPT  " << p << "\n";
  if (r.opened) {
    ctx.out << "  clocks   " << ClocksText(r.applied_clocks) << "\n";
    ctx.out << "  catalog  " << r.tables.size() << " table(s)\n";
  }
  for (const TableReport& t : r.tables) {
    ctx.out << "  table " << t.schema.name << ": " << t.rows_checked << " rows checked, ";
    if (t.problem_count == 0) {
      ctx.out << "ok";
    } else {
      ctx.out << t.problem_count << " problem(s)";
    }
    if (t.non_finite_rows > 0) {
      ctx.out << " (warning: " << t.non_finite_rows << " rows hold NaN or Inf)";
    }
    ctx.out << "\n";
    for (const std::string& p : t.problems) ctx.out << "    CORRUPT  " << p << "\n";
    if (t.problem_count > t.problems.size()) {
      ctx.out << "    ... and " << (t.problem_count - t.problems.size()) << " more\n";
    }
  }
  if (r.ProblemCount() == 0) {
    ctx.out << "result: ok\n";
  } else {
    ctx.out << "result: " << r.ProblemCount() << " problem(s) found\n";
  }
}

// Prints the report; Corruption (exit 2) if it lists any problem.
Status Finish(const CtlContext& ctx, const VerifyReport& r) {
  if (ctx.options.json) {
    WriteReportJson(ctx, r);
  } else {
    WriteReportText(ctx, r);
  }
  if (r.ProblemCount() > 0) {
    return Status::Corruption("verify found " + std::to_string(r.ProblemCount()) +
                              " problem(s) in " + r.data_dir);
  }
  return Status::OK();
}

}  // namespace

Status OfflineVerify(const CtlContext& ctx, const Args&) {
  VerifyReport r;
  r.data_dir = ctx.options.data_dir;
  // The write-ahead logs first, as paced's open checks them: a read-only
  // open alone would replay up to the damage and report nothing.
  // Each problem is named by the file it is in (an SST, the MANIFEST or
  // CURRENT, a write-ahead log), once.
  Status current = CheckCurrentFile(r.data_dir);
  if (!current.ok()) {
    r.store_problems.push_back(current.message());
    return Finish(ctx, r);
  }
  Status wal = ShardStore::CheckWal(r.data_dir);
  const DamagedFile wal_damage = FindDamagedFile(wal.message());
  if (wal.code() == StatusCode::kCorruption &&
      (wal_damage.kind == DamagedFileKind::kWal || wal_damage.kind == DamagedFileKind::kUnknown)) {
    r.store_problems.push_back("write-ahead log: " + wal.message());
  }
  std::unique_ptr<ShardStore> store;
  Status open = OpenOffline(ctx.options, &store);
  if (open.code() == StatusCode::kCorruption) {
    r.store_problems.push_back("cannot open the store: " + open.message());
  } else if (!open.ok()) {
    return open;
  } else {
    r.opened = true;
    r.identity = store->identity();
    CheckClocks(*store, &r);
    for (const TableSchema& schema : store->ListTables()) {
      r.tables.emplace_back();
      RETURN_IF_ERROR(CheckTable(*store, schema, &r.tables.back()));
    }
  }
  return Finish(ctx, r);
}

}  // namespace pace::ctl
