// The fuzz target for FrameReader + DecodePayload, shared by the libFuzzer
// binary (net/fuzz/frame_fuzzer.cc, clang only) and a unit test that runs it
// over random and mutated inputs with any compiler.
#ifndef PACE_NET_FUZZ_FRAME_FUZZ_ENTRY_H_
#define PACE_NET_FUZZ_FRAME_FUZZ_ENTRY_H_

#include <cstddef>
#include <cstdint>

namespace pace::net::fuzz {

// Feeds `data` to a FrameReader (in chunks whose sizes the first byte picks)
// and decodes every payload it yields; also decodes `data` as one payload.
// Every message that decodes is re-encoded, decoded again and must re-encode
// to the same bytes; a violation aborts. Never crashes on any input otherwise.
// Always returns 0 (libFuzzer's convention).
int FrameFuzzOneInput(const uint8_t* data, size_t size);

}  // namespace pace::net::fuzz

#endif  // PACE_NET_FUZZ_FRAME_FUZZ_ENTRY_H_
