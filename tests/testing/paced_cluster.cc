#include "tests/testing/paced_cluster.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <sstream>

namespace pace::testing {

Status PacedCluster::Start(const std::string& base, uint32_t num_shards, uint32_t num_clients,
                           const std::vector<std::string>& extra) {
  for (uint32_t k = 0; k < num_shards; ++k) {
    dirs.push_back(base + "/shard" + std::to_string(k));
    shards.push_back(std::make_unique<Subprocess>());
    ports.push_back(0);
    RETURN_IF_ERROR(
        StartPaced(shards[k].get(), dirs[k], k, num_shards, num_clients, extra, &ports[k]));
  }
  return Status::OK();
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
