// Client::Impl: statistics (Stats, ResetStats) and the memory report of the
// in-process shard.
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "client/client_impl.h"
#include "common/percentile.h"

namespace pace {

using client::CacheStripe;
using client::TableState;

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
    r.tables[i].initialized = tables[i]->rows_initialized.load();
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
      cur.initialized -= b.initialized;
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
    ts.rows_initialized = cur.initialized;
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
  uint64_t cache = 0, open = 0, spare = 0, spare_bound = 0;
  for (CacheStripe& st : stripes_) {
    client::SpinLock l(&st.mu);
    cache += st.bytes;
    open += st.open_bytes;
    spare += st.spare_bytes;
    spare_bound += st.spare_budget;
  }
  s.cache_bytes = cache;
  s.cache_budget_bytes = uint64_t{options_.cache_mb} << 20;
  s.open_delta_bytes = open;
  s.unacked_bytes = unacked_bytes_.load(std::memory_order_acquire);
  s.unacked_budget_bytes = uint64_t{options_.unacked_mb} << 20;
  s.open_delta_budget_bytes = uint64_t{options_.open_delta_mb} << 20;
  s.memory_budget_bytes = uint64_t{options_.memory_mb} << 20;
  s.part_bytes = PartBytes();
  s.parts_sent_early = parts_sent_.load(std::memory_order_relaxed);
  s.open_delta_waits = open_delta_waits_.load(std::memory_order_relaxed);
  s.memory.push_back({"client.cache", s.cache_bytes, s.cache_budget_bytes});
  s.memory.push_back({"client.open_deltas", s.open_delta_bytes, s.open_delta_budget_bytes});
  s.memory.push_back({"client.unacked", s.unacked_bytes, s.unacked_budget_bytes});
  // Kept only without a memory budget (row_cache.h, spare_deltas).
  if (spare_bound > 0) s.memory.push_back({"client.spare_deltas", spare, spare_bound});
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
