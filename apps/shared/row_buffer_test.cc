#include "apps/shared/row_buffer.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "common/status.h"

namespace pace {
namespace apps {
namespace {

TEST(RowBufferTest, DeltasAreCurrentMinusLoadedAndOnlyForChangedRows) {
  RowBuffer<float> buf(10, 2);
  EXPECT_EQ(buf.Find(3), nullptr);
  float* a = buf.Slot(3);
  a[0] = 1;
  a[1] = 2;
  buf.Loaded();
  float* b = buf.Slot(7);
  b[0] = 5;
  b[1] = 5;
  buf.Loaded();
  EXPECT_EQ(buf.Find(3), a);
  buf.Find(3)[0] += 0.5f;
  buf.Find(3)[1] -= 1.0f;
  std::map<uint32_t, std::vector<float>> got;
  Status s = buf.ForEachDelta([&](uint32_t i, const float* d) {
    got[i] = {d[0], d[1]};
    return Status::OK();
  });
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(got.size(), 1u);  // row 7 unchanged: no delta
  EXPECT_EQ(got[3], (std::vector<float>{0.5f, -1.0f}));
  buf.Clear();
  EXPECT_EQ(buf.Find(3), nullptr);
  EXPECT_EQ(buf.loaded(), 0u);
}

TEST(RowBufferTest, RowPointersStayValidAsRowsAreAdded) {
  RowBuffer<float> buf(2000, 3);
  std::vector<float*> rows;
  for (uint32_t i = 0; i < 2000; ++i) {
    float* r = buf.Slot(i);
    r[0] = r[1] = r[2] = static_cast<float>(i);
    buf.Loaded();
    rows.push_back(r);
  }
  for (uint32_t i = 0; i < 2000; ++i) {
    ASSERT_EQ(buf.Find(i), rows[i]);
    EXPECT_EQ(rows[i][2], static_cast<float>(i));
  }
}

TEST(RowBufferTest, FirstErrorStopsTheWalk) {
  RowBuffer<int32_t> buf(4, 1);
  for (uint32_t i = 0; i < 4; ++i) {
    buf.Slot(i)[0] = 0;
    buf.Loaded();
    buf.Find(i)[0] = 1;
  }
  int calls = 0;
  Status s = buf.ForEachDelta([&](uint32_t, const int32_t*) {
    ++calls;
    return calls == 2 ? Status::Unavailable("down") : Status::OK();
  });
  EXPECT_TRUE(s.IsUnavailable());
  EXPECT_EQ(calls, 2);
}

TEST(RowBufferTest, LoadBlockLoadsRowsWithTheirValuesAsBase) {
  RowBuffer<float> buf(10, 2);
  const std::vector<float> block = {1, 2, 3, 4};
  buf.LoadBlock({7, 2}, block.data());
  EXPECT_EQ(buf.loaded(), 2u);
  ASSERT_NE(buf.Find(7), nullptr);
  EXPECT_EQ(buf.Find(7)[1], 2.0f);
  EXPECT_EQ(buf.Find(2)[0], 3.0f);
  buf.Find(2)[0] += 1.5f;
  std::vector<uint32_t> idx;
  std::vector<float> deltas;
  buf.ChangedRows(&idx, &deltas);
  EXPECT_EQ(idx, (std::vector<uint32_t>{2}));
  EXPECT_EQ(deltas, (std::vector<float>{1.5f, 0.0f}));
}

TEST(RowBufferTest, IndexedLayoutPlacesEachRowAtItsIndexWithTheSameDeltas) {
  RowBuffer<float> packed(100, 2);
  RowBuffer<float> indexed(100, 2, /*indexed=*/true);
  EXPECT_FALSE(packed.indexed());
  ASSERT_TRUE(indexed.indexed());
  const std::vector<float> block = {1, 2, 3, 4, 5, 6};
  const std::vector<uint32_t> rows = {90, 4, 37};
  packed.LoadBlock(rows, block.data());
  indexed.LoadBlock(rows, block.data());
  // Row i's copy is at i * width of one array; Find agrees with IndexedRow.
  EXPECT_EQ(indexed.IndexedRow(37) - indexed.IndexedRow(4), 33 * 2);
  for (uint32_t r : rows) {
    ASSERT_NE(indexed.Find(r), nullptr);
    EXPECT_EQ(indexed.Find(r), indexed.IndexedRow(r));
  }
  EXPECT_EQ(indexed.Find(5), nullptr);
  EXPECT_EQ(indexed.IndexedRow(90)[1], 2.0f);
  EXPECT_EQ(indexed.IndexedRow(37)[0], 5.0f);
  for (RowBuffer<float>* b : {&packed, &indexed}) {
    b->Find(4)[1] -= 0.5f;
    b->Find(90)[0] += 2.0f;
  }
  std::vector<uint32_t> pi, ii;
  std::vector<float> pd, id;
  packed.ChangedRows(&pi, &pd);
  indexed.ChangedRows(&ii, &id);
  EXPECT_EQ(ii, (std::vector<uint32_t>{90, 4}));  // load order, row 37 unchanged
  EXPECT_EQ(id, (std::vector<float>{2.0f, 0.0f, 0.0f, -0.5f}));
  EXPECT_EQ(ii, pi);
  EXPECT_EQ(id, pd);
  // Cleared and loaded again: the new base is the new value.
  indexed.Clear();
  EXPECT_EQ(indexed.loaded(), 0u);
  EXPECT_EQ(indexed.Find(4), nullptr);
  const std::vector<float> again = {7, 8};
  indexed.LoadBlock({4}, again.data());
  EXPECT_EQ(indexed.IndexedRow(4)[0], 7.0f);
  indexed.ChangedRows(&ii, &id);
  EXPECT_TRUE(ii.empty());
}

TEST(RowBufferTest, LoadRowsFillsRowsInPlaceInBothLayoutsAndNoneOnFailure) {
  for (bool indexed : {false, true}) {
    SCOPED_TRACE(indexed ? "indexed" : "packed");
    RowBuffer<float> buf(1000, 2, indexed);
    // A failed fill loads nothing.
    Status s = buf.LoadRows({5, 6}, [](float* out) {
      out[0] = 9;
      return Status::Unavailable("down");
    });
    EXPECT_TRUE(s.IsUnavailable());
    EXPECT_EQ(buf.loaded(), 0u);
    EXPECT_EQ(buf.Find(5), nullptr);
    // Runs larger than a chunk, a single row between them, and runs that
    // leave a chunk's tail unused: every row keeps its own value and base.
    std::vector<uint32_t> first(300), second(200);
    for (uint32_t i = 0; i < 300; ++i) first[i] = 999 - i;
    for (uint32_t i = 0; i < 200; ++i) second[i] = i;
    auto fill_with = [](const std::vector<uint32_t>& rows, float scale = 1.0f) {
      return [&rows, scale](float* out) {
        for (size_t k = 0; k < rows.size(); ++k) {
          out[2 * k] = scale * static_cast<float>(rows[k]);
          out[2 * k + 1] = -static_cast<float>(rows[k]);
        }
        return Status::OK();
      };
    };
    ASSERT_TRUE(buf.LoadRows(first, fill_with(first)).ok());
    float* single = buf.Slot(500);
    single[0] = 500;
    single[1] = -500;
    buf.Loaded();
    ASSERT_TRUE(buf.LoadRows(second, fill_with(second)).ok());
    EXPECT_EQ(buf.loaded(), 501u);
    for (uint32_t r : first) ASSERT_EQ(buf.Find(r)[1], -static_cast<float>(r));
    for (uint32_t r : second) ASSERT_EQ(buf.Find(r)[0], static_cast<float>(r));
    EXPECT_EQ(buf.Find(500)[0], 500.0f);
    buf.Find(700)[0] += 1.0f;  // of the first run
    buf.Find(3)[1] += 2.0f;    // of the second
    std::vector<uint32_t> idx;
    std::vector<float> deltas;
    buf.ChangedRows(&idx, &deltas);
    EXPECT_EQ(idx, (std::vector<uint32_t>{700, 3}));
    EXPECT_EQ(deltas, (std::vector<float>{1.0f, 0.0f, 0.0f, 2.0f}));
    // Cleared, the memory is reused and the new values are the new bases.
    buf.Clear();
    ASSERT_TRUE(buf.LoadRows(second, fill_with(second, 3.0f)).ok());
    EXPECT_EQ(buf.Find(7)[0], 21.0f);
    EXPECT_EQ(buf.Find(700), nullptr);
    buf.ChangedRows(&idx, &deltas);
    EXPECT_TRUE(idx.empty());
  }
}

}  // namespace
}  // namespace apps
}  // namespace pace
