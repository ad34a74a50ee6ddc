#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "tools/gen/corpus_gen.h"
#include "tools/gen/random.h"
#include "tools/gen/ratings_gen.h"

namespace pace {
namespace gen {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/gen_test_" + std::to_string(::getpid()) + "_" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
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
  std::string text = ReadAll(p1);
  EXPECT_EQ(text, ReadAll(p2));
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
