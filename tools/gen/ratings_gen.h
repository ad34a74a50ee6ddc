// Synthetic low-rank ratings with known noise, for pace_mf tests, the demo and
// the experiments.
//
// The model: true user factors U (users x rank) and item factors V (items x
// rank) with i.i.d. N(0, sf^2) entries, where sf^2 = signal / sqrt(rank), so
// that Var(u.v) = rank * sf^4 = signal^2. Optional biases b_u, b_v ~ N(0, bias_std^2). A rating of
// a distinct (user, item) pair is
//   mean + b_u + b_v + u.v + eps,  eps ~ N(0, noise^2),
// optionally clipped to [min_rating, max_rating]. Without clipping, the best
// possible test RMSE is `noise`.
//
// Pairs are drawn uniformly (skew 0), or with the user and the item each drawn
// from a Zipf law of exponent `skew`: the rank-k user (item) is drawn with
// probability proportional to k^-skew, as in real ratings where a few users
// and items account for much of the data. Ranks map to ids through a seeded
// random permutation, so the popular ids are spread over the id range. A pair
// drawn again is redrawn (ratings are distinct), so where the most popular
// pairs run out the head of the realized distribution is flatter than the law.
//
// Everything is a pure function of the options (deterministic by seed).
// Thread-compatible.
#ifndef PACE_TOOLS_GEN_RATINGS_GEN_H_
#define PACE_TOOLS_GEN_RATINGS_GEN_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/status.h"

namespace pace {
namespace gen {

// Output layouts, matching what pace_mf reads.
enum class RatingsFormat {
  kPlain,  // "user item rating"
  kCsv,    // MovieLens ratings.csv: header userId,movieId,rating,timestamp
  kTsv,    // MovieLens u.data: user \t item \t rating \t timestamp
  kDat,    // MovieLens ratings.dat: user::item::rating::timestamp
};

Status ParseRatingsFormat(const std::string& name, RatingsFormat* out);

struct RatingsGenOptions {
  // Numbers of users and items; ids written are 1-based. Defaults: 1000, 1000.
  uint64_t users = 1000;
  uint64_t items = 1000;
  // Rank of the true factors. Default: 8.
  int rank = 8;
  // Number of distinct (user, item) ratings (train + test). Must be at most
  // half of users * items. Default: 100000.
  uint64_t ratings = 100000;
  // Standard deviation of the additive Gaussian noise. Default: 0.5.
  double noise = 0.5;
  // Standard deviation of u.v. Default: 1.
  double signal = 1.0;
  // Global mean and standard deviation of user/item biases. Defaults: 0, 0.
  double mean = 0.0;
  double bias_std = 0.0;
  // Ratings are clipped into [min_rating, max_rating]. Defaults: no clipping.
  double min_rating = -std::numeric_limits<double>::infinity();
  double max_rating = std::numeric_limits<double>::infinity();
  // Ratings are rounded to this many decimals in the files. Default: 4.
  int decimals = 4;
  // Fraction of ratings routed to the test set. Default: 0.
  double test_fraction = 0.0;
  // Zipf exponent of the user and item popularity; 0 draws them uniformly
  // (the same ratings, bit for bit, as before the option existed). Default: 0.
  double skew = 0.0;
  uint64_t seed = 1;
};

struct GenRating {
  uint64_t user = 0;  // 1-based
  uint64_t item = 0;  // 1-based
  double value = 0;
};

struct RatingsData {
  std::vector<GenRating> train;
  std::vector<GenRating> test;
};

// InvalidArgument for impossible options (zero sizes, rank < 1, negative
// noise, too many ratings for the matrix, test_fraction outside [0, 1), skew
// outside [0, 10]).
Status ValidateRatingsGenOptions(const RatingsGenOptions& o);

// Generates the dataset. Errors: those of ValidateRatingsGenOptions, and
// InvalidArgument when a skewed draw finds no new distinct pair for too long
// (the skew leaves too few likely pairs for `ratings`).
Status GenerateRatings(const RatingsGenOptions& o, RatingsData* out);

// Writes ratings in `format` (values with `decimals` decimals). IOError if the
// file cannot be written.
Status WriteRatings(const std::string& path, RatingsFormat format, int decimals,
                    const std::vector<GenRating>& ratings);

}  // namespace gen
}  // namespace pace

#endif  // PACE_TOOLS_GEN_RATINGS_GEN_H_
