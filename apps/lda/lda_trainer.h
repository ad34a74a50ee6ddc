// pace_lda's training on PaceDB: collapsed Gibbs sampling with the word-topic
// counts and topic totals in PaceDB tables, documents (assignments and
// doc-topic counts) local to the workers, and per-clock log-likelihood and
// throughput aggregated through a stats table.
//
// Tables (prefix default "lda"):
//   <prefix>.word_topic    dense i32 rows of width K, row = word id (0-based)
//   <prefix>.topic_totals  dense i32, one row (0) of width K
//   <prefix>.stats         dense f64 rows, row = clock: MeasureCols, then
//                          tokens, loglik_doc, loglik_word, eval_parts
// Dense rows: K is small (tens to hundreds) and most words of a real corpus
// touch many topics early in sampling, so a dense row costs about what a
// sparse one would while letting the client hand out zero-copy views and the
// shard merge deltas with plain vector adds. Sparse rows would pay off for
// K in the thousands.
//
// Clock 0 is the initialization (random assignments, counts added, then a
// global barrier so every worker starts sampling from the complete counts);
// clocks 1..clocks each sweep a minibatch fraction of each worker's
// documents. A clock visits its tokens word by word, reading the word rows in
// key order in blocks and adding each block's change as it goes
// (word_sweep.h), so a worker holds two blocks of rows whatever the table's
// size. Assignments live in the workers; with state_dir set, each
// worker also writes them to local files at every clock boundary
// (lda_state.h), so that a job the store holds past clock 0 resumes exactly
// at the client's applied clock (Setup fails with FailedPrecondition, one
// line, if the files of that clock are missing or do not match).
//
// An LdaTrainer is used from one thread; it starts and joins its workers.
#ifndef PACE_APPS_LDA_LDA_TRAINER_H_
#define PACE_APPS_LDA_LDA_TRAINER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "apps/lda/corpus_data.h"
#include "apps/lda/lda_model.h"
#include "apps/shared/ps_runtime.h"
#include "client/pace.h"
#include "common/status.h"

namespace pace {
namespace lda {

struct LdaTrainOptions {
  // run.clocks counts the sampling clocks (the job ends at clock run.clocks + 1).
  apps::RunOptions run;
  // topics, alpha, beta (params.vocab is taken from the corpus).
  // Defaults: 20, 0.1, 0.01.
  LdaParams params;
  // Fraction of each worker's documents swept per clock. Default: 1.
  double minibatch = 1.0;
  std::string table_prefix = "lda";
  // Read the word-topic counts into the summary at the end. Default: false.
  bool collect_model = false;
  // Where the workers keep their token assignments (AssignmentsDir of
  // --data_dir). Empty: nowhere, and a stored job cannot be resumed.
  std::string state_dir;
  // fsync the assignment files (and their directory) at every clock.
  // Default: false.
  bool sync_state = false;
};

Status ValidateLdaOptions(const LdaTrainOptions& o);

// The bytes of a pace_lda process's own data besides PaceDB's: the corpus'
// tokens (with include_corpus), and for the documents of this process
// (num_clients processes share the corpus) their topic assignments,
// doc-topic counts, word index and the workers' blocks of rows
// (word_sweep.h).
uint64_t LdaAppDataBytes(const Corpus& corpus, const LdaTrainOptions& o, uint32_t num_clients,
                         bool include_corpus = true);

struct LdaReport {
  ClockT clock = 0;
  double seconds = 0;
  std::optional<double> loglik;
  std::optional<double> tokens_per_s;
  double staleness_mean = 0;
  int64_t staleness_p99 = 0;
  double blocked_pct = 0;
  uint64_t tokens = 0;
};

struct LdaTrainSummary {
  uint64_t tokens = 0;  // sampled by this process
  double seconds = 0;   // wall time of the sampling clocks in this process
  double tokens_per_second = 0;
  std::optional<double> final_loglik;
  // With collect_model, in client 0: V x K counts and the rows read from
  // cache at a version older than the last clock (see MfTrainer::ReadFactors).
  std::vector<int32_t> word_topic;
  uint64_t stale_rows = 0;
  ClockT start_clock = 0;  // the clock this run started at (> 0: resumed)
  bool stopped = false;    // SIGINT/SIGTERM: the workers stopped at apps::StopClock()
};

class LdaTrainer {
 public:
  // `client` and `corpus` must outlive the trainer.
  LdaTrainer(Client* client, const Corpus* corpus, LdaTrainOptions options);

  Status Setup();
  // Runs the job; in client 0 calls on_report for every clock, in order.
  Status Train(const std::function<void(const LdaReport&)>& on_report, LdaTrainSummary* summary);
  // Reads the word-topic counts (V x K) through `worker`.
  Status ReadWordTopic(Worker* worker, ClockT fresh_as_of, std::vector<int32_t>* nwk,
                       uint64_t* stale_rows);

  const LdaParams& params() const { return params_; }
  // After Setup on resume: whether the resumed clock is replayed from the
  // assignments the interrupted run wrote at its end (see replay_z_).
  bool replays_clock() const { return !replay_z_.empty(); }

 private:
  struct Shared;
  // One worker thread's clocks, in named stages (lda_trainer.cc).
  class WorkerRun;

  Client* const client_;
  const Corpus* const corpus_;
  const LdaTrainOptions options_;
  LdaParams params_;
  Status LoadResumeState();
  // Tokens of the documents of partition `part_id`.
  uint64_t PartTokens(uint32_t part_id) const;

  std::vector<uint32_t> order_;
  std::vector<Table> tables_;  // word_topic, topic_totals, stats
  ClockT start_clock_ = 0;
  // On resume at clock A > 0, per worker: the assignments at the start of
  // clock A, and (if every worker wrote them before the crash) those at the
  // end of clock A, which the workers then replay instead of resampling it:
  // a shard that applied clock A's batch drops the replay as a duplicate,
  // one that did not gets exactly the original deltas.
  std::vector<std::vector<int32_t>> resume_z_;
  std::vector<std::vector<int32_t>> replay_z_;
};

struct LdaStatsCols {
  static constexpr int kTokens = 0;
  static constexpr int kLogLikDoc = 1;
  static constexpr int kLogLikWord = 2;
  static constexpr int kEvalParts = 3;
  static constexpr int kCount = 4;
};

}  // namespace lda
}  // namespace pace

#endif  // PACE_APPS_LDA_LDA_TRAINER_H_
