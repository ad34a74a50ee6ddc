// How the apps split their data among the job's workers: a seeded shuffle,
// near-equal contiguous parts (one per worker of every process), and the
// minibatch window each clock processes.
//
// Plain functions; thread-compatible.
#ifndef PACE_APPS_SHARED_PARTITION_H_
#define PACE_APPS_SHARED_PARTITION_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pace {
namespace apps {

// The order in which data points (ratings, documents) are dealt to workers: a permutation of
// 0..n-1 that depends only on the seed.
std::vector<uint32_t> ShuffledOrder(size_t n, uint64_t seed);

// A contiguous range [begin, end) of the shuffled order.
struct Range {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};

// Part `part` of `num_parts` near-equal contiguous parts of n items.
Range PartOf(size_t n, uint32_t part, uint32_t num_parts);

// The minibatch of a part for one clock: `count` consecutive positions of the
// part starting at `start`, wrapping around. A clock processes
// max(1, round(fraction * part_size)) items, and successive clocks continue
// where the previous one stopped, so the part is swept cyclically (also after
// a resume, since the window is a function of the clock).
struct Window {
  size_t start = 0;
  size_t count = 0;
};
Window MinibatchWindow(size_t part_size, double fraction, int64_t clock);

}  // namespace apps
}  // namespace pace

#endif  // PACE_APPS_SHARED_PARTITION_H_
