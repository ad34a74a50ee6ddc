// Tests of the small shared helpers: HistogramPercentile, ReadTokenFile,
// ScopedTempDir.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include "common/percentile.h"
#include "common/scoped_temp_dir.h"
#include "common/token_file.h"

namespace pace {
namespace {

TEST(HistogramPercentileTest, NearestRank) {
  const std::vector<uint64_t> h = {90, 9, 0, 1};                 // 100 observations
  EXPECT_EQ(HistogramPercentile(h.data(), h.size(), 0.99), 1u);  // 99 of 100 are <= 1
  EXPECT_EQ(HistogramPercentile(h.data(), h.size(), 1.0), 3u);
  EXPECT_EQ(HistogramPercentile(h.data(), h.size(), 0.5), 0u);
  EXPECT_EQ(HistogramPercentile(h.data(), h.size(), 0.0), 0u);  // at least one
  const std::vector<double> d = {0, 0, 3};                      // sums of counts as doubles
  EXPECT_EQ(HistogramPercentile(d.data(), d.size(), 0.99), 2u);
  const std::vector<uint64_t> empty = {0, 0};
  EXPECT_EQ(HistogramPercentile(empty.data(), empty.size(), 0.99), 0u);
}

TEST(TokenFileTest, ReadsWithoutTrailingNewlinesAndRejectsEmptyOrMissing) {
  ScopedTempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::ofstream(dir.Sub("t")) << "s3cret\r\n\n";
  std::string token;
  ASSERT_TRUE(ReadTokenFile(dir.Sub("t"), &token).ok());
  EXPECT_EQ(token, "s3cret");
  std::ofstream(dir.Sub("empty")) << "\n";
  EXPECT_EQ(ReadTokenFile(dir.Sub("empty"), &token).code(), StatusCode::kInvalidArgument);
  Status s = ReadTokenFile(dir.Sub("missing"), &token);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("--token_file="), std::string::npos);
}

TEST(ScopedTempDirTest, CreatesAndRemoves) {
  std::string path;
  {
    ScopedTempDir dir("pace-util-test");
    path = dir.path();
    ASSERT_TRUE(std::filesystem::is_directory(path));
    std::ofstream(dir.Sub("f")) << "x";
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace pace
