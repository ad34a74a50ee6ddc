#include "net/connection.h"

#include <glog/logging.h>

#include <algorithm>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <exception>
#include <utility>

namespace pace::net::internal {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

constexpr size_t kDiscardBufBytes = 16 << 10;
// Frames gathered into one write.
constexpr size_t kMaxFramesPerWrite = 64;
// Bytes one sendmsg call may take (the kernel takes what fits its buffer).
constexpr size_t kMaxBytesPerSend = size_t{1} << 30;

std::atomic<uint64_t> g_next_connection_id{1};

void RaiseTo(std::atomic<size_t>* peak, size_t value) {
  size_t cur = peak->load(std::memory_order_relaxed);
  while (cur < value && !peak->compare_exchange_weak(cur, value, std::memory_order_relaxed)) {
  }
}

}  // namespace

void ConnectionCounters::AddLive() {
  MutexLock lock(&mu_);
  ++live_;
}

void ConnectionCounters::RemoveLive() {
  MutexLock lock(&mu_);
  if (--live_ == 0) cv_.SignalAll();
}

int ConnectionCounters::live() const {
  MutexLock lock(&mu_);
  return live_;
}

bool ConnectionCounters::WaitUntilNoneLive(int timeout_ms) {
  MutexLock lock(&mu_);
  return cv_.WaitUntil(&mu_,
                       std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms),
                       [&]() REQUIRES(mu_) { return live_ == 0; });
}

std::shared_ptr<Connection> Connection::Create(asio::ip::tcp::socket socket,
                                               const ConnectionOptions& options,
                                               ConnectionCounters* counters) {
  return std::shared_ptr<Connection>(new Connection(std::move(socket), options, counters));
}

Connection::Connection(asio::ip::tcp::socket socket, const ConnectionOptions& options,
                       ConnectionCounters* counters)
    : id_(g_next_connection_id.fetch_add(1)),
      options_(options),
      counters_(counters),
      strand_(asio::make_strand(socket.get_executor())),
      socket_(std::move(socket)),
      first_message_timer_(strand_),
      linger_timer_(strand_),
      watchdog_timer_(strand_),
      reader_(options.max_frame_bytes) {
  if (counters_ != nullptr) counters_->AddLive();
  error_code ec;
  auto ep = socket_.remote_endpoint(ec);
  peer_ = ec ? std::string("<unknown peer>")
             : ep.address().to_string() + ":" + std::to_string(ep.port());
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  if (ec)
    LOG(WARNING) << "connection " << id_ << " (" << peer_
                 << "): cannot set TCP_NODELAY: " << ec.message();
}

Connection::~Connection() {
  error_code ec;
  socket_.close(ec);
  if (counters_ != nullptr) {
    counters_->queued_bytes.fetch_sub(queued_bytes_, std::memory_order_relaxed);
    counters_->RemoveLive();
  }
}

// Runs `f`; an exception escaping it (e.g. std::bad_alloc, or one thrown by a
// callback) closes the connection instead of unwinding into Asio.
template <typename F>
void Connection::Guarded(const char* where, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    LOG(ERROR) << "connection " << id_ << " (" << peer_ << "): exception in " << where << ": "
               << e.what();
    FinalClose(Status::Internal(std::string("exception in ") + where + ": " + e.what()));
  } catch (...) {
    LOG(ERROR) << "connection " << id_ << " (" << peer_ << "): unknown exception in " << where;
    FinalClose(Status::Internal(std::string("unknown exception in ") + where));
  }
}

void Connection::Start(MessageCallback on_message, CloseCallback on_close) {
  asio::post(strand_, [self = shared_from_this(), on_message = std::move(on_message),
                       on_close = std::move(on_close)]() mutable {
    self->Guarded("Start", [&] {
      if (self->phase_ == Phase::kClosed) {  // aborted before Start
        on_close(self->close_reason_);
        return;
      }
      self->on_message_ = std::move(on_message);
      self->on_close_ = std::move(on_close);
      if (self->abort_requested_.load()) return;  // FinalClose is already posted
      int timeout_ms = self->options_.first_message_timeout_ms;
      if (timeout_ms > 0) {
        self->first_message_timer_.expires_after(std::chrono::milliseconds(timeout_ms));
        self->first_message_timer_.async_wait([self, timeout_ms](const error_code& ec) {
          if (ec || self->got_message_ || self->phase_ != Phase::kOpen) return;
          self->Guarded("first message timer", [&] {
            self->DoShutdown(Status::TimedOut("no complete message within " +
                                              std::to_string(timeout_ms) + " ms"));
          });
        });
      }
      self->DoRead();
    });
  });
}

bool Connection::Enqueue(EncodedFrame frame, bool force, Status* error) {
  size_t size = frame.size();
  MutexLock lock(&mu_);
  if (!accepting_ && !force) {
    *error = Status::Unavailable("connection to " + peer_ + " is closed");
    return false;
  }
  if (!force && queued_bytes_ + size > options_.max_write_queue_bytes) {
    *error = Status::ResourceExhausted("write queue to " + peer_ + " would exceed " +
                                       std::to_string(options_.max_write_queue_bytes) +
                                       " bytes (the peer is not reading)");
    return false;
  }
  queue_.push_back(std::move(frame));
  queued_bytes_ += size;
  if (counters_ != nullptr) {
    const size_t total = counters_->queued_bytes.fetch_add(size, std::memory_order_relaxed) + size;
    RaiseTo(&counters_->peak_write_queue_bytes, queued_bytes_);
    if (total > ConnectionCounters::kTrimAfterBytes) {
      counters_->trim_due.store(true, std::memory_order_relaxed);
    }
  }
  if (!write_pending_) {
    write_pending_ = true;
    asio::post(strand_,
               [self = shared_from_this()] { self->Guarded("DoWrite", [&] { self->DoWrite(); }); });
  }
  return true;
}

Status Connection::Send(const Message& m) {
  EncodedFrame frame;
  RETURN_IF_ERROR(EncodeFrame(m, &frame, options_.frame_pool));
  // The peer would refuse it (both sides use the same limit by default):
  // fail here, where the error names the message.
  if (frame.size() - kFrameHeaderBytes > options_.max_frame_bytes) {
    return Status::ResourceExhausted(
        std::string(MessageName(m)) + " of " + std::to_string(frame.size()) +
        " bytes exceeds the " + std::to_string(options_.max_frame_bytes) + "-byte frame limit");
  }
  Status error;
  Enqueue(std::move(frame), /*force=*/false, &error);
  return error;
}

void Connection::Shutdown(const Status& reason) {
  if (strand_.running_in_this_thread()) {
    DoShutdown(reason);
    return;
  }
  asio::post(strand_, [self = shared_from_this(), reason] {
    self->Guarded("Shutdown", [&] { self->DoShutdown(reason); });
  });
}

void Connection::Abort(const Status& reason) {
  abort_requested_.store(true);
  {
    MutexLock lock(&mu_);
    accepting_ = false;
  }
  asio::post(strand_, [self = shared_from_this(), reason] {
    self->Guarded("Abort", [&] { self->FinalClose(reason); });
  });
}

void Connection::AbortWithError(const Status& reason) {
  abort_requested_.store(true);
  {
    MutexLock lock(&mu_);
    accepting_ = false;
  }
  asio::post(strand_, [self = shared_from_this(), reason] {
    self->Guarded("AbortWithError", [&] {
      if (self->phase_ == Phase::kOpen && self->writing_.empty() && self->queued_bytes() == 0) {
        std::string frame;
        if (EncodeFrame(Error{0, reason.code(), reason.message()}, &frame).ok()) {
          error_code ec;
          self->socket_.non_blocking(true, ec);
          if (!ec) self->socket_.write_some(asio::buffer(frame), ec);
        }
      }
      self->FinalClose(reason);
    });
  });
}

size_t Connection::queued_bytes() const {
  MutexLock lock(&mu_);
  return queued_bytes_;
}

void Connection::DoRead() {
  if (read_in_flight_ || phase_ == Phase::kClosed || peer_eof_) return;
  char* data;
  size_t size;
  if (phase_ == Phase::kClosing) {
    if (discard_buf_ == nullptr) discard_buf_.reset(new char[kDiscardBufBytes]);
    data = discard_buf_.get();
    size = kDiscardBufBytes;
  } else {
    size = reader_.SuggestedReadSize();
    data = reader_.Prepare(size);
  }
  read_in_flight_ = true;
  socket_.async_read_some(
      asio::buffer(data, size),
      asio::bind_executor(strand_, [self = shared_from_this()](const error_code& ec, size_t n) {
        self->Guarded("OnRead", [&] { self->OnRead(ec, n); });
      }));
}

void Connection::OnRead(const error_code& ec, size_t n) {
  read_in_flight_ = false;
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    if (phase_ == Phase::kClosing) {
      if (ec == asio::error::eof && !fin_sent_) {
        peer_eof_ = true;  // FinishFlush closes once our frames are out
      } else {
        FinalClose(close_reason_);
      }
    } else if (ec == asio::error::eof && reader_.buffered_bytes() > 0) {
      peer_eof_ = true;
      // The peer half-closed inside a frame: tell it before closing.
      if (counters_ != nullptr) counters_->bad_frames.fetch_add(1, std::memory_order_relaxed);
      Status s = Status::Corruption("stream ended inside a frame (" +
                                    std::to_string(reader_.buffered_bytes()) +
                                    " bytes of an incomplete frame)");
      LOG(WARNING) << "connection " << id_ << " (" << peer_ << "): " << s.ToString();
      DoShutdown(s);
    } else if (ec == asio::error::eof) {
      FinalClose(Status::Unavailable("connection closed by " + peer_));
    } else {
      FinalClose(Status::Unavailable("read from " + peer_ + " failed: " + ec.message()));
    }
    return;
  }
  if (phase_ == Phase::kClosing) {
    DoRead();  // discard until the peer closes or the linger timer fires
    return;
  }
  if (options_.frame_stall_timeout_ms > 0 || options_.idle_timeout_ms > 0) {
    last_read_ = std::chrono::steady_clock::now();
  }
  reader_.Commit(n);
  ProcessFrames();
  MaybeArmWatchdog();
}

// One timer per connection, armed for the earliest deadline that applies
// (re-armed when it fires early), so a read costs a clock read, not a timer
// operation.
void Connection::MaybeArmWatchdog() {
  if (watchdog_armed_ || phase_ != Phase::kOpen || !got_message_) return;
  const bool stall = options_.frame_stall_timeout_ms > 0 && reader_.buffered_bytes() > 0;
  const bool idle = options_.idle_timeout_ms > 0;
  if (!stall && !idle) return;
  int ms = idle ? options_.idle_timeout_ms : options_.frame_stall_timeout_ms;
  if (stall) ms = std::min(ms, options_.frame_stall_timeout_ms);
  watchdog_armed_ = true;
  watchdog_timer_.expires_at(last_read_ + std::chrono::milliseconds(ms));
  watchdog_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    self->watchdog_armed_ = false;
    if (ec) return;
    self->Guarded("watchdog timer", [&] { self->OnWatchdog(); });
  });
}

void Connection::OnWatchdog() {
  if (phase_ != Phase::kOpen) return;
  const auto now = std::chrono::steady_clock::now();
  // Not reading because of our own back-pressure: the peer is not to blame.
  if (read_paused_) last_read_ = now;
  const auto quiet =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - last_read_).count();
  const size_t partial = reader_.buffered_bytes();
  Status why;
  if (options_.frame_stall_timeout_ms > 0 && partial > 0 &&
      quiet >= options_.frame_stall_timeout_ms) {
    why = Status::TimedOut("stalled inside a frame: " + std::to_string(partial) +
                           " bytes of it received, then nothing for " + std::to_string(quiet) +
                           " ms");
  } else if (options_.idle_timeout_ms > 0 && quiet >= options_.idle_timeout_ms) {
    why = Status::TimedOut("idle: nothing received for " + std::to_string(quiet) + " ms");
  } else {
    MaybeArmWatchdog();
    return;
  }
  if (counters_ != nullptr) counters_->stalls.fetch_add(1, std::memory_order_relaxed);
  LOG(WARNING) << "connection " << id_ << " (" << peer_ << "): " << why.message() << "; closing";
  DoShutdown(why);
}

void Connection::ProcessFrames() {
  while (phase_ == Phase::kOpen && !abort_requested_.load(std::memory_order_relaxed)) {
    if (queued_bytes() >= options_.pause_reading_bytes) {
      if (!read_paused_) {
        read_paused_ = true;
        if (counters_ != nullptr) counters_->read_pauses.fetch_add(1, std::memory_order_relaxed);
      }
      return;  // OnWrite resumes once the queue drained below half
    }
    std::string_view payload;
    Status s = reader_.Next(&payload);
    if (s.ok() && payload.empty()) {
      DoRead();
      return;
    }
    Message m;
    if (s.ok()) s = DecodePayload(payload, &m, options_.decode);
    if (!s.ok()) {
      if (counters_ != nullptr) counters_->bad_frames.fetch_add(1, std::memory_order_relaxed);
      LOG(WARNING) << "connection " << id_ << " (" << peer_
                   << "): bad frame, closing: " << s.ToString();
      DoShutdown(s);
      return;
    }
    if (!got_message_) {
      got_message_ = true;
      first_message_timer_.cancel();
    }
    if (on_message_) on_message_(std::move(m));
  }
}

void Connection::DoWrite() {
  if (phase_ == Phase::kClosed || !writing_.empty()) return;
  bool idle = false;
  {
    MutexLock lock(&mu_);
    if (queue_.empty()) {
      write_pending_ = false;
      idle = true;
    }
    while (!queue_.empty() && writing_.size() < kMaxFramesPerWrite) {
      writing_.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  }
  if (idle) {
    if (phase_ == Phase::kClosing) FinishFlush();
    return;
  }
  write_buffers_.clear();
  for (const EncodedFrame& f : writing_) {
    for (std::string_view p : f.pieces()) write_buffers_.push_back(asio::buffer(p));
  }
  // The default completion condition (transfer_all) caps every send at 64 KiB;
  // this one lets each sendmsg take as much as the kernel accepts.
  asio::async_write(
      socket_, write_buffers_,
      [](const error_code& ec, size_t) { return ec ? 0 : kMaxBytesPerSend; },
      asio::bind_executor(strand_, [self = shared_from_this()](const error_code& ec, size_t n) {
        self->Guarded("OnWrite", [&] { self->OnWrite(ec, n); });
      }));
}

void Connection::OnWrite(const error_code& ec, size_t n) {
  size_t written = 0;
  for (const EncodedFrame& f : writing_) written += f.size();
  writing_.clear();
  write_buffers_.clear();
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    FinalClose(Status::Unavailable("write to " + peer_ + " failed: " + ec.message()));
    return;
  }
  bool more;
  size_t queued;
  {
    MutexLock lock(&mu_);
    queued_bytes_ -= written;
    if (counters_ != nullptr) counters_->queued_bytes.fetch_sub(written, std::memory_order_relaxed);
    queued = queued_bytes_;
    more = !queue_.empty();
    if (!more) write_pending_ = false;
  }
  if (read_paused_ && queued < options_.pause_reading_bytes / 2 && phase_ == Phase::kOpen) {
    read_paused_ = false;
    ProcessFrames();
  }
  if (more) {
    DoWrite();
  } else if (phase_ == Phase::kClosing) {
    FinishFlush();
  }
}

void Connection::DoShutdown(const Status& reason) {
  if (phase_ != Phase::kOpen) return;
  phase_ = Phase::kClosing;
  close_reason_ = reason;
  first_message_timer_.cancel();
  watchdog_timer_.cancel();
  {
    MutexLock lock(&mu_);
    accepting_ = false;
  }
  if (!reason.ok()) {
    EncodedFrame frame;
    Status s = EncodeFrame(Error{0, reason.code(), reason.message()}, &frame, options_.frame_pool);
    Status ignored;
    if (s.ok()) Enqueue(std::move(frame), /*force=*/true, &ignored);
  }
  linger_timer_.expires_after(std::chrono::milliseconds(options_.linger_ms));
  linger_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (ec) return;
    self->Guarded("linger timer", [&] { self->FinalClose(self->close_reason_); });
  });
  DoRead();
  bool idle;
  {
    MutexLock lock(&mu_);
    idle = !write_pending_;
  }
  if (idle) FinishFlush();
}

// The queue is empty: half-close so the peer sees the end of our stream, then
// keep reading (and discarding) until it closes too.
void Connection::FinishFlush() {
  if (fin_sent_ || phase_ != Phase::kClosing) return;
  fin_sent_ = true;
  error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  if (peer_eof_) FinalClose(close_reason_);
}

void Connection::FinalClose(const Status& reason) {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  close_reason_ = reason;
  abort_requested_.store(true);
  error_code ec;
  first_message_timer_.cancel();
  linger_timer_.cancel();
  watchdog_timer_.cancel();
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  {
    MutexLock lock(&mu_);
    accepting_ = false;
    queue_.clear();
    size_t in_flight = 0;
    for (const EncodedFrame& f : writing_) in_flight += f.size();
    if (counters_ != nullptr) {
      counters_->queued_bytes.fetch_sub(queued_bytes_ - in_flight, std::memory_order_relaxed);
    }
    queued_bytes_ = in_flight;  // released by ~Connection
  }
  on_message_ = nullptr;
  CloseCallback on_close = std::move(on_close_);
  on_close_ = nullptr;
  if (on_close) on_close(reason);
}

}  // namespace pace::net::internal
