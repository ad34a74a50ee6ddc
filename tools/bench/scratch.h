// Where the benchmarks put their scratch stores.
#ifndef PACE_TOOLS_BENCH_SCRATCH_H_
#define PACE_TOOLS_BENCH_SCRATCH_H_

#include <filesystem>
#include <system_error>

namespace pace::bench {

// $TMPDIR (std::filesystem::temp_directory_path), or /tmp when that cannot
// be told (TMPDIR names no directory): never an exception.
inline std::filesystem::path ScratchRoot() {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::temp_directory_path(ec);
  return ec ? std::filesystem::path("/tmp") : p;
}

}  // namespace pace::bench

#endif  // PACE_TOOLS_BENCH_SCRATCH_H_
