// Tests of the small shared helpers: HistogramPercentile, ReadTokenFile,
// ReadOrCreateTokenFile, ScopedTempDir.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/byte_arena.h"
#include "common/front_dropping_vector.h"
#include "common/percentile.h"
#include "common/scoped_temp_dir.h"
#include "common/store_damage.h"
#include "common/token_file.h"

namespace pace {
namespace {

// A window moved through many elements: each drop forgets exactly the
// oldest ones, what is left keeps its order, and the storage of the dropped
// front is reclaimed (stored() stays within twice the window) without
// losing a live element.
TEST(FrontDroppingVectorTest, AMovingWindowKeepsItsOrderAndReclaimsTheFront) {
  FrontDroppingVector<int> v;
  int next = 0;    // the next value pushed
  int oldest = 0;  // the value the front must hold
  size_t most_stored = 0;
  for (int round = 0; round < 200; ++round) {
    const int add = 7 + round % 13;
    for (int k = 0; k < add; ++k) v.push_back(next++);
    const size_t drop = std::min(v.size(), static_cast<size_t>(5 + round % 17));
    v.DropFront(drop);
    oldest += static_cast<int>(drop);
    ASSERT_EQ(v.size(), static_cast<size_t>(next - oldest));
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], oldest + static_cast<int>(i));
    most_stored = std::max(most_stored, v.stored());
    ASSERT_LE(v.stored(), 2 * v.size() + 1) << "round " << round;
  }
  EXPECT_GT(next, 2000);
  EXPECT_LT(most_stored, 200u);  // the window, never the whole history
  v[0] = -1;
  EXPECT_EQ(v[0], -1);
  v.DropFront(v.size());
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(v.stored(), 0u);
  v.push_back(3);
  v.clear();
  EXPECT_TRUE(v.empty());
}

TEST(HistogramPercentileTest, NearestRank) {
  const std::vector<uint64_t> h = {90, 9, 0, 1};                 // 100 observations
  EXPECT_EQ(HistogramPercentile(h.data(), h.size(), 0.99), 1u);  // 99 of 100 are <= 1
  EXPECT_EQ(HistogramPercentile(h.data(), h.size(), 1.0), 3u);
  EXPECT_EQ(HistogramPercentile(h.data(), h.size(), 0.5), 0u);
  EXPECT_EQ(HistogramPercentile(h.data(), h.size(), 0.0), 0u);  // at least one
  const std::vector<double> d = {0, 0, 3};                      // sums of counts as doubles
  EXPECT_EQ(HistogramPercentile(d.data(), d.size(), 0.99), 2u);
  const std::vector<uint64_t> empty = {0, 0};
  EXPECT_EQ(HistogramPercentile(empty.data(), empty.size(), 0.99), 0u);
}

TEST(TokenFileTest, ReadsWithoutTrailingNewlinesAndRejectsEmptyOrMissing) {
  ScopedTempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::ofstream(dir.Sub("t")) << "s3cret\r\n\n";
  std::string token;
  ASSERT_TRUE(ReadTokenFile(dir.Sub("t"), &token).ok());
  EXPECT_EQ(token, "s3cret");
  std::ofstream(dir.Sub("empty")) << "\n";
  EXPECT_EQ(ReadTokenFile(dir.Sub("empty"), &token).code(), StatusCode::kInvalidArgument);
  Status s = ReadTokenFile(dir.Sub("missing"), &token);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("--token_file="), std::string::npos);
}

TEST(TokenFileTest, CreatesOnceWithMode0600ThenReusesIt) {
  ScopedTempDir dir;
  const std::string path = dir.Sub("token");
  std::string first;
  bool created = false;
  ASSERT_TRUE(ReadOrCreateTokenFile(path, &first, &created).ok());
  EXPECT_TRUE(created);
  EXPECT_EQ(first.size(), 32u);
  EXPECT_EQ(first.find_first_not_of("0123456789abcdef"), std::string::npos) << first;
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string again;
  ASSERT_TRUE(ReadOrCreateTokenFile(path, &again, &created).ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(again, first);
  ScopedTempDir other;
  ASSERT_TRUE(ReadOrCreateTokenFile(other.Sub("token"), &again, &created).ok());
  EXPECT_NE(again, first);  // random, not a constant
  // No temporary file is left beside it.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += e.exists();
  EXPECT_EQ(files, 1);
  EXPECT_EQ(ReadOrCreateTokenFile(dir.Sub("missing/token"), &again, &created).code(),
            StatusCode::kIOError);
}

TEST(ScopedTempDirTest, CreatesAndRemoves) {
  std::string path;
  {
    ScopedTempDir dir("pace-util-test");
    path = dir.path();
    ASSERT_TRUE(std::filesystem::is_directory(path));
    std::ofstream(dir.Sub("f")) << "x";
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace pace

namespace pace {
namespace {

// The damaged file as RocksDB's messages name it; SSTs first.
TEST(StoreDamageTest, FindsTheNamedFile) {
  DamagedFile d = FindDamagedFile(
      "Corruption: file is too short (43684 bytes) to be an sstable/d/s/000008.sst in file "
      "/d/s/MANIFEST-000005");
  EXPECT_EQ(d.kind, DamagedFileKind::kSst);
  d = FindDamagedFile(
      "Corruption: no log_file_number entry in MANIFEST in file /d/MANIFEST-000005");
  EXPECT_EQ(d.kind, DamagedFileKind::kManifest);
  EXPECT_EQ(d.path, "/d/MANIFEST-000005");
  d = FindDamagedFile("Corruption: checksum mismatch in /d/000009.log.");
  EXPECT_EQ(d.kind, DamagedFileKind::kWal);
  EXPECT_EQ(d.path, "/d/000009.log");
  EXPECT_EQ(FindDamagedFile("Corruption: bad row in table 'LOG'").kind, DamagedFileKind::kUnknown);
  Status s = ClassifyStoreCorruption(
      "/d", Status::Corruption("Sst file size mismatch: /d/000010.sst. Size recorded 1, actual 2"));
  EXPECT_EQ(s.message().rfind("SST file /d/000010.sst is damaged", 0), 0u) << s.ToString();
  EXPECT_EQ(ClassifyStoreCorruption("/d", s).message(), s.message()) << "classified twice";
  EXPECT_EQ(ClassifyStoreCorruption("/d", Status::IOError("x.sst")).code(), StatusCode::kIOError);
  // Every classified damage names the check and the way out.
  EXPECT_NE(s.message().find("pacectl --data_dir=/d verify"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("pacectl checkpoint restore"), std::string::npos) << s.ToString();
}

// The clock log of storage format 2 (CLOCKLOG-n) is named as itself, also in
// the store's text that ends with its own way out.
TEST(StoreDamageTest, NamesTheClockLog) {
  const Status raw = Status::Corruption(
      "clock log /d/CLOCKLOG-000004 at offset 96: record checksum mismatch: the committed "
      "updates it holds cannot be recovered from this store; restore the last checkpoint "
      "(pacectl checkpoint restore) and resume the job from it");
  DamagedFile d = FindDamagedFile(raw.message());
  EXPECT_EQ(d.kind, DamagedFileKind::kClockLog);
  EXPECT_EQ(d.path, "/d/CLOCKLOG-000004");
  EXPECT_EQ(DamagedFileKindName(d.kind), "the clock log");
  const Status s = ClassifyStoreCorruption("/d", raw);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(s.message().rfind("the clock log /d/CLOCKLOG-000004 is damaged: clock log ", 0), 0u)
      << s.ToString();
  EXPECT_NE(s.message().find("pacectl --data_dir=/d verify"), std::string::npos) << s.ToString();
  EXPECT_EQ(s.message().find("resume the job from it"), std::string::npos) << s.ToString();
  // A damaged WAL keeps the store's words and gets the same commands.
  const Status wal = ClassifyStoreCorruption(
      "/d", Status::Corruption("the store in /d is corrupt (Corruption: checksum mismatch in "
                               "/d/000009.log): a write-ahead log is damaged before its end. "
                               "Way out: restore"));
  EXPECT_NE(wal.message().find("a write-ahead log is damaged before its end"), std::string::npos);
  EXPECT_EQ(wal.message().find("write-ahead log /d/"), std::string::npos) << "named by RocksDB";
  EXPECT_NE(wal.message().find("pacectl checkpoint restore"), std::string::npos) << wal.ToString();
}

}  // namespace
}  // namespace pace

namespace pace {
namespace {

// Every view an arena returns keeps its bytes while later adds fill new
// chunks (which grow to at most kMaxChunk, or the size of one larger add),
// and the arena allocates a few chunks, not one block per add.
TEST(ByteArenaTest, ViewsStayValidAcrossChunksAndAddsShareChunks) {
  ByteArena arena(1000);
  std::vector<std::pair<std::string, std::string_view>> added;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes(static_cast<size_t>(1 + i % 700), static_cast<char>('a' + i % 26));
    std::string_view v = arena.Add(bytes);
    added.emplace_back(std::move(bytes), v);
  }
  const std::string big(ByteArena::kMaxChunk + 5, 'z');  // larger than any chunk
  std::string_view big_view = arena.Add(big);
  EXPECT_TRUE(arena.Add("").empty());
  size_t used = big.size();
  for (const auto& [bytes, view] : added) {
    ASSERT_EQ(view, bytes);
    used += bytes.size();
  }
  EXPECT_EQ(big_view, big);
  EXPECT_EQ(arena.used(), used);
  EXPECT_GE(arena.allocated(), used);
  // ~7 MB in chunks doubling from 1000 bytes to 4 MiB: far fewer than 20000.
  EXPECT_LE(arena.allocated(), used + ByteArena::kMaxChunk + 64 * 1024);
}

}  // namespace
}  // namespace pace
