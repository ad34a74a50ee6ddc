// pacedb.Client and pacedb.Table.
#include <pybind11/stl.h>

#include <fstream>
#include <sstream>

#include "python/src/pacedb.h"

namespace pace {
namespace python {

namespace {

// The token as paced and the apps read --token_file: contents without
// trailing newlines.
std::string ReadToken(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ThrowStatus(Status::NotFound("cannot read token_file '" + path + "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token = ss.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  CheckArg(!token.empty(), "token_file '" + path + "' is empty");
  return token;
}

ClientOptions MakeOptions(const py::object& servers, const std::string& data_dir,
                          const py::object& client_id, const py::object& num_clients,
                          const py::object& token_file, const py::object& memory_mb) {
  ClientOptions o;
  CheckArg(!data_dir.empty(), "data_dir must not be empty");
  o.data_dir = data_dir;
  if (!servers.is_none()) {
    if (py::isinstance<py::str>(servers)) {
      Check(ParseServers(servers.cast<std::string>(), &o).WithPrefix("servers"));
    } else {
      std::string list;
      for (const py::handle& s : servers) {
        if (!list.empty()) list += ",";
        list += py::str(s).cast<std::string>();
      }
      Check(ParseServers(list, &o).WithPrefix("servers"));
    }
    CheckArg(!o.servers.empty(), "servers is empty (pass None to run embedded)");
  }
  const bool id_given = !client_id.is_none() || !num_clients.is_none();
  if (id_given) {
    const int64_t n = num_clients.is_none() ? 1 : num_clients.cast<int64_t>();
    const int64_t id = client_id.is_none() ? 0 : client_id.cast<int64_t>();
    CheckArg(n >= 1, "num_clients must be >= 1");
    CheckArg(id >= 0 && id < n, "client_id must be in [0, num_clients)");
    CheckArg(!o.servers.empty() || n == 1,
             "client_id/num_clients need servers (without servers the run is embedded, one "
             "process)");
    o.client_id = static_cast<ClientId>(id);
    o.num_clients = static_cast<uint32_t>(n);
  } else if (!o.servers.empty()) {
    ClientIdFromEnvironment(&o);  // else 0 of 1
  }
  if (!token_file.is_none()) o.token = ReadToken(token_file.cast<std::string>());
  if (!memory_mb.is_none()) {
    const int64_t mb = memory_mb.cast<int64_t>();
    CheckArg(mb >= 1, "memory_mb must be >= 1");
    o.cache_mb = static_cast<size_t>(mb);
  }
  return o;
}

InitKind ParseInit(const py::object& init, Initializer* out) {
  if (py::isinstance<py::str>(init)) {
    const std::string name = init.cast<std::string>();
    CheckArg(name == "zeros",
             "init must be \"zeros\", (\"uniform\", lo, hi, seed) or "
             "(\"normal\", mean, std, seed), not \"" +
                 name + "\"");
    out->kind = InitKind::kZeros;
    return out->kind;
  }
  py::tuple t;
  try {
    t = py::tuple(init);
  } catch (const py::error_already_set&) {
    ThrowStatus(Status::InvalidArgument("init must be a string or a tuple"));
  }
  CheckArg(t.size() == 4 && py::isinstance<py::str>(t[0]),
           "init must be \"zeros\", (\"uniform\", lo, hi, seed) or (\"normal\", mean, std, seed)");
  Check(ParseInitKind(t[0].cast<std::string>(), &out->kind).WithPrefix("init"));
  out->a = t[1].cast<double>();
  out->b = t[2].cast<double>();
  out->seed = t[3].cast<uint64_t>();
  return out->kind;
}

py::dict SchemaDict(const TableSchema& s) {
  py::dict d;
  d["name"] = s.name;
  d["id"] = s.id;
  d["kind"] = std::string(RowKindName(s.kind));
  d["dtype"] = DtypeOf(s.type);
  d["width"] = s.width;
  d["consistency"] = std::string(ConsistencyName(s.consistency));
  d["staleness"] = s.staleness;
  d["value_bound"] = s.value_bound;
  d["init"] = std::string(InitKindName(s.init.kind));
  return d;
}

py::dict StatsDict(const PyClient& c) {
  const ClientStats s = c.client->Stats();
  py::dict tables;
  for (const TableStats& t : s.tables) {
    py::dict d;
    d["staleness_bound"] = t.staleness_bound;
    d["staleness_hist"] = t.staleness_hist;
    d["staleness_mean"] = t.staleness_mean;
    d["staleness_p99"] = t.staleness_p99;
    d["reads"] = t.reads;
    d["reads_cache_hit"] = t.reads_cache_hit;
    d["reads_blocked"] = t.reads_blocked;
    d["rows_fetched"] = t.rows_fetched;
    d["rows_initialized"] = t.rows_initialized;
    d["pushes_applied"] = t.pushes_applied;
    d["evictions"] = t.evictions;
    d["incs"] = t.incs;
    tables[py::str(t.name)] = d;
  }
  py::dict out;
  out["tables"] = tables;
  out["get_blocked_seconds"] = s.get_blocked_seconds;
  out["clock_blocked_seconds"] = s.clock_blocked_seconds;
  out["bytes_sent"] = s.bytes_sent;
  out["bytes_received"] = s.bytes_received;
  out["rows_sent"] = s.rows_sent;
  out["rows_received"] = s.rows_received;
  out["batches_sent"] = s.batches_sent;
  out["batches_resent"] = s.batches_resent;
  py::dict memory;
  memory["cache_bytes"] = s.cache_bytes;
  memory["cache_budget_bytes"] = s.cache_budget_bytes;  // cache_mb as resolved
  out["memory"] = memory;
  return out;
}

PyClient& Live(const std::shared_ptr<PyClient>& c) {
  if (!c->client) ThrowStatus(Status::FailedPrecondition("the client is closed"));
  return *c;
}

}  // namespace

void RegisterClient(py::module_& m) {
  py::class_<PyTable>(m, "Table", "A table handle (from Client.create_table or Client.table).")
      .def_property_readonly("name", [](const PyTable& t) { return t.table.name(); })
      .def_property_readonly("id", [](const PyTable& t) { return t.table.id(); })
      .def_property_readonly("width", [](const PyTable& t) { return t.table.schema().width; })
      .def_property_readonly("dtype",
                             [](const PyTable& t) { return DtypeOf(t.table.schema().type); })
      .def_property_readonly(
          "kind", [](const PyTable& t) { return std::string(RowKindName(t.table.schema().kind)); })
      .def_property_readonly("consistency",
                             [](const PyTable& t) {
                               return std::string(ConsistencyName(t.table.schema().consistency));
                             })
      .def_property_readonly("staleness",
                             [](const PyTable& t) { return t.table.schema().staleness; })
      .def("schema", [](const PyTable& t) { return SchemaDict(t.table.schema()); })
      .def("__repr__", [](const PyTable& t) {
        return "<pacedb.Table " + DescribeSchema(t.table.schema()) + ">";
      });

  py::class_<PyClient, std::shared_ptr<PyClient>>(m, "Client", R"doc(
A PaceDB client: embedded (an in-process shard on data_dir) when servers is
None, else connected to the shard servers "host:port,..." (a str or a list).
client_id/num_clients default to the launcher's environment
(OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SLURM_PROCID/NTASKS), else 0 of 1.
token_file holds the job's shared secret (as given to paced). memory_mb is the
client's row cache budget in MiB (ClientOptions::cache_mb; default 1024).
log_level, if given, is pacedb.set_log_level(log_level) before opening
(process-wide).
Safe to use from many threads; each thread gets its own worker().)doc")
      .def(py::init([](const py::object& servers, const std::string& data_dir,
                       const py::object& client_id, const py::object& num_clients,
                       const py::object& token_file, const py::object& memory_mb,
                       const py::object& log_level) {
             if (!log_level.is_none()) SetLogLevel(ParseLogLevel(log_level));
             ClientOptions o =
                 MakeOptions(servers, data_dir, client_id, num_clients, token_file, memory_mb);
             auto c = std::make_shared<PyClient>();
             c->data_dir = o.data_dir;
             c->cache_mb = o.cache_mb;
             Status s;
             {
               py::gil_scoped_release release;
               s = Client::Open(o, &c->client);
             }
             Check(s);
             return c;
           }),
           py::arg("servers") = py::none(), py::arg("data_dir") = "./pace-data",
           py::arg("client_id") = py::none(), py::arg("num_clients") = py::none(),
           py::arg("token_file") = py::none(), py::arg("memory_mb") = py::none(),
           py::arg("log_level") = py::none())
      .def(
          "create_table",
          [](const std::shared_ptr<PyClient>& c, const std::string& name, int64_t width,
             const py::object& dtype, const std::string& kind, const std::string& consistency,
             const py::object& staleness, const py::object& init, double value_bound) {
            TableSchema s;
            s.name = name;
            CheckArg(width >= 0 && width <= UINT32_MAX, "width must be in [0, 2^32)");
            s.width = static_cast<uint32_t>(width);
            s.type = ElementTypeOf(dtype);
            Check(ParseRowKind(kind, &s.kind).WithPrefix("kind"));
            Check(ParseConsistency(consistency, &s.consistency).WithPrefix("consistency"));
            if (staleness.is_none()) {
              s.staleness = s.consistency == Consistency::kBsp ? 0 : 1;
            } else {
              const int64_t st = staleness.cast<int64_t>();
              CheckArg(st >= 0 && st <= UINT32_MAX, "staleness must be >= 0");
              s.staleness = static_cast<uint32_t>(st);
            }
            ParseInit(init, &s.init);
            s.value_bound = value_bound;
            Check(ValidateSchema(s));
            PyTable t{c, Table()};
            Status st;
            {
              py::gil_scoped_release release;
              st = Live(c).client->CreateTable(s, &t.table);
            }
            Check(st);
            return t;
          },
          py::arg("name"), py::arg("width"), py::arg("dtype") = py::dtype::of<float>(),
          py::arg("kind") = "dense", py::arg("consistency") = "essp",
          py::arg("staleness") = py::none(), py::arg("init") = "zeros",
          py::arg("value_bound") = 0.0,
          "Creates the table, or opens it if it exists with the same schema (AlreadyExistsError "
          "if not). staleness defaults to 1 (0 for bsp). consistency='vap' needs value_bound > 0 "
          "(the value bound v; docs/design.md).")
      .def(
          "table",
          [](const std::shared_ptr<PyClient>& c, const std::string& name) {
            PyTable t{c, Table()};
            Status s;
            {
              py::gil_scoped_release release;
              s = Live(c).client->OpenTable(name, &t.table);
            }
            Check(s);
            return t;
          },
          py::arg("name"), "Opens an existing table (NotFoundError if unknown).")
      .def(
          "tables",
          [](const std::shared_ptr<PyClient>& c) {
            std::vector<TableSchema> list;
            Status s;
            {
              py::gil_scoped_release release;
              s = Live(c).client->ListTables(&list);
            }
            Check(s);
            py::list out;
            for (const TableSchema& t : list) out.append(SchemaDict(t));
            return out;
          },
          "The tables as a list of schema dicts.")
      .def(
          "worker",
          [](const std::shared_ptr<PyClient>& c) {
            std::unique_ptr<Worker> w;
            Check(Live(c).client->RegisterWorker(&w));
            return std::make_unique<PyWorker>(c, std::move(w));
          },
          "Registers the calling thread as a worker (one per thread).")
      .def(
          "global_barrier",
          [](const std::shared_ptr<PyClient>& c) {
            PyWorker* w = nullptr;
            {
              MutexLock l(&c->mu);
              auto it = c->thread_workers.find(std::this_thread::get_id());
              if (it != c->thread_workers.end()) w = it->second;
            }
            if (w == nullptr) {
              ThrowStatus(Status::FailedPrecondition(
                  "global_barrier: this thread has no worker (call client.worker() first)"));
            }
            PyWorker::Use use(w);
            Status s;
            {
              py::gil_scoped_release release;
              s = use->GlobalBarrier();
            }
            Check(s);
          },
          "Blocks until every shard has applied every client's updates of all clocks before "
          "the calling thread's worker's clock (the same as worker.global_barrier()).")
      .def(
          "laggards",
          [](const std::shared_ptr<PyClient>& c) {
            std::vector<ClientLag> lags;
            Status s;
            {
              py::gil_scoped_release release;
              s = Live(c).client->Laggards(&lags);
            }
            Check(s);
            py::list out;
            for (const ClientLag& l : lags) {
              py::dict d;
              d["client"] = l.client;
              d["applied"] = l.applied;
              d["connected"] = l.connected;
              out.append(d);
            }
            return out;
          },
          "The client processes that hold a shard clock back, as dicts {client, applied, "
          "connected}: on some shard their applied clock is the least while another client's "
          "is ahead. Empty when nothing is held back. One round trip per shard; thread-safe.")
      .def(
          "flush",
          [](const std::shared_ptr<PyClient>& c) {
            Status s;
            {
              py::gil_scoped_release release;
              s = Live(c).client->Flush();
            }
            Check(s);
          },
          "Blocks until every batch sent so far is acknowledged.")
      .def("stats", [](const std::shared_ptr<PyClient>& c) { return StatsDict(Live(c)); })
      .def("reset_stats", [](const std::shared_ptr<PyClient>& c) { Live(c).client->ResetStats(); })
      .def_property_readonly(
          "client_id",
          [](const std::shared_ptr<PyClient>& c) { return Live(c).client->client_id(); })
      .def_property_readonly(
          "num_clients",
          [](const std::shared_ptr<PyClient>& c) { return Live(c).client->num_clients(); })
      .def_property_readonly(
          "num_shards",
          [](const std::shared_ptr<PyClient>& c) { return Live(c).client->num_shards(); })
      .def_property_readonly(
          "embedded", [](const std::shared_ptr<PyClient>& c) { return Live(c).client->embedded(); })
      .def_property_readonly(
          "start_clock",
          [](const std::shared_ptr<PyClient>& c) { return Live(c).client->start_clock(); })
      .def_property_readonly("data_dir",
                             [](const std::shared_ptr<PyClient>& c) { return c->data_dir; })
      .def("__enter__", [](const std::shared_ptr<PyClient>& c) { return c; })
      .def("__exit__", [](const std::shared_ptr<PyClient>& c, const py::args&) {
        if (!c->client) return;
        Status s;
        {
          py::gil_scoped_release release;
          s = c->client->Flush();
        }
        Check(s);
      });
}

}  // namespace python
}  // namespace pace
