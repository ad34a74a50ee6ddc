// pace_gen: synthetic datasets with known ground truth.
//
//   pace_gen ratings --users=N --items=M --rank=K --ratings=R --noise=SIGMA --seed=S
//       --out=FILE [--test_out=FILE --test_fraction=F] [--format=plain|csv|tsv|dat] [--skew=A]
//   pace_gen corpus --docs=D --vocab=V --topics=K --doc_len=L --alpha=A --beta=B --seed=S
//       --out_docword=FILE --out_vocab=FILE [--out_truth=FILE] [--out_docs=FILE]
//
// Exit code 0 on success, 1 on a usage error or an I/O failure.
#include <gflags/gflags.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tools/cli/cli.h"
#include "tools/gen/corpus_gen.h"
#include "tools/gen/ratings_gen.h"

DEFINE_uint64(seed, 1, "random seed: the output is a pure function of the flags");
// ratings
DEFINE_uint64(users, 1000, "ratings: number of users (ids 1..users)");
DEFINE_uint64(items, 1000, "ratings: number of items (ids 1..items)");
DEFINE_int32(rank, 8, "ratings: rank of the true factors");
DEFINE_uint64(ratings, 100000, "ratings: number of distinct (user, item) ratings, train + test");
DEFINE_double(noise, 0.5, "ratings: standard deviation of the Gaussian noise (best test RMSE)");
DEFINE_double(signal, 1.0, "ratings: standard deviation of the true u.v");
DEFINE_double(mean, 0.0, "ratings: global mean added to every rating");
DEFINE_double(bias_std, 0.0, "ratings: standard deviation of true user and item biases");
DEFINE_double(min_rating, -1e300, "ratings: clip ratings below this value");
DEFINE_double(max_rating, 1e300, "ratings: clip ratings above this value");
DEFINE_int32(decimals, 4, "ratings: decimals written per rating");
DEFINE_string(out, "", "ratings: training ratings file to write");
DEFINE_string(test_out, "", "ratings: test ratings file to write (with --test_fraction)");
DEFINE_double(test_fraction, 0.0, "ratings: fraction of ratings written to --test_out");
DEFINE_string(format, "plain", "ratings: file format plain|csv|tsv|dat");
DEFINE_double(skew, 0.0,
              "ratings: Zipf exponent of user and item popularity (the rank-k user or item is "
              "drawn with probability ~ k^-skew, ids shuffled); 0: uniform");
// corpus
DEFINE_uint64(docs, 1000, "corpus: number of documents");
DEFINE_uint64(vocab, 1000, "corpus: vocabulary size");
DEFINE_int32(topics, 10, "corpus: number of planted topics");
DEFINE_double(doc_len, 100, "corpus: mean document length in tokens (Poisson)");
DEFINE_double(alpha, 0.1, "corpus: Dirichlet parameter of the doc-topic distributions");
DEFINE_double(beta, 0.01, "corpus: Dirichlet parameter of the topic-word distributions");
DEFINE_string(out_docword, "", "corpus: UCI docword.txt to write");
DEFINE_string(out_vocab, "", "corpus: vocab.txt to write");
DEFINE_string(out_truth, "", "corpus: true topics to write (one line of probabilities per topic)");
DEFINE_string(out_docs, "", "corpus: one document of tokens per line, to write");

namespace pace {
namespace gen {
namespace {

const std::vector<std::string> kRatingsFlags = {
    "users",    "items",         "rank",       "ratings",    "noise",    "signal",
    "mean",     "bias_std",      "min_rating", "max_rating", "decimals", "out",
    "test_out", "test_fraction", "format",     "skew"};
const std::vector<std::string> kCorpusFlags = {"docs",      "vocab",   "topics",      "doc_len",
                                               "alpha",     "beta",    "out_docword", "out_vocab",
                                               "out_truth", "out_docs"};

// Flags of the other subcommand must not be given.
Status RejectForeignFlags(const std::string& command, const std::vector<std::string>& foreign) {
  for (const std::string& name : foreign) {
    gflags::CommandLineFlagInfo info;
    if (gflags::GetCommandLineFlagInfo(name.c_str(), &info) && !info.is_default) {
      return Status::InvalidArgument("--" + name + " is not a flag of 'pace_gen " + command + "'");
    }
  }
  return Status::OK();
}

Status RunRatings() {
  RETURN_IF_ERROR(RejectForeignFlags("ratings", kCorpusFlags));
  if (FLAGS_out.empty()) return Status::InvalidArgument("--out is required");
  if (FLAGS_test_fraction > 0 && FLAGS_test_out.empty()) {
    return Status::InvalidArgument("--test_fraction needs --test_out");
  }
  if (!FLAGS_test_out.empty() && !(FLAGS_test_fraction > 0)) {
    return Status::InvalidArgument("--test_out needs --test_fraction > 0");
  }
  RatingsFormat format;
  RETURN_IF_ERROR(ParseRatingsFormat(FLAGS_format, &format));
  RatingsGenOptions o;
  o.users = FLAGS_users;
  o.items = FLAGS_items;
  o.rank = FLAGS_rank;
  o.ratings = FLAGS_ratings;
  o.noise = FLAGS_noise;
  o.signal = FLAGS_signal;
  o.mean = FLAGS_mean;
  o.bias_std = FLAGS_bias_std;
  o.min_rating = FLAGS_min_rating;
  o.max_rating = FLAGS_max_rating;
  o.decimals = FLAGS_decimals;
  o.test_fraction = FLAGS_test_fraction;
  o.skew = FLAGS_skew;
  o.seed = FLAGS_seed;
  RatingsData data;
  RETURN_IF_ERROR(GenerateRatings(o, &data));
  RETURN_IF_ERROR(WriteRatings(FLAGS_out, format, o.decimals, data.train));
  if (!FLAGS_test_out.empty()) {
    RETURN_IF_ERROR(WriteRatings(FLAGS_test_out, format, o.decimals, data.test));
  }
  std::fprintf(stderr, "pace_gen: %zu train ratings -> %s", data.train.size(), FLAGS_out.c_str());
  if (!FLAGS_test_out.empty()) {
    std::fprintf(stderr, ", %zu test ratings -> %s", data.test.size(), FLAGS_test_out.c_str());
  }
  std::fprintf(stderr, " (rank %d, noise %g: best test RMSE ~ %g", o.rank, o.noise, o.noise);
  if (o.skew > 0) std::fprintf(stderr, "; users and items Zipf, skew %g", o.skew);
  std::fprintf(stderr, ")\n");
  return Status::OK();
}

Status RunCorpus() {
  RETURN_IF_ERROR(RejectForeignFlags("corpus", kRatingsFlags));
  if (FLAGS_out_docword.empty() && FLAGS_out_docs.empty()) {
    return Status::InvalidArgument("--out_docword (or --out_docs) is required");
  }
  CorpusGenOptions o;
  o.docs = FLAGS_docs;
  o.vocab = FLAGS_vocab;
  o.topics = FLAGS_topics;
  o.doc_len = FLAGS_doc_len;
  o.alpha = FLAGS_alpha;
  o.beta = FLAGS_beta;
  o.seed = FLAGS_seed;
  GenCorpus corpus;
  RETURN_IF_ERROR(GenerateCorpus(o, &corpus));
  if (!FLAGS_out_docword.empty()) RETURN_IF_ERROR(WriteDocword(FLAGS_out_docword, corpus));
  if (!FLAGS_out_vocab.empty()) RETURN_IF_ERROR(WriteVocab(FLAGS_out_vocab, corpus));
  if (!FLAGS_out_truth.empty()) RETURN_IF_ERROR(WriteTruth(FLAGS_out_truth, corpus));
  if (!FLAGS_out_docs.empty()) RETURN_IF_ERROR(WriteDocsText(FLAGS_out_docs, corpus));
  std::fprintf(stderr, "pace_gen: %zu docs, %llu tokens, vocabulary %llu, %d topics\n",
               corpus.docs.size(), static_cast<unsigned long long>(corpus.num_tokens),
               static_cast<unsigned long long>(corpus.vocab), o.topics);
  return Status::OK();
}

}  // namespace
}  // namespace gen
}  // namespace pace

int main(int argc, char** argv) {
  pace::cli::ProgramInfo info;
  info.name = "pace_gen";
  info.summary = "synthetic datasets with a known answer";
  info.usage =
      "pace_gen ratings --users=N --items=M --rank=K --ratings=R --noise=SIGMA --seed=S "
      "--out=FILE\n"
      "         [--test_out=FILE --test_fraction=F] [--format=plain|csv|tsv|dat] [--skew=A]\n"
      "pace_gen corpus --docs=D --vocab=V --topics=K --doc_len=L --alpha=A --beta=B --seed=S\n"
      "         --out_docword=FILE --out_vocab=FILE [--out_truth=FILE] [--out_docs=FILE]";
  info.groups = {
      {"ratings (low-rank ratings with noise: a good fit reaches RMSE ~ noise)",
       {"users", "items", "rank", "ratings", "noise", "signal", "mean", "bias_std", "min_rating",
        "max_rating", "decimals", "out", "test_out", "test_fraction", "format", "skew"}},
      {"corpus (documents drawn from an LDA model with known topics)",
       {"docs", "vocab", "topics", "doc_len", "alpha", "beta", "out_docword", "out_vocab",
        "out_truth", "out_docs"}},
      {"both", {"seed"}},
  };
  info.footer = "Documentation: docs/apps.md";
  if (argc < 2 || argv[1][0] == '-') {
    pace::cli::ParseCommandLine(info, &argc, &argv);  // --help, --version: exit 0
    std::fprintf(stderr, "usage:\n%s\n(pace_gen --help for the flags)\n", info.usage.c_str());
    return 1;
  }
  std::string command = argv[1];
  // Drop the subcommand so gflags sees only flags.
  for (int i = 1; i + 1 < argc; ++i) argv[i] = argv[i + 1];
  --argc;
  pace::cli::ParseCommandLine(info, &argc, &argv);
  if (argc > 1) {
    std::fprintf(stderr, "pace_gen: unexpected argument '%s'\n", argv[1]);
    return 1;
  }
  pace::Status s;
  if (command == "ratings") {
    s = pace::gen::RunRatings();
  } else if (command == "corpus") {
    s = pace::gen::RunCorpus();
  } else {
    std::fprintf(stderr, "pace_gen: unknown command '%s' (expected ratings or corpus)\n",
                 command.c_str());
    return 1;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "pace_gen %s: %s\n", command.c_str(), s.ToString().c_str());
    return 1;
  }
  return 0;
}
