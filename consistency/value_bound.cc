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

void ValueBoundLedger::Add(uint32_t shard, ClockT c, uint32_t part, const RowKey& key,
                           double abs_sum, double v) {
  if (!(abs_sum > 0)) return;
  if (shard >= pending_.size()) pending_.resize(shard + 1);
  RowState& r = rows_[key];
  r.shard = shard;
  r.bound = v;
  auto [it, fresh] = r.by_stamp.emplace(Stamp{c, part}, 0.0);
  it->second += abs_sum;
  r.total += abs_sum;
  if (fresh) pending_[shard][Stamp{c, part}].push_back(key);
  Refresh(key, r);
}

void ValueBoundLedger::Acked(uint32_t shard, ClockT through, uint32_t parts) {
  if (shard >= pending_.size()) return;
  auto& by_stamp = pending_[shard];
  while (!by_stamp.empty() && by_stamp.begin()->first < Stamp{through, parts}) {
    const Stamp stamp = by_stamp.begin()->first;
    for (const RowKey& key : by_stamp.begin()->second) {
      auto it = rows_.find(key);
      if (it == rows_.end()) continue;
      RowState& r = it->second;
      auto e = r.by_stamp.find(stamp);
      if (e != r.by_stamp.end()) {
        r.total -= e->second;
        r.by_stamp.erase(e);
      }
      if (r.by_stamp.empty()) {
        over_.erase(key);
        rows_.erase(it);
      } else {
        Refresh(key, r);
      }
    }
    by_stamp.erase(by_stamp.begin());
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
    for (const auto& [stamp, m] : r.by_stamp) {
      if (rest <= r.bound * (1 + 1e-12)) break;
      rest -= m;
      through = stamp.first + 1;
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
