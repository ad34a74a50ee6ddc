// Exact Zipf sampling for the data generators.
//
// ZipfSampler draws ranks k in [1, n] with P(k) = k^-s / H(n, s), where
// H(n, s) = sum_{j=1..n} j^-s, by rejection-inversion (W. Hormann and
// G. Derflinger, "Rejection-inversion to generate variates from monotone
// discrete distributions", ACM TOMACS 6(3), 1996): O(1) memory and set-up, a
// bounded expected number of uniform draws per sample for any n and s > 0.
// Exact: no table, no truncation, no approximation of H(n, s).
//
// Thread-compatible; Sample() is const, the caller owns the Rng.
#ifndef PACE_TOOLS_GEN_ZIPF_H_
#define PACE_TOOLS_GEN_ZIPF_H_

#include <cstdint>
#include <vector>

#include "tools/gen/random.h"

namespace pace {
namespace gen {

class ZipfSampler {
 public:
  // REQUIRES: n >= 1, exponent > 0 and finite, n <= 2^53.
  ZipfSampler(uint64_t n, double exponent);

  // A rank in [1, n]; rank 1 is the most likely.
  uint64_t Sample(Rng* rng) const;

  uint64_t n() const { return n_; }
  double exponent() const { return exponent_; }

 private:
  // h(x) = x^-s; HIntegral is an antiderivative of h ((x^(1-s) - 1) / (1 - s),
  // log x at s = 1) and HIntegralInverse its inverse.
  double H(double x) const;
  double HIntegral(double x) const;
  double HIntegralInverse(double x) const;

  uint64_t n_;
  double exponent_;
  double h_integral_x1_;  // HIntegral(1.5) - 1
  double h_integral_n_;   // HIntegral(n + 0.5)
  double s_;              // the squeeze: k - x <= s_ accepts without evaluating h
};

// The probability of rank k under Zipf(n, exponent): k^-s / H(n, s) (for tests
// and reports; O(n)).
double ZipfProbability(uint64_t n, double exponent, uint64_t k);

// A seeded random permutation of the ids 0..n-1, so that the popular ranks are
// spread over the id range: the rank-k draw becomes id perm[k - 1].
std::vector<uint64_t> RandomPermutation(uint64_t n, uint64_t seed);

}  // namespace gen
}  // namespace pace

#endif  // PACE_TOOLS_GEN_ZIPF_H_
