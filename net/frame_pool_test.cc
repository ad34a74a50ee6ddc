// FrameBufferPool, EncodedFrame (zero-copy frames built in pooled blocks) and
// FrameReader's buffer retention: the memory-reuse paths of large frames.
#include "net/frame_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "net/codec.h"
#include "net/frame.h"
#include "net/messages.h"

namespace pace::net {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// A Push of `rows` rows of `row_bytes` bytes each (row r filled with r % 251).
Push BigPush(int rows, size_t row_bytes) {
  Push p{7, 9, {}};
  for (int r = 0; r < rows; ++r) {
    p.rows.push_back(
        RowData{3, static_cast<uint64_t>(r), std::string(row_bytes, static_cast<char>(r % 251))});
  }
  return p;
}

std::string Wire(const EncodedFrame& f) {
  std::string out;
  f.AppendTo(&out);
  return out;
}

TEST(FrameBufferPoolTest, ReusesAReleasedBlockForASmallerOrEqualRequest) {
  FrameBufferPool pool;
  FrameBufferPool::Block a = pool.Acquire(kMiB);
  ASSERT_NE(a.data, nullptr);
  EXPECT_GE(a.capacity, kMiB);
  char* data = a.data;
  pool.Release(a);
  EXPECT_EQ(pool.pooled_bytes(), a.capacity);
  FrameBufferPool::Block b = pool.Acquire(kMiB - 4096);
  EXPECT_EQ(b.data, data) << "the idle block was not reused";
  EXPECT_EQ(pool.pooled_bytes(), 0u);
  EXPECT_EQ(pool.reused(), 1u);
  EXPECT_EQ(pool.allocated(), 1u);
  pool.Release(b);
}

TEST(FrameBufferPoolTest, RoundsLargeRequestsUpSoSlightlyLargerFramesStillFit) {
  FrameBufferPool pool;
  FrameBufferPool::Block a = pool.Acquire(4 * kMiB + 1000);
  char* data = a.data;
  pool.Release(a);
  FrameBufferPool::Block b = pool.Acquire(4 * kMiB + 100000);
  EXPECT_EQ(b.data, data);
  pool.Release(b);
}

TEST(FrameBufferPoolTest, SmallAndHugeBlocksAreNotKept) {
  FrameBufferPoolOptions options;
  options.min_block_bytes = 64 << 10;
  options.max_block_bytes = 4 * kMiB;
  FrameBufferPool pool(options);
  pool.Release(pool.Acquire(100));
  EXPECT_EQ(pool.pooled_bytes(), 0u);
  pool.Release(pool.Acquire(8 * kMiB));
  EXPECT_EQ(pool.pooled_bytes(), 0u);
  EXPECT_EQ(pool.allocated(), 0u) << "only poolable sizes are counted";
}

TEST(FrameBufferPoolTest, IdleBytesStayWithinTheCap) {
  FrameBufferPoolOptions options;
  options.max_pooled_bytes = 3 * kMiB;
  FrameBufferPool pool(options);
  std::vector<FrameBufferPool::Block> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(pool.Acquire(kMiB));
  for (const auto& b : blocks) pool.Release(b);
  EXPECT_LE(pool.pooled_bytes(), options.max_pooled_bytes);
  EXPECT_GE(pool.pooled_bytes(), 2 * kMiB);
  // A larger block displaces smaller idle ones rather than being dropped.
  pool.Release(pool.Acquire(2 * kMiB + 1));
  EXPECT_LE(pool.pooled_bytes(), options.max_pooled_bytes);
  FrameBufferPool::Block big = pool.Acquire(2 * kMiB);
  EXPECT_EQ(pool.reused(), 1u);
  pool.Release(big);
}

TEST(EncodedFrameTest, SameBytesAsTheStringEncoding) {
  std::vector<Message> messages = {Ack{5, true}, PushDone{3, 4},
                                   Error{1, StatusCode::kNotFound, "x"}, BigPush(3, 17),
                                   BigPush(1000, 400)};
  auto pool = std::make_shared<FrameBufferPool>();
  for (const Message& m : messages) {
    std::string want;
    ASSERT_TRUE(EncodeFrame(m, &want).ok());
    for (const auto& p : {std::shared_ptr<FrameBufferPool>(), pool}) {
      EncodedFrame frame;
      ASSERT_TRUE(EncodeFrame(m, &frame, p).ok());
      EXPECT_EQ(frame.size(), want.size()) << MessageName(m);
      EXPECT_EQ(frame.size() % kPayloadAlignment, 0u);
      EXPECT_EQ(Wire(frame), want) << MessageName(m);
      size_t sum = 0;
      for (std::string_view piece : frame.pieces()) sum += piece.size();
      EXPECT_EQ(sum, frame.size());
      EXPECT_EQ(frame.gathered_bytes(), 0u) << "only an Apply's rows are gathered";
    }
  }
}

TEST(EncodedFrameTest, EncodedPushDecodesBack) {
  Push push = BigPush(2000, 400);
  EncodedFrame frame;
  ASSERT_TRUE(EncodeFrame(push, &frame, std::make_shared<FrameBufferPool>()).ok());
  FrameReader reader;
  reader.Append(Wire(frame));
  std::string_view payload;
  ASSERT_TRUE(reader.Next(&payload).ok());
  ASSERT_FALSE(payload.empty());
  Message m;
  ASSERT_TRUE(DecodePayload(payload, &m).ok());
  const Push* got = std::get_if<Push>(&m);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->version, 7);
  ASSERT_EQ(got->rows.size(), push.rows.size());
  for (size_t i = 0; i < push.rows.size(); ++i) {
    EXPECT_EQ(got->rows[i].row, push.rows[i].row);
    EXPECT_EQ(got->rows[i].bytes, push.rows[i].bytes);
  }
}

TEST(EncodedFrameTest, LargeFramesRecycleTheirBlocks) {
  auto pool = std::make_shared<FrameBufferPool>();
  Push push = BigPush(5000, 400);  // about 2 MiB
  for (int i = 0; i < 10; ++i) {
    EncodedFrame frame;
    ASSERT_TRUE(EncodeFrame(push, &frame, pool).ok());
    EXPECT_GT(frame.size(), 2000000u);
  }
  EXPECT_EQ(pool->allocated(), 1u) << "each frame should reuse the previous frame's block";
  EXPECT_EQ(pool->reused(), 9u);
  // Two frames alive at once need two blocks.
  EncodedFrame a, b;
  ASSERT_TRUE(EncodeFrame(push, &a, pool).ok());
  ASSERT_TRUE(EncodeFrame(push, &b, pool).ok());
  EXPECT_NE(a.pieces().front().data(), b.pieces().front().data());
  EXPECT_EQ(pool->allocated(), 2u);
}

// An Apply of `rows` rows of `row_bytes` bytes each (row r filled with
// r % 251), its bytes in an arena of its own (as a client's sealed part).
Apply BigApply(int rows, size_t row_bytes) {
  Apply a;
  a.clock = 11;
  a.part = 2;
  a.more = true;
  for (int r = 0; r < rows; ++r) {
    a.Add(4, static_cast<uint64_t>(r) * 3, std::string(row_bytes, static_cast<char>(r % 251)));
  }
  return a;
}

// The same message with its rows' bytes copied into one string and no
// backing: a frame copies rows it cannot keep alive.
Apply WithoutBacking(const Apply& a, std::string* storage) {
  Apply copy;
  copy.clock = a.clock;
  copy.part = a.part;
  copy.more = a.more;
  size_t total = 0;
  for (const DeltaRow& u : a.updates) total += u.bytes.size();
  storage->clear();
  storage->reserve(total);
  for (const DeltaRow& u : a.updates) storage->append(u.bytes);
  size_t at = 0;
  for (const DeltaRow& u : a.updates) {
    copy.updates.push_back(
        DeltaRow{u.table, u.row, std::string_view(storage->data() + at, u.bytes.size())});
    at += u.bytes.size();
  }
  return copy;
}

TEST(EncodedFrameTest, LargeApplyGathersItsRowsFromItsArenaWithTheSameBytes) {
  Apply apply = BigApply(3000, 400);  // 1.2 MB of rows, over kGatherRowBytes
  std::string storage;
  std::string want;
  ASSERT_TRUE(EncodeFrame(WithoutBacking(apply, &storage), &want).ok());
  for (const auto& pool :
       {std::shared_ptr<FrameBufferPool>(), std::make_shared<FrameBufferPool>()}) {
    EncodedFrame frame;
    ASSERT_TRUE(EncodeFrame(apply, &frame, pool).ok());
    EXPECT_EQ(frame.gathered_bytes(), 3000u * 400);
    EXPECT_EQ(frame.size(), want.size());
    EXPECT_EQ(Wire(frame), want) << "a gathered frame must be byte for byte the copied one";
    // The rows' bytes go from the arena itself: a piece starts at the first
    // row's bytes.
    bool from_arena = false;
    for (std::string_view piece : frame.pieces()) {
      from_arena = from_arena || piece.data() == apply.updates.front().bytes.data();
    }
    EXPECT_TRUE(from_arena) << "the rows were copied, not gathered";
  }
  EncodedFrame copied;
  ASSERT_TRUE(EncodeFrame(WithoutBacking(apply, &storage), &copied).ok());
  EXPECT_EQ(copied.gathered_bytes(), 0u) << "rows without a backing must be copied";
  EncodedFrame small;
  ASSERT_TRUE(EncodeFrame(BigApply(10, 400), &small).ok());
  EXPECT_EQ(small.gathered_bytes(), 0u) << "a small Apply is copied";
}

TEST(EncodedFrameTest, AGatheringFrameKeepsTheRowsAliveAfterTheMessage) {
  std::string storage, want;
  EncodedFrame frame;
  {
    Apply apply = BigApply(2000, 300);
    ASSERT_TRUE(EncodeFrame(WithoutBacking(apply, &storage), &want).ok());
    ASSERT_TRUE(EncodeFrame(apply, &frame, std::make_shared<FrameBufferPool>()).ok());
    ASSERT_GT(frame.gathered_bytes(), 0u);
  }  // the message and its reference to the arena are gone
  EncodedFrame moved(std::move(frame));
  const std::string wire = Wire(moved);
  EXPECT_EQ(wire, want);
  FrameReader reader;
  reader.Append(wire);
  std::string_view payload;
  ASSERT_TRUE(reader.Next(&payload).ok());
  Message m;
  ASSERT_TRUE(DecodePayload(payload, &m).ok());
  const Apply* got = std::get_if<Apply>(&m);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->clock, 11);
  EXPECT_EQ(got->part, 2u);
  EXPECT_TRUE(got->more);
  ASSERT_EQ(got->updates.size(), 2000u);
  for (size_t r = 0; r < got->updates.size(); r += 97) {
    EXPECT_EQ(got->updates[r].row, r * 3);
    EXPECT_EQ(got->updates[r].bytes, std::string(300, static_cast<char>(r % 251)));
  }
}

TEST(EncodedFrameTest, MoveTransfersTheBlockOnce) {
  auto pool = std::make_shared<FrameBufferPool>();
  EncodedFrame a;
  ASSERT_TRUE(EncodeFrame(BigPush(1000, 400), &a, pool).ok());
  std::string want = Wire(a);
  EncodedFrame b(std::move(a));
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): documented state
  EXPECT_EQ(Wire(b), want);
  EncodedFrame c;
  c = std::move(b);
  EXPECT_EQ(Wire(c), want);
  EXPECT_EQ(pool->pooled_bytes(), 0u);
  c = EncodedFrame();
  EXPECT_GT(pool->pooled_bytes(), 0u) << "the block went back to the pool";
  size_t pooled = pool->pooled_bytes();
  a = EncodedFrame();
  b = EncodedFrame();
  EXPECT_EQ(pool->pooled_bytes(), pooled) << "moved-from frames released nothing";
}

TEST(EncodedFrameTest, FailedEncodeLeavesTheFrameEmpty) {
  EncodedFrame frame;
  ASSERT_TRUE(EncodeFrame(Ack{1, false}, &frame).ok());
  EXPECT_FALSE(EncodeFrame(Error{1, StatusCode::kOk, "ok is not an error"}, &frame).ok());
  EXPECT_EQ(frame.size(), 0u);
}

// Feeds `frame` to `reader` the way Connection does: reads of
// SuggestedReadSize() bytes. Returns how many reads it took.
int Feed(FrameReader* reader, std::string_view frame) {
  int reads = 0;
  while (!frame.empty()) {
    size_t n = std::min(reader->SuggestedReadSize(), frame.size());
    std::memcpy(reader->Prepare(n), frame.data(), n);
    reader->Commit(n);
    frame.remove_prefix(n);
    ++reads;
  }
  return reads;
}

void Consume(FrameReader* reader) {
  std::string_view payload;
  ASSERT_TRUE(reader->Next(&payload).ok());
  ASSERT_FALSE(payload.empty());
}

TEST(FrameReaderRetentionTest, KeepsItsBufferWhileLargeFramesKeepComing) {
  std::string large;
  ASSERT_TRUE(EncodeFrame(BigPush(10000, 400), &large).ok());  // about 4 MiB
  std::string small;
  ASSERT_TRUE(EncodeFrame(Ack{1, false}, &small).ok());
  FrameReader reader;
  int first = Feed(&reader, large);
  Consume(&reader);
  // A few small frames between large ones do not give the buffer back.
  for (int i = 0; i < 3; ++i) {
    Feed(&reader, small);
    Consume(&reader);
  }
  // The next large frame fits the kept buffer: one read can take all of it.
  EXPECT_GE(reader.SuggestedReadSize(), large.size());
  int second = Feed(&reader, large);
  Consume(&reader);
  EXPECT_EQ(second, 1);
  EXPECT_GT(first, 2) << "the first large frame grows the buffer step by step";
}

TEST(FrameReaderRetentionTest, GivesTheBufferBackAfterManySmallFrames) {
  std::string large;
  ASSERT_TRUE(EncodeFrame(BigPush(10000, 400), &large).ok());
  std::string small;
  ASSERT_TRUE(EncodeFrame(Ack{1, false}, &small).ok());
  FrameReader reader;
  Feed(&reader, large);
  Consume(&reader);
  for (int i = 0; i < 100; ++i) {
    Feed(&reader, small);
    Consume(&reader);
  }
  Feed(&reader, std::string_view(large).substr(0, 8));
  EXPECT_EQ(reader.SuggestedReadSize(), 64u << 10) << "the large buffer was kept";
}

// A buffer grown for a frame above 16 MiB (a client's Apply parts are up to
// 32 MiB) is kept too, whole: the next such frame arrives in one read instead
// of regrowing the buffer from 64 KiB through fresh pages. Its growth stops at
// the frame's end, so what is kept is the frame's size, not up to twice it.
TEST(FrameReaderRetentionTest, KeepsAHugeBufferAtTheFramesSize) {
  std::string huge;
  ASSERT_TRUE(EncodeFrame(BigPush(50000, 400), &huge).ok());  // about 20 MiB
  std::string small;
  ASSERT_TRUE(EncodeFrame(Ack{1, false}, &small).ok());
  FrameReader reader;
  int first = Feed(&reader, huge);
  Consume(&reader);
  Feed(&reader, small);
  Consume(&reader);
  EXPECT_GE(reader.SuggestedReadSize(), huge.size()) << "the grown buffer was given back";
  EXPECT_LE(reader.SuggestedReadSize(), huge.size() + (64u << 10))
      << "kept more than the frame needs";
  int second = Feed(&reader, huge);
  Consume(&reader);
  EXPECT_EQ(second, 1);
  EXPECT_GT(first, 2);
}

}  // namespace
}  // namespace pace::net
