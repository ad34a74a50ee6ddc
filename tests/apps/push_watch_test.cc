// PushWatch and Client::PushedVersion against a real paced shard with two
// client processes' clients (in this test process): a worker that keeps a
// copy of a row within a clock (RowBuffer, as pace_mf does) learns when a push
// completes mid-clock, adds its copy's change and re-reads the row, which then
// holds the other process's pushed update and its own (read-my-writes); the
// final totals count every update exactly once. Under ssp nothing is pushed
// and PushWatch never fires.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "apps/shared/ps_runtime.h"
#include "apps/shared/row_buffer.h"
#include "client/pace.h"
#include "tests/testing/subprocess.h"

namespace pace {
namespace {

constexpr uint32_t kWidth = 4;

class PushWatchTest : public ::testing::Test {
 protected:
  void StartJob(Consistency consistency) {
    uint16_t port = 0;
    ASSERT_TRUE(testing::StartPaced(&paced_, dir_.path() + "/s0", 0, 1, 2, {}, &port).ok());
    TableSchema schema;
    schema.name = "w";
    schema.kind = RowKind::kDense;
    schema.type = ElementType::kF32;
    schema.width = kWidth;
    schema.consistency = consistency;
    schema.staleness = 2;
    for (ClientId id = 0; id < 2; ++id) {
      ClientOptions o;
      o.servers = {"127.0.0.1:" + std::to_string(port)};
      o.client_id = id;
      o.num_clients = 2;
      ASSERT_TRUE(Client::Open(o, &clients_[id]).ok());
      ASSERT_TRUE(clients_[id]->CreateTable(schema, &tables_[id]).ok());
      ASSERT_TRUE(clients_[id]->RegisterWorker(&workers_[id]).ok());
    }
  }
  void Inc(int id, float v) {
    const float d[kWidth] = {v, v, v, v};
    ASSERT_TRUE(workers_[id]->Inc(tables_[id], kRow, d).ok());
  }
  // Waits (without a bound on time in the assertion: up to 60 s for a slow
  // machine) until client `id` has seen the PushDone of `version`.
  bool WaitPushed(int id, Version version) {
    for (int i = 0; i < 6000 && clients_[id]->PushedVersion() < version; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return clients_[id]->PushedVersion() >= version;
  }

  static constexpr uint64_t kRow = 7;
  testing::TempDir dir_;
  testing::Subprocess paced_;
  std::unique_ptr<Client> clients_[2];
  Table tables_[2];
  std::unique_ptr<Worker> workers_[2];
};

TEST_F(PushWatchTest, CopyRefreshedAfterAMidClockPushSeesThePushedValueAndTotalsAreExact) {
  StartJob(Consistency::kEssp);
  if (HasFatalFailure()) return;
  Worker* a = workers_[0].get();
  // Clock 0: a adds 1 and ends the clock; b adds 10 but has not ended it, so
  // version 1 (every clock-0 update) cannot have been pushed yet.
  Inc(0, 1);
  ASSERT_TRUE(a->Clock().ok());
  Inc(1, 10);
  apps::PushWatch watch(clients_[0].get());
  EXPECT_LT(clients_[0]->PushedVersion(), 1);

  // Clock 1: a copies the row (its own 1 only) and updates the copy by 2.
  apps::RowBuffer<float> buf(1, kWidth);
  float* row = buf.Slot(0);
  ASSERT_TRUE(a->Get(tables_[0], kRow, row).ok());
  buf.Loaded();
  EXPECT_EQ(row[0], 1.0f);
  for (uint32_t k = 0; k < kWidth; ++k) row[k] += 2;

  // b ends clock 0: the shard pushes version 1 (b's 10) to a, mid-clock.
  ASSERT_TRUE(workers_[1]->Clock().ok());
  ASSERT_TRUE(WaitPushed(0, 1)) << "no PushDone of version 1 at client 0";
  ASSERT_TRUE(watch.Newer());
  EXPECT_FALSE(watch.Newer()) << "one growth is reported once";

  // The refresh, as pace_mf does it: the copy's change goes to the table and
  // the row is read again: b's pushed 10, a's 1 and 2 (read-my-writes), at
  // version 1 (staleness 0 at clock 1).
  std::vector<uint32_t> changed;
  std::vector<float> deltas;
  buf.ChangedRows(&changed, &deltas);
  ASSERT_EQ(changed, std::vector<uint32_t>{0});
  ASSERT_TRUE(a->Inc(tables_[0], std::vector<uint64_t>{kRow}, deltas.data()).ok());
  buf.Clear();
  row = buf.Slot(0);
  Version version = -1;
  ASSERT_TRUE(a->Read(tables_[0], kRow, [&](const RowView& v) {
                 version = v.version;
                 std::copy(v.dense<float>(), v.dense<float>() + kWidth, row);
               }).ok());
  buf.Loaded();
  for (uint32_t k = 0; k < kWidth; ++k) EXPECT_EQ(row[k], 13.0f) << "element " << k;
  EXPECT_EQ(version, 1);
  EXPECT_EQ(a->clock(), 1);

  // The rest of the clock's change; then the final totals: 1 + 10 + 2 + 4
  // + 100, each update once.
  for (uint32_t k = 0; k < kWidth; ++k) row[k] += 4;
  buf.ChangedRows(&changed, &deltas);
  ASSERT_TRUE(a->Inc(tables_[0], std::vector<uint64_t>{kRow}, deltas.data()).ok());
  Inc(1, 100);
  for (int c = 1; c < 4; ++c) {
    ASSERT_TRUE(a->Clock().ok());
    ASSERT_TRUE(workers_[1]->Clock().ok());
  }
  for (int id = 0; id < 2; ++id) {
    float got[kWidth] = {};
    ASSERT_TRUE(workers_[id]->Get(tables_[id], kRow, got).ok());  // version >= 2: all of 0..1
    for (uint32_t k = 0; k < kWidth; ++k) EXPECT_EQ(got[k], 117.0f) << "client " << id;
  }
}

TEST_F(PushWatchTest, NothingIsPushedUnderSsp) {
  StartJob(Consistency::kSsp);
  if (HasFatalFailure()) return;
  apps::PushWatch watch(clients_[0].get());
  float got[kWidth] = {};
  for (int c = 0; c < 4; ++c) {
    ASSERT_TRUE(workers_[0]->Get(tables_[0], kRow, got).ok());
    Inc(0, 1);
    Inc(1, 1);
    ASSERT_TRUE(workers_[0]->Clock().ok());
    ASSERT_TRUE(workers_[1]->Clock().ok());
  }
  ASSERT_TRUE(clients_[0]->Flush().ok());
  ASSERT_TRUE(workers_[0]->Get(tables_[0], kRow, got).ok());
  // Its own 4 (read-my-writes) and b's clocks below the version read (>= 2,
  // pulled: s = 2 at clock 4).
  EXPECT_GE(got[0], 6.0f);
  EXPECT_LE(got[0], 8.0f);
  EXPECT_EQ(clients_[0]->PushedVersion(), 0);
  EXPECT_FALSE(watch.Newer());
}

}  // namespace
}  // namespace pace
