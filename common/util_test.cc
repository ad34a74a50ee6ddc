// Tests of the small shared helpers: HistogramPercentile, ReadTokenFile,
// ReadOrCreateTokenFile, ScopedTempDir.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include "common/percentile.h"
#include "common/scoped_temp_dir.h"
#include "common/store_damage.h"
#include "common/string_pool.h"
#include "common/token_file.h"

namespace pace {
namespace {

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

// Buffers keep their capacity through the pool, the pool keeps no more bytes
// of capacity than its bound (the rest are freed), small strings (no heap
// buffer) are not kept, and Take gives at most what it holds.
TEST(StringPoolTest, KeepsBuffersWithTheirCapacityUpToItsBound) {
  StringPool pool(3 * 1000);
  std::vector<std::string> spare;
  for (int i = 0; i < 5; ++i) spare.push_back(std::string(1000, 'x'));
  spare.push_back("short");
  const size_t cap = spare[0].capacity();
  ASSERT_GE(cap, 1000u);
  pool.Put(&spare);
  EXPECT_TRUE(spare.empty());
  const size_t kept = 3 * 1000 / cap;
  EXPECT_EQ(pool.bytes(), kept * cap);
  std::vector<std::string> out;
  EXPECT_EQ(pool.Take(1, &out), 1u);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].empty());
  EXPECT_EQ(out[0].capacity(), cap);
  const char* data = out[0].data();
  const std::string delta(900, 'y');
  out[0].assign(delta);            // as SendBatch copies a delta into it
  EXPECT_EQ(out[0].data(), data);  // no allocation
  EXPECT_EQ(pool.Take(100, &out), kept - 1);
  EXPECT_EQ(pool.bytes(), 0u);
  EXPECT_EQ(pool.Take(100, &out), 0u);
}

}  // namespace
}  // namespace pace
