// Test support for the TCP transport: a fake ServiceHandler, a raw POSIX
// socket client for hostile input, and a thread-safe message inbox.
#ifndef PACE_NET_TESTING_TRANSPORT_TEST_UTIL_H_
#define PACE_NET_TESTING_TRANSPORT_TEST_UTIL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/frame.h"
#include "net/messages.h"
#include "net/session.h"

namespace pace::net::testing {

// A ServiceHandler with canned answers:
//   Read          -> ReadReply (one row of reply_row_bytes per requested row);
//                    table kParkTable is never answered
//   Apply         -> Ack{clock, duplicate = clock is odd}
//   CreateTable   -> TablesReply with the schema (id 42 if it was 0)
//   ListTables    -> TablesReply with tables "a" (id 1) and "b" (id 2)
//   DescribeTable -> "a": TablesReply; "close-me": Session::Close(InvalidArgument);
//                    else Error{NotFound}
//   StatsRequest  -> StatsReply
//   Unsubscribe   -> Push{9, 9, rows} then PushDone{9, 9}
// OnHello refuses client kBannedClient. Thread-safe.
class FakeService : public ServiceHandler {
 public:
  static constexpr uint32_t kParkTable = 999;
  static constexpr ClientId kBannedClient = 666;

  Status OnHello(const Hello& hello, Welcome* welcome) override;
  void OnConnect(const std::shared_ptr<Session>& session) override;
  void OnMessage(const std::shared_ptr<Session>& session, Message m) override;
  void OnDisconnect(const std::shared_ptr<Session>& session) override;

  // Wait until the counts reach `n`; false after `timeout_ms`.
  bool WaitConnects(int n, int timeout_ms);
  bool WaitDisconnects(int n, int timeout_ms);
  int connects() const;
  int disconnects() const;
  int messages() const;
  std::shared_ptr<Session> last_session() const;
  // Client ids seen by OnConnect, in order.
  std::vector<ClientId> connected_clients() const;

  std::atomic<size_t> reply_row_bytes{8};

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int connects_ = 0;
  int disconnects_ = 0;
  int messages_ = 0;
  std::vector<ClientId> clients_;
  std::shared_ptr<Session> last_session_;
};

// Messages collected from a callback; thread-safe.
class Inbox {
 public:
  void Add(Message m);
  // Waits until at least `n` messages arrived; returns them all (maybe fewer
  // on timeout).
  std::vector<Message> WaitFor(size_t n, int timeout_ms);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Message> messages_;
};

// A blocking POSIX TCP client that speaks raw bytes.
class RawClient {
 public:
  RawClient() = default;
  ~RawClient();
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  // Connects to 127.0.0.1:port; false on failure.
  bool Connect(uint16_t port);
  bool Send(const std::string& bytes);
  // Half-closes: the server sees EOF.
  void ShutdownWrite();
  // Closes the socket.
  void Close();
  // Sends Hello with `token` and waits for one message (Welcome or Error).
  Message Handshake(const std::string& token, ClientId client_id = 1);
  // Reads until `n` messages arrived, the peer closed, or `timeout_ms`.
  std::vector<Message> ReadMessages(size_t n, int timeout_ms);
  // Reads until the peer closes (EOF or reset) or `timeout_ms`; `*closed`
  // tells which.
  std::vector<Message> ReadUntilClosed(int timeout_ms, bool* closed);

 private:
  // One recv with a timeout; appends decoded messages. Returns false once
  // the peer closed, timed out or sent an undecodable frame.
  bool ReadSome(int timeout_ms, std::vector<Message>* out, bool* closed);

  int fd_ = -1;
  FrameReader reader_;
};

}  // namespace pace::net::testing

#endif  // PACE_NET_TESTING_TRANSPORT_TEST_UTIL_H_
