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

TEST(BatchRuleTest, PartsAreTakenBackOnlyForAnotherProcess) {
  const IncompleteClock ic{7, 2, true, 11};
  EXPECT_TRUE(NeedsUndo(ic, 12));
  EXPECT_FALSE(NeedsUndo(ic, 11));  // the same process re-sends instead
  EXPECT_FALSE(NeedsUndo(ic, 0));   // a client that does not say
  EXPECT_FALSE(NeedsUndo(IncompleteClock{7, 2, false, 11}, 12));  // no records
  EXPECT_FALSE(NeedsUndo(IncompleteClock{7, 0, false, 0}, 12));   // nothing applied
}

TEST(BatchRuleTest, TheFirstPartKeepsItsClockUndoableUntilTheClockCompletes) {
  const UndoState none;
  const UndoState from11 =
      UndoStateAfter(none, AppliedPosition{7, 0}, BatchId{7, 0, true}, BatchAdmission::kApply, 11);
  EXPECT_TRUE(from11.kept);
  EXPECT_EQ(from11.incarnation, 11u);
  // Later parts keep the first one's state, whoever sends them.
  const UndoState later = UndoStateAfter(from11, AppliedPosition{7, 1}, BatchId{7, 1, true},
                                         BatchAdmission::kApply, 12);
  EXPECT_EQ(later.incarnation, 11u);
  EXPECT_FALSE(
      UndoStateAfter(none, AppliedPosition{7, 1}, BatchId{7, 1, true}, BatchAdmission::kApply, 12)
          .kept);
  // The last part, or a last part that completes the clock, drops them.
  EXPECT_FALSE(
      UndoStateAfter(later, AppliedPosition{7, 2}, BatchId{7, 2, false}, BatchAdmission::kApply, 11)
          .kept);
  EXPECT_FALSE(UndoStateAfter(later, AppliedPosition{7, 2}, BatchId{7, 0, false},
                              BatchAdmission::kCompletesClock, 12)
                   .kept);
}

TEST(BatchRuleTest, PartBeforeOrdersByClockThenPart) {
  EXPECT_TRUE(PartBefore(1, 5, 2, 0));
  EXPECT_TRUE(PartBefore(2, 0, 2, 1));
  EXPECT_FALSE(PartBefore(2, 1, 2, 1));
  EXPECT_FALSE(PartBefore(3, 0, 2, 9));
}

}  // namespace
}  // namespace pace
