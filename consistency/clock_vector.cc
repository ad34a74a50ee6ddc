#include "consistency/clock_vector.h"

#include <algorithm>
#include <utility>

namespace pace {

ClockVector::ClockVector(uint32_t num_clients, int64_t now_ms)
    : clocks_(num_clients, 0), min_since_ms_(now_ms), held_back_since_ms_(now_ms) {
  Recompute(now_ms);
}

ClockVector::ClockVector(std::vector<ClockT> clocks, int64_t now_ms)
    : clocks_(std::move(clocks)), min_since_ms_(now_ms), held_back_since_ms_(now_ms) {
  for (ClockT& c : clocks_) c = std::max<ClockT>(c, 0);
  Recompute(now_ms);
}

ClockT ClockVector::Max() const {
  return clocks_.empty() ? 0 : *std::max_element(clocks_.begin(), clocks_.end());
}

void ClockVector::Recompute(int64_t now_ms) {
  Version old_min = min_;
  min_ = clocks_.empty() ? 0 : *std::min_element(clocks_.begin(), clocks_.end());
  num_at_min_ = static_cast<uint32_t>(std::count(clocks_.begin(), clocks_.end(), min_));
  if (min_ != old_min) min_since_ms_ = now_ms;
}

Version ClockVector::Set(ClientId client, ClockT clock, int64_t now_ms) {
  if (client >= clocks_.size() || clock < 0) return min_;
  ClockT old = clocks_[client];
  if (old == clock) return min_;
  const Version old_min = min_;
  const bool held_back = HoldsBack();
  clocks_[client] = clock;
  if (clock < min_) {
    // Moved below the minimum: it alone is the new minimum.
    min_ = clock;
    num_at_min_ = 1;
    min_since_ms_ = now_ms;
  } else if (old == min_) {
    // Left the minimum upwards; the minimum only changes if it was the last one.
    if (--num_at_min_ == 0) Recompute(now_ms);
  } else if (clock == min_) {
    ++num_at_min_;
  }
  if (min_ != old_min || (!held_back && HoldsBack())) held_back_since_ms_ = now_ms;
  return min_;
}

Version ClockVector::Advance(ClientId client, int64_t now_ms) {
  if (client >= clocks_.size()) return min_;
  return Set(client, clocks_[client] + 1, now_ms);
}

std::vector<ClientId> ClockVector::Laggards() const {
  std::vector<ClientId> out;
  for (ClientId i = 0; i < clocks_.size(); ++i) {
    if (clocks_[i] == min_) out.push_back(i);
  }
  return out;
}

}  // namespace pace
