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
//     + lambda * (sum_u |U_u|^2 + sum_i |V_i|^2) + bias_lambda * (sum b_u^2 + sum b_i^2).
// SGD visits one rating at a time, so each step carries 1/n_u of user u's
// penalty and 1/n_i of item i's (n = the row's number of training ratings):
// users and items with few ratings are regularized relatively more, which is
// what keeps sparse data (e.g. InstEval) from overfitting. Step size
// lr_t = lr / sqrt(t), t = clock + 1.
//
// Everything here is a plain function of its inputs; thread-compatible.
#ifndef PACE_APPS_MF_MF_MODEL_H_
#define PACE_APPS_MF_MF_MODEL_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
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
  float lambda = 10.0f;
  float bias_lambda = 5.0f;
};

inline uint32_t RowWidth(int rank, bool biases) {
  return static_cast<uint32_t>(rank) + (biases ? 1u : 0u);
}

// The prediction for a user row `u` and an item row `v` (before clipping).
inline float Predict(const float* u, const float* v, const SgdParams& p) {
  float dot = 0;
  for (int f = 0; f < p.rank; ++f) dot += u[f] * v[f];
  if (p.biases) dot += p.mean + u[p.rank] + v[p.rank];
  return dot;
}

// One SGD step on one rating; updates both rows in place and returns the
// error (rating - prediction) before the step. `wu` and `wv` are the rows'
// penalty shares 1/n_u and 1/n_i (see RegWeights).
inline float SgdUpdate(float* u, float* v, float rating, float wu, float wv, const SgdParams& p) {
  const float e = rating - Predict(u, v, p);
  const float lr = p.lr, lu = p.lambda * wu, lv = p.lambda * wv;
  for (int f = 0; f < p.rank; ++f) {
    const float uf = u[f], vf = v[f];
    u[f] = uf + lr * (e * vf - lu * uf);
    v[f] = vf + lr * (e * uf - lv * vf);
  }
  if (p.biases) {
    u[p.rank] += lr * (e - p.bias_lambda * wu * u[p.rank]);
    v[p.rank] += lr * (e - p.bias_lambda * wv * v[p.rank]);
  }
  return e;
}

// Per-row penalty shares: 1 / (number of training ratings of the row).
struct RegWeights {
  std::vector<float> user;
  std::vector<float> item;
};
RegWeights ComputeRegWeights(const MfDataset& data);

inline float Clip(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

// lr0 / sqrt(clock + 1).
inline double StepSize(double lr0, int64_t clock) {
  return lr0 / std::sqrt(static_cast<double>(clock) + 1.0);
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

// The no-parameter-server baseline: the same SGD update rule, data order,
// minibatches and schedule as pace_mf with one worker, single-threaded over
// plain arrays. Used to measure what the parameter server costs.
struct PlainMfOptions {
  int rank = 16;
  bool biases = true;
  double lr = 0.02;
  double lambda = 10;
  double bias_lambda = 5;
  double minibatch = 1.0;
  int64_t clocks = 20;
  int64_t eval_every = 1;
  uint64_t seed = 1;
  // Factors start uniform in [-init_scale, init_scale).
  double init_scale = 0.1;
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

}  // namespace mf
}  // namespace pace

#endif  // PACE_APPS_MF_MF_MODEL_H_
