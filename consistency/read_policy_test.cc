#include "consistency/read_policy.h"

#include <gtest/gtest.h>

#include "consistency/staleness_histogram.h"

namespace pace {
namespace {

TEST(ReadPolicyTest, SspRequestsCMinusSNeverBelowZero) {
  ReadPolicy p(Consistency::kSsp, 3);
  EXPECT_EQ(p.staleness(), 3);
  EXPECT_EQ(p.MinVersion(0), 0);
  EXPECT_EQ(p.MinVersion(2), 0);
  EXPECT_EQ(p.MinVersion(10), 7);
  EXPECT_TRUE(p.IsFresh(7, 10));
  EXPECT_FALSE(p.IsFresh(6, 10));
  EXPECT_FALSE(p.uses_push());
}

TEST(ReadPolicyTest, BspIsSspWithZeroStaleness) {
  ReadPolicy p(Consistency::kBsp, 5);
  EXPECT_EQ(p.staleness(), 0);
  EXPECT_EQ(p.MinVersion(4), 4);
  EXPECT_TRUE(p.IsFresh(4, 4));
  EXPECT_FALSE(p.IsFresh(3, 4));
}

TEST(ReadPolicyTest, EsspPushesAndKeepsTheBound) {
  TableSchema s;
  s.consistency = Consistency::kEssp;
  s.staleness = 2;
  ReadPolicy p = ReadPolicy::For(s);
  EXPECT_TRUE(p.uses_push());
  EXPECT_EQ(p.MinVersion(5), 3);
  EXPECT_TRUE(p.IsFresh(3, 5));
  EXPECT_FALSE(p.IsFresh(2, 5));
}

TEST(ReadPolicyTest, AsyncNeverWaits) {
  ReadPolicy p(Consistency::kAsync, 0);
  EXPECT_TRUE(p.is_async());
  EXPECT_EQ(p.MinVersion(1000), 0);
  EXPECT_TRUE(p.IsFresh(0, 1000));
  // Pushes keep async rows fresh: without them a cached row never changes.
  EXPECT_TRUE(p.uses_push());
}

TEST(ReadPolicyTest, VapReadsAsAsyncAndCarriesItsValueBound) {
  ReadPolicy p(Consistency::kVap, 2, 0.5);
  EXPECT_FALSE(p.is_async());
  EXPECT_FALSE(p.clock_bounded());
  EXPECT_TRUE(p.value_bounded());
  EXPECT_EQ(p.value_bound(), 0.5);
  EXPECT_EQ(p.MinVersion(1000), 0);
  EXPECT_TRUE(p.IsFresh(0, 1000));
  EXPECT_EQ(p.histogram_bound(), 2);
  // Only vap has a value bound, whatever the schema says.
  EXPECT_EQ(ReadPolicy(Consistency::kEssp, 2, 0.5).value_bound(), 0.0);
  EXPECT_TRUE(ReadPolicy(Consistency::kEssp, 2).clock_bounded());
}

TEST(ReadPolicyTest, OnlyEsspAsyncAndVapArePushed) {
  EXPECT_FALSE(ReadPolicy(Consistency::kBsp, 0).uses_push());
  EXPECT_FALSE(ReadPolicy(Consistency::kSsp, 4).uses_push());
  EXPECT_TRUE(ReadPolicy(Consistency::kEssp, 4).uses_push());
  EXPECT_TRUE(ReadPolicy(Consistency::kAsync, 4).uses_push());
  EXPECT_TRUE(ReadPolicy(Consistency::kVap, 4, 1.0).uses_push());
}

TEST(ReadPolicyTest, BoundForIsTheOneBspRule) {
  EXPECT_EQ(ReadPolicy::BoundFor(Consistency::kBsp, 7), 0);
  EXPECT_EQ(ReadPolicy::BoundFor(Consistency::kSsp, 7), 7);
  EXPECT_EQ(ReadPolicy::BoundFor(Consistency::kEssp, -2), 0);
  EXPECT_EQ(ReadPolicy::BoundFor(Consistency::kAsync, 64), 64);
}

TEST(ReadPolicyTest, HistogramBoundIsSCapped) {
  EXPECT_EQ(ReadPolicy(Consistency::kBsp, 5).histogram_bound(), 0);
  EXPECT_EQ(ReadPolicy(Consistency::kSsp, 3).histogram_bound(), 3);
  EXPECT_EQ(ReadPolicy(Consistency::kAsync, 64).histogram_bound(), 64);
  EXPECT_EQ(ReadPolicy(Consistency::kAsync, 1000000).histogram_bound(), kMaxTrackedStaleness);
}

}  // namespace
}  // namespace pace
