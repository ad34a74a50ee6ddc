#include "consistency/staleness_histogram.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace pace {
namespace {

TEST(StalenessHistogramTest, EmptyHistogramIsZero) {
  StalenessHistogram h(3);
  EXPECT_EQ(h.num_buckets(), 5u);
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.mean(), 0.0);
  EXPECT_EQ(h.Percentile(50), 0);
  EXPECT_EQ(h.max(), 0);
}

TEST(StalenessHistogramTest, BucketsCountsMeanAndOverflow) {
  StalenessHistogram h(2);
  for (int v : {0, 1, 1, 2, 5, -1}) h.Record(v);
  EXPECT_EQ(h.count(), 6u);
  EXPECT_EQ(h.bucket(0), 2u);  // 0 and the clamped -1
  EXPECT_EQ(h.bucket(1), 2u);
  EXPECT_EQ(h.bucket(2), 1u);
  EXPECT_EQ(h.bucket(3), 1u);  // > 2
  EXPECT_DOUBLE_EQ(h.mean(), 9.0 / 6.0);
  EXPECT_EQ(h.max(), 5);
}

TEST(StalenessHistogramTest, Percentiles) {
  StalenessHistogram h(10);
  for (int i = 0; i < 50; ++i) h.Record(0);
  for (int i = 0; i < 49; ++i) h.Record(3);
  h.Record(20);
  EXPECT_EQ(h.Percentile(50), 0);
  EXPECT_EQ(h.Percentile(51), 3);
  EXPECT_EQ(h.Percentile(99), 3);
  EXPECT_EQ(h.Percentile(100), 11);  // the "> 10" bucket
  EXPECT_EQ(h.Percentile(0), 0);
}

TEST(StalenessHistogramTest, HugeBoundIsClamped) {
  StalenessHistogram h(int64_t{1} << 60);
  EXPECT_EQ(h.bound(), StalenessHistogram::kMaxTrackedStaleness);
  h.Record(int64_t{1} << 40);
  EXPECT_EQ(h.bucket(h.num_buckets() - 1), 1u);
  EXPECT_EQ(h.max(), int64_t{1} << 40);
}

TEST(StalenessHistogramTest, MergeMapsLargerBoundsIntoOverflow) {
  StalenessHistogram a(2);
  StalenessHistogram b(4);
  a.Record(1);
  b.Record(1);
  b.Record(3);  // above a's bound
  b.Record(9);  // b's overflow
  a.Merge(b);
  EXPECT_EQ(a.count(), 4u);
  EXPECT_EQ(a.bucket(1), 2u);
  EXPECT_EQ(a.bucket(3), 2u);
  EXPECT_DOUBLE_EQ(a.mean(), 14.0 / 4.0);
  EXPECT_EQ(a.max(), 9);

  StalenessHistogram c(4);
  StalenessHistogram d(1);
  d.Record(5);  // d's overflow must stay overflow in c, not land in bucket 2
  c.Merge(d);
  EXPECT_EQ(c.bucket(2), 0u);
  EXPECT_EQ(c.bucket(5), 1u);
}

TEST(StalenessHistogramTest, ResetClearsEverything) {
  StalenessHistogram h(1);
  h.Record(1);
  h.Record(4);
  h.Reset();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.max(), 0);
  EXPECT_EQ(h.bucket(1), 0u);
  EXPECT_EQ(h.bucket(2), 0u);
}

TEST(StalenessHistogramTest, ConcurrentRecordsAreAllCounted) {
  StalenessHistogram h(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&h, t] {
      for (int i = 0; i < 10000; ++i) h.Record((i + t) % 5);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(h.count(), 40000u);
  uint64_t total = 0;
  for (size_t i = 0; i < h.num_buckets(); ++i) total += h.bucket(i);
  EXPECT_EQ(total, 40000u);
  EXPECT_EQ(h.bucket(4), 8000u);  // value 4 is "> 3"
  EXPECT_DOUBLE_EQ(h.mean(), 2.0);
}

TEST(StalenessHistogramTest, ToStringNamesTheOverflowBucket) {
  StalenessHistogram h(1);
  h.Record(0);
  h.Record(3);
  EXPECT_EQ(h.ToString(), "n=2 mean=1.50 p50=0 p99=2 max=3 [0:1 1:0 >1:1]");
}

}  // namespace
}  // namespace pace
