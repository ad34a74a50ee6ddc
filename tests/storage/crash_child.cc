// Child process of storage_crash_test: opens the store and applies the
// workload's steps in order, forever (until SIGKILLed). After each
// ApplyBatch RETURNS OK it writes the step number (8 bytes, native int64) to
// the ack file descriptor, so the parent knows exactly which batches were
// acknowledged.
//
// Usage: storage_crash_child --dir=D --seed=S --ack_fd=N [--sync=1]
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/storage/crash_workload.h"

namespace {

bool Flag(const char* arg, const char* name, std::string* value) {
  size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "storage_crash_child: %s\n", msg.c_str());
  std::exit(2);
}

void WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) Die(std::string("ack write failed: ") + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, seed_s, fd_s, sync_s = "0";
  for (int i = 1; i < argc; ++i) {
    if (!Flag(argv[i], "--dir", &dir) && !Flag(argv[i], "--seed", &seed_s) &&
        !Flag(argv[i], "--ack_fd", &fd_s) && !Flag(argv[i], "--sync", &sync_s)) {
      Die(std::string("unknown argument ") + argv[i]);
    }
  }
  if (dir.empty() || seed_s.empty() || fd_s.empty()) Die("need --dir, --seed and --ack_fd");
  const uint64_t seed = std::strtoull(seed_s.c_str(), nullptr, 10);
  const int ack_fd = std::atoi(fd_s.c_str());

  using namespace pace;
  std::unique_ptr<ShardStore> store;
  Status st = ShardStore::Open(crash_test::StoreOptions(sync_s == "1"), dir, &store);
  if (!st.ok()) Die("open: " + st.ToString());
  crash_test::Tables tables;
  st = crash_test::SetUpTables(store.get(), &tables);
  if (!st.ok()) Die("tables: " + st.ToString());

  // Resume after the last applied step: client 0 runs at most one ahead.
  const ClockT a0 = store->AppliedClock(0);
  const ClockT a1 = store->AppliedClock(1);
  if (a0 != a1 && a0 != a1 + 1) Die("inconsistent applied clocks");
  crash_test::Batch batch;
  for (int64_t step = a0 + a1; step < (int64_t{1} << 40); ++step) {
    crash_test::MakeBatch(seed, step, tables, &batch);
    bool duplicate = false;
    st = store->ApplyBatch(batch.client, batch.clock, batch.deltas, &duplicate);
    if (!st.ok()) Die("step " + std::to_string(step) + ": " + st.ToString());
    if (duplicate) Die("step " + std::to_string(step) + " reported as a duplicate");
    WriteAll(ack_fd, &step, sizeof(step));
    // Rows the store is not asked for are changed without being read
    // (delta-only rows written back as merge operands); a read makes a row
    // whole again. Both kinds are pending when the kill comes.
    if (step % 4 == 0) {
      std::vector<uint64_t> rows;
      for (uint64_t r = step % 7; r < crash_test::kRows; r += 7) rows.push_back(r);
      std::vector<std::string> values;
      st = store->MultiGet(tables.dense, rows, &values);
      if (!st.ok()) Die("read at step " + std::to_string(step) + ": " + st.ToString());
    }
  }
  return 0;
}
