// Benchmark 4: the ESSP push path over loopback. A real shard
// service behind the real TCP transport pushes N subscribed dense rows (100 f32)
// to a RemoteShard after each shard-clock advance; measured from the batch that
// advances the clock to the PushDone received by the subscriber: reading the
// rows, encoding, framing, TCP, verifying and decoding. Baseline: a raw
// Boost.Asio loopback stream of the same number of bytes. Target: >= 0.5x.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "common/row.h"
#include "net/remote_shard.h"
#include "net/server.h"
#include "server/shard_service.h"
#include "tools/bench/ratio.h"
#include "tools/bench/scratch.h"

namespace pace {
namespace {

constexpr uint32_t kWidth = 100;

// Waits for PushDone{version} and counts pushed rows and bytes.
struct Subscriber {
  std::mutex mu;
  std::condition_variable cv;
  Version done = 0;
  ClockT acked = -1;
  uint64_t rows = 0;
  uint64_t bytes = 0;

  void OnMessage(net::Message m) {
    std::lock_guard<std::mutex> l(mu);
    if (auto* p = std::get_if<net::Push>(&m)) {
      rows += p->rows.size();
      for (const auto& r : p->rows) bytes += r.bytes.size() + 12;
    } else if (auto* d = std::get_if<net::PushDone>(&m)) {
      done = d->version;
    } else if (auto* a = std::get_if<net::Ack>(&m)) {
      acked = a->clock;
    }
    cv.notify_all();
  }
  template <typename Pred>
  void WaitFor(Pred pred) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, pred);
  }
};

void BM_EsspPushLoopback(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0));
  std::string dir =
      (bench::ScratchRoot() / ("pace-bench-push-" + std::to_string(getpid()))).string();
  std::error_code ignored;  // a leftover is harmless; never an exception
  std::filesystem::remove_all(dir, ignored);
  ShardServiceOptions options;
  options.data_dir = dir;
  options.store.num_clients = 2;
  std::unique_ptr<ShardService> service;
  Status s = ShardService::Open(options, &service);
  net::Server server(net::ServerOptions{});
  if (s.ok()) s = server.Start(service.get());
  Subscriber sub, other;
  std::unique_ptr<net::RemoteShard> c0, c1;
  net::RemoteShardOptions ro;
  if (s.ok()) {
    ro.port = server.port();
    ro.hello.client_id = 0;
    s = net::RemoteShard::Connect(
        ro, [&](net::Message m) { sub.OnMessage(std::move(m)); }, nullptr, &c0);
  }
  if (s.ok()) {
    ro.hello.client_id = 1;
    s = net::RemoteShard::Connect(
        ro, [&](net::Message m) { other.OnMessage(std::move(m)); }, nullptr, &c1);
  }
  TableSchema schema;
  schema.name = "w";
  schema.width = kWidth;
  schema.consistency = Consistency::kEssp;
  schema.staleness = 1;
  uint32_t table = 0;
  if (s.ok()) {
    auto created = c0->CreateTable(schema).get();
    s = created.status();
    if (s.ok()) table = created->id;
  }
  std::vector<uint64_t> ids(rows);
  for (int r = 0; r < rows; ++r) ids[r] = static_cast<uint64_t>(r);
  if (s.ok()) s = c0->Read(table, ids, 0, /*subscribe=*/true).get().status();
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  std::vector<float> delta(kWidth, 0.5f);
  std::string delta_bytes = EncodeDense(delta);
  ClockT clock = 0;
  for (auto _ : state) {
    // Client 1 changes every row client 0 subscribes at this clock (not
    // timed); the shard clock waits for client 0. (A row changed only by its
    // subscriber's own batches is not pushed back to it.)
    net::Apply apply{clock, {}};
    apply.updates.reserve(rows);
    for (int r = 0; r < rows; ++r) apply.Add(table, ids[r], delta_bytes);
    (void)c1->Send(std::move(apply));
    other.WaitFor([&] { return other.acked >= clock; });
    auto start = std::chrono::steady_clock::now();
    (void)c0->Send(net::Apply{clock, {}});  // advances the shard clock: push
    sub.WaitFor([&] { return sub.done >= clock + 1; });
    auto end = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
    ++clock;
  }
  state.SetItemsProcessed(state.iterations() * rows);
  state.counters["pushed_rows"] = static_cast<double>(sub.rows);
  c0->Close();
  c1->Close();
  server.Stop();
  service.reset();
  std::filesystem::remove_all(dir, ignored);
}

// The same bytes a push carries (rows x (100 f32 + 12 bytes of key)), written
// by one socket and read by another over loopback with plain Boost.Asio.
void BM_RawAsioLoopback(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0));
  const size_t bytes = static_cast<size_t>(rows) * (kWidth * 4 + 12);
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::address_v4::loopback(), 0});
  asio::ip::tcp::socket writer(io), reader(io);
  boost::system::error_code ec;
  writer.connect(acceptor.local_endpoint(), ec);
  acceptor.accept(reader, ec);
  if (ec) {
    state.SkipWithError(ec.message().c_str());
    return;
  }
  writer.set_option(asio::ip::tcp::no_delay(true), ec);
  std::string out(bytes, 'x');
  std::vector<char> in(1 << 16);
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    std::thread w([&] { asio::write(writer, asio::buffer(out), ec); });
    size_t got = 0;
    boost::system::error_code rec;
    while (got < bytes && !rec) got += reader.read_some(asio::buffer(in), rec);
    w.join();
    auto end = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
  }
  state.SetItemsProcessed(state.iterations() * rows);
}

BENCHMARK(BM_RawAsioLoopback)->Arg(10000)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EsspPushLoopback)->Arg(10000)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pace

int main(int argc, char** argv) {
  pace::bench::Pair("4 push path over loopback (rows/s vs raw Asio stream of the same bytes)",
                    "BM_RawAsioLoopback/10000", "BM_EsspPushLoopback/10000",
                    pace::bench::kRateRatioAtLeast, 0.5);
  return pace::bench::RunAndReport(argc, argv);
}
