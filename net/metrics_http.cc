#include "net/metrics_http.h"

#include <glog/logging.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "net/address.h"

namespace pace::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.17g", v);
  }
  return buf;
}

std::string HelpEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// One scrape: read a request, write the answer, close. Owned by its handlers.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, const std::function<std::string()>* render)
      : stream_(std::move(socket)), render_(render) {}

  void Start() {
    stream_.expires_after(std::chrono::seconds(10));
    auto self = shared_from_this();
    http::async_read(stream_, buffer_, request_,
                     [self](const error_code& ec, size_t) { self->OnRead(ec); });
  }

 private:
  void OnRead(const error_code& ec) {
    if (ec) return Close();
    response_.version(request_.version());
    response_.keep_alive(false);
    response_.set(http::field::server, "PaceDB");
    std::string target(request_.target());
    if (request_.method() != http::verb::get && request_.method() != http::verb::head) {
      response_.result(http::status::method_not_allowed);
      response_.set(http::field::content_type, "text/plain");
      response_.body() = "only GET\n";
    } else if (target != "/metrics" && target != "/" && target.rfind("/metrics?", 0) != 0) {
      response_.result(http::status::not_found);
      response_.set(http::field::content_type, "text/plain");
      response_.body() = "metrics are at /metrics\n";
    } else {
      response_.result(http::status::ok);
      response_.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      if (request_.method() == http::verb::get) response_.body() = (*render_)();
    }
    response_.prepare_payload();
    auto self = shared_from_this();
    http::async_write(stream_, response_, [self](const error_code&, size_t) { self->Close(); });
  }

  void Close() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
  const std::function<std::string()>* const render_;
};

}  // namespace

// --- PromText -----------------------------------------------------------------

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void PromText::Family(const std::string& name, const char* type, const std::string& help) {
  text_ += "# HELP " + name + " " + HelpEscape(help) + "\n";
  text_ += "# TYPE " + name + " " + type + "\n";
}

void PromText::Sample(const std::string& name, const Labels& labels, double value) {
  text_ += name;
  if (!labels.empty()) {
    text_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i) text_ += ',';
      text_ += labels[i].first + "=\"" + EscapeLabelValue(labels[i].second) + "\"";
    }
    text_ += '}';
  }
  text_ += ' ';
  text_ += FormatValue(value);
  text_ += '\n';
}

void PromText::Histogram(const std::string& name, const Labels& labels,
                         const std::vector<double>& upper_bounds,
                         const std::vector<uint64_t>& counts, uint64_t overflow, double sum) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < upper_bounds.size(); ++i) {
    cumulative += i < counts.size() ? counts[i] : 0;
    Labels l = labels;
    l.emplace_back("le", FormatValue(upper_bounds[i]));
    Sample(name + "_bucket", l, static_cast<double>(cumulative));
  }
  cumulative += overflow;
  Labels l = labels;
  l.emplace_back("le", "+Inf");
  Sample(name + "_bucket", l, static_cast<double>(cumulative));
  Sample(name + "_sum", labels, sum);
  Sample(name + "_count", labels, static_cast<double>(cumulative));
}

// --- MetricsHttpServer ----------------------------------------------------------

struct MetricsHttpServer::Impl {
  explicit Impl(Render r) : render(std::move(r)), acceptor(io) {}

  void Accept() {
    acceptor.async_accept([this](const error_code& ec, tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
        LOG(WARNING) << "metrics: accept failed: " << ec.message();
      } else {
        std::make_shared<HttpSession>(std::move(socket), &render)->Start();
      }
      Accept();
    });
  }

  Render render;
  asio::io_context io;
  tcp::acceptor acceptor;
  std::string host;
  uint16_t port = 0;
  std::thread thread;
};

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsHttpServer::~MetricsHttpServer() {
  asio::post(impl_->io, [impl = impl_.get()] {
    error_code ignored;
    impl->acceptor.close(ignored);
    impl->io.stop();
  });
  if (impl_->thread.joinable()) impl_->thread.join();
}

uint16_t MetricsHttpServer::port() const { return impl_->port; }
const std::string& MetricsHttpServer::host() const { return impl_->host; }

Status MetricsHttpServer::Start(const std::string& host, uint16_t port, Render render,
                                std::unique_ptr<MetricsHttpServer>* out) {
  auto impl = std::make_unique<Impl>(std::move(render));
  error_code ec;
  tcp::endpoint ep;
  asio::ip::address addr = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) return Status::InvalidArgument("metrics: bad host '" + host + "': " + ec.message());
  ep = tcp::endpoint(addr, port);
  const std::string where = host + ":" + std::to_string(port);
  if (impl->acceptor.open(ep.protocol(), ec) ||
      impl->acceptor.set_option(tcp::acceptor::reuse_address(true), ec) ||
      impl->acceptor.bind(ep, ec) ||
      impl->acceptor.listen(asio::socket_base::max_listen_connections, ec)) {
    return Status::IOError("metrics: cannot listen on " + where + ": " + ec.message());
  }
  impl->host = host;
  impl->port = impl->acceptor.local_endpoint(ec).port();
  impl->Accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  out->reset(new MetricsHttpServer(std::move(impl)));
  return Status::OK();
}

Status MetricsHttpServer::Start(const std::string& host_port, Render render,
                                std::unique_ptr<MetricsHttpServer>* out) {
  std::string host;
  uint16_t port = 0;
  RETURN_IF_ERROR(ParseHostPort(host_port, &host, &port));
  return Start(host, port, std::move(render), out);
}

}  // namespace pace::net
