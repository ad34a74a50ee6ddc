#include "apps/mf/mf_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "apps/mf/mapped_floats.h"
#include "apps/shared/random.h"

namespace pace {
namespace mf {
namespace {

TEST(SgdTest, UpdateMatchesHandComputation) {
  SgdParams p;
  p.rank = 2;
  p.biases = true;
  p.mean = 3.0f;
  p.lr = 0.1f;
  p.lambda_user = 0.5f;
  p.lambda_item = 0.25f;
  p.bias_lambda = 2.0f;
  float u[3] = {1.0f, 2.0f, 0.5f};
  float v[3] = {0.5f, -1.0f, -0.25f};
  // prediction = 3 + 0.5 - 0.25 + (0.5 - 2) = 1.75; rating 4 -> e = 2.25
  EXPECT_FLOAT_EQ(Predict(u, v, p), 1.75f);
  // Bias penalty shares: the user has 2 ratings (1/2), the item 4 (1/4).
  float e = SgdUpdate(u, v, 4.0f, 0.5f, 0.25f, p);
  EXPECT_FLOAT_EQ(e, 2.25f);
  EXPECT_FLOAT_EQ(u[0], 1.0f + 0.1f * (2.25f * 0.5f - 0.5f * 1.0f));
  EXPECT_FLOAT_EQ(v[1], -1.0f + 0.1f * (2.25f * 2.0f - 0.25f * -1.0f));
  EXPECT_FLOAT_EQ(u[2], 0.5f + 0.1f * (2.25f - 1.0f * 0.5f));
  // -0.25 + 0.2375 cancels most digits: the error of e (EXPECT_FLOAT_EQ
  // allows 4 ulps of 2.25, ~1e-6; the compiler may order the prediction's sum
  // differently) is ~100 ulps of the result here, so compare absolutely.
  EXPECT_NEAR(v[2], -0.25f + 0.1f * (2.25f + 0.5f * 0.25f), 1e-6);

  p.biases = false;
  float a[2] = {1, 1}, b[2] = {2, 3};
  EXPECT_FLOAT_EQ(Predict(a, b, p), 5.0f);  // no mean, no biases
  EXPECT_EQ(RowWidth(16, true), 17u);
  EXPECT_EQ(RowWidth(16, false), 16u);
}

TEST(SgdTest, RegWeightsAreInverseCounts) {
  MfDataset d;
  ASSERT_TRUE(BuildDataset({{1, 1, 1}, {1, 2, 1}, {2, 2, 1}, {3, 2, 1}}, {}, 0, 1, &d).ok());
  RegWeights w = ComputeRegWeights(d);
  EXPECT_FLOAT_EQ(w.user[d.users.Find(1)], 0.5f);
  EXPECT_FLOAT_EQ(w.user[d.users.Find(3)], 1.0f);
  EXPECT_FLOAT_EQ(w.item[d.items.Find(2)], 1.0f / 3);
}

// The factor penalty per step is lambda over the mean number of ratings per
// row: 4 ratings of 3 users and 2 items.
TEST(SgdTest, FactorPenaltiesUseMeanCounts) {
  MfDataset d;
  ASSERT_TRUE(BuildDataset({{1, 1, 1}, {1, 2, 1}, {2, 2, 1}, {3, 2, 1}}, {}, 0, 1, &d).ok());
  SgdParams p;
  SetFactorPenalties(d, 2.0, &p);
  EXPECT_FLOAT_EQ(p.lambda_user, 2.0f * 3 / 4);
  EXPECT_FLOAT_EQ(p.lambda_item, 2.0f / 2);
}

TEST(SgdTest, StepSizeAndClip) {
  EXPECT_DOUBLE_EQ(StepSize(0.1, 0, 0.5), 0.1);
  EXPECT_DOUBLE_EQ(StepSize(0.1, 3, 0.5), 0.05);
  EXPECT_DOUBLE_EQ(StepSize(0.1, 3, 1.0), 0.025);
  EXPECT_DOUBLE_EQ(StepSize(0.1, 9, 0.0), 0.1);
  EXPECT_EQ(Clip(7, 1, 5), 5);
  EXPECT_EQ(Clip(-1, 1, 5), 1);
}

TEST(PartitionTest, PartsCoverEverythingOnceAndWindowsCycle) {
  std::vector<uint32_t> order = ShuffledOrder(1000, 3);
  EXPECT_EQ(order, ShuffledOrder(1000, 3));
  EXPECT_NE(order, ShuffledOrder(1000, 4));
  std::set<uint32_t> seen(order.begin(), order.end());
  EXPECT_EQ(seen.size(), 1000u);
  size_t total = 0, prev_end = 0;
  for (uint32_t p = 0; p < 7; ++p) {
    Range r = PartOf(1000, p, 7);
    EXPECT_EQ(r.begin, prev_end);
    prev_end = r.end;
    total += r.size();
  }
  EXPECT_EQ(total, 1000u);
  Window w0 = MinibatchWindow(10, 0.3, 0), w1 = MinibatchWindow(10, 0.3, 1),
         w3 = MinibatchWindow(10, 0.3, 3);
  EXPECT_EQ(w0.count, 3u);
  EXPECT_EQ(w0.start, 0u);
  EXPECT_EQ(w1.start, 3u);
  EXPECT_EQ(w3.start, 9u);  // wraps: positions 9, 0, 1
  EXPECT_EQ(MinibatchWindow(10, 1e-6, 5).count, 1u);
  EXPECT_EQ(MinibatchWindow(10, 1.0, 5).start, 0u);
  EXPECT_EQ(MinibatchWindow(0, 1.0, 5).count, 0u);
}

// Ratings from known biases only: the bias baseline must recover them.
TEST(BiasBaselineTest, RecoversPlantedBiases) {
  std::vector<RawRating> raw;
  apps::Rng rng(1);
  for (uint64_t u = 0; u < 50; ++u) {
    for (uint64_t i = 0; i < 40; ++i) {
      raw.push_back({u * 3 + 1, i * 5 + 2, static_cast<float>(3.0 + 0.02 * u - 0.03 * i)});
    }
  }
  MfDataset d;
  ASSERT_TRUE(BuildDataset(raw, {}, 0.1, 1, &d).ok());
  BiasModel m = FitBiasBaseline(d, 0.0, 20);
  auto rmse = Rmse(d.test, d.min_rating, d.max_rating,
                   [&](const Rating& r) { return m.Predict(r.user, r.item); });
  ASSERT_TRUE(rmse.has_value());
  EXPECT_LT(*rmse, 0.01);
  EXPECT_FALSE(Rmse({}, 0, 1, [](const Rating&) { return 0.0; }).has_value());
}

// The plain SGD loop fits an exactly rank-2 matrix (no noise) to a small error.
TEST(PlainMfTest, FitsTinyLowRankMatrix) {
  std::vector<RawRating> raw;
  apps::Rng rng(5);
  std::vector<double> a(60), b(60), c(40), e(40);
  for (auto* v : {&a, &b})
    for (double& x : *v) x = rng.Uniform() * 2 - 1;
  for (auto* v : {&c, &e})
    for (double& x : *v) x = rng.Uniform() * 2 - 1;
  for (uint64_t u = 0; u < 60; ++u) {
    for (uint64_t i = 0; i < 40; ++i) {
      if (rng.Uniform() < 0.6) {
        raw.push_back({u, i, static_cast<float>(a[u] * c[i] + b[u] * e[i])});
      }
    }
  }
  MfDataset d;
  ASSERT_TRUE(BuildDataset(raw, {}, 0.1, 1, &d).ok());
  PlainMfOptions o;
  o.rank = 4;
  o.biases = false;
  o.lr = 0.1;
  o.lr_power = 0.5;
  o.init_scale = 0.1;
  o.lambda = 0.01;
  o.clocks = 300;
  o.eval_every = 1000;
  std::vector<double> losses;
  PlainMfSummary s =
      RunPlainMf(d, o, [&](const MfClockResult& r) { losses.push_back(r.train_loss); });
  ASSERT_EQ(losses.size(), 300u);
  EXPECT_LT(losses.back(), 0.1 * losses.front());
  ASSERT_TRUE(s.final_test_rmse.has_value());
  EXPECT_LT(*s.final_test_rmse, 0.1);
  EXPECT_EQ(s.ratings, 300u * d.train.size());
  EXPECT_GT(s.ratings_per_second, 0);
}

// Ratings 2 * a_u * c_i of a rank-1 model, half of 80 x 50 observed.
MfDataset RankOneData() {
  std::vector<RawRating> raw;
  apps::Rng rng(9);
  std::vector<double> a(80), c(50);
  for (double& x : a) x = rng.Uniform() * 2 - 1;
  for (double& x : c) x = rng.Uniform() * 2 - 1;
  for (uint64_t u = 0; u < 80; ++u) {
    for (uint64_t i = 0; i < 50; ++i) {
      if (rng.Uniform() < 0.5) raw.push_back({u, i, static_cast<float>(2 * a[u] * c[i])});
    }
  }
  MfDataset d;
  EXPECT_TRUE(BuildDataset(raw, {}, 0.1, 1, &d).ok());
  return d;
}

PlainMfOptions RankOneOptions() {
  PlainMfOptions o;
  o.rank = 2;
  o.biases = false;
  o.lr_power = 0.5;
  o.init_scale = 0.1;
  o.lambda = 0.01;
  o.clocks = 50;
  o.eval_every = 50;
  return o;
}

// RowOrderOf: the window's ratings (wrapping at the end of the part), each
// once, sorted by the raw id of their user, a user's ratings in window order.
TEST(RowOrderTest, SortsTheWindowByRawUserIdAndKeepsTiesInOrder) {
  IdMap users;
  // Interned in another order than their raw ids.
  const uint64_t raws[] = {50, 7, 900, 7000000000ull, 3};
  for (uint64_t r : raws) users.Intern(r);
  std::vector<Rating> part;
  apps::Rng rng(3);
  for (uint32_t k = 0; k < 40; ++k) {
    part.push_back(Rating{static_cast<uint32_t>(rng.Uniform() * 5) % 5, k, 0});
  }
  const Window w{30, 25};  // ratings 30..39, then 0..14
  std::vector<uint32_t> order;
  RowOrderOf(part.data(), part.size(), w, users, &order);
  ASSERT_EQ(order.size(), 25u);
  std::set<uint32_t> seen(order.begin(), order.end());
  EXPECT_EQ(seen.size(), 25u);
  for (uint32_t k : order) EXPECT_TRUE(k >= 30 || k < 15) << k;
  auto window_pos = [](uint32_t k) { return k >= 30 ? k - 30 : k + 10; };
  for (size_t j = 1; j < order.size(); ++j) {
    const uint64_t a = users.raw(part[order[j - 1]].user), b = users.raw(part[order[j]].user);
    ASSERT_LE(a, b) << "position " << j;
    if (a == b) {
      EXPECT_LT(window_pos(order[j - 1]), window_pos(order[j])) << "position " << j;
    }
  }
  RatingOrder o = RatingOrder::kData;
  EXPECT_TRUE(ParseRatingOrder("rows", &o).ok());
  EXPECT_EQ(o, RatingOrder::kRows);
  EXPECT_TRUE(ParseRatingOrder("auto", &o).ok());
  EXPECT_EQ(o, RatingOrder::kAuto);
  Status bad = ParseRatingOrder("random", &o);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.ToString().find("--order"), std::string::npos) << bad.ToString();
}

// The same model trained in user order converges as in file order (another
// sequence of steps, so not bit for bit).
TEST(PlainMfTest, UserOrderConvergesAsFileOrderDoes) {
  const MfDataset d = RankOneData();
  PlainMfOptions o = RankOneOptions();
  o.minibatch = 0.5;
  const PlainMfSummary file = RunPlainMf(d, o, [](const MfClockResult&) {});
  o.order = RatingOrder::kRows;
  const PlainMfSummary rows = RunPlainMf(d, o, [](const MfClockResult&) {});
  ASSERT_TRUE(file.final_test_rmse.has_value() && rows.final_test_rmse.has_value());
  EXPECT_EQ(rows.ratings, file.ratings);
  EXPECT_NE(*rows.final_test_rmse, *file.final_test_rmse);
  EXPECT_NEAR(*rows.final_test_rmse, *file.final_test_rmse, 0.05);
  EXPECT_LT(*rows.final_test_rmse, 0.2);
}

// The factor tables in a mapped file: the same losses and RMSE, bit for bit,
// as in plain memory (also with simulated workers), and no file left in the
// directory.
TEST(PlainMfTest, MappedFactorTablesGiveTheSameRun) {
  const MfDataset d = RankOneData();
  const std::string dir = ::testing::TempDir() + "/mf_mapped_" + std::to_string(::getpid());
  ASSERT_TRUE(std::filesystem::create_directories(dir));
  for (int workers : {1, 3}) {
    PlainMfOptions o = RankOneOptions();
    o.lr = 0.05;
    o.workers = workers;
    o.eval_every = 10;
    std::vector<double> plain_losses, mapped_losses;
    const PlainMfSummary plain =
        RunPlainMf(d, o, [&](const MfClockResult& r) { plain_losses.push_back(r.train_loss); });
    PlainMfSummary mapped;
    std::string file;
    ASSERT_TRUE(RunPlainMfMapped(
                    d, o, dir,
                    [&](const MfClockResult& r) { mapped_losses.push_back(r.train_loss); }, &mapped,
                    &file)
                    .ok());
    EXPECT_EQ(file.rfind(dir + "/", 0), 0u) << file;
    EXPECT_EQ(mapped_losses, plain_losses) << workers << " workers";
    ASSERT_TRUE(mapped.final_test_rmse.has_value());
    EXPECT_EQ(*mapped.final_test_rmse, *plain.final_test_rmse);
    EXPECT_LT(*mapped.final_test_rmse, 0.5);
    EXPECT_EQ(mapped.ratings, plain.ratings);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
  PlainMfSummary unused;
  const Status missing =
      RunPlainMfMapped(d, RankOneOptions(), dir + "/no/such/dir", nullptr, &unused);
  EXPECT_EQ(missing.code(), StatusCode::kIOError) << missing.ToString();
}

TEST(MappedFloatsTest, ZeroFilledWritableAndUnlinked) {
  const std::string dir = ::testing::TempDir();
  StatusOr<std::unique_ptr<MappedFloats>> m = MappedFloats::Create(dir, "mapped_floats_test", 5000);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  MappedFloats& a = **m;
  ASSERT_EQ(a.size(), 5000u);
  for (size_t k = 0; k < a.size(); ++k) ASSERT_EQ(a.data()[k], 0.0f);
  for (size_t k = 0; k < a.size(); ++k) a.data()[k] = static_cast<float>(k);
  EXPECT_EQ(a.data()[4999], 4999.0f);
  EXPECT_FALSE(std::filesystem::exists(a.path())) << a.path();
  EXPECT_FALSE(MappedFloats::Create(dir, "mapped_floats_test", 0).ok());
}

// Simulated workers start each clock from the same item rows and their
// changes add up: a step sequential SGD survives diverges with 8 of them,
// while a small step learns the model either way.
TEST(PlainMfTest, SimulatedWorkersOvershootWhereSequentialSgdDoesNot) {
  MfDataset d = RankOneData();
  PlainMfOptions o = RankOneOptions();
  for (int workers : {1, 8}) {
    o.workers = workers;
    o.lr = 0.1;
    PlainMfSummary s = RunPlainMf(d, o, nullptr);
    ASSERT_TRUE(s.final_test_rmse.has_value());
    EXPECT_LT(*s.final_test_rmse, 0.05) << workers << " workers";
    EXPECT_EQ(s.ratings, 50u * d.train.size()) << workers << " workers";
  }
  o.lr = 0.5;
  o.workers = 1;
  EXPECT_LT(RunPlainMf(d, o, nullptr).final_test_rmse.value_or(INFINITY), 0.05);
  o.workers = 8;
  EXPECT_FALSE(std::isfinite(RunPlainMf(d, o, nullptr).final_test_rmse.value_or(0)));
  // stop_when_diverged: the same NaN, without running the remaining clocks.
  o.stop_when_diverged = true;
  PlainMfSummary stopped = RunPlainMf(d, o, nullptr);
  EXPECT_FALSE(std::isfinite(stopped.final_test_rmse.value_or(0)));
  EXPECT_LT(stopped.ratings, 50u * d.train.size());
}

// With `margin`, a step whose next larger candidate diverges does not win.
TEST(StepSizeSearchTest, MarginSkipsAStepNextToOneThatDiverges) {
  MfDataset d = RankOneData();
  PlainMfOptions o = RankOneOptions();
  const std::vector<double> candidates = {0.1, 0.3, 0.5};
  // Sequential SGD: 0.5 learns best.
  o.workers = 1;
  StepSizeSearch seq = SearchStepSize(d, o, candidates, 50);
  EXPECT_EQ(seq.lr, 0.5);
  // 8 workers: 0.5 diverges, so 0.3 (the best finite) wins without a margin
  // and 0.1 with one.
  o.workers = 8;
  StepSizeSearch plain = SearchStepSize(d, o, candidates, 50);
  ASSERT_EQ(plain.heldout_rmse.size(), 3u);
  EXPECT_FALSE(std::isfinite(plain.heldout_rmse[2]));
  EXPECT_LT(plain.heldout_rmse[1], plain.heldout_rmse[0]);
  EXPECT_EQ(plain.lr, 0.3);
  StepSizeSearch with_margin = SearchStepSize(d, o, candidates, 50, /*margin=*/true);
  EXPECT_EQ(with_margin.heldout_rmse[1], plain.heldout_rmse[1]);
  EXPECT_EQ(with_margin.lr, 0.1);
}

TEST(StepSizeSearchTest, PicksTheBestHeldOutCandidateDeterministically) {
  MfDataset d = RankOneData();
  PlainMfOptions o = RankOneOptions();
  o.clocks = 1000;  // ignored by the search
  // 1e-6 learns nothing; 1e3 diverges (NaN) and must never win.
  const std::vector<double> candidates = {1e-6, 0.1, 1e3};
  StepSizeSearch s = SearchStepSize(d, o, candidates, 50);
  EXPECT_EQ(s.clocks, 50);
  ASSERT_EQ(s.heldout_rmse.size(), 3u);
  EXPECT_EQ(s.lr, 0.1);
  EXPECT_LT(s.heldout_rmse[1], s.heldout_rmse[0]);
  EXPECT_FALSE(s.heldout_rmse[2] < s.heldout_rmse[1]);
  StepSizeSearch again = SearchStepSize(d, o, candidates, 50);
  EXPECT_EQ(again.lr, s.lr);
  EXPECT_EQ(again.heldout_rmse[1], s.heldout_rmse[1]);
}

}  // namespace
}  // namespace mf
}  // namespace pace
