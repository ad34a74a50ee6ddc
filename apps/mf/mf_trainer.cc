#include "apps/mf/mf_trainer.h"

#include <glog/logging.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "apps/shared/report.h"
#include "apps/shared/row_buffer.h"
#include "apps/shared/stop_signal.h"

namespace pace {
namespace mf {

using apps::MeasureCols;

Status ValidateMfOptions(const MfTrainOptions& o) {
  RETURN_IF_ERROR(apps::ValidateRunOptions(o.run));
  if (o.rank < 1 || o.rank > 4096) return Status::InvalidArgument("--rank must be in [1, 4096]");
  if (!(o.lr > 0) || !std::isfinite(o.lr)) return Status::InvalidArgument("--lr must be > 0");
  if (!(o.lr_power >= 0 && o.lr_power <= 2)) {
    return Status::InvalidArgument("--lr_power must be in [0, 2]");
  }
  if (!(o.lambda >= 0) || !std::isfinite(o.lambda)) {
    return Status::InvalidArgument("--lambda must be >= 0");
  }
  if (!(o.bias_lambda >= 0) || !std::isfinite(o.bias_lambda)) {
    return Status::InvalidArgument("--bias_lambda must be >= 0");
  }
  if (!(o.minibatch > 0 && o.minibatch <= 1)) {
    return Status::InvalidArgument("--minibatch must be in (0, 1]");
  }
  if (!(o.init_scale > 0) || !std::isfinite(o.init_scale)) {
    return Status::InvalidArgument("--init_scale must be > 0");
  }
  if (o.table_prefix.empty()) return Status::InvalidArgument("--table_prefix must not be empty");
  return Status::OK();
}

namespace {

// Ratings per look-ahead chunk: the rows of two chunks per worker (a user and
// an item row per rating at most) take at most a quarter of the cache budget,
// within [256, 8192] ratings.
size_t LookAheadRatings(uint64_t cache_budget_bytes, uint32_t width, int workers) {
  const uint64_t row_bytes = uint64_t{width} * sizeof(float) + 160;  // + entry overhead
  const uint64_t per_chunk =
      cache_budget_bytes / (4 * 2 * 2 * row_bytes * static_cast<uint64_t>(std::max(1, workers)));
  return static_cast<size_t>(std::clamp<uint64_t>(per_chunk, 256, 8192));
}

}  // namespace

struct MfTrainer::Shared {
  int64_t start_ns = 0;
  ClockT start_clock = 0;
  ClockT end_clock = 0;
  std::function<void(const MfReport&)> on_report;
  std::unique_ptr<apps::ProcessMeasure> measure;
  std::atomic<uint64_t> ratings{0};
  std::atomic<bool> stopped{false};  // SIGINT/SIGTERM: the workers stopped at StopClock()
  // Written by the reporting worker only.
  std::optional<double> final_test_rmse;
  uint64_t export_stale_rows = 0;
};

MfTrainer::MfTrainer(Client* client, MfDataset* data, MfTrainOptions options)
    : client_(client),
      data_(data),
      options_(std::move(options)),
      width_(RowWidth(options_.rank, options_.biases)) {}

Status MfTrainer::Setup() {
  RETURN_IF_ERROR(ValidateMfOptions(options_));
  TableSchema factors;
  factors.kind = RowKind::kDense;
  factors.type = ElementType::kF32;
  factors.width = width_;
  apps::ApplyConsistency(options_.run, &factors);
  factors.init.kind = InitKind::kUniform;
  factors.init.a = -options_.init_scale;
  factors.init.b = options_.init_scale;
  factors.init.seed = options_.run.seed;
  TableSchema users = factors, items = factors;
  users.name = options_.table_prefix + ".user";
  items.name = options_.table_prefix + ".item";
  TableSchema stats =
      apps::StatsTableSchema(options_.table_prefix + ".stats", MfStatsCols::kCount, options_.run);
  RETURN_IF_ERROR(apps::OpenJobTables(client_, options_.run, {users, items, stats}, &tables_));
  reg_ = ComputeRegWeights(*data_);
  parts_ =
      PartitionByUser(client_->num_clients() * static_cast<uint32_t>(options_.run.workers), data_);
  return Status::OK();
}

Status MfTrainer::Train(const std::function<void(const MfReport&)>& on_report,
                        MfTrainSummary* summary) {
  if (tables_.empty()) return Status::FailedPrecondition("MfTrainer::Setup was not called");
  Shared sh;
  sh.start_clock = client_->start_clock();
  sh.end_clock = options_.run.clocks;
  sh.on_report = on_report;
  *summary = MfTrainSummary();
  summary->start_clock = sh.start_clock;
  summary->end_clock = std::max(sh.start_clock, sh.end_clock);
  if (sh.start_clock >= sh.end_clock) return Status::OK();
  sh.measure = std::make_unique<apps::ProcessMeasure>(
      client_, std::vector<std::string>{user_table().name(), item_table().name()},
      options_.run.workers);
  sh.start_ns = apps::NowNs();
  Status s = apps::RunWorkers(client_, options_.run.workers,
                              [&](int i, Worker* w, const std::atomic<bool>& failed) {
                                return WorkerLoop(i, w, failed, &sh);
                              });
  summary->seconds = apps::SecondsSince(sh.start_ns);
  RETURN_IF_ERROR(s);
  RETURN_IF_ERROR(client_->Flush());
  summary->ratings = sh.ratings.load();
  if (summary->seconds > 0) {
    summary->ratings_per_second = static_cast<double>(summary->ratings) / summary->seconds;
  }
  summary->final_test_rmse = sh.final_test_rmse;
  summary->stopped = sh.stopped.load();
  summary->export_stale_rows = sh.export_stale_rows;
  return Status::OK();
}

Status MfTrainer::WorkerLoop(int w, Worker* worker, const std::atomic<bool>& failed, Shared* sh) {
  const Table& ut = tables_[0];
  const Table& it = tables_[1];
  const Table& st = tables_[2];
  const apps::RunOptions& run = options_.run;
  if (worker->clock() != sh->start_clock) {
    return Status::Internal("worker starts at clock " + std::to_string(worker->clock()) +
                            ", the client's resume clock is " + std::to_string(sh->start_clock));
  }
  const uint32_t num_parts = client_->num_clients() * static_cast<uint32_t>(run.workers);
  const uint32_t part_id = client_->client_id() * static_cast<uint32_t>(run.workers) + w;
  const Range part{parts_[part_id], parts_[part_id + 1]};
  const Range test_part = PartOf(data_->test.size(), part_id, num_parts);
  apps::RowBuffer<float> ubuf(data_->users.size(), width_), ibuf(data_->items.size(), width_);
  const std::vector<float> zero(width_, 0.0f);
  SgdParams p;
  p.rank = options_.rank;
  p.biases = options_.biases;
  p.mean = static_cast<float>(data_->mean);
  SetFactorPenalties(*data_, options_.lambda, &p);
  p.bias_lambda = static_cast<float>(options_.bias_lambda);

  Status load_status;
  auto user_row = [&](uint32_t u) -> float* {
    float* row = ubuf.Find(u);
    if (row != nullptr) return row;
    row = ubuf.Slot(u);
    Status s = worker->Get(ut, data_->users.raw(u), row);
    if (!s.ok() && load_status.ok()) load_status = s;
    ubuf.Loaded();
    return row;
  };
  auto item_row = [&](uint32_t i) -> float* {
    float* row = ibuf.Find(i);
    if (row != nullptr) return row;
    row = ibuf.Slot(i);
    Status s = worker->Get(it, data_->items.raw(i), row);
    if (!s.ok() && load_status.ok()) load_status = s;
    ibuf.Loaded();
    return row;
  };

  const bool reporter = client_->client_id() == 0 && w == 0;
  // Every worker reads the completed stats rows (only worker 0 of client 0
  // reports them): reading an uncached row is a round trip to its shard, and
  // if one worker paid it every clock, it would fall behind the others, which
  // ssp/essp let run up to s clocks ahead (the others then read rows up to s
  // clocks old). The first reader of a row fetches it; the others mostly hit
  // the process cache.
  std::vector<double> clock_end_seconds;  // of this worker, by clock - start_clock
  apps::StatsRowReader reader(st, run, sh->start_clock, sh->end_clock,
                              reporter ? client_ : nullptr);
  auto emit = [&](ClockT c, const std::vector<double>& row) -> Status {
    const double* app = row.data() + MeasureCols::kCount;
    MfReport rep;
    rep.clock = c;
    size_t k = static_cast<size_t>(c - sh->start_clock);
    rep.seconds = k < clock_end_seconds.size() ? clock_end_seconds[k] : 0;
    rep.ratings = static_cast<uint64_t>(app[MfStatsCols::kTrainN]);
    rep.train_loss = app[MfStatsCols::kTrainSq] / std::max(1.0, app[MfStatsCols::kTrainN]);
    if (app[MfStatsCols::kTestN] > 0) {
      rep.test_rmse = std::sqrt(app[MfStatsCols::kTestSq] / app[MfStatsCols::kTestN]);
    }
    apps::StalenessSummary ss = apps::SummarizeStaleness(row.data());
    rep.staleness_mean = ss.mean;
    rep.staleness_p99 = ss.p99;
    rep.blocked_pct = apps::BlockedPercent(row.data());
    if (c == sh->end_clock - 1) sh->final_test_rmse = rep.test_rmse;
    if (sh->on_report) sh->on_report(rep);
    return Status::OK();
  };

  // Adds the clock's changes of one table's rows with one batched Inc.
  std::vector<uint32_t> changed;
  std::vector<uint64_t> changed_rows;
  std::vector<float> deltas;
  auto flush = [&](const apps::RowBuffer<float>& buf, const IdMap& ids, const Table& t) {
    buf.ChangedRows(&changed, &deltas);
    changed_rows.resize(changed.size());
    for (size_t k = 0; k < changed.size(); ++k) changed_rows[k] = ids.raw(changed[k]);
    return worker->Inc(t, changed_rows, deltas.data());
  };

  // Look-ahead: the rows of the next `chunk` ratings are prefetched (one
  // Read per shard and table, skipping rows cached fresh, pushed or in
  // flight) while the worker computes on the ratings before them, so that a
  // Get finds its row cached instead of paying a round trip per row. The
  // window is `2 * chunk` ratings ahead at most; its rows are a small part of
  // the cache budget, so they are not evicted before they are read (and the
  // cache prefers to evict rows outside it: Worker::Prefetch).
  const size_t chunk = LookAheadRatings(client_->Stats().cache_budget_bytes, width_, run.workers);
  // The user rows a worker keeps copies of within a clock (RowBuffer: the
  // value as read and as updated): four look-ahead chunks' worth. Item rows
  // likewise: with budgets that fit, all items fit in it (they recur in every
  // chunk and are kept for the whole clock); under a small budget they would
  // not (20k items x rank 128 are 20 MB of copies per worker plus 10 MB of
  // deltas), so they are flushed like user rows.
  // Under a small cache (chunk below its cap of 8192) two chunks' worth: the
  // copies are then as large as the client cache itself otherwise.
  const size_t user_buffer_rows = (chunk >= 8192 ? 4 : 2) * chunk;
  const size_t item_buffer_rows = user_buffer_rows;
  std::vector<uint32_t> user_mark(data_->users.size(), 0), item_mark(data_->items.size(), 0);
  uint32_t mark = 0;
  // The distinct rows of ratings [begin, end) of `rating(j)` that the copies
  // lack, as indices into data_->users and data_->items.
  std::vector<uint32_t> range_users, range_items;
  auto collect_range = [&](size_t begin, size_t end, auto&& rating) {
    if (++mark == 0) {  // wrapped: clear the marks once every 2^32 ranges
      std::fill(user_mark.begin(), user_mark.end(), 0);
      std::fill(item_mark.begin(), item_mark.end(), 0);
      mark = 1;
    }
    range_users.clear();
    range_items.clear();
    for (size_t j = begin; j < end; ++j) {
      const Rating& r = rating(j);
      if (r.user != IdMap::kUnknown && user_mark[r.user] != mark) {
        user_mark[r.user] = mark;
        if (ubuf.Find(r.user) == nullptr) range_users.push_back(r.user);
      }
      if (r.item != IdMap::kUnknown && item_mark[r.item] != mark) {
        item_mark[r.item] = mark;
        if (ibuf.Find(r.item) == nullptr) range_items.push_back(r.item);
      }
    }
  };
  std::vector<uint64_t> raw_rows;
  auto raw_of = [&](const IdMap& ids,
                    const std::vector<uint32_t>& indices) -> const std::vector<uint64_t>& {
    raw_rows.resize(indices.size());
    for (size_t k = 0; k < indices.size(); ++k) raw_rows[k] = ids.raw(indices[k]);
    return raw_rows;
  };
  // Prefetches the rows of ratings [begin, end) that the copies lack.
  auto prefetch_range = [&](size_t begin, size_t end, auto&& rating) -> Status {
    collect_range(begin, end, rating);
    if (!range_users.empty())
      RETURN_IF_ERROR(worker->Prefetch(ut, raw_of(data_->users, range_users)));
    if (!range_items.empty())
      RETURN_IF_ERROR(worker->Prefetch(it, raw_of(data_->items, range_items)));
    return Status::OK();
  };
  // The rows of a look-ahead chunk that the copies lack are read in one
  // Worker::GetRows per table when the chunk starts (prefetched a chunk
  // earlier, they are mostly cached by then), so the ratings find every row
  // they need in the copies: no per-rating call into the client. Before a
  // chunk is read, copies over their bound go to the table (training) or
  // are dropped (test: their changes are there already).
  std::vector<float> load_block;
  auto load_rows = [&](const Table& t, const IdMap& ids, const std::vector<uint32_t>& indices,
                       apps::RowBuffer<float>* buf) -> Status {
    if (indices.empty()) return Status::OK();
    load_block.resize(indices.size() * width_);
    RETURN_IF_ERROR(worker->GetRows(t, raw_of(ids, indices), load_block.data()));
    buf->LoadBlock(indices, load_block.data());
    return Status::OK();
  };
  auto load_chunk = [&](bool training, size_t begin, size_t end, auto&& rating) -> Status {
    collect_range(begin, end, rating);
    bool cleared = false;
    if (ubuf.loaded() + range_users.size() > user_buffer_rows) {
      if (training) RETURN_IF_ERROR(flush(ubuf, data_->users, ut));
      ubuf.Clear();
      cleared = true;
    }
    if (ibuf.loaded() + range_items.size() > item_buffer_rows) {
      if (training) RETURN_IF_ERROR(flush(ibuf, data_->items, it));
      ibuf.Clear();
      cleared = true;
    }
    if (cleared) collect_range(begin, end, rating);
    RETURN_IF_ERROR(load_rows(ut, data_->users, range_users, &ubuf));
    return load_rows(it, data_->items, range_items, &ibuf);
  };
  // Under essp/async the push of the previous clock usually completes some
  // milliseconds into a clock, after the worker has read (and copied) nearly
  // every item row it needs: items recur in every chunk and are kept for the
  // whole clock. So at the first look-ahead chunk boundary after such a push
  // the item copies are given up: while training their changes go to the
  // table first (during the test pass they are there already), and later
  // ratings read the pushed value, which includes them (read-my-writes). This
  // is what a Get per access through the cache (Bösen's MF) sees, at the cost
  // of one more Get per item per push (one push per global clock). User rows
  // are partitioned by worker: no one else updates them, a push never changes
  // them, and their copies are kept.
  apps::PushWatch pushes(client_);
  constexpr bool kTrain = true, kTest = false;
  size_t refreshed_at = 0;  // of the clock's training ratings, for --v=1
  auto refresh = [&](bool training, size_t j) {
    if (training) {
      if (refreshed_at == 0) refreshed_at = j;
      Status s = flush(ibuf, data_->items, it);
      if (!s.ok() && load_status.ok()) load_status = s;
    }
    ibuf.Clear();
  };
  // Runs body(j) for j in [0, count) chunk by chunk: when a chunk starts, the
  // item copies are refreshed after a push (see above), the look-ahead
  // window is filled up to the end of the next chunk, and the chunk's rows
  // are read into the copies.
  auto with_look_ahead = [&](bool training, size_t count, auto&& rating, auto&& body) -> Status {
    size_t ahead = 0;  // ratings [0, ahead) have been prefetched
    for (size_t j = 0; j < count; ++j) {
      if (j % chunk == 0) {
        if (j > 0 && pushes.Newer()) refresh(training, j);
        while (ahead < std::min(count, j + 2 * chunk)) {
          const size_t end = std::min(count, ahead + chunk);
          RETURN_IF_ERROR(prefetch_range(ahead, end, rating));
          ahead = end;
        }
        RETURN_IF_ERROR(load_chunk(training, j, std::min(count, j + chunk), rating));
      }
      body(rating(j));
    }
    return Status::OK();
  };

  std::vector<double> cols(MeasureCols::kCount + MfStatsCols::kCount);
  double* app = cols.data() + MeasureCols::kCount;
  int64_t interval_start = apps::NowNs();
  // --v=1: where each clock's wall time went (on a CPU, runnable, blocked).
  int64_t trace_start = interval_start;
  apps::ThreadSchedTimes trace_sched = apps::ReadThreadSchedTimes();
  for (ClockT c = worker->clock(); c < sh->end_clock; c = worker->clock()) {
    if (failed.load()) return Status::Aborted("another worker failed");
    if (apps::StopBefore(c)) {
      sh->stopped = true;
      break;
    }
    apps::MaybeStraggle(run, client_->client_id(), w, c);
    p.lr = static_cast<float>(StepSize(options_.lr, c, options_.lr_power));
    const Window win = MinibatchWindow(part.size(), options_.minibatch, c);
    pushes.Newer();  // the copies are empty here: read from now on
    refreshed_at = 0;
    double train_sq = 0;
    auto train_rating = [&](size_t j) -> const Rating& {
      return data_->train[part.begin + (win.start + j) % part.size()];
    };
    RETURN_IF_ERROR(with_look_ahead(kTrain, win.count, train_rating, [&](const Rating& r) {
      float* u = user_row(r.user);
      float* v = item_row(r.item);
      const float e = SgdUpdate(u, v, r.value, reg_.user[r.user], reg_.item[r.item], p);
      train_sq += static_cast<double>(e) * e;
    }));
    RETURN_IF_ERROR(load_status);
    RETURN_IF_ERROR(flush(ubuf, data_->users, ut));
    RETURN_IF_ERROR(flush(ibuf, data_->items, it));

    double test_sq = 0, test_n = 0;
    if ((c + 1) % run.eval_every == 0 || c + 1 == sh->end_clock) {
      auto test_rating = [&](size_t j) -> const Rating& {
        return data_->test[test_part.begin + j];
      };
      RETURN_IF_ERROR(with_look_ahead(kTest, test_part.size(), test_rating, [&](const Rating& r) {
        const float* u = r.user == IdMap::kUnknown ? zero.data() : user_row(r.user);
        const float* v = r.item == IdMap::kUnknown ? zero.data() : item_row(r.item);
        const float e = r.value - Clip(Predict(u, v, p), data_->min_rating, data_->max_rating);
        test_sq += static_cast<double>(e) * e;
      }));
      RETURN_IF_ERROR(load_status);
      test_n = static_cast<double>(test_part.size());
    }
    ubuf.Clear();
    ibuf.Clear();

    std::fill(cols.begin(), cols.end(), 0.0);
    cols[MeasureCols::kWallSeconds] = apps::SecondsSince(interval_start);
    interval_start = apps::NowNs();
    sh->measure->EndClock(c, cols.data());
    app[MfStatsCols::kTrainSq] = train_sq;
    app[MfStatsCols::kTrainN] = static_cast<double>(win.count);
    app[MfStatsCols::kTestSq] = test_sq;
    app[MfStatsCols::kTestN] = test_n;
    RETURN_IF_ERROR(worker->Inc(st, static_cast<uint64_t>(c), cols.data()));
    RETURN_IF_ERROR(worker->Clock());
    // Every worker of every process starts the next clock together: processes
    // start at different times (reading the input), and under ssp/essp
    // nothing pulls a process that started first back from up to s clocks
    // ahead, which would show up as read staleness of up to s throughout.
    if (c == sh->start_clock && c + 1 < sh->end_clock) RETURN_IF_ERROR(worker->GlobalBarrier());
    sh->ratings += win.count;
    if (VLOG_IS_ON(1)) {
      const int64_t now = apps::NowNs();
      const apps::ThreadSchedTimes t = apps::ReadThreadSchedTimes();
      const double wall = (now - trace_start) / 1e6, run = (t.run_ns - trace_sched.run_ns) / 1e6,
                   wait = (t.wait_ns - trace_sched.wait_ns) / 1e6;
      VLOG(1) << "mf client " << client_->client_id() << " worker " << w << ": clock " << c
              << " wall " << wall << " ms, on cpu " << run << " ms, runnable " << wait
              << " ms, blocked " << wall - run - wait << " ms, ended at " << now / 1000
              << " us (steady); items refreshed after " << refreshed_at << " of " << win.count
              << " ratings";
      trace_start = now;
      trace_sched = t;
    }
    if (reporter) {
      clock_end_seconds.push_back(apps::SecondsSince(sh->start_ns));
      RETURN_IF_ERROR(reader.Poll(worker, emit));
    } else {
      RETURN_IF_ERROR(
          reader.Poll(worker, [](ClockT, const std::vector<double>&) { return Status::OK(); }));
    }
  }
  if (!reporter) return Status::OK();
  if (sh->stopped.load()) {
    // Report every clock before the stop clock, so that the lines (and a
    // --csv that --resume appends to) have no gap. With other processes,
    // which stop at their own clocks, the barrier could wait for ever.
    if (client_->num_clients() > 1) return Status::OK();
    return reader.Finish(worker, std::min(apps::StopClock(), sh->end_clock), emit);
  }
  RETURN_IF_ERROR(reader.Finish(worker, sh->end_clock, emit));
  if (!options_.export_dir.empty()) {
    RETURN_IF_ERROR(Export(worker, options_.export_dir, sh->end_clock, &sh->export_stale_rows));
  }
  return Status::OK();
}

Status MfTrainer::ReadFactors(Worker* worker, ClockT fresh_as_of, std::vector<float>* users,
                              std::vector<float>* items, uint64_t* stale_rows) {
  if (tables_.empty()) return Status::FailedPrecondition("MfTrainer::Setup was not called");
  *stale_rows = 0;
  auto read_all = [&](const Table& t, const IdMap& ids, std::vector<float>* out) -> Status {
    out->assign(static_cast<size_t>(ids.size()) * width_, 0.0f);
    for (uint32_t i = 0; i < ids.size(); ++i) {
      Version version = 0;
      RETURN_IF_ERROR(worker->Read(t, ids.raw(i), [&](const RowView& v) {
        version = v.version;
        std::memcpy(&(*out)[static_cast<size_t>(i) * width_], v.bytes.data(),
                    std::min<size_t>(v.bytes.size(), width_ * sizeof(float)));
      }));
      if (version < fresh_as_of) ++*stale_rows;
    }
    return Status::OK();
  };
  RETURN_IF_ERROR(read_all(user_table(), data_->users, users));
  return read_all(item_table(), data_->items, items);
}

namespace {

Status WriteFactorCsv(const std::string& path, const IdMap& ids, const IdNames& names,
                      IdNames::Column column, const std::vector<float>& rows, int rank,
                      bool biases) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "w"), &std::fclose);
  if (!f) return Status::IOError("cannot write '" + path + "': " + std::strerror(errno));
  const uint32_t width = RowWidth(rank, biases);
  std::fputs("id", f.get());
  for (int k = 0; k < rank; ++k) std::fprintf(f.get(), ",f%d", k);
  if (biases) std::fputs(",bias", f.get());
  std::fputc('\n', f.get());
  for (uint32_t i = 0; i < ids.size(); ++i) {
    std::fputs(names.Text(column, ids.raw(i)).c_str(), f.get());
    for (uint32_t k = 0; k < width; ++k) {
      std::fprintf(f.get(), ",%.7g", rows[static_cast<size_t>(i) * width + k]);
    }
    std::fputc('\n', f.get());
  }
  if (std::ferror(f.get())) return Status::IOError("writing '" + path + "' failed");
  FILE* raw = f.release();
  if (std::fclose(raw) != 0) return Status::IOError("closing '" + path + "' failed");
  return Status::OK();
}

}  // namespace

Status MfTrainer::Export(Worker* worker, const std::string& dir, ClockT fresh_as_of,
                         uint64_t* stale_rows) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::IOError("cannot create --export directory '" + dir +
                           "': " + std::strerror(errno));
  }
  std::vector<float> users, items;
  RETURN_IF_ERROR(ReadFactors(worker, fresh_as_of, &users, &items, stale_rows));
  RETURN_IF_ERROR(WriteFactorCsv(dir + "/user_factors.csv", data_->users, data_->names,
                                 IdNames::kUser, users, options_.rank, options_.biases));
  RETURN_IF_ERROR(WriteFactorCsv(dir + "/item_factors.csv", data_->items, data_->names,
                                 IdNames::kItem, items, options_.rank, options_.biases));
  std::string model_path = dir + "/model.txt";
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(model_path.c_str(), "w"), &std::fclose);
  if (!f) return Status::IOError("cannot write '" + model_path + "'");
  std::fprintf(f.get(),
               "# prediction = mean + user.bias + item.bias + user.f . item.f (biases only if "
               "biases=true), clipped to [min_rating, max_rating]\n"
               "rank=%d\nbiases=%s\nmean=%.9g\nmin_rating=%g\nmax_rating=%g\nclock=%lld\n"
               "users=%u\nitems=%u\n",
               options_.rank, options_.biases ? "true" : "false", data_->mean, data_->min_rating,
               data_->max_rating, static_cast<long long>(fresh_as_of), data_->users.size(),
               data_->items.size());
  FILE* raw = f.release();
  if (std::fclose(raw) != 0) return Status::IOError("writing '" + model_path + "' failed");
  return Status::OK();
}

}  // namespace mf
}  // namespace pace
