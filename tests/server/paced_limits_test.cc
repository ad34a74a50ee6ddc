// Connection limits of a real `paced` under a lowered RLIMIT_NOFILE (set in
// the child before exec): floods of idle connections are refused with a
// logged reason and Error{ResourceExhausted}, silent peers are closed after
// the handshake timeout (logged), a session stalled inside a frame is closed,
// and through all of it an authenticated client keeps training with RocksDB
// flushing (opening new files) underneath.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/row.h"
#include "net/codec.h"
#include "net/remote_shard.h"
#include "tests/testing/shard_peer.h"
#include "tests/testing/subprocess.h"

namespace pace {
namespace {

using namespace std::chrono_literals;
using testing::StartPaced;
using testing::Subprocess;
using testing::TempDir;

using testing::Await;
using testing::RawConn;
using Client = testing::PeerClient;

Status Connect(uint16_t port, ClientId id, Client* c) { return testing::ConnectPeer(port, id, c); }

std::string Frame(const net::Message& m) {
  std::string out;
  EXPECT_TRUE(net::EncodeFrame(m, &out).ok());
  return out;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

constexpr uint32_t kWidth = 1024;  // i64: 8 KiB a row
constexpr uint64_t kRows = 64;     // 512 KiB a clock: a 1 MiB memtable flushes every 2 clocks

class PacedLimitsTest : public ::testing::Test {
 protected:
  void StartServer(uint64_t soft, uint64_t hard, std::vector<std::string> extra) {
    data_dir_ = dir_.path() + "/shard0";
    extra.insert(extra.end(), {"--write_buffer_mb=1", "--block_cache_mb=8", "--row_cache_mb=0"});
    paced_.SetOpenFileLimit(soft, hard);
    Status s = StartPaced(&paced_, data_dir_, 0, 1, /*num_clients=*/2, extra, &port_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::string Log() const {
    std::ifstream in(data_dir_ + ".stderr.log");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  // Client 0 sends clocks [from, to) of kRows full rows and waits for each Ack.
  void Train(Client* c, uint32_t table, ClockT from, ClockT to) {
    for (ClockT clock = from; clock < to; ++clock) {
      std::vector<net::RowData> rows;
      for (uint64_t r = 0; r < kRows; ++r) {
        rows.push_back(net::RowData{table, r, EncodeDense(std::vector<int64_t>(kWidth, 1))});
      }
      ASSERT_TRUE(c->shard->Send(net::Apply{clock, std::move(rows)}).ok());
      net::Ack ack;
      ASSERT_TRUE(c->inbox.NextAck(&ack)) << "clock " << clock;
      ASSERT_EQ(ack.clock, clock);
      ASSERT_FALSE(ack.duplicate);
    }
  }
  // Every row holds `clocks` in every column.
  void ExpectRows(Client* c, uint32_t table, int64_t clocks) {
    std::vector<uint64_t> ids;
    for (uint64_t r = 0; r < kRows; ++r) ids.push_back(r);
    net::ReadReply reply = Await(c->shard->Read(table, ids, 0));
    ASSERT_EQ(reply.rows.size(), kRows);
    for (const net::RowData& row : reply.rows) {
      ASSERT_EQ(DecodeDense<int64_t>(row.bytes), std::vector<int64_t>(kWidth, clocks))
          << "row " << row.row;
    }
  }
  uint32_t CreateTable(Client* c) {
    TableSchema s;
    s.name = "w";
    s.type = ElementType::kI64;
    s.width = kWidth;
    return Await(c->shard->CreateTable(s)).id;
  }

  TempDir dir_;
  std::string data_dir_;
  Subprocess paced_;
  uint16_t port_ = 0;
};

// RLIMIT_NOFILE 200 (soft = hard: nothing to raise), 64 reserved: at most
// 200 - 64 - 16 = 120 connections. 300 silent connections would take every
// descriptor (RocksDB could not open its next WAL or SST); at the cap each new
// one takes the slot of the oldest silent one instead, which is closed, and
// the session is never touched. The shard keeps serving, and serves new
// clients once the flood is gone.
TEST_F(PacedLimitsTest, ConnectionFloodIsRefusedAndTheShardKeepsServing) {
  StartServer(
      200, 200,
      {"--reserved_fds=64", "--max_handshaking_connections=0", "--handshake_timeout_ms=120000"});
  if (HasFatalFailure()) return;
  Client good;
  ASSERT_TRUE(Connect(port_, 0, &good).ok());
  const uint32_t table = CreateTable(&good);
  Train(&good, table, 0, 2);
  if (HasFatalFailure()) return;

  std::vector<std::unique_ptr<RawConn>> flood;
  for (int i = 0; i < 300; ++i) {
    flood.push_back(std::make_unique<RawConn>(port_));
    ASSERT_TRUE(flood.back()->connected()) << i;  // the kernel completes it before accept
  }
  // The server accepts in connect order and closes the oldest silent one for
  // each connection over the cap: the first 181 are closed, flood[180] last.
  ASSERT_EQ(flood[180]->ErrorCode(30000), StatusCode::kResourceExhausted);
  int refused = 1, open = 0;
  for (size_t i = 0; i < flood.size(); ++i) {
    if (i == 180) continue;
    StatusCode code = flood[i]->ErrorCode(20);
    if (code == StatusCode::kResourceExhausted) {
      ++refused;
      EXPECT_LT(i, 180u);
      EXPECT_TRUE(flood[i]->ClosedByPeer(5000));
    } else {
      EXPECT_EQ(code, StatusCode::kOk);
      ++open;
    }
  }
  // The good client's connection and 119 silent ones fill the 120.
  EXPECT_EQ(open, 119);
  EXPECT_EQ(refused, 181);

  // Training goes on, with RocksDB flushing its 1 MiB memtable (new SST and
  // WAL files) while the connections hold their share of the descriptors.
  Train(&good, table, 2, 12);
  if (HasFatalFailure()) return;
  ExpectRows(&good, table, 12);

  flood.clear();
  Client late;  // once the flood is gone, a new client gets in
  Status s;
  for (int attempt = 0; attempt < 100; ++attempt) {
    s = Connect(port_, 1, &late);
    if (s.ok()) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectRows(&late, table, 12);

  const std::string log = Log();
  EXPECT_NE(log.find("at most 120 connections"), std::string::npos) << log;
  EXPECT_NE(log.find("too many connections: 120 open, at most 120 (open-file limit 200 minus 64 "
                     "reserved)"),
            std::string::npos)
      << log;
  // 181 closed within about a second: a few throttled lines, not 181.
  EXPECT_LE(Count(log, "closed connection"), 10u);
  EXPECT_EQ(log.find("Too many open files"), std::string::npos) << log;
}

// Soft 128, hard 256: paced raises the soft limit to 256 (logged). At most 32
// connections before their handshake: of a burst of 100 silent ones the
// oldest make room for the newest, and the last 32 are closed after the
// handshake timeout, each logged (throttled). A session that stalls in the middle of a frame is
// closed; an idle one between frames is not.
TEST_F(PacedLimitsTest, SilentAndStalledPeersAreClosedAndLogged) {
  StartServer(128, 256,
              {"--reserved_fds=64", "--max_handshaking_connections=32",
               "--handshake_timeout_ms=5000", "--frame_stall_timeout_ms=1000"});
  if (HasFatalFailure()) return;
  Client good;
  ASSERT_TRUE(Connect(port_, 0, &good).ok());
  const uint32_t table = CreateTable(&good);

  std::vector<std::unique_ptr<RawConn>> burst;
  for (int i = 0; i < 100; ++i) {
    burst.push_back(std::make_unique<RawConn>(port_));
    ASSERT_TRUE(burst.back()->connected()) << i;
  }
  Train(&good, table, 0, 4);  // while the burst waits out its handshake timeout
  if (HasFatalFailure()) return;
  int refused = 0, timed_out = 0;
  for (auto& c : burst) {
    StatusCode code = c->ErrorCode(30000);
    if (code == StatusCode::kResourceExhausted) ++refused;
    if (code == StatusCode::kTimedOut) ++timed_out;
  }
  EXPECT_EQ(refused + timed_out, 100);
  // The last 32 always wait out the timeout; a slow machine may let a few
  // more do so if the first ones time out before the burst is accepted.
  EXPECT_GE(timed_out, 32);
  EXPECT_GE(refused, 1);
  burst.clear();

  // Authenticated, then half a frame and silence.
  RawConn stalled(port_);
  stalled.Write(Frame(net::Hello{net::kWireVersion, 1, ""}));
  net::Message welcome;
  ASSERT_TRUE(stalled.ReadMessage(&welcome, 10000));
  ASSERT_NE(std::get_if<net::Welcome>(&welcome), nullptr) << net::MessageName(welcome);
  std::string frame = Frame(net::ListTables{7});
  stalled.Write(frame.substr(0, frame.size() / 2));
  EXPECT_EQ(stalled.ErrorCode(20000), StatusCode::kTimedOut);
  EXPECT_TRUE(stalled.ClosedByPeer(5000));
  // The good client sat idle between frames all along and is still served.
  Train(&good, table, 4, 6);
  if (HasFatalFailure()) return;
  ExpectRows(&good, table, 6);

  const std::string log = Log();
  EXPECT_NE(log.find("raised the open-file limit (soft RLIMIT_NOFILE) from 128 to 256"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("at most 176 connections (32 before their handshake)"), std::string::npos)
      << log;
  EXPECT_NE(log.find("too many connections before their handshake: 32, at most 32"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("handshake timeout: closed connection"), std::string::npos) << log;
  EXPECT_LE(Count(log, "handshake timeout: closed connection"), 10u);
  EXPECT_NE(log.find("stalled inside a frame"), std::string::npos) << log;
}

// 1,000 peers connect and never send a Hello, and re-open each connection the
// moment the shard closes it (an attacker holding the port). Clients that
// connect meanwhile still complete their handshake, each within a second: a
// silent peer's slot goes to the newest connection, so one that sends its
// Hello at once is served.
TEST_F(PacedLimitsTest, SilentPeersThatReopenDoNotLockClientsOut) {
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_cur < 4096 && lim.rlim_max >= 4096) {
    lim.rlim_cur = 4096;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
  }
  if (lim.rlim_cur < 1200)
    GTEST_SKIP() << "needs 1200 descriptors, RLIMIT_NOFILE is " << lim.rlim_cur;
  StartServer(4096, 4096, {});  // the default caps: 256 before the handshake
  if (HasFatalFailure()) return;

  constexpr int kPeers = 1000;
  std::vector<std::unique_ptr<RawConn>> peers;
  for (int i = 0; i < kPeers; ++i) {
    peers.push_back(std::make_unique<RawConn>(port_));
    ASSERT_TRUE(peers.back()->connected()) << i;
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reopened{0};
  std::thread attacker([&] {
    std::vector<pollfd> fds(kPeers);
    while (!stop.load()) {
      for (int i = 0; i < kPeers; ++i) fds[i] = pollfd{peers[i]->fd(), POLLIN, 0};
      if (poll(fds.data(), fds.size(), 10) <= 0) continue;
      for (int i = 0; i < kPeers && !stop.load(); ++i) {
        if (fds[i].revents == 0) continue;  // an Error or EOF: closed by the shard
        peers[i] = std::make_unique<RawConn>(port_);
        reopened.fetch_add(1);
      }
    }
  });
  // Until the shard has shed its first silent peers, the attack is not on yet.
  for (int i = 0; i < 500 && reopened.load() < kPeers - 256; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_GE(reopened.load(), static_cast<uint64_t>(kPeers - 256));

  for (ClientId id = 0; id < 2; ++id) {
    Client c;
    const auto start = std::chrono::steady_clock::now();
    Status s = Connect(port_, id, &c);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    ASSERT_TRUE(s.ok()) << "client " << id << ": " << s.ToString();
    EXPECT_LT(ms, 1000) << "client " << id;
    std::printf("client %u connected in %lld ms (%llu silent connections re-opened so far)\n", id,
                static_cast<long long>(ms), static_cast<unsigned long long>(reopened.load()));
    const uint32_t table = id == 0 ? CreateTable(&c) : 0;
    if (id == 0) {
      Train(&c, table, 0, 1);
      if (HasFatalFailure()) break;
    }
  }
  stop.store(true);
  attacker.join();
  const std::string log = Log();
  EXPECT_NE(log.find("to make room"), std::string::npos) << log;
}

}  // namespace
}  // namespace pace
