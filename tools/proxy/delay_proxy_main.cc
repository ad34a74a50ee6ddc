// pace_delay_proxy: a TCP proxy that delays what it forwards, for latency and
// bandwidth experiments where the kernel has no netem.
//
//   pace_delay_proxy --listen=127.0.0.1:0 --target=127.0.0.1:7100 --delay_ms=10
//                    [--jitter_ms=J] [--bandwidth_mbps=B] [--seed=S]
//
// Every accepted connection gets its own connection to --target; both
// directions are forwarded. The unit of delay is a chunk: whatever one read
// from the socket returned (up to 64 KiB; usually one message or a few small
// ones that arrived together). A chunk read at time t is written at
//   max(t + delay, previous chunk's release)  (+ its transmission time at the
//   bandwidth cap, on a link that sends one chunk at a time),
// delay = --delay_ms + uniform[0, --jitter_ms], so chunks never overtake each
// other (TCP's byte order is kept) and a connection's delays are one-way: a
// round trip through the proxy takes 2 x delay. Reading stops while more than
// --max_queued_mb wait in one direction (back-pressure, bounded memory).
//
// Prints "proxy listening on HOST:PORT" when ready; SIGINT/SIGTERM end it.
// Single-threaded: one io_context thread owns every socket and timer.
#include <gflags/gflags.h>
#include <signal.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "net/address.h"

DEFINE_string(listen, "127.0.0.1:0", "host:port to accept on (port 0: any free port)");
DEFINE_string(target, "", "host:port to forward every connection to (required)");
DEFINE_double(delay_ms, 0, "fixed one-way delay per chunk, ms");
DEFINE_double(jitter_ms, 0, "plus a uniform random delay in [0, jitter_ms] per chunk, ms");
DEFINE_double(bandwidth_mbps, 0, "per-direction bandwidth cap in Mbit/s (0: none)");
DEFINE_uint64(seed, 1, "seed of the random delays");
DEFINE_uint32(max_queued_mb, 64, "stop reading while this much waits in one direction, MiB");

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

constexpr size_t kChunkBytes = 64 << 10;

struct Settings {
  Clock::duration delay{};
  double jitter_ms = 0;
  double bytes_per_second = 0;  // 0: unlimited
  size_t max_queued = 0;
};

// Both directions of one proxied connection; shared by their handlers.
class Link : public std::enable_shared_from_this<Link> {
 public:
  Link(asio::io_context* io, tcp::socket client, const Settings& settings, uint64_t seed)
      : settings_(settings), rng_(seed) {
    sides_[0].socket.emplace(std::move(client));
    sides_[1].socket.emplace(*io);
    for (Pipe& p : pipes_) p.timer.emplace(*io);
  }

  void Start(const tcp::resolver::results_type& target) {
    auto self = shared_from_this();
    asio::async_connect(
        *sides_[1].socket, target, [self](const error_code& ec, const tcp::endpoint&) {
          if (ec) {
            std::fprintf(stderr, "pace_delay_proxy: cannot connect to --target: %s\n",
                         ec.message().c_str());
            self->CloseAll();
            return;
          }
          error_code ignored;
          for (Side& s : self->sides_) s.socket->set_option(tcp::no_delay(true), ignored);
          self->Read(0);
          self->Read(1);
        });
  }

 private:
  struct Chunk {
    std::vector<char> data;
    Clock::time_point due;
  };
  struct Side {
    std::optional<tcp::socket> socket;
  };
  // pipes_[i] carries bytes read from sides_[i] to sides_[1 - i].
  struct Pipe {
    std::deque<Chunk> queue;
    size_t queued = 0;
    bool reading = false, writing = false, eof = false;
    Clock::time_point last_due{};
    Clock::time_point link_free{};
    std::optional<asio::steady_timer> timer;
    std::vector<char> buf = std::vector<char>(kChunkBytes);
  };

  Clock::time_point Due(size_t bytes, Pipe* p) {
    Clock::time_point now = Clock::now();
    double jitter = settings_.jitter_ms > 0
                        ? std::uniform_real_distribution<double>(0, settings_.jitter_ms)(rng_)
                        : 0;
    Clock::time_point sent = now;
    if (settings_.bytes_per_second > 0) {
      Clock::time_point start = std::max(now, p->link_free);
      p->link_free = start + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(bytes / settings_.bytes_per_second));
      sent = p->link_free;
    }
    Clock::time_point due = sent + settings_.delay +
                            std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double, std::milli>(jitter));
    due = std::max(due, p->last_due);
    p->last_due = due;
    return due;
  }

  void Read(int from) {
    Pipe& p = pipes_[from];
    if (p.reading || p.eof || closed_ || p.queued > settings_.max_queued) return;
    p.reading = true;
    auto self = shared_from_this();
    sides_[from].socket->async_read_some(
        asio::buffer(p.buf), [self, from](const error_code& ec, size_t n) {
          Pipe& p = self->pipes_[from];
          p.reading = false;
          if (self->closed_) return;
          if (ec) {
            // EOF (or a reset): forward what is queued, then pass it on.
            p.eof = true;
            self->Write(from);
            return;
          }
          p.queue.push_back(
              Chunk{std::vector<char>(p.buf.begin(), p.buf.begin() + n), self->Due(n, &p)});
          p.queued += n;
          self->Write(from);
          self->Read(from);
        });
  }

  void Write(int from) {
    Pipe& p = pipes_[from];
    if (p.writing || closed_) return;
    tcp::socket& to = *sides_[1 - from].socket;
    if (p.queue.empty()) {
      if (p.eof) {
        error_code ignored;
        to.shutdown(tcp::socket::shutdown_send, ignored);
        if (pipes_[1 - from].eof && pipes_[1 - from].queue.empty()) CloseAll();
      }
      return;
    }
    p.writing = true;
    auto self = shared_from_this();
    p.timer->expires_at(p.queue.front().due);
    p.timer->async_wait([self, from](const error_code&) {
      Pipe& p = self->pipes_[from];
      if (self->closed_) return;
      tcp::socket& to = *self->sides_[1 - from].socket;
      asio::async_write(to, asio::buffer(p.queue.front().data),
                        [self, from](const error_code& ec, size_t n) {
                          Pipe& p = self->pipes_[from];
                          p.writing = false;
                          if (ec) return self->CloseAll();
                          p.queue.pop_front();
                          p.queued -= n;
                          self->Write(from);
                          self->Read(from);
                        });
    });
  }

  void CloseAll() {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    for (Side& s : sides_) s.socket->close(ignored);
    for (Pipe& p : pipes_) p.timer->cancel();
  }

  const Settings settings_;
  std::mt19937_64 rng_;
  Side sides_[2];
  Pipe pipes_[2];
  bool closed_ = false;
};

class Proxy {
 public:
  Proxy(asio::io_context* io, Settings settings, tcp::resolver::results_type target)
      : io_(io), settings_(settings), target_(std::move(target)), acceptor_(*io) {}

  bool Listen(const std::string& host, uint16_t port) {
    error_code ec;
    tcp::endpoint ep(asio::ip::make_address(host, ec), port);
    if (ec) return Fail("--listen host " + host + ": " + ec.message());
    if (acceptor_.open(ep.protocol(), ec) ||
        acceptor_.set_option(tcp::acceptor::reuse_address(true), ec) || acceptor_.bind(ep, ec) ||
        acceptor_.listen(asio::socket_base::max_listen_connections, ec)) {
      return Fail("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
    }
    std::printf("proxy listening on %s:%u\n", host.c_str(), acceptor_.local_endpoint().port());
    std::fflush(stdout);
    Accept();
    return true;
  }

 private:
  static bool Fail(const std::string& why) {
    std::fprintf(stderr, "pace_delay_proxy: %s\n", why.c_str());
    return false;
  }

  void Accept() {
    acceptor_.async_accept([this](const error_code& ec, tcp::socket socket) {
      if (ec) {
        if (ec != asio::error::operation_aborted) Accept();
        return;
      }
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Link>(io_, std::move(socket), settings_, FLAGS_seed + 7919 * links_++)
          ->Start(target_);
      Accept();
    });
  }

  asio::io_context* const io_;
  const Settings settings_;
  const tcp::resolver::results_type target_;
  tcp::acceptor acceptor_;
  uint64_t links_ = 0;
};

int Run() {
  std::string listen_host, target_host;
  uint16_t listen_port = 0, target_port = 0;
  pace::Status s = pace::net::ParseHostPort(FLAGS_listen, &listen_host, &listen_port);
  if (!s.ok())
    return std::fprintf(stderr, "pace_delay_proxy: --listen: %s\n", s.ToString().c_str()), 1;
  if (FLAGS_target.empty())
    return std::fprintf(stderr, "pace_delay_proxy: --target is required\n"), 1;
  s = pace::net::ParseHostPort(FLAGS_target, &target_host, &target_port);
  if (!s.ok() || target_port == 0) {
    return std::fprintf(stderr, "pace_delay_proxy: --target: %s\n",
                        s.ok() ? "port 0" : s.ToString().c_str()),
           1;
  }
  if (FLAGS_delay_ms < 0 || FLAGS_jitter_ms < 0 || FLAGS_bandwidth_mbps < 0) {
    return std::fprintf(
               stderr,
               "pace_delay_proxy: --delay_ms, --jitter_ms, --bandwidth_mbps must be >= 0\n"),
           1;
  }
  Settings settings;
  settings.delay = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(FLAGS_delay_ms));
  settings.jitter_ms = FLAGS_jitter_ms;
  settings.bytes_per_second = FLAGS_bandwidth_mbps * 1e6 / 8;
  settings.max_queued = static_cast<size_t>(FLAGS_max_queued_mb) << 20;

  asio::io_context io;
  error_code ec;
  tcp::resolver resolver(io);
  auto target = resolver.resolve(target_host, std::to_string(target_port),
                                 tcp::resolver::numeric_service, ec);
  if (ec) {
    return std::fprintf(stderr, "pace_delay_proxy: cannot resolve --target %s: %s\n",
                        target_host.c_str(), ec.message().c_str()),
           1;
  }
  Proxy proxy(&io, settings, target);
  if (!proxy.Listen(listen_host, listen_port)) return 1;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&io](const error_code&, int) { io.stop(); });
  io.run();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "TCP proxy with a per-chunk delay and a bandwidth cap.\n"
      "  pace_delay_proxy --listen=127.0.0.1:0 --target=HOST:PORT --delay_ms=D [--jitter_ms=J] "
      "[--bandwidth_mbps=B]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (argc > 1)
    return std::fprintf(stderr, "pace_delay_proxy: unexpected argument '%s'\n", argv[1]), 1;
  return Run();
}
