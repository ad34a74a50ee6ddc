#include "tests/testing/paced_cluster.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <sstream>

namespace pace::testing {

Status PacedCluster::Start(const std::string& base, uint32_t num_shards, uint32_t num_clients,
                           const std::vector<std::string>& extra) {
  this->num_clients = num_clients;
  for (uint32_t k = 0; k < num_shards; ++k) {
    dirs.push_back(base + "/shard" + std::to_string(k));
    shards.push_back(std::make_unique<Subprocess>());
    ports.push_back(0);
    RETURN_IF_ERROR(
        StartPaced(shards[k].get(), dirs[k], k, num_shards, num_clients, extra, &ports[k]));
  }
  return Status::OK();
}

Status PacedCluster::Restart(uint32_t k, const std::vector<std::string>& extra) {
  shards[k]->Kill();
  auto restarted = std::make_unique<Subprocess>();
  uint16_t port = 0;
  RETURN_IF_ERROR(StartPaced(restarted.get(), dirs[k], k, static_cast<uint32_t>(shards.size()),
                             num_clients, extra, &port, ports[k]));
  shards[k] = std::move(restarted);
  return Status::OK();
}

std::vector<std::string> ClientProcArgs(const std::string& servers, uint32_t id,
                                        uint32_t num_clients, const std::string& mode,
                                        const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {BinaryDir() + "/pace_client_proc", "--servers=" + servers,
                                   "--client_id=" + std::to_string(id),
                                   "--num_clients=" + std::to_string(num_clients),
                                   "--mode=" + mode};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

std::string PacedCluster::Servers() const {
  std::string s;
  for (uint16_t p : ports)
    s += (s.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(p);
  return s;
}

::testing::AssertionResult ReadTotals(Subprocess* p, const char* prefix, Totals* totals,
                                      int timeout_ms) {
  std::string line;
  for (;;) {
    Status s = p->ReadLine(&line, timeout_ms);
    if (!s.ok()) return ::testing::AssertionFailure() << s.ToString();
    if (line == "OK") return ::testing::AssertionSuccess();
    if (line.rfind("FAIL", 0) == 0) return ::testing::AssertionFailure() << line;
    std::istringstream in(line);
    std::string tag, table;
    uint64_t row;
    int64_t v;
    if (in >> tag >> table >> row >> v && tag == prefix) (*totals)[{table, row}] += v;
  }
}

void CollectTotals(Subprocess* p, const char* prefix, Totals* totals, const std::string& who,
                   int64_t* resent) {
  std::string line;
  for (;;) {
    Status s = p->ReadLine(&line, 120000);
    ASSERT_TRUE(s.ok()) << who << ": " << s.ToString();
    if (line == "OK") break;
    ASSERT_NE(line.rfind("FAIL", 0), 0u) << who << ": " << line;
    if (line.rfind("STATS ", 0) == 0) {
      size_t at = line.find("batches_resent=");
      if (resent != nullptr && at != std::string::npos) *resent += std::stoll(line.substr(at + 15));
      continue;
    }
    std::istringstream in(line);
    std::string tag, table;
    uint64_t row;
    int64_t value;
    if (in >> tag >> table >> row >> value && tag == prefix) (*totals)[{table, row}] += value;
  }
  int status = 0;
  ASSERT_TRUE(p->Wait(30000, &status).ok()) << who;
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << who << " status " << status;
}

void ExpectSameTotals(const Totals& stored, const Totals& expected) {
  ASSERT_EQ(stored.size(), expected.size());
  int64_t sum = 0;
  for (const auto& [key, value] : expected) {
    auto it = stored.find(key);
    ASSERT_NE(it, stored.end()) << key.first << " row " << key.second << " missing";
    EXPECT_EQ(it->second, value) << key.first << " row " << key.second;
    sum += value;
  }
  EXPECT_GT(sum, 0);
}

}  // namespace pace::testing
