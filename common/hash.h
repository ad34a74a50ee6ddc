// Stable 64-bit mixing functions. Their outputs are part of the on-disk and
// cluster contract (row placement, initializers): never change them.
#ifndef PACE_COMMON_HASH_H_
#define PACE_COMMON_HASH_H_

#include <cstdint>

namespace pace {

// The SplitMix64 finalizer (Steele, Lea, Flood 2014): a bijection on u64.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The shard that owns row `row` of table `table` among `num_shards` shards:
//   Mix64(Mix64(table) ^ row) mod num_shards.
// REQUIRES: num_shards >= 1.
inline uint32_t ShardOf(uint32_t table, uint64_t row, uint32_t num_shards) {
  return static_cast<uint32_t>(Mix64(Mix64(table) ^ row) % num_shards);
}

}  // namespace pace

#endif  // PACE_COMMON_HASH_H_
