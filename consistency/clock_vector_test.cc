#include "consistency/clock_vector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace pace {
namespace {

TEST(ClockVectorTest, StartsAtZeroWithEveryClientHoldingBack) {
  ClockVector cv(3, 100);
  EXPECT_EQ(cv.num_clients(), 3u);
  EXPECT_EQ(cv.Min(), 0);
  EXPECT_EQ(cv.Max(), 0);
  EXPECT_EQ(cv.Laggards(), (std::vector<ClientId>{0, 1, 2}));
  EXPECT_EQ(cv.min_since_ms(), 100);
}

TEST(ClockVectorTest, MinAdvancesOnlyWhenTheLastLaggardAdvances) {
  ClockVector cv(3, 0);
  EXPECT_EQ(cv.Advance(0, 10), 0);
  EXPECT_EQ(cv.Advance(2, 20), 0);
  EXPECT_EQ(cv.Laggards(), (std::vector<ClientId>{1}));
  EXPECT_EQ(cv.min_since_ms(), 0);
  EXPECT_EQ(cv.Advance(1, 30), 1);
  EXPECT_EQ(cv.min_since_ms(), 30);
  EXPECT_EQ(cv.Laggards(), (std::vector<ClientId>{0, 1, 2}));
  EXPECT_EQ(cv.Max(), 1);
}

TEST(ClockVectorTest, SetJumpsAndRecomputesTheMinimum) {
  ClockVector cv(2, 0);
  EXPECT_EQ(cv.Set(0, 5, 1), 0);
  EXPECT_EQ(cv.Set(1, 3, 2), 3);
  EXPECT_EQ(cv.Laggards(), (std::vector<ClientId>{1}));
  EXPECT_EQ(cv.min_since_ms(), 2);
  // Moving a client below the minimum (a restore) lowers it.
  EXPECT_EQ(cv.Set(0, 1, 3), 1);
  EXPECT_EQ(cv.Laggards(), (std::vector<ClientId>{0}));
  EXPECT_EQ(cv.min_since_ms(), 3);
  // Setting the same value is a no-op that keeps the timestamp.
  EXPECT_EQ(cv.Set(0, 1, 9), 1);
  EXPECT_EQ(cv.min_since_ms(), 3);
}

TEST(ClockVectorTest, JoiningTheMinimumIsCounted) {
  ClockVector cv(std::vector<ClockT>{2, 4}, 0);
  EXPECT_EQ(cv.Min(), 2);
  EXPECT_EQ(cv.Set(1, 2, 1), 2);   // now both at 2
  EXPECT_EQ(cv.Advance(0, 2), 2);  // client 1 still holds it
  EXPECT_EQ(cv.Laggards(), (std::vector<ClientId>{1}));
  EXPECT_EQ(cv.Advance(1, 3), 3);
}

TEST(ClockVectorTest, HeldBackSinceStartsWhenSomeoneMovesAhead) {
  ClockVector cv(2, 0);
  EXPECT_FALSE(cv.HoldsBack());
  cv.Advance(0, 500);  // client 0 now waits for client 1
  EXPECT_TRUE(cv.HoldsBack());
  EXPECT_EQ(cv.held_back_since_ms(), 500);
  EXPECT_EQ(cv.min_since_ms(), 0);
  cv.Advance(0, 600);  // still the same episode
  EXPECT_EQ(cv.held_back_since_ms(), 500);
  cv.Advance(1, 700);  // min 1, client 0 still ahead: a new episode
  EXPECT_TRUE(cv.HoldsBack());
  EXPECT_EQ(cv.held_back_since_ms(), 700);
  cv.Advance(1, 800);  // both at 2
  EXPECT_FALSE(cv.HoldsBack());
}

TEST(ClockVectorTest, IgnoresOutOfRangeClientsAndNegativeClocks) {
  ClockVector cv(std::vector<ClockT>{-3, 1}, 0);
  EXPECT_EQ(cv.Get(0), 0);
  EXPECT_EQ(cv.Set(7, 10, 1), 0);
  EXPECT_EQ(cv.Advance(7, 1), 0);
  EXPECT_EQ(cv.Set(0, -1, 1), 0);
  EXPECT_EQ(cv.Get(0), 0);
}

TEST(ClockVectorTest, NoClientsMeansClockZero) {
  ClockVector cv(0, 0);
  EXPECT_EQ(cv.Min(), 0);
  EXPECT_EQ(cv.Max(), 0);
  EXPECT_TRUE(cv.Laggards().empty());
}

TEST(ClockVectorTest, MatchesBruteForceMinimumOverARandomWalk) {
  ClockVector cv(5, 0);
  std::vector<ClockT> ref(5, 0);
  uint64_t x = 12345;
  for (int step = 0; step < 2000; ++step) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ClientId c = static_cast<ClientId>((x >> 33) % 5);
    if ((x >> 20) % 7 == 0) {
      ref[c] = static_cast<ClockT>((x >> 40) % 50);
      cv.Set(c, ref[c], step);
    } else {
      ++ref[c];
      cv.Advance(c, step);
    }
    ClockT m = *std::min_element(ref.begin(), ref.end());
    ASSERT_EQ(cv.Min(), m) << "step " << step;
    ASSERT_EQ(cv.clocks(), ref);
  }
}

}  // namespace
}  // namespace pace
