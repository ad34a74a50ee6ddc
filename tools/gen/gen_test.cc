#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "common/read_file.h"
#include "tools/gen/corpus_gen.h"
#include "tools/gen/random.h"
#include "tools/gen/ratings_gen.h"
#include "tools/gen/zipf.h"

namespace pace {
namespace gen {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/gen_test_" + std::to_string(::getpid()) + "_" + name;
}

TEST(RngTest, SameSeedSameSequenceAndUnbiasedRange) {
  Rng a(7), b(7), c(8);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs |= (x != c.Next());
  }
  EXPECT_TRUE(differs);
  Rng r(1);
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double z = r.Normal();
    sum += z;
    sq += z * z;
    EXPECT_LT(r.UniformInt(10), 10u);
  }
  EXPECT_NEAR(sum / n, 0.0, 0.02);
  EXPECT_NEAR(sq / n, 1.0, 0.02);
  double g = 0;
  for (int i = 0; i < n; ++i) g += r.Gamma(0.3);
  EXPECT_NEAR(g / n, 0.3, 0.01);  // mean of Gamma(a, 1) is a
}

TEST(RatingsGenTest, DeterministicBySeed) {
  RatingsGenOptions o;
  o.users = 200;
  o.items = 100;
  o.ratings = 5000;
  o.test_fraction = 0.2;
  RatingsData a, b, c;
  ASSERT_TRUE(GenerateRatings(o, &a).ok());
  ASSERT_TRUE(GenerateRatings(o, &b).ok());
  o.seed = 2;
  ASSERT_TRUE(GenerateRatings(o, &c).ok());
  ASSERT_EQ(a.train.size(), b.train.size());
  for (size_t i = 0; i < a.train.size(); ++i) {
    EXPECT_EQ(a.train[i].user, b.train[i].user);
    EXPECT_EQ(a.train[i].item, b.train[i].item);
    EXPECT_EQ(a.train[i].value, b.train[i].value);
  }
  EXPECT_NE(a.train[0].value, c.train[0].value);

  std::string p1 = TempPath("r1.csv"), p2 = TempPath("r2.csv");
  ASSERT_TRUE(WriteRatings(p1, RatingsFormat::kCsv, 4, a.train).ok());
  ASSERT_TRUE(WriteRatings(p2, RatingsFormat::kCsv, 4, b.train).ok());
  std::string text = ReadFile(p1);
  EXPECT_EQ(text, ReadFile(p2));
  EXPECT_EQ(text.rfind("userId,movieId,rating,timestamp\n", 0), 0u);
  std::remove(p1.c_str());
  std::remove(p2.c_str());
}

TEST(RatingsGenTest, DistinctPairsSplitAndNoiseLevel) {
  RatingsGenOptions o;
  o.users = 300;
  o.items = 200;
  o.rank = 4;
  o.ratings = 20000;
  o.noise = 0.5;
  o.test_fraction = 0.1;
  RatingsData d;
  ASSERT_TRUE(GenerateRatings(o, &d).ok());
  EXPECT_EQ(d.train.size() + d.test.size(), o.ratings);
  EXPECT_NEAR(static_cast<double>(d.test.size()) / o.ratings, 0.1, 0.01);
  std::set<std::pair<uint64_t, uint64_t>> pairs;
  double sum = 0, sq = 0;
  for (const auto* part : {&d.train, &d.test}) {
    for (const GenRating& r : *part) {
      EXPECT_GE(r.user, 1u);
      EXPECT_LE(r.user, o.users);
      EXPECT_GE(r.item, 1u);
      EXPECT_LE(r.item, o.items);
      EXPECT_TRUE(pairs.insert({r.user, r.item}).second) << "duplicate pair";
      sum += r.value;
      sq += r.value * r.value;
    }
  }
  // Var(rating) = signal^2 + noise^2 = 1.25 around mean 0.
  double n = static_cast<double>(o.ratings);
  EXPECT_NEAR(sum / n, 0.0, 0.1);
  EXPECT_NEAR(sq / n - (sum / n) * (sum / n), 1.25, 0.15);
}

TEST(RatingsGenTest, ClipsAndRejectsImpossibleOptions) {
  RatingsGenOptions o;
  o.users = 50;
  o.items = 50;
  o.ratings = 500;
  o.mean = 3;
  o.min_rating = 1;
  o.max_rating = 5;
  o.noise = 2;
  RatingsData d;
  ASSERT_TRUE(GenerateRatings(o, &d).ok());
  for (const GenRating& r : d.train) {
    EXPECT_GE(r.value, 1.0);
    EXPECT_LE(r.value, 5.0);
  }
  o.ratings = 50 * 50;
  EXPECT_EQ(GenerateRatings(o, &d).code(), StatusCode::kInvalidArgument);
  o.ratings = 10;
  o.rank = 0;
  EXPECT_EQ(GenerateRatings(o, &d).code(), StatusCode::kInvalidArgument);
  RatingsFormat f;
  EXPECT_FALSE(ParseRatingsFormat("json", &f).ok());
  EXPECT_TRUE(ParseRatingsFormat("dat", &f).ok());
  EXPECT_EQ(f, RatingsFormat::kDat);
}

// FNV-1a over the (user, item) ids in order: pins the pairs drawn.
uint64_t PairsHash(const std::vector<GenRating>& ratings) {
  uint64_t h = 14695981039346656037ull;
  for (const GenRating& r : ratings) {
    for (uint64_t x : {r.user, r.item}) {
      h ^= x;
      h *= 1099511628211ull;
    }
  }
  return h;
}

// Skew 0 (the default) draws exactly the pairs the generator drew before
// --skew existed: the hashes below were taken from that generator.
TEST(RatingsGenTest, SkewZeroKeepsTheUniformPairs) {
  RatingsGenOptions o;
  o.users = 300;
  o.items = 200;
  o.ratings = 5000;
  o.test_fraction = 0.1;
  o.bias_std = 0.3;
  o.seed = 5;
  for (double skew : {-1.0, 0.0}) {  // -1: the option left at its default
    if (skew >= 0) o.skew = skew;
    RatingsData d;
    ASSERT_TRUE(GenerateRatings(o, &d).ok());
    ASSERT_EQ(d.train.size(), 4446u);
    ASSERT_EQ(d.test.size(), 554u);
    EXPECT_EQ(PairsHash(d.train), 0x233ef5179480ba60ull);
    EXPECT_EQ(PairsHash(d.test), 0xd639c645d2090a04ull);
    EXPECT_EQ(d.train[0].user, 281u);
    EXPECT_EQ(d.train[0].item, 75u);
  }
}

// The sampler's frequencies match k^-s / H(n, s) for every rank (within 5
// standard deviations of the binomial count), for s below, at and above 1.
TEST(ZipfSamplerTest, FrequenciesMatchTheLaw) {
  constexpr uint64_t kN = 40;
  constexpr int kDraws = 400000;
  for (double s : {0.3, 1.0, 1.7}) {
    ZipfSampler zipf(kN, s);
    Rng rng(42);
    std::vector<int> count(kN + 1, 0);
    for (int d = 0; d < kDraws; ++d) {
      const uint64_t k = zipf.Sample(&rng);
      ASSERT_GE(k, 1u);
      ASSERT_LE(k, kN);
      ++count[k];
    }
    for (uint64_t k = 1; k <= kN; ++k) {
      const double p = ZipfProbability(kN, s, k);
      const double sd = std::sqrt(kDraws * p * (1 - p));
      EXPECT_NEAR(count[k], kDraws * p, 5 * sd + 1) << "s " << s << " rank " << k;
    }
  }
  // One element: always rank 1. A huge range: ranks stay in range, rank 1 at
  // its probability 1/H(n, 1) (H(1e12, 1) = ln(1e12) + 0.5772...).
  ZipfSampler one(1, 1.2);
  Rng rng(1);
  for (int d = 0; d < 100; ++d) EXPECT_EQ(one.Sample(&rng), 1u);
  const uint64_t big = 1000000000000ull;
  ZipfSampler wide(big, 1.0);
  int ones = 0;
  for (int d = 0; d < 100000; ++d) {
    const uint64_t k = wide.Sample(&rng);
    ASSERT_GE(k, 1u);
    ASSERT_LE(k, big);
    ones += k == 1;
  }
  EXPECT_NEAR(ones / 100000.0, 1 / (std::log(1e12) + 0.5772156649), 0.004);
}

// Counts per id (1-based) of one column of the ratings, most rated first.
std::vector<uint64_t> SortedCounts(const RatingsData& d, uint64_t n, bool items,
                                   std::vector<uint64_t>* by_count = nullptr) {
  std::vector<uint64_t> count(n + 1, 0);
  for (const auto* part : {&d.train, &d.test}) {
    for (const GenRating& r : *part) ++count[items ? r.item : r.user];
  }
  std::vector<uint64_t> ids;
  for (uint64_t id = 1; id <= n; ++id) ids.push_back(id);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](uint64_t a, uint64_t b) { return count[a] > count[b]; });
  if (by_count != nullptr) *by_count = ids;
  std::vector<uint64_t> sorted;
  for (uint64_t id : ids) sorted.push_back(count[id]);
  return sorted;
}

double TopShare(const std::vector<uint64_t>& sorted, size_t top) {
  uint64_t head = 0, all = 0;
  for (size_t k = 0; k < sorted.size(); ++k) {
    all += sorted[k];
    if (k < top) head += sorted[k];
  }
  return static_cast<double>(head) / static_cast<double>(all);
}

double ZipfTopShare(uint64_t n, double s, uint64_t top) {
  double head = 0;
  for (uint64_t k = 1; k <= top; ++k) head += ZipfProbability(n, s, k);
  return head;
}

// With --skew the top 1% of items and of users get the share of the ratings
// the Zipf law predicts; the popular ids are spread over the id range; without
// it the top 1% get about 1%. (A skew and sizes where few pairs repeat, so
// that the distinct-pair rule barely changes the shares: 12% for the top 40
// items, 6.5% for the top 200 users.)
TEST(RatingsGenTest, SkewGivesTheTopOnePercentTheirZipfShare) {
  RatingsGenOptions o;
  o.users = 20000;
  o.items = 4000;
  o.rank = 2;
  o.ratings = 100000;
  o.skew = 0.5;
  RatingsData d;
  ASSERT_TRUE(GenerateRatings(o, &d).ok());
  std::vector<uint64_t> top_items;
  const double items = TopShare(SortedCounts(d, o.items, true, &top_items), o.items / 100);
  const double users = TopShare(SortedCounts(d, o.users, false), o.users / 100);
  const double want_items = ZipfTopShare(o.items, o.skew, o.items / 100);
  const double want_users = ZipfTopShare(o.users, o.skew, o.users / 100);
  EXPECT_NEAR(items, want_items, 0.06 * want_items);
  EXPECT_NEAR(users, want_users, 0.06 * want_users);
  EXPECT_GT(items, 5 * 0.01);
  // The 40 most rated items are not ids 1..40 (a random permutation puts
  // about 0.4 of them there).
  int small_ids = 0;
  for (size_t k = 0; k < o.items / 100; ++k) small_ids += top_items[k] <= o.items / 100;
  EXPECT_LE(small_ids, 4);

  o.skew = 0;
  ASSERT_TRUE(GenerateRatings(o, &d).ok());
  EXPECT_LT(TopShare(SortedCounts(d, o.items, true), o.items / 100), 0.02);
  EXPECT_LT(TopShare(SortedCounts(d, o.users, false), o.users / 100), 0.03);
}

// At skew 1 the head pairs repeat (the top user and the top item are each
// drawn ~10% of the time): the generator still returns distinct pairs, and
// the top 1% of items keep most of their Zipf share (48% of the draws, 36% of
// the ratings: the pairs drawn again go elsewhere).
TEST(RatingsGenTest, SkewOneStillDistinctAndHeavyHeaded) {
  RatingsGenOptions o;
  o.users = 20000;
  o.items = 4000;
  o.rank = 2;
  o.ratings = 30000;
  o.skew = 1.0;
  RatingsData d;
  ASSERT_TRUE(GenerateRatings(o, &d).ok());
  std::set<std::pair<uint64_t, uint64_t>> pairs;
  for (const auto* part : {&d.train, &d.test}) {
    for (const GenRating& r : *part) {
      ASSERT_TRUE(pairs.insert({r.user, r.item}).second) << "duplicate pair";
    }
  }
  EXPECT_EQ(pairs.size(), o.ratings);
  const double items = TopShare(SortedCounts(d, o.items, true), o.items / 100);
  const double want = ZipfTopShare(o.items, 1.0, o.items / 100);
  EXPECT_GT(items, 0.7 * want);  // 0.36 of 0.48 with seed 1
  EXPECT_LT(items, 1.02 * want);
  EXPECT_GT(items, 20 * 0.01);
}

TEST(RatingsGenTest, SkewRejectsBadExponentsAndExhaustedPairs) {
  RatingsGenOptions o;
  o.users = 100;
  o.items = 100;
  o.ratings = 1000;
  RatingsData d;
  for (double bad : {-0.5, 11.0, std::nan("")}) {
    o.skew = bad;
    EXPECT_EQ(GenerateRatings(o, &d).code(), StatusCode::kInvalidArgument) << bad;
  }
  // At skew 8 nearly every draw is among the first few ranks: 4000 distinct
  // pairs cannot be found.
  o.skew = 8;
  o.ratings = 4000;
  Status s = GenerateRatings(o, &d);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.ToString().find("--skew"), std::string::npos) << s.ToString();
}

TEST(CorpusGenTest, DeterministicTopicsAndDocword) {
  CorpusGenOptions o;
  o.docs = 100;
  o.vocab = 300;
  o.topics = 5;
  o.doc_len = 50;
  GenCorpus a, b;
  ASSERT_TRUE(GenerateCorpus(o, &a).ok());
  ASSERT_TRUE(GenerateCorpus(o, &b).ok());
  ASSERT_EQ(a.docs, b.docs);
  ASSERT_EQ(a.phi.size(), 5u);
  for (const auto& topic : a.phi) {
    double s = 0;
    for (double p : topic) s += p;
    EXPECT_NEAR(s, 1.0, 1e-9);
  }
  EXPECT_NEAR(static_cast<double>(a.num_tokens) / o.docs, 50.0, 3.0);
  for (const auto& doc : a.docs) EXPECT_FALSE(doc.empty());

  std::string p = TempPath("docword.txt"), v = TempPath("vocab.txt");
  ASSERT_TRUE(WriteDocword(p, a).ok());
  ASSERT_TRUE(WriteVocab(v, a).ok());
  std::ifstream in(p);
  uint64_t d, w, nnz;
  in >> d >> w >> nnz;
  EXPECT_EQ(d, 100u);
  EXPECT_EQ(w, 300u);
  uint64_t lines = 0, tokens = 0, doc, word, count;
  while (in >> doc >> word >> count) {
    ++lines;
    tokens += count;
    EXPECT_GE(doc, 1u);
    EXPECT_LE(doc, 100u);
    EXPECT_GE(word, 1u);
    EXPECT_LE(word, 300u);
  }
  EXPECT_EQ(lines, nnz);
  EXPECT_EQ(tokens, a.num_tokens);
  EXPECT_EQ(WordName(7, 300), "w007");
  std::ifstream vin(v);
  std::string first;
  vin >> first;
  EXPECT_EQ(first, "w000");
  std::remove(p.c_str());
  std::remove(v.c_str());

  o.beta = 0;
  EXPECT_EQ(GenerateCorpus(o, &a).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gen
}  // namespace pace
