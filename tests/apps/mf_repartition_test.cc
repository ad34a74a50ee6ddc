// pace_mf resumed on another cluster, with real processes (paced shards,
// pace_mf clients, pacectl checkpoint create / restore), under bsp.
//
// What is exact: a job of one client process with one worker is a function
// of its inputs (each clock reads every row as of the clock's start and adds
// its changes at the end). A job of several processes is not: bsp lets a
// Read see other processes' updates of the same clock that reached the
// shard first (docs/design.md, "SSP: pull"), so two runs of it differ by
// more than rounding and nothing can be compared with it cell for cell.
// - Another shard count: a 1-client job of 2 shards stopped at clock kStop,
//   re-sharded onto 3 (pacectl checkpoint restore --num_shards=3) and
//   resumed to kClocks ends within float rounding of the uninterrupted run.
// - Another client count: a 2-client job stopped at kStop is restored for 1
//   client (3 shards) and for 3 clients (1 shard) and resumed. pace_mf says
//   it re-partitions, the job record shows the new split, and:
//   1 client: the factors match ContinuePlainMf, the bsp SGD of the new split
//   (PartitionByUser, MinibatchWindow of each part) from the factors the
//   stopped job stored at kStop, within float rounding; and differ by far
//   more than rounding from the same SGD with the old split (so the split
//   changed the result). 3 clients: every process trains exactly the ratings
//   of its part of the 3-way split, and the final test RMSE is close to the
//   3-part SGD's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "apps/mf/mf_model.h"
#include "apps/mf/ratings_data.h"
#include "tests/testing/binary_test.h"
#include "tests/testing/offline_job.h"
#include "tests/testing/run_binary.h"
#include "tests/testing/subprocess.h"

namespace pace {
namespace {

using testing::RunResult;
using testing::Subprocess;

constexpr int kTimeoutMs = 60000;
constexpr int kRank = 8;
constexpr int kStop = 3;
constexpr int kClocks = 8;
constexpr double kLr = 0.05;
constexpr double kMinibatch = 0.5;
constexpr uint64_t kSeed = 3;
// Float rounding (the order of float additions on the shards), grown over
// kClocks - kStop clocks of SGD; the factors are of order 0.1 to 1.
constexpr double kRounding = 1e-5;

// A table's rows from a pacectl csv export: row id -> cells as printed.
std::map<uint64_t, std::vector<std::string>> ParseCsv(const std::string& csv) {
  std::map<uint64_t, std::vector<std::string>> rows;
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string cell;
    std::getline(f, cell, ',');
    std::vector<std::string>& cells = rows[std::stoull(cell)];
    while (std::getline(f, cell, ',')) cells.push_back(cell);
  }
  return rows;
}

// A float table's rows: row id -> values.
using Rows = std::map<uint64_t, std::vector<double>>;

// The largest difference between the factor rows of two models.
double MaxDiff(const Rows& a, const Rows& b) {
  double diff = 0;
  EXPECT_EQ(a.size(), b.size());
  for (const auto& [row, values] : a) {
    auto it = b.find(row);
    if (it == b.end() || it->second.size() != values.size()) {
      ADD_FAILURE() << "row " << row << " differs in shape";
      return INFINITY;
    }
    for (size_t k = 0; k < values.size(); ++k) {
      diff = std::max(diff, std::fabs(values[k] - it->second[k]));
    }
  }
  return diff;
}

class MfRepartitionTest : public testing::BinaryTest {
 protected:
  // Runs the job's `clients` pace_mf processes to `clocks` against paced on
  // `dirs`; returns their stdouts.
  std::vector<std::string> Mf(const std::vector<std::string>& dirs, uint32_t clients, int clocks,
                              bool resume) {
    std::string servers;
    Status s = shards_.Start(dirs, clients, &servers);
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::vector<std::unique_ptr<Subprocess>> procs;
    std::vector<std::string> errs;
    for (uint32_t i = 0; i < clients; ++i) {
      std::vector<std::string> args = {"pace_mf",
                                       "--train=" + Path("train.txt"),
                                       "--test=" + Path("test.txt"),
                                       "--rank=" + std::to_string(kRank),
                                       "--lr=" + std::to_string(kLr),
                                       "--minibatch=" + std::to_string(kMinibatch),
                                       "--seed=" + std::to_string(kSeed),
                                       "--consistency=bsp",
                                       "--workers=1",
                                       "--clocks=" + std::to_string(clocks),
                                       "--servers=" + servers,
                                       "--client_id=" + std::to_string(i),
                                       "--num_clients=" + std::to_string(clients),
                                       "--data_dir=" + Path("client" + std::to_string(i))};
      if (resume) args.push_back("--resume");
      procs.push_back(std::make_unique<Subprocess>());
      errs.push_back(NextErrPath());
      EXPECT_TRUE(testing::StartBinary(procs.back().get(), args, errs.back()).ok());
    }
    std::vector<std::string> outs;
    for (uint32_t i = 0; i < clients; ++i) {
      RunResult r = testing::FinishBinary(procs[i].get(), errs[i], kTimeoutMs);
      EXPECT_EQ(r.exit_code, 0) << "client " << i << ": " << r.err;
      outs.push_back(r.out);
    }
    EXPECT_TRUE(shards_.Stop(kTimeoutMs).ok());
    return outs;
  }

  // Checkpoints the stopped stores `dirs` and re-shards them onto `m`
  // shards for `clients` client processes; returns the new shards' dirs.
  std::vector<std::string> Reshard(const std::vector<std::string>& dirs, uint32_t m,
                                   uint32_t clients, const std::string& out) {
    std::vector<std::string> out_dirs;
    Status s = testing::ReshardStores(dirs, m, clients, out, &out_dirs);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out_dirs;
  }

  // A table of every shard of `dirs`, offline, as printed.
  std::map<uint64_t, std::vector<std::string>> ExportCells(const std::vector<std::string>& dirs,
                                                           const std::string& table) {
    std::string csv;
    Status s =
        testing::ExportCsv(dirs, table, Path("export." + std::to_string(runs_++) + ".csv"), &csv);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return ParseCsv(csv);
  }
  Rows Export(const std::vector<std::string>& dirs, const std::string& table) {
    Rows rows;
    for (const auto& [row, cells] : ExportCells(dirs, table)) {
      for (const std::string& c : cells) rows[row].push_back(std::strtod(c.c_str(), nullptr));
    }
    return rows;
  }
  // Both factor tables, user rows first (row ids offset past the items').
  Rows Model(const std::vector<std::string>& dirs) {
    Rows model = Export(dirs, "mf.item");
    for (auto& [row, values] : Export(dirs, "mf.user")) model[row + (1ull << 40)] = values;
    return model;
  }

  // The job record's entries (docs/storage-format.md, "Job record").
  std::map<std::string, std::string> JobRecord(const std::vector<std::string>& dirs) {
    std::map<std::string, std::string> entries;
    for (const auto& [row, cells] : ExportCells(dirs, "mf.job")) {
      std::vector<int64_t> words;
      for (const std::string& c : cells) words.push_back(std::strtoll(c.c_str(), nullptr, 10));
      std::string text(words.size() * sizeof(int64_t), '\0');
      std::memcpy(text.data(), words.data(), text.size());
      text.resize(std::strlen(text.c_str()));
      const size_t eq = text.find('=');
      if (eq != std::string::npos) entries[text.substr(0, eq)] = text.substr(eq + 1);
    }
    return entries;
  }

  // The dataset as pace_mf loads it.
  mf::MfDataset Dataset() {
    mf::MfDataset data;
    std::vector<mf::RawRating> train, test;
    mf::RatingsReadInfo info;
    EXPECT_TRUE(mf::ReadRatings(Path("train.txt"), {}, &train, &info).ok());
    EXPECT_TRUE(mf::ReadRatings(Path("test.txt"), {}, &test, &info).ok());
    EXPECT_TRUE(mf::BuildDataset(train, test, 0.0, kSeed, &data).ok());
    return data;
  }

  // ContinuePlainMf from the factors the job in `dirs` holds at kStop, with
  // `workers` simulated workers, to kClocks; in Model's layout. *rmse: its
  // final test RMSE.
  Rows Oracle(const std::vector<std::string>& dirs, int workers, double* rmse) {
    const mf::MfDataset data = Dataset();
    const Rows users_at = Export(dirs, "mf.user"), items_at = Export(dirs, "mf.item");
    const uint32_t width = mf::RowWidth(kRank, true);
    auto dense = [&](const Rows& rows, const mf::IdMap& ids) {
      std::vector<float> out(size_t{ids.size()} * width);
      for (uint32_t i = 0; i < ids.size(); ++i) {
        auto it = rows.find(ids.raw(i));
        if (it == rows.end() || it->second.size() != width) {
          ADD_FAILURE() << "row " << ids.raw(i) << " was not written by clock " << kStop;
          continue;
        }
        for (uint32_t k = 0; k < width; ++k) out[size_t{i} * width + k] = it->second[k];
      }
      return out;
    };
    std::vector<float> users = dense(users_at, data.users), items = dense(items_at, data.items);
    mf::PlainMfOptions o;
    o.rank = kRank;
    o.lr = kLr;
    o.minibatch = kMinibatch;
    o.clocks = kClocks;
    o.seed = kSeed;
    o.workers = workers;
    *rmse = mf::ContinuePlainMf(data, o, kStop, users.data(), items.data(), nullptr)
                .final_test_rmse.value_or(NAN);
    Rows model;
    for (uint32_t i = 0; i < data.items.size(); ++i) {
      model[data.items.raw(i)].assign(items.begin() + size_t{i} * width,
                                      items.begin() + size_t{i + 1} * width);
    }
    for (uint32_t u = 0; u < data.users.size(); ++u) {
      model[data.users.raw(u) + (1ull << 40)].assign(users.begin() + size_t{u} * width,
                                                     users.begin() + size_t{u + 1} * width);
    }
    return model;
  }

  // The ratings part `part` of a `parts`-way split trains in clocks
  // kStop..kClocks-1.
  uint64_t PartRatings(uint32_t part, uint32_t parts) {
    mf::MfDataset data = Dataset();
    const std::vector<size_t> offsets = mf::PartitionByUser(parts, &data);
    uint64_t n = 0;
    for (int c = kStop; c < kClocks; ++c) {
      n += mf::MinibatchWindow(offsets[part + 1] - offsets[part], kMinibatch, c).count;
    }
    return n;
  }

  void SetUp() override {
    RunResult r = Run({"pace_gen", "ratings", "--users=200", "--items=150", "--rank=4",
                       "--ratings=8000", "--noise=0.5", "--seed=2", "--out=" + Path("train.txt"),
                       "--test_out=" + Path("test.txt"), "--test_fraction=0.1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  testing::ShardSet shards_;
};

// "# done: clocks A..B, N ratings in ..." -> N; 0 if missing.
uint64_t DoneRatings(const std::string& out) {
  const size_t at = out.find("# done: clocks ");
  if (at == std::string::npos) return 0;
  const size_t comma = out.find(", ", at);
  return comma == std::string::npos ? 0 : std::stoull(out.substr(comma + 2));
}

// "; test RMSE X (" -> X; NaN if missing.
double DoneRmse(const std::string& out) {
  const size_t at = out.find("; test RMSE ");
  return at == std::string::npos ? NAN : std::stod(out.substr(at + 12));
}

TEST_F(MfRepartitionTest, ReshardedOntoThreeShardsEndsAsTheUninterruptedRun) {
  const std::vector<std::string> whole = {Path("whole0"), Path("whole1")};
  Mf(whole, 1, kClocks, false);
  const std::vector<std::string> two = {Path("two0"), Path("two1")};
  Mf(two, 1, kStop, false);
  const std::vector<std::string> three = Reshard(two, 3, 1, Path("three"));
  const std::string out = Mf(three, 1, kClocks, true)[0];
  EXPECT_NE(out.find("resuming at clock " + std::to_string(kStop)), std::string::npos) << out;
  EXPECT_EQ(out.find("re-partitioned"), std::string::npos) << out;
  const double diff = MaxDiff(Model(three), Model(whole));
  EXPECT_LE(diff, kRounding);
  std::printf("re-sharded 2 -> 3 vs uninterrupted: max |difference| %.3g\n", diff);
}

TEST_F(MfRepartitionTest, ResumedWithOneOrThreeClientsRepartitionsTheRatings) {
  const std::vector<std::string> two = {Path("two0"), Path("two1")};
  Mf(two, 2, kStop, false);
  std::map<std::string, std::string> record = JobRecord(two);
  EXPECT_EQ(record["num_clients"], "2");
  EXPECT_EQ(record["workers"], "1");
  EXPECT_EQ(record["split_clock"], "0");

  for (uint32_t clients : {1u, 3u}) {
    SCOPED_TRACE(std::to_string(clients) + " client(s)");
    const uint32_t shards = clients == 1 ? 3 : 1;
    const std::vector<std::string> dirs =
        Reshard(two, shards, clients, Path("to" + std::to_string(clients)));
    const std::vector<std::string> outs = Mf(dirs, clients, kClocks, true);
    ASSERT_EQ(outs.size(), clients);
    EXPECT_NE(outs[0].find("# the job was split as 2 clients x 1 worker from clock 0; from clock " +
                           std::to_string(kStop) + " on it is " + std::to_string(clients) +
                           (clients == 1 ? " client" : " clients") +
                           " x 1 worker: the ratings are re-partitioned"),
              std::string::npos)
        << outs[0];
    record = JobRecord(dirs);
    EXPECT_EQ(record["num_clients"], std::to_string(clients));
    EXPECT_EQ(record["workers"], "1");
    EXPECT_EQ(record["split_clock"], std::to_string(kStop));
    EXPECT_EQ(record["app"], "pace_mf");
    for (uint32_t i = 0; i < clients; ++i) {
      EXPECT_EQ(DoneRatings(outs[i]), PartRatings(i, clients)) << "client " << i << outs[i];
    }

    double rmse = 0;
    const Rows oracle = Oracle(two, static_cast<int>(clients), &rmse);
    const double diff = MaxDiff(Model(dirs), oracle);
    const double rmse_diff = std::fabs(DoneRmse(outs[0]) - rmse);
    std::printf(
        "%u client(s): max |difference| to the oracle %.3g; test RMSE %.4f, the oracle's %.4f\n",
        clients, diff, DoneRmse(outs[0]), rmse);
    EXPECT_LE(rmse_diff, 0.01);
    if (clients > 1) continue;  // not a function of its inputs (above)
    EXPECT_LE(diff, kRounding);
    // The split matters: the old split from the same factors ends elsewhere.
    double old_rmse = 0;
    const double old = MaxDiff(oracle, Oracle(two, 2, &old_rmse));
    EXPECT_GT(old, 100 * kRounding);
    std::printf("the old split's SGD differs by %.3g\n", old);
  }
}

}  // namespace
}  // namespace pace
