#include "apps/lda/lda_trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>

#include "apps/lda/lda_state.h"
#include "apps/lda/word_sweep.h"
#include "apps/shared/partition.h"
#include "apps/shared/report.h"
#include "apps/shared/stop_signal.h"

namespace pace {
namespace lda {

using apps::MeasureCols;

namespace {

// A clock whose rows fit one block is swept in up to kMaxChunks chunks of
// documents of at least kMinChunkTokens tokens (see SweepWindow).
constexpr uint64_t kMinChunkTokens = 1024;
constexpr size_t kMaxChunks = 8;

}  // namespace

Status ValidateLdaOptions(const LdaTrainOptions& o) {
  RETURN_IF_ERROR(apps::ValidateRunOptions(o.run));
  if (o.params.topics < 1 || o.params.topics > 100000) {
    return Status::InvalidArgument("--topics must be in [1, 100000]");
  }
  if (!(o.params.alpha > 0) || !std::isfinite(o.params.alpha)) {
    return Status::InvalidArgument("--alpha must be > 0");
  }
  if (!(o.params.beta > 0) || !std::isfinite(o.params.beta)) {
    return Status::InvalidArgument("--beta must be > 0");
  }
  if (!(o.minibatch > 0 && o.minibatch <= 1)) {
    return Status::InvalidArgument("--minibatch must be in (0, 1]");
  }
  if (o.table_prefix.empty()) return Status::InvalidArgument("--table_prefix must not be empty");
  return Status::OK();
}

uint64_t LdaAppDataBytes(const Corpus& corpus, const LdaTrainOptions& o, uint32_t num_clients,
                         bool include_corpus) {
  const uint64_t topics = static_cast<uint64_t>(std::max(1, o.params.topics));
  const uint64_t clients = std::max<uint32_t>(1, num_clients);
  const uint64_t workers = static_cast<uint64_t>(std::max(1, o.run.workers));
  // Tokens: the corpus (every process), and per local token its assignment
  // and its entry of the word index; per document: its vector and order
  // entry, and locally its offset and doc-topic counts.
  const uint64_t tokens = corpus.num_tokens, docs = corpus.docs.size();
  uint64_t bytes = include_corpus ? tokens * sizeof(uint32_t) + docs * 3 * sizeof(void*) : 0;
  bytes += docs * sizeof(uint32_t);
  bytes +=
      (tokens * 2 * sizeof(int32_t) + docs * (sizeof(size_t) + topics * sizeof(int32_t))) / clients;
  // Per worker: the word index's offsets and two blocks of rows.
  bytes += workers * (uint64_t{corpus.vocab_size} * sizeof(uint32_t) + 2 * WordSweep::kBlockBytes);
  return bytes;
}

struct LdaTrainer::Shared {
  int64_t start_ns = 0;
  int64_t sampling_start_ns = 0;  // set by the reporting worker after clock 0
  ClockT start_clock = 0;
  ClockT end_clock = 0;
  // done[w] = clocks worker w has ended (its Clock() returned).
  std::unique_ptr<std::atomic<ClockT>[]> done;
  int workers = 0;
  std::atomic<bool> stopped{false};
  std::function<void(const LdaReport&)> on_report;
  std::unique_ptr<apps::ProcessMeasure> measure;
  std::atomic<uint64_t> tokens{0};
  // Written by the reporting worker only.
  std::optional<double> final_loglik;
  std::vector<int32_t> word_topic;
  uint64_t stale_rows = 0;
};

// One worker's clocks, in named stages:
//   Start        clock 0 (random assignments, their counts added word by
//                word, then a global barrier) or, on resume, the documents'
//                counts from the assignments of the resumed clock;
//   SampleClock  the clock's minibatch of documents, word by word
//                (word_sweep.h), and the change of the topic totals;
//   EndClock     the stats row, the assignment files around Clock(), and
//                the reporter's rows (Report);
//   Finish       the reporter's last rows and the collected model.
class LdaTrainer::WorkerRun {
 public:
  WorkerRun(LdaTrainer* trainer, int index, Worker* worker, const std::atomic<bool>& failed,
            Shared* shared);

  Status Run();

 private:
  Status Start();
  Status SampleClock(ClockT c, bool replay);
  // The tokens of the documents of `win`.
  uint64_t WindowTokens(const apps::Window& win) const;
  // The documents of `win` (`tokens` tokens) through `pass`, in one sweep or
  // a few chunks.
  Status SweepWindow(const apps::Window& win, uint64_t tokens, const WordSweep::Pass& pass);
  Status EndClock(double tokens, std::optional<double> ll_doc, double ll_word);
  // The assignment files: written before Clock(), the ones no shard can need
  // again removed after it.
  Status WriteAssignmentsOf(ClockT c);
  Status RemoveOldAssignments(ClockT c);
  // The tokens of documents [start, start + count) of this worker by word,
  // unless `index_` holds them already.
  Status IndexDocs(size_t start, size_t count);
  Status Report(ClockT c, const std::vector<double>& row);
  Status Finish();

  LdaTrainer& t_;
  const int w_;
  Worker* const worker_;
  const std::atomic<bool>& failed_;
  Shared* const sh_;
  const Table& wt_;  // word_topic
  const Table& tt_;  // topic_totals
  const Table& st_;  // stats
  const apps::RunOptions& run_;
  const LdaParams& p_;
  const size_t k_count_;
  const uint32_t num_parts_;
  const uint32_t part_id_;
  const bool reporter_;

  std::vector<int32_t> nk_, nk_base_, nk_delta_;  // topic totals: read, at the read, change
  LocalDocs docs_;
  WordTokenIndex index_;
  size_t index_start_ = SIZE_MAX, index_count_ = 0;  // of the documents in `index_`
  WordSweep sweep_;
  ClockT oldest_kept_;  // of this worker's assignment files

  // Stats and reports. Every worker reads the completed stats rows, so that
  // the reporting worker does not fall behind the others (see pace_mf's
  // trainer).
  std::vector<double> cols_;
  int64_t interval_start_;
  std::vector<double> clock_end_seconds_;  // since the start, by clock - start_clock
  apps::StatsRowReader reader_;
};

LdaTrainer::LdaTrainer(Client* client, const Corpus* corpus, LdaTrainOptions options)
    : client_(client), corpus_(corpus), options_(std::move(options)), params_(options_.params) {
  params_.vocab = corpus_->vocab_size;
}

Status LdaTrainer::Setup() {
  RETURN_IF_ERROR(ValidateLdaOptions(options_));
  if (corpus_->vocab_size == 0) return Status::InvalidArgument("the corpus has no words");
  TableSchema counts;
  counts.kind = RowKind::kDense;
  counts.type = ElementType::kI32;
  counts.width = static_cast<uint32_t>(params_.topics);
  apps::ApplyConsistency(options_.run, &counts);
  TableSchema word_topic = counts, totals = counts;
  word_topic.name = options_.table_prefix + ".word_topic";
  totals.name = options_.table_prefix + ".topic_totals";
  TableSchema stats =
      apps::StatsTableSchema(options_.table_prefix + ".stats", LdaStatsCols::kCount, options_.run);
  RETURN_IF_ERROR(
      apps::OpenJobTables(client_, options_.run, {word_topic, totals, stats}, &tables_));
  start_clock_ = client_->start_clock();
  order_ = apps::ShuffledOrder(corpus_->docs.size(), options_.run.seed);
  resume_z_.clear();
  replay_z_.clear();
  if (start_clock_ > 0 && options_.state_dir.empty()) {
    return Status::FailedPrecondition(
        "the store holds an LDA job at clock " + std::to_string(start_clock_) +
        " and no directory of token assignments was given, so it cannot resume");
  }
  if (options_.state_dir.empty()) return Status::OK();
  if (start_clock_ > 0) {
    if (start_clock_ <= options_.run.clocks) RETURN_IF_ERROR(LoadResumeState());
    return Status::OK();
  }
  RETURN_IF_ERROR(MakeAssignmentsDir(options_.state_dir));
  // A fresh job: files of an earlier job of this client are stale.
  for (int w = 0; w < options_.run.workers; ++w) {
    const uint32_t part_id = client_->client_id() * static_cast<uint32_t>(options_.run.workers) + w;
    RemoveAssignmentsBelow(options_.state_dir, client_->client_id(), part_id, INT64_MAX);
  }
  return Status::OK();
}

uint64_t LdaTrainer::PartTokens(uint32_t part_id) const {
  const uint32_t num_parts = client_->num_clients() * static_cast<uint32_t>(options_.run.workers);
  const apps::Range part = apps::PartOf(order_.size(), part_id, num_parts);
  uint64_t tokens = 0;
  for (size_t i = part.begin; i < part.end; ++i) tokens += corpus_->docs[order_[i]].size();
  return tokens;
}

Status LdaTrainer::LoadResumeState() {
  const int workers = options_.run.workers;
  const uint32_t client = client_->client_id();
  const uint32_t num_parts = client_->num_clients() * static_cast<uint32_t>(workers);
  const std::string& dir = options_.state_dir;
  resume_z_.assign(workers, {});
  replay_z_.assign(workers, {});
  bool replay = true;
  for (int w = 0; w < workers; ++w) {
    AssignmentsHeader h;
    h.part = client * static_cast<uint32_t>(workers) + w;
    h.num_parts = num_parts;
    h.topics = static_cast<uint32_t>(params_.topics);
    h.clock = start_clock_;
    h.tokens = PartTokens(h.part);
    Status s = ReadAssignments(dir, client, h, &resume_z_[w]);
    if (s.code() == StatusCode::kNotFound) {
      std::string found;
      for (ClockT c : ListAssignments(dir, client, h.part)) {
        found += (found.empty() ? "" : ", ") + std::to_string(c);
      }
      return Status::FailedPrecondition(
          "the shards hold this client's clocks up to " + std::to_string(start_clock_) + ", but " +
          dir + " has no token assignments of worker " + std::to_string(w) + " for clock " +
          std::to_string(start_clock_) +
          (found.empty() ? " (it has none)" : " (it has clocks " + found + ")") +
          ", so the job cannot resume exactly (same --data_dir and --workers as the job?); "
          "start fresh with another --data_dir");
    }
    RETURN_IF_ERROR(s.WithPrefix("--resume: token assignments"));
    if (replay) {
      h.clock = start_clock_ + 1;
      replay = ReadAssignments(dir, client, h, &replay_z_[w]).ok();
    }
  }
  if (!replay || start_clock_ >= options_.run.clocks + 1) replay_z_.clear();
  return Status::OK();
}

Status LdaTrainer::Train(const std::function<void(const LdaReport&)>& on_report,
                         LdaTrainSummary* summary) {
  if (tables_.empty()) return Status::FailedPrecondition("LdaTrainer::Setup was not called");
  *summary = LdaTrainSummary();
  Shared sh;
  sh.start_clock = start_clock_;
  sh.end_clock = options_.run.clocks + 1;
  summary->start_clock = start_clock_;
  if (start_clock_ >= sh.end_clock) return Status::OK();
  sh.workers = options_.run.workers;
  sh.done.reset(new std::atomic<ClockT>[sh.workers]);
  for (int i = 0; i < sh.workers; ++i) sh.done[i].store(start_clock_);
  sh.on_report = on_report;
  sh.measure = std::make_unique<apps::ProcessMeasure>(
      client_, std::vector<std::string>{tables_[0].name(), tables_[1].name()},
      options_.run.workers);
  sh.start_ns = apps::NowNs();
  sh.sampling_start_ns = sh.start_ns;
  Status s = apps::RunWorkers(client_, options_.run.workers,
                              [&](int i, Worker* w, const std::atomic<bool>& failed) {
                                return WorkerRun(this, i, w, failed, &sh).Run();
                              });
  RETURN_IF_ERROR(s);
  RETURN_IF_ERROR(client_->Flush());
  summary->seconds = apps::SecondsSince(sh.sampling_start_ns);
  summary->tokens = sh.tokens.load();
  if (summary->seconds > 0) summary->tokens_per_second = summary->tokens / summary->seconds;
  summary->final_loglik = sh.final_loglik;
  summary->word_topic = std::move(sh.word_topic);
  summary->stale_rows = sh.stale_rows;
  summary->stopped = sh.stopped.load();
  return Status::OK();
}

LdaTrainer::WorkerRun::WorkerRun(LdaTrainer* trainer, int index, Worker* worker,
                                 const std::atomic<bool>& failed, Shared* shared)
    : t_(*trainer),
      w_(index),
      worker_(worker),
      failed_(failed),
      sh_(shared),
      wt_(t_.tables_[0]),
      tt_(t_.tables_[1]),
      st_(t_.tables_[2]),
      run_(t_.options_.run),
      p_(t_.params_),
      k_count_(static_cast<size_t>(p_.topics)),
      num_parts_(t_.client_->num_clients() * static_cast<uint32_t>(run_.workers)),
      part_id_(t_.client_->client_id() * static_cast<uint32_t>(run_.workers) + index),
      reporter_(t_.client_->client_id() == 0 && index == 0),
      nk_(k_count_),
      nk_base_(k_count_),
      nk_delta_(k_count_),
      sweep_(p_, wt_),
      oldest_kept_(sh_->start_clock),
      cols_(MeasureCols::kCount + LdaStatsCols::kCount),
      interval_start_(apps::NowNs()),
      reader_(st_, run_, sh_->start_clock, sh_->end_clock, reporter_ ? t_.client_ : nullptr) {}

Status LdaTrainer::WorkerRun::Run() {
  if (worker_->clock() != sh_->start_clock) {
    return Status::Internal("LDA worker starts at clock " + std::to_string(worker_->clock()) +
                            ", the client's resume clock is " + std::to_string(sh_->start_clock));
  }
  const bool replay = sh_->start_clock > 0 && !t_.replay_z_.empty();
  RETURN_IF_ERROR(Start());
  for (ClockT c = worker_->clock(); c < sh_->end_clock; c = worker_->clock()) {
    if (failed_.load()) return Status::Aborted("another worker failed");
    if (apps::StopBefore(c)) {
      sh_->stopped = true;
      break;
    }
    apps::MaybeStraggle(run_, t_.client_->client_id(), w_, c);
    RETURN_IF_ERROR(SampleClock(c, replay && c == sh_->start_clock));
  }
  return Finish();
}

Status LdaTrainer::WorkerRun::Start() {
  const apps::Range part = apps::PartOf(t_.order_.size(), part_id_, num_parts_);
  const std::vector<uint32_t> my_docs(t_.order_.begin() + part.begin, t_.order_.begin() + part.end);
  if (sh_->start_clock > 0) {
    // Resume: the assignments at the start of the resumed clock.
    InitLocalDocs(*t_.corpus_, my_docs, p_, run_.seed, &docs_, [](uint32_t, int) {});
    if (t_.resume_z_[w_].size() != docs_.z.size()) {
      return Status::Internal("LDA resume: the assignments do not fit the documents");
    }
    docs_.z = t_.resume_z_[w_];
    std::fill(docs_.ndk.begin(), docs_.ndk.end(), 0);
    for (size_t i = 0; i < docs_.ids.size(); ++i) {
      for (size_t t = docs_.offset[i]; t < docs_.offset[i + 1]; ++t) {
        ++docs_.ndk[i * k_count_ + static_cast<size_t>(docs_.z[t])];
      }
    }
    return Status::OK();
  }
  // Clock 0: random assignments; their counts are added without reading,
  // word by word.
  std::fill(nk_delta_.begin(), nk_delta_.end(), 0);
  InitLocalDocs(*t_.corpus_, my_docs, p_, run_.seed, &docs_,
                [&](uint32_t, int k) { ++nk_delta_[k]; });
  RETURN_IF_ERROR(IndexDocs(0, docs_.ids.size()));
  WordSweep::Pass init;
  init.mode = WordSweep::Mode::kInit;
  RETURN_IF_ERROR(sweep_.Run(worker_, index_, &docs_, init));
  RETURN_IF_ERROR(worker_->Inc(tt_, 0, nk_delta_.data()));
  RETURN_IF_ERROR(EndClock(0, std::nullopt, 0));
  // Sampling starts from the complete initial counts.
  RETURN_IF_ERROR(worker_->GlobalBarrier());
  if (reporter_) sh_->sampling_start_ns = apps::NowNs();
  return Status::OK();
}

Status LdaTrainer::WorkerRun::SampleClock(ClockT c, bool replay) {
  const apps::Window win = apps::MinibatchWindow(docs_.ids.size(), t_.options_.minibatch, c - 1);
  RETURN_IF_ERROR(worker_->Get(tt_, 0, nk_.data()));
  nk_base_ = nk_;
  apps::Rng rng(apps::DeriveSeed(run_.seed, 0x5A3B, part_id_, static_cast<uint64_t>(c)));
  const bool eval = c % run_.eval_every == 0 || c + 1 == sh_->end_clock;
  double ll_word = 0;
  WordSweep::Pass pass;
  pass.nk = nk_.data();
  pass.rng = &rng;
  pass.ll_word = eval ? &ll_word : nullptr;
  pass.part = part_id_;
  pass.num_parts = num_parts_;
  const uint64_t tokens = WindowTokens(win);
  if (replay) {
    // Replays clock c as it was sampled before the crash (see replay_z_):
    // its deltas are exactly the change of the assignments.
    pass.mode = WordSweep::Mode::kReplay;
    pass.next = &t_.replay_z_[w_];
    RETURN_IF_ERROR(IndexDocs(0, docs_.ids.size()));
    RETURN_IF_ERROR(sweep_.Run(worker_, index_, &docs_, pass));
  } else {
    RETURN_IF_ERROR(SweepWindow(win, tokens, pass));
  }
  bool totals_changed = false;
  for (size_t k = 0; k < k_count_; ++k) {
    nk_delta_[k] = nk_[k] - nk_base_[k];
    totals_changed |= nk_delta_[k] != 0;
  }
  if (totals_changed) RETURN_IF_ERROR(worker_->Inc(tt_, 0, nk_delta_.data()));

  std::optional<double> ll_doc;
  if (eval) {
    ll_doc = LocalDocsLogLik(*t_.corpus_, docs_, p_);
    if (part_id_ == 0) ll_word += TotalsLogLik(nk_.data(), p_);
  }
  sh_->tokens += tokens;
  return EndClock(static_cast<double>(tokens), ll_doc, ll_word);
}

uint64_t LdaTrainer::WorkerRun::WindowTokens(const apps::Window& win) const {
  uint64_t tokens = 0;
  for (size_t j = 0; j < win.count; ++j) {
    tokens += t_.corpus_->docs[docs_.ids[(win.start + j) % docs_.ids.size()]].size();
  }
  return tokens;
}

Status LdaTrainer::WorkerRun::SweepWindow(const apps::Window& win, uint64_t tokens,
                                          const WordSweep::Pass& pass) {
  // When the clock's rows fit one block, its documents are swept in a few
  // chunks: each reads its rows just before it samples against them and adds
  // its change right after, so a chunk sees the other workers' changes of the
  // previous clock that arrived since the clock began (one read at the start
  // saw none of them; on a small corpus that staler sampler ended in a poorer
  // mode 8 times in 20). A larger table is read block by block through the
  // clock anyway.
  size_t chunks = 1;
  if (p_.vocab <= sweep_.block_rows() && tokens <= WordSweep::kBlockTokens) {
    chunks = std::clamp<size_t>(tokens / kMinChunkTokens, 1, kMaxChunks);
    chunks = std::min(chunks, std::max<size_t>(win.count, 1));
  }
  WordSweep::Pass chunk = pass;
  chunk.ll_word = nullptr;
  for (size_t j = 0; j < chunks; ++j) {
    const size_t begin = win.count * j / chunks, end = win.count * (j + 1) / chunks;
    RETURN_IF_ERROR(IndexDocs(win.start + begin, end - begin));
    // The evaluation, after the last chunk's changes.
    if (j + 1 == chunks) chunk.ll_word = pass.ll_word;
    RETURN_IF_ERROR(sweep_.Run(worker_, index_, &docs_, chunk));
  }
  return Status::OK();
}

Status LdaTrainer::WorkerRun::EndClock(double tokens, std::optional<double> ll_doc,
                                       double ll_word) {
  double* app = cols_.data() + MeasureCols::kCount;
  std::fill(cols_.begin(), cols_.end(), 0.0);
  cols_[MeasureCols::kWallSeconds] = apps::SecondsSince(interval_start_);
  interval_start_ = apps::NowNs();
  sh_->measure->EndClock(worker_->clock(), cols_.data());
  app[LdaStatsCols::kTokens] = tokens;
  if (ll_doc) {
    app[LdaStatsCols::kLogLikDoc] = *ll_doc;
    app[LdaStatsCols::kLogLikWord] = ll_word;
    app[LdaStatsCols::kEvalParts] = 1;
  }
  const ClockT c = worker_->clock();
  RETURN_IF_ERROR(worker_->Inc(st_, static_cast<uint64_t>(c), cols_.data()));
  RETURN_IF_ERROR(WriteAssignmentsOf(c));
  RETURN_IF_ERROR(worker_->Clock());
  sh_->done[w_].store(c + 1);
  RETURN_IF_ERROR(RemoveOldAssignments(c));
  if (reporter_) {
    clock_end_seconds_.push_back(apps::SecondsSince(sh_->start_ns));
    return reader_.Poll(
        worker_, [this](ClockT r, const std::vector<double>& row) { return Report(r, row); });
  }
  return reader_.Poll(worker_, [](ClockT, const std::vector<double>&) { return Status::OK(); });
}

Status LdaTrainer::WorkerRun::WriteAssignmentsOf(ClockT c) {
  if (t_.options_.state_dir.empty()) return Status::OK();
  // Before Clock(): the files of clock c + 1 exist before the batch of clock
  // c can reach a shard.
  AssignmentsHeader h;
  h.part = part_id_;
  h.num_parts = num_parts_;
  h.topics = static_cast<uint32_t>(k_count_);
  h.clock = c + 1;
  h.tokens = docs_.z.size();
  return WriteAssignments(t_.options_.state_dir, t_.client_->client_id(), h, docs_.z,
                          t_.options_.sync_state)
      .WithPrefix("writing the token assignments");
}

Status LdaTrainer::WorkerRun::RemoveOldAssignments(ClockT c) {
  if (t_.options_.state_dir.empty()) return Status::OK();
  // Once every worker of the process ended clock p - 1, its batch is sent;
  // after Flush it is acknowledged, so the shards' applied clock for this
  // client is >= p and older files are never needed again.
  ClockT p = c + 1;
  for (int i = 0; i < sh_->workers; ++i) p = std::min(p, sh_->done[i].load());
  if (p <= oldest_kept_) return Status::OK();
  RETURN_IF_ERROR(t_.client_->Flush());
  RemoveAssignmentsBelow(t_.options_.state_dir, t_.client_->client_id(), part_id_, p);
  oldest_kept_ = p;
  return Status::OK();
}

Status LdaTrainer::WorkerRun::IndexDocs(size_t start, size_t count) {
  if (start == index_start_ && count == index_count_) return Status::OK();
  index_start_ = start;
  index_count_ = count;
  return index_.Build(*t_.corpus_, docs_, start, count, p_.vocab);
}

Status LdaTrainer::WorkerRun::Report(ClockT c, const std::vector<double>& row) {
  const double* app = row.data() + MeasureCols::kCount;
  LdaReport rep;
  rep.clock = c;
  const size_t i = static_cast<size_t>(c - sh_->start_clock);
  rep.seconds = i < clock_end_seconds_.size() ? clock_end_seconds_[i] : 0;
  rep.tokens = static_cast<uint64_t>(app[LdaStatsCols::kTokens]);
  if (rep.tokens > 0 && i > 0 && i < clock_end_seconds_.size()) {
    double dt = clock_end_seconds_[i] - clock_end_seconds_[i - 1];
    if (dt > 0) rep.tokens_per_s = rep.tokens / dt;
  }
  if (app[LdaStatsCols::kEvalParts] >= num_parts_) {
    rep.loglik = app[LdaStatsCols::kLogLikDoc] + app[LdaStatsCols::kLogLikWord];
  }
  apps::StalenessSummary ss = apps::SummarizeStaleness(row.data());
  rep.staleness_mean = ss.mean;
  rep.staleness_p99 = ss.p99;
  rep.blocked_pct = apps::BlockedPercent(row.data());
  if (c == sh_->end_clock - 1) sh_->final_loglik = rep.loglik;
  if (sh_->on_report) sh_->on_report(rep);
  return Status::OK();
}

Status LdaTrainer::WorkerRun::Finish() {
  if (!reporter_) return Status::OK();
  const bool stopped = sh_->stopped.load();
  RETURN_IF_ERROR(reader_.FinishRun(
      worker_, sh_->end_clock, stopped, t_.client_->num_clients(),
      [this](ClockT c, const std::vector<double>& row) { return Report(c, row); }));
  if (stopped || !t_.options_.collect_model) return Status::OK();
  return t_.ReadWordTopic(worker_, sh_->end_clock, &sh_->word_topic, &sh_->stale_rows);
}

Status LdaTrainer::ReadWordTopic(Worker* worker, ClockT fresh_as_of, std::vector<int32_t>* nwk,
                                 uint64_t* stale_rows) {
  if (tables_.empty()) return Status::FailedPrecondition("LdaTrainer::Setup was not called");
  const size_t k_count = static_cast<size_t>(params_.topics);
  nwk->assign(static_cast<size_t>(params_.vocab) * k_count, 0);
  *stale_rows = 0;
  for (uint32_t word = 0; word < params_.vocab; ++word) {
    Version version = 0;
    RETURN_IF_ERROR(worker->Read(tables_[0], word, [&](const RowView& v) {
      version = v.version;
      std::memcpy(&(*nwk)[word * k_count], v.bytes.data(),
                  std::min(v.bytes.size(), k_count * sizeof(int32_t)));
    }));
    if (version < fresh_as_of) ++*stale_rows;
  }
  return Status::OK();
}

}  // namespace lda
}  // namespace pace
