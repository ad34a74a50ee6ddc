// Randomized model test: random tables and batches go to a ShardStore and to
// a simple in-memory model; both must agree after every batch and after
// every reopen. Integer tables are compared exactly, floats with a tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>

#include "common/row.h"
#include "storage/shard_store.h"
#include "storage/testing/storage_test_util.h"

namespace pace {
namespace {

// The model of one row: the sum of its deltas. Integers are summed as uint64
// (wrapping like two's complement), floats as long double.
struct ModelRow {
  std::vector<uint64_t> ints;       // dense integer
  std::vector<long double> floats;  // dense float
  std::map<uint32_t, uint64_t> sparse_ints;
  std::map<uint32_t, long double> sparse_floats;
};

struct ModelTable {
  TableSchema schema;
  std::map<uint64_t, ModelRow> rows;  // rows ever written
};

template <typename T>
T Read(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// The element of type `t` at `p`, widened.
uint64_t ReadInt(ElementType t, const char* p) {
  return t == ElementType::kI32 ? static_cast<uint64_t>(static_cast<int64_t>(Read<int32_t>(p)))
                                : static_cast<uint64_t>(Read<int64_t>(p));
}
long double ReadFloat(ElementType t, const char* p) {
  return t == ElementType::kF32 ? Read<float>(p) : Read<double>(p);
}
bool IntEqual(ElementType t, uint64_t a, uint64_t b) {
  return t == ElementType::kI32 ? static_cast<uint32_t>(a) == static_cast<uint32_t>(b) : a == b;
}
bool FloatClose(ElementType t, long double got, long double want) {
  long double tol = (t == ElementType::kF32 ? 1e-4L : 1e-10L) * (1 + std::fabs(want));
  return std::fabs(got - want) <= tol;
}

class ModelTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    rng_.seed(GetParam());
    num_clients_ = 1 + rng_() % 3;
    applied_.assign(num_clients_, 0);
    Reopen();
    int num_tables = 3 + rng_() % 4;
    for (int i = 0; i < num_tables; ++i) CreateRandomTable(i);
  }

  ShardStoreOptions Opts() const {
    ShardStoreOptions o;
    o.num_clients = num_clients_;
    o.block_cache_mb = 4;
    o.write_buffer_mb = 1;
    return o;
  }

  void Reopen() {
    store_.reset();
    Status st = ShardStore::Open(Opts(), tmp_.Sub("store"), &store_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  void CreateRandomTable(int i) {
    static constexpr ElementType kTypes[] = {ElementType::kF32, ElementType::kF64,
                                             ElementType::kI32, ElementType::kI64};
    TableSchema s;
    s.name = "t" + std::to_string(i);
    s.kind = rng_() % 2 ? RowKind::kDense : RowKind::kSparse;
    s.type = kTypes[rng_() % 4];
    s.width = s.kind == RowKind::kDense ? 1 + rng_() % 12 : (rng_() % 3 == 0 ? 0 : 1 + rng_() % 40);
    if (s.kind == RowKind::kDense && !IsIntegral(s.type) && rng_() % 2) {
      s.init = rng_() % 2 ? Initializer{InitKind::kUniform, -0.5, 0.5, rng_()}
                          : Initializer{InitKind::kNormal, 0.1, 0.2, rng_()};
    }
    TableSchema created;
    Status st = store_->CreateTable(s, &created);
    ASSERT_TRUE(st.ok()) << st.ToString();
    tables_.push_back(ModelTable{created, {}});
  }

  uint64_t RandomRow() { return rng_() % 8 == 0 ? rng_() : rng_() % 40; }

  uint64_t RandomInt() {
    switch (rng_() % 4) {
      case 0:
        return static_cast<uint64_t>(static_cast<int64_t>(rng_() % 2001) - 1000);
      case 1:
        return rng_();  // large: exercises wrapping
      case 2:
        return 0;
      default:
        return rng_() % 7;
    }
  }

  long double RandomFloat() { return std::uniform_real_distribution<double>(-1, 1)(rng_); }

  // Appends the bytes of element `v` of type t to *out and returns the value
  // the store will add (after narrowing).
  void PutInt(ElementType t, uint64_t v, std::string* out, uint64_t* added) {
    if (t == ElementType::kI32) {
      int32_t x = static_cast<int32_t>(static_cast<uint32_t>(v));
      out->append(reinterpret_cast<const char*>(&x), 4);
      *added = static_cast<uint64_t>(static_cast<int64_t>(x));
    } else {
      int64_t x = static_cast<int64_t>(v);
      out->append(reinterpret_cast<const char*>(&x), 8);
      *added = v;
    }
  }
  void PutFloat(ElementType t, long double v, std::string* out, long double* added) {
    if (t == ElementType::kF32) {
      float x = static_cast<float>(v);
      out->append(reinterpret_cast<const char*>(&x), 4);
      *added = x;
    } else {
      double x = static_cast<double>(v);
      out->append(reinterpret_cast<const char*>(&x), 8);
      *added = x;
    }
  }

  // A random valid delta for table `ti`, and its effect on a model row.
  std::string RandomDelta(const ModelTable& t, ModelRow* effect) {
    const TableSchema& s = t.schema;
    const bool integral = IsIntegral(s.type);
    std::string bytes;
    if (s.kind == RowKind::kDense) {
      effect->ints.assign(s.width, 0);
      effect->floats.assign(s.width, 0);
      for (uint32_t c = 0; c < s.width; ++c) {
        if (integral) {
          PutInt(s.type, RandomInt(), &bytes, &effect->ints[c]);
        } else {
          PutFloat(s.type, RandomFloat(), &bytes, &effect->floats[c]);
        }
      }
      return bytes;
    }
    uint32_t bound = s.width == 0 ? UINT32_MAX : s.width;
    std::set<uint32_t> cols;
    int n = rng_() % 6;
    for (int i = 0; i < n; ++i) {
      cols.insert(rng_() % 3 == 0 ? static_cast<uint32_t>(rng_() % bound)
                                  : static_cast<uint32_t>(rng_() % std::min(bound, 8u)));
    }
    uint32_t count = static_cast<uint32_t>(cols.size());
    bytes.append(reinterpret_cast<const char*>(&count), 4);
    for (uint32_t c : cols) bytes.append(reinterpret_cast<const char*>(&c), 4);
    for (uint32_t c : cols) {
      if (integral) {
        PutInt(s.type, RandomInt(), &bytes, &effect->sparse_ints[c]);
      } else {
        PutFloat(s.type, rng_() % 5 == 0 ? 0.0L : RandomFloat(), &bytes, &effect->sparse_floats[c]);
      }
    }
    return bytes;
  }

  static void Apply(const ModelRow& d, ModelRow* row) {
    if (row->ints.size() < d.ints.size()) row->ints.resize(d.ints.size(), 0);
    if (row->floats.size() < d.floats.size()) row->floats.resize(d.floats.size(), 0);
    for (size_t i = 0; i < d.ints.size(); ++i) row->ints[i] += d.ints[i];
    for (size_t i = 0; i < d.floats.size(); ++i) row->floats[i] += d.floats[i];
    for (const auto& [c, v] : d.sparse_ints) row->sparse_ints[c] += v;
    for (const auto& [c, v] : d.sparse_floats) row->sparse_floats[c] += v;
  }

  // Checks one row's bytes from the store against the model (`row` is null
  // for a never-written row).
  void CheckRow(const TableSchema& s, uint64_t row_id, const ModelRow* row, std::string_view got) {
    SCOPED_TRACE(DescribeSchema(s) + " row " + std::to_string(row_id));
    Status valid = ValidateRow(RowFormat::Of(s), got);
    ASSERT_TRUE(valid.ok()) << valid.ToString();
    const size_t es = ElementSize(s.type);
    const bool integral = IsIntegral(s.type);
    if (s.kind == RowKind::kDense) {
      for (uint32_t c = 0; c < s.width; ++c) {
        const char* p = got.data() + c * es;
        if (integral) {
          uint64_t want = row != nullptr && !row->ints.empty() ? row->ints[c] : 0;
          ASSERT_TRUE(IntEqual(s.type, ReadInt(s.type, p), want)) << "col " << c;
        } else {
          long double want = InitialValue(s, row_id, c);
          if (s.type == ElementType::kF32) want = static_cast<float>(want);
          if (row != nullptr && !row->floats.empty()) want += row->floats[c];
          ASSERT_TRUE(FloatClose(s.type, ReadFloat(s.type, p), want))
              << "col " << c << ": " << static_cast<double>(ReadFloat(s.type, p)) << " vs "
              << static_cast<double>(want);
        }
      }
      return;
    }
    uint32_t n = SparseCount(got);
    const char* cols = got.data() + 4;
    const char* vals = cols + 4 * static_cast<size_t>(n);
    std::map<uint32_t, const char*> entries;
    for (uint32_t i = 0; i < n; ++i) entries[Read<uint32_t>(cols + 4 * i)] = vals + es * i;
    if (integral) {
      std::map<uint32_t, uint64_t> want;
      if (row != nullptr) {
        for (const auto& [c, v] : row->sparse_ints) {
          if (!IntEqual(s.type, v, 0)) want[c] = v;
        }
      }
      ASSERT_EQ(entries.size(), want.size());
      for (const auto& [c, v] : want) {
        ASSERT_EQ(entries.count(c), 1u) << "col " << c;
        ASSERT_TRUE(IntEqual(s.type, ReadInt(s.type, entries[c]), v)) << "col " << c;
      }
      return;
    }
    for (const auto& [c, p] : entries) {
      ASSERT_NE(ReadFloat(s.type, p), 0) << "stored zero at col " << c;
    }
    std::set<uint32_t> all;
    for (const auto& [c, p] : entries) all.insert(c);
    if (row != nullptr) {
      for (const auto& [c, v] : row->sparse_floats) all.insert(c);
    }
    for (uint32_t c : all) {
      long double g = entries.count(c) ? ReadFloat(s.type, entries[c]) : 0;
      long double w = 0;
      if (row != nullptr && row->sparse_floats.count(c)) w = row->sparse_floats.at(c);
      ASSERT_TRUE(FloatClose(s.type, g, w)) << "col " << c;
    }
  }

  void CheckRows(const ModelTable& t, const std::vector<uint64_t>& rows) {
    std::vector<std::string> values;
    Status st = store_->MultiGet(t.schema.id, rows, &values);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(values.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      auto it = t.rows.find(rows[i]);
      CheckRow(t.schema, rows[i], it == t.rows.end() ? nullptr : &it->second, values[i]);
      std::string single;
      ASSERT_TRUE(store_->Get(t.schema.id, rows[i], &single).ok());
      ASSERT_EQ(single, values[i]);
    }
  }

  void CheckAll() {
    ASSERT_EQ(store_->AppliedClocks(), applied_);
    for (const ModelTable& t : tables_) {
      std::vector<uint64_t> scanned;
      Status st = store_->Scan(t.schema.id, 0, [&](uint64_t row, std::string_view v) {
        auto it = t.rows.find(row);
        EXPECT_NE(it, t.rows.end()) << "scan found unwritten row " << row;
        if (it != t.rows.end()) CheckRow(t.schema, row, &it->second, v);
        scanned.push_back(row);
        return true;
      });
      ASSERT_TRUE(st.ok()) << st.ToString();
      std::vector<uint64_t> want;
      for (const auto& [row, r] : t.rows) want.push_back(row);
      ASSERT_EQ(scanned, want) << t.schema.name;
      want.push_back(1000);  // never written
      CheckRows(t, want);
    }
  }

  // One random step: usually a valid batch, sometimes a duplicate, a gap or
  // an invalid batch, which must change nothing.
  void Step() {
    ClientId client = rng_() % num_clients_;
    int kind = rng_() % 20;
    std::vector<std::string> storage;
    std::vector<RowDelta> deltas;
    std::vector<std::pair<size_t, ModelRow>> effects;  // (table index, effect) per delta
    int n = rng_() % 25;
    storage.reserve(n + 1);
    for (int i = 0; i < n; ++i) {
      size_t ti = rng_() % tables_.size();
      ModelRow effect;
      storage.push_back(RandomDelta(tables_[ti], &effect));
      deltas.push_back({tables_[ti].schema.id, RandomRow(), storage.back()});
      effects.emplace_back(ti, std::move(effect));
    }
    bool dup = false;
    if (kind == 0 && applied_[client] > 0) {
      ClockT old = rng_() % applied_[client];
      ASSERT_TRUE(store_->ApplyBatch(client, old, deltas, &dup).ok());
      ASSERT_TRUE(dup);
      return;
    }
    if (kind == 1) {
      Status st = store_->ApplyBatch(client, applied_[client] + 1 + rng_() % 3, deltas, &dup);
      ASSERT_EQ(st.code(), StatusCode::kFailedPrecondition);
      return;
    }
    if (kind == 2) {
      const ModelTable& t = tables_[rng_() % tables_.size()];
      storage.push_back(t.schema.kind == RowKind::kDense ? std::string(3, 'x')
                                                         : std::string("\x05\0\0\0", 4));
      deltas.insert(deltas.begin() + rng_() % (deltas.size() + 1),
                    RowDelta{t.schema.id, 1, storage.back()});
      Status st = store_->ApplyBatch(client, applied_[client], deltas, &dup);
      ASSERT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
      return;
    }
    Status st = store_->ApplyBatch(client, applied_[client], deltas, &dup);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_FALSE(dup);
    ++applied_[client];
    for (size_t i = 0; i < deltas.size(); ++i) {
      Apply(effects[i].second, &tables_[effects[i].first].rows[deltas[i].row]);
    }
    // Check the touched rows at once.
    for (size_t i = 0; i < deltas.size(); ++i) {
      CheckRows(tables_[effects[i].first], {deltas[i].row});
    }
  }

  testing_util::ScopedTempDir tmp_;
  std::mt19937_64 rng_;
  uint32_t num_clients_ = 1;
  std::vector<ClockT> applied_;
  std::vector<ModelTable> tables_;
  std::unique_ptr<ShardStore> store_;
};

TEST_P(ModelTest, StoreMatchesModel) {
  for (int step = 0; step < 250; ++step) {
    ASSERT_NO_FATAL_FAILURE(Step()) << "step " << step;
    if (step % 25 == 0) {
      ASSERT_NO_FATAL_FAILURE(CheckAll()) << "step " << step;
    }
    if (step % 60 == 59) {
      ASSERT_TRUE(store_->Flush().ok());
    }
    if (step % 80 == 79) {
      ASSERT_NO_FATAL_FAILURE(Reopen());
      ASSERT_NO_FATAL_FAILURE(CheckAll()) << "after reopen at step " << step;
    }
  }
  ASSERT_NO_FATAL_FAILURE(Reopen());
  ASSERT_NO_FATAL_FAILURE(CheckAll()) << "after final reopen";
}

INSTANTIATE_TEST_SUITE_P(Seeds, ModelTest, ::testing::Values(1, 2, 3, 4, 5, 6));

}  // namespace
}  // namespace pace
