#include "common/schema.h"

#include <gtest/gtest.h>

#include <limits>

namespace pace {
namespace {

TableSchema Dense(std::string name, uint32_t width) {
  TableSchema s;
  s.name = std::move(name);
  s.width = width;
  return s;
}

TEST(SchemaTest, ValidDense) { EXPECT_TRUE(ValidateSchema(Dense("w", 16)).ok()); }

TEST(SchemaTest, RejectsBadNamesAndWidths) {
  EXPECT_FALSE(ValidateSchema(Dense("", 4)).ok());
  EXPECT_FALSE(ValidateSchema(Dense("has space", 4)).ok());
  EXPECT_FALSE(ValidateSchema(Dense(std::string(200, 'a'), 4)).ok());
  EXPECT_FALSE(ValidateSchema(Dense("w", 0)).ok());
  EXPECT_FALSE(ValidateSchema(Dense("w", kMaxDenseWidth + 1)).ok());
  TableSchema sparse = Dense("s", 0);
  sparse.kind = RowKind::kSparse;
  EXPECT_TRUE(ValidateSchema(sparse).ok());
}

TEST(SchemaTest, RejectsBadCombinations) {
  TableSchema s = Dense("w", 4);
  s.consistency = Consistency::kBsp;
  s.staleness = 2;
  EXPECT_FALSE(ValidateSchema(s).ok());
  s = Dense("w", 4);
  s.type = ElementType::kI32;
  s.init.kind = InitKind::kUniform;
  s.init.a = 0;
  s.init.b = 1;
  EXPECT_FALSE(ValidateSchema(s).ok());
  s.type = ElementType::kF32;
  EXPECT_TRUE(ValidateSchema(s).ok());
  s.init.b = -1;  // a >= b
  EXPECT_FALSE(ValidateSchema(s).ok());
  s = Dense("w", 4);
  s.kind = static_cast<RowKind>(9);
  EXPECT_FALSE(ValidateSchema(s).ok());
}

TEST(SchemaTest, ParseNames) {
  Consistency c;
  EXPECT_TRUE(ParseConsistency("essp", &c).ok());
  EXPECT_EQ(c, Consistency::kEssp);
  Status bad = ParseConsistency("eventual", &c);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("bsp|ssp|essp|async|vap"), std::string::npos);
  EXPECT_TRUE(ParseConsistency("vap", &c).ok());
  EXPECT_EQ(c, Consistency::kVap);
  ElementType t;
  EXPECT_TRUE(ParseElementType("i64", &t).ok());
  EXPECT_EQ(t, ElementType::kI64);
}

TEST(SchemaTest, VapNeedsAValueBoundAndOnlyVapHasOne) {
  TableSchema s = Dense("w", 4);
  s.consistency = Consistency::kVap;
  EXPECT_EQ(ValidateSchema(s).code(), StatusCode::kInvalidArgument);  // v = 0
  s.value_bound = -1;
  EXPECT_FALSE(ValidateSchema(s).ok());
  s.value_bound = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(ValidateSchema(s).ok());
  s.value_bound = 0.5;
  s.staleness = 2;
  EXPECT_TRUE(ValidateSchema(s).ok());
  EXPECT_NE(DescribeSchema(s).find("vap v=0.5 s=2"), std::string::npos) << DescribeSchema(s);
  TableSchema other = s;
  other.value_bound = 0.25;
  EXPECT_FALSE(SameSchema(s, other));
  s.consistency = Consistency::kEssp;
  Status bad = ValidateSchema(s);
  EXPECT_NE(bad.message().find("only for vap"), std::string::npos) << bad.ToString();
}

TEST(SchemaTest, SameSchemaIgnoresUnassignedId) {
  TableSchema a = Dense("w", 4), b = Dense("w", 4);
  a.id = 7;
  EXPECT_TRUE(SameSchema(a, b));
  b.id = 8;
  EXPECT_FALSE(SameSchema(a, b));
  b.id = 7;
  b.width = 5;
  EXPECT_FALSE(SameSchema(a, b));
}

}  // namespace
}  // namespace pace
