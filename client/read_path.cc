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
    result = ShardHealth(e->shard);
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
    ++e->waiters;
    ++st.waiters;
    st.cv.wait_for(lock, std::chrono::milliseconds(100));
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
  std::vector<net::Read> reads(num_shards());
  uint64_t fetched = 0;
  auto send = [&](uint32_t k) {
    net::Read& r = reads[k];
    if (r.rows.empty()) return;
    r.table = t->schema.id;
    r.min_version = need;
    r.subscribe = t->push;
    SendCacheRead(k, std::move(r));
    r = net::Read();
  };
  for (uint64_t row : rows) {
    RowKey key{t->schema.id, row};
    const size_t hash = RowKeyHash()(key);
    CacheStripe& st = StripeForHash(hash);
    uint32_t shard;
    {
      client::SpinLock l(&st.mu);
      CacheEntry* e = st.Find(key, hash);
      if (e != nullptr) {
        if (e->has_value && t->policy.IsFresh(EffectiveVersion(*e), c)) continue;
        if (t->push && e->subscribed) continue;  // the next push refreshes it
        if (e->ReadInFlightAtMost(need)) continue;
      } else {
        e = st.FindOrCreate(key, ShardOfKey(key), t);
      }
      // Recorded before the Read leaves (under the stripe lock, as SendRead
      // does), so the reply finds the row pinned and a Get does not ask again.
      e->reads_in_flight.push_back(need);
      shard = e->shard;
    }
    RETURN_IF_ERROR(ShardHealth(shard));
    reads[shard].rows.push_back(row);
    ++fetched;
    if (reads[shard].rows.size() >= max_rows) send(shard);
  }
  for (uint32_t k = 0; k < num_shards(); ++k) send(k);
  client::TableCounters* tc = Counters(ws, t);
  if (tc != nullptr && fetched > 0) tc->fetched.Add(fetched);
  return Status::OK();
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

void Client::Impl::SendCacheRead(uint32_t k, net::Read r) {
  r.req_id = NextReqId();
  {
    ShardState& sh = *shards_[k];
    MutexLock l(&sh.mu);
    sh.requests.emplace(r.req_id, InFlight{r, nullptr});
  }
  SendToShard(k, std::move(r));
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
