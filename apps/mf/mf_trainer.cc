#include "apps/mf/mf_trainer.h"

#include <glog/logging.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "apps/mf/mf_worker.h"
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
  // User order when the factor tables do not fit the cache: the look-ahead
  // then reads user rows in key order, a block of the store for several of
  // them, instead of one random read per row.
  const uint64_t table_bytes =
      (uint64_t{data_->users.size()} + data_->items.size()) * width_ * sizeof(float);
  row_order_ =
      options_.order == RatingOrder::kRows ||
      (options_.order == RatingOrder::kAuto && table_bytes > client_->Stats().cache_budget_bytes);
  parts_ =
      PartitionByUser(client_->num_clients() * static_cast<uint32_t>(options_.run.workers), data_);
  CountPartRows(*data_, parts_, &part_users_, &part_items_);
  return Status::OK();
}

Status MfTrainer::Train(const std::function<void(const MfReport&)>& on_report,
                        MfTrainSummary* summary) {
  if (tables_.empty()) return Status::FailedPrecondition("MfTrainer::Setup was not called");
  MfTrainShared sh;
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
  const CpuReading cpu_before = ReadThreadCpu();
  sh.start_ns = apps::NowNs();
  Status s = apps::RunWorkers(client_, options_.run.workers,
                              [&](int i, Worker* w, const std::atomic<bool>& failed) {
                                return MfWorker(this, i, w, failed, &sh).Run();
                              });
  summary->seconds = apps::SecondsSince(sh.start_ns);
  summary->cpu = CpuBetween(cpu_before, ReadThreadCpu());
  RETURN_IF_ERROR(s);
  RETURN_IF_ERROR(client_->Flush());
  summary->ratings = sh.ratings.load();
  if (summary->seconds > 0) {
    summary->ratings_per_second = static_cast<double>(summary->ratings) / summary->seconds;
  }
  summary->final_test_rmse = sh.final_test_rmse;
  summary->stopped = sh.stopped.load();
  summary->export_stale_rows = sh.export_stale_rows;
  summary->rows_leased_ahead = sh.rows_leased_ahead.load();
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
