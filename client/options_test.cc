#include <gtest/gtest.h>

#include <cstdlib>

#include "client/pace.h"

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

}  // namespace
}  // namespace pace
