#include "apps/lda/corpus_data.h"

#include <memory>
#include <string_view>
#include <unordered_map>

#include "apps/shared/text_input.h"

namespace pace {
namespace lda {

using apps::Excerpt;
using apps::ParseU64;
using apps::Trim;

std::string Corpus::WordName(uint32_t w) const {
  if (w < vocab.size()) return vocab[w];
  return "#" + std::to_string(w);
}

namespace {

// Counts per document are capped so a typo cannot ask for a huge allocation.
constexpr uint64_t kMaxCount = 1u << 24;
constexpr uint64_t kMaxDocs = 1u << 30;
constexpr uint64_t kMaxWords = 1u << 31;

Status ReadHeaderValue(apps::LineReader* reader, const char* what, uint64_t max, uint64_t* out) {
  std::string_view line;
  while (reader->Next(&line)) {
    std::string_view t = Trim(line);
    if (t.empty()) continue;
    if (!ParseU64(t, out) || *out > max) {
      return Status::InvalidArgument(reader->Where() + ": expected the docword header's " + what +
                                     " (a number <= " + std::to_string(max) + "), got " +
                                     Excerpt(t));
    }
    return Status::OK();
  }
  RETURN_IF_ERROR(reader->status());
  return Status::InvalidArgument(reader->path() + ": ends before the docword header's " + what);
}

}  // namespace

Status ReadDocword(const std::string& path, const CorpusReadOptions& options, Corpus* corpus,
                   CorpusReadInfo* info) {
  std::unique_ptr<apps::LineReader> reader;
  RETURN_IF_ERROR(apps::LineReader::Open(path, &reader));
  uint64_t d_count, w_count, nnz;
  RETURN_IF_ERROR(ReadHeaderValue(reader.get(), "number of documents D", kMaxDocs, &d_count));
  RETURN_IF_ERROR(ReadHeaderValue(reader.get(), "vocabulary size W", kMaxWords, &w_count));
  RETURN_IF_ERROR(ReadHeaderValue(reader.get(), "number of entries NNZ", ~0ull, &nnz));
  *corpus = Corpus();
  corpus->docs.resize(d_count);
  corpus->vocab_size = static_cast<uint32_t>(w_count);
  apps::BadLinePolicy policy(options.skip_bad_lines);
  std::vector<std::string_view> f;
  uint64_t entries = 0;
  std::string_view line;
  while (reader->Next(&line)) {
    std::string_view t = Trim(line);
    if (t.empty()) continue;
    ++entries;
    apps::SplitWhitespace(t, &f);
    uint64_t d, w, n;
    std::string why;
    if (f.size() != 3) {
      why = "expected 'docID wordID count', got " + Excerpt(t);
    } else if (!ParseU64(f[0], &d) || d < 1 || d > d_count) {
      why = "bad docID " + Excerpt(f[0]) + " (expected 1.." + std::to_string(d_count) + ")";
    } else if (!ParseU64(f[1], &w) || w < 1 || w > w_count) {
      why = "bad wordID " + Excerpt(f[1]) + " (expected 1.." + std::to_string(w_count) + ")";
    } else if (!ParseU64(f[2], &n) || n < 1 || n > kMaxCount) {
      why = "bad count " + Excerpt(f[2]) + " (expected 1.." + std::to_string(kMaxCount) + ")";
    }
    if (!why.empty()) {
      RETURN_IF_ERROR(policy.Handle(Status::InvalidArgument(reader->Where() + ": " + why)));
      continue;
    }
    corpus->docs[d - 1].insert(corpus->docs[d - 1].end(), n, static_cast<uint32_t>(w - 1));
    corpus->num_tokens += n;
  }
  RETURN_IF_ERROR(reader->status());
  if (entries != nnz) {
    return Status::InvalidArgument(path + ": the header says NNZ = " + std::to_string(nnz) +
                                   " entries, the file has " + std::to_string(entries) +
                                   " (truncated or not a docword file?)");
  }
  if (corpus->num_tokens == 0) return Status::InvalidArgument("'" + path + "' holds no tokens");
  if (info != nullptr) {
    info->skipped = policy.skipped();
    info->first_skipped = policy.first_error();
  }
  return Status::OK();
}

Status ReadVocab(const std::string& path, Corpus* corpus) {
  std::unique_ptr<apps::LineReader> reader;
  RETURN_IF_ERROR(apps::LineReader::Open(path, &reader));
  corpus->vocab.clear();
  std::string_view line;
  while (corpus->vocab.size() < corpus->vocab_size && reader->Next(&line)) {
    corpus->vocab.emplace_back(Trim(line));
  }
  RETURN_IF_ERROR(reader->status());
  if (corpus->vocab.size() < corpus->vocab_size) {
    return Status::InvalidArgument("'" + path + "' has " + std::to_string(corpus->vocab.size()) +
                                   " words, the corpus needs " +
                                   std::to_string(corpus->vocab_size));
  }
  return Status::OK();
}

Status ReadDocsText(const std::string& path, Corpus* corpus) {
  std::unique_ptr<apps::LineReader> reader;
  RETURN_IF_ERROR(apps::LineReader::Open(path, &reader));
  *corpus = Corpus();
  std::unordered_map<std::string, uint32_t> ids;
  std::vector<std::string_view> tokens;
  std::string_view line;
  while (reader->Next(&line)) {
    apps::SplitWhitespace(line, &tokens);
    std::vector<uint32_t>& doc = corpus->docs.emplace_back();
    doc.reserve(tokens.size());
    for (std::string_view tok : tokens) {
      auto [it, inserted] = ids.emplace(std::string(tok), static_cast<uint32_t>(ids.size()));
      if (inserted) corpus->vocab.emplace_back(tok);
      doc.push_back(it->second);
    }
    corpus->num_tokens += doc.size();
  }
  RETURN_IF_ERROR(reader->status());
  corpus->vocab_size = static_cast<uint32_t>(corpus->vocab.size());
  if (corpus->num_tokens == 0) return Status::InvalidArgument("'" + path + "' holds no tokens");
  return Status::OK();
}

}  // namespace lda
}  // namespace pace
