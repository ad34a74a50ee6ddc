// Client::Impl: the read path's slow side (misses, stale rows, blocking),
// updates, and eviction.
#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
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
  const uint16_t me = ws != nullptr ? ws->lease_id : 0;
  for (;;) {
    if (e == nullptr) e = st.FindOrCreate(key, ShardOfKey(key), t);
    if (st.LeasedByOther(e, me)) {
      // Another worker updates the row in place: wait for its release
      // (CacheStripe::Release wakes the stripe's waiters), unless this
      // worker holds leases itself (the other may be waiting for one of
      // them: a worker holding leases never waits for a lease).
      if (ws != nullptr && ws->holds_leases) {
        ws->lease_refused = true;
        result = Status::FailedPrecondition(
            "row " + std::to_string(key.row) + " of table '" + t->schema.name +
            "' is leased by another worker (Worker::LeaseRows), and this worker holds leases: "
            "release them (ReleaseRows) before reading it");
        break;
      }
    } else if (e->has_value) {
      v = EffectiveVersion(*e);
      if (t->policy.IsFresh(v, c)) break;
    }
    // Any lost shard, not only this row's: a wait on a reachable shard's
    // clock can depend on this process's batches to the lost one.
    result = AllShardsHealth();
    if (!result.ok()) break;
    // Subscribed rows are refreshed by pushes; everything else is pulled.
    const Version need = t->policy.MinVersion(c);
    if (InitLocally(st, e, t, need)) {  // never a leased row: it has a value
      ++e->waiters;                     // not evicted before it is read below
      EvictLocked(st);
      --e->waiters;
      continue;
    }
    if (e->lease_owner == 0 && client_engine::AsksForRow(*e, t->push, need)) {
      SendRead(st, e, need, t->push);
      if (tc != nullptr) tc->fetched.Add(1);
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

namespace {

// Rows per cache-filling Read of a table of format f. One Read carries at
// most kMaxReadBytes of row values, so that a large prefetch neither makes
// one huge reply frame nor holds the shard for long. Dense rows have a known
// size; a sparse row's size is unknown (it may be large), so sparse rows go a
// few per Read. With a frame limit (`frame_limit` > 0, ShardState::
// frame_limit) a reply of dense rows also fits it: the shard refuses a Read
// whose reply could exceed its limit (ShardService::CheckReplyFits: about 64
// bytes plus, per row, a tag byte, the elements and 28 bytes), and a reply
// above this end's own limit would be refused here.
size_t MaxRowsPerRead(const RowFormat& f, uint64_t frame_limit) {
  constexpr size_t kMaxReadBytes = size_t{4} << 20;
  constexpr size_t kMaxSparseReadRows = 64;
  if (f.kind != RowKind::kDense) return kMaxSparseReadRows;
  size_t rows = std::max<size_t>(1, kMaxReadBytes / std::max<size_t>(f.dense_bytes(), 64));
  if (frame_limit > net::kRowsMessageBytes) {
    const uint64_t per_row = 1 + f.dense_bytes() + std::max<uint64_t>(net::kRowBytes, 28);
    rows = std::min<uint64_t>(
        rows, std::max<uint64_t>(1, (frame_limit - net::kRowsMessageBytes) / per_row));
  }
  return rows;
}

}  // namespace

// Cache-filling Reads being gathered, one per shard, for one table and
// min_version, MaxRowsPerRead rows each at most (per shard). It owns the reads_in_flight marks it
// adds: Add() marks a row (under its stripe lock) and queues it in the same step, a shard's Read
// leaves when it is full (SendFull) and whatever is queued leaves at SendAll() or in the
// destructor, so no return path can leave a mark whose Read is never sent.
class Client::Impl::ReadGatherer {
 public:
  ReadGatherer(Impl* impl, const TableState* t, Version min_version)
      : impl_(impl),
        t_(t),
        min_version_(min_version),
        max_rows_(impl->num_shards()),
        reads_(impl->num_shards()) {
    for (uint32_t k = 0; k < max_rows_.size(); ++k) {
      max_rows_[k] =
          MaxRowsPerRead(t->format, impl->shards_[k]->frame_limit.load(std::memory_order_acquire));
    }
  }
  ~ReadGatherer() { SendAll(); }
  ReadGatherer(const ReadGatherer&) = delete;
  ReadGatherer& operator=(const ReadGatherer&) = delete;

  // Marks `e` (of stripe `st`) in flight and queues its row (as a
  // look-ahead row if `look_ahead`: Prefetch's rows).
  void Add(CacheStripe& st, CacheEntry* e, bool look_ahead = true) REQUIRES(st.mu) {
    // The stripe's queued Unsubscribes leave first: this Read may subscribe
    // a row whose Unsubscribe is among them.
    if (st.unsubscribe_rows != 0) impl_->FlushUnsubscribesLocked(st);
    e->reads_in_flight.push_back(min_version_);
    if (look_ahead) e->look_ahead = client::kLookAheadChances;
    reads_[e->shard].rows.push_back(e->key.row);
  }
  // Sends shard k's Read if it holds max_rows rows.
  void SendFull(uint32_t k) {
    if (reads_[k].rows.size() >= max_rows_[k]) Send(k);
  }
  void SendAll() {
    for (uint32_t k = 0; k < reads_.size(); ++k) Send(k);
  }

 private:
  void Send(uint32_t k) {
    net::Read& r = reads_[k];
    if (r.rows.empty()) return;
    // In key order: the shard reads them nearly sequentially (and the rows
    // were gathered in cache stripe order, which is no order at all).
    std::sort(r.rows.begin(), r.rows.end());
    r.table = t_->schema.id;
    r.min_version = min_version_;
    r.subscribe = t_->push;
    impl_->SendCacheRead(k, std::move(r));
    r = net::Read();
  }

  Impl* const impl_;
  const TableState* const t_;
  const Version min_version_;
  std::vector<size_t> max_rows_;  // by shard
  std::vector<net::Read> reads_;  // by shard
};

Status Client::Impl::Prefetch(ClockT c, client::WorkerStats* ws, TableState* t,
                              const std::vector<uint64_t>& rows) {
  const Version need = t->policy.MinVersion(c);
  // A pushed table whose rows are all local (TableState::rows_local) has
  // nothing to fetch while its first reads can be answered here: a row
  // without a cache entry is initialized at its first read (InitLocally),
  // and a cached row is subscribed, kept current by the PushDones. A look-up
  // per row only to find that was most of this call's cost. A worker ahead
  // of the process clock, or before a shard has registered this process for
  // its PushDones, has its rows fetched as any other's (one Read per shard
  // now, not one per row at its reads).
  if (t->push && t->rows_local.load(std::memory_order_relaxed) && LocalReadsAnswerable(need)) {
    return Status::OK();
  }
  // Each shard's health is checked once, before any of its rows is marked:
  // the rows of an unhealthy shard are skipped (a later Get reports it), the
  // others are fetched, and the first unhealthy shard's status is returned.
  enum : uint8_t { kUnchecked, kHealthy, kUnhealthy };
  std::vector<uint8_t> health(num_shards(), kUnchecked);
  Status unhealthy;
  auto key_of = [&](size_t i) { return RowKey{t->schema.id, rows[i]}; };
  for (size_t i = 0; i < rows.size(); ++i) {
    const uint32_t shard = ShardOfKey(key_of(i));
    if (health[shard] == kUnchecked) {
      Status h = ShardHealth(shard);
      health[shard] = h.ok() ? kHealthy : kUnhealthy;
      if (!h.ok() && unhealthy.ok()) unhealthy = std::move(h);
    }
  }
  // The rows stripe run by stripe run (one lock per run), the hash slots of
  // the next rows loading a few rows ahead: the entries are scattered in
  // memory and a lookup is otherwise one cache miss after another.
  const client::PassVector<StripeItem> items = ByStripe(rows.size(), key_of);
  uint64_t fetched = 0;
  uint64_t initialized = 0;
  ReadGatherer gather(this, t, need);
  // Two stages: the slot of row j + 2 * kAhead, then the entry (not its
  // value: only the entry's state is looked at) of row j + kAhead.
  constexpr size_t kAhead = 16;
  ForEachStripeRunLocked(*items, [&](CacheStripe& st, size_t b, size_t e) {
    st.mu.AssertHeld();
    auto slot = [&](size_t j)
                    REQUIRES(st.mu) { st.PrefetchSlot(key_of(items[j].index), items[j].hash); };
    // The entry prefetch is written out (CacheStripe::PrefetchSlot says why).
    for (size_t j = b; j < std::min(e, b + 2 * kAhead); ++j) slot(j);
    for (size_t j = b; j < std::min(e, b + kAhead); ++j) {
      const CacheEntry* a = st.Lookup(key_of(items[j].index), items[j].hash);
      if (a != nullptr) client::PrefetchEntryLines(a);
    }
    for (size_t j = b; j < e; ++j) {
      if (j + 2 * kAhead < e) slot(j + 2 * kAhead);
      if (j + kAhead < e) {
        const size_t i = j + kAhead;
        const CacheEntry* a = st.Lookup(key_of(items[i].index), items[i].hash);
        if (a != nullptr) client::PrefetchEntryLines(a);
      }
      const RowKey key = key_of(items[j].index);
      const uint32_t shard = ShardOfKey(key);
      if (health[shard] == kUnhealthy) continue;
      CacheEntry* en = st.Lookup(key, items[j].hash);
      if (en != nullptr) {
        if (en->has_value && t->policy.IsFresh(EffectiveVersion(*en), c)) continue;
        if (!client_engine::AsksForRow(*en, t->push, need)) continue;
      } else {
        en = st.FindOrCreate(key, shard, t);
      }
      if (InitLocally(st, en, t, need)) {
        ++initialized;
        continue;
      }
      // Marked before the Read leaves (under the stripe lock, as SendRead
      // does), so the reply finds the row pinned and a Get does not ask again.
      gather.Add(st, en);
      ++fetched;
      gather.SendFull(shard);  // a leaf under the stripe lock (lock order)
    }
    if (initialized != 0) EvictLocked(st);  // after the run: no entry above is used again
  });
  gather.SendAll();
  client::TableCounters* tc = Counters(ws, t);
  if (tc != nullptr && fetched > 0) tc->fetched.Add(fetched);
  return unhealthy.WithPrefix("Prefetch");
}

void Client::Impl::ResubscribeShard(uint32_t k) {
  // One gatherer per table (few), each sending Reads of up to MaxRowsPerRead
  // rows to shard k.
  std::map<uint32_t, std::unique_ptr<ReadGatherer>> by_table;
  const Version pushed = shards_[k]->pushed_version.load(std::memory_order_acquire);
  for (CacheStripe& st : stripes_) {
    client::SpinLock l(&st.mu);
    st.map.ForEach([&](CacheEntry* e) {
      st.mu.AssertHeld();  // held around ForEach
      if (e->shard != k) return;
      if (!client_engine::EndSessionSubscription(e, pushed)) return;
      std::unique_ptr<ReadGatherer>& g = by_table[e->key.table];
      if (g == nullptr) g = std::make_unique<ReadGatherer>(this, e->table, 0);
      g->Add(st, e, /*look_ahead=*/false);
      g->SendFull(k);
    });
  }
  // The gatherers send the rest as they go.
}

void Client::Impl::SendRead(CacheStripe& st, CacheEntry* e, Version min_version, bool subscribe) {
  if (st.unsubscribe_rows != 0) FlushUnsubscribesLocked(st);
  net::Read r;
  r.table = e->key.table;
  r.rows.push_back(e->key.row);
  r.min_version = min_version;
  r.subscribe = subscribe;
  e->reads_in_flight.push_back(min_version);
  SendCacheRead(e->shard, std::move(r));
}

bool Client::Impl::LocalReadAnswerable(uint32_t k, bool push, Version need) const {
  // Version `need` holds every update of the clocks before it: the process's
  // workers have all passed them (the process clock), and each such update
  // of a row is either sealed (then the row was sent) or an open delta a
  // reader adds. A worker ahead of the process clock by more than the bound
  // waits as for any other row (a shard parks its Read).
  if (process_clock_seen_.load(std::memory_order_acquire) < need) return false;
  // Marked subscribed, the row must be kept current by PushDones: the shard
  // registers this process for them at its first subscribing Read.
  return !push || shards_[k]->subscribed_any.load(std::memory_order_acquire);
}

bool Client::Impl::LocalReadsAnswerable(Version need) const {
  for (uint32_t k = 0; k < num_shards(); ++k) {
    if (!LocalReadAnswerable(k, /*push=*/true, need)) return false;
  }
  return true;
}

bool Client::Impl::InitLocally(CacheStripe& st, CacheEntry* e, TableState* t, Version need) {
  if (!t->rows_local.load(std::memory_order_relaxed) || e->has_value || e->sent ||
      !e->reads_in_flight.empty()) {
    return false;
  }
  if (!LocalReadAnswerable(e->shard, t->push, need)) return false;
  const ShardState& sh = *shards_[e->shard];
  std::string bytes;
  InitRow(t->schema, e->key.row, &bytes);  // what the shard's Read would answer
  // No delta of the row was ever sealed, so any applied position is right:
  // the acknowledged one, as a Read's answer would have it.
  st.InstallValue(e, std::move(bytes), need, sh.acked_through.load(std::memory_order_acquire),
                  sh.acked_parts.load(std::memory_order_acquire));
  // Nobody else changes the row: no push would ever carry it, and each
  // PushDone finds it current.
  if (t->push) e->subscribed = true;
  t->rows_initialized.fetch_add(1, std::memory_order_relaxed);
  if (e->waiters > 0) st.cv.notify_all();
  return true;
}

void Client::Impl::SendCacheRead(uint32_t k, net::Read r, int retries, int64_t first_error_ms) {
  r.req_id = NextReqId();
  {
    ShardState& sh = *shards_[k];
    if (r.subscribe) sh.subscribed_any.store(true, std::memory_order_release);
    MutexLock l(&sh.mu);
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

void Client::Impl::EvictFirst(TableState* t, const std::vector<uint64_t>& rows) {
  const uint32_t table = t->schema.id;
  auto key_of = [&](size_t i) { return RowKey{table, rows[i]}; };
  const client::PassVector<StripeItem> items = ByStripe(rows.size(), key_of);
  ForEachStripeRunLocked(*items, [&](CacheStripe& st, size_t b, size_t e) {
    st.mu.AssertHeld();
    for (size_t j = b; j < e; ++j) {
      CacheEntry* en = st.Find(key_of(items[j].index), items[j].hash);
      if (en == nullptr) continue;
      en->referenced = false;
      en->look_ahead = 0;
      st.QueueEvictFirst(en->key, items[j].hash);
    }
  });
}

void Client::Impl::EvictLocked(CacheStripe& st) {
  if (st.bytes <= st.budget) return;
  // Queued Unsubscribes leave in batches of about this many rows per stripe.
  constexpr size_t kUnsubscribeBatchRows = 1024;
  st.EvictOverBudget([&](CacheEntry* e) {
    st.mu.AssertHeld();  // EvictOverBudget REQUIRES it
    e->table->evictions.fetch_add(1, std::memory_order_relaxed);
    e->look_ahead = 0;
    if (!e->subscribed) return;
    e->subscribed = false;
    client::PendingUnsubscribe* u = nullptr;
    for (client::PendingUnsubscribe& p : st.unsubscribe) {
      if (p.shard == e->shard && p.table == e->key.table) u = &p;
    }
    if (u == nullptr) {
      st.unsubscribe.push_back(client::PendingUnsubscribe{e->shard, e->key.table, {}});
      u = &st.unsubscribe.back();
    }
    u->rows.push_back(e->key.row);
    if (st.unsubscribe_rows++ == 0) {
      unsubscribe_stripes_.fetch_or(uint64_t{1} << (&st - stripes_), std::memory_order_acq_rel);
    }
  });
  if (st.unsubscribe_rows >= kUnsubscribeBatchRows) FlushUnsubscribesLocked(st);
}

void Client::Impl::FlushUnsubscribesLocked(CacheStripe& st) {
  if (st.unsubscribe_rows == 0) return;
  // Sent under the stripe lock so that a later re-subscribing Read of the
  // same row (sent or gathered under this lock) cannot overtake it.
  for (client::PendingUnsubscribe& u : st.unsubscribe) {
    if (!u.rows.empty()) SendToShard(u.shard, net::Unsubscribe{u.table, std::move(u.rows)});
  }
  st.unsubscribe.clear();
  st.unsubscribe_rows = 0;
  unsubscribe_stripes_.fetch_and(~(uint64_t{1} << (&st - stripes_)), std::memory_order_acq_rel);
}

void Client::Impl::FlushAllUnsubscribes() {
  uint64_t bits = unsubscribe_stripes_.load(std::memory_order_acquire);
  if (bits == 0) return;
  // One message per (shard, table) for all stripes, not one per stripe: the
  // stripes with queued rows are locked (in index order; nothing else holds
  // two stripe locks) until it is sent, so that no Read of one of its rows
  // can leave before it.
  std::vector<int> locked;
  std::vector<client::PendingUnsubscribe> merged;
  while (bits != 0) {
    const int i = __builtin_ctzll(bits);
    bits &= bits - 1;
    CacheStripe& st = stripes_[i];
    st.mu.lock();
    locked.push_back(i);
    for (client::PendingUnsubscribe& u : st.unsubscribe) {
      client::PendingUnsubscribe* m = nullptr;
      for (client::PendingUnsubscribe& x : merged) {
        if (x.shard == u.shard && x.table == u.table) m = &x;
      }
      if (m == nullptr) {
        merged.push_back(std::move(u));
      } else {
        m->rows.insert(m->rows.end(), u.rows.begin(), u.rows.end());
      }
    }
    st.unsubscribe.clear();
    st.unsubscribe_rows = 0;
    unsubscribe_stripes_.fetch_and(~(uint64_t{1} << i), std::memory_order_acq_rel);
  }
  for (client::PendingUnsubscribe& u : merged) {
    if (!u.rows.empty()) SendToShard(u.shard, net::Unsubscribe{u.table, std::move(u.rows)});
  }
  for (int i : locked) stripes_[i].mu.unlock();
}

Status Client::Impl::IncRow(ClockT c, client::WorkerStats* ws, TableState* t, uint64_t row,
                            std::string_view delta) {
  RowKey key{t->schema.id, row};
  CacheStripe& st = StripeFor(key);
  {
    client::SpinLock l(&st.mu);
    CacheEntry* e = st.FindOrCreate(key, ShardOfKey(key), t);
    if (st.LeasedByOther(e, ws != nullptr ? ws->lease_id : 0)) return LeasedRowUpdated(*t, row);
    st.AddDelta(e, c, delta);
  }
  client::TableCounters* tc = Counters(ws, t);
  if (tc != nullptr) tc->incs.Add(1);
  return Status::OK();
}

Status Client::Impl::IncDenseCell(ClockT c, client::WorkerStats* ws, TableState* t, uint64_t row,
                                  uint32_t col, double value) {
  RowKey key{t->schema.id, row};
  CacheStripe& st = StripeFor(key);
  {
    client::SpinLock l(&st.mu);
    CacheEntry* e = st.FindOrCreate(key, ShardOfKey(key), t);
    if (st.LeasedByOther(e, ws != nullptr ? ws->lease_id : 0)) return LeasedRowUpdated(*t, row);
    st.AddDenseCell(e, c, col, value);
  }
  client::TableCounters* tc = Counters(ws, t);
  if (tc != nullptr) tc->incs.Add(1);
  return Status::OK();
}

Status Client::Impl::LeasedRowUpdated(const TableState& t, uint64_t row, bool others_updated) {
  return Status::FailedPrecondition(
      "row " + std::to_string(row) + " of table '" + t.schema.name +
      "' is leased by another worker of this process (Worker::LeaseRows), which alone updates "
      "it until it releases it: not updated" +
      (others_updated ? std::string(" (the call's other rows were)") : std::string()));
}

void Client::Impl::ReleaseLeases(client::WorkerStats* ws, LeasedRows* leased, size_t count) {
  const size_t n = std::min(count, leased->size());
  // Runs of one stripe (LeaseDenseRows leases stripe by stripe): one hold
  // of the lock each; a run whose stripe another thread holds is put off to
  // the end, as in ForEachStripeRunLocked.
  auto release = [&](CacheStripe& st, size_t b, size_t e) {
    st.mu.AssertHeld();
    {
      client::TotalsBatch batch(&st);
      // The entries were leased a window ago: out of the caches by now
      // (each Release waited for its entry's line: 93% of its samples).
      constexpr size_t kAhead = 8;
      for (size_t i = b; i < std::min(e, b + kAhead); ++i) __builtin_prefetch((*leased)[i].entry);
      for (size_t i = b; i < e; ++i) {
        if (i + kAhead < e) __builtin_prefetch((*leased)[i + kAhead].entry);
        st.Release((*leased)[i].entry);
      }
    }
    if (st.bytes > st.budget) EvictLocked(st);
    if (st.waiters > 0) st.cv.notify_all();
  };
  std::vector<std::pair<size_t, size_t>> put_off;
  for (size_t b = 0; b < n;) {
    CacheStripe& st = *(*leased)[b].stripe;
    size_t e = b;
    while (e < n && (*leased)[e].stripe == &st) ++e;
    if (st.mu.try_lock()) {
      release(st, b, e);
      st.mu.unlock();
    } else {
      put_off.emplace_back(b, e);
    }
    b = e;
  }
  for (const auto& [b, e] : put_off) {
    CacheStripe& st = *(*leased)[b].stripe;
    client::SpinLock l(&st.mu);
    release(st, b, e);
  }
  leased->DropFront(n);
  ws->holds_leases = !leased->empty();
}

}  // namespace pace
