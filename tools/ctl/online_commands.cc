// pacectl's online commands against a running paced (--server=HOST:PORT):
// tables, describe, get, stats. pacectl connects as an observer: it never
// counts toward the shard clock and may not Apply.
#include <chrono>
#include <future>
#include <map>

#include "common/row.h"
#include "common/token_file.h"
#include "net/address.h"
#include "net/remote_shard.h"
#include "tools/ctl/commands.h"
#include "tools/ctl/json_writer.h"
#include "tools/ctl/value_format.h"

namespace pace::ctl {

namespace {

// A connection to one shard server and the helpers to wait for its replies.
class Online {
 public:
  explicit Online(const CtlOptions& options) : options_(options) {}

  Status Connect() {
    net::RemoteShardOptions o;
    RETURN_IF_ERROR(net::ParseHostPort(options_.server, &o.host, &o.port)
                        .WithPrefix("--server=" + options_.server));
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
      const std::string prefix = "cannot connect to " + options_.server;
      return Status(code,
                    s.message().rfind(prefix, 0) == 0 ? s.message() : prefix + ": " + s.message());
    }
    return Status::OK();
  }

  template <typename T>
  StatusOr<T> Await(std::future<StatusOr<T>> f, const std::string& what) {
    if (f.wait_for(std::chrono::milliseconds(options_.timeout_ms)) != std::future_status::ready) {
      return Status::TimedOut(what + ": no reply from " + options_.server + " within " +
                              std::to_string(options_.timeout_ms) + " ms (--timeout_ms)");
    }
    StatusOr<T> r = f.get();
    if (!r.ok() && !r.status().IsNotFound()) {
      return r.status().WithPrefix(what + " on " + options_.server);
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

 private:
  const CtlOptions& options_;
  std::unique_ptr<net::RemoteShard> shard_;
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

Status OnlineTables(const CtlContext& ctx, const Args&) {
  Online online(ctx.options);
  RETURN_IF_ERROR(online.Connect());
  ASSIGN_OR_RETURN(std::vector<TableSchema> tables,
                   online.Await(online.shard()->ListTables(), "list tables"));
  WriteTables(ctx, tables);
  return Status::OK();
}

Status OnlineDescribe(const CtlContext& ctx, const Args& args) {
  Online online(ctx.options);
  RETURN_IF_ERROR(online.Connect());
  ASSIGN_OR_RETURN(TableSchema t, online.FindTable(args[0]));
  ASSIGN_OR_RETURN(net::StatsReply st, online.Await(online.shard()->Stats(), "stats"));
  const net::Welcome& wl = online.welcome();
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Key("table");
    SchemaJson(t, &w);
    w.Member("server", ctx.options.server);
    WelcomeJson(wl, &w);
    ClocksJson(st, &w);
    w.EndObject();
    ctx.out << '\n';
    return Status::OK();
  }
  ctx.out << "table " << t.name << " (id " << t.id << ")\n" << SchemaText(t);
  ctx.out << "server " << ctx.options.server << "\n"
          << AlignColumns({{"  identity", IdentityText(wl.shard_id, wl.num_shards, wl.num_clients)},
                           {"  shard clock", std::to_string(st.shard_clock)},
                           {"  applied", ClocksText(st.applied_clocks)}});
  return Status::OK();
}

Status OnlineGet(const CtlContext& ctx, const Args& args) {
  Online online(ctx.options);
  RETURN_IF_ERROR(online.Connect());
  ASSIGN_OR_RETURN(TableSchema t, online.FindTable(args[0]));
  const net::Welcome& wl = online.welcome();
  std::vector<uint64_t> rows(args.size() - 1);
  for (size_t i = 1; i < args.size(); ++i) {
    RETURN_IF_ERROR(ParseRow(args[i], &rows[i - 1]));
    RETURN_IF_ERROR(CheckRowPlacement(t, rows[i - 1], wl.shard_id, wl.num_shards));
  }
  ASSIGN_OR_RETURN(net::ReadReply reply, online.Await(online.shard()->Read(t.id, rows), "read"));
  std::map<uint64_t, const std::string*> by_row;
  const RowFormat format = RowFormat::Of(t);
  for (const net::RowData& r : reply.rows) {
    Status valid = ValidateRow(format, r.bytes);
    if (r.table != t.id || !valid.ok()) {
      return Status::Corruption("server " + ctx.options.server +
                                " sent a malformed value for row " + std::to_string(r.row) +
                                " of table '" + t.name + "': " + valid.ToString());
    }
    by_row[r.row] = &r.bytes;
  }
  for (uint64_t row : rows) {
    if (by_row.count(row) == 0) {
      return Status::Corruption("server " + ctx.options.server + " sent no value for row " +
                                std::to_string(row) + " of table '" + t.name + "'");
    }
  }
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Member("table", t.name);
    w.MemberInt("version", reply.version);
    w.Key("rows");
    w.BeginArray();
    for (uint64_t row : rows) WriteRowJson(&w, t, row, *by_row[row], -1);
    w.EndArray();
    w.EndObject();
    ctx.out << '\n';
    return Status::OK();
  }
  for (uint64_t row : rows) WriteRowText(ctx, t, row, *by_row[row], -1);
  return Status::OK();
}

Status OnlineStats(const CtlContext& ctx, const Args&) {
  Online online(ctx.options);
  RETURN_IF_ERROR(online.Connect());
  ASSIGN_OR_RETURN(net::StatsReply st, online.Await(online.shard()->Stats(), "stats"));
  const net::Welcome& wl = online.welcome();
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Member("server", ctx.options.server);
    WelcomeJson(wl, &w);
    ClocksJson(st, &w);
    w.Key("counters");
    w.BeginObject();
    for (const auto& [name, value] : st.counters) w.MemberInt(name, value);
    w.EndObject();
    w.EndObject();
    ctx.out << '\n';
    return Status::OK();
  }
  std::vector<std::vector<std::string>> rows = {
      {"server", ctx.options.server},
      {"identity", IdentityText(wl.shard_id, wl.num_shards, wl.num_clients)},
      {"shard clock", std::to_string(st.shard_clock)},
      {"applied", ClocksText(st.applied_clocks)},
  };
  for (const auto& [name, value] : st.counters)
    rows.push_back({"  " + name, std::to_string(value)});
  ctx.out << AlignColumns(rows);
  return Status::OK();
}

}  // namespace pace::ctl
