// ByteArena: an append-only store of byte strings in a few large chunks.
//
// A clock's batch moves hundreds of thousands of row deltas of a few hundred
// bytes each. Held as one std::string per row, each delta cost an allocation
// and a free (and, at model scale, fresh pages) per row per clock, and every
// thread of a process allocates from one malloc arena (common/malloc_tuning.h),
// so the threads that built, applied and freed those strings took turns on
// its lock. An arena holds them in chunks of up to kMaxChunk bytes: a batch of
// 128 MiB of deltas is ~32 allocations.
//
// Add copies bytes in and returns a view that stays valid until the arena is
// destroyed (chunks never move). Thread-compatible: one thread adds, then any
// number of threads may read the views once the arena is handed over (e.g. in
// a message, behind the queue's synchronization).
#ifndef PACE_COMMON_BYTE_ARENA_H_
#define PACE_COMMON_BYTE_ARENA_H_

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace pace {

class ByteArena {
 public:
  static constexpr size_t kMaxChunk = size_t{4} << 20;
  static constexpr size_t kMinChunk = 256;

  // `expected`: the bytes the caller expects to add (sizes the first chunk,
  // at most max_chunk); 0 when unknown. Chunks double up to `max_chunk` (an
  // add larger than that gets a chunk of its own size).
  explicit ByteArena(size_t expected = 0, size_t max_chunk = kMaxChunk)
      : next_chunk_(std::clamp(expected, kMinChunk, std::max(kMinChunk, max_chunk))),
        max_chunk_(std::max(kMinChunk, max_chunk)) {}
  ByteArena(const ByteArena&) = delete;
  ByteArena& operator=(const ByteArena&) = delete;

  // Copies `bytes` into the arena; the view stays valid as long as the arena.
  std::string_view Add(std::string_view bytes) {
    if (bytes.empty()) return {};
    if (left_ < bytes.size()) NewChunk(bytes.size());
    char* at = free_;
    std::memcpy(at, bytes.data(), bytes.size());
    free_ += bytes.size();
    left_ -= bytes.size();
    used_ += bytes.size();
    return std::string_view(at, bytes.size());
  }

  // Bytes added, and bytes allocated for them (the chunks).
  size_t used() const { return used_; }
  size_t allocated() const { return allocated_; }

 private:
  void NewChunk(size_t at_least) {
    const size_t size = std::max(at_least, next_chunk_);
    chunks_.push_back(std::unique_ptr<char[]>(new char[size]));
    free_ = chunks_.back().get();
    left_ = size;
    allocated_ += size;
    next_chunk_ = std::min(max_chunk_, next_chunk_ * 2);
  }

  std::vector<std::unique_ptr<char[]>> chunks_;
  char* free_ = nullptr;
  size_t left_ = 0;
  size_t used_ = 0;
  size_t allocated_ = 0;
  size_t next_chunk_;
  size_t max_chunk_;
};

}  // namespace pace

#endif  // PACE_COMMON_BYTE_ARENA_H_
