// Loopback tests of the TCP transport: a real Server with a fake
// ServiceHandler, RemoteShard clients and raw sockets sending hostile bytes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "net/codec.h"
#include "net/remote_shard.h"
#include "net/server.h"
#include "net/testing/sample_messages.h"
#include "net/testing/transport_test_util.h"

namespace pace::net {
namespace {

using testing::EncodeOrFail;
using testing::FakeService;
using testing::Inbox;
using testing::RawClient;
using testing::SameMessage;
using testing::SampleSchema;

constexpr int kWaitMs = 10000;  // generous: sanitizer builds are slow
constexpr char kToken[] = "s3cret-token";

template <typename T>
T Get(std::future<T>& f) {
  EXPECT_EQ(f.wait_for(std::chrono::milliseconds(kWaitMs)), std::future_status::ready)
      << "no reply within " << kWaitMs << " ms";
  return f.get();
}

class TransportTest : public ::testing::Test {
 protected:
  void StartServer(ServerOptions options = ServerOptions()) {
    options.token = kToken;
    if (options.linger_ms == ServerOptions().linger_ms) options.linger_ms = 500;
    server_ = std::make_unique<Server>(options);
    Status s = server_->Start(&service_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_NE(server_->port(), 0);
  }

  RemoteShardOptions ClientOptions(ClientId id = 1) {
    RemoteShardOptions o;
    o.port = server_->port();
    o.hello.client_id = id;
    o.hello.token = kToken;
    o.connect_timeout_ms = kWaitMs;
    return o;
  }

  Status Connect(const RemoteShardOptions& o, std::unique_ptr<RemoteShard>* out,
                 Inbox* inbox = nullptr, Inbox* disconnects = nullptr) {
    return RemoteShard::Connect(
        o,
        [inbox](Message m) {
          if (inbox != nullptr) inbox->Add(std::move(m));
        },
        [disconnects](const Status& s) {
          if (disconnects != nullptr) disconnects->Add(Error{0, s.code(), s.message()});
        },
        out);
  }

  // A well-behaved client must get answers whatever happens elsewhere.
  void ExpectServes(RemoteShard* client) {
    auto f = client->Read(1, {10, 11});
    StatusOr<ReadReply> r = Get(f);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->rows.size(), 2u);
    EXPECT_EQ(r->rows[1].row, 11u);
  }

  // The raw client must receive exactly an Error{code} (req_id 0) and then
  // see the connection closed.
  void ExpectErrorThenClose(RawClient* raw, StatusCode code) {
    bool closed = false;
    std::vector<Message> got = raw->ReadUntilClosed(kWaitMs, &closed);
    EXPECT_TRUE(closed) << "server did not close the connection";
    ASSERT_EQ(got.size(), 1u) << "expected exactly one Error frame";
    const auto* e = std::get_if<Error>(&got[0]);
    ASSERT_NE(e, nullptr) << "got " << MessageName(got[0]);
    EXPECT_EQ(e->code, code) << e->message;
    EXPECT_EQ(e->req_id, 0u);
    EXPECT_FALSE(e->message.empty());
  }

  // Declared first so that it outlives the server.
  FakeService service_;
  std::unique_ptr<Server> server_;
};

TEST_F(TransportTest, HandshakeAndConvenienceCalls) {
  StartServer();
  std::unique_ptr<RemoteShard> client;
  ASSERT_TRUE(Connect(ClientOptions(2), &client).ok());
  EXPECT_TRUE(client->connected());
  const Welcome& w = client->welcome();
  EXPECT_EQ(w.wire_version, kWireVersion);
  EXPECT_EQ(w.shard_id, 3u);
  EXPECT_EQ(w.num_shards, 4u);
  EXPECT_EQ(w.num_clients, 5u);
  EXPECT_EQ(w.applied_clock, 7);
  EXPECT_EQ(w.shard_clock, 6);
  ASSERT_TRUE(service_.WaitConnects(1, kWaitMs));
  EXPECT_EQ(service_.connected_clients(), std::vector<ClientId>{2});

  TableSchema schema = SampleSchema(0, "emb");
  auto created = client->CreateTable(schema);
  StatusOr<TableSchema> t = Get(created);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->id, 42u);
  EXPECT_EQ(t->name, "emb");

  auto listed = client->ListTables();
  StatusOr<std::vector<TableSchema>> all = Get(listed);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].name, "b");

  auto described = client->DescribeTable("a");
  ASSERT_TRUE(Get(described).ok());
  auto missing = client->DescribeTable("nope");
  StatusOr<TableSchema> m = Get(missing);
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("nope"), std::string::npos);

  auto stats = client->Stats();
  StatusOr<StatsReply> st = Get(stats);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->shard_id, 3u);
  EXPECT_EQ(st->counters.size(), 1u);

  ExpectServes(client.get());

  client->Close();
  EXPECT_FALSE(client->connected());
  ASSERT_TRUE(service_.WaitDisconnects(1, kWaitMs)) << "OnDisconnect not called";
  EXPECT_EQ(client->Send(Ack{}).code(), StatusCode::kUnavailable);
}

TEST_F(TransportTest, SendsArriveInOrderAndRepliesReachHandler) {
  StartServer();
  Inbox inbox;
  std::unique_ptr<RemoteShard> client;
  ASSERT_TRUE(Connect(ClientOptions(), &client, &inbox).ok());
  constexpr int kN = 500;
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(client->Send(Apply{i, {RowData{1, 2, "delta"}}}).ok());
  }
  ASSERT_TRUE(client->Send(Unsubscribe{4, {7, 8}}).ok());
  std::vector<Message> got = inbox.WaitFor(kN + 2, kWaitMs);
  ASSERT_EQ(got.size(), static_cast<size_t>(kN + 2));
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(SameMessage(got[i], Ack{i, i % 2 == 1})) << i;
  }
  EXPECT_TRUE(SameMessage(got[kN], Push{9, 9, {RowData{4, 7, "v"}, RowData{4, 8, "v"}}}));
  EXPECT_TRUE(SameMessage(got[kN + 1], PushDone{9, 9}));
}

TEST_F(TransportTest, ConvenienceRepliesAreNotPassedToHandler) {
  StartServer();
  Inbox inbox;
  std::unique_ptr<RemoteShard> client;
  ASSERT_TRUE(Connect(ClientOptions(), &client, &inbox).ok());
  ExpectServes(client.get());
  // A Read sent with Send() and a low req_id goes to the handler.
  ASSERT_TRUE(client->Send(Read{5, 1, {1}, 0, false}).ok());
  std::vector<Message> got = inbox.WaitFor(1, kWaitMs);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<ReadReply>(got[0]));
  EXPECT_EQ(std::get<ReadReply>(got[0]).req_id, 5u);
}

TEST_F(TransportTest, WrongTokenIsRefused) {
  StartServer();
  RemoteShardOptions o = ClientOptions();
  o.hello.token = "s3cret-tokem";
  std::unique_ptr<RemoteShard> client;
  Status s = Connect(o, &client);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_EQ(client, nullptr);
  EXPECT_EQ(service_.connects(), 0);
  EXPECT_EQ(server_->stats().handshakes_refused, 1u);

  RawClient raw;
  ASSERT_TRUE(raw.Connect(server_->port()));
  raw.Send(EncodeOrFail(Hello{kWireVersion, 1, "", Hello::kClientProcess}));
  ExpectErrorThenClose(&raw, StatusCode::kPermissionDenied);
}

// paced sets the token after Listen (it creates it in the data dir it opens
// later): SetToken before Start replaces options.token; after Start it is
// refused. A Hello without a token is told what to do (missing_token_hint).
TEST_F(TransportTest, SetTokenBeforeStartAndTheMissingTokenHint) {
  ServerOptions options;
  options.token = "old";
  options.missing_token_hint = "pass --token_file=/d/token";
  server_ = std::make_unique<Server>(options);
  ASSERT_TRUE(server_->Listen().ok());
  ASSERT_TRUE(server_->SetToken(kToken).ok());
  ASSERT_TRUE(server_->Start(&service_).ok());
  EXPECT_EQ(server_->SetToken("later").code(), StatusCode::kFailedPrecondition);
  std::unique_ptr<RemoteShard> client;
  ASSERT_TRUE(Connect(ClientOptions(), &client).ok());
  RemoteShardOptions o = ClientOptions();
  o.hello.token = "";
  std::unique_ptr<RemoteShard> none;
  Status s = Connect(o, &none);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "shard 127.0.0.1:" + std::to_string(server_->port()) +
                             " requires a token: pass --token_file=/d/token");
}

TEST_F(TransportTest, WrongWireVersionIsIncompatible) {
  StartServer();
  RemoteShardOptions o = ClientOptions();
  o.hello.wire_version = kWireVersion + 1;
  std::unique_ptr<RemoteShard> client;
  Status s = Connect(o, &client);
  EXPECT_EQ(s.code(), StatusCode::kIncompatible) << s.ToString();

  RawClient raw;
  ASSERT_TRUE(raw.Connect(server_->port()));
  raw.Send(EncodeOrFail(Hello{0, 1, kToken, Hello::kClientProcess}));
  ExpectErrorThenClose(&raw, StatusCode::kIncompatible);
  EXPECT_EQ(service_.connects(), 0);
}

TEST_F(TransportTest, ServiceCanRefuseInOnHello) {
  StartServer();
  std::unique_ptr<RemoteShard> client;
  Status s = Connect(ClientOptions(FakeService::kBannedClient), &client);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("banned"), std::string::npos) << s.ToString();
}

TEST_F(TransportTest, FirstFrameMustBeHello) {
  StartServer();
  RawClient raw;
  ASSERT_TRUE(raw.Connect(server_->port()));
  raw.Send(EncodeOrFail(Read{1, 1, {1}, 0, false}));
  ExpectErrorThenClose(&raw, StatusCode::kFailedPrecondition);
  EXPECT_EQ(service_.messages(), 0);
}

TEST_F(TransportTest, HostileInputClosesOnlyThatConnection) {
  StartServer();
  Inbox disconnects;
  std::unique_ptr<RemoteShard> good;
  ASSERT_TRUE(Connect(ClientOptions(), &good, nullptr, &disconnects).ok());
  ExpectServes(good.get());

  {
    SCOPED_TRACE("4 GiB length prefix");
    RawClient raw;
    ASSERT_TRUE(raw.Connect(server_->port()));
    raw.Send(std::string("\xff\xff\xff\xff", 4));
    ExpectErrorThenClose(&raw, StatusCode::kResourceExhausted);
    ExpectServes(good.get());
  }
  {
    SCOPED_TRACE("zero length prefix");
    RawClient raw;
    ASSERT_TRUE(raw.Connect(server_->port()));
    raw.Send(std::string(8, '\0'));
    ExpectErrorThenClose(&raw, StatusCode::kCorruption);
    ExpectServes(good.get());
  }
  {
    SCOPED_TRACE("random bytes");
    std::mt19937 rng(5);
    std::string junk(3000, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    junk[0] = 100;  // a plausible length, so the payload is verified
    junk[1] = junk[2] = junk[3] = 0;
    RawClient raw;
    ASSERT_TRUE(raw.Connect(server_->port()));
    raw.Send(junk);
    ExpectErrorThenClose(&raw, StatusCode::kCorruption);
    ExpectServes(good.get());
  }
  {
    SCOPED_TRACE("truncated frame, then EOF");
    std::string frame = EncodeOrFail(Hello{kWireVersion, 1, kToken, Hello::kClientProcess});
    RawClient raw;
    ASSERT_TRUE(raw.Connect(server_->port()));
    raw.Send(frame.substr(0, frame.size() - 5));
    raw.ShutdownWrite();
    ExpectErrorThenClose(&raw, StatusCode::kCorruption);
    ExpectServes(good.get());
  }
  {
    SCOPED_TRACE("truncated payload inside a complete frame");
    std::string frame = EncodeOrFail(Hello{kWireVersion, 1, kToken, Hello::kClientProcess});
    std::string payload = frame.substr(kFrameHeaderBytes, frame.size() - kFrameHeaderBytes - 16);
    uint32_t len = static_cast<uint32_t>(payload.size());
    std::string cut(4, '\0');
    std::memcpy(cut.data(), &len, 4);
    RawClient raw;
    ASSERT_TRUE(raw.Connect(server_->port()));
    raw.Send(cut + payload);
    ExpectErrorThenClose(&raw, StatusCode::kCorruption);
    ExpectServes(good.get());
  }
  {
    SCOPED_TRACE("garbage after a successful handshake");
    int before = service_.disconnects();
    RawClient raw;
    ASSERT_TRUE(raw.Connect(server_->port()));
    ASSERT_TRUE(std::holds_alternative<Welcome>(raw.Handshake(kToken)));
    raw.Send(std::string("\x08\x00\x00\x00garbage!", 12));
    ExpectErrorThenClose(&raw, StatusCode::kCorruption);
    raw.Close();
    EXPECT_TRUE(service_.WaitDisconnects(before + 1, kWaitMs));
    ExpectServes(good.get());
  }
  {
    SCOPED_TRACE("a second Hello");
    RawClient raw;
    ASSERT_TRUE(raw.Connect(server_->port()));
    ASSERT_TRUE(std::holds_alternative<Welcome>(raw.Handshake(kToken)));
    raw.Send(EncodeOrFail(Hello{kWireVersion, 1, kToken, Hello::kClientProcess}));
    ExpectErrorThenClose(&raw, StatusCode::kFailedPrecondition);
    ExpectServes(good.get());
  }
  EXPECT_TRUE(good->connected());
  EXPECT_EQ(disconnects.size(), 0u) << "the good client was disconnected";
  EXPECT_GE(server_->stats().bad_frames, 5u);
}

TEST_F(TransportTest, SilentPeerIsDroppedAfterHandshakeTimeout) {
  ServerOptions o;
  o.handshake_timeout_ms = 200;
  StartServer(o);
  auto start = std::chrono::steady_clock::now();
  RawClient raw;
  ASSERT_TRUE(raw.Connect(server_->port()));
  ExpectErrorThenClose(&raw, StatusCode::kTimedOut);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
}

TEST_F(TransportTest, SessionCloseSendsErrorAndDisconnects) {
  StartServer();
  Inbox inbox;
  Inbox disconnects;
  std::unique_ptr<RemoteShard> client;
  ASSERT_TRUE(Connect(ClientOptions(), &client, &inbox, &disconnects).ok());
  auto f = client->DescribeTable("close-me");
  StatusOr<TableSchema> r = Get(f);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  std::vector<Message> why = disconnects.WaitFor(1, kWaitMs);
  ASSERT_EQ(why.size(), 1u);
  EXPECT_EQ(std::get<Error>(why[0]).code, StatusCode::kInvalidArgument);
  EXPECT_NE(std::get<Error>(why[0]).message.find("closing as asked"), std::string::npos);
  std::vector<Message> got = inbox.WaitFor(1, kWaitMs);
  ASSERT_EQ(got.size(), 1u) << "the Error frame reaches the handler";
  EXPECT_TRUE(std::holds_alternative<Error>(got[0]));
  EXPECT_FALSE(client->connected());
}

TEST_F(TransportTest, SlowReaderDoesNotGrowServerQueueBeyondBound) {
  ServerOptions o;
  o.max_write_queue_bytes = 1 << 20;
  StartServer(o);
  service_.reply_row_bytes = 32 << 10;
  constexpr int kReads = 200;
  constexpr size_t kReplyBytes = 8 * (32 << 10);  // 8 rows per read

  RawClient raw;
  ASSERT_TRUE(raw.Connect(server_->port()));
  ASSERT_TRUE(std::holds_alternative<Welcome>(raw.Handshake(kToken)));
  std::string requests;
  for (int i = 0; i < kReads; ++i) {
    requests +=
        EncodeOrFail(Read{static_cast<uint64_t>(i + 1), 1, {0, 1, 2, 3, 4, 5, 6, 7}, 0, false});
  }
  ASSERT_LT(requests.size(), 32u << 10) << "requests must fit in the socket buffers";
  ASSERT_TRUE(raw.Send(requests));

  // The server must stop reading this peer once its queue is full.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
  while (server_->stats().read_pauses == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_GE(server_->stats().read_pauses, 1u) << "the server never paused reading";
  EXPECT_LT(service_.messages(), kReads) << "all requests were dispatched despite the full queue";
  size_t bound = o.max_write_queue_bytes + kReplyBytes + 4096;
  EXPECT_LE(server_->stats().peak_write_queue_bytes, bound);

  // Now read everything: the server resumes and answers all requests in order.
  std::vector<Message> got = raw.ReadMessages(kReads, kWaitMs);
  ASSERT_EQ(got.size(), static_cast<size_t>(kReads));
  for (int i = 0; i < kReads; ++i) {
    ASSERT_EQ(std::get<ReadReply>(got[i]).req_id, static_cast<uint64_t>(i + 1));
  }
  EXPECT_EQ(service_.messages(), kReads);
  EXPECT_LE(server_->stats().peak_write_queue_bytes, bound);
}

TEST_F(TransportTest, PushingToANonReaderHitsTheHardLimit) {
  ServerOptions o;
  o.max_write_queue_bytes = 1 << 20;
  o.max_write_queue_hard_bytes = 4 << 20;
  o.linger_ms = 100;
  StartServer(o);
  RawClient raw;
  ASSERT_TRUE(raw.Connect(server_->port()));
  ASSERT_TRUE(std::holds_alternative<Welcome>(raw.Handshake(kToken)));
  ASSERT_TRUE(service_.WaitConnects(1, kWaitMs));
  std::shared_ptr<Session> session = service_.last_session();
  Push push{1, 1, {RowData{1, 1, std::string(256 << 10, 'p')}}};
  for (int i = 0; i < 1000 && service_.disconnects() == 0; ++i) session->Send(push);
  ASSERT_TRUE(service_.WaitDisconnects(1, kWaitMs)) << "session not closed at the hard limit";
  EXPECT_LE(server_->stats().peak_write_queue_bytes, o.max_write_queue_hard_bytes);
  session->Send(push);  // inert after the close
  session->Close(Status::Aborted("again"));
}

TEST_F(TransportTest, OversizedMessagesFailAtTheSender) {
  ServerOptions o;
  o.max_frame_bytes = 64 << 10;
  StartServer(o);
  Inbox disconnects;
  RemoteShardOptions co = ClientOptions();
  co.max_frame_bytes = 64 << 10;
  std::unique_ptr<RemoteShard> client;
  ASSERT_TRUE(Connect(co, &client, nullptr, &disconnects).ok());
  Status s = client->Send(Apply{1, {RowData{1, 1, std::string(100 << 10, 'a')}}});
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("Apply"), std::string::npos) << s.ToString();
  ExpectServes(client.get());  // the connection stays up

  // A reply too large for the peer closes the session with a clear error.
  service_.reply_row_bytes = 100 << 10;
  auto f = client->Read(1, {1});
  EXPECT_EQ(Get(f).status().code(), StatusCode::kUnavailable);
  std::vector<Message> why = disconnects.WaitFor(1, kWaitMs);
  ASSERT_EQ(why.size(), 1u);
  EXPECT_EQ(std::get<Error>(why[0]).code, StatusCode::kResourceExhausted);
  EXPECT_NE(std::get<Error>(why[0]).message.find("ReadReply"), std::string::npos)
      << std::get<Error>(why[0]).message;
}

TEST_F(TransportTest, StopWithConnectedClientsIsClean) {
  StartServer();
  Inbox disconnects;
  std::vector<std::unique_ptr<RemoteShard>> clients(3);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Connect(ClientOptions(i), &clients[i], nullptr, &disconnects).ok());
  }
  RawClient half_open;  // connected, no Hello yet
  ASSERT_TRUE(half_open.Connect(server_->port()));
  auto parked = clients[0]->Read(FakeService::kParkTable, {1});  // never answered
  ASSERT_TRUE(service_.WaitConnects(3, kWaitMs));

  auto start = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(service_.disconnects(), 3);
  EXPECT_EQ(server_->stats().connections_open, 0u);
  EXPECT_EQ(server_->stats().sessions_active, 0u);

  EXPECT_EQ(disconnects.WaitFor(3, kWaitMs).size(), 3u);
  StatusOr<ReadReply> r = Get(parked);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_EQ(clients[1]->Send(Ack{}).code(), StatusCode::kUnavailable);
  auto after = clients[2]->Stats();
  EXPECT_EQ(Get(after).status().code(), StatusCode::kUnavailable);
  server_->Stop();  // idempotent
}

TEST_F(TransportTest, ConnectRetriesUntilServerListens) {
  // Find a free port, then start the server on it only after a delay.
  StartServer();
  uint16_t port = server_->port();
  server_->Stop();
  server_.reset();

  RemoteShardOptions o;
  o.port = port;
  o.hello.token = kToken;
  o.connect_timeout_ms = kWaitMs;
  o.retry_initial_backoff_ms = 10;
  o.retry_max_backoff_ms = 50;
  std::unique_ptr<RemoteShard> client;
  std::future<Status> connected = std::async(
      std::launch::async, [&] { return RemoteShard::Connect(o, nullptr, nullptr, &client); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the scenario: a late server
  ServerOptions so;
  so.port = port;
  StartServer(so);
  Status s = Get(connected);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectServes(client.get());
}

TEST_F(TransportTest, ConnectGivesUpWithClearError) {
  StartServer();
  uint16_t port = server_->port();
  server_->Stop();
  RemoteShardOptions o;
  o.port = port;
  o.connect_timeout_ms = 300;
  o.retry_initial_backoff_ms = 10;
  std::unique_ptr<RemoteShard> client;
  auto start = std::chrono::steady_clock::now();
  Status s = RemoteShard::Connect(o, nullptr, nullptr, &client);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("attempts"), std::string::npos) << s.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));

  o.max_connect_attempts = 1;
  o.connect_timeout_ms = kWaitMs;
  s = RemoteShard::Connect(o, nullptr, nullptr, &client);
  EXPECT_NE(s.message().find("(1 attempts"), std::string::npos) << s.ToString();
}

TEST_F(TransportTest, StartErrors) {
  StartServer();
  EXPECT_EQ(server_->Start(&service_).code(), StatusCode::kFailedPrecondition);
  ServerOptions o;
  o.port = server_->port();
  Server second(o);
  Status s = second.Start(&service_);
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find(std::to_string(o.port)), std::string::npos) << s.ToString();
  ServerOptions bad;
  bad.host = "not-an-ip";
  EXPECT_EQ(Server(bad).Start(&service_).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pace::net
