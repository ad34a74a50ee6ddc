// A small, portable pseudo-random generator for the apps (data shuffles,
// Gibbs sampling, straggler delays). Specified by this file alone, so runs are
// reproducible across standard libraries.
//
// Thread-compatible: one Rng per thread.
#ifndef PACE_APPS_SHARED_RANDOM_H_
#define PACE_APPS_SHARED_RANDOM_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace pace {
namespace apps {

// SplitMix64: also a good way to derive independent seeds from (seed, ids).
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A seed derived from a base seed and up to three ids.
inline uint64_t DeriveSeed(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  return SplitMix64(SplitMix64(SplitMix64(SplitMix64(seed) ^ a) ^ b) ^ c);
}

// A uniform double in [0, 1) that is a pure function of (seed, a, b).
inline double HashUniform(uint64_t seed, uint64_t a, uint64_t b = 0) {
  return static_cast<double>(DeriveSeed(seed, a, b) >> 11) * 0x1.0p-53;
}

// xoshiro256** (Blackman, Vigna 2018).
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t x = seed;
    for (uint64_t& s : s_) {
      x += 0x9E3779B97F4A7C15ull;
      s = SplitMix64(x);
    }
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

  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n), n >= 1 (multiply-shift; bias below 2^-32 for
  // the sizes used here).
  uint64_t UniformInt(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }

  template <typename T>
  void Shuffle(std::vector<T>* v) {
    for (size_t i = v->size(); i > 1; --i) {
      size_t j = static_cast<size_t>(UniformInt(i));
      std::swap((*v)[i - 1], (*v)[j]);
    }
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace apps
}  // namespace pace

#endif  // PACE_APPS_SHARED_RANDOM_H_
