// libFuzzer entry point for FrameReader + DecodePayload (see
// frame_fuzz_entry.h). Built only with clang; run it with
// `cmake --build <dir> --target run_net_frame_fuzzer`.
#include <cstddef>
#include <cstdint>

#include "net/fuzz/frame_fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return pace::net::fuzz::FrameFuzzOneInput(data, size);
}
