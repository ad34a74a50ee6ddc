// ShardService: the data path — request validation, reads handed to the
// reader threads, batch application on the writer and the Acks; what to
// answer, park or push is the engine's (consistency/shard_engine.h). The
// transport hands Reads to the reader threads and Applies to the writer
// thread (shard_service.cc); nothing here runs RocksDB on a transport thread.
#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "common/hash.h"
#include "server/engine_adapters.h"
#include "server/shard_service.h"
#include "server/sort_by_row.h"

namespace pace {

Status ShardService::CheckPlacement(uint32_t table, uint64_t row) const {
  if (!options_.check_placement || num_shards_ <= 1) return Status::OK();
  uint32_t owner = ShardOf(table, row, num_shards_);
  if (owner == shard_id_) return Status::OK();
  return Status::InvalidArgument(
      "row " + std::to_string(row) + " of table " + std::to_string(table) + " belongs to shard " +
      std::to_string(owner) + ", not shard " + std::to_string(shard_id_));
}

PeerInfo ShardService::InfoOf(const net::Session& s) {
  const net::Hello& h = s.hello();
  return PeerInfo{h.role == net::Hello::kClientProcess, h.client_id,
                  (h.features & net::Hello::kAbsentRows) != 0};
}

void ShardService::EnsurePeer(const SessionPtr& s) {
  if (engine_.IsConnected(s->id())) return;
  engine_.Connect(s->id(), std::make_shared<SessionPeer>(s, options_.max_reply_bytes), InfoOf(*s));
}

// --- Reads -----------------------------------------------------------------------

void ShardService::HandleRead(const SessionPtr& s, net::Read& m) {
  counters_.reads.fetch_add(1, std::memory_order_relaxed);
  if (m.rows.empty()) return SendError(s, m.req_id, Status::InvalidArgument("Read of no rows"));
  if (m.rows.size() > options_.max_read_rows) {
    return SendError(
        s, m.req_id,
        Status::InvalidArgument("Read of " + std::to_string(m.rows.size()) + " rows; at most " +
                                std::to_string(options_.max_read_rows) + " per request"));
  }
  StatusOr<TableSchema> schema = store_->FindTable(m.table);
  if (!schema.ok()) {
    return SendError(s, m.req_id, Status::NotFound("unknown table id " + std::to_string(m.table)));
  }
  {
    Status fits = CheckReplyFits(*schema, m.rows.size());
    if (!fits.ok()) return SendError(s, m.req_id, fits);
  }
  for (uint64_t row : m.rows) {
    Status st = CheckPlacement(m.table, row);
    if (!st.ok()) return SendError(s, m.req_id, st);
  }
  const uint64_t reply_bytes = ReplyBytes(*schema, m.rows.size());
  if (Status room = ReserveReadReply(*s, reply_bytes); !room.ok()) {
    return SendError(s, m.req_id, room, /*retriable=*/true);
  }
  ReadRequest read;
  read.req_id = m.req_id;
  read.table = m.table;
  read.rows = std::move(m.rows);
  read.min_version = m.min_version;
  read.subscribe = m.subscribe;
  MutexLock lock(&mu_);
  EnsurePeer(s);
  if (engine_.AdmitRead(s->id(), &read) == ShardEngine::ReadAction::kAnswer) {
    // The view a reader thread takes is at least this fresh.
    PostRead([this, s, read = std::move(read), reply_bytes] {
      AnswerReadOnReader(s, read);
      ReleaseReadReply(*s, reply_bytes);  // now in the transport's queue, or sent
    });
  } else {
    ReleaseReadReply(*s, reply_bytes);  // parked or refused
  }
}

void ShardService::AnswerReadOnReader(const SessionPtr& s, const ReadRequest& read) {
  // The view is held until the reply is sent: the writer publishes the next
  // state, and sends the Acks that would make this reply stale, only after.
  // Holding it through FinishRead also keeps a subscription from missing the
  // next state's push.
  ShardStore::ReadView view = store_->View();
  ReadAnswer answer;
  Status st = ShardEngine::AnswerFromView(InfoOf(*s), read, ViewRows(view), &answer);
  MutexLock lock(&mu_);
  engine_.FinishRead(s->id(), read, st, std::move(answer));
}

void ShardService::HandleUnsubscribe(const SessionPtr& s, const net::Unsubscribe& m) {
  MutexLock lock(&mu_);
  engine_.Unsubscribe(s->id(), m.table, m.rows);
}

// --- Applies ---------------------------------------------------------------------

void ShardService::HandleApply(const SessionPtr& s, net::Apply& m) {
  const net::Hello& hello = s->hello();
  if (hello.role != net::Hello::kClientProcess) {
    counters_.apply_errors.fetch_add(1, std::memory_order_relaxed);
    return SendError(s, 0, Status::PermissionDenied("observers may not Apply"));
  }
  // The batch moves to its final place first: the deltas point into it.
  auto p = std::make_unique<PendingApply>();
  p->received = std::chrono::steady_clock::now();
  p->session = s;
  p->apply = std::move(m);
  std::vector<RowDelta>& deltas = p->deltas;
  deltas.reserve(p->apply.updates.size());
  int64_t bytes = 0;
  for (const net::DeltaRow& u : p->apply.updates) {
    Status st = CheckPlacement(u.table, u.row);
    if (!st.ok()) {
      counters_.apply_errors.fetch_add(1, std::memory_order_relaxed);
      return SendError(s, 0,
                       st.WithPrefix("Apply of clock " + std::to_string(p->apply.clock) +
                                     " from client " + std::to_string(hello.client_id)));
    }
    // The bytes stay in the Apply's backing (shared with the client's oplog
    // when the client is in this process) until the group is published.
    deltas.push_back(RowDelta{u.table, u.row, u.bytes});
    bytes += static_cast<int64_t>(u.bytes.size());
  }
  counters_.delta_bytes_in.fetch_add(bytes, std::memory_order_relaxed);
  p->bytes =
      bytes + static_cast<int64_t>(deltas.size() * (sizeof(net::RowData) + sizeof(RowDelta)));
  counters_.apply_bytes.fetch_add(p->bytes, std::memory_order_relaxed);
  // In row-key order (deltas of one row keep their batch order): the store
  // then writes them without sorting again, and the rows are marked dirty in
  // the order a push sends them, so planning the push need not sort either.
  // Done here, on the transport's threads, to keep the writer's share small.
  auto key_less = [](const RowDelta& a, const RowDelta& b) {
    return a.table != b.table ? a.table < b.table : a.row < b.row;
  };
  if (!std::is_sorted(deltas.begin(), deltas.end(), key_less)) {
    // Sorting 16-byte keys (stable: deltas of one row keep their batch
    // order) and permuting once is faster than sorting the deltas.
    std::vector<RowSortKey> keys(deltas.size());
    for (uint32_t i = 0; i < keys.size(); ++i) keys[i] = {deltas[i].table, i, deltas[i].row};
    SortByTableAndRow(&keys);
    std::vector<RowDelta> sorted(deltas.size());
    for (size_t i = 0; i < keys.size(); ++i) sorted[i] = deltas[keys[i].index];
    deltas.swap(sorted);
  }
  WriterItem item;
  item.apply = std::move(p);
  PostToWriter(std::move(item));
}

void ShardService::CommitGroup(std::vector<std::unique_ptr<PendingApply>>* group) {
  DropBatchesOfClosedSessions(group);
  if (group->empty()) return;
  if (!held_.empty()) return HoldGroup(group);  // behind the batches already held
  std::vector<BatchRequest> requests;
  requests.reserve(group->size());
  for (const auto& p : *group) {
    BatchRequest req{p->session->hello().client_id, p->apply.clock, &p->deltas};
    req.part = p->apply.part;
    req.more = p->apply.more;
    req.incarnation = p->session->hello().incarnation;
    requests.push_back(req);
  }
  std::vector<BatchResult> results;
  const int64_t n = static_cast<int64_t>(group->size());
  counters_.commit_groups.fetch_add(1, std::memory_order_relaxed);
  counters_.commit_group_batches.fetch_add(n, std::memory_order_relaxed);
  if (n > counters_.commit_group_max.load(std::memory_order_relaxed)) {
    counters_.commit_group_max.store(n, std::memory_order_relaxed);  // the writer's only
  }
  const auto t0 = std::chrono::steady_clock::now();
  commit_start_ = t0;
  Status st = store_->ApplyBatches(requests, &results);
  if (!st.ok() && store_->failed()) return HoldGroup(group);
  if (!st.ok()) {
    LOG(WARNING) << "shard " << shard_id_ << ": writing a group of " << group->size()
                 << " batch(es) failed: " << st.ToString();
  }
  const auto t1 = std::chrono::steady_clock::now();
  commit_end_ = t1;
  last_group_applies_ = group->size();
  last_commit_time_ = t1 - t0;
  AfterBatchesCommitted(*group, results);
  const auto t2 = std::chrono::steady_clock::now();
  if (VLOG_IS_ON(1)) {
    size_t rows = 0;
    for (const auto& p : *group) rows += p->deltas.size();
    auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
    VLOG(1) << "shard " << shard_id_ << ": group of " << group->size() << " batch(es), " << rows
            << " rows: commit " << ms(t1 - t0) << " ms, acks/reads/pushes " << ms(t2 - t1) << " ms";
    const MemoryStats m = memory_stats();
    auto mb = [](uint64_t b) { return static_cast<double>(b) / (1 << 20); };
    VLOG(1) << "shard " << shard_id_ << " memory (MiB): memtables " << mb(m.store.memtable_bytes)
            << ", row cache " << mb(m.store.row_cache_bytes) << ", block cache "
            << mb(m.store.block_cache_bytes) << ", table readers " << mb(m.store.table_reader_bytes)
            << ", write batch " << mb(m.store.write_batch_bytes) << ", apply batches "
            << mb(m.apply_bytes);
    const DataPathStats dp = store_->data_path_stats();
    VLOG(1) << "shard " << shard_id_ << " data path (MiB, totals): clock log " << mb(dp.log_bytes)
            << " in " << dp.log_records << " records (" << mb(dp.log_offset)
            << " not written back), rows read for writes " << dp.rows_read_for_write
            << ", rows not read (delta-only) " << dp.delta_only_rows << ", dirty "
            << mb(dp.dirty_bytes) << " in " << dp.dirty_rows << " rows, " << dp.writebacks
            << " write-backs of " << mb(dp.writeback_bytes) << " (" << dp.writeback_rows
            << " rows, " << dp.writeback_operands << " as merge operands), RocksDB WAL "
            << mb(dp.rocksdb_write_bytes);
  }
  // Freeing a large batch (its row vectors, and its bytes unless a client in
  // this process still holds them) is left to a reader thread, off the
  // writer's critical path.
  auto done = std::make_shared<std::vector<std::unique_ptr<PendingApply>>>(std::move(*group));
  PostRead([this, done] {
    int64_t bytes = 0;
    for (const auto& p : *done) bytes += p->bytes;
    done->clear();
    counters_.apply_bytes.fetch_sub(bytes, std::memory_order_relaxed);
  });
  group->clear();
}

void ShardService::AfterBatchesCommitted(const std::vector<std::unique_ptr<PendingApply>>& group,
                                         const std::vector<BatchResult>& results) {
  // The state just published, held until the sends below: the next group is
  // published only after, so every message goes out in shard-clock order.
  // Taken before mu_ (lock order: view, mu_).
  ShardStore::ReadView view = store_->View();
  PublishPlan plan;
  {
    MutexLock lock(&mu_);
    RecordGroupLocked(group, results);
    plan = engine_.PlanPublish();
    if (plan.empty()) {
      engine_.FinishPublish(std::move(plan));
      return;
    }
  }
  // The parked reads that became ready and the pushes, read from the state
  // just published (which holds exactly the batches recorded above) with
  // mu_ released: transport threads take it for every Read.
  ShardEngine::ReadPublish(ViewRows(view), &plan);
  MutexLock lock(&mu_);
  const int64_t pushes = engine_.counters().pushes;
  const bool read_errors = plan.push_read_errors != 0;
  engine_.FinishPublish(std::move(plan));
  if (engine_.counters().pushes != pushes) RecordPushLatencyLocked(group);
  if (read_errors) {
    LOG_EVERY_N(ERROR, 100) << "shard " << shard_id_
                            << ": reading rows for pushes failed; retried by the housekeeping "
                               "thread";
  }
}

void ShardService::RecordGroupLocked(const std::vector<std::unique_ptr<PendingApply>>& group,
                                     const std::vector<BatchResult>& results) {
  const int64_t now_ms = NowMs(std::chrono::steady_clock::now());
  for (size_t i = 0; i < group.size(); ++i) {
    const PendingApply& p = *group[i];
    const SessionPtr& s = p.session;
    const ClientId client = s->hello().client_id;
    const BatchResult& r = results[i];
    if (!r.status.ok()) {
      const std::string what = "Apply of clock " + std::to_string(p.apply.clock) + " from client " +
                               std::to_string(client);
      counters_.apply_errors.fetch_add(1, std::memory_order_relaxed);
      LOG(WARNING) << what << " refused: " << r.status.ToString();
      SendError(s, 0, r.status.WithPrefix(what));
      continue;
    }
    // The store classified the batch by the batch rule; the engine moves the
    // client on as the store did: an applied batch, or a last part that
    // completed the clock without its deltas (another incarnation's parts).
    const BatchId id{p.apply.clock, p.apply.part, p.apply.more};
    if (r.admission == BatchAdmission::kApply) {
      counters_.batches_applied.fetch_add(1, std::memory_order_relaxed);
      for (const RowDelta& d : p.deltas) engine_.MarkChanged(s->id(), RowKey{d.table, d.row});
    } else {
      counters_.duplicates.fetch_add(1, std::memory_order_relaxed);
    }
    if (r.admission == BatchAdmission::kApply || r.admission == BatchAdmission::kCompletesClock) {
      const AppliedPosition before{engine_.clocks().Get(client), engine_.AppliedParts(client)};
      const AppliedPosition next = PositionAfter(before, id, r.admission);
      engine_.RecordApplied(client, next.clock, now_ms, next.parts);
      if (next.parts > 0) {
        VLOG(1) << "shard " << shard_id_ << ": client " << client << " holds " << next.parts
                << " part(s) of its incomplete clock " << next.clock;
      } else if (before.parts > 0) {
        VLOG(1) << "shard " << shard_id_ << ": client " << client << " completed its clock "
                << before.clock << " (" << before.parts + (r.duplicate ? 0 : 1) << " parts)";
      }
    }
    s->Send(net::Ack{p.apply.clock, r.duplicate, p.apply.part});
  }
}

void ShardService::UndoOnWriter(ClientId client, uint64_t incarnation) {
  UndoResult r;
  Status st = store_->UndoIncompleteClock(client, incarnation, &r);
  MutexLock lock(&mu_);
  undo_pending_.erase(client);
  if (st.ok()) served_[client] = incarnation;  // after every batch of the one before
  if (!st.ok()) {
    LOG(WARNING) << "shard " << shard_id_ << ": taking back the incomplete clock of client "
                 << client << " failed (its next Hello tries again): " << st.ToString();
    return;
  }
  if (!r.undone) return;
  counters_.undone_parts.fetch_add(r.parts, std::memory_order_relaxed);
  // Subscribers hold values with the parts in them: the next push of these
  // rows carries the values without them.
  for (const auto& [table, row] : r.rows) engine_.MarkChanged(0, RowKey{table, row});
  engine_.RecordApplied(client, r.clock, NowMs(std::chrono::steady_clock::now()), 0);
}

void ShardService::RecordPushLatencyLocked(
    const std::vector<std::unique_ptr<PendingApply>>& group) {
  if (group.empty()) return;
  auto last = group[0]->received;
  for (const auto& p : group) last = std::max(last, p->received);
  const auto now = std::chrono::steady_clock::now();
  auto us = [](std::chrono::steady_clock::duration d) {
    return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  };
  // A group handed to the writer before its last Apply was received cannot
  // be; guard the split against a clock that is not monotonic anyway.
  const auto start = std::max(commit_start_, last);
  const auto end = std::max(commit_end_, start);
  push_latency_us_.Add(us(now - last));
  push_queue_us_.Add(us(start - last));
  push_commit_us_.Add(us(end - start));
  push_send_us_.Add(us(now - end));
  // The steady clock is CLOCK_MONOTONIC, the same in every process of a
  // host: a client's "PushDone ... arrived" line (--v=1) subtracts this
  // time to get the push's arrival latency.
  VLOG(1) << "shard " << shard_id_ << ": clock " << engine_.shard_clock()
          << " pushed; last Apply received at " << us(last.time_since_epoch())
          << " us (steady), queue " << us(start - last) << " us, commit " << us(end - start)
          << " us, acks/reads/pushes " << us(now - end) << " us";
}

void ShardService::RetryPushesOnWriter() {
  // The last published state; the writer publishes no newer one meanwhile.
  ShardStore::ReadView view = store_->View();
  PublishPlan plan;
  {
    MutexLock lock(&mu_);
    retry_posted_ = false;
    if (!engine_.push_retry_pending()) return;
    plan = engine_.PlanRetry();
  }
  ShardEngine::ReadPublish(ViewRows(view), &plan);
  MutexLock lock(&mu_);
  engine_.FinishPublish(std::move(plan));
}

}  // namespace pace
