// Frame limits on the client (docs/wire-protocol.md, "Frame limits"), against
// a scripted shard whose Welcome announces a small max_frame_bytes: a clock
// whose batch would not fit one frame leaves as Apply parts that each fit,
// re-sent unchanged after a reconnect; a row that cannot fit a frame alone
// fails the client with the sizes instead of being sent; cache-filling Reads
// ask for no more rows than a reply frame holds.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/client_impl.h"
#include "client/pace.h"
#include "client/scripted_channel_test_util.h"
#include "net/codec.h"

namespace pace {
namespace {

using client::ScriptedChannel;

constexpr uint32_t kFrame = 64 << 10;  // the shard's max_frame_bytes
constexpr uint32_t kWidth = 512;       // 4 KiB of i64 per row

std::string Row(uint32_t width, int64_t v) { return EncodeDense(std::vector<int64_t>(width, v)); }

// The payload bytes of `m` as the codec encodes it.
size_t PayloadBytes(const net::Message& m) {
  std::string frame;
  EXPECT_TRUE(net::EncodeFrame(m, &frame).ok());
  return frame.size() - net::kFrameHeaderBytes;
}

class FrameLimitTest : public ::testing::Test {
 protected:
  void Open(uint32_t width, uint32_t frame = kFrame) {
    net::Welcome w;
    w.max_frame_bytes = frame;
    ASSERT_TRUE(client::OpenOnScriptedShard(ClientOptions{}, w, &client_, &ch_).ok());
    TableSchema schema;
    schema.name = "f";
    schema.type = ElementType::kI64;
    schema.width = width;
    schema.consistency = Consistency::kSsp;
    schema.staleness = 2;
    ASSERT_TRUE(client::CreateTableOnScriptedShard(client_.get(), ch_, schema, 5, &t_).ok());
    ASSERT_TRUE(client_->RegisterWorker(&w_).ok());
  }

  // The Applies sent since the last call.
  std::vector<net::Apply> TakeApplies() {
    std::vector<net::Apply> out;
    net::Apply a;
    while (ch_->Next(&a, std::chrono::milliseconds(200))) out.push_back(a);
    return out;
  }

  std::unique_ptr<Client> client_;
  ScriptedChannel* ch_ = nullptr;
  Table t_;
  std::unique_ptr<Worker> w_;
};

// Checks that `parts` are clock `c` in parts 0, 1, ... that each fit kFrame,
// all but the last with `more`, and hold row r = Row(kWidth, r + 1) for every
// r < rows, each exactly once.
void ExpectPartsOfClock(const std::vector<net::Apply>& parts, ClockT c, uint64_t rows) {
  ASSERT_GT(parts.size(), 1u) << "a batch of " << rows << " rows of " << 8 * kWidth
                              << " bytes must not fit one frame of " << kFrame << " bytes";
  std::map<uint64_t, int> seen;
  for (size_t i = 0; i < parts.size(); ++i) {
    const net::Apply& a = parts[i];
    EXPECT_EQ(a.clock, c);
    EXPECT_EQ(a.part, i);
    EXPECT_EQ(a.more, i + 1 < parts.size()) << "part " << i;
    EXPECT_FALSE(a.updates.empty()) << "part " << i;
    EXPECT_LE(PayloadBytes(a), kFrame) << "part " << i;
    for (const net::DeltaRow& u : a.updates) {
      ++seen[u.row];
      EXPECT_EQ(u.bytes, Row(kWidth, static_cast<int64_t>(u.row) + 1)) << "row " << u.row;
    }
  }
  ASSERT_EQ(seen.size(), rows);
  for (const auto& [row, n] : seen) EXPECT_EQ(n, 1) << "row " << row;
}

TEST_F(FrameLimitTest, ClockLargerThanAFrameLeavesInPartsThatFitAndAreResentAsCut) {
  Open(kWidth);
  constexpr uint64_t kRows = 100;  // ~400 KiB: at least 7 frames of 64 KiB
  for (uint64_t r = 0; r < kRows; ++r) {
    std::vector<int64_t> d(kWidth, static_cast<int64_t>(r) + 1);
    ASSERT_TRUE(w_->Inc(t_, r, d.data()).ok());
  }
  ASSERT_TRUE(w_->Clock().ok());
  const std::vector<net::Apply> parts = TakeApplies();
  ExpectPartsOfClock(parts, 0, kRows);
  if (HasFatalFailure()) return;

  // Lost before any Ack: every part is re-sent as it was cut.
  ch_->listener()->OnDisconnect(0, Status::Unavailable("test"));
  net::Welcome w;
  w.max_frame_bytes = kFrame;
  ch_->listener()->OnReconnect(0, w);
  const std::vector<net::Apply> again = TakeApplies();
  ASSERT_EQ(again.size(), parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ(again[i].part, parts[i].part);
    EXPECT_EQ(again[i].more, parts[i].more);
    EXPECT_EQ(again[i].updates.size(), parts[i].updates.size());
  }
  ch_->Deliver(net::Ack{0, false, parts.back().part});  // covers every part
  EXPECT_TRUE(client_->Flush().ok());

  // The next clock is cut again from part 0.
  for (uint64_t r = 0; r < kRows; ++r) {
    std::vector<int64_t> d(kWidth, static_cast<int64_t>(r) + 1);
    ASSERT_TRUE(w_->Inc(t_, r, d.data()).ok());
  }
  ASSERT_TRUE(w_->Clock().ok());
  ExpectPartsOfClock(TakeApplies(), 1, kRows);
}

TEST_F(FrameLimitTest, RowLargerThanAFrameFailsWithTheSizesAndIsNeverSent) {
  constexpr uint32_t kWide = 16384;  // 128 KiB of i64: over the 64 KiB frame
  Open(kWide);
  std::vector<int64_t> d(kWide, 1);
  ASSERT_TRUE(w_->Inc(t_, 7, d.data()).ok());
  ASSERT_TRUE(w_->Inc(t_, 8, std::vector<int64_t>(kWide, 2).data()).ok());
  Status s = w_->Clock();
  const std::vector<net::Apply> sent = TakeApplies();
  EXPECT_TRUE(sent.empty()) << "an Apply that cannot fit a frame was sent";
  for (const net::Apply& a : sent) ch_->Deliver(net::Ack{a.clock, false, a.part});
  if (s.ok()) s = client_->Flush();
  ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  const std::string delta = std::to_string(Row(kWide, 1).size());
  EXPECT_NE(s.message().find(" is " + delta + " bytes"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("frame limit of " + std::to_string(kFrame) + " bytes"),
            std::string::npos)
      << s.ToString();
  // The client stays failed: the next clock reports it too.
  EXPECT_EQ(w_->Clock().code(), StatusCode::kResourceExhausted);
}

TEST_F(FrameLimitTest, ReadsAskForNoMoreRowsThanAReplyFrameHolds) {
  Open(kWidth);
  std::vector<uint64_t> rows;
  for (uint64_t r = 0; r < 1000; ++r) rows.push_back(r);
  ASSERT_TRUE(w_->Prefetch(t_, rows).ok());
  uint64_t asked = 0;
  net::Read r;
  while (ch_->Next(&r, std::chrono::milliseconds(200))) {
    asked += r.rows.size();
    // What the shard checks before answering (ShardService::CheckReplyFits).
    EXPECT_LE(64 + r.rows.size() * (1 + 8 * kWidth + 28), kFrame) << r.rows.size() << " rows";
    // What the reply holds at most.
    EXPECT_LE(net::RowsMessageBytes(r.rows.size(), r.rows.size() * (1 + 8 * kWidth)), kFrame);
  }
  EXPECT_EQ(asked, rows.size());
}

}  // namespace
}  // namespace pace
