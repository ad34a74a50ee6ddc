#include "consistency/shard_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace pace {
namespace {

// Rows are strings; a row never written reads as "". The test keeps the
// applied clocks in step with the rows.
class FakeRows : public RowsView {
 public:
  Status ReadRows(uint32_t table, const std::vector<uint64_t>& rows,
                  std::vector<std::string>* values) const override {
    ++reads;
    values->clear();
    for (uint64_t r : rows) {
      if (failing.count(RowKey{table, r}) != 0) return Status::IOError("injected");
      auto it = data.find(RowKey{table, r});
      values->push_back(it == data.end() ? "" : it->second);
    }
    return Status::OK();
  }
  // A row without an entry in `data` has no record: absent.
  Status ReadRowsOrAbsent(uint32_t table, const std::vector<uint64_t>& rows,
                          std::vector<std::string>* values,
                          std::vector<uint8_t>* absent) const override {
    RETURN_IF_ERROR(ReadRows(table, rows, values));
    absent->clear();
    for (uint64_t r : rows) absent->push_back(data.count(RowKey{table, r}) == 0 ? 1 : 0);
    return Status::OK();
  }
  Version ShardClock() const override {
    return applied.empty() ? 0 : *std::min_element(applied.begin(), applied.end());
  }
  ClockT AppliedClock(ClientId c) const override { return c < applied.size() ? applied[c] : 0; }

  std::map<RowKey, std::string> data;
  std::set<RowKey> failing;
  std::vector<ClockT> applied;
  mutable int reads = 0;
};

// Records what the engine sends.
class FakePeer : public Peer {
 public:
  void SendReadAnswer(ReadAnswer a) override { answers.push_back(std::move(a)); }
  void SendReadError(uint64_t req_id, const Status& st) override {
    errors.emplace_back(req_id, st.code());
  }
  void SendPush(PushBatch p) override { pushes.push_back(std::move(p)); }
  void SendPushDone(Version v, ClockT a) override { dones.emplace_back(v, a); }

  // Rows pushed (all pushes), as "table/row=value".
  std::vector<std::string> PushedRows() const {
    std::vector<std::string> out;
    for (const PushBatch& p : pushes) {
      for (const RowValue& r : p.rows) {
        out.push_back(std::to_string(r.table) + "/" + std::to_string(r.row) + "=" + r.bytes);
      }
    }
    return out;
  }
  std::vector<ReadAnswer> answers;
  std::vector<std::pair<uint64_t, StatusCode>> errors;
  std::vector<PushBatch> pushes;
  std::vector<std::pair<Version, ClockT>> dones;
};

ReadRequest Req(uint64_t id, std::vector<uint64_t> rows, Version min_version,
                bool subscribe = false, uint32_t table = 1) {
  ReadRequest r;
  r.req_id = id;
  r.table = table;
  r.rows = std::move(rows);
  r.min_version = min_version;
  r.subscribe = subscribe;
  return r;
}

class ShardEngineTest : public ::testing::Test {
 protected:
  void Start(uint32_t clients, ShardEngineOptions o = ShardEngineOptions()) {
    rows_.applied.assign(clients, 0);
    engine_ = std::make_unique<ShardEngine>(o, rows_.applied, 0);
    for (uint32_t c = 0; c < clients; ++c) {
      peers_.push_back(std::make_shared<FakePeer>());
      engine_->Connect(c + 1, peers_.back(), PeerInfo{true, c});
    }
  }
  // Client c's batch of `clock` changed `rows` of table 1 to `value`.
  void Apply(ClientId c, std::vector<uint64_t> rows, const std::string& value) {
    for (uint64_t r : rows) {
      rows_.data[RowKey{1, r}] = value;
      engine_->MarkChanged(c + 1, RowKey{1, r});
    }
    ++rows_.applied[c];
    engine_->Advance(c, rows_.applied[c], 0, rows_);
  }
  // AdmitRead, and if answerable the answer at once from rows_ (as the
  // shard service does on a reader thread).
  void ReadNow(PeerId id, ReadRequest read, const RowsView& view) {
    if (engine_->AdmitRead(id, &read) != ShardEngine::ReadAction::kAnswer) return;
    ReadAnswer answer;
    Status st = ShardEngine::AnswerFromView(engine_->InfoOf(id), read, view, &answer);
    engine_->FinishRead(id, read, st, std::move(answer));
  }
  FakePeer& peer(ClientId c) { return *peers_[c]; }

  FakeRows rows_;
  std::unique_ptr<ShardEngine> engine_;
  std::vector<std::shared_ptr<FakePeer>> peers_;
};

TEST_F(ShardEngineTest, ReadIsAnsweredAtOnceWhenTheShardClockSuffices) {
  Start(2);
  rows_.data[RowKey{1, 7}] = "x";
  ReadNow(1, Req(5, {7}, 0), rows_);
  ASSERT_EQ(peer(0).answers.size(), 1u);
  const ReadAnswer& a = peer(0).answers[0];
  EXPECT_EQ(a.req_id, 5u);
  EXPECT_EQ(a.version, 0);
  EXPECT_EQ(a.applied_clock, 0);
  ASSERT_EQ(a.rows.size(), 1u);
  EXPECT_EQ(a.rows[0].bytes, "x");
}

// Rows without a record go to a peer that computes them itself as absent
// (also when the read was parked, and from the state it is answered from:
// a row written meanwhile has its value); other peers get every value.
TEST_F(ShardEngineTest, AbsentRowsOnlyToPeersThatAcceptThem) {
  Start(2);
  auto knows = std::make_shared<FakePeer>();
  engine_->Connect(50, knows, PeerInfo{true, 0, /*absent_rows=*/true});
  rows_.data[RowKey{1, 7}] = "x";
  ReadNow(50, Req(1, {7, 8}, 0), rows_);
  ReadNow(2, Req(2, {7, 8}, 0), rows_);
  ASSERT_EQ(knows->answers.size(), 1u);
  const ReadAnswer& a = knows->answers[0];
  EXPECT_FALSE(a.rows[0].absent);
  EXPECT_EQ(a.rows[0].bytes, "x");
  EXPECT_TRUE(a.rows[1].absent);
  EXPECT_TRUE(a.rows[1].bytes.empty());
  ASSERT_EQ(peer(1).answers.size(), 1u);
  EXPECT_FALSE(peer(1).answers[0].rows[1].absent);
  EXPECT_EQ(engine_->counters().rows_read_absent, 1);

  ReadNow(50, Req(3, {8, 9}, 1), rows_);  // parked until C = 1
  EXPECT_EQ(engine_->num_parked(), 1u);
  Apply(0, {8}, "y");
  Apply(1, {}, "");
  ASSERT_EQ(knows->answers.size(), 2u);
  const ReadAnswer& b = knows->answers[1];
  EXPECT_EQ(b.version, 1);
  EXPECT_FALSE(b.rows[0].absent);
  EXPECT_EQ(b.rows[0].bytes, "y");
  EXPECT_TRUE(b.rows[1].absent);
}

TEST_F(ShardEngineTest, ReadIsParkedUntilEveryClientReachesMinVersion) {
  Start(2);
  ReadNow(1, Req(1, {3}, 1), rows_);
  EXPECT_EQ(engine_->num_parked(), 1u);
  Apply(0, {3}, "a");  // client 0 at 1, client 1 at 0: C stays 0
  EXPECT_TRUE(peer(0).answers.empty());
  Apply(1, {}, "");  // C = 1
  ASSERT_EQ(peer(0).answers.size(), 1u);
  EXPECT_EQ(peer(0).answers[0].version, 1);
  EXPECT_EQ(peer(0).answers[0].applied_clock, 1);
  EXPECT_EQ(peer(0).answers[0].rows[0].bytes, "a");
  EXPECT_EQ(engine_->num_parked(), 0u);
}

TEST_F(ShardEngineTest, AnswerCarriesTheReadersOwnAppliedClock) {
  Start(2);
  Apply(0, {}, "");
  Apply(0, {}, "");  // client 0 at 2, client 1 at 0
  ReadNow(1, Req(1, {0}, 0), rows_);
  ReadNow(2, Req(2, {0}, 0), rows_);
  EXPECT_EQ(peer(0).answers.at(0).applied_clock, 2);
  EXPECT_EQ(peer(1).answers.at(0).applied_clock, 0);
  EXPECT_EQ(peer(0).answers.at(0).version, 0);
}

TEST_F(ShardEngineTest, ObserversGetTheShardClockAsAppliedClock) {
  Start(1);
  Apply(0, {}, "");
  auto obs = std::make_shared<FakePeer>();
  engine_->Connect(99, obs, PeerInfo{false, 0});
  ReadNow(99, Req(1, {0}, 0), rows_);
  ASSERT_EQ(obs->answers.size(), 1u);
  EXPECT_EQ(obs->answers[0].applied_clock, 1);
}

TEST_F(ShardEngineTest, AnswerOffTheLockIsStampedFromItsView) {
  Start(2);
  ReadRequest r = Req(4, {1}, 0, /*subscribe=*/true);
  ASSERT_EQ(engine_->AdmitRead(1, &r), ShardEngine::ReadAction::kAnswer);
  // The writer made a group visible that the engine has not recorded yet.
  rows_.data[RowKey{1, 1}] = "new";
  rows_.applied = {1, 1};
  ReadAnswer a;
  ASSERT_TRUE(ShardEngine::AnswerFromView(engine_->InfoOf(1), r, rows_, &a).ok());
  EXPECT_EQ(a.version, 1);  // the view's clocks, consistent with its values
  EXPECT_EQ(a.applied_clock, 1);
  engine_->FinishRead(1, r, Status::OK(), std::move(a));
  ASSERT_EQ(peer(0).answers.size(), 1u);
  EXPECT_EQ(peer(0).answers[0].rows[0].bytes, "new");
  EXPECT_TRUE(engine_->subscriptions().IsSubscribed(1, RowKey{1, 1}));
  ReadRequest parked = Req(5, {1}, 3);
  EXPECT_EQ(engine_->AdmitRead(1, &parked), ShardEngine::ReadAction::kParked);
  engine_->FinishRead(77, r, Status::OK(), ReadAnswer());  // unknown peer: ignored
}

TEST_F(ShardEngineTest, ParkedReadsPerPeerAreBounded) {
  ShardEngineOptions o;
  o.max_parked_reads_per_peer = 2;
  Start(1, o);
  ReadNow(1, Req(1, {0}, 5), rows_);
  ReadNow(1, Req(2, {0}, 5), rows_);
  ReadNow(1, Req(3, {0}, 5), rows_);
  ASSERT_EQ(peer(0).errors.size(), 1u);
  EXPECT_EQ(peer(0).errors[0].first, 3u);
  EXPECT_EQ(peer(0).errors[0].second, StatusCode::kResourceExhausted);
  EXPECT_EQ(engine_->num_parked(), 2u);
}

// Parked bytes: 128 + 8 per row a Read, capped per peer and in total; the
// charge is returned when the read is answered or its peer disconnects.
TEST_F(ShardEngineTest, ParkedReadBytesPerPeerAndInTotalAreBounded) {
  ShardEngineOptions o;
  o.max_parked_bytes_per_peer = 2 * (kParkedReadOverhead + 8 * 10);
  o.max_parked_bytes_total = 3 * (kParkedReadOverhead + 8 * 10);
  Start(2, o);
  const std::vector<uint64_t> ten = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  ReadNow(1, Req(1, ten, 1), rows_);
  ReadNow(1, Req(2, ten, 1), rows_);
  ReadNow(1, Req(3, ten, 1), rows_);  // over the peer's cap
  ASSERT_EQ(peer(0).errors.size(), 1u);
  EXPECT_EQ(peer(0).errors[0], std::make_pair(uint64_t{3}, StatusCode::kResourceExhausted));
  ReadNow(2, Req(4, ten, 1), rows_);
  ReadNow(2, Req(5, ten, 1), rows_);  // over the total cap
  ASSERT_EQ(peer(1).errors.size(), 1u);
  EXPECT_EQ(peer(1).errors[0], std::make_pair(uint64_t{5}, StatusCode::kResourceExhausted));
  EXPECT_EQ(engine_->num_parked(), 3u);
  EXPECT_EQ(engine_->parked_bytes(), 3 * (kParkedReadOverhead + 80));
  // A read that is answered at once is not parked and not capped.
  ReadNow(2, Req(6, ten, 0), rows_);
  EXPECT_EQ(peer(1).answers.size(), 1u);
  // Answered: the charge is returned.
  Apply(0, {}, "");
  Apply(1, {}, "");
  EXPECT_EQ(engine_->num_parked(), 0u);
  EXPECT_EQ(engine_->parked_bytes(), 0u);
  ReadNow(1, Req(7, ten, 5), rows_);
  engine_->Disconnect(1);
  EXPECT_EQ(engine_->parked_bytes(), 0u);
}

TEST_F(ShardEngineTest, SubscriptionsPerPeerAndInTotalAreBounded) {
  ShardEngineOptions o;
  o.max_subscriptions_per_peer = 3;
  o.max_subscriptions_total = 5;
  Start(2, o);
  ReadNow(1, Req(1, {0, 1}, 0, true), rows_);
  ReadNow(1, Req(2, {2, 3}, 0, true), rows_);  // 4 > 3
  ASSERT_EQ(peer(0).errors.size(), 1u);
  EXPECT_EQ(peer(0).errors[0], std::make_pair(uint64_t{2}, StatusCode::kResourceExhausted));
  ReadNow(2, Req(3, {0, 1, 2}, 0, true), rows_);
  ReadNow(2, Req(4, {3}, 0, true), rows_);  // 6 > 5 in total
  ASSERT_EQ(peer(1).errors.size(), 1u);
  EXPECT_EQ(peer(1).errors[0], std::make_pair(uint64_t{4}, StatusCode::kResourceExhausted));
  EXPECT_EQ(engine_->subscriptions().num_subscriptions(), 5u);
  ReadNow(2, Req(5, {3}, 0, false), rows_);  // not subscribing: answered
  EXPECT_EQ(peer(1).answers.size(), 2u);
}

TEST_F(ShardEngineTest, ReadErrorGoesToTheReader) {
  Start(1);
  rows_.failing.insert(RowKey{1, 4});
  ReadNow(1, Req(8, {4}, 0), rows_);
  ASSERT_EQ(peer(0).errors.size(), 1u);
  EXPECT_EQ(peer(0).errors[0], std::make_pair(uint64_t{8}, StatusCode::kIOError));
}

TEST_F(ShardEngineTest, SubscribersGetChangedRowsThenPushDone) {
  Start(2);
  ReadNow(1, Req(1, {1, 2}, 0, /*subscribe=*/true), rows_);
  Apply(1, {1}, "b");  // client 1 changes row 1
  Apply(0, {}, "");    // C = 1
  EXPECT_EQ(peer(0).PushedRows(), std::vector<std::string>{"1/1=b"});
  ASSERT_EQ(peer(0).dones.size(), 1u);
  EXPECT_EQ(peer(0).dones[0], std::make_pair(Version{1}, ClockT{1}));
  EXPECT_EQ(peer(0).pushes[0].version, 1);
  // Client 1 subscribes to nothing: no marker either.
  EXPECT_TRUE(peer(1).dones.empty());
}

TEST_F(ShardEngineTest, PushDoneAlsoWhenNothingChanged) {
  Start(1);
  ReadNow(1, Req(1, {1}, 0, true), rows_);
  Apply(0, {}, "");
  EXPECT_TRUE(peer(0).pushes.empty());
  EXPECT_EQ(peer(0).dones.size(), 1u);
}

TEST_F(ShardEngineTest, RowChangedOnlyByTheSubscriberIsNotPushedBack) {
  Start(2);
  ReadNow(1, Req(1, {1, 2}, 0, true), rows_);
  ReadNow(2, Req(2, {1, 2}, 0, true), rows_);
  Apply(0, {1}, "own");    // row 1 by client 0 only
  Apply(1, {2}, "other");  // row 2 by client 1 only; C = 1
  EXPECT_EQ(peer(0).PushedRows(), std::vector<std::string>{"1/2=other"});
  EXPECT_EQ(peer(1).PushedRows(), std::vector<std::string>{"1/1=own"});
}

TEST_F(ShardEngineTest, RowChangedByTwoWritersIsPushedToBoth) {
  Start(2);
  ReadNow(1, Req(1, {1}, 0, true), rows_);
  ReadNow(2, Req(2, {1}, 0, true), rows_);
  Apply(0, {1}, "x");
  Apply(1, {1}, "xy");
  EXPECT_EQ(peer(0).PushedRows(), std::vector<std::string>{"1/1=xy"});
  EXPECT_EQ(peer(1).PushedRows(), std::vector<std::string>{"1/1=xy"});
}

TEST_F(ShardEngineTest, UnreadableRowWithholdsPushDoneAndIsRetried) {
  Start(2);
  ReadNow(1, Req(1, {1}, 0, true), rows_);
  Apply(1, {1}, "v1");
  rows_.failing.insert(RowKey{1, 1});
  Apply(0, {}, "");  // C = 1, the row cannot be read
  EXPECT_TRUE(peer(0).pushes.empty());
  EXPECT_TRUE(peer(0).dones.empty());
  rows_.failing.clear();
  Apply(0, {}, "");
  Apply(1, {}, "");  // C = 2: retried
  EXPECT_EQ(peer(0).PushedRows(), std::vector<std::string>{"1/1=v1"});
  ASSERT_EQ(peer(0).dones.size(), 1u);
  EXPECT_EQ(peer(0).dones[0].first, 2);
}

TEST_F(ShardEngineTest, RetryPushesCompletesAFailedPushWithoutANewClock) {
  Start(2);
  ReadNow(1, Req(1, {1}, 0, true), rows_);
  Apply(1, {1}, "v1");
  rows_.failing.insert(RowKey{1, 1});
  Apply(0, {}, "");  // C = 1, the row cannot be read
  EXPECT_TRUE(engine_->push_retry_pending());
  EXPECT_TRUE(peer(0).dones.empty());
  engine_->RetryPushes(rows_);  // still failing: still pending
  EXPECT_TRUE(engine_->push_retry_pending());
  EXPECT_TRUE(peer(0).dones.empty());
  rows_.failing.clear();
  engine_->RetryPushes(rows_);
  EXPECT_FALSE(engine_->push_retry_pending());
  EXPECT_EQ(peer(0).PushedRows(), std::vector<std::string>{"1/1=v1"});
  ASSERT_EQ(peer(0).dones.size(), 1u);
  EXPECT_EQ(peer(0).dones[0].first, 1);
  engine_->RetryPushes(rows_);  // nothing pending: nothing sent
  EXPECT_EQ(peer(0).dones.size(), 1u);
}

TEST_F(ShardEngineTest, LargePushesAreCutByBytes) {
  ShardEngineOptions o;
  o.max_push_bytes = 10;
  Start(2, o);
  ReadNow(1, Req(1, {1, 2, 3}, 0, true), rows_);
  Apply(1, {1, 2, 3}, std::string(6, 'z'));
  Apply(0, {}, "");
  EXPECT_EQ(peer(0).pushes.size(), 2u);  // 12 bytes, then 6
  EXPECT_EQ(peer(0).PushedRows().size(), 3u);
  EXPECT_EQ(peer(0).dones.size(), 1u);
}

TEST_F(ShardEngineTest, UnsubscribedRowsAreNotPushed) {
  Start(2);
  ReadNow(1, Req(1, {1, 2}, 0, true), rows_);
  engine_->Unsubscribe(1, 1, {1});
  Apply(1, {1, 2}, "v");
  Apply(0, {}, "");
  EXPECT_EQ(peer(0).PushedRows(), std::vector<std::string>{"1/2=v"});
}

TEST_F(ShardEngineTest, DisconnectDropsParkedReadsAndSubscriptions) {
  Start(2);
  ReadNow(1, Req(1, {1}, 0, true), rows_);
  ReadNow(1, Req(2, {1}, 3), rows_);
  ShardEngine::Dropped d = engine_->Disconnect(1);
  EXPECT_EQ(d.parked, 1u);
  EXPECT_EQ(d.subscriptions, 1u);
  EXPECT_FALSE(engine_->IsConnected(1));
  Apply(1, {1}, "v");
  Apply(0, {}, "");
  EXPECT_TRUE(peer(0).pushes.empty());
  EXPECT_TRUE(peer(0).dones.empty());
  ReadNow(1, Req(3, {1}, 0), rows_);  // unknown peer: ignored
  EXPECT_EQ(peer(0).answers.size(), 1u);
}

TEST_F(ShardEngineTest, GroupPublishAnswersOnceAfterEveryBatchIsRecorded) {
  Start(2);
  ReadNow(1, Req(1, {1}, 1), rows_);
  rows_.data[RowKey{1, 1}] = "ab";
  rows_.applied = {1, 1};
  engine_->MarkChanged(1, RowKey{1, 1});
  engine_->RecordApplied(0, 1, 0);
  engine_->MarkChanged(2, RowKey{1, 1});
  engine_->RecordApplied(1, 1, 0);
  EXPECT_TRUE(peer(0).answers.empty());  // nothing until Publish
  EXPECT_EQ(engine_->Publish(rows_), 1);
  ASSERT_EQ(peer(0).answers.size(), 1u);
  EXPECT_EQ(peer(0).answers[0].version, 1);
  EXPECT_EQ(peer(0).answers[0].applied_clock, 1);
  EXPECT_EQ(engine_->Publish(rows_), 1);  // idempotent
  EXPECT_EQ(peer(0).answers.size(), 1u);
}

TEST_F(ShardEngineTest, PlanPublishReadsNothingAndFinishPublishSendsWhatReadPublishRead) {
  Start(2);
  ReadNow(1, Req(1, {1}, 0, /*subscribe=*/true), rows_);
  ReadNow(1, Req(2, {1}, 1), rows_);  // parked until C = 1
  rows_.data[RowKey{1, 1}] = "v";
  rows_.applied = {1, 1};
  engine_->MarkChanged(2, RowKey{1, 1});
  engine_->RecordApplied(0, 1, 0);
  engine_->RecordApplied(1, 1, 0);
  const int reads = rows_.reads;
  PublishPlan plan = engine_->PlanPublish();
  EXPECT_EQ(rows_.reads, reads);  // the plan, made under the owner's lock, reads no row
  ASSERT_EQ(plan.reads.size(), 1u);
  ASSERT_EQ(plan.subscribers.size(), 1u);
  EXPECT_EQ(engine_->num_parked(), 0u);
  ShardEngine::ReadPublish(rows_, &plan);
  EXPECT_GT(rows_.reads, reads);
  EXPECT_EQ(peer(0).answers.size(), 1u);  // only the first Read's: nothing sent yet
  EXPECT_TRUE(peer(0).pushes.empty());
  EXPECT_EQ(engine_->FinishPublish(std::move(plan)), 1);
  ASSERT_EQ(peer(0).answers.size(), 2u);
  EXPECT_EQ(peer(0).answers[1].req_id, 2u);
  EXPECT_EQ(peer(0).answers[1].version, 1);
  EXPECT_EQ(peer(0).PushedRows(), std::vector<std::string>{"1/1=v"});
  ASSERT_EQ(peer(0).dones.size(), 1u);
  EXPECT_EQ(peer(0).dones[0], std::make_pair(Version{1}, ClockT{1}));
}

TEST_F(ShardEngineTest, PeersGoneBetweenPlanAndFinishGetNothing) {
  Start(2);
  ReadNow(1, Req(1, {1}, 0, /*subscribe=*/true), rows_);
  ReadNow(1, Req(2, {1}, 1), rows_);
  rows_.data[RowKey{1, 1}] = "v";
  rows_.applied = {1, 1};
  engine_->MarkChanged(2, RowKey{1, 1});
  engine_->RecordApplied(0, 1, 0);
  engine_->RecordApplied(1, 1, 0);
  PublishPlan plan = engine_->PlanPublish();
  ShardEngine::ReadPublish(rows_, &plan);
  engine_->Disconnect(1);
  engine_->FinishPublish(std::move(plan));
  EXPECT_EQ(peer(0).answers.size(), 1u);
  EXPECT_TRUE(peer(0).pushes.empty());
  EXPECT_TRUE(peer(0).dones.empty());
  EXPECT_EQ(engine_->counters().pushes, 0);
}

TEST_F(ShardEngineTest, AbortParkedAnswersEveryWaiter) {
  Start(1);
  ReadNow(1, Req(1, {1}, 4), rows_);
  ReadNow(1, Req(2, {1}, 9), rows_);
  engine_->AbortParked(Status::Aborted("shutting down"));
  ASSERT_EQ(peer(0).errors.size(), 2u);
  EXPECT_EQ(peer(0).errors[0].second, StatusCode::kAborted);
  EXPECT_EQ(engine_->num_parked(), 0u);
}

TEST_F(ShardEngineTest, ParkedReadsAreAnsweredInArrivalOrder) {
  Start(1);
  ReadNow(1, Req(1, {1}, 2), rows_);
  ReadNow(1, Req(2, {1}, 1), rows_);
  ReadNow(1, Req(3, {1}, 2), rows_);
  Apply(0, {}, "");
  ASSERT_EQ(peer(0).answers.size(), 1u);
  EXPECT_EQ(peer(0).answers[0].req_id, 2u);
  Apply(0, {}, "");
  ASSERT_EQ(peer(0).answers.size(), 3u);
  EXPECT_EQ(peer(0).answers[1].req_id, 1u);
  EXPECT_EQ(peer(0).answers[2].req_id, 3u);
}

}  // namespace
}  // namespace pace
