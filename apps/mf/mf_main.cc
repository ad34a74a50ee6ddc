// pace_mf: SGD matrix factorization on PaceDB (issue 5). See docs/apps.md.
//
//   pace_mf --train=ratings.csv --test=test.csv            # embedded, ./pace-data
//   pace_mf --train=F --test_fraction=0.1 --servers=h:7100,h:7101 --client_id=0 --num_clients=2
//   pace_mf --train=F --test=G --baseline                  # no parameter server
//
// Exit code 0 on success, 1 on a usage or input error, 2 if training failed.
#include <gflags/gflags.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "apps/mf/mf_model.h"
#include "apps/mf/mf_trainer.h"
#include "apps/mf/ratings_data.h"
#include "apps/shared/app_flags.h"
#include "apps/shared/report.h"
#include "client/metrics.h"
#include "client/pace.h"

DEFINE_string(train, "", "training ratings file (csv, tsv, dat or plain; see --format)");
DEFINE_string(test, "", "test ratings file (same formats)");
DEFINE_double(test_fraction, 0.0,
              "hold out this fraction of --train as the test set (when --test is not given)");
DEFINE_string(format, "auto", "input format: auto|csv|tsv|dat|plain");
DEFINE_int32(rank, 16, "rank K of the user and item factors");
DEFINE_double(lr, 0.08, "initial step size eta0; clock t uses eta0 / (t + 1)^lr_power");
DEFINE_double(lr_power, 1.0, "step size decay exponent (0.5: eta0 / sqrt(t + 1))");
DEFINE_double(lambda, 4, "l2 weight on the factors in the objective (see docs/apps.md)");
DEFINE_double(bias_lambda, 10, "l2 weight on the user and item biases in the objective");
DEFINE_bool(biases, true, "model a global mean and user and item biases");
DEFINE_double(init_scale, 0.01, "factors start uniform in [-init_scale, init_scale)");
DEFINE_string(export, "", "write the learned factors as CSV into this directory at the end");
DEFINE_string(table_prefix, "mf", "names of the tables: PREFIX.user, PREFIX.item, PREFIX.stats");

DEFINE_string(metrics_listen, "",
              "host:port serving this process's Prometheus metrics at /metrics (port 0: any "
              "free port; empty: none); see docs/operations.md");

namespace pace {
namespace mf {
namespace {

constexpr char kProgram[] = "pace_mf";

std::vector<apps::ReportColumn> Columns() {
  using apps::ColumnFormat;
  return {{"clock", ColumnFormat::kInteger},         {"seconds", ColumnFormat::kSeconds},
          {"train_loss", ColumnFormat::kNumber},     {"test_rmse", ColumnFormat::kNumber},
          {"staleness_mean", ColumnFormat::kNumber}, {"staleness_p99", ColumnFormat::kInteger},
          {"blocked_pct", ColumnFormat::kNumber}};
}

Status LoadData(MfDataset* data) {
  if (FLAGS_train.empty()) return Status::InvalidArgument("--train=FILE is required");
  if (!FLAGS_test.empty() && FLAGS_test_fraction > 0) {
    return Status::InvalidArgument("give either --test or --test_fraction, not both");
  }
  RatingsReadOptions ro;
  RETURN_IF_ERROR(ParseRatingsFileFormat(FLAGS_format, &ro.format).WithPrefix("--format"));
  ro.skip_bad_lines = FLAGS_skip_bad_lines;
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
    RETURN_IF_ERROR(ReadRatings(FLAGS_test, ro, &test, &info));
    if (info.skipped) {
      std::printf("# test %s: %llu bad lines skipped (first: %s)\n", FLAGS_test.c_str(),
                  static_cast<unsigned long long>(info.skipped), info.first_skipped.c_str());
    }
  }
  RETURN_IF_ERROR(BuildDataset(train, test, FLAGS_test_fraction, FLAGS_seed, data));
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
  o->table_prefix = FLAGS_table_prefix;
  o->export_dir = FLAGS_export;
  return ValidateMfOptions(*o);
}

std::optional<double> BiasBaseline(const MfDataset& data) {
  BiasModel m = FitBiasBaseline(data);
  return Rmse(data.test, data.min_rating, data.max_rating,
              [&](const Rating& r) { return m.Predict(r.user, r.item); });
}

int RunBaseline(const MfDataset& data, const MfTrainOptions& o, apps::ReportWriter* report) {
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
  std::printf("# baseline: single-threaded SGD in plain memory, no parameter server\n");
  report->PrintHeader();
  Status write_status;
  PlainMfSummary s = RunPlainMf(data, p, [&](const MfClockResult& r) {
    Status w = report->AddLine(
        {static_cast<double>(r.clock), r.seconds, r.train_loss, r.test_rmse, 0.0, 0.0, 0.0});
    if (write_status.ok()) write_status = w;
  });
  if (!write_status.ok()) return apps::UsageError(kProgram, write_status);
  std::printf("# done: %llu ratings in %.3f s: %.0f ratings/s (baseline, 1 thread)\n",
              static_cast<unsigned long long>(s.ratings), s.seconds, s.ratings_per_second);
  return 0;
}

int Run() {
  MfTrainOptions options;
  Status s = OptionsFromFlags(&options);
  if (!s.ok()) return apps::UsageError(kProgram, s);
  ClientOptions client_options;
  if (!FLAGS_baseline) {
    s = apps::ClientOptionsFromFlags(&client_options);
    if (!s.ok()) return apps::UsageError(kProgram, s);
  }
  MfDataset data;
  s = LoadData(&data);
  if (!s.ok()) return apps::UsageError(kProgram, s);
  std::optional<double> bias_rmse = BiasBaseline(data);
  if (bias_rmse)
    std::printf("# bias baseline (mean + user + item biases): test RMSE %.4f\n", *bias_rmse);

  apps::ReportWriter report(Columns(), stdout);
  if (!FLAGS_csv.empty()) {
    s = report.OpenCsv(FLAGS_csv);
    if (!s.ok()) return apps::UsageError(kProgram, s);
  }
  if (FLAGS_baseline) {
    int rc = RunBaseline(data, options, &report);
    s = report.Close();
    return rc != 0 ? rc : (s.ok() ? 0 : apps::UsageError(kProgram, s));
  }

  std::unique_ptr<Client> client;
  s = Client::Open(client_options, &client);
  if (!s.ok()) return apps::UsageError(kProgram, s.WithPrefix("opening the client"));
  std::unique_ptr<ClientMetricsServer> metrics;
  if (!FLAGS_metrics_listen.empty()) {
    s = ClientMetricsServer::Start(FLAGS_metrics_listen, client.get(), &metrics);
    if (!s.ok()) return apps::UsageError(kProgram, s.WithPrefix("--metrics_listen"));
    std::printf("# metrics on %s\n", metrics->address().c_str());
    std::fflush(stdout);
  }
  MfTrainer trainer(client.get(), &data, options);
  s = trainer.Setup();
  if (!s.ok()) return apps::UsageError(kProgram, s);
  std::printf(
      "# %s, client %u of %u, %d workers, %s, rank %d, lr %g/(t+1)^%g, lambda %g, bias_lambda "
      "%g%s\n",
      client->embedded() ? ("embedded in " + client_options.data_dir).c_str() : "servers",
      client->client_id(), client->num_clients(), options.run.workers,
      apps::DescribeConsistency(options.run).c_str(), options.rank, options.lr, options.lr_power,
      options.lambda, options.bias_lambda,
      client->start_clock() > 0
          ? (", resuming at clock " + std::to_string(client->start_clock())).c_str()
          : "");
  if (client->client_id() == 0 && client->start_clock() < options.run.clocks) report.PrintHeader();
  Status write_status;
  MfTrainSummary summary;
  s = trainer.Train(
      [&](const MfReport& r) {
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
      std::unique_ptr<Worker> worker;
      s = client->RegisterWorker(&worker);
      if (s.ok()) {
        s = trainer.Export(worker.get(), options.export_dir, summary.start_clock,
                           &summary.export_stale_rows);
      }
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
  }
  if (!options.export_dir.empty() && client->client_id() == 0) {
    std::printf("# exported factors to %s/{user,item}_factors.csv", options.export_dir.c_str());
    if (summary.export_stale_rows) {
      std::printf(
          " (%llu rows came from this process's cache, up to s clocks old; run "
          "`pace_mf --resume --export=DIR` with the same flags for exact final values)",
          static_cast<unsigned long long>(summary.export_stale_rows));
    }
    std::printf("\n");
  }
  s = report.Close();
  if (!s.ok()) return apps::UsageError(kProgram, s);
  return 0;
}

}  // namespace
}  // namespace mf
}  // namespace pace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "SGD matrix factorization on PaceDB\n"
      "  pace_mf --train=FILE [--test=FILE | --test_fraction=F] [flags]   (see docs/apps.md)");
  pace::apps::QuietLibraryLogs();
  pace::apps::SetFlagDefault("clocks", "60");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (argc > 1) {
    std::fprintf(stderr, "pace_mf: unexpected argument '%s'\n", argv[1]);
    return 1;
  }
  return pace::mf::Run();
}
