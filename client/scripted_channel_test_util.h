// ScriptedChannel: a ShardChannel for tests that records what the client
// sends and lets the test play the shard: deliver exact replies, pushes, acks
// and connection events, in an exact order.
//
// Optional auto mode answers every Read with a value from a callback (version
// and applied clock set by the test, or following the Applies) and acks every
// Apply, from its own thread (never inside Send); it can answer the next Reads
// with an Error instead (FailReads).
#ifndef PACE_CLIENT_SCRIPTED_CHANNEL_TEST_UTIL_H_
#define PACE_CLIENT_SCRIPTED_CHANNEL_TEST_UTIL_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "client/client_impl.h"
#include "client/pace.h"
#include "client/shard_channel.h"
#include "common/row.h"

namespace pace::client {

class ScriptedChannel : public ShardChannel {
 public:
  ScriptedChannel(uint32_t shard, net::Welcome welcome) : shard_(shard), welcome_(welcome) {}
  ~ScriptedChannel() override { Shutdown(); }

  Status Start(ChannelListener* listener, net::Welcome* welcome) override {
    listener_ = listener;
    *welcome = welcome_;
    return Status::OK();
  }
  void Send(net::Message m) override {
    std::lock_guard<std::mutex> l(mu_);
    sent_.push_back(m);
    if (auto_) pending_auto_.push_back(std::move(m));
    cv_.notify_all();
  }
  void Shutdown() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    if (auto_thread_.joinable()) auto_thread_.join();
  }
  std::string Describe() const override { return "scripted shard " + std::to_string(shard_); }

  // --- Test side -------------------------------------------------------------
  ChannelListener* listener() const { return listener_; }
  void Deliver(net::Message m) { listener_->OnMessage(shard_, std::move(m)); }

  // Waits (up to 5 s) for the next sent message of type T after the cursor,
  // skipping others; returns false on timeout.
  template <typename T>
  bool Next(T* out, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock<std::mutex> l(mu_);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      while (cursor_ < sent_.size()) {
        if (auto* m = std::get_if<T>(&sent_[cursor_++])) {
          *out = *m;
          return true;
        }
      }
      if (cv_.wait_until(l, deadline) == std::cv_status::timeout && cursor_ >= sent_.size()) {
        return false;
      }
    }
  }
  // Messages sent so far of type T.
  template <typename T>
  std::vector<T> All() {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<T> out;
    for (const auto& m : sent_) {
      if (auto* t = std::get_if<T>(&m)) out.push_back(*t);
    }
    return out;
  }
  // Every message sent so far, in order.
  std::vector<net::Message> AllMessages() {
    std::lock_guard<std::mutex> l(mu_);
    return sent_;
  }
  // Auto mode: the next n Reads are answered with Error{their req_id, code,
  // message, retriable} instead of values.
  void FailReads(int n, StatusCode code, std::string message, bool retriable) {
    std::lock_guard<std::mutex> l(mu_);
    fail_reads_ = n;
    fail_ = net::Error{0, code, std::move(message), retriable};
  }
  // Reads answered with an Error by FailReads so far.
  int failed_reads() {
    std::lock_guard<std::mutex> l(mu_);
    return failed_reads_;
  }
  void SkipAll() {
    std::lock_guard<std::mutex> l(mu_);
    cursor_ = sent_.size();
  }

  // Auto mode: value(table, row) answers Reads at version `version` (applied
  // = version); Applies are acked. With on_apply, each Apply is passed to it
  // before its Ack and the version becomes its clock + 1 (the shard clock of a
  // job with one client process); a part with more parts to come counts as an
  // applied part of the open clock (ReadReply::applied_parts).
  void StartAuto(std::function<std::string(uint32_t, uint64_t)> value, Version version,
                 std::function<void(const net::Apply&)> on_apply = nullptr) {
    value_ = std::move(value);
    version_ = version;
    on_apply_ = std::move(on_apply);
    {
      std::lock_guard<std::mutex> l(mu_);
      auto_ = true;
    }
    auto_thread_ = std::thread([this] { AutoLoop(); });
  }

 private:
  void AutoLoop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return stop_ || !pending_auto_.empty(); });
      if (stop_) return;
      net::Message m = std::move(pending_auto_.front());
      pending_auto_.pop_front();
      bool fail = false;
      net::Error e;
      if (std::holds_alternative<net::Read>(m) && fail_reads_ > 0) {
        --fail_reads_;
        ++failed_reads_;
        fail = true;
        e = fail_;
      }
      l.unlock();
      if (auto* r = std::get_if<net::Read>(&m); r != nullptr && fail) {
        e.req_id = r->req_id;
        Deliver(std::move(e));
      } else if (r != nullptr) {
        net::ReadReply reply{r->req_id, version_, version_, {}, parts_};
        for (uint64_t row : r->rows) reply.rows.push_back({r->table, row, value_(r->table, row)});
        Deliver(std::move(reply));
      } else if (auto* a = std::get_if<net::Apply>(&m)) {
        if (on_apply_) {
          on_apply_(*a);
          if (a->more) {
            parts_ = a->part + 1;
          } else {
            version_ = a->clock + 1;
            parts_ = 0;
          }
        }
        Deliver(net::Ack{a->clock, false, a->part});
      }
      l.lock();
    }
  }

  const uint32_t shard_;
  const net::Welcome welcome_;
  ChannelListener* listener_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<net::Message> sent_;
  size_t cursor_ = 0;
  bool auto_ = false;
  bool stop_ = false;
  std::deque<net::Message> pending_auto_;
  int fail_reads_ = 0;    // guarded by mu_
  int failed_reads_ = 0;  // guarded by mu_
  net::Error fail_;       // guarded by mu_
  // Set before the auto thread starts, then used only by it.
  std::function<std::string(uint32_t, uint64_t)> value_;
  std::function<void(const net::Apply&)> on_apply_;
  Version version_ = 0;
  uint32_t parts_ = 0;
  std::thread auto_thread_;
};

// Opens a client with `options` on one scripted shard whose Welcome is `w`
// with shard 0 of 1 and options.num_clients clients; *channel is that shard.
inline Status OpenOnScriptedShard(const ClientOptions& options, net::Welcome w,
                                  std::unique_ptr<Client>* client, ScriptedChannel** channel) {
  w.shard_id = 0;
  w.num_shards = 1;
  w.num_clients = options.num_clients;
  auto ch = std::make_unique<ScriptedChannel>(0, w);
  *channel = ch.get();
  std::vector<std::unique_ptr<ShardChannel>> chans;
  chans.push_back(std::move(ch));
  return Client::Impl::Create(options, std::move(chans), false, client);
}

// The same with a fresh shard's Welcome (nothing applied).
inline Status OpenOnScriptedShard(const ClientOptions& options, std::unique_ptr<Client>* client,
                                  ScriptedChannel** channel) {
  return OpenOnScriptedShard(options, net::Welcome{}, client, channel);
}

// Creates `schema` through `client`, with `channel` playing the shard: it
// answers the CreateTable with the schema under table id `id`.
inline Status CreateTableOnScriptedShard(Client* client, ScriptedChannel* channel,
                                         const TableSchema& schema, uint32_t id, Table* t) {
  auto f = std::async(std::launch::async, [&] { return client->CreateTable(schema, t); });
  net::CreateTable req;
  if (!channel->Next(&req)) {
    // Unblocks the CreateTable (the future waits for it).
    channel->Deliver(net::Error{0, StatusCode::kInternal, "no CreateTable sent"});
    f.wait();
    return Status::Internal("the client sent no CreateTable");
  }
  TableSchema created = req.schema;
  created.id = id;
  channel->Deliver(net::TablesReply{req.req_id, {created}});
  return f.get();
}

// Auto mode as a shard that adds every Apply to *stored (under *mu) and
// answers Reads with it: rows of `width` i64 elements, a row never written
// reads as zeros. `mu` and `stored` outlive the channel's auto thread.
inline void StartSummingShard(ScriptedChannel* channel, uint32_t width, std::mutex* mu,
                              std::map<uint64_t, std::vector<int64_t>>* stored) {
  channel->StartAuto(
      [mu, stored, width](uint32_t, uint64_t row) {
        std::lock_guard<std::mutex> l(*mu);
        auto it = stored->find(row);
        return EncodeDense(it == stored->end() ? std::vector<int64_t>(width) : it->second);
      },
      0,
      [mu, stored, width](const net::Apply& a) {
        std::lock_guard<std::mutex> l(*mu);
        for (const net::DeltaRow& u : a.updates) {
          std::vector<int64_t> d = DecodeDense<int64_t>(u.bytes);
          std::vector<int64_t>& v = (*stored)[u.row];
          v.resize(width);
          for (uint32_t i = 0; i < width; ++i) v[i] += d[i];
        }
      });
}

}  // namespace pace::client

#endif  // PACE_CLIENT_SCRIPTED_CHANNEL_TEST_UTIL_H_
