#include "net/fuzz/frame_fuzz_entry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "net/codec.h"
#include "net/frame.h"
#include "net/messages.h"

namespace pace::net::fuzz {
namespace {

// Small limit so that the fuzzer also reaches the "oversized frame" branch.
constexpr uint32_t kMaxFrameBytes = 1 << 16;

void Fail(const char* what) {
  std::fprintf(stderr, "frame fuzzer: %s\n", what);
  std::abort();
}

// A message that decoded must survive encode -> decode -> encode unchanged.
void CheckRoundTrip(const Message& m) {
  std::string first;
  if (!EncodeFrame(m, &first).ok()) Fail("a decoded message does not encode");
  Message again;
  std::string_view payload(first);
  payload.remove_prefix(kFrameHeaderBytes);
  if (!DecodePayload(payload, &again).ok()) Fail("an encoded message does not decode");
  std::string second;
  if (!EncodeFrame(again, &second).ok()) Fail("a re-decoded message does not encode");
  if (first != second) Fail("encode(decode(encode(m))) != encode(m)");
}

void DecodeOne(std::string_view payload) {
  Message m;
  if (DecodePayload(payload, &m).ok()) CheckRoundTrip(m);
}

}  // namespace

int FrameFuzzOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  DecodeOne(input);
  if (size == 0) return 0;
  // The first byte picks the chunk size for feeding the reader (1..256).
  size_t chunk = static_cast<size_t>(data[0]) + 1;
  std::string_view stream = input.substr(1);
  FrameReader reader(kMaxFrameBytes);
  while (!stream.empty()) {
    size_t n = std::min(chunk, stream.size());
    if (n % 2 == 0) {
      reader.Append(stream.substr(0, n));
    } else {
      char* dst = reader.Prepare(n);
      std::copy(stream.begin(), stream.begin() + n, dst);
      reader.Commit(n);
    }
    stream.remove_prefix(n);
    for (;;) {
      std::string_view payload;
      if (!reader.Next(&payload).ok()) return 0;
      if (payload.empty()) break;
      if (payload.size() > kMaxFrameBytes) Fail("reader returned an oversized payload");
      DecodeOne(payload);
    }
  }
  return 0;
}

}  // namespace pace::net::fuzz
