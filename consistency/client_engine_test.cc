#include "consistency/client_engine.h"

#include <gtest/gtest.h>

#include <deque>
#include <vector>

namespace pace::client_engine {
namespace {

struct Pending {
  ClockT clock = 0;
  bool sealed = false;
  int delta = 0;
  uint32_t part = 0;
};

struct Batch {
  ClockT clock = 0;
  uint32_t part = 0;
  bool more = false;
};

struct Row {
  Version version = 0;
  bool subscribed = false;
  std::vector<Version> reads_in_flight;  // their min_versions
  bool ReadInFlightAtMost(Version need) const {
    for (Version m : reads_in_flight) {
      if (m <= need) return true;
    }
    return false;
  }
};

Row RowAt(Version version, bool subscribed) {
  Row r;
  r.version = version;
  r.subscribed = subscribed;
  return r;
}

RowArrival ReadOf(Version v, ClockT a, uint32_t parts, bool subscribe = false) {
  return RowArrival{v, AppliedPosition{a, parts}, /*read=*/true, subscribe};
}
RowArrival PushOf(Version v, ClockT a, uint32_t parts) {
  return RowArrival{v, AppliedPosition{a, parts}, /*read=*/false, false};
}

TEST(ClientEngineTest, PushOfAnUnsubscribedRowIsIgnored) {
  const CachedRow row{true, 3, /*subscribed=*/false, /*waited_for=*/true};
  EXPECT_EQ(DecideArrival(row, PushOf(5, 5, 0), {}).action, Arrival::kStalePush);
  // A read reply for the same row is taken.
  EXPECT_EQ(DecideArrival(row, ReadOf(5, 5, 0), {}).action, Arrival::kInstall);
}

TEST(ClientEngineTest, NewerOrEqualVersionInstallsOlderKeepsTheCachedValue) {
  const CachedRow row{true, 4, true, false};
  EXPECT_EQ(DecideArrival(row, PushOf(4, 4, 0), {}).action, Arrival::kInstall);
  EXPECT_EQ(DecideArrival(row, PushOf(6, 6, 0), {}).action, Arrival::kInstall);
  const ArrivalDecision older = DecideArrival(row, ReadOf(3, 3, 0, true), {});
  EXPECT_EQ(older.action, Arrival::kOlder);
  EXPECT_TRUE(older.subscribe);  // the subscription is taken all the same
  EXPECT_FALSE(older.pushed);
  // A row without a value takes any version.
  EXPECT_EQ(DecideArrival(CachedRow{false, 9, false, false}, ReadOf(1, 1, 0), {}).action,
            Arrival::kInstall);
}

TEST(ClientEngineTest, PushedValueCountsAsPushAndSubscribesOnlyOnSubscribingRead) {
  const ArrivalDecision push = DecideArrival(CachedRow{true, 1, true, false}, PushOf(2, 2, 0), {});
  EXPECT_TRUE(push.pushed);
  EXPECT_FALSE(push.subscribe);
  EXPECT_TRUE(DecideArrival(CachedRow{}, ReadOf(2, 2, 0, true), {}).subscribe);
  EXPECT_FALSE(DecideArrival(CachedRow{}, ReadOf(2, 2, 0, false), {}).subscribe);
}

TEST(ClientEngineTest, ValueOlderThanAProcessedAckIsRefetchedNotInstalled) {
  const AppliedPosition acked{5, 2};  // parts 0, 1 of clock 5 acknowledged
  // Holds parts 0, 1 of clock 5: rebase-able.
  EXPECT_EQ(DecideArrival(CachedRow{}, ReadOf(4, 5, 2), acked).action, Arrival::kInstall);
  // Lacks part 1 of clock 5, already purged.
  ArrivalDecision d = DecideArrival(CachedRow{false, 0, false, false}, ReadOf(4, 5, 1), acked);
  EXPECT_EQ(d.action, Arrival::kRefetch);
  EXPECT_FALSE(d.drop_value);
  EXPECT_FALSE(d.send_read);  // nobody waits for it
  d = DecideArrival(CachedRow{false, 0, false, /*waited_for=*/true}, ReadOf(4, 5, 1), acked);
  EXPECT_TRUE(d.send_read);
  EXPECT_EQ(d.read_min_version, 4u);
  // A stale push drops the value and subscription and reads again.
  d = DecideArrival(CachedRow{true, 3, true, false}, PushOf(4, 4, 9), acked);
  EXPECT_EQ(d.action, Arrival::kRefetch);
  EXPECT_TRUE(d.drop_value);
  EXPECT_TRUE(d.send_read);
}

TEST(ClientEngineTest, RebaseAddsExactlyTheSealedDeltasTheValueLacks) {
  const std::vector<Pending> pending = {
      {3, true, 1, 0},   // clock 3 part 0: in a value holding (4, 0)
      {4, true, 10, 0},  // clock 4 part 0
      {4, true, 100, 1},
      {5, false, 1000, 0},  // open: never in the value
  };
  auto sum = [&](AppliedPosition holds) {
    int total = 0;
    Rebase(pending, holds, [&](const Pending& p) { total += p.delta; });
    return total;
  };
  EXPECT_EQ(sum({0, 0}), 111);
  EXPECT_EQ(sum({4, 0}), 110);
  EXPECT_EQ(sum({4, 1}), 100);
  EXPECT_EQ(sum({4, 2}), 0);
  EXPECT_EQ(sum({5, 0}), 0);
}

TEST(ClientEngineTest, ReaderPullsUnlessAPushOrAnEarlyEnoughReadWillServeIt) {
  Row row;
  EXPECT_TRUE(AsksForRow(row, /*pushed_table=*/false, 3));
  EXPECT_TRUE(AsksForRow(row, /*pushed_table=*/true, 3));  // subscribes
  row.subscribed = true;
  EXPECT_FALSE(AsksForRow(row, true, 3));  // the push refreshes it
  EXPECT_TRUE(AsksForRow(row, false, 3));  // a pulled table ignores the flag
  row.subscribed = false;
  row.reads_in_flight = {5};  // may wait for this process's clock 5
  EXPECT_TRUE(AsksForRow(row, false, 3));
  row.reads_in_flight = {5, 2};
  EXPECT_FALSE(AsksForRow(row, false, 3));
}

TEST(ClientEngineTest, AckTakesTheBatchesUpToItsPartInOrder) {
  const std::deque<Batch> unacked = {{3, 0, false}, {4, 0, true}, {4, 1, true}, {4, 2, false}};
  AckOutcome o = TakeAck(unacked, 2, 0);  // repeated after a re-send
  EXPECT_EQ(o.batches, 0u);
  o = TakeAck(unacked, 3, 0);
  EXPECT_EQ(o.batches, 1u);
  EXPECT_EQ(o.acked, (AppliedPosition{4, 0}));
  EXPECT_EQ(o.whole_clocks, 4u);
  o = TakeAck(unacked, 4, 1);  // acknowledges clock 3 and parts 0, 1 of clock 4
  EXPECT_EQ(o.batches, 3u);
  EXPECT_EQ(o.acked, (AppliedPosition{4, 2}));
  EXPECT_EQ(o.whole_clocks, 4u);  // clock 4 is still open
  o = TakeAck(unacked, 4, 2);
  EXPECT_EQ(o.batches, 4u);
  EXPECT_EQ(o.acked, (AppliedPosition{5, 0}));
  EXPECT_EQ(o.whole_clocks, 5u);
  // A part alone ends no clock.
  const std::deque<Batch> part = {{7, 0, true}};
  o = TakeAck(part, 7, 0);
  EXPECT_EQ(o.acked, (AppliedPosition{7, 1}));
  EXPECT_EQ(o.whole_clocks, 0u);
}

TEST(ClientEngineTest, AckPurgesSealedDeltasUpToItsPartOnly) {
  EXPECT_TRUE(AckedBy(Pending{4, true, 0, 1}, 4, 1));
  EXPECT_TRUE(AckedBy(Pending{3, true, 0, 7}, 4, 0));
  EXPECT_FALSE(AckedBy(Pending{4, true, 0, 2}, 4, 1));   // a later part
  EXPECT_FALSE(AckedBy(Pending{4, false, 0, 0}, 4, 1));  // open: not sent
  EXPECT_FALSE(AckedBy(Pending{5, true, 0, 0}, 4, 9));
}

TEST(ClientEngineTest, DuplicateAckAboveTheResentBatchesMeansAnotherSender) {
  const AppliedPosition below{4, 2};
  EXPECT_FALSE(DuplicateFromAnotherSender(3, 9, below));
  EXPECT_FALSE(DuplicateFromAnotherSender(4, 1, below));
  EXPECT_TRUE(DuplicateFromAnotherSender(4, 2, below));
  EXPECT_TRUE(DuplicateFromAnotherSender(5, 0, below));
}

TEST(ClientEngineTest, ResendRaisesTheDuplicateBoundPastTheLastUnackedBatch) {
  const AppliedPosition start{2, 1};  // the first Welcome: 1 part of clock 2
  EXPECT_EQ(DuplicatesBelowAfterResend(start, std::deque<Batch>{}), start);
  const std::deque<Batch> unacked = {{2, 1, true}, {2, 2, false}, {3, 0, true}};
  EXPECT_EQ(DuplicatesBelowAfterResend(start, unacked), (AppliedPosition{4, 0}));
  // Never lowered.
  EXPECT_EQ(DuplicatesBelowAfterResend(AppliedPosition{9, 0}, unacked), (AppliedPosition{9, 0}));
}

TEST(ClientEngineTest, ReconnectEndsSubscriptionsKeepingTheVouchedVersion) {
  Row sub = RowAt(3, true);
  EXPECT_TRUE(EndSessionSubscription(&sub, /*pushed=*/7));
  EXPECT_EQ(sub.version, 7u);
  EXPECT_FALSE(sub.subscribed);
  Row newer = RowAt(9, true);
  EXPECT_TRUE(EndSessionSubscription(&newer, 7));
  EXPECT_EQ(newer.version, 9u);
  Row pulled = RowAt(3, false);
  EXPECT_FALSE(EndSessionSubscription(&pulled, 7));
  EXPECT_EQ(pulled.version, 3u);  // a pulled row is not current as of a push
  EXPECT_EQ(EffectiveVersion(3, false, 7), 3u);
  EXPECT_EQ(EffectiveVersion(3, true, 7), 7u);
}

}  // namespace
}  // namespace pace::client_engine
