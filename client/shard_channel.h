// ShardChannel: the client's ordered, message-level link to one shard, hiding
// whether the shard runs in this process (EmbeddedChannel) or behind TCP
// (RemoteChannel). Internal to client/.
//
// Contract (both implementations):
// - Send() never blocks on the peer and never calls back into the listener
//   synchronously, so callers may hold their own locks while sending. Messages
//   are delivered in Send order; while disconnected they are dropped (the
//   client keeps what it must re-send).
// - Inbound messages reach the listener from one thread per channel, in the
//   order the shard sent them, never concurrently with each other or with
//   OnDisconnect/OnReconnect of the same channel.
// - After OnDisconnect no message of the old connection is delivered.
//   OnReconnect runs before any message of the new connection, after Sends go
//   to the new connection.
//
// Thread-safety: Send is safe from any thread. Start/Shutdown are called once
// each by the owner.
#ifndef PACE_CLIENT_SHARD_CHANNEL_H_
#define PACE_CLIENT_SHARD_CHANNEL_H_

#include <cstdint>
#include <string>

#include "common/status.h"
#include "net/messages.h"

namespace pace::client {

class ChannelListener {
 public:
  virtual ~ChannelListener() = default;
  virtual void OnMessage(uint32_t shard, net::Message m) = 0;
  // The connection was lost; messages sent since the last OnReconnect/Start
  // may not have arrived.
  virtual void OnDisconnect(uint32_t shard, const Status& why) = 0;
  // A new connection is up (after OnDisconnect). `welcome` is its handshake.
  virtual void OnReconnect(uint32_t shard, const net::Welcome& welcome) = 0;
};

class ShardChannel {
 public:
  virtual ~ShardChannel() = default;
  // Connects (within the channel's connect timeout) and fills `welcome`.
  // After OK, inbound messages flow to `listener`, which must outlive
  // Shutdown().
  virtual Status Start(ChannelListener* listener, net::Welcome* welcome) = 0;
  virtual void Send(net::Message m) = 0;
  // Stops all threads; no listener calls after it returns. Idempotent.
  virtual void Shutdown() = 0;
  // For messages: "shard 1 (127.0.0.1:7101)" or "embedded shard (./pace-data)".
  virtual std::string Describe() const = 0;
  // The largest message payload this end sends and accepts (its own frame
  // limit; the shard's comes in Welcome::max_frame_bytes). 0: none (in
  // process).
  virtual uint32_t max_frame_bytes() const { return 0; }
};

}  // namespace pace::client

#endif  // PACE_CLIENT_SHARD_CHANNEL_H_
