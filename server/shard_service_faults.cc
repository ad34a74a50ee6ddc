// ShardService: a failed store (docs/operations.md, "Disk full, fd
// exhaustion"). When ShardStore refuses a write because its disk is full, it
// ran out of file descriptors or its file system turned read-only, it stops
// writing (ShardStore::failed) and the writer holds every batch from then on,
// in arrival order: nothing is acknowledged that is not stored, nothing is
// refused that the client would have to re-send. Each session hears why once
// (a retriable Error{0} naming the cause and the data dir); the writer tries
// ShardStore::Recover every second and, once it succeeds, commits the held
// batches and Acks them. Reads keep being answered meanwhile.
#include <glog/logging.h>

#include <chrono>
#include <set>
#include <string>
#include <utility>

#include "server/shard_service.h"

namespace pace {

namespace {

constexpr int64_t kHeldLogIntervalMs = 30000;

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void ShardService::HoldGroup(std::vector<std::unique_ptr<PendingApply>>* group) {
  const Status why = store_->failure();
  const bool first = held_.empty();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& p : *group) {
      p->held = true;
      const SessionPtr& s = p->session;
      if (held_notified_.emplace(s->id(), true).second) {
        SendError(s, 0,
                  Status::Unavailable(why.message() +
                                      "; this shard keeps the batch and acknowledges it once "
                                      "writes resume"),
                  /*retriable=*/true);
      }
      held_.push_back(std::move(p));
    }
  }
  group->clear();
  if (first) {
    LOG(WARNING) << "shard " << shard_id_
                 << ": holding batches until the store recovers: " << why.message();
    held_logged_ms_ = SteadyMs();
  }
}

void ShardService::RetryHeld() {
  if (held_.empty()) return;
  Status st = store_->Recover();
  if (st.ok()) {
    LOG(INFO) << "shard " << shard_id_ << ": committing " << held_.size()
              << " batch(es) held while the store was failed";
    std::vector<std::unique_ptr<PendingApply>> group = std::move(held_);
    held_.clear();
    held_notified_.clear();
    CommitGroup(&group);  // held again if the write fails again
    return;
  }
  if (st.code() == StatusCode::kUnavailable) {
    const int64_t now = SteadyMs();
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
    std::lock_guard<std::mutex> l(fatal_mu_);
    if (fatal_.ok()) fatal_ = fatal;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& p : held_) SendError(p->session, 0, fatal);
  }
  held_.clear();
  held_notified_.clear();
}

Status ShardService::CheckReplyFits(const TableSchema& schema, size_t rows) const {
  if (options_.max_reply_bytes == 0) return Status::OK();
  // A row in a ReadReply: its value (a tag byte plus the elements; a sparse
  // row at least its 4-byte count) and about 28 bytes of table, row and
  // FlatBuffers framing.
  constexpr uint64_t kRowOverhead = 28;
  const uint64_t value = schema.kind == RowKind::kDense
                             ? 1 + uint64_t{schema.width} * ElementSize(schema.type)
                             : 1 + 4;
  const uint64_t bytes = 64 + uint64_t{rows} * (value + kRowOverhead);
  if (bytes <= options_.max_reply_bytes) return Status::OK();
  const uint64_t fit = (options_.max_reply_bytes - 64) / (value + kRowOverhead);
  return Status::InvalidArgument(
      "Read of " + std::to_string(rows) + " rows of table '" + schema.name +
      "': the reply would be " + (schema.kind == RowKind::kDense ? "" : "at least ") +
      std::to_string(bytes) + " bytes, over the frame limit of " +
      std::to_string(options_.max_reply_bytes) + " bytes (paced --max_frame_mb); read at most " +
      std::to_string(fit) + " rows of it per request");
}

Status ShardService::fatal_error() const {
  std::lock_guard<std::mutex> l(fatal_mu_);
  return fatal_;
}

}  // namespace pace
