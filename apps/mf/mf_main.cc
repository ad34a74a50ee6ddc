// pace_mf: SGD matrix factorization on PaceDB. See docs/apps.md.
//
//   pace_mf --train=ratings.csv --test=test.csv            # embedded, ./pace-data
//   pace_mf --train=F --test_fraction=0.1 --servers=h:7100,h:7101 --client_id=0 --num_clients=2
//   pace_mf --train=F --test=G --baseline                  # no parameter server
//   pace_mf --train=F --test=G --baseline_mmap --lr=0.08   # the same, factors in a mapped file
//
// Exit code 0 on success, 1 on a usage or input error, 2 if training failed.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "apps/mf/mf_model.h"
#include "apps/mf/mf_trainer.h"
#include "apps/mf/ratings_data.h"
#include "apps/shared/app_flags.h"
#include "apps/shared/job_record.h"
#include "apps/shared/job_start.h"
#include "apps/shared/report.h"
#include "apps/shared/stop_signal.h"
#include "client/metrics.h"
#include "client/pace.h"
#include "tools/cli/cli.h"

DEFINE_string(train, "", "training ratings file (csv, tsv, dat or plain; see --format)");
DEFINE_string(test, "", "test ratings file (same formats)");
DEFINE_double(test_fraction, 0.0,
              "hold out this fraction of --train as the test set (when --test is not given)");
DEFINE_string(format, "auto", "input format: auto|csv|tsv|dat|plain");
DEFINE_bool(string_ids, false,
            "ids may be text (Amazon-style): a column with an id that is not an unsigned "
            "integer is read as strings, mapped to dense ids in order of first appearance; "
            "without it such an id is a bad line");
DEFINE_int32(rank, 16, "rank K of the user and item factors");
DEFINE_double(lr, 0.08,
              "initial step size eta0; clock t uses eta0 / (t + 1)^lr_power (not given: chosen "
              "by --lr_search)");
DEFINE_bool(lr_search, true,
            "without --lr, pick eta0 from 0.03, 0.08, 0.2 by a short run of the baseline SGD on "
            "10% of the training ratings held out");
DEFINE_double(lr_power, 1.0, "step size decay exponent (0.5: eta0 / sqrt(t + 1))");
DEFINE_double(lambda, 4, "l2 weight on the factors in the objective (see docs/apps.md)");
DEFINE_double(bias_lambda, 10, "l2 weight on the user and item biases in the objective");
DEFINE_bool(biases, true, "model a global mean and user and item biases");
DEFINE_double(init_scale, 0.01, "factors start uniform in [-init_scale, init_scale)");
DEFINE_string(export, "", "write the learned factors as CSV into this directory at the end");
DEFINE_string(order, "auto",
              "the order of a clock's ratings: data (as in the file), rows (by user id, so user "
              "rows are read in key order, nearly sequentially), auto (rows when the factor "
              "tables are larger than the client's cache budget, e.g. under a small --memory_mb; "
              "else data); --baseline follows rows only when given");
DEFINE_bool(in_place, true,
            "train each worker's own user rows where the client caches them (Worker::LeaseRows), "
            "not in copies read and written back; not in user order (--order)");
DEFINE_string(table_prefix, "mf", "names of the tables: PREFIX.user, PREFIX.item, PREFIX.stats");
DEFINE_bool(baseline_mmap, false,
            "run the --baseline SGD with the factor tables in a file-backed mmap (MADV_RANDOM) "
            "instead of plain memory: a file in --data_dir if given, else in $TMPDIR or /tmp, "
            "removed at once; the OS's demand paging serves the rows");

DEFINE_string(metrics_listen, "",
              "host:port serving this process's Prometheus metrics at /metrics (port 0: any "
              "free port; empty: none); see docs/operations.md");

namespace pace {
namespace mf {
namespace {

constexpr char kProgram[] = "pace_mf";

std::vector<apps::ReportColumn> Columns() {
  using apps::ColumnFormat;
  return {{"clock", ColumnFormat::kInteger},
          {"seconds", ColumnFormat::kSeconds},
          {"train_loss", ColumnFormat::kNumber, 4},
          {"test_rmse", ColumnFormat::kNumber, 4},
          {"staleness_mean", ColumnFormat::kNumber, 2},
          {"staleness_p99", ColumnFormat::kInteger},
          {"blocked_pct", ColumnFormat::kNumber, 1}};
}

Status LoadData(MfDataset* data) {
  if (FLAGS_train.empty()) return Status::InvalidArgument("--train=FILE is required");
  if (!FLAGS_test.empty() && FLAGS_test_fraction > 0) {
    return Status::InvalidArgument("give either --test or --test_fraction, not both");
  }
  RatingsReadOptions ro;
  RETURN_IF_ERROR(ParseRatingsFileFormat(FLAGS_format, &ro.format).WithPrefix("--format"));
  ro.skip_bad_lines = FLAGS_skip_bad_lines;
  IdNames names;
  ro.names = FLAGS_string_ids ? &names : nullptr;
  std::vector<RawRating> train, test;
  RatingsReadInfo info;
  RETURN_IF_ERROR(ReadRatings(FLAGS_train, ro, &train, &info));
  std::printf("# train %s: %zu ratings (%s format)", FLAGS_train.c_str(), train.size(),
              std::string(RatingsFileFormatName(info.format)).c_str());
  if (info.skipped) {
    std::printf(", %llu bad lines skipped (first: %s)",
                static_cast<unsigned long long>(info.skipped), info.first_skipped.c_str());
  }
  std::printf("\n");
  if (!FLAGS_test.empty()) {
    const bool strings[2] = {names.strings(IdNames::kUser), names.strings(IdNames::kItem)};
    RETURN_IF_ERROR(ReadRatings(FLAGS_test, ro, &test, &info));
    // String ids first seen in the test file: the training ids become strings too.
    for (IdNames::Column c : {IdNames::kUser, IdNames::kItem}) {
      if (!strings[c] && names.strings(c)) names.Renumber(c, &train);
    }
    if (info.skipped) {
      std::printf("# test %s: %llu bad lines skipped (first: %s)\n", FLAGS_test.c_str(),
                  static_cast<unsigned long long>(info.skipped), info.first_skipped.c_str());
    }
  }
  RETURN_IF_ERROR(BuildDataset(train, test, FLAGS_test_fraction, FLAGS_seed, data));
  data->names = std::move(names);
  for (IdNames::Column c : {IdNames::kUser, IdNames::kItem}) {
    if (data->names.strings(c)) {
      std::printf(
          "# %s ids are strings: mapped to dense ids in order of first appearance "
          "(table %s.%s_ids)\n",
          c == IdNames::kUser ? "user" : "item", FLAGS_table_prefix.c_str(),
          c == IdNames::kUser ? "user" : "item");
    }
  }
  std::printf("# %zu train / %zu test ratings, %u users, %u items, mean %.4f, range [%g, %g]",
              data->train.size(), data->test.size(), data->users.size(), data->items.size(),
              data->mean, data->min_rating, data->max_rating);
  if (data->test_unknown) {
    std::printf(", %llu test ratings of users/items not in train",
                static_cast<unsigned long long>(data->test_unknown));
  }
  std::printf("\n");
  return Status::OK();
}

Status OptionsFromFlags(MfTrainOptions* o) {
  RETURN_IF_ERROR(apps::RunOptionsFromFlags(&o->run));
  o->rank = FLAGS_rank;
  o->lr = FLAGS_lr;
  o->lr_power = FLAGS_lr_power;
  o->lambda = FLAGS_lambda;
  o->bias_lambda = FLAGS_bias_lambda;
  o->biases = FLAGS_biases;
  o->minibatch = FLAGS_minibatch;
  o->init_scale = FLAGS_init_scale;
  RETURN_IF_ERROR(ParseRatingOrder(FLAGS_order, &o->order));
  o->in_place = FLAGS_in_place;
  o->table_prefix = FLAGS_table_prefix;
  o->export_dir = FLAGS_export;
  return ValidateMfOptions(*o);
}

std::optional<double> BiasBaseline(const MfDataset& data) {
  BiasModel m = FitBiasBaseline(data);
  return Rmse(data.test, data.min_rating, data.max_rating,
              [&](const Rating& r) { return m.Predict(r.user, r.item); });
}

PlainMfOptions PlainOptions(const MfTrainOptions& o) {
  PlainMfOptions p;
  p.rank = o.rank;
  p.biases = o.biases;
  p.lr = o.lr;
  p.lr_power = o.lr_power;
  p.lambda = o.lambda;
  p.bias_lambda = o.bias_lambda;
  p.minibatch = o.minibatch;
  p.clocks = o.run.clocks;
  p.eval_every = o.run.eval_every;
  p.seed = o.run.seed;
  p.init_scale = o.init_scale;
  p.order = o.order == RatingOrder::kRows ? RatingOrder::kRows : RatingOrder::kData;
  return p;
}

// Without --lr: eta0 from a short search on held-out training ratings
// (SearchStepSize), the same in every process.
//
// A job of T = num_clients * workers > 2 workers gets a search with a safety
// margin. Its workers update the shared item rows from stale copies (each
// sees the others' updates of a clock only at the next clock), and T such
// updates add up: a step that sequential SGD survives can overshoot T-fold
// and diverge (0.2, picked by the sequential search, took 3 processes x 2
// workers under TSan, whose slow workers read every row at the clock's start,
// to RMSE nan). So the search then simulates T x (s + 1) workers (the bsp
// worst case, PlainMfOptions::workers, times the s + 1 clocks of the others'
// updates a stale read can miss; s = the staleness bound, at least 1 for
// async) on a finer grid (25% steps), and a step wins only if the next larger
// one does not diverge either: the real job's staleness varies with timing,
// so the chosen step must not sit at the edge (with T workers only, 0.2 won
// for mpirun -np 3 x 1 worker, essp s=1, which oscillated to RMSE 1.47 in
// about 1 of 10 runs; without the next-step rule, 0.125 won for the 3-host
// netns job, next to a diverging 0.16, and diverged under TSan).
// T <= 2 (one process, the default 2 workers) keeps the sequential search:
// the sum of two stale updates cannot overshoot where each alone converges,
// and its choices stay as they were.
void ChooseStepSize(const MfDataset& data, uint32_t num_clients, MfTrainOptions* o) {
  if (!FLAGS_lr_search || apps::FlagWasSet("lr")) return;
  const int job_workers = static_cast<int>(num_clients) * o->run.workers;
  const bool margin = job_workers > 2;
  const std::vector<double> candidates =
      margin ? std::vector<double>{0.03, 0.04, 0.05, 0.064, 0.08, 0.1, 0.125, 0.16, 0.2, 0.25}
             : std::vector<double>{0.03, 0.08, 0.2};
  // 60 clocks (the default job), fewer on large data (at most ~20M steps per
  // candidate, at least 10 clocks); a function of the data only, so a
  // resumed run picks the same.
  const int64_t clocks = std::clamp<int64_t>(
      static_cast<int64_t>(20000000 / std::max<size_t>(1, data.train.size())), 10, 60);
  PlainMfOptions base = PlainOptions(*o);
  const int stale_clocks =
      o->run.consistency == Consistency::kBsp
          ? 1
          : 1 + std::max<int>(o->run.consistency == Consistency::kAsync ? 1 : 0,
                              static_cast<int>(o->run.staleness));
  base.workers = margin ? job_workers * stale_clocks : 1;
  // Under --memory_mb the search holds at most half of it (a seeded sample of
  // the users, and of the items if they alone would fill a quarter): the
  // rest of the process (the data, the client and its shard) is there too.
  const uint64_t max_bytes = FLAGS_memory_mb > 0 ? static_cast<uint64_t>(FLAGS_memory_mb) << 19 : 0;
  StepSizeSearch found = SearchStepSize(data, base, candidates, clocks, margin, max_bytes);
  if (found.heldout_rmse.empty()) return;
  o->lr = found.lr;
  std::string sample;
  if (found.user_share < 1 || found.item_share < 1) {
    char text[160];
    std::snprintf(text, sizeof(text),
                  " of a sample of %.1f%% of the users and %.1f%% of the items (to stay within "
                  "--memory_mb)",
                  100 * found.user_share, 100 * found.item_share);
    sample = text;
  }
  std::printf(
      "# step size --lr=%g, from a %lld-clock search on 10%% of the training ratings%s held "
      "out (RMSE",
      o->lr, static_cast<long long>(found.clocks), sample.c_str());
  for (size_t k = 0; k < candidates.size(); ++k) {
    std::printf("%s %g: %.4f", k ? "," : "", candidates[k], found.heldout_rmse[k]);
  }
  if (margin) {
    std::printf("; %d workers simulated, the next larger step must not diverge",
                static_cast<int>(base.workers));
  }
  std::printf("); --lr=X sets it\n");
}

// Where --baseline_mmap puts its file: --data_dir if given (created if
// missing), else $TMPDIR or /tmp.
StatusOr<std::string> MappedFactorsDir() {
  if (apps::FlagWasSet("data_dir")) {
    std::error_code ec;
    std::filesystem::create_directories(FLAGS_data_dir, ec);
    if (ec) {
      return Status::IOError("--data_dir: cannot create '" + FLAGS_data_dir + "': " + ec.message());
    }
    return FLAGS_data_dir;
  }
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp");
}

int RunBaseline(const MfDataset& data, const MfTrainOptions& o, apps::ReportWriter* report) {
  PlainMfOptions p = PlainOptions(o);
  std::string dir;
  if (FLAGS_baseline_mmap) {
    StatusOr<std::string> d = MappedFactorsDir();
    if (!d.ok()) return apps::UsageError(kProgram, d.status());
    dir = *d;
    std::printf(
        "# baseline: single-threaded SGD, factor tables in a file-backed mmap in %s "
        "(MADV_RANDOM), no parameter server\n",
        dir.c_str());
  } else {
    std::printf("# baseline: single-threaded SGD in plain memory, no parameter server\n");
  }
  report->PrintHeader();
  Status write_status;
  auto on_clock = [&](const MfClockResult& r) {
    Status w = report->AddLine(
        {static_cast<double>(r.clock), r.seconds, r.train_loss, r.test_rmse, 0.0, 0.0, 0.0});
    if (write_status.ok()) write_status = w;
  };
  PlainMfSummary s;
  if (FLAGS_baseline_mmap) {
    Status mapped = RunPlainMfMapped(data, p, dir, on_clock, &s);
    if (!mapped.ok()) return apps::UsageError(kProgram, mapped.WithPrefix("--baseline_mmap"));
  } else {
    s = RunPlainMf(data, p, on_clock);
  }
  if (!write_status.ok()) return apps::UsageError(kProgram, write_status);
  std::printf("# done: %llu ratings in %.3f s: %.0f ratings/s (baseline, 1 thread%s)\n",
              static_cast<unsigned long long>(s.ratings), s.seconds, s.ratings_per_second,
              FLAGS_baseline_mmap ? ", factors in a mapped file" : "");
  return 0;
}

// The flags that shape the model and a fingerprint of the data it learns from
// (the split train/test sets as loaded: covers the files, --format,
// --test_fraction and --seed), and how this run splits the ratings:
// `num_clients` processes of o.run.workers workers. The split is recorded,
// not compared: worker g of T takes part g of PartitionByUser(T), and clock
// c's minibatch is a function of c and the part (MinibatchWindow), so a
// resumed job continues exactly as if it had been split this way from its
// resume clock on (the factors are all in the tables; no per-worker state
// survives a clock).
apps::JobDescription DescribeJob(const MfDataset& data, const MfTrainOptions& o,
                                 uint32_t num_clients) {
  apps::JobDescription job;
  job.split.num_clients = num_clients;
  job.split.workers = static_cast<uint32_t>(o.run.workers);
  job.app = kProgram;
  job.table_prefix = o.table_prefix;
  apps::InputFingerprint fp;
  for (const std::vector<Rating>* set : {&data.train, &data.test}) {
    fp.AddValue(static_cast<uint64_t>(set->size()));
    for (const Rating& r : *set) {
      // Unknown test ids (not in train) count as themselves: kUnknown.
      fp.AddValue(r.user == IdMap::kUnknown ? ~0ull : data.users.raw(r.user));
      fp.AddValue(r.item == IdMap::kUnknown ? ~0ull : data.items.raw(r.item));
      fp.AddValue(r.value);
    }
  }
  for (IdNames::Column c : {IdNames::kUser, IdNames::kItem}) {
    fp.AddValue(static_cast<uint64_t>(data.names.names(c).size()));
    for (const std::string& name : data.names.names(c)) fp.Add(name.data(), name.size() + 1);
  }
  job.input = fp.value();
  job.input_desc = FLAGS_train + (FLAGS_test.empty() ? "" : " + " + FLAGS_test);
  using apps::ShortestDouble;
  job.flags = {
      {"rank", std::to_string(o.rank)},
      {"biases", o.biases ? "true" : "false"},
      {"init_scale", ShortestDouble(o.init_scale)},
      {"lr", ShortestDouble(o.lr)},
      {"lr_power", ShortestDouble(o.lr_power)},
      {"lambda", ShortestDouble(o.lambda)},
      {"bias_lambda", ShortestDouble(o.bias_lambda)},
      {"minibatch", ShortestDouble(o.minibatch)},
      {"consistency", std::string(ConsistencyName(o.run.consistency))},
      {"staleness", std::to_string(o.run.staleness)},
      {"seed", std::to_string(o.run.seed)},
  };
  return job;
}

// The step size a job recorded (unless --lr is given), else the search's.
// The job record is checked first: a store that holds another job (or other
// data) is refused at once, in words about what differs, and a resumed run
// does not search.
Status StepSizeOfJob(Client* client, const MfDataset& data, uint32_t num_clients,
                     MfTrainOptions* options) {
  if (apps::FlagWasSet("lr")) return Status::OK();
  std::string recorded;
  RETURN_IF_ERROR(apps::PrecheckJob(client, DescribeJob(data, *options, client->num_clients()),
                                    options->run.resume, "lr", &recorded));
  char* end = nullptr;
  const double lr = recorded.empty() ? 0 : std::strtod(recorded.c_str(), &end);
  if (end != nullptr && *end == '\0' && std::isfinite(lr) && lr > 0) {
    options->lr = lr;
    std::printf("# step size --lr=%s, recorded by the job\n", recorded.c_str());
  } else {
    ChooseStepSize(data, num_clients, options);
  }
  return Status::OK();
}

// Starts (or resumes) the job; says so when the ratings are re-partitioned.
Status StartMfJob(Client* client, const MfDataset& data, const MfTrainOptions& options,
                  apps::ReportWriter* report, apps::JobSession* session) {
  apps::JobSplit recorded_split;
  const apps::JobDescription job = DescribeJob(data, options, client->num_clients());
  RETURN_IF_ERROR(apps::StartJob(client, job,
                                 {kProgram, options.run.resume, FLAGS_csv, FLAGS_metrics_listen,
                                  FLAGS_wait_report_ms, &recorded_split},
                                 report, session));
  if (recorded_split.num_clients > 0 && !recorded_split.SameParts(job.split)) {
    std::printf(
        "# the job was split as %s from clock %lld; from clock %lld on it is %s: the ratings "
        "are re-partitioned (the job record says so)\n",
        recorded_split.Text().c_str(), static_cast<long long>(recorded_split.since),
        static_cast<long long>(client->start_clock()), job.split.Text().c_str());
  }
  return Status::OK();
}

void PrintRunLine(const Client& client, const ClientOptions& client_options,
                  const MfTrainOptions& options) {
  std::printf(
      "# %s, client %u of %u, %d workers, %s, rank %d, lr %g/(t+1)^%g, lambda %g, bias_lambda "
      "%g%s\n",
      client.embedded() ? ("embedded in " + client_options.data_dir).c_str() : "servers",
      client.client_id(), client.num_clients(), options.run.workers,
      apps::DescribeConsistency(options.run).c_str(), options.rank, options.lr, options.lr_power,
      options.lambda, options.bias_lambda,
      client.start_clock() > 0
          ? (", resuming at clock " + std::to_string(client.start_clock())).c_str()
          : "");
}

// What to try when the final test RMSE is poor: divergence, overfitting, or
// a step too small. `best_rmse`: the lowest test RMSE of any clock.
void PrintHints(const MfTrainSummary& summary, std::optional<double> bias_rmse, double best_rmse,
                const MfTrainOptions& options) {
  if (summary.final_test_rmse && bias_rmse) {
    const double rmse = *summary.final_test_rmse;
    if (!std::isfinite(rmse)) {
      std::printf(
          "# hint: training diverged (test RMSE %g): the step size %g is too large for this "
          "data; try a new job (another --data_dir) with --lr=%g; see docs/apps.md, "
          "\"Defaults\"\n",
          rmse, options.lr, options.lr / 4);
    } else if (rmse >= *bias_rmse && best_rmse < rmse * 0.999) {
      std::printf(
          "# hint: the factors do not beat the bias baseline (%.4f >= %.4f) and the test RMSE "
          "rose from %.4f during training (overfitting): try a new job (another --data_dir) "
          "with a smaller step (--lr=%g) or more regularization (--lambda=%g); see "
          "docs/apps.md, \"Defaults\"\n",
          rmse, *bias_rmse, best_rmse, options.lr / 2.5, options.lambda * 2);
    } else if (rmse >= *bias_rmse) {
      std::printf(
          "# hint: the factors do not beat the bias baseline (%.4f >= %.4f). The step size %g "
          "may be too small for this data: try a new job (another --data_dir) with --lr=%g, "
          "or more clocks (--clocks=%lld --resume); see docs/apps.md, \"Defaults\"\n",
          rmse, *bias_rmse, options.lr, options.lr * 2.5,
          static_cast<long long>(options.run.clocks * 2));
    }
  }
}

// --baseline and --baseline_mmap: the step-size search, then the plain loop.
int RunBaselineJob(const MfDataset& data, MfTrainOptions* options, apps::ReportWriter* report) {
  ChooseStepSize(data, 1, options);
  if (!FLAGS_csv.empty()) {
    Status s = report->OpenCsv(FLAGS_csv);
    if (!s.ok()) return apps::UsageError(kProgram, s);
  }
  int rc = RunBaseline(data, *options, report);
  Status s = report->Close();
  return rc != 0 ? rc : (s.ok() ? 0 : apps::UsageError(kProgram, s));
}

// --export of a job that has nothing left to train: the factors as stored.
Status ExportStored(Client* client, MfTrainer* trainer, const std::string& dir,
                    MfTrainSummary* summary) {
  std::unique_ptr<Worker> worker;
  RETURN_IF_ERROR(client->RegisterWorker(&worker));
  return trainer->Export(worker.get(), dir, summary->start_clock, &summary->export_stale_rows);
}

void PrintExported(const MfTrainOptions& options, const MfTrainSummary& summary) {
  std::printf("# exported factors to %s/{user,item}_factors.csv", options.export_dir.c_str());
  if (summary.export_stale_rows) {
    std::printf(
        " (%llu rows came from this process's cache, up to s clocks old; run "
        "`pace_mf --resume --export=DIR` with the same flags for exact final values)",
        static_cast<unsigned long long>(summary.export_stale_rows));
  }
  std::printf("\n");
}

int Run() {
  MfTrainOptions options;
  Status s = OptionsFromFlags(&options);
  if (!s.ok()) return apps::UsageError(kProgram, s);
  // --baseline_mmap is the baseline with its factor tables in a mapped file.
  const bool baseline = FLAGS_baseline || FLAGS_baseline_mmap;
  ClientOptions client_options;
  if (!baseline) {
    s = apps::ClientOptionsFromFlags(&client_options);
    if (!s.ok()) return apps::UsageError(kProgram, s);
  }
  s = apps::CheckOutputDir("export", FLAGS_export);
  if (s.ok()) s = apps::CheckOutputFile("csv", FLAGS_csv);
  if (s.ok()) s = apps::CheckOutputFile("staleness_hist", FLAGS_staleness_hist);
  if (!s.ok()) return apps::UsageError(kProgram, s);
  MfDataset data;
  s = LoadData(&data);
  if (!s.ok()) return apps::UsageError(kProgram, s);
  std::optional<double> bias_rmse = BiasBaseline(data);
  if (bias_rmse)
    std::printf("# bias baseline (mean + user + item biases): test RMSE %.4f\n", *bias_rmse);
  apps::ReportWriter report(Columns(), stdout);
  if (baseline) return RunBaselineJob(data, &options, &report);

  std::unique_ptr<Client> client;
  s = Client::Open(client_options, &client);
  if (!s.ok()) return apps::UsageError(kProgram, s.WithPrefix("opening the client"));
  // The job record before the step-size search: a store that holds another
  // job (or other data) is refused at once, in words about what differs, and
  // a job that recorded its step keeps it (a resumed run does not search).
  s = StepSizeOfJob(client.get(), data, client_options.num_clients, &options);
  if (!s.ok()) return apps::UsageError(kProgram, s);
  apps::JobSession session;
  s = StartMfJob(client.get(), data, options, &report, &session);
  if (!s.ok()) return apps::UsageError(kProgram, s);
  MfTrainer trainer(client.get(), &data, options);
  s = trainer.Setup();
  for (IdNames::Column c : {IdNames::kUser, IdNames::kItem}) {
    if (!s.ok()) break;
    s = apps::RecordIdNames(
        client.get(), options.run.resume,
        options.table_prefix + (c == IdNames::kUser ? ".user_ids" : ".item_ids"),
        data.names.names(c));
  }
  if (!s.ok()) return apps::UsageError(kProgram, s);
  PrintRunLine(*client, client_options, options);
  if (client->client_id() == 0 && client->start_clock() < options.run.clocks) {
    report.SetProgress(client->start_clock(), options.run.clocks);
    report.PrintHeader();
  }
  Status write_status;
  double best_rmse = INFINITY;  // the lowest test RMSE of any clock
  MfTrainSummary summary;
  s = trainer.Train(
      [&](const MfReport& r) {
        apps::NoteClocksComplete(r.clock + 1);
        if (r.test_rmse && *r.test_rmse < best_rmse) best_rmse = *r.test_rmse;
        Status w =
            report.AddLine({static_cast<double>(r.clock), r.seconds, r.train_loss, r.test_rmse,
                            r.staleness_mean, static_cast<double>(r.staleness_p99), r.blocked_pct});
        if (write_status.ok()) write_status = w;
      },
      &summary);
  if (!s.ok()) {
    std::fprintf(stderr, "%s: training failed: %s\n", kProgram, s.ToString().c_str());
    return 2;
  }
  if (!write_status.ok()) return apps::UsageError(kProgram, write_status);
  if (summary.stopped) {
    // Every clock before the stop clock is acknowledged (Train flushed).
    s = report.Close();
    return apps::ExitStopped(summary.start_clock);
  }
  if (!FLAGS_staleness_hist.empty()) {
    s = apps::WriteStalenessHistogram(client->Stats(),
                                      {trainer.user_table().name(), trainer.item_table().name()},
                                      FLAGS_staleness_hist);
    if (!s.ok()) return apps::UsageError(kProgram, s.WithPrefix("--staleness_hist"));
  }
  if (summary.start_clock >= options.run.clocks) {
    std::printf("# the job is already at clock %lld (--clocks=%lld): nothing to train\n",
                static_cast<long long>(summary.start_clock),
                static_cast<long long>(options.run.clocks));
    if (!options.export_dir.empty() && client->client_id() == 0) {
      s = ExportStored(client.get(), &trainer, options.export_dir, &summary);
      if (!s.ok()) return apps::UsageError(kProgram, s.WithPrefix("--export"));
    }
  } else {
    std::printf("# done: clocks %lld..%lld, %llu ratings in %.3f s: %.0f ratings/s in this process",
                static_cast<long long>(summary.start_clock),
                static_cast<long long>(summary.end_clock - 1),
                static_cast<unsigned long long>(summary.ratings), summary.seconds,
                summary.ratings_per_second);
    if (summary.final_test_rmse && bias_rmse) {
      std::printf("; test RMSE %.4f (bias baseline %.4f)", *summary.final_test_rmse, *bias_rmse);
    }
    std::printf("\n");
    // The app's own data: the ratings and the id maps (held for the run).
    const uint64_t app_bytes = (data.train.capacity() + data.test.capacity()) * sizeof(Rating) +
                               data.users.MemoryBytes() + data.items.MemoryBytes();
    apps::PrintMemorySummary(client->Stats(), app_bytes);
    apps::PrintCpuSummary(summary.cpu, summary.seconds);
    if (client->client_id() == 0) PrintHints(summary, bias_rmse, best_rmse, options);
  }
  if (!options.export_dir.empty() && client->client_id() == 0) PrintExported(options, summary);
  s = report.Close();
  if (!s.ok()) return apps::UsageError(kProgram, s);
  return 0;
}

}  // namespace
}  // namespace mf
}  // namespace pace

int main(int argc, char** argv) {
  pace::cli::ProgramInfo info;
  info.name = "pace_mf";
  info.summary = "SGD matrix factorization on PaceDB";
  info.usage =
      "pace_mf --train=FILE [--test=FILE | --test_fraction=F] [flags]        embedded in "
      "--data_dir\n"
      "pace_mf --train=FILE ... --servers=H:P,... --client_id=I --num_clients=N   on paced shards\n"
      "pace_mf --train=FILE ... --resume                  continue the stored job";
  info.groups = pace::apps::AppFlagGroups(
      {"train", "test", "test_fraction", "format", "string_ids"},
      {"rank", "lr", "lr_search", "lr_power", "lambda", "bias_lambda", "biases", "init_scale"},
      {"table_prefix", "baseline_mmap"}, {"export"});
  info.footer =
      "Exit codes: 0 ok, 1 usage or input error, 2 training failed. Documentation: "
      "docs/apps.md";
  pace::apps::QuietLibraryLogs();
  pace::apps::SetFlagDefault("clocks", "60");
  pace::cli::ParseCommandLine(info, &argc, &argv);
  pace::apps::ShowVerboseLogs();
  FLAGS_logtostderr = true;
  pace::apps::TuneHeap();
  google::InitGoogleLogging(argv[0]);
  pace::apps::InstallStopSignal({"pace_mf", "; rerun the same command with --resume", 10});
  if (argc > 1) {
    std::fprintf(stderr, "pace_mf: unexpected argument '%s'\n", argv[1]);
    return 1;
  }
  return pace::mf::Run();
}
