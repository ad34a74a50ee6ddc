#include "storage/row_merge.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <map>
#include <memory>

#include "storage/testing/storage_test_util.h"

namespace pace {
namespace {

std::string Tagged(RowKind k, ElementType t, const std::string& payload) {
  return std::string(1, static_cast<char>(RowTag(k, t))) + payload;
}

template <typename T>
std::string DenseT(ElementType t, const std::vector<T>& v) {
  return Tagged(RowKind::kDense, t, EncodeDense<T>(v));
}

template <typename T>
std::string SparseT(ElementType t, const std::map<uint32_t, T>& m) {
  return Tagged(RowKind::kSparse, t, EncodeSparse<T>(m));
}

Status Merge(const std::string* base, const std::vector<std::string>& ops, std::string* out) {
  std::string_view b = base != nullptr ? std::string_view(*base) : std::string_view();
  std::vector<std::string_view> views(ops.begin(), ops.end());
  return MergeRowValues(base != nullptr ? &b : nullptr, views, out);
}

template <typename T>
void CheckDense(ElementType t) {
  std::string base = DenseT<T>(t, {1, 2, 3});
  std::vector<std::string> ops = {DenseT<T>(t, {10, 20, 30}), DenseT<T>(t, {-1, 0, 5})};
  std::string out;
  ASSERT_TRUE(Merge(&base, ops, &out).ok());
  EXPECT_EQ(out, DenseT<T>(t, {10, 22, 38}));
  ASSERT_TRUE(Merge(nullptr, ops, &out).ok());
  EXPECT_EQ(out, DenseT<T>(t, {9, 20, 35}));
}

TEST(RowMergeTest, DenseEachType) {
  CheckDense<float>(ElementType::kF32);
  CheckDense<double>(ElementType::kF64);
  CheckDense<int32_t>(ElementType::kI32);
  CheckDense<int64_t>(ElementType::kI64);
}

TEST(RowMergeTest, DenseIntegersWrap) {
  std::string base = DenseT<int32_t>(ElementType::kI32, {INT32_MAX});
  std::string out;
  ASSERT_TRUE(Merge(&base, {DenseT<int32_t>(ElementType::kI32, {1})}, &out).ok());
  EXPECT_EQ(out, DenseT<int32_t>(ElementType::kI32, {INT32_MIN}));
  base = DenseT<int64_t>(ElementType::kI64, {INT64_MIN});
  ASSERT_TRUE(Merge(&base, {DenseT<int64_t>(ElementType::kI64, {-1})}, &out).ok());
  EXPECT_EQ(out, DenseT<int64_t>(ElementType::kI64, {INT64_MAX}));
}

template <typename T>
void CheckSparse(ElementType t) {
  std::string base = SparseT<T>(t, {{1, 1}, {5, 2}});
  std::vector<std::string> ops = {SparseT<T>(t, {{5, -2}, {7, 3}}), SparseT<T>(t, {{0, 4}}),
                                  SparseT<T>(t, {})};
  std::string out;
  ASSERT_TRUE(Merge(&base, ops, &out).ok());
  // Column 5 cancels to zero and is dropped.
  EXPECT_EQ(out, SparseT<T>(t, {{0, 4}, {1, 1}, {7, 3}}));
  ASSERT_TRUE(Merge(nullptr, ops, &out).ok());
  EXPECT_EQ(out, SparseT<T>(t, {{0, 4}, {5, -2}, {7, 3}}));
}

TEST(RowMergeTest, SparseEachType) {
  CheckSparse<float>(ElementType::kF32);
  CheckSparse<double>(ElementType::kF64);
  CheckSparse<int32_t>(ElementType::kI32);
  CheckSparse<int64_t>(ElementType::kI64);
}

TEST(RowMergeTest, SparseLargeColumns) {
  ElementType t = ElementType::kI64;
  std::string out;
  std::string base = SparseT<int64_t>(t, {{UINT32_MAX, 5}});
  ASSERT_TRUE(Merge(&base, {SparseT<int64_t>(t, {{0, 1}, {UINT32_MAX, 1}})}, &out).ok());
  EXPECT_EQ(out, SparseT<int64_t>(t, {{0, 1}, {UINT32_MAX, 6}}));
}

TEST(RowMergeTest, BadInputsAreCorruption) {
  const ElementType f32 = ElementType::kF32;
  std::string good = DenseT<float>(f32, {1, 2});
  std::string sparse_unsorted =
      Tagged(RowKind::kSparse, f32,
             EncodeSparse<float>(std::vector<std::pair<uint32_t, float>>{{5, 1.0f}, {2, 1.0f}}));
  std::string sparse_huge_count = Tagged(RowKind::kSparse, f32, std::string("\xff\xff\xff\xff", 4));
  // {bytes, bad on its own (not only next to `good`)}
  const std::vector<std::pair<std::string, bool>> bad = {
      {"", true},                                           // no tag
      {std::string(1, '\0') + good.substr(1), true},        // tag 0
      {std::string(1, '\x35') + good.substr(1), true},      // unknown kind
      {std::string(1, '\x17') + good.substr(1), true},      // unknown type
      {DenseT<int32_t>(ElementType::kI32, {1, 2}), false},  // other type, same size
      {DenseT<float>(f32, {1, 2, 3}), false},               // other width
      {good.substr(0, 6), true},                            // not whole elements
      {Tagged(RowKind::kDense, f32, ""), true},             // empty dense payload
      {SparseT<float>(f32, {{1, 1}}), false},               // other kind
      {sparse_unsorted, true},
      {sparse_huge_count, true},
      {Tagged(RowKind::kSparse, f32, "ab"), true},  // truncated count
  };
  auto op = NewRowAddMergeOperator();
  const rocksdb::Slice key("k");
  for (size_t i = 0; i < bad.size(); ++i) {
    std::string out;
    const std::string& b = bad[i].first;
    EXPECT_EQ(Merge(&good, {b}, &out).code(), StatusCode::kCorruption) << i;
    EXPECT_EQ(Merge(&b, {good}, &out).code(), StatusCode::kCorruption) << i;
    EXPECT_EQ(Merge(nullptr, {good, b}, &out).code(), StatusCode::kCorruption) << i;
    if (bad[i].second) {
      EXPECT_EQ(Merge(nullptr, {b}, &out).code(), StatusCode::kCorruption) << i;
    }

    rocksdb::Slice bad_slice(b);
    std::vector<rocksdb::Slice> operands = {rocksdb::Slice(good), bad_slice};
    std::string new_value;
    rocksdb::Slice existing_operand;
    rocksdb::MergeOperator::MergeOperationInput in(key, nullptr, operands, nullptr);
    rocksdb::MergeOperator::MergeOperationOutput mo(new_value, existing_operand);
    EXPECT_FALSE(op->FullMergeV2(in, &mo)) << i;
    std::vector<rocksdb::Slice> lone = {bad_slice};
    rocksdb::MergeOperator::MergeOperationInput in_lone(key, nullptr, lone, nullptr);
    EXPECT_EQ(op->FullMergeV2(in_lone, &mo), !bad[i].second) << i;
    std::deque<rocksdb::Slice> partial = {rocksdb::Slice(good), bad_slice};
    EXPECT_FALSE(op->PartialMergeMulti("k", partial, &new_value, nullptr)) << i;
  }
  std::string out;
  EXPECT_EQ(MergeRowValues(nullptr, {}, &out).code(), StatusCode::kCorruption);
}

TEST(RowMergeTest, OperatorInterface) {
  auto op = NewRowAddMergeOperator();
  EXPECT_STREQ(op->Name(), "pace.RowAdd");
  const ElementType t = ElementType::kF64;
  std::string a = DenseT<double>(t, {1, 2});
  std::string b = DenseT<double>(t, {0.5, 0.25});
  std::string new_value;
  rocksdb::Slice existing_operand;
  rocksdb::MergeOperator::MergeOperationOutput mo(new_value, existing_operand);

  // A lone operand is passed through without a copy.
  std::vector<rocksdb::Slice> lone = {rocksdb::Slice(a)};
  const rocksdb::Slice key("k");
  ASSERT_TRUE(op->FullMergeV2(
      rocksdb::MergeOperator::MergeOperationInput(key, nullptr, lone, nullptr), &mo));
  EXPECT_EQ(existing_operand.data(), a.data());

  rocksdb::Slice base(b);
  ASSERT_TRUE(
      op->FullMergeV2(rocksdb::MergeOperator::MergeOperationInput(key, &base, lone, nullptr), &mo));
  EXPECT_EQ(new_value, DenseT<double>(t, {1.5, 2.25}));

  // Float operands are never merged partially (that would reassociate the
  // sum); RocksDB then keeps them for an in-order full merge.
  std::deque<rocksdb::Slice> ops = {rocksdb::Slice(a), rocksdb::Slice(b), rocksdb::Slice(a)};
  EXPECT_FALSE(op->PartialMergeMulti("k", ops, &new_value, nullptr));
  EXPECT_FALSE(op->PartialMerge("k", rocksdb::Slice(a), rocksdb::Slice(b), &new_value, nullptr));
  const std::string fa = DenseT<float>(ElementType::kF32, {1, 2});
  EXPECT_FALSE(op->PartialMerge("k", rocksdb::Slice(fa), rocksdb::Slice(fa), &new_value, nullptr));

  // Integer additions are associative: merged.
  const ElementType it = ElementType::kI64;
  std::string ia = DenseT<int64_t>(it, {1, 2});
  std::string ib = DenseT<int64_t>(it, {10, -20});
  std::deque<rocksdb::Slice> iops = {rocksdb::Slice(ia), rocksdb::Slice(ib), rocksdb::Slice(ia)};
  ASSERT_TRUE(op->PartialMergeMulti("k", iops, &new_value, nullptr));
  EXPECT_EQ(new_value, DenseT<int64_t>(it, {12, -16}));
  ASSERT_TRUE(op->PartialMerge("k", rocksdb::Slice(ia), rocksdb::Slice(ib), &new_value, nullptr));
  EXPECT_EQ(new_value, DenseT<int64_t>(it, {11, -18}));
}

TEST(RowMergeTest, UnalignedAdd) {
  // Buffers deliberately offset by one byte; UBSan would flag typed access.
  std::string dst(1 + 3 * 8, '\0');
  std::string src(1 + 3 * 8, '\0');
  int64_t d[3] = {1, 2, 3}, s[3] = {10, -20, 30};
  std::memcpy(&dst[1], d, sizeof(d));
  std::memcpy(&src[1], s, sizeof(s));
  AddDenseUnaligned(ElementType::kI64, &dst[1], &src[1], 3);
  std::memcpy(d, &dst[1], sizeof(d));
  EXPECT_EQ(d[0], 11);
  EXPECT_EQ(d[1], -18);
  EXPECT_EQ(d[2], 33);
}

TEST(RowMergeTest, ParseStoredRowChecksTagAndPayload) {
  RowFormat f{RowKind::kDense, ElementType::kF32, 2};
  std::string_view payload;
  std::string good = DenseT<float>(ElementType::kF32, {1, 2});
  ASSERT_TRUE(ParseStoredRow(f, good, &payload).ok());
  EXPECT_EQ(payload, EncodeDense<float>({1, 2}));
  EXPECT_EQ(ParseStoredRow(f, "", &payload).code(), StatusCode::kCorruption);
  EXPECT_EQ(ParseStoredRow(f, DenseT<int32_t>(ElementType::kI32, {1, 2}), &payload).code(),
            StatusCode::kCorruption);
  EXPECT_EQ(ParseStoredRow(f, DenseT<float>(ElementType::kF32, {1}), &payload).code(),
            StatusCode::kCorruption);
  RowFormat sf{RowKind::kSparse, ElementType::kF32, 4};
  EXPECT_EQ(ParseStoredRow(sf, SparseT<float>(ElementType::kF32, {{9, 1}}), &payload).code(),
            StatusCode::kCorruption);  // column beyond the table's width
}

TEST(RowMergeTest, ComposeAddsInitializer) {
  TableSchema s = testing_util::MakeSchema("u", RowKind::kDense, ElementType::kF32, 4);
  s.id = 3;
  s.init = Initializer{InitKind::kUniform, -1.0, 1.0, 99};
  std::string init;
  InitRow(s, 12, &init);
  std::string out;
  ComposeRow(s, 12, nullptr, &out);
  EXPECT_EQ(out, init);
  std::string delta = EncodeDense<float>({1, 2, 3, 4});
  std::string_view dv(delta);
  ComposeRow(s, 12, &dv, &out);
  std::vector<float> want = DecodeDense<float>(init);
  for (size_t i = 0; i < 4; ++i) want[i] += static_cast<float>(i + 1);
  EXPECT_EQ(DecodeDense<float>(out), want);

  TableSchema z = testing_util::MakeSchema("z", RowKind::kSparse, ElementType::kI32, 0);
  ComposeRow(z, 1, nullptr, &out);
  EXPECT_EQ(out, std::string(4, '\0'));
}

// The operator inside RocksDB: merges survive flush, a corrupt operand is
// reported as Corruption rather than crashing.
TEST(RowMergeTest, InsideRocksDb) {
  testing_util::ScopedTempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  rocksdb::Options o;
  o.create_if_missing = true;
  o.merge_operator = NewRowAddMergeOperator();
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(o, tmp.path(), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  const ElementType t = ElementType::kI32;
  rocksdb::WriteOptions wo;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(db->Merge(wo, "a", DenseT<int32_t>(t, {i, -i})).ok());
    ASSERT_TRUE(db->Merge(wo, "s", SparseT<int32_t>(t, {{static_cast<uint32_t>(i % 3), 1}})).ok());
    if (i == 4) {
      ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
    }
  }
  std::string v;
  ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), "a", &v).ok());
  EXPECT_EQ(v, DenseT<int32_t>(t, {45, -45}));
  ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), "s", &v).ok());
  EXPECT_EQ(v, SparseT<int32_t>(t, {{0, 4}, {1, 3}, {2, 3}}));
  ASSERT_TRUE(db->CompactRange(rocksdb::CompactRangeOptions(), nullptr, nullptr).ok());
  ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), "a", &v).ok());
  EXPECT_EQ(v, DenseT<int32_t>(t, {45, -45}));

  ASSERT_TRUE(db->Merge(wo, "bad", DenseT<int32_t>(t, {1})).ok());
  ASSERT_TRUE(db->Merge(wo, "bad", DenseT<int32_t>(t, {1, 2})).ok());
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), "bad", &v);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  ASSERT_TRUE(db->Delete(wo, "bad").ok());
}

}  // namespace
}  // namespace pace
