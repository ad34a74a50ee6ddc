// The TCP transport of a shard: accepts connections, runs the handshake and
// hands authenticated sessions and their messages to a ServiceHandler
// (net/session.h). Protocol: docs/wire-protocol.md.
//
// Admission: a new connection is always accepted while some open connection
// has not sent its Hello yet; the one that waited longest is closed to make
// room (see ServerOptions::max_connections). So silent peers cannot lock
// clients out.
//
// Per connection: the first frame must be Hello with wire_version ==
// kWireVersion (else Error{Incompatible}) and the job token (compared in
// constant time; else Error{PermissionDenied}); then OnHello decides, a
// Welcome is sent and OnConnect runs. Every later frame is size-checked,
// verified and decoded before OnMessage sees it. A bad frame (length 0 or
// above max_frame_bytes, failed verification, unknown type, a second Hello)
// gets Error{code, message} and that connection is closed; every other
// connection is unaffected.
//
// Back-pressure: while a session has max_write_queue_bytes or more queued for
// sending, the server stops reading and dispatching that peer's frames, and
// resumes when the queue drained below half. A Send that would take the queue
// above max_write_queue_hard_bytes (a service that keeps pushing to a peer
// that does not read) closes the session with Error{ResourceExhausted}.
//
// Threads: io_threads I/O threads run every ServiceHandler callback; calls for
// one session are serialized (a per-session strand), calls for different
// sessions run in parallel. Callbacks must not block.
//
// Thread-safety: Start and Stop must be called from one thread, never from a
// ServiceHandler callback; port() and stats() from any thread.
#ifndef PACE_NET_SERVER_H_
#define PACE_NET_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "net/codec.h"
#include "net/session.h"

namespace pace::net {

struct ServerOptions {
  // Address to listen on. Default: "127.0.0.1" (local only).
  std::string host = "127.0.0.1";
  // TCP port; 0 picks an ephemeral port (see Server::port()). Default: 0.
  uint16_t port = 0;
  // Threads running the io_context. Default: 2.
  int io_threads = 2;
  // Largest payload: a larger inbound length prefix is refused before any
  // memory is reserved; a larger outbound message closes its session with
  // Error{ResourceExhausted} (the peer would refuse it). Default: 64 MiB.
  uint32_t max_frame_bytes = kDefaultMaxFrameBytes;
  // The job token every Hello must carry (an empty token accepts only an
  // empty token); Server::SetToken replaces it before Start. Default: "".
  std::string token;
  // What a peer that sent no token is told to do, after "no job token: this
  // shard requires one: " (paced names the token file and --insecure).
  // Default: "pass the --token_file it was started with".
  std::string missing_token_hint = "pass the --token_file it was started with";
  // Per-session queued outbound bytes at which the server stops reading that
  // peer (resumes below half). Default: 64 MiB.
  size_t max_write_queue_bytes = 64u << 20;
  // Per-session queued outbound bytes a Send may not exceed; the session is
  // closed with ResourceExhausted instead. Must be >= max_write_queue_bytes.
  // Default: 256 MiB.
  size_t max_write_queue_hard_bytes = 256u << 20;
  // A connection that has not completed its Hello this long after accept is
  // sent Error{TimedOut} and closed. Default: 10000 ms.
  int handshake_timeout_ms = 10000;
  // After sending an Error, how long to wait for the peer to close before
  // closing anyway. Default: 1000 ms.
  int linger_ms = 1000;
  // Verifier limits for inbound payloads.
  DecodeOptions decode;

  // --- Connection limits (every refusal is logged with its reason, at most
  // one line per second per reason with a count of the rest).
  //
  // Connections open at once, handshaking or in session. The cap actually
  // used is also at most the soft RLIMIT_NOFILE minus reserved_fds, so the
  // connections can never take the file descriptors the store needs. At the
  // cap a new connection takes the slot of the connection that has waited
  // longest for its Hello (that one is sent Error{ResourceExhausted} and
  // closed at once); only when every open connection is a session is the new
  // one closed after Error{ResourceExhausted}. 0: only that fd budget.
  // Default: 4096.
  int max_connections = 4096;
  // Connections that have not completed their Hello. At the cap a new
  // connection takes the slot of the one that has waited longest, as above:
  // peers that connect and stay silent can neither fill the fd budget nor
  // keep a client that sends its Hello at once out, however fast they
  // re-open. Each is also closed after handshake_timeout_ms. 0: no separate
  // cap. Default: 256.
  int max_handshaking_connections = 256;
  // File descriptors kept out of the connection budget for the rest of the
  // process (RocksDB's WAL, SST and MANIFEST files, logs). Default: 256.
  int reserved_fds = 256;
  // An authenticated session that stops sending in the middle of a frame
  // (part of a frame received, no byte for this long) is sent Error{TimedOut}
  // and closed. Time the server itself stops reading (back-pressure) does not
  // count. 0: never. Default: 30000 ms.
  int frame_stall_timeout_ms = 30000;
  // An authenticated session that sends no byte at all for this long is
  // closed the same way. Clients send nothing while their workers compute or
  // wait, so this is off by default. 0: never. Default: 0.
  int idle_timeout_ms = 0;
};

// Raises the process's soft RLIMIT_NOFILE to its hard limit (logged) and
// returns the soft limit in force afterwards (0: unlimited or unknown). A
// process-wide change: paced calls it at start, before opening its store, so
// RocksDB and the connection budget (ServerOptions::reserved_fds) share the
// larger limit. Thread-safe.
uint64_t RaiseOpenFileLimit();

// The connection caps Server::Start computed (see ServerOptions).
struct ConnectionLimits {
  uint64_t fd_soft_limit = 0;           // RLIMIT_NOFILE after Start (0: unknown)
  int max_connections = 0;              // 0: no cap
  int max_handshaking_connections = 0;  // 0: no separate cap
};

// Counters for monitoring and tests. A snapshot; fields are not mutually
// consistent.
struct ServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_open = 0;      // accepted and not yet closed
  uint64_t sessions_active = 0;       // handshake done, not yet disconnected
  uint64_t handshakes_refused = 0;    // bad version, token, first frame, OnHello
  uint64_t handshakes_timed_out = 0;  // no complete Hello within handshake_timeout_ms
  uint64_t connections_refused = 0;   // over max_connections or the fd budget, all in session
  uint64_t handshakes_shed = 0;       // closed before their Hello to make room for a new one
  uint64_t sessions_timed_out = 0;    // stalled mid-frame or idle (frame_stall / idle timeouts)
  uint64_t bad_frames = 0;            // size, verification or decoding failures
  uint64_t read_pauses = 0;           // times a session stopped reading (back-pressure)
  size_t queued_bytes = 0;            // outbound bytes queued over all sessions now
  size_t peak_write_queue_bytes = 0;  // largest queue any one session ever had
};

class Server {
 public:
  explicit Server(ServerOptions options);
  // Calls Stop().
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Resolves options.host (an IP address or a name, as the client does:
  // "localhost"), binds and listens, without accepting yet (connections wait
  // in the backlog until Start), so a caller learns that the port is taken
  // before it sets anything else up. Idempotent. Errors: InvalidArgument for
  // a host that does not resolve, IOError if the address cannot be bound
  // ("127.0.0.1:7100: Address already in use"). REQUIRES: before Start.
  Status Listen();
  // Listens (if Listen was not called) and starts the I/O threads and
  // accepting. `handler` must outlive Stop().
  // Errors: InvalidArgument for bad options, IOError if the address cannot be
  // bound (e.g. "127.0.0.1:7100: Address already in use"), FailedPrecondition
  // if already started.
  Status Start(ServiceHandler* handler);
  // Replaces options.token: paced creates its token in the data dir, which it
  // opens only after Listen. FailedPrecondition once started.
  Status SetToken(std::string token);

  // The bound port (useful with port 0). REQUIRES: Listen or Start returned OK.
  uint16_t port() const;
  // Whether the bound address is a loopback one (127.0.0.0/8, ::1), which
  // only processes on this host can reach. REQUIRES: Listen or Start
  // returned OK.
  bool loopback() const;

  // Stops accepting, closes every connection (OnDisconnect runs for each
  // accepted session), waits for their handlers and joins the threads.
  // Idempotent. Sessions held by the handler afterwards are inert (Send and
  // Close do nothing). REQUIRES: not called from a ServiceHandler callback.
  void Stop();

  ServerStats stats() const;
  // The connection caps in force. REQUIRES: Start returned OK.
  ConnectionLimits limits() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pace::net

#endif  // PACE_NET_SERVER_H_
