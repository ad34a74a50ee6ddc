// PassVector (client/pass_vector.h): a thread's passes reuse their vectors.
#include "client/pass_vector.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

namespace pace::client {
namespace {

TEST(PassVectorTest, TheNextPassOfAThreadReusesTheStorage) {
  const uint32_t* first = nullptr;
  {
    PassVector<uint32_t> v(1000);
    EXPECT_EQ(v.size(), 1000u);
    first = v->data();
  }
  PassVector<uint32_t> again(500);
  EXPECT_EQ(again->data(), first) << "allocated again instead of reused";
  for (size_t i = 0; i < again.size(); ++i) EXPECT_EQ(again[i], 0u) << "not value-initialized";
}

TEST(PassVectorTest, NestedPassesHaveStorageOfTheirOwn) {
  PassVector<uint32_t> outer(100);
  outer[7] = 42;
  {
    PassVector<uint32_t> inner(100);
    EXPECT_NE(inner->data(), outer->data());
    inner[7] = 1;
  }
  EXPECT_EQ(outer[7], 42u);
}

TEST(PassVectorTest, LargeVectorsAreNotKept) {
  const size_t large = PassVector<uint64_t>::kMaxKeptBytes / sizeof(uint64_t) + 1;
  {
    PassVector<uint64_t> drain;  // takes what a previous test kept, if anything
  }
  const uint64_t* big = nullptr;
  {
    PassVector<uint64_t> v(large);
    big = v->data();
  }
  PassVector<uint64_t> next(1);
  EXPECT_TRUE(next->data() != big || next->capacity() < large) << "a large vector was kept";
}

TEST(PassVectorTest, ThreadsDoNotShare) {
  const uint32_t* mine = nullptr;
  {
    PassVector<uint32_t> v(64);
    mine = v->data();
  }
  const uint32_t* theirs = nullptr;
  std::thread([&] {
    PassVector<uint32_t> v(64);
    theirs = v->data();
  }).join();
  // This thread's kept vector is still here, not taken by the other thread.
  PassVector<uint32_t> again(64);
  EXPECT_EQ(again->data(), mine);
  EXPECT_NE(theirs, mine);
}

}  // namespace
}  // namespace pace::client
