#include "tools/gen/corpus_gen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "tools/gen/random.h"

namespace pace {
namespace gen {

namespace {

using FilePtr = std::unique_ptr<FILE, int (*)(FILE*)>;

StatusOr<FilePtr> OpenForWrite(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "w"), &std::fclose);
  if (!f) return Status::IOError("cannot open '" + path + "' for writing");
  return f;
}

Status Close(FilePtr f, const std::string& path) {
  bool failed = std::ferror(f.get()) != 0;
  FILE* raw = f.release();
  if (std::fclose(raw) != 0 || failed) return Status::IOError("writing '" + path + "' failed");
  return Status::OK();
}

}  // namespace

Status ValidateCorpusGenOptions(const CorpusGenOptions& o) {
  if (o.docs == 0) return Status::InvalidArgument("--docs must be >= 1");
  if (o.vocab == 0 || o.vocab > (1ull << 31)) {
    return Status::InvalidArgument("--vocab must be in [1, 2^31]");
  }
  if (o.topics < 1 || o.topics > 100000) {
    return Status::InvalidArgument("--topics must be in [1, 100000]");
  }
  if (!(o.doc_len >= 1) || !std::isfinite(o.doc_len)) {
    return Status::InvalidArgument("--doc_len must be a finite number >= 1");
  }
  if (!(o.alpha > 0) || !std::isfinite(o.alpha)) {
    return Status::InvalidArgument("--alpha must be a finite number > 0");
  }
  if (!(o.beta > 0) || !std::isfinite(o.beta)) {
    return Status::InvalidArgument("--beta must be a finite number > 0");
  }
  return Status::OK();
}

Status GenerateCorpus(const CorpusGenOptions& o, GenCorpus* out) {
  RETURN_IF_ERROR(ValidateCorpusGenOptions(o));
  const size_t k = static_cast<size_t>(o.topics);
  Rng topic_rng(o.seed * 0x9E3779B97F4A7C15ull + 11);
  out->vocab = o.vocab;
  out->phi.assign(k, {});
  // Cumulative distributions make each word draw a binary search.
  std::vector<std::vector<double>> cdf(k);
  for (size_t t = 0; t < k; ++t) {
    topic_rng.Dirichlet(o.beta, o.vocab, &out->phi[t]);
    cdf[t].resize(o.vocab);
    double acc = 0;
    for (uint64_t w = 0; w < o.vocab; ++w) cdf[t][w] = (acc += out->phi[t][w]);
  }
  Rng rng(o.seed * 0xD1B54A32D192ED03ull + 12);
  out->docs.assign(o.docs, {});
  out->num_tokens = 0;
  std::vector<double> theta;
  for (uint64_t d = 0; d < o.docs; ++d) {
    rng.Dirichlet(o.alpha, k, &theta);
    uint64_t len = std::max<uint64_t>(1, rng.Poisson(o.doc_len));
    std::vector<uint32_t>& doc = out->docs[d];
    doc.reserve(len);
    for (uint64_t j = 0; j < len; ++j) {
      size_t z = rng.Categorical(theta, 1.0);
      const std::vector<double>& c = cdf[z];
      double r = rng.Uniform() * c.back();
      size_t w = std::upper_bound(c.begin(), c.end(), r) - c.begin();
      if (w >= c.size()) w = c.size() - 1;
      doc.push_back(static_cast<uint32_t>(w));
    }
    out->num_tokens += len;
  }
  return Status::OK();
}

std::string WordName(uint64_t w, uint64_t vocab) {
  int width = 1;
  for (uint64_t v = vocab; v >= 10; v /= 10) ++width;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "w%0*llu", width, static_cast<unsigned long long>(w));
  return buf;
}

Status WriteDocword(const std::string& path, const GenCorpus& c) {
  std::vector<std::map<uint32_t, uint32_t>> counts(c.docs.size());
  uint64_t nnz = 0;
  for (size_t d = 0; d < c.docs.size(); ++d) {
    for (uint32_t w : c.docs[d]) ++counts[d][w];
    nnz += counts[d].size();
  }
  ASSIGN_OR_RETURN(FilePtr f, OpenForWrite(path));
  std::fprintf(f.get(), "%zu\n%llu\n%llu\n", c.docs.size(),
               static_cast<unsigned long long>(c.vocab), static_cast<unsigned long long>(nnz));
  for (size_t d = 0; d < counts.size(); ++d) {
    for (const auto& [w, n] : counts[d]) std::fprintf(f.get(), "%zu %u %u\n", d + 1, w + 1, n);
  }
  return Close(std::move(f), path);
}

Status WriteVocab(const std::string& path, const GenCorpus& c) {
  ASSIGN_OR_RETURN(FilePtr f, OpenForWrite(path));
  for (uint64_t w = 0; w < c.vocab; ++w)
    std::fprintf(f.get(), "%s\n", WordName(w, c.vocab).c_str());
  return Close(std::move(f), path);
}

Status WriteDocsText(const std::string& path, const GenCorpus& c) {
  ASSIGN_OR_RETURN(FilePtr f, OpenForWrite(path));
  for (const std::vector<uint32_t>& doc : c.docs) {
    for (size_t j = 0; j < doc.size(); ++j) {
      std::fprintf(f.get(), j ? " %s" : "%s", WordName(doc[j], c.vocab).c_str());
    }
    std::fputc('\n', f.get());
  }
  return Close(std::move(f), path);
}

Status WriteTruth(const std::string& path, const GenCorpus& c) {
  ASSIGN_OR_RETURN(FilePtr f, OpenForWrite(path));
  for (const std::vector<double>& topic : c.phi) {
    for (size_t w = 0; w < topic.size(); ++w) std::fprintf(f.get(), w ? " %.6g" : "%.6g", topic[w]);
    std::fputc('\n', f.get());
  }
  return Close(std::move(f), path);
}

}  // namespace gen
}  // namespace pace
