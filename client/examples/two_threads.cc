// The example of docs/client-example.md: an embedded PaceDB, one table, two
// worker threads doing Get / Inc / Clock, and the result read back.
//
//   pace_example_two_threads [data_dir]     (default: ./pace-example-data)
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "client/pace.h"

namespace {

constexpr int kClocks = 10;
constexpr uint64_t kRows = 4;

// One training thread: every clock, read each row and add 1 to every element.
pace::Status Train(pace::Client* client, const pace::Table& table) {
  std::unique_ptr<pace::Worker> worker;
  RETURN_IF_ERROR(client->RegisterWorker(&worker));
  std::vector<int64_t> row(table.schema().width);
  std::vector<int64_t> ones(table.schema().width, 1);
  for (int c = 0; c < kClocks; ++c) {
    for (uint64_t r = 0; r < kRows; ++r) {
      RETURN_IF_ERROR(worker->Get(table, r, row.data()));  // fresh within s clocks
      RETURN_IF_ERROR(worker->Inc(table, r, ones.data()));
    }
    RETURN_IF_ERROR(worker->Clock());
  }
  return worker->GlobalBarrier();  // everybody's updates are in
}

pace::Status Run(const char* data_dir) {
  pace::ClientOptions options;  // no servers: embedded shard
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
  RETURN_IF_ERROR(client->CreateTable(schema, &table));

  pace::Status results[2];
  std::thread a([&] { results[0] = Train(client.get(), table); });
  std::thread b([&] { results[1] = Train(client.get(), table); });
  a.join();
  b.join();
  RETURN_IF_ERROR(results[0]);
  RETURN_IF_ERROR(results[1]);

  // A fresh worker starts at the process clock; with s = 0 freshness it
  // would see every update. Here the last Clock() sent everything, so an
  // exact read only needs a value of version >= that clock.
  std::unique_ptr<pace::Worker> reader;
  RETURN_IF_ERROR(client->RegisterWorker(&reader));
  for (uint64_t r = 0; r < kRows; ++r) {
    int64_t v[3];
    RETURN_IF_ERROR(reader->Get(table, r, v));
    std::printf("row %llu: %lld %lld %lld\n", static_cast<unsigned long long>(r),
                static_cast<long long>(v[0]), static_cast<long long>(v[1]),
                static_cast<long long>(v[2]));
  }
  pace::ClientStats stats = client->Stats();
  const pace::TableStats& t = stats.tables[0];
  std::printf("reads %llu (cache hits %llu), mean staleness %.2f\n",
              static_cast<unsigned long long>(t.reads),
              static_cast<unsigned long long>(t.reads_cache_hit), t.staleness_mean);
  return client->Flush();
}

}  // namespace

int main(int argc, char** argv) {
  pace::Status s = Run(argc > 1 ? argv[1] : "./pace-example-data");
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
