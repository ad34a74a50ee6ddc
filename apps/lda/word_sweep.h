// One worker's clock of collapsed Gibbs sampling visited word by word
// (word-major), so that a word-topic table larger than memory is read once
// per clock in key order and each row is held only while its tokens are
// sampled.
//
// A document-major sweep touches the rows of its words in corpus order:
// each document needs ~its length of random rows, so a worker either keeps a
// copy of every row it touched in the clock (the whole table, twice: as read
// and as updated) or reads rows again and again. Here the tokens of the
// clock's documents are first grouped by word (WordTokenIndex: 4 bytes a
// token), then the words are visited in ascending order in blocks of about
// kBlockBytes of rows: each block is read with one GetRows (the next block
// prefetched while this one is sampled), its tokens are resampled against
// it, and its change is added with one Inc. The worker holds two blocks
// (values and deltas), whatever the table's size; the client's open deltas
// grow by one block at a time, so they leave in parts of the clock's batch
// as they fill (ClientOptions::open_delta_mb).
//
// Within a block, the tokens are resampled in the clock's document order
// (a block also ends at kBlockTokens tokens, so this order costs at most
// 8 bytes a token of a block): with a vocabulary that fits one block, the
// sweep visits tokens exactly as a document-by-document sweep does.
// Collapsed Gibbs sampling is exact in any visiting order: every token is
// resampled once per clock from the counts with its own assignment removed,
// and the deltas added are exactly the change of the assignments (so the
// table's counts equal the assignments' counts once every clock is applied).
// The order still matters for how fast the sampler mixes: visiting every
// token of a word before the next word's (sorting the whole clock by word)
// left a small corpus (200 words, 5 topics) in a mode 12% below the usual
// one in ~10% of the runs.
//
// Thread-compatible: one WordSweep per worker.
#ifndef PACE_APPS_LDA_WORD_SWEEP_H_
#define PACE_APPS_LDA_WORD_SWEEP_H_

#include <cstdint>
#include <vector>

#include "apps/lda/corpus_data.h"
#include "apps/lda/lda_model.h"
#include "apps/shared/random.h"
#include "client/pace.h"
#include "common/status.h"

namespace pace {
namespace lda {

// The tokens of a range of a worker's documents grouped by word: word w's
// tokens are pos[begin[w] .. begin[w + 1]), each an index into LocalDocs::z.
struct WordTokenIndex {
  std::vector<uint32_t> begin;  // vocab + 1
  std::vector<uint32_t> pos;
  uint32_t start_token = 0;  // the window's first token
  uint32_t num_tokens = 0;   // LocalDocs::z.size()

  // Groups the tokens of local documents start, start + 1, ..., start +
  // count - 1 (cyclic over docs.ids). InvalidArgument if the worker holds
  // 2^32 tokens or more.
  Status Build(const Corpus& corpus, const LocalDocs& docs, size_t start, size_t count,
               uint32_t vocab);
  uint32_t Count(uint32_t word) const { return begin[word + 1] - begin[word]; }
  // Token t's place in the window's document order, and back.
  uint32_t OrderOf(uint32_t t) const {
    return t >= start_token ? t - start_token : t + (num_tokens - start_token);
  }
  uint32_t TokenAt(uint32_t order) const {
    return order < num_tokens - start_token ? order + start_token
                                            : order - (num_tokens - start_token);
  }
  uint64_t bytes() const { return (begin.capacity() + pos.capacity()) * sizeof(uint32_t); }
};

// The local document of token `t` (an index into LocalDocs::z).
size_t DocOfToken(const LocalDocs& docs, uint32_t t);

class WordSweep {
 public:
  // Row bytes of one block (values; the deltas take as much again).
  static constexpr size_t kBlockBytes = size_t{1} << 20;
  // Tokens of one block (a word with more is a block alone).
  static constexpr uint32_t kBlockTokens = uint32_t{1} << 16;

  enum class Mode {
    // Clock 0: adds the counts of the current assignments (nothing read).
    kInit,
    // Moves every token to its topic in `next` (a resumed clock replayed
    // exactly): adds the change, reads rows only for the log-likelihood.
    kReplay,
    // Resamples every token against the rows as read and the worker's own
    // updates.
    kSample,
  };

  struct Pass {
    Mode mode = Mode::kSample;
    const std::vector<int32_t>* next = nullptr;  // kReplay: the assignments to move to
    apps::Rng* rng = nullptr;                    // kSample
    int32_t* nk = nullptr;  // kReplay, kSample: the worker's topic totals, updated
    // Adds sum of WordRowLogLik of the words w with w % num_parts == part
    // (after this worker's changes) to *ll_word; null: no evaluation.
    double* ll_word = nullptr;
    uint32_t part = 0;
    uint32_t num_parts = 1;
  };

  WordSweep(const LdaParams& params, const Table& word_topic);

  // Runs one pass over the tokens of `index` (built from `docs`): see Mode.
  // Errors: those of Worker::GetRows, Prefetch and Inc.
  Status Run(Worker* worker, const WordTokenIndex& index, LocalDocs* docs, const Pass& pass);

  // The rows of a block (at least 16).
  size_t block_rows() const { return block_rows_; }
  uint64_t bytes() const {
    return (rows_.capacity() + delta_.capacity()) * sizeof(int32_t) +
           order_.capacity() * sizeof(uint64_t);
  }

 private:
  // The next block of words from *cursor on that the pass needs.
  void NextBlock(const WordTokenIndex& index, const Pass& pass, uint32_t* cursor,
                 std::vector<uint64_t>* words) const;
  // The tokens of word `word`, its row values at `row` (if read) and its
  // delta at `delta` (kInit, kReplay).
  void VisitWord(const WordTokenIndex& index, LocalDocs* docs, const Pass& pass, uint32_t word,
                 int32_t* row, int32_t* delta);
  // kSample: resamples the tokens of the block's words in document order.
  void SampleBlock(const WordTokenIndex& index, LocalDocs* docs, const Pass& pass,
                   const std::vector<uint64_t>& words);
  // Inc of the rows of `words` whose delta is not zero.
  Status AddChanged(Worker* worker, const std::vector<uint64_t>& words);

  const LdaParams params_;
  const Table table_;
  const size_t width_;
  const size_t block_rows_;
  std::vector<int32_t> rows_;   // block_rows_ x width_: the block's rows as read, then updated
  std::vector<int32_t> delta_;  // block_rows_ x width_: their change in this pass
  std::vector<uint64_t> changed_;
  // A block's tokens: (place in document order << 32) | row in the block.
  std::vector<uint64_t> order_;
  std::vector<double> cdf_;
};

}  // namespace lda
}  // namespace pace

#endif  // PACE_APPS_LDA_WORD_SWEEP_H_
