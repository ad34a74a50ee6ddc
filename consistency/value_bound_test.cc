#include "consistency/value_bound.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pace {
namespace {

TEST(AbsSumTest, DenseAndSparseL1Norm) {
  RowFormat dense{RowKind::kDense, ElementType::kF32, 3};
  EXPECT_DOUBLE_EQ(AbsSum(dense, EncodeDense<float>({1.5f, -2.0f, 0.5f})), 4.0);
  RowFormat ints{RowKind::kDense, ElementType::kI64, 2};
  EXPECT_DOUBLE_EQ(AbsSum(ints, EncodeDense<int64_t>({-3, 4})), 7.0);
  RowFormat sparse{RowKind::kSparse, ElementType::kF64, 0};
  EXPECT_DOUBLE_EQ(AbsSum(sparse, EncodeSparse(std::map<uint32_t, double>{{7, -0.25}, {9, 1.0}})),
                   1.25);
  EXPECT_DOUBLE_EQ(AbsSum(dense, std::string("short")), 0.0);  // not a valid delta
}

TEST(ValueBoundLedgerTest, RowOverTheBoundWaitsForItsShardOnly) {
  ValueBoundLedger l;
  const RowKey a{1, 10}, b{1, 11};
  l.Add(0, 5, 0, a, 0.6, 1.0);
  l.Add(1, 5, 0, b, 0.4, 1.0);
  EXPECT_TRUE(l.WithinBound());
  l.Add(0, 6, 0, a, 0.6, 1.0);  // 1.2 in flight on row a, shard 0
  EXPECT_FALSE(l.WithinBound());
  // Acknowledging clock 5 alone brings row a back to 0.6.
  EXPECT_EQ(l.WaitFor(), (std::vector<std::pair<uint32_t, ClockT>>{{0, 6}}));
  l.Acked(1, 7);  // the other shard's acks do not help
  EXPECT_FALSE(l.WithinBound());
  l.Acked(0, 6);
  EXPECT_TRUE(l.WithinBound());
  EXPECT_DOUBLE_EQ(l.MaxInFlight(), 0.6);
  l.Acked(0, 7);
  EXPECT_EQ(l.rows_in_flight(), 0u);
}

TEST(ValueBoundLedgerTest, OneClockOverTheBoundWaitsForThatClock) {
  ValueBoundLedger l;
  const RowKey a{2, 1};
  l.Add(0, 3, 0, a, 0.1, 0.5);
  l.Add(0, 4, 0, a, 2.0, 0.5);
  EXPECT_EQ(l.WaitFor(), (std::vector<std::pair<uint32_t, ClockT>>{{0, 5}}));
  l.Acked(0, 4);
  EXPECT_FALSE(l.WithinBound());  // clock 4's 2.0 alone exceeds 0.5
  l.Acked(0, 5);
  EXPECT_TRUE(l.WithinBound());
}

// A part of the open clock, sent early, leaves the flight with its own Ack:
// the clock it belongs to may be finished only by a worker waiting for it.
TEST(ValueBoundLedgerTest, AnAcknowledgedPartIsNoLongerInFlight) {
  ValueBoundLedger l;
  const RowKey a{2, 1};
  l.Add(0, 3, 0, a, 2.0, 1.0);
  l.Add(0, 3, 1, a, 0.5, 1.0);
  EXPECT_FALSE(l.WithinBound());
  l.Acked(0, 3, 1);  // part 0 of clock 3
  EXPECT_TRUE(l.WithinBound());
  EXPECT_DOUBLE_EQ(l.MaxInFlight(), 0.5);
  l.Acked(0, 4);
  EXPECT_EQ(l.rows_in_flight(), 0u);
}

TEST(ValueBoundLedgerTest, ExactlyTheBoundIsWithinIt) {
  ValueBoundLedger l;
  const RowKey a{3, 1};
  l.Add(0, 1, 0, a, 0.1, 0.3);
  l.Add(0, 1, 0, a, 0.2, 0.3);  // 0.1 + 0.2 rounds above 0.3 in binary
  EXPECT_TRUE(l.WithinBound());
  EXPECT_TRUE(l.WaitFor().empty());
}

TEST(ValueBoundLedgerTest, PerRowBoundsOfDifferentTables) {
  ValueBoundLedger l;
  l.Add(0, 1, 0, RowKey{1, 1}, 5.0, 10.0);
  l.Add(0, 1, 0, RowKey{2, 1}, 5.0, 1.0);
  EXPECT_FALSE(l.WithinBound());
  EXPECT_EQ(l.WaitFor(), (std::vector<std::pair<uint32_t, ClockT>>{{0, 2}}));
  // Empty updates are not in flight; an Ack of a shard never written is a no-op.
  l.Add(0, 1, 0, RowKey{4, 1}, 0.0, 1.0);
  l.Acked(7, 100);
  EXPECT_EQ(l.rows_in_flight(), 2u);
}

}  // namespace
}  // namespace pace
