#include "net/remote_shard.h"

#include <glog/logging.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <variant>

#include "common/thread_name.h"
#include "net/connection.h"

namespace pace::net {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;
using internal::Connection;

int MsUntil(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms > 0 ? static_cast<int>(ms) : 0;
}

// The req_id of a reply a convenience call may be waiting for; 0 otherwise.
uint64_t ReplyReqId(const Message& m) {
  if (const auto* r = std::get_if<ReadReply>(&m)) return r->req_id;
  if (const auto* r = std::get_if<TablesReply>(&m)) return r->req_id;
  if (const auto* r = std::get_if<StatsReply>(&m)) return r->req_id;
  if (const auto* r = std::get_if<Error>(&m)) return r->req_id;
  return 0;
}

Status Unexpected(const Message& m, const char* call) {
  return Status::Corruption(std::string("unexpected ") + MessageName(m) + " in reply to " + call);
}

}  // namespace

class RemoteShard::Impl {
 public:
  using Callback = std::function<void(StatusOr<Message>)>;

  Impl(const RemoteShardOptions& options, MessageHandler on_message,
       DisconnectHandler on_disconnect)
      : options_(options),
        where_(options.host + ":" + std::to_string(options.port)),
        on_message_(std::move(on_message)),
        on_disconnect_(std::move(on_disconnect)),
        work_(io_.get_executor()) {
    thread_ = std::thread([this] {
      SetThreadName("pace-client-io");
      RunIo();
    });
  }
  ~Impl() { Close(); }

  Status Connect();
  void Close();
  Status Send(const Message& m);
  template <typename T, typename Convert>
  std::future<StatusOr<T>> Call(Message request, uint64_t req_id, Convert convert);
  uint64_t NextReqId() { return next_req_id_.fetch_add(1); }

  const Welcome& welcome() const { return welcome_; }
  bool connected() const {
    std::lock_guard<std::mutex> lock(mu_);
    return connected_;
  }
  size_t queued_bytes() const { return conn_ == nullptr ? 0 : conn_->queued_bytes(); }

 private:
  void RunIo();
  Status ConnectOnce(const tcp::resolver::results_type& endpoints, Clock::time_point deadline,
                     tcp::socket* out);
  Status Handshake(tcp::socket socket, Clock::time_point deadline);
  void OnMessage(Message m);
  void OnClose(const Status& reason);
  Callback TakePending(uint64_t req_id);

  // Constant after construction.
  const RemoteShardOptions options_;
  const std::string where_;
  const MessageHandler on_message_;
  const DisconnectHandler on_disconnect_;

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
  internal::ConnectionCounters counters_;
  // Set by Connect before the handshake, constant afterwards; destroyed
  // before io_ (declared after it).
  std::shared_ptr<Connection> conn_;
  Welcome welcome_;  // written before Connect returns, constant afterwards

  // I/O thread only.
  bool handshake_done_ = false;
  Status last_error_;  // the last Error with req_id 0 (why the server closed)
  std::promise<Status> handshake_;

  std::atomic<uint64_t> next_req_id_{kFirstStubReqId};

  mutable std::mutex mu_;
  std::condition_variable closed_cv_;
  // Protected by mu_.
  bool connected_ = false;
  bool conn_closed_ = false;  // OnClose ran
  bool user_closed_ = false;  // Close was called
  std::unordered_map<uint64_t, Callback> pending_;
};

void RemoteShard::Impl::RunIo() {
  for (;;) {
    try {
      io_.run();
      return;
    } catch (const std::exception& e) {
      LOG(ERROR) << "exception escaped an I/O handler of the stub for " << where_ << ": "
                 << e.what();
    }
  }
}

Status RemoteShard::Impl::ConnectOnce(const tcp::resolver::results_type& endpoints,
                                      Clock::time_point deadline, tcp::socket* out) {
  struct Attempt {
    explicit Attempt(asio::io_context& io) : socket(io), timer(io) {}
    tcp::socket socket;
    asio::steady_timer timer;
    bool finished = false;  // I/O thread only
    std::promise<error_code> done;
  };
  auto attempt = std::make_shared<Attempt>(io_);
  std::future<error_code> done = attempt->done.get_future();
  asio::post(io_, [attempt, endpoints, deadline] {
    asio::async_connect(attempt->socket, endpoints,
                        [attempt](const error_code& ec, const tcp::endpoint&) {
                          if (attempt->finished) return;
                          attempt->finished = true;
                          attempt->timer.cancel();
                          attempt->done.set_value(ec);
                        });
    attempt->timer.expires_at(deadline);
    attempt->timer.async_wait([attempt](const error_code& ec) {
      if (ec || attempt->finished) return;
      attempt->finished = true;
      error_code ignored;
      attempt->socket.close(ignored);
      attempt->done.set_value(asio::error::timed_out);
    });
  });
  error_code ec = done.get();
  if (ec) return Status::Unavailable(ec.message());
  // The connect handler has run; the socket is no longer used by the I/O
  // thread (the cancelled timer's handler does not touch it).
  *out = std::move(attempt->socket);
  return Status::OK();
}

namespace {

// Keepalive probes every timeout/3 (at least 1 s) and TCP_USER_TIMEOUT: the
// kernel aborts the connection once data or probes stay unacknowledged for
// timeout_ms. Best effort: a failing setsockopt leaves the OS defaults.
void SetDeadPeerTimeout(tcp::socket* socket, int timeout_ms) {
  if (timeout_ms <= 0) return;
  error_code ec;
  socket->set_option(asio::socket_base::keep_alive(true), ec);
  const int fd = socket->native_handle();
  const int probe_s = std::max(1, timeout_ms / 3000);
  const unsigned int user_timeout = static_cast<unsigned int>(timeout_ms);
  bool ok = !ec;
  ok &= setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &probe_s, sizeof(probe_s)) == 0;
  ok &= setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &probe_s, sizeof(probe_s)) == 0;
  ok &= setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout)) == 0;
  if (!ok)
    LOG(WARNING) << "cannot set TCP keepalive / TCP_USER_TIMEOUT; dead peers are noticed late";
}

}  // namespace

Status RemoteShard::Impl::Connect() {
  if (options_.port == 0) return Status::InvalidArgument("RemoteShard: no port given");
  if (options_.connect_timeout_ms <= 0) {
    return Status::InvalidArgument("RemoteShard: connect_timeout_ms must be > 0");
  }
  Clock::time_point start = Clock::now();
  Clock::time_point deadline = start + std::chrono::milliseconds(options_.connect_timeout_ms);
  int backoff_ms = std::max(1, options_.retry_initial_backoff_ms);
  Status last;
  int attempts = 0;
  for (;;) {
    ++attempts;
    error_code ec;
    tcp::resolver resolver(io_);
    auto endpoints = resolver.resolve(options_.host, std::to_string(options_.port),
                                      tcp::resolver::numeric_service, ec);
    if (ec) {
      last = Status::Unavailable("cannot resolve '" + options_.host + "': " + ec.message());
    } else {
      tcp::socket socket(io_);
      last = ConnectOnce(endpoints, deadline, &socket);
      if (last.ok()) {
        SetDeadPeerTimeout(&socket, options_.dead_peer_timeout_ms);
        return Handshake(std::move(socket), deadline);
      }
    }
    bool out_of_attempts =
        options_.max_connect_attempts > 0 && attempts >= options_.max_connect_attempts;
    if (out_of_attempts || MsUntil(deadline) <= backoff_ms) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms = std::min(2 * backoff_ms, std::max(backoff_ms, options_.retry_max_backoff_ms));
  }
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  return Status::Unavailable("cannot connect to " + where_ + " (" + std::to_string(attempts) +
                             " attempts in " + std::to_string(elapsed.count()) +
                             " ms): " + last.message());
}

Status RemoteShard::Impl::Handshake(tcp::socket socket, Clock::time_point deadline) {
  internal::ConnectionOptions copts;
  copts.max_frame_bytes = options_.max_frame_bytes;
  copts.max_write_queue_bytes = options_.max_write_queue_bytes;
  copts.first_message_timeout_ms = std::max(1, MsUntil(deadline));
  copts.linger_ms = options_.close_linger_ms;
  copts.decode = options_.decode;
  copts.frame_pool = std::make_shared<FrameBufferPool>(options_.frame_pool);
  conn_ = Connection::Create(std::move(socket), copts, &counters_);
  std::future<Status> result = handshake_.get_future();
  conn_->Start([this](Message m) { OnMessage(std::move(m)); },
               [this](const Status& reason) { OnClose(reason); });
  Status s = conn_->Send(options_.hello);
  if (!s.ok()) return s;
  // The connection's first-message timer fires at the deadline; the extra
  // time covers its linger.
  int wait_ms = MsUntil(deadline) + options_.close_linger_ms + 1000;
  if (result.wait_for(std::chrono::milliseconds(wait_ms)) != std::future_status::ready) {
    return Status::TimedOut("no Welcome from " + where_ + " within " +
                            std::to_string(options_.connect_timeout_ms) + " ms");
  }
  s = result.get();
  if (!s.ok()) return s;
  VLOG(1) << "connected to shard " << welcome_.shard_id << " at " << where_;
  return Status::OK();
}

void RemoteShard::Impl::OnMessage(Message m) {
  if (!handshake_done_) {
    handshake_done_ = true;
    Status result;
    if (auto* w = std::get_if<Welcome>(&m)) {
      if (w->wire_version != kWireVersion) {
        result = Status::Incompatible("server at " + where_ + " speaks wire version " +
                                      std::to_string(w->wire_version) + ", this client " +
                                      std::to_string(kWireVersion));
      } else {
        welcome_ = *w;
        std::lock_guard<std::mutex> lock(mu_);
        connected_ = true;
      }
    } else if (auto* e = std::get_if<Error>(&m)) {
      // A shard that requires a token says what to do; say it in one line.
      static constexpr std::string_view kNoToken = "no job token: this shard requires one: ";
      if (e->code == StatusCode::kPermissionDenied && options_.hello.token.empty() &&
          std::string_view(e->message).substr(0, kNoToken.size()) == kNoToken) {
        result = Status::PermissionDenied(
            "shard " + where_ + " requires a token: " + e->message.substr(kNoToken.size()));
      } else {
        result = e->ToStatus().WithPrefix("server at " + where_ + " refused the connection");
      }
    } else {
      result = Status::Corruption(std::string("expected Welcome from ") + where_ + ", got " +
                                  MessageName(m));
    }
    if (!result.ok()) conn_->Abort(result);
    handshake_.set_value(result);
    return;
  }
  uint64_t req_id = ReplyReqId(m);
  if (req_id >= kFirstStubReqId) {
    if (Callback cb = TakePending(req_id)) {
      cb(std::move(m));
      return;
    }
  }
  if (auto* e = std::get_if<Error>(&m); e != nullptr && e->req_id == 0) {
    last_error_ = e->ToStatus();
  }
  if (on_message_) on_message_(std::move(m));
}

void RemoteShard::Impl::OnClose(const Status& reason) {
  if (!handshake_done_) {
    handshake_done_ = true;
    handshake_.set_value(reason.ok() ? Status::Unavailable("connection to " + where_ +
                                                           " closed during the handshake")
                                     : reason.WithPrefix("handshake with " + where_));
  }
  Status why = last_error_.ok() ? reason : last_error_;
  std::unordered_map<uint64_t, Callback> pending;
  bool notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    notify = connected_ && !user_closed_;
    connected_ = false;
    pending.swap(pending_);
  }
  Status failed = notify
                      ? Status::Unavailable("connection to " + where_ + " lost: " + why.ToString())
                      : Status::Aborted("connection to " + where_ + " closed");
  for (auto& entry : pending) entry.second(failed);
  if (notify && on_disconnect_) {
    on_disconnect_(why.ok() ? Status::Unavailable("connection to " + where_ + " closed") : why);
  }
  std::lock_guard<std::mutex> lock(mu_);
  conn_closed_ = true;
  closed_cv_.notify_all();
}

RemoteShard::Impl::Callback RemoteShard::Impl::TakePending(uint64_t req_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(req_id);
  if (it == pending_.end()) return nullptr;
  Callback cb = std::move(it->second);
  pending_.erase(it);
  return cb;
}

Status RemoteShard::Impl::Send(const Message& m) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!connected_) return Status::Unavailable("not connected to " + where_);
  }
  return conn_->Send(m);
}

template <typename T, typename Convert>
std::future<StatusOr<T>> RemoteShard::Impl::Call(Message request, uint64_t req_id,
                                                 Convert convert) {
  auto promise = std::make_shared<std::promise<StatusOr<T>>>();
  std::future<StatusOr<T>> future = promise->get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!connected_) {
      promise->set_value(Status::Unavailable("not connected to " + where_));
      return future;
    }
    pending_.emplace(req_id, [promise, convert](StatusOr<Message> reply) {
      if (!reply.ok()) {
        promise->set_value(reply.status());
      } else if (const auto* e = std::get_if<Error>(&reply.value())) {
        promise->set_value(e->ToStatus());
      } else {
        promise->set_value(convert(std::move(reply).value()));
      }
    });
  }
  Status s = conn_->Send(request);
  if (!s.ok()) {
    if (Callback cb = TakePending(req_id)) cb(s);
  }
  return future;
}

void RemoteShard::Impl::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (user_closed_) return;
    user_closed_ = true;
  }
  CHECK(std::this_thread::get_id() != thread_.get_id())
      << "RemoteShard::Close called from its own I/O thread (a callback)";
  if (conn_ != nullptr) {
    conn_->Shutdown(Status::OK());
    std::unique_lock<std::mutex> lock(mu_);
    auto wait = std::chrono::milliseconds(options_.close_linger_ms + 2000);
    if (!closed_cv_.wait_for(lock, wait, [&] { return conn_closed_; })) {
      lock.unlock();
      conn_->Abort(Status::Aborted("RemoteShard closed"));
      lock.lock();
      closed_cv_.wait(lock, [&] { return conn_closed_; });
    }
  }
  // With the connection closed nothing is pending on io_: run() returns once
  // the cancelled handlers ran, releasing their references to conn_.
  // conn_ itself stays until ~Impl (before io_), so that concurrent Send
  // calls never see it change.
  work_.reset();
  thread_.join();
}

RemoteShard::RemoteShard(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RemoteShard::~RemoteShard() { Close(); }

Status RemoteShard::Connect(const RemoteShardOptions& options, MessageHandler on_message,
                            DisconnectHandler on_disconnect, std::unique_ptr<RemoteShard>* out) {
  auto impl = std::make_unique<Impl>(options, std::move(on_message), std::move(on_disconnect));
  Status s = impl->Connect();
  if (!s.ok()) return s;  // ~Impl closes and joins
  out->reset(new RemoteShard(std::move(impl)));
  return Status::OK();
}

const Welcome& RemoteShard::welcome() const { return impl_->welcome(); }
bool RemoteShard::connected() const { return impl_->connected(); }
Status RemoteShard::Send(Message m) { return impl_->Send(m); }
void RemoteShard::Close() { impl_->Close(); }
size_t RemoteShard::queued_bytes() const { return impl_->queued_bytes(); }

std::future<StatusOr<TableSchema>> RemoteShard::CreateTable(const TableSchema& schema) {
  uint64_t id = impl_->NextReqId();
  return impl_->Call<TableSchema>(
      net::CreateTable{id, schema}, id, [](Message m) -> StatusOr<TableSchema> {
        auto* r = std::get_if<TablesReply>(&m);
        if (r == nullptr) return Unexpected(m, "CreateTable");
        if (r->tables.size() != 1) {
          return Status::Corruption("CreateTable reply holds " + std::to_string(r->tables.size()) +
                                    " tables, expected 1");
        }
        return std::move(r->tables[0]);
      });
}

std::future<StatusOr<std::vector<TableSchema>>> RemoteShard::ListTables() {
  uint64_t id = impl_->NextReqId();
  return impl_->Call<std::vector<TableSchema>>(net::ListTables{id}, id,
                                               [](Message m) -> StatusOr<std::vector<TableSchema>> {
                                                 auto* r = std::get_if<TablesReply>(&m);
                                                 if (r == nullptr)
                                                   return Unexpected(m, "ListTables");
                                                 return std::move(r->tables);
                                               });
}

std::future<StatusOr<TableSchema>> RemoteShard::DescribeTable(const std::string& name) {
  uint64_t id = impl_->NextReqId();
  return impl_->Call<TableSchema>(net::DescribeTable{id, name}, id,
                                  [name](Message m) -> StatusOr<TableSchema> {
                                    auto* r = std::get_if<TablesReply>(&m);
                                    if (r == nullptr) return Unexpected(m, "DescribeTable");
                                    if (r->tables.empty())
                                      return Status::NotFound("no table named '" + name + "'");
                                    return std::move(r->tables[0]);
                                  });
}

std::future<StatusOr<StatsReply>> RemoteShard::Stats() {
  uint64_t id = impl_->NextReqId();
  return impl_->Call<StatsReply>(StatsRequest{id}, id, [](Message m) -> StatusOr<StatsReply> {
    auto* r = std::get_if<StatsReply>(&m);
    if (r == nullptr) return Unexpected(m, "StatsRequest");
    return std::move(*r);
  });
}

std::future<StatusOr<ReadReply>> RemoteShard::Read(uint32_t table, std::vector<uint64_t> rows,
                                                   Version min_version, bool subscribe) {
  uint64_t id = impl_->NextReqId();
  return impl_->Call<ReadReply>(net::Read{id, table, std::move(rows), min_version, subscribe}, id,
                                [](Message m) -> StatusOr<ReadReply> {
                                  auto* r = std::get_if<ReadReply>(&m);
                                  if (r == nullptr) return Unexpected(m, "Read");
                                  return std::move(*r);
                                });
}

}  // namespace pace::net
