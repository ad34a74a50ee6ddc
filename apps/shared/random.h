// The apps' random numbers (data shuffles, Gibbs sampling, straggler delays):
// the Rng of common/random.h, and seeds derived from (seed, ids).
//
// Thread-compatible: one Rng per thread.
#ifndef PACE_APPS_SHARED_RANDOM_H_
#define PACE_APPS_SHARED_RANDOM_H_

#include <cstdint>

#include "common/hash.h"
#include "common/random.h"

namespace pace {
namespace apps {

// SplitMix64's finalizer: also a good way to derive independent seeds from
// (seed, ids).
inline uint64_t SplitMix64(uint64_t x) { return Mix64(x); }

// A seed derived from a base seed and up to three ids.
inline uint64_t DeriveSeed(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  return SplitMix64(SplitMix64(SplitMix64(SplitMix64(seed) ^ a) ^ b) ^ c);
}

// A uniform double in [0, 1) that is a pure function of (seed, a, b).
inline double HashUniform(uint64_t seed, uint64_t a, uint64_t b = 0) {
  return static_cast<double>(DeriveSeed(seed, a, b) >> 11) * 0x1.0p-53;
}

// The Rng of common/random.h, seeded as the apps always were (their SplitMix
// sequence starts one increment later), so a --seed keeps giving the same run.
class Rng : public ::pace::Rng {
 public:
  explicit Rng(uint64_t seed) : ::pace::Rng(seed + 0x9E3779B97F4A7C15ull) {}
};

}  // namespace apps
}  // namespace pace

#endif  // PACE_APPS_SHARED_RANDOM_H_
