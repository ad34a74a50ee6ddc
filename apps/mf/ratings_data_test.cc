#include "apps/mf/ratings_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <vector>

namespace pace {
namespace mf {
namespace {

class RatingsDataTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    std::string path =
        ::testing::TempDir() + "/ratings_data_test_" + std::to_string(::getpid()) + "_" + name;
    std::ofstream(path) << text;
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const std::string& p : paths_) std::remove(p.c_str());
  }
  std::vector<std::string> paths_;
};

TEST_F(RatingsDataTest, DetectsEachFormat) {
  EXPECT_EQ(DetectRatingsFormat("userId,movieId,rating,timestamp"), RatingsFileFormat::kCsv);
  EXPECT_EQ(DetectRatingsFormat("196\t242\t3\t881250949"), RatingsFileFormat::kTsv);
  EXPECT_EQ(DetectRatingsFormat("1::1193::5::978300760"), RatingsFileFormat::kDat);
  EXPECT_EQ(DetectRatingsFormat("1 2 3.5"), RatingsFileFormat::kPlain);
}

TEST_F(RatingsDataTest, ReadsMovieLensCsvWithHeader) {
  std::string p =
      Write("ratings.csv",
            "userId,movieId,rating,timestamp\n1,31,2.5,1260759144\n1,1029,3.0,1260759179\n"
            "7,31,4.5,1260759182\n");
  std::vector<RawRating> out;
  RatingsReadInfo info;
  ASSERT_TRUE(ReadRatings(p, {}, &out, &info).ok());
  EXPECT_EQ(info.format, RatingsFileFormat::kCsv);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].user, 1u);
  EXPECT_EQ(out[1].item, 1029u);
  EXPECT_EQ(out[1].value, 3.0f);
  EXPECT_EQ(out[2].user, 7u);
}

// ReadRatings reserves room for the rest of a file from its first ratings'
// length: a file whose first lines are short (an estimate too low) and one
// whose first lines are long (too high), after 5000 comment lines, are both
// read whole and in order.
TEST_F(RatingsDataTest, ReadsEveryRatingWhateverTheFirstLinesLength) {
  for (const bool short_first : {true, false}) {
    std::string text;
    for (int i = 0; i < 5000; ++i) text += "#\n";
    for (uint64_t i = 0; i < 20000; ++i) {
      const bool is_short = (i < 5000) == short_first;
      text += std::to_string(i) + (is_short ? " 1 " : "   1234567   ") + std::to_string(i % 5) +
              (is_short ? "\n" : ".25    \n");
    }
    std::vector<RawRating> out = {{7, 7, 7.0f}};  // appended to
    RatingsReadInfo info;
    ASSERT_TRUE(
        ReadRatings(Write(short_first ? "short.txt" : "long.txt", text), {}, &out, &info).ok());
    ASSERT_EQ(out.size(), 20001u) << short_first;
    EXPECT_EQ(out[0].user, 7u);
    for (uint64_t i = 0; i < 20000; ++i) {
      const RawRating& r = out[i + 1];
      const bool is_short = (i < 5000) == short_first;
      ASSERT_EQ(r.user, i);
      ASSERT_EQ(r.item, is_short ? 1u : 1234567u);
      ASSERT_FLOAT_EQ(r.value, static_cast<float>(i % 5) + (is_short ? 0.0f : 0.25f));
    }
  }
}

TEST_F(RatingsDataTest, ReadsUDataDatAndPlain) {
  std::vector<RawRating> out;
  RatingsReadInfo info;
  ASSERT_TRUE(ReadRatings(Write("u.data", "196\t242\t3\t881250949\n186\t302\t3\t891717742\n"), {},
                          &out, &info)
                  .ok());
  EXPECT_EQ(info.format, RatingsFileFormat::kTsv);
  ASSERT_TRUE(ReadRatings(Write("ratings.dat", "1::1193::5::978300760\n"), {}, &out, &info).ok());
  EXPECT_EQ(info.format, RatingsFileFormat::kDat);
  ASSERT_TRUE(
      ReadRatings(Write("plain.txt", "# comment\n\n10 20 -0.5\n  11\t21  1e-1 \n"), {}, &out, &info)
          .ok());
  EXPECT_EQ(info.format, RatingsFileFormat::kPlain);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0].user, 196u);
  EXPECT_EQ(out[2].item, 1193u);
  EXPECT_EQ(out[3].value, -0.5f);
  EXPECT_FLOAT_EQ(out[4].value, 0.1f);
}

TEST_F(RatingsDataTest, BadLineNamesFileAndLine) {
  std::string p = Write("bad.txt", "1 2 3\n1 2 3\n1 x 3\n4 5 6\n");
  std::vector<RawRating> out;
  Status s = ReadRatings(p, {}, &out, nullptr);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(p + ":3: bad item id 'x'"), std::string::npos) << s.ToString();

  std::string q = Write("bad2.csv", "userId,movieId,rating,timestamp\n1,2,3,4\n1,2\n1,2,nan,5\n");
  out.clear();
  s = ReadRatings(q, {}, &out, nullptr);
  EXPECT_NE(s.message().find(q + ":3: expected"), std::string::npos) << s.ToString();

  // Forced format: a plain file read as csv fails on line 1 (no header skip: it is a number).
  out.clear();
  RatingsReadOptions forced;
  forced.format = RatingsFileFormat::kDat;
  s = ReadRatings(Write("plain2.txt", "1 2 3\n"), forced, &out, nullptr);
  EXPECT_NE(s.message().find(":1: expected 'user::item::rating"), std::string::npos)
      << s.ToString();
}

TEST_F(RatingsDataTest, SkipBadLinesCounts) {
  std::string p =
      Write("skip.csv", "userId,movieId,rating,timestamp\n1,2,3,4\n1,2\n1,2,nan,5\n9,9,1,1\n");
  std::vector<RawRating> out;
  RatingsReadOptions o;
  o.skip_bad_lines = true;
  RatingsReadInfo info;
  ASSERT_TRUE(ReadRatings(p, o, &out, &info).ok());
  EXPECT_EQ(out.size(), 2u);
  EXPECT_EQ(info.skipped, 2u);
  EXPECT_NE(info.first_skipped.find(":3:"), std::string::npos);
  // A file with only bad lines is an error even when skipping.
  out.clear();
  EXPECT_FALSE(ReadRatings(Write("allbad.txt", "a b c\n"), o, &out, &info).ok());
  EXPECT_TRUE(ReadRatings("/nonexistent/ratings.csv", o, &out, &info).IsNotFound());
}

TEST_F(RatingsDataTest, StringIdsAreInternedAndNotTakenForAHeader) {
  // Amazon-style: string users, items with leading zeros, no header line.
  std::string p = Write("amazon.csv",
                        "AKM1MP6P0OYPR,0132793040,5.0,1365811200\n"
                        "A2CX7LUOHB2NDG,0321732944,4.0,1341100800\n"
                        "AKM1MP6P0OYPR,B00004TS16,1.5,1367193600\n");
  IdNames names;
  RatingsReadOptions o;
  o.names = &names;
  std::vector<RawRating> got;
  ASSERT_TRUE(ReadRatings(p, o, &got, nullptr).ok());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(names.strings(IdNames::kUser));
  EXPECT_TRUE(names.strings(IdNames::kItem));
  EXPECT_EQ(got[0].user, 0u);
  EXPECT_EQ(got[1].user, 1u);
  EXPECT_EQ(got[2].user, 0u);
  EXPECT_EQ(names.Text(IdNames::kItem, got[0].item), "0132793040");
  EXPECT_EQ(names.Text(IdNames::kItem, got[2].item), "B00004TS16");
  EXPECT_EQ(names.names(IdNames::kUser),
            (std::vector<std::string>{"AKM1MP6P0OYPR", "A2CX7LUOHB2NDG"}));

  // Numbers until a string id: the earlier ones are renumbered as strings;
  // the other column stays numeric. A header is a non-numeric rating field.
  p = Write("mixed.csv", "user,item,rating\n7,10,1\n8,11,2\nx9,10,3\n");
  IdNames mixed;
  o.names = &mixed;
  got.clear();
  ASSERT_TRUE(ReadRatings(p, o, &got, nullptr).ok());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(mixed.strings(IdNames::kUser));
  EXPECT_FALSE(mixed.strings(IdNames::kItem));
  EXPECT_EQ(mixed.names(IdNames::kUser), (std::vector<std::string>{"7", "8", "x9"}));
  EXPECT_EQ(got[0].user, 0u);
  EXPECT_EQ(got[2].user, 2u);
  EXPECT_EQ(got[2].item, 10u);
  EXPECT_EQ(mixed.Text(IdNames::kItem, 11), "11");

  // Without names (the old contract), a string id is a bad line.
  o.names = nullptr;
  got.clear();
  Status s = ReadRatings(Write("bad.csv", "7,10,1\nx9,10,3\n"), o, &got, nullptr);
  EXPECT_NE(s.message().find(":2: bad user id"), std::string::npos) << s.ToString();
  // Too long an id is a bad line naming it.
  o.names = &mixed;
  s = ReadRatings(Write("long.csv", std::string(65, 'a') + ",1,1\n"), o, &got, nullptr);
  EXPECT_NE(s.message().find("longer than 64 bytes"), std::string::npos) << s.ToString();
}

TEST_F(RatingsDataTest, IdMappingIsDenseAndTestUnknownsAreMarked) {
  std::vector<RawRating> train = {{1000, 7, 4}, {5, 7, 2}, {1000, 99, 3}};
  std::vector<RawRating> test = {{5, 99, 1}, {42, 7, 5}};
  MfDataset d;
  ASSERT_TRUE(BuildDataset(train, test, 0, 1, &d).ok());
  EXPECT_EQ(d.users.size(), 2u);
  EXPECT_EQ(d.items.size(), 2u);
  EXPECT_EQ(d.users.Find(1000), 0u);
  EXPECT_EQ(d.users.Find(5), 1u);
  EXPECT_EQ(d.users.raw(1), 5u);
  EXPECT_EQ(d.items.Find(99), 1u);
  EXPECT_EQ(d.train[2].user, 0u);
  EXPECT_EQ(d.train[2].item, 1u);
  EXPECT_DOUBLE_EQ(d.mean, 3.0);
  EXPECT_EQ(d.min_rating, 2.0f);
  EXPECT_EQ(d.max_rating, 4.0f);
  ASSERT_EQ(d.test.size(), 2u);
  EXPECT_EQ(d.test[0].user, 1u);
  EXPECT_EQ(d.test[1].user, IdMap::kUnknown);
  EXPECT_EQ(d.test_unknown, 1u);
}

// Compact (BuildDataset's last step) frees the room kept for more ids:
// every id keeps its index, unknown ids stay unknown, and a later Intern
// continues the numbering.
TEST(IdMapTest, CompactKeepsEveryMappingAndInternContinuesAfterIt) {
  IdMap m;
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < 1000; ++i) ids.push_back((i * 2654435761u) ^ 0x5555);
  for (uint64_t id : ids) m.Intern(id);
  const uint64_t grown_bytes = m.MemoryBytes();
  m.Compact();
  // 2048 slots of 4 bytes, and the 1000 raw ids (8 bytes each) without
  // the vector's room for 24 more.
  EXPECT_EQ(m.MemoryBytes(), 2048 * 4 + 1000 * 8u);
  EXPECT_LT(m.MemoryBytes(), grown_bytes);
  for (uint32_t i = 0; i < ids.size(); ++i) EXPECT_EQ(m.Find(ids[i]), i);
  EXPECT_EQ(m.Find(0x5555 + 1), IdMap::kUnknown);
  EXPECT_EQ(m.Find(UINT64_MAX), IdMap::kUnknown);
  EXPECT_EQ(m.Intern(ids[3]), 3u);
  EXPECT_EQ(m.Intern(UINT64_MAX), 1000u);
  EXPECT_EQ(m.Find(UINT64_MAX), 1000u);
  EXPECT_EQ(m.Find(ids[999]), 999u);
}

// The hash index grows through many doublings and keeps every id's index:
// ids that share their low bits (multiples of 2^20), 0 and UINT64_MAX among
// them, each get the next dense index once and the same index after.
TEST(IdMapTest, InternNumbersIdsDenselyThroughTheIndexGrowing) {
  IdMap m;
  std::vector<uint64_t> ids = {0, UINT64_MAX};
  for (uint64_t i = 1; i <= 20000; ++i) ids.push_back(i << 20);
  for (uint64_t i = 1; i <= 20000; ++i) ids.push_back(i);
  for (uint32_t i = 0; i < ids.size(); ++i) ASSERT_EQ(m.Intern(ids[i]), i) << ids[i];
  for (uint32_t i = 0; i < ids.size(); ++i) ASSERT_EQ(m.Intern(ids[i]), i) << ids[i];
  EXPECT_EQ(m.size(), ids.size());
  for (uint32_t i = 0; i < ids.size(); ++i) {
    ASSERT_EQ(m.Find(ids[i]), i) << ids[i];
    ASSERT_EQ(m.raw(i), ids[i]);
  }
  EXPECT_EQ(m.Find(20001), IdMap::kUnknown);
  EXPECT_EQ(m.Find(uint64_t{20001} << 20), IdMap::kUnknown);
  EXPECT_EQ(IdMap().Find(7), IdMap::kUnknown);
}

TEST_F(RatingsDataTest, TestFractionSplitIsDeterministic) {
  std::vector<RawRating> train;
  for (uint64_t i = 0; i < 10000; ++i) train.push_back({i % 100, i / 100, 1.0f});
  MfDataset a, b, c;
  ASSERT_TRUE(BuildDataset(train, {}, 0.2, 7, &a).ok());
  ASSERT_TRUE(BuildDataset(train, {}, 0.2, 7, &b).ok());
  ASSERT_TRUE(BuildDataset(train, {}, 0.2, 8, &c).ok());
  EXPECT_NEAR(a.test.size(), 2000, 150);
  EXPECT_EQ(a.test.size(), b.test.size());
  EXPECT_NE(a.test.size(), c.test.size());
  EXPECT_EQ(a.train.size() + a.test.size(), 10000u);
  EXPECT_FALSE(BuildDataset(train, {}, 1.0, 7, &a).ok());
}

// Skewed users (user u has u + 1 ratings): every user's ratings land in one
// part, parts are contiguous and balanced to within one user's ratings, the
// shuffled order is kept within a part, and one part changes nothing.
TEST(PartitionByUserTest, UsersStayTogetherPartsBalanceOrderIsKept) {
  std::vector<RawRating> raw;
  for (uint64_t u = 0; u < 40; ++u) {
    for (uint64_t k = 0; k <= u; ++k) raw.push_back(RawRating{u, 1000 + k, 1.0f + k});
  }
  MfDataset one, data;
  ASSERT_TRUE(BuildDataset(raw, {}, 0, 7, &one).ok());
  ASSERT_TRUE(BuildDataset(raw, {}, 0, 7, &data).ok());
  const std::vector<Rating> shuffled = data.train;
  std::vector<size_t> whole = PartitionByUser(1, &one);
  EXPECT_EQ(whole, (std::vector<size_t>{0, shuffled.size()}));
  for (size_t i = 0; i < shuffled.size(); ++i) {
    ASSERT_EQ(one.train[i].user, shuffled[i].user);
    ASSERT_EQ(one.train[i].item, shuffled[i].item);
  }

  const uint32_t parts = 3;
  std::vector<size_t> off = PartitionByUser(parts, &data);
  ASSERT_EQ(off.size(), parts + 1);
  EXPECT_EQ(off.front(), 0u);
  EXPECT_EQ(off.back(), shuffled.size());
  std::map<uint32_t, uint32_t> part_of_user;
  size_t smallest = SIZE_MAX, largest = 0;
  for (uint32_t p = 0; p < parts; ++p) {
    ASSERT_LE(off[p], off[p + 1]);
    smallest = std::min(smallest, off[p + 1] - off[p]);
    largest = std::max(largest, off[p + 1] - off[p]);
    for (size_t i = off[p]; i < off[p + 1]; ++i) {
      auto [it, fresh] = part_of_user.emplace(data.train[i].user, p);
      EXPECT_EQ(it->second, p) << "user " << data.train[i].user << " is in two parts";
    }
    // Within the part, ratings keep their relative order of the shuffle.
    std::vector<std::pair<uint32_t, uint32_t>> want, got;
    for (const Rating& r : shuffled) {
      if (part_of_user.count(r.user) && part_of_user[r.user] == p) want.push_back({r.user, r.item});
    }
    for (size_t i = off[p]; i < off[p + 1]; ++i)
      got.push_back({data.train[i].user, data.train[i].item});
    EXPECT_EQ(got, want);
  }
  EXPECT_EQ(part_of_user.size(), 40u);
  EXPECT_LE(largest - smallest, 40u);  // the largest user has 40 ratings
}

// Distinct users and items per part, against sets built from the ratings:
// users split across parts, items shared by them, and parts without ratings.
TEST(PartitionByUserTest, CountPartRowsCountsDistinctIdsOfEachPart) {
  std::vector<RawRating> raw;
  for (uint64_t u = 0; u < 40; ++u) {
    for (uint64_t k = 0; k <= u % 7; ++k) raw.push_back(RawRating{u, 1000 + (u + k) % 9, 2.0f});
  }
  MfDataset data;
  ASSERT_TRUE(BuildDataset(raw, {}, 0, 7, &data).ok());
  const std::vector<size_t> off = PartitionByUser(3, &data);
  std::vector<size_t> users, items;
  CountPartRows(data, off, &users, &items);
  ASSERT_EQ(users.size(), 3u);
  ASSERT_EQ(items.size(), 3u);
  size_t all_users = 0;
  for (uint32_t p = 0; p < 3; ++p) {
    std::set<uint32_t> u, i;
    for (size_t k = off[p]; k < off[p + 1]; ++k) {
      u.insert(data.train[k].user);
      i.insert(data.train[k].item);
    }
    EXPECT_EQ(users[p], u.size()) << "part " << p;
    EXPECT_EQ(items[p], i.size()) << "part " << p;
    all_users += users[p];
  }
  EXPECT_EQ(all_users, 40u);  // each user in one part

  // More parts than users: the empty parts count nothing.
  MfDataset few;
  ASSERT_TRUE(BuildDataset({RawRating{1, 5, 1.0f}, RawRating{1, 6, 1.0f}}, {}, 0, 7, &few).ok());
  CountPartRows(few, PartitionByUser(3, &few), &users, &items);
  EXPECT_EQ(users, (std::vector<size_t>{1, 0, 0}));
  EXPECT_EQ(items, (std::vector<size_t>{2, 0, 0}));
}

}  // namespace
}  // namespace mf
}  // namespace pace
