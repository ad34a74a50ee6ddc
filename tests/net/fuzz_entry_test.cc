// Runs the frame fuzzer's entry function (net/fuzz/frame_fuzz_entry.h) over
// random inputs and mutations of valid frame streams, so that every build
// (not only clang's libFuzzer build) exercises it.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "net/fuzz/frame_fuzz_entry.h"
#include "net/testing/sample_messages.h"

namespace pace::net {
namespace {

using testing::EncodeOrFail;
using testing::SampleMessages;

int RunEntry(const std::string& input) {
  return fuzz::FrameFuzzOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

TEST(FrameFuzzEntryTest, ValidStreamsInEveryChunkSize) {
  std::string frames;
  for (const Message& m : SampleMessages()) frames += EncodeOrFail(m);
  for (int chunk_byte = 0; chunk_byte < 256; chunk_byte += 17) {
    EXPECT_EQ(RunEntry(std::string(1, static_cast<char>(chunk_byte)) + frames), 0);
  }
  for (const Message& m : SampleMessages()) {
    EXPECT_EQ(RunEntry(EncodeOrFail(m).substr(4)), 0);  // a bare payload
  }
}

TEST(FrameFuzzEntryTest, RandomInputs) {
  std::mt19937_64 rng(2024);
  for (int i = 0; i < 3000; ++i) {
    std::string input(rng() % 512, '\0');
    for (char& c : input) c = static_cast<char>(rng());
    // Small length prefixes reach the decoder more often than random ones.
    if (input.size() > 5 && i % 2 == 0) {
      input[1] = static_cast<char>(rng() % 200);
      input[2] = input[3] = input[4] = 0;
    }
    RunEntry(input);
  }
}

TEST(FrameFuzzEntryTest, MutatedValidFrames) {
  std::vector<std::string> seeds;
  for (const Message& m : SampleMessages())
    seeds.push_back(std::string(1, '\x07') + EncodeOrFail(m));
  std::mt19937_64 rng(99);
  for (int i = 0; i < 4000; ++i) {
    std::string input = seeds[rng() % seeds.size()];
    int mutations = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < mutations; ++k) {
      size_t pos = rng() % input.size();
      switch (rng() % 4) {
        case 0:  // flip a bit
          input[pos] = static_cast<char>(input[pos] ^ (1 << (rng() % 8)));
          break;
        case 1:  // overwrite a byte
          input[pos] = static_cast<char>(rng());
          break;
        case 2:  // truncate
          input.resize(pos + 1);
          break;
        default:  // duplicate a slice
          input.insert(pos, input.substr(pos, rng() % 16));
          break;
      }
    }
    RunEntry(input);
  }
}

}  // namespace
}  // namespace pace::net
