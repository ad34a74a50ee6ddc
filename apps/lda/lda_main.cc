// pace_lda: collapsed Gibbs sampling LDA on PaceDB. See docs/apps.md.
//
//   pace_lda --docword=docword.txt --vocab=vocab.txt --topics=20   # embedded, ./pace-data
//   pace_lda --docs=docs.txt --topics=20 --baseline                # no parameter server
//
// Exit code 0 on success, 1 on a usage or input error, 2 if training failed.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "apps/lda/corpus_data.h"
#include "apps/lda/lda_model.h"
#include "apps/lda/lda_state.h"
#include "apps/lda/lda_trainer.h"
#include "apps/shared/app_flags.h"
#include "apps/shared/job_record.h"
#include "apps/shared/job_start.h"
#include "apps/shared/report.h"
#include "apps/shared/stop_signal.h"
#include "client/metrics.h"
#include "client/pace.h"
#include "tools/cli/cli.h"

DEFINE_string(docword, "", "UCI bag-of-words docword.txt");
DEFINE_string(docs, "", "or: one document of whitespace-separated tokens per line");
DEFINE_string(vocab, "", "vocab.txt for --docword (word names for --topics_out)");
DEFINE_int32(topics, 20, "number of topics K");
DEFINE_double(alpha, 0.1, "Dirichlet prior of the document-topic distributions");
DEFINE_double(beta, 0.01, "Dirichlet prior of the topic-word distributions");
DEFINE_int32(topics_out, 10, "print the N most frequent words of every topic at the end (0: no)");
DEFINE_string(table_prefix, "lda",
              "names of the tables: PREFIX.word_topic, PREFIX.topic_totals, PREFIX.stats");

DEFINE_string(metrics_listen, "",
              "host:port serving this process's Prometheus metrics at /metrics (port 0: any "
              "free port; empty: none); see docs/operations.md");

namespace pace {
namespace lda {
namespace {

constexpr char kProgram[] = "pace_lda";

std::vector<apps::ReportColumn> Columns() {
  using apps::ColumnFormat;
  return {{"clock", ColumnFormat::kInteger},
          {"seconds", ColumnFormat::kSeconds},
          {"loglik", ColumnFormat::kNumber, 1},
          {"tokens_per_s", ColumnFormat::kNumber, 0},
          {"staleness_mean", ColumnFormat::kNumber, 2},
          {"staleness_p99", ColumnFormat::kInteger},
          {"blocked_pct", ColumnFormat::kNumber, 1}};
}

Status LoadCorpus(Corpus* corpus) {
  if (FLAGS_docword.empty() == FLAGS_docs.empty()) {
    return Status::InvalidArgument("give exactly one of --docword=FILE or --docs=FILE");
  }
  if (!FLAGS_docword.empty()) {
    CorpusReadOptions ro;
    ro.skip_bad_lines = FLAGS_skip_bad_lines;
    CorpusReadInfo info;
    RETURN_IF_ERROR(ReadDocword(FLAGS_docword, ro, corpus, &info));
    if (info.skipped) {
      std::printf("# %llu bad lines skipped (first: %s)\n",
                  static_cast<unsigned long long>(info.skipped), info.first_skipped.c_str());
    }
    if (!FLAGS_vocab.empty()) RETURN_IF_ERROR(ReadVocab(FLAGS_vocab, corpus));
  } else {
    if (!FLAGS_vocab.empty()) {
      return Status::InvalidArgument("--vocab goes with --docword (--docs names its own words)");
    }
    RETURN_IF_ERROR(ReadDocsText(FLAGS_docs, corpus));
  }
  std::printf("# corpus %s: %zu documents, %u words, %llu tokens\n",
              (FLAGS_docword.empty() ? FLAGS_docs : FLAGS_docword).c_str(), corpus->docs.size(),
              corpus->vocab_size, static_cast<unsigned long long>(corpus->num_tokens));
  return Status::OK();
}

Status OptionsFromFlags(LdaTrainOptions* o) {
  RETURN_IF_ERROR(apps::RunOptionsFromFlags(&o->run));
  o->params.topics = FLAGS_topics;
  o->params.alpha = FLAGS_alpha;
  o->params.beta = FLAGS_beta;
  o->minibatch = FLAGS_minibatch;
  o->table_prefix = FLAGS_table_prefix;
  if (FLAGS_topics_out < 0) return Status::InvalidArgument("--topics_out must be >= 0");
  o->collect_model = FLAGS_topics_out > 0;
  if (!FLAGS_baseline) o->state_dir = AssignmentsDir(FLAGS_data_dir);
  // Embedded, the assignment files are as durable as the shard's WAL: fsynced
  // with --sync. With --servers the shards' durability is paced's --sync,
  // which this process cannot see: always fsync.
  o->sync_state = FLAGS_sync || !FLAGS_servers.empty();
  return ValidateLdaOptions(*o);
}

void PrintTopics(const Corpus& corpus, const std::vector<int32_t>& nwk, const LdaParams& p) {
  std::vector<std::vector<uint32_t>> top = TopWords(nwk, p, FLAGS_topics_out);
  const size_t k_count = static_cast<size_t>(p.topics);
  for (size_t k = 0; k < top.size(); ++k) {
    uint64_t n = 0;
    for (uint32_t w = 0; w < p.vocab; ++w)
      n += static_cast<uint64_t>(std::max(0, nwk[w * k_count + k]));
    std::printf("# topic %zu (%llu tokens):", k, static_cast<unsigned long long>(n));
    for (uint32_t w : top[k]) std::printf(" %s", corpus.WordName(w).c_str());
    std::printf("\n");
  }
}

int RunBaseline(const Corpus& corpus, const LdaTrainOptions& o, apps::ReportWriter* report) {
  PlainLdaOptions p;
  p.params = o.params;
  p.params.vocab = corpus.vocab_size;
  p.minibatch = o.minibatch;
  p.clocks = o.run.clocks;
  p.eval_every = o.run.eval_every;
  p.seed = o.run.seed;
  std::printf("# baseline: single-threaded collapsed Gibbs in plain memory, no parameter server\n");
  report->PrintHeader();
  Status write_status;
  PlainLdaSummary s = RunPlainLda(corpus, p, [&](const LdaClockResult& r) {
    std::optional<double> tps;
    if (r.tokens > 0) tps = r.tokens_per_second;
    Status w =
        report->AddLine({static_cast<double>(r.clock), r.seconds, r.loglik, tps, 0.0, 0.0, 0.0});
    if (write_status.ok()) write_status = w;
  });
  if (!write_status.ok()) return apps::UsageError(kProgram, write_status);
  std::printf("# done: %llu tokens in %.3f s: %.0f tokens/s (baseline, 1 thread)\n",
              static_cast<unsigned long long>(s.tokens), s.seconds, s.tokens_per_second);
  if (FLAGS_topics_out > 0) PrintTopics(corpus, s.nwk, p.params);
  return 0;
}

// The flags that shape the model and a fingerprint of the corpus as loaded.
apps::JobDescription DescribeJob(const Corpus& corpus, const LdaTrainOptions& o) {
  apps::JobDescription job;
  job.app = kProgram;
  job.table_prefix = o.table_prefix;
  apps::InputFingerprint fp;
  fp.AddValue(corpus.vocab_size);
  for (const std::vector<uint32_t>& doc : corpus.docs) {
    fp.AddValue(static_cast<uint64_t>(doc.size()));
    if (!doc.empty()) fp.Add(doc.data(), doc.size() * sizeof(uint32_t));
  }
  job.input = fp.value();
  job.input_desc = FLAGS_docword.empty() ? FLAGS_docs : FLAGS_docword;
  job.flags = {
      {"topics", std::to_string(o.params.topics)},
      {"alpha", apps::ShortestDouble(o.params.alpha)},
      {"beta", apps::ShortestDouble(o.params.beta)},
      {"minibatch", apps::ShortestDouble(o.minibatch)},
      {"consistency", std::string(ConsistencyName(o.run.consistency))},
      {"staleness", std::to_string(o.run.staleness)},
      {"seed", std::to_string(o.run.seed)},
      // The documents' partition, which the workers' assignment files follow.
      {"workers", std::to_string(o.run.workers)},
  };
  return job;
}

// --memory_mb is the process's budget: what it holds already (the binary,
// its libraries, the corpus as loaded: the peak RSS so far) and the data the
// workers are about to allocate come first; PaceDB gets the rest
// (client_options->memory_mb). InvalidArgument if that leaves PaceDB less
// than half.
Status FitMemoryBudget(const Corpus& corpus, const LdaTrainOptions& options,
                       ClientOptions* client_options) {
  if (client_options->memory_mb == 0) return Status::OK();
  const size_t budget = client_options->memory_mb;
  const uint64_t held =
      apps::PeakRssBytes() +
      LdaAppDataBytes(corpus, options, client_options->num_clients, /*include_corpus=*/false);
  const size_t held_mb = static_cast<size_t>((held + (1u << 20) - 1) >> 20);
  if (held_mb > budget / 2) {
    return Status::InvalidArgument(
        "--memory_mb=" + std::to_string(budget) + " is too small for this corpus: the " +
        "process, its documents, topic assignments and doc-topic counts take " +
        std::to_string(held_mb) + " MiB of it (at most half); give at least " +
        std::to_string(2 * held_mb));
  }
  client_options->memory_mb = budget - held_mb;
  std::printf(
      "# --memory_mb=%zu: the process and its documents take %zu MiB, PaceDB the other %zu\n",
      budget, held_mb, client_options->memory_mb);
  return Status::OK();
}

void PrintRunLine(const Client& client, const ClientOptions& client_options,
                  const LdaTrainOptions& options, const LdaTrainer& trainer) {
  std::printf(
      "# %s, client %u of %u, %d workers, %s, %d topics, alpha %g, beta %g%s\n",
      client.embedded() ? ("embedded in " + client_options.data_dir).c_str() : "servers",
      client.client_id(), client.num_clients(), options.run.workers,
      apps::DescribeConsistency(options.run).c_str(), options.params.topics, options.params.alpha,
      options.params.beta,
      client.start_clock() > 0
          ? (", resuming at clock " + std::to_string(client.start_clock()) +
             (trainer.replays_clock() ? " (replayed from the assignments the interrupted run wrote)"
                                      : ""))
                .c_str()
          : "");
}

int Run() {
  LdaTrainOptions options;
  Status s = OptionsFromFlags(&options);
  if (!s.ok()) return apps::UsageError(kProgram, s);
  ClientOptions client_options;
  if (!FLAGS_baseline) {
    s = apps::ClientOptionsFromFlags(&client_options);
    if (!s.ok()) return apps::UsageError(kProgram, s);
  }
  s = apps::CheckOutputFile("csv", FLAGS_csv);
  if (s.ok()) s = apps::CheckOutputFile("staleness_hist", FLAGS_staleness_hist);
  if (!s.ok()) return apps::UsageError(kProgram, s);
  Corpus corpus;
  s = LoadCorpus(&corpus);
  if (!s.ok()) return apps::UsageError(kProgram, s);

  apps::ReportWriter report(Columns(), stdout);
  if (FLAGS_baseline) {
    if (!FLAGS_csv.empty()) {
      s = report.OpenCsv(FLAGS_csv);
      if (!s.ok()) return apps::UsageError(kProgram, s);
    }
    int rc = RunBaseline(corpus, options, &report);
    s = report.Close();
    return rc != 0 ? rc : (s.ok() ? 0 : apps::UsageError(kProgram, s));
  }

  const uint64_t app_bytes = LdaAppDataBytes(corpus, options, client_options.num_clients);
  s = FitMemoryBudget(corpus, options, &client_options);
  if (!s.ok()) return apps::UsageError(kProgram, s);

  std::unique_ptr<Client> client;
  s = Client::Open(client_options, &client);
  if (!s.ok()) return apps::UsageError(kProgram, s.WithPrefix("opening the client"));
  apps::JobSession session;
  s = apps::StartJob(
      client.get(), DescribeJob(corpus, options),
      {kProgram, options.run.resume, FLAGS_csv, FLAGS_metrics_listen, FLAGS_wait_report_ms},
      &report, &session);
  if (!s.ok()) return apps::UsageError(kProgram, s);
  LdaTrainer trainer(client.get(), &corpus, options);
  s = trainer.Setup();
  if (!s.ok()) return apps::UsageError(kProgram, s);
  const ClockT end_clock = options.run.clocks + 1;
  PrintRunLine(*client, client_options, options, trainer);
  if (client->client_id() == 0 && client->start_clock() < end_clock) {
    report.SetProgress(client->start_clock(), options.run.clocks);
    report.PrintHeader();
  }
  Status write_status;
  LdaTrainSummary summary;
  s = trainer.Train(
      [&](const LdaReport& r) {
        apps::NoteClocksComplete(r.clock + 1);
        Status w =
            report.AddLine({static_cast<double>(r.clock), r.seconds, r.loglik, r.tokens_per_s,
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
  if (summary.start_clock >= end_clock) {
    std::printf("# the job is already at clock %lld (--clocks=%lld): nothing to train\n",
                static_cast<long long>(summary.start_clock),
                static_cast<long long>(options.run.clocks));
    s = report.Close();
    return s.ok() ? 0 : apps::UsageError(kProgram, s);
  }
  if (!FLAGS_staleness_hist.empty()) {
    s = apps::WriteStalenessHistogram(
        client->Stats(),
        {options.table_prefix + ".word_topic", options.table_prefix + ".topic_totals"},
        FLAGS_staleness_hist);
    if (!s.ok()) return apps::UsageError(kProgram, s.WithPrefix("--staleness_hist"));
  }
  std::printf("# done: %llu tokens in %.3f s: %.0f tokens/s in this process\n",
              static_cast<unsigned long long>(summary.tokens), summary.seconds,
              summary.tokens_per_second);
  // The app's own data (LdaAppDataBytes).
  apps::PrintMemorySummary(client->Stats(), app_bytes);
  if (client->client_id() == 0 && FLAGS_topics_out > 0 && !summary.word_topic.empty()) {
    PrintTopics(corpus, summary.word_topic, trainer.params());
  }
  s = report.Close();
  if (!s.ok()) return apps::UsageError(kProgram, s);
  return 0;
}

}  // namespace
}  // namespace lda
}  // namespace pace

int main(int argc, char** argv) {
  pace::cli::ProgramInfo info;
  info.name = "pace_lda";
  info.summary = "collapsed Gibbs sampling LDA on PaceDB";
  info.usage =
      "pace_lda --docword=FILE [--vocab=FILE] [flags]     a UCI bag-of-words corpus\n"
      "pace_lda --docs=FILE [flags]                       one document of tokens per line";
  info.groups = pace::apps::AppFlagGroups({"docword", "vocab", "docs"}, {"topics", "alpha", "beta"},
                                          {"table_prefix"}, {"topics_out"});
  info.footer =
      "Exit codes: 0 ok, 1 usage or input error, 2 training failed. Documentation: "
      "docs/apps.md";
  pace::apps::QuietLibraryLogs();
  pace::apps::SetFlagDefault("clocks", "30");
  pace::cli::ParseCommandLine(info, &argc, &argv);
  pace::apps::ShowVerboseLogs();
  FLAGS_logtostderr = true;
  pace::apps::TuneHeap();
  google::InitGoogleLogging(argv[0]);
  pace::apps::InstallStopSignal({"pace_lda", "; rerun the same command with --resume", 10});
  if (argc > 1) {
    std::fprintf(stderr, "pace_lda: unexpected argument '%s'\n", argv[1]);
    return 1;
  }
  return pace::lda::Run();
}
