// Internal to net/: one framed, message-level TCP connection on Boost.Asio,
// shared by the server side (net/server.cc) and the client stub
// (net/remote_shard.cc). Not a contract for other modules; only net/ .cc
// files include it (it exposes Boost types).
//
// A Connection owns its socket, a strand on which every handler and callback
// runs, a FrameReader and an outbound queue of encoded frames (each still in
// the buffer it was built in; a write gathers up to 64 queued frames and asks
// the kernel for all their bytes at once). It reads
// frames, verifies and decodes them (net/codec.h) and hands messages to a
// callback; a bad frame makes it send Error{code, message} and close
// (docs/wire-protocol.md, "Errors"). Its lifetime is shared: pending handlers
// hold it. REQUIRES: every Connection is destroyed before its io_context.
#ifndef PACE_NET_CONNECTION_H_
#define PACE_NET_CONNECTION_H_

#include <atomic>
#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "net/codec.h"
#include "net/frame.h"
#include "net/messages.h"

namespace pace::net::internal {

struct ConnectionOptions {
  // Largest payload accepted inbound and sent outbound.
  uint32_t max_frame_bytes = kDefaultMaxFrameBytes;
  // While the outbound queue holds at least this many bytes the connection
  // neither reads nor dispatches inbound frames; it resumes below half.
  // SIZE_MAX disables the pause (the client stub: pausing both ends of a
  // connection could deadlock).
  size_t pause_reading_bytes = SIZE_MAX;
  // Send fails with ResourceExhausted if the queue would exceed this.
  size_t max_write_queue_bytes = SIZE_MAX;
  // A connection that has not delivered a complete message this long after
  // Start is shut down with TimedOut. 0: no limit.
  int first_message_timeout_ms = 0;
  // After the first message: shut down with TimedOut when part of a frame
  // has been received and no byte followed for this long (time spent paused
  // by back-pressure does not count). 0: no limit.
  int frame_stall_timeout_ms = 0;
  // After the first message: shut down with TimedOut when no byte at all
  // arrived for this long. 0: no limit.
  int idle_timeout_ms = 0;
  // After Shutdown, how long to wait for queued frames to drain and the peer
  // to close its side before closing anyway.
  int linger_ms = 1000;
  DecodeOptions decode;
  // Outbound frames are built in blocks from this pool (shared by the
  // connections of one Server or RemoteShard). Null: plain allocations.
  std::shared_ptr<FrameBufferPool> frame_pool;
};

// Counters shared by the connections of one Server or RemoteShard. The owner
// must outlive its connections; WaitUntilNoneLive helps it do so.
class ConnectionCounters {
 public:
  std::atomic<uint64_t> read_pauses{0};
  std::atomic<uint64_t> bad_frames{0};
  std::atomic<uint64_t> stalls{0};      // closed by frame_stall_timeout_ms or idle_timeout_ms
  std::atomic<size_t> queued_bytes{0};  // current total
  std::atomic<size_t> peak_write_queue_bytes{0};  // max over connections
  // Set when queued_bytes passed kTrimAfterBytes; the owner hands the freed
  // memory back to the system once the queues drained (net/server.cc).
  std::atomic<bool> trim_due{false};
  static constexpr size_t kTrimAfterBytes = size_t{32} << 20;

  void AddLive();
  void RemoveLive();
  int live() const;
  // Waits until no Connection using these counters exists. Returns false
  // after `timeout_ms` if some still do.
  bool WaitUntilNoneLive(int timeout_ms);

 private:
  mutable Mutex mu_;
  CondVar cv_;
  int live_ GUARDED_BY(mu_) = 0;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using MessageCallback = std::function<void(Message)>;
  using CloseCallback = std::function<void(const Status&)>;

  // Takes an open socket. `counters` may be null.
  static std::shared_ptr<Connection> Create(boost::asio::ip::tcp::socket socket,
                                            const ConnectionOptions& options,
                                            ConnectionCounters* counters);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts reading. `on_message` gets every verified inbound message in
  // order; `on_close` runs exactly once when the connection is closed, with
  // the reason. Both run on the connection's strand, never concurrently, and
  // must not block. Call once; if the connection was aborted before Start
  // ran, on_close still runs (at once).
  void Start(MessageCallback on_message, CloseCallback on_close);

  // Thread-safe. Encodes `m` and queues it behind earlier Sends.
  // Errors: Unavailable once the connection is shutting down or closed;
  // ResourceExhausted if the queue would exceed max_write_queue_bytes or the
  // payload max_frame_bytes; encoding errors from EncodeFrame.
  Status Send(const Message& m);

  // Thread-safe. Stops dispatching inbound messages, sends Error{reason} (if
  // `reason` is not OK) after the frames already queued, half-closes, waits
  // up to linger_ms for the peer to close, then closes. on_close gets
  // `reason`. Called from on_message, it takes effect before the next
  // inbound message. Later calls do nothing.
  void Shutdown(const Status& reason);

  // Thread-safe. Closes at once; queued frames are dropped.
  void Abort(const Status& reason);
  // Thread-safe. As Abort, but first tries one non-blocking write of
  // Error{reason} if nothing else was queued, so that the peer learns why
  // (no linger: the descriptor is freed at once).
  void AbortWithError(const Status& reason);

  uint64_t id() const { return id_; }
  // "ip:port" of the peer, for logs.
  const std::string& peer() const { return peer_; }
  // Bytes queued for sending (including the write in flight).
  size_t queued_bytes() const;
  // The same over every connection sharing its counters (this one's alone
  // without counters).
  size_t transport_queued_bytes() const {
    return counters_ != nullptr ? counters_->queued_bytes.load(std::memory_order_relaxed)
                                : queued_bytes();
  }

 private:
  enum class Phase { kOpen, kClosing, kClosed };
  using Strand = boost::asio::strand<boost::asio::ip::tcp::socket::executor_type>;

  Connection(boost::asio::ip::tcp::socket socket, const ConnectionOptions& options,
             ConnectionCounters* counters);

  // Everything below runs on strand_.
  template <typename F>
  void Guarded(const char* where, F&& f);
  void DoRead();
  void OnRead(const boost::system::error_code& ec, size_t n);
  void ProcessFrames();
  void DoWrite();
  void OnWrite(const boost::system::error_code& ec, size_t n);
  void MaybeArmWatchdog();
  void OnWatchdog();
  void DoShutdown(const Status& reason);
  void FinishFlush();
  void FinalClose(const Status& reason);
  bool Enqueue(EncodedFrame frame, bool force, Status* error);

  // Constant after construction.
  const uint64_t id_;
  const ConnectionOptions options_;
  ConnectionCounters* const counters_;
  Strand strand_;
  std::string peer_;

  // Owned by strand_.
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer first_message_timer_;
  boost::asio::steady_timer linger_timer_;
  boost::asio::steady_timer watchdog_timer_;  // frame stall / idle timeouts
  bool watchdog_armed_ = false;
  std::chrono::steady_clock::time_point last_read_;  // set only with a watchdog timeout
  FrameReader reader_;
  std::unique_ptr<char[]> discard_buf_;  // sink for reads while closing
  MessageCallback on_message_;
  CloseCallback on_close_;
  Phase phase_ = Phase::kOpen;
  Status close_reason_;
  bool read_in_flight_ = false;
  bool read_paused_ = false;
  bool got_message_ = false;
  bool fin_sent_ = false;
  bool peer_eof_ = false;                                 // the peer closed its side
  std::vector<EncodedFrame> writing_;                     // frames of the write in flight
  std::vector<boost::asio::const_buffer> write_buffers_;  // their bytes
  std::atomic<bool> abort_requested_{false};

  mutable Mutex mu_;
  std::deque<EncodedFrame> queue_ GUARDED_BY(mu_);
  size_t queued_bytes_ GUARDED_BY(mu_) = 0;     // queue_ plus writing_
  bool write_pending_ GUARDED_BY(mu_) = false;  // a DoWrite is posted or a write in flight
  bool accepting_ GUARDED_BY(mu_) = true;       // false once shutting down
};

}  // namespace pace::net::internal

#endif  // PACE_NET_CONNECTION_H_
