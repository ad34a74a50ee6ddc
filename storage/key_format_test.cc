#include "storage/key_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace pace {
namespace storage_format {
namespace {

TEST(KeyFormatTest, RowKeysSortByTableThenRow) {
  std::mt19937_64 rng(42);
  std::vector<pace::RowKey> keys;
  const uint32_t tables[] = {0, 1, 2, 255, 256, 65536, 0x7fffffff, 0x80000000u, UINT32_MAX};
  const uint64_t rows[] = {0, 1, 255, 256, 1ull << 32, (1ull << 63) - 1, 1ull << 63, UINT64_MAX};
  for (uint32_t t : tables) {
    for (uint64_t r : rows) keys.push_back({t, r});
  }
  for (int i = 0; i < 2000; ++i) {
    keys.push_back({static_cast<uint32_t>(rng()), rng() >> (rng() % 64)});
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const pace::RowKey& a = keys[i];
    const pace::RowKey& b = keys[(i * 7919 + 13) % keys.size()];
    std::string ka = MakeRowKey(a.table, a.row);
    std::string kb = MakeRowKey(b.table, b.row);
    ASSERT_EQ(a < b, ka < kb) << a.table << "/" << a.row << " vs " << b.table << "/" << b.row;
    ASSERT_EQ(a == b, ka == kb);
  }
}

TEST(KeyFormatTest, RowKeyRoundTripAndLayout) {
  std::string k = MakeRowKey(0x01020304, 0x05060708090a0b0cull);
  ASSERT_EQ(k.size(), kRowKeySize);
  EXPECT_EQ(k, std::string("\x04\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c", 13));
  uint32_t t;
  uint64_t r;
  ASSERT_TRUE(DecodeRowKey(k, &t, &r));
  EXPECT_EQ(t, 0x01020304u);
  EXPECT_EQ(r, 0x05060708090a0b0cull);
  EXPECT_FALSE(DecodeRowKey(k.substr(0, 12), &t, &r));
  EXPECT_FALSE(DecodeRowKey(CatalogKey(1) + std::string(8, '\0'), &t, &r));
}

TEST(KeyFormatTest, TableRangeHoldsExactlyItsRows) {
  for (uint32_t t : {0u, 1u, 77u, UINT32_MAX - 1, UINT32_MAX}) {
    std::string begin = TableRowsBegin(t);
    std::string end = TableRowsEnd(t);
    EXPECT_LE(begin, MakeRowKey(t, 0));
    EXPECT_LT(MakeRowKey(t, UINT64_MAX), end);
    if (t > 0) {
      EXPECT_LT(MakeRowKey(t - 1, UINT64_MAX), begin);
    }
    if (t < UINT32_MAX) {
      EXPECT_LE(end, MakeRowKey(t + 1, 0));
    }
  }
}

TEST(KeyFormatTest, KeySpacesAreDisjointAndOrdered) {
  std::string meta(kFormatVersionKey);
  EXPECT_LT(meta, KeySpaceEnd(kMetaPrefix));
  EXPECT_LE(KeySpaceEnd(kMetaPrefix), CatalogKey(0));
  EXPECT_LT(CatalogKey(UINT32_MAX), KeySpaceEnd(kCatalogPrefix));
  EXPECT_LE(KeySpaceEnd(kCatalogPrefix), ClockKey(0));
  EXPECT_LT(ClockKey(UINT32_MAX), KeySpaceEnd(kClockPrefix));
  EXPECT_LE(KeySpaceEnd(kClockPrefix), MakeRowKey(0, 0));
  for (std::string_view k : {kIdentityKey, kNextTableIdKey, kCreatedKey}) {
    EXPECT_EQ(k[0], kMetaPrefix);
  }
  uint32_t id;
  ASSERT_TRUE(DecodeCatalogKey(CatalogKey(9), &id));
  EXPECT_EQ(id, 9u);
  EXPECT_FALSE(DecodeCatalogKey(ClockKey(9), &id));
  ClientId c;
  ASSERT_TRUE(DecodeClockKey(ClockKey(70000), &c));
  EXPECT_EQ(c, 70000u);
  EXPECT_FALSE(DecodeClockKey(CatalogKey(9), &c));
}

TEST(KeyFormatTest, FixedAndClockCodecs) {
  uint32_t v32;
  ASSERT_TRUE(DecodeFixed32(EncodeFixed32(0xdeadbeef), "x", &v32).ok());
  EXPECT_EQ(v32, 0xdeadbeefu);
  EXPECT_EQ(EncodeFixed32(1), std::string("\x01\0\0\0", 4));  // little-endian
  EXPECT_EQ(DecodeFixed32("abc", "x", &v32).code(), StatusCode::kCorruption);
  ClockT c;
  ASSERT_TRUE(DecodeClock(EncodeClock(123456789012), &c).ok());
  EXPECT_EQ(c, 123456789012);
  EXPECT_EQ(DecodeClock(EncodeClock(-1), &c).code(), StatusCode::kCorruption);
  EXPECT_EQ(DecodeClock("1234567", &c).code(), StatusCode::kCorruption);
  // With parts (a partial Apply): 12 bytes; without, the old 8.
  uint32_t parts = 9;
  EXPECT_EQ(EncodeClock(5, 0), EncodeClock(5));
  EXPECT_EQ(EncodeClock(5, 3).size(), 12u);
  ASSERT_TRUE(DecodeClock(EncodeClock(5, 3), &c, &parts).ok());
  EXPECT_EQ(c, 5);
  EXPECT_EQ(parts, 3u);
  ASSERT_TRUE(DecodeClock(EncodeClock(6), &c, &parts).ok());
  EXPECT_EQ(parts, 0u);
  EXPECT_EQ(DecodeClock(EncodeClock(5) + std::string(4, '\0'), &c, &parts).code(),
            StatusCode::kCorruption);
}

TEST(KeyFormatTest, IdentityCodec) {
  IdentityRecord id{2, 4, 9};
  IdentityRecord out;
  ASSERT_TRUE(DecodeIdentity(EncodeIdentity(id), &out).ok());
  EXPECT_EQ(out.shard_id, 2u);
  EXPECT_EQ(out.num_shards, 4u);
  EXPECT_EQ(out.num_clients, 9u);
  EXPECT_EQ(DecodeIdentity(EncodeIdentity({4, 4, 1}), &out).code(), StatusCode::kCorruption);
  EXPECT_EQ(DecodeIdentity(EncodeIdentity({0, 1, 0}), &out).code(), StatusCode::kCorruption);
  EXPECT_EQ(DecodeIdentity("short", &out).code(), StatusCode::kCorruption);
}

TableSchema FullSchema() {
  TableSchema s;
  s.id = 17;
  s.name = "emb.w-1";
  s.kind = RowKind::kDense;
  s.type = ElementType::kF64;
  s.width = 300;
  s.consistency = Consistency::kEssp;
  s.staleness = 3;
  s.init = Initializer{InitKind::kNormal, 0.5, 0.01, 0xfeedface12345678ull};
  return s;
}

TEST(KeyFormatTest, UndoPointersOfBothVersionsRoundTrip) {
  UndoPointer file{7, 0xabc, 1234, 0xdeadbeef};
  const std::string v1 = EncodeUndoPointer(file);
  ASSERT_EQ(v1.size(), 32u);
  UndoPointer got;
  ASSERT_TRUE(DecodeUndoPointer(v1, &got).ok());
  EXPECT_FALSE(got.in_log);
  EXPECT_EQ(got.clock, 7);
  EXPECT_EQ(got.incarnation, 0xabcu);
  EXPECT_EQ(got.bytes, 1234u);
  EXPECT_EQ(got.crc, 0xdeadbeefu);

  UndoPointer log = file;
  log.in_log = true;
  log.log_number = 3;
  log.log_offset = 8192;
  log.log_seq = 41;
  const std::string v2 = EncodeUndoPointer(log);
  ASSERT_EQ(v2.size(), 56u);
  ASSERT_TRUE(DecodeUndoPointer(v2, &got).ok());
  EXPECT_TRUE(got.in_log);
  EXPECT_EQ(got.clock, 7);
  EXPECT_EQ(got.bytes, 1234u);
  EXPECT_EQ(got.log_number, 3u);
  EXPECT_EQ(got.log_offset, 8192u);
  EXPECT_EQ(got.log_seq, 41u);

  // A version that does not match the value's size, and other sizes, are
  // Corruption.
  EXPECT_TRUE(DecodeUndoPointer(v2.substr(0, 32), &got).code() == StatusCode::kCorruption);
  std::string long_v1 = v1 + std::string(24, '\0');
  EXPECT_TRUE(DecodeUndoPointer(long_v1, &got).code() == StatusCode::kCorruption);
  EXPECT_TRUE(DecodeUndoPointer(v1.substr(0, 31), &got).code() == StatusCode::kCorruption);
}

TEST(KeyFormatTest, SchemaRoundTrip) {
  TableSchema s = FullSchema();
  TableSchema out;
  ASSERT_TRUE(DecodeSchema(EncodeSchema(s), &out).ok());
  EXPECT_TRUE(SameSchema(s, out));
  EXPECT_EQ(out.id, 17u);
  s.kind = RowKind::kSparse;
  s.type = ElementType::kI32;
  s.width = 0;
  s.consistency = Consistency::kAsync;
  s.init = Initializer{};
  ASSERT_TRUE(DecodeSchema(EncodeSchema(s), &out).ok());
  EXPECT_TRUE(SameSchema(s, out));
  s.consistency = Consistency::kVap;
  s.value_bound = 0.125;
  ASSERT_TRUE(DecodeSchema(EncodeSchema(s), &out).ok());
  EXPECT_EQ(out.value_bound, 0.125);
  EXPECT_TRUE(SameSchema(s, out));
}

TEST(KeyFormatTest, VersionOneSchemaRecordsAreStillRead) {
  // A version 1 record is a version 2 record without the trailing value bound.
  std::string v2 = EncodeSchema(FullSchema());
  std::string v1 = v2.substr(0, v2.size() - sizeof(double));
  v1[0] = 1;
  TableSchema out;
  ASSERT_TRUE(DecodeSchema(v1, &out).ok());
  EXPECT_TRUE(SameSchema(FullSchema(), out));
  EXPECT_EQ(out.value_bound, 0.0);
  EXPECT_EQ(DecodeSchema(v1 + "12345678", &out).code(), StatusCode::kCorruption);
}

TEST(KeyFormatTest, SchemaCorruptionDetected) {
  std::string good = EncodeSchema(FullSchema());
  TableSchema out;
  for (size_t len = 0; len < good.size(); ++len) {
    EXPECT_EQ(DecodeSchema(good.substr(0, len), &out).code(), StatusCode::kCorruption) << len;
  }
  EXPECT_EQ(DecodeSchema(good + "x", &out).code(), StatusCode::kCorruption);
  std::string bad = good;
  bad[0] = 9;  // record version
  EXPECT_EQ(DecodeSchema(bad, &out).code(), StatusCode::kCorruption);
  bad = good;
  bad[5] = 7;  // row kind
  EXPECT_EQ(DecodeSchema(bad, &out).code(), StatusCode::kCorruption);
  bad = good;
  bad[bad.size() - 1 - sizeof(double)] = ' ';  // invalid name character
  EXPECT_EQ(DecodeSchema(bad, &out).code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace storage_format
}  // namespace pace
