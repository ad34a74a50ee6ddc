#include "common/random.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace pace {
namespace {

// The stream of a seed is part of what makes datasets and runs reproducible:
// these are the outputs of tools/gen's generator before it moved here.
TEST(RngTest, StreamOfASeedIsFixed) {
  Rng r(42);
  EXPECT_EQ(r.Next(), 1546998764402558742ull);
  EXPECT_EQ(r.Next(), 6990951692964543102ull);
  EXPECT_EQ(r.Next(), 12544586762248559009ull);
  EXPECT_EQ(r.UniformInt(1000), 924u);
  EXPECT_DOUBLE_EQ(r.Normal(), 0.38346179126769431);
}

TEST(RngTest, UniformIntStaysInRangeAndShuffleIsAPermutation) {
  Rng r(7);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(r.UniformInt(3), 3u);
  std::vector<int> v(50);
  for (int i = 0; i < 50; ++i) v[i] = i;
  r.Shuffle(&v);
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_NE(v, sorted);
}

}  // namespace
}  // namespace pace
