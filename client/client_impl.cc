// Client::Impl: construction, tables, worker clocks and batches, stats.
// The read path is in read_path.cc, inbound message handling in inbound.cc.
#include "client/client_impl.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <variant>

#include "common/percentile.h"

namespace pace {

using client::CacheEntry;
using client::CacheStripe;
using client::InFlight;
using client::NowMs;
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

}  // namespace client

Client::Impl::Impl(const ClientOptions& options, bool embedded)
    : options_(options), embedded_(embedded) {
  size_t budget = options.cache_mb * (size_t{1} << 20) / kNumStripes;
  for (auto& st : stripes_) st.budget = budget;
}

Client::Impl::~Impl() {
  for (auto& sh : shards_) sh->channel->Shutdown();
}

Status Client::Impl::Create(const ClientOptions& options,
                            std::vector<std::unique_ptr<client::ShardChannel>> channels,
                            bool embedded, std::unique_ptr<Client>* client) {
  if (options.num_clients == 0) return Status::InvalidArgument("num_clients must be >= 1");
  if (options.client_id >= options.num_clients) {
    return Status::InvalidArgument("client_id " + std::to_string(options.client_id) +
                                   " is not below num_clients " +
                                   std::to_string(options.num_clients));
  }
  if (options.cache_mb == 0) return Status::InvalidArgument("cache_mb must be >= 1");
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
    sh.known_clock.store(w.shard_clock);
  }
  impl->start_clock_ = start;
  {
    MutexLock l(&impl->clock_mu_);  // channels already deliver messages
    impl->process_clock_ = start;
  }
  for (auto& sh : impl->shards_) {
    sh->acked_through.store(start);
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

Status Client::Impl::Call(uint32_t k, net::Message request, net::Message* reply) {
  uint64_t id = std::visit(
      [](const auto& body) -> uint64_t {
        using T = std::decay_t<decltype(body)>;
        if constexpr (std::is_same_v<T, net::CreateTable> || std::is_same_v<T, net::ListTables> ||
                      std::is_same_v<T, net::DescribeTable> ||
                      std::is_same_v<T, net::StatsRequest> || std::is_same_v<T, net::Read>) {
          return body.req_id;
        } else {
          return 0;
        }
      },
      request);
  CHECK_NE(id, 0u) << "Call needs a request with a req_id";
  ShardState& sh = *shards_[k];
  auto rpc = std::make_shared<RpcCall>();
  {
    MutexLock l(&sh.mu);
    sh.requests.emplace(id, InFlight{request, rpc});
  }
  SendToShard(k, std::move(request));
  rpc->mu.Lock();
  while (!rpc->done) {
    Status h = ShardHealth(k);
    if (!h.ok()) {
      rpc->mu.Unlock();
      MutexLock g(&sh.mu);
      sh.requests.erase(id);
      return h;
    }
    rpc->cv.WaitFor(&rpc->mu, std::chrono::milliseconds(50));
  }
  *reply = std::move(rpc->reply);
  rpc->mu.Unlock();
  if (auto* err = std::get_if<net::Error>(reply)) return err->ToStatus();
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

Status Client::Impl::CreateTable(const TableSchema& schema, TableState** state) {
  TableSchema req = schema;
  req.id = 0;
  if (req.consistency == Consistency::kBsp) req.staleness = 0;
  RETURN_IF_ERROR(ValidateSchema(req));
  net::Message reply;
  RETURN_IF_ERROR(Call(0, net::CreateTable{NextReqId(), req}, &reply));
  TableSchema created;
  RETURN_IF_ERROR(OneTable(reply, "CreateTable", &created));
  if (created.id == 0 || !SameSchema(created, req)) {
    return Status::AlreadyExists("table '" + req.name +
                                 "' exists with another schema: " + DescribeSchema(created));
  }
  for (uint32_t k = 1; k < num_shards(); ++k) {
    TableSchema with_id = req;
    with_id.id = created.id;
    RETURN_IF_ERROR(Call(k, net::CreateTable{NextReqId(), with_id}, &reply));
    TableSchema other;
    RETURN_IF_ERROR(OneTable(reply, "CreateTable", &other));
    if (other.id != created.id || !SameSchema(other, created)) {
      return Status::FailedPrecondition(
          "shard " + std::to_string(k) + " disagrees with shard 0 about table '" + req.name +
          "': " + DescribeSchema(other) + " vs " + DescribeSchema(created));
    }
  }
  *state = RegisterTable(created);
  return Status::OK();
}

Status Client::Impl::OpenTable(std::string_view name, TableState** state) {
  net::Message reply;
  RETURN_IF_ERROR(Call(0, net::DescribeTable{NextReqId(), std::string(name)}, &reply));
  TableSchema schema;
  RETURN_IF_ERROR(OneTable(reply, "DescribeTable", &schema));
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
  if (worker_clocks_.empty() || worker_clocks_.begin()->first <= process_clock_) {
    clock_mu_.Unlock();
    return;
  }
  ClockT from = process_clock_;
  process_clock_ = worker_clocks_.begin()->first;
  ClockT to = process_clock_;
  send_mu_.Lock();  // hand over: batches leave in clock order
  clock_mu_.Unlock();
  SendClocks(from, to);
  send_mu_.Unlock();
}

Status Client::Impl::ClockWorker(ClockT* clock, client::WorkerStats* ws) {
  RETURN_IF_ERROR(AllShardsHealth());
  clock_mu_.Lock();
  MoveWorker(&worker_clocks_, *clock);
  ++*clock;
  ++worker_clocks_[*clock];
  AdvanceProcessClockAndUnlock();
  const ClockT c = *clock;
  auto caught_up = [&] {
    for (const auto& sh : shards_) {
      if (c - sh->acked_through.load(std::memory_order_acquire) > kMaxClocksInFlight) return false;
    }
    return true;
  };
  if (caught_up()) return Status::OK();
  return WaitProgress(
      caught_up, [&] { return AllShardsHealth(); }, ws, "Clock");
}

void Client::Impl::SendClocks(ClockT from, ClockT to) {
  const uint32_t n = num_shards();
  for (ClockT c = from; c < to; ++c) {
    std::vector<net::Apply> applies(n);
    std::vector<std::vector<RowKey>> keys(n);
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
        const client::PendingDelta* p = st.Seal(e, c);
        if (p == nullptr) continue;
        applies[e->shard].updates.push_back(net::RowData{e->key.table, e->key.row, p->delta});
        keys[e->shard].push_back(e->key);
      }
      if (st.bytes > st.budget) EvictLocked(st);  // sparse values may grow
    }
    for (uint32_t k = 0; k < n; ++k) {
      ShardState& sh = *shards_[k];
      applies[k].clock = c;
      rows_sent_.fetch_add(applies[k].updates.size(), std::memory_order_relaxed);
      {
        MutexLock l(&sh.mu);
        sh.unacked.push_back(SentBatch{c, std::move(keys[k])});
      }
      sh.sent_through.store(c + 1, std::memory_order_release);
      batches_sent_.fetch_add(1, std::memory_order_relaxed);
      // While the shard is away, batches only queue: OnReconnect (which takes
      // send_mu_) sends every unacknowledged one in clock order, so a new
      // batch can never reach a fresh connection before older re-sent ones.
      if (sh.connected.load(std::memory_order_acquire)) SendToShard(k, std::move(applies[k]));
    }
  }
}

net::Apply Client::Impl::RebuildBatch(const SentBatch& b) {
  net::Apply a;
  a.clock = b.clock;
  a.updates.reserve(b.keys.size());
  for (const RowKey& key : b.keys) {
    CacheStripe& st = StripeFor(key);
    client::SpinLock l(&st.mu);
    CacheEntry* e = st.Find(key);
    const client::PendingDelta* p = e == nullptr ? nullptr : e->FindPending(b.clock);
    if (p == nullptr) {
      LOG(DFATAL) << "unacknowledged delta of clock " << b.clock << " missing for row " << key.table
                  << "/" << key.row;
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
      progress_cv_.wait_for(l, std::chrono::milliseconds(50));
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
  std::vector<ClockT> target;
  for (const auto& sh : shards_) target.push_back(sh->sent_through.load());
  return WaitProgress(
      [&] {
        for (size_t k = 0; k < shards_.size(); ++k) {
          if (shards_[k]->acked_through.load() < target[k]) return false;
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

// --- Health ------------------------------------------------------------------

Status Client::Impl::ShardHealth(uint32_t k) const {
  const ShardState& sh = *shards_[k];
  if (sh.failed.load(std::memory_order_acquire)) {
    MutexLock l(&sh.mu);
    return sh.fatal;
  }
  if (!sh.connected.load(std::memory_order_acquire)) {
    int64_t away = NowMs() - sh.disconnected_since_ms.load();
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
  std::lock_guard<std::mutex> l(progress_mu_);
  progress_cv_.notify_all();
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
  uint64_t cache = 0;
  for (CacheStripe& st : stripes_) {
    client::SpinLock l(&st.mu);
    cache += st.bytes;
  }
  s.cache_bytes = cache;
  return s;
}

void Client::Impl::ResetStats() {
  RawStats r = RawTotals();
  MutexLock l(&stats_mu_);
  baseline_ = std::move(r);
}

}  // namespace pace
