#include "apps/mf/mf_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>
#include <utility>

#include "apps/mf/mapped_floats.h"
#include "apps/shared/random.h"

namespace pace {
namespace mf {

RegWeights ComputeRegWeights(const MfDataset& data) {
  RegWeights w;
  w.user.assign(data.users.size(), 0.0f);
  w.item.assign(data.items.size(), 0.0f);
  for (const Rating& r : data.train) {
    w.user[r.user] += 1;
    w.item[r.item] += 1;
  }
  for (float& x : w.user) x = x > 0 ? 1.0f / x : 0.0f;
  for (float& x : w.item) x = x > 0 ? 1.0f / x : 0.0f;
  return w;
}

void SetFactorPenalties(const MfDataset& data, double lambda, SgdParams* p) {
  const double n = static_cast<double>(data.train.size());
  const double per_user = data.users.size() > 0 ? n / data.users.size() : 1.0;
  const double per_item = data.items.size() > 0 ? n / data.items.size() : 1.0;
  p->lambda_user = static_cast<float>(lambda / per_user);
  p->lambda_item = static_cast<float>(lambda / per_item);
}

double BiasModel::Predict(uint32_t user, uint32_t item) const {
  double p = mean;
  if (user != IdMap::kUnknown && user < user_bias.size()) p += user_bias[user];
  if (item != IdMap::kUnknown && item < item_bias.size()) p += item_bias[item];
  return p;
}

BiasModel FitBiasBaseline(const MfDataset& data, double reg, int rounds) {
  BiasModel m;
  m.mean = data.mean;
  m.user_bias.assign(data.users.size(), 0.0);
  m.item_bias.assign(data.items.size(), 0.0);
  std::vector<double> sum;
  std::vector<uint32_t> count;
  for (int round = 0; round < rounds; ++round) {
    sum.assign(m.item_bias.size(), 0.0);
    count.assign(m.item_bias.size(), 0);
    for (const Rating& r : data.train) {
      sum[r.item] += r.value - m.mean - m.user_bias[r.user];
      ++count[r.item];
    }
    for (size_t i = 0; i < sum.size(); ++i) m.item_bias[i] = sum[i] / (count[i] + reg);
    sum.assign(m.user_bias.size(), 0.0);
    count.assign(m.user_bias.size(), 0);
    for (const Rating& r : data.train) {
      sum[r.user] += r.value - m.mean - m.item_bias[r.item];
      ++count[r.user];
    }
    for (size_t u = 0; u < sum.size(); ++u) m.user_bias[u] = sum[u] / (count[u] + reg);
  }
  return m;
}

std::optional<double> Rmse(const std::vector<Rating>& test, float lo, float hi,
                           const std::function<double(const Rating&)>& predict) {
  if (test.empty()) return std::nullopt;
  double sq = 0;
  for (const Rating& r : test) {
    double p = Clip(static_cast<float>(predict(r)), lo, hi);
    double e = r.value - p;
    sq += e * e;
  }
  return std::sqrt(sq / static_cast<double>(test.size()));
}

Status ParseRatingOrder(const std::string& text, RatingOrder* out) {
  if (text == "auto") {
    *out = RatingOrder::kAuto;
  } else if (text == "data") {
    *out = RatingOrder::kData;
  } else if (text == "rows") {
    *out = RatingOrder::kRows;
  } else {
    return Status::InvalidArgument("--order must be auto, data or rows, not '" + text + "'");
  }
  return Status::OK();
}

void RowOrderOf(const Rating* part, size_t size, Window w, const IdMap& users,
                std::vector<uint32_t>* order) {
  // (raw user id, position in the window): sorting the pairs keeps a user's
  // ratings in window order. Users not in the map sort last.
  std::vector<std::pair<uint64_t, uint32_t>> keyed(w.count);
  for (size_t j = 0; j < w.count; ++j) {
    const size_t k = w.start + j;
    const uint32_t user = part[k < size ? k : k - size].user;
    keyed[j] = {user == IdMap::kUnknown ? UINT64_MAX : users.raw(user), static_cast<uint32_t>(j)};
  }
  std::sort(keyed.begin(), keyed.end());
  order->resize(w.count);
  for (size_t j = 0; j < w.count; ++j) {
    const size_t k = w.start + keyed[j].second;
    (*order)[j] = static_cast<uint32_t>(k < size ? k : k - size);
  }
}

namespace {

// Fills out[0, n) with uniform values in [-scale, scale).
void InitFactors(float* out, size_t n, double scale, uint64_t seed) {
  apps::Rng rng(seed);
  for (size_t k = 0; k < n; ++k) out[k] = static_cast<float>((2 * rng.Uniform() - 1) * scale);
}

}  // namespace

PlainMfSummary ContinuePlainMf(const MfDataset& data, const PlainMfOptions& o, int64_t first_clock,
                               float* users, float* items,
                               const std::function<void(const MfClockResult&)>& on_clock) {
  using Clock = std::chrono::steady_clock;
  const uint32_t width = RowWidth(o.rank, o.biases);
  const size_t item_floats = size_t{data.items.size()} * width;
  // With simulated workers: the job's parts of the training ratings.
  const uint32_t parts = static_cast<uint32_t>(std::max(1, o.workers));
  MfDataset parted;
  std::vector<size_t> offsets;
  if (parts > 1) {
    parted.train = data.train;
    parted.users = data.users;
    offsets = PartitionByUser(parts, &parted);
  }
  const RegWeights reg = ComputeRegWeights(data);
  SgdParams p;
  p.rank = o.rank;
  p.biases = o.biases;
  p.mean = static_cast<float>(data.mean);
  SetFactorPenalties(data, o.lambda, &p);
  p.bias_lambda = static_cast<float>(o.bias_lambda);
  const std::vector<float> zero_row(width, 0.0f);
  auto predict = [&](const Rating& r) -> double {
    const float* u = r.user == IdMap::kUnknown ? zero_row.data() : &users[size_t{r.user} * width];
    const float* v = r.item == IdMap::kUnknown ? zero_row.data() : &items[size_t{r.item} * width];
    return Predict(u, v, p);
  };

  std::vector<uint32_t> order;     // RatingOrder::kRows only
  std::vector<float> start, work;  // simulated workers only
  std::vector<uint8_t> touched(parts > 1 ? data.items.size() : 0, 0);
  std::vector<uint32_t> touched_rows;

  PlainMfSummary summary;
  const auto start_time = Clock::now();
  for (int64_t clock = first_clock; clock < o.clocks; ++clock) {
    p.lr = static_cast<float>(StepSize(o.lr, clock, o.lr_power));
    double sq = 0;
    size_t count = 0;
    if (parts == 1) {
      Window w = MinibatchWindow(data.train.size(), o.minibatch, clock);
      if (o.order == RatingOrder::kRows) {
        RowOrderOf(data.train.data(), data.train.size(), w, data.users, &order);
      }
      for (size_t j = 0; j < w.count; ++j) {
        const Rating& r = o.order == RatingOrder::kRows
                              ? data.train[order[j]]
                              : data.train[(w.start + j) % data.train.size()];
        float e = SgdUpdate(&users[size_t{r.user} * width], &items[size_t{r.item} * width], r.value,
                            reg.user[r.user], reg.item[r.item], p);
        sq += static_cast<double>(e) * e;
      }
      count = w.count;
    } else {
      // Each part updates `work`, a copy of the clock's starting item rows
      // (`start`); its changes to the rows it touched are then added to
      // `items` and those rows of `work` reset, for the next part.
      start.assign(items, items + item_floats);
      work = start;
      for (uint32_t g = 0; g < parts; ++g) {
        const size_t begin = offsets[g], size = offsets[g + 1] - offsets[g];
        if (size == 0) continue;
        Window w = MinibatchWindow(size, o.minibatch, clock);
        for (size_t j = 0; j < w.count; ++j) {
          const Rating& r = parted.train[begin + (w.start + j) % size];
          if (!touched[r.item]) {
            touched[r.item] = 1;
            touched_rows.push_back(r.item);
          }
          float e = SgdUpdate(&users[size_t{r.user} * width], &work[size_t{r.item} * width],
                              r.value, reg.user[r.user], reg.item[r.item], p);
          sq += static_cast<double>(e) * e;
        }
        for (uint32_t i : touched_rows) {
          for (size_t k = size_t{i} * width; k < size_t{i + 1} * width; ++k) {
            items[k] += work[k] - start[k];
            work[k] = start[k];
          }
          touched[i] = 0;
        }
        touched_rows.clear();
        count += w.count;
      }
    }
    summary.ratings += count;
    MfClockResult res;
    res.clock = clock;
    res.ratings = count;
    res.train_loss = sq / static_cast<double>(std::max<size_t>(count, 1));
    if (o.stop_when_diverged && !std::isfinite(res.train_loss)) {
      summary.final_test_rmse = std::nan("");
      break;
    }
    if ((clock + 1) % o.eval_every == 0 || clock + 1 == o.clocks) {
      res.test_rmse = Rmse(data.test, data.min_rating, data.max_rating, predict);
      if (clock + 1 == o.clocks) summary.final_test_rmse = res.test_rmse;
    }
    res.seconds = std::chrono::duration<double>(Clock::now() - start_time).count();
    if (on_clock) on_clock(res);
  }
  summary.seconds = std::chrono::duration<double>(Clock::now() - start_time).count();
  if (summary.seconds > 0) {
    summary.ratings_per_second = static_cast<double>(summary.ratings) / summary.seconds;
  }
  return summary;
}

namespace {

// The plain SGD over factor tables the caller provides: `users` (users x
// width floats) and `items` (items x width), initialized here.
PlainMfSummary RunPlainMfOn(const MfDataset& data, const PlainMfOptions& o, float* users,
                            float* items,
                            const std::function<void(const MfClockResult&)>& on_clock) {
  const uint32_t width = RowWidth(o.rank, o.biases);
  InitFactors(users, size_t{data.users.size()} * width, o.init_scale, apps::DeriveSeed(o.seed, 1));
  InitFactors(items, size_t{data.items.size()} * width, o.init_scale, apps::DeriveSeed(o.seed, 2));
  return ContinuePlainMf(data, o, 0, users, items, on_clock);
}

}  // namespace

PlainMfSummary RunPlainMf(const MfDataset& data, const PlainMfOptions& o,
                          const std::function<void(const MfClockResult&)>& on_clock) {
  const uint32_t width = RowWidth(o.rank, o.biases);
  std::vector<float> users(size_t{data.users.size()} * width);
  std::vector<float> items(size_t{data.items.size()} * width);
  return RunPlainMfOn(data, o, users.data(), items.data(), on_clock);
}

Status RunPlainMfMapped(const MfDataset& data, const PlainMfOptions& o, const std::string& dir,
                        const std::function<void(const MfClockResult&)>& on_clock,
                        PlainMfSummary* summary, std::string* file) {
  const uint32_t width = RowWidth(o.rank, o.biases);
  const size_t user_floats = size_t{data.users.size()} * width;
  const size_t item_floats = size_t{data.items.size()} * width;
  StatusOr<std::unique_ptr<MappedFloats>> mapped =
      MappedFloats::Create(dir, "pace_mf-baseline-factors", user_floats + item_floats);
  if (!mapped.ok()) return mapped.status();
  if (file != nullptr) *file = (*mapped)->path();
  float* tables = (*mapped)->data();
  *summary = RunPlainMfOn(data, o, tables, tables + user_floats, on_clock);
  return Status::OK();
}

namespace {

// Bytes the search's runs hold for `users` users, `items` items and
// `ratings` ratings: the factor tables, the ratings (twice with simulated
// workers: their partitioned copy), the ids and per-row weights.
uint64_t SearchBytes(uint64_t users, uint64_t items, uint64_t ratings, uint32_t width,
                     bool workers) {
  return (users + items) * (uint64_t{width} * sizeof(float) + 64) +
         ratings * sizeof(Rating) * (workers ? 2 : 1);
}

// The ratings of a seeded sample of the users (and, if the item table alone
// would take half of `max_bytes`, of the items) that fits `max_bytes`, with
// dense indices of its own: users and items keep their ratings, so the
// ratings per row, which set how large a step SGD survives, stay those of
// the full data. A pure function of the data.
MfDataset SampleForSearch(const MfDataset& data, const PlainMfOptions& o, uint64_t max_bytes,
                          double* user_share, double* item_share) {
  const uint32_t width = RowWidth(o.rank, o.biases);
  const bool workers = o.workers > 1;
  const uint64_t per_item = SearchBytes(0, 1, 0, width, workers);
  *item_share = std::min(
      1.0, static_cast<double>(max_bytes / 2) / static_cast<double>(per_item * data.items.size()));
  const double items_kept = *item_share * data.items.size();
  const double ratings_per_user = static_cast<double>(data.train.size()) /
                                  std::max<uint32_t>(1, data.users.size()) * *item_share;
  const double per_user = static_cast<double>(SearchBytes(1, 0, 0, width, workers)) +
                          ratings_per_user * sizeof(Rating) * (workers ? 2 : 1);
  const double room = static_cast<double>(max_bytes) - items_kept * per_item;
  *user_share = std::clamp(room / (per_user * std::max<uint32_t>(1, data.users.size())), 0.0, 1.0);
  const uint64_t seed = apps::DeriveSeed(o.seed, 0x5A3F);
  std::vector<uint32_t> user_index(data.users.size(), IdMap::kUnknown);
  std::vector<uint32_t> item_index(data.items.size(), IdMap::kUnknown);
  MfDataset out;
  for (uint32_t u = 0; u < data.users.size(); ++u) {
    if (apps::HashUniform(seed, u, 1) < *user_share) user_index[u] = out.users.Intern(u);
  }
  for (uint32_t i = 0; i < data.items.size(); ++i) {
    if (apps::HashUniform(seed, i, 2) < *item_share) item_index[i] = out.items.Intern(i);
  }
  out.users.Compact();
  out.items.Compact();
  for (const Rating& r : data.train) {
    if (user_index[r.user] == IdMap::kUnknown || item_index[r.item] == IdMap::kUnknown) continue;
    out.train.push_back(Rating{user_index[r.user], item_index[r.item], r.value});
  }
  out.mean = data.mean;
  out.min_rating = data.min_rating;
  out.max_rating = data.max_rating;
  return out;
}

}  // namespace

StepSizeSearch SearchStepSize(const MfDataset& data, const PlainMfOptions& base,
                              const std::vector<double>& candidates, int64_t clocks, bool margin,
                              uint64_t max_bytes) {
  StepSizeSearch out;
  out.lr = base.lr;
  out.candidates = candidates;
  const uint32_t width = RowWidth(base.rank, base.biases);
  const MfDataset* from = &data;
  MfDataset sample;
  if (max_bytes > 0 && SearchBytes(data.users.size(), data.items.size(), data.train.size(), width,
                                   base.workers > 1) > max_bytes) {
    sample = SampleForSearch(data, base, max_bytes, &out.user_share, &out.item_share);
    from = &sample;
  }
  MfDataset fit;  // ids, mean and range as in the run it stands for
  fit.users = from->users;
  fit.items = from->items;
  fit.mean = from->mean;
  fit.min_rating = from->min_rating;
  fit.max_rating = from->max_rating;
  const uint64_t seed = apps::DeriveSeed(base.seed, 0x57E9);
  for (size_t i = 0; i < from->train.size(); ++i) {
    if (apps::HashUniform(seed, i, 0) < 0.1) {
      fit.test.push_back(from->train[i]);
    } else {
      fit.train.push_back(from->train[i]);
    }
  }
  sample = MfDataset();  // fit holds what the runs need
  if (fit.test.empty() || fit.train.empty() || candidates.empty()) return out;
  PlainMfOptions o = base;
  // Not capped by base.clocks: the choice must not depend on --clocks, or
  // a resumed run (other --clocks) would pick another eta0 than its job.
  o.clocks = std::max<int64_t>(1, clocks);
  o.eval_every = o.clocks;
  o.stop_when_diverged = true;
  out.clocks = o.clocks;
  for (double lr : candidates) {
    o.lr = lr;
    const PlainMfSummary s = RunPlainMf(fit, o, nullptr);
    out.heldout_rmse.push_back(s.final_test_rmse.value_or(INFINITY));
  }
  double best = INFINITY;
  for (size_t k = 0; k < candidates.size(); ++k) {
    const double rmse = out.heldout_rmse[k];
    if (!std::isfinite(rmse)) continue;  // a diverged run (NaN) never wins
    if (margin && (k + 1 == candidates.size() || !std::isfinite(out.heldout_rmse[k + 1]))) {
      continue;
    }
    if (rmse < best) {
      best = rmse;
      out.lr = candidates[k];
    }
  }
  return out;
}

}  // namespace mf
}  // namespace pace
