#include "client/embedded_channel.h"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "common/thread_name.h"

namespace pace::client {

namespace {
std::atomic<uint64_t> g_next_session_id{1};
}  // namespace

class EmbeddedChannel::InProcSession : public net::Session {
 public:
  InProcSession(EmbeddedChannel* channel, net::Hello hello, uint64_t epoch)
      : channel_(channel), hello_(std::move(hello)), epoch_(epoch) {}

  uint64_t id() const override { return id_; }
  const net::Hello& hello() const override { return hello_; }
  void Send(net::Message m) override { channel_->ToClient(epoch_, std::move(m)); }
  void Close(const Status& reason) override {
    // In-process there is no connection to drop: the client learns why.
    if (!reason.ok()) channel_->ToClient(epoch_, net::Error{0, reason.code(), reason.message()});
  }

 private:
  EmbeddedChannel* const channel_;
  const uint64_t id_ = g_next_session_id.fetch_add(1);
  const net::Hello hello_;
  const uint64_t epoch_;
};

namespace {}  // namespace

EmbeddedChannel::EmbeddedChannel(const ClientOptions& options, uint64_t incarnation)
    : options_(options), incarnation_(incarnation) {}

EmbeddedChannel::~EmbeddedChannel() { Shutdown(); }

std::string EmbeddedChannel::Describe() const {
  return "embedded shard (" + options_.data_dir + ")";
}

Status EmbeddedChannel::OpenService() {
  ShardServiceOptions so;
  so.data_dir = options_.data_dir;
  ClientOptions resolved = options_;
  ResolveMemoryBudget(&resolved);  // components left at 0: their memory_mb shares
  const EmbeddedShardOptions& e = resolved.embedded;
  so.store.block_cache_mb = e.block_cache_mb;
  so.store.write_buffer_mb = e.write_buffer_mb;
  so.store.row_cache_mb = e.row_cache_mb;
  so.store.sync = e.sync;
  so.store.clock_log = e.clock_log;
  so.store.durable = e.durable;
  so.checkpoint_every = e.checkpoint_every;
  so.checkpoint_dir = e.checkpoint_dir;
  so.checkpoint_keep = e.checkpoint_keep;
  so.holdback_warn_ms = e.holdback_warn_ms;
  so.store.shard_id = 0;
  so.store.num_shards = 1;
  so.store.num_clients = options_.num_clients;
  so.store.job = options_.job;  // a store of another job is refused at open
  Status s = ShardService::Open(so, &service_);
  return s.WithPrefix("opening the embedded shard in '" + options_.data_dir + "'");
}

Status EmbeddedChannel::Connect(net::Welcome* welcome) {
  net::Hello hello;
  hello.client_id = options_.client_id;
  hello.token = options_.token;
  hello.role = net::Hello::kClientProcess;
  hello.incarnation = incarnation_;
  hello.features = net::Hello::kAbsentRows;  // InstallRows computes them
  // Unavailable: the shard is taking back an incomplete clock of this
  // client's previous process (on its writer); served once that is done.
  Status hi = service_->OnHello(hello, welcome);
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(std::max<int64_t>(options_.connect_timeout_ms, 1));
  while (hi.IsUnavailable() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    hi = service_->OnHello(hello, welcome);
  }
  RETURN_IF_ERROR(hi);
  uint64_t epoch;
  {
    MutexLock l(&mu_);
    epoch = ++epoch_;
  }
  session_ = std::make_shared<InProcSession>(this, hello, epoch);
  service_->OnConnect(session_);
  return Status::OK();
}

Status EmbeddedChannel::Start(ChannelListener* listener, net::Welcome* welcome) {
  listener_ = listener;
  {
    MutexLock l(&service_mu_);
    RETURN_IF_ERROR(OpenService());
    RETURN_IF_ERROR(Connect(welcome));
  }
  service_thread_ = std::thread([this] {
    SetThreadName("pace-embed-svc");
    ServiceLoop();
  });
  delivery_thread_ = std::thread([this] {
    SetThreadName("pace-embed-dlv");
    DeliveryLoop();
  });
  return Status::OK();
}

void EmbeddedChannel::Send(net::Message m) {
  MutexLock l(&mu_);
  if (stopping_) return;
  to_service_.push_back(Item{epoch_, Item::kMessage, std::move(m)});
  if (service_waiting_) service_cv_.Signal();
}

void EmbeddedChannel::ToClient(uint64_t epoch, net::Message m) {
  MutexLock l(&mu_);
  if (stopping_ || epoch != epoch_) return;  // the session is gone
  to_client_.push_back(Item{epoch, Item::kMessage, std::move(m)});
  if (delivery_waiting_) delivery_cv_.Signal();
}

void EmbeddedChannel::TEST_SimulateReconnect() { Simulate(Item::kReconnect); }

void EmbeddedChannel::TEST_SimulateRestart() { Simulate(Item::kRestart); }

void EmbeddedChannel::Simulate(int kind) {
  MutexLock l(&mu_);
  uint64_t ticket = ++events_requested_;
  to_client_.push_back(Item{0, static_cast<Item::Kind>(kind), {}});
  if (delivery_waiting_) delivery_cv_.Signal();
  event_cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return stopping_ || events_done_ >= ticket; });
}

void EmbeddedChannel::ServiceLoop() {
  std::deque<Item> batch;
  for (;;) {
    {
      MutexLock l(&mu_);
      service_waiting_ = true;
      service_cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return stopping_ || !to_service_.empty(); });
      service_waiting_ = false;
      // Drain what was sent before Shutdown: those are the client's batches.
      if (to_service_.empty()) return;
      batch.swap(to_service_);
    }
    MutexLock s(&service_mu_);
    for (Item& item : batch) {
      uint64_t current;
      {
        // A reconnect on the delivery thread may have ended the session of
        // the items taken: they are lost, as on a dropped connection.
        MutexLock g(&mu_);
        current = epoch_;
      }
      if (item.epoch == current && service_ != nullptr) {
        service_->OnMessage(session_, std::move(item.m));
      }
    }
    batch.clear();
  }
}

void EmbeddedChannel::DeliveryLoop() {
  std::deque<Item> batch;
  for (;;) {
    {
      MutexLock l(&mu_);
      delivery_waiting_ = true;
      delivery_cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return stopping_ || !to_client_.empty(); });
      delivery_waiting_ = false;
      if (stopping_) return;
      batch.swap(to_client_);
    }
    for (Item& item : batch) {
      if (item.kind == Item::kMessage) {
        {
          // Only this thread changes epoch_ after Start (Reconnect), but a
          // Reconnect earlier in this batch makes the rest of its messages
          // stale.
          MutexLock l(&mu_);
          if (stopping_) return;
          if (item.epoch != epoch_) continue;
        }
        listener_->OnMessage(0, std::move(item.m));
        continue;
      }
      Reconnect(item.kind == Item::kRestart);
      MutexLock l(&mu_);
      ++events_done_;
      event_cv_.SignalAll();
    }
    batch.clear();
  }
}

void EmbeddedChannel::Reconnect(bool restart) {
  {
    // Everything in flight on the old session is lost, as on a dropped TCP
    // connection.
    MutexLock l(&mu_);
    ++epoch_;
    to_service_.clear();
    std::deque<Item> keep;  // later simulated events stay queued
    for (Item& it : to_client_) {
      if (it.kind != Item::kMessage) keep.push_back(std::move(it));
    }
    to_client_.swap(keep);
  }
  listener_->OnDisconnect(
      0, Status::Unavailable(restart ? "simulated restart" : "simulated disconnect"));
  net::Welcome welcome;
  Status s;
  {
    MutexLock l(&service_mu_);
    service_->OnDisconnect(session_);
    session_.reset();
    if (restart) {
      service_.reset();
      s = OpenService();
    }
    if (s.ok()) s = Connect(&welcome);
  }
  if (!s.ok()) {
    LOG(ERROR) << "embedded shard could not be reopened: " << s.ToString();
    listener_->OnMessage(0, net::Error{0, s.code(), s.message()});
    return;
  }
  listener_->OnReconnect(0, welcome);
}

void EmbeddedChannel::Shutdown() {
  {
    MutexLock l(&mu_);
    if (stopping_ && !service_thread_.joinable()) return;
    stopping_ = true;
    service_cv_.SignalAll();
    delivery_cv_.SignalAll();
    event_cv_.SignalAll();
  }
  if (delivery_thread_.joinable()) delivery_thread_.join();
  if (service_thread_.joinable()) service_thread_.join();
  MutexLock l(&service_mu_);
  if (service_ != nullptr && session_ != nullptr) service_->OnDisconnect(session_);
  session_.reset();
}

}  // namespace pace::client
