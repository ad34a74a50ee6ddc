// The memory budget's slow test: >= 4 GiB of table (8M rows x 128 f32) on a paced
// shard with --memory_mb=64, written and then read and updated at random by
// two client processes (three workers each) with --memory_mb=128 for three
// clocks. Every process's VmHWM stays below 512 MiB and the integer control
// rows are exact. Prints the figures (BENCHMARKS.md, "Memory bounds").
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/memory/memory_test_util.h"
#include "tests/testing/subprocess.h"

namespace pace::testing {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

uint64_t DirBytes(const std::string& dir) {
  std::string cmd = "du -sb " + dir + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return 0;
  unsigned long long n = 0;
  if (std::fscanf(p, "%llu", &n) != 1) n = 0;
  pclose(p);
  return n;
}

TEST(MemoryScaleTest, ShardAndClientsStayWithinTheirBudgetsOverA4GiBTable) {
  TempDir dir;
  constexpr int kClients = 2;
  Subprocess paced;
  uint16_t port = 0;
  ASSERT_TRUE(
      StartPaced(&paced, dir.path() + "/shard", 0, 1, kClients, {"--memory_mb=64"}, &port).ok());
  const std::string servers = "--servers=127.0.0.1:" + std::to_string(port);
  std::vector<std::unique_ptr<Subprocess>> clients;
  for (int k = 0; k < kClients; ++k) {
    clients.push_back(std::make_unique<Subprocess>());
    ASSERT_TRUE(clients.back()
                    ->Start({BinaryDir() + "/pace_memory_workload", servers,
                             "--client_id=" + std::to_string(k),
                             "--num_clients=" + std::to_string(kClients), "--memory_mb=128",
                             "--rows=8388608", "--width=128", "--fill_rows_per_clock=65536",
                             "--workers=3", "--clocks=3", "--ops_per_clock=20000"},
                            dir.path() + "/client" + std::to_string(k) + ".log")
                    .ok());
  }
  uint64_t paced_peak = 0;
  for (int k = 0; k < kClients; ++k) {
    std::map<std::string, std::string> kv;
    CollectKeyValues(clients[k].get(), ("client " + std::to_string(k)).c_str(), 3000000, &kv);
    int status = 0;
    ASSERT_TRUE(clients[k]->Wait(60000, &status).ok());
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "client " << k;
    EXPECT_EQ(kv["control_exact"], "true") << "client " << k;
    const uint64_t peak = U64(kv, "peak_rss_bytes");
    EXPECT_GT(peak, 0u);
    EXPECT_LT(peak, 512 * kMiB) << "client " << k << " peak RSS " << peak / kMiB << " MiB";
  }
  paced_peak = PeakRssOf(paced.pid());
  const uint64_t disk = DirBytes(dir.path() + "/shard");
  std::printf("paced peak_rss_bytes=%llu (%.0f MiB), store %.2f GiB on disk\n",
              static_cast<unsigned long long>(paced_peak), static_cast<double>(paced_peak) / kMiB,
              static_cast<double>(disk) / (1024.0 * kMiB));
  EXPECT_GT(paced_peak, 0u);
  EXPECT_LT(paced_peak, 512 * kMiB) << "paced peak RSS " << paced_peak / kMiB << " MiB";
  EXPECT_GE(disk, 4096 * kMiB);
  paced.Signal(SIGTERM);
  int status = 0;
  EXPECT_TRUE(paced.Wait(120000, &status).ok());
}

}  // namespace
}  // namespace pace::testing
