// Client::Impl: construction, tables and shard health. The other members are
// defined by concern (see client_impl.h): rpc.cc, send_path.cc, read_path.cc,
// inbound.cc, stats.cc.
#include "client/client_impl.h"

#include <glog/logging.h>

#include <algorithm>
#include <map>
#include <utility>
#include <variant>

namespace pace {

using client::CacheStripe;
using client::RpcCall;
using client::ShardState;
using client::TableState;

namespace client {

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
    // Two parts' open deltas (a part sealed while the next fills).
    st.spare_budget = st.recycle_delta_buffers ? 2 * PartBytes() / kNumStripes : 0;
    st.open_bytes_total = &open_bytes_total_;
    st.leased_bytes_total = &leased_bytes_total_;
  }
}

Client::Impl::~Impl() {
  std::thread seal_thread;
  {
    MutexLock l(&seal_mu_);
    seal_stop_ = true;  // no part is sealed from now on
    seal_cv_.Signal();
    seal_thread = std::move(seal_thread_);
  }
  sealer_stopping_.store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> l(progress_mu_);  // a sealer waiting for room wakes
    progress_cv_.notify_all();
  }
  if (seal_thread.joinable()) seal_thread.join();
  std::thread retry_thread;
  {
    MutexLock l(&retry_mu_);
    retry_stop_ = true;  // no retry thread starts from now on
    retry_cv_.SignalAll();
    retry_thread = std::move(retry_thread_);
  }
  if (retry_thread.joinable()) retry_thread.join();
  std::thread purge_thread;
  {
    MutexLock l(&purge_mu_);
    purge_stop_ = true;  // Acks from now on are not purged: all is freed below
    purge_cv_.Signal();
    purge_thread = std::move(purge_thread_);
  }
  if (purge_thread.joinable()) purge_thread.join();
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

// *created (if given): the request made the table (TablesReply::created).
Status OneTable(const net::Message& reply, const char* what, TableSchema* out,
                bool* created = nullptr) {
  const auto* r = std::get_if<net::TablesReply>(&reply);
  if (r == nullptr || r->tables.size() != 1) {
    return Status::Internal(std::string("unexpected reply to ") + what + ": " +
                            net::MessageName(reply));
  }
  *out = r->tables[0];
  if (created != nullptr) *created = r->created;
  return Status::OK();
}

}  // namespace

Status Client::Impl::CreateOnOtherShards(const TableSchema& created, bool* all_made) {
  net::Message reply;
  for (uint32_t k = 1; k < num_shards(); ++k) {
    TableSchema with_id = created;
    RETURN_IF_ERROR(Call(k, net::CreateTable{NextReqId(), with_id}, &reply));
    TableSchema other;
    bool made = false;
    RETURN_IF_ERROR(OneTable(reply, "CreateTable", &other, &made));
    if (all_made != nullptr && !made) *all_made = false;
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
  bool made = false;
  RETURN_IF_ERROR(OneTable(reply, "CreateTable", &created, &made));
  if (created.id == 0 || !SameSchema(created, req)) {
    return Status::AlreadyExists("table '" + req.name +
                                 "' exists with another schema: " + DescribeSchema(created));
  }
  RETURN_IF_ERROR(CreateOnOtherShards(created, &made));
  *state = RegisterTable(created);
  // Made here, on every shard, in a job whose only writer is this process:
  // no row has a record until this process sends one (TableState::rows_local).
  if (made && num_clients() == 1 && options_.init_new_rows) {
    (*state)->rows_local.store(true, std::memory_order_relaxed);
  }
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

}  // namespace pace
