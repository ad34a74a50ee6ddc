#include "common/row.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "common/hash.h"

namespace pace {
namespace {

RowFormat Fmt(RowKind k, ElementType t, uint32_t w) { return RowFormat{k, t, w}; }

TEST(RowTest, DenseAddEachType) {
  {
    auto f = Fmt(RowKind::kDense, ElementType::kF32, 3);
    std::string v = EncodeDense<float>({1, 2, 3});
    ASSERT_TRUE(AddRow(f, &v, EncodeDense<float>({0.5f, -2, 10})).ok());
    EXPECT_EQ(DecodeDense<float>(v), (std::vector<float>{1.5f, 0, 13}));
  }
  {
    auto f = Fmt(RowKind::kDense, ElementType::kF64, 2);
    std::string v = EncodeDense<double>({1, 2});
    ASSERT_TRUE(AddRow(f, &v, EncodeDense<double>({0.25, 0.5})).ok());
    EXPECT_EQ(DecodeDense<double>(v), (std::vector<double>{1.25, 2.5}));
  }
  {
    auto f = Fmt(RowKind::kDense, ElementType::kI32, 2);
    std::string v = EncodeDense<int32_t>({INT32_MAX, 5});
    ASSERT_TRUE(AddRow(f, &v, EncodeDense<int32_t>({1, -7})).ok());
    EXPECT_EQ(DecodeDense<int32_t>(v), (std::vector<int32_t>{INT32_MIN, -2}));  // wraps
  }
  {
    auto f = Fmt(RowKind::kDense, ElementType::kI64, 1);
    std::string v;  // empty = zero row
    ASSERT_TRUE(AddRow(f, &v, EncodeDense<int64_t>({int64_t{1} << 40})).ok());
    EXPECT_EQ(DecodeDense<int64_t>(v), (std::vector<int64_t>{int64_t{1} << 40}));
  }
}

TEST(RowTest, DenseWrongSizeRejectedAndValueUnchanged) {
  auto f = Fmt(RowKind::kDense, ElementType::kF32, 3);
  std::string v = EncodeDense<float>({1, 2, 3});
  std::string before = v;
  EXPECT_EQ(AddRow(f, &v, EncodeDense<float>({1, 2})).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(v, before);
  EXPECT_FALSE(ValidateRow(f, std::string(13, 'x')).ok());
  EXPECT_FALSE(ValidateRow(Fmt(RowKind::kDense, ElementType::kF64, 3), v).ok());
}

TEST(RowTest, SparseAddMergesAndDropsZeros) {
  auto f = Fmt(RowKind::kSparse, ElementType::kI32, 100);
  std::string v = EncodeSparse<int32_t>(std::vector<std::pair<uint32_t, int32_t>>{{1, 5}, {7, 2}});
  std::string d = EncodeSparse<int32_t>(
      std::vector<std::pair<uint32_t, int32_t>>{{0, 1}, {7, -2}, {9, 0}, {50, 3}});
  ASSERT_TRUE(AddRow(f, &v, d).ok());
  auto got = DecodeSparse<int32_t>(v);
  std::vector<std::pair<uint32_t, int32_t>> want{{0, 1}, {1, 5}, {50, 3}};
  EXPECT_EQ(got, want);
  EXPECT_TRUE(ValidateRow(f, v).ok());
}

TEST(RowTest, SparseEachFloatType) {
  auto f = Fmt(RowKind::kSparse, ElementType::kF64, 0);
  std::string v;
  ASSERT_TRUE(
      AddRow(f, &v, EncodeSparse<double>(std::map<uint32_t, double>{{4000000000u, 1.5}})).ok());
  ASSERT_TRUE(AddRow(f, &v, EncodeSparse<double>(std::map<uint32_t, double>{{3, 1}})).ok());
  auto got = DecodeSparse<double>(v);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].first, 3u);
  EXPECT_EQ(got[1].second, 1.5);
  auto f32 = Fmt(RowKind::kSparse, ElementType::kF32, 10);
  std::string w;
  ASSERT_TRUE(AddRow(f32, &w, EncodeSparse<float>(std::map<uint32_t, float>{{2, 0.5f}})).ok());
  EXPECT_EQ(DecodeSparse<float>(w)[0].second, 0.5f);
  auto i64 = Fmt(RowKind::kSparse, ElementType::kI64, 10);
  std::string x;
  ASSERT_TRUE(AddRow(i64, &x, EncodeSparse<int64_t>(std::map<uint32_t, int64_t>{{9, -4}})).ok());
  EXPECT_EQ(DecodeSparse<int64_t>(x)[0].second, -4);
}

TEST(RowTest, SparseBadInputs) {
  auto f = Fmt(RowKind::kSparse, ElementType::kI32, 10);
  EXPECT_EQ(ValidateRow(f, "ab").code(), StatusCode::kCorruption);  // shorter than count
  std::string huge(4, '\xff');                                      // count 2^32-1, no entries
  EXPECT_EQ(ValidateRow(f, huge).code(), StatusCode::kCorruption);
  // Unsorted columns.
  std::string unsorted =
      EncodeSparse<int32_t>(std::vector<std::pair<uint32_t, int32_t>>{{5, 1}, {2, 1}});
  EXPECT_EQ(ValidateRow(f, unsorted).code(), StatusCode::kCorruption);
  // Duplicate columns.
  std::string dup =
      EncodeSparse<int32_t>(std::vector<std::pair<uint32_t, int32_t>>{{2, 1}, {2, 1}});
  EXPECT_FALSE(ValidateRow(f, dup).ok());
  // Column beyond the width.
  std::string wide = EncodeSparse<int32_t>(std::vector<std::pair<uint32_t, int32_t>>{{10, 1}});
  EXPECT_EQ(ValidateRow(f, wide).code(), StatusCode::kOutOfRange);
  // Truncated by one byte.
  std::string ok = EncodeSparse<int32_t>(std::vector<std::pair<uint32_t, int32_t>>{{1, 1}});
  EXPECT_TRUE(ValidateRow(f, ok).ok());
  EXPECT_FALSE(ValidateRow(f, ok.substr(0, ok.size() - 1)).ok());
  // A valid i64 row is the wrong size for i32.
  std::string as64 = EncodeSparse<int64_t>(std::vector<std::pair<uint32_t, int64_t>>{{1, 1}});
  EXPECT_FALSE(ValidateRow(f, as64).ok());
}

// A dense f32 table "w" with the uniform initializer on [a, b).
TableSchema UniformSchema(uint32_t id, uint32_t width, double a, double b, uint64_t seed) {
  TableSchema s;
  s.id = id;
  s.name = "w";
  s.width = width;
  s.init = {InitKind::kUniform, a, b, seed};
  return s;
}

TEST(RowTest, InitializersAreDeterministicAndInRange) {
  TableSchema s = UniformSchema(3, 64, -0.5, 0.5, 42);
  std::string a, b;
  InitRow(s, 17, &a);
  InitRow(s, 17, &b);
  EXPECT_EQ(a, b);
  auto v = DecodeDense<float>(a);
  ASSERT_EQ(v.size(), 64u);
  for (float x : v) {
    EXPECT_GE(x, -0.5f);
    EXPECT_LT(x, 0.5f);
  }
  EXPECT_NE(v[0], v[1]);
  std::string other;
  InitRow(s, 18, &other);
  EXPECT_NE(a, other);
  s.init.seed = 43;
  InitRow(s, 17, &other);
  EXPECT_NE(a, other);
}

// Element c of a dense row, as the bits of an unsigned integer of its size.
template <typename U>
U BitsAt(const std::string& row, int c) {
  U u;
  std::memcpy(&u, row.data() + sizeof(U) * c, sizeof(U));
  return u;
}

// The bits of x, as an unsigned integer of its size.
template <typename U, typename T>
U BitsOf(T x) {
  static_assert(sizeof(U) == sizeof(T));
  U u;
  std::memcpy(&u, &x, sizeof(U));
  return u;
}

// A row's initial values are part of what a store holds (a row never written
// reads as its initializer), so they never change: these bits were computed
// by the element-at-a-time code, and every path of InitRow (the vector one
// where the CPU has it) must give them, element by element.
class InitPathTest : public ::testing::TestWithParam<InitPath> {
 protected:
  void SetUp() override {
    if (!HaveInitPath(GetParam())) GTEST_SKIP() << "this CPU does not have the path";
  }
};

std::string InitPathName(const ::testing::TestParamInfo<InitPath>& info) {
  switch (info.param) {
    case InitPath::kWidest:
      return "Widest";
    case InitPath::kScalar:
      return "Scalar";
    case InitPath::kAvx2:
      return "Avx2";
    case InitPath::kAvx512:
      return "Avx512";
  }
  return "Unknown";
}

INSTANTIATE_TEST_SUITE_P(EveryPath, InitPathTest,
                         ::testing::Values(InitPath::kWidest, InitPath::kScalar, InitPath::kAvx2,
                                           InitPath::kAvx512),
                         InitPathName);

TEST_P(InitPathTest, UniformInitializerKeepsItsBits) {
  const InitPath path = GetParam();
  auto init = [path](const TableSchema& s, uint64_t row, std::string* out) {
    InitRowVia(path, s, row, out);
  };
  TableSchema s = UniformSchema(3, 129, -0.5, 0.5, 42);
  std::string v;
  init(s, 17, &v);
  auto bits32 = [&](int c) { return BitsAt<uint32_t>(v, c); };
  EXPECT_EQ(bits32(0), 0x3eabbd7du);
  EXPECT_EQ(bits32(1), 0xbe86fd9bu);
  EXPECT_EQ(bits32(7), 0xbe4d2c3cu);
  EXPECT_EQ(bits32(8), 0x3ecf8106u);
  EXPECT_EQ(bits32(63), 0xbe928d60u);
  EXPECT_EQ(bits32(127), 0x3e48b5c4u);
  EXPECT_EQ(bits32(128), 0xbefe3d77u);  // past the last group of eight (and of four)
  s.id = 9;
  s.type = ElementType::kF64;
  s.init = {InitKind::kUniform, 0.0, 0.01, 7};
  init(s, 123456789, &v);
  auto bits64 = [&](int c) { return BitsAt<uint64_t>(v, c); };
  EXPECT_EQ(bits64(0), 0x3f665336fc4197a1ull);
  EXPECT_EQ(bits64(9), 0x3f82d859f0f2ece8ull);
  EXPECT_EQ(bits64(128), 0x3f7dfc5e2462cf1cull);
  // A lower bound that is not zero and a scale that is not a power of two:
  // a multiply-add fused into one rounding would change the last bits here
  // (it did in a build of the vector path without the guard).
  s = UniformSchema(5, 20, -3.25, 1e-3, 99);
  s.type = ElementType::kF64;
  init(s, 4242, &v);
  EXPECT_EQ(bits64(0), 0xbfe61da74b8082f4ull);
  EXPECT_EQ(bits64(9), 0xbff016cd05bb0c18ull);
  EXPECT_EQ(bits64(19), 0xbfdfdc6f2b430ad0ull);
  s.type = ElementType::kF32;
  init(s, 4242, &v);
  EXPECT_EQ(bits32(0), 0xbf30ed3au);
  EXPECT_EQ(bits32(9), 0xbf80b668u);
  EXPECT_EQ(bits32(19), 0xbefee379u);
}

TEST_P(InitPathTest, InitRowMatchesEachElementsInitialValue) {
  for (ElementType type : {ElementType::kF32, ElementType::kF64}) {
    for (uint32_t width : {1u, 3u, 4u, 5u, 7u, 8u, 9u, 12u, 16u, 31u, 128u, 129u, 300u}) {
      TableSchema s = UniformSchema(width, width, -3.25, 1e-3, 1234567 + width);
      s.type = type;
      for (uint64_t row : {uint64_t{0}, uint64_t{1}, uint64_t{99991}, ~uint64_t{0}}) {
        std::string v;
        InitRowVia(GetParam(), s, row, &v);
        ASSERT_EQ(v.size(), RowFormat::Of(s).dense_bytes());
        for (uint32_t c = 0; c < width; ++c) {
          const double want = InitialValue(s, row, c);
          if (type == ElementType::kF32) {
            ASSERT_EQ(BitsAt<uint32_t>(v, c), BitsOf<uint32_t>(static_cast<float>(want)))
                << "width " << width << " row " << row << " col " << c;
          } else {
            ASSERT_EQ(BitsAt<uint64_t>(v, c), BitsOf<uint64_t>(want))
                << "width " << width << " row " << row << " col " << c;
          }
        }
      }
    }
  }
}

TEST(RowTest, NormalInitializerMoments) {
  TableSchema s;
  s.id = 1;
  s.name = "n";
  s.type = ElementType::kF64;
  s.width = 1;
  s.init = {InitKind::kNormal, 2.0, 0.5, 9};
  double sum = 0, sq = 0;
  const int n = 20000;
  for (int r = 0; r < n; ++r) {
    double x = InitialValue(s, r, 0);
    sum += x;
    sq += x * x;
  }
  double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 2.0, 0.02);
  EXPECT_NEAR(std::sqrt(var), 0.5, 0.02);
}

TEST(RowTest, ZerosAndSparseInit) {
  TableSchema s;
  s.name = "z";
  s.width = 3;
  std::string v;
  InitRow(s, 1, &v);
  EXPECT_EQ(v, std::string(12, '\0'));
  s.kind = RowKind::kSparse;
  InitRow(s, 1, &v);
  EXPECT_EQ(SparseCount(v), 0u);
  EXPECT_EQ(v.size(), 4u);
}

TEST(RowTest, PlacementIsStable) {
  // These values are part of the cluster contract: changing ShardOf moves rows.
  EXPECT_EQ(ShardOf(1, 0, 1), 0u);
  uint32_t counts[4] = {0, 0, 0, 0};
  for (uint64_t r = 0; r < 4000; ++r) counts[ShardOf(1, r, 4)]++;
  for (uint32_t c : counts) EXPECT_NEAR(c, 1000, 150);
  EXPECT_EQ(Mix64(0), 0xE220A8397B1DCDAFull);
}

TEST(ElementTest, AddWrapsIntegersAndAddsFloatsInOrder) {
  EXPECT_EQ(AddElement<int32_t>(INT32_MAX, 1), INT32_MIN);
  EXPECT_EQ(AddElement<int64_t>(INT64_MIN, -1), INT64_MAX);
  // (a + b) + c != a + (b + c) here: sums are taken left to right.
  float a = 1e8f, b = -1e8f, c = 1.0f;
  float v[1] = {a};
  const float d1[1] = {b}, d2[1] = {c};
  AddInPlace(v, d1, 1);
  AddInPlace(v, d2, 1);
  EXPECT_EQ(v[0], (a + b) + c);
  EXPECT_NE(v[0], a + (b + c));
  int32_t out[2];
  const int32_t x[2] = {INT32_MAX, 3}, y[2] = {2, -5};
  AddInto(out, x, y, 2);
  EXPECT_EQ(out[0], INT32_MIN + 1);
  EXPECT_EQ(out[1], -2);
}

TEST(ElementTest, VisitMapsEachTypeToItsCxxType) {
  EXPECT_EQ(VisitElementType(ElementType::kF32, [](auto z) { return sizeof(z); }), 4u);
  EXPECT_EQ(VisitElementType(ElementType::kF64, [](auto z) { return sizeof(z); }), 8u);
  EXPECT_TRUE(VisitElementType(ElementType::kI32,
                               [](auto z) { return std::is_same_v<decltype(z), int32_t>; }));
  EXPECT_TRUE(VisitElementType(ElementType::kI64,
                               [](auto z) { return std::is_same_v<decltype(z), int64_t>; }));
}

TEST(RowTest, DenseCellAndUnalignedAdd) {
  std::string v = std::string(1, 'x') + EncodeDense<int64_t>({INT64_MAX, 7});
  AddDenseCell(ElementType::kI64, v.data() + 1, 0, 1.0);  // odd address, wraps
  AddDenseCell(ElementType::kI64, v.data() + 1, 1, -9.0);
  EXPECT_EQ(DecodeDense<int64_t>(v.substr(1)), (std::vector<int64_t>{INT64_MIN, -2}));
  std::string f = EncodeDense<float>({1.5f});
  AddDenseCell(ElementType::kF32, f.data(), 0, 0.25);
  EXPECT_EQ(DecodeDense<float>(f)[0], 1.75f);
  EXPECT_EQ(DenseElementAsDouble(ElementType::kI32, EncodeDense<int32_t>({-3}).data(), 0), -3.0);
}

TEST(RowTest, SparseZerosFoundAndStripped) {
  auto f = Fmt(RowKind::kSparse, ElementType::kF64, 0);
  std::string d =
      EncodeSparse<double>(std::vector<std::pair<uint32_t, double>>{{1, 0.0}, {4, 2.0}, {9, 0.0}});
  EXPECT_TRUE(SparseHasZero(f, d));
  std::string out;
  StripSparseZeros(f, d, &out);
  EXPECT_EQ(DecodeSparse<double>(out), (std::vector<std::pair<uint32_t, double>>{{4, 2.0}}));
  EXPECT_FALSE(SparseHasZero(f, out));
}

}  // namespace
}  // namespace pace
