#include "common/malloc_tuning.h"

#include <gtest/gtest.h>

namespace pace {
namespace {

constexpr char kMadvise[] = "always [madvise] never\n";

TEST(HugePageTunablesTest, AddsHugetlbWhereTheKernelAndGlibcHaveIt) {
  EXPECT_EQ(HugePageTunables(nullptr, kMadvise, "2.36"), "glibc.malloc.hugetlb=1");
  EXPECT_EQ(HugePageTunables("", kMadvise, "2.36"), "glibc.malloc.hugetlb=1");
  EXPECT_EQ(HugePageTunables(nullptr, "[always] madvise never\n", "2.35"),
            "glibc.malloc.hugetlb=1");
  EXPECT_EQ(HugePageTunables(nullptr, kMadvise, "3.0"), "glibc.malloc.hugetlb=1");
}

TEST(HugePageTunablesTest, KeepsTheTunablesAlreadySet) {
  EXPECT_EQ(HugePageTunables("glibc.malloc.arena_max=2", kMadvise, "2.36"),
            "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1");
  EXPECT_EQ(
      HugePageTunables("glibc.malloc.tcache_count=0:glibc.malloc.top_pad=0", kMadvise, "2.36"),
      "glibc.malloc.tcache_count=0:glibc.malloc.top_pad=0:glibc.malloc.hugetlb=1");
}

TEST(HugePageTunablesTest, RunsOnWhenTheUserChoseOrItCannotHelp) {
  // The user's own setting, whatever it is (=0 turns huge pages off).
  EXPECT_EQ(HugePageTunables("glibc.malloc.hugetlb=0", kMadvise, "2.36"), "");
  EXPECT_EQ(HugePageTunables("glibc.malloc.arena_max=1:glibc.malloc.hugetlb=2", kMadvise, "2.36"),
            "");
  // Transparent huge pages off or absent.
  EXPECT_EQ(HugePageTunables(nullptr, "always madvise [never]\n", "2.36"), "");
  EXPECT_EQ(HugePageTunables(nullptr, "", "2.36"), "");
  // A glibc without the tunable.
  EXPECT_EQ(HugePageTunables(nullptr, kMadvise, "2.34"), "");
  EXPECT_EQ(HugePageTunables(nullptr, kMadvise, "1.9"), "");
  EXPECT_EQ(HugePageTunables(nullptr, kMadvise, "unknown"), "");
}

TEST(HugePageTunablesTest, ANameThatOnlyStartsLikeHugetlbIsNotIt) {
  EXPECT_EQ(HugePageTunables("glibc.malloc.hugetlbx=1", kMadvise, "2.36"),
            "glibc.malloc.hugetlbx=1:glibc.malloc.hugetlb=1");
  EXPECT_EQ(HugePageTunables("x.glibc.malloc.hugetlb=1", kMadvise, "2.36"),
            "x.glibc.malloc.hugetlb=1:glibc.malloc.hugetlb=1");
}

}  // namespace
}  // namespace pace
