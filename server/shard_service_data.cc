// ShardService: the data path — reads (answered or parked), batch application,
// and what a shard-clock advance triggers (parked reads, ESSP pushes). The
// transport hands Reads to the reader threads and Applies to the writer
// thread (shard_service.cc); nothing here runs RocksDB on a transport thread.
#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "common/hash.h"
#include "server/shard_service.h"

namespace pace {

namespace {

// Rows reserved up front in one Push (messages are cut by bytes anyway).
constexpr size_t kMaxReservedPushRows = size_t{1} << 16;

}  // namespace

Status ShardService::CheckPlacement(uint32_t table, uint64_t row) const {
  if (!options_.check_placement || num_shards_ <= 1) return Status::OK();
  uint32_t owner = ShardOf(table, row, num_shards_);
  if (owner == shard_id_) return Status::OK();
  return Status::InvalidArgument(
      "row " + std::to_string(row) + " of table " + std::to_string(table) + " belongs to shard " +
      std::to_string(owner) + ", not shard " + std::to_string(shard_id_));
}

ClockT ShardService::AppliedClockFor(const net::Session& s) const {
  const net::Hello& h = s.hello();
  if (h.role == net::Hello::kClientProcess && h.client_id < clocks_.num_clients()) {
    return clocks_.Get(h.client_id);
  }
  return clocks_.Min();  // observers have no own updates: a = v
}

ClockT ShardService::AppliedClockFor(const net::Session& s, const ShardStore::ReadView& view) {
  const net::Hello& h = s.hello();
  if (h.role == net::Hello::kClientProcess) return view.AppliedClock(h.client_id);
  return view.ShardClock();
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
  if (!store_->FindTable(m.table).ok()) {
    return SendError(s, m.req_id, Status::NotFound("unknown table id " + std::to_string(m.table)));
  }
  for (uint64_t row : m.rows) {
    Status st = CheckPlacement(m.table, row);
    if (!st.ok()) return SendError(s, m.req_id, st);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (clocks_.Min() >= m.min_version) {
    // The view a reader thread takes is at least this fresh.
    PostRead([this, s, read = std::move(m)] { AnswerReadOnReader(s, read); });
    return;
  }
  size_t& parked = parked_per_session_[s->id()];
  if (parked >= options_.max_parked_reads_per_session) {
    return SendError(
        s, m.req_id,
        Status::ResourceExhausted("too many parked reads (" + std::to_string(parked) +
                                  ") on this connection waiting for the shard clock to reach " +
                                  std::to_string(m.min_version) + " (it is " +
                                  std::to_string(clocks_.Min()) + ")"));
  }
  ++parked;
  counters_.parked_reads.fetch_add(1, std::memory_order_relaxed);
  const Version min_version = m.min_version;
  parked_.Park(min_version, ParkedRead{s, std::move(m)});
}

Status ShardService::ReadFromView(const net::Session& s, const net::Read& read,
                                  const ShardStore::ReadView& view, net::ReadReply* reply) {
  std::vector<std::string> values;
  Status st = view.MultiGet(read.table, read.rows, &values);
  if (!st.ok()) return st;
  if (values.size() != read.rows.size()) {
    return Status::Internal("MultiGet returned a wrong number of values");
  }
  reply->req_id = read.req_id;
  reply->version = view.ShardClock();
  reply->applied_clock = AppliedClockFor(s, view);
  reply->rows.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    reply->rows.push_back(net::RowData{read.table, read.rows[i], std::move(values[i])});
  }
  return Status::OK();
}

void ShardService::FinishRead(const SessionPtr& s, const net::Read& read, const Status& st,
                              net::ReadReply reply) {
  if (!st.ok()) return SendError(s, read.req_id, st);
  int64_t bytes = 0;
  for (const net::RowData& r : reply.rows) bytes += static_cast<int64_t>(r.bytes.size());
  if (read.subscribe) {
    subs_.Subscribe(s->id(), read.table, read.rows);
    sessions_.emplace(s->id(), s);  // in case the transport never called OnConnect
  }
  counters_.rows_read.fetch_add(static_cast<int64_t>(reply.rows.size()), std::memory_order_relaxed);
  counters_.value_bytes_out.fetch_add(bytes, std::memory_order_relaxed);
  s->Send(std::move(reply));
}

void ShardService::AnswerReadOnReader(const SessionPtr& s, const net::Read& read) {
  // The view is held until the reply is sent: the writer publishes the next
  // state, and sends the Acks that would make this reply stale, only after.
  ShardStore::ReadView view = store_->View();
  net::ReadReply reply;
  Status st = ReadFromView(*s, read, view, &reply);
  std::lock_guard<std::mutex> lock(mu_);
  FinishRead(s, read, st, std::move(reply));
}

void ShardService::AnswerRead(const SessionPtr& s, const net::Read& read,
                              const ShardStore::ReadView& view) {
  net::ReadReply reply;
  Status st = ReadFromView(*s, read, view, &reply);
  FinishRead(s, read, st, std::move(reply));
}

void ShardService::HandleUnsubscribe(const SessionPtr& s, const net::Unsubscribe& m) {
  std::lock_guard<std::mutex> lock(mu_);
  subs_.Unsubscribe(s->id(), m.table, m.rows);
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
  p->session = s;
  p->apply = std::move(m);
  std::vector<RowDelta>& deltas = p->deltas;
  deltas.reserve(p->apply.updates.size());
  int64_t bytes = 0;
  for (const net::RowData& u : p->apply.updates) {
    Status st = CheckPlacement(u.table, u.row);
    if (!st.ok()) {
      counters_.apply_errors.fetch_add(1, std::memory_order_relaxed);
      return SendError(s, 0,
                       st.WithPrefix("Apply of clock " + std::to_string(p->apply.clock) +
                                     " from client " + std::to_string(hello.client_id)));
    }
    deltas.push_back(RowDelta{u.table, u.row, u.bytes});
    bytes += static_cast<int64_t>(u.bytes.size());
  }
  counters_.delta_bytes_in.fetch_add(bytes, std::memory_order_relaxed);
  // In row-key order (deltas of one row keep their batch order): the store
  // then writes them without sorting again, and the rows are marked dirty in
  // the order a push sends them, so planning the push need not sort either.
  // Done here, on the transport's threads, to keep the writer's share small.
  auto key_less = [](const RowDelta& a, const RowDelta& b) {
    return a.table != b.table ? a.table < b.table : a.row < b.row;
  };
  if (!std::is_sorted(deltas.begin(), deltas.end(), key_less)) {
    // Sorting 16-byte keys (the batch index breaks ties, keeping batch order)
    // and permuting once is faster than a stable sort of the deltas.
    struct SortKey {
      uint32_t table;
      uint32_t index;
      uint64_t row;
    };
    std::vector<SortKey> keys(deltas.size());
    for (uint32_t i = 0; i < keys.size(); ++i) keys[i] = {deltas[i].table, i, deltas[i].row};
    std::sort(keys.begin(), keys.end(), [](const SortKey& a, const SortKey& b) {
      if (a.table != b.table) return a.table < b.table;
      if (a.row != b.row) return a.row < b.row;
      return a.index < b.index;
    });
    std::vector<RowDelta> sorted(deltas.size());
    for (size_t i = 0; i < keys.size(); ++i) sorted[i] = deltas[keys[i].index];
    deltas.swap(sorted);
  }
  WriterItem item;
  item.apply = std::move(p);
  PostToWriter(std::move(item));
}

void ShardService::CommitGroup(std::vector<std::unique_ptr<PendingApply>>* group) {
  if (group->empty()) return;
  std::vector<BatchRequest> requests;
  requests.reserve(group->size());
  for (const auto& p : *group) {
    requests.push_back(BatchRequest{p->session->hello().client_id, p->apply.clock, &p->deltas});
  }
  std::vector<BatchResult> results;
  const auto t0 = std::chrono::steady_clock::now();
  Status st = store_->ApplyBatches(requests, &results);
  if (!st.ok()) {
    LOG(WARNING) << "shard " << shard_id_ << ": writing a group of " << group->size()
                 << " batch(es) failed: " << st.ToString();
  }
  const auto t1 = std::chrono::steady_clock::now();
  AfterBatchesCommitted(*group, results);
  const auto t2 = std::chrono::steady_clock::now();
  if (VLOG_IS_ON(1)) {
    size_t rows = 0;
    for (const auto& p : *group) rows += p->deltas.size();
    auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
    VLOG(1) << "shard " << shard_id_ << ": group of " << group->size() << " batch(es), " << rows
            << " rows: commit " << ms(t1 - t0) << " ms, acks/reads/pushes " << ms(t2 - t1) << " ms";
  }
  // Freeing a large batch (one string per row) is left to a reader thread,
  // off the writer's critical path.
  auto done = std::make_shared<std::vector<std::unique_ptr<PendingApply>>>(std::move(*group));
  PostRead([done] { done->clear(); });
  group->clear();
}

void ShardService::AfterBatchesCommitted(const std::vector<std::unique_ptr<PendingApply>>& group,
                                         const std::vector<BatchResult>& results) {
  // The state just published; taken before mu_ (lock order: view, mu_).
  ShardStore::ReadView view = store_->View();
  std::lock_guard<std::mutex> lock(mu_);
  const Version old_clock = clocks_.Min();
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
    if (r.duplicate) {
      counters_.duplicates.fetch_add(1, std::memory_order_relaxed);
      s->Send(net::Ack{p.apply.clock, true});
      continue;
    }
    counters_.batches_applied.fetch_add(1, std::memory_order_relaxed);
    for (const RowDelta& d : p.deltas) subs_.MarkDirty(RowKey{d.table, d.row}, s->id());
    clocks_.Set(client, p.apply.clock + 1, now_ms);
    s->Send(net::Ack{p.apply.clock, false});
  }
  const Version new_clock = clocks_.Min();
  if (new_clock > old_clock) OnShardClockAdvanced(new_clock, view);
}

// --- Shard clock advances ----------------------------------------------------------

void ShardService::OnShardClockAdvanced(Version clock, const ShardStore::ReadView& view) {
  VLOG(2) << "shard " << shard_id_ << " clock -> " << clock;
  for (ParkedRead& p : parked_.TakeReady(clock)) {
    auto it = parked_per_session_.find(p.session->id());
    if (it != parked_per_session_.end() && --it->second == 0) parked_per_session_.erase(it);
    AnswerRead(p.session, p.read, view);
  }
  PushToSubscribers(clock, view);
}

void ShardService::PushToSubscribers(Version clock, const ShardStore::ReadView& view) {
  PushPlan plan = subs_.PlanPush();
  if (plan.subscribers.empty()) return;

  // Read every changed row once. plan.rows is sorted by table: one MultiGet
  // per table.
  const size_t n = plan.rows.size();
  std::vector<std::string> values(n);
  std::vector<bool> read_ok(n, false);
  for (size_t begin = 0; begin < n;) {
    const uint32_t table = plan.rows[begin].table;
    size_t end = begin;
    std::vector<uint64_t> ids;
    while (end < n && plan.rows[end].table == table) ids.push_back(plan.rows[end++].row);
    std::vector<std::string> vals;
    Status st = view.MultiGet(table, ids, &vals);
    if (st.ok() && vals.size() == ids.size()) {
      for (size_t i = 0; i < ids.size(); ++i) {
        values[begin + i] = std::move(vals[i]);
        read_ok[begin + i] = true;
      }
    } else {
      LOG_EVERY_N(ERROR, 100) << "shard " << shard_id_ << ": reading " << ids.size()
                              << " rows of table " << table
                              << " for pushes failed: " << st.ToString()
                              << "; will retry at the next clock";
    }
    begin = end;
  }

  // Each value is copied into the pushes of all but the last subscriber that
  // gets it, and moved into that one's.
  std::vector<uint32_t> uses(n, 0);
  for (const PushPlan::Entry& entry : plan.subscribers) {
    if (sessions_.count(entry.subscriber) == 0) continue;
    for (uint32_t i : entry.row_indices) ++uses[i];
  }

  int64_t rows_pushed = 0, pushes = 0, push_dones = 0, bytes_out = 0;
  for (const PushPlan::Entry& entry : plan.subscribers) {
    auto it = sessions_.find(entry.subscriber);
    if (it == sessions_.end()) continue;
    const SessionPtr& s = it->second;
    const ClockT applied = AppliedClockFor(*s);
    // A row that could not be read must not be declared current: skip this
    // subscriber's PushDone and retry the row at the next advance.
    bool complete = true;
    net::Push push{clock, applied, {}};
    push.rows.reserve(std::min(entry.row_indices.size(), kMaxReservedPushRows));
    size_t push_bytes = 0;
    for (uint32_t i : entry.row_indices) {
      if (!read_ok[i]) {
        complete = false;
        subs_.MarkDirty(plan.rows[i]);
        continue;
      }
      push_bytes += values[i].size();
      if (--uses[i] == 0) {
        push.rows.push_back(
            net::RowData{plan.rows[i].table, plan.rows[i].row, std::move(values[i])});
      } else {
        push.rows.push_back(net::RowData{plan.rows[i].table, plan.rows[i].row, values[i]});
      }
      if (push_bytes >= options_.max_push_bytes) {
        rows_pushed += static_cast<int64_t>(push.rows.size());
        bytes_out += static_cast<int64_t>(push_bytes);
        ++pushes;
        s->Send(std::move(push));
        push = net::Push{clock, applied, {}};
        push.rows.reserve(std::min(entry.row_indices.size(), kMaxReservedPushRows));
        push_bytes = 0;
      }
    }
    if (!push.rows.empty()) {
      rows_pushed += static_cast<int64_t>(push.rows.size());
      bytes_out += static_cast<int64_t>(push_bytes);
      ++pushes;
      s->Send(std::move(push));
    }
    if (complete) {
      ++push_dones;
      s->Send(net::PushDone{clock, applied});
    }
  }
  counters_.rows_pushed.fetch_add(rows_pushed, std::memory_order_relaxed);
  counters_.pushes.fetch_add(pushes, std::memory_order_relaxed);
  counters_.push_dones.fetch_add(push_dones, std::memory_order_relaxed);
  counters_.value_bytes_out.fetch_add(bytes_out, std::memory_order_relaxed);
}

}  // namespace pace
