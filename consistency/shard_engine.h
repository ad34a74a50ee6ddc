// ShardEngine: the shard side of the consistency protocol (DESIGN.md section
// 1), written against interfaces declared here so that it runs the same over
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
// Contract with the store (VersionedRows): ReadRows returns values holding
// exactly the batches reported through OnBatchApplied so far — no fewer and
// no more — so that a value, the version C and the reader's applied clock a
// form a consistent triple (the value holds exactly the reader's clocks < a).
//
// Contract with the caller: batches are made durable by the caller; it calls
// OnBatchApplied after the write returned (and sends the Ack itself). It
// decides duplicates with IsDuplicate (a batch for clock c < a_p).
//
// Thread-compatible: the owner serializes every call (the shard service holds
// one mutex). Peer methods are called from inside those calls, so they must
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
};

struct ReadRequest {
  uint64_t req_id = 0;
  uint32_t table = 0;
  std::vector<uint64_t> rows;
  Version min_version = 0;
  bool subscribe = false;
};

struct ReadAnswer {
  uint64_t req_id = 0;
  Version version = 0;
  ClockT applied_clock = 0;
  std::vector<RowValue> rows;  // in the order of the request
};

struct PushBatch {
  Version version = 0;
  ClockT applied_clock = 0;
  std::vector<RowValue> rows;
};

// The shard's rows as the protocol needs them: current values.
class VersionedRows {
 public:
  virtual ~VersionedRows() = default;
  // One value per row of `table`, in order. Must reflect exactly the batches
  // reported to the engine (see the contract above). Errors are reported to
  // the reader (a Read) or retried at the next clock (a push).
  virtual Status ReadRows(uint32_t table, const std::vector<uint64_t>& rows,
                          std::vector<std::string>* values) = 0;
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
};

struct ShardEngineOptions {
  // Most Reads one peer may have parked. Default: 1M.
  size_t max_parked_reads_per_peer = size_t{1} << 20;
  // Pushes are cut into messages of at most about this many value bytes.
  // Default: 4 MiB.
  size_t max_push_bytes = size_t{4} << 20;
};

// Plain counters (read under the owner's lock).
struct ShardEngineCounters {
  int64_t parked_reads = 0;  // Reads that had to wait
  int64_t read_errors = 0;   // Reads answered with an error
  int64_t rows_read = 0;
  int64_t rows_pushed = 0;
  int64_t pushes = 0;
  int64_t push_dones = 0;
  int64_t value_bytes_out = 0;
  int64_t push_read_errors = 0;  // rows a push could not read (retried)
};

class ShardEngine {
 public:
  // `applied_clocks`: one per client of the job (the store's record);
  // `rows` must outlive the engine.
  ShardEngine(const ShardEngineOptions& options, std::vector<ClockT> applied_clocks, int64_t now_ms,
              VersionedRows* rows);
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

  // A Read from a connected peer: answered now or parked. An unknown peer's
  // Read is ignored.
  void Read(PeerId id, ReadRequest read);
  void Unsubscribe(PeerId id, uint32_t table, const std::vector<uint64_t>& rows);

  // True if a batch of `client` for `clock` is already in (clock < a_p).
  bool IsDuplicate(ClientId client, ClockT clock) const {
    return client < clocks_.num_clients() && clock < clocks_.Get(client);
  }
  // Bookkeeping after a batch was durably applied, in two steps so a caller
  // need not build a key list: MarkChanged for each changed row (preferably
  // in key order), then Advance with the client's new applied clock. Advance
  // answers ready parked reads and pushes if the shard clock rose, and
  // returns the shard clock. `writer` is the peer that sent the batch (0 if
  // unknown: no push is saved).
  void MarkChanged(PeerId writer, const RowKey& key) { subs_.MarkDirty(key, SubscriberOf(writer)); }
  Version Advance(ClientId client, ClockT applied, int64_t now_ms) {
    RecordApplied(client, applied, now_ms);
    return Publish();
  }
  // Group commit: a writer that made several batches durable in one write
  // calls MarkChanged and RecordApplied for each, then Publish once. No
  // value may be sent between one batch reaching the store and its
  // RecordApplied (the triple would be inconsistent), so the caller does all
  // of it under its lock; Publish then answers and pushes what the new shard
  // clock allows, and returns it.
  void RecordApplied(ClientId client, ClockT applied, int64_t now_ms) {
    clocks_.Set(client, applied, now_ms);
  }
  Version Publish();

  // True if a push could not read some rows (see above).
  bool push_retry_pending() const { return push_retry_pending_; }
  // Pushes again, stamped with the current shard clock, what is still
  // pending (and anything changed since, which is equally valid to push).
  void RetryPushes();

  // The applied clock stamped on values sent to `id`: its client's a_p, or
  // the shard clock for observers and unknown peers.
  ClockT AppliedClockFor(PeerId id) const;
  Version shard_clock() const { return clocks_.Min(); }
  const ClockVector& clocks() const { return clocks_; }
  size_t num_parked() const { return parked_.size(); }
  size_t num_peers() const { return peers_.size(); }
  const SubscriptionRegistry& subscriptions() const { return subs_; }
  const ShardEngineCounters& counters() const { return counters_; }

 private:
  struct PeerState {
    std::shared_ptr<Peer> peer;
    PeerInfo info;
    size_t parked = 0;
  };
  struct Parked {
    PeerId peer;
    ReadRequest read;
  };
  static SubscriberId SubscriberOf(PeerId writer) {
    return writer == 0 ? SubscriptionRegistry::kNoWriter : writer;
  }
  // REQUIRES: shard clock >= read.min_version.
  void Answer(PeerId id, PeerState& p, const ReadRequest& read);
  void OnShardClockAdvanced(Version clock);
  void PushToSubscribers(Version clock);

  const ShardEngineOptions options_;
  VersionedRows* const rows_;
  ClockVector clocks_;
  std::unordered_map<PeerId, PeerState> peers_;
  ParkedReads<Parked> parked_;
  SubscriptionRegistry subs_;
  ShardEngineCounters counters_;
  // The shard clock parked reads and pushes were last processed for.
  Version published_;
  bool push_retry_pending_ = false;
};

}  // namespace pace

#endif  // PACE_CONSISTENCY_SHARD_ENGINE_H_
