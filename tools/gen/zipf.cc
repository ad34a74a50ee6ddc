#include "tools/gen/zipf.h"

#include <algorithm>
#include <cmath>

namespace pace {
namespace gen {
namespace {

// log1p(x) / x, continuous at 0.
double Helper1(double x) {
  if (std::fabs(x) > 1e-8) return std::log1p(x) / x;
  return 1.0 - x * (0.5 - x * (1.0 / 3.0 - x * 0.25));
}

// expm1(x) / x, continuous at 0.
double Helper2(double x) {
  if (std::fabs(x) > 1e-8) return std::expm1(x) / x;
  return 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + x * 0.25));
}

}  // namespace

ZipfSampler::ZipfSampler(uint64_t n, double exponent) : n_(n), exponent_(exponent) {
  h_integral_x1_ = HIntegral(1.5) - 1.0;
  h_integral_n_ = HIntegral(static_cast<double>(n_) + 0.5);
  s_ = 2.0 - HIntegralInverse(HIntegral(2.5) - H(2.0));
}

uint64_t ZipfSampler::Sample(Rng* rng) const {
  const double n = static_cast<double>(n_);
  for (;;) {
    // u uniform in (HIntegral(1.5) - 1, HIntegral(n + 0.5)].
    const double u = h_integral_n_ + rng->Uniform() * (h_integral_x1_ - h_integral_n_);
    const double x = HIntegralInverse(u);
    double k = std::floor(x + 0.5);
    if (k < 1) k = 1;
    if (k > n) k = n;
    // Accept k if u falls under the histogram bar of k: in the squeeze, or
    // above HIntegral(k + 0.5) - h(k).
    if (k - x <= s_ || u >= HIntegral(k + 0.5) - H(k)) return static_cast<uint64_t>(k);
  }
}

double ZipfSampler::H(double x) const { return std::exp(-exponent_ * std::log(x)); }

double ZipfSampler::HIntegral(double x) const {
  const double log_x = std::log(x);
  return Helper2((1.0 - exponent_) * log_x) * log_x;
}

double ZipfSampler::HIntegralInverse(double x) const {
  double t = x * (1.0 - exponent_);
  if (t < -1.0) t = -1.0;  // rounding can put t just below the domain
  return std::exp(Helper1(t) * x);
}

double ZipfProbability(uint64_t n, double exponent, uint64_t k) {
  double norm = 0;
  for (uint64_t j = n; j >= 1; --j) norm += std::pow(static_cast<double>(j), -exponent);
  return std::pow(static_cast<double>(k), -exponent) / norm;
}

std::vector<uint64_t> RandomPermutation(uint64_t n, uint64_t seed) {
  std::vector<uint64_t> perm(n);
  for (uint64_t i = 0; i < n; ++i) perm[i] = i;
  Rng rng(seed);
  rng.Shuffle(&perm);
  return perm;
}

}  // namespace gen
}  // namespace pace
