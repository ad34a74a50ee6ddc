#include "net/server.h"

#include <glog/logging.h>
#include <malloc.h>
#include <sys/resource.h>

#include <atomic>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/thread_name.h"
#include "common/thread_role.h"
#include "net/auth.h"
#include "net/connection.h"

namespace pace::net {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
using internal::Connection;

std::atomic<uint64_t> g_next_session_id{1};

// Lets one log line through per second and counts the ones it held back, so a
// flood of refused or timed-out peers cannot flood the log. Thread-safe.
class LogThrottle {
 public:
  // True if a line may be logged now; *held_back is how many were not
  // logged since the last one that was.
  bool Allow(uint64_t* held_back) {
    MutexLock lock(&mu_);
    const auto now = std::chrono::steady_clock::now();
    if (now < next_) {
      ++held_back_;
      return false;
    }
    next_ = now + std::chrono::seconds(1);
    *held_back = held_back_;
    held_back_ = 0;
    return true;
  }

 private:
  Mutex mu_;
  std::chrono::steady_clock::time_point next_ GUARDED_BY(mu_);
  uint64_t held_back_ GUARDED_BY(mu_) = 0;
};

std::string HeldBack(uint64_t n) {
  return n == 0 ? "" : " (" + std::to_string(n) + " more since the last such message)";
}

// The soft RLIMIT_NOFILE, first raised to the hard limit if `raise`; 0 if
// unlimited or unknown.
uint64_t OpenFileLimit(bool raise) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) {
    LOG(WARNING) << "getrlimit(RLIMIT_NOFILE): " << std::strerror(errno);
    return 0;
  }
  if (raise && lim.rlim_cur < lim.rlim_max) {
    rlimit want = lim;
    // An unlimited hard limit cannot be the soft one (the kernel caps open
    // files at fs.nr_open); 1M is Linux's default nr_open.
    want.rlim_cur = lim.rlim_max == RLIM_INFINITY ? rlim_t{1} << 20 : lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) {
      LOG(INFO) << "raised the open-file limit (soft RLIMIT_NOFILE) from " << lim.rlim_cur << " to "
                << want.rlim_cur;
      lim = want;
    } else {
      LOG(WARNING) << "cannot raise the open-file limit (soft RLIMIT_NOFILE) from " << lim.rlim_cur
                   << " to " << want.rlim_cur << ": " << std::strerror(errno);
    }
  }
  return lim.rlim_cur == RLIM_INFINITY ? 0 : static_cast<uint64_t>(lim.rlim_cur);
}

// What a ServiceHandler holds: forwards to the connection while it exists.
// Holding one does not keep the connection (or the server) alive.
class ServerSession : public Session {
 public:
  ServerSession(uint64_t id, Hello hello, std::weak_ptr<Connection> conn, std::string peer)
      : id_(id), hello_(std::move(hello)), conn_(std::move(conn)), peer_(std::move(peer)) {}

  uint64_t id() const override { return id_; }
  const Hello& hello() const override { return hello_; }
  std::string peer() const override { return peer_; }
  size_t queued_bytes() const override {
    std::shared_ptr<Connection> conn = conn_.lock();
    return conn == nullptr ? 0 : conn->queued_bytes();
  }
  size_t transport_queued_bytes() const override {
    std::shared_ptr<Connection> conn = conn_.lock();
    return conn == nullptr ? 0 : conn->transport_queued_bytes();
  }

  void Send(Message m) override {
    std::shared_ptr<Connection> conn = conn_.lock();
    if (conn == nullptr) return;
    Status s = conn->Send(m);
    if (s.ok() || s.IsUnavailable()) return;
    if (s.code() == StatusCode::kResourceExhausted) {
      LOG(WARNING) << "session " << id_ << " (client " << hello_.client_id << ", " << conn->peer()
                   << "): " << s.ToString() << "; closing it";
      conn->Shutdown(s);
      return;
    }
    LOG(ERROR) << "session " << id_ << ": cannot send " << MessageName(m) << ": " << s.ToString();
  }

  void Close(const Status& reason) override {
    if (std::shared_ptr<Connection> conn = conn_.lock()) conn->Shutdown(reason);
  }

 private:
  const uint64_t id_;
  const Hello hello_;
  const std::weak_ptr<Connection> conn_;
  const std::string peer_;
};

}  // namespace

uint64_t RaiseOpenFileLimit() { return OpenFileLimit(/*raise=*/true); }

class Server::Impl {
 public:
  explicit Impl(ServerOptions options)
      : options_(std::move(options)),
        token_(options_.token),
        accept_strand_(asio::make_strand(io_)),
        acceptor_(io_),
        retry_timer_(accept_strand_),
        trim_timer_(accept_strand_) {}

  Status Listen();
  Status Start(ServiceHandler* handler);
  Status SetToken(std::string token);
  void Stop();
  uint16_t port() const { return port_; }
  bool loopback() const { return loopback_; }
  ServerStats stats() const;
  ConnectionLimits limits() const { return limits_; }

 private:
  // Per-connection handshake state; runs on the connection's strand.
  struct Peer {
    Impl* server;
    uint64_t conn_id;
    std::weak_ptr<Connection> conn;
    std::shared_ptr<Session> session;  // set once the handshake succeeded
    bool handshaking = true;           // its handshake is not over (see handshaking_)
  };

  void DoAccept();
  // Every second: once the send queues drained after holding more than
  // ConnectionCounters::kTrimAfterBytes, hands the freed heap back to the
  // system (malloc_trim), so a flood of replies does not leave the process
  // holding its peak. On accept_strand_.
  void ScheduleTrim();
  void OnAccept(const error_code& ec, tcp::socket socket);
  // Whether a new connection may be served: OK, possibly with *shed set to
  // the connection that has waited longest for its Hello, to be closed in its
  // place with *shed_reason; or why it must be refused (only when every open
  // connection is a session). On accept_strand_.
  Status AdmissionCheck(std::shared_ptr<Connection>* shed, Status* shed_reason);
  void Shed(const std::shared_ptr<Connection>& conn, const Status& why);
  void RefuseConnection(tcp::socket socket, const Status& why);
  // Ends the handshake of `peer`; false if it was over or the connection was
  // shed (it is being closed).
  bool EndHandshake(Peer* peer);
  void OnPeerMessage(Peer* peer, Message m);
  void Refuse(Peer* peer, Connection* conn, const Status& why);
  void OnPeerClosed(Peer* peer, const Status& reason);

  // Constant after Start.
  const ServerOptions options_;
  std::string token_;  // options_.token or SetToken's
  ServiceHandler* handler_ = nullptr;
  uint16_t port_ = 0;
  bool loopback_ = false;   // the bound address is a loopback one
  bool listening_ = false;  // Listen succeeded (caller's thread, before Start)
  ConnectionLimits limits_;

  asio::io_context io_;
  asio::strand<asio::io_context::executor_type> accept_strand_;
  tcp::acceptor acceptor_;          // used only on accept_strand_
  asio::steady_timer retry_timer_;  // owned by accept_strand_
  asio::steady_timer trim_timer_;   // owned by accept_strand_
  std::unique_ptr<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  internal::ConnectionCounters counters_;
  // Outbound frame buffers, recycled across the sessions.
  const std::shared_ptr<FrameBufferPool> frame_pool_ = std::make_shared<FrameBufferPool>();

  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> sessions_active_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> handshake_timeouts_{0};
  std::atomic<uint64_t> connections_refused_{0};
  std::atomic<uint64_t> handshakes_shed_{0};
  LogThrottle refuse_log_;
  LogThrottle shed_log_;
  LogThrottle handshake_timeout_log_;

  mutable Mutex mu_;
  bool started_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::unordered_map<uint64_t, std::shared_ptr<Connection>> conns_ GUARDED_BY(mu_);
  // Accepted connections whose handshake is not over, oldest (lowest id)
  // first: the first one is shed when a new connection needs its slot.
  std::map<uint64_t, std::weak_ptr<Connection>> handshaking_ GUARDED_BY(mu_);
};

Status Server::Impl::Listen() {
  if (listening_) return Status::OK();
  error_code ec;
  asio::ip::address address = asio::ip::make_address(options_.host, ec);
  if (ec) {
    // A host name ("localhost"): resolved as the client does; IPv4 first.
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(options_.host, std::to_string(options_.port),
                                    tcp::resolver::numeric_service | tcp::resolver::passive, ec);
    if (ec || results.empty()) {
      return Status::InvalidArgument("cannot resolve listen host '" + options_.host +
                                     "': " + (ec ? ec.message() : "no address"));
    }
    address = results.begin()->endpoint().address();
    for (const auto& r : results) {
      if (r.endpoint().address().is_v4()) {
        address = r.endpoint().address();
        break;
      }
    }
  }
  std::string where = options_.host + ":" + std::to_string(options_.port);
  tcp::endpoint endpoint(address, options_.port);
  if (acceptor_.open(endpoint.protocol(), ec) ||
      acceptor_.set_option(tcp::acceptor::reuse_address(true), ec) ||
      acceptor_.bind(endpoint, ec) ||
      acceptor_.listen(asio::socket_base::max_listen_connections, ec)) {
    error_code ignored;
    acceptor_.close(ignored);
    return Status::IOError(where + ": " + ec.message());
  }
  const tcp::endpoint bound = acceptor_.local_endpoint(ec);
  if (ec) return Status::IOError(where + ": " + ec.message());
  port_ = bound.port();
  loopback_ =
      bound.address().is_loopback() ||
      (bound.address().is_v6() && bound.address().to_v6().is_v4_mapped() &&
       asio::ip::make_address_v4(asio::ip::v4_mapped, bound.address().to_v6()).is_loopback());
  listening_ = true;
  return Status::OK();
}

Status Server::Impl::SetToken(std::string token) {
  MutexLock l(&mu_);
  if (started_) return Status::FailedPrecondition("Server::SetToken after Start");
  token_ = std::move(token);  // the I/O threads start after this (Start)
  return Status::OK();
}

Status Server::Impl::Start(ServiceHandler* handler) {
  {
    MutexLock lock(&mu_);
    if (started_) return Status::FailedPrecondition("server already started");
  }
  if (handler == nullptr) return Status::InvalidArgument("Server::Start: handler is null");
  if (options_.io_threads < 1) {
    return Status::InvalidArgument("io_threads must be >= 1, got " +
                                   std::to_string(options_.io_threads));
  }
  if (options_.max_frame_bytes < 64) {
    return Status::InvalidArgument("max_frame_bytes must be >= 64");
  }
  if (options_.max_write_queue_hard_bytes < options_.max_write_queue_bytes) {
    return Status::InvalidArgument("max_write_queue_hard_bytes must be >= max_write_queue_bytes");
  }
  if (options_.max_connections < 0 || options_.max_handshaking_connections < 0 ||
      options_.reserved_fds < 0 || options_.frame_stall_timeout_ms < 0 ||
      options_.idle_timeout_ms < 0) {
    return Status::InvalidArgument(
        "max_connections, max_handshaking_connections, reserved_fds, frame_stall_timeout_ms and "
        "idle_timeout_ms must be >= 0");
  }
  limits_.fd_soft_limit = OpenFileLimit(/*raise=*/false);
  limits_.max_connections = options_.max_connections;
  if (limits_.fd_soft_limit > 0) {
    // Also keep the listening socket, the I/O threads' epoll/eventfd and
    // stdio out of the budget.
    const uint64_t reserved = static_cast<uint64_t>(options_.reserved_fds) + 16;
    const int budget =
        limits_.fd_soft_limit > reserved
            ? static_cast<int>(std::min<uint64_t>(limits_.fd_soft_limit - reserved, 1u << 30))
            : 1;
    if (budget == 1) {
      LOG(WARNING) << "the open-file limit " << limits_.fd_soft_limit << " leaves no room for "
                   << options_.reserved_fds << " reserved fds: serving 1 connection at a time";
    }
    if (limits_.max_connections == 0 || limits_.max_connections > budget) {
      limits_.max_connections = budget;
    }
  }
  limits_.max_handshaking_connections = options_.max_handshaking_connections;
  RETURN_IF_ERROR(Listen());
  handler_ = handler;
  {
    MutexLock lock(&mu_);
    started_ = true;
  }
  work_ = std::make_unique<asio::executor_work_guard<asio::io_context::executor_type>>(
      io_.get_executor());
  asio::post(accept_strand_, [this] {
    DoAccept();
    ScheduleTrim();
  });
  for (int i = 0; i < options_.io_threads; ++i) {
    threads_.emplace_back([this] {
      SetThreadName("pace-io");
      MarkTransportThread();  // the store refuses RocksDB calls on this thread
      for (;;) {
        try {
          io_.run();
          return;
        } catch (const std::exception& e) {
          LOG(ERROR) << "exception escaped an I/O handler: " << e.what();
        }
      }
    });
  }
  VLOG(1) << "listening on " << options_.host << ":" << port_ << " with " << options_.io_threads
          << " I/O threads; at most "
          << (limits_.max_connections > 0 ? std::to_string(limits_.max_connections)
                                          : std::string("unlimited"))
          << " connections ("
          << (limits_.max_handshaking_connections > 0
                  ? std::to_string(limits_.max_handshaking_connections)
                  : std::string("any number"))
          << " before their handshake), open-file limit "
          << (limits_.fd_soft_limit > 0 ? std::to_string(limits_.fd_soft_limit)
                                        : std::string("unlimited"))
          << " with " << options_.reserved_fds << " fds reserved";
  return Status::OK();
}

void Server::Impl::ScheduleTrim() {
  trim_timer_.expires_after(std::chrono::seconds(1));
  trim_timer_.async_wait([this](const error_code& ec) {
    if (ec || !acceptor_.is_open()) return;
    if (counters_.queued_bytes.load(std::memory_order_relaxed) < (size_t{1} << 20) &&
        counters_.trim_due.exchange(false, std::memory_order_relaxed)) {
#if defined(__GLIBC__)
      malloc_trim(0);
#endif
    }
    ScheduleTrim();
  });
}

void Server::Impl::DoAccept() {
  acceptor_.async_accept(asio::bind_executor(
      accept_strand_,
      [this](const error_code& ec, tcp::socket socket) { OnAccept(ec, std::move(socket)); }));
}

void Server::Impl::OnAccept(const error_code& ec, tcp::socket socket) {
  if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {
    // E.g. out of file descriptors: back off instead of spinning.
    LOG(WARNING) << "accept failed: " << ec.message() << "; retrying in 100 ms";
    retry_timer_.expires_after(std::chrono::milliseconds(100));
    retry_timer_.async_wait([this](const error_code& timer_ec) {
      if (!timer_ec && acceptor_.is_open()) DoAccept();
    });
    return;
  }
  accepted_.fetch_add(1, std::memory_order_relaxed);
  std::shared_ptr<Connection> shed;
  Status shed_reason;
  Status admit = AdmissionCheck(&shed, &shed_reason);
  if (!admit.ok()) {
    connections_refused_.fetch_add(1, std::memory_order_relaxed);
    RefuseConnection(std::move(socket), admit);
    DoAccept();
    return;
  }
  if (shed != nullptr) Shed(shed, shed_reason);
  internal::ConnectionOptions copts;
  copts.max_frame_bytes = options_.max_frame_bytes;
  copts.pause_reading_bytes = options_.max_write_queue_bytes;
  copts.max_write_queue_bytes = options_.max_write_queue_hard_bytes;
  copts.first_message_timeout_ms = options_.handshake_timeout_ms;
  copts.frame_stall_timeout_ms = options_.frame_stall_timeout_ms;
  copts.idle_timeout_ms = options_.idle_timeout_ms;
  copts.linger_ms = options_.linger_ms;
  copts.decode = options_.decode;
  copts.frame_pool = frame_pool_;
  std::shared_ptr<Connection> conn = Connection::Create(std::move(socket), copts, &counters_);
  {
    // Registered before Start, so that its on_close (which unregisters it)
    // cannot run first.
    MutexLock lock(&mu_);
    if (stopping_) return;  // dropping `conn` closes the socket
    conns_.emplace(conn->id(), conn);
    handshaking_.emplace(conn->id(), conn);
  }
  auto peer = std::make_shared<Peer>(Peer{this, conn->id(), conn, nullptr, true});
  VLOG(1) << "connection " << conn->id() << " from " << conn->peer();
  conn->Start([peer](Message m) { peer->server->OnPeerMessage(peer.get(), std::move(m)); },
              [peer](const Status& reason) { peer->server->OnPeerClosed(peer.get(), reason); });
  DoAccept();
}

Status Server::Impl::AdmissionCheck(std::shared_ptr<Connection>* shed, Status* shed_reason) {
  // live() counts connections until they are destroyed (also while they
  // linger after an Error): exactly the ones holding a descriptor.
  const int open = counters_.live();
  const bool over_total = limits_.max_connections > 0 && open >= limits_.max_connections;
  const std::string total_cap =
      "too many connections: " + std::to_string(open) + " open, at most " +
      std::to_string(limits_.max_connections) +
      (limits_.max_connections < options_.max_connections || options_.max_connections == 0
           ? " (open-file limit " + std::to_string(limits_.fd_soft_limit) + " minus " +
                 std::to_string(options_.reserved_fds) + " reserved)"
           : std::string());
  MutexLock lock(&mu_);
  const int handshaking = static_cast<int>(handshaking_.size());
  const bool over_handshaking =
      limits_.max_handshaking_connections > 0 && handshaking >= limits_.max_handshaking_connections;
  if (!over_total && !over_handshaking) return Status::OK();
  // Peers that never send a Hello must not keep a client out: the one that
  // waited longest gives its slot to the new connection, so a client that
  // sends its Hello at once always gets in, however many peers stay silent.
  while (!handshaking_.empty()) {
    auto oldest = handshaking_.begin();
    *shed = oldest->second.lock();
    handshaking_.erase(oldest);
    if (*shed == nullptr) continue;  // closing already; its slot frees soon
    *shed_reason = Status::ResourceExhausted(
        (over_total
             ? total_cap
             : "too many connections before their handshake: " + std::to_string(handshaking) +
                   ", at most " + std::to_string(limits_.max_handshaking_connections)) +
        "; closed this one, the one that waited longest for its Hello, to make room");
    return Status::OK();
  }
  if (!over_total) return Status::OK();
  return Status::ResourceExhausted(total_cap);
}

// Closes a connection at once (no linger: a silent peer would hold its
// descriptor for linger_ms), after a best-effort Error{why}.
void Server::Impl::Shed(const std::shared_ptr<Connection>& conn, const Status& why) {
  handshakes_shed_.fetch_add(1, std::memory_order_relaxed);
  uint64_t held_back = 0;
  if (shed_log_.Allow(&held_back)) {
    LOG(WARNING) << "closed connection " << conn->id() << " from " << conn->peer() << ": "
                 << why.message() << HeldBack(held_back);
  }
  conn->AbortWithError(why);
}

// Best effort: one non-blocking write of Error{why} (it fits any socket
// buffer), then close. The peer learns why instead of seeing a bare EOF.
void Server::Impl::RefuseConnection(tcp::socket socket, const Status& why) {
  error_code ec;
  tcp::endpoint ep = socket.remote_endpoint(ec);
  const std::string peer = ec ? std::string("<unknown peer>")
                              : ep.address().to_string() + ":" + std::to_string(ep.port());
  uint64_t held_back = 0;
  if (refuse_log_.Allow(&held_back)) {
    LOG(WARNING) << "refused connection from " << peer << ": " << why.message()
                 << HeldBack(held_back);
  }
  std::string frame;
  if (EncodeFrame(Error{0, why.code(), why.message()}, &frame).ok()) {
    socket.non_blocking(true, ec);
    if (!ec) socket.write_some(asio::buffer(frame), ec);
  }
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
}

// The handshake of `peer` is over (a session began, or it was refused or
// closed): it no longer counts against max_handshaking_connections.
bool Server::Impl::EndHandshake(Peer* peer) {
  if (!peer->handshaking) return false;
  peer->handshaking = false;
  MutexLock lock(&mu_);
  return handshaking_.erase(peer->conn_id) == 1;
}

void Server::Impl::Refuse(Peer* peer, Connection* conn, const Status& why) {
  refused_.fetch_add(1, std::memory_order_relaxed);
  LOG(WARNING) << "refused peer " << conn->peer() << ": " << why.ToString();
  EndHandshake(peer);
  conn->Shutdown(why);
}

void Server::Impl::OnPeerMessage(Peer* peer, Message m) {
  std::shared_ptr<Connection> conn = peer->conn.lock();
  if (conn == nullptr) return;  // cannot happen: the connection is calling us
  if (peer->session != nullptr) {
    if (std::holds_alternative<Hello>(m)) {
      conn->Shutdown(Status::FailedPrecondition("Hello sent twice on one connection"));
      return;
    }
    handler_->OnMessage(peer->session, std::move(m));
    return;
  }
  // The first frame decides the handshake either way; a connection shed
  // meanwhile is being closed and gets no answer.
  if (!EndHandshake(peer)) return;
  auto* hello = std::get_if<Hello>(&m);
  if (hello == nullptr) {
    Refuse(peer, conn.get(),
           Status::FailedPrecondition(std::string("the first frame must be Hello, got ") +
                                      MessageName(m)));
    return;
  }
  if (hello->wire_version != kWireVersion) {
    Refuse(peer, conn.get(),
           Status::Incompatible("wire version " + std::to_string(hello->wire_version) +
                                " is not supported (this server speaks version " +
                                std::to_string(kWireVersion) + ")"));
    return;
  }
  if (!ConstantTimeEquals(hello->token, token_)) {
    // Three cases, three messages: what to fix differs.
    Refuse(peer, conn.get(),
           Status::PermissionDenied(
               hello->token.empty()
                   ? "no job token: this shard requires one: " + options_.missing_token_hint
               : token_.empty()
                   ? "wrong job token: this shard takes none (paced --insecure); start the "
                     "client without --token_file"
                   : "wrong job token"));
    return;
  }
  Welcome welcome;
  Status s = handler_->OnHello(*hello, &welcome);
  if (!s.ok()) {
    Refuse(peer, conn.get(), s);
    return;
  }
  welcome.wire_version = kWireVersion;
  welcome.max_frame_bytes = options_.max_frame_bytes;
  s = conn->Send(welcome);
  if (!s.ok()) {
    conn->Abort(s);
    return;
  }
  peer->session = std::make_shared<ServerSession>(g_next_session_id.fetch_add(1), std::move(*hello),
                                                  peer->conn, conn->peer());
  sessions_active_.fetch_add(1, std::memory_order_relaxed);
  LOG(INFO) << "client " << peer->session->hello().client_id << " connected from " << conn->peer()
            << " (session " << peer->session->id() << ")";
  handler_->OnConnect(peer->session);
}

void Server::Impl::OnPeerClosed(Peer* peer, const Status& reason) {
  if (peer->handshaking && reason.code() == StatusCode::kTimedOut) {
    handshake_timeouts_.fetch_add(1, std::memory_order_relaxed);
    uint64_t held_back = 0;
    if (handshake_timeout_log_.Allow(&held_back)) {
      std::shared_ptr<Connection> conn = peer->conn.lock();
      LOG(WARNING) << "handshake timeout: closed connection " << peer->conn_id << " from "
                   << (conn ? conn->peer() : std::string("<closed>")) << ": " << reason.message()
                   << HeldBack(held_back);
    }
  }
  EndHandshake(peer);
  if (peer->session != nullptr) {
    LOG(INFO) << "client " << peer->session->hello().client_id << " (session "
              << peer->session->id() << ") disconnected: " << reason.ToString();
    handler_->OnDisconnect(peer->session);
    sessions_active_.fetch_sub(1, std::memory_order_relaxed);
    peer->session = nullptr;
  }
  MutexLock lock(&mu_);
  conns_.erase(peer->conn_id);
}

void Server::Impl::Stop() {
  std::vector<std::shared_ptr<Connection>> conns;
  {
    MutexLock lock(&mu_);
    if (!started_ || stopping_) return;
    stopping_ = true;
    for (auto& entry : conns_) conns.push_back(entry.second);
  }
  for (const std::thread& t : threads_) {
    CHECK(t.get_id() != std::this_thread::get_id())
        << "Server::Stop called from an I/O thread (a ServiceHandler callback)";
  }
  std::promise<void> acceptor_closed;
  asio::post(accept_strand_, [this, &acceptor_closed] {
    error_code ignored;
    acceptor_.close(ignored);
    retry_timer_.cancel();
    trim_timer_.cancel();
    acceptor_closed.set_value();
  });
  acceptor_closed.get_future().wait();
  for (const auto& conn : conns) conn->Abort(Status::Aborted("server is shutting down"));
  conns.clear();
  // Every Connection must be gone before io_ is destroyed.
  while (!counters_.WaitUntilNoneLive(5000)) {
    LOG(WARNING) << "Server::Stop: still waiting for " << counters_.live()
                 << " connections to close";
  }
  work_.reset();
  io_.stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  VLOG(1) << "server on port " << port_ << " stopped";
}

ServerStats Server::Impl::stats() const {
  ServerStats s;
  s.connections_accepted = accepted_.load(std::memory_order_relaxed);
  s.connections_open = static_cast<uint64_t>(counters_.live());
  s.sessions_active = sessions_active_.load(std::memory_order_relaxed);
  s.handshakes_refused = refused_.load(std::memory_order_relaxed);
  s.handshakes_timed_out = handshake_timeouts_.load(std::memory_order_relaxed);
  s.connections_refused = connections_refused_.load(std::memory_order_relaxed);
  s.handshakes_shed = handshakes_shed_.load(std::memory_order_relaxed);
  s.sessions_timed_out = counters_.stalls.load(std::memory_order_relaxed);
  s.bad_frames = counters_.bad_frames.load(std::memory_order_relaxed);
  s.read_pauses = counters_.read_pauses.load(std::memory_order_relaxed);
  s.queued_bytes = counters_.queued_bytes.load(std::memory_order_relaxed);
  s.peak_write_queue_bytes = counters_.peak_write_queue_bytes.load(std::memory_order_relaxed);
  return s;
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Server::~Server() { Stop(); }
Status Server::Listen() { return impl_->Listen(); }
Status Server::Start(ServiceHandler* handler) { return impl_->Start(handler); }
Status Server::SetToken(std::string token) { return impl_->SetToken(std::move(token)); }
uint16_t Server::port() const { return impl_->port(); }
bool Server::loopback() const { return impl_->loopback(); }
void Server::Stop() { impl_->Stop(); }
ServerStats Server::stats() const { return impl_->stats(); }
ConnectionLimits Server::limits() const { return impl_->limits(); }

}  // namespace pace::net
