// Client::Impl and Worker::Impl: the client library's engine. Internal to
// client/; the public contract is client/pace.h and docs/design.md, "Semantics".
//
// One class, its member definitions grouped by concern:
// - client_impl.cc  construction (Create), tables, shard health (ShardHealth,
//                   SetFatal, NotifyAll, NoteShardClock);
// - rpc.cc          requests and replies: SendToShard, Call and the retries
//                   of retriable errors, the retry thread of cache-filling
//                   Reads, WaitProgress, the Stats requests (ShardStats,
//                   JobClock, Laggards);
// - send_path.cc    worker clocks and the process clock, the open-delta bound
//                   (WaitOpenDeltas, SealOpenDeltas), SendClocks / SendBatch,
//                   the re-send of unacknowledged batches, Flush,
//                   GlobalBarrier;
// - read_path.cc    reads that miss or wait, Prefetch, Reads and
//                   subscriptions, Incs, eviction and Unsubscribes;
// - inbound.cc      messages from shards (replies, pushes, Acks), the purge
//                   thread of acknowledged deltas, and connection events;
// - stats.cc        Stats, ResetStats, the in-process shard's memory;
// - this header     the hot paths, as templates (ReadRow, ReadDenseRows,
//                   IncDense, IncDenseRows).
//
// Pieces:
// - shards_: one ShardState per shard (its channel, unacknowledged batches,
//   requests in flight for re-issue after a reconnect, pushed version,
//   connection health).
// - stripes_: the process cache + oplog (client/row_cache.h).
// - the worker clock registry: the process clock is the min over registered
//   workers; when it advances from c to c+1, SendClocks sends each shard its
//   coalesced clock-c deltas (possibly none) as Apply{c}.
//
// Lock order (outer first): clock_mu_ -> send_mu_ -> progress_mu_ ->
// CacheStripe::mu -> ShardState::mu -> channel internals; RpcCall::mu ->
// ShardState::mu. Inbound handlers never hold a stripe lock and a
// ShardState::mu at the same time except in that order, and never take
// clock_mu_ or send_mu_ except OnDisconnect and OnReconnect (send_mu_
// first). tables_mu_, stats_mu_, retry_mu_, purge_mu_ and seal_mu_ are leaves, except that
// RegisterTable takes VapGate's lock (a leaf too) under tables_mu_. Channel
// Send is a leaf (it never calls back), so it may be called under any of
// them.
//
// Thread-safety: all public methods are safe to call concurrently; a worker's
// own state (its clock) is passed in by its single owning thread.
#ifndef PACE_CLIENT_CLIENT_IMPL_H_
#define PACE_CLIENT_CLIENT_IMPL_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "client/pace.h"
#include "client/pass_vector.h"
#include "client/row_cache.h"
#include "client/shard_channel.h"
#include "client/table_state.h"
#include "client/vap_gate.h"
#include "client/worker_stats.h"
#include "common/byte_arena.h"
#include "common/front_dropping_vector.h"
#include "common/hash.h"
#include "common/mutex.h"
#include "common/steady_time.h"
#include "common/thread_annotations.h"
#include "consistency/client_engine.h"
#include "net/messages.h"

namespace pace {
namespace client {

// A request/reply exchange (CreateTable, ListTables, DescribeTable, Stats).
struct RpcCall {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  net::Message reply;
};

// A request in flight, re-sent after a reconnect. Reads have no RpcCall.
// A cache-filling Read owns the reads_in_flight marks of its rows: from the
// moment they are added until the Read is answered, or released when it fails
// (ReleaseReadMarks); it keeps them while it waits to be retried.
struct InFlight {
  net::Message msg;
  std::shared_ptr<RpcCall> rpc;
  // Retriable errors that answered this request so far, and when the first
  // of them came (NowMs).
  int retries = 0;
  int64_t first_error_ms = 0;
};

// A sent, unacknowledged Apply: its clock (and part) and the rows it carried
// (their deltas stay in the cache entries' `pending` until the Ack).
struct SentBatch {
  ClockT clock = 0;
  std::vector<RowKey> keys;
  uint32_t part = 0;
  bool more = false;  // a part with more parts of its clock to come
  // The sealed deltas of its rows (client::PendingDelta::sealed_bytes point
  // into it), shared with the Apply message until the shard has applied it.
  std::shared_ptr<const ByteArena> deltas;
};

struct ShardState {
  uint32_t id = 0;
  std::unique_ptr<ShardChannel> channel;

  // Highest PushDone version: every subscribed row of this shard is current
  // as of it.
  std::atomic<Version> pushed_version{0};
  // A subscribing Read has been sent to this shard, so it sends this process
  // its PushDones (a job's only client is registered for them by such a
  // Read, consistency/shard_engine.cc): rows initialized by the client
  // (TableState::rows_local) may then be marked subscribed.
  std::atomic<bool> subscribed_any{false};
  // Highest shard clock this process has seen (replies, pushes, stats).
  std::atomic<Version> known_clock{0};
  // Every batch of clock < acked_through is acknowledged; its deltas are
  // purged (and out of unacked_bytes_) once purged_through passes it too.
  std::atomic<ClockT> acked_through{0};
  // Parts of clock acked_through acknowledged (its Apply parts; written and
  // read on this shard's inbound thread).
  std::atomic<uint32_t> acked_parts{0};
  std::atomic<ClockT> purged_through{0};
  // Every batch of clock < sent_through has been sent.
  std::atomic<ClockT> sent_through{0};
  // An Ack{duplicate} is expected only below this clock: batches the shard
  // had applied before this process started (its first Welcome's
  // applied_clock) or that were re-sent after a reconnect. A duplicate at or
  // above it is a batch someone else sent as this client: fatal.
  std::atomic<ClockT> duplicates_below{0};
  // ... and parts below this one of clock duplicates_below (the first
  // Welcome's applied_parts: parts the shard had before this process).
  std::atomic<uint32_t> duplicate_parts_below{0};
  // The first Welcome's (applied_clock, applied_parts): parts of clock
  // resume_clock that a previous process of this client had sent before it
  // ended mid-clock. This process's parts of that clock are numbered after
  // them (SendBatch), so the shard keeps those parts and applies every part
  // of the re-run (docs/wire-protocol.md, "Apply parts"). Set by Create.
  ClockT resume_clock = 0;
  uint32_t resume_parts = 0;
  // The largest message payload to and from this shard: the smaller of the
  // channel's and the shard's frame limits (ShardChannel::max_frame_bytes,
  // Welcome::max_frame_bytes, the latest Welcome's); 0: none. Apply batches
  // are cut and Reads bounded to fit it (docs/wire-protocol.md, "Frame
  // limits").
  std::atomic<uint64_t> frame_limit{0};
  std::atomic<bool> connected{true};
  std::atomic<int64_t> disconnected_since_ms{0};
  std::atomic<bool> failed{false};

  mutable Mutex mu;
  std::deque<SentBatch> unacked GUARDED_BY(mu);          // clock order
  std::map<uint64_t, InFlight> requests GUARDED_BY(mu);  // by req_id
  Status fatal GUARDED_BY(mu);                           // set once
  // The sealed deltas of a batch that could never be sent (fatal): kept, as
  // the rows' sealed deltas point into them.
  std::vector<std::shared_ptr<const ByteArena>> unsent GUARDED_BY(mu);
};

using Deadline = std::chrono::steady_clock::time_point;
inline constexpr Deadline kNoDeadline = Deadline::max();

// cv.wait(lock) until notified or `deadline` (kNoDeadline: no timeout).
// Spurious wake-ups are possible: callers re-check their condition in a loop.
template <typename Cv, typename Lock>
void WaitUntil(Cv& cv, Lock& lock, Deadline deadline) {
  if (deadline == kNoDeadline) {
    cv.wait(lock);
  } else {
    cv.wait_until(lock, deadline);
  }
}

// Approximate encoded size of a message's payload (row bytes + keys + a fixed
// header), for the bytes_sent / bytes_received counters.
uint64_t ApproxBytes(const net::Message& m);

// The frame limit of a link whose ends accept payloads of at most `own` and
// `shard` bytes: the smaller nonzero one (0: both unlimited, or not said).
uint64_t FrameLimit(uint32_t own, uint32_t shard);

}  // namespace client

class Client::Impl : public client::ChannelListener {
 public:
  // Starts every channel (index = shard id), checks their Welcomes and builds
  // the client. Used by Client::Open and by tests with fake channels.
  static Status Create(const ClientOptions& options,
                       std::vector<std::unique_ptr<client::ShardChannel>> channels, bool embedded,
                       std::unique_ptr<Client>* client);
  ~Impl() override;

  // --- Tables -------------------------------------------------------------
  Status CreateTable(const TableSchema& schema, client::TableState** state);
  // Creates `created` (as shard 0 answered it, with its id) on shards 1..n-1,
  // or checks that they hold the same schema. *all_made (if given) is set to
  // false unless each of them made the table now (TablesReply::created).
  Status CreateOnOtherShards(const TableSchema& created, bool* all_made = nullptr);
  Status OpenTable(std::string_view name, client::TableState** state);
  Status ListTables(std::vector<TableSchema>* tables);

  // --- Workers and clocks --------------------------------------------------
  ClockT RegisterWorker(std::shared_ptr<client::WorkerStats>* stats);
  void DeregisterWorker(ClockT clock, uint16_t lease_id);
  // Ends clock *clock of a worker and increments it.
  Status ClockWorker(ClockT* clock, client::WorkerStats* ws);
  Status GlobalBarrier(ClockT clock, client::WorkerStats* ws);
  // The open-delta bound (ClientOptions::open_delta_mb): a worker at clock c
  // ahead of the process clock waits while the open deltas exceed the bound,
  // or its clock's exceed PartBytes(), and the process clock is below c.
  // Never waits at the process clock.
  // Callers check it every kOpenDeltaCheckEvery Incs (ahead_of_process_clock).
  Status WaitOpenDeltas(ClockT c, client::WorkerStats* ws);
  // The same bound for a worker AT the process clock c, which cannot wait
  // for other workers: when clock c's open deltas reach PartBytes(), the
  // sealer thread seals and sends them as the clock's next part (Apply{more},
  // docs/wire-protocol.md "Apply parts") once the unacknowledged deltas leave
  // room for it under unacked_mb; the worker goes on, and waits only while
  // the clock's open deltas are at two parts (the sealer waiting for Acks).
  // Checked every kOpenDeltaCheckEvery Incs.
  Status SealOpenDeltas(ClockT c, client::WorkerStats* ws);
  // Half of min(open_delta_mb, unacked_mb), at most kMaxPartBytes, at least
  // 64 KiB.
  uint64_t PartBytes() const { return PartBytesOf(options_.open_delta_mb, options_.unacked_mb); }
  static uint64_t PartBytesOf(uint32_t open_delta_mb, uint32_t unacked_mb);
  static constexpr uint64_t kMaxPartBytes = uint64_t{32} << 20;
  bool ahead_of_process_clock(ClockT c) const {
    return c > process_clock_seen_.load(std::memory_order_acquire);
  }
  static constexpr uint32_t kOpenDeltaCheckEvery = 64;
  // The stripes' open delta bytes: all of them, and clock c's, and clock c's
  // rows (one pass, taking every stripe lock briefly; the bound's checks
  // first compare open_bytes_total_, which needs no lock).
  struct OpenDeltaSum {
    uint64_t all = 0;
    uint64_t of_clock = 0;
    uint64_t rows_of_clock = 0;
    // Of of_clock, the bytes a part can take now: not the leased rows'
    // (a part leaves them for later), so a worker never waits for a part
    // that cannot take what it waits for.
    uint64_t sealable_of_clock = 0;
  };
  OpenDeltaSum OpenDeltaSums(ClockT c) const;
  Status Flush();

  // --- Reads and updates ---------------------------------------------------
  // Calls fn(const CacheEntry&, Version v) under the row's stripe lock with a
  // value that satisfies the read rule for a worker at clock c.
  template <typename Fn>
  Status ReadRow(ClockT c, client::WorkerStats* ws, client::TableState* t, uint64_t row, Fn&& fn);
  // Dense reads of rows[0, n) into out + i * width (T checked by the caller),
  // each by the read rule as ReadRow: rows cached fresh enough are copied in
  // one pass, stripe by stripe with the lookups of the next rows started a
  // few rows ahead (their cache misses overlap); the others are requested
  // with one Read per shard (Prefetch) and then waited for one by one
  // (ReadRow).
  template <typename T>
  Status ReadDenseRows(ClockT c, client::WorkerStats* ws, client::TableState* t,
                       const uint64_t* rows, size_t n, T* out);
  // The cache-hit step of the batched dense reads: if entry `en` (of a stripe
  // whose lock the caller holds) has a value fresh for clock c, copies it with
  // its open deltas to `dst` and returns true; else false (the caller reads
  // the row the slow way).
  template <typename T>
  bool ReadDenseIfFresh(ClockT c, const client::CacheStripe& st, uint16_t me, client::TableState* t,
                        client::TableCounters* tc, client::CacheEntry* en, size_t width, T* dst)
      REQUIRES(st.mu);
  // The tail of ReadDenseRows: rows[slow[k]] (not fresh in the cache) read
  // by ReadRow into out + slow[k] * width, after one Read per shard for them.
  template <typename T>
  Status ReadSlowDenseRows(ClockT c, client::WorkerStats* ws, client::TableState* t,
                           const uint64_t* rows, const std::vector<uint32_t>& slow, T* out);
  // Worker::Prefetch: one Read per shard for the rows that are neither fresh
  // for clock c, nor pushed, nor in flight. Never blocks.
  Status Prefetch(ClockT c, client::WorkerStats* ws, client::TableState* t,
                  const std::vector<uint64_t>& rows);
  // Worker::EvictFirst: the cached rows lose their CLOCK chances (referenced,
  // look-ahead) and join their stripe's evict-first queue, which eviction
  // takes before the CLOCK hand looks for other rows.
  void EvictFirst(client::TableState* t, const std::vector<uint64_t>& rows);
  // Dense Inc of t->format.width elements of type T (checked by the caller).
  template <typename T>
  Status IncDense(ClockT c, client::WorkerStats* ws, client::TableState* t, uint64_t row,
                  const T* delta);
  // IncDense of rows[i] with deltas + i * width for every i, stripe by stripe
  // with the lookups of the next rows prefetched.
  // With `out`: then reads each row, as ReadDenseRows into out would right
  // after: a stripe's rows are all added to, then read, under one hold of
  // its lock (their lines still in this core's cache); rows not fresh
  // enough are read after the pass (ReadRow).
  // With `base`: row i's delta is deltas[i] - base[i] (element by element,
  // computed as it is added: a worker's copies as updated and as read).
  template <typename T>
  Status IncDenseRows(ClockT c, client::WorkerStats* ws, client::TableState* t,
                      const std::vector<uint64_t>& rows, const T* deltas, T* out = nullptr,
                      const T* base = nullptr);
  // Adds a delta (already validated for t's format) at clock c.
  Status IncRow(ClockT c, client::WorkerStats* ws, client::TableState* t, uint64_t row,
                std::string_view delta);
  Status IncDenseCell(ClockT c, client::WorkerStats* ws, client::TableState* t, uint64_t row,
                      uint32_t col, double value);

  // --- Leases (Worker::LeaseRows) --------------------------------------------
  // A leased row: its stripe and entry (entries never move, and a leased one
  // is pinned: never erased).
  struct Leased {
    client::CacheStripe* stripe;
    client::CacheEntry* entry;
  };
  // A worker's leases, oldest first, released from the front as its window
  // moves (a window of ~100k leases, released a look-ahead chunk at a time).
  using LeasedRows = FrontDroppingVector<Leased>;
  // Leases rows[i] for worker `ws` at clock c: values[i] and deltas[i] point
  // to its value and its open delta of clock c, or are nullptr where the row
  // cannot be leased (Worker::LeaseRows); each leased row is appended to
  // *leased (a row once). Reads rows not cached fresh first (ReadRow).
  template <typename T>
  Status LeaseDenseRows(ClockT c, client::WorkerStats* ws, client::TableState* t,
                        const std::vector<uint64_t>& rows, const T** values, T** deltas,
                        LeasedRows* leased);
  // Ends the first `count` of *leased (all if fewer) of worker `ws`, and
  // erases them.
  void ReleaseLeases(client::WorkerStats* ws, LeasedRows* leased, size_t count);
  // The error of an update of a row another worker leased (with
  // `others_updated`: the call's other rows were updated).
  static Status LeasedRowUpdated(const client::TableState& t, uint64_t row,
                                 bool others_updated = false);

  // --- Introspection -------------------------------------------------------
  ClockT start_clock() const { return start_clock_; }
  ClientId client_id() const { return options_.client_id; }
  uint32_t num_clients() const { return options_.num_clients; }
  uint32_t num_shards() const { return static_cast<uint32_t>(shards_.size()); }
  bool embedded() const { return embedded_; }
  ClientStats Stats() const;
  void ResetStats();
  Status Laggards(std::vector<ClientLag>* laggards);
  Status JobClock(Version* clock);
  Version PushedVersion() const {  // Client::PushedVersion
    Version v = 0;
    for (size_t k = 0; k < shards_.size(); ++k) {
      Version p = shards_[k]->pushed_version.load(std::memory_order_acquire);
      if (k == 0 || p < v) v = p;
    }
    return v;
  }
  // Embedded: the in-process shard's memory per component (its Stats
  // counters memory_*), appended as "shard.<component>".
  void AppendShardMemory(std::vector<ClientStats::MemoryComponent>* out) const;

  // --- ChannelListener -----------------------------------------------------
  void OnMessage(uint32_t shard, net::Message m) override;
  void OnDisconnect(uint32_t shard, const Status& why) override;
  void OnReconnect(uint32_t shard, const net::Welcome& welcome) override;

 private:
  static constexpr size_t kNumStripes = 64;
  // Rows a thread other than a worker (the seal, the purge, the delivery of
  // reads and pushes) handles per hold of a stripe's lock: ~256 x 0.2-0.5 us.
  static constexpr size_t kStripeSliceRows = 256;
  // A worker's Clock() blocks while it is this many clocks ahead of the
  // oldest unacknowledged batch (bounds the oplog when a shard is slow).
  static constexpr ClockT kMaxClocksInFlight = 64;

  Impl(const ClientOptions& options, bool embedded);

  client::CacheStripe& StripeFor(const RowKey& key) {
    return stripes_[RowKeyHash()(key) & (kNumStripes - 1)];
  }
  client::CacheStripe& StripeForHash(size_t hash) { return stripes_[hash & (kNumStripes - 1)]; }

  // Passes over many rows go stripe by stripe (one lock per stripe, and the
  // lookups of the next rows of a stripe started while a row is handled):
  // a row's key hash and its index in the caller's list.
  struct StripeItem {
    size_t hash;
    uint32_t index;
  };
  // The items of rows [0, n) (key_of(i): row i's key), in stripe order; rows
  // of one stripe keep their given order.
  // (In vectors the thread reuses: client/pass_vector.h.)
  template <typename KeyOf>
  static client::PassVector<StripeItem> ByStripe(size_t n, KeyOf&& key_of) {
    // A counting sort on the stripe number: stable, two passes, no compare.
    client::PassVector<StripeItem> hashed(n);
    std::array<uint32_t, kNumStripes + 1> start{};
    for (size_t i = 0; i < n; ++i) {
      hashed[i] = StripeItem{RowKeyHash()(key_of(i)), static_cast<uint32_t>(i)};
      ++start[(hashed[i].hash & (kNumStripes - 1)) + 1];
    }
    for (size_t s = 1; s <= kNumStripes; ++s) start[s] += start[s - 1];
    client::PassVector<StripeItem> items(n);
    for (const StripeItem& it : *hashed) items[start[it.hash & (kNumStripes - 1)]++] = it;
    return items;
  }
  // Calls fn(stripe, b, e) for each run items[b, e) of one stripe's rows
  // (items from ByStripe), of at most max_run rows: a thread that is not a
  // worker holds a stripe's lock for a slice of rows (kStripeSliceRows) at
  // a time, so the workers that need the stripe wait for no more.
  template <typename Fn>
  void ForEachStripeRun(const std::vector<StripeItem>& items, Fn&& fn, size_t max_run = SIZE_MAX) {
    for (size_t b = 0; b < items.size();) {
      client::CacheStripe& st = StripeForHash(items[b].hash);
      size_t e = b;
      while (e < items.size() && e - b < max_run && &StripeForHash(items[e].hash) == &st) ++e;
      fn(st, b, e);
      b = e;
    }
  }
  // ForEachStripeRun with the run's stripe lock held around fn (which calls
  // st.mu.AssertHeld() for the analysis). A run whose stripe another thread
  // holds is put off to the end of the pass instead of waited for: the
  // holder (the seal, the purge or the delivery of a read, a slice of rows
  // at a time) has usually moved on by then, where a futex sleep and its
  // wake-up cost ~100-250 us on this project's 2-core machines. Passes whose
  // runs do not depend on each other's order only.
  template <typename Fn>
  void ForEachStripeRunLocked(const std::vector<StripeItem>& items, Fn&& fn,
                              size_t max_run = SIZE_MAX) {
    std::vector<std::pair<size_t, size_t>> put_off;
    ForEachStripeRun(
        items,
        [&](client::CacheStripe& st, size_t b, size_t e) {
          if (!st.mu.try_lock()) {
            put_off.emplace_back(b, e);
            return;
          }
          fn(st, b, e);
          st.mu.unlock();
        },
        max_run);
    for (const auto& [b, e] : put_off) {
      client::CacheStripe& st = StripeForHash(items[b].hash);
      client::SpinLock l(&st.mu);
      fn(st, b, e);
    }
  }
  // ForEachStripeRunLocked in slices of kStripeSliceRows rows: for the
  // passes of threads other than the workers.
  template <typename Fn>
  void ForEachStripeSliceLocked(const std::vector<StripeItem>& items, Fn&& fn) {
    ForEachStripeRunLocked(items, std::forward<Fn>(fn), kStripeSliceRows);
  }
  uint32_t ShardOfKey(const RowKey& key) const {
    return shards_.size() == 1 ? 0 : ShardOf(key.table, key.row, num_shards());
  }
  Version EffectiveVersion(const client::CacheEntry& e) const {
    if (!e.subscribed) return e.version;  // no load of the shard's pushed_version
    return client_engine::EffectiveVersion(
        e.version, true, shards_[e.shard]->pushed_version.load(std::memory_order_acquire));
  }
  client::TableCounters* Counters(client::WorkerStats* ws, client::TableState* t) {
    return ws->For(t->index, t->hist_bound);
  }

  // Slow path of ReadRow: waits (stripe lock held in `lock`) until the row has
  // a fresh enough value; on OK *entry and *version are set.
  Status WaitForRow(ClockT c, client::WorkerStats* ws, client::TableState* t, const RowKey& key,
                    client::CacheStripe& st, client::SpinUniqueLock& lock,
                    client::CacheEntry** entry, Version* version) REQUIRES(st.mu);
  // After a reconnect to shard k: its subscribed rows are subscribed again
  // (a subscription lives in the session), with one Read per table of up to
  // MaxRowsPerRead rows (read_path.cc). Until the reply, a row keeps the
  // version the old session vouched for. REQUIRES: no stripe lock held.
  void ResubscribeShard(uint32_t k);
  // Sends Read{row, min_version, subscribe} for `e` of stripe `st`.
  void SendRead(client::CacheStripe& st, client::CacheEntry* e, Version min_version, bool subscribe)
      REQUIRES(st.mu);
  // Sends a cache-filling Read (any number of rows) to shard k with a fresh
  // req_id, recorded for re-sending after a reconnect. The caller has added
  // the rows' reads_in_flight (only SendRead and ReadGatherer do).
  void SendCacheRead(uint32_t k, net::Read r, int retries = 0, int64_t first_error_ms = 0);
  // Removes the reads_in_flight marks of a Read that will not be answered and
  // wakes the rows' waiters (they send their own Read or see the failure).
  void ReleaseReadMarks(const net::Read& r);
  class ReadGatherer;
  // Whether InitLocally can answer a read at version `need` of a row of
  // shard k (of a pushed table if `push`): the process clock has reached it
  // and, under push, the shard has registered this process for its
  // PushDones. LocalReadsAnswerable: the same for a pushed table's rows of
  // every shard.
  bool LocalReadAnswerable(uint32_t k, bool push, Version need) const;
  bool LocalReadsAnswerable(Version need) const;
  // If t->rows_local and `e` (of t) has no value, was never sent and is not
  // being read: installs its initializer as the value a shard's Read would
  // answer (at version `need`, subscribed under push) and returns true.
  bool InitLocally(client::CacheStripe& st, client::CacheEntry* e, client::TableState* t,
                   Version need) REQUIRES(st.mu);
  // Evicts over-budget values of `st` (stripe lock held), queueing
  // Unsubscribe for subscribed ones (CacheStripe::unsubscribe).
  void EvictLocked(client::CacheStripe& st) REQUIRES(st.mu);
  // Sends st's queued Unsubscribes.
  void FlushUnsubscribesLocked(client::CacheStripe& st) REQUIRES(st.mu);
  // Sends every stripe's queued Unsubscribes, one message per (shard,
  // table). REQUIRES: no stripe lock held. (It holds several at once, in
  // index order, which the analysis cannot follow.)
  void FlushAllUnsubscribes() NO_THREAD_SAFETY_ANALYSIS;

  // OK, or why shard `k` cannot serve now (gone longer than the timeout, or
  // a fatal protocol error).
  Status ShardHealth(uint32_t k) const;
  Status AllShardsHealth() const;
  // When ShardHealth(k) (AllShardsHealth) turns bad by time alone: a
  // disconnected shard's shard_timeout_ms runs out. kNoDeadline if connected.
  // Every other change of health notifies (SetFatal, OnDisconnect,
  // OnReconnect call NotifyAll), so waiters need no poll interval.
  client::Deadline HealthDeadline(uint32_t k) const;
  client::Deadline AllShardsHealthDeadline() const;
  void SetFatal(uint32_t k, const Status& s);
  // Wakes every waiter (stripes, progress, rpcs) to re-check state.
  void NotifyAll();

  // --- Retries of retriable shard errors ------------------------------------
  // After a retriable error `why` answering *req: counts it and returns the
  // backoff (ms) before sending the request again, or -1 once it has been
  // failing for shard_timeout_ms (*final is then the status to fail with).
  int64_t NextRetryDelayMs(client::InFlight* req, const Status& why, Status* final);
  // Queues a cache-filling Read to be re-sent to shard k after delay_ms.
  void ScheduleRetry(uint32_t k, client::InFlight req, int64_t delay_ms);
  // The retry thread: re-sends queued Reads when due (started on first use).
  void RetryLoop();

  // With clock_mu_ held: if the min over worker clocks (max_worker_clock_
  // when no worker is left) passed the process clock, advances it and sends
  // the batches of the clocks it passed (taking
  // send_mu_ before releasing clock_mu_, so batches leave in clock order).
  // Releases clock_mu_ in every case.
  void AdvanceProcessClockAndUnlock() RELEASE(clock_mu_) EXCLUDES(send_mu_);
  // Sends batches for clocks [from, to) (the last part of clock `from` if
  // parts of it were sent).
  void SendClocks(ClockT from, ClockT to) REQUIRES(send_mu_);
  // Seals clock c's open deltas and sends them to every shard as the next
  // part of clock c (more: not the last part; next_part_ counts them). A
  // shard's deltas that would not fit its frame limit in one Apply leave as
  // several parts (all but the last with more); a row that cannot fit a frame
  // alone fails the shard with ResourceExhausted naming the sizes.
  void SendBatch(ClockT c, bool more) REQUIRES(send_mu_);
  // SendBatch's parts for shard k (the last numbered last_part; its `more`
  // as given): each recorded unacknowledged and sent if the shard is
  // connected.
  void SendParts(ClockT c, bool more, uint32_t k, std::vector<net::Apply>* applies,
                 std::vector<std::vector<RowKey>>* keys, uint32_t last_part, uint64_t limit,
                 const std::shared_ptr<ByteArena>& arena) REQUIRES(send_mu_);
  // Reserves, in the first part of each shard's batch of clock c, room for
  // its rows, and makes each shard's arena for the sealed deltas, its first
  // chunk sized for the shard's share of the clock's bytes (SendBatch).
  void ReserveBatch(ClockT c, const std::vector<uint64_t>& limit,
                    std::vector<std::vector<net::Apply>>* applies,
                    std::vector<std::vector<std::vector<RowKey>>>* keys,
                    std::vector<std::shared_ptr<ByteArena>>* arenas);
  // Builds shard k's Apply for an unacked batch from the entries' pending
  // deltas.
  net::Apply RebuildBatch(const client::SentBatch& b) REQUIRES(send_mu_);
  // After a reconnect to shard k (on its inbound thread): re-sends its
  // unacknowledged batches in clock order, with the duplicate bound raised
  // over them (the shard may have applied any). Returns how many.
  size_t ResendUnackedBatches(uint32_t k) REQUIRES(send_mu_);
  void SendToShard(uint32_t k, net::Message m);
  // Request/reply with shard k; waits for the reply (or health failure).
  Status Call(uint32_t k, net::Message request, net::Message* reply);
  // Shard k's StatsReply (and notes its shard clock).
  Status ShardStats(uint32_t k, net::StatsReply* stats);
  uint64_t NextReqId() { return next_req_id_.fetch_add(1, std::memory_order_relaxed); }
  Status WaitProgress(const std::function<bool()>& done, const std::function<Status()>& health,
                      client::WorkerStats* ws, const char* what);

  // Inbound handlers.
  void HandleReadReply(uint32_t k, net::ReadReply r);
  // Gives each row sent as absent (no record at the shard) its table's
  // initial value. Corruption for an absent row with bytes or of a table this
  // client has not opened.
  Status ComputeAbsentRows(const std::vector<net::RowData*>& rows);
  void HandlePush(uint32_t k, net::Push p);
  void HandlePushDone(uint32_t k, const net::PushDone& d);
  // Publishes the acknowledged position (readers and installs go by it from
  // here) and queues the batches' deltas for the purge thread.
  void HandleAck(uint32_t k, const net::Ack& a);
  // Purges the acknowledged deltas of batch b from the cache entries.
  // Returns their bytes. REQUIRES: no stripe lock held.
  uint64_t PurgeBatch(const client::SentBatch& b);
  // The purge thread: purges acknowledged batches in the order their Acks
  // came, then lowers unacked_bytes_ and raises their shard's
  // purged_through (started on the first Ack).
  void PurgeLoop();
  void HandleReply(uint32_t k, uint64_t req_id, net::Message m);
  // Installs row values from shard k (each as of version v, holding this
  // process's clocks < a and parts < parts of clock a). `read` marks a reply
  // to our Read (clears one read in flight each; `subscribe` as requested);
  // `read_min` is that Read's min_version. A row that fails validation fails
  // the shard (Corruption).
  void InstallRows(uint32_t k, const std::vector<net::RowData*>& rows, Version v, ClockT a,
                   uint32_t parts, bool read, bool subscribe, Version read_min);
  // One row of InstallRows, its stripe locked. Returns the row's validation
  // error (the row is then left as it was).
  Status InstallRowLocked(client::ShardState& sh, client::CacheStripe& st, client::CacheEntry* e,
                          net::RowData& row, Version v, ClockT a, uint32_t parts, bool read,
                          bool subscribe, Version read_min) REQUIRES(st.mu);
  void NoteShardClock(uint32_t k, Version v);

  client::TableState* RegisterTable(const TableSchema& schema);
  client::TableState* FindTableById(uint32_t id);
  // The id of some open table, or 0.
  uint32_t AnyTableId();

  // Constant after construction.
  const ClientOptions options_;
  const bool embedded_;
  ClockT start_clock_ = 0;
  std::vector<std::unique_ptr<client::ShardState>> shards_;

  mutable client::CacheStripe stripes_[kNumStripes];
  // Sum of the stripes' open_bytes (CacheStripe::open_bytes_total): of_clock
  // and all of OpenDeltaSums are at most this.
  std::atomic<uint64_t> open_bytes_total_{0};
  // Sum of the stripes' leased_bytes (CacheStripe::leased_bytes_total):
  // open_bytes_total_ less it bounds what a part could take without a look
  // at the stripes.
  std::atomic<uint64_t> leased_bytes_total_{0};
  uint64_t SealableBound() const {
    const uint64_t open = open_bytes_total_.load(std::memory_order_relaxed);
    const uint64_t leased = leased_bytes_total_.load(std::memory_order_relaxed);
    return open > leased ? open - leased : 0;
  }
  // Bit i: stripes_[i] has queued Unsubscribes (set and cleared under its lock).
  std::atomic<uint64_t> unsubscribe_stripes_{0};
  static_assert(kNumStripes <= 64, "unsubscribe_stripes_ has a bit per stripe");

  mutable Mutex tables_mu_;
  std::map<uint32_t, std::unique_ptr<client::TableState>> tables_ GUARDED_BY(tables_mu_);

  mutable Mutex clock_mu_ ACQUIRED_BEFORE(send_mu_);
  std::map<ClockT, int> worker_clocks_ GUARDED_BY(clock_mu_);
  ClockT process_clock_ GUARDED_BY(clock_mu_) = 0;
  // The highest clock a worker has reached (registered at or clocked to).
  // With no worker registered the process clock is this: every clock below
  // it was finished by every worker that was still there (a worker leaves
  // at its clock, having finished the ones below), so their batches are due.
  ClockT max_worker_clock_ GUARDED_BY(clock_mu_) = 0;
  std::vector<std::shared_ptr<client::WorkerStats>> worker_stats_ GUARDED_BY(clock_mu_);
  // WorkerStats::lease_id: the last one given, and those given back.
  uint16_t next_lease_id_ GUARDED_BY(clock_mu_) = 0;
  std::vector<uint16_t> free_lease_ids_ GUARDED_BY(clock_mu_);

  Mutex send_mu_;  // orders Apply batches per shard
  // Per shard: parts of the process clock's batch this process sent so far
  // (the shard's part numbers also count ShardState::resume_parts at
  // resume_clock). Sized at Create.
  std::vector<uint32_t> next_part_ GUARDED_BY(send_mu_);

  std::mutex progress_mu_;
  std::condition_variable progress_cv_;  // acks, shard clocks, health changes

  std::atomic<uint64_t> next_req_id_{1};

  struct PendingRetry {
    uint32_t shard;
    client::InFlight req;
  };
  Mutex retry_mu_;
  CondVar retry_cv_;  // a retry was queued, or stop
  std::multimap<client::Deadline, PendingRetry> retries_ GUARDED_BY(retry_mu_);  // by due time
  bool retry_stop_ GUARDED_BY(retry_mu_) = false;
  std::thread retry_thread_ GUARDED_BY(retry_mu_);  // joined by ~Impl after retry_stop_

  // Acknowledged batches whose deltas are still in the cache entries. An Ack
  // of a clock purges one delta per row it changed (at model scale 235k rows,
  // 100-400 ms on a busy machine); done on the shard's inbound thread, it
  // held back the PushDone behind the Ack, which the workers of the next
  // clock wait for. The acknowledged position is published first, so a value
  // installed meanwhile skips those deltas (client_engine::Rebase).
  struct PendingPurge {
    uint32_t shard = 0;
    std::vector<client::SentBatch> batches;
    ClockT whole_clocks = 0;  // purged_through once they are purged
  };
  Mutex purge_mu_;
  CondVar purge_cv_;  // a purge was queued, or stop
  std::deque<PendingPurge> purges_ GUARDED_BY(purge_mu_);
  bool purge_stop_ GUARDED_BY(purge_mu_) = false;
  std::thread purge_thread_ GUARDED_BY(purge_mu_);  // joined by ~Impl after purge_stop_

  // The sealer thread (pace-seal): seals and sends the part of the process
  // clock that a worker found full (SealOpenDeltas asks for it), so that the
  // worker goes on training while the part is sealed: at model scale a part
  // is ~270k rows, ~0.3 s of copying that used to stop the worker. Started on
  // the first request; joined by ~Impl.
  void RequestSeal(ClockT c) EXCLUDES(seal_mu_);
  void SealLoop() EXCLUDES(seal_mu_);
  // Seals clock c's open deltas as the clock's next part if they still fill
  // one and c is still the process clock, once the unacknowledged deltas
  // leave room for the part under unacked_mb (gives up at a shard's failure
  // or the client's end: the workers see those themselves).
  void SealPart(ClockT c) EXCLUDES(seal_mu_, send_mu_);
  Mutex seal_mu_;
  CondVar seal_cv_;  // a part was asked for, or stop
  bool seal_requested_ GUARDED_BY(seal_mu_) = false;
  ClockT seal_clock_ GUARDED_BY(seal_mu_) = 0;
  bool seal_stop_ GUARDED_BY(seal_mu_) = false;
  std::thread seal_thread_ GUARDED_BY(seal_mu_);  // joined by ~Impl after seal_stop_
  std::atomic<bool> sealer_stopping_{false};      // seal_stop_, for the wait for room

  // Client-wide counters (not on hot paths).
  std::atomic<uint64_t> bytes_sent_{0}, bytes_received_{0}, rows_sent_{0}, rows_received_{0},
      batches_sent_{0}, batches_resent_{0}, requests_retried_{0};
  // process_clock_, readable without clock_mu_ (stored by SendClocks
  // before it seals, and at Create).
  // vap tables' value bound: fed by SendBatch and HandleAck, waited for in
  // ClockWorker (client/vap_gate.h).
  client::VapGate vap_;
  std::atomic<ClockT> process_clock_seen_{0};
  std::atomic<uint64_t> open_delta_waits_{0};
  std::atomic<uint64_t> parts_sent_{0};  // Apply parts sent early (more)
  // Bytes of the sealed deltas of sent, unacknowledged batches (the sizes
  // SendClocks sealed, minus what HandleAck purged). Bounded by
  // options_.unacked_mb at Clock().
  std::atomic<uint64_t> unacked_bytes_{0};

  // ResetStats baseline (raw totals at the last reset).
  mutable Mutex stats_mu_;
  struct RawTable {
    std::vector<uint64_t> hist;
    uint64_t staleness_sum = 0, reads = 0, hits = 0, blocked = 0, fetched = 0, incs = 0, pushes = 0,
             evictions = 0, initialized = 0;
  };
  struct RawStats {
    std::vector<RawTable> tables;  // by table index
    uint64_t get_blocked_ns = 0, clock_blocked_ns = 0, bytes_sent = 0, bytes_received = 0,
             rows_sent = 0, rows_received = 0, batches_sent = 0, batches_resent = 0,
             requests_retried = 0;
  };
  RawStats RawTotals() const EXCLUDES(clock_mu_, tables_mu_);
  RawStats baseline_ GUARDED_BY(stats_mu_);
};

class Worker::Impl {
 public:
  Impl(Client::Impl* client, ClockT clock, std::shared_ptr<client::WorkerStats> stats)
      : client_(client), clock_(clock), stats_(std::move(stats)) {}
  ~Impl() {
    ReleaseLeases();
    client_->DeregisterWorker(clock_, stats_->lease_id);
  }
  void ReleaseLeases(size_t count = SIZE_MAX) {
    if (stats_->holds_leases) client_->ReleaseLeases(stats_.get(), &leased_, count);
  }

  Client::Impl* client_;
  ClockT clock_;
  std::shared_ptr<client::WorkerStats> stats_;
  std::string scratch_;                  // a row with open deltas, as Read/map Gets see it
  Client::Impl::LeasedRows leased_;      // rows this worker leases (LeaseRows)
  uint32_t incs_since_bound_check_ = 0;  // see Client::Impl::WaitOpenDeltas

  // After an Inc: the open-delta bound, checked every kOpenDeltaCheckEvery
  // Incs: a worker ahead of the process clock waits, one at it seals a part.
  Status AfterInc(size_t rows = 1) {
    incs_since_bound_check_ += static_cast<uint32_t>(std::min<size_t>(rows, 1u << 20));
    if (incs_since_bound_check_ < Client::Impl::kOpenDeltaCheckEvery) {
      return Status::OK();
    }
    incs_since_bound_check_ = 0;
    if (!client_->ahead_of_process_clock(clock_)) {
      return client_->SealOpenDeltas(clock_, stats_.get());
    }
    return client_->WaitOpenDeltas(clock_, stats_.get());
  }
};

// ---------------------------------------------------------------------------

template <typename Fn>
Status Client::Impl::ReadRow(ClockT c, client::WorkerStats* ws, client::TableState* t, uint64_t row,
                             Fn&& fn) {
  RowKey key{t->schema.id, row};
  const size_t hash = RowKeyHash()(key);
  client::CacheStripe& st = StripeForHash(hash);
  client::TableCounters* tc = Counters(ws, t);
  client::SpinUniqueLock lock(&st.mu);
  client::CacheEntry* e = st.Find(key, hash);
  Version v = 0;
  if (e != nullptr && e->has_value && t->policy.IsFresh(v = EffectiveVersion(*e), c) &&
      !st.LeasedByOther(e, ws != nullptr ? ws->lease_id : 0)) {
    client::MarkRead(e);
    fn(*e, v);
    lock.unlock();
    if (tc != nullptr) {
      tc->reads.Add(1);
      tc->hits.Add(1);
      tc->RecordStaleness(c - v);
    }
    return Status::OK();
  }
  RETURN_IF_ERROR(WaitForRow(c, ws, t, key, st, lock, &e, &v));
  client::MarkRead(e);
  fn(*e, v);
  lock.unlock();
  if (tc != nullptr) {
    tc->reads.Add(1);
    tc->RecordStaleness(c - v);
  }
  return Status::OK();
}

template <typename T>
bool Client::Impl::ReadDenseIfFresh(ClockT c, const client::CacheStripe& st, uint16_t me,
                                    client::TableState* t, client::TableCounters* tc,
                                    client::CacheEntry* en, size_t width, T* dst) {
  Version v = 0;
  if (!en->has_value || !t->policy.IsFresh(v = EffectiveVersion(*en), c)) return false;
  if (st.LeasedByOther(en, me)) return false;  // ReadRow waits for the release
  client::MarkRead(en);
  client::ReadDense(*en, width, dst);
  if (tc != nullptr) tc->RecordStaleness(c - v);
  return true;
}

template <typename T>
Status Client::Impl::ReadDenseRows(ClockT c, client::WorkerStats* ws, client::TableState* t,
                                   const uint64_t* rows, size_t n, T* out) {
  const size_t width = t->format.width;
  const uint32_t table = t->schema.id;
  auto key_of = [&](size_t i) { return RowKey{table, rows[i]}; };
  const client::PassVector<StripeItem> items = ByStripe(n, key_of);
  client::TableCounters* tc = Counters(ws, t);
  const uint16_t me = ws != nullptr ? ws->lease_id : 0;
  client::PassVector<uint32_t> slow;  // not fresh in the cache: ReadRow after the pass
  uint64_t hits = 0;
  // Three-stage software pipeline within a stripe: the hash slot of row
  // j + 2 * kAhead loads, row j + kAhead is looked up (its entry and value
  // start loading), and the open delta of row j + kAhead / 2 (its entry
  // loaded by then) starts loading, while row j is copied. (Without the
  // last stage, the copy's add of the delta waited for its load: a third
  // of the pass's time.)
  constexpr size_t kAhead = 8;
  client::PassVector<client::CacheEntry*> found(items.size());
  ForEachStripeRunLocked(*items, [&](client::CacheStripe& st, size_t b, size_t e) {
    st.mu.AssertHeld();
    auto slot = [&](size_t j)
                    REQUIRES(st.mu) { st.PrefetchSlot(key_of(items[j].index), items[j].hash); };
    auto look_ahead = [&](size_t j) REQUIRES(st.mu) {
      found[j] = st.Find(key_of(items[j].index), items[j].hash);
      if (found[j] != nullptr) client::PrefetchEntryLines(found[j]);
    };
    for (size_t j = b; j < std::min(e, b + 2 * kAhead); ++j) slot(j);
    for (size_t j = b; j < std::min(e, b + kAhead); ++j) look_ahead(j);
    for (size_t j = b; j < e; ++j) {
      if (j + 2 * kAhead < e) slot(j + 2 * kAhead);
      if (j + kAhead < e) look_ahead(j + kAhead);
      if (j + kAhead / 2 < e) {
        const client::CacheEntry* a = found[j + kAhead / 2];
        if (a != nullptr && a->has_open) {
          __builtin_prefetch(a->open.delta.data());
          __builtin_prefetch(a->open.delta.data() + a->open.delta.size() - 1);
        }
      }
      client::CacheEntry* en = found[j];
      if (en != nullptr && ReadDenseIfFresh(c, st, me, t, tc, en, width,
                                            out + static_cast<size_t>(items[j].index) * width)) {
        ++hits;
      } else {
        slow->push_back(items[j].index);
      }
    }
  });
  if (tc != nullptr) {
    tc->reads.Add(hits);
    tc->hits.Add(hits);
  }
  return ReadSlowDenseRows(c, ws, t, rows, *slow, out);
}

template <typename T>
Status Client::Impl::ReadSlowDenseRows(ClockT c, client::WorkerStats* ws, client::TableState* t,
                                       const uint64_t* rows, const std::vector<uint32_t>& slow,
                                       T* out) {
  const size_t width = t->format.width;
  if (slow.size() > 1) {
    // One Read per shard for the rows that are neither cached fresh nor on
    // their way, instead of a round trip each below.
    std::vector<uint64_t> missing(slow.size());
    for (size_t k = 0; k < slow.size(); ++k) missing[k] = rows[slow[k]];
    RETURN_IF_ERROR(Prefetch(c, ws, t, missing));
  }
  for (uint32_t i : slow) {
    T* dst = out + static_cast<size_t>(i) * width;
    RETURN_IF_ERROR(ReadRow(c, ws, t, rows[i], [dst, width](const client::CacheEntry& en, Version) {
      client::ReadDense(en, width, dst);
    }));
  }
  return Status::OK();
}

template <typename T>
Status Client::Impl::IncDense(ClockT c, client::WorkerStats* ws, client::TableState* t,
                              uint64_t row, const T* delta) {
  RowKey key{t->schema.id, row};
  const size_t hash = RowKeyHash()(key);
  client::CacheStripe& st = StripeForHash(hash);
  {
    client::SpinLock lock(&st.mu);
    client::CacheEntry* e = st.Find(key, hash);
    client::PendingDelta* p = nullptr;
    if (e != nullptr && st.LeasedByOther(e, ws != nullptr ? ws->lease_id : 0)) {
      return LeasedRowUpdated(*t, row);  // nothing updated
    }
    if (e != nullptr && e->has_open && e->open.clock == c) {
      // Common case: this row already has a delta of this clock.
      client::AddInPlace(reinterpret_cast<T*>(e->open.delta.data()), delta,
                         static_cast<size_t>(t->format.width));
    } else if (e != nullptr && (p = e->FindPending(c)) != nullptr) {
      // Its delta of this clock is not `open` (workers at several clocks).
      client::AddInPlace(reinterpret_cast<T*>(p->delta.data()), delta,
                         static_cast<size_t>(t->format.width));
    } else {
      if (e == nullptr) e = st.FindOrCreate(key, ShardOfKey(key), t);
      st.AddDelta(e, c,
                  std::string_view(reinterpret_cast<const char*>(delta),
                                   sizeof(T) * static_cast<size_t>(t->format.width)));
    }
  }
  client::TableCounters* tc = Counters(ws, t);
  if (tc != nullptr) tc->incs.Add(1);
  return Status::OK();
}

template <typename T>
Status Client::Impl::IncDenseRows(ClockT c, client::WorkerStats* ws, client::TableState* t,
                                  const std::vector<uint64_t>& rows, const T* deltas, T* out,
                                  const T* base) {
  const size_t width = t->format.width;
  const uint32_t table = t->schema.id;
  // One stripe lock per stripe; within a stripe, rows in their given order.
  const client::PassVector<StripeItem> items = ByStripe(rows.size(), [&](size_t i) {
    return RowKey{table, rows[i]};
  });
  constexpr size_t kAhead = 8;
  client::PassVector<client::CacheEntry*> found(items.size());
  client::TableCounters* tc = Counters(ws, t);
  client::PassVector<uint32_t> slow;                 // with out: not fresh in the cache
  std::vector<T> diff(base != nullptr ? width : 0);  // with base: a new open delta
  uint64_t hits = 0;
  const uint16_t me = ws != nullptr ? ws->lease_id : 0;
  uint64_t refused_row = 0;  // of a row another worker leased (not updated)
  bool refused = false;
  ForEachStripeRunLocked(*items, [&](client::CacheStripe& st, size_t b, size_t e) {
    st.mu.AssertHeld();
    client::TotalsBatch batch(&st);
    // Three-stage software pipeline: the hash slot of row j + 2 * kAhead and
    // the entry of row j + kAhead load, and the delta (with `out`, also the
    // value; with `base`, the caller's two rows) of row j + kAhead / 2, while
    // row j is added (the slot loads stalled the pass when they were not
    // started ahead).
    auto key_at = [&](size_t j) { return RowKey{table, rows[items[j].index]}; };
    auto slot = [&](size_t j) REQUIRES(st.mu) { st.PrefetchSlot(key_at(j), items[j].hash); };
    auto look_ahead = [&](size_t j) REQUIRES(st.mu) {
      found[j] = st.Lookup(key_at(j), items[j].hash);
      if (found[j] != nullptr) client::PrefetchEntryLines(found[j]);
    };
    for (size_t j = b; j < std::min(e, b + 2 * kAhead); ++j) slot(j);
    for (size_t j = b; j < std::min(e, b + kAhead); ++j) look_ahead(j);
    for (size_t j = b; j < e; ++j) {
      if (j + 2 * kAhead < e) slot(j + 2 * kAhead);
      if (j + kAhead < e) look_ahead(j + kAhead);
      if (j + kAhead / 2 < e && found[j + kAhead / 2] != nullptr) {
        const client::CacheEntry* a = found[j + kAhead / 2];
        __builtin_prefetch(a->open.delta.data());
        __builtin_prefetch(a->open.delta.data() + sizeof(T) * width - 1);
        if (out != nullptr) {
          __builtin_prefetch(a->value.data());
          __builtin_prefetch(a->value.data() + a->value.size() - 1);
        }
      }
      if (base != nullptr && j + kAhead / 2 < e) {
        const size_t at = static_cast<size_t>(items[j + kAhead / 2].index) * width;
        __builtin_prefetch(deltas + at);
        __builtin_prefetch(deltas + at + width - 1);
        __builtin_prefetch(base + at);
        __builtin_prefetch(base + at + width - 1);
      }
      const RowKey key{table, rows[items[j].index]};
      const size_t at = static_cast<size_t>(items[j].index) * width;
      const T* delta = deltas + at;
      auto add_to = [&](T* dst) {
        if (base == nullptr) {
          client::AddInPlace(dst, delta, width);
        } else {
          AddDiffInPlace(dst, delta, base + at, width);
        }
      };
      client::CacheEntry* en = found[j];
      client::PendingDelta* p = nullptr;
      if (en != nullptr && st.LeasedByOther(en, me)) {
        refused_row = rows[items[j].index];
        refused = true;
        found[j] = nullptr;
        continue;
      }
      if (en != nullptr && en->has_open && en->open.clock == c) {
        add_to(reinterpret_cast<T*>(en->open.delta.data()));
      } else if (en != nullptr && (p = en->FindPending(c)) != nullptr) {
        // The row's open delta of another clock is `open` (another worker
        // of the process is a clock behind or ahead): ours is in `pending`.
        add_to(reinterpret_cast<T*>(p->delta.data()));
      } else {
        // A new row (or a duplicate in this batch whose first occurrence
        // created it), or the row's first delta of this clock: the general
        // path. A row the look-ahead found is not looked up again (Find
        // would also start loading its value, which nothing here reads).
        if (en == nullptr) en = st.FindOrCreate(key, ShardOfKey(key), t);
        if (base != nullptr) {
          for (size_t k = 0; k < width; ++k) diff[k] = SubElement(delta[k], base[at + k]);
          delta = diff.data();
        }
        st.AddDelta(en, c,
                    std::string_view(reinterpret_cast<const char*>(delta), sizeof(T) * width));
        found[j] = en;
      }
    }
    if (out == nullptr) return;
    // Every delta of the run's rows is in (a row's duplicates are in the
    // same run): read them back.
    for (size_t j = b; j < e; ++j) {
      if (found[j] != nullptr &&
          ReadDenseIfFresh(c, st, me, t, tc, found[j], width,
                           out + static_cast<size_t>(items[j].index) * width)) {
        ++hits;
      } else {
        slow->push_back(items[j].index);
      }
    }
  });
  if (tc != nullptr) tc->incs.Add(rows.size());
  if (refused) return LeasedRowUpdated(*t, refused_row, /*others_updated=*/true);
  if (out == nullptr) return Status::OK();
  if (tc != nullptr) {
    tc->reads.Add(hits);
    tc->hits.Add(hits);
  }
  return ReadSlowDenseRows(c, ws, t, rows.data(), *slow, out);
}

template <typename T>
Status Client::Impl::LeaseDenseRows(ClockT c, client::WorkerStats* ws, client::TableState* t,
                                    const std::vector<uint64_t>& rows, const T** values, T** deltas,
                                    LeasedRows* leased) {
  const size_t width = t->format.width;
  const uint32_t table = t->schema.id;
  const uint16_t me = ws->lease_id;
  client::TableCounters* tc = Counters(ws, t);
  std::fill(values, values + rows.size(), nullptr);
  std::fill(deltas, deltas + rows.size(), nullptr);
  // A worker ahead of the process clock leases nothing: it may have to wait
  // for the other workers (the open-delta bound), and while it waits holding
  // leases, a reader among them waiting for one of its rows never clocks.
  // At the process clock it cannot fall behind it while it holds leases (its
  // Clock() ends them).
  if (ahead_of_process_clock(c) || me == 0) return Status::OK();
  const size_t delta_bytes = sizeof(T) * width;
  auto key_of = [&](size_t i) { return RowKey{table, rows[i]}; };
  uint64_t hits = 0;
  const bool local = t->rows_local.load(std::memory_order_relaxed);
  const Version need = t->policy.MinVersion(c);
  // One pass (the look-ups of the next rows started ahead, as ReadDenseRows)
  // over rows[index_of(k)] for the items' indices k; rows not fresh in the
  // cache go to *slow.
  // The first pass (with `slow`) counts its rows as cache hits; the rows the
  // second leases were counted by their ReadRow.
  auto pass = [&](const client::PassVector<StripeItem>& items, auto&& index_of,
                  client::PassVector<uint32_t>* slow) {
    constexpr size_t kAhead = 8;
    client::PassVector<client::CacheEntry*> found(items.size());
    ForEachStripeRunLocked(*items, [&](client::CacheStripe& st, size_t b, size_t e) {
      st.mu.AssertHeld();
      client::TotalsBatch batch(&st);
      uint64_t initialized = 0;
      auto slot = [&](size_t j) REQUIRES(st.mu) {
        st.PrefetchSlot(key_of(index_of(items[j].index)), items[j].hash);
      };
      auto look_ahead = [&](size_t j) REQUIRES(st.mu) {
        found[j] = st.Lookup(key_of(index_of(items[j].index)), items[j].hash);
        if (found[j] != nullptr) client::PrefetchEntryLines(found[j]);
      };
      for (size_t j = b; j < std::min(e, b + 2 * kAhead); ++j) slot(j);
      for (size_t j = b; j < std::min(e, b + kAhead); ++j) look_ahead(j);
      for (size_t j = b; j < e; ++j) {
        if (j + 2 * kAhead < e) slot(j + 2 * kAhead);
        if (j + kAhead < e) look_ahead(j + kAhead);
        client::CacheEntry* en = found[j];
        const uint32_t i = index_of(items[j].index);
        Version v = 0;
        if (local && (en == nullptr || !en->has_value)) {
          // Never read nor sent: initialized here, as by a Get (InitLocally).
          if (en == nullptr) en = st.FindOrCreate(key_of(i), ShardOfKey(key_of(i)), t);
          initialized += InitLocally(st, en, t, need) ? 1 : 0;
        }
        if (en == nullptr || !en->has_value || !t->policy.IsFresh(v = EffectiveVersion(*en), c)) {
          if (slow != nullptr) (*slow)->push_back(i);
          continue;
        }
        if (st.LeasedByOther(en, me)) continue;
        // An update of another clock not sent yet (the sealer has not taken
        // the clock before the process clock yet): the row reads as value +
        // both, which one pointer cannot give.
        client::PendingDelta* p = en->FindPending(c);
        if (p == nullptr) {
          if (en->has_open || en->HasMoreOpenDeltas()) continue;
          st.OpenZeroDelta(en, c, delta_bytes);
          p = en->FindPending(c);
        } else if (p != &en->open || en->HasMoreOpenDeltas()) {
          continue;
        }
        client::MarkRead(en);
        if (en->lease_owner == 0) {
          st.Lease(en, me);
          // Filled in place: a Leased built on the stack and copied was a
          // 16-byte load of two 8-byte stores, which no store forwards, so
          // it waited for every store before it (the zeroed delta's).
          Leased& l = leased->emplace_back();
          l.stripe = &st;
          l.entry = en;
        }
        values[i] = reinterpret_cast<const T*>(en->value.data());
        deltas[i] = reinterpret_cast<T*>(p->delta.data());
        if (slow != nullptr) {
          ++hits;
          if (tc != nullptr) tc->RecordStaleness(c - v);
        }
      }
      if (initialized != 0) EvictLocked(st);  // after the run: no entry above is used again
    });
  };
  auto same = [](uint32_t i) { return i; };
  client::PassVector<uint32_t> slow;
  pass(ByStripe(rows.size(), key_of), same, &slow);
  ws->holds_leases = !leased->empty();
  if (!slow->empty()) {
    // Read like GetRows (one Read per shard, then each row by the read
    // rule) and lease what is then cached. While this worker holds leases,
    // a read that would wait for another worker's lease is refused
    // (WaitForRow): such rows are left nullptr, not waited for.
    std::vector<uint64_t> missing(slow->size());
    for (size_t k = 0; k < slow->size(); ++k) missing[k] = rows[(*slow)[k]];
    if (missing.size() > 1) RETURN_IF_ERROR(Prefetch(c, ws, t, missing));
    for (uint64_t row : missing) {
      ws->lease_refused = false;
      Status s = ReadRow(c, ws, t, row, [](const client::CacheEntry&, Version) {});
      if (!s.ok() && !ws->lease_refused) return s;
    }
    const std::vector<uint32_t>& again = *slow;
    pass(
        ByStripe(again.size(), [&](size_t k) { return key_of(again[k]); }),
        [&](uint32_t k) { return again[k]; }, nullptr);
    ws->holds_leases = !leased->empty();
  }
  if (tc != nullptr) {
    tc->reads.Add(hits);
    tc->hits.Add(hits);
  }
  return Status::OK();
}

}  // namespace pace

#endif  // PACE_CLIENT_CLIENT_IMPL_H_
