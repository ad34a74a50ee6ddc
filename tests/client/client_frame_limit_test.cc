// Frame limits over real TCP (docs/wire-protocol.md, "Frame limits"): a real
// paced started with --max_frame_mb=1 and two client processes' clients in
// this test process (Client::Open with --servers).
//
// - Every clock of each client is 4 MiB of deltas, four frames: it leaves in
//   Apply parts that fit, and the totals at the shard (read back by an
//   observer) are exact. Client 1 reads every row under ESSP, so its Reads
//   are cut to what a reply frame holds, and the shard's Pushes of client 0's
//   updates (4 MiB per clock) are split into frames that fit.
// - The client's own frame limit, when it is the smaller one, cuts the same
//   way (a client with a 1 MiB limit against a shard that takes 64 MiB).
// - A row larger than a frame fails the client with ResourceExhausted naming
//   the sizes, at once: it is never sent, and nothing reconnects in a loop.
//
// Without the cuts the first clock's Apply is refused by the sender, the
// client reconnects and re-sends it forever; so each wait here is bounded:
// past it the shard is killed, which makes the clients fail (shard_timeout_ms)
// and the test fail instead of hang.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "client/client_impl.h"
#include "client/pace.h"
#include "client/remote_channel.h"
#include "common/row.h"
#include "net/remote_shard.h"
#include "tests/testing/subprocess.h"

namespace pace {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kWidth = 256;  // 2 KiB of i64 per row
constexpr uint64_t kRows = 2048;  // 4 MiB per clock: four 1 MiB frames
constexpr int kClocks = 3;

// Client `id`'s delta at clock `c` for element `j` (of every row).
int64_t Delta(int id, int c, uint32_t j) { return (id + 1) * 1000 + c * 10 + j; }

class ClientFrameLimitTest : public ::testing::Test {
 protected:
  void StartShard(uint32_t num_clients) {
    ASSERT_TRUE(testing::StartPaced(&paced_, dir_.path() + "/s0", 0, 1, num_clients,
                                    {"--max_frame_mb=1"}, &port_)
                    .ok());
  }
  ClientOptions Options(ClientId id, uint32_t num_clients) const {
    ClientOptions o;
    o.servers = {"127.0.0.1:" + std::to_string(port_)};
    o.client_id = id;
    o.num_clients = num_clients;
    o.shard_timeout_ms = 10000;
    return o;
  }
  static TableSchema Schema(uint32_t width) {
    TableSchema schema;
    schema.name = "big";
    schema.type = ElementType::kI64;
    schema.width = width;
    schema.consistency = Consistency::kEssp;
    schema.staleness = 1;
    return schema;
  }
  // The result of `f`, or, if it takes longer than `limit`, a failure (after
  // killing the shard so that the clients give up and `f` returns).
  Status WaitOrKill(std::future<Status>& f, std::chrono::seconds limit, const char* what) {
    if (f.wait_for(limit) != std::future_status::ready) {
      ADD_FAILURE() << what << " did not finish within " << limit.count()
                    << " s; killing the shard";
      paced_.Kill();
    }
    return f.get();
  }

  testing::TempDir dir_;
  testing::Subprocess paced_;
  uint16_t port_ = 0;
};

TEST_F(ClientFrameLimitTest, ClocksLargerThanAFrameCompleteExactly) {
  StartShard(2);
  if (HasFatalFailure()) return;
  std::unique_ptr<Client> clients[2];
  Table tables[2];
  for (int id = 0; id < 2; ++id) {
    ASSERT_TRUE(Client::Open(Options(id, 2), &clients[id]).ok());
    ASSERT_TRUE(clients[id]->CreateTable(Schema(kWidth), &tables[id]).ok());
  }
  // Client 1 reads every row at every clock (subscribing them: the shard
  // then pushes client 0's updates), then both add their deltas to every row.
  auto run = [&](int id) -> Status {
    std::unique_ptr<Worker> w;
    RETURN_IF_ERROR(clients[id]->RegisterWorker(&w));
    std::vector<int64_t> delta(kWidth), got(kWidth);
    for (int c = 0; c < kClocks; ++c) {
      if (id == 1) {
        std::vector<uint64_t> rows(kRows);
        for (uint64_t r = 0; r < kRows; ++r) rows[r] = r;
        RETURN_IF_ERROR(w->Prefetch(tables[id], rows));
        for (uint64_t r = 0; r < kRows; ++r) RETURN_IF_ERROR(w->Get(tables[id], r, got.data()));
      }
      for (uint32_t j = 0; j < kWidth; ++j) delta[j] = Delta(id, c, j);
      for (uint64_t r = 0; r < kRows; ++r) RETURN_IF_ERROR(w->Inc(tables[id], r, delta.data()));
      RETURN_IF_ERROR(w->Clock());
    }
    w.reset();
    return clients[id]->Flush();
  };
  std::future<Status> done[2] = {std::async(std::launch::async, run, 0),
                                 std::async(std::launch::async, run, 1)};
  for (int id = 0; id < 2; ++id) {
    Status s = WaitOrKill(done[id], 120s, id == 0 ? "client 0's job" : "client 1's job");
    ASSERT_TRUE(s.ok()) << "client " << id << ": " << s.ToString();
  }
  ClientStats stats[2] = {clients[0]->Stats(), clients[1]->Stats()};
  for (int id = 0; id < 2; ++id) {
    std::printf("client %d: %llu Apply messages for %d clocks, %llu bytes sent\n", id,
                static_cast<unsigned long long>(stats[id].batches_sent), kClocks,
                static_cast<unsigned long long>(stats[id].bytes_sent));
    // Four frames' worth per clock: at least four parts each.
    EXPECT_GE(stats[id].batches_sent, 4u * kClocks) << "client " << id;
  }
  EXPECT_GT(stats[1].tables.at(0).pushes_applied, 0u) << "no push reached client 1";

  // The totals at the shard, read by an observer in Reads that fit a frame.
  net::RemoteShardOptions o;
  o.port = port_;
  o.hello.role = net::Hello::kObserver;
  o.hello.client_id = 9;
  std::unique_ptr<net::RemoteShard> observer;
  ASSERT_TRUE(net::RemoteShard::Connect(
                  o, [](net::Message) {}, nullptr, &observer)
                  .ok());
  std::vector<int64_t> want(kWidth, 0);
  for (int id = 0; id < 2; ++id) {
    for (int c = 0; c < kClocks; ++c) {
      for (uint32_t j = 0; j < kWidth; ++j) want[j] += Delta(id, c, j);
    }
  }
  uint64_t checked = 0;
  for (uint64_t first = 0; first < kRows; first += 256) {
    std::vector<uint64_t> rows;
    for (uint64_t r = first; r < first + 256 && r < kRows; ++r) rows.push_back(r);
    auto f = observer->Read(tables[0].id(), rows, kClocks);
    ASSERT_EQ(f.wait_for(20s), std::future_status::ready);
    StatusOr<net::ReadReply> reply = f.get();
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    ASSERT_EQ(reply->rows.size(), rows.size());
    for (const net::RowData& row : reply->rows) {
      ASSERT_EQ(DecodeDense<int64_t>(row.bytes), want) << "row " << row.row << " at the shard";
      ++checked;
    }
  }
  EXPECT_EQ(checked, kRows);
}

// The client's own frame limit (RemoteShardOptions::max_frame_bytes, here 1
// MiB against a shard that takes 64 MiB) cuts its clocks the same way: a
// sender refuses a message above its own limit, which without the cuts made
// the channel reconnect and re-send the batch forever.
TEST_F(ClientFrameLimitTest, ClientsOwnFrameLimitCutsItsClocksToo) {
  ASSERT_TRUE(testing::StartPaced(&paced_, dir_.path() + "/s0", 0, 1, 1, {}, &port_).ok());
  ClientOptions o = Options(0, 1);
  net::RemoteShardOptions ro;
  ro.port = port_;
  ro.hello.client_id = 0;
  ro.hello.incarnation = 77;
  ro.max_frame_bytes = 1 << 20;
  std::vector<std::unique_ptr<client::ShardChannel>> channels;
  channels.push_back(std::make_unique<client::RemoteChannel>(0, ro));
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::Impl::Create(o, std::move(channels), false, &client).ok());
  Table t;
  ASSERT_TRUE(client->CreateTable(Schema(kWidth), &t).ok());
  std::future<Status> done = std::async(std::launch::async, [&]() -> Status {
    std::unique_ptr<Worker> w;
    RETURN_IF_ERROR(client->RegisterWorker(&w));
    std::vector<int64_t> delta(kWidth);
    for (int c = 0; c < kClocks; ++c) {
      for (uint32_t j = 0; j < kWidth; ++j) delta[j] = Delta(0, c, j);
      for (uint64_t r = 0; r < kRows; ++r) RETURN_IF_ERROR(w->Inc(t, r, delta.data()));
      RETURN_IF_ERROR(w->Clock());
    }
    w.reset();
    return client->Flush();
  });
  Status s = WaitOrKill(done, 60s, "the job");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(client->Stats().batches_resent, 0u);
  // A fresh worker of this client reads the shard's values (its cache is
  // dropped first: nothing of its own is pending after the Flush).
  client.reset();
  ASSERT_TRUE(Client::Open(Options(0, 1), &client).ok());
  ASSERT_TRUE(client->OpenTable("big", &t).ok());
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(client->RegisterWorker(&w).ok());
  std::vector<int64_t> want(kWidth, 0), got(kWidth);
  for (int c = 0; c < kClocks; ++c) {
    for (uint32_t j = 0; j < kWidth; ++j) want[j] += Delta(0, c, j);
  }
  for (uint64_t r = 0; r < kRows; ++r) {
    ASSERT_TRUE(w->Get(t, r, got.data()).ok());
    ASSERT_EQ(got, want) << "row " << r << " at the shard";
  }
}

TEST_F(ClientFrameLimitTest, RowLargerThanAFrameFailsTheClientWithTheSizes) {
  StartShard(1);
  if (HasFatalFailure()) return;
  constexpr uint32_t kWide = 160000;  // 1.28 MB of i64: over the 1 MiB frame
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::Open(Options(0, 1), &client).ok());
  Table t;
  ASSERT_TRUE(client->CreateTable(Schema(kWide), &t).ok());
  std::future<Status> done = std::async(std::launch::async, [&]() -> Status {
    std::unique_ptr<Worker> w;
    RETURN_IF_ERROR(client->RegisterWorker(&w));
    std::vector<int64_t> delta(kWide, 1);
    RETURN_IF_ERROR(w->Inc(t, 3, delta.data()));
    RETURN_IF_ERROR(w->Clock());
    w.reset();
    return client->Flush();
  });
  const auto start = std::chrono::steady_clock::now();
  Status s = WaitOrKill(done, 60s, "the job with a row larger than a frame");
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("failed after %.0f ms: %s\n", ms, s.ToString().c_str());
  ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  // Names the row, its size and the limit.
  EXPECT_NE(s.message().find("row "), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(std::to_string(8 * kWide) + " bytes"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("frame limit of " + std::to_string(1 << 20) + " bytes"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(client->Stats().batches_resent, 0u) << "it was sent and re-sent";
}

}  // namespace
}  // namespace pace
