// TableState: what the client knows about one open table. Internal to client/.
//
// Constant after construction except the atomic counters; owned by
// Client::Impl for its whole life (Table handles point at it).
#ifndef PACE_CLIENT_TABLE_STATE_H_
#define PACE_CLIENT_TABLE_STATE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "common/row.h"
#include "common/schema.h"
#include "consistency/read_policy.h"
#include "consistency/staleness_histogram.h"

namespace pace::client {

struct TableState {
  TableState(const TableSchema& s, uint32_t index_in_client, const void* owner_client)
      : schema(s),
        format(RowFormat::Of(s)),
        policy(ReadPolicy::For(s)),
        push(policy.uses_push()),
        index(index_in_client),
        hist_bound(policy.histogram_bound()),
        owner(owner_client) {}

  const TableSchema schema;
  const RowFormat format;
  const ReadPolicy policy;
  // policy.uses_push(): essp and async rows subscribe to pushes on their
  // first read and are never pulled again while subscribed.
  const bool push;
  // Dense index within the client (for per-worker counters).
  const uint32_t index;
  // policy.histogram_bound(): staleness histogram buckets 0..hist_bound plus
  // "> hist_bound".
  const int64_t hist_bound;
  // The Client::Impl that owns this table (to reject foreign handles).
  const void* const owner;

  // Every row of the table without a cache entry has no record at any
  // shard, so its value is its initializer at every version: the table was
  // made by this process's CreateTable in a one-client job (nobody else
  // writes it), and no entry of a row this process sent has been erased
  // since. Such a row's first read is answered here, without a Read
  // (docs/design.md, "Rows of a table the process created"). Cleared, for
  // good, by CacheStripe::MaybeErase under the row's stripe lock.
  std::atomic<bool> rows_local{false};

  std::atomic<uint64_t> pushes_applied{0};
  std::atomic<uint64_t> evictions{0};
  std::atomic<uint64_t> rows_initialized{0};  // answered here (rows_local)
};

}  // namespace pace::client

#endif  // PACE_CLIENT_TABLE_STATE_H_
