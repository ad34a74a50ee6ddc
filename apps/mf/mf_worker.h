// One pace_mf worker thread's loop over its clocks, in named stages
// (MfTrainer::Train runs one MfWorker per thread). Internal to pace_mf.
//
// A clock:
//   TrainPass  the worker's minibatch of ratings, look-ahead chunk by chunk:
//              at each chunk start the rows of the chunks ahead are
//              prefetched (PrefetchRange), the chunk's rows are read into the
//              worker's copies with one GetRows per table (LoadChunk), and
//              after a push the item copies are given up (RefreshItems);
//              the ratings then update the copies (SgdUpdate), and at the
//              end the changes go to the tables with one Inc per table
//              (FlushChanges);
//   TestPass   (every eval_every clocks) the test ratings against the copies;
//   EndClock   the clock's stats row, Clock(), the --v=1 trace
//              (TraceClock) and the reporter's rows (Report).
#ifndef PACE_APPS_MF_MF_WORKER_H_
#define PACE_APPS_MF_MF_WORKER_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "apps/mf/mf_model.h"
#include "apps/mf/mf_trainer.h"
#include "apps/mf/ratings_data.h"
#include "apps/shared/ps_runtime.h"
#include "apps/shared/report.h"
#include "apps/shared/row_buffer.h"
#include "client/pace.h"
#include "common/front_dropping_vector.h"
#include "common/status.h"

namespace pace {
namespace mf {

// What the workers of one MfTrainer::Train share.
struct MfTrainShared {
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
  std::atomic<uint64_t> rows_leased_ahead{0};  // MfTrainSummary::rows_leased_ahead
};

class MfWorker {
 public:
  // `trainer` (set up), `worker`, `failed` and `shared` outlive the MfWorker.
  MfWorker(MfTrainer* trainer, int index, Worker* worker, const std::atomic<bool>& failed,
           MfTrainShared* shared);
  ~MfWorker();
  MfWorker(const MfWorker&) = delete;
  MfWorker& operator=(const MfWorker&) = delete;

  // Clocks start_clock .. end_clock - 1 (or to the stop clock), then the
  // reporter's last rows and --export.
  Status Run();

 private:
  Status TrainPass(ClockT c, size_t* count, double* train_sq);
  Status TestPass(double* test_sq, double* test_n);
  Status EndClock(ClockT c, size_t count, double train_sq, double test_sq, double test_n);
  Status Finish();

  // Runs body(rating(j), user row, item row) for j in [0, count)
  // look-ahead chunk by chunk.
  template <typename RatingAt, typename Body>
  Status WithLookAhead(bool training, size_t count, RatingAt&& rating, Body&& body);
  template <typename RatingAt, typename Body>
  void RunChunk(size_t begin, size_t end, RatingAt&& rating, Body&& body);
  // The distinct rows of ratings [begin, end) that the copies lack, into
  // range_users_ / range_items_ (of the tables asked for; the other list is
  // left as it is). A table whose copies hold every row the pass can need
  // is not scanned.
  template <typename RatingAt>
  void CollectRange(size_t begin, size_t end, RatingAt&& rating, bool users = true,
                    bool items = true);
  // LoadChunk's rows from what PrefetchRange collected for the same ratings
  // (kept in ahead_), when no copies of that table were given up since:
  // the rows still missing of those, without a pass over the ratings.
  // Returns which lists it could not set that way.
  struct Redo {
    bool users = false;
    bool items = false;
  };
  Redo MissingFromAhead(size_t begin, size_t end);
  // The slot of the look-ahead range starting at rating `begin` (a chunk
  // boundary).
  struct AheadRange;
  AheadRange& AheadAt(size_t begin) { return ahead_[(begin / chunk_) % 2]; }
  void ClearUsers() {
    ubuf_.Clear();
    ++user_clears_;
  }
  void ClearItems() {
    ibuf_.Clear();
    ++item_clears_;
  }
  template <typename RatingAt>
  Status PrefetchRange(size_t begin, size_t end, RatingAt&& rating);
  template <typename RatingAt>
  Status LoadChunk(bool training, size_t begin, size_t end, RatingAt&& rating);
  Status LoadRows(const Table& t, const IdMap& ids, const std::vector<uint32_t>& indices,
                  apps::RowBuffer<float>* buf);
  // Leases range_users_ (in place); the users it could not lease get copies.
  Status LeaseUsers();
  // Takes the leases LeaseRows answered for `users` into the window
  // (user_value_, user_delta_, leased_users_); the users it could not lease
  // go to *not_leased (if given). Returns the users taken.
  size_t TakeLeases(const std::vector<uint32_t>& users, const std::vector<const float*>& values,
                    const std::vector<float*>& deltas, std::vector<uint32_t>* not_leased);
  // The next chunk's leases taken beside this chunk's updates (LeaseAhead).
  void StartLeaseAhead(size_t next_begin);
  Status JoinLeaseAhead();
  // Ends the worker's leases and forgets their pointers.
  void ReleaseUsers();
  // Ends the leases of the oldest LeaseUsers calls until `incoming` more
  // fit in lease_window_.
  void ReleaseOldestUsers(size_t incoming);
  size_t LeasedUsers() const { return leased_users_.size(); }
  // The clock's changes of one table's copies, with one batched Inc.
  Status FlushChanges(const apps::RowBuffer<float>& buf, const IdMap& ids, const Table& t);
  void RefreshItems(bool training, size_t j);
  // A row's copy, read with a Get if the look-ahead did not load it.
  float* CopyOf(apps::RowBuffer<float>* buf, const Table& t, const IdMap& ids, uint32_t index) {
    float* row = buf->Find(index);
    return row != nullptr ? row : GetCopy(buf, t, ids, index);
  }
  float* GetCopy(apps::RowBuffer<float>* buf, const Table& t, const IdMap& ids, uint32_t index);
  float* UserRow(uint32_t u) { return CopyOf(&ubuf_, ut_, data_.users, u); }
  float* ItemRow(uint32_t i) { return CopyOf(&ibuf_, it_, data_.items, i); }
  const std::vector<uint64_t>& RawOf(const IdMap& ids, const std::vector<uint32_t>& indices);
  Status Report(ClockT c, const std::vector<double>& row);
  void TraceClock(ClockT c, size_t count);

  MfTrainer& t_;
  const MfDataset& data_;
  const MfTrainOptions& options_;
  const int w_;
  Worker* const worker_;
  const std::atomic<bool>& failed_;
  MfTrainShared* const sh_;
  const Table& ut_;
  const Table& it_;
  const Table& st_;
  const uint32_t width_;
  uint32_t part_id_ = 0;  // of the job's parts (MfTrainer::parts_)
  Range part_;
  Range test_part_;
  SgdParams p_;
  const bool reporter_;
  // Look-ahead (see mf_worker.cc, WithLookAhead): ratings per chunk, and the
  // copies' bound, of user rows and of item rows each; user rows not all
  // kept are flushed at a lower bound (UserCopyBound).
  const size_t chunk_;
  const size_t buffer_rows_;
  const size_t user_buffer_rows_;
  // The user rows a worker keeps leased (LeaseWindowRows): the leases of the
  // latest LeaseUsers calls, released a call at a time as the window moves.
  const size_t lease_window_;
  // The window of this pass: a leased row's delta cannot leave in a part,
  // so a window that held all of a clock's users (most of 8a's, whose users
  // are rated about once a clock) left nothing sealable before Clock(), and
  // each clock went as one part after it. The window saves at most one
  // lease per rating of a user rated before in the pass (pass_repeats_): it
  // is lease_window_ where users recur (8c: ~2 ratings each a clock), and
  // where they rarely do, what leaves two parts sealable (parts_window_),
  // or the repeats if more. At least the copies' bound.
  size_t LeaseWindow() const {
    return std::max(user_buffer_rows_,
                    std::min(lease_window_, std::max(parts_window_, pass_repeats_)));
  }
  // The ratings of a pass of `count` over `users` users expected to rate a
  // user rated before in the pass.
  static size_t ExpectedRepeats(size_t count, size_t users);
  const size_t parts_window_;  // PartsWindowRows
  // The next chunk's leases taken by a helper (LeaseAhead; in place only):
  // MfTrainOptions::lease_ahead, and fewer workers in the process than cores.
  const bool lease_ahead_;
  size_t pass_repeats_ = 0;  // ExpectedRepeats of the training pass

  // A table's copies are in the indexed layout (RowBuffer) if all its rows
  // fit within the bound: then the ratings find their rows without a lookup.
  apps::RowBuffer<float> ubuf_;
  apps::RowBuffer<float> ibuf_;
  std::vector<float> zero_;  // the row of an unknown test id (read only)
  // Training in place (MfTrainOptions::in_place): the leased user rows'
  // values and deltas by user index (nullptr: not leased, a copy), the
  // users leased now (leased_users_, in lease order; per
  // LeaseUsers call, its users and the client's new leases), and the squared
  // errors of their ratings.
  bool lease_users_ = false;
  std::vector<const float*> user_value_;
  std::vector<float*> user_delta_;
  FrontDroppingVector<uint32_t> leased_users_;
  struct LeaseCall {
    size_t users;
    size_t rows;
  };
  std::deque<LeaseCall> lease_calls_;
  double leased_sq_ = 0;
  std::vector<const float*> lease_values_;  // LeaseRows' answers, by range_users_ index
  std::vector<float*> lease_deltas_;
  std::vector<uint32_t> copied_users_;  // of range_users_, those not leased
  // With a core to spare (fewer workers in the process than cores), a
  // helper thread leases the users of the next look-ahead chunk while this
  // worker updates the current one: the lease pass (a look-up and a miss on
  // each row's entry) leaves the worker's path. The Worker is the helper's
  // between StartLeaseAhead and JoinLeaseAhead (the worker makes no call
  // into it meanwhile: RunChunk reads only its copies and leases).
  struct LeaseAhead {
    std::mutex mu;
    std::condition_variable cv;
    bool job = false;      // posted, not taken (guarded by mu)
    bool done = false;     // the job's answers are ready (guarded by mu)
    bool stop = false;     // guarded by mu
    bool pending = false;  // the worker's: a job posted and not joined
    std::vector<uint32_t> users;
    std::vector<uint64_t> raw;
    std::vector<const float*> values;
    std::vector<float*> deltas;
    size_t rows_before = 0;
    size_t rows_after = 0;
    Status status;
    std::thread thread;
  };
  LeaseAhead ahead_lease_;
  void LeaseAheadLoop();
  Status load_status_;           // the first failed Get of UserRow / ItemRow
  std::vector<uint32_t> order_;  // user order: offsets in the part (MfTrainer::row_order_)
  uint32_t mark_ = 0;            // of the last CollectRange (RowBuffer::MarkMissing)
  // Rows the current pass can need of each table (CollectRange): for
  // training the part's distinct users and items, for a test pass all.
  size_t pass_users_ = 0;
  size_t pass_items_ = 0;
  // Ranges prefetched and not loaded yet (at most two chunks: the look-ahead
  // window) with the rows CollectRange found missing then, and the count of
  // ClearUsers / ClearItems calls at that time: a copy given up since may
  // be missing again (then the ratings are scanned again).
  struct AheadRange {
    uint64_t pass = 0;
    size_t begin = 0;
    size_t end = 0;
    uint64_t user_clears = 0;
    uint64_t item_clears = 0;
    std::vector<uint32_t> users;
    std::vector<uint32_t> items;
  };
  AheadRange ahead_[2];
  uint64_t pass_ = 0;  // WithLookAhead calls, from 1
  uint64_t user_clears_ = 0;
  uint64_t item_clears_ = 0;
  std::vector<uint32_t> range_users_;
  std::vector<uint32_t> range_items_;
  std::vector<uint64_t> raw_rows_;
  std::vector<uint32_t> changed_;
  std::vector<uint64_t> changed_rows_;
  std::vector<float> deltas_;
  apps::PushWatch pushes_;
  size_t refreshed_at_ = 0;  // of the clock's training ratings, for --v=1

  // Stats and reports.
  std::vector<double> clock_end_seconds_;  // of this worker, by clock - start_clock
  apps::StatsRowReader reader_;
  std::vector<double> cols_;
  int64_t interval_start_ = 0;
  int64_t trace_start_ = 0;
  apps::ThreadSchedTimes trace_sched_;
};

}  // namespace mf
}  // namespace pace

#endif  // PACE_APPS_MF_MF_WORKER_H_
