// pace_client_proc: one client process of the multi-process client tests
// (tests/client/client_multiprocess_test.cc).
//
// --mode=run: opens the client against --servers, creates one integer table
// per consistency model (bsp, ssp, essp, async), and runs --workers threads
// for --clocks clocks, each adding random positive deltas to random rows and
// reading random rows. Every read is checked: the read rule v >= c - s, rows
// not torn, and read-my-writes (a value is at least this process's completed
// increments, since every delta is positive). Prints "TOTAL <table> <row>
// <sum of this process's increments>" lines and "OK" at the end, or "FAIL
// <why>" and exits 1.
// --mode=verify: prints "ROW <table> <row> <value>" for every row (run it as
// a process that does not Clock, after the run processes finished).
#include <gflags/gflags.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client/pace.h"

DEFINE_string(servers, "", "host:port,... (index = shard id)");
DEFINE_uint32(client_id, 0, "this process's client id");
DEFINE_uint32(num_clients, 1, "number of client processes");
DEFINE_string(mode, "run", "run or verify");
DEFINE_int32(workers, 2, "worker threads");
DEFINE_int32(clocks, 20, "clocks per worker");
DEFINE_int32(ops, 20, "operations per clock");
DEFINE_uint64(rows, 30, "rows per table");
DEFINE_uint64(seed, 1, "random seed");
DEFINE_int32(sleep_us, 0, "sleep per clock (simulated computation)");
DEFINE_int64(shard_timeout_ms, 60000, "client shard timeout");
DEFINE_string(token_file, "", "file holding the job's shared secret (first line)");
DEFINE_string(job, "", "the job id of the shards (ClientOptions::job); empty: the first shard's");

namespace {

constexpr uint32_t kWidth = 3;

struct Model {
  const char* name;
  pace::Consistency consistency;
  uint32_t staleness;
};
const Model kModels[] = {{"bsp", pace::Consistency::kBsp, 0},
                         {"ssp", pace::Consistency::kSsp, 2},
                         {"essp", pace::Consistency::kEssp, 2},
                         {"async", pace::Consistency::kAsync, 0}};
constexpr size_t kNumModels = sizeof(kModels) / sizeof(kModels[0]);

std::mutex g_fail_mu;
std::string g_fail;

void Fail(const std::string& why) {
  std::lock_guard<std::mutex> l(g_fail_mu);
  if (g_fail.empty()) g_fail = why;
}
bool Failed() {
  std::lock_guard<std::mutex> l(g_fail_mu);
  return !g_fail.empty();
}

pace::Status OpenTables(pace::Client* client, std::vector<pace::Table>* tables) {
  for (const Model& m : kModels) {
    pace::TableSchema s;
    s.name = std::string("counters_") + m.name;
    s.type = pace::ElementType::kI64;
    s.width = kWidth;
    s.consistency = m.consistency;
    s.staleness = m.staleness;
    pace::Table t;
    RETURN_IF_ERROR(client->CreateTable(s, &t));
    tables->push_back(t);
  }
  return pace::Status::OK();
}

int Run(pace::Client* client, const std::vector<pace::Table>& tables) {
  const uint64_t rows = FLAGS_rows;
  // own[m][r]: this process's completed increments (element 0).
  std::vector<std::vector<std::atomic<int64_t>>> own(kNumModels);
  for (auto& v : own) v = std::vector<std::atomic<int64_t>>(rows);
  std::vector<std::unique_ptr<pace::Worker>> workers(FLAGS_workers);
  for (auto& w : workers) {
    pace::Status s = client->RegisterWorker(&w);
    if (!s.ok()) return std::printf("FAIL RegisterWorker: %s\n", s.ToString().c_str()), 1;
  }
  auto work = [&](int id) {
    std::unique_ptr<pace::Worker> w = std::move(workers[id]);
    std::mt19937_64 rng(FLAGS_seed * 7919 + FLAGS_client_id * 131 + id);
    int64_t delta[kWidth];
    for (int c = 0; c < FLAGS_clocks && !Failed(); ++c) {
      for (int op = 0; op < FLAGS_ops; ++op) {
        size_t m = rng() % kNumModels;
        const pace::Table& t = tables[m];
        uint64_t r = rng() % rows;
        if (rng() % 2 == 0) {
          int64_t lower = own[m][r].load();
          int64_t x0 = 0;
          bool torn = false;
          pace::Version v = 0;
          pace::Status s = w->Read(t, r, [&](const pace::RowView& view) {
            const int64_t* x = view.dense<int64_t>();
            x0 = x[0];
            v = view.version;
            for (uint32_t i = 1; i < kWidth; ++i) torn |= x[i] != x0 * (i + 1);
          });
          if (!s.ok()) return Fail("Get: " + s.ToString());
          if (torn) return Fail(std::string("torn row in ") + kModels[m].name);
          if (kModels[m].consistency != pace::Consistency::kAsync &&
              v < w->clock() - static_cast<int64_t>(kModels[m].staleness)) {
            return Fail(std::string("read rule broken in ") + kModels[m].name + ": v " +
                        std::to_string(v) + " at clock " + std::to_string(w->clock()));
          }
          if (x0 < lower) {
            return Fail(std::string("read-my-writes broken in ") + kModels[m].name + " row " +
                        std::to_string(r) + ": " + std::to_string(x0) + " < own " +
                        std::to_string(lower));
          }
        } else {
          int64_t d = 1 + static_cast<int64_t>(rng() % 9);
          for (uint32_t i = 0; i < kWidth; ++i) delta[i] = d * (i + 1);
          pace::Status s = w->Inc(t, r, delta);
          if (!s.ok()) return Fail("Inc: " + s.ToString());
          own[m][r].fetch_add(d);
        }
      }
      if (FLAGS_sleep_us > 0)
        std::this_thread::sleep_for(std::chrono::microseconds(FLAGS_sleep_us));
      pace::Status s = w->Clock();
      if (!s.ok()) return Fail("Clock: " + s.ToString());
    }
    pace::Status s = w->GlobalBarrier();
    if (!s.ok()) return Fail("GlobalBarrier: " + s.ToString());
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < FLAGS_workers; ++i) threads.emplace_back(work, i);
  for (auto& th : threads) th.join();
  if (!Failed()) {
    pace::Status s = client->Flush();
    if (!s.ok()) Fail("Flush: " + s.ToString());
  }
  if (Failed()) {
    std::printf("FAIL %s\n", g_fail.c_str());
    return 1;
  }
  for (size_t m = 0; m < kNumModels; ++m) {
    for (uint64_t r = 0; r < rows; ++r) {
      std::printf("TOTAL %s %llu %lld\n", kModels[m].name, static_cast<unsigned long long>(r),
                  static_cast<long long>(own[m][r].load()));
    }
  }
  pace::ClientStats st = client->Stats();
  std::printf("STATS batches_sent=%llu batches_resent=%llu\n",
              static_cast<unsigned long long>(st.batches_sent),
              static_cast<unsigned long long>(st.batches_resent));
  std::printf("OK\n");
  return 0;
}

int Verify(pace::Client* client, const std::vector<pace::Table>& tables) {
  std::unique_ptr<pace::Worker> w;
  pace::Status s = client->RegisterWorker(&w);
  for (size_t m = 0; m < kNumModels && s.ok(); ++m) {
    for (uint64_t r = 0; r < FLAGS_rows && s.ok(); ++r) {
      int64_t x[kWidth];
      s = w->Get(tables[m], r, x);
      if (s.ok()) {
        std::printf("ROW %s %llu %lld\n", kModels[m].name, static_cast<unsigned long long>(r),
                    static_cast<long long>(x[0]));
      }
    }
  }
  if (!s.ok()) return std::printf("FAIL verify: %s\n", s.ToString().c_str()), 1;
  std::printf("OK\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  pace::ClientOptions o;
  pace::Status s = pace::ParseServers(FLAGS_servers, &o);
  if (!s.ok()) return std::printf("FAIL %s\n", s.ToString().c_str()), 1;
  o.client_id = FLAGS_client_id;
  o.num_clients = FLAGS_num_clients;
  o.shard_timeout_ms = FLAGS_shard_timeout_ms;
  if (!FLAGS_token_file.empty()) {
    std::ifstream in(FLAGS_token_file);
    if (!std::getline(in, o.token) || o.token.empty())
      return std::printf("FAIL cannot read --token_file=%s\n", FLAGS_token_file.c_str()), 1;
  }
  o.job = FLAGS_job;
  std::unique_ptr<pace::Client> client;
  s = pace::Client::Open(o, &client);
  if (!s.ok()) return std::printf("FAIL open: %s\n", s.ToString().c_str()), 1;
  std::printf("START clock=%lld\n", static_cast<long long>(client->start_clock()));
  std::vector<pace::Table> tables;
  s = OpenTables(client.get(), &tables);
  if (!s.ok()) return std::printf("FAIL tables: %s\n", s.ToString().c_str()), 1;
  return FLAGS_mode == "verify" ? Verify(client.get(), tables) : Run(client.get(), tables);
}
