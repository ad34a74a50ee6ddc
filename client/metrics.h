// A client process's Prometheus metrics (--metrics_listen of pace_mf and
// pace_lda, or any program using client/pace.h): Client::Stats() — staleness
// histogram, reads, cache hits and misses, blocked time per table and per
// process, bytes and batches in and out — served over HTTP at /metrics.
// Every metric and its meaning: docs/operations.md ("Metrics").
#ifndef PACE_CLIENT_METRICS_H_
#define PACE_CLIENT_METRICS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "client/pace.h"
#include "common/status.h"

namespace pace {

// The exposition for one snapshot of a client's stats.
std::string RenderClientMetrics(const ClientStats& stats, ClientId client_id, uint32_t num_clients);

// Serves RenderClientMetrics(client->Stats()) on HOST:PORT until destroyed.
// Thread-safe. The client must outlive it.
class ClientMetricsServer {
 public:
  // `listen` is "HOST:PORT" (port 0: any free port). Errors: InvalidArgument
  // (bad address), IOError (cannot bind).
  static Status Start(const std::string& listen, const Client* client,
                      std::unique_ptr<ClientMetricsServer>* out);
  ~ClientMetricsServer();
  ClientMetricsServer(const ClientMetricsServer&) = delete;
  ClientMetricsServer& operator=(const ClientMetricsServer&) = delete;

  // Where it listens ("127.0.0.1:PORT"; the bound port when asked for 0).
  std::string address() const;

 private:
  struct Impl;
  explicit ClientMetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pace

#endif  // PACE_CLIENT_METRICS_H_
