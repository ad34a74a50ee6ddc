// The matrix factorization model shared by pace_mf and its no-parameter-server
// baseline: the SGD update rule, predictions, the step-size schedule, the
// partition of the training data into workers' parts and minibatches, and
// the user+item-bias baseline.
//
// Model: rating(u, i) ~ mean + b_u + b_i + U_u . V_i (the mean and biases only
// with `biases`). A factor row holds the rank-K factors, then the bias:
//   [f_0 .. f_{K-1}, b]   (width K + 1 with biases, K without).
// Objective (MAP with Gaussian priors):
//   sum over ratings of (r - prediction)^2
//     + lambda * (sum_u (n_u / n_U) |U_u|^2 + sum_i (n_i / n_I) |V_i|^2)
//     + bias_lambda * (sum_u b_u^2 + sum_i b_i^2)
// with n_u the number of training ratings of user u and n_U its mean over the
// users (n_i, n_I likewise for items). SGD visits one rating at a time, so
// each step carries 1/n_u of row u's terms: lambda / n_U of the factor
// penalty (the same for every rating) and bias_lambda / n_u of the bias
// penalty.
// The factor penalty is the weighted trace norm (Salakhutdinov & Srebro,
// "Collaborative filtering in a non-uniform world", 2010): a row's prior
// strength grows with how often it is rated, so heavily rated rows cannot
// fit their noise; on data where every row has about the same number of
// ratings it equals a plain lambda per row. The biases keep bias_lambda per
// row, as the bias baseline's regularized averages do.
// Step size lr_t = lr / (clock + 1)^lr_power.
//
// Everything here is a plain function of its inputs; thread-compatible.
#ifndef PACE_APPS_MF_MF_MODEL_H_
#define PACE_APPS_MF_MF_MODEL_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "apps/mf/ratings_data.h"
#include "apps/shared/partition.h"
#include "common/status.h"

namespace pace {
namespace mf {

struct SgdParams {
  int rank = 16;
  bool biases = true;
  float mean = 0;  // used only with biases
  float lr = 0.01f;
  // Per-step factor penalties lambda / n_U and lambda / n_I (FactorPenalties).
  float lambda_user = 0.1f;
  float lambda_item = 0.1f;
  float bias_lambda = 5.0f;
};

inline uint32_t RowWidth(int rank, bool biases) {
  return static_cast<uint32_t>(rank) + (biases ? 1u : 0u);
}

// The prediction for a user row read as user(f) and an item row `v`
// (before clipping).
template <typename UserAt>
inline float PredictWith(const UserAt& user, const float* v, const SgdParams& p) {
  float dot = 0;
  for (int f = 0; f < p.rank; ++f) dot += user(f) * v[f];
  if (p.biases) dot += p.mean + user(p.rank) + v[p.rank];
  return dot;
}

// The prediction for a user row `u` and an item row `v` (before clipping).
inline float Predict(const float* u, const float* v, const SgdParams& p) {
  return PredictWith([u](int f) { return u[f]; }, v, p);
}

// One SGD step on one rating, the user row read as user(f) and changed by
// add_to_user(f, change); the item row `v` is updated in place. Returns the
// error (rating - prediction) before the step. `wu` and `wv` are the rows'
// bias penalty shares 1/n_u and 1/n_i (see RegWeights).
template <typename UserAt, typename AddToUser>
inline float SgdStep(const UserAt& user, const AddToUser& add_to_user, float* v, float rating,
                     float wu, float wv, const SgdParams& p) {
  const float e = rating - PredictWith(user, v, p);
  const float lr = p.lr, lu = p.lambda_user, lv = p.lambda_item;
  for (int f = 0; f < p.rank; ++f) {
    const float uf = user(f), vf = v[f];
    add_to_user(f, lr * (e * vf - lu * uf));
    v[f] = vf + lr * (e * uf - lv * vf);
  }
  if (p.biases) {
    add_to_user(p.rank, lr * (e - p.bias_lambda * wu * user(p.rank)));
    v[p.rank] += lr * (e - p.bias_lambda * wv * v[p.rank]);
  }
  return e;
}

// SgdStep on a user row `u`, both rows updated in place.
inline float SgdUpdate(float* u, float* v, float rating, float wu, float wv, const SgdParams& p) {
  return SgdStep([u](int f) { return u[f]; }, [u](int f, float x) { u[f] += x; }, v, rating, wu, wv,
                 p);
}

// SgdStep on a user row read as `value` + `delta` (a row leased from the
// client, Worker::LeaseRows): the step's change of the user row is added to
// `delta` alone.
inline float SgdUpdateLeased(const float* value, float* delta, float* v, float rating, float wu,
                             float wv, const SgdParams& p) {
  return SgdStep([value, delta](int f) { return value[f] + delta[f]; },
                 [delta](int f, float x) { delta[f] += x; }, v, rating, wu, wv, p);
}

// Per-row bias penalty shares: 1 / (number of training ratings of the row).
struct RegWeights {
  std::vector<float> user;
  std::vector<float> item;
};
RegWeights ComputeRegWeights(const MfDataset& data);

// Sets p->lambda_user and p->lambda_item to lambda / (mean ratings per user)
// and lambda / (mean ratings per item) of the training data.
void SetFactorPenalties(const MfDataset& data, double lambda, SgdParams* p);

inline float Clip(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

// lr0 / (clock + 1)^power.
inline double StepSize(double lr0, int64_t clock, double power) {
  return lr0 * std::pow(static_cast<double>(clock) + 1.0, -power);
}

using apps::MinibatchWindow;
using apps::PartOf;
using apps::Range;
using apps::ShuffledOrder;
using apps::Window;

// The user+item-bias baseline: mean + b_u + b_i fitted by a few rounds of
// regularized averages (b_i = sum(r - mean - b_u) / (n_i + reg), then b_u the
// same way).
struct BiasModel {
  double mean = 0;
  std::vector<double> user_bias;
  std::vector<double> item_bias;
  double Predict(uint32_t user, uint32_t item) const;
};
BiasModel FitBiasBaseline(const MfDataset& data, double reg = 5.0, int rounds = 4);

// RMSE over `test` of predict(rating), each prediction clipped to [lo, hi];
// nullopt for an empty test set.
std::optional<double> Rmse(const std::vector<Rating>& test, float lo, float hi,
                           const std::function<double(const Rating&)>& predict);

// The order a clock's ratings are trained in. kData: the window's order in
// the file. kRows: sorted by user id (a user's ratings in file order), so the
// user rows are read in key order, nearly sequentially: a store larger than
// memory then reads each block once per clock instead of once per row.
// kAuto: kRows when the factor tables are larger than the client's cache,
// else kData.
enum class RatingOrder { kAuto, kData, kRows };

// Parses "auto", "data" or "rows"; InvalidArgument naming --order otherwise.
Status ParseRatingOrder(const std::string& text, RatingOrder* out);

// The offsets in `part` (size `size`) of window `w`'s ratings, sorted by the
// raw id of their user (ratings of one user, and of users not in `users`, in
// window order).
void RowOrderOf(const Rating* part, size_t size, Window w, const IdMap& users,
                std::vector<uint32_t>* order);

// The no-parameter-server baseline: the same SGD update rule, data order,
// minibatches and schedule as pace_mf with one worker, single-threaded over
// plain arrays. Used to measure what the parameter server costs.
struct PlainMfOptions {
  int rank = 16;
  bool biases = true;
  double lr = 0.08;
  double lr_power = 1.0;
  double lambda = 4;
  double bias_lambda = 10;
  double minibatch = 1.0;
  int64_t clocks = 20;
  int64_t eval_every = 1;
  uint64_t seed = 1;
  // Factors start uniform in [-init_scale, init_scale).
  double init_scale = 0.01;
  // kRows: each clock's ratings in user order (RowOrderOf); otherwise in
  // file order. One simulated worker only (workers == 1).
  RatingOrder order = RatingOrder::kData;
  // Data-parallel workers to simulate (the step-size search uses the job's
  // num_clients * workers). 1: plain sequential SGD. T > 1: the ratings are
  // split as the job splits them (PartitionByUser into T parts, each clock a
  // MinibatchWindow of each part), and every part starts the clock from the
  // item rows as they were when the clock began; the parts' changes to them
  // are added up at the clock's end. That is what the job's workers do under
  // bsp, and the least staleness any consistency model has (each worker's
  // RowBuffer sees other workers' updates of a clock only at the next one).
  // User rows are never shared (one part per user), as in the job.
  int workers = 1;
  // End the run at the first clock whose train loss is not finite, with a
  // NaN final_test_rmse (the step-size search: a diverged run costs a clock
  // or two instead of all of them).
  bool stop_when_diverged = false;
};

struct MfClockResult {
  int64_t clock = 0;
  double seconds = 0;     // since the start of training
  double train_loss = 0;  // mean squared error of the clock's ratings, before each update
  std::optional<double> test_rmse;
  uint64_t ratings = 0;  // processed in this clock
};

struct PlainMfSummary {
  uint64_t ratings = 0;
  double seconds = 0;  // wall time of the clock loop (updates and evaluations)
  double ratings_per_second = 0;
  std::optional<double> final_test_rmse;
};

// REQUIRES: valid options (rank >= 1, minibatch in (0, 1], clocks >= 1).
PlainMfSummary RunPlainMf(const MfDataset& data, const PlainMfOptions& options,
                          const std::function<void(const MfClockResult&)>& on_clock);

// RunPlainMf's clocks [first_clock, options.clocks) on factor tables the
// caller provides in dense index order (`users`: users x RowWidth floats,
// `items`: items x RowWidth, as MfTrainer::ReadFactors reads them), updated
// in place: from a job's factors as of clock first_clock, what a bsp job of
// options.workers processes of one worker each computes from there, up to
// the order of float additions (the oracle of a resumed job's re-partition).
// REQUIRES: as RunPlainMf.
PlainMfSummary ContinuePlainMf(const MfDataset& data, const PlainMfOptions& options,
                               int64_t first_clock, float* users, float* items,
                               const std::function<void(const MfClockResult&)>& on_clock);

// RunPlainMf with the user and item factor tables in a file-backed shared
// mapping instead of plain memory (MappedFloats: a new file in `dir`, removed
// from the directory at once, advised MADV_RANDOM), so that the OS's demand
// paging serves the rows: inside a memory cgroup only as many pages as fit
// stay in the page cache, the rest are written back and read again from the
// disk. The same updates and results as RunPlainMf. Sets *summary and, if
// `file` is not null, *file to the mapped file's path. IOError if the file
// cannot be created, sized or mapped.
Status RunPlainMfMapped(const MfDataset& data, const PlainMfOptions& options,
                        const std::string& dir,
                        const std::function<void(const MfClockResult&)>& on_clock,
                        PlainMfSummary* summary, std::string* file = nullptr);

// The step-size search of pace_mf when --lr is not given: holds out a
// seeded 10% of the training ratings, runs the plain SGD (RunPlainMf with
// `base`, for `clocks` clocks whatever base.clocks) once per candidate eta0
// on the rest, and returns the candidate with the lowest RMSE on the held-out slice
// (the first on ties; base.lr if there is nothing to hold out; a run that
// diverged never wins). With base.workers = the job's T workers the runs
// simulate the job's stale item updates. With `margin` (candidates
// ascending), candidate k wins only if candidate k + 1 did not diverge
// either, so the last candidate is only a probe. Deterministic: every
// process of a job picks the same value. heldout_rmse gets each candidate's
// held-out RMSE. With max_bytes > 0 the runs hold at most about that many
// bytes (factor tables, ratings, ids): data that would need more is searched
// on a seeded sample of its users (and of its items if their table alone
// would take half), each kept with all its ratings; user_share and
// item_share say what was kept (1: all).
struct StepSizeSearch {
  double lr = 0;
  std::vector<double> candidates;
  std::vector<double> heldout_rmse;
  int64_t clocks = 0;
  double user_share = 1;
  double item_share = 1;
};
StepSizeSearch SearchStepSize(const MfDataset& data, const PlainMfOptions& base,
                              const std::vector<double>& candidates, int64_t clocks,
                              bool margin = false, uint64_t max_bytes = 0);

}  // namespace mf
}  // namespace pace

#endif  // PACE_APPS_MF_MF_MODEL_H_
