// pacectl's online commands against a running paced (--server=HOST:PORT, or
// every shard with --servers): tables, describe, get, scan, stats, export. pacectl connects as an
// observer: it never counts toward the shard clock and may not Apply.
#include <algorithm>
#include <chrono>
#include <future>
#include <limits>
#include <map>

#include "common/hash.h"
#include "common/row.h"
#include "common/token_file.h"
#include "net/address.h"
#include "net/remote_shard.h"
#include "tools/ctl/commands.h"
#include "tools/ctl/export.h"
#include "tools/ctl/json_writer.h"
#include "tools/ctl/output_file.h"
#include "tools/ctl/value_format.h"

namespace pace::ctl {

namespace {

// A connection to one shard server and the helpers to wait for its replies.
class Online {
 public:
  explicit Online(const CtlOptions& options) : Online(options, options.server) {}
  Online(const CtlOptions& options, std::string server)
      : options_(options), server_(std::move(server)) {}

  Status Connect() {
    net::RemoteShardOptions o;
    RETURN_IF_ERROR(
        net::ParseHostPort(server_, &o.host, &o.port)
            .WithPrefix((options_.servers.empty() ? "--server=" : "--servers: ") + server_));
    if (!options_.token_file.empty())
      RETURN_IF_ERROR(ReadTokenFile(options_.token_file, &o.hello.token));
    o.hello.role = net::Hello::kObserver;
    o.hello.client_id = 0;
    o.connect_timeout_ms = options_.connect_timeout_ms;
    Status s = net::RemoteShard::Connect(o, nullptr, nullptr, &shard_);
    if (!s.ok()) {
      // Keep the code (a refused token stays PermissionDenied) but make sure
      // the message names the address; a connection problem is never exit 2.
      StatusCode code = s.code() == StatusCode::kCorruption ? StatusCode::kUnavailable : s.code();
      const std::string prefix = "cannot connect to " + server_;
      return Status(code,
                    s.message().rfind(prefix, 0) == 0 ? s.message() : prefix + ": " + s.message());
    }
    return Status::OK();
  }

  template <typename T>
  StatusOr<T> Await(std::future<StatusOr<T>> f, const std::string& what) {
    if (f.wait_for(std::chrono::milliseconds(options_.timeout_ms)) != std::future_status::ready) {
      return Status::TimedOut(what + ": no reply from " + server_ + " within " +
                              std::to_string(options_.timeout_ms) + " ms (--timeout_ms)");
    }
    StatusOr<T> r = f.get();
    if (!r.ok() && !r.status().IsNotFound()) {
      return r.status().WithPrefix(what + " on " + server_);
    }
    return r;
  }

  StatusOr<TableSchema> FindTable(const std::string& name) {
    StatusOr<TableSchema> t = Await(shard_->DescribeTable(name), "describe table");
    if (t.ok() || !t.status().IsNotFound()) return t;
    ASSIGN_OR_RETURN(std::vector<TableSchema> tables, Await(shard_->ListTables(), "list tables"));
    return UnknownTable(name, tables);
  }

  net::RemoteShard* shard() { return shard_.get(); }
  const net::Welcome& welcome() const { return shard_->welcome(); }

  const std::string& server() const { return server_; }

 private:
  const CtlOptions& options_;
  const std::string server_;
  std::unique_ptr<net::RemoteShard> shard_;
};

// Connections to every shard of a job (--servers=A,B,...), index = shard id.
class OnlineSet {
 public:
  Status Connect(const CtlOptions& options) {
    const std::vector<std::string> servers = SplitList(options.servers);
    if (servers.empty()) return Status::InvalidArgument("--servers names no server");
    for (const std::string& server : servers) {
      shards_.push_back(std::make_unique<Online>(options, server));
      RETURN_IF_ERROR(shards_.back()->Connect());
    }
    for (size_t k = 0; k < shards_.size(); ++k) {
      const net::Welcome& wl = shards_[k]->welcome();
      if (wl.num_shards != shards_.size() || wl.shard_id != k) {
        return Status::InvalidArgument(
            "--servers lists " + std::to_string(shards_.size()) + " servers, and entry " +
            std::to_string(k) + " (" + servers[k] + ") is shard " + std::to_string(wl.shard_id) +
            " of " + std::to_string(wl.num_shards) +
            ": list every shard of the job once, in shard id order (as the clients' --servers)");
      }
    }
    return Status::OK();
  }
  size_t size() const { return shards_.size(); }
  Online& operator[](size_t k) { return *shards_[k]; }

  // The table on every shard; InvalidArgument if the shards disagree.
  StatusOr<TableSchema> FindTable(const std::string& name) {
    ASSIGN_OR_RETURN(TableSchema t, shards_[0]->FindTable(name));
    for (size_t k = 1; k < shards_.size(); ++k) {
      StatusOr<TableSchema> other = shards_[k]->FindTable(name);
      if (!other.ok() || !SameSchema(t, *other) || other->id != t.id) {
        return Status::InvalidArgument("table '" + name + "' differs between shard 0 and shard " +
                                       std::to_string(k) + " (" + shards_[k]->server() + ")" +
                                       (other.ok() ? "" : ": " + other.status().message()));
      }
    }
    return t;
  }

 private:
  std::vector<std::unique_ptr<Online>> shards_;
};

void WelcomeJson(const net::Welcome& wl, JsonWriter* w) {
  w->Key("identity");
  w->BeginObject();
  w->MemberUint("shard_id", wl.shard_id);
  w->MemberUint("num_shards", wl.num_shards);
  w->MemberUint("num_clients", wl.num_clients);
  w->EndObject();
}

void ClocksJson(const net::StatsReply& st, JsonWriter* w) {
  w->MemberInt("shard_clock", st.shard_clock);
  w->Key("applied_clocks");
  w->BeginArray();
  for (ClockT c : st.applied_clocks) w->Int(c);
  w->EndArray();
}

}  // namespace

namespace {

// The shards to ask: every --servers entry, or the one --server.
Status ConnectAll(const CtlOptions& options, OnlineSet* set, std::unique_ptr<Online>* single) {
  if (!options.servers.empty()) return set->Connect(options);
  *single = std::make_unique<Online>(options);
  return (*single)->Connect();
}

// Reads `rows` of `t` from `shard` into by_row; checks every value.
Status ReadFrom(Online& shard, const TableSchema& t, const std::vector<uint64_t>& rows,
                std::map<uint64_t, std::string>* by_row, Version* version) {
  ASSIGN_OR_RETURN(net::ReadReply reply, shard.Await(shard.shard()->Read(t.id, rows), "read"));
  const RowFormat format = RowFormat::Of(t);
  for (net::RowData& r : reply.rows) {
    Status valid = ValidateRow(format, r.bytes);
    if (r.table != t.id || !valid.ok()) {
      return Status::Corruption("server " + shard.server() + " sent a malformed value for row " +
                                std::to_string(r.row) + " of table '" + t.name +
                                "': " + valid.ToString());
    }
    (*by_row)[r.row] = std::move(r.bytes);
  }
  for (uint64_t row : rows) {
    if (by_row->count(row) == 0) {
      return Status::Corruption("server " + shard.server() + " sent no value for row " +
                                std::to_string(row) + " of table '" + t.name + "'");
    }
  }
  *version = std::min(*version, reply.version);
  return Status::OK();
}

// One shard's clocks, text lines two-space indented.
std::vector<std::vector<std::string>> ShardLines(Online& shard, const net::StatsReply& st) {
  const net::Welcome& wl = shard.welcome();
  return {{"server", shard.server()},
          {"identity", IdentityText(wl.shard_id, wl.num_shards, wl.num_clients)},
          {"shard clock", std::to_string(st.shard_clock)},
          {"applied", ClocksText(st.applied_clocks)}};
}

}  // namespace

Status OnlineTables(const CtlContext& ctx, const Args&) {
  OnlineSet set;
  std::unique_ptr<Online> single;
  RETURN_IF_ERROR(ConnectAll(ctx.options, &set, &single));
  Online& first = single != nullptr ? *single : set[0];
  ASSIGN_OR_RETURN(std::vector<TableSchema> tables,
                   first.Await(first.shard()->ListTables(), "list tables"));
  for (size_t k = 1; k < set.size(); ++k) {
    ASSIGN_OR_RETURN(std::vector<TableSchema> other,
                     set[k].Await(set[k].shard()->ListTables(), "list tables"));
    if (other.size() != tables.size()) {
      return Status::InvalidArgument("shard 0 holds " + std::to_string(tables.size()) +
                                     " tables but shard " + std::to_string(k) + " (" +
                                     set[k].server() + ") holds " + std::to_string(other.size()));
    }
    for (const TableSchema& t : tables) RETURN_IF_ERROR(set.FindTable(t.name).status());
  }
  WriteTables(ctx, tables);
  return Status::OK();
}

Status OnlineDescribe(const CtlContext& ctx, const Args& args) {
  OnlineSet set;
  std::unique_ptr<Online> single;
  RETURN_IF_ERROR(ConnectAll(ctx.options, &set, &single));
  std::vector<Online*> shards;
  if (single != nullptr) shards.push_back(single.get());
  for (size_t k = 0; k < set.size(); ++k) shards.push_back(&set[k]);
  TableSchema t;
  if (single != nullptr) {
    ASSIGN_OR_RETURN(t, single->FindTable(args[0]));
  } else {
    ASSIGN_OR_RETURN(t, set.FindTable(args[0]));
  }
  std::vector<net::StatsReply> stats;
  for (Online* o : shards) {
    ASSIGN_OR_RETURN(net::StatsReply st, o->Await(o->shard()->Stats(), "stats"));
    stats.push_back(std::move(st));
  }
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Key("table");
    SchemaJson(t, &w);
    if (single != nullptr) {
      w.Member("server", single->server());
      WelcomeJson(single->welcome(), &w);
      ClocksJson(stats[0], &w);
    } else {
      Version job = stats[0].shard_clock;
      for (const net::StatsReply& st : stats) job = std::min(job, st.shard_clock);
      w.MemberInt("shard_clock", job);
      w.Key("shards");
      w.BeginArray();
      for (size_t k = 0; k < shards.size(); ++k) {
        w.BeginObject();
        w.Member("server", shards[k]->server());
        WelcomeJson(shards[k]->welcome(), &w);
        ClocksJson(stats[k], &w);
        w.EndObject();
      }
      w.EndArray();
    }
    w.EndObject();
    ctx.out << '\n';
    return Status::OK();
  }
  ctx.out << "table " << t.name << " (id " << t.id << ")\n" << SchemaText(t);
  for (size_t k = 0; k < shards.size(); ++k) {
    std::vector<std::vector<std::string>> lines = ShardLines(*shards[k], stats[k]);
    ctx.out << "server " << lines[0][1] << "\n";
    lines.erase(lines.begin());
    for (auto& l : lines) l[0] = "  " + l[0];
    ctx.out << AlignColumns(lines);
  }
  return Status::OK();
}

Status OnlineGet(const CtlContext& ctx, const Args& args) {
  OnlineSet set;
  std::unique_ptr<Online> single;
  RETURN_IF_ERROR(ConnectAll(ctx.options, &set, &single));
  TableSchema t;
  if (single != nullptr) {
    ASSIGN_OR_RETURN(t, single->FindTable(args[0]));
  } else {
    ASSIGN_OR_RETURN(t, set.FindTable(args[0]));
  }
  std::vector<uint64_t> rows(args.size() - 1);
  const size_t n = single != nullptr ? 1 : set.size();
  std::vector<std::vector<uint64_t>> by_shard(n);
  for (size_t i = 1; i < args.size(); ++i) {
    RETURN_IF_ERROR(ParseRow(args[i], &rows[i - 1]));
    if (single != nullptr) {
      const net::Welcome& wl = single->welcome();
      RETURN_IF_ERROR(CheckRowPlacement(t, rows[i - 1], wl.shard_id, wl.num_shards));
      by_shard[0].push_back(rows[i - 1]);
    } else {
      // Routed to the owner by the placement hash (common/hash.h).
      by_shard[ShardOf(t.id, rows[i - 1], static_cast<uint32_t>(n))].push_back(rows[i - 1]);
    }
  }
  std::map<uint64_t, std::string> by_row;
  Version version = std::numeric_limits<Version>::max();
  for (size_t k = 0; k < n; ++k) {
    if (by_shard[k].empty()) continue;
    RETURN_IF_ERROR(
        ReadFrom(single != nullptr ? *single : set[k], t, by_shard[k], &by_row, &version));
  }
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Member("table", t.name);
    w.MemberInt("version", version);
    w.Key("rows");
    w.BeginArray();
    for (uint64_t row : rows) WriteRowJson(&w, t, row, by_row[row], -1);
    w.EndArray();
    w.EndObject();
    ctx.out << '\n';
    return Status::OK();
  }
  for (uint64_t row : rows) WriteRowText(ctx, t, row, by_row[row], -1);
  return Status::OK();
}

Status OnlineStats(const CtlContext& ctx, const Args&) {
  OnlineSet set;
  std::unique_ptr<Online> single;
  RETURN_IF_ERROR(ConnectAll(ctx.options, &set, &single));
  std::vector<Online*> shards;
  if (single != nullptr) shards.push_back(single.get());
  for (size_t k = 0; k < set.size(); ++k) shards.push_back(&set[k]);
  std::vector<net::StatsReply> stats;
  for (Online* o : shards) {
    ASSIGN_OR_RETURN(net::StatsReply st, o->Await(o->shard()->Stats(), "stats"));
    stats.push_back(std::move(st));
  }
  // Over a job: the least shard clock and the counters summed over shards.
  Version job = stats[0].shard_clock;
  std::map<std::string, int64_t> totals;
  for (const net::StatsReply& st : stats) {
    job = std::min(job, st.shard_clock);
    for (const auto& [name, value] : st.counters) totals[name] += value;
  }
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    auto shard_members = [&](size_t k) {
      w.Member("server", shards[k]->server());
      WelcomeJson(shards[k]->welcome(), &w);
      ClocksJson(stats[k], &w);
      w.Key("counters");
      w.BeginObject();
      for (const auto& [name, value] : stats[k].counters) w.MemberInt(name, value);
      w.EndObject();
    };
    if (single != nullptr) {
      shard_members(0);
    } else {
      w.MemberInt("shard_clock", job);
      w.Key("counters");
      w.BeginObject();
      for (const auto& [name, value] : totals) w.MemberInt(name, value);
      w.EndObject();
      w.Key("shards");
      w.BeginArray();
      for (size_t k = 0; k < shards.size(); ++k) {
        w.BeginObject();
        shard_members(k);
        w.EndObject();
      }
      w.EndArray();
    }
    w.EndObject();
    ctx.out << '\n';
    return Status::OK();
  }
  std::vector<std::vector<std::string>> rows;
  if (single == nullptr) {
    rows.push_back({"shards", std::to_string(shards.size())});
    rows.push_back({"job clock", std::to_string(job) + " (least shard clock)"});
    rows.push_back({"counters", "(sum over shards)"});
    for (const auto& [name, value] : totals) rows.push_back({"  " + name, std::to_string(value)});
  }
  for (size_t k = 0; k < shards.size(); ++k) {
    for (auto& l : ShardLines(*shards[k], stats[k])) rows.push_back(l);
    rows.push_back({"memory", "(used / bound)"});
    for (auto& l : MemoryRows(stats[k].counters, "  ")) rows.push_back(l);
    if (single != nullptr) {
      for (const auto& [name, value] : stats[k].counters)
        rows.push_back({"  " + name, std::to_string(value)});
    }
  }
  ctx.out << AlignColumns(rows);
  return Status::OK();
}

namespace {

// The table `name` for a command over a range of rows (`what`: "scan",
// "export"): on every --servers shard, or on a --server that is the job's
// only shard.
StatusOr<TableSchema> RangeTable(const CtlOptions& options, OnlineSet& set, Online* single,
                                 const std::string& name, const std::string& what) {
  if (single == nullptr) return set.FindTable(name);
  ASSIGN_OR_RETURN(TableSchema t, single->FindTable(name));
  const net::Welcome& wl = single->welcome();
  if (wl.num_shards > 1) {
    return Status::InvalidArgument(options.server + " is shard " + std::to_string(wl.shard_id) +
                                   " of " + std::to_string(wl.num_shards) + "; " + what +
                                   " the whole table with --servers=A,B,... (every shard, in "
                                   "shard id order)");
  }
  return t;
}

// Reads rows [a, b) of `t`, each from its owning shard, into *by_row; lowers
// *low and raises *high to the versions read.
Status ReadRange(OnlineSet& set, Online* single, const TableSchema& t, uint64_t a, uint64_t b,
                 std::map<uint64_t, std::string>* by_row, Version* low, Version* high) {
  const size_t num = single != nullptr ? 1 : set.size();
  std::vector<std::vector<uint64_t>> by_shard(num);
  for (uint64_t r = a; r < b; ++r) {
    by_shard[num == 1 ? 0 : ShardOf(t.id, r, static_cast<uint32_t>(num))].push_back(r);
  }
  for (size_t k = 0; k < num; ++k) {
    if (by_shard[k].empty()) continue;
    Version v = std::numeric_limits<Version>::max();
    RETURN_IF_ERROR(ReadFrom(single != nullptr ? *single : set[k], t, by_shard[k], by_row, &v));
    *low = std::min(*low, v);
    *high = std::max(*high, v);
  }
  return Status::OK();
}

}  // namespace

// scan online: rows [--start, --start + --limit) of the table, each read from
// its owning shard, in row order. The protocol has no scan, so --limit is
// required and every row in the range is listed (a row never written shows
// its initializer's value).
Status OnlineScan(const CtlContext& ctx, const Args& args) {
  const uint64_t start = ctx.options.start, limit = ctx.options.limit;
  if (limit == 0) {
    return Status::InvalidArgument(
        "scan online needs --limit=N (rows START..START+N-1 are read; the server cannot list "
        "written rows), or scan offline with --data_dir (the written rows only)");
  }
  if (start > std::numeric_limits<uint64_t>::max() - limit) {
    return Status::InvalidArgument("--start + --limit passes the largest row id");
  }
  OnlineSet set;
  std::unique_ptr<Online> single;
  RETURN_IF_ERROR(ConnectAll(ctx.options, &set, &single));
  ASSIGN_OR_RETURN(const TableSchema t,
                   RangeTable(ctx.options, set, single.get(), args[0], "scan"));
  std::unique_ptr<JsonWriter> w;
  if (ctx.options.json) {
    w = std::make_unique<JsonWriter>(&ctx.out);
    w->BeginObject();
    w->Member("table", t.name);
    w->MemberUint("start", start);
    w->MemberUint("limit", limit);
    w->Key("rows");
    w->BeginArray();
  }
  constexpr uint64_t kChunk = 1024;
  uint64_t listed = 0;
  Status s;
  for (uint64_t a = start; a < start + limit && s.ok(); a += kChunk) {
    const uint64_t b = std::min(start + limit, a + kChunk);
    std::map<uint64_t, std::string> by_row;
    Version low = std::numeric_limits<Version>::max(), high = 0;
    s = ReadRange(set, single.get(), t, a, b, &by_row, &low, &high);
    if (!s.ok()) break;
    for (const auto& [row, value] : by_row) {
      ++listed;
      if (w != nullptr) {
        WriteRowJson(w.get(), t, row, value, -1);
      } else {
        WriteRowText(ctx, t, row, value, -1);
      }
    }
  }
  if (w != nullptr) {
    // Close the document even on error so stdout stays well-formed JSON.
    w->EndArray();
    w->MemberUint("rows_listed", listed);
    w->MemberBool("truncated", false);
    w->EndObject();
    ctx.out << '\n';
  }
  return s;
}

// export online: rows [0, --rows) of the table, each read from its owning
// shard, chunk by chunk. The protocol has no scan, so the rows to export are
// given (--rows) and no row-id file is written.
Status OnlineExport(const CtlContext& ctx, const Args& args) {
  RETURN_IF_ERROR(CheckExportFlags(ctx.options));
  const std::string& format = ctx.options.format;
  const uint64_t n = ctx.options.rows;
  if (n == 0) {
    return Status::InvalidArgument(
        "export online needs --rows=N (rows 0..N-1 are read; the server cannot list written "
        "rows), or export offline with --data_dir (every written row, ids in FILE.rows.npy)");
  }
  OnlineSet set;
  std::unique_ptr<Online> single;
  RETURN_IF_ERROR(ConnectAll(ctx.options, &set, &single));
  ASSIGN_OR_RETURN(const TableSchema t,
                   RangeTable(ctx.options, set, single.get(), args[0], "export"));
  if (format == "npy" && t.kind != RowKind::kDense) {
    return Status::InvalidArgument("table '" + t.name +
                                   "' is sparse; npy export needs a dense table (use "
                                   "--format=csv for row,col,value triples)");
  }
  const size_t num = single != nullptr ? 1 : set.size();
  const RowFormat rf = RowFormat::Of(t);
  const size_t row_bytes = t.kind == RowKind::kDense ? rf.dense_bytes() : 64;
  const uint64_t chunk = std::max<uint64_t>(1, std::min<uint64_t>(4096, (4u << 20) / row_bytes));
  OutputFile file(ctx.options.out, &ctx.out);
  RETURN_IF_ERROR(file.Open());
  std::ostream* out = file.stream();
  if (format == "npy") {
    *out << NpyHeader(t.type, n, t.width);
  } else {
    WriteCsvHeader(t, out);
  }
  Version low = std::numeric_limits<Version>::max(), high = 0;
  uint64_t lines = 0;
  std::string text;
  // Progress in rows read (as a share of n; the byte total of csv is unknown).
  ExportProgress progress(&ctx.err, "export " + t.name, n, /*rows=*/true);
  for (uint64_t a = 0; a < n; a += chunk) {
    progress.Update(a);
    const uint64_t b = std::min(n, a + chunk);
    std::map<uint64_t, std::string> by_row;
    RETURN_IF_ERROR(ReadRange(set, single.get(), t, a, b, &by_row, &low, &high));
    text.clear();
    for (const auto& [row, value] : by_row) {
      if (format == "npy") {
        text += value;
      } else {
        lines += AppendCsvLines(t, row, value, &text);
      }
    }
    out->write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out->good()) return Status::IOError("export: write failed");
  }
  out->flush();
  progress.Finish(n);
  RETURN_IF_ERROR(file.Commit());
  if (ctx.options.out == "-") return Status::OK();
  if (low > high) low = high;
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Member("table", t.name);
    w.Member("format", format);
    w.Member("out", ctx.options.out);
    w.MemberUint("shards", num);
    w.MemberInt("min_version", low);
    w.MemberInt("max_version", high);
    if (format == "npy") {
      w.Member("dtype", NpyDescr(t.type));
      w.Key("shape");
      w.BeginArray();
      w.Uint(n);
      w.Uint(t.width);
      w.EndArray();
    } else {
      w.MemberUint("lines", lines);
    }
    w.EndObject();
    ctx.out << '\n';
    return Status::OK();
  }
  ctx.out << "exported table " << t.name << " to " << ctx.options.out << ": ";
  if (format == "npy") {
    ctx.out << "npy " << NpyDescr(t.type) << " shape (" << n << ", " << t.width << ")";
  } else {
    ctx.out << "csv, " << lines << " lines";
  }
  ctx.out << " from rows 0.." << n - 1 << " of " << num << (num == 1 ? " shard" : " shards")
          << ", versions " << low << ".." << high << "\n";
  return Status::OK();
}

}  // namespace pace::ctl
