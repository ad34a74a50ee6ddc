// The driver of the protocol simulation: configuration, transport, the run
// (consistency/sim/world.h).
#include "consistency/sim/simulation.h"

#include <sstream>

#include "consistency/sim/world.h"

namespace pace::sim {
namespace internal {

// --- configuration -------------------------------------------------------------

void World::Configure() {
  const uint32_t num_shards = static_cast<uint32_t>(rng_.Between(1, 3));
  const uint32_t num_clients = static_cast<uint32_t>(rng_.Between(1, 3));
  max_delay_ = rng_.Between(1, 20);
  clocks_ = rng_.Between(2, 6);
  group_publish_ = rng_.Chance(0.5);
  evict_chance_ = rng_.Chance(0.5) ? 0.0 : 0.15;
  read_fail_chance_ = rng_.Chance(0.7) ? 0.0 : 0.2;
  part_chance_ = rng_.Chance(0.5) ? 0.0 : (rng_.Chance(0.5) ? 0.2 : 0.6);
  const uint32_t num_tables = static_cast<uint32_t>(rng_.Between(1, 2));
  static constexpr Consistency kModels[] = {Consistency::kBsp, Consistency::kSsp,
                                            Consistency::kEssp, Consistency::kAsync,
                                            Consistency::kVap};
  std::ostringstream cfg;
  cfg << num_shards << " shard(s), " << num_clients << " client(s), " << clocks_
      << " clocks, delay<=" << max_delay_ << (group_publish_ ? ", group commit" : "")
      << (evict_chance_ > 0 ? ", evictions" : "")
      << (read_fail_chance_ > 0 ? ", failing push reads" : "")
      << (part_chance_ > 0 ? ", clocks in parts" : "") << ", tables:";
  for (uint32_t t = 0; t < num_tables; ++t) {
    TableSpec s;
    s.id = t + 1;
    s.consistency = kModels[rng_.Below(5)];
    s.staleness = ReadPolicy::BoundFor(s.consistency, rng_.Between(0, 3));
    // Deltas are +-[1, 1000]: some bounds hold one, some several.
    if (s.consistency == Consistency::kVap) s.value_bound = 500.0 * rng_.Between(1, 6);
    s.rows = static_cast<uint32_t>(rng_.Between(1, 5));
    tables_.push_back(s);
    cfg << " " << ConsistencyName(s.consistency) << " s=" << s.staleness;
    if (s.value_bound > 0) cfg << " v=" << s.value_bound;
    cfg << " x" << s.rows;
  }
  for (uint32_t k = 0; k < num_shards; ++k) {
    shards_.push_back(std::make_unique<Shard>(num_clients, &rng_, read_fail_chance_));
    shards_.back()->engine =
        std::make_unique<ShardEngine>(ShardEngineOptions{}, shards_.back()->store.applied, 0);
  }
  conns_.resize(size_t{num_clients} * num_shards);
  clients_.resize(num_clients);
  for (ClientId c = 0; c < num_clients; ++c) {
    Client& cl = clients_[c];
    cl.id = c;
    cl.shards.resize(num_shards);
    cl.workers.resize(static_cast<size_t>(rng_.Between(1, 2)));
    for (Worker& w : cl.workers) w.script = MakeScript();
    cfg << (c == 0 ? ", workers per client:" : "") << " " << cl.workers.size();
  }
  // Faults at random moments of the expected run.
  const int64_t horizon = clocks_ * (max_delay_ * 4 + 10);
  const int64_t faults = rng_.Between(0, 4);
  cfg << ", faults:";
  for (int64_t i = 0; i < faults; ++i) {
    const int64_t t = rng_.Between(1, horizon);
    const uint32_t k = static_cast<uint32_t>(rng_.Below(num_shards));
    if (rng_.Chance(0.4)) {
      cfg << " crash(shard " << k << " @" << t << ")";
      At(t, [this, k] { Crash(k); });
    } else {
      const ClientId c = static_cast<ClientId>(rng_.Below(num_clients));
      cfg << " disconnect(client " << c << ", shard " << k << " @" << t << ")";
      At(t, [this, c, k] { Disconnect(c, k); });
    }
  }
  // Client processes killed: most right after they sent a part of a clock
  // (so that shards hold parts of a clock whose process is gone), some at a
  // random moment.
  kill_after_parts_.resize(num_clients);
  const int64_t kills = part_chance_ > 0 && rng_.Chance(0.5) ? rng_.Between(1, 2) : 0;
  for (int64_t i = 0; i < kills; ++i) {
    const ClientId c = static_cast<ClientId>(rng_.Below(num_clients));
    const int64_t n = rng_.Between(1, 4);
    cfg << " kill(client " << c << " after part " << n << ")";
    kill_after_parts_[c].insert(n);
  }
  if (rng_.Chance(0.1)) {
    const int64_t t = rng_.Between(1, horizon);
    const ClientId c = static_cast<ClientId>(rng_.Below(num_clients));
    cfg << " kill(client " << c << " @" << t << ")";
    At(t, [this, c] { KillClient(c); });
  }
  result_.config = cfg.str();
}

std::vector<std::vector<Op>> World::MakeScript() {
  std::vector<std::vector<Op>> script;
  for (int64_t clock = 0; clock <= clocks_; ++clock) {
    std::vector<Op> ops;
    const int64_t n = clock == clocks_ ? 0 : rng_.Between(0, 4);
    for (int64_t i = 0; i < n; ++i) {
      const TableSpec& t = tables_[rng_.Below(static_cast<int64_t>(tables_.size()))];
      Op op;
      op.is_get = rng_.Chance(0.5);
      op.key = RowKey{t.id, static_cast<uint64_t>(rng_.Below(t.rows))};
      op.delta = rng_.Between(1, 1000) * (rng_.Chance(0.5) ? 1 : -1);
      ops.push_back(op);
    }
    if (clock == clocks_) {  // the last clock reads every row
      for (const TableSpec& t : tables_) {
        for (uint64_t r = 0; r < t.rows; ++r) ops.push_back(Op{true, RowKey{t.id, r}, 0});
      }
    }
    script.push_back(std::move(ops));
  }
  return script;
}

// --- transport -------------------------------------------------------------------

void World::SendToShard(ClientId c, uint32_t k, ToShard m) {
  Connection& conn = Conn(c, k);
  if (!conn.up) return;  // lost; the client re-sends what matters after a reconnect
  const int64_t t = std::max(now_ + Delay(), conn.last_to_shard);
  conn.last_to_shard = t;
  const uint64_t epoch = conn.epoch;
  At(t, [this, c, k, epoch, m = std::move(m)]() mutable {
    if (Conn(c, k).epoch != epoch) return;  // the connection died meanwhile
    ShardReceive(k, c, epoch, std::move(m));
  });
}

void World::SendToClient(ClientId c, uint32_t k, uint64_t epoch, ToClient m) {
  Connection& conn = Conn(c, k);
  if (!conn.up || conn.epoch != epoch) return;
  const int64_t t = std::max(now_ + Delay(), conn.last_to_client);
  conn.last_to_client = t;
  At(t, [this, c, k, epoch, m = std::move(m)]() mutable {
    if (Conn(c, k).epoch != epoch) return;
    ClientReceive(c, k, std::move(m));
  });
}

void World::Connect(ClientId c, uint32_t k) {
  Connection& conn = Conn(c, k);
  Shard& sh = *shards_[k];
  Client& cl = clients_[c];
  // A restart reconnects everyone; a new process connects when it starts.
  if (conn.up || sh.engine == nullptr || !cl.alive) return;
  if (!AdmitHello(c, k)) {
    At(now_ + Delay(), [this, c, k] { Connect(c, k); });  // the client retries its Hello
    return;
  }
  conn.up = true;
  ++conn.epoch;
  conn.peer = sh.next_peer++;
  conn.incarnation = IncarnationOf(cl.process);
  // Even clients take rows without a record as absent (and compute their
  // initial value, here the empty provenance), odd ones get their bytes.
  sh.engine->Connect(conn.peer, std::make_shared<SimPeer>(this, c, k, conn.epoch),
                     PeerInfo{true, c, /*absent_rows=*/c % 2 == 0});
  Trace("connect client " + std::to_string(c) + " (process " + std::to_string(cl.process) +
        ") shard " + std::to_string(k));
  if (!cl.shards[k].welcomed) FirstWelcome(cl, k);
  ClientReconnected(cl, k);
}

void World::DropConnection(ClientId c, uint32_t k) {
  Connection& conn = Conn(c, k);
  if (!conn.up) return;
  conn.up = false;
  ++conn.epoch;  // drops what is in flight both ways
  if (shards_[k]->engine != nullptr) shards_[k]->engine->Disconnect(conn.peer);
  clients_[c].shards[k].connected = false;
}

void World::Disconnect(ClientId c, uint32_t k) {
  if (!Conn(c, k).up) return;
  ++result_.disconnects;
  Trace("disconnect client " + std::to_string(c) + " shard " + std::to_string(k));
  DropConnection(c, k);
  At(now_ + Delay(), [this, c, k] { Connect(c, k); });
}
// --- the run ------------------------------------------------------------------------

bool World::Finished() const {
  for (const Client& cl : clients_) {
    if (!cl.alive || !cl.started) return false;
    for (const Worker& w : cl.workers) {
      if (!w.done) return false;
    }
    for (const ShardView& sh : cl.shards) {
      if (!sh.unacked.empty()) return false;
    }
  }
  return true;
}

void World::FinalChecks() {
  for (uint32_t k = 0; k < shards_.size(); ++k) {
    const FakeStore& store = shards_[k]->store;
    for (ClientId c = 0; c < clients_.size(); ++c) {
      if (store.applied[c] != clocks_ || store.parts[c] != 0) {
        return Fail("shard " + std::to_string(k) + " ends with applied clock " +
                    std::to_string(store.applied[c]) + " for client " + std::to_string(c));
      }
      if (!store.undo_records[c].empty() || store.undo[c].kept) {
        return Fail("shard " + std::to_string(k) + " ends with undo records of client " +
                    std::to_string(c) + " (its clocks are complete)");
      }
    }
  }
  // Every row: exactly the deltas of each clock of each client, once, from
  // the process that completed that clock at the row's shard.
  for (const auto& [key, truth] : ledger_) {
    const FakeStore& store = shards_[ShardOfKey(key)]->store;
    auto it = store.committed.find(key);
    int64_t total = 0;
    Provenance want;
    for (const auto& [c, d] : truth) {
      if (dropped_.count({key, c}) != 0) continue;
      total += d;
      want.push_back(c);
    }
    std::map<std::pair<uint32_t, ClockT>, uint32_t> process_of;
    for (const Contribution& c : want) {
      auto [at, fresh] =
          process_of.emplace(std::make_pair(c.first, ClockOf(c.second)), ProcessOf(c.second));
      if (!fresh && at->second != ProcessOf(c.second)) {
        return Fail("the ground truth of row " + std::to_string(key.table) + "/" +
                    std::to_string(key.row) + " holds client " + std::to_string(c.first) +
                    "'s clock " + std::to_string(ClockOf(c.second)) + " from two processes");
      }
    }
    Provenance have = it == store.committed.end() ? Provenance() : it->second.prov;
    std::sort(have.begin(), have.end());
    const int64_t value = it == store.committed.end() ? 0 : it->second.value;
    if (have != want || value != total) {
      return Fail("row " + std::to_string(key.table) + "/" + std::to_string(key.row) +
                  " ends with " + std::to_string(value) + " from " + std::to_string(have.size()) +
                  " batch(es), expected exactly " + std::to_string(total) + " from " +
                  std::to_string(want.size()));
    }
  }
}

SimResult World::Run() {
  Configure();
  for (ClientId c = 0; c < clients_.size(); ++c) {
    for (uint32_t k = 0; k < shards_.size(); ++k) Connect(c, k);
  }
  while (result_.ok && !events_.empty() && !Finished()) {
    if (++result_.events > options_.max_events) {
      Fail("no end after " + std::to_string(options_.max_events) + " events (livelock?)");
      break;
    }
    Event ev = std::move(const_cast<Event&>(events_.top()));
    events_.pop();
    now_ = ev.time;
    ev.fn();
    // The shard's retry timer for pushes that could not read their rows.
    for (uint32_t k = 0; k < shards_.size(); ++k) {
      Shard& sh = *shards_[k];
      if (sh.engine == nullptr || !sh.engine->push_retry_pending() || sh.retry_scheduled) continue;
      sh.retry_scheduled = true;
      const uint64_t inc = sh.incarnation;
      At(now_ + max_delay_, [this, k, inc] {
        Shard& s = *shards_[k];
        if (s.incarnation != inc) return;
        s.retry_scheduled = false;
        // On the writer: not between a publish's plan and its sends.
        if (s.engine != nullptr && !s.publishing) s.engine->RetryPushes(s.store);
      });
    }
  }
  if (result_.ok && !Finished()) {
    std::ostringstream why;
    why << "deadlock: nothing left to happen;";
    for (const Client& cl : clients_) {
      for (const Worker& w : cl.workers) {
        why << " client " << cl.id << " worker at clock " << w.clock
            << (w.blocked ? " blocked" : "") << (w.done ? " done" : "");
      }
    }
    Fail(why.str());
  }
  if (result_.ok) FinalChecks();
  return result_;
}

}  // namespace internal

SimResult RunSchedule(uint64_t seed, const SimOptions& options) {
  internal::World w(seed, options);
  return w.Run();
}

}  // namespace pace::sim
