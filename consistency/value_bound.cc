#include "consistency/value_bound.h"

#include <algorithm>
#include <cmath>

namespace pace {

double AbsSum(const RowFormat& f, std::string_view delta) {
  if (!ValidateRow(f, delta).ok()) return 0;
  const char* data = delta.data();
  size_t n = f.width;
  if (f.kind == RowKind::kSparse) {
    n = SparseCount(delta);
    data += 4 + 4 * n;  // past the count and the columns
  }
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::fabs(DenseElementAsDouble(f.type, data, i));
  return sum;
}

void ValueBoundLedger::Add(uint32_t shard, ClockT c, const RowKey& key, double abs_sum, double v) {
  if (!(abs_sum > 0)) return;
  if (shard >= pending_.size()) pending_.resize(shard + 1);
  RowState& r = rows_[key];
  r.shard = shard;
  r.bound = v;
  auto [it, fresh] = r.by_clock.emplace(c, 0.0);
  it->second += abs_sum;
  r.total += abs_sum;
  if (fresh) pending_[shard][c].push_back(key);
  Refresh(key, r);
}

void ValueBoundLedger::Acked(uint32_t shard, ClockT through) {
  if (shard >= pending_.size()) return;
  auto& by_clock = pending_[shard];
  while (!by_clock.empty() && by_clock.begin()->first < through) {
    const ClockT c = by_clock.begin()->first;
    for (const RowKey& key : by_clock.begin()->second) {
      auto it = rows_.find(key);
      if (it == rows_.end()) continue;
      RowState& r = it->second;
      auto e = r.by_clock.find(c);
      if (e != r.by_clock.end()) {
        r.total -= e->second;
        r.by_clock.erase(e);
      }
      if (r.by_clock.empty()) {
        over_.erase(key);
        rows_.erase(it);
      } else {
        Refresh(key, r);
      }
    }
    by_clock.erase(by_clock.begin());
  }
}

void ValueBoundLedger::Refresh(const RowKey& key, const RowState& r) {
  // A tolerance of a few ulps keeps a sum that is exactly v (within float
  // rounding of its parts) within the bound.
  if (r.total > r.bound * (1 + 1e-12)) {
    over_[key] = true;
  } else {
    over_.erase(key);
  }
}

std::vector<std::pair<uint32_t, ClockT>> ValueBoundLedger::WaitFor() const {
  std::map<uint32_t, ClockT> need;
  for (const auto& [key, unused] : over_) {
    const RowState& r = rows_.at(key);
    // Drop the oldest clocks until the rest is within the bound: the shard
    // must acknowledge through the last dropped one.
    double rest = r.total;
    ClockT through = 0;
    for (const auto& [c, m] : r.by_clock) {
      if (rest <= r.bound * (1 + 1e-12)) break;
      rest -= m;
      through = c + 1;
    }
    ClockT& t = need[r.shard];
    t = std::max(t, through);
  }
  return {need.begin(), need.end()};
}

double ValueBoundLedger::MaxInFlight() const {
  double m = 0;
  for (const auto& [key, r] : rows_) m = std::max(m, r.total);
  return m;
}

}  // namespace pace
