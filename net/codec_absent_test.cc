// Absent rows on the wire (docs/wire-protocol.md, ReadReply and Rows): a row
// flagged absent round-trips without bytes, the Hello feature bit that asks
// for them round-trips, and malformed flags are refused in one line.
#include <flatbuffers/flatbuffers.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "net/codec.h"

namespace pace::net {
namespace {

constexpr uint32_t kFrameHeader = 4;

Status RoundTrip(const Message& in, Message* out) {
  std::string frame;
  RETURN_IF_ERROR(EncodeFrame(in, &frame));
  return DecodePayload(std::string_view(frame).substr(kFrameHeader), out);
}

TEST(CodecAbsentTest, AbsentRowsRoundTripWithoutBytes) {
  ReadReply r{7, 3, 4, {}, 1};
  r.rows.push_back(RowData{2, 10, std::string(8, 'x')});
  r.rows.push_back(RowData{2, 11, "", /*absent=*/true});
  r.rows.push_back(RowData{2, 12, std::string(8, 'y')});
  Message m;
  ASSERT_TRUE(RoundTrip(r, &m).ok());
  const ReadReply& got = std::get<ReadReply>(m);
  ASSERT_EQ(got.rows.size(), 3u);
  EXPECT_FALSE(got.rows[0].absent);
  EXPECT_EQ(got.rows[0].bytes, std::string(8, 'x'));
  EXPECT_TRUE(got.rows[1].absent);
  EXPECT_TRUE(got.rows[1].bytes.empty());
  EXPECT_EQ(got.rows[1].row, 11u);
  EXPECT_FALSE(got.rows[2].absent);
  EXPECT_EQ(got.rows[2].bytes, std::string(8, 'y'));

  // A reply without absent rows carries no flags at all (as before).
  ReadReply plain{8, 3, 4, {RowData{2, 10, "abcd"}}, 0};
  ASSERT_TRUE(RoundTrip(plain, &m).ok());
  EXPECT_FALSE(std::get<ReadReply>(m).rows[0].absent);
}

TEST(CodecAbsentTest, HelloFeaturesRoundTrip) {
  Hello h;
  h.client_id = 3;
  h.features = Hello::kAbsentRows;
  Message m;
  ASSERT_TRUE(RoundTrip(h, &m).ok());
  EXPECT_EQ(std::get<Hello>(m).features, Hello::kAbsentRows);
  ASSERT_TRUE(RoundTrip(Hello{}, &m).ok());
  EXPECT_EQ(std::get<Hello>(m).features, 0u);
}

TEST(CodecAbsentTest, ImpossibleAbsentRowsAreNotEncoded) {
  std::string frame;
  ReadReply r;
  r.rows.push_back(RowData{1, 1, "abcd", /*absent=*/true});
  Status s = EncodeFrame(r, &frame);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  // (An Apply's rows, net::DeltaRow, have no absent flag: a delta cannot be.)
}

// Hand-built payloads: field i of a table is at vtable offset 4 + 2 * i.
constexpr flatbuffers::voffset_t Slot(int field) {
  return static_cast<flatbuffers::voffset_t>(4 + 2 * field);
}
constexpr uint8_t kTypeReadReply = 4;
constexpr uint8_t kTypeApply = 5;

struct alignas(8) RawRowRef {
  uint64_t row;
  uint32_t table;
  uint32_t size;
};

// A ReadReply (or Apply) whose Rows hold `refs`, `data_bytes` bytes of data
// and the absent flags `flags`.
std::string WithFlags(uint8_t type, const std::vector<RawRowRef>& refs, size_t data_bytes,
                      const std::vector<uint8_t>& flags) {
  flatbuffers::FlatBufferBuilder b;
  auto data_off = b.CreateVector(std::vector<uint8_t>(data_bytes, 1));
  auto flags_off = b.CreateVector(flags);
  auto refs_off = b.CreateVectorOfStructs(refs.data(), refs.size());
  auto rs = b.StartTable();
  b.AddOffset(Slot(0), refs_off);
  b.AddOffset(Slot(1), data_off);
  b.AddOffset(Slot(2), flags_off);
  flatbuffers::Offset<void> rows(b.EndTable(rs));
  auto body = b.StartTable();
  // ReadReply.rows is field 3, Apply.updates field 1.
  b.AddOffset(Slot(type == kTypeReadReply ? 3 : 1), rows);
  flatbuffers::Offset<void> body_off(b.EndTable(body));
  auto msg = b.StartTable();
  b.AddOffset(Slot(1), body_off);
  b.AddElement<uint8_t>(Slot(0), type, 0);
  flatbuffers::Offset<void> root(b.EndTable(msg));
  b.Finish(root, "PACE");
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

TEST(CodecAbsentTest, MalformedAbsentFlagsAreRefused) {
  Message m;
  ASSERT_TRUE(DecodePayload(WithFlags(kTypeReadReply, {{1, 2, 4}, {5, 2, 0}}, 4, {0, 1}), &m).ok());
  EXPECT_TRUE(std::get<ReadReply>(m).rows[1].absent);

  // An absent row with bytes.
  Status s = DecodePayload(WithFlags(kTypeReadReply, {{1, 2, 4}, {5, 2, 4}}, 8, {0, 1}), &m);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("row 2/5 is marked absent (no record) but carries 4 bytes"),
            std::string::npos)
      << s.ToString();
  // Flags that do not match the rows.
  s = DecodePayload(WithFlags(kTypeReadReply, {{1, 2, 4}, {5, 2, 0}}, 4, {1}), &m);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("1 absent flags for 2 rows"), std::string::npos) << s.ToString();
  // A delta cannot be absent.
  s = DecodePayload(WithFlags(kTypeApply, {{1, 2, 0}}, 0, {1}), &m);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("Apply.updates: row 2/1 is marked absent, which a delta cannot be"),
            std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace pace::net
