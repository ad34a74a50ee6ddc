// pace_client_hot_path_bench: the cost of a cache-hit Get and of an Inc of a
// 100-element f32 row, each against its baseline in the same run:
//   Get  vs  std::unordered_map<uint64_t, std::vector<float>> lookup + copy
//   Inc  vs  the same lookup + element-wise add
// Prints ns/op and the ratios (target: <= 2). Embedded client, one worker,
// every row cached, a fixed pseudo-random row sequence shared by both sides.
//
//   pace_client_hot_path_bench [data_dir] [iterations] [rows]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <unordered_map>
#include <vector>

#include "client/pace.h"

namespace {

constexpr uint32_t kWidth = 100;

double NsPerOp(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b,
               size_t n) {
  return std::chrono::duration<double, std::nano>(b - a).count() / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "./pace-bench-data";
  size_t iters = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 5000000;
  const uint64_t kRows = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 10000;
  std::filesystem::remove_all(dir);
  pace::ClientOptions o;
  o.data_dir = dir;
  std::unique_ptr<pace::Client> client;
  pace::Status s = pace::Client::Open(o, &client);
  if (!s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
  pace::TableSchema schema;
  schema.name = "w";
  schema.width = kWidth;
  schema.consistency = pace::Consistency::kEssp;
  schema.staleness = 4;
  pace::Table t;
  s = client->CreateTable(schema, &t);
  std::unique_ptr<pace::Worker> w;
  if (s.ok()) s = client->RegisterWorker(&w);
  std::vector<float> out(kWidth), delta(kWidth, 0.5f);
  // Steady state of a training clock: every row cached and fresh, the last
  // clock's batch sent and acknowledged (no open deltas while reading).
  for (uint64_t r = 0; r < kRows && s.ok(); ++r) {
    s = w->Get(t, r, out.data());
    if (s.ok()) s = w->Inc(t, r, delta.data());
  }
  if (s.ok()) s = w->Clock();
  if (s.ok()) s = client->Flush();
  if (!s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;

  std::unordered_map<uint64_t, std::vector<float>> baseline;
  for (uint64_t r = 0; r < kRows; ++r) baseline[r] = std::vector<float>(kWidth, 1.0f);
  std::vector<uint64_t> seq(1 << 16);
  uint64_t x = 88172645463325252ull;
  for (auto& r : seq) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    r = x % kRows;
  }
  const size_t mask = seq.size() - 1;
  float sink = 0;

  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < iters; ++i) {
    auto it = baseline.find(seq[i & mask]);
    std::memcpy(out.data(), it->second.data(), kWidth * sizeof(float));
    sink += out[i % kWidth];
  }
  auto t1 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < iters; ++i) {
    if (!w->Get(t, seq[i & mask], out.data()).ok()) return 1;
    sink += out[i % kWidth];
  }
  auto t2 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < iters; ++i) {
    auto it = baseline.find(seq[i & mask]);
    float* v = it->second.data();
    for (uint32_t j = 0; j < kWidth; ++j) v[j] += delta[j];
  }
  // Every row gets its open delta of this clock before timing Inc (the first
  // Inc of a row in a clock allocates it).
  for (uint64_t r = 0; r < kRows; ++r) {
    if (!w->Inc(t, r, delta.data()).ok()) return 1;
  }
  auto t3 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < iters; ++i) {
    if (!w->Inc(t, seq[i & mask], delta.data()).ok()) return 1;
  }
  auto t4 = std::chrono::steady_clock::now();
  sink += baseline[1][0];

  double get_base = NsPerOp(t0, t1, iters), get = NsPerOp(t1, t2, iters);
  double inc_base = NsPerOp(t2, t3, iters), inc = NsPerOp(t3, t4, iters);
  std::printf("get: %.1f ns (baseline %.1f ns) ratio %.2f\n", get, get_base, get / get_base);
  std::printf("inc: %.1f ns (baseline %.1f ns) ratio %.2f\n", inc, inc_base, inc / inc_base);
  std::printf("(checksum %g)\n", static_cast<double>(sink));
  w.reset();
  client.reset();
  std::filesystem::remove_all(dir);
  return 0;
}
