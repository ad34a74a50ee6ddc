#include "common/status.h"

#include <gtest/gtest.h>

namespace pace {
namespace {

Status FailIfNegative(int x) {
  if (x < 0) return Status::InvalidArgument("negative");
  return Status::OK();
}

Status Chain(int x) {
  RETURN_IF_ERROR(FailIfNegative(x));
  return Status::NotFound("reached end");
}

StatusOr<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}

Status UseHalf(int x, int* out) {
  ASSIGN_OR_RETURN(*out, Half(x));
  return Status::OK();
}

TEST(StatusTest, OkHasNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s.code(), StatusCode::kOk);
}

TEST(StatusTest, CodeAndMessage) {
  Status s = Status::Corruption("bad crc");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(s.ToString(), "Corruption: bad crc");
  Status copy = s;
  EXPECT_EQ(copy, s);
  EXPECT_EQ(s.WithPrefix("file x").message(), "file x: bad crc");
}

TEST(StatusTest, MacrosPropagate) {
  EXPECT_EQ(Chain(-1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Chain(1).code(), StatusCode::kNotFound);
  int v = 0;
  EXPECT_TRUE(UseHalf(8, &v).ok());
  EXPECT_EQ(v, 4);
  EXPECT_EQ(UseHalf(3, &v).code(), StatusCode::kInvalidArgument);
}

TEST(StatusTest, StatusOrFromOkIsInternalError) {
  StatusOr<int> r(Status::OK());
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(StatusTest, KnownCodes) {
  EXPECT_TRUE(IsKnownStatusCode(0));
  EXPECT_TRUE(IsKnownStatusCode(static_cast<uint8_t>(StatusCode::kIncompatible)));
  EXPECT_FALSE(IsKnownStatusCode(200));
}

}  // namespace
}  // namespace pace
