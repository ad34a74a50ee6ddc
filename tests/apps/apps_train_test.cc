// In-process end-to-end tests of the apps' trainers on generated data, each
// with an embedded PaceDB shard: MF reaches the noise level, the fresh/resume
// rules hold, and LDA raises its log-likelihood and recovers the planted
// topics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "apps/lda/lda_trainer.h"
#include "apps/mf/mf_trainer.h"
#include "client/pace.h"
#include "tests/testing/subprocess.h"
#include "tools/gen/corpus_gen.h"
#include "tools/gen/ratings_gen.h"

namespace pace {
namespace {

std::vector<mf::RawRating> ToRaw(const std::vector<gen::GenRating>& g) {
  std::vector<mf::RawRating> out;
  out.reserve(g.size());
  for (const gen::GenRating& r : g) out.push_back({r.user, r.item, static_cast<float>(r.value)});
  return out;
}

// 500 users x 300 items, true rank 4, ~100 ratings per user (by default),
// with `noise`.
mf::MfDataset SyntheticRatings(double noise, uint64_t users = 500, uint64_t items = 300,
                               uint64_t ratings = 50000, uint64_t seed = 3) {
  gen::RatingsGenOptions o;
  o.users = users;
  o.items = items;
  o.rank = 4;
  o.ratings = ratings;
  o.noise = noise;
  o.test_fraction = 0.1;
  o.seed = seed;
  gen::RatingsData data;
  EXPECT_TRUE(gen::GenerateRatings(o, &data).ok());
  mf::MfDataset d;
  EXPECT_TRUE(mf::BuildDataset(ToRaw(data.train), ToRaw(data.test), 0, 1, &d).ok());
  return d;
}

ClientOptions Embedded(const std::string& dir) {
  ClientOptions o;
  o.data_dir = dir;
  o.embedded.block_cache_mb = 16;
  o.cache_mb = 64;
  return o;
}

// pace_mf's default model and schedule (rank 16, lr 0.08 / (t + 1), lambda 4,
// ...): the noise-level test checks the defaults, not settings tuned to it.
mf::MfTrainOptions SmallMf() {
  mf::MfTrainOptions o;
  o.run.workers = 2;
  o.run.consistency = Consistency::kEssp;
  o.run.staleness = 1;
  o.run.clocks = 30;
  return o;
}

TEST(MfTrainTest, ReachesTheNoiseLevelOnSyntheticData) {
  const double sigma = 0.5;
  mf::MfDataset data = SyntheticRatings(sigma);
  testing::TempDir dir;
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::Open(Embedded(dir.path() + "/data"), &client).ok());
  mf::MfTrainer trainer(client.get(), &data, SmallMf());
  ASSERT_TRUE(trainer.Setup().ok());
  std::vector<mf::MfReport> reports;
  mf::MfTrainSummary summary;
  Status s = trainer.Train([&](const mf::MfReport& r) { reports.push_back(r); }, &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(reports.size(), 30u);
  for (size_t c = 0; c < reports.size(); ++c) {
    EXPECT_EQ(reports[c].clock, static_cast<ClockT>(c));
    EXPECT_EQ(reports[c].ratings, data.train.size());  // minibatch 1: every rating once
    ASSERT_TRUE(reports[c].test_rmse.has_value());
    EXPECT_LE(reports[c].staleness_p99, 2);  // s + 1 would mean "> s": never under essp
    EXPECT_GE(reports[c].blocked_pct, 0);
    EXPECT_LE(reports[c].blocked_pct, 100);
  }
  EXPECT_LT(reports.back().train_loss, 0.5 * reports.front().train_loss);
  ASSERT_TRUE(summary.final_test_rmse.has_value());
  EXPECT_LT(*summary.final_test_rmse, 1.1 * sigma) << "test RMSE not within 10% of the noise";
  EXPECT_GT(*summary.final_test_rmse, 0.9 * sigma) << "better than the noise: a test leak?";
  EXPECT_EQ(summary.ratings, 30u * data.train.size());
}

TEST(MfTrainTest, FreshRunRefusesStoredJobAndResumeContinues) {
  mf::MfDataset data = SyntheticRatings(0.5);
  testing::TempDir dir;
  const std::string data_dir = dir.path() + "/data";
  mf::MfTrainOptions o = SmallMf();
  o.run.clocks = 3;
  {
    std::unique_ptr<Client> client;
    ASSERT_TRUE(Client::Open(Embedded(data_dir), &client).ok());
    mf::MfTrainer trainer(client.get(), &data, o);
    ASSERT_TRUE(trainer.Setup().ok());
    mf::MfTrainSummary summary;
    ASSERT_TRUE(trainer.Train(nullptr, &summary).ok());
  }
  {
    std::unique_ptr<Client> client;
    ASSERT_TRUE(Client::Open(Embedded(data_dir), &client).ok());
    EXPECT_EQ(client->start_clock(), 3);
    // A fresh run must not silently continue the stored model.
    mf::MfTrainer fresh(client.get(), &data, o);
    Status s = fresh.Setup();
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
    EXPECT_NE(s.message().find("--resume"), std::string::npos);
    // Nor reuse a table of another shape, even with --resume.
    mf::MfTrainOptions other = o;
    other.run.resume = true;
    other.rank = 8;
    mf::MfTrainer reshaped(client.get(), &data, other);
    s = reshaped.Setup();
    EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
    EXPECT_NE(s.message().find("mf.user"), std::string::npos);
    // --resume continues at the stored clock up to --clocks.
    mf::MfTrainOptions more = o;
    more.run.resume = true;
    more.run.clocks = 5;
    mf::MfTrainer resumed(client.get(), &data, more);
    ASSERT_TRUE(resumed.Setup().ok());
    std::vector<ClockT> clocks;
    mf::MfTrainSummary summary;
    ASSERT_TRUE(
        resumed.Train([&](const mf::MfReport& r) { clocks.push_back(r.clock); }, &summary).ok());
    EXPECT_EQ(clocks, (std::vector<ClockT>{3, 4}));
    EXPECT_EQ(summary.start_clock, 3);
  }
}

// One embedded run of `data` with one worker under bsp (one order of
// updates: two runs differ only in what `tune` changes, and in rounding),
// and a 1 MiB cache: look-ahead chunks of 256 ratings and a window of ~1,100
// leased users of SyntheticRatings' 3,000.
struct OneWorkerRun {
  double test_rmse = 0;
  uint64_t user_reads = 0;  // Gets and leases of the user table
  uint64_t rows_leased_ahead = 0;
};
OneWorkerRun TrainOneWorker(mf::MfDataset& data,
                            const std::function<void(mf::MfTrainOptions*)>& tune) {
  testing::TempDir dir;
  ClientOptions co = Embedded(dir.path() + "/data");
  co.cache_mb = 1;
  mf::MfTrainOptions o = SmallMf();
  o.run.clocks = 12;
  o.run.workers = 1;
  o.run.consistency = Consistency::kBsp;
  o.run.staleness = 0;
  o.order = mf::RatingOrder::kData;
  tune(&o);
  std::unique_ptr<Client> client;
  EXPECT_TRUE(Client::Open(co, &client).ok());
  mf::MfTrainer trainer(client.get(), &data, o);
  EXPECT_TRUE(trainer.Setup().ok());
  mf::MfTrainSummary summary;
  const Status s = trainer.Train(nullptr, &summary);
  EXPECT_TRUE(s.ok()) << s.ToString();
  OneWorkerRun run;
  run.test_rmse = summary.final_test_rmse.value_or(0);
  run.rows_leased_ahead = summary.rows_leased_ahead;
  for (const TableStats& ts : client->Stats().tables) {
    if (ts.name == "mf.user") run.user_reads = ts.reads;
  }
  return run;
}

// Training in place under a cache too small for every user's lease at once:
// each worker keeps the users of its latest look-ahead chunks leased and
// releases the oldest chunk's as the window moves (users rated again after
// their release are leased again: more leases than users a clock). The
// model is the one copies train, within float rounding (a leased row reads
// as value + delta, a copy as their sum).
TEST(MfTrainTest, InPlaceWithAMovingWindowOfLeasesTrainsAsCopiesDo) {
  const double sigma = 0.5;
  mf::MfDataset data = SyntheticRatings(sigma, 3000, 200, 60000, 5);
  const OneWorkerRun in_place = TrainOneWorker(data, [](mf::MfTrainOptions* o) {});
  const OneWorkerRun copies =
      TrainOneWorker(data, [](mf::MfTrainOptions* o) { o->in_place = false; });
  EXPECT_GT(in_place.user_reads, 12u * data.users.size())
      << "no user was leased again: the window never moved";
  EXPECT_NEAR(in_place.test_rmse, copies.test_rmse, 1e-3 * copies.test_rmse);
  EXPECT_LT(in_place.test_rmse, 1.5 * sigma) << "the model did not learn";
}

// With a core to spare, a helper thread leases the users of the worker's
// next look-ahead chunk while the worker updates the current one: the same
// leases as the worker's own, so the same model, and the helper took most
// of them.
TEST(MfTrainTest, LeasesTakenAheadByAHelperTrainTheModelTheWorkerAloneTrains) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: no helper";
  const double sigma = 0.5;
  mf::MfDataset data = SyntheticRatings(sigma, 3000, 200, 60000, 5);
  const OneWorkerRun helped = TrainOneWorker(data, [](mf::MfTrainOptions* o) {});
  const OneWorkerRun alone =
      TrainOneWorker(data, [](mf::MfTrainOptions* o) { o->lease_ahead = false; });
  EXPECT_EQ(alone.rows_leased_ahead, 0u);
  EXPECT_GT(helped.rows_leased_ahead, helped.user_reads / 2)
      << "the helper took few of the " << helped.user_reads << " leases";
  EXPECT_NEAR(helped.test_rmse, alone.test_rmse, 1e-4 * alone.test_rmse);
  EXPECT_LT(helped.test_rmse, 1.5 * sigma) << "the model did not learn";
}

// A clock whose users are rarely rated twice leaves in parts while its worker
// trains: the leases' window then keeps about two parts' worth of rows (or
// the pass's expected repeat ratings), so the rest of the clock's deltas is
// sealable before Clock(). (A window of half the open-delta bound held the
// whole clock leased here, as it held most of a model-scale clock: each
// clock left as one part after it.)
TEST(MfTrainTest, AClockLargerThanTheLeaseWindowLeavesInPartsWhileItsWorkerTrains) {
  // ~40k users rated in each clock, rank 64: ~10 MiB of user deltas a clock.
  mf::MfDataset data = SyntheticRatings(0.5, 60000, 200, 60000, 7);
  testing::TempDir dir;
  ClientOptions co = Embedded(dir.path() + "/data");
  co.open_delta_mb = 64;  // half of it would lease 16 MiB (a quarter of the cache)
  co.unacked_mb = 2;      // parts of 1 MiB
  mf::MfTrainOptions o = SmallMf();
  o.rank = 64;
  o.run.clocks = 2;
  o.run.workers = 1;
  o.run.consistency = Consistency::kBsp;
  o.run.staleness = 0;
  o.order = mf::RatingOrder::kData;
  ASSERT_TRUE(o.in_place);
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::Open(co, &client).ok());
  ASSERT_EQ(client->Stats().part_bytes, uint64_t{1} << 20);
  mf::MfTrainer trainer(client.get(), &data, o);
  ASSERT_TRUE(trainer.Setup().ok());
  mf::MfTrainSummary summary;
  const Status s = trainer.Train(nullptr, &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(client->Stats().parts_sent_early, 2u * o.run.clocks)
      << "the clocks were sealed whole in Clock(): their rows stayed leased";
}

// The model the PaceDB trainer stores is the one it evaluated: a new process
// (fresh cache) reading the factors reproduces the final test RMSE.
TEST(MfTrainTest, StoredFactorsReproduceTheReportedRmse) {
  mf::MfDataset data = SyntheticRatings(0.5);
  testing::TempDir dir;
  const std::string data_dir = dir.path() + "/data";
  mf::MfTrainOptions o = SmallMf();
  o.run.clocks = 8;
  o.run.workers = 1;  // its last evaluation sees every update of the job
  o.run.consistency = Consistency::kBsp;
  o.run.staleness = 0;
  mf::MfTrainSummary summary;
  {
    std::unique_ptr<Client> client;
    ASSERT_TRUE(Client::Open(Embedded(data_dir), &client).ok());
    mf::MfTrainer trainer(client.get(), &data, o);
    ASSERT_TRUE(trainer.Setup().ok());
    ASSERT_TRUE(trainer.Train(nullptr, &summary).ok());
  }
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::Open(Embedded(data_dir), &client).ok());
  o.run.resume = true;
  mf::MfTrainer reader(client.get(), &data, o);
  ASSERT_TRUE(reader.Setup().ok());
  std::unique_ptr<Worker> worker;
  ASSERT_TRUE(client->RegisterWorker(&worker).ok());
  std::vector<float> users, items;
  uint64_t stale = 0;
  ASSERT_TRUE(reader.ReadFactors(worker.get(), 8, &users, &items, &stale).ok());
  EXPECT_EQ(stale, 0u);
  mf::SgdParams p;
  p.rank = o.rank;
  p.mean = static_cast<float>(data.mean);
  const uint32_t width = mf::RowWidth(o.rank, true);
  std::vector<float> zero(width, 0.0f);
  auto rmse = mf::Rmse(data.test, data.min_rating, data.max_rating, [&](const mf::Rating& r) {
    const float* u = r.user == mf::IdMap::kUnknown ? zero.data() : &users[r.user * width];
    const float* v = r.item == mf::IdMap::kUnknown ? zero.data() : &items[r.item * width];
    return static_cast<double>(mf::Predict(u, v, p));
  });
  ASSERT_TRUE(rmse.has_value());
  EXPECT_NEAR(*rmse, *summary.final_test_rmse, 1e-4);
}

// Cosine similarity of two vectors.
double Cosine(const std::vector<double>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0;
}

TEST(LdaTrainTest, LogLikRisesAndPlantedTopicsAreRecovered) {
  gen::CorpusGenOptions g;
  g.docs = 600;
  g.vocab = 400;
  g.topics = 6;
  g.doc_len = 80;
  g.alpha = 0.1;
  g.beta = 0.01;
  g.seed = 5;
  gen::GenCorpus truth;
  ASSERT_TRUE(gen::GenerateCorpus(g, &truth).ok());
  lda::Corpus corpus;
  corpus.docs = truth.docs;
  corpus.vocab_size = static_cast<uint32_t>(truth.vocab);
  corpus.num_tokens = truth.num_tokens;

  testing::TempDir dir;
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::Open(Embedded(dir.path() + "/data"), &client).ok());
  lda::LdaTrainOptions o;
  o.params.topics = 6;
  o.params.alpha = 0.1;
  o.params.beta = 0.01;
  o.run.workers = 2;
  o.run.consistency = Consistency::kEssp;
  o.run.staleness = 1;
  o.run.clocks = 40;
  o.collect_model = true;
  lda::LdaTrainer trainer(client.get(), &corpus, o);
  ASSERT_TRUE(trainer.Setup().ok());
  std::vector<lda::LdaReport> reports;
  lda::LdaTrainSummary summary;
  Status s = trainer.Train([&](const lda::LdaReport& r) { reports.push_back(r); }, &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(reports.size(), 41u);  // clock 0 (initialization) + 40 sampling clocks
  EXPECT_FALSE(reports[0].loglik.has_value());
  std::vector<double> ll;
  for (size_t c = 1; c < reports.size(); ++c) {
    ASSERT_TRUE(reports[c].loglik.has_value()) << "clock " << c;
    EXPECT_EQ(reports[c].tokens, corpus.num_tokens);
    ll.push_back(*reports[c].loglik);
  }
  // Increases, allowing the small dips of a sampler near its stationary state.
  const double slack = 0.002 * std::abs(ll.front());
  for (size_t i = 1; i < ll.size(); ++i) EXPECT_GT(ll[i], ll[i - 1] - slack) << "clock " << i + 1;
  EXPECT_GT(ll.back(), ll.front() + 0.05 * std::abs(ll.front()));

  // Match learned topics to the planted ones greedily by cosine similarity.
  ASSERT_EQ(summary.word_topic.size(), corpus.vocab_size * 6u);
  std::vector<std::vector<double>> learned(6, std::vector<double>(corpus.vocab_size));
  for (uint32_t w = 0; w < corpus.vocab_size; ++w) {
    for (int k = 0; k < 6; ++k) learned[k][w] = summary.word_topic[w * 6 + k];
  }
  std::vector<bool> used_true(6, false), used_learned(6, false);
  double total = 0;
  for (int round = 0; round < 6; ++round) {
    double best = -1;
    int bt = 0, bl = 0;
    for (int t = 0; t < 6; ++t) {
      for (int l = 0; l < 6; ++l) {
        if (used_true[t] || used_learned[l]) continue;
        double c = Cosine(truth.phi[t], learned[l]);
        if (c > best) {
          best = c;
          bt = t;
          bl = l;
        }
      }
    }
    used_true[bt] = used_learned[bl] = true;
    total += best;
  }
  EXPECT_GT(total / 6, 0.9) << "planted topics not recovered";
}

}  // namespace
}  // namespace pace
