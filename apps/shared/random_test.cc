#include "apps/shared/random.h"

#include <gtest/gtest.h>

namespace pace {
namespace apps {
namespace {

// The apps' Rng is common/random.h's with the apps' historical seeding: a
// --seed gives the stream it gave before the generators were merged.
TEST(AppsRngTest, StreamOfASeedIsUnchanged) {
  Rng r(42);
  EXPECT_EQ(r.Next(), 13696896915399030466ull);
  EXPECT_EQ(r.Next(), 12641092763546669283ull);
  EXPECT_EQ(r.Next(), 14580102322132234639ull);
  EXPECT_EQ(r.UniformInt(1000), 286u);
}

}  // namespace
}  // namespace apps
}  // namespace pace
