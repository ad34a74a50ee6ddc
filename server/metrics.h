// paced's Prometheus metrics (--metrics_listen): the shard service's Stats()
// (clocks, per-client applied clocks, batches, group-commit sizes, reads,
// pushes), the store's sizes, the transport's connection counters, and memory
// per component (RocksDB block cache, memtables, table readers, row cache,
// send queues) against its bound, as Prometheus text. Every metric is listed with its meaning in
// docs/operations.md ("Metrics").
#ifndef PACE_SERVER_METRICS_H_
#define PACE_SERVER_METRICS_H_

#include <cstdint>
#include <string>

#include "net/server.h"
#include "server/shard_service.h"

namespace pace {

// The shard's configured memory bounds (exported next to their usage).
struct ShardMetricsLimits {
  // RocksDB block cache, memtable and row cache budgets, bytes. Default: 0.
  uint64_t block_cache_bytes = 0;
  uint64_t write_buffer_bytes = 0;
  uint64_t row_cache_bytes = 0;
  // paced's --memory_mb (0: none). Default: 0.
  uint64_t memory_budget_bytes = 0;
  // Whether batches are fsynced before their Ack (--sync). Default: false.
  bool sync = false;
};

// One exposition of every shard metric. Thread-safe (takes the service's
// locks briefly, like a StatsRequest). `server_stats` is the transport's
// snapshot (net::Server::stats()).
std::string RenderShardMetrics(ShardService* service, const net::ServerStats& server_stats,
                               const ShardMetricsLimits& limits);

}  // namespace pace

#endif  // PACE_SERVER_METRICS_H_
