// ShardService: a failed store (docs/operations.md, "Disk full, fd
// exhaustion"). When ShardStore refuses a write because its disk is full, it
// ran out of file descriptors or its file system turned read-only, it stops
// writing (ShardStore::failed) and the writer holds every batch from then on:
// nothing is acknowledged that is not stored, and no session gets an error
// that would fail its client. Each session hears why once (a retriable
// Error{0} naming the cause and the data dir); the writer tries
// ShardStore::Recover every second and, once it succeeds, closes (cleanly)
// every session that had batches held and drops them: their clients
// reconnect and re-send every unacknowledged batch from their own copies, and
// the shard applies each exactly once (a batch the failed write stored after
// all is a duplicate of the re-send). The held batches themselves are not
// committed: their clients re-send them. Reads keep being answered meanwhile.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <utility>

#include "common/steady_time.h"
#include "server/shard_service.h"

namespace pace {

namespace {

constexpr int64_t kHeldLogIntervalMs = 30000;

// A row in a ReadReply: its value (a tag byte plus the elements; a sparse row
// at least its 4-byte count) and about 28 bytes of table, row and
// FlatBuffers framing.
constexpr uint64_t kReplyRowOverhead = 28;
uint64_t RowValueBytes(const TableSchema& schema) {
  return schema.kind == RowKind::kDense ? 1 + uint64_t{schema.width} * ElementSize(schema.type)
                                        : 1 + 4;
}

}  // namespace

void ShardService::HoldGroup(std::vector<std::unique_ptr<PendingApply>>* group) {
  const Status why = store_->failure();
  const bool first = held_.empty();
  {
    MutexLock lock(&mu_);
    for (auto& p : *group) {
      const SessionPtr& s = p->session;
      if (held_notified_.emplace(s->id(), true).second) {
        SendError(s, 0,
                  Status::Unavailable(why.message() +
                                      "; keep the unacknowledged batches: once writes resume "
                                      "this shard closes the session and the client re-sends "
                                      "them"),
                  /*retriable=*/true);
      }
      held_.push_back(std::move(p));
    }
  }
  group->clear();
  if (first) {
    LOG(WARNING) << "shard " << shard_id_
                 << ": holding batches until the store recovers: " << why.message();
    held_logged_ms_ = SteadyNowMs();
  }
}

void ShardService::RetryHeld() {
  if (held_.empty()) return;
  Status st = store_->Recover();
  if (st.ok()) {
    DropHeld(Status::OK());
    return;
  }
  if (st.code() == StatusCode::kUnavailable) {
    const int64_t now = SteadyNowMs();
    if (now - held_logged_ms_ >= kHeldLogIntervalMs) {
      std::set<ClientId> clients;
      for (const auto& p : held_) clients.insert(p->session->hello().client_id);
      LOG(WARNING) << "shard " << shard_id_ << ": " << held_.size() << " batch(es) of "
                   << clients.size() << " client(s) held: " << st.message();
      held_logged_ms_ = now;
    }
    return;
  }
  // The store cannot be recovered in this process (e.g. its reopen found it
  // corrupt): fail the held batches (their clients keep them) and let paced
  // exit non-zero.
  const Status fatal =
      Status(st.code(), "shard " + std::to_string(shard_id_) + ": the store in " +
                            options_.data_dir + " cannot be recovered: " + st.message());
  LOG(ERROR) << fatal.message();
  {
    MutexLock l(&fatal_mu_);
    if (fatal_.ok()) fatal_ = fatal;
  }
  DropHeld(fatal);
}

void ShardService::DropHeld(const Status& why) {
  int64_t bytes = 0;
  size_t sessions = 0;
  for (const auto& p : held_) {
    bytes += p->bytes;
    if (!dropped_sessions_.insert(p->session->id()).second) continue;
    ++sessions;
    if (why.ok()) {
      // A clean close: the client reconnects and re-sends.
      p->session->Close(Status::OK());
    } else {
      MutexLock lock(&mu_);
      SendError(p->session, 0, why);
    }
  }
  if (why.ok()) {
    LOG(WARNING) << "shard " << shard_id_ << ": writes resume; closed " << sessions
                 << " session(s) whose " << held_.size()
                 << " batch(es) were held: their clients reconnect and re-send them";
  }
  held_.clear();
  held_notified_.clear();
  counters_.apply_bytes.fetch_sub(bytes, std::memory_order_relaxed);
}

void ShardService::DropBatchesOfClosedSessions(std::vector<std::unique_ptr<PendingApply>>* group) {
  if (dropped_sessions_.empty()) return;
  int64_t bytes = 0;
  auto keep = std::remove_if(group->begin(), group->end(), [&](const auto& p) {
    if (dropped_sessions_.count(p->session->id()) == 0) return false;
    bytes += p->bytes;
    return true;
  });
  group->erase(keep, group->end());
  counters_.apply_bytes.fetch_sub(bytes, std::memory_order_relaxed);
}

uint64_t ShardService::ReplyBytes(const TableSchema& schema, size_t rows) {
  return 64 + uint64_t{rows} * (RowValueBytes(schema) + kReplyRowOverhead);
}

Status ShardService::CheckReplyFits(const TableSchema& schema, size_t rows) const {
  if (options_.max_reply_bytes == 0) return Status::OK();
  const uint64_t bytes = ReplyBytes(schema, rows);
  if (bytes <= options_.max_reply_bytes) return Status::OK();
  const uint64_t fit =
      (options_.max_reply_bytes - 64) / (RowValueBytes(schema) + kReplyRowOverhead);
  return Status::InvalidArgument(
      "Read of " + std::to_string(rows) + " rows of table '" + schema.name +
      "': the reply would be " + (schema.kind == RowKind::kDense ? "" : "at least ") +
      std::to_string(bytes) + " bytes, over the frame limit of " +
      std::to_string(options_.max_reply_bytes) + " bytes (paced --max_frame_mb); read at most " +
      std::to_string(fit) + " rows of it per request");
}

Status ShardService::fatal_error() const {
  MutexLock l(&fatal_mu_);
  return fatal_;
}

}  // namespace pace
