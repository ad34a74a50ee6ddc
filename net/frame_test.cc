// FrameReader (net/frame.h): splitting, limits and alignment.
#include "net/frame.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "net/codec.h"
#include "net/testing/sample_messages.h"

namespace pace::net {
namespace {

using testing::EncodeOrFail;
using testing::SameMessage;
using testing::SampleMessages;

std::string AllSampleFrames() {
  std::string stream;
  for (const Message& m : SampleMessages()) stream += EncodeOrFail(m);
  return stream;
}

// Drains every complete payload, checking alignment, and decodes it.
void Drain(FrameReader* reader, std::vector<Message>* out) {
  for (;;) {
    std::string_view payload;
    Status s = reader->Next(&payload);
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (payload.empty()) return;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(payload.data()) % kPayloadAlignment, 0u)
        << "payload not 8-byte aligned";
    Message m;
    Status d = DecodePayload(payload, &m);
    ASSERT_TRUE(d.ok()) << d.ToString();
    out->push_back(std::move(m));
  }
}

void ExpectSamples(const std::vector<Message>& got) {
  std::vector<Message> want = SampleMessages();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(SameMessage(want[i], got[i])) << i;
}

TEST(FrameReaderTest, ManyFramesInOneRead) {
  FrameReader reader;
  reader.Append(AllSampleFrames());
  std::vector<Message> got;
  Drain(&reader, &got);
  ExpectSamples(got);
  EXPECT_EQ(reader.buffered_bytes(), 0u);
}

TEST(FrameReaderTest, SplitAtEveryByteBoundary) {
  std::string stream = AllSampleFrames();
  for (size_t split = 0; split <= stream.size(); ++split) {
    FrameReader reader;
    std::vector<Message> got;
    reader.Append(std::string_view(stream).substr(0, split));
    Drain(&reader, &got);
    reader.Append(std::string_view(stream).substr(split));
    Drain(&reader, &got);
    ExpectSamples(got);
    if (::testing::Test::HasFailure()) FAIL() << "split at " << split;
  }
}

TEST(FrameReaderTest, OneByteAtATimeThroughPrepareCommit) {
  std::string stream = AllSampleFrames();
  FrameReader reader;
  std::vector<Message> got;
  for (char c : stream) {
    char* dst = reader.Prepare(1);
    *dst = c;
    reader.Commit(1);
    Drain(&reader, &got);
  }
  ExpectSamples(got);
}

TEST(FrameReaderTest, OddChunksKeepPayloadsAligned) {
  std::string stream;
  for (int i = 0; i < 50; ++i) stream += AllSampleFrames();
  for (size_t chunk : {3u, 7u, 13u, 4093u, 65537u}) {
    FrameReader reader;
    std::vector<Message> got;
    for (size_t pos = 0; pos < stream.size(); pos += chunk) {
      reader.Append(std::string_view(stream).substr(pos, chunk));
      Drain(&reader, &got);
    }
    EXPECT_EQ(got.size(), 50 * SampleMessages().size()) << "chunk " << chunk;
  }
}

TEST(FrameReaderTest, PartialHeaderWaits) {
  FrameReader reader;
  reader.Append(std::string("\x10\x00\x00", 3));
  std::string_view payload;
  ASSERT_TRUE(reader.Next(&payload).ok());
  EXPECT_TRUE(payload.empty());
  EXPECT_EQ(reader.buffered_bytes(), 3u);
}

TEST(FrameReaderTest, TruncatedFrameYieldsNothing) {
  std::string frame = EncodeOrFail(SampleMessages()[3]);
  FrameReader reader;
  reader.Append(std::string_view(frame).substr(0, frame.size() - 1));
  std::string_view payload;
  ASSERT_TRUE(reader.Next(&payload).ok());
  EXPECT_TRUE(payload.empty());
}

TEST(FrameReaderTest, FourGiBPrefixIsRejectedAtOnce) {
  FrameReader reader;
  reader.Append(std::string("\xff\xff\xff\xff", 4));
  std::string_view payload;
  Status s = reader.Next(&payload);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("4294967295"), std::string::npos) << s.ToString();
  EXPECT_TRUE(payload.empty());
  // Nothing was reserved for the announced payload.
  EXPECT_LE(reader.SuggestedReadSize(), 64u << 10);
  // Sticky.
  reader.Append("more");
  EXPECT_EQ(reader.Next(&payload).code(), StatusCode::kResourceExhausted);
}

TEST(FrameReaderTest, LimitIsInclusive) {
  FrameReader reader(16);
  std::string ok("\x10\x00\x00\x00", 4);
  ok += std::string(16, 'a');
  reader.Append(ok);
  std::string_view payload;
  ASSERT_TRUE(reader.Next(&payload).ok());
  EXPECT_EQ(payload, std::string(16, 'a'));
  reader.Append(std::string("\x11\x00\x00\x00", 4));
  EXPECT_EQ(reader.Next(&payload).code(), StatusCode::kResourceExhausted);
}

TEST(FrameReaderTest, ZeroLengthIsRejected) {
  FrameReader reader;
  reader.Append(std::string("\x00\x00\x00\x00", 4));
  std::string_view payload;
  EXPECT_EQ(reader.Next(&payload).code(), StatusCode::kCorruption);
}

TEST(FrameReaderTest, SecondFrameErrorAfterGoodFrame) {
  FrameReader reader;
  reader.Append(EncodeOrFail(Ack{1, false}) + std::string("\xff\xff\xff\x7f", 4));
  std::string_view payload;
  ASSERT_TRUE(reader.Next(&payload).ok());
  EXPECT_FALSE(payload.empty());
  EXPECT_EQ(reader.Next(&payload).code(), StatusCode::kResourceExhausted);
}

TEST(FrameReaderTest, SuggestedReadSizeGrowsWithArrivedBytes) {
  FrameReader reader;
  uint32_t len = 8u << 20;
  std::string header(4, '\0');
  std::memcpy(header.data(), &len, 4);
  reader.Append(header);
  EXPECT_EQ(reader.SuggestedReadSize(), 64u << 10) << "no growth before bytes arrive";
  reader.Append(std::string(1 << 20, 'z'));
  EXPECT_GE(reader.SuggestedReadSize(), 1u << 20);
  EXPECT_LE(reader.SuggestedReadSize(), len);
}

}  // namespace
}  // namespace pace::net
