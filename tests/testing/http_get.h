// A minimal HTTP/1.1 GET over loopback for tests that scrape a process's
// /metrics endpoint (paced --metrics_listen, pace_mf --metrics_listen).
#ifndef PACE_TESTS_TESTING_HTTP_GET_H_
#define PACE_TESTS_TESTING_HTTP_GET_H_

#include <cstdint>
#include <string>

namespace pace::testing {

// GET http://127.0.0.1:port/path (Connection: close, 10 s receive timeout).
// Returns "" and fills *status, *headers (the status line and headers) and
// *body; otherwise returns what failed.
std::string HttpGet(uint16_t port, const std::string& path, int* status, std::string* headers,
                    std::string* body);

// The value of the sample `series` (a metric name with its labels exactly as
// printed, e.g. `pace_shard_memory_bytes{component="block_cache"}`) in a
// Prometheus text `body`; false if no line holds it.
bool PromSample(const std::string& body, const std::string& series, double* value);

}  // namespace pace::testing

#endif  // PACE_TESTS_TESTING_HTTP_GET_H_
