// Test helpers for talking to a shard server (paced or a ShardService behind
// net::Server) the way a client or a hostile peer would: a RemoteShard whose
// messages land in an Inbox, a raw loopback socket, and Await for the
// RemoteShard's futures. Header-only; for tests. Not thread-safe except
// Inbox (Push from the transport thread, Next from the test).
#ifndef PACE_TESTS_TESTING_SHARD_PEER_H_
#define PACE_TESTS_TESTING_SHARD_PEER_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/codec.h"
#include "net/remote_shard.h"

namespace pace::testing {

// Collects the messages a RemoteShard hands to its MessageHandler.
class Inbox {
 public:
  void Push(net::Message m) {
    std::lock_guard<std::mutex> l(mu_);
    msgs_.push_back(std::move(m));
    cv_.notify_all();
  }
  // Waits for the next message of type T (others are skipped), up to `timeout`.
  template <typename T>
  bool Next(T* out, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> l(mu_);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      for (size_t i = 0; i < msgs_.size(); ++i) {
        if (auto* p = std::get_if<T>(&msgs_[i])) {
          *out = std::move(*p);
          msgs_.erase(msgs_.begin(), msgs_.begin() + i + 1);
          return true;
        }
      }
      if (cv_.wait_until(l, deadline) == std::cv_status::timeout) return false;
    }
  }
  // Waits for the next message, which must be an Ack (an Error first is a
  // failure), up to 20 s.
  ::testing::AssertionResult NextAck(net::Ack* ack) {
    std::unique_lock<std::mutex> l(mu_);
    if (!cv_.wait_for(l, std::chrono::seconds(20), [&] { return !msgs_.empty(); })) {
      return ::testing::AssertionFailure() << "no Ack within 20 s";
    }
    net::Message m = std::move(msgs_.front());
    msgs_.erase(msgs_.begin());
    if (auto* a = std::get_if<net::Ack>(&m)) {
      *ack = *a;
      return ::testing::AssertionSuccess();
    }
    if (auto* e = std::get_if<net::Error>(&m)) {
      return ::testing::AssertionFailure() << "Error instead of Ack: " << e->message;
    }
    return ::testing::AssertionFailure() << "unexpected " << net::MessageName(m);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<net::Message> msgs_;
};

// A client's connection to one shard and what it received.
struct PeerClient {
  Inbox inbox;
  std::unique_ptr<net::RemoteShard> shard;
};

// Connects `c` to 127.0.0.1:port as client `id` (or another role).
inline Status ConnectPeer(uint16_t port, ClientId id, PeerClient* c, const std::string& token = "",
                          net::Hello::Role role = net::Hello::kClientProcess) {
  net::RemoteShardOptions o;
  o.port = port;
  o.hello.client_id = id;
  o.hello.token = token;
  o.hello.role = role;
  o.connect_timeout_ms = 10000;
  return net::RemoteShard::Connect(
      o, [c](net::Message m) { c->inbox.Push(std::move(m)); }, nullptr, &c->shard);
}

// The value of a RemoteShard future (20 s at most; a test failure otherwise).
template <typename T>
T Await(std::future<StatusOr<T>> f) {
  EXPECT_EQ(f.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  StatusOr<T> r = f.get();
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : T{};
}

// A plain loopback TCP connection that sends nothing unless told.
class RawConn {
 public:
  explicit RawConn(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~RawConn() {
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  void Write(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }
  // Reads one frame; false on EOF, reset or timeout.
  bool ReadMessage(net::Message* m, int timeout_ms = 10000) {
    std::string len4, payload;
    if (!ReadN(4, &len4, timeout_ms)) return false;
    uint32_t len;
    std::memcpy(&len, len4.data(), 4);
    if (!ReadN(len, &payload, timeout_ms)) return false;
    return net::DecodePayload(payload, m, net::DecodeOptions()).ok();
  }
  // The code of the Error frame the server sent before closing, or kOk if it
  // sent none within the timeout.
  StatusCode ErrorCode(int timeout_ms) {
    net::Message m;
    if (!ReadMessage(&m, timeout_ms)) return StatusCode::kOk;
    auto* e = std::get_if<net::Error>(&m);
    return e == nullptr ? StatusCode::kOk : e->code;
  }
  // True if the server closed the connection within the timeout.
  bool ClosedByPeer(int timeout_ms = 10000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char buf[256];
      if (recv(fd_, buf, sizeof(buf), 0) <= 0) return true;
    }
    return false;
  }

 private:
  bool ReadN(size_t n, std::string* out, int timeout_ms) {
    out->clear();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (out->size() < n) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(std::clamp<int64_t>(left, 0, 50))) <= 0) {
        if (left <= 0) return false;
        continue;
      }
      char buf[4096];
      ssize_t r = recv(fd_, buf, std::min(sizeof(buf), n - out->size()), 0);
      if (r <= 0) return false;
      out->append(buf, static_cast<size_t>(r));
    }
    return true;
  }
  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace pace::testing

#endif  // PACE_TESTS_TESTING_SHARD_PEER_H_
