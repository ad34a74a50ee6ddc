// An authenticated but hostile peer against a real `paced` while a good
// client (pace_client_proc) trains: a 1M-row Read whose reply cannot fit a
// frame is refused before any work and the session keeps serving; a flood of
// parked Reads is capped by bytes per session; subscriptions are capped per
// session. The good client finishes with exact totals and the shard's VmHWM
// stays under a stated bound.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/read_file.h"
#include "net/remote_shard.h"
#include "tests/testing/paced_cluster.h"
#include "tests/testing/subprocess.h"

namespace pace {
namespace {

using namespace std::chrono_literals;
using testing::StartPaced;
using testing::Subprocess;
using testing::TempDir;

using testing::Totals;

::testing::AssertionResult Collect(Subprocess* p, const char* prefix, Totals* totals) {
  return testing::ReadTotals(p, prefix, totals, 120000);
}

std::vector<std::string> ClientArgs(uint16_t port, const std::string& mode, int clocks) {
  return testing::ClientProcArgs("127.0.0.1:" + std::to_string(port), 0, 1, mode,
                                 {"--clocks=" + std::to_string(clocks), "--ops=100", "--rows=200",
                                  "--workers=2", "--sleep_us=1000"});
}

// The bound this test states for the shard's peak RSS: its caches (8 + 8
// MiB), memtables (1 MiB x 3), 64 MiB of parked reads, send queues and
// RocksDB's own, with room to spare. Before the caps a 1M-row Read of this
// table alone assembled a 429 MB reply.
constexpr uint64_t kHwmBoundKb = 256 << 10;

TEST(PacedHostileTest, BigReadAndParkedFloodAreBounded) {
  TempDir dir;
  const std::string data = dir.path() + "/shard0";
  Subprocess paced;
  uint16_t port = 0;
  ASSERT_TRUE(StartPaced(&paced, data, 0, 1, 1,
                         {"--write_buffer_mb=1", "--block_cache_mb=8", "--row_cache_mb=8"}, &port)
                  .ok());
  Subprocess good;
  const std::string good_log = dir.path() + "/client.log";
  ASSERT_TRUE(good.Start(ClientArgs(port, "run", 400), good_log).ok());

  // The hostile peer: an observer (it holds the token when there is one).
  net::RemoteShardOptions o;
  o.port = port;
  o.hello.role = net::Hello::kObserver;
  o.hello.client_id = 7;
  o.connect_timeout_ms = 10000;
  std::unique_ptr<net::RemoteShard> peer;
  ASSERT_TRUE(net::RemoteShard::Connect(
                  o, [](net::Message) {}, nullptr, &peer)
                  .ok());
  TableSchema big;
  big.name = "hostile_big";
  big.type = ElementType::kF32;
  big.width = 100;  // 401-byte values
  auto created = peer->CreateTable(big);
  ASSERT_EQ(created.wait_for(20s), std::future_status::ready);
  StatusOr<TableSchema> table = created.get();
  ASSERT_TRUE(table.ok()) << table.status().ToString();

  // 1. A Read of 1M rows: refused before any work, the session still serves.
  std::vector<uint64_t> rows(1 << 20);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  const auto t0 = std::chrono::steady_clock::now();
  auto huge = peer->Read(table->id, rows);
  ASSERT_EQ(huge.wait_for(20s), std::future_status::ready);
  StatusOr<net::ReadReply> refused = huge.get();
  const double refuse_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("over the frame limit"), std::string::npos)
      << refused.status().ToString();
  std::printf("1M-row Read refused in %.1f ms: %s\n", refuse_ms,
              refused.status().ToString().c_str());
  auto small = peer->Read(table->id, {1, 2, 3});
  ASSERT_EQ(small.wait_for(20s), std::future_status::ready);
  StatusOr<net::ReadReply> answered = small.get();
  ASSERT_TRUE(answered.ok()) << answered.status().ToString();
  EXPECT_EQ(answered->rows.size(), 3u);

  // 2. A flood of parked Reads (each waits for a clock the job never
  // reaches): 2000 x 10k rows = 160 MB of row ids, refused past 64 MiB.
  std::vector<uint64_t> park_rows(10000);
  for (size_t i = 0; i < park_rows.size(); ++i) park_rows[i] = i;
  std::vector<std::future<StatusOr<net::ReadReply>>> parked;
  for (int i = 0; i < 2000; ++i) parked.push_back(peer->Read(table->id, park_rows, 1000000000));
  // Refusals come in order: the last one is answered once all are decided.
  ASSERT_EQ(parked.back().wait_for(30s), std::future_status::ready);
  int exhausted = 0;
  for (auto& f : parked) {
    if (f.wait_for(0s) != std::future_status::ready) continue;
    StatusOr<net::ReadReply> r = f.get();
    if (!r.ok() && r.status().code() == StatusCode::kResourceExhausted) ++exhausted;
  }
  std::printf("parked-read flood: %d of 2000 refused (ResourceExhausted)\n", exhausted);
  EXPECT_GT(exhausted, 1000);
  EXPECT_LT(exhausted, 2000);

  // 3. The good client trains through all of it; totals exact.
  Totals expected, stored;
  ASSERT_TRUE(Collect(&good, "TOTAL", &expected)) << ReadFile(good_log);
  int st = 0;
  ASSERT_TRUE(good.Wait(30000, &st).ok());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  Subprocess verify;
  ASSERT_TRUE(verify.Start(ClientArgs(port, "verify", 1), dir.path() + "/verify.log").ok());
  ASSERT_TRUE(Collect(&verify, "ROW", &stored));
  EXPECT_EQ(stored, expected);

  const uint64_t hwm = testing::ProcStatusKb(paced.pid(), "VmHWM");
  std::printf("paced VmHWM %llu KiB (bound %llu KiB)\n", static_cast<unsigned long long>(hwm),
              static_cast<unsigned long long>(kHwmBoundKb));
  EXPECT_GT(hwm, 0u);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // Not in sanitizer builds: their shadow memory and quarantine are not the
  // shard's (338 MiB under ASan).
  EXPECT_LT(hwm, kHwmBoundKb);
#endif
  peer->Close();
  paced.Signal(SIGTERM);
  ASSERT_TRUE(paced.Wait(30000, &st).ok());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

}  // namespace
}  // namespace pace
