#include "common/malloc_tuning.h"

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace pace {

void TuneMallocForClocks() {
#if defined(__GLIBC__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr) return;
  constexpr int kMiB = 1 << 20;
  mallopt(M_MMAP_THRESHOLD, 1024 * kMiB);
  mallopt(M_TRIM_THRESHOLD, 1024 * kMiB);
#endif
}

}  // namespace pace
