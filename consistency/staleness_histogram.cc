#include "consistency/staleness_histogram.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/percentile.h"

namespace pace {

namespace {

void AtomicMax(std::atomic<int64_t>* target, int64_t v) {
  int64_t cur = target->load(std::memory_order_relaxed);
  while (v > cur && !target->compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

StalenessHistogram::StalenessHistogram(int64_t s)
    : bound_(std::clamp<int64_t>(s, 0, kMaxTrackedStaleness)),
      buckets_(new std::atomic<uint64_t>[static_cast<size_t>(bound_) + 2]) {
  for (size_t i = 0; i < num_buckets(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void StalenessHistogram::Record(int64_t staleness) {
  int64_t v = std::max<int64_t>(staleness, 0);
  size_t i = static_cast<size_t>(std::min<int64_t>(v, bound_ + 1));
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
  AtomicMax(&max_, v);
}

double StalenessHistogram::mean() const {
  uint64_t n = count();
  return n == 0 ? 0.0 : static_cast<double>(sum_.load(std::memory_order_relaxed)) / n;
}

int64_t StalenessHistogram::Percentile(double p) const {
  std::vector<uint64_t> snap(num_buckets());
  for (size_t i = 0; i < snap.size(); ++i) snap[i] = bucket(i);
  // The overflow bucket is the last, index bound_ + 1.
  return static_cast<int64_t>(HistogramPercentile(snap.data(), snap.size(), p / 100.0));
}

void StalenessHistogram::Merge(const StalenessHistogram& other) {
  std::vector<uint64_t> snap(other.num_buckets());
  for (size_t i = 0; i < snap.size(); ++i) snap[i] = other.bucket(i);
  uint64_t n = other.count();
  int64_t sum = other.sum_.load(std::memory_order_relaxed);
  int64_t mx = other.max();
  for (size_t i = 0; i < snap.size(); ++i) {
    if (snap[i] == 0) continue;
    // The other's overflow bucket (its last) stays overflow here.
    bool overflow = i + 1 == snap.size() || static_cast<int64_t>(i) > bound_;
    size_t j = overflow ? static_cast<size_t>(bound_) + 1 : i;
    buckets_[j].fetch_add(snap[i], std::memory_order_relaxed);
  }
  count_.fetch_add(n, std::memory_order_relaxed);
  sum_.fetch_add(sum, std::memory_order_relaxed);
  AtomicMax(&max_, mx);
}

void StalenessHistogram::Reset() {
  for (size_t i = 0; i < num_buckets(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
  count_.store(0, std::memory_order_relaxed);
  sum_.store(0, std::memory_order_relaxed);
  max_.store(0, std::memory_order_relaxed);
}

std::string StalenessHistogram::ToString() const {
  char head[128];
  std::snprintf(head, sizeof(head), "n=%llu mean=%.2f p50=%lld p99=%lld max=%lld [",
                static_cast<unsigned long long>(count()), mean(),
                static_cast<long long>(Percentile(50)), static_cast<long long>(Percentile(99)),
                static_cast<long long>(max()));
  std::string out = head;
  for (size_t i = 0; i < num_buckets(); ++i) {
    if (i > 0) out += ' ';
    if (i + 1 == num_buckets()) {
      out += '>' + std::to_string(bound_);
    } else {
      out += std::to_string(i);
    }
    out += ':' + std::to_string(bucket(i));
  }
  out += ']';
  return out;
}

}  // namespace pace
