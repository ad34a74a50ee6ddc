#include "apps/lda/lda_model.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "apps/shared/partition.h"

namespace pace {
namespace lda {

double WordRowLogLik(const int32_t* nwk, const LdaParams& p) {
  const double lg_beta = LogGamma(p.beta);
  double s = 0;
  for (int k = 0; k < p.topics; ++k) {
    if (nwk[k] > 0) s += LogGamma(nwk[k] + p.beta) - lg_beta;
  }
  return s;
}

double TotalsLogLik(const int32_t* nk, const LdaParams& p) {
  const double vbeta = p.vocab * p.beta;
  const double lg_vbeta = LogGamma(vbeta);
  double s = 0;
  for (int k = 0; k < p.topics; ++k) s += lg_vbeta - LogGamma(std::max(nk[k], 0) + vbeta);
  return s;
}

double DocLogLik(const int32_t* ndk, uint32_t doc_len, const LdaParams& p) {
  if (doc_len == 0) return 0;
  const double kalpha = p.topics * p.alpha;
  const double lg_alpha = LogGamma(p.alpha);
  double s = LogGamma(kalpha) - LogGamma(doc_len + kalpha);
  for (int k = 0; k < p.topics; ++k) {
    if (ndk[k] > 0) s += LogGamma(ndk[k] + p.alpha) - lg_alpha;
  }
  return s;
}

void InitLocalDocs(const Corpus& corpus, std::vector<uint32_t> ids, const LdaParams& p,
                   uint64_t seed, LocalDocs* docs,
                   const std::function<void(uint32_t w, int k)>& add_word) {
  docs->ids = std::move(ids);
  docs->offset.assign(1, 0);
  size_t total = 0;
  for (uint32_t d : docs->ids) {
    total += corpus.docs[d].size();
    docs->offset.push_back(total);
  }
  docs->z.resize(total);
  docs->ndk.assign(docs->ids.size() * static_cast<size_t>(p.topics), 0);
  for (size_t i = 0; i < docs->ids.size(); ++i) {
    const uint32_t d = docs->ids[i];
    apps::Rng rng(apps::DeriveSeed(seed, 0x1DA, d));
    int32_t* ndk = &docs->ndk[i * static_cast<size_t>(p.topics)];
    int32_t* z = &docs->z[docs->offset[i]];
    const std::vector<uint32_t>& tokens = corpus.docs[d];
    for (size_t j = 0; j < tokens.size(); ++j) {
      const int k = static_cast<int>(rng.UniformInt(static_cast<uint64_t>(p.topics)));
      z[j] = k;
      ++ndk[k];
      add_word(tokens[j], k);
    }
  }
}

double LocalDocsLogLik(const Corpus& corpus, const LocalDocs& docs, const LdaParams& p) {
  double s = 0;
  for (size_t i = 0; i < docs.ids.size(); ++i) {
    s += DocLogLik(&docs.ndk[i * static_cast<size_t>(p.topics)],
                   static_cast<uint32_t>(docs.offset[i + 1] - docs.offset[i]), p);
  }
  return s;
}

std::vector<std::vector<uint32_t>> TopWords(const std::vector<int32_t>& nwk, const LdaParams& p,
                                            int n) {
  const size_t k_count = static_cast<size_t>(p.topics);
  std::vector<std::vector<uint32_t>> top(k_count);
  std::vector<uint32_t> words(p.vocab);
  std::iota(words.begin(), words.end(), 0u);
  const size_t keep = std::min<size_t>(static_cast<size_t>(std::max(n, 0)), words.size());
  for (size_t k = 0; k < k_count; ++k) {
    auto count = [&](uint32_t w) { return nwk[static_cast<size_t>(w) * k_count + k]; };
    std::partial_sort(
        words.begin(), words.begin() + keep, words.end(),
        [&](uint32_t a, uint32_t b) { return count(a) != count(b) ? count(a) > count(b) : a < b; });
    for (size_t i = 0; i < keep && count(words[i]) > 0; ++i) top[k].push_back(words[i]);
  }
  return top;
}

PlainLdaSummary RunPlainLda(const Corpus& corpus, const PlainLdaOptions& o,
                            const std::function<void(const LdaClockResult&)>& on_clock) {
  using Clock = std::chrono::steady_clock;
  const LdaParams& p = o.params;
  const size_t k_count = static_cast<size_t>(p.topics);
  PlainLdaSummary summary;
  std::vector<int32_t>& nwk = summary.nwk;
  nwk.assign(static_cast<size_t>(p.vocab) * k_count, 0);
  std::vector<int32_t> nk(k_count, 0);
  const auto start = Clock::now();
  LocalDocs docs;
  InitLocalDocs(corpus, apps::ShuffledOrder(corpus.docs.size(), o.seed), p, o.seed, &docs,
                [&](uint32_t w, int k) {
                  ++nwk[static_cast<size_t>(w) * k_count + k];
                  ++nk[k];
                });
  auto loglik = [&]() {
    double s = LocalDocsLogLik(corpus, docs, p) + TotalsLogLik(nk.data(), p);
    for (uint32_t w = 0; w < p.vocab; ++w) s += WordRowLogLik(&nwk[w * k_count], p);
    return s;
  };
  LdaClockResult init;
  init.loglik = loglik();
  init.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (on_clock) on_clock(init);

  std::vector<double> cdf(k_count);
  const auto sampling_start = Clock::now();
  double last = init.seconds;
  for (int64_t clock = 1; clock <= o.clocks; ++clock) {
    apps::Rng rng(apps::DeriveSeed(o.seed, 0x5A3B, 0, static_cast<uint64_t>(clock)));
    const apps::Window win = apps::MinibatchWindow(docs.ids.size(), o.minibatch, clock - 1);
    LdaClockResult r;
    r.clock = clock;
    for (size_t j = 0; j < win.count; ++j) {
      const size_t i = (win.start + j) % docs.ids.size();
      r.tokens += SweepDoc(
          corpus, &docs, i, nk.data(),
          [&](uint32_t w) { return &nwk[static_cast<size_t>(w) * k_count]; }, p, cdf.data(), &rng);
    }
    if (clock % o.eval_every == 0 || clock == o.clocks) r.loglik = loglik();
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    r.tokens_per_second = r.seconds > last ? r.tokens / (r.seconds - last) : 0;
    last = r.seconds;
    summary.tokens += r.tokens;
    if (on_clock) on_clock(r);
  }
  summary.seconds = std::chrono::duration<double>(Clock::now() - sampling_start).count();
  if (summary.seconds > 0) summary.tokens_per_second = summary.tokens / summary.seconds;
  return summary;
}

}  // namespace lda
}  // namespace pace
