// Resume on another number of shards, with real processes: a pace_lda job on
// 2 paced shards is stopped at clock 8, its shards checkpointed (pacectl
// checkpoint create), re-sharded onto 3 (pacectl checkpoint restore
// --num_shards=3), resumed there to clock 14, re-sharded from 3 onto 1 and
// resumed to the end. The word-topic and topic-total counts (integer tables)
// then equal those of an uninterrupted run on 2 shards, cell for cell. One
// worker and one client make the sampler's result a function of the seed, so
// equality is the test. Also: paced refuses a store of another shard count
// in one line naming the command, and pace_lda a resume with another number
// of client processes in one line naming both splits.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/testing/binary_test.h"
#include "tests/testing/offline_job.h"
#include "tests/testing/run_binary.h"
#include "tests/testing/subprocess.h"

namespace pace {
namespace {

using testing::ReadFile;
using testing::RunResult;
using testing::Subprocess;

constexpr int kTimeoutMs = 60000;

class ReshardResumeTest : public testing::BinaryTest {
 protected:
  // Starts paced on every dir of `dirs` (shard k of dirs.size()); returns
  // the --servers flag.
  std::string StartShards(const std::vector<std::string>& dirs) {
    std::string servers;
    Status s = shards_.Start(dirs, 1, &servers);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return "--servers=" + servers;
  }
  void StopShards() { EXPECT_TRUE(shards_.Stop(kTimeoutMs).ok()); }

  void Lda(const std::string& client_dir, int clocks, const std::string& servers, bool resume) {
    std::vector<std::string> args = {"pace_lda",
                                     "--docword=" + Path("docword.txt"),
                                     "--topics=4",
                                     "--workers=1",
                                     "--clocks=" + std::to_string(clocks),
                                     "--topics_out=0",
                                     "--data_dir=" + client_dir,
                                     servers};
    if (resume) args.push_back("--resume");
    RunResult r = Run(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (resume) {
      EXPECT_NE(r.out.find("resuming at clock "), std::string::npos) << r.out;
    }
  }

  // Checkpoints the stopped stores `dirs` and re-shards them onto `m`
  // shards under `out`; returns the new shards' data dirs.
  std::vector<std::string> Reshard(const std::vector<std::string>& dirs, uint32_t m,
                                   const std::string& out) {
    std::vector<std::string> out_dirs;
    std::string printed;
    Status s = testing::ReshardStores(dirs, m, 0, out, &out_dirs, &printed);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_NE(printed.find("onto " + std::to_string(m) + " shard(s) in " + out), std::string::npos)
        << printed;
    return out_dirs;
  }

  // A table of every shard of `dirs` as CSV, rows in order (one merged export).
  std::string Export(const std::vector<std::string>& dirs, const std::string& table) {
    std::string csv;
    Status s =
        testing::ExportCsv(dirs, table, Path("export." + std::to_string(runs_++) + ".csv"), &csv);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return csv;
  }

  void SetUp() override {
    RunResult r = Run({"pace_gen", "corpus", "--docs=200", "--vocab=100", "--topics=4",
                       "--doc_len=40", "--seed=5", "--out_docword=" + Path("docword.txt"),
                       "--out_vocab=" + Path("vocab.txt")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  testing::ShardSet shards_;
};

TEST_F(ReshardResumeTest, TwoToThreeToOneEndsAsTheUninterruptedRun) {
  const std::vector<std::string> whole = {Path("whole0"), Path("whole1")};
  std::string servers = StartShards(whole);
  Lda(Path("client-whole"), 20, servers, false);
  StopShards();

  const std::vector<std::string> two = {Path("two0"), Path("two1")};
  servers = StartShards(two);
  Lda(Path("client"), 8, servers, false);
  StopShards();

  // paced on a 2-shard store told --num_shards=3: one line, the command.
  Subprocess refused;
  uint16_t port = 0;
  Status s = testing::StartPaced(&refused, two[0], 0, 3, 1, {}, &port);
  EXPECT_FALSE(s.ok());
  int st = 0;
  ASSERT_TRUE(refused.Wait(kTimeoutMs, &st).ok());
  const std::string err = ReadFile(two[0] + ".stderr.log");
  EXPECT_NE(err.find("paced: cannot open --data_dir=" + two[0] +
                     ": the store holds shard 0 of a job of 2 shards, not of 3"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("pacectl checkpoint restore CKPT0,CKPT1,... --num_shards=3 --out=DIR"),
            std::string::npos)
      << err;

  const std::vector<std::string> three = Reshard(two, 3, Path("three"));
  servers = StartShards(three);
  Lda(Path("client"), 14, servers, true);
  StopShards();

  const std::vector<std::string> one = Reshard(three, 1, Path("one"));
  servers = StartShards(one);
  Lda(Path("client"), 20, servers, true);
  StopShards();

  for (const char* table : {"lda.word_topic", "lda.topic_totals"}) {
    const std::string expected = Export(whole, table);
    EXPECT_GT(expected.size(), 30u) << table;
    EXPECT_EQ(Export(one, table), expected) << table;
  }

  // Restored for 2 client processes: pace_lda cannot continue with another
  // split of its documents (each worker's token assignments are its state)
  // and refuses in one line naming both splits, before training anything.
  std::vector<std::string> two_clients;
  s = testing::ReshardStores(one, 1, 2, Path("two-clients"), &two_clients);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::string list;
  ASSERT_TRUE(shards_.Start(two_clients, 2, &list).ok());
  RunResult r = Run({"pace_lda", "--docword=" + Path("docword.txt"), "--topics=4", "--workers=1",
                     "--clocks=30", "--topics_out=0", "--data_dir=" + Path("client"),
                     "--servers=" + list, "--client_id=0", "--num_clients=2", "--resume"});
  StopShards();
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("FailedPrecondition"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("split into 1 parts; this run splits them into 2 (--num_clients x "
                       "--workers): pace_lda resumes only with the split it started with"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("seconds"), std::string::npos) << r.out;  // nothing trained
  EXPECT_EQ(Export(two_clients, "lda.word_topic"), Export(whole, "lda.word_topic"));
}

// An embedded job's scheduled checkpoints: every 3 shard clocks, the newest 2
// kept; pacectl checkpoint list shows them with their space.
TEST_F(ReshardResumeTest, EmbeddedCheckpointsKeepTheNewest) {
  const std::string data = Path("embedded");
  RunResult r = Run({"pace_lda", "--docword=" + Path("docword.txt"), "--topics=4", "--workers=1",
                     "--clocks=12", "--topics_out=0", "--straggler_ms=250", "--straggler_prob=1",
                     "--checkpoint_every=3", "--checkpoint_keep=2", "--data_dir=" + data});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Run({"pacectl", "checkpoint", "list", data + "/checkpoints", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t listed = 0;
  for (size_t at = r.out.find("\"path\""); at != std::string::npos;
       at = r.out.find("\"path\"", at + 1)) {
    ++listed;
  }
  EXPECT_EQ(listed, 2u) << r.out;
  EXPECT_NE(r.out.find("\"exclusive_bytes\":"), std::string::npos) << r.out;
  r = Run({"pacectl", "checkpoint", "list", "--data_dir=" + data});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2 checkpoint(s): "), std::string::npos) << r.out;
  // With --servers the flags belong to paced.
  r = Run({"pace_lda", "--docword=" + Path("docword.txt"), "--topics=4", "--clocks=2",
           "--checkpoint_every=3", "--servers=127.0.0.1:1", "--data_dir=" + Path("remote")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--checkpoint_every is for embedded runs"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pace
