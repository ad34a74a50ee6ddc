#include <glog/logging.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "client/pace.h"
#include "common/scoped_temp_dir.h"

namespace pace {
namespace {

TEST(ParseServersTest, ParsesList) {
  ClientOptions o;
  ASSERT_TRUE(ParseServers("127.0.0.1:7100, node3:7101", &o).ok());
  ASSERT_EQ(o.servers.size(), 2u);
  EXPECT_EQ(o.servers[0], "127.0.0.1:7100");
  EXPECT_EQ(o.servers[1], "node3:7101");
}

TEST(ParseServersTest, RejectsBadEntries) {
  ClientOptions o;
  o.servers = {"keep:1"};
  EXPECT_EQ(ParseServers("127.0.0.1", &o).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseServers("a:1,,b:2", &o).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseServers("a:99999", &o).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseServers("a:0", &o).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseServers("", &o).code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(o.servers.size(), 1u);  // unchanged on error
}

TEST(ClientIdFromEnvironmentTest, ReadsLaunchers) {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
                        "SLURM_PROCID", "SLURM_NTASKS"}) {
    unsetenv(v);
  }
  ClientOptions o;
  EXPECT_FALSE(ClientIdFromEnvironment(&o));
  EXPECT_EQ(o.client_id, 0u);
  EXPECT_EQ(o.num_clients, 1u);

  setenv("SLURM_PROCID", "2", 1);
  setenv("SLURM_NTASKS", "4", 1);
  EXPECT_TRUE(ClientIdFromEnvironment(&o));
  EXPECT_EQ(o.client_id, 2u);
  EXPECT_EQ(o.num_clients, 4u);

  setenv("PMI_RANK", "1", 1);
  setenv("PMI_SIZE", "3", 1);
  EXPECT_TRUE(ClientIdFromEnvironment(&o));  // PMI wins over SLURM
  EXPECT_EQ(o.client_id, 1u);
  EXPECT_EQ(o.num_clients, 3u);

  setenv("OMPI_COMM_WORLD_RANK", "5", 1);  // rank >= size: ignored
  setenv("OMPI_COMM_WORLD_SIZE", "5", 1);
  EXPECT_TRUE(ClientIdFromEnvironment(&o));
  EXPECT_EQ(o.client_id, 1u);

  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  EXPECT_TRUE(ClientIdFromEnvironment(&o));
  EXPECT_EQ(o.client_id, 0u);
  EXPECT_EQ(o.num_clients, 5u);
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
                        "SLURM_PROCID", "SLURM_NTASKS"}) {
    unsetenv(v);
  }
}

TEST(ResolveMemoryBudgetTest, NoBudgetKeepsTheDefaults) {
  ClientOptions o;
  ResolveMemoryBudget(&o);
  EXPECT_EQ(o.cache_mb, 1024u);
  EXPECT_EQ(o.open_delta_mb, 256u);
  EXPECT_EQ(o.unacked_mb, 256u);
  EXPECT_EQ(o.embedded.block_cache_mb, 256u);
  EXPECT_EQ(o.embedded.write_buffer_mb, 16u);
  EXPECT_EQ(o.embedded.row_cache_mb, 512u);
}

TEST(ResolveMemoryBudgetTest, EmbeddedSplitsTheProcessBudget) {
  ClientOptions o;
  o.memory_mb = 1000;
  ResolveMemoryBudget(&o);
  EXPECT_EQ(o.embedded.memory_mb, 400u);  // 40% to the in-process shard
  EXPECT_EQ(o.cache_mb, 300u);            // 50/20/10% of the client's 600
  EXPECT_EQ(o.open_delta_mb, 120u);
  EXPECT_EQ(o.unacked_mb, 60u);
  EXPECT_EQ(o.embedded.block_cache_mb, 120u);  // 30/10/60% of the shard's 400
  EXPECT_EQ(o.embedded.write_buffer_mb, 6u);   // 40 over 3 memtables x 2 (overshoot)
  EXPECT_EQ(o.embedded.row_cache_mb, 240u);
  // Every component together, with the reserves for batches in flight (3x
  // unacked) and memtables taking a group beyond their size (2x), stays
  // within the budget.
  EXPECT_LE(o.cache_mb + o.open_delta_mb + 3 * o.unacked_mb + o.embedded.block_cache_mb +
                2 * 3 * o.embedded.write_buffer_mb + o.embedded.row_cache_mb,
            1000u);
  ClientOptions again = o;
  ResolveMemoryBudget(&again);  // idempotent
  EXPECT_EQ(again.cache_mb, o.cache_mb);
  EXPECT_EQ(again.embedded.write_buffer_mb, o.embedded.write_buffer_mb);
}

TEST(ResolveMemoryBudgetTest, ExplicitComponentsOverrideTheirShare) {
  ClientOptions o;
  o.memory_mb = 1000;
  o.cache_mb = 10;
  o.embedded.memory_mb = 100;
  o.embedded.block_cache_mb = 7;
  ResolveMemoryBudget(&o);
  EXPECT_EQ(o.cache_mb, 10u);
  EXPECT_EQ(o.open_delta_mb, 180u);  // 20% of 1000 - 100
  EXPECT_EQ(o.embedded.block_cache_mb, 7u);
  EXPECT_EQ(o.embedded.row_cache_mb, 60u);  // 60% of the shard's 100
}

TEST(ResolveMemoryBudgetTest, RemoteClientGetsTheWholeBudget) {
  ClientOptions o;
  o.servers = {"127.0.0.1:7100"};
  o.memory_mb = 128;
  ResolveMemoryBudget(&o);
  EXPECT_EQ(o.cache_mb, 64u);
  EXPECT_EQ(o.open_delta_mb, 25u);
  EXPECT_EQ(o.unacked_mb, 12u);
}

TEST(ClientOptionsTest, MinLogLevelSetsGlogsLevelAtOpenAndIsRangeChecked) {
  const int before = FLAGS_minloglevel;
  ScopedTempDir dir;
  ClientOptions o;
  o.data_dir = dir.path() + "/store";
  o.min_log_level = 7;
  std::unique_ptr<Client> client;
  Status s = Client::Open(o, &client);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("min_log_level"), std::string::npos) << s.ToString();
  EXPECT_EQ(FLAGS_minloglevel, before);  // a refused value changes nothing
  o.min_log_level = 2;
  ASSERT_TRUE(Client::Open(o, &client).ok());
  EXPECT_EQ(FLAGS_minloglevel, 2);
  client.reset();
  o.min_log_level = -1;  // the default leaves glog as it is
  ASSERT_TRUE(Client::Open(o, &client).ok());
  EXPECT_EQ(FLAGS_minloglevel, 2);
  client.reset();
  FLAGS_minloglevel = before;
}

}  // namespace
}  // namespace pace
