// RemoteChannel: a ShardChannel to a shard server over TCP (net::RemoteShard),
// with automatic reconnection.
//
// When the connection drops, the listener gets OnDisconnect (on the I/O
// thread, after the connection's last message) and a reconnect thread keeps
// trying with back-off (RemoteShard::Connect's own, restarted every few
// seconds) until it succeeds or the channel shuts down. Messages of the new
// connection that arrive before the listener's OnReconnect has run are held
// back and delivered after it, in order. Deciding when a shard has been away
// too long (shard_timeout_ms) is the client's business, not the channel's.
//
// Thread-safety: Send from any thread; Start/Shutdown by the owner.
#ifndef PACE_CLIENT_REMOTE_CHANNEL_H_
#define PACE_CLIENT_REMOTE_CHANNEL_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "client/shard_channel.h"
#include "common/mutex.h"
#include "net/remote_shard.h"

namespace pace::client {

class RemoteChannel : public ShardChannel {
 public:
  // `options` describes the server and the Hello; its connect_timeout_ms
  // bounds Start (the first connection).
  RemoteChannel(uint32_t shard, net::RemoteShardOptions options);
  ~RemoteChannel() override;

  Status Start(ChannelListener* listener, net::Welcome* welcome) override;
  void Send(net::Message m) override;
  void Shutdown() override;
  std::string Describe() const override;

 private:
  // One connection's handlers share this, so a late callback of an old
  // connection can be recognized by its generation.
  void OnConnMessage(uint64_t gen, net::Message m);
  void OnConnLost(uint64_t gen, const Status& why);
  Status ConnectOnce(int timeout_ms, std::unique_ptr<net::RemoteShard>* out, uint64_t gen);
  void ReconnectLoop();

  const uint32_t shard_;
  const net::RemoteShardOptions options_;
  ChannelListener* listener_ = nullptr;

  Mutex mu_;
  CondVar cv_;
  std::unique_ptr<net::RemoteShard> conn_ GUARDED_BY(mu_);  // Send holds mu_
  uint64_t gen_ GUARDED_BY(mu_) = 0;
  bool ready_ GUARDED_BY(mu_) = false;  // listener knows about conn_
  bool lost_ GUARDED_BY(mu_) = false;   // conn_ dropped, reconnect needed
  // The shard closed us with AlreadyExists (another session holds our client
  // id, docs/wire-protocol.md, Hello): never reconnect.
  bool fenced_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::deque<net::Message> held_ GUARDED_BY(mu_);  // arrived before ready_
  std::thread reconnect_thread_;
};

}  // namespace pace::client

#endif  // PACE_CLIENT_REMOTE_CHANNEL_H_
