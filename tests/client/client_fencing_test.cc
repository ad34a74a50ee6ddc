// Client fencing with real processes (docs/wire-protocol.md, Hello and Ack):
// 2 `paced` shards, client processes (pace_client_proc) over loopback. A
// second process with a client id that is connected is refused with a clear
// message while the real one trains, and the real one's totals stay exact; a
// zombie and its --resume'd replacement never both run silently: one of them
// fails with the message. A client of another job (docs/wire-protocol.md,
// "Jobs") is refused before it writes anything, even without a token.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/pace.h"
#include "common/read_file.h"
#include "tests/testing/paced_cluster.h"
#include "tests/testing/subprocess.h"

namespace pace {
namespace {

using testing::StartPaced;
using testing::Subprocess;
using testing::TempDir;

constexpr uint32_t kShards = 2;
constexpr uint32_t kClients = 2;

using testing::Totals;

bool Contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

class FencingTest : public ::testing::Test {
 protected:
  void StartShards(const std::vector<std::string>& extra = {}) {
    ASSERT_TRUE(cluster_.Start(dir_.path(), kShards, kClients, extra).ok());
  }
  std::string Servers() const { return cluster_.Servers(); }
  // Starts a client process (mode run or verify) and, for run, waits for
  // its "START" line: it is connected to every shard.
  std::unique_ptr<Subprocess> StartClient(uint32_t id, const std::string& mode,
                                          const std::string& name, int clocks = 30,
                                          bool wait_start = true,
                                          const std::vector<std::string>& extra = {},
                                          const std::string& servers = "") {
    auto p = std::make_unique<Subprocess>();
    std::vector<std::string> flags = {"--clocks=" + std::to_string(clocks), "--sleep_us=30000",
                                      "--seed=" + std::to_string(id + 11),
                                      "--shard_timeout_ms=20000"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    const std::vector<std::string> argv =
        testing::ClientProcArgs(servers.empty() ? Servers() : servers, id, kClients, mode, flags);
    Status s = p->Start(argv, dir_.path() + "/" + name + ".stderr.log");
    EXPECT_TRUE(s.ok()) << name << ": " << s.ToString();
    if (s.ok() && wait_start) {
      std::string line;
      s = p->ReadLine(&line, 120000);
      EXPECT_TRUE(s.ok()) << name << ": " << s.ToString();
      EXPECT_EQ(line.rfind("START", 0), 0u) << name << ": " << line;
    }
    return p;
  }
  void Collect(Subprocess* p, const char* prefix, Totals* totals, const std::string& who) {
    testing::CollectTotals(p, prefix, totals, who + " (stderr in " + dir_.path() + ")");
  }
  // Expects the process to print a FAIL line (returned) and exit 1.
  // `name`: the one given to StartClient, whose stderr is shown if the
  // process does not fail as expected.
  std::string ExpectFail(Subprocess* p, const std::string& who, const std::string& name = "") {
    std::string line, fail;
    while (p->ReadLine(&line, 120000).ok()) {
      EXPECT_NE(line, "OK") << who << " was expected to fail";
      if (line.rfind("FAIL", 0) == 0) fail = line;
    }
    int status = 0;
    EXPECT_TRUE(p->Wait(30000, &status).ok()) << who;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << who << " status " << status;
    EXPECT_FALSE(fail.empty()) << who << " printed no FAIL line" << StderrTail(name);
    std::printf("%s: %s\n", who.c_str(), fail.c_str());
    return fail;
  }
  // The last lines of StartClient(..., name)'s stderr, for a failure message.
  std::string StderrTail(const std::string& name) const {
    if (name.empty()) return "";
    std::ifstream in(dir_.path() + "/" + name + ".stderr.log");
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    std::string out = "; last lines of its stderr:";
    for (size_t i = lines.size() > 40 ? lines.size() - 40 : 0; i < lines.size(); ++i) {
      out += "\n  " + lines[i];
    }
    return out;
  }
  // Gives the clients time to apply some clocks (the test does not depend
  // on how many).
  static void LetThemTrain() { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }
  // SIGKILLs every shard and restarts it on its port: every client
  // connection is lost.
  void RestartShards() {
    for (uint32_t k = 0; k < kShards; ++k) ASSERT_TRUE(cluster_.Restart(k).ok());
  }
  // A zombie client 0 (stopped while both shards restart: its connections
  // are gone), client 1 running ahead (kill it at the end: it would wait for
  // client 0), and client 0's replacement, started (and connected) after.
  struct ZombieScene {
    std::unique_ptr<Subprocess> zombie, other, replacement;
  };
  ZombieScene StopZombieAndStartReplacement() {
    ZombieScene z;
    z.zombie = StartClient(0, "run", "zombie", 60);
    z.other = StartClient(1, "run", "client1", 200);
    if (HasFailure()) return z;
    LetThemTrain();
    z.zombie->Signal(SIGSTOP);
    RestartShards();
    if (HasFatalFailure()) return z;
    z.replacement = StartClient(0, "run", "replacement", 60);
    return z;
  }
  // The stored totals equal `expected` exactly (and are not all zero).
  void Verify(const Totals& expected) {
    std::unique_ptr<Subprocess> v = StartClient(0, "verify", "verify", 0, false);
    Totals stored;
    Collect(v.get(), "ROW", &stored, "verifier");
    if (HasFatalFailure()) return;
    testing::ExpectSameTotals(stored, expected);
  }

  TempDir dir_;
  testing::PacedCluster cluster_;
  std::vector<std::string>& dirs_ = cluster_.dirs;
  std::vector<std::unique_ptr<Subprocess>>& shards_ = cluster_.shards;
  std::vector<uint16_t>& ports_ = cluster_.ports;
};

TEST_F(FencingTest, RogueSecondProcessIsRefusedWhileTheRealOneTrains) {
  StartShards();
  if (HasFatalFailure()) return;
  // 150 clocks x 30 ms: they still train when the rogue's Hello retries
  // (RemoteChannel::Start retries a refused id for 1 s) have run out.
  std::unique_ptr<Subprocess> real = StartClient(0, "run", "client0", 150);
  std::unique_ptr<Subprocess> other = StartClient(1, "run", "client1", 150);
  if (HasFailure()) return;
  // The rogue starts while both train.
  std::unique_ptr<Subprocess> rogue = StartClient(0, "run", "rogue", 30, false);
  const std::string fail = ExpectFail(rogue.get(), "rogue");
  EXPECT_TRUE(Contains(fail, "client 0 is already connected from 127.0.0.1:")) << fail;
  EXPECT_TRUE(Contains(fail, "another process is running as client 0")) << fail;
  Totals expected;
  Collect(real.get(), "TOTAL", &expected, "client 0");
  Collect(other.get(), "TOTAL", &expected, "client 1");
  if (HasFatalFailure()) return;
  Verify(expected);
}

// A zombie (stopped: its connections stay open) and a --resume'd replacement
// for the same client id: the replacement is refused with the message; the
// zombie, continued, finishes with exact totals.
TEST_F(FencingTest, ReplacementOfALiveZombieIsRefusedAndNothingIsDropped) {
  StartShards();
  if (HasFatalFailure()) return;
  std::unique_ptr<Subprocess> zombie = StartClient(0, "run", "zombie");
  std::unique_ptr<Subprocess> other = StartClient(1, "run", "client1");
  if (HasFailure()) return;
  LetThemTrain();
  zombie->Signal(SIGSTOP);
  std::unique_ptr<Subprocess> replacement = StartClient(0, "run", "replacement", 30, false);
  const std::string fail = ExpectFail(replacement.get(), "replacement");
  EXPECT_TRUE(Contains(fail, "another process is running as client 0")) << fail;
  zombie->Signal(SIGCONT);
  Totals expected;
  Collect(zombie.get(), "TOTAL", &expected, "zombie");
  Collect(other.get(), "TOTAL", &expected, "client 1");
  if (HasFatalFailure()) return;
  Verify(expected);
}

// The zombie loses its connections (both shards restart while it is
// stopped), its replacement takes the id, then the zombie wakes up: the
// zombie fails loudly (refused, or a duplicate Ack for a batch it sent once)
// instead of having its batches dropped; the replacement finishes.
TEST_F(FencingTest, ZombieThatWakesUpAfterItsReplacementFailsLoudly) {
  StartShards();
  if (HasFatalFailure()) return;
  ZombieScene z = StopZombieAndStartReplacement();
  if (HasFailure()) return;
  z.zombie->Signal(SIGCONT);
  const std::string fail = ExpectFail(z.zombie.get(), "zombie");
  EXPECT_TRUE(Contains(fail, "another process is running as client 0") ||
              Contains(fail, "another process is client 0"))
      << fail;
  Totals ignored;
  Collect(z.replacement.get(), "TOTAL", &ignored, "replacement");
  z.other->Kill();
}

// As above, but the zombie wakes up after its replacement finished and left:
// the shards accept its reconnect, and the first batch it sends that the
// replacement had already applied comes back Ack{duplicate}: fatal, with the
// message, not a silent drop.
TEST_F(FencingTest, ZombieThatWakesUpAfterItsReplacementFinishedFailsOnADuplicateAck) {
  StartShards();
  if (HasFatalFailure()) return;
  ZombieScene z = StopZombieAndStartReplacement();
  if (HasFailure()) return;
  Totals ignored;
  Collect(z.replacement.get(), "TOTAL", &ignored, "replacement");
  z.zombie->Signal(SIGCONT);
  const std::string fail = ExpectFail(z.zombie.get(), "zombie");
  EXPECT_TRUE(Contains(fail, "another process is client 0, or this job was resumed twice")) << fail;
  z.other->Kill();
}

// Job ids (docs/wire-protocol.md, "Jobs"), all without a token: a client of
// job A pointed at job B's shards (same topology) is refused and writes
// nothing; so is a client whose --servers mix two jobs; a shard restarted
// with another --job than its store's refuses to start.
TEST_F(FencingTest, ClientOfAnotherJobIsRefusedAndWritesNothing) {
  StartShards({"--insecure", "--job=B"});
  if (HasFatalFailure()) return;
  std::unique_ptr<Subprocess> b0 = StartClient(0, "run", "b0", 20, true, {"--job=B"});
  std::unique_ptr<Subprocess> b1 = StartClient(1, "run", "b1", 20);  // pins B from shard 0
  Totals expected;
  Collect(b0.get(), "TOTAL", &expected, "client 0 of B");
  Collect(b1.get(), "TOTAL", &expected, "client 1 of B");
  if (HasFatalFailure()) return;

  // Job A's client 0, same topology, no token: refused by the first shard.
  std::unique_ptr<Subprocess> a0 = StartClient(0, "run", "a0", 20, false, {"--job=A"});
  std::string fail = ExpectFail(a0.get(), "client 0 of A");
  EXPECT_TRUE(Contains(fail, "this shard belongs to job 'B', the client to job 'A'")) << fail;
  // --servers mixing job B's shard 0 and job C's shard 1: refused.
  testing::PacedCluster c;
  ASSERT_TRUE(c.Start(dir_.path() + "/c", kShards, kClients, {"--job=C"}).ok());
  const std::string mixed =
      "127.0.0.1:" + std::to_string(ports_[0]) + ",127.0.0.1:" + std::to_string(c.ports[1]);
  std::unique_ptr<Subprocess> m = StartClient(1, "run", "mixed", 20, false, {}, mixed);
  fail = ExpectFail(m.get(), "client of mixed --servers");
  EXPECT_TRUE(Contains(fail, "job 'C'") && Contains(fail, "job 'B'")) << fail;
  // Nothing of either was written into B.
  Verify(expected);

  shards_[0]->Signal(SIGTERM);
  int status = 0;
  ASSERT_TRUE(shards_[0]->Wait(30000, &status).ok());
  Subprocess wrong;
  uint16_t port = 0;
  EXPECT_FALSE(StartPaced(&wrong, dirs_[0], 0, kShards, kClients, {"--job=C"}, &port).ok());
  ASSERT_TRUE(wrong.Wait(30000, &status).ok());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  const std::string log = ReadFile(dirs_[0] + ".stderr.log");
  EXPECT_TRUE(Contains(log, "belongs to job 'B', but job 'C' was requested")) << log;
}

// Without --job anywhere: each client pins each shard's automatic id, so a
// shard restarted on another data dir at the same address (another store)
// is refused on reconnect, loudly, instead of receiving the batches.
TEST_F(FencingTest, ShardRestartedOnAnotherStoreIsRefusedOnReconnect) {
  StartShards();
  if (HasFatalFailure()) return;
  std::unique_ptr<Subprocess> c0 = StartClient(0, "run", "client0", 150);
  std::unique_ptr<Subprocess> c1 = StartClient(1, "run", "client1", 150);
  if (HasFailure()) return;
  LetThemTrain();
  shards_[1]->Signal(SIGKILL);
  int status = 0;
  ASSERT_TRUE(shards_[1]->Wait(30000, &status).ok());
  auto fresh = std::make_unique<Subprocess>();
  uint16_t port = 0;
  ASSERT_TRUE(
      StartPaced(fresh.get(), dir_.path() + "/fresh1", 1, kShards, kClients, {}, &port, ports_[1])
          .ok());
  shards_[1] = std::move(fresh);
  for (auto [p, name] : {std::pair{c0.get(), "client0"}, std::pair{c1.get(), "client1"}}) {
    const std::string fail = ExpectFail(p, name, name);
    EXPECT_TRUE(Contains(fail, "this shard belongs to job 'auto-")) << fail;
  }
}

// Two Clients with one client id in one process share the incarnation: the
// newer one replaces the older one's sessions, and the older one fails with
// the message instead of reconnecting and taking the id back.
TEST_F(FencingTest, SecondClientWithTheSameIdInOneProcessReplacesTheFirst) {
  StartShards();
  if (HasFatalFailure()) return;
  ClientOptions o;
  ASSERT_TRUE(ParseServers(Servers(), &o).ok());
  o.client_id = 0;
  o.num_clients = kClients;
  std::unique_ptr<Client> first, second;
  ASSERT_TRUE(Client::Open(o, &first).ok());
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(first->RegisterWorker(&w).ok());
  ASSERT_TRUE(w->Clock().ok());
  ASSERT_TRUE(first->Flush().ok());
  ASSERT_TRUE(Client::Open(o, &second).ok());
  EXPECT_EQ(second->start_clock(), 1);
  TableSchema schema;
  schema.name = "t";
  schema.type = ElementType::kI64;
  schema.width = 1;
  Table t;
  Status s;
  for (int i = 0; i < 200 && s.ok(); ++i) {  // until the first hears it
    s = first->CreateTable(schema, &t);
    if (s.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "replaced by a newer connection")) << s.ToString();
  std::unique_ptr<Worker> w2;
  ASSERT_TRUE(second->RegisterWorker(&w2).ok());
  ASSERT_TRUE(w2->Clock().ok());
  EXPECT_TRUE(second->Flush().ok());
}

}  // namespace
}  // namespace pace
