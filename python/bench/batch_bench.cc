// pace_python_batch_bench: the C++ baseline of python/bench/batch_bench.py.
// The same calls the Python module makes for worker.get_many(t, rows, out=buf)
// (a Prefetch of the rows, then one Get per row into its line of buf) and
// worker.inc_many(t, rows, deltas) (one batched Inc), on an embedded client,
// timed per call over --iters iterations after a warm-up.
//
//   pace_python_batch_bench DATA_DIR ROWS WIDTH ITERS
// prints "get_many_seconds S" and "inc_many_seconds S": the fastest call of
// the run (the least disturbed by other load on the machine), and the
// medians as "get_many_median_seconds" / "inc_many_median_seconds".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "client/pace.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

pace::Status GetMany(pace::Worker* w, const pace::Table& t, const std::vector<uint64_t>& rows,
                     float* out) {
  RETURN_IF_ERROR(w->Prefetch(t, rows));
  const uint32_t width = t.schema().width;
  for (size_t i = 0; i < rows.size(); ++i) RETURN_IF_ERROR(w->Get(t, rows[i], out + i * width));
  return pace::Status::OK();
}

pace::Status Run(const std::string& dir, size_t n, uint32_t width, int iters) {
  pace::ClientOptions o;
  o.data_dir = dir;
  std::unique_ptr<pace::Client> client;
  RETURN_IF_ERROR(pace::Client::Open(o, &client));
  pace::TableSchema s;
  s.name = "bench";
  s.width = width;
  s.consistency = pace::Consistency::kEssp;
  s.staleness = 1;
  pace::Table t;
  RETURN_IF_ERROR(client->CreateTable(s, &t));
  std::unique_ptr<pace::Worker> w;
  RETURN_IF_ERROR(client->RegisterWorker(&w));
  std::vector<uint64_t> rows(n);
  for (size_t i = 0; i < n; ++i) rows[i] = i * 7;
  std::vector<float> out(n * width), deltas(n * width, 0.001f);
  RETURN_IF_ERROR(GetMany(w.get(), t, rows, out.data()));  // warm-up: fetch every row
  RETURN_IF_ERROR(w->Inc(t, rows, deltas.data()));
  std::vector<double> get_s, inc_s;
  using Clock = std::chrono::steady_clock;
  for (int it = 0; it < iters; ++it) {
    auto t0 = Clock::now();
    RETURN_IF_ERROR(GetMany(w.get(), t, rows, out.data()));
    auto t1 = Clock::now();
    RETURN_IF_ERROR(w->Inc(t, rows, deltas.data()));
    auto t2 = Clock::now();
    get_s.push_back(std::chrono::duration<double>(t1 - t0).count());
    inc_s.push_back(std::chrono::duration<double>(t2 - t1).count());
  }
  std::printf("get_many_seconds %.9f\ninc_many_seconds %.9f\n",
              *std::min_element(get_s.begin(), get_s.end()),
              *std::min_element(inc_s.begin(), inc_s.end()));
  std::printf("get_many_median_seconds %.9f\ninc_many_median_seconds %.9f\n", Median(get_s),
              Median(inc_s));
  return pace::Status::OK();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: pace_python_batch_bench DATA_DIR ROWS WIDTH ITERS\n");
    return 1;
  }
  pace::Status s =
      Run(argv[1], std::strtoull(argv[2], nullptr, 10),
          static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10)), std::atoi(argv[4]));
  if (!s.ok()) {
    std::fprintf(stderr, "pace_python_batch_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
