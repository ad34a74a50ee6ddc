// ParkedReads<T>: requests waiting until the shard clock reaches their
// min_version (docs/design.md, "SSP: pull"). The shard parks a Read it
// cannot answer yet and takes the ready ones after every shard-clock advance.
//
// Thread-compatible: the owner serializes access. T must be movable.
#ifndef PACE_CONSISTENCY_PARKED_READS_H_
#define PACE_CONSISTENCY_PARKED_READS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <utility>
#include <vector>

#include "common/clock.h"

namespace pace {

template <typename T>
class ParkedReads {
 public:
  // Parks `item` until the clock reaches `min_version`.
  void Park(Version min_version, T item) {
    buckets_[min_version].push_back(Entry{next_seq_++, std::move(item)});
    ++size_;
  }

  // Removes and returns every item with min_version <= clock, in the order
  // they were parked. O(k log k) for k ready items.
  std::vector<T> TakeReady(Version clock) {
    std::vector<Entry> ready;
    auto end = buckets_.upper_bound(clock);
    for (auto it = buckets_.begin(); it != end; ++it) {
      std::move(it->second.begin(), it->second.end(), std::back_inserter(ready));
    }
    buckets_.erase(buckets_.begin(), end);
    std::sort(ready.begin(), ready.end(),
              [](const Entry& a, const Entry& b) { return a.seq < b.seq; });
    std::vector<T> out;
    out.reserve(ready.size());
    for (Entry& e : ready) out.push_back(std::move(e.item));
    size_ -= out.size();
    return out;
  }

  // Removes every item for which pred(const T&) is true (e.g. the reads of a
  // disconnected session). Returns how many were removed. O(size()).
  template <typename Pred>
  size_t RemoveIf(Pred pred) {
    size_t removed = 0;
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      auto& v = it->second;
      auto keep_end =
          std::remove_if(v.begin(), v.end(), [&](const Entry& e) { return pred(e.item); });
      removed += static_cast<size_t>(std::distance(keep_end, v.end()));
      v.erase(keep_end, v.end());
      it = v.empty() ? buckets_.erase(it) : std::next(it);
    }
    size_ -= removed;
    return removed;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The smallest min_version waited for. REQUIRES: !empty().
  Version MinWaiting() const { return buckets_.begin()->first; }

 private:
  struct Entry {
    uint64_t seq;
    T item;
  };
  std::map<Version, std::vector<Entry>> buckets_;
  uint64_t next_seq_ = 0;
  size_t size_ = 0;
};

}  // namespace pace

#endif  // PACE_CONSISTENCY_PARKED_READS_H_
