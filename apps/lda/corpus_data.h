// Corpus input for pace_lda.
//
//   UCI bag-of-words docword.txt: three header lines D (documents), W (words),
//   NNZ (entries), then NNZ lines "docID wordID count" with 1-based ids
//   (https://archive.ics.uci.edu/ml/datasets/Bag+of+Words). Optional
//   vocab.txt: line w holds the name of word w.
//   Text: one document per line, tokens separated by spaces or tabs; the
//   vocabulary is the distinct tokens in order of first appearance.
// Documents keep their position (doc d of the file is docs[d]); empty ones
// are kept and simply have no tokens. A bad line is an InvalidArgument error
// naming "file:line", or is skipped and counted with skip_bad_lines.
//
// Thread-compatible.
#ifndef PACE_APPS_LDA_CORPUS_DATA_H_
#define PACE_APPS_LDA_CORPUS_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace pace {
namespace lda {

struct Corpus {
  // docs[d] = the tokens of document d as 0-based word ids.
  std::vector<std::vector<uint32_t>> docs;
  // Word names (empty if no vocabulary was read).
  std::vector<std::string> vocab;
  uint32_t vocab_size = 0;
  uint64_t num_tokens = 0;

  // vocab[w], or "#w" (0-based) without a vocabulary.
  std::string WordName(uint32_t w) const;
};

struct CorpusReadOptions {
  // Skip (and count) bad lines instead of failing. Default: false.
  bool skip_bad_lines = false;
};

struct CorpusReadInfo {
  uint64_t skipped = 0;
  std::string first_skipped;
};

// Errors: NotFound/IOError for the file; InvalidArgument "path:line: ..." for
// a bad header or entry, or when the number of entries differs from NNZ.
Status ReadDocword(const std::string& path, const CorpusReadOptions& options, Corpus* corpus,
                   CorpusReadInfo* info);
// Reads vocab.txt into corpus->vocab. InvalidArgument if it has fewer words
// than corpus->vocab_size (more are allowed and ignored).
Status ReadVocab(const std::string& path, Corpus* corpus);
// One document per line. InvalidArgument if there is no token at all.
Status ReadDocsText(const std::string& path, Corpus* corpus);

}  // namespace lda
}  // namespace pace

#endif  // PACE_APPS_LDA_CORPUS_DATA_H_
