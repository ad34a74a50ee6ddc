#include "common/malloc_tuning.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

namespace pace {
namespace {

// Resident 4 KiB pages of [from, to) (page-aligned), by mincore.
size_t ResidentPages(uintptr_t from, uintptr_t to) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((to - from) / page);
  if (mincore(reinterpret_cast<void*>(from), to - from, in.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

// The pad glibc leaves past each growth of the heap is mapped by the prefault
// thread, not by the allocation that first touches it: after the heap grows,
// the pages at its end become resident though nothing was written there.
TEST(HeapPrefaultTest, PopulatesThePadPastEachGrowthOfTheHeap) {
  constexpr size_t kPad = size_t{8} << 20;
  if (!StartHeapPrefault(kPad)) {
    GTEST_SKIP() << "no heap prefault here (a sanitizer, or glibc or the kernel lacks it)";
  }
  EXPECT_FALSE(StartHeapPrefault(kPad)) << "started twice";
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  // Blocks below the mmap threshold come from the heap: allocate until its
  // end moves (the growth is the block and the pad).
  std::vector<void*> blocks;
  const uintptr_t before = reinterpret_cast<uintptr_t>(sbrk(0));
  while (reinterpret_cast<uintptr_t>(sbrk(0)) == before && blocks.size() < 100000) {
    blocks.push_back(std::malloc(16 << 10));
  }
  const uintptr_t end = reinterpret_cast<uintptr_t>(sbrk(0)) & ~(page - 1);
  ASSERT_GT(end, before + kPad) << "the heap did not grow by the pad";
  // The pad's second half: no block reaches it yet.
  const uintptr_t from = end - kPad / 2;
  const size_t want = (end - from) / page;
  size_t resident = 0;
  for (int i = 0; i < 500 && resident < want; ++i) {
    resident = ResidentPages(from, end);
    if (resident < want) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(resident, want) << "the pad past the heap's growth was not populated";
  EXPECT_GE(HeapPrefaultedBytes(), kPad / 2);
  for (void* b : blocks) std::free(b);
}

TEST(HeapPrefaultTest, PadIsBoundedByTheBudget) {
  EXPECT_EQ(HeapPrefaultBytes(0), size_t{32} << 20);
  EXPECT_EQ(HeapPrefaultBytes(uint64_t{64} << 20), size_t{4} << 20);
  EXPECT_EQ(HeapPrefaultBytes(uint64_t{4} << 30), size_t{32} << 20);
}

}  // namespace
}  // namespace pace
