#include "server/shard_service.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/hash.h"
#include "common/row.h"
#include "common/scoped_temp_dir.h"
#include "server/sort_by_row.h"
#include "server/testing/fake_session.h"

namespace pace {
namespace {

using net::Message;

class ShardServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path();
    ASSERT_FALSE(root_.empty());
  }
  void TearDown() override { service_.reset(); }

  void OpenService(uint32_t num_clients, uint32_t num_shards = 1, uint32_t shard_id = 0,
                   int64_t checkpoint_every = 0) {
    service_.reset();
    ShardServiceOptions opt;
    opt.checkpoint_every = checkpoint_every;
    opt.checkpoint_keep = 2;
    opt.housekeeping_interval_ms = checkpoint_every > 0 ? 0 : 1000;
    opt.data_dir = root_ + "/shard";
    opt.store.num_clients = num_clients;
    opt.store.num_shards = num_shards;
    opt.store.shard_id = shard_id;
    opt.store.block_cache_mb = 8;
    opt.store.write_buffer_mb = 4;
    opt.holdback_warn_ms = 10000;
    Status st = ShardService::Open(opt, &service_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  // Hands `m` to the service and waits until it has been handled (the writer
  // and reader threads are idle), so its replies can be taken at once.
  void Deliver(const std::shared_ptr<FakeSession>& s, Message m) {
    service_->OnMessage(s, std::move(m));
    service_->TEST_WaitIdle();
  }

  // Connects a client process session, checking the handshake.
  std::shared_ptr<FakeSession> Connect(ClientId id) {
    auto s = FakeSession::Client(id);
    net::Welcome w;
    Status st = service_->OnHello(s->hello(), &w);
    EXPECT_TRUE(st.ok()) << st.ToString();
    service_->OnConnect(s);
    return s;
  }

  // Connects a process of client `id` with `incarnation` (nonzero: its
  // parts of a clock are kept for undo).
  std::shared_ptr<FakeSession> ConnectProcess(ClientId id, uint64_t incarnation) {
    net::Hello h;
    h.client_id = id;
    h.incarnation = incarnation;
    auto s = std::make_shared<FakeSession>(h);
    net::Welcome w;
    Status st = service_->OnHello(h, &w);
    EXPECT_TRUE(st.ok()) << st.ToString();
    service_->OnConnect(s);
    return s;
  }

  // Creates a dense i64 table of width 2 and returns its id.
  // *created (if given): the reply's TablesReply::created.
  uint32_t CreateTable(const std::shared_ptr<FakeSession>& s, const std::string& name,
                       Consistency consistency = Consistency::kEssp, bool* created = nullptr) {
    TableSchema schema;
    schema.name = name;
    schema.kind = RowKind::kDense;
    schema.type = ElementType::kI64;
    schema.width = 2;
    schema.consistency = consistency;
    schema.staleness = 1;
    Deliver(s, net::CreateTable{77, schema});
    auto replies = MessagesOfType<net::TablesReply>(s->Take());
    EXPECT_EQ(replies.size(), 1u);
    if (replies.size() != 1 || replies[0].tables.size() != 1) return 0;
    EXPECT_EQ(replies[0].req_id, 77u);
    EXPECT_NE(replies[0].tables[0].id, 0u);
    if (created != nullptr) *created = replies[0].created;
    return replies[0].tables[0].id;
  }

  static net::RowData Delta(uint32_t table, uint64_t row, int64_t a, int64_t b) {
    return net::RowData{table, row, EncodeDense<int64_t>({a, b})};
  }

  void Apply(const std::shared_ptr<FakeSession>& s, ClockT clock,
             std::vector<net::RowData> updates = {}) {
    Deliver(s, net::Apply{clock, std::move(updates)});
  }

  // Applies and expects exactly one non-duplicate Ack among s's new messages
  // (other messages, e.g. pushes, are dropped).
  void ApplyOk(const std::shared_ptr<FakeSession>& s, ClockT clock,
               std::vector<net::RowData> updates = {}) {
    Apply(s, clock, std::move(updates));
    auto msgs = s->Take();
    auto errors = MessagesOfType<net::Error>(msgs);
    ASSERT_TRUE(errors.empty()) << errors[0].ToStatus().ToString();
    auto acks = MessagesOfType<net::Ack>(msgs);
    ASSERT_EQ(acks.size(), 1u);
    EXPECT_EQ(acks[0].clock, clock);
    EXPECT_FALSE(acks[0].duplicate);
  }

  void Read(const std::shared_ptr<FakeSession>& s, uint64_t req, uint32_t table,
            std::vector<uint64_t> rows, Version min_version, bool subscribe = false) {
    Deliver(s, net::Read{req, table, std::move(rows), min_version, subscribe});
  }

  // Reads rows at min_version 0 through a fresh observer; returns the values.
  std::vector<std::vector<int64_t>> Values(uint32_t table, std::vector<uint64_t> rows) {
    auto obs = FakeSession::Observer();
    service_->OnConnect(obs);
    Read(obs, 1, table, rows, 0);
    auto replies = MessagesOfType<net::ReadReply>(obs->Take());
    service_->OnDisconnect(obs);
    EXPECT_EQ(replies.size(), 1u);
    std::vector<std::vector<int64_t>> out;
    if (replies.empty()) return out;
    for (const auto& r : replies[0].rows) out.push_back(DecodeDense<int64_t>(r.bytes));
    return out;
  }

  ScopedTempDir dir_;
  std::string root_;
  std::unique_ptr<ShardService> service_;
};

using V = std::vector<int64_t>;

TEST_F(ShardServiceTest, HelloChecksClientIdAndFillsWelcome) {
  OpenService(3);
  net::Hello h;
  h.client_id = 2;
  net::Welcome w;
  ASSERT_TRUE(service_->OnHello(h, &w).ok());
  EXPECT_EQ(w.shard_id, 0u);
  EXPECT_EQ(w.num_shards, 1u);
  EXPECT_EQ(w.num_clients, 3u);
  EXPECT_EQ(w.applied_clock, 0);
  EXPECT_EQ(w.shard_clock, 0);

  h.client_id = 3;
  Status st = service_->OnHello(h, &w);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();

  h.role = net::Hello::kObserver;
  h.client_id = 999;
  EXPECT_TRUE(service_->OnHello(h, &w).ok());
}

// Fencing (docs/wire-protocol.md, Hello): one live session per client id; a
// Hello with the live session's incarnation replaces it (a reconnect of the
// same process), any other is refused until that session is gone.
TEST_F(ShardServiceTest, SecondHelloForALiveClientIdIsRefusedUnlessSameIncarnation) {
  OpenService(2);
  auto hello = [](ClientId id, uint64_t incarnation) {
    net::Hello h;
    h.client_id = id;
    h.incarnation = incarnation;
    return h;
  };
  auto a = std::make_shared<FakeSession>(hello(0, 5));
  net::Welcome w;
  ASSERT_TRUE(service_->OnHello(a->hello(), &w).ok());
  service_->OnConnect(a);

  for (uint64_t other : {uint64_t{6}, uint64_t{0}}) {
    Status st = service_->OnHello(hello(0, other), &w);
    EXPECT_EQ(st.code(), StatusCode::kAlreadyExists) << st.ToString();
    EXPECT_NE(st.message().find("client 0 is already connected from"), std::string::npos)
        << st.ToString();
    EXPECT_NE(st.message().find("another process is running as client 0"), std::string::npos)
        << st.ToString();
  }
  EXPECT_FALSE(a->closed());
  // Other ids and observers are not affected.
  auto c1 = std::make_shared<FakeSession>(hello(1, 6));
  ASSERT_TRUE(service_->OnHello(c1->hello(), &w).ok());
  service_->OnConnect(c1);
  ASSERT_TRUE(service_->OnHello(FakeSession::Observer(0)->hello(), &w).ok());

  // The same process reconnecting replaces its old session.
  ApplyOk(a, 0);
  auto b = std::make_shared<FakeSession>(hello(0, 5));
  ASSERT_TRUE(service_->OnHello(b->hello(), &w).ok());
  EXPECT_EQ(w.applied_clock, 1);
  EXPECT_TRUE(a->closed());
  service_->OnConnect(b);
  service_->OnDisconnect(a);  // the old connection's end does not free the id
  EXPECT_EQ(service_->OnHello(hello(0, 7), &w).code(), StatusCode::kAlreadyExists);
  ApplyOk(b, 1);

  // Once the owner is gone, another process may take the id (a --resume),
  // after the writer has what the one before sent (HelloWaitsForWriter):
  // until then it is told to retry.
  service_->OnDisconnect(b);
  auto c = std::make_shared<FakeSession>(hello(0, 7));
  const Status wait = service_->OnHello(c->hello(), &w);
  EXPECT_EQ(wait.code(), StatusCode::kUnavailable) << wait.ToString();
  EXPECT_NE(wait.message().find("committing what a previous process of this client sent"),
            std::string::npos)
      << wait.ToString();
  service_->TEST_WaitIdle();
  ASSERT_TRUE(service_->OnHello(c->hello(), &w).ok());
  EXPECT_EQ(w.applied_clock, 2);
  service_->OnConnect(c);
  ApplyOk(c, 2);
  EXPECT_EQ(service_->AppliedClocks(), (std::vector<ClockT>{3, 0}));
}

TEST_F(ShardServiceTest, WelcomeReportsAppliedClockAfterRestart) {
  OpenService(2);
  auto c0 = Connect(0);
  uint32_t t = CreateTable(c0, "w");
  ApplyOk(c0, 0, {Delta(t, 1, 5, 6)});
  ApplyOk(c0, 1);
  OpenService(2);  // reopen the same store
  net::Hello h;
  h.client_id = 0;
  net::Welcome w;
  ASSERT_TRUE(service_->OnHello(h, &w).ok());
  EXPECT_EQ(w.applied_clock, 2);
  EXPECT_EQ(w.shard_clock, 0);
  EXPECT_EQ(service_->AppliedClocks(), (std::vector<ClockT>{2, 0}));
  EXPECT_EQ(Values(t, {1}), (std::vector<V>{{5, 6}}));
}

TEST_F(ShardServiceTest, CatalogRequests) {
  OpenService(1);
  auto c0 = Connect(0);
  bool created = false;
  uint32_t t = CreateTable(c0, "w", Consistency::kEssp, &created);
  EXPECT_TRUE(created);  // made by this request: no row has a record
  EXPECT_EQ(CreateTable(c0, "w", Consistency::kEssp, &created), t);  // idempotent
  EXPECT_FALSE(created);

  Deliver(c0, net::ListTables{5});
  auto list = MessagesOfType<net::TablesReply>(c0->Take());
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].req_id, 5u);
  ASSERT_EQ(list[0].tables.size(), 1u);
  EXPECT_EQ(list[0].tables[0].name, "w");

  Deliver(c0, net::DescribeTable{6, "w"});
  auto desc = MessagesOfType<net::TablesReply>(c0->Take());
  ASSERT_EQ(desc.size(), 1u);
  EXPECT_EQ(desc[0].tables[0].id, t);

  Deliver(c0, net::DescribeTable{7, "nope"});
  auto err = MessagesOfType<net::Error>(c0->Take());
  ASSERT_EQ(err.size(), 1u);
  EXPECT_EQ(err[0].req_id, 7u);
  EXPECT_EQ(err[0].code, StatusCode::kNotFound);

  TableSchema bad;
  bad.name = "";
  Deliver(c0, net::CreateTable{8, bad});
  err = MessagesOfType<net::Error>(c0->Take());
  ASSERT_EQ(err.size(), 1u);
  EXPECT_EQ(err[0].req_id, 8u);
  EXPECT_EQ(err[0].code, StatusCode::kInvalidArgument);
  EXPECT_FALSE(c0->closed());
}

TEST_F(ShardServiceTest, ReadIsAnsweredAtOnceWhenFreshEnough) {
  OpenService(1);
  auto c0 = Connect(0);
  uint32_t t = CreateTable(c0, "w");
  Read(c0, 9, t, {4, 5}, 0);
  auto replies = MessagesOfType<net::ReadReply>(c0->Take());
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].req_id, 9u);
  EXPECT_EQ(replies[0].version, 0);
  EXPECT_EQ(replies[0].applied_clock, 0);
  ASSERT_EQ(replies[0].rows.size(), 2u);
  EXPECT_EQ(replies[0].rows[1].row, 5u);
  EXPECT_EQ(replies[0].rows[1].table, t);
  EXPECT_EQ(DecodeDense<int64_t>(replies[0].rows[1].bytes), (V{0, 0}));
}

TEST_F(ShardServiceTest, ReadParksUntilTheLastClientsBatchArrives) {
  OpenService(3);
  auto c0 = Connect(0), c1 = Connect(1), c2 = Connect(2);
  uint32_t t = CreateTable(c0, "w");
  ApplyOk(c0, 0, {Delta(t, 5, 1, 0)});
  ApplyOk(c1, 0, {Delta(t, 5, 10, 0)});
  ApplyOk(c0, 1, {Delta(t, 5, 1000, 0)});  // client 0 runs ahead: a_0 = 2

  Read(c0, 42, t, {5}, 1);
  EXPECT_EQ(c0->num_messages(), 0u) << "read answered before the shard clock reached 1";
  EXPECT_EQ(service_->TEST_NumParkedReads(), 1u);

  ApplyOk(c2, 0, {Delta(t, 5, 100, 0)});  // shard clock 0 -> 1
  EXPECT_EQ(service_->ShardClock(), 1);
  EXPECT_EQ(service_->TEST_NumParkedReads(), 0u);
  auto replies = MessagesOfType<net::ReadReply>(c0->Take());
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].req_id, 42u);
  EXPECT_EQ(replies[0].version, 1);
  EXPECT_EQ(replies[0].applied_clock, 2);  // the value holds client 0's clocks < 2
  ASSERT_EQ(replies[0].rows.size(), 1u);
  EXPECT_EQ(DecodeDense<int64_t>(replies[0].rows[0].bytes), (V{1111, 0}));
  EXPECT_EQ(c1->num_messages(), 0u);
}

TEST_F(ShardServiceTest, ParkedReadsAreAnsweredInArrivalOrderAsTheClockAdvances) {
  OpenService(2);
  auto c0 = Connect(0), c1 = Connect(1);
  uint32_t t = CreateTable(c0, "w");
  Read(c1, 1, t, {1}, 2);
  Read(c1, 2, t, {1}, 1);
  Read(c1, 3, t, {1}, 2);
  ApplyOk(c0, 0);
  ApplyOk(c0, 1);
  Apply(c1, 0);  // clock -> 1
  auto msgs = c1->Take();
  auto replies = MessagesOfType<net::ReadReply>(msgs);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].req_id, 2u);
  EXPECT_TRUE(std::holds_alternative<net::Ack>(msgs[0])) << "Ack first, then the reply";
  Apply(c1, 1);  // clock -> 2
  replies = MessagesOfType<net::ReadReply>(c1->Take());
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].req_id, 1u);
  EXPECT_EQ(replies[1].req_id, 3u);
  EXPECT_EQ(replies[1].version, 2);
}

TEST_F(ShardServiceTest, DuplicateBatchIsAckedAndNotAppliedTwice) {
  OpenService(1);
  auto c0 = Connect(0);
  uint32_t t = CreateTable(c0, "w");
  ApplyOk(c0, 0, {Delta(t, 3, 7, 1)});
  Apply(c0, 0, {Delta(t, 3, 7, 1)});
  auto acks = MessagesOfType<net::Ack>(c0->Take());
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].clock, 0);
  EXPECT_TRUE(acks[0].duplicate);
  EXPECT_EQ(Values(t, {3}), (std::vector<V>{{7, 1}}));
  EXPECT_EQ(service_->AppliedClocks(), (std::vector<ClockT>{1}));
}

// The order of an Apply's rows for the store: by (table, row), rows of equal
// key in their batch order, whatever bytes of the keys differ.
TEST(SortByTableAndRowTest, SortsByTableThenRowAndKeepsTheOrderOfEqualKeys) {
  std::mt19937_64 rng(7);
  for (uint64_t row_mask : {uint64_t{0xff}, uint64_t{0xfffff}, ~uint64_t{0}}) {
    for (uint32_t tables : {1u, 3u, 70000u}) {
      std::vector<RowSortKey> keys(5000);
      for (uint32_t i = 0; i < keys.size(); ++i) {
        keys[i] = {static_cast<uint32_t>(rng() % tables) + 1, i, rng() & row_mask};
      }
      std::vector<RowSortKey> want = keys;
      std::stable_sort(want.begin(), want.end(), [](const RowSortKey& a, const RowSortKey& b) {
        return a.table != b.table ? a.table < b.table : a.row < b.row;
      });
      SortByTableAndRow(&keys);
      ASSERT_EQ(keys.size(), want.size());
      for (size_t i = 0; i < keys.size(); ++i) {
        ASSERT_EQ(keys[i].index, want[i].index) << "mask " << row_mask << " tables " << tables;
      }
    }
  }
  std::vector<RowSortKey> none;
  SortByTableAndRow(&none);
  EXPECT_TRUE(none.empty());
}

// A new process of a client (another Hello incarnation) starts while the
// shard holds parts of the client's incomplete clock: its Hello is refused
// as Unavailable until the writer has taken the parts back, then welcomed
// at part 0 of that clock, whose re-run is applied once. A reconnect of the
// same process keeps them.
TEST_F(ShardServiceTest, ANewProcessOfAClientHasItsPredecessorsPartsTakenBack) {
  OpenService(2);
  auto session = [&](uint64_t incarnation, uint32_t want_parts) {
    net::Hello h;
    h.client_id = 0;
    h.incarnation = incarnation;
    auto s = std::make_shared<FakeSession>(h);
    net::Welcome w;
    Status st = service_->OnHello(h, &w);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(w.applied_clock, 1);
    EXPECT_EQ(w.applied_parts, want_parts);
    service_->OnConnect(s);
    return s;
  };
  auto part = [&](const std::shared_ptr<FakeSession>& s, uint32_t i, bool more,
                  std::vector<net::RowData> updates) {
    net::Apply a{1, std::move(updates)};
    a.part = i;
    a.more = more;
    Deliver(s, std::move(a));
    auto acks = MessagesOfType<net::Ack>(s->Take());
    ASSERT_EQ(acks.size(), 1u);
    EXPECT_FALSE(acks[0].duplicate);
  };
  net::Hello h0;
  h0.client_id = 0;
  h0.incarnation = 5;
  auto a = std::make_shared<FakeSession>(h0);
  net::Welcome w;
  ASSERT_TRUE(service_->OnHello(h0, &w).ok());
  service_->OnConnect(a);
  uint32_t t = CreateTable(a, "w");
  ApplyOk(a, 0, {Delta(t, 3, 1, 0)});
  part(a, 0, true, {Delta(t, 3, 10, 0)});
  part(a, 1, true, {Delta(t, 4, 100, 0)});
  service_->OnDisconnect(a);
  // The same process reconnects: the parts stay, it re-sends the rest.
  auto again = session(5, 2);
  service_->OnDisconnect(again);
  EXPECT_EQ(Values(t, {3, 4}), (std::vector<V>{{11, 0}, {100, 0}}));
  // Another process of client 0.
  net::Hello hb = h0;
  hb.incarnation = 6;
  Status refused = service_->OnHello(hb, &w);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
  service_->TEST_WaitIdle();
  auto b = session(6, 0);
  EXPECT_EQ(Values(t, {3, 4}), (std::vector<V>{{1, 0}, {0, 0}}));
  part(b, 0, true, {Delta(t, 3, 20, 0)});
  part(b, 1, false, {Delta(t, 4, 200, 0)});
  EXPECT_EQ(Values(t, {3, 4}), (std::vector<V>{{21, 0}, {200, 0}}));
  EXPECT_EQ(service_->AppliedClocks(), (std::vector<ClockT>{2, 0}));
  const net::StatsReply stats = service_->Stats();
  int64_t undone = -1;
  for (const auto& [n, v] : stats.counters) {
    if (n == "undone_parts") undone = v;
  }
  EXPECT_EQ(undone, 2);
}

// Partial Apply: parts are acked with their number, a re-sent part is
// skipped, the clock (and so the shard clock) advances only with the last
// part, and values tell the reader how many parts of its open clock they hold
// (ReadReply, Push, Welcome after a reconnect).
TEST_F(ShardServiceTest, ApplyPartsAreAckedSkippedOnceAndCompleteTheClockAtTheLast) {
  OpenService(2);
  auto c0 = ConnectProcess(0, 5);
  net::Welcome w;
  auto c1 = Connect(1);
  uint32_t t = CreateTable(c0, "w");
  Read(c0, 1, t, {3}, 0, /*subscribe=*/true);
  c0->Take();
  auto part = [&](ClockT clock, uint32_t i, bool more, std::vector<net::RowData> updates) {
    net::Apply a{clock, std::move(updates)};
    a.part = i;
    a.more = more;
    Deliver(c0, std::move(a));
  };
  part(0, 0, true, {Delta(t, 3, 1, 0)});
  part(0, 0, true, {Delta(t, 3, 1, 0)});  // re-sent
  part(0, 1, true, {Delta(t, 3, 10, 0)});
  auto acks = MessagesOfType<net::Ack>(c0->Take());
  ASSERT_EQ(acks.size(), 3u);
  EXPECT_EQ(acks[0].part, 0u);
  EXPECT_FALSE(acks[0].duplicate);
  EXPECT_EQ(acks[1].part, 0u);
  EXPECT_TRUE(acks[1].duplicate);
  EXPECT_EQ(acks[2].part, 1u);
  EXPECT_FALSE(acks[2].duplicate);
  EXPECT_EQ(service_->AppliedClocks(), (std::vector<ClockT>{0, 0}));
  // c0's read sees its two parts in the value and is told so.
  Read(c0, 2, t, {3}, 0);
  auto replies = MessagesOfType<net::ReadReply>(c0->Take());
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].applied_clock, 0);
  EXPECT_EQ(replies[0].applied_parts, 2u);
  EXPECT_EQ(DecodeDense<int64_t>(replies[0].rows[0].bytes), (V{11, 0}));
  // A gap (part 3 before 2) is refused.
  part(0, 3, false, {Delta(t, 3, 1000, 0)});
  auto errors = MessagesOfType<net::Error>(c0->Take());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code, StatusCode::kFailedPrecondition);
  // The last part completes clock 0; with c1's clock 0 the shard clock is 1
  // and c0 is pushed row 3 (c1 changed it) stamped with applied (1, 0 parts).
  part(0, 2, false, {Delta(t, 3, 100, 0)});
  acks = MessagesOfType<net::Ack>(c0->Take());
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].clock, 0);
  EXPECT_EQ(acks[0].part, 2u);
  EXPECT_EQ(service_->AppliedClocks(), (std::vector<ClockT>{1, 0}));
  // c0 starts clock 1 in parts; then c1 completes clock 0.
  part(1, 0, true, {Delta(t, 3, 5, 0)});
  c0->Take();
  ApplyOk(c1, 0, {Delta(t, 3, 0, 1)});
  auto m0 = c0->Take();
  auto pushes = MessagesOfType<net::Push>(m0);
  ASSERT_EQ(pushes.size(), 1u);
  EXPECT_EQ(pushes[0].version, 1);
  EXPECT_EQ(pushes[0].applied_clock, 1);
  EXPECT_EQ(pushes[0].applied_parts, 1u);
  EXPECT_EQ(DecodeDense<int64_t>(pushes[0].rows[0].bytes), (V{116, 1}));
  EXPECT_EQ(Values(t, {3}), (std::vector<V>{{116, 1}}));
  // A reconnect of c0 is told the parts of its open clock 1 too.
  ASSERT_TRUE(service_->OnHello(c0->hello(), &w).ok());
  EXPECT_EQ(w.applied_clock, 1);
  EXPECT_EQ(w.applied_parts, 1u);
}

TEST_F(ShardServiceTest, ClockGapIsAnErrorAndKeepsTheSession) {
  OpenService(1);
  auto c0 = Connect(0);
  uint32_t t = CreateTable(c0, "w");
  Apply(c0, 2, {Delta(t, 3, 7, 1)});
  auto errors = MessagesOfType<net::Error>(c0->Take());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].req_id, 0u);
  EXPECT_EQ(errors[0].code, StatusCode::kFailedPrecondition);
  EXPECT_NE(errors[0].message.find("clock 2"), std::string::npos) << errors[0].message;
  EXPECT_FALSE(c0->closed());
  EXPECT_EQ(Values(t, {3}), (std::vector<V>{{0, 0}}));
  ApplyOk(c0, 0, {Delta(t, 3, 7, 1)});
}

TEST_F(ShardServiceTest, WrongWidthDeltaAppliesNothingAndKeepsTheSession) {
  OpenService(1);
  auto c0 = Connect(0);
  uint32_t t = CreateTable(c0, "w");
  net::RowData bad{t, 4, EncodeDense<int64_t>({1, 2, 3})};
  Apply(c0, 0, {Delta(t, 3, 7, 1), bad});
  auto errors = MessagesOfType<net::Error>(c0->Take());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code, StatusCode::kInvalidArgument);
  EXPECT_FALSE(c0->closed());
  EXPECT_EQ(Values(t, {3, 4}), (std::vector<V>{{0, 0}, {0, 0}}));
  EXPECT_EQ(service_->AppliedClocks(), (std::vector<ClockT>{0}));
  ApplyOk(c0, 0, {Delta(t, 3, 7, 1)});
  EXPECT_EQ(Values(t, {3}), (std::vector<V>{{7, 1}}));
}

TEST_F(ShardServiceTest, BadReadsGetErrorsWithTheirRequestId) {
  OpenService(1);
  auto c0 = Connect(0);
  uint32_t t = CreateTable(c0, "w");
  Read(c0, 11, 99, {1}, 0);
  Read(c0, 12, t, {}, 0);
  auto errors = MessagesOfType<net::Error>(c0->Take());
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].req_id, 11u);
  EXPECT_EQ(errors[0].code, StatusCode::kNotFound);
  EXPECT_EQ(errors[0].message, "unknown table id 99");
  EXPECT_EQ(errors[1].req_id, 12u);
  EXPECT_EQ(errors[1].code, StatusCode::kInvalidArgument);
  EXPECT_FALSE(c0->closed());
}

TEST_F(ShardServiceTest, RowsOfAnotherShardAreRefused) {
  OpenService(1, /*num_shards=*/2, /*shard_id=*/0);
  auto c0 = Connect(0);
  uint32_t t = CreateTable(c0, "w");
  uint64_t mine = 0, other = 0;
  while (ShardOf(t, mine, 2) != 0) ++mine;
  while (ShardOf(t, other, 2) != 1) ++other;
  Read(c0, 1, t, {mine, other}, 0);
  auto errors = MessagesOfType<net::Error>(c0->Take());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code, StatusCode::kInvalidArgument);
  Apply(c0, 0, {Delta(t, other, 1, 1)});
  errors = MessagesOfType<net::Error>(c0->Take());
  ASSERT_EQ(errors.size(), 1u);
  ApplyOk(c0, 0, {Delta(t, mine, 1, 1)});
}

TEST_F(ShardServiceTest, SubscribersGetChangedRowsThenPushDone) {
  OpenService(2);
  auto c0 = Connect(0), c1 = Connect(1);
  uint32_t t = CreateTable(c0, "w");
  Read(c0, 1, t, {1, 2, 3}, 0, /*subscribe=*/true);
  Read(c1, 2, t, {3}, 0, /*subscribe=*/true);
  ASSERT_EQ(MessagesOfType<net::ReadReply>(c0->Take()).size(), 1u);
  ASSERT_EQ(MessagesOfType<net::ReadReply>(c1->Take()).size(), 1u);
  EXPECT_EQ(service_->TEST_NumSubscriptions(), 4u);

  ApplyOk(c0, 0, {Delta(t, 1, 1, 0), Delta(t, 3, 3, 0)});
  Apply(c1, 0, {Delta(t, 4, 4, 0), Delta(t, 3, 30, 0)});  // clock -> 1

  // Row 1 changed only by c0's own batch: not pushed back to it (its cache
  // has its own updates). Row 3 was changed by c1 too.
  auto m0 = c0->Take();
  ASSERT_EQ(m0.size(), 2u);
  const auto* push = std::get_if<net::Push>(&m0[0]);
  ASSERT_NE(push, nullptr);
  EXPECT_EQ(push->version, 1);
  EXPECT_EQ(push->applied_clock, 1);
  ASSERT_EQ(push->rows.size(), 1u);
  EXPECT_EQ(push->rows[0].row, 3u);
  EXPECT_EQ(DecodeDense<int64_t>(push->rows[0].bytes), (V{33, 0}));
  const auto* done = std::get_if<net::PushDone>(&m0[1]);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->version, 1);
  EXPECT_EQ(done->applied_clock, 1);

  auto m1 = c1->Take();
  ASSERT_EQ(m1.size(), 3u);  // Ack, Push, PushDone
  EXPECT_TRUE(std::holds_alternative<net::Ack>(m1[0]));
  push = std::get_if<net::Push>(&m1[1]);
  ASSERT_NE(push, nullptr);
  ASSERT_EQ(push->rows.size(), 1u);
  EXPECT_EQ(push->rows[0].row, 3u);
  // Row 3 goes to both subscribers: copied into one Push, moved into the other.
  EXPECT_EQ(DecodeDense<int64_t>(push->rows[0].bytes), (V{33, 0}));
  EXPECT_TRUE(std::holds_alternative<net::PushDone>(m1[2]));

  // Unsubscribed rows are no longer pushed; a subscriber with nothing changed
  // still gets PushDone.
  Deliver(c0, net::Unsubscribe{t, {1}});
  EXPECT_EQ(service_->TEST_NumSubscriptions(), 3u);
  ApplyOk(c0, 1, {Delta(t, 1, 1, 0)});
  Apply(c1, 1, {Delta(t, 1, 1, 0), Delta(t, 2, 2, 0)});  // clock -> 2
  m0 = c0->Take();
  ASSERT_EQ(m0.size(), 2u);
  push = std::get_if<net::Push>(&m0[0]);
  ASSERT_NE(push, nullptr);
  ASSERT_EQ(push->rows.size(), 1u);
  EXPECT_EQ(push->rows[0].row, 2u);
  m1 = c1->Take();
  ASSERT_EQ(m1.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<net::Ack>(m1[0]));
  done = std::get_if<net::PushDone>(&m1[1]);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->version, 2);
  EXPECT_EQ(done->applied_clock, 2);
}

// In a job of one client process, a subscribing Read registers the client
// for its PushDones but subscribes none of its rows (nobody else changes
// them); an observer that subscribes is pushed the client's changes as in
// any job.
TEST_F(ShardServiceTest, TheOnlyClientGetsPushDonesWithoutRowSubscriptions) {
  OpenService(1);
  auto c0 = Connect(0);
  uint32_t t = CreateTable(c0, "w");
  Read(c0, 1, t, {1, 2, 3}, 0, /*subscribe=*/true);
  ASSERT_EQ(MessagesOfType<net::ReadReply>(c0->Take()).size(), 1u);
  EXPECT_EQ(service_->TEST_NumSubscriptions(), 0u);
  Apply(c0, 0, {Delta(t, 1, 1, 0)});  // clock -> 1
  auto m0 = c0->Take();
  EXPECT_TRUE(MessagesOfType<net::Push>(m0).empty());
  auto done = MessagesOfType<net::PushDone>(m0);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].version, 1);

  auto obs = FakeSession::Observer();
  service_->OnConnect(obs);
  Read(obs, 2, t, {1}, 0, /*subscribe=*/true);
  ASSERT_EQ(MessagesOfType<net::ReadReply>(obs->Take()).size(), 1u);
  EXPECT_EQ(service_->TEST_NumSubscriptions(), 1u);
  Apply(c0, 1, {Delta(t, 1, 1, 0)});  // clock -> 2
  auto pushes = MessagesOfType<net::Push>(obs->Take());
  ASSERT_EQ(pushes.size(), 1u);
  ASSERT_EQ(pushes[0].rows.size(), 1u);
  EXPECT_EQ(DecodeDense<int64_t>(pushes[0].rows[0].bytes), (V{2, 0}));
  m0 = c0->Take();
  EXPECT_TRUE(MessagesOfType<net::Push>(m0).empty());
  EXPECT_EQ(MessagesOfType<net::PushDone>(m0).size(), 1u);
  service_->OnDisconnect(obs);
}

TEST_F(ShardServiceTest, ParkedSubscribingReadSubscribesWhenAnswered) {
  OpenService(2);
  auto c0 = Connect(0), c1 = Connect(1);
  uint32_t t = CreateTable(c0, "w");
  Read(c0, 1, t, {1}, 1, /*subscribe=*/true);
  EXPECT_EQ(service_->TEST_NumSubscriptions(), 0u);
  ApplyOk(c0, 0, {Delta(t, 1, 1, 0)});
  Apply(c1, 0);  // clock -> 1: answers the read, subscribes
  auto m0 = c0->Take();
  ASSERT_EQ(MessagesOfType<net::ReadReply>(m0).size(), 1u);
  EXPECT_EQ(service_->TEST_NumSubscriptions(), 1u);
  ApplyOk(c0, 1);
  Apply(c1, 1, {Delta(t, 1, 1, 0)});  // clock -> 2
  auto pushes = MessagesOfType<net::Push>(c0->Take());
  ASSERT_EQ(pushes.size(), 1u);
  EXPECT_EQ(DecodeDense<int64_t>(pushes[0].rows[0].bytes), (V{2, 0}));
}

// A connection cannot park reads without bound: past the limit a Read that
// would wait is refused (the session keeps being served), and answering the
// parked ones frees room again.
TEST_F(ShardServiceTest, ParkedReadsPerSessionAreBounded) {
  ShardServiceOptions opt;
  opt.data_dir = root_ + "/shard";
  opt.store.num_clients = 1;
  opt.max_parked_reads_per_session = 3;
  ASSERT_TRUE(ShardService::Open(opt, &service_).ok());
  auto c0 = Connect(0);
  uint32_t t = CreateTable(c0, "w");
  for (uint64_t r = 0; r < 3; ++r) Read(c0, 10 + r, t, {r}, 1);
  EXPECT_TRUE(c0->Take().empty());
  EXPECT_EQ(service_->TEST_NumParkedReads(), 3u);
  Read(c0, 20, t, {5}, 1);
  auto errors = MessagesOfType<net::Error>(c0->Take());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].req_id, 20u);
  EXPECT_EQ(errors[0].code, StatusCode::kResourceExhausted);
  EXPECT_TRUE(errors[0].retriable);
  Read(c0, 21, t, {5}, 0);  // answerable at once: still served
  EXPECT_EQ(MessagesOfType<net::ReadReply>(c0->Take()).size(), 1u);
  Apply(c0, 0);  // clock -> 1: the three parked reads are answered
  EXPECT_EQ(MessagesOfType<net::ReadReply>(c0->Take()).size(), 3u);
  for (uint64_t r = 0; r < 3; ++r) Read(c0, 30 + r, t, {r}, 2);
  EXPECT_TRUE(MessagesOfType<net::Error>(c0->Take()).empty());
  EXPECT_EQ(service_->TEST_NumParkedReads(), 3u);
}

TEST_F(ShardServiceTest, LargePushesAreSplitBeforePushDone) {
  ShardServiceOptions opt;
  opt.data_dir = root_ + "/shard";
  opt.store.num_clients = 2;
  opt.max_push_bytes = 40;  // 16-byte rows: 3 rows per Push
  ASSERT_TRUE(ShardService::Open(opt, &service_).ok());
  auto c0 = Connect(0), c1 = Connect(1);
  uint32_t t = CreateTable(c0, "w");
  std::vector<uint64_t> rows;
  std::vector<net::RowData> deltas;
  for (uint64_t r = 0; r < 7; ++r) {
    rows.push_back(r);
    deltas.push_back(Delta(t, r, 1, 1));
  }
  Read(c0, 1, t, rows, 0, true);
  c0->Take();
  ApplyOk(c1, 0, deltas);  // c1 changes the rows c0 subscribes
  Apply(c0, 0);            // clock -> 1
  auto msgs = c0->Take();
  ASSERT_EQ(msgs.size(), 5u);  // Ack, Push(3), Push(3), Push(1), PushDone
  EXPECT_EQ(std::get<net::Push>(msgs[1]).rows.size(), 3u);
  EXPECT_EQ(std::get<net::Push>(msgs[3]).rows.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<net::PushDone>(msgs[4]));
}

// A Push above the frame limit (max_reply_bytes) leaves as several Pushes that
// fit, before the PushDone; the transport would close the session for a
// larger one (and the client would re-subscribe and get it again).
TEST_F(ShardServiceTest, PushesAreCutToTheFrameLimit) {
  ShardServiceOptions opt;
  opt.data_dir = root_ + "/shard";
  opt.store.num_clients = 2;
  opt.max_reply_bytes = net::RowsMessageBytes(3, 3 * 16);  // 16-byte rows: 3 per frame
  ASSERT_TRUE(ShardService::Open(opt, &service_).ok());
  auto c0 = Connect(0), c1 = Connect(1);
  uint32_t t = CreateTable(c0, "w");
  std::vector<net::RowData> deltas;
  for (uint64_t r = 0; r < 7; ++r) deltas.push_back(Delta(t, r, 1, 1));
  Read(c0, 1, t, {0, 1, 2}, 0, true);  // Reads that fit, subscribing
  Read(c0, 2, t, {3, 4, 5}, 0, true);
  Read(c0, 3, t, {6}, 0, true);
  EXPECT_EQ(MessagesOfType<net::ReadReply>(c0->Take()).size(), 3u);
  ApplyOk(c1, 0, deltas);  // c1 changes the rows c0 subscribes
  Apply(c0, 0);            // clock -> 1
  auto msgs = c0->Take();
  ASSERT_EQ(msgs.size(), 5u);  // Ack, Push(3), Push(3), Push(1), PushDone
  size_t rows = 0;
  for (size_t i = 1; i < 4; ++i) {
    const auto& p = std::get<net::Push>(msgs[i]);
    uint64_t bytes = 0;
    for (const auto& r : p.rows) bytes += r.bytes.size();
    EXPECT_LE(net::RowsMessageBytes(p.rows.size(), bytes), opt.max_reply_bytes);
    EXPECT_EQ(p.version, 1);
    rows += p.rows.size();
  }
  EXPECT_EQ(rows, 7u);
  EXPECT_TRUE(std::holds_alternative<net::PushDone>(msgs[4]));
  EXPECT_FALSE(c0->closed());
}

// A ReadReply cannot be cut (one per req_id): one above the frame limit (a
// sparse row larger than the Read's check could know) is answered with a
// final Error naming the sizes, and the session keeps serving.
TEST_F(ShardServiceTest, ReadReplyAboveTheFrameLimitIsAnErrorNotAClosedSession) {
  ShardServiceOptions opt;
  opt.data_dir = root_ + "/shard";
  opt.store.num_clients = 1;
  opt.max_reply_bytes = 1024;
  ASSERT_TRUE(ShardService::Open(opt, &service_).ok());
  auto c0 = Connect(0);
  TableSchema schema;
  schema.name = "sparse";
  schema.kind = RowKind::kSparse;
  schema.type = ElementType::kI64;
  schema.width = 1000;
  Deliver(c0, net::CreateTable{77, schema});
  auto tables = MessagesOfType<net::TablesReply>(c0->Take());
  ASSERT_EQ(tables.size(), 1u);
  const uint32_t t = tables[0].tables.at(0).id;
  std::map<uint32_t, int64_t> big, small;
  for (uint32_t c = 0; c < 200; ++c) big[c] = 1;  // 4 + 200 x 12 bytes
  small[1] = 1;
  ApplyOk(c0, 0, {net::RowData{t, 1, EncodeSparse(big)}, net::RowData{t, 2, EncodeSparse(small)}});
  Read(c0, 5, t, {1}, 0);
  auto msgs = c0->Take();
  ASSERT_EQ(msgs.size(), 1u);
  const auto* e = std::get_if<net::Error>(&msgs[0]);
  ASSERT_NE(e, nullptr) << net::MessageName(msgs[0]);
  EXPECT_EQ(e->req_id, 5u);
  EXPECT_EQ(e->code, StatusCode::kInvalidArgument);
  EXPECT_FALSE(e->retriable);
  EXPECT_NE(e->message.find("over the frame limit of 1024 bytes"), std::string::npos) << e->message;
  EXPECT_FALSE(c0->closed());
  Read(c0, 6, t, {2}, 0);
  EXPECT_EQ(MessagesOfType<net::ReadReply>(c0->Take()).size(), 1u);
}

TEST_F(ShardServiceTest, DisconnectDropsParkedReadsAndSubscriptions) {
  OpenService(2);
  auto c0 = Connect(0), c1 = Connect(1);
  uint32_t t = CreateTable(c0, "w");
  Read(c0, 1, t, {1}, 0, /*subscribe=*/true);
  Read(c0, 2, t, {1}, 1);
  c0->Take();
  EXPECT_EQ(service_->TEST_NumParkedReads(), 1u);
  EXPECT_EQ(service_->TEST_NumSubscriptions(), 1u);
  service_->OnDisconnect(c0);
  EXPECT_EQ(service_->TEST_NumParkedReads(), 0u);
  EXPECT_EQ(service_->TEST_NumSubscriptions(), 0u);
  auto c0b = Connect(0);  // the client reconnects and resumes
  ApplyOk(c0b, 0, {Delta(t, 1, 1, 0)});
  ApplyOk(c1, 0);
  EXPECT_EQ(c0->num_messages(), 0u) << "the old session got a reply or push";
  EXPECT_EQ(c0b->num_messages(), 0u);
}

TEST_F(ShardServiceTest, ObserverMayReadButNotApply) {
  OpenService(1);
  auto obs = FakeSession::Observer(5);
  net::Welcome w;
  ASSERT_TRUE(service_->OnHello(obs->hello(), &w).ok());
  service_->OnConnect(obs);
  uint32_t t = CreateTable(obs, "w");
  Apply(obs, 0, {Delta(t, 1, 1, 1)});
  auto errors = MessagesOfType<net::Error>(obs->Take());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code, StatusCode::kPermissionDenied);
  EXPECT_FALSE(obs->closed());
  EXPECT_EQ(service_->AppliedClocks(), (std::vector<ClockT>{0}));
  Read(obs, 3, t, {1}, 0);
  auto replies = MessagesOfType<net::ReadReply>(obs->Take());
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(DecodeDense<int64_t>(replies[0].rows[0].bytes), (V{0, 0}));
}

TEST_F(ShardServiceTest, UnexpectedMessageClosesOnlyThatSession) {
  OpenService(1);
  auto c0 = Connect(0);
  auto other = FakeSession::Observer();
  service_->OnConnect(other);
  Deliver(c0, net::Welcome{});
  EXPECT_TRUE(c0->closed());
  EXPECT_EQ(c0->close_reason().code(), StatusCode::kInvalidArgument);
  auto errors = MessagesOfType<net::Error>(c0->Take());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].message.find("Welcome"), std::string::npos) << errors[0].message;
  Deliver(other, net::ListTables{1});
  EXPECT_EQ(MessagesOfType<net::TablesReply>(other->Take()).size(), 1u);
  EXPECT_FALSE(other->closed());
}

TEST_F(ShardServiceTest, StatsReportClocksAndCounters) {
  OpenService(2);
  auto c0 = Connect(0), c1 = Connect(1);
  uint32_t t = CreateTable(c0, "w");
  ApplyOk(c0, 0, {Delta(t, 1, 1, 0)});
  Apply(c0, 0);  // duplicate
  c0->Take();
  Read(c1, 1, t, {1}, 1);  // parked
  Deliver(c0, net::StatsRequest{31});
  auto stats = MessagesOfType<net::StatsReply>(c0->Take());
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].req_id, 31u);
  EXPECT_EQ(stats[0].shard_clock, 0);
  EXPECT_EQ(stats[0].applied_clocks, (std::vector<ClockT>{1, 0}));
  auto counter = [&](const std::string& name) -> int64_t {
    for (const auto& [n, v] : stats[0].counters) {
      if (n == name) return v;
    }
    ADD_FAILURE() << "no counter " << name;
    return -1;
  };
  EXPECT_EQ(counter("batches_applied"), 1);
  EXPECT_EQ(counter("duplicates"), 1);
  EXPECT_EQ(counter("reads"), 1);
  EXPECT_EQ(counter("parked_reads"), 1);
  EXPECT_EQ(counter("parked_now"), 1);
  EXPECT_EQ(counter("delta_bytes_in"), 16);
}

TEST_F(ShardServiceTest, PushLatencyIsSplitIntoQueueCommitAndSend) {
  OpenService(2);
  auto c0 = Connect(0), c1 = Connect(1);
  uint32_t t = CreateTable(c0, "w");
  Read(c0, 1, t, {1, 2}, 0, /*subscribe=*/true);
  c0->Take();
  EXPECT_EQ(service_->push_latency().samples, 0);
  ApplyOk(c0, 0, {Delta(t, 1, 1, 0)});
  Apply(c1, 0, {Delta(t, 2, 2, 0)});  // clock -> 1: row 2 pushed to c0
  ASSERT_EQ(MessagesOfType<net::Push>(c0->Take()).size(), 1u);
  const ShardService::PushLatencySplit split = service_->push_latency_split();
  ASSERT_EQ(split.total.samples, 1);
  EXPECT_EQ(split.queue.samples, 1);
  EXPECT_EQ(split.commit.samples, 1);
  EXPECT_EQ(split.send.samples, 1);
  // One sample: the stages add up to the whole, from the same timestamps
  // (each is truncated to whole microseconds on its own, so the sum of the
  // three may be up to 2 us below the truncated whole).
  const int64_t stages = split.queue.p50_us + split.commit.p50_us + split.send.p50_us;
  EXPECT_LE(stages, split.total.p50_us);
  EXPECT_GE(stages + 2, split.total.p50_us);
  EXPECT_GT(split.commit.p50_us, 0) << "a RocksDB write takes longer than a microsecond";
  net::StatsReply stats = service_->Stats();
  std::map<std::string, int64_t> counters(stats.counters.begin(), stats.counters.end());
  EXPECT_EQ(counters.at("push_latency_samples"), 1);
  EXPECT_EQ(counters.at("push_latency_commit_p50_us"), split.commit.p50_us);
  EXPECT_EQ(counters.at("push_latency_queue_p99_us"), split.queue.p99_us);
  EXPECT_EQ(counters.at("push_latency_send_p99_us"), split.send.p99_us);

  // A clock that changed no subscribed row pushes no rows: no sample.
  ApplyOk(c0, 1, {Delta(t, 7, 1, 0)});
  Apply(c1, 1);
  EXPECT_EQ(MessagesOfType<net::Push>(c0->Take()).size(), 0u);
  EXPECT_EQ(service_->push_latency_split().total.samples, 1);
}

TEST_F(ShardServiceTest, StatsCountRowCacheHitsAndMisses) {
  OpenService(2);
  auto c0 = Connect(0), c1 = Connect(1);
  uint32_t t = CreateTable(c0, "w");
  Read(c0, 1, t, {1, 2}, 0, /*subscribe=*/true);  // two misses
  ASSERT_EQ(MessagesOfType<net::ReadReply>(c0->Take()).size(), 1u);
  ApplyOk(c1, 0, {Delta(t, 1, 5, 6)});
  ApplyOk(c0, 0);          // clock -> 1: row 1 pushed to c0 from the cache
  Read(c0, 2, t, {2}, 0);  // a hit
  ASSERT_EQ(MessagesOfType<net::ReadReply>(c0->Take()).size(), 1u);
  EXPECT_EQ(Values(t, {1}), (std::vector<V>{{5, 6}}));  // one more hit
  net::StatsReply stats = service_->Stats();
  std::map<std::string, int64_t> counters(stats.counters.begin(), stats.counters.end());
  EXPECT_EQ(counters["row_cache_misses"], 2);
  EXPECT_EQ(counters["row_cache_hits"], 3);
  EXPECT_EQ(counters["row_cache_rows"], 2);
  EXPECT_GT(counters["row_cache_bytes"], 0);
  EXPECT_EQ(counters["row_cache_evictions"], 0);
}

TEST_F(ShardServiceTest, HoldbackWarningNamesTheLaggingClient) {
  OpenService(3);
  auto c0 = Connect(0), c2 = Connect(2);
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(service_->CheckHoldback(start + std::chrono::hours(1)).held_back)
      << "nobody waits while all clients are at the same clock";
  ApplyOk(c0, 0);
  ApplyOk(c2, 0);
  auto after = std::chrono::steady_clock::now();
  HoldbackReport r = service_->CheckHoldback(after + std::chrono::seconds(1));
  EXPECT_TRUE(r.held_back);
  EXPECT_FALSE(r.warned);
  r = service_->CheckHoldback(after + std::chrono::seconds(11));
  EXPECT_TRUE(r.warned);
  EXPECT_EQ(r.laggards, (std::vector<ClientId>{1}));
  EXPECT_NE(r.message.find("client 1 (not connected)"), std::string::npos) << r.message;
  EXPECT_FALSE(service_->CheckHoldback(after + std::chrono::seconds(12)).warned)
      << "warnings about one stall are rate-limited";
  EXPECT_TRUE(service_->CheckHoldback(after + std::chrono::seconds(40)).warned);
  auto c1 = Connect(1);
  ApplyOk(c1, 0);
  r = service_->CheckHoldback(after + std::chrono::seconds(100));
  EXPECT_FALSE(r.held_back);
  EXPECT_EQ(r.shard_clock, 1);
}

// Batches handed over together (likely one group commit): a refused one gets
// its Error, the others their Acks, and only theirs are applied.
TEST_F(ShardServiceTest, ARefusedBatchDoesNotTakeItsGroupDown) {
  OpenService(3);
  auto c0 = Connect(0);
  auto c1 = Connect(1);
  auto c2 = Connect(2);
  uint32_t t = CreateTable(c0, "w");
  service_->OnMessage(c0, net::Apply{0, {Delta(t, 0, 1, 1)}});
  service_->OnMessage(c1, net::Apply{0, {Delta(t, 0, 10, 10), {t, 1, EncodeDense<int64_t>({1})}}});
  service_->OnMessage(c2, net::Apply{0, {Delta(t, 0, 100, 100)}});
  service_->OnMessage(c0, net::Apply{1, {Delta(t, 1, 1000, 0)}});
  service_->TEST_WaitIdle();
  auto m0 = c0->Take();
  auto m1 = c1->Take();
  auto m2 = c2->Take();
  EXPECT_EQ(MessagesOfType<net::Ack>(m0).size(), 2u);
  EXPECT_TRUE(MessagesOfType<net::Error>(m0).empty());
  EXPECT_TRUE(MessagesOfType<net::Ack>(m1).empty());
  ASSERT_EQ(MessagesOfType<net::Error>(m1).size(), 1u);
  EXPECT_EQ(MessagesOfType<net::Error>(m1)[0].code, StatusCode::kInvalidArgument);
  EXPECT_EQ(MessagesOfType<net::Ack>(m2).size(), 1u);
  EXPECT_EQ(service_->AppliedClocks(), (std::vector<ClockT>{2, 0, 1}));
  EXPECT_EQ(Values(t, {0, 1}), (std::vector<V>{{101, 101}, {1000, 0}}));
  ApplyOk(c1, 0, {Delta(t, 0, 10, 10)});  // the refused client carries on
  EXPECT_EQ(service_->ShardClock(), 1);
}

// Parts that do not complete their clock, handed over together, are each
// committed as a group of their own: the group's clock log record is the
// part's undo record, and no UNDO- file holds a second copy of its deltas.
// A new process of the client takes every one of them back.
TEST_F(ShardServiceTest, KeptPartsAreGroupsOfTheirOwnAndWriteNoUndoFiles) {
  OpenService(2);
  auto a = ConnectProcess(0, 5);
  auto c1 = Connect(1);
  const uint32_t t = CreateTable(a, "w");
  auto groups = [&] {
    for (const auto& [n, v] : service_->Stats().counters) {
      if (n == "commit_groups") return v;
    }
    return int64_t{-1};
  };
  const int64_t groups_before = groups();
  constexpr uint32_t kParts = 16;
  for (uint32_t i = 0; i < kParts; ++i) {
    // Handed over without waiting: the writer finds several queued.
    net::Apply part{0, {Delta(t, i % 4, 1, 0)}};
    part.part = i;
    part.more = true;
    service_->OnMessage(a, std::move(part));
    service_->OnMessage(c1, net::Apply{static_cast<ClockT>(i), {Delta(t, 9, 0, 1)}});
  }
  service_->TEST_WaitIdle();
  EXPECT_EQ(MessagesOfType<net::Ack>(a->Take()).size(), kParts);
  EXPECT_GE(groups() - groups_before, int64_t{kParts});
  for (const auto& f : std::filesystem::directory_iterator(root_ + "/shard")) {
    EXPECT_NE(f.path().filename().string().rfind("UNDO-", 0), 0u) << f.path();
  }
  EXPECT_EQ(Values(t, {0, 9}), (std::vector<V>{{kParts / 4, 0}, {0, kParts}}));
  service_->OnDisconnect(a);
  service_->TEST_WaitIdle();
  net::Hello hb = a->hello();
  hb.incarnation = 6;
  net::Welcome w;
  // Refused while the parts are taken back (as one group commit), then
  // welcome.
  EXPECT_EQ(service_->OnHello(hb, &w).code(), StatusCode::kUnavailable);
  service_->TEST_WaitIdle();
  ASSERT_TRUE(service_->OnHello(hb, &w).ok());
  EXPECT_EQ(w.applied_parts, 0u);
  EXPECT_EQ(Values(t, {0, 1, 2, 3, 9}),
            (std::vector<V>{{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, kParts}}));
}

TEST_F(ShardServiceTest, PeriodicCheckpointsAreWrittenAndPruned) {
  OpenService(1, 1, 0, /*checkpoint_every=*/2);
  auto c0 = Connect(0);
  uint32_t t = CreateTable(c0, "w");
  StatusOr<std::string> cp = service_->MaybeCheckpoint();
  ASSERT_TRUE(cp.ok());
  EXPECT_EQ(*cp, "");  // clock 0: nothing due
  std::vector<std::string> written;
  for (ClockT c = 0; c < 7; ++c) {
    ApplyOk(c0, c, {Delta(t, 0, 1, 1)});
    cp = service_->MaybeCheckpoint();
    ASSERT_TRUE(cp.ok()) << cp.status().ToString();
    if (!cp->empty()) written.push_back(*cp);
  }
  // Due at shard clocks 2, 4 and 6, once each.
  ASSERT_EQ(written.size(), 3u);
  EXPECT_NE(written.back().find("clock-000000000006"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(written[0]));  // keep = 2
  EXPECT_TRUE(std::filesystem::exists(written[1]));
  CheckpointManifest m;
  ASSERT_TRUE(ShardStore::ReadCheckpointManifest(written[2], &m).ok());
  EXPECT_EQ(m.shard_clock, 6);
  // Their space, in Stats() (and so in /metrics).
  const ShardService::CheckpointStats cs = service_->checkpoint_stats();
  EXPECT_EQ(cs.count, 2);
  EXPECT_EQ(cs.last_clock, 6);
  CheckpointUsage u1, u2;
  ASSERT_TRUE(CheckpointDiskUsage(written[1], &u1).ok());
  ASSERT_TRUE(CheckpointDiskUsage(written[2], &u2).ok());
  EXPECT_GT(u1.bytes, 0u);
  EXPECT_EQ(cs.usage.bytes, u1.bytes + u2.bytes);
  EXPECT_LE(cs.usage.exclusive_bytes, cs.usage.bytes);
  int64_t reported = -1;
  for (const auto& [name, v] : service_->Stats().counters) {
    if (name == "checkpoint_bytes") reported = v;
  }
  EXPECT_EQ(reported, static_cast<int64_t>(cs.usage.bytes));
  // A checkpoint whose writer was killed is removed by the next pruning.
  const std::string partial = CheckpointStagingDir(written[2] + "-x");
  std::filesystem::create_directories(partial);
  ApplyOk(c0, 7, {Delta(t, 0, 1, 1)});
  cp = service_->MaybeCheckpoint();
  ASSERT_TRUE(cp.ok()) << cp.status().ToString();
  EXPECT_NE(cp->find("clock-000000000008"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(partial));
}

// A shard restarted on its store finds the checkpoint of its clock that it
// wrote before: counted (in Stats() at once) and kept, not written again.
TEST_F(ShardServiceTest, ARestartedShardCountsTheCheckpointsItFinds) {
  OpenService(1, 1, 0, /*checkpoint_every=*/2);
  auto c0 = Connect(0);
  uint32_t t = CreateTable(c0, "w");
  std::vector<std::string> written;
  for (ClockT c = 0; c < 5; ++c) {
    ApplyOk(c0, c, {Delta(t, 0, 1, 1)});
    StatusOr<std::string> cp = service_->MaybeCheckpoint();
    ASSERT_TRUE(cp.ok()) << cp.status().ToString();
    if (!cp->empty()) written.push_back(*cp);
  }
  ASSERT_EQ(written.size(), 2u);  // shard clocks 2 and 4
  const int64_t bytes = static_cast<int64_t>(service_->checkpoint_stats().usage.bytes);

  c0.reset();
  OpenService(1, 1, 0, /*checkpoint_every=*/2);  // shard clock 5: clock-4 is due and there
  EXPECT_EQ(service_->checkpoint_stats().count, 0);
  StatusOr<std::string> cp = service_->MaybeCheckpoint();
  ASSERT_TRUE(cp.ok()) << cp.status().ToString();
  EXPECT_EQ(*cp, "");
  const ShardService::CheckpointStats cs = service_->checkpoint_stats();
  EXPECT_EQ(cs.count, 2);
  EXPECT_EQ(cs.last_clock, 4);
  EXPECT_EQ(static_cast<int64_t>(cs.usage.bytes), bytes);
  EXPECT_TRUE(std::filesystem::exists(written[0]));
  EXPECT_TRUE(std::filesystem::exists(written[1]));

  c0 = Connect(0);
  ApplyOk(c0, 5, {Delta(t, 0, 1, 1)});
  cp = service_->MaybeCheckpoint();
  ASSERT_TRUE(cp.ok()) << cp.status().ToString();
  EXPECT_NE(cp->find("clock-000000000006"), std::string::npos) << *cp;
  EXPECT_FALSE(std::filesystem::exists(written[0]));  // keep = 2
  EXPECT_TRUE(std::filesystem::exists(written[1]));
}

TEST_F(ShardServiceTest, ConcurrentClientsAdvanceTheClockInOrder) {
  constexpr int kClients = 3;
  constexpr int kClocks = 150;
  OpenService(kClients);
  std::vector<std::shared_ptr<FakeSession>> sessions;
  for (int c = 0; c < kClients; ++c) sessions.push_back(Connect(c));
  uint32_t t = CreateTable(sessions[0], "w");
  auto watcher = FakeSession::Observer();
  service_->OnConnect(watcher);
  Read(watcher, 1, t, {0}, 0, /*subscribe=*/true);
  watcher->Take();

  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto& s = sessions[c];
      for (int clock = 0; clock < kClocks; ++clock) {
        service_->OnMessage(s, net::Apply{clock, {Delta(t, 0, 1, c)}});
        // SSP with s = 1: wait for the shard clock to reach clock - 1 + 1.
        uint64_t req = static_cast<uint64_t>(clock) + 1;
        service_->OnMessage(s, net::Read{req, t, {0}, clock, false});
        bool got = s->WaitFor(
            [req](const std::vector<Message>& msgs) {
              for (const auto& r : MessagesOfType<net::ReadReply>(msgs)) {
                if (r.req_id == req) return true;
              }
              return false;
            },
            std::chrono::seconds(20));
        ASSERT_TRUE(got) << "client " << c << " clock " << clock << " never got its read";
      }
    });
  }
  for (auto& th : threads) th.join();
  service_->TEST_WaitIdle();
  EXPECT_EQ(service_->ShardClock(), kClocks);
  EXPECT_EQ(Values(t, {0}), (std::vector<V>{{kClients * kClocks, 3 * kClocks}}));
  for (auto& s : sessions) {
    auto msgs = s->Take();
    EXPECT_TRUE(MessagesOfType<net::Error>(msgs).empty());
    for (const auto& r : MessagesOfType<net::ReadReply>(msgs)) {
      ASSERT_GE(r.version, static_cast<Version>(r.req_id) - 1);
      ASSERT_GE(r.applied_clock, r.version);
      // Each client adds 1 per clock: the value is the sum of applied clocks,
      // at least version * clients plus the reader's own lead.
      int64_t v = DecodeDense<int64_t>(r.rows[0].bytes)[0];
      ASSERT_GE(v, r.version * kClients + (r.applied_clock - r.version));
    }
  }
  service_->TEST_WaitIdle();
  // One PushDone per advance of the shard clock, in increasing order; a group
  // commit may advance it by more than one clock at once.
  auto dones = MessagesOfType<net::PushDone>(watcher->Take());
  ASSERT_FALSE(dones.empty());
  ASSERT_LE(dones.size(), static_cast<size_t>(kClocks));
  for (size_t i = 1; i < dones.size(); ++i) EXPECT_GT(dones[i].version, dones[i - 1].version);
  EXPECT_EQ(dones.back().version, kClocks);
}

}  // namespace
}  // namespace pace
