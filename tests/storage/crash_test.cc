// Crash test with real processes: a child (storage_crash_child) applies the
// deterministic workload of crash_workload.h and acknowledges each batch
// after ApplyBatch returns; the parent SIGKILLs it at random moments, reopens
// the store and checks that it holds exactly the acknowledged batches plus at
// most the one that was in flight, applied whole.
//
// Most rounds use the default sync=false: a process kill (unlike power loss
// or a kernel crash) cannot lose what RocksDB already handed to the kernel
// with write(2), and the WAL record of a batch is written before Write()
// returns, so acknowledged batches survive without fsync. The last rounds use
// sync=true to cover that path too.
//
// PACE_CRASH_KILLS (default 20) sets the number of kills; PACE_CRASH_SEED the
// workload seed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "storage/testing/storage_test_util.h"
#include "tests/storage/crash_workload.h"

namespace pace {
namespace crash_test {
namespace {

int EnvInt(const char* name, int def) {
  const char* v = std::getenv(name);
  return v != nullptr && *v ? std::atoi(v) : def;
}

// A running child with the read end of its ack pipe.
struct Child {
  pid_t pid = -1;
  int ack_fd = -1;
};

Child Spawn(const std::string& dir, uint64_t seed, bool sync) {
  int fds[2];
  Child c;
  if (::pipe2(fds, O_CLOEXEC) != 0) return c;
  // The child's end keeps a fixed number, free of O_CLOEXEC.
  constexpr int kChildAckFd = 3;
  std::vector<std::string> args = {
      PACE_CRASH_CHILD, "--dir=" + dir, "--seed=" + std::to_string(seed),
      "--ack_fd=" + std::to_string(kChildAckFd), std::string("--sync=") + (sync ? "1" : "0")};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::dup2(fds[1], kChildAckFd) < 0) ::_exit(126);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return c;
  }
  c.pid = pid;
  c.ack_fd = fds[0];
  return c;
}

// Reads acks until `want` more arrived, EOF, or the deadline. Returns false
// on EOF (the child died on its own).
bool ReadAcks(int fd, int want, int timeout_ms, std::vector<int64_t>* acks) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  size_t target = acks->size() + static_cast<size_t>(want);
  while (acks->size() < target) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
    if (left <= 0) return true;
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return true;
    int64_t step;
    ssize_t n = ::read(fd, &step, sizeof(step));
    if (n == 0) return false;
    if (n < 0 && errno == EINTR) continue;
    if (n != sizeof(step)) return false;  // acks are 8-byte atomic pipe writes
    acks->push_back(step);
  }
  return true;
}

void DrainAcks(int fd, std::vector<int64_t>* acks) {
  int64_t step;
  while (::read(fd, &step, sizeof(step)) == sizeof(step)) acks->push_back(step);
}

TEST(StorageCrashTest, KilledWriterLosesNothingAcknowledged) {
  const int kills = EnvInt("PACE_CRASH_KILLS", 20);
  const uint64_t seed = static_cast<uint64_t>(EnvInt("PACE_CRASH_SEED", 7));
  testing_util::ScopedTempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  const std::string dir = tmp.Sub("store");
  std::mt19937 rng(static_cast<uint32_t>(seed));

  Tables tables;
  {
    std::unique_ptr<ShardStore> store;
    ASSERT_TRUE(ShardStore::Open(StoreOptions(false), dir, &store).ok());
    ASSERT_TRUE(SetUpTables(store.get(), &tables).ok());
  }
  Model model(seed, tables);
  int64_t applied_steps = 0;  // steps in the store, as of the last check
  int in_flight_applied = 0;
  size_t total_acks = 0;
  uint64_t replayed = 0;  // clock log records replayed by the restarts
  int restarts_with_replay = 0;

  for (int round = 0; round < kills; ++round) {
    const bool sync = round >= kills - 2;
    SCOPED_TRACE("round " + std::to_string(round) + (sync ? " (sync)" : ""));
    Child child = Spawn(dir, seed, sync);
    ASSERT_GT(child.pid, 0) << "fork/pipe failed: " << std::strerror(errno);
    std::vector<int64_t> acks;
    bool alive = true;
    if (rng() % 5 == 0) {
      // Kill at a random moment from the start: during open/recovery or the
      // first batches.
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 60000));
    } else {
      // Kill after a random number of acknowledged batches plus a random
      // delay, so the kill often lands inside a write.
      alive = ReadAcks(child.ack_fd, 1 + static_cast<int>(rng() % 40), 20000, &acks);
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
    }
    ::kill(child.pid, SIGKILL);
    int wstatus = 0;
    ASSERT_EQ(::waitpid(child.pid, &wstatus, 0), child.pid);
    DrainAcks(child.ack_fd, &acks);
    ::close(child.ack_fd);
    ASSERT_TRUE(alive && WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
        << "the child exited on its own (status " << wstatus << "); see its stderr above";
    total_acks += acks.size();

    // Acks are consecutive steps continuing from what the store held.
    for (size_t i = 0; i < acks.size(); ++i) {
      ASSERT_EQ(acks[i], applied_steps + static_cast<int64_t>(i)) << "ack " << i;
    }
    const int64_t acknowledged = applied_steps + static_cast<int64_t>(acks.size());

    std::unique_ptr<ShardStore> store;
    Status st = ShardStore::Open(StoreOptions(false), dir, &store);
    ASSERT_TRUE(st.ok()) << st.ToString();
    const uint64_t r = store->data_path_stats().replayed_records;
    replayed += r;
    if (r > 0) ++restarts_with_replay;
    const ClockT a0 = store->AppliedClock(0);
    const ClockT a1 = store->AppliedClock(1);
    ASSERT_TRUE(a0 == a1 || a0 == a1 + 1) << "applied clocks " << a0 << ", " << a1;
    const int64_t in_store = a0 + a1;
    ASSERT_GE(in_store, acknowledged) << "an acknowledged batch was lost";
    ASSERT_LE(in_store, acknowledged + 1) << "more than the one in-flight batch was applied";
    if (in_store == acknowledged + 1) ++in_flight_applied;
    model.AdvanceTo(in_store);
    st = model.Check(store.get());
    ASSERT_TRUE(st.ok()) << st.ToString() << " (partial batch?)";
    applied_steps = in_store;
  }
  std::printf(
      "crash test: %d kills, %zu acknowledged batches, %lld in store, %d in-flight "
      "batches applied whole; %d restarts replayed %llu clock log records\n",
      kills, total_acks, static_cast<long long>(applied_steps), in_flight_applied,
      restarts_with_replay, static_cast<unsigned long long>(replayed));
  EXPECT_GT(total_acks, static_cast<size_t>(kills));
  // The kills left committed records after the last write-back to replay.
  EXPECT_GT(restarts_with_replay, 0);
}

}  // namespace
}  // namespace crash_test
}  // namespace pace
