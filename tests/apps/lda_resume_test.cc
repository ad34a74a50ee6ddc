// pace_lda --resume after SIGKILL, with real processes:
// the job is killed three times mid-run and resumed each time; the final
// log-likelihood is within 1% of an uninterrupted run's, and the word-topic
// counts the store holds are exactly the counts of the token assignments the
// workers finished with (every cell; their sum is the number of tokens).
// Also: a resume whose assignment files are missing or were written by
// another --workers is refused with one line, and --sync.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "apps/lda/corpus_data.h"
#include "apps/lda/lda_state.h"
#include "apps/shared/partition.h"
#include "net/remote_shard.h"
#include "storage/shard_store.h"
#include "tests/testing/run_binary.h"
#include "tests/testing/subprocess.h"

namespace pace {
namespace {

using testing::BinaryDir;
using testing::ReadFile;
using testing::RunResult;
using testing::Subprocess;
using testing::TempDir;

constexpr int kTimeoutMs = 120000;
constexpr int kTopics = 5;
constexpr int kWorkers = 2;
constexpr int kClocks = 40;

// The loglik column of the clock line of `clock` in pace_lda's stdout.
bool LogLikOf(const std::string& out, int clock, double* ll) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string c, seconds, value;
    if (!(f >> c >> seconds >> value)) continue;
    if (c == std::to_string(clock)) {
      *ll = std::stod(value);
      return true;
    }
  }
  return false;
}

class LdaResumeTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  RunResult Run(const std::vector<std::string>& args) {
    return testing::RunBinary(args, Path("stderr." + std::to_string(runs_++)));
  }

  // Starts the command, SIGKILLs it once its clock line `clock` is out.
  // Returns false if it finished first.
  // `at_clock` runs first (e.g. kills a shard).
  bool RunAndKill(std::vector<std::string> args, int clock,
                  const std::function<void()>& at_clock = nullptr) {
    args[0] = BinaryDir() + "/" + args[0];
    Subprocess p;
    EXPECT_TRUE(p.Start(args, Path("stderr." + std::to_string(runs_++))).ok());
    std::string line;
    bool reached = false;
    while (!reached && p.ReadLine(&line, kTimeoutMs).ok()) {
      std::istringstream f(line);
      std::string c;
      reached = (f >> c) && c == std::to_string(clock);
    }
    if (reached && at_clock) at_clock();
    if (reached) p.Signal(SIGKILL);
    while (p.ReadLine(&line, kTimeoutMs).ok()) {
    }
    int st = 0;
    EXPECT_TRUE(p.Wait(kTimeoutMs, &st).ok());
    return reached && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
  }

  void SetUp() override {
    // A corpus on which the sampler has one mode: 24 uninterrupted runs end
    // within 0.12% of each other (others, e.g. --vocab=100 --doc_len=80,
    // end in one of two modes 13% apart, depending on the workers' timing).
    MakeCorpus({"--docs=400", "--vocab=200", "--topics=5", "--doc_len=60", "--seed=5"});
  }

  // Generates docword.txt (pace_gen corpus with `flags`) and reads it.
  void MakeCorpus(std::vector<std::string> flags) {
    flags.insert(flags.begin(), {"pace_gen", "corpus"});
    flags.push_back("--out_docword=" + Path("docword.txt"));
    flags.push_back("--out_vocab=" + Path("vocab.txt"));
    RunResult r = Run(flags);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    lda::CorpusReadInfo info;
    ASSERT_TRUE(lda::ReadDocword(Path("docword.txt"), {}, &corpus_, &info).ok());
  }

  // A 5 ms straggler sleep per worker per clock keeps the run long enough
  // (~0.3 s) to be killed in the middle; it does not change the sampling.
  std::vector<std::string> Lda(const std::string& data_dir, int clocks = -1) {
    if (clocks < 0) clocks = clocks_;
    return {"pace_lda",
            "--docword=" + Path("docword.txt"),
            "--topics=" + std::to_string(topics_),
            "--workers=" + std::to_string(kWorkers),
            "--clocks=" + std::to_string(clocks),
            "--topics_out=0",
            "--straggler_ms=5",
            "--straggler_prob=1",
            "--data_dir=" + data_dir};
  }

  // The word-topic counts (V x K) from the store, through pacectl export.
  // The word-topic counts (V x K) of the stores of every shard (each row is
  // in one), through pacectl export.
  std::vector<int64_t> StoredWordTopic(const std::vector<std::string>& store_dirs) {
    std::vector<int64_t> nwk(static_cast<size_t>(corpus_.vocab_size) * topics_, 0);
    for (const std::string& dir : store_dirs) AddStoredWordTopic(dir, &nwk);
    return nwk;
  }
  void AddStoredWordTopic(const std::string& data_dir, std::vector<int64_t>* out) {
    std::vector<int64_t>& nwk = *out;
    const std::string csv = Path("wt." + std::to_string(runs_) + ".csv");
    RunResult r = Run({"pacectl", "--data_dir=" + data_dir, "export", "lda.word_topic",
                       "--format=csv", "--out=" + csv});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::istringstream in(ReadFile(csv));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string cell;
      std::getline(f, cell, ',');
      const size_t row = std::stoul(cell);
      EXPECT_LT(row, corpus_.vocab_size);
      if (row >= corpus_.vocab_size) continue;
      for (int k = 0; k < topics_ && std::getline(f, cell, ','); ++k) {
        nwk[row * topics_ + k] += std::stoll(cell);
      }
    }
  }

  // The counts of the assignments the workers wrote for clock `clock`.
  std::vector<int64_t> AssignedWordTopic(const std::string& data_dir, ClockT clock) {
    std::vector<int64_t> nwk(static_cast<size_t>(corpus_.vocab_size) * topics_, 0);
    const std::vector<uint32_t> order = apps::ShuffledOrder(corpus_.docs.size(), 1);
    for (uint32_t part = 0; part < kWorkers; ++part) {
      const apps::Range range = apps::PartOf(order.size(), part, kWorkers);
      lda::AssignmentsHeader h;
      h.part = part;
      h.num_parts = kWorkers;
      h.topics = topics_;
      h.clock = clock;
      for (size_t i = range.begin; i < range.end; ++i) h.tokens += corpus_.docs[order[i]].size();
      std::vector<int32_t> z;
      Status s = lda::ReadAssignments(lda::AssignmentsDir(data_dir), 0, h, &z);
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!s.ok()) return {};
      size_t t = 0;
      for (size_t i = range.begin; i < range.end; ++i) {
        for (uint32_t word : corpus_.docs[order[i]]) ++nwk[word * topics_ + z[t++]];
      }
    }
    return nwk;
  }

  // `state_dir`: the client's --data_dir; `store_dirs`: the shards' (empty:
  // embedded, the same).
  void ExpectExactCounts(const std::string& data_dir, std::vector<std::string> store_dirs = {}) {
    const bool embedded = store_dirs.empty();
    if (embedded) store_dirs = {data_dir};
    std::vector<int64_t> stored = StoredWordTopic(store_dirs);
    std::vector<int64_t> assigned = AssignedWordTopic(data_dir, clocks_ + 1);
    ASSERT_EQ(stored.size(), assigned.size());
    int64_t sum = 0;
    size_t differ = 0;
    for (size_t i = 0; i < stored.size(); ++i) {
      sum += stored[i];
      differ += stored[i] != assigned[i];
    }
    EXPECT_EQ(differ, 0u) << "cells of " << data_dir << " that differ from the assignments";
    EXPECT_EQ(sum, static_cast<int64_t>(corpus_.num_tokens));
    if (!embedded) return;
    RunResult r = Run({"pacectl", "--data_dir=" + data_dir, "get", "lda.topic_totals", "0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream f(r.out.substr(r.out.find(':') + 1));
    int64_t total = 0, v = 0;
    for (int k = 0; k < topics_ && (f >> v); ++k) {
      total += v;
      int64_t col = 0;
      for (uint32_t w = 0; w < corpus_.vocab_size; ++w) col += assigned[w * topics_ + k];
      EXPECT_EQ(v, col) << "topic " << k;
    }
    EXPECT_EQ(total, static_cast<int64_t>(corpus_.num_tokens));
  }

  TempDir dir_;
  int runs_ = 0;
  lda::Corpus corpus_;
  int topics_ = kTopics;  // --topics of the runs
  int clocks_ = kClocks;  // --clocks of the runs
};

TEST_F(LdaResumeTest, KilledThreeTimesResumesExactly) {
  // Uninterrupted, with --sync (the embedded shard fsyncs before each Ack).
  std::vector<std::string> full = Lda(Path("full"));
  full.push_back("--sync");
  RunResult r = Run(full);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  double ll_full = 0;
  ASSERT_TRUE(LogLikOf(r.out, kClocks, &ll_full)) << r.out;
  ExpectExactCounts(Path("full"));

  const std::string data = Path("killed");
  ASSERT_TRUE(RunAndKill(Lda(data), 8));
  int resumes = 0, replays = 0;
  std::vector<std::string> resume = Lda(data);
  resume.push_back("--resume");
  for (int kill_at : {18, 28}) {
    if (!RunAndKill(resume, kill_at)) break;
    ++resumes;
  }
  r = Run(resume);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t at = r.out.find("resuming at clock ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const long long resumed = std::stoll(r.out.substr(at + 18));
  EXPECT_GE(resumed, 20) << r.out;
  EXPECT_LE(resumed, kClocks) << r.out;
  replays += r.out.find("(replayed from") != std::string::npos;
  EXPECT_EQ(resumes, 2);
  double ll = 0;
  ASSERT_TRUE(LogLikOf(r.out, kClocks, &ll)) << r.out;
  EXPECT_LT(std::fabs(ll - ll_full), 0.01 * std::fabs(ll_full)) << ll << " vs " << ll_full;
  std::printf("final loglik %.1f (uninterrupted %.1f, %.3f%%), last resume at clock %lld%s\n", ll,
              ll_full, 100 * std::fabs(ll - ll_full) / std::fabs(ll_full), resumed,
              replays ? " (replayed)" : "");
  ExpectExactCounts(data);

  // A finished job: the files of its last clock are kept, older ones gone
  // (at most the last two clocks per worker).
  for (uint32_t part = 0; part < kWorkers; ++part) {
    std::vector<ClockT> clocks = lda::ListAssignments(lda::AssignmentsDir(data), 0, part);
    ASSERT_FALSE(clocks.empty());
    EXPECT_EQ(clocks.back(), kClocks + 1);
    EXPECT_LE(clocks.size(), 3u);
  }
}

// The same against two paced shards: the client's assignment files are in
// its own --data_dir. The second time, shard 1 is SIGKILLed first, so the
// client is killed while the batch of its last clock has reached shard 0
// and not shard 1: the resumed clock is then replayed exactly (shard 0 drops
// it as a duplicate, shard 1 gets the original deltas); a resampled clock
// would leave shard 0 with other deltas than the assignments.
TEST_F(LdaResumeTest, ClientOfTwoShardsKilledResumesExactly) {
  Subprocess shards[2];
  uint16_t ports[2] = {0, 0};
  auto start_shard = [&](uint32_t k) {
    Status s =
        testing::StartPaced(&shards[k], Path("shard" + std::to_string(k)), k, 2, 1, {}, &ports[k]);
    EXPECT_TRUE(s.ok()) << s.ToString();
  };
  auto servers = [&] {
    return "--servers=127.0.0.1:" + std::to_string(ports[0]) +
           ",127.0.0.1:" + std::to_string(ports[1]);
  };
  start_shard(0);
  start_shard(1);
  const std::string client_dir = Path("client");
  std::vector<std::string> args = Lda(client_dir);
  args.push_back(servers());
  ASSERT_TRUE(RunAndKill(args, 12));
  args.back() = "--resume";
  args.push_back(servers());
  ASSERT_TRUE(RunAndKill(args, 26, [&] {
    shards[1].Signal(SIGKILL);
    int st = 0;
    EXPECT_TRUE(shards[1].Wait(kTimeoutMs, &st).ok());
    // Let the client end its clock (shard 0 applies it) and block in the
    // Flush that waits for shard 1. Any timing is correct; this one makes
    // the replay likely.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }));
  start_shard(1);
  args.back() = servers();
  RunResult r = Run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("resuming at clock "), std::string::npos) << r.out;
  std::printf("two shards: %s\n",
              r.out.find("(replayed from") != std::string::npos ? "replayed" : "not replayed");
  for (Subprocess& s : shards) {
    s.Signal(SIGTERM);
    int st = 0;
    ASSERT_TRUE(s.Wait(kTimeoutMs, &st).ok());
  }
  ExpectExactCounts(client_dir, {Path("shard0"), Path("shard1")});
}

TEST_F(LdaResumeTest, RefusesWithoutMatchingAssignments) {
  const std::string data = Path("data");
  RunResult r = Run(Lda(data, 6));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Another --workers: another partition of the documents.
  std::vector<std::string> args = Lda(data, 10);
  args[4] = "--workers=3";
  args.push_back("--resume");
  r = Run(args);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("workers"), std::string::npos) << r.err;
  // The files of the resumed clock are gone.
  ASSERT_EQ(::unlink(lda::AssignmentsPath(lda::AssignmentsDir(data), 0, 1, 7).c_str()), 0);
  args = Lda(data, 10);
  args.push_back("--resume");
  r = Run(args);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("no token assignments of worker 1 for clock 7"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("seconds"), std::string::npos) << r.out;  // nothing trained
  // --sync belongs to paced with --servers.
  args = Lda(Path("remote"), 2);
  args.push_back("--sync");
  args.push_back("--servers=127.0.0.1:1");
  r = Run(args);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--sync is for embedded runs"), std::string::npos) << r.err;
}

// How often a cut-clock test SIGKILLs its job before the last, uninterrupted
// run (the remote one goes on, up to twice as often, until this many kills
// have cut a clock).
constexpr int kCutKills = 5;

// A clock cut into parts by the client's memory bound (--open_delta_mb=1
// --unacked_mb=1 on a corpus whose clock changes more than 512 KiB of
// counts), the client SIGKILLed while a shard holds some of its parts and
// resumed, kCutKills times: the shard takes the parts back when the new
// process connects, the re-run clock is applied once, and the word-topic
// counts equal the assignments' exactly (none negative, their sum the number
// of tokens).
class LdaCutClockTest : public LdaResumeTest {
 protected:
  void SetUp() override {
    topics_ = 50;
    clocks_ = 30;
    MakeCorpus({"--docs=1000", "--vocab=10000", "--topics=50", "--doc_len=60", "--seed=3"});
  }

  std::vector<std::string> CutLda(const std::string& data_dir, bool resume) {
    std::vector<std::string> args = Lda(data_dir);
    // A worker that straggles while the other has sent its parts keeps the
    // clock incomplete for a while (the last flag of a name wins).
    args.insert(args.end(), {"--open_delta_mb=1", "--unacked_mb=1", "--straggler_ms=60",
                             "--straggler_prob=0.5"});
    if (resume) args.push_back("--resume");
    return args;
  }

  // Starts `args` and SIGKILLs it: once kill_now() says so (polled every few
  // milliseconds from its clock line 1 on), or at its clock line `last`.
  void RunAndKillWhen(std::vector<std::string> args, int last,
                      const std::function<bool()>& kill_now) {
    args[0] = BinaryDir() + "/" + args[0];
    Subprocess p;
    ASSERT_TRUE(p.Start(args, Path("stderr." + std::to_string(runs_++))).ok());
    std::string line;
    bool started = false;
    for (;;) {
      if (!started) {
        if (!p.ReadLine(&line, kTimeoutMs).ok()) break;
        std::istringstream f(line);
        int c = -1;
        started = (f >> c) && c >= 1;
        continue;
      }
      if (kill_now()) break;
      Status got = p.ReadLine(&line, 2);
      if (!got.ok() && got.code() != StatusCode::kTimedOut) break;  // it ended
      std::istringstream f(line);
      int c = -1;
      if (got.ok() && (f >> c) && c >= last) break;
    }
    p.Signal(SIGKILL);
    while (p.ReadLine(&line, kTimeoutMs).ok()) {
    }
    int st = 0;
    EXPECT_TRUE(p.Wait(kTimeoutMs, &st).ok());
  }
};

// The counter `name` of the shard's StatsReply (-1 if it cannot be read).
int64_t ShardCounter(net::RemoteShard* shard, const std::string& name) {
  auto f = shard->Stats();
  if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return -1;
  StatusOr<net::StatsReply> r = f.get();
  if (!r.ok()) return -1;
  for (const auto& [n, v] : r->counters) {
    if (n == name) return v;
  }
  return -1;
}

TEST_F(LdaCutClockTest, ClientKilledMidClockResumesExactly) {
  Subprocess paced;
  uint16_t port = 0;
  ASSERT_TRUE(testing::StartPaced(&paced, Path("shard"), 0, 1, 1, {}, &port).ok());
  net::RemoteShardOptions o;
  o.port = port;
  o.hello.role = net::Hello::kObserver;
  o.connect_timeout_ms = 10000;
  std::unique_ptr<net::RemoteShard> observer;
  ASSERT_TRUE(net::RemoteShard::Connect(
                  o, [](net::Message) {}, nullptr, &observer)
                  .ok());
  auto parts_applied = [&] { return ShardCounter(observer.get(), "incomplete_clock_parts"); };
  const std::string servers = "--servers=127.0.0.1:" + std::to_string(port);
  const std::string client_dir = Path("client");
  // The parts of an incomplete clock the shard holds once it has applied
  // what the killed process sent before it died: parts still in the socket
  // may complete the clock after the kill (then there is nothing to take
  // back), so the count must stay the same for half a second.
  auto settled_parts = [&] {
    int64_t parts = parts_applied();
    for (int i = 0; i < 40; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      const int64_t now = parts_applied();
      if (now == parts) break;
      parts = now;
    }
    return parts;
  };
  int cut = 0;  // kills that left a clock's parts at the shard
  int kills = 0;
  for (; kills < 2 * kCutKills && cut < kCutKills; ++kills) {
    std::vector<std::string> args = CutLda(client_dir, kills > 0);
    args.push_back(servers);
    RunAndKillWhen(args, clocks_, [&] { return parts_applied() > 0; });
    cut += settled_parts() > 0;
  }
  std::vector<std::string> args = CutLda(client_dir, true);
  args.push_back(servers);
  RunResult r = Run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(cut, kCutKills - 1) << "kills while a clock was half applied, of " << kills;
  EXPECT_GE(ShardCounter(observer.get(), "undone_parts"), cut);
  std::printf("%d of %d kills cut a clock; %lld part(s) taken back\n", cut, kills,
              static_cast<long long>(ShardCounter(observer.get(), "undone_parts")));
  observer.reset();
  paced.Signal(SIGTERM);
  int st = 0;
  ASSERT_TRUE(paced.Wait(kTimeoutMs, &st).ok());
  ExpectExactCounts(client_dir, {Path("shard")});
}

// The same embedded: the store is reopened by the resumed process itself.
// The process runs with --v=1 --minloglevel=0; it is killed once its shard
// has logged that it holds parts of a clock and not logged that clock's
// completion for 10 ms. The store tells afterwards whether the clock was
// still incomplete at the kill.
TEST_F(LdaCutClockTest, EmbeddedKilledMidClockResumesExactly) {
  const std::string data = Path("embedded");
  constexpr std::string_view kHolds = "part(s) of its incomplete clock ";
  int cut = 0;
  for (int kill = 0; kill < kCutKills; ++kill) {
    std::vector<std::string> args = CutLda(data, kill > 0);
    args.insert(args.end(), {"--v=1", "--minloglevel=0"});
    const std::string log = Path("stderr." + std::to_string(runs_));
    std::string clock;  // the incomplete clock seen, "" if none
    auto since = std::chrono::steady_clock::now();
    RunAndKillWhen(args, clocks_, [&] {
      const std::string text = ReadFile(log);
      if (!clock.empty() && text.find("completed its clock " + clock + " ") != std::string::npos) {
        clock.clear();
      }
      if (clock.empty()) {
        const size_t at = text.rfind(kHolds);
        if (at == std::string::npos) return false;
        const size_t begin = at + kHolds.size();
        const std::string c = text.substr(begin, text.find('\n', begin) - begin);
        if (text.find("completed its clock " + c + " ") != std::string::npos) return false;
        clock = c;
        since = std::chrono::steady_clock::now();
        return false;
      }
      return std::chrono::steady_clock::now() - since >= std::chrono::milliseconds(10);
    });
    std::unique_ptr<ShardStore> store;
    ASSERT_TRUE(ShardStore::OpenForInspection(data, 8, &store).ok());
    cut += store->AppliedParts(0) > 0;
  }
  RunResult r = Run(CutLda(data, true));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(cut, kCutKills - 1) << "kills while a clock was half applied";
  std::printf("embedded: %d of %d kills cut a clock\n", cut, kCutKills);
  ExpectExactCounts(data);
}

}  // namespace
}  // namespace pace
