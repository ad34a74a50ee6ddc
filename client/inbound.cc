// Client::Impl: messages from shards (replies, pushes, acks) and connection
// events. Each shard's messages arrive on one thread, in order.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <variant>

#include "client/client_impl.h"
#include "common/thread_name.h"
#include "consistency/client_engine.h"

namespace pace {

using client::CacheEntry;
using client::CacheStripe;
using client::InFlight;
using client::SentBatch;
using client::ShardState;
using client::TableState;

void Client::Impl::OnMessage(uint32_t k, net::Message m) {
  bytes_received_.fetch_add(client::ApproxBytes(m), std::memory_order_relaxed);
  if (auto* r = std::get_if<net::ReadReply>(&m)) return HandleReadReply(k, std::move(*r));
  if (auto* p = std::get_if<net::Push>(&m)) return HandlePush(k, std::move(*p));
  if (auto* d = std::get_if<net::PushDone>(&m)) return HandlePushDone(k, *d);
  if (auto* a = std::get_if<net::Ack>(&m)) return HandleAck(k, *a);
  if (auto* t = std::get_if<net::TablesReply>(&m)) return HandleReply(k, t->req_id, std::move(m));
  if (auto* s = std::get_if<net::StatsReply>(&m)) {
    NoteShardClock(k, s->shard_clock);
    return HandleReply(k, s->req_id, std::move(m));
  }
  if (auto* e = std::get_if<net::Error>(&m)) {
    if (e->req_id != 0) return HandleReply(k, e->req_id, std::move(m));
    if (e->retriable) {
      // The shard cannot write now (a full disk, no file descriptors) and
      // keeps our batches until it can; so do we (sh.unacked), until their
      // Acks come. Said once per failure by the shard.
      LOG(WARNING) << shards_[k]->channel->Describe() << ": " << e->message << " (client "
                   << client_id() << " keeps its unacknowledged batches)";
      return;
    }
    return SetFatal(k, e->ToStatus().WithPrefix("error from shard"));
  }
  LOG(WARNING) << shards_[k]->channel->Describe() << " sent an unexpected " << net::MessageName(m)
               << "; ignored";
}

void Client::Impl::HandleReply(uint32_t k, uint64_t req_id, net::Message m) {
  ShardState& sh = *shards_[k];
  InFlight req;
  {
    MutexLock l(&sh.mu);
    auto it = sh.requests.find(req_id);
    if (it == sh.requests.end()) return;  // answered before a reconnect, or abandoned
    req = std::move(it->second);
    sh.requests.erase(it);
  }
  if (req.rpc != nullptr) {
    std::lock_guard<std::mutex> l(req.rpc->mu);
    req.rpc->reply = std::move(m);
    req.rpc->done = true;
    req.rpc->cv.notify_all();
    return;
  }
  // An Error answering one of our cache-filling Reads. A transient one (the
  // shard marks it retriable: busy, a failed store read) is retried with
  // backoff, the rows keeping their marks so that Gets wait for it instead of
  // asking again; any other (e.g. an unknown table) cannot succeed by asking
  // again: release the marks and fail the shard with the shard's message.
  if (const auto* read = std::get_if<net::Read>(&req.msg)) {
    const auto* err = std::get_if<net::Error>(&m);
    Status why = err ? err->ToStatus() : Status::Internal(net::MessageName(m));
    if (err != nullptr && err->retriable && !sh.failed.load(std::memory_order_acquire)) {
      Status final;
      const int64_t delay_ms = NextRetryDelayMs(&req, why, &final);
      if (delay_ms >= 0) {
        ScheduleRetry(k, std::move(req), delay_ms);
        return;
      }
      why = final;
    }
    // Failed first: the waiters the release wakes then see why.
    SetFatal(k, why.WithPrefix("Read of table " + std::to_string(read->table) + " failed"));
    ReleaseReadMarks(*read);
  }
}

void Client::Impl::HandleReadReply(uint32_t k, net::ReadReply r) {
  ShardState& sh = *shards_[k];
  InFlight req;
  {
    MutexLock l(&sh.mu);
    auto it = sh.requests.find(r.req_id);
    if (it == sh.requests.end()) return;
    req = std::move(it->second);
    sh.requests.erase(it);
  }
  if (req.rpc != nullptr) {  // a barrier probe, not a cache fill
    NoteShardClock(k, r.version);
    std::lock_guard<std::mutex> l(req.rpc->mu);
    req.rpc->reply = std::move(r);
    req.rpc->done = true;
    req.rpc->cv.notify_all();
    return;
  }
  const auto* read = std::get_if<net::Read>(&req.msg);
  if (read == nullptr) {
    SetFatal(k, Status::Internal("ReadReply answers a request that was not a Read"));
    return;
  }
  NoteShardClock(k, r.version);
  rows_received_.fetch_add(r.rows.size(), std::memory_order_relaxed);
  std::vector<net::RowData*> install(read->rows.size());
  for (size_t i = 0; i < read->rows.size(); ++i) {
    net::RowData* data = nullptr;
    if (i < r.rows.size() && r.rows[i].row == read->rows[i] && r.rows[i].table == read->table) {
      data = &r.rows[i];
    } else {
      for (auto& d : r.rows) {
        if (d.row == read->rows[i] && d.table == read->table) data = &d;
      }
    }
    if (data == nullptr) {
      SetFatal(k, Status::Corruption("ReadReply lacks row " + std::to_string(read->rows[i]) +
                                     " of table " + std::to_string(read->table)));
      return;
    }
    install[i] = data;
  }
  InstallRows(k, install, r.version, r.applied_clock, r.applied_parts, /*read=*/true,
              read->subscribe, read->min_version);
  FlushAllUnsubscribes();  // of the rows these installs evicted
  std::lock_guard<std::mutex> l(progress_mu_);
  progress_cv_.notify_all();
}

void Client::Impl::HandlePush(uint32_t k, net::Push p) {
  VLOG(2) << "client " << client_id() << ": Push " << p.version << " of " << p.rows.size()
          << " rows from shard " << k << " at " << SteadyNowUs() << " us (steady)";
  NoteShardClock(k, p.version);
  rows_received_.fetch_add(p.rows.size(), std::memory_order_relaxed);
  std::vector<net::RowData*> install(p.rows.size());
  for (size_t i = 0; i < p.rows.size(); ++i) install[i] = &p.rows[i];
  InstallRows(k, install, p.version, p.applied_clock, p.applied_parts, /*read=*/false,
              /*subscribe=*/false, 0);
  FlushAllUnsubscribes();  // of the rows these installs evicted
}

void Client::Impl::HandlePushDone(uint32_t k, const net::PushDone& d) {
  ShardState& sh = *shards_[k];
  Version cur = sh.pushed_version.load();
  if (d.version > cur) sh.pushed_version.store(d.version, std::memory_order_release);
  NoteShardClock(k, d.version);
  for (CacheStripe& st : stripes_) {
    client::SpinLock l(&st.mu);
    if (st.waiters > 0) st.cv.notify_all();
  }
  // The push is visible to Gets from here (EffectiveVersion). The steady
  // clock is CLOCK_MONOTONIC, shared by the processes of a host: the shard's
  // "clock ... pushed; last Apply received at" line (--v=1) gives the start.
  VLOG(1) << "client " << client_id() << ": PushDone " << d.version << " from shard " << k
          << " visible at " << SteadyNowUs() << " us (steady)";
  std::lock_guard<std::mutex> l(progress_mu_);
  progress_cv_.notify_all();
}

Status Client::Impl::ComputeAbsentRows(const std::vector<net::RowData*>& rows) {
  // Outside the stripe locks: an initializer costs a hash (and for a normal
  // one a log and a cosine) per element.
  client::TableState* t = nullptr;
  auto key = [](const net::RowData& r) {
    return std::to_string(r.table) + "/" + std::to_string(r.row);
  };
  for (net::RowData* r : rows) {
    if (!r->absent) continue;
    if (!r->bytes.empty()) {
      return Status::Corruption("row " + key(*r) + " is marked absent (no record) but carries " +
                                std::to_string(r->bytes.size()) + " bytes");
    }
    if (t == nullptr || t->schema.id != r->table) t = FindTableById(r->table);
    if (t == nullptr) {
      return Status::Corruption("row " + key(*r) + " is marked absent, of table " +
                                std::to_string(r->table) + ", which this client has not opened");
    }
    InitRow(t->schema, r->row, &r->bytes);
  }
  return Status::OK();
}

void Client::Impl::InstallRows(uint32_t k, const std::vector<net::RowData*>& rows, Version v,
                               ClockT a, uint32_t parts, bool read, bool subscribe,
                               Version read_min) {
  ShardState& sh = *shards_[k];
  // A row without a record at the shard (never written) arrives without
  // bytes: its value is its table's initializer, the same function of
  // (table, row, seed) the shard uses (common/row.h).
  if (Status absent = ComputeAbsentRows(rows); !absent.ok()) {
    SetFatal(k, absent.WithPrefix("bad " + std::string(read ? "ReadReply" : "Push")));
    return;
  }
  // Stripe run by stripe run (one lock and one eviction pass per run), the
  // lookups of the next rows started a few rows ahead: the entries are
  // scattered in memory.
  auto key_of = [&rows](size_t i) { return RowKey{rows[i]->table, rows[i]->row}; };
  const client::PassVector<StripeItem> items = ByStripe(rows.size(), key_of);
  constexpr size_t kAhead = 4;
  Status bad;
  RowKey bad_key;
  ForEachStripeSliceLocked(*items, [&](CacheStripe& st, size_t b, size_t e) {
    st.mu.AssertHeld();
    auto slot = [&](size_t j)
                    REQUIRES(st.mu) { st.PrefetchSlot(key_of(items[j].index), items[j].hash); };
    for (size_t j = b; j < std::min(e, b + kAhead); ++j) slot(j);
    for (size_t j = b; j < e; ++j) {
      if (j + kAhead < e) slot(j + kAhead);
      const RowKey key = key_of(items[j].index);
      CacheEntry* en = st.Find(key, items[j].hash);
      if (en == nullptr) continue;  // nobody holds or wants the row any more
      Status s = InstallRowLocked(sh, st, en, *rows[items[j].index], v, a, parts, read, subscribe,
                                  read_min);
      if (!s.ok() && bad.ok()) {
        bad = s;
        bad_key = key;
      }
    }
    EvictLocked(st);
  });
  if (!bad.ok()) {
    SetFatal(k, Status::Corruption("bad row " + std::to_string(bad_key.table) + "/" +
                                   std::to_string(bad_key.row) + ": " + bad.ToString()));
  }
}

Status Client::Impl::InstallRowLocked(ShardState& sh, CacheStripe& st, CacheEntry* e,
                                      net::RowData& row, Version v, ClockT a, uint32_t parts,
                                      bool read, bool subscribe, Version read_min) {
  namespace engine = client_engine;
  if (read) e->ReadAnswered(read_min);
  const AppliedPosition acked{sh.acked_through.load(std::memory_order_acquire),
                              sh.acked_parts.load(std::memory_order_acquire)};
  const engine::ArrivalDecision d = engine::DecideArrival(
      engine::CachedRow{e->has_value, e->version, e->subscribed, e->waiters > 0},
      engine::RowArrival{v, AppliedPosition{a, parts}, read, subscribe}, acked);
  if (d.action == engine::Arrival::kStalePush) {
    st.MaybeErase(e);
    return Status::OK();
  }
  Status bad = ValidateRow(e->table->format, row.bytes);
  if (bad.ok()) {
    if (d.action == engine::Arrival::kRefetch) {
      // A correct shard never sends this (docs/design.md, "Read-my-writes").
      LOG(WARNING) << "stale-applied value for row " << e->key.table << "/" << e->key.row
                   << " (applied " << a << " part " << parts << " < acked " << acked.clock
                   << " part " << acked.parts << "); refetching";
      if (d.drop_value) {
        e->subscribed = false;
        st.DropValue(e);
      }
      if (d.send_read) SendRead(st, e, d.read_min_version, e->table->push);
    } else {
      if (d.action == engine::Arrival::kInstall) {
        st.InstallValue(e, std::move(row.bytes), v, a, parts);
      }
      if (d.subscribe) e->subscribed = true;
      if (d.pushed) e->table->pushes_applied.fetch_add(1, std::memory_order_relaxed);
    }
    // Only a waiter of this row can make progress (others wait for their
    // own row, or for PushDone, which wakes every stripe): waking a stripe
    // per pushed row cost a futex wake per row.
    if (e->waiters > 0) st.cv.notify_all();
  }
  st.MaybeErase(e);
  return bad;
}

void Client::Impl::HandleAck(uint32_t k, const net::Ack& a) {
  ShardState& sh = *shards_[k];
  if (a.duplicate &&
      client_engine::DuplicateFromAnotherSender(
          a.clock, a.part,
          AppliedPosition{sh.duplicates_below.load(std::memory_order_acquire),
                          sh.duplicate_parts_below.load(std::memory_order_acquire)})) {
    // This process sent batch a.clock to shard k only once, after the shard
    // said it had not applied it: another sender applied it first.
    const std::string id = std::to_string(client_id());
    SetFatal(k, Status::FailedPrecondition(
                    "shard " + std::to_string(k) + " acknowledged batch " +
                    std::to_string(a.clock) + " of client " + id +
                    " as already applied, but this process sent it only once: another process "
                    "is client " +
                    id + ", or this job was resumed twice (its work would be dropped)"));
    return;
  }
  std::vector<SentBatch> done;
  client_engine::AckOutcome ack;
  {
    MutexLock l(&sh.mu);
    // Batches (and parts) up to (a.clock, a.part), in the order they were sent.
    ack = client_engine::TakeAck(sh.unacked, a.clock, a.part);
    for (size_t i = 0; i < ack.batches; ++i) {
      done.push_back(std::move(sh.unacked.front()));
      sh.unacked.pop_front();
    }
  }
  if (done.empty()) return;  // a duplicate Ack after a re-send
  // Published before purging: InstallRow then refuses values that would need
  // the purged deltas (only for shard k, whose messages we handle in order),
  // and a value installed before the purge skips them (they are in it).
  sh.acked_parts.store(ack.acked.parts, std::memory_order_release);
  sh.acked_through.store(ack.acked.clock, std::memory_order_release);
  vap_.Acked(k, ack.acked.clock, ack.acked.parts);
  {
    std::lock_guard<std::mutex> progress(progress_mu_);  // waits on the acked position
    progress_cv_.notify_all();
  }
  // The deltas leave the cache entries on the purge thread, so that this
  // thread goes on to the next message (the PushDone behind this Ack).
  MutexLock l(&purge_mu_);
  if (purge_stop_) return;  // the client is being destroyed
  if (!purge_thread_.joinable()) {
    purge_thread_ = std::thread([this] {
      SetThreadName("pace-purge");
      PurgeLoop();
    });
  }
  purges_.push_back(PendingPurge{k, std::move(done), ack.whole_clocks});
  purge_cv_.Signal();
}

void Client::Impl::PurgeLoop() {
  MutexLock l(&purge_mu_);
  while (!purge_stop_) {
    if (purges_.empty()) {
      purge_cv_.Wait(&purge_mu_);
      continue;
    }
    PendingPurge p = std::move(purges_.front());
    purges_.pop_front();
    purge_mu_.Unlock();
    uint64_t purged = 0;
    for (const SentBatch& b : p.batches) purged += PurgeBatch(b);
    // The batches' arenas (their sealed deltas) are freed with them, unless
    // an in-process shard still reads them.
    p.batches.clear();
    unacked_bytes_.fetch_sub(purged, std::memory_order_acq_rel);
    // Through the last whole clock among them (an Ack that also covers a
    // later part still completes the clocks before it, for Flush). Only
    // this thread raises it; Acks of a shard are queued in order.
    ShardState& sh = *shards_[p.shard];
    if (p.whole_clocks > sh.purged_through.load(std::memory_order_relaxed)) {
      sh.purged_through.store(p.whole_clocks, std::memory_order_release);
    }
    {
      std::lock_guard<std::mutex> progress(progress_mu_);
      progress_cv_.notify_all();
    }
    purge_mu_.Lock();
  }
}

uint64_t Client::Impl::PurgeBatch(const SentBatch& b) {
  // A batch's keys come stripe by stripe (SendBatch seals them so): one lock
  // per run of a stripe's keys, with the lookups of the next keys started a
  // few keys ahead, since the entries are scattered in memory.
  constexpr size_t kAhead = 16;  // entries loading; slots twice as far ahead
  const std::vector<RowKey>& keys = b.keys;
  client::PassVector<StripeItem> items(keys.size());  // in stripe runs already: no sort
  for (size_t i = 0; i < keys.size(); ++i) {
    items[i] = StripeItem{RowKeyHash()(keys[i]), static_cast<uint32_t>(i)};
  }
  uint64_t purged = 0;
  ForEachStripeSliceLocked(*items, [&](CacheStripe& st, size_t begin, size_t end) {
    st.mu.AssertHeld();
    for (size_t j = begin; j < end; ++j) {
      if (j + 2 * kAhead < end) st.PrefetchSlot(keys[j + 2 * kAhead], items[j + 2 * kAhead].hash);
      if (j + kAhead < end) {
        const CacheEntry* a = st.Lookup(keys[j + kAhead], items[j + kAhead].hash);
        if (a != nullptr) client::PrefetchEntryLines(a);
      }
      purged += st.PurgeAcked(keys[j], items[j].hash, b.clock, b.part);
    }
  });
  return purged;
}

void Client::Impl::OnDisconnect(uint32_t k, const Status& why) {
  ShardState& sh = *shards_[k];
  {
    // Under send_mu_: a SendClocks that saw `connected` has sent its batch
    // before this returns, so before the channel can have a new connection
    // (it makes one only after OnDisconnect); later batches only queue until
    // OnReconnect re-sends them in clock order. Without it a batch could
    // reach the new connection ahead of the older ones OnReconnect re-sends
    // (the shard then refuses it: a clock gap).
    MutexLock send_lock(&send_mu_);
    sh.disconnected_since_ms.store(SteadyNowMs());
    sh.connected.store(false, std::memory_order_release);
  }
  LOG(WARNING) << sh.channel->Describe() << " disconnected: " << why.ToString() << "; reconnecting";
  NotifyAll();
}

void Client::Impl::OnReconnect(uint32_t k, const net::Welcome& w) {
  ShardState& sh = *shards_[k];
  if (w.shard_id != k || w.num_shards != num_shards() || w.num_clients != num_clients()) {
    SetFatal(k, Status::FailedPrecondition("reconnected to a shard with another identity"));
    return;
  }
  NoteShardClock(k, w.shard_clock);
  // The shard may have come back with another frame limit. Batches already
  // cut keep their parts: one that no longer fits fails the shard
  // (RemoteChannel) instead of being sent again and again.
  sh.frame_limit.store(client::FrameLimit(sh.channel->max_frame_bytes(), w.max_frame_bytes),
                       std::memory_order_release);
  MutexLock send_lock(&send_mu_);  // no new batches meanwhile
  // 1. Unacknowledged batches, in clock order (the shard skips duplicates).
  const size_t batches = ResendUnackedBatches(k);
  // 2. Requests in flight (reads, table calls).
  std::vector<net::Message> again;
  {
    MutexLock l(&sh.mu);
    for (const auto& [id, req] : sh.requests) again.push_back(req.msg);
  }
  for (net::Message& m : again) SendToShard(k, std::move(m));
  // 3. Subscriptions live in the old session: subscribe again. Until the
  //    reply, the row keeps the version the old session vouched for. One
  //    Read per table of up to MaxRowsPerRead rows: one per row was a
  //    request in flight and a reply per subscribed row at every reconnect
  //    (the soak: 4,000 of each, ~1 MB of small allocations at once).
  ResubscribeShard(k);
  sh.connected.store(true, std::memory_order_release);
  LOG(INFO) << sh.channel->Describe() << " reconnected; re-sent " << batches << " batches and "
            << again.size() << " requests";
  NotifyAll();
}

}  // namespace pace
