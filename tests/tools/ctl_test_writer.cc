// A helper process for pacectl tests: opens a shard store for writing (as a
// running paced would), optionally fills it with the sample tables, applies
// one more batch so the WAL holds unflushed data, prints "ready" and then
// holds the store open until killed.
//
//   ctl_test_writer DATA_DIR NUM_CLIENTS [populate]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "tools/ctl/testing/sample_store.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: ctl_test_writer DATA_DIR NUM_CLIENTS [populate]\n");
    return 1;
  }
  const std::string dir = argv[1];
  const uint32_t num_clients = static_cast<uint32_t>(std::atoi(argv[2]));
  std::unique_ptr<pace::ShardStore> store;
  pace::Status s;
  if (argc > 3 && std::string(argv[3]) == "populate") {
    s = pace::testing::BuildSampleStore(dir, num_clients, &store);
  } else {
    pace::ShardStoreOptions o;
    o.num_clients = num_clients;
    s = pace::ShardStore::Open(o, dir, &store);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "ctl_test_writer: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  while (true) pause();
}
