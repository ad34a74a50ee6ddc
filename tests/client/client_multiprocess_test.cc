// Multi-process client tests over loopback: 2 real `paced` shard servers and
// 3 client processes (pace_client_proc) x 2 workers, on one integer table per
// consistency model. Each client process checks the read rule and
// read-my-writes on every read; the test checks that the stored totals equal
// the exact sum of every process's increments — also when a shard is killed
// with SIGKILL and restarted in the middle of the run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/testing/paced_cluster.h"
#include "tests/testing/subprocess.h"

namespace pace {
namespace {

using testing::StartPaced;
using testing::Subprocess;
using testing::TempDir;

constexpr uint32_t kShards = 2;
constexpr uint32_t kClients = 3;

using testing::Totals;

class MultiProcessTest : public ::testing::Test {
 protected:
  void StartShards() { ASSERT_TRUE(cluster_.Start(dir_.path(), kShards, kClients).ok()); }
  std::string Servers() const { return cluster_.Servers(); }
  std::vector<std::string> Args(uint32_t id, const std::string& mode,
                                const std::vector<std::string>& extra) const {
    return testing::ClientProcArgs(Servers(), id, kClients, mode, extra);
  }
  void Collect(Subprocess* p, const char* prefix, Totals* totals, const std::string& who) {
    testing::CollectTotals(p, prefix, totals, who + " (stderr in " + dir_.path() + ")", &resent_);
  }
  void RunClients(const std::vector<std::string>& extra, Totals* expected,
                  const std::function<void()>& meanwhile = nullptr) {
    std::vector<std::unique_ptr<Subprocess>> clients;
    for (uint32_t id = 0; id < kClients; ++id) {
      clients.push_back(std::make_unique<Subprocess>());
      std::vector<std::string> args = extra;
      args.push_back("--seed=" + std::to_string(id + 11));
      ASSERT_TRUE(clients[id]
                      ->Start(Args(id, "run", args),
                              dir_.path() + "/client" + std::to_string(id) + ".stderr.log")
                      .ok());
    }
    if (meanwhile) {
      // Every client has connected to every shard ("START") before the
      // disturbance, however slowly the processes start (e.g. under TSan).
      for (uint32_t id = 0; id < kClients; ++id) {
        std::string line;
        ASSERT_TRUE(clients[id]->ReadLine(&line, 120000).ok()) << "client " << id;
        ASSERT_EQ(line.rfind("START", 0), 0u) << "client " << id << ": " << line;
      }
      meanwhile();
    }
    for (uint32_t id = 0; id < kClients; ++id) {
      Collect(clients[id].get(), "TOTAL", expected, "client " + std::to_string(id));
      if (HasFatalFailure()) return;
    }
  }
  void Verify(const Totals& expected) {
    Subprocess v;
    ASSERT_TRUE(v.Start(Args(0, "verify", {}), dir_.path() + "/verify.stderr.log").ok());
    Totals stored;
    Collect(&v, "ROW", &stored, "verifier");
    if (HasFatalFailure()) return;
    testing::ExpectSameTotals(stored, expected);
  }

  TempDir dir_;
  testing::PacedCluster cluster_;
  std::vector<std::string>& dirs_ = cluster_.dirs;
  std::vector<std::unique_ptr<Subprocess>>& shards_ = cluster_.shards;
  std::vector<uint16_t>& ports_ = cluster_.ports;
  int64_t resent_ = 0;  // batches re-sent after reconnects, over all clients
};

TEST_F(MultiProcessTest, EveryModelReadRuleReadMyWritesExactTotals) {
  StartShards();
  if (HasFatalFailure()) return;
  Totals expected;
  RunClients({"--workers=2", "--clocks=25", "--ops=30"}, &expected);
  if (HasFatalFailure()) return;
  Verify(expected);
}

TEST_F(MultiProcessTest, ShardKilledAndRestartedMidRunLosesNothing) {
  StartShards();
  if (HasFatalFailure()) return;
  Totals expected;
  RunClients({"--workers=2", "--clocks=60", "--ops=20", "--sleep_us=20000"}, &expected, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    shards_[1]->Signal(SIGKILL);
    int status = 0;
    ASSERT_TRUE(shards_[1]->Wait(10000, &status).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    uint16_t port = 0;
    auto restarted = std::make_unique<Subprocess>();
    ASSERT_TRUE(
        StartPaced(restarted.get(), dirs_[1], 1, kShards, kClients, {}, &port, ports_[1]).ok());
    ASSERT_EQ(port, ports_[1]);
    shards_[1] = std::move(restarted);
  });
  if (HasFatalFailure()) return;
  // Every client lived through the outage (the client logs its reconnects).
  for (uint32_t id = 0; id < kClients; ++id) {
    std::ifstream log(dir_.path() + "/client" + std::to_string(id) + ".stderr.log");
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("reconnected"), std::string::npos)
        << "client " << id << " never reconnected: the kill missed its run";
  }
  RecordProperty("batches_resent", std::to_string(resent_));
  Verify(expected);
}

}  // namespace
}  // namespace pace
