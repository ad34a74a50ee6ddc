// EmbeddedChannel: a ShardChannel to a ShardService running in this process
// (embedded mode: ClientOptions::servers empty). The channel owns the service,
// opened on ClientOptions::data_dir as shard 0 of 1.
//
// Like a network, it delivers through queues: client->service messages are
// handed to the service by a dedicated service thread, service->client
// messages to the listener by a dedicated delivery thread, each in order.
// So the service (which sends while holding its lock) and the client (which
// sends while holding its own) never call into each other synchronously, and
// no lock-order inversion is possible. Each thread takes everything queued
// at once and is woken only when its queue was empty and it waits (one
// condition variable per direction): a burst of messages costs one wake-up,
// not one per message.
//
// For tests it can simulate a lost connection (TEST_SimulateReconnect: messages in
// flight in either direction are lost, the service sees the session go and a
// new one come) and a server restart (TEST_SimulateRestart: additionally the
// service is closed and reopened from its data directory).
//
// Thread-safety: Send and the TEST_Simulate* calls are safe from any thread.
#ifndef PACE_CLIENT_EMBEDDED_CHANNEL_H_
#define PACE_CLIENT_EMBEDDED_CHANNEL_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "client/pace.h"
#include "client/shard_channel.h"
#include "common/mutex.h"
#include "server/shard_service.h"

namespace pace::client {

class EmbeddedChannel : public ShardChannel {
 public:
  // `incarnation`: this process's Hello incarnation (docs/wire-protocol.md,
  // Hello): the shard takes back the parts of an incomplete clock that
  // another process of this client sent. 0: none (the parts stay).
  explicit EmbeddedChannel(const ClientOptions& options, uint64_t incarnation = 0);
  ~EmbeddedChannel() override;

  Status Start(ChannelListener* listener, net::Welcome* welcome) override;
  void Send(net::Message m) override;
  void Shutdown() override;
  std::string Describe() const override;

  // Test hooks. Queue a disconnect + reconnect (or restart) event that the
  // delivery thread performs in order with the messages before it; return
  // once it has been performed.
  void TEST_SimulateReconnect();
  void TEST_SimulateRestart();

 private:
  class InProcSession;
  struct Item {
    uint64_t epoch = 0;
    enum Kind { kMessage, kReconnect, kRestart } kind = kMessage;
    net::Message m;
  };

  Status OpenService() REQUIRES(service_mu_);
  // Opens a new session on the service (epoch_ + 1).
  Status Connect(net::Welcome* welcome) REQUIRES(service_mu_);
  // Called by InProcSession::Send/Close.
  void ToClient(uint64_t epoch, net::Message m);
  void ServiceLoop();
  void DeliveryLoop();
  void Reconnect(bool restart);
  void Simulate(int kind);

  const ClientOptions options_;
  const uint64_t incarnation_;
  ChannelListener* listener_ = nullptr;

  Mutex mu_;             // a leaf lock
  CondVar service_cv_;   // to_service_ got an item (or stopping_)
  CondVar delivery_cv_;  // to_client_ got an item (or stopping_)
  CondVar event_cv_;     // events_done_ advanced (or stopping_)
  std::deque<Item> to_service_ GUARDED_BY(mu_);
  std::deque<Item> to_client_ GUARDED_BY(mu_);
  // The service / delivery thread is blocked waiting for its queue.
  bool service_waiting_ GUARDED_BY(mu_) = false;
  bool delivery_waiting_ GUARDED_BY(mu_) = false;
  uint64_t epoch_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  uint64_t events_requested_ GUARDED_BY(mu_) = 0;
  uint64_t events_done_ GUARDED_BY(mu_) = 0;

  // Held while the service handles a batch of messages or is replaced.
  Mutex service_mu_ ACQUIRED_BEFORE(mu_);
  std::shared_ptr<InProcSession> session_ GUARDED_BY(service_mu_);
  std::unique_ptr<ShardService> service_ GUARDED_BY(service_mu_);

  std::thread service_thread_;
  std::thread delivery_thread_;
};

}  // namespace pace::client

#endif  // PACE_CLIENT_EMBEDDED_CHANNEL_H_
