// Client::Impl: the send path. Worker clocks and the process clock, the
// open-delta bound (an ahead worker waits, one at the process clock seals a
// part), sealing and sending batches (whole or in parts cut at the frame
// limit), the re-send of unacknowledged batches after a reconnect, Flush and
// GlobalBarrier.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <variant>

#include "client/client_impl.h"
#include "common/thread_name.h"
#include "consistency/client_engine.h"

namespace pace {

using client::CacheEntry;
using client::CacheStripe;
using client::SentBatch;
using client::ShardState;

ClockT Client::Impl::RegisterWorker(std::shared_ptr<client::WorkerStats>* stats) {
  MutexLock l(&clock_mu_);
  ++worker_clocks_[process_clock_];
  max_worker_clock_ = std::max(max_worker_clock_, process_clock_);
  *stats = std::make_shared<client::WorkerStats>();
  // 0 (no id: the worker leases nothing) once 65535 workers are alive.
  if (!free_lease_ids_.empty()) {
    (*stats)->lease_id = free_lease_ids_.back();
    free_lease_ids_.pop_back();
  } else if (next_lease_id_ < UINT16_MAX) {
    (*stats)->lease_id = ++next_lease_id_;
  }
  worker_stats_.push_back(*stats);
  return process_clock_;
}

namespace {

// The error of a row whose delta can never fit an Apply within the frame limit.
Status UnsendableRow(const RowKey& key, ClockT c, size_t bytes, uint64_t limit) {
  return Status::ResourceExhausted(
      "the delta of row " + std::to_string(key.table) + "/" + std::to_string(key.row) +
      " in clock " + std::to_string(c) + " is " + std::to_string(bytes) +
      " bytes: an Apply holding it needs " + std::to_string(net::RowsMessageBytes(1, bytes)) +
      " bytes, over the frame limit of " + std::to_string(limit) +
      " bytes (the smaller of this client's and the shard's max_frame_bytes; paced "
      "--max_frame_mb), so it can never be sent: use narrower rows or a larger frame limit");
}

void MoveWorker(std::map<ClockT, int>* clocks, ClockT from) {
  auto it = clocks->find(from);
  if (it != clocks->end() && --it->second == 0) clocks->erase(it);
}

}  // namespace

void Client::Impl::DeregisterWorker(ClockT clock, uint16_t lease_id) {
  clock_mu_.Lock();
  if (lease_id != 0) free_lease_ids_.push_back(lease_id);
  MoveWorker(&worker_clocks_, clock);
  AdvanceProcessClockAndUnlock();
}

void Client::Impl::AdvanceProcessClockAndUnlock() {
  // With no worker left, the clocks the last ones finished are still due: a
  // worker that left at clock c while another had finished c (and left
  // first) did nothing at c, so c is complete.
  const ClockT target = worker_clocks_.empty() ? max_worker_clock_ : worker_clocks_.begin()->first;
  if (target <= process_clock_) {
    clock_mu_.Unlock();
    return;
  }
  const ClockT from = process_clock_;
  process_clock_ = target;
  const ClockT to = process_clock_;
  send_mu_.Lock();  // hand over: batches leave in clock order
  clock_mu_.Unlock();
  SendClocks(from, to);
  send_mu_.Unlock();
}

Client::Impl::OpenDeltaSum Client::Impl::OpenDeltaSums(ClockT c) const {
  OpenDeltaSum sums;
  for (CacheStripe& st : stripes_) {
    client::SpinLock l(&st.mu);
    sums.all += st.open_bytes;
    const size_t of_clock = st.OpenBytesOf(c);
    sums.of_clock += of_clock;
    sums.rows_of_clock += st.OpenRowsOf(c);
    // Leases are taken at the process clock: of clock c if anything is.
    sums.sealable_of_clock += of_clock - std::min(of_clock, st.leased_bytes);
  }
  return sums;
}

uint64_t Client::Impl::PartBytesOf(uint32_t open_delta_mb, uint32_t unacked_mb) {
  const uint64_t open = uint64_t{open_delta_mb} << 20;
  const uint64_t unacked = uint64_t{unacked_mb} << 20;
  // At most kMaxPartBytes: a clock larger than that is sealed, sent and
  // applied part by part while its workers still train, and only its last
  // part is left for Clock(). With the default bounds a part was 128 MiB, and
  // a model-scale clock of ~140 MB (pace_mf 8a) was sealed whole in the last
  // worker's Clock() and applied after it: 8a ran 8-10% slower and peaked
  // 5% higher than with 32 MiB parts (docs/data-path.md).
  return std::max<uint64_t>(uint64_t{64} << 10,
                            std::min<uint64_t>(kMaxPartBytes, std::min(open, unacked) / 2));
}

Status Client::Impl::SealOpenDeltas(ClockT c, client::WorkerStats* ws) {
  // A part is half of the smaller of the open-delta and unacked bounds: the
  // clock's open deltas stay below the open-delta bound (a part being filled
  // while the one before is sealed), and two parts fit the unacked bound, so
  // one can be written while the next is filled.
  const uint64_t part = PartBytes();
  // What a part could take is at most the open deltas less the leased ones
  // (OpenDeltaSum::sealable_of_clock): with many rows leased, the look at
  // every stripe under its lock would otherwise be taken at every check.
  if (SealableBound() < part) return Status::OK();
  if (OpenDeltaSums(c).sealable_of_clock < part) return Status::OK();
  // The sealer thread seals it; this worker goes on adding.
  RequestSeal(c);
  // It waits only when the sealer is a whole part behind: waiting for room
  // under unacked_mb (the parts are bounded like whole batches: a part is
  // sealed once the unacknowledged deltas leave room for it), or still
  // sealing. Acks need nothing from this process, so this cannot deadlock.
  auto within = [&] {
    if (process_clock_seen_.load(std::memory_order_acquire) != c) return true;
    if (SealableBound() < 2 * part) return true;
    return OpenDeltaSums(c).sealable_of_clock < 2 * part;
  };
  if (within()) return Status::OK();
  return WaitProgress(
      within, [&] { return AllShardsHealth(); }, ws, "Inc (unacked bound)");
}

void Client::Impl::RequestSeal(ClockT c) {
  MutexLock l(&seal_mu_);
  if (seal_stop_) return;  // the client is being destroyed
  if (!seal_thread_.joinable()) {
    seal_thread_ = std::thread([this] {
      SetThreadName("pace-seal");
      SealLoop();
    });
  }
  if (seal_requested_ && seal_clock_ == c) return;
  seal_requested_ = true;
  seal_clock_ = c;
  seal_cv_.Signal();
}

void Client::Impl::SealLoop() {
  MutexLock l(&seal_mu_);
  while (!seal_stop_) {
    if (!seal_requested_) {
      seal_cv_.Wait(&seal_mu_);
      continue;
    }
    const ClockT c = seal_clock_;
    seal_requested_ = false;
    seal_mu_.Unlock();
    SealPart(c);
    seal_mu_.Lock();
  }
}

void Client::Impl::SealPart(ClockT c) {
  const uint64_t part = PartBytes();
  if (OpenDeltaSums(c).sealable_of_clock < part) return;
  // Sealed once the unacknowledged deltas leave room for it under
  // unacked_mb. Sealing first instead let each worker add a part over the
  // bound: 14 MiB of Applies queued at the shard under a 6 MiB bound.
  const uint64_t unacked_budget = uint64_t{options_.unacked_mb} << 20;
  {
    std::unique_lock<std::mutex> l(progress_mu_);
    while (unacked_bytes_.load(std::memory_order_acquire) + part > unacked_budget) {
      if (sealer_stopping_.load(std::memory_order_acquire) || !AllShardsHealth().ok()) return;
      // Woken by Acks (the purge thread), health changes and ~Impl.
      client::WaitUntil(progress_cv_, l, AllShardsHealthDeadline());
    }
  }
  {
    MutexLock l(&send_mu_);
    // The process clock may have moved past c meanwhile (its last part is
    // sent then).
    if (shards_[0]->sent_through.load(std::memory_order_acquire) != c ||
        process_clock_seen_.load(std::memory_order_acquire) != c ||
        OpenDeltaSums(c).sealable_of_clock < part) {
      return;
    }
    SendBatch(c, /*more=*/true);
    parts_sent_.fetch_add(1, std::memory_order_relaxed);
  }
  // Workers waiting for the sealer, and ahead ones at the bound, re-check.
  std::lock_guard<std::mutex> l(progress_mu_);
  progress_cv_.notify_all();
}

Status Client::Impl::WaitOpenDeltas(ClockT c, client::WorkerStats* ws) {
  // An ahead worker's clock also stays within a part: when the process clock
  // reaches c, its deltas so far leave as clock c's next part, and a part
  // larger than PartBytes() would be queued at the shards beside the parts
  // the unacked bound already holds (measured: 14 MB groups, 17 MiB of queued
  // Applies under a 6 MiB unacked bound).
  const uint64_t bound = uint64_t{options_.open_delta_mb} << 20;
  const uint64_t part = PartBytes();
  auto within = [&] {
    if (process_clock_seen_.load(std::memory_order_acquire) >= c) return true;
    if (open_bytes_total_.load(std::memory_order_relaxed) <= std::min(bound, part)) return true;
    const OpenDeltaSum open = OpenDeltaSums(c);
    return open.all <= bound && open.of_clock <= part;
  };
  if (within()) return Status::OK();
  open_delta_waits_.fetch_add(1, std::memory_order_relaxed);
  // Woken by SendClocks (it seals open deltas and publishes the process
  // clock) and by health changes.
  return WaitProgress(
      within, [&] { return AllShardsHealth(); }, ws, "Inc (open-delta bound)");
}

Status Client::Impl::ClockWorker(ClockT* clock, client::WorkerStats* ws) {
  RETURN_IF_ERROR(AllShardsHealth());
  clock_mu_.Lock();
  MoveWorker(&worker_clocks_, *clock);
  ++*clock;
  ++worker_clocks_[*clock];
  max_worker_clock_ = std::max(max_worker_clock_, *clock);
  AdvanceProcessClockAndUnlock();
  const ClockT c = *clock;
  const uint64_t unacked_budget = uint64_t{options_.unacked_mb} << 20;
  auto caught_up = [&] {
    for (const auto& sh : shards_) {
      if (c - sh->acked_through.load(std::memory_order_acquire) > kMaxClocksInFlight) return false;
    }
    // HandleAck lowers unacked_bytes_ (and feeds vap_) before it notifies
    // progress_cv_.
    return unacked_bytes_.load(std::memory_order_acquire) <= unacked_budget && vap_.WithinBound();
  };
  if (caught_up()) return Status::OK();
  return WaitProgress(
      caught_up, [&] { return AllShardsHealth(); }, ws, "Clock");
}

void Client::Impl::SendClocks(ClockT from, ClockT to) {
  // Workers waiting in Inc for the open-delta bound wait for this clock.
  process_clock_seen_.store(to, std::memory_order_release);
  // Only the clock the process was at can have had parts sent early
  // (next_part_); SendBatch resets the counts when it completes a clock.
  for (ClockT c = from; c < to; ++c) SendBatch(c, /*more=*/false);
  std::lock_guard<std::mutex> l(progress_mu_);
  progress_cv_.notify_all();
}

void Client::Impl::ReserveBatch(ClockT c, const std::vector<uint64_t>& limit,
                                std::vector<std::vector<net::Apply>>* applies,
                                std::vector<std::vector<std::vector<RowKey>>>* keys,
                                std::vector<std::shared_ptr<ByteArena>>* arenas) {
  // Room for every row of the batch in the first part (a part of a large
  // clock holds hundreds of thousands: growing the vectors row by row copied
  // them, into fresh pages, a dozen times).
  const uint32_t n = num_shards();
  const OpenDeltaSum open = OpenDeltaSums(c);
  const size_t rows = open.rows_of_clock;
  const uint64_t bytes = open.of_clock;
  for (uint32_t k = 0; k < n; ++k) {
    size_t share = n == 1 ? rows : std::min(rows, rows / n + rows / (4 * n) + 16);
    if (limit[k] != 0 && rows != 0) {  // no more than a frame holds
      share = std::min<uint64_t>(share, limit[k] / (net::kRowBytes + bytes / rows) + 1);
    }
    (*applies)[k].back().updates.reserve(share);
    (*keys)[k].back().reserve(share);
    // The arena's first chunk for the shard's share of the clock's bytes.
    const uint64_t share_bytes = n == 1 ? bytes : bytes / n + bytes / (4 * n);
    (*arenas)[k] = std::make_shared<ByteArena>(share_bytes);
  }
}

void Client::Impl::SendBatch(ClockT c, bool more) {
  const uint32_t n = num_shards();
  // Per shard: the Apply messages of this batch (one, or several parts cut
  // at the frame limit), the rows of each, and the payload bound of the last.
  std::vector<std::vector<net::Apply>> applies(n);
  std::vector<std::vector<std::vector<RowKey>>> keys(n);
  std::vector<uint64_t> filled(n, net::kRowsMessageBytes);
  std::vector<uint64_t> limit(n);
  // Shard k's number for the part being filled: after the parts a previous
  // process left of clock c (ShardState::resume_parts), if any.
  std::vector<uint32_t> part_of(n);
  // The first row of each shard that cannot fit a frame alone.
  std::vector<Status> unsendable(n);
  // Per shard: the arena the batch's deltas are sealed into, shared by the
  // Apply messages and the SentBatches (the oplog's sealed deltas).
  std::vector<std::shared_ptr<ByteArena>> arena(n);
  for (uint32_t k = 0; k < n; ++k) {
    part_of[k] = next_part_[k] + (c == shards_[k]->resume_clock ? shards_[k]->resume_parts : 0);
    limit[k] = shards_[k]->frame_limit.load(std::memory_order_acquire);
    applies[k].resize(1);
    keys[k].resize(1);
  }
  ReserveBatch(c, limit, &applies, &keys, &arena);
  // A stripe's rows are sealed a slice per hold of its lock: a worker or the
  // delivery thread that needs the stripe waits for one slice, not for the
  // stripe's share of a part (thousands of rows, a millisecond or more, far
  // longer when this thread is preempted holding the lock: in three clocks
  // of a model-scale job a worker slept 1.5 s on stripe locks held here and
  // by the purge). The count is taken first: rows a worker adds meanwhile
  // wait for the next part, so a worker filling a stripe cannot hold the
  // seal in it.
  std::vector<CacheEntry*> dirty;
  std::vector<CacheEntry*> leased;  // a part leaves a leased row for a later part
  for (CacheStripe& st : stripes_) {
    size_t left = SIZE_MAX;
    while (left > 0) {
      client::SpinLock l(&st.mu);
      if (left == SIZE_MAX) left = st.OpenRowsOf(c);
      st.TakeDirty(c, std::min(left, kStripeSliceRows), &dirty);
      if (dirty.empty()) break;
      left -= dirty.size();
      client::TotalsBatch batch(&st);
      for (size_t i = 0; i < dirty.size(); ++i) {
        client::PrefetchForSeal(dirty, i);
        CacheEntry* e = dirty[i];
        if (st.leases != 0 && e->lease_owner != 0) {
          // Its worker has not reached Clock() (which ends its leases), so
          // this is not the clock's last part.
          DCHECK(more) << "the last part of clock " << c << " meets a leased row";
          if (more) {
            leased.push_back(e);
            continue;
          }
        }
        const uint32_t k = e->shard;
        if (limit[k] != 0) {
          const client::PendingDelta* open = e->FindPending(c);
          if (open == nullptr) continue;
          const uint64_t row = net::kRowBytes + open->delta.size();
          if (filled[k] + row > limit[k]) {
            if (net::kRowsMessageBytes + row > limit[k]) {
              if (unsendable[k].ok()) {
                unsendable[k] = UnsendableRow(e->key, c, open->delta.size(), limit[k]);
              }
            } else if (!applies[k].back().updates.empty()) {
              // Close the part being filled; the row starts the next one.
              applies[k].back().more = true;
              applies[k].emplace_back();
              keys[k].emplace_back();
              ++part_of[k];
              filled[k] = net::kRowsMessageBytes;
            }
          }
          filled[k] += row;
        }
        const client::PendingDelta* p = st.Seal(e, c, part_of[k], arena[k].get());
        if (p == nullptr) continue;
        applies[k].back().updates.push_back(
            net::DeltaRow{e->key.table, e->key.row, p->sealed_bytes});
        keys[k].back().push_back(e->key);
      }
      if (st.bytes > st.budget) EvictLocked(st);  // sparse values may grow
    }
    if (!leased.empty()) {
      client::SpinLock l(&st.mu);
      st.ReturnDirty(c, leased);
      leased.clear();
    }
  }
  FlushAllUnsubscribes();
  uint64_t sealed = 0;
  for (const std::vector<net::Apply>& parts : applies) {
    for (const net::Apply& a : parts) {
      for (const net::DeltaRow& u : a.updates) sealed += u.bytes.size();
    }
  }
  // Counted before any Ack of this batch can arrive.
  unacked_bytes_.fetch_add(sealed, std::memory_order_acq_rel);
  vap_.Sealed(c, applies, part_of);
  for (uint32_t k = 0; k < n; ++k) {
    ShardState& sh = *shards_[k];
    if (!unsendable[k].ok()) {
      // Nothing of this batch leaves for shard k: the job cannot go on.
      {
        MutexLock l(&sh.mu);
        sh.unsent.push_back(arena[k]);  // its rows' sealed deltas point into it
      }
      SetFatal(k, unsendable[k]);
      continue;
    }
    SendParts(c, more, k, &applies[k], &keys[k], part_of[k], limit[k], arena[k]);
  }
}

void Client::Impl::SendParts(ClockT c, bool more, uint32_t k, std::vector<net::Apply>* applies,
                             std::vector<std::vector<RowKey>>* keys, uint32_t last_part,
                             uint64_t limit, const std::shared_ptr<ByteArena>& arena) {
  ShardState& sh = *shards_[k];
  std::vector<net::Apply>& parts = *applies;
  // The first part's number; the last part has `more` as asked.
  uint32_t part = last_part + 1 - static_cast<uint32_t>(parts.size());
  parts.back().more = more;
  if (parts.size() > 1) {
    VLOG(1) << sh.channel->Describe() << ": clock " << c << " leaves in " << parts.size()
            << " parts to fit the frame limit of " << limit << " bytes";
  }
  for (size_t i = 0; i < parts.size(); ++i, ++part) {
    net::Apply& a = parts[i];
    a.clock = c;
    a.part = part;
    a.backing = arena;
    rows_sent_.fetch_add(a.updates.size(), std::memory_order_relaxed);
    {
      MutexLock l(&sh.mu);
      sh.unacked.push_back(SentBatch{c, std::move((*keys)[i]), part, a.more, arena});
    }
    if (!a.more) sh.sent_through.store(c + 1, std::memory_order_release);
    batches_sent_.fetch_add(1, std::memory_order_relaxed);
    // While the shard is away, batches only queue: OnReconnect (which takes
    // send_mu_) sends every unacknowledged one in clock order, so a new
    // batch can never reach a fresh connection before older re-sent ones.
    if (sh.connected.load(std::memory_order_acquire)) SendToShard(k, std::move(a));
  }
  next_part_[k] = more ? next_part_[k] + static_cast<uint32_t>(parts.size()) : 0;
}

net::Apply Client::Impl::RebuildBatch(const SentBatch& b) {
  net::Apply a;
  a.clock = b.clock;
  a.part = b.part;
  a.more = b.more;
  a.updates.reserve(b.keys.size());
  a.backing = b.deltas;  // where the sealed deltas are
  for (const RowKey& key : b.keys) {
    CacheStripe& st = StripeFor(key);
    client::SpinLock l(&st.mu);
    CacheEntry* e = st.Find(key);
    const client::PendingDelta* p = e == nullptr ? nullptr : e->FindSealed(b.clock, b.part);
    if (p == nullptr) {
      LOG(DFATAL) << "unacknowledged delta of clock " << b.clock << " part " << b.part
                  << " missing for row " << key.table << "/" << key.row;
      continue;
    }
    a.updates.push_back(net::DeltaRow{key.table, key.row, p->sealed_bytes});
  }
  return a;
}
size_t Client::Impl::ResendUnackedBatches(uint32_t k) {
  ShardState& sh = *shards_[k];
  // sh.unacked only changes under send_mu_ (append) or on the shard's
  // inbound thread (Acks), the caller's, so it is stable here.
  std::vector<const SentBatch*> batches;
  AppliedPosition dup_below{sh.duplicates_below.load(), sh.duplicate_parts_below.load()};
  {
    MutexLock l(&sh.mu);
    for (const SentBatch& b : sh.unacked) batches.push_back(&b);
    // The shard may have applied any of these already (their Acks were
    // lost). Not the Welcome's applied_clock: batches above what we sent are
    // someone else's.
    dup_below = client_engine::DuplicatesBelowAfterResend(dup_below, sh.unacked);
  }
  sh.duplicate_parts_below.store(dup_below.parts, std::memory_order_release);
  sh.duplicates_below.store(dup_below.clock, std::memory_order_release);
  for (const SentBatch* b : batches) {
    net::Apply apply = RebuildBatch(*b);
    batches_resent_.fetch_add(1, std::memory_order_relaxed);
    SendToShard(k, std::move(apply));
  }
  return batches.size();
}

Status Client::Impl::Flush() {
  // A failed shard may hold batches that were never sent (e.g. one that
  // cannot fit a frame): nothing is all durable then.
  RETURN_IF_ERROR(AllShardsHealth().WithPrefix("Flush"));
  std::vector<ClockT> target;
  for (const auto& sh : shards_) target.push_back(sh->sent_through.load());
  return WaitProgress(
      [&] {
        for (size_t k = 0; k < shards_.size(); ++k) {
          if (shards_[k]->purged_through.load() < target[k]) return false;
        }
        return true;
      },
      [&] { return AllShardsHealth(); }, nullptr, "Flush");
}

Status Client::Impl::GlobalBarrier(ClockT c, client::WorkerStats* ws) {
  auto start = std::chrono::steady_clock::now();
  Status result;
  for (uint32_t k = 0; k < num_shards() && result.ok(); ++k) {
    ShardState& sh = *shards_[k];
    if (sh.known_clock.load() >= c) continue;
    // Preferred: a Read of one of the shard's rows with min_version c. The
    // shard parks it until its clock reaches c, so nobody polls.
    net::Message reply;
    if (uint32_t table = AnyTableId(); table != 0) {
      uint64_t row = 0;
      while (ShardOfKey(RowKey{table, row}) != k) ++row;
      result = Call(k, net::Read{NextReqId(), table, {row}, c, false}, &reply);
      if (!result.ok()) break;
      if (const auto* r = std::get_if<net::ReadReply>(&reply)) NoteShardClock(k, r->version);
      continue;
    }
    // No table yet: ask for the shard clock, backing off.
    int64_t backoff_ms = 1;
    while (sh.known_clock.load() < c) {
      result = Call(k, net::StatsRequest{NextReqId()}, &reply);
      if (!result.ok()) break;
      if (const auto* r = std::get_if<net::StatsReply>(&reply)) NoteShardClock(k, r->shard_clock);
      if (sh.known_clock.load() >= c) break;
      std::unique_lock<std::mutex> l(progress_mu_);
      progress_cv_.wait_for(l, std::chrono::milliseconds(backoff_ms),
                            [&] { return sh.known_clock.load() >= c; });
      backoff_ms = std::min<int64_t>(backoff_ms * 2, 20);
    }
  }
  ws->clock_blocked_ns.Add(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count()));
  return result.WithPrefix("GlobalBarrier");
}

}  // namespace pace
