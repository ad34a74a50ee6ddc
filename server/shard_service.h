// ShardService: one shard of PaceDB as a net::ServiceHandler — the generic
// versioned key-value service over a ShardStore, wired to the protocol engine
// (consistency/shard_engine.h), which makes the server side's decisions of
// the consistency models (docs/design.md, "Semantics"): the shard clock, parked SSP
// reads, ESSP subscriptions and pushes. This class validates requests, runs
// the writer, reader and housekeeping threads and sends the Acks.
//
// Protocol summary (messages in net/messages.h):
//   Hello(kClientProcess, id < num_clients) -> Welcome; kObserver: any id, no Apply.
//   Read   -> ReadReply{version = shard clock, applied_clock = reader's a_p}
//             at once if shard clock >= min_version, else parked until it is.
//             With `subscribe`, the rows join the session's push subscriptions.
//   Apply  -> Ack{clock, duplicate}, or Error{0, ...} (batch not applied; the
//             session stays open). When the shard clock advances, ready parked
//             reads are answered, then every subscriber session gets Push
//             messages with its subscribed rows that changed, followed by one
//             PushDone{version, applied_clock} (also when nothing changed).
//   Unsubscribe, CreateTable / ListTables / DescribeTable -> TablesReply,
//   StatsRequest -> StatsReply. Anything else -> Error and the session closes.
//
// Threads (docs/design.md, "Threads", "A shard"). The transport's
// callbacks never touch RocksDB and never wait for disk: they check a
// message, then hand it on.
//   - One writer thread takes every Apply (and CreateTable) waiting at that
//     moment and commits the batches as one RocksDB write (group commit:
//     ShardStore::ApplyBatches, one WAL append, one fsync under sync); then
//     AfterBatchesCommitted updates the clocks, sends the Acks, answers the
//     parked reads that became ready and pushes to subscribers.
//   - A housekeeping thread (options.housekeeping_interval_ms) logs holdback
//     warnings and writes periodic checkpoints, in paced and embedded alike.
//   - reader_threads reader threads answer Reads that are ready at once, from
//     a ShardStore::ReadView: a consistent (value, version, applied clock)
//     triple that a group being written does not change, so reads do not
//     wait for the writer's disk write.
//
// Ordering: a reply read from a view is sent while the view is held, and the
// writer publishes the next state (and only then sends its Acks and Pushes)
// after every view of the previous one is released, so on each session no
// value is ever sent after an Ack or PushDone that makes it stale. Messages
// of the writer are sent under mu_, in shard-clock order.
//
// Thread-safety: all methods are thread-safe. REQUIRES of the transport:
// Session::Send and Session::Close must not call back into this service
// synchronously (queue instead).
// Ownership: the service owns its ShardStore; sessions are shared with the
// transport and held only while they are connected. Destroying the service
// first commits every batch it was handed, answers queued reads, then aborts
// parked reads and closes the store.
#ifndef PACE_SERVER_SHARD_SERVICE_H_
#define PACE_SERVER_SHARD_SERVICE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "consistency/shard_engine.h"
#include "net/messages.h"
#include "net/session.h"
#include "storage/checkpoint.h"
#include "storage/shard_store.h"

namespace pace {

struct ShardServiceOptions {
  // How to open the store, including the job identity (shard_id, num_shards,
  // num_clients). Default: ShardStoreOptions defaults.
  ShardStoreOptions store;
  // The store's directory. Required by Open(options, service).
  std::string data_dir;
  // CheckHoldback warns when the shard clock has kept a client waiting this
  // long. Default: 10000.
  int64_t holdback_warn_ms = 10000;
  // Most rows in one Read. Default: 1M.
  size_t max_read_rows = size_t{1} << 20;
  // Rows of one Push message are cut into messages of at most about this many
  // value bytes (the PushDone still follows the last one). Default: 4 MiB.
  size_t max_push_bytes = size_t{4} << 20;
  // Most Reads one session may have parked (waiting for the shard clock);
  // more are refused with ResourceExhausted, so a client cannot make the
  // shard buffer reads without bound. A well-behaved client has at most a few
  // per row it waits for. Default: 1M.
  size_t max_parked_reads_per_session = size_t{1} << 20;
  // The largest reply frame the transport sends (paced: --max_frame_mb). A
  // Read whose reply could be larger (rows x the largest stored value of its
  // table) is refused with InvalidArgument before any work; the session
  // keeps serving. 0: no check. Default: 64 MiB.
  size_t max_reply_bytes = size_t{64} << 20;
  // Bytes of Read replies the shard holds at once, over all sessions: the
  // replies of Reads being answered (estimated from their row count, as
  // CheckReplyFits does) plus what the transport has queued for sending
  // (net::Session::transport_queued_bytes). Beyond it a Read of a session
  // that has a reply of its own pending or queued is refused with a
  // retriable ResourceExhausted (the client backs off); a session with
  // nothing outstanding is still served, so a peer that stops reading cannot
  // lock others out: the total stays under this plus one reply per such
  // session. Parked Reads answered when the clock advances are not counted
  // here (their own caps are below). 0: no cap. Default: 128 MiB.
  size_t max_read_reply_bytes_total = size_t{128} << 20;
  // Bytes parked Reads may hold per session / in total, and rows subscribed
  // per session / in total (ShardEngineOptions); beyond them a Read is refused
  // with ResourceExhausted. Defaults: 64 MiB, 1 GiB, 16M, 64M.
  size_t max_parked_read_bytes_per_session = size_t{64} << 20;
  size_t max_parked_read_bytes_total = size_t{1} << 30;
  size_t max_subscriptions_per_session = size_t{16} << 20;
  size_t max_subscriptions_total = size_t{64} << 20;
  // Open(options, ...) reads every SST file not verified at an earlier open
  // once and checks its block checksums before serving: a store with a
  // checksum error is refused with a Corruption naming the file, pacectl
  // verify and pacectl checkpoint restore, instead of serving (and training
  // on) what it can still read. Default: true.
  bool verify_checksums = true;
  // With verify_checksums: read every SST file, not only those not verified
  // at an earlier open (ShardStore::VerifyNewChecksums; SST files never
  // change, so by default a start costs a read of what was written since the
  // last start, not of the whole store). paced: --verify_all_checksums.
  // Default: false.
  bool verify_all_checksums = false;
  // With verify_checksums: serve a store whose checksums fail anyway (logged
  // as a warning). paced: --allow_damaged_store. Default: false.
  bool allow_damaged_store = false;
  // Refuse Read/Apply rows that ShardOf() places on another shard. Default: true.
  bool check_placement = true;
  // Threads answering Reads that are ready at once (from a consistent view,
  // without waiting for the writer). Default: 2.
  int reader_threads = 2;
  // Housekeeping, the same in paced and embedded mode: every this many ms a
  // service thread calls CheckHoldback and MaybeCheckpoint. 0: no such thread
  // (call them yourself). Default: 1000.
  int64_t housekeeping_interval_ms = 1000;
  // Periodic checkpoints: when the shard clock passes a multiple of
  // checkpoint_every, MaybeCheckpoint writes checkpoint "clock-<C>" (C: that
  // multiple, 12 digits) into checkpoint_dir (empty: DATA_DIR/checkpoints,
  // or the store's dir), keeping the newest checkpoint_keep.
  // Defaults: 0 (never), "", 3.
  int64_t checkpoint_every = 0;
  std::string checkpoint_dir;
  int checkpoint_keep = 3;
};

// The result of a CheckHoldback call.
struct HoldbackReport {
  bool warned = false;     // a WARNING was logged by this call
  bool held_back = false;  // some client is ahead of the shard clock
  Version shard_clock = 0;
  std::vector<ClientId> laggards;  // clients at the shard clock (when held_back)
  int64_t stalled_ms = 0;          // how long they have kept the others waiting
  std::string message;             // the warning text (when warned)
};

class ShardService : public net::ServiceHandler {
 public:
  // Opens the ShardStore in options.data_dir and wraps it. Errors: those of
  // ShardStore::Open; InvalidArgument for an empty data_dir.
  static Status Open(const ShardServiceOptions& options, std::unique_ptr<ShardService>* service);
  // Wraps an already open store (options.store and data_dir are ignored).
  static Status Open(const ShardServiceOptions& options, std::unique_ptr<ShardStore> store,
                     std::unique_ptr<ShardService>* service);

  ShardService(const ShardService&) = delete;
  ShardService& operator=(const ShardService&) = delete;
  ~ShardService() override;

  // --- net::ServiceHandler ---------------------------------------------------
  Status OnHello(const net::Hello& hello, net::Welcome* welcome) override;
  void OnConnect(const std::shared_ptr<net::Session>& session) override;
  void OnMessage(const std::shared_ptr<net::Session>& session, net::Message m) override;
  void OnDisconnect(const std::shared_ptr<net::Session>& session) override;

  // Logs a glog WARNING naming the client(s) holding back the shard clock if
  // some client has waited at least holdback_warn_ms for them. Repeats for the
  // same stall at doubling intervals. The paced binary calls this from a timer;
  // `now` is the steady clock.
  HoldbackReport CheckHoldback(std::chrono::steady_clock::time_point now);

  Version ShardClock() const;
  std::vector<ClockT> AppliedClocks() const;
  // What a StatsRequest returns (req_id 0).
  net::StatsReply Stats() const;
  // Memory the shard holds now, per component, in bytes: the store's
  // (ShardStore::memory_stats: memtables, block cache, table readers, row
  // cache, retained WriteBatch) plus `apply_bytes`, the Apply batches received
  // and not yet freed (queued for the writer, being committed, or waiting to
  // be freed on a reader thread: payload plus per-row bookkeeping). Cheap;
  // any thread. Stats() reports the write-path parts as memory_write_batch_bytes
  // and memory_apply_batches_bytes (beside the RocksDB and row cache memory_*).
  struct MemoryStats {
    StoreMemoryStats store;
    uint64_t apply_bytes = 0;
    uint64_t total() const { return store.total() + apply_bytes; }
  };
  MemoryStats memory_stats() const;
  // Push latency: for every group commit that advanced the shard clock and
  // sent pushes, the time from receiving the group's last Apply (the batch
  // that completed the clock) to handing its pushes to the transport. Over
  // the last kPushLatencySamples such commits; microseconds. The same split
  // into its three stages: `queue` from receiving that Apply to the writer
  // starting the group's commit (the writer busy with the group before),
  // `commit` the store's write (validate, DB::Write, publish), `send` the
  // Acks, parked reads and the pushes themselves (planned, read from the
  // published view, encoded and queued on the sessions).
  struct PushLatency {
    int64_t samples = 0;
    int64_t p50_us = 0;
    int64_t p99_us = 0;
    int64_t max_us = 0;
  };
  PushLatency push_latency() const;
  struct PushLatencySplit {
    PushLatency total, queue, commit, send;
  };
  PushLatencySplit push_latency_split() const;
  static constexpr size_t kPushLatencySamples = 4096;
  // Test hooks (TEST_): the number of parked reads and subscriptions.
  size_t TEST_NumParkedReads() const;
  size_t TEST_NumSubscriptions() const;

  // Checkpoints the store into `dir` (a consistent state; writes continue).
  Status CreateCheckpoint(const std::string& dir);
  // Writes the periodic checkpoint if the shard clock passed a multiple of
  // options.checkpoint_every since the last one written, then deletes all but
  // the newest checkpoint_keep. Returns its directory, or "" if none was due
  // (or a previous process of this shard had written it: then it only prunes
  // and counts them). The housekeeping thread calls this.
  StatusOr<std::string> MaybeCheckpoint();
  // The periodic checkpoints kept after the last MaybeCheckpoint that wrote
  // or found one: how many, the due clock of the newest and their disk space
  // (storage/checkpoint.h, CheckpointDiskUsage summed). In Stats() and
  // /metrics.
  struct CheckpointStats {
    int64_t count = 0;
    Version last_clock = 0;
    CheckpointUsage usage;
  };
  CheckpointStats checkpoint_stats() const;

  // Blocks until every message handed to OnMessage before the call has been
  // handled and its replies sent (the writer and readers are idle with empty
  // queues). For tests and benchmarks; never call it from a transport thread.
  void TEST_WaitIdle();

  const ShardIdentity& identity() const { return store_->identity(); }
  // Non-OK once the store failed in a way this process cannot recover from
  // (ShardStore::Recover returned neither OK nor Unavailable): paced exits
  // non-zero with this message.
  Status fatal_error() const;
  // The store, for in-process tools. Thread-safe, but writing through it
  // bypasses the service's clocks, parked reads and pushes.
  ShardStore* store() { return store_.get(); }

 private:
  // The ids of the client processes with a session now, increasing.
  std::vector<uint32_t> ConnectedClientsLocked() const REQUIRES(mu_);
  using SessionPtr = std::shared_ptr<net::Session>;
  struct Counters {
    std::atomic<int64_t> batches_applied{0};
    std::atomic<int64_t> duplicates{0};
    std::atomic<int64_t> apply_errors{0};
    std::atomic<int64_t> reads{0};
    std::atomic<int64_t> delta_bytes_in{0};
    std::atomic<int64_t> request_errors{0};
    std::atomic<int64_t> apply_bytes{0};  // MemoryStats::apply_bytes
    // Group commit: writes of the store (one per group), batches in them,
    // the largest group.
    std::atomic<int64_t> commit_groups{0};
    std::atomic<int64_t> commit_group_batches{0};
    std::atomic<int64_t> commit_group_max{0};
    // Parts of incomplete clocks taken back (ShardStore::UndoIncompleteClock).
    std::atomic<int64_t> undone_parts{0};
  };

  // An Apply checked by the transport thread, waiting for the writer.
  struct PendingApply {
    SessionPtr session;
    net::Apply apply;
    std::vector<RowDelta> deltas;                    // point into apply.updates, in row-key order
    int64_t bytes = 0;                               // charged to Counters::apply_bytes until freed
    std::chrono::steady_clock::time_point received;  // when HandleApply took it
  };
  // What the writer runs: an Apply, or another write (e.g. CreateTable).
  struct WriterItem {
    std::unique_ptr<PendingApply> apply;
    std::function<void()> task;
  };

  ShardService(const ShardServiceOptions& options, std::unique_ptr<ShardStore> store);
  void StartThreads();
  void StopThreads();
  void WriterLoop();
  void ReaderLoop();
  void HousekeepingLoop();
  std::string CheckpointDir() const;
  void PostToWriter(WriterItem item);
  void PostRead(std::function<void()> task);
  // Commits `group` as one write and runs AfterBatchesCommitted. On the writer.
  void CommitGroup(std::vector<std::unique_ptr<PendingApply>>* group);
  // Everything that follows a group commit, in one place: per batch an Error
  // or an Ack (after updating the applied clock and marking the changed rows
  // for pushes); then, if the shard clock advanced, the parked reads that are
  // ready are answered and subscribers get their pushes. On the writer.
  // The store is read (for the parked reads and pushes) with mu_ released:
  // plan under mu_, read from the view, send under mu_ (ShardEngine).
  void AfterBatchesCommitted(const std::vector<std::unique_ptr<PendingApply>>& group,
                             const std::vector<BatchResult>& results) EXCLUDES(mu_);
  // AfterBatchesCommitted's first stage: per batch an Error or an Ack after
  // recording it with the engine.
  void RecordGroupLocked(const std::vector<std::unique_ptr<PendingApply>>& group,
                         const std::vector<BatchResult>& results) REQUIRES(mu_);
  // The push-latency samples of a group whose commit sent pushes.
  void RecordPushLatencyLocked(const std::vector<std::unique_ptr<PendingApply>>& group)
      REQUIRES(mu_);
  // Retries pushes that could not read their rows (ShardEngine::PlanRetry),
  // reading with mu_ released. On the writer, so that no publish of a newer
  // clock comes between its plan and its sends; CheckHoldback posts it.
  void RetryPushesOnWriter() EXCLUDES(mu_);
  // Failed store (shard_service_faults.cc; docs/operations.md): the group's
  // batches are kept, in order, behind those already held; each session gets
  // one retriable Error{0} naming the cause per failure. On the writer.
  void HoldGroup(std::vector<std::unique_ptr<PendingApply>>* group);
  // If batches are held: ShardStore::Recover; once it succeeds, DropHeld. A
  // store that cannot recover makes the service fatal (fatal_error()) and
  // fails the held batches. On the writer.
  void RetryHeld();
  // Drops the held batches and closes their sessions: cleanly (why OK: the
  // clients reconnect and re-send them) or with the error `why`. On the writer.
  void DropHeld(const Status& why);
  // Removes from `group` the batches of sessions DropHeld closed (batches
  // after the dropped ones would be clock gaps). On the writer.
  void DropBatchesOfClosedSessions(std::vector<std::unique_ptr<PendingApply>>* group);

  // A Hello of client `client` from process `incarnation`: if the store holds
  // parts of the client's incomplete clock that another process sent
  // (NeedsUndo), or another process of the client was served before (its
  // batches may still wait for the writer), posts the undo to the writer
  // (once, behind those batches) and returns Unavailable: the client retries
  // its Hello and is served after the undo (HelloWaitsForWriter).
  Status CheckIncompleteClockLocked(ClientId client, uint64_t incarnation) REQUIRES(mu_);
  // On the writer: ShardStore::UndoIncompleteClock, then the engine learns
  // the client's parts and the rows to push again.
  void UndoOnWriter(ClientId client, uint64_t incarnation) EXCLUDES(mu_);

  void HandleRead(const SessionPtr& s, net::Read& m);
  void HandleApply(const SessionPtr& s, net::Apply& m);
  void HandleUnsubscribe(const SessionPtr& s, const net::Unsubscribe& m);
  void HandleCreateTable(const SessionPtr& s, const net::CreateTable& m);
  void HandleListTables(const SessionPtr& s, const net::ListTables& m);
  void HandleDescribeTable(const SessionPtr& s, const net::DescribeTable& m);
  // Memory per component against its bound, as Stats() counters
  // "memory_<component>_bytes" and "memory_<component>_limit_bytes".
  // Reads RocksDB properties: never under mu_.
  void AppendMemoryCounters(uint64_t row_cache_bytes,
                            std::vector<std::pair<std::string, int64_t>>* out) const EXCLUDES(mu_);
  void HandleStats(const SessionPtr& s, const net::StatsRequest& m);
  // `retriable`: the condition is transient (net::Error::retriable).
  void SendError(const SessionPtr& s, uint64_t req_id, const Status& st, bool retriable = false);

  // InvalidArgument if a reply to a Read of `rows` rows of `schema` could
  // exceed options.max_reply_bytes (shard_service_faults.cc).
  Status CheckReplyFits(const TableSchema& schema, size_t rows) const;
  // The bytes a ReadReply of `rows` rows of `schema` takes (a sparse row
  // counted at its least).
  static uint64_t ReplyBytes(const TableSchema& schema, size_t rows);
  // Counts `bytes` of a reply `s` is about to get against
  // options.max_read_reply_bytes_total, or says why not (ResourceExhausted,
  // retriable). Every OK is matched by one ReleaseReadReply.
  Status ReserveReadReply(const net::Session& s, uint64_t bytes);
  void ReleaseReadReply(const net::Session& s, uint64_t bytes);
  // Checks that every row belongs to this shard (if check_placement).
  Status CheckPlacement(uint32_t table, uint64_t row) const;
  // Registers `s` with the engine if the transport never called OnConnect.
  void EnsurePeer(const SessionPtr& s) REQUIRES(mu_);
  static PeerInfo InfoOf(const net::Session& s);
  // Answers a ready Read on a reader thread: reads from a view, then under
  // mu_ (view still held) the engine sends it and subscribes if asked.
  void AnswerReadOnReader(const SessionPtr& s, const ReadRequest& read);
  static int64_t NowMs(std::chrono::steady_clock::time_point t);

  // Constant after construction.
  const ShardServiceOptions options_;
  const std::unique_ptr<ShardStore> store_;
  const uint32_t shard_id_;
  const uint32_t num_shards_;
  const uint32_t num_clients_;

  Counters counters_;

  // Read replies being answered (ReserveReadReply), in total and by session.
  Mutex reply_mu_;
  uint64_t reply_bytes_pending_ GUARDED_BY(reply_mu_) = 0;
  std::unordered_map<uint64_t, uint64_t> reply_bytes_by_session_ GUARDED_BY(reply_mu_);

  // Serializes the engine's calls (the writer's bookkeeping after a group,
  // reads being finished, sessions coming and going); guards everything
  // below up to queue_mu_. Never held while the store is read or written.
  // Lock order: a store view, then mu_.
  mutable Mutex mu_;
  ShardEngine engine_ GUARDED_BY(mu_);
  // Connected sessions by id (for the holdback warning).
  std::unordered_map<uint64_t, SessionPtr> sessions_ GUARDED_BY(mu_);
  // Fencing: the one live session of each client process id, by client id
  // (docs/wire-protocol.md, Hello). Reserved by OnHello (session null until
  // OnConnect; a reservation whose OnConnect never came expires), released
  // by OnDisconnect of that session or replaced by a Hello with the same
  // incarnation.
  struct Owner {
    uint64_t incarnation = 0;
    SessionPtr session;       // null: reserved by OnHello, not connected yet
    int64_t reserved_ms = 0;  // steady clock, when reserved
  };
  std::unordered_map<ClientId, Owner> owners_ GUARDED_BY(mu_);
  // Clients whose incomplete clock's undo is queued on the writer.
  std::unordered_set<ClientId> undo_pending_ GUARDED_BY(mu_);
  // The last process (Hello.incarnation) of each client served since this
  // service started: a Hello of another one waits for the writer
  // (HelloWaitsForWriter, consistency/batch_rule.h).
  std::unordered_map<ClientId, uint64_t> served_ GUARDED_BY(mu_);
  // Holdback warning rate limit: the stall last warned about and when next.
  Version warned_clock_ GUARDED_BY(mu_) = -1;
  int64_t warned_since_ms_ GUARDED_BY(mu_) = 0;
  int64_t next_warn_ms_ GUARDED_BY(mu_) = 0;
  int64_t warn_interval_ms_ GUARDED_BY(mu_) = 0;
  // A RetryPushesOnWriter is queued on the writer.
  bool retry_posted_ GUARDED_BY(mu_) = false;

  // The writer's and readers' queues. Lock order: mu_, then queue_mu_.
  Mutex queue_mu_ ACQUIRED_AFTER(mu_);
  CondVar writer_cv_;  // writer_queue_ non-empty or stopping_
  CondVar reader_cv_;  // read_queue_ non-empty or stopping_
  CondVar idle_cv_;    // some queue drained / a thread went idle
  std::deque<WriterItem> writer_queue_ GUARDED_BY(queue_mu_);
  std::deque<std::function<void()>> read_queue_ GUARDED_BY(queue_mu_);
  int busy_ GUARDED_BY(queue_mu_) = 0;  // writer/reader items being run
  bool stopping_ GUARDED_BY(queue_mu_) = false;
  bool stop_housekeeping_ GUARDED_BY(queue_mu_) = false;
  CondVar housekeeping_cv_;
  // The due clock of the last periodic checkpoint written.
  mutable Mutex checkpoint_mu_;
  Version last_checkpoint_ GUARDED_BY(checkpoint_mu_) = 0;
  CheckpointStats checkpoint_stats_ GUARDED_BY(checkpoint_mu_);
  // The writer's own (no lock): the number of Apply batches in the last group
  // and how long its commit took, for the group-commit wait under sync
  // (WriterLoop).
  size_t last_group_applies_ = 0;
  // The last kPushLatencySamples samples (us) of one push-latency figure.
  class LatencyRing {
   public:
    void Add(int64_t us);
    PushLatency Summary() const;

   private:
    std::vector<int64_t> us_;
    size_t next_ = 0;
  };
  PushLatency PushLatencyLocked() const REQUIRES(mu_);
  // Push latency and its stages (PushLatencySplit).
  LatencyRing push_latency_us_ GUARDED_BY(mu_);
  LatencyRing push_queue_us_ GUARDED_BY(mu_);
  LatencyRing push_commit_us_ GUARDED_BY(mu_);
  LatencyRing push_send_us_ GUARDED_BY(mu_);
  // When the writer started and finished the commit of the group being
  // handled (AfterBatchesCommitted's push-latency split). Writer thread only.
  std::chrono::steady_clock::time_point commit_start_{}, commit_end_{};
  std::chrono::steady_clock::duration last_commit_time_{};
  // Batches held while the store is failed (HoldGroup), in arrival order;
  // the sessions told so during this failure; when the held state was last
  // logged. Writer thread only.
  std::vector<std::unique_ptr<PendingApply>> held_;
  std::unordered_map<uint64_t, bool> held_notified_;
  // Sessions DropHeld closed; their later batches are dropped too.
  std::unordered_set<uint64_t> dropped_sessions_;
  int64_t held_logged_ms_ = 0;
  mutable Mutex fatal_mu_;
  Status fatal_ GUARDED_BY(fatal_mu_);
  std::thread writer_;
  std::vector<std::thread> readers_;
  std::thread housekeeper_;
};

}  // namespace pace

#endif  // PACE_SERVER_SHARD_SERVICE_H_
