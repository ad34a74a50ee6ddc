#include "consistency/sim/simulation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <sstream>
#include <utility>
#include <variant>
#include <vector>

#include "common/clock.h"
#include "common/schema.h"
#include "consistency/batch_rule.h"
#include "consistency/client_engine.h"
#include "consistency/read_policy.h"
#include "consistency/shard_engine.h"
#include "consistency/value_bound.h"

namespace pace::sim {

namespace {

// splitmix64: small, fast, and the same on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); 0 when n == 0.
  int64_t Below(int64_t n) { return n <= 0 ? 0 : static_cast<int64_t>(Next() % uint64_t(n)); }
  int64_t Between(int64_t lo, int64_t hi) { return lo + Below(hi - lo + 1); }
  bool Chance(double p) { return static_cast<double>(Next() >> 11) * 0x1.0p-53 < p; }

 private:
  uint64_t s_;
};

// (client, Stamp(process, clock, part)): one coalesced batch's (or Apply
// part's) contribution to a row, from the client's process `process` (0, 1,
// ...: a client killed and started again is a new process that re-runs its
// clocks with other deltas). A clock may be sent in parts
// (docs/wire-protocol.md, "Apply parts"); kOpenPart stands for a client's own
// deltas not sealed into a part yet.
using Contribution = std::pair<uint32_t, int64_t>;
using Provenance = std::vector<Contribution>;
constexpr int64_t kPartsPerClock = int64_t{1} << 20;
constexpr int64_t kClocksPerProcess = int64_t{1} << 20;
constexpr uint32_t kOpenPart = kPartsPerClock - 1;
int64_t Stamp(uint32_t process, ClockT clock, uint32_t part) {
  return (process * kClocksPerProcess + clock) * kPartsPerClock + part;
}
ClockT ClockOf(int64_t stamp) { return (stamp / kPartsPerClock) % kClocksPerProcess; }
uint32_t ProcessOf(int64_t stamp) {
  return static_cast<uint32_t>(stamp / kPartsPerClock / kClocksPerProcess);
}
std::string DescribeStamp(int64_t stamp) {
  const int64_t part = stamp % kPartsPerClock;
  return "clock " + std::to_string(ClockOf(stamp)) +
         (part == kOpenPart ? " (open)" : " part " + std::to_string(part)) + " of process " +
         std::to_string(ProcessOf(stamp));
}
// The Hello incarnation of a client's process (nonzero, as the real client's).
uint64_t IncarnationOf(uint32_t process) { return process + 1; }
uint32_t ProcessOfIncarnation(uint64_t incarnation) {
  return static_cast<uint32_t>(incarnation - 1);
}

// A row's bytes in the simulation: its i64 value, then its provenance.
std::string EncodeRow(int64_t value, const Provenance& prov) {
  std::string out(sizeof(int64_t) * (1 + 2 * prov.size()), '\0');
  char* p = out.data();
  std::memcpy(p, &value, 8);
  p += 8;
  for (const Contribution& c : prov) {
    const int64_t client = c.first;
    std::memcpy(p, &client, 8);
    std::memcpy(p + 8, &c.second, 8);
    p += 16;
  }
  return out;
}

bool DecodeRow(const std::string& bytes, int64_t* value, Provenance* prov) {
  if (bytes.size() < 8 || (bytes.size() - 8) % 16 != 0) return false;
  const char* p = bytes.data();
  std::memcpy(value, p, 8);
  prov->clear();
  for (size_t off = 8; off < bytes.size(); off += 16) {
    int64_t client, clock;
    std::memcpy(&client, p + off, 8);
    std::memcpy(&clock, p + off + 8, 8);
    prov->emplace_back(static_cast<uint32_t>(client), clock);
  }
  return true;
}

struct ApplyMsg {
  ClockT clock = 0;
  std::vector<std::pair<RowKey, int64_t>> deltas;
  uint32_t part = 0;
  bool more = false;  // parts of this clock follow
};
struct UnsubscribeMsg {
  uint32_t table = 0;
  std::vector<uint64_t> rows;
};
using ToShard = std::variant<ReadRequest, ApplyMsg, UnsubscribeMsg>;

struct ReadErrorMsg {
  uint64_t req_id = 0;
  std::string why;
};
struct PushDoneMsg {
  Version version = 0;
  ClockT applied = 0;
};
struct AckMsg {
  ClockT clock = 0;
  bool duplicate = false;
  uint32_t part = 0;
};
using ToClient = std::variant<ReadAnswer, ReadErrorMsg, PushBatch, PushDoneMsg, AckMsg>;

struct TableSpec {
  uint32_t id = 0;
  Consistency consistency = Consistency::kSsp;
  int64_t staleness = 0;
  double value_bound = 0;  // vap
  uint32_t rows = 0;
};

struct Op {
  bool is_get = false;
  RowKey key;
  int64_t delta = 0;
};

class World;

// ---------------------------------------------------------------------------
// The shard: the real engine over an in-memory store.

class FakeStore : public RowsView {
 public:
  struct Row {
    int64_t value = 0;
    Provenance prov;
  };
  // The undo record of one part of an incomplete clock (as the store's
  // UNDO-<client>-<part> file): the deltas it applied, and its contribution.
  struct UndoRecord {
    std::vector<std::pair<RowKey, int64_t>> deltas;
    Contribution contribution;
  };
  FakeStore(uint32_t num_clients, Rng* rng, double fail_chance)
      : applied(num_clients, 0),
        parts(num_clients, 0),
        undo(num_clients),
        undo_records(num_clients),
        rng_(rng),
        fail_chance_(fail_chance) {}
  Status ReadRows(uint32_t table, const std::vector<uint64_t>& rows,
                  std::vector<std::string>* values) const override {
    values->clear();
    // Reads of several rows (pushes: the simulated clients read one row per
    // Read, and a client fails on a read error) sometimes fail, as a disk
    // may: the engine must then withhold PushDone and retry.
    if (rows.size() > 1 && fail_chance_ > 0 && rng_->Chance(fail_chance_)) {
      return Status::IOError("injected read failure");
    }
    for (uint64_t r : rows) {
      auto it = committed.find(RowKey{table, r});
      values->push_back(it == committed.end() ? EncodeRow(0, {})
                                              : EncodeRow(it->second.value, it->second.prov));
    }
    return Status::OK();
  }

  // A row without a record (no batch ever committed a delta to it) is
  // absent, as the real store says for a client that computes initializers.
  Status ReadRowsOrAbsent(uint32_t table, const std::vector<uint64_t>& rows,
                          std::vector<std::string>* values,
                          std::vector<uint8_t>* absent) const override {
    RETURN_IF_ERROR(ReadRows(table, rows, values));
    absent->clear();
    for (size_t i = 0; i < rows.size(); ++i) {
      const bool none = committed.count(RowKey{table, rows[i]}) == 0;
      absent->push_back(none ? 1 : 0);
      if (none) (*values)[i].clear();
    }
    return Status::OK();
  }

  Version ShardClock() const override { return *std::min_element(applied.begin(), applied.end()); }
  ClockT AppliedClock(ClientId c) const override { return applied[c]; }
  uint32_t AppliedParts(ClientId c) const override { return parts[c]; }

  IncompleteClock IncompleteClockOf(ClientId c) const {
    return IncompleteClock{applied[c], parts[c], undo[c].kept, undo[c].incarnation};
  }

  // What survives a crash: the committed rows, the (applied clock, parts of
  // it applied) records, and the undo records of the parts.
  std::map<RowKey, Row> committed;
  std::vector<ClockT> applied;
  std::vector<uint32_t> parts;
  std::vector<UndoState> undo;
  std::vector<std::vector<UndoRecord>> undo_records;  // [client][part]

 private:
  Rng* const rng_;
  const double fail_chance_;
};

struct Connection {
  uint64_t epoch = 0;
  bool up = false;
  PeerId peer = 0;
  uint64_t incarnation = 0;   // of the client process whose Hello opened it
  int64_t last_to_shard = 0;  // FIFO: a message never overtakes an earlier one
  int64_t last_to_client = 0;
};

// A writer task: a received batch, or (undo) taking back the parts of
// `client`'s incomplete clock for a new process `incarnation`.
struct QueuedBatch {
  ClientId client = 0;
  uint64_t epoch = 0;  // of the connection it came on (where the Ack goes)
  PeerId peer = 0;
  ApplyMsg msg;
  uint64_t incarnation = 0;  // of the process that sent it
  bool undo = false;
};

struct Shard {
  Shard(uint32_t num_clients, Rng* rng, double fail_chance)
      : store(num_clients, rng, fail_chance), served(num_clients, 0) {}
  FakeStore store;
  std::unique_ptr<ShardEngine> engine;  // null while crashed
  std::vector<QueuedBatch> queue;       // received, not yet committed
  uint64_t incarnation = 0;
  bool commit_scheduled = false;
  bool retry_scheduled = false;
  bool publishing = false;  // a publish is planned and not sent yet
  PeerId next_peer = 1;
  std::set<ClientId> undo_pending;  // an undo is queued for the writer
  // The last process of each client served since the shard started (0:
  // none), as ShardService's.
  std::vector<uint64_t> served;
};

// ---------------------------------------------------------------------------
// A client process: its cache entries, sent batches and workers. What it
// does with what shards send it is decided by consistency/client_engine.h,
// as in client/.

struct Pending {
  ClockT clock = 0;
  bool sealed = false;
  int64_t delta = 0;
  uint32_t part = 0;  // when sealed
};

struct Entry {
  bool has_value = false;
  int64_t value = 0;  // server value + sealed deltas of clocks >= applied
  Provenance prov;    // likewise
  Version version = 0;
  ClockT applied = 0;
  uint32_t applied_parts = 0;
  bool subscribed = false;
  int waiters = 0;  // workers blocked on this row
  std::vector<Version> reads_in_flight;
  std::vector<Pending> pending;

  bool ReadInFlightAtMost(Version need) const {
    for (Version m : reads_in_flight) {
      if (m <= need) return true;
    }
    return false;
  }
  void ReadAnswered(Version min_version) {
    auto it = std::find(reads_in_flight.begin(), reads_in_flight.end(), min_version);
    if (it != reads_in_flight.end()) reads_in_flight.erase(it);
  }
};

struct SentBatch {
  ClockT clock = 0;
  std::vector<std::pair<RowKey, int64_t>> deltas;
  uint32_t part = 0;
  bool more = false;
};

struct ShardView {
  std::deque<SentBatch> unacked;
  AppliedPosition acked;             // every batch before it is acknowledged
  AppliedPosition duplicates_below;  // a duplicate Ack at or above it: another sender
  Version pushed_version = 0;
  bool connected = false;
  std::map<uint64_t, ReadRequest> requests;  // in flight, re-sent after a reconnect
  // The first Welcome of the process: (applied clock, parts) of the client
  // at the shard when this process started.
  bool welcomed = false;
  AppliedPosition resume;
};

struct Worker {
  ClockT clock = 0;
  std::vector<std::vector<Op>> script;  // ops per clock; the last has no Clock()
  size_t op = 0;
  bool blocked = false;
  bool gated = false;  // ended a clock with a vap row over its bound in flight
  bool done = false;
};

struct Client {
  ClientId id = 0;
  uint32_t process = 0;  // 0, 1, ...: a kill ends one, a start begins the next
  bool alive = true;
  bool started = false;    // every shard welcomed this process: its workers run
  int64_t parts_sent = 0;  // by every process (the kill triggers count them)
  ClockT clock = 0;        // the process clock: the minimum of its workers' clocks
  uint32_t next_part = 0;  // parts of the process clock's batch sent so far
  std::vector<Worker> workers;
  uint64_t next_req = 1;
  std::map<RowKey, Entry> entries;
  std::vector<ShardView> shards;
  ValueBoundLedger vap;  // the real client's rule (client/vap_gate.h)
};

class SimPeer;

// ---------------------------------------------------------------------------

class World {
 public:
  World(uint64_t seed, const SimOptions& options) : rng_(seed), options_(options) {}
  SimResult Run();

  // --- transport -------------------------------------------------------------
  void SendToClient(ClientId c, uint32_t k, uint64_t epoch, ToClient m);
  void SendToShard(ClientId c, uint32_t k, ToShard m);

  void Trace(const std::string& s) {
    if (options_.trace != nullptr) *options_.trace += "t=" + std::to_string(now_) + " " + s + "\n";
  }
  bool Planted(PlantedBug bug) const { return options_.planted_bug == bug; }
  void Fail(const std::string& why) {
    if (result_.ok) {
      result_.ok = false;
      result_.error = "t=" + std::to_string(now_) + ": " + why;
    }
  }

 private:
  void Configure();
  void At(int64_t t, std::function<void()> fn) { events_.push(Event{t, seq_++, std::move(fn)}); }
  int64_t Delay() { return rng_.Between(1, max_delay_); }
  uint32_t ShardOfKey(const RowKey& k) const {
    return static_cast<uint32_t>((k.table * 7919u + k.row * 31u) % shards_.size());
  }
  Connection& Conn(ClientId c, uint32_t k) { return conns_[c * shards_.size() + k]; }
  const TableSpec& Table(uint32_t id) const { return tables_[id - 1]; }
  ReadPolicy Policy(uint32_t table) const {
    return ReadPolicy(Table(table).consistency, Table(table).staleness, Table(table).value_bound);
  }

  // --- shards ----------------------------------------------------------------
  void ShardReceive(uint32_t k, ClientId c, uint64_t epoch, ToShard m);
  // What the store did with one batch of a group (as ShardStore::ApplyBatches).
  struct Written {
    bool written = false;  // applied (else a duplicate, or refused)
    ClockT applied = 0;    // the (applied clock, parts) record it left
    uint32_t parts = 0;
    bool refused = false;  // a gap of a process that is gone: no Ack
  };
  // The writer: commits the queued batches up to the next undo task as one
  // group, or runs that task.
  void Commit(uint32_t k, uint64_t incarnation);
  Written WriteBatch(uint32_t k, const QueuedBatch& b);
  // Schedules the next Commit if anything is queued.
  void CommitLater(uint32_t k, uint64_t incarnation);
  // The writer's undo task at the head of shard k's queue (as
  // ShardService::UndoOnWriter: ShardStore::UndoIncompleteClock, then the
  // engine learns the parts and the rows to push again).
  void Undo(uint32_t k, const QueuedBatch& task);
  IncompleteClock IncompleteClockAt(uint32_t k, ClientId c) const {
    IncompleteClock ic = shards_[k]->store.IncompleteClockOf(c);
    if (Planted(PlantedBug::kNoUndo)) ic.undoable = false;  // as parts without records
    return ic;
  }
  // A Hello of client c's live process at shard k, as ShardService's: false
  // (Unavailable: the client retries) while HelloWaitsForWriter, with the
  // writer task queued once.
  bool AdmitHello(ClientId c, uint32_t k);
  void Crash(uint32_t k);
  void Restart(uint32_t k);
  void Connect(ClientId c, uint32_t k);
  void Disconnect(ClientId c, uint32_t k);
  void DropConnection(ClientId c, uint32_t k);

  // --- clients ---------------------------------------------------------------
  std::vector<std::vector<Op>> MakeScript();
  void ScheduleStep(ClientId c, size_t w, int64_t at);
  // SIGKILL of client c's process: its connections drop, its open deltas
  // and everything in flight are lost; a new process starts a little later.
  void KillClient(ClientId c);
  void StartProcess(ClientId c);
  // The first Welcome of shard k to the live process of `cl`.
  void FirstWelcome(Client& cl, uint32_t k);
  void ClientStep(ClientId c, size_t w);
  bool ClientGet(Client& cl, ClockT c, const RowKey& key);
  void ClientInc(Client& cl, ClockT c, const RowKey& key, int64_t delta);
  void WorkerClock(Client& cl, Worker& w);
  void CheckValueBound(const Client& cl);
  void SendBatches(Client& cl);
  // Seals the process clock's open deltas as its next part (more = true).
  void SendPart(Client& cl);
  void SealAndSend(Client& cl, uint32_t part, bool more);
  void RetryBlocked(ClientId c);
  void ClientEvict(Client& cl);
  void ClientReceive(ClientId c, uint32_t k, ToClient m);
  void InstallRow(Client& cl, uint32_t k, RowValue& row, Version v, ClockT a, uint32_t parts,
                  bool read, bool subscribe, Version read_min);
  void InstallValue(Client& cl, Entry& e, int64_t value, Provenance prov, Version v, ClockT a,
                    uint32_t parts);
  void SendRead(Client& cl, const RowKey& key, Entry& e, Version min_version, bool subscribe);
  void ClientAck(Client& cl, uint32_t k, const AckMsg& a);
  void ClientReconnected(Client& cl, uint32_t k);
  Version EffectiveVersion(const Client& cl, const RowKey& key, const Entry& e) const {
    return client_engine::EffectiveVersion(e.version, e.subscribed,
                                           cl.shards[ShardOfKey(key)].pushed_version);
  }
  void CheckRead(const Client& cl, ClockT c, const RowKey& key, const Entry& e, Version v);
  bool Finished() const;
  void FinalChecks();

  struct Event {
    int64_t time;
    uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };

  Rng rng_;
  const SimOptions options_;
  SimResult result_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t seq_ = 0;
  int64_t now_ = 0;

  // Shape of the schedule.
  int64_t max_delay_ = 10;
  int64_t clocks_ = 3;
  bool group_publish_ = false;
  double evict_chance_ = 0;
  double read_fail_chance_ = 0;
  double part_chance_ = 0;  // per Inc at the process clock: send a part now
  std::vector<TableSpec> tables_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<Client> clients_;
  std::vector<Connection> conns_;
  // Ground truth: every coalesced delta, by row and (client, Stamp(clock,
  // part)); deltas not sealed yet are at kOpenPart and move to their part
  // when it is sealed.
  std::map<RowKey, std::map<Contribution, int64_t>> ledger_;
  // Contributions of the ledger no store may hold at the end, nor a read
  // need (by row): what a killed process sent of a clock the row's shard had
  // not completed when the next process started (taken back, or lost), and
  // the next process's re-run of a clock that shard had completed (skipped
  // there as duplicates).
  std::set<std::pair<RowKey, Contribution>> dropped_;
  // Kill client c's process once it sent its n-th part (counted over its
  // processes), for each n of kill_after_parts_[c].
  std::vector<std::set<int64_t>> kill_after_parts_;
};

class SimPeer : public Peer {
 public:
  SimPeer(World* w, ClientId c, uint32_t k, uint64_t epoch) : w_(w), c_(c), k_(k), epoch_(epoch) {}
  void SendReadAnswer(ReadAnswer a) override { w_->SendToClient(c_, k_, epoch_, std::move(a)); }
  void SendReadError(uint64_t req_id, const Status& st) override {
    w_->SendToClient(c_, k_, epoch_, ReadErrorMsg{req_id, st.ToString()});
  }
  void SendPush(PushBatch p) override { w_->SendToClient(c_, k_, epoch_, std::move(p)); }
  void SendPushDone(Version v, ClockT a) override {  // no parts: it carries no values
    w_->SendToClient(c_, k_, epoch_, PushDoneMsg{v, a});
  }

 private:
  World* const w_;
  const ClientId c_;
  const uint32_t k_;
  const uint64_t epoch_;
};

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

bool World::AdmitHello(ClientId c, uint32_t k) {
  Shard& sh = *shards_[k];
  const uint64_t incarnation = IncarnationOf(clients_[c].process);
  const IncompleteClock ic = IncompleteClockAt(k, c);
  const bool pending = sh.undo_pending.count(c) != 0;
  const uint64_t served = Planted(PlantedBug::kServeBeforeTheWriter) ? 0 : sh.served[c];
  if (!pending && !HelloWaitsForWriter(ic, incarnation, served)) {
    sh.served[c] = incarnation;
    return true;
  }
  if (!pending) {
    Trace("shard " + std::to_string(k) + ": process " + std::to_string(clients_[c].process) +
          " of client " + std::to_string(c) + " waits for the writer (" + std::to_string(ic.parts) +
          " part(s) of clock " + std::to_string(ic.clock) + ")");
    sh.undo_pending.insert(c);
    QueuedBatch task;
    task.client = c;
    task.incarnation = incarnation;
    task.undo = true;
    sh.queue.push_back(std::move(task));
    if (!sh.commit_scheduled) {
      sh.commit_scheduled = true;
      const uint64_t inc = sh.incarnation;
      At(now_ + rng_.Between(0, max_delay_), [this, k, inc] { Commit(k, inc); });
    }
  }
  return false;
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

// --- shards ------------------------------------------------------------------------

void World::ShardReceive(uint32_t k, ClientId c, uint64_t epoch, ToShard m) {
  Shard& sh = *shards_[k];
  if (sh.engine == nullptr) return;
  const PeerId peer = Conn(c, k).peer;
  if (auto* r = std::get_if<ReadRequest>(&m)) {
    Trace("shard " + std::to_string(k) + " Read from " + std::to_string(c) + " min " +
          std::to_string(r->min_version) + " C=" + std::to_string(sh.engine->shard_clock()));
    if (sh.engine->AdmitRead(peer, r) != ShardEngine::ReadAction::kAnswer) return;
    if (rng_.Chance(0.5)) {
      ReadAnswer answer;
      Status st = ShardEngine::AnswerFromView(sh.engine->InfoOf(peer), *r, sh.store, &answer);
      return sh.engine->FinishRead(peer, *r, st, std::move(answer));
    }
    // On a "reader thread": later, from the state at that moment (read and
    // finished in one step, as the service holds its view until it sent).
    const uint64_t inc = sh.incarnation;
    At(now_ + rng_.Between(0, max_delay_), [this, k, inc, peer, read = std::move(*r)] {
      Shard& s = *shards_[k];
      if (s.incarnation != inc || s.engine == nullptr) return;
      ReadAnswer answer;
      Status st = ShardEngine::AnswerFromView(s.engine->InfoOf(peer), read, s.store, &answer);
      s.engine->FinishRead(peer, read, st, std::move(answer));
    });
    return;
  }
  if (auto* u = std::get_if<UnsubscribeMsg>(&m)) {
    return sh.engine->Unsubscribe(peer, u->table, u->rows);
  }
  auto& a = std::get<ApplyMsg>(m);
  Trace("shard " + std::to_string(k) + " queues clock " + std::to_string(a.clock) + " of client " +
        std::to_string(c));
  sh.queue.push_back(QueuedBatch{c, epoch, peer, std::move(a), Conn(c, k).incarnation});
  if (!sh.commit_scheduled) {
    sh.commit_scheduled = true;
    const uint64_t inc = sh.incarnation;
    At(now_ + rng_.Between(0, max_delay_), [this, k, inc] { Commit(k, inc); });
  }
}

void World::CommitLater(uint32_t k, uint64_t incarnation) {
  Shard& sh = *shards_[k];
  sh.commit_scheduled = !sh.queue.empty();
  if (sh.commit_scheduled) {
    At(now_ + rng_.Between(0, max_delay_), [this, k, incarnation] { Commit(k, incarnation); });
  }
}

World::Written World::WriteBatch(uint32_t k, const QueuedBatch& b) {
  Shard& sh = *shards_[k];
  ClockT& applied = sh.store.applied[b.client];
  uint32_t& parts = sh.store.parts[b.client];
  const ApplyMsg& m = b.msg;
  const AppliedPosition at{applied, parts};
  const BatchId id{m.clock, m.part, m.more};
  const BatchAdmission admission = ClassifyBatch(at, id);
  if (admission == BatchAdmission::kDuplicate) {
    if (m.clock == applied) ++result_.parts_skipped;
    return Written{};
  }
  if (admission == BatchAdmission::kGap &&
      b.incarnation != IncarnationOf(clients_[b.client].process)) {
    // Sent by a process that is gone, after parts of its clock were taken
    // back: refused (its session is closed), nothing applied.
    Trace("shard " + std::to_string(k) + " refuses clock " + std::to_string(m.clock) + " part " +
          std::to_string(m.part) + " of a dead process of client " + std::to_string(b.client));
    return Written{false, 0, 0, true};
  }
  if (admission == BatchAdmission::kGap) {
    Fail("shard " + std::to_string(k) + ": clock gap, batch " + std::to_string(m.clock) + " part " +
         std::to_string(m.part) + " of client " + std::to_string(b.client) +
         " with applied clock " + std::to_string(applied) + " and " + std::to_string(parts) +
         " part(s)");
    return Written{};
  }
  if (admission == BatchAdmission::kCompletesClock) {
    // Only a process that numbers its parts from 0 over parts another
    // process left cuts a clock into fewer parts than the shard has; a new
    // simulated process starts only after its shards took those back (or,
    // without undo records, numbers its parts after them).
    Fail("shard " + std::to_string(k) + ": last part " + std::to_string(m.part) + " of clock " +
         std::to_string(m.clock) + " of client " + std::to_string(b.client) + " below the " +
         std::to_string(parts) + " part(s) applied");
    return Written{};
  }
  const Contribution from{b.client, Stamp(ProcessOfIncarnation(b.incarnation), m.clock, m.part)};
  for (const auto& [key, d] : m.deltas) {
    FakeStore::Row& row = sh.store.committed[key];
    row.value += d;
    row.prov.push_back(from);
  }
  // The undo record of a part with more to come, in the same commit (as
  // ShardStore::Impl::NoteUndoLocked).
  UndoState& undo_state = sh.store.undo[b.client];
  undo_state = UndoStateAfter(undo_state, at, id, admission, b.incarnation);
  std::vector<FakeStore::UndoRecord>& records = sh.store.undo_records[b.client];
  if (!m.more) records.clear();
  if (m.more && undo_state.kept) records.push_back(FakeStore::UndoRecord{m.deltas, from});
  const AppliedPosition next = PositionAfter(at, id, admission);
  applied = next.clock;
  parts = next.parts;
  Trace("shard " + std::to_string(k) + " commits clock " + std::to_string(m.clock) + " part " +
        std::to_string(m.part) + (m.more ? " (more)" : "") + " of client " +
        std::to_string(b.client));
  return Written{true, applied, parts};
}

void World::Commit(uint32_t k, uint64_t incarnation) {
  Shard& sh = *shards_[k];
  if (sh.incarnation != incarnation || sh.engine == nullptr) return;
  if (!sh.queue.empty() && sh.queue.front().undo) {
    // A writer task of its own, after the groups before it were recorded.
    const QueuedBatch task = std::move(sh.queue.front());
    sh.queue.erase(sh.queue.begin());
    Undo(k, task);
    if (result_.ok) CommitLater(k, incarnation);
    return;
  }
  // The group: the batches up to the next undo task.
  auto group = std::make_shared<std::vector<QueuedBatch>>();
  auto undo =
      std::find_if(sh.queue.begin(), sh.queue.end(), [](const QueuedBatch& b) { return b.undo; });
  group->assign(std::make_move_iterator(sh.queue.begin()), std::make_move_iterator(undo));
  sh.queue.erase(sh.queue.begin(), undo);
  // Per batch: duplicate, or written (the store's state moves on), with the
  // (applied clock, parts) record it left (as ShardStore::ApplyBatches).
  auto written = std::make_shared<std::vector<Written>>();
  for (const QueuedBatch& b : *group) {
    written->push_back(WriteBatch(k, b));
    if (!result_.ok) return;
    const Written& w = written->back();
    if (w.written && !group_publish_) {
      // The old shard: write and bookkeeping of each batch in one step.
      for (const auto& [key, d] : b.msg.deltas) sh.engine->MarkChanged(b.peer, key);
      SendToClient(b.client, k, b.epoch, AckMsg{b.msg.clock, false, b.msg.part});
      sh.engine->RecordApplied(b.client, w.applied, now_, w.parts);
      sh.engine->Publish(sh.store);
    }
  }
  if (!group_publish_) {
    for (size_t i = 0; i < group->size(); ++i) {
      const QueuedBatch& b = (*group)[i];
      if (!(*written)[i].written && !(*written)[i].refused) {
        SendToClient(b.client, k, b.epoch, AckMsg{b.msg.clock, true, b.msg.part});
      }
    }
    CommitLater(k, incarnation);  // an undo task and what came after it
    return;
  }
  // Group commit: the group is durable and visible to reads now; the writer
  // records it (clocks, Acks, parked reads, pushes) a little later, while
  // reads keep being answered from the newer state.
  At(now_ + rng_.Between(0, max_delay_), [this, k, incarnation, group, written] {
    Shard& s = *shards_[k];
    if (s.incarnation != incarnation || s.engine == nullptr) return;
    for (size_t i = 0; i < group->size(); ++i) {
      const QueuedBatch& b = (*group)[i];
      const Written& w = (*written)[i];
      if (w.written) {
        for (const auto& [key, d] : b.msg.deltas) s.engine->MarkChanged(b.peer, key);
        s.engine->RecordApplied(b.client, w.applied, now_, w.parts);
      }
      if (!w.refused)
        SendToClient(b.client, k, b.epoch, AckMsg{b.msg.clock, !w.written, b.msg.part});
    }
    // The writer plans under its lock, then reads and sends a little later
    // (as the shard service, which reads with the lock released): reads,
    // subscriptions and disconnects may come in between; no commit does.
    auto plan = std::make_shared<PublishPlan>(s.engine->PlanPublish());
    s.publishing = true;
    At(now_ + rng_.Between(0, max_delay_), [this, k, incarnation, plan] {
      Shard& t = *shards_[k];
      if (t.incarnation != incarnation || t.engine == nullptr) return;
      ShardEngine::ReadPublish(t.store, plan.get());
      t.engine->FinishPublish(std::move(*plan));
      t.publishing = false;
      CommitLater(k, incarnation);
    });
  });
}

void World::Undo(uint32_t k, const QueuedBatch& task) {
  Shard& sh = *shards_[k];
  const ClientId c = task.client;
  sh.undo_pending.erase(c);
  sh.served[c] = task.incarnation;  // every batch of an earlier process is in
  const IncompleteClock ic = IncompleteClockAt(k, c);
  if (!NeedsUndo(ic, task.incarnation)) return;
  std::vector<FakeStore::UndoRecord>& records = sh.store.undo_records[c];
  if (records.size() != ic.parts) {
    return Fail("shard " + std::to_string(k) + " holds " + std::to_string(ic.parts) +
                " undoable part(s) of client " + std::to_string(c) + "'s clock " +
                std::to_string(ic.clock) + " but " + std::to_string(records.size()) +
                " undo record(s)");
  }
  const int rounds = Planted(PlantedBug::kUndoTwice) ? 2 : 1;
  std::set<RowKey> rows;
  for (int round = 0; round < rounds; ++round) {
    for (const FakeStore::UndoRecord& rec : records) {
      for (const auto& [key, d] : rec.deltas) {
        FakeStore::Row& row = sh.store.committed[key];
        row.value -= d;
        auto it = std::find(row.prov.begin(), row.prov.end(), rec.contribution);
        if (it != row.prov.end()) row.prov.erase(it);
        rows.insert(key);
      }
    }
  }
  result_.parts_undone += ic.parts;
  Trace("shard " + std::to_string(k) + " took back " + std::to_string(ic.parts) +
        " part(s) of clock " + std::to_string(ic.clock) + " of client " + std::to_string(c));
  records.clear();
  sh.store.parts[c] = 0;
  sh.store.undo[c] = UndoState{};
  // Subscribers hold values with the parts in them: the next push carries
  // the values without them.
  for (const RowKey& key : rows) sh.engine->MarkChanged(0, key);
  sh.engine->RecordApplied(c, ic.clock, now_, 0);
}

void World::Crash(uint32_t k) {
  Shard& sh = *shards_[k];
  if (sh.engine == nullptr) return;
  ++result_.crashes;
  Trace("crash shard " + std::to_string(k) + " losing " + std::to_string(sh.queue.size()) +
        " uncommitted batch(es)");
  for (ClientId c = 0; c < clients_.size(); ++c) DropConnection(c, k);
  sh.engine.reset();
  sh.queue.clear();
  sh.commit_scheduled = false;
  sh.retry_scheduled = false;
  sh.publishing = false;
  sh.undo_pending.clear();
  std::fill(sh.served.begin(), sh.served.end(), 0);
  ++sh.incarnation;
  At(now_ + Delay() * 2, [this, k] { Restart(k); });
}

void World::Restart(uint32_t k) {
  Shard& sh = *shards_[k];
  sh.engine =
      std::make_unique<ShardEngine>(ShardEngineOptions{}, sh.store.applied, now_, sh.store.parts);
  Trace("restart shard " + std::to_string(k));
  for (ClientId c = 0; c < clients_.size(); ++c) {
    At(now_ + Delay(), [this, c, k] { Connect(c, k); });
  }
}

// --- clients -----------------------------------------------------------------------

void World::ScheduleStep(ClientId c, size_t wi, int64_t at) {
  const uint32_t process = clients_[c].process;
  At(at, [this, c, wi, process] {
    const Client& cl = clients_[c];
    if (cl.alive && cl.process == process) ClientStep(c, wi);
  });
}

void World::KillClient(ClientId c) {
  Client& cl = clients_[c];
  bool done = cl.alive && cl.started;
  for (const Worker& w : cl.workers) done = done && w.done;
  if (!cl.alive || !cl.started || done) return;
  ++result_.client_kills;
  if (cl.next_part > 0) ++result_.client_kills_mid_clock;
  Trace("kill client " + std::to_string(c) + " (process " + std::to_string(cl.process) +
        ") at process clock " + std::to_string(cl.clock) + " after " +
        std::to_string(cl.next_part) + " part(s) of it");
  for (uint32_t k = 0; k < shards_.size(); ++k) DropConnection(c, k);
  cl.alive = false;
  // Its open deltas never left the process.
  for (auto& [key, truth] : ledger_) {
    for (auto it = truth.begin(); it != truth.end();) {
      const bool open = it->first.first == c && it->first.second % kPartsPerClock == kOpenPart;
      it = open ? truth.erase(it) : std::next(it);
    }
  }
  At(now_ + Delay() * 2, [this, c] { StartProcess(c); });
}

void World::StartProcess(ClientId c) {
  Client& cl = clients_[c];
  ++cl.process;
  cl.alive = true;
  cl.started = false;
  cl.clock = 0;
  cl.next_part = 0;
  cl.entries.clear();
  cl.shards.assign(shards_.size(), ShardView());
  cl.vap = ValueBoundLedger();
  // A re-run: other deltas, possibly other cuts and another number of workers.
  cl.workers.assign(static_cast<size_t>(rng_.Between(1, 2)), Worker());
  for (Worker& w : cl.workers) w.script = MakeScript();
  Trace("start process " + std::to_string(cl.process) + " of client " + std::to_string(c));
  for (uint32_t k = 0; k < shards_.size(); ++k) Connect(c, k);
}

void World::FirstWelcome(Client& cl, uint32_t k) {
  ShardView& sh = cl.shards[k];
  const ShardEngine& engine = *shards_[k]->engine;
  // As the Welcome: the engine's record of the client.
  sh.welcomed = true;
  sh.resume = AppliedPosition{engine.clocks().Get(cl.id), engine.AppliedParts(cl.id)};
  sh.duplicates_below = sh.resume;
  Trace("shard " + std::to_string(k) + " welcomes process " + std::to_string(cl.process) +
        " of client " + std::to_string(cl.id) + " at clock " + std::to_string(sh.resume.clock) +
        " part " + std::to_string(sh.resume.parts));
  // The ground truth at this shard's rows: what earlier processes sent of
  // clocks this shard has not completed is gone (taken back, or never
  // applied).
  for (auto& [key, truth] : ledger_) {
    if (ShardOfKey(key) != k) continue;
    for (const auto& [u, d] : truth) {
      if (u.first == cl.id && ProcessOf(u.second) < cl.process &&
          ClockOf(u.second) >= sh.resume.clock) {
        dropped_.insert({key, u});
      }
    }
  }
  for (const ShardView& v : cl.shards) {
    if (!v.welcomed) return;
  }
  // Every shard welcomed it: the process resumes from the smallest applied
  // clock (a new job from 0).
  ClockT start = cl.shards[0].resume.clock;
  for (const ShardView& v : cl.shards) start = std::min(start, v.resume.clock);
  cl.started = true;
  cl.clock = start;
  for (ShardView& v : cl.shards) v.acked = AppliedPosition{start, 0};
  for (size_t wi = 0; wi < cl.workers.size(); ++wi) {
    cl.workers[wi].clock = start;
    ScheduleStep(cl.id, wi, now_ + rng_.Between(0, 3));
  }
}

void World::ClientStep(ClientId c, size_t wi) {
  Client& cl = clients_[c];
  Worker& w = cl.workers[wi];
  if (w.done || w.blocked || w.gated) return;
  if (evict_chance_ > 0 && rng_.Chance(evict_chance_)) ClientEvict(cl);
  const std::vector<Op>& ops = w.script[w.clock];
  if (w.op < ops.size()) {
    const Op& op = ops[w.op];
    if (op.is_get) {
      if (!ClientGet(cl, w.clock, op.key)) {
        w.blocked = true;
        ++cl.entries[op.key].waiters;
        return;
      }
    } else {
      ClientInc(cl, w.clock, op.key, op.delta);
    }
    ++w.op;
  } else if (w.clock == clocks_) {
    w.done = true;
    return;
  } else {
    WorkerClock(cl, w);
    if (!cl.vap.WithinBound()) {
      w.gated = true;  // RetryBlocked lets it go once the Acks come
      return;
    }
    CheckValueBound(cl);
  }
  ScheduleStep(c, wi, now_ + rng_.Between(0, 3));
}

// A worker that starts a clock: no vap row may have more than its bound in
// flight, counted from the batches this client holds unacknowledged (the
// truth the ledger approximates from above).
void World::CheckValueBound(const Client& cl) {
  std::map<RowKey, double> in_flight;
  for (const ShardView& sh : cl.shards) {
    for (const SentBatch& b : sh.unacked) {
      for (const auto& [key, d] : b.deltas) {
        if (Table(key.table).consistency == Consistency::kVap) {
          in_flight[key] += std::fabs(static_cast<double>(d));
        }
      }
    }
  }
  for (const auto& [key, sum] : in_flight) {
    if (sum > Table(key.table).value_bound) {
      return Fail("client " + std::to_string(cl.id) + " started a clock with " +
                  std::to_string(sum) + " of row " + std::to_string(key.table) + "/" +
                  std::to_string(key.row) + " unacknowledged, over the value bound " +
                  std::to_string(Table(key.table).value_bound));
    }
  }
}

void World::RetryBlocked(ClientId c) {
  Client& cl = clients_[c];
  for (size_t wi = 0; wi < cl.workers.size(); ++wi) {
    Worker& w = cl.workers[wi];
    if (w.gated && cl.vap.WithinBound()) {
      w.gated = false;
      CheckValueBound(cl);
      ScheduleStep(c, wi, now_ + rng_.Between(0, 3));
      continue;
    }
    if (!w.blocked) continue;
    const Op& op = w.script[w.clock][w.op];
    if (ClientGet(cl, w.clock, op.key)) {
      w.blocked = false;
      --cl.entries[op.key].waiters;
      ++w.op;
      ScheduleStep(c, wi, now_ + rng_.Between(0, 3));
    }
  }
}

bool World::ClientGet(Client& cl, ClockT c, const RowKey& key) {
  const ReadPolicy policy = Policy(key.table);
  Entry& e = cl.entries[key];
  Version v = 0;
  if (e.has_value && policy.IsFresh(v = EffectiveVersion(cl, key, e), c)) {
    CheckRead(cl, c, key, e, v);
    return true;
  }
  // Subscribed rows are refreshed by pushes; everything else is pulled.
  const Version need = policy.MinVersion(c);
  if (client_engine::AsksForRow(e, policy.uses_push(), need)) {
    SendRead(cl, key, e, need, policy.uses_push());
  }
  return false;
}

void World::CheckRead(const Client& cl, ClockT c, const RowKey& key, const Entry& e, Version v) {
  ++result_.reads_checked;
  int64_t value = e.value;
  Provenance prov = e.prov;
  for (const Pending& p : e.pending) {
    if (!p.sealed) {
      value += p.delta;
      prov.emplace_back(cl.id, Stamp(cl.process, p.clock, kOpenPart));
    }
  }
  std::sort(prov.begin(), prov.end());
  std::ostringstream where;
  where << "client " << cl.id << " (a worker at clock " << c << ") read row " << key.table << "/"
        << key.row << " (version " << v << ", applied " << e.applied << " part " << e.applied_parts
        << ")";
  if (std::adjacent_find(prov.begin(), prov.end()) != prov.end()) {
    return Fail(where.str() + ": a batch counted twice");
  }
  const std::map<Contribution, int64_t>& truth = ledger_[key];
  int64_t expect = 0;
  for (const Contribution& c : prov) {
    auto it = truth.find(c);
    if (it == truth.end()) return Fail(where.str() + ": holds an update nobody made");
    expect += it->second;
  }
  if (expect != value) {
    return Fail(where.str() + ": value " + std::to_string(value) + " is not the sum " +
                std::to_string(expect) + " of the updates it holds");
  }
  const ReadPolicy policy = Policy(key.table);
  for (const auto& [u, d] : truth) {
    if (dropped_.count({key, u}) != 0) continue;  // no read needs it
    const bool own = u.first == cl.id;
    const bool required =
        own || (policy.clock_bounded() && ClockOf(u.second) < c - policy.staleness());
    if (required && !std::binary_search(prov.begin(), prov.end(), u)) {
      return Fail(where.str() + ": lacks client " + std::to_string(u.first) + "'s update of " +
                  DescribeStamp(u.second) + (own ? " (read-my-writes)" : " (read rule)"));
    }
  }
}

void World::ClientInc(Client& cl, ClockT c, const RowKey& key, int64_t delta) {
  Entry& e = cl.entries[key];
  const Contribution open{cl.id, Stamp(cl.process, c, kOpenPart)};
  ledger_[key][open] += delta;
  // A re-run of a clock an earlier process completed at this row's shard:
  // the shard will skip it.
  if (c < cl.shards[ShardOfKey(key)].resume.clock) dropped_.insert({key, open});
  bool merged = false;
  for (Pending& p : e.pending) {
    if (!p.sealed && p.clock == c) {
      p.delta += delta;
      merged = true;
      break;
    }
  }
  if (!merged) e.pending.push_back(Pending{c, false, delta});
  // The open-delta bound of a worker at the process clock: its open deltas
  // leave early as the clock's next part (random here).
  if (c == cl.clock && part_chance_ > 0 && rng_.Chance(part_chance_)) SendPart(cl);
}

void World::WorkerClock(Client& cl, Worker& w) {
  ++w.clock;
  w.op = 0;
  ClockT min = w.clock;
  for (const Worker& o : cl.workers) min = std::min(min, o.clock);
  while (cl.clock < min) SendBatches(cl);  // the process clock advanced
}

// Seals the process clock's deltas and sends each shard its batch (the last
// part of the clock).
void World::SendBatches(Client& cl) {
  SealAndSend(cl, cl.next_part, /*more=*/false);
  cl.next_part = 0;
  ++cl.clock;
}

void World::SendPart(Client& cl) {
  Trace("client " + std::to_string(cl.id) + " sends part " + std::to_string(cl.next_part) +
        " of clock " + std::to_string(cl.clock));
  SealAndSend(cl, cl.next_part, /*more=*/true);
  ++cl.next_part;
  ++result_.parts_sent;
  if (kill_after_parts_[cl.id].count(++cl.parts_sent) != 0) {
    // Killed soon after: some parts applied, some in flight, some not sent.
    const ClientId c = cl.id;
    const uint32_t process = cl.process;
    At(now_ + rng_.Between(0, 2 * max_delay_), [this, c, process] {
      if (clients_[c].process == process) KillClient(c);
    });
  }
}

void World::SealAndSend(Client& cl, uint32_t part, bool more) {
  // Shard k's number for this part: after the parts an earlier process left
  // of this clock there (ShardState::resume_parts in client/; none when the
  // shard took them back).
  std::vector<uint32_t> part_of(shards_.size());
  for (uint32_t k = 0; k < shards_.size(); ++k) {
    const AppliedPosition& resume = cl.shards[k].resume;
    part_of[k] = part + (cl.clock == resume.clock ? resume.parts : 0);
  }
  std::vector<SentBatch> batches(shards_.size());
  for (auto& [key, e] : cl.entries) {
    for (Pending& p : e.pending) {
      if (p.sealed || p.clock != cl.clock) continue;
      const uint32_t k = ShardOfKey(key);
      p.sealed = true;
      p.part = part_of[k];
      const Contribution sealed{cl.id, Stamp(cl.process, p.clock, p.part)};
      // The ground truth: the open deltas become this part.
      auto& truth = ledger_[key];
      auto open = truth.find({cl.id, Stamp(cl.process, p.clock, kOpenPart)});
      if (open != truth.end()) {
        truth[sealed] += open->second;
        truth.erase(open);
      }
      // A clock an earlier process completed at this shard: skipped there.
      if (p.clock < cl.shards[k].resume.clock) dropped_.insert({key, sealed});
      if (e.has_value) {  // fold it into the value (it is now part of a batch)
        e.value += p.delta;
        e.prov.push_back(sealed);
      }
      batches[k].deltas.emplace_back(key, p.delta);
      const TableSpec& t = Table(key.table);
      if (t.consistency == Consistency::kVap) {
        cl.vap.Add(k, cl.clock, p.part, key, std::fabs(static_cast<double>(p.delta)),
                   t.value_bound);
      }
    }
  }
  for (uint32_t k = 0; k < shards_.size(); ++k) {
    batches[k].clock = cl.clock;
    batches[k].part = part_of[k];
    batches[k].more = more;
    cl.shards[k].unacked.push_back(batches[k]);
    ApplyMsg m{cl.clock, std::move(batches[k].deltas), part_of[k], more};
    SendToShard(cl.id, k, std::move(m));
  }
}

void World::ClientEvict(Client& cl) {
  std::vector<RowKey> candidates;
  for (auto& [key, e] : cl.entries) {
    if (e.has_value && e.waiters == 0 && e.reads_in_flight.empty()) candidates.push_back(key);
  }
  if (candidates.empty()) return;
  const RowKey key = candidates[rng_.Below(static_cast<int64_t>(candidates.size()))];
  Entry& e = cl.entries[key];
  e.has_value = false;
  e.value = 0;
  e.prov.clear();
  if (e.subscribed) {
    e.subscribed = false;
    SendToShard(cl.id, ShardOfKey(key), UnsubscribeMsg{key.table, {key.row}});
  }
}

void World::SendRead(Client& cl, const RowKey& key, Entry& e, Version min_version, bool subscribe) {
  ReadRequest r;
  r.req_id = cl.next_req++;
  r.table = key.table;
  r.rows = {key.row};
  r.min_version = min_version;
  r.subscribe = subscribe;
  e.reads_in_flight.push_back(min_version);
  const uint32_t k = ShardOfKey(key);
  cl.shards[k].requests.emplace(r.req_id, r);
  SendToShard(cl.id, k, std::move(r));
}

void World::InstallValue(Client& cl, Entry& e, int64_t value, Provenance prov, Version v, ClockT a,
                         uint32_t parts) {
  const AppliedPosition holds =
      Planted(PlantedBug::kRebaseEverySealedDelta) ? AppliedPosition{} : AppliedPosition{a, parts};
  client_engine::Rebase(e.pending, holds, [&](const Pending& p) {
    value += p.delta;
    prov.emplace_back(cl.id, Stamp(cl.process, p.clock, p.part));
  });
  e.has_value = true;
  e.value = value;
  e.prov = std::move(prov);
  e.version = v;
  e.applied = a;
  e.applied_parts = parts;
}

void World::InstallRow(Client& cl, uint32_t k, RowValue& row, Version v, ClockT a, uint32_t parts,
                       bool read, bool subscribe, Version read_min) {
  namespace engine = client_engine;
  const RowKey key{row.table, row.row};
  auto it = cl.entries.find(key);
  if (it == cl.entries.end()) return;
  Entry& e = it->second;
  if (read) e.ReadAnswered(read_min);
  const engine::ArrivalDecision d = engine::DecideArrival(
      engine::CachedRow{e.has_value, e.version, e.subscribed, e.waiters > 0},
      engine::RowArrival{v, AppliedPosition{a, parts}, read, subscribe}, cl.shards[k].acked);
  if (d.action == engine::Arrival::kStalePush) return;
  int64_t value = 0;
  Provenance prov;
  if (row.absent) {
    if (!row.bytes.empty() || cl.id % 2 != 0) return Fail("an absent row with bytes, or unasked");
    ++result_.rows_absent;
  } else if (!DecodeRow(row.bytes, &value, &prov)) {
    return Fail("undecodable row bytes");
  }
  if (d.action == engine::Arrival::kRefetch) {
    if (d.drop_value) {
      e.subscribed = false;
      e.has_value = false;
      e.value = 0;
      e.prov.clear();
    }
    if (d.send_read) SendRead(cl, key, e, d.read_min_version, Policy(key.table).uses_push());
    return;
  }
  if (d.action == engine::Arrival::kInstall) {
    InstallValue(cl, e, value, std::move(prov), v, a, parts);
  }
  if (d.subscribe) e.subscribed = true;
}

void World::ClientReceive(ClientId c, uint32_t k, ToClient m) {
  Client& cl = clients_[c];
  ShardView& sh = cl.shards[k];
  if (auto* r = std::get_if<ReadAnswer>(&m)) {
    auto it = sh.requests.find(r->req_id);
    if (it != sh.requests.end()) {
      const ReadRequest req = std::move(it->second);
      sh.requests.erase(it);
      if (r->rows.size() != req.rows.size()) return Fail("ReadAnswer with a wrong row count");
      if (r->version < req.min_version) {
        return Fail("shard " + std::to_string(k) + " answered a Read for min_version " +
                    std::to_string(req.min_version) + " with version " +
                    std::to_string(r->version));
      }
      for (RowValue& row : r->rows) {
        InstallRow(cl, k, row, r->version, r->applied_clock, r->applied_parts, true, req.subscribe,
                   req.min_version);
      }
    }
  } else if (auto* p = std::get_if<PushBatch>(&m)) {
    ++result_.pushes;
    for (RowValue& row : p->rows)
      InstallRow(cl, k, row, p->version, p->applied_clock, p->applied_parts, false, false, 0);
  } else if (auto* d = std::get_if<PushDoneMsg>(&m)) {
    sh.pushed_version = std::max(sh.pushed_version, d->version);
  } else if (auto* a = std::get_if<AckMsg>(&m)) {
    ClientAck(cl, k, *a);
  } else if (auto* err = std::get_if<ReadErrorMsg>(&m)) {
    return Fail("client " + std::to_string(c) + " got a read error: " + err->why);
  }
  RetryBlocked(c);
}

void World::ClientAck(Client& cl, uint32_t k, const AckMsg& a) {
  namespace engine = client_engine;
  ShardView& sh = cl.shards[k];
  if (a.duplicate && engine::DuplicateFromAnotherSender(a.clock, a.part, sh.duplicates_below)) {
    return Fail("shard " + std::to_string(k) + " acknowledged clock " + std::to_string(a.clock) +
                " part " + std::to_string(a.part) + " of client " + std::to_string(cl.id) +
                " as a duplicate, but the client sent it once");
  }
  const engine::AckOutcome ack = engine::TakeAck(sh.unacked, a.clock, a.part);
  if (ack.batches == 0) return;  // a duplicate Ack after a re-send
  sh.acked = ack.acked;
  cl.vap.Acked(k, sh.acked.clock, sh.acked.parts);
  // Each batch purges its rows' deltas, as the client's PurgeBatch.
  for (size_t i = 0; i < ack.batches; ++i) {
    const SentBatch& b = sh.unacked.front();
    for (const auto& [key, d] : b.deltas) {
      auto it = cl.entries.find(key);
      if (it == cl.entries.end()) continue;
      std::vector<Pending>& pd = it->second.pending;
      const bool all = Planted(PlantedBug::kPurgeLaterBatches);
      pd.erase(std::remove_if(pd.begin(), pd.end(),
                              [&b, all](const Pending& p) {
                                return all ? p.sealed : engine::AckedBy(p, b.clock, b.part);
                              }),
               pd.end());
    }
    sh.unacked.pop_front();
  }
}

void World::ClientReconnected(Client& cl, uint32_t k) {
  ShardView& sh = cl.shards[k];
  // 1. Unacknowledged batches, in clock order (the shard skips duplicates).
  if (!Planted(PlantedBug::kNoDuplicateBoundOnResend)) {
    sh.duplicates_below =
        client_engine::DuplicatesBelowAfterResend(sh.duplicates_below, sh.unacked);
  }
  for (const SentBatch& b : sh.unacked) {
    ++result_.resent_batches;
    if (b.more || b.part > 0) ++result_.parts_resent;
    SendToShard(cl.id, k, ApplyMsg{b.clock, b.deltas, b.part, b.more});
  }
  // 2. Requests in flight.
  std::vector<ReadRequest> again;
  for (const auto& [id, req] : sh.requests) again.push_back(req);
  for (ReadRequest& r : again) SendToShard(cl.id, k, std::move(r));
  // 3. Subscriptions lived in the old session: subscribe again, keeping the
  //    version the old session vouched for until the reply.
  for (auto& [key, e] : cl.entries) {
    if (ShardOfKey(key) != k || Planted(PlantedBug::kKeepSubscriptionsAcrossReconnects)) continue;
    if (client_engine::EndSessionSubscription(&e, sh.pushed_version)) SendRead(cl, key, e, 0, true);
  }
  sh.connected = true;
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

}  // namespace

SimResult RunSchedule(uint64_t seed, const SimOptions& options) {
  World w(seed, options);
  return w.Run();
}

}  // namespace pace::sim
