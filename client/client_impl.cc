// Client::Impl: construction, tables, worker clocks and batches, stats.
// The read path is in read_path.cc, inbound message handling in inbound.cc.
#include "client/client_impl.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>
#include <variant>

#include "common/percentile.h"
#include "common/thread_name.h"

namespace pace {

using client::CacheEntry;
using client::CacheStripe;
using client::InFlight;
using client::RpcCall;
using client::SentBatch;
using client::ShardState;
using client::TableState;

namespace client {

uint64_t ApproxBytes(const net::Message& m) {
  constexpr uint64_t kHeader = 16;
  constexpr uint64_t kRowKey = 12;
  auto rows = [&](const std::vector<net::RowData>& v) {
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

uint64_t FrameLimit(uint32_t own, uint32_t shard) {
  if (own == 0) return shard;
  if (shard == 0) return own;
  return std::min(own, shard);
}

}  // namespace client

Client::Impl::Impl(const ClientOptions& options, bool embedded)
    : options_(options), embedded_(embedded) {
  size_t budget = options.cache_mb * (size_t{1} << 20) / kNumStripes;
  for (auto& st : stripes_) {
    client::SpinLock l(&st.mu);  // not shared yet; for the analysis
    st.budget = budget;
    st.recycle_delta_buffers = options.memory_mb == 0;
  }
}

Client::Impl::~Impl() {
  std::thread retry_thread;
  {
    MutexLock l(&retry_mu_);
    retry_stop_ = true;  // no retry thread starts from now on
    retry_cv_.SignalAll();
    retry_thread = std::move(retry_thread_);
  }
  if (retry_thread.joinable()) retry_thread.join();
  for (auto& sh : shards_) sh->channel->Shutdown();
}

Status Client::Impl::Create(const ClientOptions& given,
                            std::vector<std::unique_ptr<client::ShardChannel>> channels,
                            bool embedded, std::unique_ptr<Client>* client) {
  ClientOptions options = given;
  ResolveMemoryBudget(&options);
  if (options.num_clients == 0) return Status::InvalidArgument("num_clients must be >= 1");
  if (options.client_id >= options.num_clients) {
    return Status::InvalidArgument("client_id " + std::to_string(options.client_id) +
                                   " is not below num_clients " +
                                   std::to_string(options.num_clients));
  }
  constexpr size_t kMaxMb = size_t{1} << 24;  // 16 TiB: a typo, not a budget
  if (options.memory_mb > kMaxMb || options.cache_mb > kMaxMb || options.open_delta_mb > kMaxMb ||
      options.unacked_mb > kMaxMb) {
    return Status::InvalidArgument(
        "memory_mb, cache_mb, open_delta_mb and unacked_mb must be below " +
        std::to_string(kMaxMb) + " MiB");
  }
  if (options.min_log_level < -1 || options.min_log_level > 3) {
    return Status::InvalidArgument(
        "min_log_level must be -1 (leave glog alone) or 0..3 (INFO, "
        "WARNING, ERROR, FATAL), got " +
        std::to_string(options.min_log_level));
  }
  if (options.min_log_level >= 0) FLAGS_minloglevel = options.min_log_level;  // also in Open
  if (options.retry_backoff_min_ms < 1 ||
      options.retry_backoff_max_ms < options.retry_backoff_min_ms) {
    return Status::InvalidArgument("retry_backoff_min_ms (" +
                                   std::to_string(options.retry_backoff_min_ms) +
                                   ") must be >= 1 and <= retry_backoff_max_ms (" +
                                   std::to_string(options.retry_backoff_max_ms) + ")");
  }
  if (channels.empty()) return Status::InvalidArgument("no shards");
  std::unique_ptr<Impl> impl(new Impl(options, embedded));
  const uint32_t n = static_cast<uint32_t>(channels.size());
  for (uint32_t k = 0; k < n; ++k) {
    auto sh = std::make_unique<ShardState>();
    sh->id = k;
    sh->channel = std::move(channels[k]);
    impl->shards_.push_back(std::move(sh));
  }
  ClockT start = 0;
  for (uint32_t k = 0; k < n; ++k) {
    ShardState& sh = *impl->shards_[k];
    net::Welcome w;
    Status s = sh.channel->Start(impl.get(), &w);
    if (s.ok() && (w.shard_id != k || w.num_shards != n)) {
      s = Status::InvalidArgument(
          sh.channel->Describe() + " says it is shard " + std::to_string(w.shard_id) + " of " +
          std::to_string(w.num_shards) + ", but the client lists it as " + std::to_string(k) +
          " of " + std::to_string(n) + " (check the order of --servers)");
    }
    if (s.ok() && w.num_clients != options.num_clients) {
      s = Status::InvalidArgument(sh.channel->Describe() + " was started for " +
                                  std::to_string(w.num_clients) + " clients, the client for " +
                                  std::to_string(options.num_clients));
    }
    if (!s.ok()) {
      for (uint32_t j = 0; j <= k; ++j) impl->shards_[j]->channel->Shutdown();
      return s;
    }
    start = k == 0 ? w.applied_clock : std::min(start, w.applied_clock);
    sh.frame_limit.store(client::FrameLimit(sh.channel->max_frame_bytes(), w.max_frame_bytes));
    sh.known_clock.store(w.shard_clock);
    sh.duplicates_below.store(w.applied_clock);
    sh.duplicate_parts_below.store(w.applied_parts);
    sh.resume_clock = w.applied_clock;
    sh.resume_parts = w.applied_parts;
    if (w.applied_parts > 0) {
      LOG(WARNING) << sh.channel->Describe() << " holds " << w.applied_parts << " part(s) of clock "
                   << w.applied_clock << " of client " << options.client_id
                   << " from a process of this client that ended mid-clock; they stay applied and "
                      "this process re-runs clock "
                   << w.applied_clock << " in full after them";
    }
  }
  impl->start_clock_ = start;
  {
    MutexLock l(&impl->clock_mu_);  // not shared yet; for the analysis
    impl->process_clock_ = start;
    impl->max_worker_clock_ = start;
  }
  {
    MutexLock l(&impl->send_mu_);  // not shared yet; for the analysis
    impl->next_part_.assign(n, 0);
  }
  impl->process_clock_seen_.store(start, std::memory_order_release);
  for (auto& sh : impl->shards_) {
    sh->acked_through.store(start);
    sh->purged_through.store(start);
    sh->sent_through.store(start);
  }
  client->reset(new Client(std::move(impl)));
  return Status::OK();
}

// --- Requests ----------------------------------------------------------------

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

// --- Tables ------------------------------------------------------------------

TableState* Client::Impl::RegisterTable(const TableSchema& schema) {
  MutexLock l(&tables_mu_);
  auto it = tables_.find(schema.id);
  if (it != tables_.end()) return it->second.get();
  auto t = std::make_unique<TableState>(schema, static_cast<uint32_t>(tables_.size()), this);
  TableState* raw = t.get();
  tables_.emplace(schema.id, std::move(t));
  vap_.Register(schema);
  return raw;
}

uint32_t Client::Impl::AnyTableId() {
  MutexLock l(&tables_mu_);
  return tables_.empty() ? 0 : tables_.begin()->first;
}

TableState* Client::Impl::FindTableById(uint32_t id) {
  MutexLock l(&tables_mu_);
  auto it = tables_.find(id);
  return it == tables_.end() ? nullptr : it->second.get();
}

namespace {

Status OneTable(const net::Message& reply, const char* what, TableSchema* out) {
  const auto* r = std::get_if<net::TablesReply>(&reply);
  if (r == nullptr || r->tables.size() != 1) {
    return Status::Internal(std::string("unexpected reply to ") + what + ": " +
                            net::MessageName(reply));
  }
  *out = r->tables[0];
  return Status::OK();
}

}  // namespace

Status Client::Impl::CreateOnOtherShards(const TableSchema& created) {
  net::Message reply;
  for (uint32_t k = 1; k < num_shards(); ++k) {
    TableSchema with_id = created;
    RETURN_IF_ERROR(Call(k, net::CreateTable{NextReqId(), with_id}, &reply));
    TableSchema other;
    RETURN_IF_ERROR(OneTable(reply, "CreateTable", &other));
    if (other.id != created.id || !SameSchema(other, created)) {
      return Status::FailedPrecondition(
          "shard " + std::to_string(k) + " disagrees with shard 0 about table '" + created.name +
          "': " + DescribeSchema(other) + " vs " + DescribeSchema(created));
    }
  }
  return Status::OK();
}

Status Client::Impl::CreateTable(const TableSchema& schema, TableState** state) {
  TableSchema req = schema;
  req.id = 0;
  req.staleness = static_cast<uint32_t>(ReadPolicy::BoundFor(req.consistency, req.staleness));
  RETURN_IF_ERROR(ValidateSchema(req));
  net::Message reply;
  RETURN_IF_ERROR(Call(0, net::CreateTable{NextReqId(), req}, &reply));
  TableSchema created;
  RETURN_IF_ERROR(OneTable(reply, "CreateTable", &created));
  if (created.id == 0 || !SameSchema(created, req)) {
    return Status::AlreadyExists("table '" + req.name +
                                 "' exists with another schema: " + DescribeSchema(created));
  }
  RETURN_IF_ERROR(CreateOnOtherShards(created));
  *state = RegisterTable(created);
  return Status::OK();
}

Status Client::Impl::OpenTable(std::string_view name, TableState** state) {
  net::Message reply;
  RETURN_IF_ERROR(Call(0, net::DescribeTable{NextReqId(), std::string(name)}, &reply));
  TableSchema schema;
  RETURN_IF_ERROR(OneTable(reply, "DescribeTable", &schema));
  // Another client may be creating the table right now: shard 0 has it, the
  // others may not yet. Creating it there (same id; a no-op where it exists)
  // keeps a Read of ours from reaching a shard that does not know the table.
  RETURN_IF_ERROR(CreateOnOtherShards(schema));
  *state = RegisterTable(schema);
  return Status::OK();
}

Status Client::Impl::ListTables(std::vector<TableSchema>* tables) {
  net::Message reply;
  RETURN_IF_ERROR(Call(0, net::ListTables{NextReqId()}, &reply));
  const auto* r = std::get_if<net::TablesReply>(&reply);
  if (r == nullptr) return Status::Internal("unexpected reply to ListTables");
  *tables = r->tables;
  return Status::OK();
}

// --- Workers and clocks ------------------------------------------------------

ClockT Client::Impl::RegisterWorker(std::shared_ptr<client::WorkerStats>* stats) {
  MutexLock l(&clock_mu_);
  ++worker_clocks_[process_clock_];
  max_worker_clock_ = std::max(max_worker_clock_, process_clock_);
  *stats = std::make_shared<client::WorkerStats>();
  worker_stats_.push_back(*stats);
  return process_clock_;
}

namespace {

void MoveWorker(std::map<ClockT, int>* clocks, ClockT from) {
  auto it = clocks->find(from);
  if (it != clocks->end() && --it->second == 0) clocks->erase(it);
}

}  // namespace

void Client::Impl::DeregisterWorker(ClockT clock) {
  clock_mu_.Lock();
  MoveWorker(&worker_clocks_, clock);
  AdvanceProcessClockAndUnlock();
}

void Client::Impl::AdvanceProcessClockAndUnlock() {
  // With no worker left, the clocks the last ones finished are still due: a
  // worker that left at clock c while another had finished c (and left
  // first) did nothing at c, so c is complete.
  const ClockT target = worker_clocks_.empty() ? max_worker_clock_ : worker_clocks_.begin()->first;
  if (target <= process_clock_) {
    clock_mu_.Unlock();
    return;
  }
  const ClockT from = process_clock_;
  process_clock_ = target;
  const ClockT to = process_clock_;
  send_mu_.Lock();  // hand over: batches leave in clock order
  clock_mu_.Unlock();
  SendClocks(from, to);
  send_mu_.Unlock();
}

Client::Impl::OpenDeltaSum Client::Impl::OpenDeltaSums(ClockT c) const {
  OpenDeltaSum sums;
  for (CacheStripe& st : stripes_) {
    client::SpinLock l(&st.mu);
    sums.all += st.open_bytes;
    sums.of_clock += st.OpenBytesOf(c);
  }
  return sums;
}

uint64_t Client::Impl::OpenDeltaBytesOf(ClockT c) const {
  uint64_t open = 0;
  for (CacheStripe& st : stripes_) {
    client::SpinLock l(&st.mu);
    open += st.OpenBytesOf(c);
  }
  return open;
}

uint64_t Client::Impl::PartBytes() const {
  const uint64_t open = uint64_t{options_.open_delta_mb} << 20;
  const uint64_t unacked = uint64_t{options_.unacked_mb} << 20;
  return std::max<uint64_t>(uint64_t{64} << 10, std::min(open, unacked) / 2);
}

Status Client::Impl::SealOpenDeltas(ClockT c, client::WorkerStats* ws) {
  // A part is half of the smaller of the open-delta and unacked bounds: the
  // clock's open deltas stay below the open-delta bound, and two parts fit
  // the unacked bound, so one can be written while the next is filled.
  const uint64_t part = PartBytes();
  if (OpenDeltaBytesOf(c) < part) return Status::OK();
  // The sealed parts are bounded like whole batches: a part is sealed once
  // the unacknowledged deltas leave room for it under unacked_mb (Acks need
  // nothing from this process, so this cannot deadlock). Waiting after the
  // seal instead let each worker add a part over the bound: 14 MiB of
  // Applies queued at the shard under a 6 MiB bound.
  const uint64_t unacked_budget = uint64_t{options_.unacked_mb} << 20;
  auto room = [&] {
    return unacked_bytes_.load(std::memory_order_acquire) + part <= unacked_budget;
  };
  if (!room()) {
    RETURN_IF_ERROR(WaitProgress(
        room, [&] { return AllShardsHealth(); }, ws, "Inc (unacked bound)"));
  }
  {
    MutexLock l(&send_mu_);
    // The process clock may have moved past c meanwhile (its last part is
    // sent then), or another worker at c sealed first.
    if (shards_[0]->sent_through.load(std::memory_order_acquire) != c ||
        process_clock_seen_.load(std::memory_order_acquire) != c || OpenDeltaBytesOf(c) < part) {
      return Status::OK();
    }
    SendBatch(c, /*more=*/true);
    parts_sent_.fetch_add(1, std::memory_order_relaxed);
  }
  // Ahead workers waiting at the bound re-check it.
  std::lock_guard<std::mutex> l(progress_mu_);
  progress_cv_.notify_all();
  return Status::OK();
}

Status Client::Impl::WaitOpenDeltas(ClockT c, client::WorkerStats* ws) {
  // An ahead worker's clock also stays within a part: when the process clock
  // reaches c, its deltas so far leave as clock c's next part, and a part
  // larger than PartBytes() would be queued at the shards beside the parts
  // the unacked bound already holds (measured: 14 MB groups, 17 MiB of queued
  // Applies under a 6 MiB unacked bound).
  const uint64_t bound = uint64_t{options_.open_delta_mb} << 20;
  const uint64_t part = PartBytes();
  auto within = [&] {
    if (process_clock_seen_.load(std::memory_order_acquire) >= c) return true;
    const OpenDeltaSum open = OpenDeltaSums(c);
    return open.all <= bound && open.of_clock <= part;
  };
  if (within()) return Status::OK();
  open_delta_waits_.fetch_add(1, std::memory_order_relaxed);
  // Woken by SendClocks (it seals open deltas and publishes the process
  // clock) and by health changes.
  return WaitProgress(
      within, [&] { return AllShardsHealth(); }, ws, "Inc (open-delta bound)");
}

Status Client::Impl::ClockWorker(ClockT* clock, client::WorkerStats* ws) {
  RETURN_IF_ERROR(AllShardsHealth());
  clock_mu_.Lock();
  MoveWorker(&worker_clocks_, *clock);
  ++*clock;
  ++worker_clocks_[*clock];
  max_worker_clock_ = std::max(max_worker_clock_, *clock);
  AdvanceProcessClockAndUnlock();
  const ClockT c = *clock;
  const uint64_t unacked_budget = uint64_t{options_.unacked_mb} << 20;
  auto caught_up = [&] {
    for (const auto& sh : shards_) {
      if (c - sh->acked_through.load(std::memory_order_acquire) > kMaxClocksInFlight) return false;
    }
    // HandleAck lowers unacked_bytes_ (and feeds vap_) before it notifies
    // progress_cv_.
    return unacked_bytes_.load(std::memory_order_acquire) <= unacked_budget && vap_.WithinBound();
  };
  if (caught_up()) return Status::OK();
  return WaitProgress(
      caught_up, [&] { return AllShardsHealth(); }, ws, "Clock");
}

void Client::Impl::SendClocks(ClockT from, ClockT to) {
  // Workers waiting in Inc for the open-delta bound wait for this clock.
  process_clock_seen_.store(to, std::memory_order_release);
  // Only the clock the process was at can have had parts sent early
  // (next_part_); SendBatch resets the counts when it completes a clock.
  for (ClockT c = from; c < to; ++c) SendBatch(c, /*more=*/false);
  std::lock_guard<std::mutex> l(progress_mu_);
  progress_cv_.notify_all();
}

void Client::Impl::SendBatch(ClockT c, bool more) {
  const uint32_t n = num_shards();
  // Per shard: the Apply messages of this batch (one, or several parts cut
  // at the frame limit), the rows of each, and the payload bound of the last.
  std::vector<std::vector<net::Apply>> applies(n);
  std::vector<std::vector<std::vector<RowKey>>> keys(n);
  std::vector<uint64_t> filled(n, net::kRowsMessageBytes);
  std::vector<uint64_t> limit(n);
  // Shard k's number for the part being filled: after the parts a previous
  // process left of clock c (ShardState::resume_parts), if any.
  std::vector<uint32_t> part_of(n);
  // The first row of each shard that cannot fit a frame alone.
  std::vector<Status> unsendable(n);
  for (uint32_t k = 0; k < n; ++k) {
    part_of[k] = next_part_[k] + (c == shards_[k]->resume_clock ? shards_[k]->resume_parts : 0);
    limit[k] = shards_[k]->frame_limit.load(std::memory_order_acquire);
    applies[k].resize(1);
    keys[k].resize(1);
  }
  for (CacheStripe& st : stripes_) {
    client::SpinLock l(&st.mu);
    const std::vector<CacheEntry*> dirty = st.TakeDirty(c);
    for (size_t i = 0; i < dirty.size(); ++i) {
      // Rows are scattered in memory: start loading the entries a few rows
      // ahead, and their value and delta bytes one step later, so that the
      // cache misses of consecutive rows overlap.
      if (i + 8 < dirty.size()) __builtin_prefetch(dirty[i + 8]);
      if (i + 4 < dirty.size()) {
        const CacheEntry* ahead = dirty[i + 4];
        __builtin_prefetch(ahead->value.data());
        __builtin_prefetch(ahead->open.delta.data());
      }
      CacheEntry* e = dirty[i];
      const uint32_t k = e->shard;
      if (limit[k] != 0) {
        const client::PendingDelta* open = e->FindPending(c);
        if (open == nullptr) continue;
        const uint64_t row = net::kRowBytes + open->delta.size();
        if (filled[k] + row > limit[k]) {
          if (net::kRowsMessageBytes + row > limit[k]) {
            if (unsendable[k].ok()) {
              unsendable[k] = Status::ResourceExhausted(
                  "the delta of row " + std::to_string(e->key.table) + "/" +
                  std::to_string(e->key.row) + " in clock " + std::to_string(c) + " is " +
                  std::to_string(open->delta.size()) + " bytes: an Apply holding it needs " +
                  std::to_string(net::RowsMessageBytes(1, open->delta.size())) +
                  " bytes, over the frame limit of " + std::to_string(limit[k]) +
                  " bytes (the smaller of this client's and the shard's max_frame_bytes; paced "
                  "--max_frame_mb), so it can never be sent: use narrower rows or a larger frame "
                  "limit");
            }
          } else if (!applies[k].back().updates.empty()) {
            // Close the part being filled; the row starts the next one.
            applies[k].back().more = true;
            applies[k].emplace_back();
            keys[k].emplace_back();
            ++part_of[k];
            filled[k] = net::kRowsMessageBytes;
          }
        }
        filled[k] += row;
      }
      const client::PendingDelta* p = st.Seal(e, c, part_of[k]);
      if (p == nullptr) continue;
      applies[k].back().updates.push_back(net::RowData{e->key.table, e->key.row, p->delta});
      keys[k].back().push_back(e->key);
    }
    if (st.bytes > st.budget) EvictLocked(st);  // sparse values may grow
  }
  FlushAllUnsubscribes();
  uint64_t sealed = 0;
  for (const std::vector<net::Apply>& parts : applies) {
    for (const net::Apply& a : parts) {
      for (const net::RowData& u : a.updates) sealed += u.bytes.size();
    }
  }
  // Counted before any Ack of this batch can arrive.
  unacked_bytes_.fetch_add(sealed, std::memory_order_acq_rel);
  vap_.Sealed(c, applies, part_of);
  for (uint32_t k = 0; k < n; ++k) {
    ShardState& sh = *shards_[k];
    if (!unsendable[k].ok()) {
      // Nothing of this batch leaves for shard k: the job cannot go on.
      SetFatal(k, unsendable[k]);
      continue;
    }
    std::vector<net::Apply>& parts = applies[k];
    // The first part's number; the last part has `more` as asked.
    uint32_t part = part_of[k] + 1 - static_cast<uint32_t>(parts.size());
    parts.back().more = more;
    if (parts.size() > 1) {
      VLOG(1) << sh.channel->Describe() << ": clock " << c << " leaves in " << parts.size()
              << " parts to fit the frame limit of " << limit[k] << " bytes";
    }
    for (size_t i = 0; i < parts.size(); ++i, ++part) {
      net::Apply& a = parts[i];
      a.clock = c;
      a.part = part;
      rows_sent_.fetch_add(a.updates.size(), std::memory_order_relaxed);
      {
        MutexLock l(&sh.mu);
        sh.unacked.push_back(SentBatch{c, std::move(keys[k][i]), part, a.more});
      }
      if (!a.more) sh.sent_through.store(c + 1, std::memory_order_release);
      batches_sent_.fetch_add(1, std::memory_order_relaxed);
      // While the shard is away, batches only queue: OnReconnect (which takes
      // send_mu_) sends every unacknowledged one in clock order, so a new
      // batch can never reach a fresh connection before older re-sent ones.
      if (sh.connected.load(std::memory_order_acquire)) SendToShard(k, std::move(a));
    }
    next_part_[k] = more ? next_part_[k] + static_cast<uint32_t>(parts.size()) : 0;
  }
}

net::Apply Client::Impl::RebuildBatch(const SentBatch& b) {
  net::Apply a;
  a.clock = b.clock;
  a.part = b.part;
  a.more = b.more;
  a.updates.reserve(b.keys.size());
  for (const RowKey& key : b.keys) {
    CacheStripe& st = StripeFor(key);
    client::SpinLock l(&st.mu);
    CacheEntry* e = st.Find(key);
    const client::PendingDelta* p = e == nullptr ? nullptr : e->FindSealed(b.clock, b.part);
    if (p == nullptr) {
      LOG(DFATAL) << "unacknowledged delta of clock " << b.clock << " part " << b.part
                  << " missing for row " << key.table << "/" << key.row;
      continue;
    }
    a.updates.push_back(net::RowData{key.table, key.row, p->delta});
  }
  return a;
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

Status Client::Impl::Flush() {
  // A failed shard may hold batches that were never sent (e.g. one that
  // cannot fit a frame): nothing is all durable then.
  RETURN_IF_ERROR(AllShardsHealth().WithPrefix("Flush"));
  std::vector<ClockT> target;
  for (const auto& sh : shards_) target.push_back(sh->sent_through.load());
  return WaitProgress(
      [&] {
        for (size_t k = 0; k < shards_.size(); ++k) {
          if (shards_[k]->purged_through.load() < target[k]) return false;
        }
        return true;
      },
      [&] { return AllShardsHealth(); }, nullptr, "Flush");
}

Status Client::Impl::GlobalBarrier(ClockT c, client::WorkerStats* ws) {
  auto start = std::chrono::steady_clock::now();
  Status result;
  for (uint32_t k = 0; k < num_shards() && result.ok(); ++k) {
    ShardState& sh = *shards_[k];
    if (sh.known_clock.load() >= c) continue;
    // Preferred: a Read of one of the shard's rows with min_version c. The
    // shard parks it until its clock reaches c, so nobody polls.
    net::Message reply;
    if (uint32_t table = AnyTableId(); table != 0) {
      uint64_t row = 0;
      while (ShardOfKey(RowKey{table, row}) != k) ++row;
      result = Call(k, net::Read{NextReqId(), table, {row}, c, false}, &reply);
      if (!result.ok()) break;
      if (const auto* r = std::get_if<net::ReadReply>(&reply)) NoteShardClock(k, r->version);
      continue;
    }
    // No table yet: ask for the shard clock, backing off.
    int64_t backoff_ms = 1;
    while (sh.known_clock.load() < c) {
      result = Call(k, net::StatsRequest{NextReqId()}, &reply);
      if (!result.ok()) break;
      if (const auto* r = std::get_if<net::StatsReply>(&reply)) NoteShardClock(k, r->shard_clock);
      if (sh.known_clock.load() >= c) break;
      std::unique_lock<std::mutex> l(progress_mu_);
      progress_cv_.wait_for(l, std::chrono::milliseconds(backoff_ms),
                            [&] { return sh.known_clock.load() >= c; });
      backoff_ms = std::min<int64_t>(backoff_ms * 2, 20);
    }
  }
  ws->clock_blocked_ns.Add(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count()));
  return result.WithPrefix("GlobalBarrier");
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

// --- Health ------------------------------------------------------------------

Status Client::Impl::ShardHealth(uint32_t k) const {
  const ShardState& sh = *shards_[k];
  if (sh.failed.load(std::memory_order_acquire)) {
    MutexLock l(&sh.mu);
    return sh.fatal;
  }
  if (!sh.connected.load(std::memory_order_acquire)) {
    int64_t away = SteadyNowMs() - sh.disconnected_since_ms.load();
    if (away > options_.shard_timeout_ms) {
      return Status::Unavailable(sh.channel->Describe() + " unreachable for " +
                                 std::to_string(away) + " ms (shard_timeout_ms " +
                                 std::to_string(options_.shard_timeout_ms) + ")");
    }
  }
  return Status::OK();
}

Status Client::Impl::AllShardsHealth() const {
  for (uint32_t k = 0; k < num_shards(); ++k) RETURN_IF_ERROR(ShardHealth(k));
  return Status::OK();
}

client::Deadline Client::Impl::HealthDeadline(uint32_t k) const {
  const ShardState& sh = *shards_[k];
  if (sh.connected.load(std::memory_order_acquire)) return client::kNoDeadline;
  // ShardHealth fails once away > shard_timeout_ms (whole milliseconds).
  return client::Deadline(
      std::chrono::milliseconds(sh.disconnected_since_ms.load() + options_.shard_timeout_ms + 1));
}

client::Deadline Client::Impl::AllShardsHealthDeadline() const {
  client::Deadline d = client::kNoDeadline;
  for (uint32_t k = 0; k < num_shards(); ++k) d = std::min(d, HealthDeadline(k));
  return d;
}

void Client::Impl::SetFatal(uint32_t k, const Status& s) {
  ShardState& sh = *shards_[k];
  {
    MutexLock l(&sh.mu);
    if (!sh.fatal.ok()) return;
    sh.fatal = s.WithPrefix(sh.channel->Describe());
    LOG(ERROR) << sh.fatal.ToString();
    sh.failed.store(true, std::memory_order_release);
  }
  NotifyAll();
}

void Client::Impl::NotifyAll() {
  for (CacheStripe& st : stripes_) {
    client::SpinLock l(&st.mu);
    st.cv.notify_all();
  }
  {
    std::lock_guard<std::mutex> l(progress_mu_);
    progress_cv_.notify_all();
  }
  // Calls waiting for a reply. Collected under ShardState::mu, notified after
  // it is released (Call holds RpcCall::mu while it takes ShardState::mu).
  for (auto& sh : shards_) {
    std::vector<std::shared_ptr<RpcCall>> rpcs;
    {
      MutexLock l(&sh->mu);
      for (const auto& [id, req] : sh->requests) {
        if (req.rpc != nullptr) rpcs.push_back(req.rpc);
      }
    }
    for (const auto& rpc : rpcs) {
      std::lock_guard<std::mutex> l(rpc->mu);
      rpc->cv.notify_all();
    }
  }
}

void Client::Impl::NoteShardClock(uint32_t k, Version v) {
  std::atomic<Version>& known = shards_[k]->known_clock;
  Version cur = known.load();
  while (v > cur && !known.compare_exchange_weak(cur, v)) {
  }
}

// --- Stats -------------------------------------------------------------------

Client::Impl::RawStats Client::Impl::RawTotals() const {
  RawStats r;
  std::vector<const TableState*> tables;
  {
    MutexLock l(&tables_mu_);
    tables.resize(tables_.size());
    for (const auto& [id, t] : tables_) tables[t->index] = t.get();
  }
  r.tables.resize(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    r.tables[i].hist.assign(static_cast<size_t>(tables[i]->hist_bound) + 2, 0);
    r.tables[i].pushes = tables[i]->pushes_applied.load();
    r.tables[i].evictions = tables[i]->evictions.load();
  }
  MutexLock l(&clock_mu_);
  for (const auto& ws : worker_stats_) {
    r.get_blocked_ns += ws->get_blocked_ns.Get();
    r.clock_blocked_ns += ws->clock_blocked_ns.Get();
    for (size_t i = 0; i < tables.size(); ++i) {
      const client::TableCounters* tc = ws->Peek(static_cast<uint32_t>(i));
      if (tc == nullptr) continue;
      RawTable& rt = r.tables[i];
      for (size_t b = 0; b < rt.hist.size(); ++b) rt.hist[b] += tc->hist[b].Get();
      rt.staleness_sum += tc->staleness_sum.Get();
      rt.reads += tc->reads.Get();
      rt.hits += tc->hits.Get();
      rt.blocked += tc->blocked.Get();
      rt.fetched += tc->fetched.Get();
      rt.incs += tc->incs.Get();
    }
  }
  r.bytes_sent = bytes_sent_.load();
  r.bytes_received = bytes_received_.load();
  r.rows_sent = rows_sent_.load();
  r.rows_received = rows_received_.load();
  r.batches_sent = batches_sent_.load();
  r.batches_resent = batches_resent_.load();
  r.requests_retried = requests_retried_.load();
  return r;
}

ClientStats Client::Impl::Stats() const {
  RawStats r = RawTotals();
  RawStats base;
  {
    MutexLock l(&stats_mu_);
    base = baseline_;
  }
  ClientStats s;
  std::vector<const TableState*> tables(r.tables.size());
  {
    MutexLock l(&tables_mu_);
    for (const auto& [id, t] : tables_) {
      if (t->index < tables.size()) tables[t->index] = t.get();
    }
  }
  for (size_t i = 0; i < r.tables.size(); ++i) {
    RawTable cur = r.tables[i];
    if (i < base.tables.size()) {
      const RawTable& b = base.tables[i];
      for (size_t j = 0; j < cur.hist.size() && j < b.hist.size(); ++j) cur.hist[j] -= b.hist[j];
      cur.staleness_sum -= b.staleness_sum;
      cur.reads -= b.reads;
      cur.hits -= b.hits;
      cur.blocked -= b.blocked;
      cur.fetched -= b.fetched;
      cur.incs -= b.incs;
      cur.pushes -= b.pushes;
      cur.evictions -= b.evictions;
    }
    TableStats ts;
    ts.name = tables[i]->schema.name;
    ts.staleness_bound = static_cast<uint32_t>(tables[i]->hist_bound);
    ts.staleness_hist = cur.hist;
    uint64_t n = 0;
    for (uint64_t x : cur.hist) n += x;
    ts.staleness_mean = n == 0 ? 0.0 : static_cast<double>(cur.staleness_sum) / n;
    ts.staleness_p99 =
        static_cast<int64_t>(HistogramPercentile(cur.hist.data(), cur.hist.size(), 0.99));
    ts.reads = cur.reads;
    ts.reads_cache_hit = cur.hits;
    ts.reads_blocked = cur.blocked;
    ts.rows_fetched = cur.fetched;
    ts.pushes_applied = cur.pushes;
    ts.evictions = cur.evictions;
    ts.incs = cur.incs;
    s.tables.push_back(std::move(ts));
  }
  s.get_blocked_seconds = static_cast<double>(r.get_blocked_ns - base.get_blocked_ns) * 1e-9;
  s.clock_blocked_seconds = static_cast<double>(r.clock_blocked_ns - base.clock_blocked_ns) * 1e-9;
  s.bytes_sent = r.bytes_sent - base.bytes_sent;
  s.bytes_received = r.bytes_received - base.bytes_received;
  s.rows_sent = r.rows_sent - base.rows_sent;
  s.rows_received = r.rows_received - base.rows_received;
  s.batches_sent = r.batches_sent - base.batches_sent;
  s.batches_resent = r.batches_resent - base.batches_resent;
  s.requests_retried = r.requests_retried - base.requests_retried;
  uint64_t cache = 0, open = 0;
  for (CacheStripe& st : stripes_) {
    client::SpinLock l(&st.mu);
    cache += st.bytes;
    open += st.open_bytes;
  }
  s.cache_bytes = cache;
  s.cache_budget_bytes = uint64_t{options_.cache_mb} << 20;
  s.open_delta_bytes = open;
  s.unacked_bytes = unacked_bytes_.load(std::memory_order_acquire);
  s.unacked_budget_bytes = uint64_t{options_.unacked_mb} << 20;
  s.open_delta_budget_bytes = uint64_t{options_.open_delta_mb} << 20;
  s.memory_budget_bytes = uint64_t{options_.memory_mb} << 20;
  s.open_delta_waits = open_delta_waits_.load(std::memory_order_relaxed);
  s.memory.push_back({"client.cache", s.cache_bytes, s.cache_budget_bytes});
  s.memory.push_back({"client.open_deltas", s.open_delta_bytes, s.open_delta_budget_bytes});
  s.memory.push_back({"client.unacked", s.unacked_bytes, s.unacked_budget_bytes});
  if (embedded_) AppendShardMemory(&s.memory);
  return s;
}

void Client::Impl::AppendShardMemory(std::vector<ClientStats::MemoryComponent>* out) const {
  // The in-process shard's Stats counters memory_<c>_bytes / _limit_bytes.
  if (!ShardHealth(0).ok()) return;
  net::Message reply;
  if (!const_cast<Impl*>(this)
           ->Call(0, net::StatsRequest{const_cast<Impl*>(this)->NextReqId()}, &reply)
           .ok()) {
    return;
  }
  const auto* r = std::get_if<net::StatsReply>(&reply);
  if (r == nullptr) return;
  static constexpr std::string_view kPrefix = "memory_", kLimit = "_limit_bytes", kBytes = "_bytes";
  std::map<std::string, ClientStats::MemoryComponent> by_name;
  for (const auto& [name, value] : r->counters) {
    std::string_view n = name;
    if (n.substr(0, kPrefix.size()) != kPrefix) continue;
    n.remove_prefix(kPrefix.size());
    const bool limit = n.size() > kLimit.size() && n.substr(n.size() - kLimit.size()) == kLimit;
    const std::string_view suffix = limit ? kLimit : kBytes;
    if (n.size() <= suffix.size() || n.substr(n.size() - suffix.size()) != suffix) continue;
    const std::string component = "shard." + std::string(n.substr(0, n.size() - suffix.size()));
    ClientStats::MemoryComponent& c = by_name[component];
    c.name = component;
    (limit ? c.bound_bytes : c.bytes) = value < 0 ? 0 : static_cast<uint64_t>(value);
  }
  for (auto& [name, c] : by_name) out->push_back(std::move(c));
}

void Client::Impl::ResetStats() {
  RawStats r = RawTotals();
  MutexLock l(&stats_mu_);
  baseline_ = std::move(r);
}

}  // namespace pace
