// Encoding and decoding of every message (net/codec.h), including hostile
// payloads built by hand from the schema layout in net/schema/pace.fbs.
#include "net/codec.h"

#include <flatbuffers/flatbuffers.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "net/frame.h"
#include "net/testing/sample_messages.h"

namespace pace::net {
namespace {

using testing::EncodeOrFail;
using testing::SameMessage;
using testing::SampleMessages;
using testing::SampleSchema;

uint32_t LengthPrefix(const std::string& frame) {
  const auto* p = reinterpret_cast<const unsigned char*>(frame.data());
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// encode -> FrameReader -> decode.
Status RoundTrip(const Message& in, Message* out) {
  std::string frame;
  RETURN_IF_ERROR(EncodeFrame(in, &frame));
  FrameReader reader;
  reader.Append(frame);
  std::string_view payload;
  RETURN_IF_ERROR(reader.Next(&payload));
  if (payload.empty()) return Status::Internal("reader yielded no payload");
  if (reader.buffered_bytes() != 0) return Status::Internal("reader left bytes behind");
  return DecodePayload(payload, out);
}

void ExpectRoundTrip(const Message& m) {
  Message out;
  Status s = RoundTrip(m, &out);
  ASSERT_TRUE(s.ok()) << MessageName(m) << ": " << s.ToString();
  EXPECT_TRUE(SameMessage(m, out));
}

TEST(CodecTest, SamplesCoverEveryMessageType) {
  std::set<size_t> seen;
  for (const Message& m : SampleMessages()) seen.insert(m.index());
  EXPECT_EQ(seen.size(), std::variant_size_v<Message>);
}

TEST(CodecTest, EveryMessageTypeRoundTrips) {
  for (const Message& m : SampleMessages()) {
    SCOPED_TRACE(MessageName(m));
    ExpectRoundTrip(m);
  }
}

TEST(CodecTest, DefaultValuedMessagesRoundTrip) {
  // Fields equal to their schema default are not written on the wire; they
  // must still come back with the struct's default.
  for (const Message& sample : SampleMessages()) {
    Message m = sample;
    std::visit([](auto& x) { x = std::decay_t<decltype(x)>{}; }, m);
    if (auto* e = std::get_if<Error>(&m)) e->code = StatusCode::kInternal;
    SCOPED_TRACE(MessageName(m));
    ExpectRoundTrip(m);
  }
}

// RowsMessageBytes bounds the payload of every message that carries rows,
// whatever the rows' number and sizes and the other fields' values, so a
// sender that cuts its rows by it never has a frame refused for its size.
TEST(CodecTest, RowsMessageBytesBoundsThePayload) {
  for (size_t rows : {0, 1, 2, 3, 7, 100, 1000}) {
    for (size_t size : {0, 1, 5, 8, 13, 64, 4099}) {
      std::vector<RowData> data;
      uint64_t bytes = 0;
      for (size_t i = 0; i < rows; ++i) {
        const size_t n = (size + i) % (size + 1);  // mixed sizes, some empty
        data.push_back(RowData{UINT32_MAX, UINT64_MAX - i, std::string(n, 'x')});
        bytes += n;
      }
      const uint64_t bound = RowsMessageBytes(rows, bytes);
      constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
      constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
      for (const Message& m : {Message(Apply{kMax64, data, UINT32_MAX, true}),
                               Message(ReadReply{UINT64_MAX, kMin64, kMax64, data, UINT32_MAX}),
                               Message(Push{kMin64, kMax64, data, UINT32_MAX})}) {
        const std::string frame = EncodeOrFail(m);
        EXPECT_LE(frame.size() - kFrameHeaderBytes, bound)
            << MessageName(m) << " of " << rows << " rows, " << bytes << " bytes";
      }
    }
  }
}

TEST(CodecTest, FrameHasLittleEndianLengthAndAlignedPayload) {
  for (const Message& m : SampleMessages()) {
    std::string frame = EncodeOrFail(m);
    ASSERT_GE(frame.size(), kFrameHeaderBytes);
    EXPECT_EQ(LengthPrefix(frame), frame.size() - kFrameHeaderBytes) << MessageName(m);
    EXPECT_EQ(frame.size() % kPayloadAlignment, 0u) << MessageName(m);
    EXPECT_EQ(frame.substr(kFrameHeaderBytes + 4, 4), "PACE") << "file identifier";
  }
}

TEST(CodecTest, EncodeAppendsToExistingBytes) {
  std::string out = "xyz";
  ASSERT_TRUE(EncodeFrame(Ack{5, false}, &out).ok());
  EXPECT_EQ(out.substr(0, 3), "xyz");
  Message m;
  ASSERT_TRUE(DecodePayload(std::string_view(out).substr(3 + kFrameHeaderBytes), &m).ok());
  EXPECT_TRUE(SameMessage(m, Ack{5, false}));
}

TEST(CodecTest, EveryEnumValueRoundTrips) {
  TablesReply reply{1, {}};
  uint32_t id = 1;
  for (RowKind kind : {RowKind::kDense, RowKind::kSparse}) {
    for (ElementType type :
         {ElementType::kF32, ElementType::kF64, ElementType::kI32, ElementType::kI64}) {
      for (Consistency c :
           {Consistency::kBsp, Consistency::kSsp, Consistency::kEssp, Consistency::kAsync}) {
        for (InitKind init : {InitKind::kZeros, InitKind::kUniform, InitKind::kNormal}) {
          TableSchema s = SampleSchema(id, "t" + std::to_string(id));
          ++id;
          s.kind = kind;
          s.type = type;
          s.consistency = c;
          s.init.kind = init;
          reply.tables.push_back(s);
        }
      }
    }
  }
  ExpectRoundTrip(reply);
  for (uint8_t code = 1; code <= static_cast<uint8_t>(StatusCode::kIncompatible); ++code) {
    ExpectRoundTrip(Error{code, static_cast<StatusCode>(code), "m"});
  }
  ExpectRoundTrip(Hello{kWireVersion, 1, "t", Hello::kClientProcess});
  ExpectRoundTrip(Hello{kWireVersion, 1, "t", Hello::kObserver});
  ExpectRoundTrip(Hello{kWireVersion, 1, "t", Hello::kClientProcess, UINT64_MAX});
}

TEST(CodecTest, EmptyAndLargeRowBlocks) {
  ExpectRoundTrip(Apply{3, {}});
  ExpectRoundTrip(ReadReply{1, 2, 3, {RowData{1, 2, ""}, RowData{1, 3, ""}}});
  std::vector<RowData> many;
  std::mt19937_64 rng(7);
  for (uint64_t i = 0; i < 5000; ++i) {
    std::string bytes(rng() % 200, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    many.push_back(RowData{static_cast<uint32_t>(i % 3), rng(), std::move(bytes)});
  }
  ExpectRoundTrip(Push{1, 2, many});
  ExpectRoundTrip(Apply{4, {RowData{9, 9, std::string(8 << 20, '\x5a')}}});
}

TEST(CodecTest, EncodeRejectsUnsendableValues) {
  std::string out;
  EXPECT_EQ(EncodeFrame(Error{1, StatusCode::kOk, "x"}, &out).code(), StatusCode::kInvalidArgument);
  TableSchema bad = SampleSchema(1, "t");
  bad.kind = static_cast<RowKind>(9);
  EXPECT_EQ(EncodeFrame(CreateTable{1, bad}, &out).code(), StatusCode::kInvalidArgument);
  bad = SampleSchema(1, "t");
  bad.init.kind = static_cast<InitKind>(0);
  EXPECT_EQ(EncodeFrame(TablesReply{1, {bad}}, &out).code(), StatusCode::kInvalidArgument);
  Hello hello;
  hello.role = static_cast<Hello::Role>(7);
  EXPECT_EQ(EncodeFrame(hello, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(out.empty()) << "a failed encode must not append";
}

TEST(CodecTest, MisalignedPayloadIsDecoded) {
  std::string frame = EncodeOrFail(SampleMessages()[3]);
  std::string shifted = "x" + frame.substr(kFrameHeaderBytes);
  Message m;
  ASSERT_TRUE(DecodePayload(std::string_view(shifted).substr(1), &m).ok());
  EXPECT_TRUE(SameMessage(m, SampleMessages()[3]));
}

TEST(CodecTest, MessageNames) {
  EXPECT_STREQ(MessageName(Hello{}), "Hello");
  EXPECT_STREQ(MessageName(Apply{}), "Apply");
  EXPECT_STREQ(MessageName(StatsRequest{}), "StatsRequest");
  EXPECT_STREQ(MessageName(Error{}), "Error");
}

// ---------------------------------------------------------------------------
// Hand-built payloads. Field slots follow pace.fbs: the vtable offset of
// field i is 4 + 2 * i; in Message, body_type is field 0 and body field 1;
// union type ids are 1 (Hello) ... 16 (Error).

constexpr flatbuffers::voffset_t Slot(int field) {
  return static_cast<flatbuffers::voffset_t>(4 + 2 * field);
}
constexpr uint8_t kTypeApply = 5;
constexpr uint8_t kTypeCreateTable = 10;
constexpr uint8_t kTypeError = 16;

// Finishes a Message whose body is the table at `body` (0: none).
std::string FinishMessage(flatbuffers::FlatBufferBuilder& b, uint8_t type,
                          flatbuffers::uoffset_t body, const char* identifier = "PACE") {
  auto start = b.StartTable();
  if (body != 0) b.AddOffset(Slot(1), flatbuffers::Offset<void>(body));
  b.AddElement<uint8_t>(Slot(0), type, 0);
  flatbuffers::Offset<void> root(b.EndTable(start));
  b.Finish(root, identifier);
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

Status DecodeBytes(const std::string& payload, Message* m = nullptr) {
  Message scratch;
  return DecodePayload(payload, m != nullptr ? m : &scratch);
}

flatbuffers::uoffset_t EmptyTable(flatbuffers::FlatBufferBuilder& b) {
  return b.EndTable(b.StartTable());
}

TEST(CodecDecodeTest, HandBuiltValidMessageDecodes) {
  flatbuffers::FlatBufferBuilder b;
  auto msg = b.CreateString("hi");
  auto start = b.StartTable();
  b.AddElement<uint64_t>(Slot(0), 42, 0);
  b.AddElement<uint8_t>(Slot(1), static_cast<uint8_t>(StatusCode::kNotFound), 14);
  b.AddOffset(Slot(2), msg);
  Message m;
  ASSERT_TRUE(DecodeBytes(FinishMessage(b, kTypeError, b.EndTable(start)), &m).ok());
  EXPECT_TRUE(SameMessage(m, Error{42, StatusCode::kNotFound, "hi"}));
}

TEST(CodecDecodeTest, UnknownMessageTypeIsRejected) {
  flatbuffers::FlatBufferBuilder b;
  Status s = DecodeBytes(FinishMessage(b, 17, EmptyTable(b)));
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("unknown message type 17"), std::string::npos) << s.ToString();
}

TEST(CodecDecodeTest, MissingBodyIsRejected) {
  flatbuffers::FlatBufferBuilder b;
  EXPECT_EQ(DecodeBytes(FinishMessage(b, kTypeApply, 0)).code(), StatusCode::kCorruption);
  flatbuffers::FlatBufferBuilder b2;
  EXPECT_EQ(DecodeBytes(FinishMessage(b2, 0, 0)).code(), StatusCode::kCorruption);
}

TEST(CodecDecodeTest, WrongIdentifierIsRejected) {
  flatbuffers::FlatBufferBuilder b;
  Status s = DecodeBytes(FinishMessage(b, kTypeError, EmptyTable(b), "HTTP"));
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("identifier"), std::string::npos) << s.ToString();
}

TEST(CodecDecodeTest, OutOfRangeEnumsAreRejected) {
  for (uint8_t code : {uint8_t{0}, uint8_t{16}, uint8_t{255}}) {
    flatbuffers::FlatBufferBuilder b;
    auto start = b.StartTable();
    b.AddElement<uint8_t>(Slot(1), code, 14);
    Status s = DecodeBytes(FinishMessage(b, kTypeError, b.EndTable(start)));
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << "Error.code " << int(code);
  }
  // TableSchema fields: kind = 2, type = 3, consistency = 5, init_kind = 7.
  for (int field : {2, 3, 5, 7}) {
    for (uint8_t value : {uint8_t{0}, uint8_t{9}}) {
      flatbuffers::FlatBufferBuilder b;
      auto name = b.CreateString("t");
      auto start = b.StartTable();
      b.AddOffset(Slot(1), name);
      b.AddElement<uint8_t>(Slot(field), value, 200);
      flatbuffers::Offset<void> schema(b.EndTable(start));
      auto ct = b.StartTable();
      b.AddOffset(Slot(1), schema);
      Status s = DecodeBytes(FinishMessage(b, kTypeCreateTable, b.EndTable(ct)));
      EXPECT_EQ(s.code(), StatusCode::kCorruption) << "field " << field << " value " << int(value);
    }
  }
  // Hello.role (field 3).
  flatbuffers::FlatBufferBuilder b;
  auto start = b.StartTable();
  b.AddElement<uint32_t>(Slot(0), kWireVersion, 0);
  b.AddElement<uint8_t>(Slot(3), 2, 0);
  EXPECT_EQ(DecodeBytes(FinishMessage(b, 1, b.EndTable(start))).code(), StatusCode::kCorruption);
}

TEST(CodecDecodeTest, MissingRequiredSchemaIsRejected) {
  flatbuffers::FlatBufferBuilder b;
  auto start = b.StartTable();
  b.AddElement<uint64_t>(Slot(0), 5, 0);
  EXPECT_EQ(DecodeBytes(FinishMessage(b, kTypeCreateTable, b.EndTable(start))).code(),
            StatusCode::kCorruption);
}

struct alignas(8) RawRowRef {
  uint64_t row;
  uint32_t table;
  uint32_t size;
};

std::string ApplyWithRows(const std::vector<RawRowRef>& refs, size_t data_bytes) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<uint8_t> data(data_bytes, 1);
  auto data_off = b.CreateVector(data);
  auto refs_off = b.CreateVectorOfStructs(refs.data(), refs.size());
  auto rs = b.StartTable();
  b.AddOffset(Slot(0), refs_off);
  b.AddOffset(Slot(1), data_off);
  flatbuffers::Offset<void> rows(b.EndTable(rs));
  auto as = b.StartTable();
  b.AddElement<int64_t>(Slot(0), 3, 0);
  b.AddOffset(Slot(1), rows);
  return FinishMessage(b, kTypeApply, b.EndTable(as));
}

TEST(CodecDecodeTest, RowBlockSizesMustMatchData) {
  Message m;
  ASSERT_TRUE(DecodeBytes(ApplyWithRows({{1, 2, 3}, {4, 5, 6}}, 9), &m).ok());
  ASSERT_EQ(std::get<Apply>(m).updates.size(), 2u);
  EXPECT_EQ(std::get<Apply>(m).updates[1].bytes.size(), 6u);
  EXPECT_EQ(DecodeBytes(ApplyWithRows({{1, 2, 3}, {4, 5, 6}}, 8)).code(), StatusCode::kCorruption);
  EXPECT_EQ(DecodeBytes(ApplyWithRows({{1, 2, 3}, {4, 5, 6}}, 10)).code(), StatusCode::kCorruption);
  // Sizes that overflow 32 bits when added must not wrap around to a match.
  EXPECT_EQ(DecodeBytes(ApplyWithRows({{1, 2, 0xffffffffu}, {4, 5, 2}}, 1)).code(),
            StatusCode::kCorruption);
}

// The verifier only checks 4-byte alignment of vector starts; a RowRef
// vector (8-byte aligned structs) at 4 mod 8 must still decode, without a
// misaligned read (UBSan in the asan build). Found by the frame fuzzer.
TEST(CodecDecodeTest, StructVectorAtFourModEightDecodes) {
  bool saw_misaligned = false;
  for (bool pad : {false, true}) {
    flatbuffers::FlatBufferBuilder b;
    b.Align(8);
    std::vector<uint8_t> data(9, 1);
    auto data_off = b.CreateVector(data);
    if (pad) b.PushElement<uint32_t>(0);
    RawRowRef refs[2] = {{0x1111111111111111ull, 2, 3}, {4, 5, 6}};
    b.StartVector(sizeof(refs) / 4, 4);  // aligned to 4 only
    b.PushBytes(reinterpret_cast<const uint8_t*>(refs), sizeof(refs));
    flatbuffers::Offset<void> refs_off(b.EndVector(2));
    auto rs = b.StartTable();
    b.AddOffset(Slot(0), refs_off);
    b.AddOffset(Slot(1), data_off);
    flatbuffers::Offset<void> rows(b.EndTable(rs));
    auto as = b.StartTable();
    b.AddOffset(Slot(1), rows);
    std::string payload = FinishMessage(b, kTypeApply, b.EndTable(as));
    size_t at = payload.find(std::string(8, '\x11'));
    ASSERT_NE(at, std::string::npos);
    if (at % 8 == 4) saw_misaligned = true;
    Message m;
    Status s = DecodeBytes(payload, &m);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const Apply& apply = std::get<Apply>(m);
    ASSERT_EQ(apply.updates.size(), 2u);
    EXPECT_EQ(apply.updates[0].row, 0x1111111111111111ull);
    EXPECT_EQ(apply.updates[1].table, 5u);
    EXPECT_EQ(apply.updates[1].bytes.size(), 6u);
  }
  EXPECT_TRUE(saw_misaligned) << "the test did not build a misaligned vector";
}

TEST(CodecDecodeTest, VerifierLimitsApply) {
  TablesReply reply{1, {}};
  for (uint32_t i = 0; i < 50; ++i) reply.tables.push_back(SampleSchema(i, "t"));
  std::string frame = EncodeOrFail(reply);
  std::string_view payload = std::string_view(frame).substr(kFrameHeaderBytes);
  Message m;
  EXPECT_TRUE(DecodePayload(payload, &m).ok());
  DecodeOptions tight;
  tight.max_tables = 10;
  EXPECT_EQ(DecodePayload(payload, &m, tight).code(), StatusCode::kCorruption);
  DecodeOptions shallow;
  shallow.max_depth = 2;
  EXPECT_EQ(DecodePayload(payload, &m, shallow).code(), StatusCode::kCorruption);
}

// ---------------------------------------------------------------------------
// Corrupt payloads: errors, never crashes.

TEST(CodecCorruptionTest, TruncatedPayloadsFailOrLoseOnlyPadding) {
  for (const Message& original : SampleMessages()) {
    std::string frame = EncodeOrFail(original);
    std::string payload = frame.substr(kFrameHeaderBytes);
    int failures = 0;
    for (size_t len = 0; len < payload.size(); ++len) {
      Message m;
      Status s = DecodeBytes(payload.substr(0, len), &m);
      if (!s.ok()) {
        ++failures;
        EXPECT_EQ(s.code(), StatusCode::kCorruption);
      } else {
        // Only trailing padding was cut: the message must be intact.
        EXPECT_TRUE(SameMessage(original, m)) << "truncated to " << len;
      }
    }
    EXPECT_GE(failures, static_cast<int>(payload.size()) - 8) << MessageName(original);
  }
}

TEST(CodecCorruptionTest, BitFlipsNeverCrash) {
  int rejected = 0;
  int total = 0;
  for (const Message& original : SampleMessages()) {
    std::string payload = EncodeOrFail(original).substr(kFrameHeaderBytes);
    for (size_t bit = 0; bit < payload.size() * 8; ++bit) {
      std::string flipped = payload;
      flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
      Message m;
      Status s = DecodeBytes(flipped, &m);
      ++total;
      if (!s.ok()) {
        ++rejected;
      } else {
        std::string reencoded;
        EXPECT_TRUE(EncodeFrame(m, &reencoded).ok()) << "a decoded message must be encodable";
      }
    }
  }
  // Flips inside string/row bytes or scalar values are legal; structural
  // flips are not. Expect a substantial share to be caught.
  EXPECT_GT(rejected, total / 10) << rejected << " of " << total;
}

TEST(CodecCorruptionTest, RandomPayloadsAreRejected) {
  std::mt19937_64 rng(12345);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string payload(rng() % 300, '\0');
    for (char& c : payload) c = static_cast<char>(rng());
    if (i % 2 == 0 && payload.size() >= 8) std::memcpy(&payload[4], "PACE", 4);
    if (DecodeBytes(payload).ok()) ++accepted;
  }
  EXPECT_LT(accepted, 200);
}

}  // namespace
}  // namespace pace::net
