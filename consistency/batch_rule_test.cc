#include "consistency/batch_rule.h"

#include <gtest/gtest.h>

namespace pace {
namespace {

constexpr BatchAdmission kApply = BatchAdmission::kApply;
constexpr BatchAdmission kDuplicate = BatchAdmission::kDuplicate;
constexpr BatchAdmission kCompletes = BatchAdmission::kCompletesClock;
constexpr BatchAdmission kGap = BatchAdmission::kGap;

TEST(BatchRuleTest, WholeClocksApplyInOrder) {
  const AppliedPosition at3{3, 0};
  EXPECT_EQ(ClassifyBatch(at3, BatchId{3, 0, false}), kApply);
  EXPECT_EQ(ClassifyBatch(at3, BatchId{2, 0, false}), kDuplicate);
  EXPECT_EQ(ClassifyBatch(at3, BatchId{4, 0, false}), kGap);
  EXPECT_EQ(PositionAfter(at3, BatchId{3, 0, false}, kApply), (AppliedPosition{4, 0}));
  EXPECT_EQ(PositionAfter(at3, BatchId{2, 0, false}, kDuplicate), at3);
}

TEST(BatchRuleTest, PartsApplyInOrderAndTheLastCompletesTheClock) {
  AppliedPosition p{5, 0};
  const BatchId first{5, 0, true}, second{5, 1, true}, last{5, 2, false};
  EXPECT_EQ(ClassifyBatch(p, second), kGap);  // part 0 is missing
  ASSERT_EQ(ClassifyBatch(p, first), kApply);
  p = PositionAfter(p, first, kApply);
  EXPECT_EQ(p, (AppliedPosition{5, 1}));
  EXPECT_EQ(ClassifyBatch(p, first), kDuplicate);  // re-sent after a reconnect
  ASSERT_EQ(ClassifyBatch(p, second), kApply);
  p = PositionAfter(p, second, kApply);
  ASSERT_EQ(ClassifyBatch(p, last), kApply);
  p = PositionAfter(p, last, kApply);
  EXPECT_EQ(p, (AppliedPosition{6, 0}));
  EXPECT_EQ(ClassifyBatch(p, last), kDuplicate);
}

TEST(BatchRuleTest, ALastPartBelowThePartsAppliedCompletesTheClockWithoutItsDeltas) {
  // A previous incarnation sent parts 0..2 of clock 7 and died; the re-run
  // cut the clock into two parts: its part 1 is the last.
  const AppliedPosition p{7, 3};
  const BatchId rerun_last{7, 1, false};
  ASSERT_EQ(ClassifyBatch(p, rerun_last), kCompletes);
  EXPECT_EQ(PositionAfter(p, rerun_last, kCompletes), (AppliedPosition{8, 0}));
  // A part with more to come below the parts applied is a plain duplicate.
  EXPECT_EQ(ClassifyBatch(p, BatchId{7, 1, true}), kDuplicate);
  EXPECT_EQ(ClassifyBatch(p, BatchId{7, 4, false}), kGap);
  EXPECT_EQ(ClassifyBatch(p, BatchId{7, 3, false}), kApply);
}

TEST(BatchRuleTest, PartBeforeOrdersByClockThenPart) {
  EXPECT_TRUE(PartBefore(1, 5, 2, 0));
  EXPECT_TRUE(PartBefore(2, 0, 2, 1));
  EXPECT_FALSE(PartBefore(2, 1, 2, 1));
  EXPECT_FALSE(PartBefore(3, 0, 2, 9));
}

}  // namespace
}  // namespace pace
