// StalenessHistogram: the distribution of read staleness c - v (worker clock
// minus the version of the value it used; docs/design.md, "The read rule") for one table.
//
// Buckets 0..s hold exact staleness values; one more bucket holds every value
// above s ("> s"). Negative staleness (a value newer than the worker's clock)
// is recorded as 0. The mean and max are exact over the recorded values.
//
// Thread-safe: Record, the readers and Merge may run concurrently (relaxed
// atomics; a reader racing with writers sees some consistent-enough mix).
// Reset must not race with Record if an exact zero is needed.
#ifndef PACE_CONSISTENCY_STALENESS_HISTOGRAM_H_
#define PACE_CONSISTENCY_STALENESS_HISTOGRAM_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace pace {

class StalenessHistogram {
 public:
  // Staleness bounds above this share their overflow with it (async tables have
  // an "infinite" bound): the histogram then tracks 0..kMaxTrackedStaleness.
  static constexpr int64_t kMaxTrackedStaleness = 1024;

  // A histogram for bound `s`, clamped to [0, kMaxTrackedStaleness].
  explicit StalenessHistogram(int64_t s);
  StalenessHistogram(const StalenessHistogram&) = delete;
  StalenessHistogram& operator=(const StalenessHistogram&) = delete;

  // The tracked bound s; bucket s + 1 is the "> s" bucket.
  int64_t bound() const { return bound_; }
  size_t num_buckets() const { return static_cast<size_t>(bound_) + 2; }

  void Record(int64_t staleness);

  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  // Mean of the recorded values (after clamping negatives to 0); 0 if empty.
  double mean() const;
  // The largest recorded value; 0 if empty.
  int64_t max() const { return max_.load(std::memory_order_relaxed); }
  // REQUIRES: i < num_buckets().
  uint64_t bucket(size_t i) const { return buckets_[i].load(std::memory_order_relaxed); }
  // The smallest staleness x such that at least `p` percent (0..100) of the
  // records are <= x; bound() + 1 means "> s". 0 if empty.
  int64_t Percentile(double p) const;

  // Adds `other`'s records. Its buckets above bound() land in the "> s"
  // bucket. Merging a histogram into itself doubles it.
  void Merge(const StalenessHistogram& other);
  void Reset();

  // e.g. "n=100 mean=1.20 p50=1 p99=3 max=3 [0:20 1:40 2:30 3:10 >3:0]".
  std::string ToString() const;

 private:
  const int64_t bound_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<uint64_t> count_{0};
  std::atomic<int64_t> sum_{0};
  std::atomic<int64_t> max_{0};
};

}  // namespace pace

#endif  // PACE_CONSISTENCY_STALENESS_HISTOGRAM_H_
