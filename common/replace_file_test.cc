#include "common/replace_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "common/read_file.h"
#include "common/scoped_temp_dir.h"

namespace pace {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

TEST(ReplaceFileTest, WritesThePiecesAndReplacesTheOldContents) {
  ScopedTempDir dir("replace-file");
  const std::string path = dir.Sub("f");
  for (FileSync sync : {FileSync::kNone, FileSync::kDurable}) {
    ASSERT_TRUE(ReplaceFile(path, "old contents, longer than the new", sync).ok());
    ASSERT_TRUE(ReplaceFile(path, {"ab", "", std::string(100000, 'c')}, sync).ok());
    EXPECT_EQ(ReadFile(path), "ab" + std::string(100000, 'c'));
    EXPECT_FALSE(Exists(path + ".tmp"));
  }
}

TEST(ReplaceFileTest, AFailedReplaceLeavesTheFileAndNoTemporary) {
  ScopedTempDir dir("replace-file");
  // The target is a non-empty directory: the rename fails after the write.
  const std::string target = dir.Sub("d");
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  ASSERT_TRUE(ReplaceFile(target + "/inside", "x", FileSync::kDurable).ok());
  Status s = ReplaceFile(target, "new", FileSync::kDurable);
  EXPECT_TRUE(s.code() == StatusCode::kIOError) << s.ToString();
  EXPECT_NE(s.message().find("rename"), std::string::npos) << s.ToString();
  EXPECT_FALSE(Exists(target + ".tmp"));
  EXPECT_EQ(ReadFile(target + "/inside"), "x");
  // No such directory: the temporary cannot be created.
  s = ReplaceFile(dir.Sub("missing/f"), "x", FileSync::kNone);
  EXPECT_TRUE(s.code() == StatusCode::kIOError) << s.ToString();
  EXPECT_NE(s.message().find("missing/f.tmp"), std::string::npos) << s.ToString();
}

TEST(ReplaceFileTest, SyncDirAndSyncFileNameWhatTheyCannotOpen) {
  ScopedTempDir dir("replace-file");
  EXPECT_TRUE(SyncDir(dir.path()).ok());
  Status s = SyncDir(dir.Sub("none"));
  EXPECT_TRUE(s.code() == StatusCode::kIOError);
  EXPECT_NE(s.message().find(dir.Sub("none")), std::string::npos) << s.ToString();
  ASSERT_TRUE(ReplaceFile(dir.Sub("f"), "x", FileSync::kNone).ok());
  EXPECT_TRUE(SyncFile(dir.Sub("f")).ok());
  EXPECT_TRUE(SyncFile(dir.Sub("none")).code() == StatusCode::kIOError);
}

}  // namespace
}  // namespace pace
