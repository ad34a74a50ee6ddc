// One memory budget per process (docs/design.md, "Memory budgets"): how a
// budget of `memory_mb` MiB is split over the components of a client, a
// shard, or an embedded process (both). The shares are part of the
// user-facing contract (docs/operations.md, "Sizing the memory budget");
// a component given explicitly (its own option or flag, nonzero) overrides
// its share and the others keep theirs.
//
// Header-only arithmetic, shared by client/ (ClientOptions), server/ (paced's
// --memory_mb) and the apps. Thread-compatible (pure functions).
#ifndef PACE_COMMON_MEMORY_BUDGET_H_
#define PACE_COMMON_MEMORY_BUDGET_H_

#include <algorithm>
#include <cstddef>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace pace {

// Shares, in percent.
// A client's budget: row cache, open deltas (oplog of clocks not sent yet),
// sealed deltas of sent batches waiting for their Ack (unacked_mb), and a
// reserve for the copies of those batches in flight: the message being sent
// (queued frame, or in embedded mode the shard's decoded Apply) and the
// shard's WriteBatch (embedded) — measured: each unacknowledged byte is held
// about three times until its Ack.
inline constexpr size_t kClientCacheSharePct = 50;
inline constexpr size_t kClientOpenDeltaSharePct = 20;
inline constexpr size_t kClientUnackedSharePct = 10;
inline constexpr size_t kClientInFlightReservePct = 20;
// A shard's budget: RocksDB block cache, memtables, the shard's row cache.
// With the clock log (docs/storage-format.md section 15) the row cache holds
// the rows the log's records changed until they are written back in bulk, so
// it takes the largest share; memtables hold only applied clocks and catalog
// records then. The memtable share is split over kMemtablesPerShard
// memtables, each given half of its part: a memtable takes a whole group
// commit before RocksDB switches it, so it can hold about twice
// write_buffer_mb (measured, with rows written per group).
inline constexpr size_t kShardBlockCacheSharePct = 30;
inline constexpr size_t kShardMemtableSharePct = 10;
inline constexpr size_t kShardRowCacheSharePct = 60;
inline constexpr int kMemtablesPerShard = 3;  // RocksDB max_write_buffer_number
inline constexpr size_t kMemtableOvershoot = 2;
// An embedded process (client + in-process shard): the shard's part. Its row
// cache duplicates the client's cache there, so the client keeps the larger
// part.
inline constexpr size_t kEmbeddedShardSharePct = 40;

// The defaults of each component when no budget is given (memory_mb == 0).
inline constexpr size_t kDefaultCacheMb = 1024;
inline constexpr size_t kDefaultOpenDeltaMb = 256;
inline constexpr size_t kDefaultUnackedMb = 256;
inline constexpr size_t kDefaultBlockCacheMb = 256;
inline constexpr size_t kDefaultWriteBufferMb = 16;
inline constexpr size_t kDefaultRowCacheMb = 512;

// pct percent of mb, at least `floor_mb`.
inline constexpr size_t ShareMb(size_t mb, size_t pct, size_t floor_mb = 1) {
  return std::max(floor_mb, mb * pct / 100);
}

struct ClientMemorySplit {
  size_t cache_mb = kDefaultCacheMb;
  size_t open_delta_mb = kDefaultOpenDeltaMb;
  size_t unacked_mb = kDefaultUnackedMb;
};

// The client components of a client budget (0: the defaults).
inline ClientMemorySplit SplitClientBudget(size_t memory_mb) {
  ClientMemorySplit s;
  if (memory_mb == 0) return s;
  s.cache_mb = ShareMb(memory_mb, kClientCacheSharePct);
  s.open_delta_mb = ShareMb(memory_mb, kClientOpenDeltaSharePct);
  s.unacked_mb = ShareMb(memory_mb, kClientUnackedSharePct);
  return s;
}

struct ShardMemorySplit {
  size_t block_cache_mb = kDefaultBlockCacheMb;
  size_t write_buffer_mb = kDefaultWriteBufferMb;  // one memtable
  size_t row_cache_mb = kDefaultRowCacheMb;
};

// The components of a shard budget (0: the defaults).
inline ShardMemorySplit SplitShardBudget(size_t memory_mb) {
  ShardMemorySplit s;
  if (memory_mb == 0) return s;
  s.block_cache_mb = ShareMb(memory_mb, kShardBlockCacheSharePct);
  s.write_buffer_mb = std::max<size_t>(
      1, ShareMb(memory_mb, kShardMemtableSharePct) / (kMemtablesPerShard * kMemtableOvershoot));
  s.row_cache_mb = ShareMb(memory_mb, kShardRowCacheSharePct, 0);
  return s;
}

// An embedded process's budget: (client part, shard part).
inline void SplitEmbeddedBudget(size_t memory_mb, size_t* client_mb, size_t* shard_mb) {
  *shard_mb = ShareMb(memory_mb, kEmbeddedShardSharePct);
  *client_mb = std::max<size_t>(1, memory_mb - std::min(memory_mb, *shard_mb));
}

// For binaries run with a budget: caps glibc's malloc arenas at
// kMallocArenas. By default every thread that allocates may get its own
// arena (up to 8 per core), each keeping the memory freed in it: with the
// shard's writer, readers and RocksDB's threads beside the workers, that is
// tens of MiB of RSS the budget never sees (measured: 153 MiB instead of 122
// MiB peak for --memory_mb=96). One arena, not two: the deltas the workers
// allocate are freed by the inbound thread (Acks) and the shard's readers
// (decoded Applies), so with two arenas each kept the other's pattern of
// holes (pace_mf --memory_mb=64 at model scale: 166-178 MiB peak with two,
// 137 MiB with one, same speed; glibc's per-thread caches keep small
// allocations off the arena lock). No-op on other C libraries.
inline constexpr int kMallocArenas = 1;
inline void LimitMallocArenas() {
#if defined(__GLIBC__)
  mallopt(M_ARENA_MAX, kMallocArenas);
#endif
}

}  // namespace pace

#endif  // PACE_COMMON_MEMORY_BUDGET_H_
