// pacectl's reads of the past: --at=CKPT|CLOCK (get, scan, export on a
// checkpoint) and diff CKPT_A CKPT_B TABLE.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#include "common/hash.h"
#include "common/row.h"
#include "tools/ctl/commands.h"
#include "tools/ctl/json_writer.h"
#include "tools/ctl/value_format.h"

namespace pace::ctl {

namespace fs = std::filesystem;

namespace {

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The checkpoint of shard clock `clock` under DATA_DIR/checkpoints: one whose
// manifest has that shard clock, or else one named clock-<clock>.
Status FindCheckpointOfClock(const std::string& data_dir, Version clock, std::string* found) {
  const std::string dir = (fs::path(data_dir) / "checkpoints").string();
  std::vector<std::string> named;
  std::vector<Version> clocks;
  std::error_code ec;
  std::vector<std::string> candidates;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    candidates.push_back(it->path().string());
  }
  std::sort(candidates.begin(), candidates.end());
  char name[64];
  std::snprintf(name, sizeof(name), "clock-%012lld", static_cast<long long>(clock));
  for (const std::string& c : candidates) {
    CheckpointManifest m;
    if (!ShardStore::ReadCheckpointManifest(c, &m).ok()) continue;
    if (m.shard_clock == clock) {
      *found = c;
      return Status::OK();
    }
    if (fs::path(c).filename() == name) named.push_back(c);
    clocks.push_back(m.shard_clock);
  }
  if (!named.empty()) {
    *found = named[0];
    return Status::OK();
  }
  std::string have;
  for (Version c : clocks) have += (have.empty() ? "" : ", ") + std::to_string(c);
  return Status::NotFound("no checkpoint of shard clock " + std::to_string(clock) + " under " +
                          dir +
                          (have.empty() ? " (none there)" : " (shard clocks there: " + have + ")"));
}

// The change from row value `a` to `b` of table `t`: L2 norm and largest
// absolute element difference.
void RowChange(const TableSchema& t, std::string_view a, std::string_view b, double* l2,
               double* max_abs) {
  double sq = 0, mx = 0;
  auto add = [&](double d) {
    sq += d * d;
    mx = std::max(mx, std::fabs(d));
  };
  if (t.kind == RowKind::kDense) {
    for (uint32_t i = 0; i < t.width; ++i) {
      add(DenseElementAsDouble(t.type, b.data(), i) - DenseElementAsDouble(t.type, a.data(), i));
    }
  } else {
    const size_t esize = ElementSize(t.type);
    const uint32_t na = SparseCount(a), nb = SparseCount(b);
    auto col = [](std::string_view r, uint32_t i) {
      uint32_t c;
      std::memcpy(&c, r.data() + 4 + 4 * size_t{i}, 4);
      return c;
    };
    auto val = [&](std::string_view r, uint32_t n, uint32_t i) {
      return DenseElementAsDouble(t.type, r.data() + 4 + 4 * size_t{n} + esize * i, 0);
    };
    uint32_t i = 0, j = 0;
    while (i < na || j < nb) {
      if (j == nb || (i < na && col(a, i) < col(b, j))) {
        add(-val(a, na, i++));
      } else if (i == na || col(b, j) < col(a, i)) {
        add(val(b, nb, j++));
      } else {
        add(val(b, nb, j++) - val(a, na, i++));
      }
    }
  }
  *l2 = std::sqrt(sq);
  *max_abs = mx;
}

struct Side {
  std::string dirs;
  OfflineSet set;
  TableSchema table;
  Version shard_clock = 0;

  Status Open(const CtlOptions& base, const std::string& list, const std::string& name) {
    CtlOptions o = base;
    o.data_dir = list;
    dirs = list;
    RETURN_IF_ERROR(OpenOfflineSet(o, &set));
    ASSIGN_OR_RETURN(table, FindTableOnAll(set, name));
    shard_clock = set.shards[0]->ShardClock();
    for (const ShardStore* s : set.shards) shard_clock = std::min(shard_clock, s->ShardClock());
    return Status::OK();
  }
  // The row's value (its initializer's if never written).
  Status Get(uint64_t row, std::string* v) const {
    const uint32_t n = static_cast<uint32_t>(set.shards.size());
    return set.shards[n == 1 ? 0 : ShardOf(table.id, row, n)]->Get(table.id, row, v);
  }
};

struct Change {
  uint64_t row;
  double l2;
  double max_abs;
};

void PrintDiff(const CtlContext& ctx, const Side& a, const Side& b, uint64_t compared,
               double total_l2, size_t changed, const std::vector<Change>& top) {
  if (ctx.options.json) {
    JsonWriter w(&ctx.out);
    w.BeginObject();
    w.Member("table", a.table.name);
    for (const Side* s : {&a, &b}) {
      w.Key(s == &a ? "a" : "b");
      w.BeginObject();
      w.Member("data_dir", s->dirs);
      w.MemberInt("shard_clock", s->shard_clock);
      w.EndObject();
    }
    w.MemberUint("rows_compared", compared);
    w.MemberUint("rows_changed", changed);
    w.Key("l2");
    w.Double(total_l2);
    w.Key("top");
    w.BeginArray();
    for (const Change& c : top) {
      w.BeginObject();
      w.MemberUint("row", c.row);
      w.Key("l2");
      w.Double(c.l2);
      w.Key("max_abs");
      w.Double(c.max_abs);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    ctx.out << '\n';
    return;
  }
  ctx.out << "diff " << a.table.name << ": " << a.dirs << " (shard clock " << a.shard_clock
          << ") -> " << b.dirs << " (shard clock " << b.shard_clock << "): " << compared
          << " rows compared, " << changed << " changed, L2 norm of the change "
          << DoubleText(total_l2) << "\n";
  if (top.empty()) return;
  std::vector<std::vector<std::string>> rows = {{"row", "l2", "max_abs"}};
  for (const Change& c : top) {
    rows.push_back({std::to_string(c.row), DoubleText(c.l2), DoubleText(c.max_abs)});
  }
  ctx.out << AlignColumns(rows);
}

}  // namespace

Status ResolveAt(CtlOptions* options) {
  const std::string at = options->at;
  if (AllDigits(at)) {
    if (options->data_dir.empty()) {
      return Status::InvalidArgument("--at=" + at +
                                     " (a shard clock) needs --data_dir: the checkpoint of that "
                                     "clock is looked up in DATA_DIR/checkpoints");
    }
    std::string dirs;
    for (const std::string& d : SplitList(options->data_dir)) {
      std::string found;
      RETURN_IF_ERROR(FindCheckpointOfClock(d, std::stoll(at), &found));
      dirs += (dirs.empty() ? "" : ",") + found;
    }
    options->data_dir = dirs;
    return Status::OK();
  }
  if (!options->data_dir.empty()) {
    return Status::InvalidArgument("--at=CKPT names the checkpoint(s) to read: drop --data_dir");
  }
  for (const std::string& d : SplitList(at)) {
    CheckpointManifest m;
    Status s = ShardStore::ReadCheckpointManifest(d, &m);
    if (s.IsNotFound())
      return Status::NotFound("--at=" + d + " is not a checkpoint: " + s.message());
    RETURN_IF_ERROR(s);
  }
  options->data_dir = at;
  return Status::OK();
}

Status OfflineDiff(const CtlContext& ctx, const Args& args) {
  Side a, b;
  RETURN_IF_ERROR(a.Open(ctx.options, args[0], args[2]));
  RETURN_IF_ERROR(b.Open(ctx.options, args[1], args[2]));
  if (a.table.kind != b.table.kind || a.table.type != b.table.type ||
      a.table.width != b.table.width) {
    return Status::InvalidArgument("table '" + args[2] + "' has another shape in " + args[0] +
                                   " than in " + args[1]);
  }
  // A's written rows in memory; B's streamed past them.
  std::unordered_map<uint64_t, std::string> a_rows;
  for (const ShardStore* s : a.set.shards) {
    RETURN_IF_ERROR(s->Scan(a.table.id, 0, [&](uint64_t row, std::string_view v) {
      a_rows.emplace(row, std::string(v));
      return true;
    }));
  }
  std::vector<Change> changes;
  uint64_t compared = 0;
  double sq = 0;
  Status inner;
  auto compare = [&](uint64_t row, std::string_view va, std::string_view vb) {
    Change c{row, 0, 0};
    RowChange(a.table, va, vb, &c.l2, &c.max_abs);
    ++compared;
    sq += c.l2 * c.l2;
    if (c.max_abs != 0 || std::isnan(c.l2)) changes.push_back(c);
  };
  std::string other;
  for (const ShardStore* s : b.set.shards) {
    RETURN_IF_ERROR(s->Scan(b.table.id, 0, [&](uint64_t row, std::string_view v) {
      auto it = a_rows.find(row);
      if (it == a_rows.end()) {
        inner = a.Get(row, &other);
        if (!inner.ok()) return false;
        compare(row, other, v);
      } else {
        compare(row, it->second, v);
        a_rows.erase(it);
      }
      return true;
    }));
    RETURN_IF_ERROR(inner);
  }
  for (const auto& [row, v] : a_rows) {
    RETURN_IF_ERROR(b.Get(row, &other));
    compare(row, v, other);
  }
  const size_t changed = changes.size();
  const size_t k = ctx.options.top == 0 ? changed : std::min<size_t>(ctx.options.top, changed);
  std::partial_sort(changes.begin(), changes.begin() + k, changes.end(),
                    [](const Change& x, const Change& y) {
                      // NaN (a diverged row) first.
                      const double kx = std::isnan(x.l2) ? HUGE_VAL : x.l2;
                      const double ky = std::isnan(y.l2) ? HUGE_VAL : y.l2;
                      return kx != ky ? kx > ky : x.row < y.row;
                    });
  changes.resize(k);
  PrintDiff(ctx, a, b, compared, std::sqrt(sq), changed, changes);
  return Status::OK();
}

}  // namespace pace::ctl
