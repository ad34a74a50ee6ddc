// Collapsed Gibbs sampling for LDA, shared by pace_lda and its
// no-parameter-server baseline: the sampling step, the per-worker document
// state, the log-likelihood terms, and the plain single-threaded sampler.
//
// Counts: n_dk (document d, topic k) live with the worker that owns d;
// n_wk (word w, topic k) and n_k (topic totals) are shared (PaceDB tables in
// pace_lda, arrays in the baseline). A token of word w in document d takes
// topic k with probability proportional to
//   (n_dk + alpha) (n_wk + beta) / (n_k + V beta)
// with the token's own assignment removed from the counts. Under bounded
// staleness a shared count seen by a worker can lag (and, in principle, dip
// below zero); counts are clamped at zero when sampling.
//
// Joint log-likelihood (Griffiths & Steyvers 2004), split into terms that are
// zero for empty rows so each worker can add the part it owns:
//   log p(w | z) = sum_w sum_k [lgamma(n_wk + beta) - lgamma(beta)]
//                + sum_k [lgamma(V beta) - lgamma(n_k + V beta)]
//   log p(z)     = sum_d ( lgamma(K alpha) - lgamma(n_d + K alpha)
//                          + sum_k [lgamma(n_dk + alpha) - lgamma(alpha)] )
//
// Thread-compatible; the log-likelihood functions may run on several threads
// at once (they use LogGamma, not std::lgamma).
#ifndef PACE_APPS_LDA_LDA_MODEL_H_
#define PACE_APPS_LDA_LDA_MODEL_H_

#include <math.h>  // lgamma_r (POSIX; not in <cmath>)

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "apps/lda/corpus_data.h"
#include "apps/shared/random.h"

namespace pace {
namespace lda {

struct LdaParams {
  int topics = 20;
  double alpha = 0.1;
  double beta = 0.01;
  uint32_t vocab = 0;
};

// Draws a topic for one token. `cdf` is scratch of `topics` doubles; `u` is
// uniform in [0, 1).
inline int SampleTopic(const int32_t* ndk, const int32_t* nwk, const int32_t* nk,
                       const LdaParams& p, double vbeta, double* cdf, double u) {
  double acc = 0;
  for (int k = 0; k < p.topics; ++k) {
    const double d = ndk[k] > 0 ? ndk[k] : 0;
    const double w = nwk[k] > 0 ? nwk[k] : 0;
    const double t = nk[k] > 0 ? nk[k] : 0;
    acc += (d + p.alpha) * (w + p.beta) / (t + vbeta);
    cdf[k] = acc;
  }
  const double r = u * acc;
  for (int k = 0; k < p.topics; ++k) {
    if (r < cdf[k]) return k;
  }
  return p.topics - 1;
}

// log |Gamma(x)|, safe to call from several threads at once. std::lgamma
// stores the sign of Gamma(x) in the global `signgam` (POSIX), so two threads
// evaluating the log-likelihood race on it; lgamma_r returns the sign through
// an out-parameter instead and has no shared state.
inline double LogGamma(double x) {
  int sign = 0;
  return ::lgamma_r(x, &sign);
}

// sum_k [lgamma(n_wk + beta) - lgamma(beta)] of one word row.
double WordRowLogLik(const int32_t* nwk, const LdaParams& p);
// sum_k [lgamma(V beta) - lgamma(n_k + V beta)].
double TotalsLogLik(const int32_t* nk, const LdaParams& p);
// One document's term of log p(z); 0 for an empty document.
double DocLogLik(const int32_t* ndk, uint32_t doc_len, const LdaParams& p);

// The documents one worker owns: their token assignments and doc-topic counts.
struct LocalDocs {
  std::vector<uint32_t> ids;   // corpus document ids, in processing order
  std::vector<size_t> offset;  // offset[i] = first token of ids[i] in z; size ids+1
  std::vector<int32_t> z;      // topic of every token
  std::vector<int32_t> ndk;    // ids.size() x topics
  uint64_t num_tokens() const { return z.size(); }
};

// Sets up `docs` for the documents `ids` with random assignments: token j of
// document d gets a topic that is a pure function of (seed, d, j), and fills
// n_dk. Calls add_word(w, k) and add_total(k) once per token so the caller
// can build the shared counts.
void InitLocalDocs(const Corpus& corpus, std::vector<uint32_t> ids, const LdaParams& p,
                   uint64_t seed, LocalDocs* docs,
                   const std::function<void(uint32_t w, int k)>& add_word);

// Resamples every token of local document i. word_row(w) returns the worker's
// count row of word w (modified in place); nk is the worker's topic totals
// (modified in place). Returns the number of tokens.
template <typename WordRowFn>
uint64_t SweepDoc(const Corpus& corpus, LocalDocs* docs, size_t i, int32_t* nk,
                  WordRowFn&& word_row, const LdaParams& p, double* cdf, apps::Rng* rng) {
  const std::vector<uint32_t>& tokens = corpus.docs[docs->ids[i]];
  int32_t* z = &docs->z[docs->offset[i]];
  int32_t* ndk = &docs->ndk[i * static_cast<size_t>(p.topics)];
  const double vbeta = p.vocab * p.beta;
  for (size_t j = 0; j < tokens.size(); ++j) {
    int32_t* nwk = word_row(tokens[j]);
    int k = z[j];
    --ndk[k];
    --nwk[k];
    --nk[k];
    k = SampleTopic(ndk, nwk, nk, p, vbeta, cdf, rng->Uniform());
    ++ndk[k];
    ++nwk[k];
    ++nk[k];
    z[j] = k;
  }
  return tokens.size();
}

// log p(z) summed over the local documents.
double LocalDocsLogLik(const Corpus& corpus, const LocalDocs& docs, const LdaParams& p);

// The `n` most frequent words of each topic from the word-topic counts
// (V x K, row-major): result[k] = word ids, most frequent first.
std::vector<std::vector<uint32_t>> TopWords(const std::vector<int32_t>& nwk, const LdaParams& p,
                                            int n);

// The no-parameter-server baseline: the same sampler, minibatches and
// initialization as pace_lda with one worker, single-threaded over plain
// arrays, visiting each clock's tokens document by document (pace_lda visits
// them word by word, word_sweep.h: the same Gibbs sweep in another order).
struct PlainLdaOptions {
  LdaParams params;
  double minibatch = 1.0;
  int64_t clocks = 20;  // sampling clocks after the initialization (clock 0)
  int64_t eval_every = 1;
  uint64_t seed = 1;
};

struct LdaClockResult {
  int64_t clock = 0;
  double seconds = 0;  // since the start
  std::optional<double> loglik;
  uint64_t tokens = 0;  // sampled in this clock
  double tokens_per_second = 0;
};

struct PlainLdaSummary {
  uint64_t tokens = 0;
  double seconds = 0;  // wall time of the sampling clocks (with evaluations)
  double tokens_per_second = 0;
  std::vector<int32_t> nwk;  // final word-topic counts, V x K
};

PlainLdaSummary RunPlainLda(const Corpus& corpus, const PlainLdaOptions& options,
                            const std::function<void(const LdaClockResult&)>& on_clock);

}  // namespace lda
}  // namespace pace

#endif  // PACE_APPS_LDA_LDA_MODEL_H_
