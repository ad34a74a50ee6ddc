#include "apps/mf/mf_worker.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "apps/shared/stop_signal.h"
#include "common/thread_name.h"

namespace pace {
namespace mf {

using apps::MeasureCols;

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

// The rows a worker keeps copies of within a clock, of user rows and of
// item rows each (RowBuffer: the value as read and as updated): four
// look-ahead chunks' worth. Item rows likewise: with budgets that fit, all
// items fit in it (they recur in every chunk and are kept for the whole
// clock); under a small budget they would not (20k items x rank 128 are
// 20 MB of copies per worker plus 10 MB of deltas), so they are flushed like
// user rows. Under a small cache (chunk below its cap of 8192) two chunks'
// worth: the copies are then as large as the client cache itself otherwise.
size_t CopyBound(size_t chunk) { return (chunk >= 8192 ? 4 : 2) * chunk; }

// User rows whose copies are not all kept (more users than CopyBound) are
// flushed after one chunk's worth instead: a user's copy is used again only
// if the user recurs within the window, which in user order (`--order=rows`)
// it never does and in data order at model scale rarely (8a: 1.7 ratings a
// user in all); four chunks of them only held memory (8a's peak RSS 1,045
// -> 935 MB, ratings/s unchanged; docs/data-path.md).
size_t UserCopyBound(size_t users, size_t chunk, size_t bound) {
  return users <= bound ? bound : std::min(bound, chunk);
}

// The leased rows of `bytes` (a row's value and its cache entry's overhead),
// each worker's share.
size_t WindowRows(uint64_t bytes, uint32_t width, int workers) {
  const uint64_t row_bytes = uint64_t{width} * sizeof(float) + 160;  // + entry overhead
  return static_cast<size_t>(bytes / (row_bytes * static_cast<uint64_t>(std::max(1, workers))));
}

// User rows a worker keeps leased (in place, MfTrainOptions::in_place): the
// leases of its latest look-ahead chunks, so that a user rated again within
// the window is neither leased again nor sent twice in a clock. A leased
// row's delta stays open until its release (a part leaves it for later) and
// the row stays cached: the workers' windows together take at most half the
// open-delta bound, what it leaves beside the two parts' worth of open
// deltas the process clock may hold (ClientStats::part_bytes), and a quarter
// of the cache budget. At least one chunk's users (the copies' bound).
// MfWorker::LeaseWindow narrows it for a pass whose users are rarely rated
// twice (PartsWindowRows).
size_t LeaseWindowRows(const ClientStats& stats, uint32_t width, int workers, size_t at_least) {
  const uint64_t open = stats.open_delta_budget_bytes;
  const uint64_t beside_parts = open > 2 * stats.part_bytes ? open - 2 * stats.part_bytes : 0;
  const uint64_t bytes = std::min({open / 2, beside_parts, stats.cache_budget_bytes / 4});
  return std::max(at_least, WindowRows(bytes, width, workers));
}

// The window's rows that leave two parts of a clock sealable beside it,
// between the workers.
size_t PartsWindowRows(const ClientStats& stats, uint32_t width, int workers) {
  return WindowRows(2 * stats.part_bytes, width, workers);
}

constexpr bool kTrain = true;
constexpr bool kTest = false;

}  // namespace

MfWorker::MfWorker(MfTrainer* trainer, int index, Worker* worker, const std::atomic<bool>& failed,
                   MfTrainShared* shared)
    : t_(*trainer),
      data_(*trainer->data_),
      options_(trainer->options_),
      w_(index),
      worker_(worker),
      failed_(failed),
      sh_(shared),
      ut_(trainer->tables_[0]),
      it_(trainer->tables_[1]),
      st_(trainer->tables_[2]),
      width_(trainer->width_),
      reporter_(trainer->client_->client_id() == 0 && index == 0),
      // Look-ahead: the rows of the next `chunk` ratings are prefetched (one
      // Read per shard and table, skipping rows cached fresh, pushed or in
      // flight) while the worker computes on the ratings before them, so
      // that a Get finds its row cached instead of paying a round trip per
      // row. The window is `2 * chunk` ratings ahead at most; its rows are a
      // small part of the cache budget, so they are not evicted before they
      // are read (and the cache prefers to evict rows outside it:
      // Worker::Prefetch).
      chunk_(LookAheadRatings(trainer->client_->Stats().cache_budget_bytes, trainer->width_,
                              trainer->options_.run.workers)),
      buffer_rows_(CopyBound(chunk_)),
      user_buffer_rows_(UserCopyBound(data_.users.size(), chunk_, buffer_rows_)),
      lease_window_(LeaseWindowRows(trainer->client_->Stats(), trainer->width_,
                                    trainer->options_.run.workers, user_buffer_rows_)),
      parts_window_(PartsWindowRows(trainer->client_->Stats(), trainer->width_,
                                    trainer->options_.run.workers)),
      lease_ahead_(trainer->options_.lease_ahead &&
                   static_cast<unsigned>(trainer->options_.run.workers) <
                       std::max(1u, std::thread::hardware_concurrency())),
      // A chunk's rows of a table (LoadChunk) load in one run.
      ubuf_(data_.users.size(), width_, data_.users.size() <= buffer_rows_, chunk_),
      ibuf_(data_.items.size(), width_, data_.items.size() <= buffer_rows_, chunk_),
      zero_(width_, 0.0f),
      pushes_(trainer->client_),
      // Every worker reads the completed stats rows (only worker 0 of client
      // 0 reports them): reading an uncached row is a round trip to its
      // shard, and if one worker paid it every clock, it would fall behind
      // the others, which ssp/essp let run up to s clocks ahead (the others
      // then read rows up to s clocks old). The first reader of a row fetches
      // it; the others mostly hit the process cache.
      reader_(trainer->tables_[2], options_.run, shared->start_clock, shared->end_clock,
              reporter_ ? trainer->client_ : nullptr),
      cols_(MeasureCols::kCount + MfStatsCols::kCount) {
  Client* client = t_.client_;
  const uint32_t workers = static_cast<uint32_t>(options_.run.workers);
  const uint32_t num_parts = client->num_clients() * workers;
  const uint32_t part_id = client->client_id() * workers + static_cast<uint32_t>(w_);
  part_id_ = part_id;
  part_ = Range{t_.parts_[part_id], t_.parts_[part_id + 1]};
  test_part_ = PartOf(data_.test.size(), part_id, num_parts);
  p_.rank = options_.rank;
  p_.biases = options_.biases;
  p_.mean = static_cast<float>(data_.mean);
  SetFactorPenalties(data_, options_.lambda, &p_);
  p_.bias_lambda = static_cast<float>(options_.bias_lambda);
}

MfWorker::~MfWorker() {
  LeaseAhead& h = ahead_lease_;
  if (!h.thread.joinable()) return;
  {
    std::lock_guard<std::mutex> l(h.mu);
    h.stop = true;
  }
  h.cv.notify_all();
  h.thread.join();
}

Status MfWorker::Run() {
  if (worker_->clock() != sh_->start_clock) {
    return Status::Internal("worker starts at clock " + std::to_string(worker_->clock()) +
                            ", the client's resume clock is " + std::to_string(sh_->start_clock));
  }
  interval_start_ = apps::NowNs();
  // --v=1: where each clock's wall time went (on a CPU, runnable, blocked).
  trace_start_ = interval_start_;
  trace_sched_ = apps::ReadThreadSchedTimes();
  for (ClockT c = worker_->clock(); c < sh_->end_clock; c = worker_->clock()) {
    if (failed_.load()) return Status::Aborted("another worker failed");
    if (apps::StopBefore(c)) {
      sh_->stopped = true;
      break;
    }
    apps::MaybeStraggle(options_.run, t_.client_->client_id(), w_, c);
    size_t count = 0;
    double train_sq = 0;
    RETURN_IF_ERROR(TrainPass(c, &count, &train_sq));
    double test_sq = 0, test_n = 0;
    if ((c + 1) % options_.run.eval_every == 0 || c + 1 == sh_->end_clock) {
      RETURN_IF_ERROR(TestPass(&test_sq, &test_n));
    }
    ClearUsers();
    ClearItems();
    RETURN_IF_ERROR(EndClock(c, count, train_sq, test_sq, test_n));
  }
  return Finish();
}

Status MfWorker::TrainPass(ClockT c, size_t* count, double* train_sq) {
  p_.lr = static_cast<float>(StepSize(options_.lr, c, options_.lr_power));
  const Window win = MinibatchWindow(part_.size(), options_.minibatch, c);
  pushes_.Newer();  // the copies are empty here: read from now on
  refreshed_at_ = 0;
  *count = win.count;
  double sq = 0;
  // Rating j of the window; start < size and j < count <= size, so one
  // subtraction wraps it (no division per rating).
  const Rating* part = data_.train.data() + part_.begin;
  const size_t size = part_.size(), start = win.start;
  auto update = [&](const Rating& r, float* u, float* v) {
    const float e = SgdUpdate(u, v, r.value, t_.reg_.user[r.user], t_.reg_.item[r.item], p_);
    sq += static_cast<double>(e) * e;
  };
  // Not in user order (each user row streams through the cache once), nor
  // under vap (every delta counts against the bound as it is added).
  lease_users_ =
      options_.in_place && !t_.row_order_ && options_.run.consistency != Consistency::kVap;
  leased_sq_ = 0;
  if (lease_users_ && user_value_.size() != data_.users.size()) {
    user_value_.assign(data_.users.size(), nullptr);
    user_delta_.assign(data_.users.size(), nullptr);
  }
  if (t_.row_order_) {
    RowOrderOf(part, size, win, data_.users, &order_);
    const uint32_t* order = order_.data();
    auto train_rating = [part, order](size_t j) -> const Rating& { return part[order[j]]; };
    RETURN_IF_ERROR(WithLookAhead(kTrain, win.count, train_rating, update));
  } else {
    auto train_rating = [part, size, start](size_t j) -> const Rating& {
      const size_t k = start + j;
      return part[k < size ? k : k - size];
    };
    RETURN_IF_ERROR(WithLookAhead(kTrain, win.count, train_rating, update));
  }
  ReleaseUsers();
  lease_users_ = false;
  *train_sq = sq + leased_sq_;
  RETURN_IF_ERROR(load_status_);
  RETURN_IF_ERROR(FlushChanges(ubuf_, data_.users, ut_));
  return FlushChanges(ibuf_, data_.items, it_);
}

Status MfWorker::TestPass(double* test_sq, double* test_n) {
  double sq = 0;
  auto test_rating = [&](size_t j) -> const Rating& { return data_.test[test_part_.begin + j]; };
  RETURN_IF_ERROR(WithLookAhead(
      kTest, test_part_.size(), test_rating, [&](const Rating& r, float* u, float* v) {
        const float e = r.value - Clip(Predict(u, v, p_), data_.min_rating, data_.max_rating);
        sq += static_cast<double>(e) * e;
      }));
  RETURN_IF_ERROR(load_status_);
  *test_sq = sq;
  *test_n = static_cast<double>(test_part_.size());
  return Status::OK();
}

Status MfWorker::EndClock(ClockT c, size_t count, double train_sq, double test_sq, double test_n) {
  double* app = cols_.data() + MeasureCols::kCount;
  std::fill(cols_.begin(), cols_.end(), 0.0);
  cols_[MeasureCols::kWallSeconds] = apps::SecondsSince(interval_start_);
  interval_start_ = apps::NowNs();
  sh_->measure->EndClock(c, cols_.data());
  app[MfStatsCols::kTrainSq] = train_sq;
  app[MfStatsCols::kTrainN] = static_cast<double>(count);
  app[MfStatsCols::kTestSq] = test_sq;
  app[MfStatsCols::kTestN] = test_n;
  RETURN_IF_ERROR(worker_->Inc(st_, static_cast<uint64_t>(c), cols_.data()));
  RETURN_IF_ERROR(worker_->Clock());
  // Every worker of every process starts the next clock together: processes
  // start at different times (reading the input), and under ssp/essp nothing
  // pulls a process that started first back from up to s clocks ahead, which
  // would show up as read staleness of up to s throughout. One process's
  // workers start together anyway, and the barrier would make them wait for
  // the shards to commit the first clock (at model scale its deltas cover
  // most of the model) instead of training the next one meanwhile.
  if (c == sh_->start_clock && c + 1 < sh_->end_clock && t_.client_->num_clients() > 1) {
    RETURN_IF_ERROR(worker_->GlobalBarrier());
  }
  sh_->ratings += count;
  if (VLOG_IS_ON(1)) TraceClock(c, count);
  if (reporter_) {
    clock_end_seconds_.push_back(apps::SecondsSince(sh_->start_ns));
    return reader_.Poll(
        worker_, [this](ClockT rc, const std::vector<double>& row) { return Report(rc, row); });
  }
  return reader_.Poll(worker_, [](ClockT, const std::vector<double>&) { return Status::OK(); });
}

void MfWorker::TraceClock(ClockT c, size_t count) {
  const int64_t now = apps::NowNs();
  const apps::ThreadSchedTimes t = apps::ReadThreadSchedTimes();
  const double wall = (now - trace_start_) / 1e6, run = (t.run_ns - trace_sched_.run_ns) / 1e6,
               wait = (t.wait_ns - trace_sched_.wait_ns) / 1e6;
  VLOG(1) << "mf client " << t_.client_->client_id() << " worker " << w_ << ": clock " << c
          << " wall " << wall << " ms, on cpu " << run << " ms, runnable " << wait
          << " ms, blocked " << wall - run - wait << " ms, ended at " << now / 1000
          << " us (steady); items refreshed after " << refreshed_at_ << " of " << count
          << " ratings";
  trace_start_ = now;
  trace_sched_ = t;
}

Status MfWorker::Report(ClockT c, const std::vector<double>& row) {
  const double* app = row.data() + MeasureCols::kCount;
  MfReport rep;
  rep.clock = c;
  size_t k = static_cast<size_t>(c - sh_->start_clock);
  rep.seconds = k < clock_end_seconds_.size() ? clock_end_seconds_[k] : 0;
  rep.ratings = static_cast<uint64_t>(app[MfStatsCols::kTrainN]);
  rep.train_loss = app[MfStatsCols::kTrainSq] / std::max(1.0, app[MfStatsCols::kTrainN]);
  if (app[MfStatsCols::kTestN] > 0) {
    rep.test_rmse = std::sqrt(app[MfStatsCols::kTestSq] / app[MfStatsCols::kTestN]);
  }
  apps::StalenessSummary ss = apps::SummarizeStaleness(row.data());
  rep.staleness_mean = ss.mean;
  rep.staleness_p99 = ss.p99;
  rep.blocked_pct = apps::BlockedPercent(row.data());
  if (c == sh_->end_clock - 1) sh_->final_test_rmse = rep.test_rmse;
  if (sh_->on_report) sh_->on_report(rep);
  return Status::OK();
}

Status MfWorker::Finish() {
  if (!reporter_) return Status::OK();
  const bool stopped = sh_->stopped.load();
  RETURN_IF_ERROR(reader_.FinishRun(
      worker_, sh_->end_clock, stopped, t_.client_->num_clients(),
      [this](ClockT c, const std::vector<double>& row) { return Report(c, row); }));
  if (stopped || options_.export_dir.empty()) return Status::OK();
  return t_.Export(worker_, options_.export_dir, sh_->end_clock, &sh_->export_stale_rows);
}

// --- Rows: the copies, the look-ahead, the changes -------------------------

float* MfWorker::GetCopy(apps::RowBuffer<float>* buf, const Table& t, const IdMap& ids,
                         uint32_t index) {
  float* row = buf->Slot(index);
  // A Get in the middle of a chunk (not loaded by LoadChunk): the Worker is
  // the helper's until its leases of the next chunk are joined.
  Status s = JoinLeaseAhead();
  if (s.ok()) s = worker_->Get(t, ids.raw(index), row);
  if (!s.ok() && load_status_.ok()) load_status_ = s;
  buf->Loaded();
  return row;
}

Status MfWorker::FlushChanges(const apps::RowBuffer<float>& buf, const IdMap& ids, const Table& t) {
  if (!buf.indexed()) {
    // Each run of copies goes as it lies (every loaded row of a training pass
    // was updated): the client adds copy - base, no array of deltas between.
    return buf.ForEachRun(
        [&](const std::vector<uint32_t>& run, const float* cur, const float* base) {
          return worker_->IncDiff(t, RawOf(ids, run), cur, base);
        });
  }
  buf.ChangedRows(&changed_, &deltas_);
  changed_rows_.resize(changed_.size());
  for (size_t k = 0; k < changed_.size(); ++k) changed_rows_[k] = ids.raw(changed_[k]);
  return worker_->Inc(t, changed_rows_, deltas_.data());
}

const std::vector<uint64_t>& MfWorker::RawOf(const IdMap& ids,
                                             const std::vector<uint32_t>& indices) {
  raw_rows_.resize(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) raw_rows_[k] = ids.raw(indices[k]);
  return raw_rows_;
}

template <typename RatingAt>
void MfWorker::CollectRange(size_t begin, size_t end, RatingAt&& rating, bool users, bool items) {
  if (++mark_ == 0) {  // wrapped: clear the marks once every 2^32 ranges
    ubuf_.ClearMarks();
    ibuf_.ClearMarks();
    mark_ = 1;
  }
  // The copies (and leases) hold every row the pass can need: nothing is
  // missing.
  if (users && ubuf_.loaded() + LeasedUsers() >= pass_users_) {
    range_users_.clear();
    users = false;
  }
  if (items && ibuf_.loaded() >= pass_items_) {
    range_items_.clear();
    items = false;
  }
  if (!users && !items) return;
  // Without branches on the marks: whether a rating's row is new to the
  // range and not copied yet is random, and mispredicted branches were most
  // of this pass's time. Each rating writes its row at the end of the list
  // and keeps it only if the row is needed.
  auto scan = [&](auto with_users, auto with_items) {
    if (with_users) range_users_.resize(end - begin);
    if (with_items) range_items_.resize(end - begin);
    size_t nu = 0, ni = 0;
    // The marks (and leases) of the users lie at random in arrays of every
    // user: each is requested kMarksAhead ratings before it is tested.
    constexpr size_t kMarksAhead = 16;
    for (size_t j = begin; j < end; ++j) {
      if (with_users && j + kMarksAhead < end) {
        const uint32_t u = rating(j + kMarksAhead).user;
        if (u != IdMap::kUnknown) {
          ubuf_.PrefetchLookup(u);
          if (lease_users_) __builtin_prefetch(&user_value_[u]);
        }
      }
      const Rating& r = rating(j);
      if (with_users && r.user != IdMap::kUnknown) {
        range_users_[nu] = r.user;
        // A leased user is not missing either (lease_users_: user_value_ is
        // sized then).
        const bool leased = lease_users_ && user_value_[r.user] != nullptr;
        nu += ubuf_.MarkMissing(r.user, mark_) & !leased;
      }
      if (with_items && r.item != IdMap::kUnknown) {
        range_items_[ni] = r.item;
        ni += ibuf_.MarkMissing(r.item, mark_);
      }
    }
    if (with_users) range_users_.resize(nu);
    if (with_items) range_items_.resize(ni);
  };
  if (users && items) {
    scan(std::true_type(), std::true_type());
  } else if (users) {
    scan(std::true_type(), std::false_type());
  } else {
    scan(std::false_type(), std::true_type());
  }
}

MfWorker::Redo MfWorker::MissingFromAhead(size_t begin, size_t end) {
  Redo redo{true, true};
  AheadRange& a = AheadAt(begin);
  if (a.pass != pass_ || a.begin != begin || a.end != end) return redo;
  // Copies were only added since the range was collected (the counts of
  // give-ups are unchanged): its missing rows are those it found, less the
  // ones loaded since, in the same order a new scan would list them.
  auto still_missing = [](const apps::RowBuffer<float>& buf, const std::vector<uint32_t>& found,
                          const std::vector<const float*>* leased, std::vector<uint32_t>* out) {
    out->clear();
    for (uint32_t index : found) {
      if (!buf.Has(index) && (leased == nullptr || (*leased)[index] == nullptr)) {
        out->push_back(index);
      }
    }
  };
  if (a.user_clears == user_clears_) {
    still_missing(ubuf_, a.users, lease_users_ ? &user_value_ : nullptr, &range_users_);
    redo.users = false;
  }
  if (a.item_clears == item_clears_) {
    still_missing(ibuf_, a.items, nullptr, &range_items_);
    redo.items = false;
  }
  a.pass = 0;  // used
  return redo;
}

// Prefetches the rows of ratings [begin, end) that the copies lack.
template <typename RatingAt>
Status MfWorker::PrefetchRange(size_t begin, size_t end, RatingAt&& rating) {
  CollectRange(begin, end, rating);
  // The lists move to the range's slot (LoadChunk starts from them); every
  // CollectRange sets range_users_ / range_items_ before they are read.
  AheadRange& a = AheadAt(begin);
  a.pass = pass_;
  a.begin = begin;
  a.end = end;
  a.user_clears = user_clears_;
  a.item_clears = item_clears_;
  a.users.swap(range_users_);
  a.items.swap(range_items_);
  if (!a.users.empty()) RETURN_IF_ERROR(worker_->Prefetch(ut_, RawOf(data_.users, a.users)));
  if (!a.items.empty()) RETURN_IF_ERROR(worker_->Prefetch(it_, RawOf(data_.items, a.items)));
  return Status::OK();
}

// The rows of a look-ahead chunk that the copies lack are read in one
// Worker::GetRows per table when the chunk starts (prefetched a chunk
// earlier, they are mostly cached by then), so the ratings find every row
// they need in the copies: no per-rating call into the client. Before a chunk
// is read, copies over their bound go to the table (training) or are dropped
// (test: their changes are there already).
Status MfWorker::LoadRows(const Table& t, const IdMap& ids, const std::vector<uint32_t>& indices,
                          apps::RowBuffer<float>* buf) {
  if (indices.empty()) return Status::OK();
  const std::vector<uint64_t>& raw = RawOf(ids, indices);
  return buf->LoadRows(indices, [&](float* out) { return worker_->GetRows(t, raw, out); });
}

Status MfWorker::LeaseUsers() {
  if (range_users_.empty()) return Status::OK();
  const std::vector<uint64_t>& raw = RawOf(data_.users, range_users_);
  lease_values_.resize(raw.size());
  lease_deltas_.resize(raw.size());
  const size_t rows_before = worker_->leased_rows();
  RETURN_IF_ERROR(worker_->LeaseRows(ut_, raw, lease_values_.data(), lease_deltas_.data()));
  copied_users_.clear();
  const size_t users = TakeLeases(range_users_, lease_values_, lease_deltas_, &copied_users_);
  lease_calls_.push_back(LeaseCall{users, worker_->leased_rows() - rows_before});
  return LoadRows(ut_, data_.users, copied_users_, &ubuf_);
}

size_t MfWorker::TakeLeases(const std::vector<uint32_t>& users,
                            const std::vector<const float*>& values,
                            const std::vector<float*>& deltas, std::vector<uint32_t>* not_leased) {
  const size_t users_before = leased_users_.size();
  for (size_t k = 0; k < users.size(); ++k) {
    const uint32_t u = users[k];
    if (values[k] == nullptr) {  // e.g. this worker is ahead of the process clock
      if (not_leased != nullptr) not_leased->push_back(u);
      continue;
    }
    user_value_[u] = values[k];
    user_delta_[u] = deltas[k];
    leased_users_.push_back(u);
  }
  return leased_users_.size() - users_before;
}

void MfWorker::StartLeaseAhead(size_t next_begin) {
  if (!lease_ahead_) return;
  const AheadRange& a = AheadAt(next_begin);
  if (a.pass != pass_ || a.begin != next_begin) return;  // no next chunk collected
  LeaseAhead& h = ahead_lease_;
  h.users.clear();
  for (uint32_t u : a.users) {
    if (user_value_[u] == nullptr && !ubuf_.Has(u)) h.users.push_back(u);
  }
  if (h.users.empty()) return;
  h.raw = RawOf(data_.users, h.users);
  h.values.resize(h.users.size());
  h.deltas.resize(h.users.size());
  if (!h.thread.joinable()) h.thread = std::thread([this] { LeaseAheadLoop(); });
  {
    std::lock_guard<std::mutex> l(h.mu);
    h.job = true;
    h.done = false;
  }
  h.cv.notify_all();
  h.pending = true;
}

void MfWorker::LeaseAheadLoop() {
  SetThreadName("pace-lease-" + std::to_string(w_));
  LeaseAhead& h = ahead_lease_;
  std::unique_lock<std::mutex> l(h.mu);
  for (;;) {
    h.cv.wait(l, [&h] { return h.job || h.stop; });
    if (h.stop) return;
    h.job = false;
    l.unlock();
    h.rows_before = worker_->leased_rows();
    h.status = worker_->LeaseRows(ut_, h.raw, h.values.data(), h.deltas.data());
    h.rows_after = worker_->leased_rows();
    l.lock();
    h.done = true;
    h.cv.notify_all();
  }
}

// The helper's leases join the window as one LeaseUsers call would; users
// it could not lease stay missing, and LoadChunk leases or copies them.
Status MfWorker::JoinLeaseAhead() {
  LeaseAhead& h = ahead_lease_;
  if (!h.pending) return Status::OK();
  {
    std::unique_lock<std::mutex> l(h.mu);
    h.cv.wait(l, [&h] { return h.done; });
  }
  h.pending = false;
  RETURN_IF_ERROR(h.status);
  const size_t users = TakeLeases(h.users, h.values, h.deltas, nullptr);
  const size_t rows = h.rows_after - h.rows_before;
  if (users > 0 || rows > 0) lease_calls_.push_back(LeaseCall{users, rows});
  sh_->rows_leased_ahead.fetch_add(rows, std::memory_order_relaxed);
  // The look-ahead's list of the next chunk still names them: MissingFromAhead
  // leaves out leased users.
  return Status::OK();
}

void MfWorker::ReleaseUsers() {
  if (lease_calls_.empty()) return;  // every leased user is of a call
  for (size_t k = 0; k < leased_users_.size(); ++k) user_value_[leased_users_[k]] = nullptr;
  leased_users_.clear();
  lease_calls_.clear();
  worker_->ReleaseRows();
}

void MfWorker::ReleaseOldestUsers(size_t incoming) {
  if (lease_calls_.empty()) return;
  size_t rows = 0;
  while (!lease_calls_.empty() && LeasedUsers() + incoming > LeaseWindow()) {
    const LeaseCall call = lease_calls_.front();
    lease_calls_.pop_front();
    for (size_t k = 0; k < call.users; ++k) user_value_[leased_users_[k]] = nullptr;
    leased_users_.DropFront(call.users);
    rows += call.rows;
  }
  if (rows > 0) worker_->ReleaseRows(rows);
  // The look-ahead's lists left the leased users out: they are collected
  // again (MissingFromAhead).
  ++user_clears_;
}

template <typename RatingAt>
Status MfWorker::LoadChunk(bool training, size_t begin, size_t end, RatingAt&& rating) {
  const Redo redo = MissingFromAhead(begin, end);
  if (redo.users || redo.items) CollectRange(begin, end, rating, redo.users, redo.items);
  bool cleared = false;
  if (lease_users_ && training) {
    // Leased users: their copies (users it could not lease) and the window
    // of leases are bounded apart; a lease costs no memory of its own.
    if (ubuf_.loaded() > 0 && ubuf_.loaded() + range_users_.size() > user_buffer_rows_) {
      RETURN_IF_ERROR(FlushChanges(ubuf_, data_.users, ut_));
      ClearUsers();
      cleared = true;
    }
    if (LeasedUsers() + range_users_.size() > LeaseWindow()) {
      ReleaseOldestUsers(range_users_.size());
      cleared = true;
    }
  } else if (ubuf_.loaded() + range_users_.size() > user_buffer_rows_) {
    if (training) RETURN_IF_ERROR(FlushChanges(ubuf_, data_.users, ut_));
    ClearUsers();
    cleared = true;
  }
  if (ibuf_.loaded() + range_items_.size() > buffer_rows_) {
    if (training) RETURN_IF_ERROR(FlushChanges(ibuf_, data_.items, it_));
    ClearItems();
    cleared = true;
  }
  if (cleared) CollectRange(begin, end, rating);
  if (training && lease_users_) {
    RETURN_IF_ERROR(LeaseUsers());
    RETURN_IF_ERROR(LoadRows(it_, data_.items, range_items_, &ibuf_));
    StartLeaseAhead(end);
    return Status::OK();
  }
  RETURN_IF_ERROR(LoadRows(ut_, data_.users, range_users_, &ubuf_));
  // In user order each user row is read once per clock: its cached copy
  // goes first when the cache needs room, and the item rows (read in every
  // chunk) stay.
  if (t_.row_order_ && !range_users_.empty()) {
    RETURN_IF_ERROR(worker_->EvictFirst(ut_, raw_rows_));
  }
  return LoadRows(it_, data_.items, range_items_, &ibuf_);
}

// Under essp/async the push of the previous clock usually completes some
// milliseconds into a clock, after the worker has read (and copied) nearly
// every item row it needs: items recur in every chunk and are kept for the
// whole clock. So at the first look-ahead chunk boundary after such a push
// the item copies are given up: while training their changes go to the table
// first (during the test pass they are there already), and later ratings read
// the pushed value, which includes them (read-my-writes). This is what a Get
// per access through the cache (Bösen's MF) sees, at the cost of one more Get
// per item per push (one push per global clock). User rows are partitioned by
// worker: no one else updates them, a push never changes them, and their
// copies are kept.
void MfWorker::RefreshItems(bool training, size_t j) {
  if (training) {
    if (refreshed_at_ == 0) refreshed_at_ = j;
    Status s = FlushChanges(ibuf_, data_.items, it_);
    if (!s.ok() && load_status_.ok()) load_status_ = s;
  }
  ClearItems();
}

// A pass of `count` ratings over a part with `users` users rates each user
// ~Poisson(count / users) times (ratings in data order), so it rates
// users * (1 - e^-(count / users)) of them and the rest of its ratings are
// repeats. (Counting them exactly took a pass over the ratings, each a miss
// on a mark of every user: ~5% of 8a's run.)
size_t MfWorker::ExpectedRepeats(size_t count, size_t users) {
  if (users == 0 || count == 0) return 0;
  const double mean = static_cast<double>(count) / static_cast<double>(users);
  const double rated = static_cast<double>(users) * -std::expm1(-mean);
  return static_cast<size_t>(std::max(0.0, static_cast<double>(count) - rated));
}

// Runs body(rating(j), user row, item row) for j in [0, count) chunk by
// chunk: when a chunk starts, the item copies are refreshed after a push (see
// RefreshItems), the look-ahead window is filled up to the end of the next
// chunk, and the chunk's rows are read into the copies (RunChunk then finds
// every row there).
template <typename RatingAt, typename Body>
Status MfWorker::WithLookAhead(bool training, size_t count, RatingAt&& rating, Body&& body) {
  ++pass_;
  pass_users_ = training ? t_.part_users_[part_id_] : ubuf_.num_rows();
  pass_items_ = training ? t_.part_items_[part_id_] : ibuf_.num_rows();
  if (training) pass_repeats_ = ExpectedRepeats(count, pass_users_);
  size_t ahead = 0;  // ratings [0, ahead) have been prefetched
  for (size_t begin = 0; begin < count; begin += chunk_) {
    const size_t end = std::min(count, begin + chunk_);
    RETURN_IF_ERROR(JoinLeaseAhead());
    if (begin > 0 && pushes_.Newer()) RefreshItems(training, begin);
    while (ahead < std::min(count, begin + 2 * chunk_)) {
      const size_t next = std::min(count, ahead + chunk_);
      RETURN_IF_ERROR(PrefetchRange(ahead, next, rating));
      ahead = next;
    }
    RETURN_IF_ERROR(LoadChunk(training, begin, end, rating));
    RunChunk(begin, end, rating, body);
  }
  return JoinLeaseAhead();
}

// The ratings of a loaded chunk. The copies are scattered over the buffers in
// the order they were loaded, and the ratings hit them at random, so each
// rating's rows are looked up and their cache lines requested a few ratings
// before its update needs them: the update then waits for no load (it was
// most of the update's time).
//
// Finding a row is itself a load at a random place (its lease's pointers,
// its copy's slot, its penalty weight: arrays of every user), and the row's
// lines can be requested only once it is done: the look-ups of a rating are
// requested kLookupsAhead ratings before its rows, which are requested kAhead
// before its update (8c, one worker: its CPU -5-8%, ratings/s +5-7%).
template <typename RatingAt, typename Body>
void MfWorker::RunChunk(size_t begin, size_t end, RatingAt&& rating, Body&& body) {
  constexpr size_t kAhead = 6, kLookupsAhead = 4 * kAhead;
  const size_t last_line = (size_t{width_} * sizeof(float) - 1) / 64 * 64;
  auto prefetch = [last_line](const float* row) {
    if (row == nullptr) return;
    __builtin_prefetch(row, 1);
    __builtin_prefetch(reinterpret_cast<const char*>(row) + last_line, 1);
  };
  // In the indexed layout every row of the chunk is loaded (LoadChunk) at
  // an address computed from its index: no lookup, as in a plain array.
  const bool users_indexed = ubuf_.indexed(), items_indexed = ibuf_.indexed();
  auto user_row = [&](uint32_t u) { return users_indexed ? ubuf_.IndexedRow(u) : UserRow(u); };
  auto item_row = [&](uint32_t i) { return items_indexed ? ibuf_.IndexedRow(i) : ItemRow(i); };
  // A copy's look-up (RowBuffer::Find) and the user's penalty weight.
  auto prefetch_lookups = [&](const Rating& a) {
    if (a.user != IdMap::kUnknown) {
      if (!users_indexed) ubuf_.PrefetchLookup(a.user);
      __builtin_prefetch(&t_.reg_.user[a.user]);
    }
  };
  if (lease_users_) {
    // Training with leased user rows (LeaseUsers): each rating's user row is
    // read as value + delta and its change added to the delta, where the
    // client keeps them; users not leased have copies, as the items.
    double sq = 0;
    for (size_t j = begin; j < end; ++j) {
      if (j + kLookupsAhead < end) {  // the lease's pointers and the weight
        const Rating& a = rating(j + kLookupsAhead);
        __builtin_prefetch(&user_value_[a.user]);
        __builtin_prefetch(&user_delta_[a.user]);
        __builtin_prefetch(&t_.reg_.user[a.user]);
      }
      if (j + kAhead < end) {
        const Rating& a = rating(j + kAhead);
        if (const float* value = user_value_[a.user]) {
          // Every line: the value and the delta lie apart, each in its own
          // allocation (a copy's lines lay together, in the buffer).
          const char* vb = reinterpret_cast<const char*>(value);
          const char* db = reinterpret_cast<const char*>(user_delta_[a.user]);
          for (size_t off = 0; off <= last_line; off += 64) {
            __builtin_prefetch(vb + off);
            __builtin_prefetch(db + off, 1);
          }
        } else {
          prefetch(users_indexed ? ubuf_.IndexedRow(a.user) : ubuf_.Find(a.user));
        }
        prefetch(items_indexed ? ibuf_.IndexedRow(a.item) : ibuf_.Find(a.item));
      }
      const Rating& r = rating(j);
      float* v = item_row(r.item);
      if (const float* value = user_value_[r.user]) {
        const float e = SgdUpdateLeased(value, user_delta_[r.user], v, r.value,
                                        t_.reg_.user[r.user], t_.reg_.item[r.item], p_);
        sq += static_cast<double>(e) * e;
      } else {
        body(r, user_row(r.user), v);
      }
    }
    leased_sq_ += sq;
    return;
  }
  for (size_t j = begin; j < end; ++j) {
    if (j + kLookupsAhead < end) prefetch_lookups(rating(j + kLookupsAhead));
    if (j + kAhead < end) {
      const Rating& a = rating(j + kAhead);
      if (a.user != IdMap::kUnknown) {
        prefetch(users_indexed ? ubuf_.IndexedRow(a.user) : ubuf_.Find(a.user));
      }
      if (a.item != IdMap::kUnknown) {
        prefetch(items_indexed ? ibuf_.IndexedRow(a.item) : ibuf_.Find(a.item));
      }
    }
    const Rating& r = rating(j);
    DCHECK(r.user == IdMap::kUnknown || !users_indexed || ubuf_.Has(r.user));
    DCHECK(r.item == IdMap::kUnknown || !items_indexed || ibuf_.Has(r.item));
    body(r, r.user == IdMap::kUnknown ? zero_.data() : user_row(r.user),
         r.item == IdMap::kUnknown ? zero_.data() : item_row(r.item));
  }
}

}  // namespace mf
}  // namespace pace
