// Rows without a record over real TCP (docs/wire-protocol.md, ReadReply): a
// real paced and two clients in this test process (Client::Open with
// --servers), a BSP table with a normal initializer.
//
// - A fresh table's rows read by a client equal the initializer bit for bit,
//   and came without bytes (the shard counts them as absent); a peer that did
//   not ask for absent rows (an observer, e.g. pacectl) gets their bytes.
// - Rows one client writes while the other holds them as the initializer are
//   read by the other at the next clock with their bytes, the rest still
//   absent: the shard decides from the state of the read, never a stale one.
// - After SIGKILL and a restart of the shard, written rows read as the
//   initializer plus the deltas, never-written rows as absent.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "client/pace.h"
#include "common/row.h"
#include "net/remote_shard.h"
#include "tests/testing/subprocess.h"

namespace pace {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kWidth = 32;
constexpr uint64_t kRows = 300;

TableSchema Schema() {
  TableSchema s;
  s.name = "factors";
  s.type = ElementType::kF32;
  s.width = kWidth;
  s.consistency = Consistency::kBsp;
  s.init = Initializer{InitKind::kNormal, 0.0, 0.1, 23};
  return s;
}

// Client 1's delta for row r (it writes the even rows at clock 0).
std::vector<float> Delta(uint64_t r) {
  std::vector<float> d(kWidth);
  for (uint32_t j = 0; j < kWidth; ++j) d[j] = 0.25f * static_cast<float>(j + 1 + r % 5);
  return d;
}

// The value of row r: the initializer, plus client 1's delta if it wrote it.
std::string Expected(const TableSchema& t, uint64_t r) {
  std::string v;
  InitRow(t, r, &v);
  if (r % 2 == 0) {
    EXPECT_TRUE(AddRow(RowFormat::Of(t), &v, EncodeDense(Delta(r))).ok());
  }
  return v;
}

class ClientAbsentRowsTest : public ::testing::Test {
 protected:
  void StartShard() {
    ASSERT_TRUE(testing::StartPaced(&paced_, dir_.path() + "/s0", 0, 1, 2, {}, &port_, port_).ok());
  }
  ClientOptions Options(ClientId id) const {
    ClientOptions o;
    o.servers = {"127.0.0.1:" + std::to_string(port_)};
    o.client_id = id;
    o.num_clients = 2;
    o.shard_timeout_ms = 20000;
    return o;
  }
  // A direct connection to the shard: an observer, asking for absent rows or not.
  std::unique_ptr<net::RemoteShard> Peer(bool absent_rows) {
    net::RemoteShardOptions o;
    o.port = port_;
    o.hello.role = net::Hello::kObserver;
    o.hello.client_id = 0;
    o.hello.features = absent_rows ? net::Hello::kAbsentRows : 0;
    std::unique_ptr<net::RemoteShard> peer;
    Status s = net::RemoteShard::Connect(
        o, [](net::Message) {}, nullptr, &peer);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return peer;
  }
  net::ReadReply ReadAll(net::RemoteShard* peer, uint32_t table, Version min_version) {
    std::vector<uint64_t> rows;
    for (uint64_t r = 0; r < kRows; ++r) rows.push_back(r);
    auto f = peer->Read(table, rows, min_version);
    EXPECT_EQ(f.wait_for(20s), std::future_status::ready);
    StatusOr<net::ReadReply> reply = f.get();
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    return reply.ok() ? *reply : net::ReadReply{};
  }
  int64_t Counter(net::RemoteShard* peer, const std::string& name) {
    auto f = peer->Stats();
    EXPECT_EQ(f.wait_for(20s), std::future_status::ready);
    StatusOr<net::StatsReply> st = f.get();
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    if (!st.ok()) return -1;
    for (const auto& [n, v] : st->counters) {
      if (n == name) return v;
    }
    ADD_FAILURE() << "no counter " << name;
    return -1;
  }

  testing::TempDir dir_;
  testing::Subprocess paced_;
  uint16_t port_ = 0;
};

TEST_F(ClientAbsentRowsTest, FreshRowsAreTheInitializerAndWrittenOnesAreExact) {
  StartShard();
  if (HasFatalFailure()) return;
  std::unique_ptr<Client> clients[2];
  Table tables[2];
  for (int id = 0; id < 2; ++id) {
    ASSERT_TRUE(Client::Open(Options(id), &clients[id]).ok());
    ASSERT_TRUE(clients[id]->CreateTable(Schema(), &tables[id]).ok());
  }
  TableSchema t = Schema();
  t.id = tables[0].id();
  std::unique_ptr<net::RemoteShard> observer = Peer(false);
  ASSERT_NE(observer, nullptr);

  // Clock 0: client 0 reads every row (the initializer, sent absent), then
  // client 1 writes the even ones (after: a value of version 0 may hold
  // later clocks' updates).
  std::promise<void> read_clock0;
  std::shared_future<void> clock0_read = read_clock0.get_future().share();
  // Client 0 at clock c: every row is the initializer (c = 0) or Expected.
  auto read_all = [&](Worker* w, int c) -> Status {
    std::vector<float> got(kWidth);
    for (uint64_t r = 0; r < kRows; ++r) {
      RETURN_IF_ERROR(w->Get(tables[0], r, got.data()));
      std::string want;
      if (c == 0) {
        InitRow(t, r, &want);
      } else {
        want = Expected(t, r);
      }
      if (EncodeDense(got) != want) {
        return Status::Internal("clock " + std::to_string(c) + ": row " + std::to_string(r) +
                                " is not " + (c == 0 ? "the initializer" : "init + delta"));
      }
    }
    return Status::OK();
  };
  auto run = [&](int id) -> Status {
    std::unique_ptr<Worker> w;
    RETURN_IF_ERROR(clients[id]->RegisterWorker(&w));
    for (int c = 0; c < 2; ++c) {
      if (id == 0) {
        Status s = read_all(w.get(), c);
        if (c == 0) read_clock0.set_value();  // also on failure: client 1 goes on
        RETURN_IF_ERROR(s);
      } else if (c == 0) {
        if (clock0_read.wait_for(60s) != std::future_status::ready) {
          return Status::TimedOut("client 0 did not read clock 0");
        }
        for (uint64_t r = 0; r < kRows; r += 2) {
          RETURN_IF_ERROR(w->Inc(tables[id], r, Delta(r).data()));
        }
      }
      RETURN_IF_ERROR(w->Clock());
    }
    w.reset();
    return clients[id]->Flush();
  };
  std::future<Status> done[2] = {std::async(std::launch::async, run, 0),
                                 std::async(std::launch::async, run, 1)};
  for (int id = 0; id < 2; ++id) {
    ASSERT_EQ(done[id].wait_for(120s), std::future_status::ready) << "client " << id;
    Status s = done[id].get();
    ASSERT_TRUE(s.ok()) << "client " << id << ": " << s.ToString();
  }
  // Clock 0 read every row absent; clock 1 read the odd ones absent again
  // (BSP: every row was refreshed), the even ones with their bytes.
  EXPECT_EQ(Counter(observer.get(), "rows_read_absent"), static_cast<int64_t>(kRows + kRows / 2));

  // An observer that did not ask for absent rows gets every row's bytes.
  net::ReadReply plain = ReadAll(observer.get(), t.id, 2);
  ASSERT_EQ(plain.rows.size(), kRows);
  for (const net::RowData& row : plain.rows) {
    EXPECT_FALSE(row.absent);
    EXPECT_EQ(row.bytes, Expected(t, row.row)) << "row " << row.row;
  }
  for (auto& c : clients) c.reset();

  // The shard killed and restarted: written rows are init + delta, the
  // others still have no record.
  paced_.Kill();
  StartShard();
  if (HasFatalFailure()) return;
  std::unique_ptr<net::RemoteShard> peer = Peer(true);
  ASSERT_NE(peer, nullptr);
  net::ReadReply reply = ReadAll(peer.get(), t.id, 2);
  ASSERT_EQ(reply.rows.size(), kRows);
  for (const net::RowData& row : reply.rows) {
    SCOPED_TRACE("row " + std::to_string(row.row) + " after a restart");
    EXPECT_EQ(row.absent, row.row % 2 == 1);
    if (row.absent) {
      EXPECT_TRUE(row.bytes.empty());
    } else {
      EXPECT_EQ(row.bytes, Expected(t, row.row));
    }
  }
}

}  // namespace
}  // namespace pace
