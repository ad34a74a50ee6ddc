// The client stub of one shard server: a TCP connection that has completed
// the handshake (docs/wire-protocol.md), used by the client library and by
// tools such as pacectl.
//
// Threads and callbacks: every RemoteShard owns one I/O thread. Inbound
// messages are delivered to the MessageHandler on that thread, one at a time,
// in arrival order; the DisconnectHandler also runs there. Callbacks must not
// block (the connection stops reading while one runs) and must not call
// Close() or destroy the RemoteShard; they may call Send and the async calls.
//
// Request ids: the convenience calls (CreateTable, ListTables, DescribeTable,
// Stats, Read) use req_ids >= kFirstStubReqId and consume their replies
// (TablesReply, StatsReply, ReadReply or Error carrying such a req_id): those
// never reach the MessageHandler. Messages sent with Send() must use req_ids
// below kFirstStubReqId; every other inbound message goes to the handler,
// including Error frames that match no pending call.
//
// Thread-safety: Send, the async calls, welcome() and connected() may be
// called from any thread. Close() from any thread except the I/O thread.
#ifndef PACE_NET_REMOTE_SHARD_H_
#define PACE_NET_REMOTE_SHARD_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common/schema.h"
#include "common/status.h"
#include "net/codec.h"
#include "net/frame_pool.h"
#include "net/messages.h"

namespace pace::net {

// req_ids from here up belong to RemoteShard's convenience calls.
inline constexpr uint64_t kFirstStubReqId = uint64_t{1} << 63;

struct RemoteShardOptions {
  // Server address. Default: "127.0.0.1".
  std::string host = "127.0.0.1";
  // Server port. Required (no default).
  uint16_t port = 0;
  // Sent as the first frame (wire_version, client_id, token, role).
  Hello hello;
  // Total time Connect may take: all attempts, back-off and the handshake.
  // Default: 10000 ms.
  int connect_timeout_ms = 10000;
  // Connection attempts before giving up (0: as many as fit in
  // connect_timeout_ms). Handshake refusals are never retried. Default: 0.
  int max_connect_attempts = 0;
  // Back-off between attempts: starts here, doubles, capped at the max.
  // Defaults: 20 ms, 1000 ms.
  int retry_initial_backoff_ms = 20;
  int retry_max_backoff_ms = 1000;
  // Largest payload accepted inbound; Send refuses larger messages with
  // ResourceExhausted. Default: 64 MiB.
  uint32_t max_frame_bytes = kDefaultMaxFrameBytes;
  // Send fails with ResourceExhausted while this many bytes wait to be sent.
  // Default: 256 MiB.
  size_t max_write_queue_bytes = 256u << 20;
  // The buffers outbound frames are encoded in are recycled (FrameBufferPool):
  // blocks of up to this many bytes, this many of them idle at most. A client
  // sizes them to the Apply frames of its parts, so that each part's frame is
  // encoded into memory a part before used instead of fresh pages. Defaults:
  // FrameBufferPoolOptions's.
  FrameBufferPoolOptions frame_pool;
  // How long Close() waits for queued frames to drain and the server to
  // close its side. Default: 1000 ms.
  int close_linger_ms = 1000;
  // Verifier limits for inbound payloads.
  DecodeOptions decode;
  // If > 0: TCP keepalive probes and TCP_USER_TIMEOUT make the kernel drop
  // the connection (the disconnect handler runs) when the server has not
  // acknowledged data or probes for this long — a link down or a host gone
  // without a reset, which TCP alone notices only after many minutes.
  // 0: the OS defaults. Default: 0.
  int dead_peer_timeout_ms = 0;
};

class RemoteShard {
 public:
  // Gets every inbound message not consumed by a convenience call.
  using MessageHandler = std::function<void(Message)>;
  // Runs once if the connection ends for any reason other than Close(), with
  // the reason (the server's Error if it sent one, else Unavailable).
  using DisconnectHandler = std::function<void(const Status&)>;

  // Connects to options.host:port, retrying with back-off until
  // connect_timeout_ms, and performs the handshake. Either handler may be
  // empty. Errors: InvalidArgument (bad options), Unavailable (could not
  // connect; names the address and the last error), TimedOut (no Welcome in
  // time), or the server's refusal as sent (PermissionDenied, Incompatible,
  // FailedPrecondition, or what the service's OnHello returned).
  static Status Connect(const RemoteShardOptions& options, MessageHandler on_message,
                        DisconnectHandler on_disconnect, std::unique_ptr<RemoteShard>* out);

  // Calls Close().
  ~RemoteShard();
  RemoteShard(const RemoteShard&) = delete;
  RemoteShard& operator=(const RemoteShard&) = delete;

  // The server's Welcome from the handshake.
  const Welcome& welcome() const;
  // False once the connection is lost or closed.
  bool connected() const;

  // Queues `m`; messages are sent in the order of Send calls. Never blocks
  // on the network. Errors: Unavailable once disconnected, ResourceExhausted
  // if the write queue is full or `m` exceeds max_frame_bytes,
  // InvalidArgument if `m` cannot be encoded.
  Status Send(Message m);

  // Convenience calls. The future holds the reply or an error: the server's
  // Error, Unavailable if the connection is lost first, Aborted if Close()
  // comes first. They never time out on their own; use wait_for.
  std::future<StatusOr<TableSchema>> CreateTable(const TableSchema& schema);
  std::future<StatusOr<std::vector<TableSchema>>> ListTables();
  // NotFound if the server answers with no table.
  std::future<StatusOr<TableSchema>> DescribeTable(const std::string& name);
  std::future<StatusOr<StatsReply>> Stats();
  std::future<StatusOr<ReadReply>> Read(uint32_t table, std::vector<uint64_t> rows,
                                        Version min_version = 0, bool subscribe = false);

  // Sends what is queued, closes the connection (waiting up to
  // close_linger_ms for the server to close its side) and joins the I/O
  // thread. Pending calls complete with Aborted; on_disconnect does not run.
  // Idempotent. REQUIRES: not called from a callback.
  void Close();

  // Bytes queued for sending (for tests and monitoring).
  size_t queued_bytes() const;

 private:
  class Impl;
  explicit RemoteShard(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pace::net

#endif  // PACE_NET_REMOTE_SHARD_H_
