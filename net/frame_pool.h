// Recycling of the large buffers outbound frames are built in (net/codec.h,
// EncodedFrame). A connection that sends multi-megabyte frames (pushes,
// replies) reuses memory that is already mapped instead of faulting in fresh
// pages for every frame: first-touch page faults cost more than copying the
// bytes (about 12 ms per 4 MiB on the VMs we benchmark on, against 0.2 ms to
// rewrite them), and the allocator hands large blocks back to the kernel.
#ifndef PACE_NET_FRAME_POOL_H_
#define PACE_NET_FRAME_POOL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/mutex.h"

namespace pace::net {

struct FrameBufferPoolOptions {
  // Requests below this are plain allocations, never pooled. Default: 64 KiB.
  size_t min_block_bytes = size_t{64} << 10;
  // Blocks above this are freed when released, never pooled. Default: 16 MiB.
  size_t max_block_bytes = size_t{16} << 20;
  // Idle blocks kept, in bytes; releasing more frees the smallest idle blocks
  // (or the released one). Default: 32 MiB.
  size_t max_pooled_bytes = size_t{32} << 20;
};

// A set of idle heap blocks. Thread-safe. Blocks are allocated with
// new char[] and may be freed with FrameBufferPool::Free whether or not they
// came from a pool. The pool frees its idle blocks on destruction; blocks
// handed out and not yet released are the holder's (release them to a pool
// that is still alive, or Free them).
class FrameBufferPool {
 public:
  struct Block {
    char* data = nullptr;
    size_t capacity = 0;
  };

  explicit FrameBufferPool(FrameBufferPoolOptions options = FrameBufferPoolOptions());
  ~FrameBufferPool();
  FrameBufferPool(const FrameBufferPool&) = delete;
  FrameBufferPool& operator=(const FrameBufferPool&) = delete;

  // A block of at least `n` bytes: the smallest idle block that fits, or a
  // new one (large ones rounded up, so that frames that grow a little still
  // fit a recycled block). Throws std::bad_alloc like operator new.
  Block Acquire(size_t n);
  // Gives `block` back (kept for reuse or freed). A null block is ignored.
  void Release(Block block);
  // Frees a block without a pool.
  static void Free(Block block);

  // For tests and monitoring.
  size_t pooled_bytes() const;
  // Acquire calls of a poolable size (min_block_bytes..max_block_bytes)
  // served by an idle block, and those that had to allocate.
  uint64_t reused() const;
  uint64_t allocated() const;

 private:
  const FrameBufferPoolOptions options_;
  mutable Mutex mu_;
  std::vector<Block> idle_ GUARDED_BY(mu_);
  size_t pooled_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t reused_ GUARDED_BY(mu_) = 0;
  uint64_t allocated_ GUARDED_BY(mu_) = 0;
};

}  // namespace pace::net

#endif  // PACE_NET_FRAME_POOL_H_
