// net_fuzz_seeds DIR: writes one seed input per sample message (and one with
// all of them) for the frame fuzzer. Input layout: one chunk-size byte, then
// frames (see net/fuzz/frame_fuzz_entry.h).
#include <cstdio>
#include <fstream>
#include <string>

#include "net/codec.h"
#include "net/testing/sample_messages.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 1;
  }
  std::string all(1, '\x05');
  int i = 0;
  for (const pace::net::Message& m : pace::net::testing::SampleMessages()) {
    std::string frame;
    if (!pace::net::EncodeFrame(m, &frame).ok()) return 1;
    all += frame;
    std::ofstream(
        std::string(argv[1]) + "/seed_" + std::to_string(i++) + "_" + pace::net::MessageName(m),
        std::ios::binary)
        << std::string(1, '\x20') << frame;
  }
  std::ofstream(std::string(argv[1]) + "/seed_all", std::ios::binary) << all;
  return 0;
}
