// pace_mf's training on PaceDB: the user and item factor tables, data-parallel
// SGD in worker threads (and client processes), per-clock train loss and test
// RMSE aggregated through a stats table, and export of the learned factors.
//
// Tables (prefix default "mf"):
//   <prefix>.user   dense f32 rows of width rank (+1 bias), row = raw user id
//   <prefix>.item   dense f32 rows of width rank (+1 bias), row = raw item id
//   <prefix>.stats  dense f64 rows, row = clock: MeasureCols, then
//                   train_sq, train_n, test_sq, test_n (sums over workers)
// Factor rows start uniform in [-init_scale, init_scale) from the table
// initializer, so no worker has to write initial values.
//
// Each process reads the whole training file; worker g of the job's
// T = num_clients * workers takes part g of PartitionByUser (every user's
// ratings in one part, in the seeded shuffled order), and each clock processes
// a minibatch fraction of it (mf_model.h).
//
// An MfTrainer is used from one thread; it starts and joins its workers.
#ifndef PACE_APPS_MF_MF_TRAINER_H_
#define PACE_APPS_MF_MF_TRAINER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "apps/mf/mf_model.h"
#include "apps/mf/ratings_data.h"
#include "apps/shared/ps_runtime.h"
#include "client/pace.h"
#include "common/status.h"
#include "common/thread_cpu.h"

namespace pace {
namespace mf {

struct MfTrainOptions {
  apps::RunOptions run;
  // Defaults: rank 16, lr 0.08, lr_power 1, lambda 4, bias_lambda 10,
  // biases on, minibatch 1.0, init_scale 0.01, table prefix "mf"
  // (docs/apps.md says why).
  int rank = 16;
  double lr = 0.08;
  double lr_power = 1.0;
  double lambda = 4;
  double bias_lambda = 10;
  bool biases = true;
  double minibatch = 1.0;
  double init_scale = 0.01;
  // The order of a clock's ratings (mf_model.h). kAuto: user order when the
  // factor tables are larger than the client's cache budget.
  RatingOrder order = RatingOrder::kAuto;
  // Training updates each worker's own user rows where the client caches
  // them (Worker::LeaseRows) instead of in copies; off: copies, as the
  // item rows. Not in user order (RatingOrder::kRows), which streams the
  // user rows through the cache, nor under vap.
  bool in_place = true;
  // In place, with fewer workers in the process than cores: a helper thread
  // per worker leases the users of the worker's next look-ahead chunk while
  // it updates the current one (MfWorker::LeaseAhead). Off: the worker
  // leases them itself. The same leases either way.
  bool lease_ahead = true;
  std::string table_prefix = "mf";
  // If set, client 0 writes the learned factors here after the last clock
  // (see Export). Default: empty.
  std::string export_dir;
};

// InvalidArgument naming the flag.
Status ValidateMfOptions(const MfTrainOptions& o);

// One line of the report (the CSV columns).
struct MfReport {
  ClockT clock = 0;
  double seconds = 0;
  double train_loss = 0;
  std::optional<double> test_rmse;
  double staleness_mean = 0;
  int64_t staleness_p99 = 0;
  double blocked_pct = 0;
  uint64_t ratings = 0;  // processed by all workers in the clock
};

struct MfTrainSummary {
  ClockT start_clock = 0;  // the resume clock (0 for a fresh job)
  ClockT end_clock = 0;
  uint64_t ratings = 0;  // processed by this process
  double seconds = 0;    // wall time of the training loop
  double ratings_per_second = 0;
  // CPU of the training loop, by kind of thread (common/thread_cpu.h).
  CpuReading cpu;
  std::optional<double> final_test_rmse;
  // Rows the export read from cache at a version older than end_clock.
  uint64_t export_stale_rows = 0;
  // User rows leased by the workers' helpers (MfTrainOptions::lease_ahead).
  uint64_t rows_leased_ahead = 0;
  // SIGINT/SIGTERM (apps/shared/stop_signal.h): the workers stopped at
  // apps::StopClock() instead of end_clock.
  bool stopped = false;
};

class MfWorker;

class MfTrainer {
 public:
  // `client` and `data` must outlive the trainer.
  // Setup reorders data->train into the workers' parts (PartitionByUser).
  MfTrainer(Client* client, MfDataset* data, MfTrainOptions options);

  // Creates or opens the tables (fresh vs --resume rules of OpenJobTables).
  Status Setup();
  // Runs clocks start_clock .. run.clocks-1. In client 0, calls on_report for
  // every clock in order (from the reporting worker thread) as soon as its
  // stats are complete, the last ones after a final barrier.
  Status Train(const std::function<void(const MfReport&)>& on_report, MfTrainSummary* summary);

  // Reads the factor rows of every user and item of the dataset through
  // `worker`, in dense index order (width = RowWidth(rank, biases)).
  // *stale_rows counts rows whose value was older than `fresh_as_of`: SSP
  // keeps a cached row until it is too stale for the reader's clock, so a
  // process that trained may hold rows up to s clocks old; a new process
  // (e.g. `pace_mf --resume --export=DIR` after the job) reads fresh rows.
  Status ReadFactors(Worker* worker, ClockT fresh_as_of, std::vector<float>* users,
                     std::vector<float>* items, uint64_t* stale_rows);
  // Writes DIR/user_factors.csv and DIR/item_factors.csv (header
  // id,f0..f{K-1}[,bias]; one line per id of the training data) and
  // DIR/model.txt (rank, biases, global mean, rating range, clock).
  Status Export(Worker* worker, const std::string& dir, ClockT fresh_as_of, uint64_t* stale_rows);

  const Table& user_table() const { return tables_[0]; }
  const Table& item_table() const { return tables_[1]; }
  const Table& stats_table() const { return tables_[2]; }

 private:
  friend class MfWorker;  // one worker thread's loop (mf_worker.h)

  Client* const client_;
  MfDataset* const data_;
  std::vector<size_t> parts_;  // PartitionByUser offsets, set by Setup
  // Distinct users and items of each part's training ratings, set by Setup:
  // a worker whose copies hold that many rows of a table needs no look-up
  // of that table's rows for the rest of its training pass.
  std::vector<size_t> part_users_;
  std::vector<size_t> part_items_;
  bool row_order_ = false;  // each clock's ratings in user order (RatingOrder), set by Setup
  const MfTrainOptions options_;
  const uint32_t width_;
  RegWeights reg_;
  std::vector<Table> tables_;
};

// Stats row columns after MeasureCols.
struct MfStatsCols {
  static constexpr int kTrainSq = 0;
  static constexpr int kTrainN = 1;
  static constexpr int kTestSq = 2;
  static constexpr int kTestN = 3;
  static constexpr int kCount = 4;
};

}  // namespace mf
}  // namespace pace

#endif  // PACE_APPS_MF_MF_TRAINER_H_
