// The one pseudo-random generator of the code base (apps, data generators,
// tests, benchmarks) and the samplers they need. std::normal_distribution and
// friends are implementation defined, so a stream drawn from a seed could
// differ between standard libraries; everything here is specified by this file
// alone, so a seed reproduces a dataset or a run anywhere.
//
// Thread-compatible: one Rng per thread.
#ifndef PACE_COMMON_RANDOM_H_
#define PACE_COMMON_RANDOM_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/hash.h"

namespace pace {

// xoshiro256** (Blackman, Vigna 2018) seeded through SplitMix64.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t x = seed;
    for (uint64_t& s : s_) s = SplitMix(&x);
  }

  uint64_t Next() {
    uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n). REQUIRES: n >= 1.
  uint64_t UniformInt(uint64_t n) {
    // Lemire's multiply-shift with rejection: exact and unbiased.
    unsigned __int128 m = static_cast<unsigned __int128>(Next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(Next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // Standard normal (Box-Muller; one draw per call).
  double Normal() {
    double u1 = 1.0 - Uniform();  // (0, 1]
    double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  // Gamma(shape, 1) by Marsaglia and Tsang (2000). REQUIRES: shape > 0.
  double Gamma(double shape) {
    if (shape < 1.0) {
      // Gamma(a) = Gamma(a + 1) * U^(1/a).
      double u = 1.0 - Uniform();
      return Gamma(shape + 1.0) * std::pow(u, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0;
    double c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      double x = Normal();
      double v = 1.0 + c * x;
      if (v <= 0) continue;
      v = v * v * v;
      double u = 1.0 - Uniform();
      if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
    }
  }

  // A draw from a symmetric Dirichlet(alpha) of dimension n into *out.
  void Dirichlet(double alpha, size_t n, std::vector<double>* out) {
    out->resize(n);
    double sum = 0;
    for (double& x : *out) {
      x = Gamma(alpha);
      sum += x;
    }
    if (sum <= 0) {  // all draws underflowed: put the mass on one coordinate
      for (double& x : *out) x = 0;
      (*out)[UniformInt(n)] = 1.0;
      return;
    }
    for (double& x : *out) x /= sum;
  }

  // Poisson(mean): inversion for small means, a rounded normal approximation
  // for large ones (the generators only need a plausible length).
  uint64_t Poisson(double mean) {
    if (mean <= 0) return 0;
    if (mean > 200) {
      double x = std::round(mean + std::sqrt(mean) * Normal());
      return x < 0 ? 0 : static_cast<uint64_t>(x);
    }
    double limit = std::exp(-mean);
    double p = 1.0;
    uint64_t k = 0;
    for (;;) {
      p *= Uniform();
      if (p <= limit) return k;
      ++k;
    }
  }

  // Fisher-Yates shuffle of *v.
  template <typename T>
  void Shuffle(std::vector<T>* v) {
    for (size_t i = v->size(); i > 1; --i) {
      const size_t j = static_cast<size_t>(UniformInt(i));
      std::swap((*v)[i - 1], (*v)[j]);
    }
  }

  // Index drawn from the (unnormalized, non-negative) weights `w`.
  // REQUIRES: the weights sum to > 0.
  size_t Categorical(const std::vector<double>& w, double total) {
    double r = Uniform() * total;
    for (size_t i = 0; i < w.size(); ++i) {
      r -= w[i];
      if (r < 0) return i;
    }
    for (size_t i = w.size(); i-- > 0;) {
      if (w[i] > 0) return i;
    }
    return 0;
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  // The i-th output of the SplitMix64 generator started at x (i from 0):
  // Mix64 adds the golden-ratio increment itself.
  static uint64_t SplitMix(uint64_t* x) {
    const uint64_t z = Mix64(*x);
    *x += 0x9E3779B97F4A7C15ull;
    return z;
  }

  uint64_t s_[4];
};

}  // namespace pace

#endif  // PACE_COMMON_RANDOM_H_
