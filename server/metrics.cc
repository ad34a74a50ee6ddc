#include "server/metrics.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "net/metrics_http.h"

namespace pace {
namespace {

struct CounterInfo {
  const char* stat;  // name in ShardService::Stats()
  const char* metric;
  const char* type;
  const char* help;
};

// Stats() counters by name. A counter Stats() gains later and this table does
// not know is exported as a gauge pace_shard_<name> (see Render below).
const CounterInfo kCounters[] = {
    {"batches_applied", "pace_shard_batches_applied_total", "counter",
     "client batches (one clock of one client) applied to the store"},
    {"duplicates", "pace_shard_duplicate_batches_total", "counter",
     "re-sent batches skipped because the clock was already applied"},
    {"apply_errors", "pace_shard_apply_errors_total", "counter",
     "batches refused (bad table, row, shape, or a store error)"},
    {"reads", "pace_shard_reads_total", "counter", "Read requests received"},
    {"parked_reads", "pace_shard_reads_parked_total", "counter",
     "Read requests parked until the shard clock reached their min_version"},
    {"rows_read", "pace_shard_rows_read_total", "counter", "rows sent in Read replies"},
    {"rows_read_absent", "pace_shard_rows_read_absent_total", "counter",
     "of those, rows sent without bytes: no record, the client computes the initializer"},
    {"rows_pushed", "pace_shard_rows_pushed_total", "counter", "rows sent in ESSP pushes"},
    {"pushes", "pace_shard_pushes_total", "counter", "ESSP Push messages sent"},
    {"push_dones", "pace_shard_push_dones_total", "counter",
     "ESSP PushDone markers sent (one per subscriber per shard clock)"},
    {"delta_bytes_in", "pace_shard_delta_bytes_applied_total", "counter",
     "bytes of row deltas received in batches"},
    {"value_bytes_out", "pace_shard_value_bytes_out_total", "counter",
     "bytes of row values sent in Read replies"},
    {"request_errors", "pace_shard_request_errors_total", "counter",
     "requests answered with an Error"},
    {"row_cache_hits", "pace_shard_row_cache_hits_total", "counter",
     "row lookups answered by the row cache"},
    {"row_cache_misses", "pace_shard_row_cache_misses_total", "counter",
     "row lookups that read RocksDB"},
    {"row_cache_evictions", "pace_shard_row_cache_evictions_total", "counter",
     "rows evicted from the row cache"},
    {"row_cache_rows", "pace_shard_row_cache_rows", "gauge", "rows in the row cache"},
    {"row_cache_bytes", "pace_shard_row_cache_bytes", "gauge", "bytes in the row cache"},
    {"commit_groups", "pace_shard_commit_groups_total", "counter",
     "group commits: RocksDB writes of the batches waiting at that moment (one WAL append)"},
    {"commit_group_batches", "pace_shard_commit_group_batches_total", "counter",
     "batches written by group commits (divided by pace_shard_commit_groups_total: the mean "
     "group size)"},
    {"commit_group_max", "pace_shard_commit_group_max_batches", "gauge",
     "the largest group commit so far, in batches"},
    {"sessions", "pace_shard_sessions", "gauge", "client sessions the service knows"},
    {"incomplete_clock_parts", "pace_shard_incomplete_clock_parts", "gauge",
     "parts of clients' incomplete clocks applied and kept for an undo (a clock sent in parts, "
     "not complete yet)"},
    {"undone_parts", "pace_shard_undone_parts_total", "counter",
     "parts of incomplete clocks taken back because another process of their client started"},
    {"parked_now", "pace_shard_reads_parked", "gauge", "Read requests parked right now"},
    {"subscribers", "pace_shard_subscribers", "gauge", "sessions with ESSP subscriptions"},
    {"subscriptions", "pace_shard_subscriptions", "gauge", "(session, row) ESSP subscriptions"},
    // The write path's stages (docs/data-path.md).
    {"clock_log_records", "pace_shard_clock_log_records_total", "counter",
     "group commits appended to the clock log"},
    {"clock_log_bytes", "pace_shard_clock_log_bytes_total", "counter",
     "bytes appended to the clock log"},
    {"clock_log_pending_bytes", "pace_shard_clock_log_pending_bytes", "gauge",
     "bytes of the clock log not yet written back (replayed by a restart)"},
    {"dirty_rows", "pace_shard_dirty_rows", "gauge",
     "rows held in memory that are newer than RocksDB's"},
    {"dirty_bytes", "pace_shard_dirty_bytes", "gauge", "their bytes (part of the row cache)"},
    {"writebacks", "pace_shard_writebacks_total", "counter", "row write-backs (ingested SSTs)"},
    {"writeback_rows", "pace_shard_writeback_rows_total", "counter", "rows written back"},
    {"writeback_bytes", "pace_shard_writeback_bytes_total", "counter",
     "bytes of the SST files the write-backs ingested"},
    {"rows_read_for_write", "pace_shard_rows_read_for_write_total", "counter",
     "rows read from RocksDB to hold them in memory for a group commit"},
    {"delta_only_rows", "pace_shard_delta_only_rows_total", "counter",
     "rows a group commit changed without reading them (their deltas kept apart)"},
    {"writeback_operands", "pace_shard_writeback_operands_total", "counter",
     "rows written back as merge operands (their pending deltas)"},
    {"clock_log_replayed_records", "pace_shard_clock_log_replayed_records_total", "counter",
     "clock log records replayed at open or after a failed write"},
    {"rocksdb_write_bytes", "pace_shard_rocksdb_write_bytes_total", "counter",
     "bytes of WriteBatches written through RocksDB's WAL by group commits"},
    // Periodic checkpoints (--checkpoint_every, --checkpoint_keep).
    {"checkpoints", "pace_shard_checkpoints", "gauge", "periodic checkpoints kept"},
    {"checkpoint_bytes", "pace_shard_checkpoint_bytes", "gauge",
     "bytes of the kept checkpoints' files (SSTs shared by hard links counted in each)"},
    {"checkpoint_exclusive_bytes", "pace_shard_checkpoint_exclusive_bytes", "gauge",
     "bytes of the kept checkpoints' files no other link shares: what deleting them frees"},
    {"last_checkpoint_clock", "pace_shard_last_checkpoint_clock", "gauge",
     "shard clock of the newest periodic checkpoint (0: none yet)"},
};

std::string SanitizeName(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

// The shard's identity, clock and the clients' applied clocks.
void AppendClockMetrics(const ShardIdentity& id, const net::StatsReply& stats,
                        const ShardMetricsLimits& limits, net::PromText* out) {
  net::PromText& p = *out;
  p.Family("pace_shard_info", "gauge", "always 1; labels: the shard's identity and durability");
  p.Sample("pace_shard_info",
           {{"shard", std::to_string(id.shard_id)},
            {"num_shards", std::to_string(id.num_shards)},
            {"num_clients", std::to_string(id.num_clients)},
            {"sync", limits.sync ? "true" : "false"}},
           1);
  p.Family("pace_shard_clock", "gauge",
           "the shard clock C = min over clients of their applied clock");
  p.Sample("pace_shard_clock", static_cast<double>(stats.shard_clock));

  ClockT fastest = 0;
  for (ClockT a : stats.applied_clocks) fastest = std::max(fastest, a);
  p.Family("pace_shard_client_applied_clock", "gauge",
           "clocks of this client whose batches this shard has applied");
  for (size_t c = 0; c < stats.applied_clocks.size(); ++c) {
    p.Sample("pace_shard_client_applied_clock", {{"client", std::to_string(c)}},
             static_cast<double>(stats.applied_clocks[c]));
  }
  p.Family("pace_shard_client_lag_clocks", "gauge",
           "how many clocks this client is behind the fastest client at this shard");
  for (size_t c = 0; c < stats.applied_clocks.size(); ++c) {
    p.Sample("pace_shard_client_lag_clocks", {{"client", std::to_string(c)}},
             static_cast<double>(fastest - stats.applied_clocks[c]));
  }
}

// ShardService::Stats() counters (memory_* apart): named metrics where
// kCounters has them, pace_shard_<name> gauges otherwise.
void AppendCounterMetrics(const net::StatsReply& stats, net::PromText* out) {
  net::PromText& p = *out;
  for (const auto& [name, value] : stats.counters) {
    if (name.rfind("memory_", 0) == 0) continue;  // below, per component
    const CounterInfo* info = nullptr;
    for (const CounterInfo& ci : kCounters) {
      if (name == ci.stat) info = &ci;
    }
    if (info != nullptr) {
      p.Family(info->metric, info->type, info->help);
      p.Sample(info->metric, static_cast<double>(value));
    } else {
      const std::string metric = "pace_shard_" + SanitizeName(name);
      p.Family(metric, "gauge", "ShardService::Stats() counter " + name);
      p.Sample(metric, static_cast<double>(value));
    }
  }
}

// The store's sizes.
void AppendStoreMetrics(ShardStore* store, net::PromText* out) {
  net::PromText& p = *out;
  uint64_t disk_bytes = 0, keys = 0;
  if (store->ApproximateSize(&disk_bytes, &keys).ok()) {
    p.Family("pace_shard_store_bytes", "gauge",
             "approximate bytes of the store's rows on disk (RocksDB SST files)");
    p.Sample("pace_shard_store_bytes", static_cast<double>(disk_bytes));
    p.Family("pace_shard_store_estimated_keys", "gauge",
             "RocksDB's estimate of the number of keys (rows and metadata)");
    p.Sample("pace_shard_store_estimated_keys", static_cast<double>(keys));
  }
  const std::vector<TableSchema> tables = store->ListTables();
  p.Family("pace_shard_tables", "gauge", "tables in the store");
  p.Sample("pace_shard_tables", static_cast<double>(tables.size()));
  p.Family("pace_shard_table_bytes", "gauge",
           "approximate bytes of one table's rows on this shard (files and memtables)");
  for (const TableSchema& t : tables) {
    uint64_t bytes = 0;
    if (store->ApproximateTableSize(t.id, &bytes).ok()) {
      p.Sample("pace_shard_table_bytes", {{"table", t.name}}, static_cast<double>(bytes));
    }
  }
}

// Memory per component against its bound.
void AppendMemoryMetrics(const net::StatsReply& stats, const net::ServerStats& server_stats,
                         const ShardMetricsLimits& limits, net::PromText* out) {
  net::PromText& p = *out;
  // Memory per component (Stats counters memory_<c>_bytes and
  // memory_<c>_limit_bytes) against its bound.
  struct Mem {
    double bytes = 0, limit = -1;
  };
  std::vector<std::pair<std::string, Mem>> mem;
  auto slot = [&mem](const std::string& c) -> Mem& {
    for (auto& [name, m] : mem) {
      if (name == c) return m;
    }
    mem.emplace_back(c, Mem{});
    return mem.back().second;
  };
  const std::string kPrefix = "memory_", kLimit = "_limit_bytes", kBytes = "_bytes";
  auto ends_with = [](const std::string& s, const std::string& e) {
    return s.size() > e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
  };
  for (const auto& [name, value] : stats.counters) {
    if (name.rfind(kPrefix, 0) != 0) continue;
    const std::string rest = name.substr(kPrefix.size());
    if (ends_with(rest, kLimit)) {
      slot(rest.substr(0, rest.size() - kLimit.size())).limit = static_cast<double>(value);
    } else if (ends_with(rest, kBytes)) {
      slot(rest.substr(0, rest.size() - kBytes.size())).bytes = static_cast<double>(value);
    }
  }
  slot("send_queues").bytes = static_cast<double>(server_stats.queued_bytes);
  p.Family("pace_shard_memory_bytes", "gauge",
           "memory in use per component (RocksDB: block_cache, block_cache_pinned, memtables, "
           "table_readers; row_cache; send_queues)");
  for (const auto& [name, m] : mem) {
    p.Sample("pace_shard_memory_bytes", {{"component", name}}, m.bytes);
  }
  p.Family("pace_shard_memory_limit_bytes", "gauge",
           "configured memory bound per component (block_cache: RocksDB's capacity; memtables: "
           "write_buffer_mb x 3; row_cache: row_cache_mb)");
  for (const auto& [name, m] : mem) {
    if (m.limit >= 0) p.Sample("pace_shard_memory_limit_bytes", {{"component", name}}, m.limit);
  }
  if (limits.memory_budget_bytes > 0) {
    p.Family("pace_shard_memory_budget_bytes", "gauge", "paced's --memory_mb");
    p.Sample("pace_shard_memory_budget_bytes", static_cast<double>(limits.memory_budget_bytes));
  }
}

// The transport.
void AppendTransportMetrics(const net::ServerStats& server_stats, net::PromText* out) {
  net::PromText& p = *out;
  p.Family("pace_shard_connections_accepted_total", "counter", "TCP connections accepted");
  p.Sample("pace_shard_connections_accepted_total",
           static_cast<double>(server_stats.connections_accepted));
  p.Family("pace_shard_connections_open", "gauge", "TCP connections open now");
  p.Sample("pace_shard_connections_open", static_cast<double>(server_stats.connections_open));
  p.Family("pace_shard_sessions_active", "gauge", "connections past the handshake, now");
  p.Sample("pace_shard_sessions_active", static_cast<double>(server_stats.sessions_active));
  p.Family("pace_shard_refused_peers_total", "counter",
           "handshakes refused (wrong token, wire version, client id, first frame)");
  p.Sample("pace_shard_refused_peers_total", static_cast<double>(server_stats.handshakes_refused));
  p.Family("pace_shard_bad_frames_total", "counter",
           "frames that failed the size check, verification or decoding");
  p.Sample("pace_shard_bad_frames_total", static_cast<double>(server_stats.bad_frames));
  p.Family("pace_shard_read_pauses_total", "counter",
           "times a session stopped reading because its send queue was full");
  p.Sample("pace_shard_read_pauses_total", static_cast<double>(server_stats.read_pauses));
  p.Family("pace_shard_peak_send_queue_bytes", "gauge",
           "largest send queue any one session ever had");
  p.Sample("pace_shard_peak_send_queue_bytes",
           static_cast<double>(server_stats.peak_write_queue_bytes));
}

}  // namespace

std::string RenderShardMetrics(ShardService* service, const net::ServerStats& server_stats,
                               const ShardMetricsLimits& limits) {
  net::PromText p;
  const net::StatsReply stats = service->Stats();
  AppendClockMetrics(service->identity(), stats, limits, &p);
  AppendCounterMetrics(stats, &p);
  AppendStoreMetrics(service->store(), &p);
  AppendMemoryMetrics(stats, server_stats, limits, &p);
  AppendTransportMetrics(server_stats, &p);
  return p.Take();
}

}  // namespace pace
