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
// documents of at least kMinChunkTokens tokens (see the sampling loop).
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
                                return WorkerLoop(i, w, failed, &sh);
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

Status LdaTrainer::WorkerLoop(int w, Worker* worker, const std::atomic<bool>& failed, Shared* sh) {
  const Table& wt = tables_[0];
  const Table& tt = tables_[1];
  const Table& st = tables_[2];
  const apps::RunOptions& run = options_.run;
  const LdaParams& p = params_;
  const size_t k_count = static_cast<size_t>(p.topics);
  if (worker->clock() != sh->start_clock) {
    return Status::Internal("LDA worker starts at clock " + std::to_string(worker->clock()) +
                            ", the client's resume clock is " + std::to_string(sh->start_clock));
  }
  const uint32_t num_parts = client_->num_clients() * static_cast<uint32_t>(run.workers);
  const uint32_t part_id = client_->client_id() * static_cast<uint32_t>(run.workers) + w;
  const apps::Range part = apps::PartOf(order_.size(), part_id, num_parts);
  std::vector<int32_t> nk(k_count), nk_base(k_count), nk_delta(k_count);

  const bool reporter = client_->client_id() == 0 && w == 0;
  // Every worker reads the completed stats rows, so that the reporting
  // worker does not fall behind the others (see pace_mf's trainer).
  // Seconds since the start at the end of clock first_clock + i.
  const ClockT first_clock = sh->start_clock;
  std::vector<double> clock_end_seconds;
  apps::StatsRowReader reader(st, run, first_clock, sh->end_clock, reporter ? client_ : nullptr);
  auto emit = [&](ClockT c, const std::vector<double>& row) -> Status {
    const double* app = row.data() + MeasureCols::kCount;
    LdaReport rep;
    rep.clock = c;
    size_t i = static_cast<size_t>(c - first_clock);
    rep.seconds = i < clock_end_seconds.size() ? clock_end_seconds[i] : 0;
    rep.tokens = static_cast<uint64_t>(app[LdaStatsCols::kTokens]);
    if (rep.tokens > 0 && i > 0 && i < clock_end_seconds.size()) {
      double dt = clock_end_seconds[i] - clock_end_seconds[i - 1];
      if (dt > 0) rep.tokens_per_s = rep.tokens / dt;
    }
    if (app[LdaStatsCols::kEvalParts] >= num_parts) {
      rep.loglik = app[LdaStatsCols::kLogLikDoc] + app[LdaStatsCols::kLogLikWord];
    }
    apps::StalenessSummary ss = apps::SummarizeStaleness(row.data());
    rep.staleness_mean = ss.mean;
    rep.staleness_p99 = ss.p99;
    rep.blocked_pct = apps::BlockedPercent(row.data());
    if (c == sh->end_clock - 1) sh->final_loglik = rep.loglik;
    if (sh->on_report) sh->on_report(rep);
    return Status::OK();
  };

  LocalDocs docs;
  // The clock's tokens by word, and the pass over them (word_sweep.h).
  WordTokenIndex index;
  size_t index_start = SIZE_MAX, index_count = 0;  // of the documents in `index`
  auto index_docs = [&](size_t start, size_t count) -> Status {
    if (start == index_start && count == index_count) return Status::OK();
    index_start = start;
    index_count = count;
    return index.Build(*corpus_, docs, start, count, p.vocab);
  };
  WordSweep sweep(p, wt);
  const std::string& state_dir = options_.state_dir;
  const ClientId client_id = client_->client_id();
  ClockT oldest_kept = sh->start_clock;  // of this worker's assignment files
  std::vector<double> cols(MeasureCols::kCount + LdaStatsCols::kCount);
  double* app = cols.data() + MeasureCols::kCount;
  int64_t interval_start = apps::NowNs();
  auto end_clock = [&](double tokens, std::optional<double> ll_doc, double ll_word) -> Status {
    std::fill(cols.begin(), cols.end(), 0.0);
    cols[MeasureCols::kWallSeconds] = apps::SecondsSince(interval_start);
    interval_start = apps::NowNs();
    sh->measure->EndClock(worker->clock(), cols.data());
    app[LdaStatsCols::kTokens] = tokens;
    if (ll_doc) {
      app[LdaStatsCols::kLogLikDoc] = *ll_doc;
      app[LdaStatsCols::kLogLikWord] = ll_word;
      app[LdaStatsCols::kEvalParts] = 1;
    }
    const ClockT c = worker->clock();
    RETURN_IF_ERROR(worker->Inc(st, static_cast<uint64_t>(c), cols.data()));
    if (!state_dir.empty()) {
      // Before Clock(): the files of clock c + 1 exist before the batch of
      // clock c can reach a shard.
      AssignmentsHeader h;
      h.part = part_id;
      h.num_parts = num_parts;
      h.topics = static_cast<uint32_t>(k_count);
      h.clock = c + 1;
      h.tokens = docs.z.size();
      RETURN_IF_ERROR(WriteAssignments(state_dir, client_id, h, docs.z, options_.sync_state)
                          .WithPrefix("writing the token assignments"));
    }
    RETURN_IF_ERROR(worker->Clock());
    sh->done[w].store(c + 1);
    if (!state_dir.empty()) {
      // Once every worker of the process ended clock p - 1, its batch is
      // sent; after Flush it is acknowledged, so the shards' applied clock
      // for this client is >= p and older files are never needed again.
      ClockT p = c + 1;
      for (int i = 0; i < sh->workers; ++i) p = std::min(p, sh->done[i].load());
      if (p > oldest_kept) {
        RETURN_IF_ERROR(client_->Flush());
        RemoveAssignmentsBelow(state_dir, client_id, part_id, p);
        oldest_kept = p;
      }
    }
    if (reporter) {
      clock_end_seconds.push_back(apps::SecondsSince(sh->start_ns));
      RETURN_IF_ERROR(reader.Poll(worker, emit));
    } else {
      RETURN_IF_ERROR(
          reader.Poll(worker, [](ClockT, const std::vector<double>&) { return Status::OK(); }));
    }
    return Status::OK();
  };

  const std::vector<uint32_t> my_docs(order_.begin() + part.begin, order_.begin() + part.end);
  const bool replay = sh->start_clock > 0 && !replay_z_.empty();
  if (sh->start_clock > 0) {
    // Resume: the assignments at the start of the resumed clock.
    InitLocalDocs(*corpus_, my_docs, p, run.seed, &docs, [](uint32_t, int) {});
    if (resume_z_[w].size() != docs.z.size()) {
      return Status::Internal("LDA resume: the assignments do not fit the documents");
    }
    docs.z = resume_z_[w];
    std::fill(docs.ndk.begin(), docs.ndk.end(), 0);
    for (size_t i = 0; i < docs.ids.size(); ++i) {
      for (size_t t = docs.offset[i]; t < docs.offset[i + 1]; ++t) {
        ++docs.ndk[i * k_count + static_cast<size_t>(docs.z[t])];
      }
    }
  } else {
    // Clock 0: random assignments; their counts are added without reading,
    // word by word.
    std::fill(nk_delta.begin(), nk_delta.end(), 0);
    InitLocalDocs(*corpus_, my_docs, p, run.seed, &docs, [&](uint32_t, int k) { ++nk_delta[k]; });
    RETURN_IF_ERROR(index_docs(0, docs.ids.size()));
    WordSweep::Pass init;
    init.mode = WordSweep::Mode::kInit;
    RETURN_IF_ERROR(sweep.Run(worker, index, &docs, init));
    RETURN_IF_ERROR(worker->Inc(tt, 0, nk_delta.data()));
    RETURN_IF_ERROR(end_clock(0, std::nullopt, 0));
    // Sampling starts from the complete initial counts.
    RETURN_IF_ERROR(worker->GlobalBarrier());
    if (reporter) sh->sampling_start_ns = apps::NowNs();
  }

  for (ClockT c = worker->clock(); c < sh->end_clock; c = worker->clock()) {
    if (failed.load()) return Status::Aborted("another worker failed");
    if (apps::StopBefore(c)) {
      sh->stopped = true;
      break;
    }
    apps::MaybeStraggle(run, client_->client_id(), w, c);
    const apps::Window win = apps::MinibatchWindow(docs.ids.size(), options_.minibatch, c - 1);
    RETURN_IF_ERROR(worker->Get(tt, 0, nk.data()));
    nk_base = nk;
    apps::Rng rng(apps::DeriveSeed(run.seed, 0x5A3B, part_id, static_cast<uint64_t>(c)));
    const bool eval = c % run.eval_every == 0 || c + 1 == sh->end_clock;
    double ll_word = 0;
    WordSweep::Pass pass;
    pass.nk = nk.data();
    pass.rng = &rng;
    pass.ll_word = eval ? &ll_word : nullptr;
    pass.part = part_id;
    pass.num_parts = num_parts;
    if (replay && c == sh->start_clock) {
      // Replays clock c as it was sampled before the crash (see replay_z_):
      // its deltas are exactly the change of the assignments.
      pass.mode = WordSweep::Mode::kReplay;
      pass.next = &replay_z_[w];
      RETURN_IF_ERROR(index_docs(0, docs.ids.size()));
      RETURN_IF_ERROR(sweep.Run(worker, index, &docs, pass));
    } else {
      // When the clock's rows fit one block, its documents are swept in a
      // few chunks: each reads its rows just before it samples against them
      // and adds its change right after, so a chunk sees the other workers'
      // changes of the previous clock that arrived since the clock began
      // (one read at the start saw none of them; on a small corpus that
      // staler sampler ended in a poorer mode 8 times in 20). A larger
      // table is read block by block through the clock anyway.
      size_t chunks = 1;
      if (p.vocab <= sweep.block_rows()) {
        uint64_t window_tokens = 0;
        for (size_t j = 0; j < win.count; ++j) {
          window_tokens += corpus_->docs[docs.ids[(win.start + j) % docs.ids.size()]].size();
        }
        if (window_tokens <= WordSweep::kBlockTokens) {
          chunks = std::clamp<size_t>(window_tokens / kMinChunkTokens, 1, kMaxChunks);
          chunks = std::min(chunks, std::max<size_t>(win.count, 1));
        }
      }
      WordSweep::Pass chunk = pass;
      chunk.ll_word = nullptr;
      for (size_t j = 0; j < chunks; ++j) {
        const size_t begin = win.count * j / chunks, end = win.count * (j + 1) / chunks;
        RETURN_IF_ERROR(index_docs(win.start + begin, end - begin));
        // The evaluation, after the last chunk's changes.
        if (j + 1 == chunks) chunk.ll_word = pass.ll_word;
        RETURN_IF_ERROR(sweep.Run(worker, index, &docs, chunk));
      }
    }
    uint64_t tokens = 0;
    for (size_t j = 0; j < win.count; ++j) {
      tokens += corpus_->docs[docs.ids[(win.start + j) % docs.ids.size()]].size();
    }
    bool totals_changed = false;
    for (size_t k = 0; k < k_count; ++k) {
      nk_delta[k] = nk[k] - nk_base[k];
      totals_changed |= nk_delta[k] != 0;
    }
    if (totals_changed) RETURN_IF_ERROR(worker->Inc(tt, 0, nk_delta.data()));

    std::optional<double> ll_doc;
    if (eval) {
      ll_doc = LocalDocsLogLik(*corpus_, docs, p);
      if (part_id == 0) ll_word += TotalsLogLik(nk.data(), p);
    }
    sh->tokens += tokens;
    RETURN_IF_ERROR(end_clock(static_cast<double>(tokens), ll_doc, ll_word));
  }
  if (!reporter) return Status::OK();
  if (sh->stopped.load()) {
    // Report every clock before the stop clock (see pace_mf's trainer).
    if (client_->num_clients() > 1) return Status::OK();
    return reader.Finish(worker, std::min(apps::StopClock(), sh->end_clock), emit);
  }
  RETURN_IF_ERROR(reader.Finish(worker, sh->end_clock, emit));
  if (options_.collect_model) {
    RETURN_IF_ERROR(ReadWordTopic(worker, sh->end_clock, &sh->word_topic, &sh->stale_rows));
  }
  return Status::OK();
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
