#include "apps/shared/partition.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "apps/shared/random.h"

namespace pace {
namespace apps {

std::vector<uint32_t> ShuffledOrder(size_t n, uint64_t seed) {
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  Rng rng(DeriveSeed(seed, 0x5A0FF1E));
  rng.Shuffle(&order);
  return order;
}

Range PartOf(size_t n, uint32_t part, uint32_t num_parts) {
  Range r;
  r.begin = static_cast<size_t>(static_cast<unsigned __int128>(n) * part / num_parts);
  r.end = static_cast<size_t>(static_cast<unsigned __int128>(n) * (part + 1) / num_parts);
  return r;
}

Window MinibatchWindow(size_t part_size, double fraction, int64_t clock) {
  Window w;
  if (part_size == 0) return w;
  double want = std::round(fraction * static_cast<double>(part_size));
  w.count = static_cast<size_t>(std::max(1.0, std::min(want, static_cast<double>(part_size))));
  unsigned __int128 pos = static_cast<unsigned __int128>(std::max<int64_t>(clock, 0)) * w.count;
  w.start = static_cast<size_t>(pos % part_size);
  return w;
}

}  // namespace apps
}  // namespace pace
