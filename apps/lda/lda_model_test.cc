#include "apps/lda/lda_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

namespace pace {
namespace lda {
namespace {

TEST(LdaMathTest, LogLikTermsMatchTheFormula) {
  LdaParams p;
  p.topics = 2;
  p.alpha = 0.5;
  p.beta = 0.1;
  p.vocab = 3;
  int32_t nwk[2] = {3, 0};
  EXPECT_NEAR(WordRowLogLik(nwk, p), std::lgamma(3.1) - std::lgamma(0.1), 1e-12);
  int32_t nk[2] = {3, 1};
  EXPECT_NEAR(TotalsLogLik(nk, p), 2 * std::lgamma(0.3) - std::lgamma(3.3) - std::lgamma(1.3),
              1e-12);
  int32_t ndk[2] = {1, 2};
  EXPECT_NEAR(DocLogLik(ndk, 3, p),
              std::lgamma(1.0) - std::lgamma(4.0) + std::lgamma(1.5) - std::lgamma(0.5) +
                  std::lgamma(2.5) - std::lgamma(0.5),
              1e-12);
  EXPECT_EQ(DocLogLik(ndk, 0, p), 0.0);
}

TEST(LdaMathTest, LogGammaMatchesLgamma) {
  for (double x : {0.01, 0.1, 0.5, 1.0, 1.5, 2.0, 3.3, 10.0, 123.456, 1e6, -0.5, -2.5}) {
    EXPECT_DOUBLE_EQ(LogGamma(x), std::lgamma(x)) << x;
  }
}

// pace_lda's workers evaluate their part of the log-likelihood at the same
// time. With std::lgamma (which writes the global `signgam`) this is a data
// race that ThreadSanitizer reports (`make tsan`); LogGamma has no shared
// state. Every thread must also get exactly the single-threaded result.
TEST(LdaMathTest, LogLikTermsAreSafeOnConcurrentThreads) {
  LdaParams p;
  p.topics = 16;
  p.alpha = 0.1;
  p.beta = 0.01;
  p.vocab = 500;
  std::vector<int32_t> counts(p.topics);
  for (int k = 0; k < p.topics; ++k) counts[k] = 3 * k;
  auto evaluate = [&]() {
    double s = 0;
    for (int i = 0; i < 2000; ++i) {
      s += WordRowLogLik(counts.data(), p) + TotalsLogLik(counts.data(), p) +
           DocLogLik(counts.data(), 360, p);
    }
    return s;
  };
  const double expected = evaluate();
  std::vector<double> got(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) threads.emplace_back([&, t] { got[t] = evaluate(); });
  for (std::thread& t : threads) t.join();
  for (double g : got) EXPECT_EQ(g, expected);
}

TEST(LdaMathTest, SampleTopicFollowsTheConditional) {
  LdaParams p;
  p.topics = 3;
  p.alpha = 1;
  p.beta = 1;
  p.vocab = 1;
  int32_t ndk[3] = {0, 1, 3};  // weights (1)(1)/(1), (2)(1)/(1), (4)(1)/(1) -> 1:2:4
  int32_t nwk[3] = {0, 0, 0};
  int32_t nk[3] = {0, 0, 0};
  double cdf[3];
  int hist[3] = {0, 0, 0};
  apps::Rng rng(3);
  for (int i = 0; i < 70000; ++i) ++hist[SampleTopic(ndk, nwk, nk, p, 1.0, cdf, rng.Uniform())];
  EXPECT_NEAR(hist[0] / 70000.0, 1 / 7.0, 0.01);
  EXPECT_NEAR(hist[2] / 70000.0, 4 / 7.0, 0.01);
  // Negative (stale) counts are clamped to zero.
  int32_t neg[3] = {-5, -5, -5};
  int k = SampleTopic(neg, neg, neg, p, 1.0, cdf, 0.5);
  EXPECT_GE(k, 0);
  EXPECT_LT(k, 3);
}

Corpus TwoTopicCorpus() {
  // Words 0-4 in topic A documents, 5-9 in topic B documents.
  Corpus c;
  c.vocab_size = 10;
  apps::Rng rng(9);
  for (int d = 0; d < 60; ++d) {
    std::vector<uint32_t>& doc = c.docs.emplace_back();
    uint32_t base = d % 2 == 0 ? 0 : 5;
    for (int j = 0; j < 30; ++j) doc.push_back(base + static_cast<uint32_t>(rng.UniformInt(5)));
    c.num_tokens += doc.size();
  }
  return c;
}

TEST(LocalDocsTest, InitCountsAreConsistent) {
  Corpus c = TwoTopicCorpus();
  LdaParams p;
  p.topics = 4;
  p.vocab = 10;
  LocalDocs docs;
  std::vector<int32_t> nwk(10 * 4, 0);
  uint64_t adds = 0;
  InitLocalDocs(c, {3, 1, 7}, p, 1, &docs, [&](uint32_t w, int k) {
    ++nwk[w * 4 + k];
    ++adds;
  });
  EXPECT_EQ(adds, 90u);
  EXPECT_EQ(docs.num_tokens(), 90u);
  EXPECT_EQ(docs.offset.back(), 90u);
  for (size_t i = 0; i < 3; ++i) {
    int32_t sum = 0;
    for (int k = 0; k < 4; ++k) sum += docs.ndk[i * 4 + k];
    EXPECT_EQ(sum, 30);
  }
  // Same seed, same assignments (pure function of seed, doc, position).
  LocalDocs again;
  InitLocalDocs(c, {3, 1, 7}, p, 1, &again, [](uint32_t, int) {});
  EXPECT_EQ(docs.z, again.z);
}

TEST(PlainLdaTest, SeparatesTwoTopicsAndLogLikRises) {
  Corpus c = TwoTopicCorpus();
  PlainLdaOptions o;
  o.params.topics = 2;
  o.params.alpha = 0.1;
  o.params.beta = 0.01;
  o.params.vocab = 10;
  o.clocks = 30;
  std::vector<double> ll;
  PlainLdaSummary s = RunPlainLda(c, o, [&](const LdaClockResult& r) { ll.push_back(*r.loglik); });
  ASSERT_EQ(ll.size(), 31u);
  EXPECT_GT(ll.back(), ll.front() + 100);
  EXPECT_EQ(s.tokens, 30u * c.num_tokens);
  // Each topic ends up with (almost) only words of one half.
  std::vector<std::vector<uint32_t>> top = TopWords(s.nwk, o.params, 5);
  for (const auto& words : top) {
    ASSERT_EQ(words.size(), 5u);
    int low = 0;
    for (uint32_t w : words) low += w < 5;
    EXPECT_TRUE(low == 0 || low == 5) << "mixed topic";
  }
}

}  // namespace
}  // namespace lda
}  // namespace pace
