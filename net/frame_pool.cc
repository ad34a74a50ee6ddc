#include "net/frame_pool.h"

#include <algorithm>

namespace pace::net {
namespace {

// Rounds a large request up to 1/8 of its power of two (at least 64 KiB), so
// that a frame a few percent larger than the last one still fits its block.
size_t RoundedCapacity(size_t n, size_t min_block) {
  if (n < min_block) return n;
  size_t pow2 = 1;
  while (pow2 <= n / 2) pow2 *= 2;
  size_t step = std::max<size_t>(pow2 / 8, size_t{64} << 10);
  return (n + step - 1) / step * step;
}

}  // namespace

FrameBufferPool::FrameBufferPool(FrameBufferPoolOptions options) : options_(options) {}

FrameBufferPool::~FrameBufferPool() {
  for (const Block& b : idle_) Free(b);
}

FrameBufferPool::Block FrameBufferPool::Acquire(size_t n) {
  if (n >= options_.min_block_bytes && n <= options_.max_block_bytes) {
    MutexLock lock(&mu_);
    auto best = idle_.end();
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if (it->capacity >= n && (best == idle_.end() || it->capacity < best->capacity)) best = it;
    }
    if (best != idle_.end()) {
      Block b = *best;
      idle_.erase(best);
      pooled_bytes_ -= b.capacity;
      ++reused_;
      return b;
    }
    ++allocated_;
  }
  size_t capacity =
      n <= options_.max_block_bytes ? RoundedCapacity(n, options_.min_block_bytes) : n;
  return Block{new char[capacity], capacity};
}

void FrameBufferPool::Release(Block block) {
  if (block.data == nullptr) return;
  if (block.capacity < options_.min_block_bytes || block.capacity > options_.max_block_bytes ||
      block.capacity > options_.max_pooled_bytes) {
    Free(block);
    return;
  }
  std::vector<Block> evicted;
  {
    MutexLock lock(&mu_);
    // Make room by dropping smaller idle blocks; keep the larger ones.
    std::sort(idle_.begin(), idle_.end(),
              [](const Block& a, const Block& b) { return a.capacity < b.capacity; });
    size_t i = 0;
    size_t freed = 0;
    while (pooled_bytes_ - freed + block.capacity > options_.max_pooled_bytes && i < idle_.size() &&
           idle_[i].capacity < block.capacity) {
      freed += idle_[i].capacity;
      ++i;
    }
    if (pooled_bytes_ - freed + block.capacity <= options_.max_pooled_bytes) {
      evicted.assign(idle_.begin(), idle_.begin() + i);
      idle_.erase(idle_.begin(), idle_.begin() + i);
      pooled_bytes_ -= freed;
      idle_.push_back(block);
      pooled_bytes_ += block.capacity;
    } else {
      evicted.push_back(block);
    }
  }
  for (const Block& b : evicted) Free(b);
}

void FrameBufferPool::Free(Block block) { delete[] block.data; }

size_t FrameBufferPool::pooled_bytes() const {
  MutexLock lock(&mu_);
  return pooled_bytes_;
}

uint64_t FrameBufferPool::reused() const {
  MutexLock lock(&mu_);
  return reused_;
}

uint64_t FrameBufferPool::allocated() const {
  MutexLock lock(&mu_);
  return allocated_;
}

}  // namespace pace::net
