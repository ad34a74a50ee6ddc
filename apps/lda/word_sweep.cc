#include "apps/lda/word_sweep.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace pace {
namespace lda {

Status WordTokenIndex::Build(const Corpus& corpus, const LocalDocs& docs, size_t start,
                             size_t count, uint32_t vocab) {
  if (docs.z.size() > std::numeric_limits<uint32_t>::max()) {
    return Status::InvalidArgument("a worker holds " + std::to_string(docs.z.size()) +
                                   " tokens, over 2^32: use more workers or processes");
  }
  const size_t n = docs.ids.size();
  count = n == 0 ? 0 : std::min(count, n);
  // Counting sort by word: counts, their prefix sums, then the positions.
  begin.assign(static_cast<size_t>(vocab) + 1, 0);
  size_t total = 0;
  for (size_t j = 0; j < count; ++j) {
    const std::vector<uint32_t>& doc = corpus.docs[docs.ids[(start + j) % n]];
    for (uint32_t w : doc) ++begin[w + 1];
    total += doc.size();
  }
  for (uint32_t w = 0; w < vocab; ++w) begin[w + 1] += begin[w];
  pos.resize(total);
  start_token = count == 0 ? 0 : static_cast<uint32_t>(docs.offset[start % n]);
  num_tokens = static_cast<uint32_t>(docs.z.size());
  std::vector<uint32_t> fill(begin.begin(), begin.end() - 1);
  for (size_t j = 0; j < count; ++j) {
    const size_t i = (start + j) % n;
    const std::vector<uint32_t>& doc = corpus.docs[docs.ids[i]];
    const uint32_t first = static_cast<uint32_t>(docs.offset[i]);
    for (size_t t = 0; t < doc.size(); ++t) pos[fill[doc[t]]++] = first + static_cast<uint32_t>(t);
  }
  return Status::OK();
}

size_t DocOfToken(const LocalDocs& docs, uint32_t t) {
  // offset[i] <= t < offset[i + 1]; empty documents share an offset.
  return static_cast<size_t>(std::upper_bound(docs.offset.begin(), docs.offset.end(), t) -
                             docs.offset.begin()) -
         1;
}

WordSweep::WordSweep(const LdaParams& params, const Table& word_topic)
    : params_(params),
      table_(word_topic),
      width_(static_cast<size_t>(params.topics)),
      block_rows_(std::max<size_t>(16, kBlockBytes / (width_ * sizeof(int32_t)))),
      rows_(block_rows_ * width_),
      delta_(block_rows_ * width_),
      cdf_(width_) {
  changed_.reserve(block_rows_);
}

void WordSweep::NextBlock(const WordTokenIndex& index, const Pass& pass, uint32_t* cursor,
                          std::vector<uint64_t>* words) const {
  words->clear();
  const uint32_t vocab = params_.vocab;
  uint64_t tokens = 0;
  for (uint32_t& w = *cursor; w < vocab && words->size() < block_rows_; ++w) {
    const bool evaluated = pass.ll_word != nullptr && w % pass.num_parts == pass.part;
    if (index.Count(w) == 0 && !evaluated) continue;
    tokens += index.Count(w);
    if (tokens > kBlockTokens && !words->empty()) break;
    words->push_back(w);
  }
}

void WordSweep::VisitWord(const WordTokenIndex& index, LocalDocs* docs, const Pass& pass,
                          uint32_t word, int32_t* row, int32_t* delta) {
  const uint32_t* pos = index.pos.data() + index.begin[word];
  const uint32_t n = index.Count(word);
  std::vector<int32_t>& z = docs->z;
  switch (pass.mode) {
    case Mode::kInit:
      for (uint32_t e = 0; e < n; ++e) ++delta[z[pos[e]]];
      break;
    case Mode::kReplay: {
      const std::vector<int32_t>& next = *pass.next;
      for (uint32_t e = 0; e < n; ++e) {
        const uint32_t t = pos[e];
        const int32_t from = z[t], to = next[t];
        if (from == to) continue;
        int32_t* ndk = &docs->ndk[DocOfToken(*docs, t) * width_];
        --delta[from];
        ++delta[to];
        --row[from];
        ++row[to];
        --pass.nk[from];
        ++pass.nk[to];
        --ndk[from];
        ++ndk[to];
        z[t] = to;
      }
      break;
    }
    case Mode::kSample:
      break;  // SampleBlock
  }
}

void WordSweep::SampleBlock(const WordTokenIndex& index, LocalDocs* docs, const Pass& pass,
                            const std::vector<uint64_t>& words) {
  order_.clear();
  for (size_t r = 0; r < words.size(); ++r) {
    const uint32_t w = static_cast<uint32_t>(words[r]);
    for (uint32_t e = index.begin[w]; e < index.begin[w + 1]; ++e) {
      order_.push_back(uint64_t{index.OrderOf(index.pos[e])} << 32 | r);
    }
  }
  std::sort(order_.begin(), order_.end());
  const double vbeta = params_.vocab * params_.beta;
  std::vector<int32_t>& z = docs->z;
  for (uint64_t o : order_) {
    const uint32_t t = index.TokenAt(static_cast<uint32_t>(o >> 32));
    const size_t r = static_cast<uint32_t>(o);
    int32_t* row = &rows_[r * width_];
    int32_t* delta = &delta_[r * width_];
    int32_t* ndk = &docs->ndk[DocOfToken(*docs, t) * width_];
    int k = z[t];
    --ndk[k];
    --row[k];
    --pass.nk[k];
    --delta[k];
    k = SampleTopic(ndk, row, pass.nk, params_, vbeta, cdf_.data(), pass.rng->Uniform());
    ++ndk[k];
    ++row[k];
    ++pass.nk[k];
    ++delta[k];
    z[t] = k;
  }
}

Status WordSweep::AddChanged(Worker* worker, const std::vector<uint64_t>& words) {
  // Moves the changed rows' deltas to the front, in order, for one Inc.
  changed_.clear();
  for (size_t r = 0; r < words.size(); ++r) {
    const int32_t* d = &delta_[r * width_];
    if (std::all_of(d, d + width_, [](int32_t v) { return v == 0; })) continue;
    if (changed_.size() != r) {
      std::memcpy(&delta_[changed_.size() * width_], d, width_ * sizeof(int32_t));
    }
    changed_.push_back(words[r]);
  }
  if (changed_.empty()) return Status::OK();
  return worker->Inc(table_, changed_, delta_.data());
}

Status WordSweep::Run(Worker* worker, const WordTokenIndex& index, LocalDocs* docs,
                      const Pass& pass) {
  // Rows are read to sample against them or to evaluate them.
  const bool read = pass.mode == Mode::kSample || pass.ll_word != nullptr;
  uint32_t cursor = 0;
  std::vector<uint64_t> words, next;
  NextBlock(index, pass, &cursor, &words);
  while (!words.empty()) {
    NextBlock(index, pass, &cursor, &next);
    // The next block is fetched (one Read per shard, in key order) while
    // this one is sampled.
    if (read && !next.empty()) RETURN_IF_ERROR(worker->Prefetch(table_, next));
    if (read) RETURN_IF_ERROR(worker->GetRows(table_, words, rows_.data()));
    std::fill(delta_.begin(), delta_.begin() + words.size() * width_, 0);
    if (pass.mode == Mode::kSample) SampleBlock(index, docs, pass, words);
    for (size_t r = 0; r < words.size(); ++r) {
      const uint32_t w = static_cast<uint32_t>(words[r]);
      int32_t* row = &rows_[r * width_];
      if (pass.mode != Mode::kSample) VisitWord(index, docs, pass, w, row, &delta_[r * width_]);
      if (pass.ll_word != nullptr && w % pass.num_parts == pass.part) {
        *pass.ll_word += WordRowLogLik(row, params_);
      }
    }
    RETURN_IF_ERROR(AddChanged(worker, words));
    words.swap(next);
  }
  return Status::OK();
}

}  // namespace lda
}  // namespace pace
