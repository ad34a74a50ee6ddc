// Prometheus metrics over HTTP: a minimal HTTP/1.1 server (Boost.Beast) that
// answers GET /metrics (and GET /) with the text exposition format, and a
// builder for that format. Used by paced (server/metrics.h) and by client
// processes (client/metrics.h).
//
// Format: https://prometheus.io/docs/instrumenting/exposition_formats/ —
// "# HELP name text", "# TYPE name counter|gauge|histogram", then samples
// `name{label="value",...} number`, each family's samples together, "\n"
// line ends. docs/operations.md lists every metric PaceDB exports.
#ifndef PACE_NET_METRICS_HTTP_H_
#define PACE_NET_METRICS_HTTP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace pace::net {

// Builds one exposition. Not thread-safe (one per scrape).
class PromText {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  // Starts a family: its HELP and TYPE lines. `type` is "counter", "gauge"
  // or "histogram". Samples added next belong to it.
  void Family(const std::string& name, const char* type, const std::string& help);
  // One sample line `name{labels} value`; `name` is the family's name, or
  // for histograms the family name plus _bucket, _sum or _count.
  void Sample(const std::string& name, const Labels& labels, double value);
  void Sample(const std::string& name, double value) { Sample(name, {}, value); }
  // A whole histogram sample set from per-bucket (not cumulative) counts:
  // bucket i counts observations == upper_bounds[i] (integer-valued data);
  // `overflow` observations above the last bound go only into +Inf.
  void Histogram(const std::string& name, const Labels& labels,
                 const std::vector<double>& upper_bounds, const std::vector<uint64_t>& counts,
                 uint64_t overflow, double sum);

  const std::string& text() const { return text_; }
  std::string Take() { return std::move(text_); }

 private:
  std::string text_;
};

// Escapes a label value (backslash, double quote, newline).
std::string EscapeLabelValue(const std::string& v);

// Serves `render()` to every GET /metrics or GET / (other paths: 404, other
// methods: 405). One I/O thread of its own; render runs on it, one scrape at
// a time. Thread-safe: Start/Stop from any one owner thread.
class MetricsHttpServer {
 public:
  using Render = std::function<std::string()>;

  // Listens on host:port (port 0: any free port). Errors: InvalidArgument
  // (bad host), IOError (cannot bind, e.g. address in use).
  static Status Start(const std::string& host, uint16_t port, Render render,
                      std::unique_ptr<MetricsHttpServer>* out);
  // "HOST:PORT" in one string, as the --metrics_listen flags take it.
  static Status Start(const std::string& host_port, Render render,
                      std::unique_ptr<MetricsHttpServer>* out);
  // Stops accepting, closes connections and joins the thread.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The bound port.
  uint16_t port() const;
  const std::string& host() const;

 private:
  struct Impl;
  explicit MetricsHttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pace::net

#endif  // PACE_NET_METRICS_HTTP_H_
