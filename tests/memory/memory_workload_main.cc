// pace_memory_workload: the process of the memory-bound tests
// (memory_budget_test, memory_scale_test). Embedded on --data_dir (or against
// --servers), with one --memory_mb budget:
//   1. --fill: writes --rows rows of --width f32 (incompressible values) into
//      table "big", --fill_rows_per_clock rows per clock;
//   2. --clocks clocks of --workers workers, each reading (Prefetch + Get) and
//      updating --ops_per_clock random rows of "big" per clock, and adding
//      known amounts to the i64 rows of table "control";
//   3. Flush, GlobalBarrier, then reads every control row back.
// Prints "key=value" lines (peak_rss_bytes, data_dir_bytes, control_exact,
// the memory per component, ...) and exits 0 iff the control rows are exact.
#include <gflags/gflags.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "client/pace.h"
#include "common/memory_budget.h"

DEFINE_string(data_dir, "", "embedded: the data directory");
DEFINE_string(servers, "", "shard servers (empty: embedded)");
DEFINE_int64(memory_mb, 96, "the process's memory budget (ClientOptions::memory_mb)");
DEFINE_uint64(rows, 1 << 20, "rows of table big");
DEFINE_uint32(width, 128, "f32 columns of table big");
DEFINE_bool(fill, true, "write every row of big first");
DEFINE_uint64(fill_rows_per_clock, 1 << 15, "rows written per clock while filling");
DEFINE_uint64(fill_inc_rows, 0,
              "rows per Inc call while filling (0: one Inc per clock); with many calls per clock "
              "the clock's open deltas can exceed the budget and leave in parts");
DEFINE_int32(workers, 2, "worker threads of the random phase");
DEFINE_int32(clocks, 3, "clocks of the random phase");
DEFINE_int32(ops_per_clock, 5000, "random rows each worker reads and updates per clock");
DEFINE_uint32(control_rows, 16, "rows of table control (i64, width 4)");
DEFINE_uint64(seed, 1, "random seed");
DEFINE_uint32(client_id, 0, "this process's client id (with --servers)");
DEFINE_uint32(num_clients, 1, "client processes of the job; each adds the same control amounts");

namespace pace {
namespace {

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t StatusKb(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  uint64_t kb = 0;
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, key, n) == 0) kb = std::strtoull(line + n, nullptr, 10);
  }
  std::fclose(f);
  return kb;
}

uint64_t DirBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int Fail(const Status& s, const char* what) {
  std::fprintf(stderr, "pace_memory_workload: %s: %s\n", what, s.ToString().c_str());
  return 2;
}

int Run() {
  ClientOptions o;
  o.memory_mb = static_cast<size_t>(FLAGS_memory_mb);
  if (!FLAGS_servers.empty()) {
    Status s = ParseServers(FLAGS_servers, &o);
    if (!s.ok()) return Fail(s, "--servers");
    o.client_id = FLAGS_client_id;
    o.num_clients = FLAGS_num_clients;
  } else {
    o.data_dir = FLAGS_data_dir;
  }
  std::unique_ptr<Client> client;
  Status s = Client::Open(o, &client);
  if (!s.ok()) return Fail(s, "open");
  TableSchema big;
  big.name = "big";
  big.type = ElementType::kF32;
  big.width = FLAGS_width;
  big.consistency = Consistency::kSsp;
  big.staleness = 1;
  TableSchema control;
  control.name = "control";
  control.type = ElementType::kI64;
  control.width = 4;
  control.consistency = Consistency::kBsp;  // the final read sees every clock
  control.staleness = 0;
  Table tb, tc;
  if (!(s = client->CreateTable(big, &tb)).ok()) return Fail(s, "create big");
  if (!(s = client->CreateTable(control, &tc)).ok()) return Fail(s, "create control");
  const uint32_t width = FLAGS_width;

  const auto t0 = std::chrono::steady_clock::now();
  if (FLAGS_fill) {
    std::unique_ptr<Worker> w;
    if (!(s = client->RegisterWorker(&w)).ok()) return Fail(s, "register");
    const uint64_t chunk = std::max<uint64_t>(1, FLAGS_fill_rows_per_clock);
    std::vector<uint64_t> rows;
    std::vector<float> deltas;
    const uint64_t per_inc = FLAGS_fill_inc_rows == 0 ? chunk : FLAGS_fill_inc_rows;
    // Every client does the same clocks; client k writes its share of rows.
    for (uint64_t start = 0; start < FLAGS_rows; start += chunk) {
      const uint64_t end = std::min<uint64_t>(FLAGS_rows, start + chunk);
      if ((start / chunk) % FLAGS_num_clients != FLAGS_client_id) {
        if (!(s = w->Clock()).ok()) return Fail(s, "fill Clock");
        continue;
      }
      for (uint64_t b = start; b < end; b += per_inc) {
        const uint64_t e = std::min(end, b + per_inc);
        rows.clear();
        deltas.resize((e - b) * width);
        for (uint64_t r = b; r < e; ++r) {
          rows.push_back(r);
          float* d = deltas.data() + (r - b) * width;
          for (uint32_t i = 0; i < width; i += 2) {
            const uint64_t x = Mix(r * width + i + FLAGS_seed);
            d[i] = static_cast<float>(x & 0xffffff) * (1.0f / (1 << 24));
            if (i + 1 < width) d[i + 1] = static_cast<float>(x >> 40) * (1.0f / (1 << 24));
          }
        }
        if (!(s = w->Inc(tb, rows, deltas.data())).ok()) return Fail(s, "fill Inc");
      }
      if (!(s = w->Clock()).ok()) return Fail(s, "fill Clock");
    }
    if (!(s = client->Flush()).ok()) return Fail(s, "fill Flush");
    std::printf("fill_seconds=%.2f\n", Seconds(t0));
    std::printf("fill_batches_sent=%llu\n",
                static_cast<unsigned long long>(client->Stats().batches_sent));
    std::printf("fill_peak_rss_bytes=%llu\n",
                static_cast<unsigned long long>(StatusKb("VmHWM:") << 10));
    std::fflush(stdout);
  }

  // Random phase: every worker reads and updates random rows and adds
  // (worker + 1) * (clock + 1) to column j of control row (op % control_rows).
  const auto t1 = std::chrono::steady_clock::now();
  const int nw = FLAGS_workers, nc = FLAGS_clocks, ops = FLAGS_ops_per_clock;
  const uint32_t ncr = FLAGS_control_rows;
  std::atomic<bool> failed{false};
  std::vector<Status> errors(static_cast<size_t>(nw));
  std::vector<std::unique_ptr<Worker>> workers(static_cast<size_t>(nw));
  for (auto& w : workers) {
    if (!(s = client->RegisterWorker(&w)).ok()) return Fail(s, "register");
  }
  std::vector<std::thread> threads;
  for (int id = 0; id < nw; ++id) {
    threads.emplace_back([&, id] {
      Worker* w = workers[static_cast<size_t>(id)].get();
      std::vector<float> row(width), delta(width, 0.25f);
      std::vector<uint64_t> batch;
      Status st;
      for (int c = 0; c < nc && st.ok(); ++c) {
        constexpr int kWindow = 512;  // rows prefetched ahead of the reads
        for (int b = 0; b < ops && st.ok(); b += kWindow) {
          batch.clear();
          for (int k = b; k < std::min(ops, b + kWindow); ++k) {
            const uint64_t x = Mix(FLAGS_seed * 1000003 + static_cast<uint64_t>(id) * 7919 +
                                   static_cast<uint64_t>(c) * 104729 + static_cast<uint64_t>(k));
            batch.push_back(x % FLAGS_rows);
          }
          st = w->Prefetch(tb, batch);
          for (size_t k = 0; k < batch.size() && st.ok(); ++k) {
            st = w->Get(tb, batch[k], row.data());
            if (st.ok()) st = w->Inc(tb, batch[k], delta.data());
            const int op = b + static_cast<int>(k);
            if (st.ok()) {
              st = w->IncCell(tc, static_cast<uint64_t>(op) % ncr, static_cast<uint32_t>(op % 4),
                              static_cast<double>((id + 1) * (c + 1)));
            }
          }
        }
        if (st.ok()) st = w->Clock();
      }
      if (!st.ok()) {
        errors[static_cast<size_t>(id)] = st;
        failed.store(true);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& e : errors) {
    if (!e.ok()) return Fail(e, "random phase");
  }
  if (!(s = client->Flush()).ok()) return Fail(s, "Flush");
  std::printf("random_seconds=%.2f\n", Seconds(t1));

  // Expected control totals.
  std::vector<int64_t> want(static_cast<size_t>(ncr) * 4, 0);
  for (int id = 0; id < nw; ++id) {
    for (int c = 0; c < nc; ++c) {
      for (int op = 0; op < ops; ++op) {
        want[static_cast<size_t>(op % static_cast<int>(ncr)) * 4 + static_cast<size_t>(op % 4)] +=
            static_cast<int64_t>((id + 1) * (c + 1)) * FLAGS_num_clients;
      }
    }
  }
  bool exact = true;
  {
    std::unique_ptr<Worker> w;
    if (!(s = client->RegisterWorker(&w)).ok()) return Fail(s, "register");
    if (!(s = w->GlobalBarrier()).ok()) return Fail(s, "GlobalBarrier");
    int64_t got[4];
    for (uint32_t r = 0; r < ncr; ++r) {
      if (!(s = w->Get(tc, r, got)).ok()) return Fail(s, "control Get");
      for (int j = 0; j < 4; ++j) {
        const int64_t expect = want[static_cast<size_t>(r) * 4 + static_cast<size_t>(j)];
        if (got[j] != expect) {
          std::printf("control_mismatch=row %u col %d: %lld, want %lld\n", r, j,
                      static_cast<long long>(got[j]), static_cast<long long>(expect));
          exact = false;
        }
      }
    }
  }
  const ClientStats st = client->Stats();
  for (const ClientStats::MemoryComponent& c : st.memory) {
    std::printf("memory.%s=%llu/%llu\n", c.name.c_str(), static_cast<unsigned long long>(c.bytes),
                static_cast<unsigned long long>(c.bound_bytes));
  }
  uint64_t fetched = 0, evictions = 0;
  for (const TableStats& t : st.tables) {
    fetched += t.rows_fetched;
    evictions += t.evictions;
  }
  std::printf("rows_fetched=%llu\nevictions=%llu\nopen_delta_waits=%llu\n",
              static_cast<unsigned long long>(fetched), static_cast<unsigned long long>(evictions),
              static_cast<unsigned long long>(st.open_delta_waits));
  if (!FLAGS_data_dir.empty() && FLAGS_servers.empty()) {
    std::printf("data_dir_bytes=%llu\n", static_cast<unsigned long long>(DirBytes(FLAGS_data_dir)));
  }
  std::printf("total_seconds=%.2f\n", Seconds(t0));
  std::printf("peak_rss_bytes=%llu\n", static_cast<unsigned long long>(StatusKb("VmHWM:") << 10));
  std::printf("control_exact=%s\n", exact ? "true" : "false");
  std::fflush(stdout);
  return exact ? 0 : 1;
}

}  // namespace
}  // namespace pace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_servers.empty() && FLAGS_data_dir.empty()) {
    std::fprintf(stderr, "pace_memory_workload: --data_dir or --servers is required\n");
    return 2;
  }
  if (FLAGS_memory_mb > 0) pace::LimitMallocArenas();  // as pace_mf, pace_lda, paced do
  return pace::Run();
}
