// The job record (docs/design.md, "Jobs and --resume"): --resume continues only the job the
// store holds and refuses, with one line and exit 1, anything else: another
// table prefix, other model flags, other input data, another app, a missing
// store, an embedded run started by a launcher with several processes. A
// refused run creates nothing (no table, no data dir, no CSV file). Also:
// --csv on --resume appends, --export=DIR is checked before training.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

size_t CountLines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

class AppsResumeTest : public ::testing::Test {
 protected:
  // Runs args[0] from the build's bin dir; `env` entries (NAME=VALUE) go
  // through /usr/bin/env.
  RunResult Run(std::vector<std::string> args, const std::vector<std::string>& env = {}) {
    return testing::RunBinary(args, Path("stderr." + std::to_string(runs_++)), env);
  }
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  void SetUp() override {
    RunResult r = Run({"pace_gen", "ratings", "--users=200", "--items=150", "--rank=4",
                       "--ratings=8000", "--noise=0.5", "--seed=2", "--out=" + Path("train.txt"),
                       "--test_out=" + Path("test.txt"), "--test_fraction=0.1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = Run({"pace_gen", "corpus", "--docs=60", "--vocab=80", "--topics=3", "--doc_len=20",
             "--seed=2", "--out_docword=" + Path("docword.txt"),
             "--out_vocab=" + Path("vocab.txt")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  std::vector<std::string> Mf(const std::string& data_dir, int clocks) {
    return {"pace_mf",     "--train=" + Path("train.txt"),       "--test=" + Path("test.txt"),
            "--workers=1", "--clocks=" + std::to_string(clocks), "--data_dir=" + data_dir};
  }
  std::vector<std::string> Lda(const std::string& data_dir) {
    return {"pace_lda",       "--docword=" + Path("docword.txt"),
            "--workers=1",    "--clocks=2",
            "--topics_out=0", "--data_dir=" + data_dir};
  }
  // The store's tables, as pacectl lists them.
  std::string Tables(const std::string& data_dir) {
    RunResult r = Run({"pacectl", "--data_dir=" + data_dir, "tables"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }
  // Expects a refusal: exit 1, one line on stderr holding every `expect`,
  // no clock line, and the store's tables unchanged.
  void ExpectRefused(const RunResult& r, const std::vector<std::string>& expect,
                     const std::string& data_dir, const std::string& tables_before) {
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_EQ(CountLines(r.err), 1u) << r.err;
    for (const std::string& e : expect) EXPECT_NE(r.err.find(e), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("seconds"), std::string::npos) << r.out;  // no clock table
    if (!data_dir.empty()) {
      EXPECT_EQ(Tables(data_dir), tables_before);
    }
  }

  TempDir dir_;
  int runs_ = 0;
};

TEST_F(AppsResumeTest, ResumeRefusesAnotherJobAndCreatesNothing) {
  const std::string mf = Path("mf-data");
  RunResult r = Run(Mf(mf, 3));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string tables = Tables(mf);
  EXPECT_NE(tables.find("mf.job"), std::string::npos) << tables;

  auto with = [&](std::vector<std::string> args, const std::vector<std::string>& more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  // Another table prefix: the store's job is 'mf' at clock 3.
  r = Run(with(Mf(mf, 6), {"--resume", "--table_prefix=mf2", "--csv=" + Path("a.csv")}));
  ExpectRefused(r, {"--resume", "'mf' at clock 3", "--table_prefix=mf"}, mf, tables);
  EXPECT_FALSE(Exists(Path("a.csv")));
  // Flags that shape the model.
  r = Run(with(Mf(mf, 6), {"--resume", "--rank=8"}));
  ExpectRefused(r, {"--rank=16", "--rank=8"}, mf, tables);
  r = Run(with(Mf(mf, 6), {"--resume", "--lr=0.5"}));
  ExpectRefused(r, {"--lr="}, mf, tables);
  r = Run(with(Mf(mf, 6), {"--resume", "--consistency=bsp"}));
  ExpectRefused(r, {"--consistency=essp"}, mf, tables);
  // Other training data (the test file as training data).
  std::vector<std::string> other_data = Mf(mf, 6);
  other_data[1] = "--train=" + Path("test.txt");
  r = Run(with(other_data, {"--resume"}));
  ExpectRefused(r, {"input data differ", "train.txt"}, mf, tables);
  // Another app, with and without --resume: no lda.* table appears.
  r = Run(with(Lda(mf), {"--resume"}));
  ExpectRefused(r, {"pace_mf job 'mf'", "not a pace_lda job"}, mf, tables);
  r = Run(Lda(mf));
  ExpectRefused(r, {"pace_mf job 'mf'", "not a pace_lda job"}, mf, tables);
  // A fresh run of the same job refuses too and points at --resume.
  r = Run(Mf(mf, 6));
  ExpectRefused(r, {"pass --resume"}, mf, tables);

  // The same job resumes, and its CSV gets the new clocks appended.
  r = Run(with(Mf(mf, 5), {"--resume", "--csv=" + Path("resumed.csv")}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Run(with(Mf(mf, 7), {"--resume", "--csv=" + Path("resumed.csv")}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string csv = ReadFile(Path("resumed.csv"));
  EXPECT_EQ(CountLines(csv), 1u + 4u) << csv;  // header once, clocks 3..6
  EXPECT_EQ(csv.find("clock,"), 0u) << csv;
  EXPECT_EQ(csv.find("clock,", 1), std::string::npos) << csv;
  EXPECT_NE(csv.find("\n6,"), std::string::npos) << csv;
}

// Without --lr the step size comes from a search; the job record is checked
// before it (a store of another job or other data is refused at once, naming
// what differs, never --lr, a flag the user did not give), and --resume keeps
// the recorded step instead of searching again.
TEST_F(AppsResumeTest, RecordIsCheckedBeforeTheStepSearchAndResumeKeepsTheStep) {
  const std::string mf = Path("mf-data");
  RunResult r = Run(Mf(mf, 3));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string searched = "# step size --lr=";
  const size_t at = r.out.find(searched);
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string lr =
      r.out.substr(at + searched.size(), r.out.find(',', at) - at - searched.size());
  EXPECT_NE(r.out.find("-clock search", at), std::string::npos) << r.out;

  std::vector<std::string> resume = Mf(mf, 5);
  resume.push_back("--resume");
  r = Run(resume);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("# step size --lr=" + lr + ", recorded by the job\n"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("search"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# done: clocks 3..4"), std::string::npos) << r.out;
  const std::string tables_after = Tables(mf);

  // Other training data on --resume: refused for its data, before any search.
  std::vector<std::string> other = resume;
  other[1] = "--train=" + Path("test.txt");
  r = Run(other);
  ExpectRefused(r, {"input data differ"}, mf, tables_after);
  EXPECT_EQ(r.err.find("--lr"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("search"), std::string::npos) << r.out;
  // A fresh run on the store: pointed at --resume, before any search.
  r = Run(Mf(mf, 6));
  ExpectRefused(r, {"pass --resume"}, mf, tables_after);
  EXPECT_EQ(r.out.find("search"), std::string::npos) << r.out;
}

TEST_F(AppsResumeTest, LdaStoreRefusesMfAndLdaResume) {
  const std::string lda = Path("lda-data");
  RunResult r = Run(Lda(lda));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string tables = Tables(lda);
  std::vector<std::string> mf = Mf(lda, 4);
  mf.push_back("--resume");
  r = Run(mf);
  ExpectRefused(r, {"pace_lda job 'lda'", "not a pace_mf job"}, lda, tables);
  // The LDA job is complete: --resume with the same clocks has nothing to do.
  std::vector<std::string> again = Lda(lda);
  again.push_back("--resume");
  r = Run(again);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("nothing to train"), std::string::npos) << r.out;
  EXPECT_EQ(Tables(lda), tables);
}

TEST_F(AppsResumeTest, RefusalsBeforeAnyStoreExists) {
  // --resume of a store that does not exist.
  std::vector<std::string> args = Mf(Path("missing"), 3);
  args.push_back("--resume");
  RunResult r = Run(args);
  ExpectRefused(r, {"does not exist", "without --resume"}, "", "");
  EXPECT_FALSE(Exists(Path("missing")));
  // A launcher that started two processes, without --servers.
  for (const char* var : {"OMPI_COMM_WORLD_SIZE=2", "PMI_SIZE=2", "SLURM_NTASKS=2"}) {
    r = Run(Mf(Path("launched"), 3), {var});
    ExpectRefused(r, {"--servers", var}, "", "");
    EXPECT_FALSE(Exists(Path("launched")));
  }
  // A launcher of one process is an ordinary embedded run, and so is one
  // process in a larger allocation that says it is the only one.
  r = Run(Mf(Path("one"), 1), {"OMPI_COMM_WORLD_SIZE=1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> alone = Mf(Path("alone"), 1);
  alone.push_back("--num_clients=1");
  r = Run(alone, {"SLURM_NTASKS=4"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // --export into a directory that cannot be created: refused before training.
  args = Mf(Path("exp"), 3);
  args.push_back("--export=" + Path("no/such/dir"));
  r = Run(args);
  ExpectRefused(r, {"--export"}, "", "");
  EXPECT_FALSE(Exists(Path("exp")));
}

// SIGINT / SIGTERM stop pace_mf at a clock boundary with one line naming the
// clock, and --resume continues exactly there.
TEST_F(AppsResumeTest, SignalStopsAtAClockAndResumeContinuesThere) {
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string data = Path("signal-data-" + std::to_string(sig));
    const std::string csv = Path("signal-" + std::to_string(sig) + ".csv");
    std::vector<std::string> args = Mf(data, 1000000);
    args[0] = BinaryDir() + "/pace_mf";
    args.push_back("--csv=" + csv);
    const std::string err_path = Path("signal.err." + std::to_string(sig));
    Subprocess p;
    ASSERT_TRUE(p.Start(args, err_path).ok());
    std::string line;
    bool training = false;
    while (!training && p.ReadLine(&line, kTimeoutMs).ok()) {
      training = line.find("     2 ") == 0;  // the clock-2 line
    }
    ASSERT_TRUE(training) << ReadFile(err_path);
    p.Signal(sig);
    while (p.ReadLine(&line, kTimeoutMs).ok()) {
    }
    int st = 0;
    ASSERT_TRUE(p.Wait(kTimeoutMs, &st).ok());
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), 128 + sig);
    const std::string err = ReadFile(err_path);
    const std::string prefix = "pace_mf: stopped at clock ";
    ASSERT_EQ(err.find(prefix), 0u) << err;
    EXPECT_NE(err.find("; rerun the same command with --resume\n"), std::string::npos) << err;
    const long long at = std::stoll(err.substr(prefix.size()));
    EXPECT_GE(at, 3);

    // Every clock before the stop is reported.
    EXPECT_EQ(CountLines(ReadFile(csv)), 1u + static_cast<size_t>(at)) << ReadFile(csv);
    std::vector<std::string> resume = Mf(data, static_cast<int>(at) + 2);
    resume.push_back("--resume");
    resume.push_back("--csv=" + csv);
    RunResult r = Run(resume);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("resuming at clock " + std::to_string(at) + "\n"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("# done: clocks " + std::to_string(at) + ".."), std::string::npos)
        << r.out;
    // One CSV of clocks 0 .. at + 1 without a gap or a second header.
    const std::string text = ReadFile(csv);
    EXPECT_EQ(CountLines(text), 1u + static_cast<size_t>(at) + 2u) << text;
    for (long long c = 0; c < at + 2; ++c) {
      EXPECT_NE(text.find("\n" + std::to_string(c) + ","), std::string::npos) << c << "\n" << text;
    }
  }
}

}  // namespace
}  // namespace pace
