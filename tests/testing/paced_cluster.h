// Test helpers for multi-process jobs of pace_client_proc clients against
// real paced shards: start the shards on dynamic ports, name them for
// --servers, and collect what the clients print. Uses GoogleTest assertions
// (for tests only). Not thread-safe.
#ifndef PACE_TESTS_TESTING_PACED_CLUSTER_H_
#define PACE_TESTS_TESTING_PACED_CLUSTER_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "tests/testing/subprocess.h"

namespace pace::testing {

// (table, row) -> value, as pace_client_proc prints them.
using Totals = std::map<std::pair<std::string, uint64_t>, int64_t>;

// One paced per shard, index = shard id; their data dirs are BASE/shardK.
struct PacedCluster {
  std::vector<std::string> dirs;
  std::vector<std::unique_ptr<Subprocess>> shards;
  std::vector<uint16_t> ports;

  // `extra`: flags for every shard (StartPaced).
  Status Start(const std::string& base, uint32_t num_shards, uint32_t num_clients,
               const std::vector<std::string>& extra = {});
  // "127.0.0.1:P0,127.0.0.1:P1,...".
  std::string Servers() const;
  // SIGKILLs shard k (every client connection to it is lost) and restarts it
  // on its data dir and port with `extra` flags.
  Status Restart(uint32_t k, const std::vector<std::string>& extra = {});

  uint32_t num_clients = 0;  // as given to Start
};

// pace_client_proc's command line: client `id` of `num_clients`, against
// `servers` ("host:port,..."), in `mode` ("run" or "verify"), then `extra`.
std::vector<std::string> ClientProcArgs(const std::string& servers, uint32_t id,
                                        uint32_t num_clients, const std::string& mode,
                                        const std::vector<std::string>& extra = {});

// Reads a pace_client_proc's stdout until "OK", adding its `prefix` lines
// ("TOTAL table row value" or "ROW ...") to *totals; a FAIL line, EOF or no
// line for `timeout_ms` is the failure returned. Does not wait for the exit.
::testing::AssertionResult ReadTotals(Subprocess* p, const char* prefix, Totals* totals,
                                      int timeout_ms);

// Reads a pace_client_proc's stdout until "OK", adding its `prefix` lines
// ("TOTAL table row value" or "ROW ...") to *totals and the batches_resent of
// its STATS lines to *resent (if not null); a FAIL line, EOF or a timeout
// fails the test. Then expects exit 0. `who` names the process in messages.
void CollectTotals(Subprocess* p, const char* prefix, Totals* totals, const std::string& who,
                   int64_t* resent = nullptr);

// Expects `stored` (a verifier's ROW lines) to equal `expected` row for row,
// and the totals not to be all zero.
void ExpectSameTotals(const Totals& stored, const Totals& expected);

}  // namespace pace::testing

#endif  // PACE_TESTS_TESTING_PACED_CLUSTER_H_
