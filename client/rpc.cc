// Client::Impl: requests to shards and their replies (Call, with retries of
// retriable errors; the retry thread of cache-filling Reads), the wait for
// progress, and the Stats requests (ShardStats, JobClock, Laggards).
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <utility>
#include <variant>

#include "client/client_impl.h"
#include "common/thread_name.h"

namespace pace {

using client::InFlight;
using client::RpcCall;
using client::ShardState;

namespace client {

uint64_t ApproxBytes(const net::Message& m) {
  constexpr uint64_t kHeader = 16;
  constexpr uint64_t kRowKey = 12;
  auto rows = [&](const auto& v) {
    uint64_t n = 0;
    for (const auto& r : v) n += r.bytes.size() + kRowKey;
    return n;
  };
  return kHeader + std::visit(
                       [&](const auto& body) -> uint64_t {
                         using T = std::decay_t<decltype(body)>;
                         if constexpr (std::is_same_v<T, net::Apply>) {
                           return rows(body.updates);
                         } else if constexpr (std::is_same_v<T, net::ReadReply> ||
                                              std::is_same_v<T, net::Push>) {
                           return rows(body.rows);
                         } else if constexpr (std::is_same_v<T, net::Read> ||
                                              std::is_same_v<T, net::Unsubscribe>) {
                           return 8 * body.rows.size();
                         } else {
                           return 0;
                         }
                       },
                       m);
}

}  // namespace client

void Client::Impl::SendToShard(uint32_t k, net::Message m) {
  bytes_sent_.fetch_add(client::ApproxBytes(m), std::memory_order_relaxed);
  shards_[k]->channel->Send(std::move(m));
}

namespace {

// The req_id field of a request that expects a reply, or nullptr.
uint64_t* ReqIdOf(net::Message* m) {
  return std::visit(
      [](auto& body) -> uint64_t* {
        using T = std::decay_t<decltype(body)>;
        if constexpr (std::is_same_v<T, net::CreateTable> || std::is_same_v<T, net::ListTables> ||
                      std::is_same_v<T, net::DescribeTable> ||
                      std::is_same_v<T, net::StatsRequest> || std::is_same_v<T, net::Read>) {
          return &body.req_id;
        } else {
          return nullptr;
        }
      },
      *m);
}

}  // namespace

Status Client::Impl::Call(uint32_t k, net::Message request, net::Message* reply) {
  uint64_t* req_id = ReqIdOf(&request);
  CHECK(req_id != nullptr && *req_id != 0) << "Call needs a request with a req_id";
  ShardState& sh = *shards_[k];
  InFlight attempts;  // counts the retriable errors
  for (;;) {
    const uint64_t id = *req_id;
    auto rpc = std::make_shared<RpcCall>();
    {
      MutexLock l(&sh.mu);
      sh.requests.emplace(id, InFlight{request, rpc});
    }
    SendToShard(k, request);
    {
      // Woken by the reply (HandleReply) or a health change (NotifyAll).
      std::unique_lock<std::mutex> l(rpc->mu);
      while (!rpc->done) {
        Status h = ShardHealth(k);
        if (!h.ok()) {
          l.unlock();
          MutexLock g(&sh.mu);
          sh.requests.erase(id);
          return h;
        }
        client::WaitUntil(rpc->cv, l, HealthDeadline(k));
      }
      *reply = std::move(rpc->reply);
    }
    const auto* err = std::get_if<net::Error>(reply);
    if (err == nullptr) return Status::OK();
    Status why = err->ToStatus();
    if (!err->retriable) return why;
    Status final;
    const int64_t delay_ms = NextRetryDelayMs(&attempts, why, &final);
    if (delay_ms < 0) return final;
    // Back off; only a health change ends the wait early.
    const client::Deadline due =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms);
    {
      std::unique_lock<std::mutex> l(progress_mu_);
      for (;;) {
        Status h = ShardHealth(k);
        if (!h.ok()) return h;
        if (std::chrono::steady_clock::now() >= due) break;
        client::WaitUntil(progress_cv_, l, std::min(due, HealthDeadline(k)));
      }
    }
    requests_retried_.fetch_add(1, std::memory_order_relaxed);
    *req_id = NextReqId();
  }
}

int64_t Client::Impl::NextRetryDelayMs(InFlight* req, const Status& why, Status* final) {
  const int64_t now = SteadyNowMs();
  if (req->retries == 0) req->first_error_ms = now;
  ++req->retries;
  const int64_t failing_ms = now - req->first_error_ms;
  if (failing_ms >= options_.shard_timeout_ms) {
    *final =
        why.WithPrefix("still failing after " + std::to_string(req->retries - 1) +
                       " retries over " + std::to_string(failing_ms) + " ms (shard_timeout_ms " +
                       std::to_string(options_.shard_timeout_ms) + "); last error");
    return -1;
  }
  int64_t delay = options_.retry_backoff_min_ms;
  for (int i = 1; i < req->retries && delay < options_.retry_backoff_max_ms; ++i) delay *= 2;
  return std::min(delay, options_.retry_backoff_max_ms);
}

void Client::Impl::ScheduleRetry(uint32_t k, InFlight req, int64_t delay_ms) {
  MutexLock l(&retry_mu_);
  if (retry_stop_) return;  // the client is being destroyed
  if (!retry_thread_.joinable())
    retry_thread_ = std::thread([this] {
      SetThreadName("pace-retry");
      RetryLoop();
    });
  retries_.emplace(std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms),
                   PendingRetry{k, std::move(req)});
  retry_cv_.Signal();
}

void Client::Impl::RetryLoop() {
  MutexLock l(&retry_mu_);
  while (!retry_stop_) {
    if (retries_.empty()) {
      retry_cv_.Wait(&retry_mu_);
      continue;
    }
    auto it = retries_.begin();
    if (std::chrono::steady_clock::now() < it->first) {
      const client::Deadline due = it->first;
      retry_cv_.WaitUntil(&retry_mu_, due, [&]() REQUIRES(retry_mu_) {
        return retry_stop_ || retries_.empty() || retries_.begin()->first < due;
      });
      continue;
    }
    PendingRetry r = std::move(it->second);
    retries_.erase(it);
    retry_mu_.Unlock();
    // Only cache-filling Reads are queued (Call retries in its own thread).
    if (auto* read = std::get_if<net::Read>(&r.req.msg)) {
      if (shards_[r.shard]->failed.load(std::memory_order_acquire)) {
        ReleaseReadMarks(*read);  // nobody will answer it
      } else {
        requests_retried_.fetch_add(1, std::memory_order_relaxed);
        SendCacheRead(r.shard, std::move(*read), r.req.retries, r.req.first_error_ms);
      }
    }
    retry_mu_.Lock();
  }
}
Status Client::Impl::WaitProgress(const std::function<bool()>& done,
                                  const std::function<Status()>& health, client::WorkerStats* ws,
                                  const char* what) {
  auto start = std::chrono::steady_clock::now();
  Status result;
  {
    std::unique_lock<std::mutex> l(progress_mu_);
    while (!done()) {
      Status h = health();
      if (!h.ok()) {
        result = h.WithPrefix(what);
        break;
      }
      // Woken by acks, replies, pushes and health changes.
      client::WaitUntil(progress_cv_, l, AllShardsHealthDeadline());
    }
  }
  if (ws != nullptr) {
    ws->clock_blocked_ns.Add(
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now() - start)
                                  .count()));
  }
  return result;
}
Status Client::Impl::ShardStats(uint32_t k, net::StatsReply* stats) {
  net::Message reply;
  RETURN_IF_ERROR(Call(k, net::StatsRequest{NextReqId()}, &reply));
  auto* r = std::get_if<net::StatsReply>(&reply);
  if (r == nullptr) return Status::Internal("shard " + std::to_string(k) + ": no StatsReply");
  NoteShardClock(k, r->shard_clock);
  *stats = std::move(*r);
  return Status::OK();
}

Status Client::Impl::JobClock(Version* clock) {
  Version least = std::numeric_limits<Version>::max();
  for (uint32_t k = 0; k < num_shards(); ++k) {
    net::StatsReply st;
    RETURN_IF_ERROR(ShardStats(k, &st));
    least = std::min(least, st.shard_clock);
  }
  *clock = least;
  return Status::OK();
}

Status Client::Impl::Laggards(std::vector<ClientLag>* laggards) {
  std::map<ClientId, ClientLag> by_client;
  for (uint32_t k = 0; k < num_shards(); ++k) {
    net::StatsReply st;
    RETURN_IF_ERROR(ShardStats(k, &st));
    const net::StatsReply* r = &st;
    if (r->applied_clocks.empty()) continue;
    const ClockT least = *std::min_element(r->applied_clocks.begin(), r->applied_clocks.end());
    const ClockT most = *std::max_element(r->applied_clocks.begin(), r->applied_clocks.end());
    if (most == least) continue;  // nobody is held back here
    for (ClientId c = 0; c < r->applied_clocks.size(); ++c) {
      if (r->applied_clocks[c] != least) continue;
      const bool here =
          std::binary_search(r->connected_clients.begin(), r->connected_clients.end(), c);
      auto [it, added] = by_client.emplace(c, ClientLag{c, least, here});
      if (!added) {
        it->second.applied = std::min(it->second.applied, least);
        it->second.connected = it->second.connected && here;
      }
    }
  }
  laggards->clear();
  for (const auto& [c, lag] : by_client) laggards->push_back(lag);
  return Status::OK();
}

}  // namespace pace
