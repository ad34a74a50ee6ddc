#include "apps/shared/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include "common/read_file.h"

namespace pace {
namespace apps {
namespace {

TEST(HistogramDeltaTest, DeltaMeanAndP99) {
  double cols[MeasureCols::kCount] = {};
  // s = 2: buckets 0, 1, 2, ">2".
  std::vector<uint64_t> before = {10, 0, 0, 0};
  std::vector<uint64_t> now = {10 + 50, 30, 19, 1};
  // Means are exact over all records: before 0; now (30*1 + 19*2 + 1*5) / 110.
  double mean_now = (30.0 + 38.0 + 5.0) / 110.0;
  AddHistogramDelta(now, mean_now, before, 0.0, cols);
  EXPECT_EQ(cols[MeasureCols::kReads], 100);
  EXPECT_NEAR(cols[MeasureCols::kStalenessSum], 73.0, 1e-9);
  EXPECT_EQ(cols[MeasureCols::kHist + 0], 50);
  EXPECT_EQ(cols[MeasureCols::kHist + 3], 1);  // "> 2" lands at s + 1
  StalenessSummary s = SummarizeStaleness(cols);
  EXPECT_EQ(s.reads, 100u);
  EXPECT_NEAR(s.mean, 0.73, 1e-9);
  EXPECT_EQ(s.p99, 2);  // 99 of 100 reads are <= 2
  // A second table adds to the same columns.
  AddHistogramDelta({0, 0, 0, 100}, 3.0, {}, 0.0, cols);
  s = SummarizeStaleness(cols);
  EXPECT_EQ(s.reads, 200u);
  EXPECT_EQ(s.p99, 3);
}

TEST(HistogramDeltaTest, LargeBoundsShareTheLastColumn) {
  double cols[MeasureCols::kCount] = {};
  std::vector<uint64_t> h(1026, 0);  // async: 0..1024 and "> 1024"
  h[3] = 5;
  h[500] = 7;
  h[1025] = 1;
  AddHistogramDelta(h, 0.0, {}, 0.0, cols);
  EXPECT_EQ(cols[MeasureCols::kHist + 3], 5);
  EXPECT_EQ(cols[MeasureCols::kHist + MeasureCols::kHistBuckets - 1], 8);
}

TEST(BlockedPercentTest, RatioAndZeroWall) {
  double cols[MeasureCols::kCount] = {};
  EXPECT_EQ(BlockedPercent(cols), 0.0);
  cols[MeasureCols::kWallSeconds] = 4;
  cols[MeasureCols::kBlockedSeconds] = 1;
  EXPECT_DOUBLE_EQ(BlockedPercent(cols), 25.0);
}

TEST(ReportWriterTest, CsvHasExactColumnsAndEmptyMissingValues) {
  std::string path = ::testing::TempDir() + "/report_test_" + std::to_string(::getpid()) + ".csv";
  ReportWriter w({{"clock", ColumnFormat::kInteger},
                  {"seconds", ColumnFormat::kSeconds},
                  {"train_loss", ColumnFormat::kNumber},
                  {"test_rmse", ColumnFormat::kNumber}},
                 nullptr);
  ASSERT_TRUE(w.OpenCsv(path).ok());
  ASSERT_TRUE(w.AddLine({0.0, 1.23456, 0.5, std::nullopt}).ok());
  ASSERT_TRUE(w.AddLine({1.0, 2.0, 0.25, 0.75}).ok());
  EXPECT_FALSE(w.AddLine({1.0}).ok());
  ASSERT_TRUE(w.Close().ok());
  EXPECT_EQ(ReadFile(path),
            "clock,seconds,train_loss,test_rmse\n0,1.235,0.5,\n1,2.000,0.25,0.75\n");
  std::remove(path.c_str());
  EXPECT_FALSE(w.OpenCsv("/nonexistent/dir/x.csv").ok());
}

TEST(ReportWriterTest, AppendKeepsEarlierLinesAndRefusesAnotherHeader) {
  std::string path = ::testing::TempDir() + "/report_append_" + std::to_string(::getpid()) + ".csv";
  auto read = [&] { return ReadFile(path); };
  {
    ReportWriter w({{"clock", ColumnFormat::kInteger}, {"x", ColumnFormat::kNumber}}, nullptr);
    ASSERT_TRUE(w.OpenCsv(path, /*append=*/true).ok());  // missing: created with a header
    ASSERT_TRUE(w.AddLine({0.0, 1.0}).ok());
    ASSERT_TRUE(w.Close().ok());
  }
  {
    ReportWriter w({{"clock", ColumnFormat::kInteger}, {"x", ColumnFormat::kNumber}}, nullptr);
    ASSERT_TRUE(w.OpenCsv(path, /*append=*/true).ok());
    ASSERT_TRUE(w.AddLine({1.0, 2.0}).ok());
    ASSERT_TRUE(w.Close().ok());
  }
  EXPECT_EQ(read(), "clock,x\n0,1\n1,2\n");
  ReportWriter other({{"clock", ColumnFormat::kInteger}, {"y", ColumnFormat::kNumber}}, nullptr);
  Status s = other.OpenCsv(path, /*append=*/true);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(read(), "clock,x\n0,1\n1,2\n");
  std::remove(path.c_str());
}

TEST(ReportWriterTest, ConsoleShowsClockOfEndEtaAndFixedDecimals) {
  FILE* console = std::tmpfile();
  ASSERT_NE(console, nullptr);
  ReportWriter w({{"clock", ColumnFormat::kInteger},
                  {"seconds", ColumnFormat::kSeconds},
                  {"rmse", ColumnFormat::kNumber, 4}},
                 console);
  w.SetProgress(2, 12);
  w.PrintHeader();
  ASSERT_TRUE(w.AddLine({2.0, 10.0, 0.5}).ok());     // 1 clock in 10 s: 9 left, 90 s
  ASSERT_TRUE(w.AddLine({11.0, 100.0, 0.25}).ok());  // the last clock
  std::rewind(console);
  char buf[4096];
  size_t n = std::fread(buf, 1, sizeof(buf), console);
  std::fclose(console);
  const std::string out(buf, n);
  // The header is unchanged; the progress follows the columns.
  EXPECT_EQ(out.find(" clock        seconds           rmse\n"), 0u) << out;
  EXPECT_NE(out.find("0.5000   2/12 eta 1m30s\n"), std::string::npos) << out;
  EXPECT_NE(out.find("0.2500   11/12 "), std::string::npos) << out;
  EXPECT_NE(out.find("done\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace apps
}  // namespace pace
