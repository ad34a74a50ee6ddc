// A synthetic corpus drawn from an LDA model with known topics, for pace_lda
// tests and experiments.
//
// topics phi_k ~ Dirichlet(beta) over the vocabulary (k < topics);
// for each document: theta_d ~ Dirichlet(alpha), length ~ Poisson(doc_len)
// (at least 1), and each token: z ~ theta_d, w ~ phi_z.
// Written in the UCI bag-of-words format (docword.txt + vocab.txt) that
// pace_lda reads; the true topics can be written too.
//
// Deterministic by seed. Thread-compatible.
#ifndef PACE_TOOLS_GEN_CORPUS_GEN_H_
#define PACE_TOOLS_GEN_CORPUS_GEN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace pace {
namespace gen {

struct CorpusGenOptions {
  // Number of documents, vocabulary size, planted topics. Defaults: 1000, 1000, 10.
  uint64_t docs = 1000;
  uint64_t vocab = 1000;
  int topics = 10;
  // Mean document length (tokens). Default: 100.
  double doc_len = 100;
  // Dirichlet parameters of the doc-topic and topic-word distributions.
  // Defaults: 0.1, 0.01.
  double alpha = 0.1;
  double beta = 0.01;
  uint64_t seed = 1;
};

struct GenCorpus {
  // docs[d] = the tokens (0-based word ids) of document d, in draw order.
  std::vector<std::vector<uint32_t>> docs;
  // phi[k][w] = the true probability of word w in topic k.
  std::vector<std::vector<double>> phi;
  uint64_t vocab = 0;
  uint64_t num_tokens = 0;
};

// InvalidArgument for impossible options.
Status ValidateCorpusGenOptions(const CorpusGenOptions& o);
Status GenerateCorpus(const CorpusGenOptions& o, GenCorpus* out);

// The word name written to vocab.txt for word id w (0-based): "w0001"-style,
// zero padded to the width of the vocabulary size.
std::string WordName(uint64_t w, uint64_t vocab);

// UCI docword.txt: lines D, W, NNZ, then "doc word count" (1-based ids),
// sorted by doc then word. Documents are never empty.
Status WriteDocword(const std::string& path, const GenCorpus& c);
// vocab.txt: one word per line, line w+1 = word w.
Status WriteVocab(const std::string& path, const GenCorpus& c);
// One document per line, space separated word names (pace_lda --docs).
Status WriteDocsText(const std::string& path, const GenCorpus& c);
// The true topics: one line per topic, `vocab` probabilities separated by spaces.
Status WriteTruth(const std::string& path, const GenCorpus& c);

}  // namespace gen
}  // namespace pace

#endif  // PACE_TOOLS_GEN_CORPUS_GEN_H_
