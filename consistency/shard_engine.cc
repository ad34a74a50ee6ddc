#include "consistency/shard_engine.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace pace {

namespace {

// Rows reserved up front in one push (messages are cut by bytes anyway).
constexpr size_t kMaxReservedPushRows = size_t{1} << 16;

}  // namespace

ShardEngine::ShardEngine(const ShardEngineOptions& options, std::vector<ClockT> applied_clocks,
                         int64_t now_ms, std::vector<uint32_t> applied_parts)
    : options_(options),
      clocks_(std::move(applied_clocks), now_ms),
      parts_(std::move(applied_parts)),
      published_(clocks_.Min()) {
  parts_.resize(clocks_.num_clients(), 0);
}

void ShardEngine::Connect(PeerId id, std::shared_ptr<Peer> peer, PeerInfo info) {
  if (info.is_client && info.client >= clocks_.num_clients()) info.is_client = false;
  peers_.try_emplace(id, PeerState{std::move(peer), info, 0});
}

ShardEngine::Dropped ShardEngine::Disconnect(PeerId id) {
  Dropped d;
  auto it = peers_.find(id);
  if (it == peers_.end()) return d;
  parked_bytes_ -= it->second.parked_bytes;
  peers_.erase(it);
  d.parked = parked_.RemoveIf([id](const Parked& p) { return p.peer == id; });
  d.subscriptions = subs_.RemoveSubscriber(id);
  return d;
}

void ShardEngine::AbortParked(const Status& why) {
  for (Parked& p : parked_.TakeReady(INT64_MAX)) {
    auto it = peers_.find(p.peer);
    if (it == peers_.end()) continue;
    it->second.parked = 0;
    it->second.parked_bytes = 0;
    it->second.peer->SendReadError(p.read.req_id, why);
  }
  parked_bytes_ = 0;
}

PeerInfo ShardEngine::InfoOf(PeerId id) const {
  auto it = peers_.find(id);
  return it == peers_.end() ? PeerInfo{} : it->second.info;
}

ShardEngine::ReadAction ShardEngine::AdmitRead(PeerId id, ReadRequest* read) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return ReadAction::kIgnored;
  PeerState& p = it->second;
  const bool park = clocks_.Min() < read->min_version;
  Status caps = CheckReadCaps(id, p, *read, park);
  if (!caps.ok()) {
    ++counters_.read_errors;
    p.peer->SendReadError(read->req_id, caps);
    return ReadAction::kRefused;
  }
  if (!park) return ReadAction::kAnswer;
  if (p.parked >= options_.max_parked_reads_per_peer) {
    ++counters_.read_errors;
    p.peer->SendReadError(
        read->req_id,
        Status::ResourceExhausted("too many parked reads (" + std::to_string(p.parked) +
                                  ") on this connection waiting for the shard clock to reach " +
                                  std::to_string(read->min_version) + " (it is " +
                                  std::to_string(clocks_.Min()) + ")"));
    return ReadAction::kRefused;
  }
  ++p.parked;
  p.parked_bytes += ParkedCharge(*read);
  parked_bytes_ += ParkedCharge(*read);
  ++counters_.parked_reads;
  const Version min_version = read->min_version;
  parked_.Park(min_version, Parked{id, std::move(*read)});
  return ReadAction::kParked;
}

Status ShardEngine::CheckReadCaps(PeerId id, const PeerState& p, const ReadRequest& read,
                                  bool park) const {
  const size_t n = read.rows.size();
  if (park) {
    const size_t charge = ParkedCharge(read);
    const size_t per_peer = options_.max_parked_bytes_per_peer;
    const size_t total = options_.max_parked_bytes_total;
    if (per_peer > 0 && p.parked_bytes + charge > per_peer) {
      return Status::ResourceExhausted(
          "parked reads of this connection would hold " + std::to_string(p.parked_bytes + charge) +
          " bytes waiting for the shard clock to reach " + std::to_string(read.min_version) +
          " (it is " + std::to_string(clocks_.Min()) + "); at most " + std::to_string(per_peer));
    }
    if (total > 0 && parked_bytes_ + charge > total) {
      return Status::ResourceExhausted("parked reads of all connections would hold " +
                                       std::to_string(parked_bytes_ + charge) + " bytes; at most " +
                                       std::to_string(total));
    }
  }
  if (read.subscribe) {
    const size_t mine = subs_.SubscriptionCount(id);
    const size_t per_peer = options_.max_subscriptions_per_peer;
    const size_t total = options_.max_subscriptions_total;
    if (per_peer > 0 && mine + n > per_peer) {
      return Status::ResourceExhausted("this connection would subscribe to " +
                                       std::to_string(mine + n) + " rows; at most " +
                                       std::to_string(per_peer));
    }
    if (total > 0 && subs_.num_subscriptions() + n > total) {
      return Status::ResourceExhausted("subscriptions of all connections would reach " +
                                       std::to_string(subs_.num_subscriptions() + n) +
                                       " rows; at most " + std::to_string(total));
    }
  }
  return Status::OK();
}

Status ShardEngine::AnswerFromView(const PeerInfo& reader, const ReadRequest& read,
                                   const RowsView& view, ReadAnswer* answer) {
  std::vector<std::string> values;
  std::vector<uint8_t> absent;
  if (reader.absent_rows) {
    RETURN_IF_ERROR(view.ReadRowsOrAbsent(read.table, read.rows, &values, &absent));
  } else {
    RETURN_IF_ERROR(view.ReadRows(read.table, read.rows, &values));
    absent.assign(values.size(), 0);
  }
  if (values.size() != read.rows.size() || absent.size() != read.rows.size()) {
    return Status::Internal("the store returned a wrong number of values");
  }
  answer->req_id = read.req_id;
  answer->version = view.ShardClock();
  // Observers have no own updates: a = v.
  answer->applied_clock = reader.is_client ? view.AppliedClock(reader.client) : answer->version;
  answer->applied_parts = reader.is_client ? view.AppliedParts(reader.client) : 0;
  answer->rows.clear();
  answer->rows.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    answer->rows.push_back(
        RowValue{read.table, read.rows[i], std::move(values[i]), absent[i] != 0});
  }
  return Status::OK();
}

void ShardEngine::FinishRead(PeerId id, const ReadRequest& read, const Status& st,
                             ReadAnswer answer) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return;
  Peer& peer = *it->second.peer;
  if (!st.ok()) {
    ++counters_.read_errors;
    return peer.SendReadError(read.req_id, st);
  }
  int64_t bytes = 0;
  for (const RowValue& r : answer.rows) {
    bytes += static_cast<int64_t>(r.bytes.size());
    counters_.rows_read_absent += r.absent ? 1 : 0;
  }
  if (read.subscribe) {
    // The only client process of a job is pushed nothing: nobody else
    // changes its rows, and its own changes are in its cache. It is
    // registered for its PushDones, without a subscription per row (at model
    // scale ~100 bytes each for every row the job reads, and the readers'
    // time to add them).
    const bool only_client = it->second.info.is_client && clocks_.num_clients() == 1;
    subs_.Subscribe(id, read.table, only_client ? std::vector<uint64_t>{} : read.rows);
  }
  counters_.rows_read += static_cast<int64_t>(answer.rows.size());
  counters_.value_bytes_out += bytes;
  peer.SendReadAnswer(std::move(answer));
}

void ShardEngine::Unsubscribe(PeerId id, uint32_t table, const std::vector<uint64_t>& rows) {
  subs_.Unsubscribe(id, table, rows);
}

PublishPlan ShardEngine::NewPlan(Version clock) {
  assert(plans_made_ == plans_finished_);  // one plan outstanding at most
  PublishPlan plan;
  plan.clock = clock;
  plan.max_push_bytes = options_.max_push_bytes;
  plan.seq = ++plans_made_;
  return plan;
}

PublishPlan ShardEngine::PlanPublish() {
  const Version clock = clocks_.Min();
  PublishPlan plan = NewPlan(clock);
  if (clock < published_) published_ = clock;  // clocks moved back (a restore): nothing to answer
  if (clock <= published_) return plan;
  published_ = clock;
  for (Parked& r : parked_.TakeReady(clock)) {
    auto it = peers_.find(r.peer);
    if (it == peers_.end()) continue;
    --it->second.parked;
    it->second.parked_bytes -= ParkedCharge(r.read);
    parked_bytes_ -= ParkedCharge(r.read);
    PublishPlan::ReadyRead ready;
    ready.peer = r.peer;
    ready.info = it->second.info;
    ready.read = std::move(r.read);
    plan.reads.push_back(std::move(ready));
  }
  PlanPush(clock, &plan);
  return plan;
}

PublishPlan ShardEngine::PlanRetry() {
  // Stamped with the clock the engine published, not the view's: the view
  // may hold batches not recorded yet, whose rows are not marked for pushing,
  // so it must not declare them current.
  PublishPlan plan = NewPlan(published_);
  if (push_retry_pending_) PlanPush(published_, &plan);
  return plan;
}

void ShardEngine::PlanPush(Version clock, PublishPlan* plan) {
  push_retry_pending_ = false;
  PushPlan push = subs_.PlanPush();
  plan->clock = clock;
  plan->rows = std::move(push.rows);
  plan->subscribers.reserve(push.subscribers.size());
  for (PushPlan::Entry& entry : push.subscribers) {
    auto it = peers_.find(entry.subscriber);
    if (it == peers_.end()) continue;
    PublishPlan::Subscriber sub;
    sub.peer = entry.subscriber;
    sub.info = it->second.info;
    sub.row_indices = std::move(entry.row_indices);
    plan->subscribers.push_back(std::move(sub));
  }
}

void ShardEngine::ReadPublish(const RowsView& view, PublishPlan* plan) {
  ReadReadyReads(view, plan);
  if (plan->subscribers.empty()) return;
  BuildPushes(view, ReadPushRows(view, plan), plan);
}

void ShardEngine::ReadReadyReads(const RowsView& view, PublishPlan* plan) {
  for (PublishPlan::ReadyRead& r : plan->reads) {
    r.status = AnswerFromView(r.info, r.read, view, &r.answer);
  }
}

std::vector<std::string> ShardEngine::ReadPushRows(const RowsView& view, PublishPlan* plan) {
  // Every changed row once; plan->rows is sorted by table: one read per
  // table.
  const std::vector<RowKey>& rows = plan->rows;
  const size_t n = rows.size();
  std::vector<std::string> values(n);
  plan->row_read.assign(n, false);
  std::vector<uint64_t> ids;
  std::vector<std::string> vals;
  for (size_t begin = 0; begin < n;) {
    const uint32_t table = rows[begin].table;
    size_t end = begin;
    ids.clear();
    while (end < n && rows[end].table == table) ids.push_back(rows[end++].row);
    Status st = view.ReadRows(table, ids, &vals);
    if (st.ok() && vals.size() == ids.size()) {
      for (size_t i = 0; i < ids.size(); ++i) {
        values[begin + i] = std::move(vals[i]);
        plan->row_read[begin + i] = true;
      }
    } else {
      plan->push_read_errors += static_cast<int64_t>(ids.size());
    }
    begin = end;
  }
  return values;
}

void ShardEngine::BuildPushes(const RowsView& view, std::vector<std::string> values,
                              PublishPlan* plan) {
  // Each value is copied into the pushes of all but the last subscriber that
  // gets it, and moved into that one's.
  std::vector<uint32_t> uses(values.size(), 0);
  for (const PublishPlan::Subscriber& sub : plan->subscribers) {
    for (uint32_t i : sub.row_indices) ++uses[i];
  }
  const Version clock = plan->clock;
  for (PublishPlan::Subscriber& sub : plan->subscribers) {
    sub.applied_clock = sub.info.is_client ? view.AppliedClock(sub.info.client) : view.ShardClock();
    const uint32_t parts = sub.info.is_client ? view.AppliedParts(sub.info.client) : 0;
    sub.complete = true;
    PushBatch push{clock, sub.applied_clock, {}, parts};
    push.rows.reserve(std::min(sub.row_indices.size(), kMaxReservedPushRows));
    size_t push_bytes = 0;
    for (uint32_t i : sub.row_indices) {
      if (!plan->row_read[i]) {
        sub.complete = false;
        continue;
      }
      push_bytes += values[i].size();
      const RowKey& key = plan->rows[i];
      if (--uses[i] == 0) {
        push.rows.push_back(RowValue{key.table, key.row, std::move(values[i])});
      } else {
        push.rows.push_back(RowValue{key.table, key.row, values[i]});
      }
      if (push_bytes >= plan->max_push_bytes) {
        sub.pushes.push_back(std::move(push));
        push = PushBatch{clock, sub.applied_clock, {}, parts};
        push_bytes = 0;
      }
    }
    if (!push.rows.empty()) sub.pushes.push_back(std::move(push));
  }
}

Version ShardEngine::FinishPublish(PublishPlan plan) {
  assert(plan.seq == plans_finished_ + 1);  // plans finish in the order made
  plans_finished_ = plan.seq;
  for (PublishPlan::ReadyRead& r : plan.reads) {
    FinishRead(r.peer, r.read, r.status, std::move(r.answer));
  }
  counters_.push_read_errors += plan.push_read_errors;
  for (PublishPlan::Subscriber& sub : plan.subscribers) {
    auto it = peers_.find(sub.peer);
    if (it == peers_.end()) continue;  // gone since the plan
    Peer& peer = *it->second.peer;
    for (PushBatch& push : sub.pushes) {
      counters_.rows_pushed += static_cast<int64_t>(push.rows.size());
      for (const RowValue& r : push.rows) {
        counters_.value_bytes_out += static_cast<int64_t>(r.bytes.size());
      }
      ++counters_.pushes;
      peer.SendPush(std::move(push));
    }
    if (sub.complete) {
      ++counters_.push_dones;
      peer.SendPushDone(plan.clock, sub.applied_clock);
      continue;
    }
    // Not declared current: pushed again by a retry or the next advance.
    push_retry_pending_ = true;
    for (uint32_t i : sub.row_indices) {
      if (!plan.row_read[i]) subs_.MarkDirty(plan.rows[i]);
    }
  }
  return plan.clock;
}

Version ShardEngine::Publish(const RowsView& view) {
  PublishPlan plan = PlanPublish();
  if (!plan.empty()) {
    ReadPublish(view, &plan);
  }
  FinishPublish(std::move(plan));
  return clocks_.Min();
}

void ShardEngine::RetryPushes(const RowsView& view) {
  PublishPlan plan = PlanRetry();
  ReadPublish(view, &plan);
  FinishPublish(std::move(plan));
}

}  // namespace pace
