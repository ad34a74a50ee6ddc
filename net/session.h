// The seam between the transport (net/) and a service (server/): a Session is
// one authenticated peer; a ServiceHandler is what the transport calls.
//
// The TCP transport (net/server.h) and the embedded in-process channel both
// implement Session, so a service cannot tell them apart.
#ifndef PACE_NET_SESSION_H_
#define PACE_NET_SESSION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "net/messages.h"

namespace pace::net {

// One connected, authenticated peer. Thread-safe: Send and Close may be called
// from any thread, also after the peer went away (then they do nothing).
// Messages sent on one session arrive in the order Send was called.
class Session {
 public:
  virtual ~Session() = default;
  // Unique per process for the life of the process.
  virtual uint64_t id() const = 0;
  virtual const Hello& hello() const = 0;
  // Where the peer connects from ("host:port"), for messages; empty if the
  // transport has no address (in-process).
  virtual std::string peer() const { return std::string(); }
  // Bytes queued for sending to this peer, and over every session of its
  // transport; 0 where the transport queues nothing (in-process).
  virtual size_t queued_bytes() const { return 0; }
  virtual size_t transport_queued_bytes() const { return 0; }
  // Queues `m` for delivery. Never blocks on the network.
  virtual void Send(Message m) = 0;
  // Sends an Error (if `reason` is not OK) and closes the session.
  virtual void Close(const Status& reason) = 0;
};

// Implemented by a service. The transport calls these from its I/O threads;
// calls for one session are never concurrent with each other (they come in
// order), calls for different sessions may be.
class ServiceHandler {
 public:
  virtual ~ServiceHandler() = default;
  // A Hello whose wire version and token the transport has already checked.
  // Fill `welcome` and return OK to accept, or an error to refuse the peer
  // (the transport sends it as an Error and closes).
  virtual Status OnHello(const Hello& hello, Welcome* welcome) = 0;
  // The session was accepted (after OnHello returned OK).
  virtual void OnConnect(const std::shared_ptr<Session>& session) = 0;
  // A verified message other than Hello.
  virtual void OnMessage(const std::shared_ptr<Session>& session, Message m) = 0;
  // The session is gone; no more OnMessage calls for it follow.
  virtual void OnDisconnect(const std::shared_ptr<Session>& session) = 0;
};

}  // namespace pace::net

#endif  // PACE_NET_SESSION_H_
