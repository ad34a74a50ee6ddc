#include "tools/gen/ratings_gen.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <unordered_set>

#include "tools/gen/random.h"
#include "tools/gen/zipf.h"

namespace pace {
namespace gen {

Status ParseRatingsFormat(const std::string& name, RatingsFormat* out) {
  if (name == "plain") {
    *out = RatingsFormat::kPlain;
  } else if (name == "csv") {
    *out = RatingsFormat::kCsv;
  } else if (name == "tsv") {
    *out = RatingsFormat::kTsv;
  } else if (name == "dat") {
    *out = RatingsFormat::kDat;
  } else {
    return Status::InvalidArgument("unknown ratings format '" + name +
                                   "' (expected plain|csv|tsv|dat)");
  }
  return Status::OK();
}

Status ValidateRatingsGenOptions(const RatingsGenOptions& o) {
  if (o.users == 0 || o.items == 0)
    return Status::InvalidArgument("--users and --items must be >= 1");
  if (o.rank < 1 || o.rank > 4096) return Status::InvalidArgument("--rank must be in [1, 4096]");
  if (o.ratings == 0) return Status::InvalidArgument("--ratings must be >= 1");
  long double cells = static_cast<long double>(o.users) * static_cast<long double>(o.items);
  if (static_cast<long double>(o.ratings) > cells / 2) {
    return Status::InvalidArgument("--ratings must be at most half of users * items (" +
                                   std::to_string(static_cast<double>(cells / 2)) +
                                   "): pairs are distinct");
  }
  if (!(o.noise >= 0) || !std::isfinite(o.noise)) {
    return Status::InvalidArgument("--noise must be a finite number >= 0");
  }
  if (!(o.signal >= 0) || !std::isfinite(o.signal)) {
    return Status::InvalidArgument("--signal must be a finite number >= 0");
  }
  if (!(o.bias_std >= 0) || !std::isfinite(o.bias_std)) {
    return Status::InvalidArgument("--bias_std must be a finite number >= 0");
  }
  if (!std::isfinite(o.mean)) return Status::InvalidArgument("--mean must be finite");
  if (!(o.min_rating < o.max_rating)) {
    return Status::InvalidArgument("--min_rating must be below --max_rating");
  }
  if (!(o.test_fraction >= 0 && o.test_fraction < 1)) {
    return Status::InvalidArgument("--test_fraction must be in [0, 1)");
  }
  if (!(o.skew >= 0 && o.skew <= 10)) return Status::InvalidArgument("--skew must be in [0, 10]");
  if (o.decimals < 0 || o.decimals > 9)
    return Status::InvalidArgument("--decimals must be in [0, 9]");
  return Status::OK();
}

Status GenerateRatings(const RatingsGenOptions& o, RatingsData* out) {
  RETURN_IF_ERROR(ValidateRatingsGenOptions(o));
  out->train.clear();
  out->test.clear();
  const size_t k = static_cast<size_t>(o.rank);
  // Var(u.v) = k * sf^4 = signal^2.
  const double sf = std::sqrt(o.signal / std::sqrt(static_cast<double>(k)));
  Rng factor_rng(o.seed * 0x9E3779B97F4A7C15ull + 1);
  std::vector<float> users(o.users * k), items(o.items * k);
  for (float& x : users) x = static_cast<float>(sf * factor_rng.Normal());
  for (float& x : items) x = static_cast<float>(sf * factor_rng.Normal());
  std::vector<float> user_bias(o.users, 0.0f), item_bias(o.items, 0.0f);
  if (o.bias_std > 0) {
    for (float& b : user_bias) b = static_cast<float>(o.bias_std * factor_rng.Normal());
    for (float& b : item_bias) b = static_cast<float>(o.bias_std * factor_rng.Normal());
  }

  Rng rng(o.seed * 0xD1B54A32D192ED03ull + 2);
  // Skewed draws: Zipf ranks, mapped to ids by seeded permutations (drawn from
  // their own streams, so the uniform path's stream is untouched).
  const bool skewed = o.skew > 0;
  std::unique_ptr<ZipfSampler> user_zipf, item_zipf;
  std::vector<uint64_t> user_ids, item_ids;
  if (skewed) {
    user_zipf = std::make_unique<ZipfSampler>(o.users, o.skew);
    item_zipf = std::make_unique<ZipfSampler>(o.items, o.skew);
    user_ids = RandomPermutation(o.users, o.seed * 0x9E3779B97F4A7C15ull + 3);
    item_ids = RandomPermutation(o.items, o.seed * 0x9E3779B97F4A7C15ull + 4);
  }
  // A skewed draw repeats pairs; past this many draws in a row without a new
  // one, the remaining likely pairs are exhausted (uniform draws always find
  // one: at most half of the pairs are taken).
  constexpr uint64_t kMaxRepeats = uint64_t{1} << 22;
  uint64_t repeats = 0;
  std::unordered_set<uint64_t> seen;
  seen.reserve(o.ratings * 2);
  out->train.reserve(static_cast<size_t>(o.ratings * (1.0 - o.test_fraction) * 1.05) + 16);
  while (seen.size() < o.ratings) {
    uint64_t u, i;
    if (skewed) {
      u = user_ids[user_zipf->Sample(&rng) - 1];
      i = item_ids[item_zipf->Sample(&rng) - 1];
    } else {
      u = rng.UniformInt(o.users);
      i = rng.UniformInt(o.items);
    }
    if (!seen.insert(u * o.items + i).second) {
      if (++repeats > kMaxRepeats) {
        char skew[32];
        std::snprintf(skew, sizeof(skew), "%g", o.skew);
        return Status::InvalidArgument(
            "--skew=" + std::string(skew) + " leaves too few likely (user, item) pairs for " +
            std::to_string(o.ratings) + " distinct ratings (found " + std::to_string(seen.size()) +
            "): lower --skew or --ratings, or add users or items");
      }
      continue;
    }
    repeats = 0;
    double dot = 0;
    const float* pu = &users[u * k];
    const float* pi = &items[i * k];
    for (size_t f = 0; f < k; ++f) dot += static_cast<double>(pu[f]) * pi[f];
    double r = o.mean + user_bias[u] + item_bias[i] + dot + o.noise * rng.Normal();
    r = std::min(o.max_rating, std::max(o.min_rating, r));
    GenRating g{u + 1, i + 1, r};
    if (o.test_fraction > 0 && rng.Uniform() < o.test_fraction) {
      out->test.push_back(g);
    } else {
      out->train.push_back(g);
    }
  }
  return Status::OK();
}

Status WriteRatings(const std::string& path, RatingsFormat format, int decimals,
                    const std::vector<GenRating>& ratings) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "w"), &std::fclose);
  if (!f) return Status::IOError("cannot open '" + path + "' for writing");
  const char* sep = " ";
  switch (format) {
    case RatingsFormat::kPlain:
      sep = " ";
      break;
    case RatingsFormat::kCsv:
      sep = ",";
      std::fputs("userId,movieId,rating,timestamp\n", f.get());
      break;
    case RatingsFormat::kTsv:
      sep = "\t";
      break;
    case RatingsFormat::kDat:
      sep = "::";
      break;
  }
  // Synthetic, increasing timestamps for the formats that carry one.
  const uint64_t kEpoch = 1000000000;
  uint64_t ts = kEpoch;
  for (const GenRating& r : ratings) {
    int n;
    if (format == RatingsFormat::kPlain) {
      n = std::fprintf(f.get(), "%llu%s%llu%s%.*f\n", static_cast<unsigned long long>(r.user), sep,
                       static_cast<unsigned long long>(r.item), sep, decimals, r.value);
    } else {
      n = std::fprintf(f.get(), "%llu%s%llu%s%.*f%s%llu\n", static_cast<unsigned long long>(r.user),
                       sep, static_cast<unsigned long long>(r.item), sep, decimals, r.value, sep,
                       static_cast<unsigned long long>(ts++));
    }
    if (n < 0) return Status::IOError("write to '" + path + "' failed");
  }
  FILE* raw = f.release();
  if (std::fclose(raw) != 0) return Status::IOError("closing '" + path + "' failed");
  return Status::OK();
}

}  // namespace gen
}  // namespace pace
