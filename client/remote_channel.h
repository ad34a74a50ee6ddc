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
#include <vector>

#include "client/shard_channel.h"
#include "common/mutex.h"
#include "net/remote_shard.h"

namespace pace::client {

// The job one client process's shards belong to (docs/wire-protocol.md,
// "Jobs"), checked on every Welcome; shared by the Client's RemoteChannels.
// - A job given (ClientOptions::job): every shard must report exactly it.
// - None given: the first job name a shard reports is pinned and every shard
//   must report it; automatic ids (a store created without paced --job,
//   common/token_file.h) belong to one shard, so then every shard must have
//   one. Either way each shard's first id is pinned for that shard: a
//   reconnect to a store of another job (restarted on another data dir) is
//   refused.
// What a channel sends as Hello.job is Expected(shard), so a shard of another
// job refuses the Hello itself. Thread-safe.
class JobPin {
 public:
  // `job` = "": none given. `num_shards`: the Client's shards.
  JobPin(std::string job, size_t num_shards);
  // The job shard `shard` must have ("" while none is known).
  std::string Expected(uint32_t shard) const;
  // OK if `shard_job`, from the Welcome of shard `shard` (`who` names it),
  // fits the rules above (pinning it); a shard that reports none (an older
  // paced) is never pinned and refused only when a job was given.
  // FailedPrecondition naming both jobs otherwise.
  Status Check(uint32_t shard, const std::string& who, const std::string& shard_job);

 private:
  const bool given_;
  mutable Mutex mu_;
  std::string job_ GUARDED_BY(mu_);                     // given, or the pinned name
  std::string job_from_ GUARDED_BY(mu_);                // the shard that reported job_
  std::string auto_from_ GUARDED_BY(mu_);               // a shard with an automatic id
  std::vector<std::string> per_shard_ GUARDED_BY(mu_);  // each shard's first id
};

// True for a shard's refusal of a Hello of another job (see JobPin): fatal,
// reconnecting cannot help.
bool IsJobMismatch(const Status& s);

class RemoteChannel : public ShardChannel {
 public:
  // `options` describes the server and the Hello; its connect_timeout_ms
  // bounds Start (the first connection). `job` (shared by every channel of
  // one Client; may be null: no job check) sets options.hello.job on every
  // connect and checks every Welcome.
  RemoteChannel(uint32_t shard, net::RemoteShardOptions options,
                std::shared_ptr<JobPin> job = nullptr);
  ~RemoteChannel() override;

  Status Start(ChannelListener* listener, net::Welcome* welcome) override;
  void Send(net::Message m) override;
  void Shutdown() override;
  std::string Describe() const override;
  uint32_t max_frame_bytes() const override { return options_.max_frame_bytes; }

 private:
  // One connection's handlers share this, so a late callback of an old
  // connection can be recognized by its generation.
  void OnConnMessage(uint64_t gen, net::Message m);
  void OnConnLost(uint64_t gen, const Status& why);
  // One connection attempt, with the job check (JobPin::Check) of its
  // Welcome. *fatal: refused in a way reconnecting cannot mend (our client id
  // is held, another job).
  Status ConnectOnce(int timeout_ms, std::unique_ptr<net::RemoteShard>* out, uint64_t gen,
                     bool* fatal);
  void ReconnectLoop();

  const uint32_t shard_;
  const net::RemoteShardOptions options_;
  const std::shared_ptr<JobPin> job_;
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
  // Send was given a message that cannot fit the frame limit of this end or
  // of the shard (Welcome::max_frame_bytes): sending it again after a
  // reconnect cannot help, so the channel reports this (an Error to the
  // listener) and stops instead of reconnecting.
  Status unsendable_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::deque<net::Message> held_ GUARDED_BY(mu_);  // arrived before ready_
  std::thread reconnect_thread_;
};

}  // namespace pace::client

#endif  // PACE_CLIENT_REMOTE_CHANNEL_H_
