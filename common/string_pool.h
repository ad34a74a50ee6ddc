// StringPool: spare std::string buffers handed from the thread that is done
// with them to the thread that allocates strings of the same size again.
//
// An embedded job moves each clock's deltas from the client to the
// in-process shard as one std::string per row (net::Apply): at model scale
// 235k buffers of ~0.5 KB allocated by the worker that seals the clock and
// freed by a shard thread once the clock is applied, every clock, all
// through one malloc arena. The shard puts the spent buffers here and the
// client's next batch takes them: a buffer keeps its capacity, so copying a
// delta of at most that size into it allocates nothing.
//
// Bounded by the bytes of the buffers it holds (their capacity); what does
// not fit is freed. Thread-safe; every call takes one lock, so callers move
// buffers in bulk.
#ifndef PACE_COMMON_STRING_POOL_H_
#define PACE_COMMON_STRING_POOL_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace pace {

class StringPool {
 public:
  // Buffers of at most this many bytes of capacity in all are kept.
  explicit StringPool(size_t max_bytes) : max_bytes_(max_bytes) {}
  StringPool(const StringPool&) = delete;
  StringPool& operator=(const StringPool&) = delete;

  // Takes the buffers of *spare (keeps those that fit the bound, frees the
  // rest) and leaves *spare empty. Strings within the small-string buffer are
  // not kept: they own no heap memory.
  void Put(std::vector<std::string>* spare) {
    {
      MutexLock l(&mu_);
      for (std::string& s : *spare) {
        const size_t cap = s.capacity();
        if (cap <= kInlineCapacity || bytes_ + cap > max_bytes_) continue;
        bytes_ += cap;
        buffers_.push_back(std::move(s));
        buffers_.back().clear();
      }
    }
    spare->clear();  // frees those not kept, outside the lock
  }

  // Moves up to n buffers (empty, each with its capacity) to the end of
  // *out. Returns how many.
  size_t Take(size_t n, std::vector<std::string>* out) {
    MutexLock l(&mu_);
    const size_t k = n < buffers_.size() ? n : buffers_.size();
    for (size_t i = 0; i < k; ++i) {
      bytes_ -= buffers_.back().capacity();
      out->push_back(std::move(buffers_.back()));
      buffers_.pop_back();
    }
    return k;
  }

  // Capacity of the buffers held.
  size_t bytes() const {
    MutexLock l(&mu_);
    return bytes_;
  }
  size_t max_bytes() const { return max_bytes_; }

 private:
  // What std::string holds without a heap buffer (libstdc++: 15 chars).
  static inline const size_t kInlineCapacity = std::string().capacity();

  const size_t max_bytes_;
  mutable Mutex mu_;  // a leaf lock
  std::vector<std::string> buffers_ GUARDED_BY(mu_);
  size_t bytes_ GUARDED_BY(mu_) = 0;
};

}  // namespace pace

#endif  // PACE_COMMON_STRING_POOL_H_
