#include "client/metrics.h"

#include <string>
#include <utility>
#include <vector>

#include "net/metrics_http.h"

namespace pace {

std::string RenderClientMetrics(const ClientStats& stats, ClientId client_id,
                                uint32_t num_clients) {
  net::PromText p;
  p.Family("pace_client_info", "gauge", "always 1; labels: this process's client id and count");
  p.Sample("pace_client_info",
           {{"client", std::to_string(client_id)}, {"num_clients", std::to_string(num_clients)}},
           1);

  p.Family("pace_client_read_staleness_clocks", "histogram",
           "staleness c - v of reads (reader's clock minus the value's version), per table");
  for (const TableStats& t : stats.tables) {
    std::vector<double> bounds;
    std::vector<uint64_t> counts;
    uint64_t overflow = 0;
    for (size_t k = 0; k < t.staleness_hist.size(); ++k) {
      if (k <= t.staleness_bound) {
        bounds.push_back(static_cast<double>(k));
        counts.push_back(t.staleness_hist[k]);
      } else {
        overflow += t.staleness_hist[k];
      }
    }
    uint64_t n = overflow;
    for (uint64_t c : counts) n += c;
    p.Histogram("pace_client_read_staleness_clocks", {{"table", t.name}}, bounds, counts, overflow,
                t.staleness_mean * static_cast<double>(n));
  }
  struct PerTable {
    const char* metric;
    const char* help;
    uint64_t TableStats::*field;
  };
  const PerTable per_table[] = {
      {"pace_client_reads_total", "Get/Read calls", &TableStats::reads},
      {"pace_client_cache_hits_total", "reads served from the process cache without waiting",
       &TableStats::reads_cache_hit},
      {"pace_client_reads_blocked_total", "reads that waited for a fresh enough value",
       &TableStats::reads_blocked},
      {"pace_client_rows_fetched_total", "rows requested from shards", &TableStats::rows_fetched},
      {"pace_client_rows_initialized_total",
       "first reads of rows of a table this process created, answered without a Read",
       &TableStats::rows_initialized},
      {"pace_client_pushes_applied_total", "cached rows refreshed by ESSP pushes",
       &TableStats::pushes_applied},
      {"pace_client_cache_evictions_total", "rows evicted from the process cache",
       &TableStats::evictions},
      {"pace_client_incs_total", "Inc calls", &TableStats::incs},
  };
  for (const PerTable& m : per_table) {
    p.Family(m.metric, "counter", m.help);
    for (const TableStats& t : stats.tables) {
      p.Sample(m.metric, {{"table", t.name}}, static_cast<double>(t.*m.field));
    }
  }
  p.Family("pace_client_cache_misses_total", "counter",
           "reads not served from the cache at once (reads - cache hits)");
  for (const TableStats& t : stats.tables) {
    p.Sample("pace_client_cache_misses_total", {{"table", t.name}},
             static_cast<double>(t.reads >= t.reads_cache_hit ? t.reads - t.reads_cache_hit : 0));
  }

  p.Family("pace_client_blocked_seconds_total", "counter",
           "time workers spent waiting, summed over workers, by where they waited");
  p.Sample("pace_client_blocked_seconds_total", {{"in", "get"}}, stats.get_blocked_seconds);
  p.Sample("pace_client_blocked_seconds_total", {{"in", "clock"}}, stats.clock_blocked_seconds);
  const std::pair<const char*, std::pair<const char*, uint64_t>> totals[] = {
      {"pace_client_bytes_sent_total", {"bytes sent to shards", stats.bytes_sent}},
      {"pace_client_bytes_received_total", {"bytes received from shards", stats.bytes_received}},
      {"pace_client_rows_sent_total", {"row deltas sent in batches", stats.rows_sent}},
      {"pace_client_rows_received_total",
       {"row values received (replies and pushes)", stats.rows_received}},
      {"pace_client_batches_sent_total",
       {"batches sent (one per shard per clock)", stats.batches_sent}},
      {"pace_client_batches_resent_total",
       {"batches re-sent after a reconnect", stats.batches_resent}},
  };
  for (const auto& [metric, info] : totals) {
    p.Family(metric, "counter", info.first);
    p.Sample(metric, static_cast<double>(info.second));
  }
  p.Family("pace_client_cache_bytes", "gauge", "bytes in the process cache now");
  p.Sample("pace_client_cache_bytes", static_cast<double>(stats.cache_bytes));
  // Memory per component against its bound: the client's, and in embedded
  // mode the in-process shard's ("shard.*").
  p.Family("pace_client_memory_bytes", "gauge",
           "memory in use per component (client.cache, client.open_deltas, client.unacked; "
           "embedded: shard.block_cache, shard.memtables, shard.row_cache, ...)");
  for (const ClientStats::MemoryComponent& c : stats.memory) {
    p.Sample("pace_client_memory_bytes", {{"component", c.name}}, static_cast<double>(c.bytes));
  }
  p.Family("pace_client_memory_limit_bytes", "gauge",
           "configured bound per component (ClientOptions / --memory_mb shares)");
  for (const ClientStats::MemoryComponent& c : stats.memory) {
    if (c.bound_bytes > 0) {
      p.Sample("pace_client_memory_limit_bytes", {{"component", c.name}},
               static_cast<double>(c.bound_bytes));
    }
  }
  p.Family("pace_client_memory_budget_bytes", "gauge", "the process budget (--memory_mb; 0: none)");
  p.Sample("pace_client_memory_budget_bytes", static_cast<double>(stats.memory_budget_bytes));
  p.Family("pace_client_open_delta_waits_total", "counter",
           "Incs that waited at the open-delta bound (a worker ahead of the process clock)");
  p.Sample("pace_client_open_delta_waits_total", static_cast<double>(stats.open_delta_waits));
  p.Family("pace_client_parts_sent_early_total", "counter",
           "parts of a clock's batch sent before the clock completed (ClientStats::part_bytes)");
  p.Sample("pace_client_parts_sent_early_total", static_cast<double>(stats.parts_sent_early));
  return p.Take();
}

struct ClientMetricsServer::Impl {
  std::unique_ptr<net::MetricsHttpServer> http;
};

ClientMetricsServer::ClientMetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClientMetricsServer::~ClientMetricsServer() = default;

Status ClientMetricsServer::Start(const std::string& listen, const Client* client,
                                  std::unique_ptr<ClientMetricsServer>* out) {
  auto impl = std::make_unique<Impl>();
  RETURN_IF_ERROR(net::MetricsHttpServer::Start(
      listen,
      [client] {
        return RenderClientMetrics(client->Stats(), client->client_id(), client->num_clients());
      },
      &impl->http));
  out->reset(new ClientMetricsServer(std::move(impl)));
  return Status::OK();
}

std::string ClientMetricsServer::address() const {
  return impl_->http->host() + ":" + std::to_string(impl_->http->port());
}

}  // namespace pace
