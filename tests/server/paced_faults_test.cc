// Faults that must not lose work or kill a shard, with real processes: a
// `paced` whose data dir is on a small tmpfs that fills up while a client
// (pace_client_proc) trains, and a `paced` whose file descriptors run out.
// Checked: no abort (exit status, "Assertion" in its log), the client hears
// "shard 0: no space left on device (data dir ...)" and keeps its batches, the
// shard recovers by itself once the cause is gone, and the stored totals are
// exactly the sum of every acknowledged increment.
//
// The tmpfs needs CAP_SYS_ADMIN (root in the test's environment); where
// mounting is not permitted the disk-full tests are skipped with the reason.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/read_file.h"
#include "common/sanitizers.h"
#include "tests/testing/paced_cluster.h"
#include "tests/testing/subprocess.h"

namespace pace {
namespace {

using namespace std::chrono_literals;
using testing::BinaryDir;
using testing::Subprocess;
using testing::TempDir;

// (table, row) -> value.
using testing::Totals;

#if !defined(PACE_TSAN) && !defined(PACE_ASAN)
// Clocks of a training client: enough that it still trains when the fault
// comes and after the shard recovers.
constexpr int kClocks = 800;
#else
// A sanitizer build runs each clock ~30x slower: the same faults, and the
// same recovery after them, in fewer clocks (a TSan run beside another test
// took over the 2 minutes the client's TOTAL had with 800).
constexpr int kClocks = 300;
#endif
// How long a client has to print its totals once the fault is gone: far
// above its time to train (a hang still fails, and says where).
constexpr int kTotalsTimeoutMs = 300000;

// Waits up to `timeout` for `needle` to appear in the file at `path`.
bool WaitForText(const std::string& path, const std::string& needle,
                 std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ReadFile(path).find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

// Prints the first line of the file at `path` holding `needle` (for the
// test's log: the figures and messages a reader wants to see).
void PrintLineWith(const std::string& path, const std::string& needle) {
  const std::string text = ReadFile(path);
  const size_t at = text.find(needle);
  if (at == std::string::npos) return;
  const size_t begin = text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at) + 1;
  std::printf("%s\n", text.substr(begin, text.find('\n', at) - begin).c_str());
}

// The logs at `paths` (name, path), each under a "--- name:" line: what a
// failed wait prints (a process may be waiting for another).
std::string Logs(std::initializer_list<std::pair<const char*, std::string>> paths) {
  std::string out;
  for (const auto& [name, path] : paths) out += std::string("--- ") + name + ":\n" + ReadFile(path);
  return out;
}

// Writes zeros into `path` until the file system is full; returns the bytes.
uint64_t FillDisk(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return 0;
  std::vector<char> chunk(1 << 20, 0);
  uint64_t total = 0;
  for (;;) {
    ssize_t w = ::write(fd, chunk.data(), chunk.size());
    if (w <= 0) break;
    total += static_cast<uint64_t>(w);
  }
  ::close(fd);
  return total;
}

// A tmpfs of `mb` MiB mounted on a fresh temp dir, unmounted by the destructor.
class Tmpfs {
 public:
  explicit Tmpfs(int mb) : mnt_(dir_.path() + "/mnt") {
    ::mkdir(mnt_.c_str(), 0755);
    const std::string opts = "size=" + std::to_string(mb) + "m";
    if (::mount("tmpfs", mnt_.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      error_ = std::string("mount -t tmpfs -o ") + opts + " " + mnt_ + ": " + std::strerror(errno);
      return;
    }
    mounted_ = true;
  }
  ~Tmpfs() {
    if (mounted_ && ::umount2(mnt_.c_str(), MNT_DETACH) != 0) {
      ADD_FAILURE() << "umount " << mnt_ << ": " << std::strerror(errno);
    }
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  const std::string& path() const { return mnt_; }
  // Outside the tmpfs: logs that must stay readable when it is full.
  const std::string& scratch() const { return dir_.path(); }

 private:
  TempDir dir_;
  std::string mnt_;
  bool mounted_ = false;
  std::string error_;
};

class PacedFaultsTest : public ::testing::Test {
 protected:
  // Starts paced (1 shard) on `data_dir` with its stderr in `log`; *port: its
  // port (fixed_port: listen there). Returns false if it did not start.
  bool StartShard(Subprocess* p, const std::string& data_dir, const std::string& log,
                  uint32_t num_clients, const std::vector<std::string>& extra, uint16_t* port,
                  uint16_t fixed_port = 0) {
    std::vector<std::string> argv = {
        BinaryDir() + "/paced",   "--listen=127.0.0.1:" + std::to_string(fixed_port),
        "--data_dir=" + data_dir, "--num_clients=" + std::to_string(num_clients),
        "--write_buffer_mb=1",    "--block_cache_mb=8",
        "--row_cache_mb=8",       "--insecure"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    Status s = p->Start(argv, log);
    if (!s.ok()) return false;
    std::string line;
    while (p->ReadLine(&line, 20000).ok()) {
      const std::string prefix = "paced listening on ";
      if (line.rfind(prefix, 0) == 0) {
        *port = static_cast<uint16_t>(std::atoi(line.c_str() + line.rfind(':') + 1));
        return true;
      }
    }
    return false;
  }
  std::vector<std::string> ClientArgs(uint16_t port, uint32_t id, uint32_t num_clients,
                                      const std::string& mode, int clocks) {
    return testing::ClientProcArgs("127.0.0.1:" + std::to_string(port), id, num_clients, mode,
                                   {"--clocks=" + std::to_string(clocks), "--ops=200", "--rows=500",
                                    "--workers=2", "--sleep_us=2000", "--shard_timeout_ms=120000"});
  }
  // Reads a client's stdout up to "OK", adding its TOTAL / ROW lines.
  ::testing::AssertionResult Collect(Subprocess* p, const char* prefix, Totals* totals,
                                     int timeout_ms) {
    return testing::ReadTotals(p, prefix, totals, timeout_ms);
  }
  // Waits for the START line of a client.
  static bool Started(Subprocess* p) {
    std::string line;
    return p->ReadLine(&line, 30000).ok() && line.rfind("START", 0) == 0;
  }
  // The values stored now, read by a client process that does not Clock.
  ::testing::AssertionResult StoredTotals(uint16_t port, uint32_t num_clients, Totals* stored,
                                          const std::string& log) {
    Subprocess v;
    if (!v.Start(ClientArgs(port, 0, num_clients, "verify", 1), log).ok()) {
      return ::testing::AssertionFailure() << "cannot start the verifier";
    }
    return Collect(&v, "ROW", stored, 60000);
  }
  static int ExitOf(Subprocess* p, int timeout_ms) {
    int st = 0;
    if (!p->Wait(timeout_ms, &st).ok()) return -1000;
    if (WIFSIGNALED(st)) return -WTERMSIG(st);
    return WEXITSTATUS(st);
  }
};

// The disk fills while two clients train: the shard keeps running, each client
// hears why and waits with its batches; once the filler is deleted the shard
// resumes by itself and every acknowledged increment is stored exactly once.
TEST_F(PacedFaultsTest, DiskFullHoldsBatchesAndRecovers) {
  Tmpfs fs(20);
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (" << fs.error() << ")";
  const std::string data = fs.path() + "/db";
  const std::string paced_log = fs.scratch() + "/paced.log";
  Subprocess paced;
  uint16_t port = 0;
  ASSERT_TRUE(StartShard(&paced, data, paced_log, 2, {}, &port)) << ReadFile(paced_log);

  Subprocess c0, c1;
  const std::string log0 = fs.scratch() + "/client0.log", log1 = fs.scratch() + "/client1.log";
  ASSERT_TRUE(c0.Start(ClientArgs(port, 0, 2, "run", kClocks), log0).ok());
  ASSERT_TRUE(c1.Start(ClientArgs(port, 1, 2, "run", kClocks), log1).ok());
  ASSERT_TRUE(Started(&c0));
  ASSERT_TRUE(Started(&c1));
  std::this_thread::sleep_for(1500ms);  // tables created, a few hundred clocks in

  const std::string filler = fs.path() + "/filler";
  const uint64_t filled = FillDisk(filler);
  std::printf("filled the tmpfs with %llu KiB\n", static_cast<unsigned long long>(filled >> 10));
  ASSERT_TRUE(WaitForText(paced_log, "no space left on device (data dir " + data, 30s))
      << ReadFile(paced_log);
  // The client whose batch is held hears why (the other one may only be
  // waiting for that batch's clock).
  const std::string notice = "shard 0: no space left on device (data dir " + data;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (ReadFile(log0).find(notice) == std::string::npos &&
         ReadFile(log1).find(notice) == std::string::npos) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << ReadFile(log0) << ReadFile(log1);
    std::this_thread::sleep_for(50ms);
  }
  // Full for a while: the shard stays up, writes stay stopped.
  std::this_thread::sleep_for(3s);
  ASSERT_TRUE(paced.running());
  int st = 0;
  ASSERT_FALSE(paced.Wait(0, &st).ok()) << "paced exited while the disk was full";

  ASSERT_EQ(::unlink(filler.c_str()), 0);
  Totals expected, stored;
  ASSERT_TRUE(Collect(&c0, "TOTAL", &expected, kTotalsTimeoutMs))
      << Logs({{"client 0", log0}, {"client 1", log1}, {"paced", paced_log}});
  ASSERT_TRUE(Collect(&c1, "TOTAL", &expected, kTotalsTimeoutMs))
      << Logs({{"client 0", log0}, {"client 1", log1}, {"paced", paced_log}});
  EXPECT_EQ(ExitOf(&c0, 30000), 0);
  EXPECT_EQ(ExitOf(&c1, 30000), 0);
  ASSERT_TRUE(StoredTotals(port, 2, &stored, fs.scratch() + "/verify.log"));
  EXPECT_EQ(stored, expected);
  int64_t sum = 0;
  for (const auto& [k, v] : expected) sum += v;
  std::printf("stored totals equal the clients' (%zu rows, sum %lld)\n", expected.size(),
              static_cast<long long>(sum));

  PrintLineWith(log0, "no space left on device (data dir");
  PrintLineWith(log1, "no space left on device (data dir");
  PrintLineWith(paced_log, "recovered from");
  const std::string log = ReadFile(paced_log);
  EXPECT_NE(log.find("holding batches until the store recovers"), std::string::npos) << log;
  EXPECT_NE(log.find("recovered from 'no space left on device'"), std::string::npos) << log;
  EXPECT_EQ(log.find("Assertion"), std::string::npos) << log;
  paced.Signal(SIGTERM);
  EXPECT_EQ(ExitOf(&paced, 30000), 0) << log;
}

// The crash loop of a full disk: paced killed while the disk is full, and
// restarted before space is freed, refuses to start with a clear message and
// a non-zero exit (never SIGABRT); restarted after, it replays what it had
// acknowledged, the client re-sends the rest, and the totals are exact.
TEST_F(PacedFaultsTest, RestartWhileDiskFullExitsCleanlyThenRecovers) {
  Tmpfs fs(20);
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (" << fs.error() << ")";
  const std::string data = fs.path() + "/db";
  const std::string paced_log = fs.scratch() + "/paced.log";
  auto paced = std::make_unique<Subprocess>();
  uint16_t port = 0;
  ASSERT_TRUE(StartShard(paced.get(), data, paced_log, 1, {}, &port)) << ReadFile(paced_log);
  Subprocess client;
  const std::string client_log = fs.scratch() + "/client.log";
  ASSERT_TRUE(client.Start(ClientArgs(port, 0, 1, "run", kClocks), client_log).ok());
  ASSERT_TRUE(Started(&client));
  std::this_thread::sleep_for(1500ms);
  const std::string filler = fs.path() + "/filler";
  FillDisk(filler);
  ASSERT_TRUE(WaitForText(paced_log, "holding batches until the store recovers", 30s))
      << ReadFile(paced_log);
  paced->Kill();

  // Still full: a clean refusal, twice.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const std::string log = fs.scratch() + "/paced_full" + std::to_string(attempt) + ".log";
    Subprocess again;
    uint16_t unused = 0;
    EXPECT_FALSE(StartShard(&again, data, log, 1, {}, &unused, port)) << ReadFile(log);
    const int code = ExitOf(&again, 30000);
    EXPECT_GT(code, 0) << "paced on a full disk: exit " << code << "\n" << ReadFile(log);
    const std::string text = ReadFile(log);
    EXPECT_NE(text.find("No space left on device"), std::string::npos) << text;
    EXPECT_EQ(text.find("Assertion"), std::string::npos) << text;
    const size_t at = text.find("paced: ");
    if (attempt == 0 && at != std::string::npos) {
      std::printf("restart on a full disk (exit %d): %s\n", code,
                  text.substr(at, text.find('\n', at) - at).c_str());
    }
  }

  ASSERT_EQ(::unlink(filler.c_str()), 0);
  paced = std::make_unique<Subprocess>();
  const std::string paced_log2 = fs.scratch() + "/paced2.log";
  uint16_t port2 = 0;
  ASSERT_TRUE(StartShard(paced.get(), data, paced_log2, 1, {}, &port2, port))
      << ReadFile(paced_log2);
  Totals expected, stored;
  ASSERT_TRUE(Collect(&client, "TOTAL", &expected, kTotalsTimeoutMs))
      << Logs({{"client", client_log}, {"paced", paced_log2}});
  EXPECT_EQ(ExitOf(&client, 30000), 0);
  ASSERT_TRUE(StoredTotals(port, 1, &stored, fs.scratch() + "/verify.log"));
  EXPECT_EQ(stored, expected);
  paced->Signal(SIGTERM);
  EXPECT_EQ(ExitOf(paced.get(), 30000), 0) << ReadFile(paced_log2);
}

// An idle connection to 127.0.0.1:port (never sends its Hello); -1 if the
// connect failed.
int ConnectIdle(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// fd exhaustion: paced under RLIMIT_NOFILE=256 with no descriptors reserved
// for RocksDB, flooded with idle connections while a client trains, runs out
// of descriptors when RocksDB opens its next WAL or table file. The store
// stops writing (the cause named once), the batches are held, and once the
// connections are gone the shard recovers by itself; totals exact.
TEST_F(PacedFaultsTest, FdExhaustionHoldsBatchesAndRecovers) {
#if defined(PACE_ASAN)
  // UBSan's vptr check tests that a vtable is readable by writing it to a
  // pipe; with the descriptors exhausted pipe(2) fails (EMFILE) and the check
  // reports "invalid vptr" on a valid object (seen: a shared_ptr control
  // block, "memory cannot be printed"), which halts paced. The sanitizer
  // runtime, not paced, needs the descriptors here. The Release build runs
  // this test; storage_test's fd-exhaustion case runs under ASan too.
  GTEST_SKIP() << "not under ASan+UBSan: the vptr check itself needs a free descriptor";
#elif defined(PACE_TSAN)
  // clang's TSan symbolizes a suppressed race (RocksDB, glog) in an
  // llvm-symbolizer child and writes its notes to the log_path file: with no
  // descriptor left it cannot do either and ends the process ("ERROR: Can't
  // open file: ... (reason: 24)"), seen in a CI run. The sanitizer runtime,
  // not paced, needs the descriptors here; the Release build runs this test.
  GTEST_SKIP() << "not under TSan: its runtime needs free descriptors to report";
#endif
  TempDir dir;
  const std::string data = dir.path() + "/db";
  const std::string paced_log = dir.path() + "/paced.log";
  Subprocess paced;
  paced.SetOpenFileLimit(256, 256);
  uint16_t port = 0;
  ASSERT_TRUE(StartShard(&paced, data, paced_log, 1,
                         {"--reserved_fds=0", "--max_connections=0",
                          "--max_handshaking_connections=0", "--handshake_timeout_ms=600000",
                          // Rows written per group: new WAL and table files every few
                          // clocks. (A group commit of the clock log opens no file, so
                          // with it writes go on while the fds are exhausted; only its
                          // row write-backs need one.)
                          "--clock_log=false", "--memtable_switch_groups=1"},
                         &port))
      << ReadFile(paced_log);
  Subprocess client;
  const std::string client_log = dir.path() + "/client.log";
  ASSERT_TRUE(client.Start(ClientArgs(port, 0, 1, "run", kClocks), client_log).ok());
  ASSERT_TRUE(Started(&client));
  std::this_thread::sleep_for(1000ms);

  std::vector<int> idle;
  for (int i = 0; i < 400; ++i) {
    int fd = ConnectIdle(port);
    if (fd >= 0) idle.push_back(fd);
  }
  std::printf("opened %zu idle connections\n", idle.size());
  // Generous: under TSan on a loaded machine a group takes long.
  const bool failed = WaitForText(paced_log, "too many open files (data dir " + data, 120s);
  for (int fd : idle) ::close(fd);
  ASSERT_TRUE(failed) << ReadFile(paced_log);

  Totals expected, stored;
  ASSERT_TRUE(Collect(&client, "TOTAL", &expected, kTotalsTimeoutMs))
      << Logs({{"client", client_log}, {"paced", paced_log}});
  EXPECT_EQ(ExitOf(&client, 30000), 0);
  ASSERT_TRUE(StoredTotals(port, 1, &stored, dir.path() + "/verify.log"));
  EXPECT_EQ(stored, expected);
  PrintLineWith(paced_log, "too many open files (data dir");
  PrintLineWith(paced_log, "recovered from");
  const std::string log = ReadFile(paced_log);
  EXPECT_NE(log.find("recovered from 'too many open files'"), std::string::npos) << log;
  EXPECT_EQ(log.find("Assertion"), std::string::npos) << log;
  paced.Signal(SIGTERM);
  EXPECT_EQ(ExitOf(&paced, 30000), 0) << log;
}

// The largest write-ahead log in `dir` ("" if none).
std::string LargestWal(const std::string& dir, uint64_t* size) {
  std::string best;
  *size = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".log") continue;
    const uint64_t n = std::filesystem::file_size(e.path());
    if (n > *size) {
      *size = n;
      best = e.path().string();
    }
  }
  return best;
}

// Runs `argv`, returns its exit code; its stdout+stderr in *out.
int RunTool(const std::vector<std::string>& argv, const std::string& log, std::string* out) {
  Subprocess p;
  if (!p.Start(argv, log).ok()) return -1;
  std::string line;
  while (p.ReadLine(&line, 60000).ok()) *out += line + "\n";
  int st = 0;
  if (!p.Wait(60000, &st).ok()) return -1;
  *out += ReadFile(log);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

class PacedWalTest : public PacedFaultsTest {
 protected:
  // A job of 600 clocks whose batches are all in RocksDB's WAL (the write
  // path of rows written per group, a 64 MiB memtable switched by size
  // only), then paced SIGKILLed. Returns the WAL.
  // With `clock_log` the batches are in the clock log instead (and the WAL
  // holds only their applied clocks).
  void WriteJobAndKill(const std::string& data, const std::string& scratch,
                       bool clock_log = false) {
    Subprocess paced;
    uint16_t port = 0;
    const std::string log = scratch + "/paced_first.log";
    ASSERT_TRUE(StartShard(&paced, data, log, 1,
                           {clock_log ? "--clock_log=true" : "--clock_log=false",
                            "--write_buffer_mb=64", "--memtable_switch_groups=0"},
                           &port))
        << ReadFile(log);
    Subprocess client;
    std::vector<std::string> args = ClientArgs(port, 0, 1, "run", 600);
    args.push_back("--sleep_us=0");
    ASSERT_TRUE(client.Start(args, scratch + "/client.log").ok());
    Totals totals;
    ASSERT_TRUE(Collect(&client, "TOTAL", &totals, 120000)) << ReadFile(scratch + "/client.log");
    EXPECT_EQ(ExitOf(&client, 30000), 0);
    paced.Kill();  // no clean close: the batches are only in the WAL
    wal_ = LargestWal(data, &wal_size_);
    if (!clock_log) {
      ASSERT_GE(wal_size_, uint64_t{2} << 20) << "WAL " << wal_;
    }
  }
  std::string wal_;
  uint64_t wal_size_ = 0;
};

// 64 bytes flipped in the middle of a multi-MB WAL: paced refuses to open the
// store with the way out (exit 2), and pacectl verify finds it (exit 2). Before, the
// open replayed up to the damage and went on silently without the
// acknowledged batches after it.
TEST_F(PacedWalTest, CorruptionInTheMiddleIsRefused) {
  TempDir dir;
  const std::string data = dir.path() + "/db";
  WriteJobAndKill(data, dir.path());
  if (HasFatalFailure()) return;
  {
    std::fstream f(wal_, std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t at = wal_size_ / 2;
    std::string bytes(64, '\0');
    f.seekg(static_cast<std::streamoff>(at));
    f.read(bytes.data(), 64);
    for (char& c : bytes) c = static_cast<char>(~c);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(bytes.data(), 64);
  }
  std::printf("flipped 64 bytes at offset %llu of %s (%llu bytes)\n",
              static_cast<unsigned long long>(wal_size_ / 2), wal_.c_str(),
              static_cast<unsigned long long>(wal_size_));

  Subprocess again;
  uint16_t port = 0;
  const std::string log = dir.path() + "/paced_again.log";
  EXPECT_FALSE(StartShard(&again, data, log, 1, {"--write_buffer_mb=64"}, &port));
  EXPECT_EQ(ExitOf(&again, 30000), 2);
  const std::string text = ReadFile(log);
  EXPECT_NE(text.find("a write-ahead log is damaged before its end"), std::string::npos) << text;
  EXPECT_NE(text.find("Corruption: write-ahead log " + wal_ + " is damaged: "), std::string::npos)
      << text;
  EXPECT_NE(text.find("pacectl --data_dir=" + data + " verify"), std::string::npos) << text;
  EXPECT_NE(text.find("pacectl checkpoint restore"), std::string::npos) << text;

  std::string out;
  const int code = RunTool({BinaryDir() + "/pacectl", "verify", "--data_dir=" + data},
                           dir.path() + "/verify.log", &out);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("write-ahead log"), std::string::npos) << out;
  PrintLineWith(log, "damaged before its end");
  std::printf("pacectl verify: exit %d\n", code);
}

// 64 bytes flipped inside the committed part of the clock log (storage format
// 2, DIR/CLOCKLOG-n): paced refuses the store (exit 2) naming the clock log
// file, pacectl verify and pacectl checkpoint restore; pacectl verify exits 2
// naming it too.
TEST_F(PacedWalTest, ClockLogCorruptionIsNamed) {
  TempDir dir;
  const std::string data = dir.path() + "/db";
  WriteJobAndKill(data, dir.path(), /*clock_log=*/true);
  if (HasFatalFailure()) return;
  std::string log_file;
  uint64_t size = 0;
  for (const auto& e : std::filesystem::directory_iterator(data)) {
    if (e.path().filename().string().rfind("CLOCKLOG-", 0) == 0 && e.file_size() > size) {
      size = e.file_size();
      log_file = e.path().string();
    }
  }
  ASSERT_GE(size, uint64_t{64} << 10) << "clock log " << log_file;
  {
    std::fstream f(log_file, std::ios::in | std::ios::out | std::ios::binary);
    std::string bytes(64, '\0');
    f.seekg(4096 + 100);  // inside the first records: committed
    f.read(bytes.data(), 64);
    for (char& c : bytes) c = static_cast<char>(~c);
    f.seekp(4096 + 100);
    f.write(bytes.data(), 64);
  }
  Subprocess again;
  uint16_t port = 0;
  const std::string log = dir.path() + "/paced_again.log";
  EXPECT_FALSE(StartShard(&again, data, log, 1, {}, &port));
  EXPECT_EQ(ExitOf(&again, 30000), 2);
  const std::string text = ReadFile(log);
  EXPECT_NE(text.find("the clock log " + log_file + " is damaged"), std::string::npos) << text;
  EXPECT_NE(text.find("pacectl --data_dir=" + data + " verify"), std::string::npos) << text;
  EXPECT_NE(text.find("pacectl checkpoint restore"), std::string::npos) << text;
  PrintLineWith(log, "is damaged");

  std::string out;
  const int code = RunTool({BinaryDir() + "/pacectl", "verify", "--data_dir=" + data},
                           dir.path() + "/verify.log", &out);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("CLOCKLOG-"), std::string::npos) << out;
  std::printf("pacectl verify: exit %d\n", code);
}

// A torn last record (a crash in the middle of an append) is not damage:
// paced opens the store and pacectl verify passes.
TEST_F(PacedWalTest, TornTailIsTolerated) {
  TempDir dir;
  const std::string data = dir.path() + "/db";
  WriteJobAndKill(data, dir.path());
  if (HasFatalFailure()) return;
  std::filesystem::resize_file(wal_, wal_size_ - 37);
  std::string out;
  EXPECT_EQ(RunTool({BinaryDir() + "/pacectl", "verify", "--data_dir=" + data},
                    dir.path() + "/verify.log", &out),
            0)
      << out;
  Subprocess again;
  uint16_t port = 0;
  const std::string log = dir.path() + "/paced_again.log";
  ASSERT_TRUE(StartShard(&again, data, log, 1, {"--write_buffer_mb=64"}, &port)) << ReadFile(log);
  again.Signal(SIGTERM);
  EXPECT_EQ(ExitOf(&again, 30000), 0);
}

}  // namespace
}  // namespace pace
