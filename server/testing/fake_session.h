// FakeSession: an in-memory net::Session for unit tests and benchmarks of
// services and clients. It records every message sent to it instead of
// delivering it (unless set_record(false)), and keeps counts of what it saw
// (Seen: Acks, PushDones, Push rows, ReadReplies, Errors) either way.
//
// Thread-safe: Send/Close may be called from any thread; WaitFor lets a test
// wait (bounded) for messages sent from another thread, WaitSeen a benchmark
// (unbounded) for a count.
#ifndef PACE_SERVER_TESTING_FAKE_SESSION_H_
#define PACE_SERVER_TESTING_FAKE_SESSION_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "common/status.h"
#include "net/messages.h"
#include "net/session.h"

namespace pace {

class FakeSession : public net::Session {
 public:
  explicit FakeSession(net::Hello hello) : id_(NextId()), hello_(std::move(hello)) {}

  static std::shared_ptr<FakeSession> Client(ClientId id) {
    net::Hello h;
    h.client_id = id;
    h.role = net::Hello::kClientProcess;
    return std::make_shared<FakeSession>(h);
  }
  static std::shared_ptr<FakeSession> Observer(ClientId id = 0) {
    net::Hello h;
    h.client_id = id;
    h.role = net::Hello::kObserver;
    return std::make_shared<FakeSession>(h);
  }

  // What the session was sent, counted whether or not it records messages.
  struct Seen {
    ClockT acked_through = 0;   // the highest Ack's clock + 1
    Version push_done = 0;      // the highest PushDone version
    uint64_t push_rows = 0;     // rows of every Push
    uint64_t read_replies = 0;  // ReadReplies
    bool failed = false;        // an Error arrived, or the session was closed
    std::string first_error;    // the first Error's text
  };

  uint64_t id() const override { return id_; }
  const net::Hello& hello() const override { return hello_; }

  // Whether Send keeps the messages (Take, WaitFor, num_messages). A
  // benchmark that only waits for counts turns it off so that it holds
  // nothing. Default: true.
  void set_record(bool record) {
    std::lock_guard<std::mutex> lock(mu_);
    record_ = record;
  }

  // Counts `m` and records it, unless the session was closed (then drops it,
  // as a real session to a departed peer does).
  void Send(net::Message m) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) {
      ++dropped_;
      return;
    }
    Count(m);
    if (record_) sent_.push_back(std::move(m));
    cv_.notify_all();
  }

  // Records an Error for a non-OK reason, then closes.
  void Close(const Status& reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    if (!reason.ok()) sent_.push_back(net::Error{0, reason.code(), reason.message()});
    closed_ = true;
    close_reason_ = reason;
    seen_.failed = true;
    cv_.notify_all();
  }

  Seen seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  // Waits, without a deadline, until pred(seen()) holds or the session
  // failed; returns false if it failed.
  bool WaitSeen(const std::function<bool(const Seen&)>& pred) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return seen_.failed || pred(seen_); });
    return !seen_.failed;
  }

  bool closed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }
  Status close_reason() const {
    std::lock_guard<std::mutex> lock(mu_);
    return close_reason_;
  }
  size_t dropped() const {
    std::lock_guard<std::mutex> lock(mu_);
    return dropped_;
  }
  size_t num_messages() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_.size();
  }

  // Returns every message recorded so far, in order, and forgets them.
  std::vector<net::Message> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<net::Message> out;
    out.swap(sent_);
    return out;
  }

  // Waits until pred(recorded messages) is true or `timeout` passes. Returns
  // whether pred became true. Does not consume messages.
  bool WaitFor(const std::function<bool(const std::vector<net::Message>&)>& pred,
               std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(sent_); });
  }
  // Waits until at least `n` messages are recorded.
  bool WaitForCount(size_t n, std::chrono::milliseconds timeout) {
    return WaitFor([n](const std::vector<net::Message>& v) { return v.size() >= n; }, timeout);
  }

 private:
  static uint64_t NextId() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1);
  }

  void Count(const net::Message& m) {
    if (const auto* a = std::get_if<net::Ack>(&m)) {
      seen_.acked_through = std::max(seen_.acked_through, a->clock + 1);
    } else if (const auto* p = std::get_if<net::Push>(&m)) {
      seen_.push_rows += p->rows.size();
    } else if (const auto* d = std::get_if<net::PushDone>(&m)) {
      seen_.push_done = std::max(seen_.push_done, d->version);
    } else if (std::holds_alternative<net::ReadReply>(m)) {
      ++seen_.read_replies;
    } else if (const auto* e = std::get_if<net::Error>(&m)) {
      if (!seen_.failed) seen_.first_error = e->ToStatus().ToString();
      seen_.failed = true;
    }
  }

  const uint64_t id_;
  const net::Hello hello_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<net::Message> sent_;  // protected by mu_
  bool closed_ = false;             // protected by mu_
  Status close_reason_;             // protected by mu_
  size_t dropped_ = 0;              // protected by mu_
  bool record_ = true;              // protected by mu_
  Seen seen_;                       // protected by mu_
};

// The messages of type T among `msgs`, in order.
template <typename T>
std::vector<T> MessagesOfType(const std::vector<net::Message>& msgs) {
  std::vector<T> out;
  for (const net::Message& m : msgs) {
    if (const T* t = std::get_if<T>(&m)) out.push_back(*t);
  }
  return out;
}

}  // namespace pace

#endif  // PACE_SERVER_TESTING_FAKE_SESSION_H_
