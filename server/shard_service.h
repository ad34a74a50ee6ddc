// ShardService: one shard of PaceDB as a net::ServiceHandler — the generic
// versioned key-value service over a ShardStore, wired to the protocol engine
// (consistency/shard_engine.h), which decides the server side of the
// consistency models (DESIGN.md section 1): the shard clock, parked SSP reads,
// ESSP subscriptions and pushes. This class validates requests, applies
// batches to the store and sends the Acks.
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
// Consistency of replies: one mutex serializes batch application with every
// read that is answered or pushed, so a value, its version and the reader's
// applied clock form a consistent triple (the value holds exactly the reader's
// clocks < applied_clock).
//
// Thread-safety: all methods are thread-safe. Messages to sessions are sent
// while that mutex is held, which keeps each session's stream ordered by shard
// clock. REQUIRES of the transport: Session::Send and Session::Close must not
// call back into this service synchronously (queue instead).
// Ownership: the service owns its ShardStore; sessions are shared with the
// transport and held only while they are connected.
#ifndef PACE_SERVER_SHARD_SERVICE_H_
#define PACE_SERVER_SHARD_SERVICE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "consistency/shard_engine.h"
#include "net/messages.h"
#include "net/session.h"
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
  // Refuse Read/Apply rows that ShardOf() places on another shard. Default: true.
  bool check_placement = true;
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
  // same stall at doubling intervals. Also retries ESSP pushes that could not
  // read their rows. The paced binary calls this from a timer; `now` is the
  // steady clock.
  HoldbackReport CheckHoldback(std::chrono::steady_clock::time_point now);

  Version ShardClock() const;
  std::vector<ClockT> AppliedClocks() const;
  // What a StatsRequest returns (req_id 0).
  net::StatsReply Stats() const;
  // Number of parked reads and subscriptions (for tests and stats).
  size_t NumParkedReads() const;
  size_t NumSubscriptions() const;

  // Checkpoints the store into `dir` with no batch in flight (applies wait).
  Status CreateCheckpoint(const std::string& dir);

  const ShardIdentity& identity() const { return store_->identity(); }
  // The store, for in-process tools. Thread-safe, but writing through it
  // bypasses the service's clocks, parked reads and pushes.
  ShardStore* store() { return store_.get(); }

 private:
  using SessionPtr = std::shared_ptr<net::Session>;
  struct Counters {
    std::atomic<int64_t> batches_applied{0};
    std::atomic<int64_t> duplicates{0};
    std::atomic<int64_t> apply_errors{0};
    std::atomic<int64_t> reads{0};
    std::atomic<int64_t> delta_bytes_in{0};
    std::atomic<int64_t> request_errors{0};
  };

  ShardService(const ShardServiceOptions& options, std::unique_ptr<ShardStore> store);

  void HandleRead(const SessionPtr& s, net::Read& m);
  void HandleApply(const SessionPtr& s, net::Apply& m);
  void HandleUnsubscribe(const SessionPtr& s, const net::Unsubscribe& m);
  void HandleCreateTable(const SessionPtr& s, const net::CreateTable& m);
  void HandleListTables(const SessionPtr& s, const net::ListTables& m);
  void HandleDescribeTable(const SessionPtr& s, const net::DescribeTable& m);
  void HandleStats(const SessionPtr& s, const net::StatsRequest& m);
  // `retriable`: the condition is transient (net::Error::retriable).
  void SendError(const SessionPtr& s, uint64_t req_id, const Status& st, bool retriable = false);

  // Checks that every row belongs to this shard (if check_placement).
  Status CheckPlacement(uint32_t table, uint64_t row) const;
  // Registers `s` with the engine if the transport never called OnConnect.
  // REQUIRES: mu_ held.
  void EnsurePeer(const SessionPtr& s);
  static int64_t NowMs(std::chrono::steady_clock::time_point t);

  // Constant after construction.
  const ShardServiceOptions options_;
  const std::unique_ptr<ShardStore> store_;
  const uint32_t shard_id_;
  const uint32_t num_shards_;
  const uint32_t num_clients_;

  Counters counters_;

  // The store as the engine reads it.
  const std::unique_ptr<VersionedRows> rows_;

  // Serializes ApplyBatch with the engine's calls (so that reads answered or
  // pushed see each batch together with its applied clock); guards
  // everything below.
  mutable std::mutex mu_;
  ShardEngine engine_;
  // Connected sessions by id (for the holdback warning).
  std::unordered_map<uint64_t, SessionPtr> sessions_;
  // Holdback warning rate limit: the stall last warned about and when next.
  Version warned_clock_ = -1;
  int64_t warned_since_ms_ = 0;
  int64_t next_warn_ms_ = 0;
  int64_t warn_interval_ms_ = 0;
};

}  // namespace pace

#endif  // PACE_SERVER_SHARD_SERVICE_H_
