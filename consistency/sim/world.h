// The world of the protocol simulation (consistency/sim/simulation.h),
// private to consistency/sim/: the messages, the simulated shards (the real
// ShardEngine over FakeStore) and client processes, and World, the seeded
// scheduler that drives them. World's members are defined by concern:
//   simulation.cc  configuration, transport (connections, FIFO delivery,
//                  drops), the run and its final checks, RunSchedule;
//   sim_shard.cc   the shard side: Hello admission, reads, the writer
//                  (groups, undo tasks), publishing, crash and restart;
//   sim_client.cc  the client side: processes (kill, start, first Welcome),
//                  workers' steps, reads and their checks, Incs, parts and
//                  batches, what shards send back, reconnects.
#ifndef PACE_CONSISTENCY_SIM_WORLD_H_
#define PACE_CONSISTENCY_SIM_WORLD_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "common/clock.h"
#include "common/schema.h"
#include "consistency/batch_rule.h"
#include "consistency/client_engine.h"
#include "consistency/read_policy.h"
#include "consistency/shard_engine.h"
#include "consistency/sim/simulation.h"
#include "consistency/value_bound.h"

namespace pace::sim::internal {

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
inline constexpr int64_t kPartsPerClock = int64_t{1} << 20;
inline constexpr int64_t kClocksPerProcess = int64_t{1} << 20;
inline constexpr uint32_t kOpenPart = kPartsPerClock - 1;
inline int64_t Stamp(uint32_t process, ClockT clock, uint32_t part) {
  return (process * kClocksPerProcess + clock) * kPartsPerClock + part;
}
inline ClockT ClockOf(int64_t stamp) { return (stamp / kPartsPerClock) % kClocksPerProcess; }
inline uint32_t ProcessOf(int64_t stamp) {
  return static_cast<uint32_t>(stamp / kPartsPerClock / kClocksPerProcess);
}
inline std::string DescribeStamp(int64_t stamp) {
  const int64_t part = stamp % kPartsPerClock;
  return "clock " + std::to_string(ClockOf(stamp)) +
         (part == kOpenPart ? " (open)" : " part " + std::to_string(part)) + " of process " +
         std::to_string(ProcessOf(stamp));
}
// The Hello incarnation of a client's process (nonzero, as the real client's).
inline uint64_t IncarnationOf(uint32_t process) { return process + 1; }
inline uint32_t ProcessOfIncarnation(uint64_t incarnation) {
  return static_cast<uint32_t>(incarnation - 1);
}

// A row's bytes in the simulation: its i64 value, then its provenance.
inline std::string EncodeRow(int64_t value, const Provenance& prov) {
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

inline bool DecodeRow(const std::string& bytes, int64_t* value, Provenance* prov) {
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

}  // namespace pace::sim::internal

#endif  // PACE_CONSISTENCY_SIM_WORLD_H_
