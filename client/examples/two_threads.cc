// The example of docs/client-example.md (keep the two identical): an embedded
// PaceDB, one table, two worker threads doing Get / Inc / Clock, and the
// result read back.
//
//   pace_example_two_threads [data_dir]     (default: ./pace-example-data)
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "client/pace.h"

constexpr int kClocks = 10;
constexpr uint64_t kRows = 4;

// One training thread: every clock, read each row and add 1 to every element.
pace::Status Train(const pace::Table& table, pace::Worker* worker) {
  std::vector<int64_t> row(table.schema().width);
  std::vector<int64_t> ones(table.schema().width, 1);
  for (int c = 0; c < kClocks; ++c) {
    for (uint64_t r = 0; r < kRows; ++r) {
      RETURN_IF_ERROR(worker->Get(table, r, row.data()));   // at most s clocks stale
      RETURN_IF_ERROR(worker->Inc(table, r, ones.data()));  // additive, read-my-writes
    }
    RETURN_IF_ERROR(worker->Clock());  // end of this worker's clock
  }
  return worker->GlobalBarrier();  // every process's updates are in
}

pace::Status Run(const char* data_dir) {
  pace::ClientOptions options;  // no servers: embedded shard in data_dir
  options.data_dir = data_dir;
  std::unique_ptr<pace::Client> client;
  RETURN_IF_ERROR(pace::Client::Open(options, &client));

  pace::TableSchema schema;
  schema.name = "counts";
  schema.type = pace::ElementType::kI64;
  schema.width = 3;
  schema.consistency = pace::Consistency::kEssp;
  schema.staleness = 2;
  pace::Table table;
  RETURN_IF_ERROR(client->CreateTable(schema, &table));  // or OpenTable("counts", &table)

  // Register every worker before starting the threads (see "Workers" below).
  std::unique_ptr<pace::Worker> workers[2];
  for (auto& w : workers) RETURN_IF_ERROR(client->RegisterWorker(&w));
  pace::Status results[2];
  std::thread a([&] { results[0] = Train(table, workers[0].get()); });
  std::thread b([&] { results[1] = Train(table, workers[1].get()); });
  a.join();
  b.join();
  RETURN_IF_ERROR(results[0]);
  RETURN_IF_ERROR(results[1]);

  // Read the result: a read includes every update this process made.
  for (uint64_t r = 0; r < kRows; ++r) {
    int64_t v[3];
    RETURN_IF_ERROR(workers[0]->Get(table, r, v));
    std::printf("row %llu: %lld %lld %lld\n", (unsigned long long)r, (long long)v[0],
                (long long)v[1], (long long)v[2]);
  }
  const pace::TableStats t = client->Stats().tables[0];
  std::printf("reads %llu (cache hits %llu), mean staleness %.2f\n", (unsigned long long)t.reads,
              (unsigned long long)t.reads_cache_hit, t.staleness_mean);
  return client->Flush();  // wait until the shard has every batch on disk
}

int main(int argc, char** argv) {
  pace::Status s = Run(argc > 1 ? argv[1] : "./pace-example-data");
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
