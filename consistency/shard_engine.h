// ShardEngine: the shard side of the consistency protocol (docs/design.md,
// "Semantics"), written against interfaces declared here so that it runs the same over
// RocksDB and the transport (server/) and over in-memory fakes (its tests and
// the deterministic simulation in consistency/sim/).
//
// What it decides:
//   - Reads: answered at once when the shard clock C >= min_version, else
//     parked until it is, at most max_parked_reads_per_peer per peer (more
//     get ResourceExhausted). An answer carries version C and the reader's
//     own applied clock a (the shard clock for observers).
//   - Clock advance: after each applied batch the writer's applied clock is
//     set; when C = min over clients rises, ready parked reads are answered
//     and then every subscriber is pushed its changed rows, followed by one
//     PushDone (also when nothing changed).
//   - Push planning: a subscribed row changed since the last push is pushed
//     to its subscribers, except to a subscriber whose own batches alone
//     changed it (its cache already holds its own updates, read-my-writes).
//     A row that cannot be read is not declared current: that subscriber gets
//     no PushDone this time, and the push is retried by RetryPushes (which
//     the owner calls from a timer while push_retry_pending()) or at the next
//     advance. Without the timer a job whose every worker waits for that
//     push would never advance again (the simulation found this).
//
// Values come from a RowsView: one consistent state of the store (values,
// shard clock, applied clocks), so a value, its version C and the reader's
// applied clock a form a consistent triple (the value holds exactly the
// reader's clocks < a). Answers are stamped from the view, never from the
// engine's own clocks, so a view may be newer than what the engine was told.
// The view passed to Publish/Advance must hold exactly the batches recorded
// so far (the writer's view right after its write); RetryPushes accepts a
// newer one (it stamps the clock the engine published).
//
// Neither reads nor publishes read the store under the owner's lock
// (docs/design.md, "Threads"):
//   - A Read that can be answered at once: AdmitRead() returns kAnswer, the caller
//     reads with AnswerFromView (no engine state, off the lock) and then calls
//     FinishRead under its lock, still holding its view so that no later state
//     is published in between (else a push of that state could miss the new
//     subscription).
//   - A clock advance: PlanPublish (under the lock) takes the ready parked
//     reads and plans the push; ReadPublish (no engine state, off the lock)
//     reads their rows from the view and builds the messages; FinishPublish
//     (under the lock) sends them. RetryPushes has the same three steps
//     (PlanRetry). At most one plan is outstanding, and the caller holds the
//     view from the plan to its finish, so each peer still gets its messages
//     in shard-clock order. Publish and RetryPushes do all three at once, for
//     owners that may read under their lock (tests, the simulation's
//     one-step shard).
//
// Contract with the caller: batches are made durable by the caller; it calls
// MarkChanged/RecordApplied (or Advance) after the write returned and sends
// the Ack itself. It decides duplicates by the batch rule
// (consistency/batch_rule.h).
//
// Thread-compatible: the owner serializes every call (the shard service holds
// one mutex); ReadPublish and AnswerFromView are static and use only their
// arguments. Peer methods are called from inside those calls, so they must
// not call back into the engine; each peer's messages are sent in shard-clock
// order.
#ifndef PACE_CONSISTENCY_SHARD_ENGINE_H_
#define PACE_CONSISTENCY_SHARD_ENGINE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "consistency/clock_vector.h"
#include "consistency/parked_reads.h"
#include "consistency/subscription_registry.h"

namespace pace {

// A connection to the shard (a session); also its subscriber id.
using PeerId = uint64_t;

struct RowValue {
  uint32_t table = 0;
  uint64_t row = 0;
  std::string bytes;  // encoded as common/row.h
  // The row has no record in the state read (never written): its value is
  // its table's initializer (InitRow, common/row.h), which the receiver
  // computes; `bytes` is empty. Only in answers to a peer that accepts it
  // (PeerInfo::absent_rows).
  bool absent = false;
};

struct ReadRequest {
  uint64_t req_id = 0;
  uint32_t table = 0;
  std::vector<uint64_t> rows;
  Version min_version = 0;
  bool subscribe = false;
};

// applied_parts (both): the parts of the receiver's clock applied_clock
// already in the values (a partial Apply in progress; 0 otherwise), so that
// its read-my-writes adds exactly its parts that are not in them.
struct ReadAnswer {
  uint64_t req_id = 0;
  Version version = 0;
  ClockT applied_clock = 0;
  std::vector<RowValue> rows;  // in the order of the request
  uint32_t applied_parts = 0;
};

struct PushBatch {
  Version version = 0;
  ClockT applied_clock = 0;
  std::vector<RowValue> rows;
  uint32_t applied_parts = 0;
};

// One consistent state of the shard's rows: values and the clocks they hold.
class RowsView {
 public:
  virtual ~RowsView() = default;
  // One value per row of `table`, in order, from this state. Errors go to the
  // reader (a Read) or make a push retry (see push_retry_pending()).
  virtual Status ReadRows(uint32_t table, const std::vector<uint64_t>& rows,
                          std::vector<std::string>* values) const = 0;
  // As ReadRows, but a row without a record in this state may be left
  // uncomposed: (*absent)[i] = 1 and an empty value (its value is its
  // initializer's). The default reports no row absent.
  virtual Status ReadRowsOrAbsent(uint32_t table, const std::vector<uint64_t>& rows,
                                  std::vector<std::string>* values,
                                  std::vector<uint8_t>* absent) const {
    RETURN_IF_ERROR(ReadRows(table, rows, values));
    absent->assign(values->size(), 0);
    return Status::OK();
  }
  // This state's shard clock and applied clocks.
  virtual Version ShardClock() const = 0;
  virtual ClockT AppliedClock(ClientId client) const = 0;
  // Parts of clock AppliedClock(client) this state holds (partial Apply).
  virtual uint32_t AppliedParts(ClientId /*client*/) const { return 0; }
};

// Where the engine sends to one peer. Implementations queue; they must not
// call back into the engine.
class Peer {
 public:
  virtual ~Peer() = default;
  virtual void SendReadAnswer(ReadAnswer answer) = 0;
  virtual void SendReadError(uint64_t req_id, const Status& status) = 0;
  virtual void SendPush(PushBatch push) = 0;
  virtual void SendPushDone(Version version, ClockT applied_clock) = 0;
};

struct PeerInfo {
  // A client process (has an applied clock) or an observer (a tool).
  bool is_client = false;
  ClientId client = 0;  // meaningful when is_client
  // The peer computes the value of a row without a record itself: read
  // answers carry such rows as RowValue::absent (docs/wire-protocol.md,
  // ReadReply).
  bool absent_rows = false;
};

// What one publish sends (ShardEngine::PlanPublish / PlanRetry), read and
// built by ShardEngine::ReadPublish, sent by ShardEngine::FinishPublish.
struct PublishPlan {
  // The shard clock stamped on the pushes and PushDones.
  Version clock = 0;
  // Parked reads that became ready, in the order they were parked, with
  // their answers (or the error reading them) once read.
  struct ReadyRead {
    PeerId peer = 0;
    PeerInfo info;
    ReadRequest read;
    Status status;
    ReadAnswer answer;
  };
  std::vector<ReadyRead> reads;
  // The push: distinct changed rows (sorted by table) and, per subscriber,
  // its messages (cut at max_push_bytes) and whether every row of it could
  // be read (only then does it get its PushDone).
  std::vector<RowKey> rows;
  std::vector<bool> row_read;  // per rows[i], after ReadPublish
  struct Subscriber {
    PeerId peer = 0;
    PeerInfo info;
    std::vector<uint32_t> row_indices;  // into rows, ascending
    ClockT applied_clock = 0;           // stamped, from the view
    std::vector<PushBatch> pushes;
    bool complete = false;
  };
  std::vector<Subscriber> subscribers;
  size_t max_push_bytes = 0;
  // Rows ReadPublish could not read.
  int64_t push_read_errors = 0;
  // Position in the engine's sequence of plans (FinishPublish checks it).
  uint64_t seq = 0;

  bool empty() const { return reads.empty() && subscribers.empty(); }
};

struct ShardEngineOptions {
  // Most Reads one peer may have parked. Default: 1M.
  size_t max_parked_reads_per_peer = size_t{1} << 20;
  // Pushes are cut into messages of at most about this many value bytes.
  // Default: 4 MiB.
  size_t max_push_bytes = size_t{4} << 20;
  // Bytes parked Reads may hold (kParkedReadOverhead + 8 per row each), per
  // peer and over all peers; a Read beyond either is refused with
  // ResourceExhausted. 0: no cap. Defaults: 64 MiB, 1 GiB.
  size_t max_parked_bytes_per_peer = size_t{64} << 20;
  size_t max_parked_bytes_total = size_t{1} << 30;
  // Rows one peer / all peers may have subscribed; a subscribing Read beyond
  // either is refused with ResourceExhausted. 0: no cap. Defaults: 16M, 64M.
  size_t max_subscriptions_per_peer = size_t{16} << 20;
  size_t max_subscriptions_total = size_t{64} << 20;
};

// What a parked Read is charged besides 8 bytes per row.
inline constexpr size_t kParkedReadOverhead = 128;

// Plain counters (read under the owner's lock).
struct ShardEngineCounters {
  int64_t parked_reads = 0;  // Reads that had to wait
  int64_t read_errors = 0;   // Reads answered with an error
  int64_t rows_read = 0;
  int64_t rows_read_absent = 0;  // of rows_read: sent as absent (no record)
  int64_t rows_pushed = 0;
  int64_t pushes = 0;
  int64_t push_dones = 0;
  int64_t value_bytes_out = 0;
  int64_t push_read_errors = 0;  // rows a push could not read (retried)
};

class ShardEngine {
 public:
  // `applied_clocks`: one per client of the job (the store's record).
  // `applied_parts`: the parts of each client's next clock applied (empty:
  // none).
  ShardEngine(const ShardEngineOptions& options, std::vector<ClockT> applied_clocks, int64_t now_ms,
              std::vector<uint32_t> applied_parts = {});
  ShardEngine(const ShardEngine&) = delete;
  ShardEngine& operator=(const ShardEngine&) = delete;

  // Registers a peer (idempotent; a known id keeps its state).
  void Connect(PeerId id, std::shared_ptr<Peer> peer, PeerInfo info);
  bool IsConnected(PeerId id) const { return peers_.count(id) != 0; }
  struct Dropped {
    size_t parked = 0;
    size_t subscriptions = 0;
  };
  // Forgets the peer, its parked reads and subscriptions.
  Dropped Disconnect(PeerId id);
  // Answers every parked read with `why` (e.g. shutdown) and forgets them.
  void AbortParked(const Status& why);

  enum class ReadAction {
    kAnswer,   // answerable now: the caller answers it (AnswerFromView, FinishRead)
    kParked,   // taken; answered when the shard clock reaches min_version
    kRefused,  // an error was sent (too many parked reads)
    kIgnored,  // unknown peer
  };
  // The read rule at the shard: may `read` be answered now, must it wait
  // (parked), or is it refused? Reads nothing. kParked moves it out of *read.
  ReadAction AdmitRead(PeerId id, ReadRequest* read);
  // Reads `read` from `view` into *answer stamped with the view's shard clock
  // and the reader's applied clock there. Uses no engine state: may run
  // without the owner's lock.
  static Status AnswerFromView(const PeerInfo& reader, const ReadRequest& read,
                               const RowsView& view, ReadAnswer* answer);
  // Sends the answer (or the error `st`) and subscribes if asked. An unknown
  // peer is ignored.
  void FinishRead(PeerId id, const ReadRequest& read, const Status& st, ReadAnswer answer);
  PeerInfo InfoOf(PeerId id) const;
  void Unsubscribe(PeerId id, uint32_t table, const std::vector<uint64_t>& rows);

  // Bookkeeping after a batch was durably applied, in two steps so a caller
  // need not build a key list: MarkChanged for each changed row (preferably
  // in key order), then Advance with the client's new applied clock. Advance
  // answers ready parked reads and pushes if the shard clock rose, and
  // returns the shard clock. `writer` is the peer that sent the batch (0 if
  // unknown: no push is saved).
  void MarkChanged(PeerId writer, const RowKey& key) { subs_.MarkDirty(key, SubscriberOf(writer)); }
  Version Advance(ClientId client, ClockT applied, int64_t now_ms, const RowsView& view) {
    RecordApplied(client, applied, now_ms);
    return Publish(view);
  }
  // Group commit: a writer that made several batches durable in one write
  // calls MarkChanged and RecordApplied for each, then publishes once. No
  // value may be sent between one batch reaching the store and its
  // RecordApplied (the triple would be inconsistent), so the caller records
  // under its lock and plans the publish in the same hold.
  // `parts`: parts of clock `applied` applied too (a part with more parts
  // to come leaves the applied clock and counts a part; the clock vector,
  // the shard clock and push planning see complete clocks only).
  void RecordApplied(ClientId client, ClockT applied, int64_t now_ms, uint32_t parts = 0) {
    clocks_.Set(client, applied, now_ms);
    if (client < parts_.size()) parts_[client] = parts;
  }
  // Parts of clock clocks().Get(client) applied.
  uint32_t AppliedParts(ClientId client) const {
    return client < parts_.size() ? parts_[client] : 0;
  }

  // Publishing what the recorded batches allow, in three steps (see the top
  // of this file). PlanPublish: if the shard clock rose since the last plan,
  // takes the parked reads now ready and plans the push of the changed rows
  // (empty plan otherwise). REQUIRES: no plan outstanding.
  PublishPlan PlanPublish();
  // PlanPublish's counterpart for a push that could not read its rows: plans
  // it again (and anything changed since), stamped with the clock last
  // published. Empty unless push_retry_pending(). REQUIRES: no plan
  // outstanding.
  PublishPlan PlanRetry();
  // Reads the plan's rows from `view` and builds its answers and pushes.
  // Uses no engine state: runs without the owner's lock. For PlanPublish,
  // `view` must hold exactly the batches recorded when it was planned; for
  // PlanRetry it may be newer.
  static void ReadPublish(const RowsView& view, PublishPlan* plan);
  // Sends what `plan` holds (to the peers still connected) and marks the
  // rows that could not be read for a retry. Returns the plan's clock.
  Version FinishPublish(PublishPlan plan);
  // All three steps at once; returns the shard clock.
  Version Publish(const RowsView& view);

  // True if a push could not read some rows (see above).
  bool push_retry_pending() const { return push_retry_pending_; }
  // PlanRetry, ReadPublish and FinishPublish at once.
  void RetryPushes(const RowsView& view);

  Version shard_clock() const { return clocks_.Min(); }
  const ClockVector& clocks() const { return clocks_; }
  size_t num_parked() const { return parked_.size(); }
  size_t parked_bytes() const { return parked_bytes_; }
  const SubscriptionRegistry& subscriptions() const { return subs_; }
  const ShardEngineCounters& counters() const { return counters_; }

 private:
  struct PeerState {
    std::shared_ptr<Peer> peer;
    PeerInfo info;
    size_t parked = 0;
    size_t parked_bytes = 0;
  };
  static size_t ParkedCharge(const ReadRequest& r) {
    return kParkedReadOverhead + 8 * r.rows.size();
  }
  // Why `read` from `p` must be refused for the parked-bytes or subscription
  // caps, or OK.
  Status CheckReadCaps(PeerId id, const PeerState& p, const ReadRequest& read, bool park) const;
  struct Parked {
    PeerId peer;
    ReadRequest read;
  };
  static SubscriberId SubscriberOf(PeerId writer) {
    return writer == 0 ? SubscriptionRegistry::kNoWriter : writer;
  }
  // Plans the push of the rows changed since the last plan, stamped `clock`.
  void PlanPush(Version clock, PublishPlan* plan);
  // ReadPublish's steps: the ready reads' answers; the pushed rows' values;
  // the pushes built from them.
  static void ReadReadyReads(const RowsView& view, PublishPlan* plan);
  static std::vector<std::string> ReadPushRows(const RowsView& view, PublishPlan* plan);
  static void BuildPushes(const RowsView& view, std::vector<std::string> values, PublishPlan* plan);
  PublishPlan NewPlan(Version clock);

  const ShardEngineOptions options_;
  ClockVector clocks_;
  std::vector<uint32_t> parts_;  // [num_clients], see AppliedParts
  std::unordered_map<PeerId, PeerState> peers_;
  ParkedReads<Parked> parked_;
  size_t parked_bytes_ = 0;  // sum of PeerState::parked_bytes
  SubscriptionRegistry subs_;
  ShardEngineCounters counters_;
  // The shard clock parked reads and pushes were last processed for.
  Version published_;
  bool push_retry_pending_ = false;
  // Plans made and finished (at most one outstanding).
  uint64_t plans_made_ = 0;
  uint64_t plans_finished_ = 0;
};

}  // namespace pace

#endif  // PACE_CONSISTENCY_SHARD_ENGINE_H_
