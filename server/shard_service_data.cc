// ShardService: the data path — request validation, batch application and
// Acks; what to answer, park or push is the engine's (consistency/).
#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "common/hash.h"
#include "server/engine_adapters.h"
#include "server/shard_service.h"

namespace pace {

Status ShardService::CheckPlacement(uint32_t table, uint64_t row) const {
  if (!options_.check_placement || num_shards_ <= 1) return Status::OK();
  uint32_t owner = ShardOf(table, row, num_shards_);
  if (owner == shard_id_) return Status::OK();
  return Status::InvalidArgument(
      "row " + std::to_string(row) + " of table " + std::to_string(table) + " belongs to shard " +
      std::to_string(owner) + ", not shard " + std::to_string(shard_id_));
}

void ShardService::EnsurePeer(const SessionPtr& s) {
  if (engine_.IsConnected(s->id())) return;
  const net::Hello& h = s->hello();
  engine_.Connect(s->id(), std::make_shared<SessionPeer>(s),
                  PeerInfo{h.role == net::Hello::kClientProcess, h.client_id});
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
  ReadRequest read;
  read.req_id = m.req_id;
  read.table = m.table;
  read.rows = std::move(m.rows);
  read.min_version = m.min_version;
  read.subscribe = m.subscribe;
  std::lock_guard<std::mutex> lock(mu_);
  EnsurePeer(s);
  engine_.Read(s->id(), std::move(read));
}

void ShardService::HandleUnsubscribe(const SessionPtr& s, const net::Unsubscribe& m) {
  std::lock_guard<std::mutex> lock(mu_);
  engine_.Unsubscribe(s->id(), m.table, m.rows);
}

// --- Applies ---------------------------------------------------------------------

void ShardService::HandleApply(const SessionPtr& s, net::Apply& m) {
  const net::Hello& hello = s->hello();
  if (hello.role != net::Hello::kClientProcess) {
    counters_.apply_errors.fetch_add(1, std::memory_order_relaxed);
    return SendError(s, 0, Status::PermissionDenied("observers may not Apply"));
  }
  const std::string what = "Apply of clock " + std::to_string(m.clock) + " from client " +
                           std::to_string(hello.client_id);
  std::vector<RowDelta> deltas;
  deltas.reserve(m.updates.size());
  int64_t bytes = 0;
  for (const net::RowData& u : m.updates) {
    Status st = CheckPlacement(u.table, u.row);
    if (!st.ok()) {
      counters_.apply_errors.fetch_add(1, std::memory_order_relaxed);
      return SendError(s, 0, st.WithPrefix(what));
    }
    deltas.push_back(RowDelta{u.table, u.row, u.bytes});
    bytes += static_cast<int64_t>(u.bytes.size());
  }
  counters_.delta_bytes_in.fetch_add(bytes, std::memory_order_relaxed);
  // In row-key order (deltas of one row keep their batch order): the store
  // then writes them without sorting again, and the rows are marked dirty in
  // the order a push sends them, so planning the push need not sort either.
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

  std::lock_guard<std::mutex> lock(mu_);
  bool duplicate = false;
  Status st = store_->ApplyBatch(hello.client_id, m.clock, deltas, &duplicate);
  if (!st.ok()) {
    counters_.apply_errors.fetch_add(1, std::memory_order_relaxed);
    LOG(WARNING) << what << " refused: " << st.ToString();
    return SendError(s, 0, st.WithPrefix(what));
  }
  if (duplicate) {
    counters_.duplicates.fetch_add(1, std::memory_order_relaxed);
    s->Send(net::Ack{m.clock, true});
    return;
  }
  counters_.batches_applied.fetch_add(1, std::memory_order_relaxed);
  for (const RowDelta& d : deltas) engine_.MarkChanged(s->id(), RowKey{d.table, d.row});
  s->Send(net::Ack{m.clock, false});
  const int64_t push_read_errors = engine_.counters().push_read_errors;
  engine_.Advance(hello.client_id, store_->AppliedClock(hello.client_id),
                  NowMs(std::chrono::steady_clock::now()));
  if (engine_.counters().push_read_errors != push_read_errors) {
    LOG_EVERY_N(ERROR, 100) << "shard " << shard_id_
                            << ": reading rows for pushes failed; will retry at the next clock";
  }
}

}  // namespace pace
