// Client::Impl: the read path's slow side (misses, stale rows, blocking),
// updates, and eviction.
#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "client/client_impl.h"

namespace pace {

using client::CacheEntry;
using client::CacheStripe;
using client::InFlight;
using client::ShardState;
using client::TableState;

Status Client::Impl::WaitForRow(ClockT c, client::WorkerStats* ws, TableState* t, const RowKey& key,
                                CacheStripe& st, client::SpinUniqueLock& lock, CacheEntry** entry,
                                Version* version) {
  client::TableCounters* tc = Counters(ws, t);
  CacheEntry* e = st.Find(key);
  bool waited = false;
  std::chrono::steady_clock::time_point start;
  Status result;
  Version v = 0;
  for (;;) {
    if (e == nullptr) e = st.FindOrCreate(key, ShardOfKey(key), t);
    if (e->has_value) {
      v = EffectiveVersion(*e);
      if (t->policy.IsFresh(v, c)) break;
    }
    // Any lost shard, not only this row's: a wait on a reachable shard's
    // clock can depend on this process's batches to the lost one.
    result = AllShardsHealth();
    if (!result.ok()) break;
    // Subscribed rows are refreshed by pushes; everything else is pulled.
    if (!(t->push && e->subscribed)) {
      Version need = t->policy.MinVersion(c);
      if (!e->ReadInFlightAtMost(need)) {
        SendRead(e, need, t->push);
        if (tc != nullptr) tc->fetched.Add(1);
      }
    }
    if (!waited) {
      waited = true;
      start = std::chrono::steady_clock::now();
      if (tc != nullptr) tc->blocked.Add(1);
    }
    // Woken by the row's value arriving (InstallRow), a PushDone, the Read's
    // marks being released, or a health change (NotifyAll); the deadline is
    // when the first away shard's timeout runs out.
    ++e->waiters;
    ++st.waiters;
    client::WaitUntil(st.cv, lock, AllShardsHealthDeadline());
    --e->waiters;
    --st.waiters;
  }
  if (waited) {
    ws->get_blocked_ns.Add(
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now() - start)
                                  .count()));
  }
  if (!result.ok()) {
    st.MaybeErase(e);
    return result;
  }
  *entry = e;
  *version = v;
  return Status::OK();
}

// Cache-filling Reads being gathered, one per shard, for one table and
// min_version. It owns the reads_in_flight marks it adds: Add() marks a row
// (under its stripe lock) and queues it in the same step, a shard's Read
// leaves when it is full (SendFull) and whatever is queued leaves at
// SendAll() or in the destructor, so no return path can leave a mark whose
// Read is never sent.
class Client::Impl::ReadGatherer {
 public:
  ReadGatherer(Impl* impl, const TableState* t, Version min_version, size_t max_rows)
      : impl_(impl),
        t_(t),
        min_version_(min_version),
        max_rows_(max_rows),
        reads_(impl->num_shards()) {}
  ~ReadGatherer() { SendAll(); }
  ReadGatherer(const ReadGatherer&) = delete;
  ReadGatherer& operator=(const ReadGatherer&) = delete;

  // Marks `e` in flight and queues its row. REQUIRES: e's stripe lock.
  void Add(CacheEntry* e) {
    e->reads_in_flight.push_back(min_version_);
    reads_[e->shard].rows.push_back(e->key.row);
  }
  // Sends shard k's Read if it holds max_rows rows.
  void SendFull(uint32_t k) {
    if (reads_[k].rows.size() >= max_rows_) Send(k);
  }
  void SendAll() {
    for (uint32_t k = 0; k < reads_.size(); ++k) Send(k);
  }

 private:
  void Send(uint32_t k) {
    net::Read& r = reads_[k];
    if (r.rows.empty()) return;
    r.table = t_->schema.id;
    r.min_version = min_version_;
    r.subscribe = t_->push;
    impl_->SendCacheRead(k, std::move(r));
    r = net::Read();
  }

  Impl* const impl_;
  const TableState* const t_;
  const Version min_version_;
  const size_t max_rows_;
  std::vector<net::Read> reads_;  // by shard
};

Status Client::Impl::Prefetch(ClockT c, client::WorkerStats* ws, TableState* t,
                              const std::vector<uint64_t>& rows) {
  // One Read carries at most this many bytes of row values, so that a large
  // prefetch neither makes one huge reply frame nor holds the shard for long.
  constexpr size_t kMaxReadBytes = size_t{4} << 20;
  // Dense rows have a known size; a sparse row's size is unknown (it may be
  // large), so sparse prefetches go a few rows per Read.
  constexpr size_t kMaxSparseReadRows = 64;
  const size_t row_bytes = std::max<size_t>(t->format.dense_bytes(), 64);
  const size_t max_rows = t->format.kind == RowKind::kDense
                              ? std::max<size_t>(1, kMaxReadBytes / row_bytes)
                              : kMaxSparseReadRows;
  const Version need = t->policy.MinVersion(c);
  // Each shard's health is checked once, before any of its rows is marked:
  // the rows of an unhealthy shard are skipped (a later Get reports it), the
  // others are fetched, and the first unhealthy shard's status is returned.
  enum : uint8_t { kUnchecked, kHealthy, kUnhealthy };
  std::vector<uint8_t> health(num_shards(), kUnchecked);
  Status unhealthy;
  uint64_t fetched = 0;
  ReadGatherer gather(this, t, need, max_rows);
  for (uint64_t row : rows) {
    RowKey key{t->schema.id, row};
    const uint32_t shard = ShardOfKey(key);
    if (health[shard] == kUnchecked) {
      Status h = ShardHealth(shard);
      health[shard] = h.ok() ? kHealthy : kUnhealthy;
      if (!h.ok() && unhealthy.ok()) unhealthy = std::move(h);
    }
    if (health[shard] == kUnhealthy) continue;
    const size_t hash = RowKeyHash()(key);
    CacheStripe& st = StripeForHash(hash);
    {
      client::SpinLock l(&st.mu);
      CacheEntry* e = st.Find(key, hash);
      if (e != nullptr) {
        if (e->has_value && t->policy.IsFresh(EffectiveVersion(*e), c)) continue;
        if (t->push && e->subscribed) continue;  // the next push refreshes it
        if (e->ReadInFlightAtMost(need)) continue;
      } else {
        e = st.FindOrCreate(key, shard, t);
      }
      // Marked before the Read leaves (under the stripe lock, as SendRead
      // does), so the reply finds the row pinned and a Get does not ask again.
      gather.Add(e);
    }
    ++fetched;
    gather.SendFull(shard);
  }
  gather.SendAll();
  client::TableCounters* tc = Counters(ws, t);
  if (tc != nullptr && fetched > 0) tc->fetched.Add(fetched);
  return unhealthy.WithPrefix("Prefetch");
}

void Client::Impl::SendRead(CacheEntry* e, Version min_version, bool subscribe) {
  net::Read r;
  r.table = e->key.table;
  r.rows.push_back(e->key.row);
  r.min_version = min_version;
  r.subscribe = subscribe;
  e->reads_in_flight.push_back(min_version);
  SendCacheRead(e->shard, std::move(r));
}

void Client::Impl::SendCacheRead(uint32_t k, net::Read r, int retries, int64_t first_error_ms) {
  r.req_id = NextReqId();
  {
    ShardState& sh = *shards_[k];
    std::lock_guard<std::mutex> l(sh.mu);
    sh.requests.emplace(r.req_id, InFlight{r, nullptr, retries, first_error_ms});
  }
  SendToShard(k, std::move(r));
}

void Client::Impl::ReleaseReadMarks(const net::Read& r) {
  for (uint64_t row : r.rows) {
    RowKey key{r.table, row};
    CacheStripe& st = StripeFor(key);
    client::SpinLock l(&st.mu);
    if (CacheEntry* e = st.Find(key)) {
      e->ReadAnswered(r.min_version);
      if (e->waiters > 0) st.cv.notify_all();
      st.MaybeErase(e);
    }
  }
}

void Client::Impl::EvictLocked(CacheStripe& st) {
  if (st.bytes <= st.budget) return;
  // (shard, table) -> rows to unsubscribe.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint64_t>> unsub;
  st.EvictOverBudget([&](CacheEntry* e) {
    e->table->evictions.fetch_add(1, std::memory_order_relaxed);
    if (e->subscribed) {
      e->subscribed = false;
      unsub[{e->shard, e->key.table}].push_back(e->key.row);
    }
  });
  // Sent under the stripe lock so that a later re-subscribing Read of the same
  // row cannot overtake the Unsubscribe.
  for (auto& [where, rows] : unsub) {
    SendToShard(where.first, net::Unsubscribe{where.second, std::move(rows)});
  }
}

void Client::Impl::IncRow(ClockT c, client::WorkerStats* ws, TableState* t, uint64_t row,
                          std::string_view delta) {
  RowKey key{t->schema.id, row};
  CacheStripe& st = StripeFor(key);
  {
    client::SpinLock l(&st.mu);
    CacheEntry* e = st.FindOrCreate(key, ShardOfKey(key), t);
    st.AddDelta(e, c, delta);
  }
  client::TableCounters* tc = Counters(ws, t);
  if (tc != nullptr) tc->incs.Add(1);
}

void Client::Impl::IncDenseCell(ClockT c, client::WorkerStats* ws, TableState* t, uint64_t row,
                                uint32_t col, double value) {
  RowKey key{t->schema.id, row};
  CacheStripe& st = StripeFor(key);
  {
    client::SpinLock l(&st.mu);
    CacheEntry* e = st.FindOrCreate(key, ShardOfKey(key), t);
    st.AddDenseCell(e, c, col, value);
  }
  client::TableCounters* tc = Counters(ws, t);
  if (tc != nullptr) tc->incs.Add(1);
}

}  // namespace pace
