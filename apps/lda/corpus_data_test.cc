#include "apps/lda/corpus_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace pace {
namespace lda {
namespace {

class CorpusDataTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    std::string path =
        ::testing::TempDir() + "/corpus_data_test_" + std::to_string(::getpid()) + "_" + name;
    std::ofstream(path) << text;
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const std::string& p : paths_) std::remove(p.c_str());
  }
  std::vector<std::string> paths_;
};

TEST_F(CorpusDataTest, ReadsDocwordAndVocab) {
  std::string dw = Write("docword.txt", "3\n4\n4\n1 1 2\n1 4 1\n3 2 3\n3 1 1\n");
  Corpus c;
  CorpusReadInfo info;
  ASSERT_TRUE(ReadDocword(dw, {}, &c, &info).ok());
  ASSERT_EQ(c.docs.size(), 3u);
  EXPECT_EQ(c.vocab_size, 4u);
  EXPECT_EQ(c.num_tokens, 7u);
  EXPECT_EQ(c.docs[0], (std::vector<uint32_t>{0, 0, 3}));
  EXPECT_TRUE(c.docs[1].empty());
  EXPECT_EQ(c.docs[2], (std::vector<uint32_t>{1, 1, 1, 0}));
  EXPECT_EQ(c.WordName(2), "#2");
  ASSERT_TRUE(ReadVocab(Write("vocab.txt", "apple\nbanana\ncherry\ndate\nextra\n"), &c).ok());
  EXPECT_EQ(c.WordName(2), "cherry");
  EXPECT_EQ(c.vocab.size(), 4u);
  EXPECT_FALSE(ReadVocab(Write("short.txt", "apple\n"), &c).ok());
}

TEST_F(CorpusDataTest, BadEntriesNameFileAndLine) {
  Corpus c;
  std::string p = Write("bad.txt", "2\n3\n2\n1 1 1\n2 9 1\n");
  Status s = ReadDocword(p, {}, &c, nullptr);
  EXPECT_NE(s.message().find(p + ":5: bad wordID '9' (expected 1..3)"), std::string::npos)
      << s.ToString();
  p = Write("badhdr.txt", "2\nx\n");
  s = ReadDocword(p, {}, &c, nullptr);
  EXPECT_NE(s.message().find(p + ":2: expected the docword header's vocabulary size"),
            std::string::npos)
      << s.ToString();
  p = Write("nnz.txt", "2\n3\n5\n1 1 1\n");
  s = ReadDocword(p, {}, &c, nullptr);
  EXPECT_NE(s.message().find("NNZ = 5"), std::string::npos) << s.ToString();
  p = Write("zero.txt", "2\n3\n2\n1 1 1\n2 2 0\n");
  s = ReadDocword(p, {}, &c, nullptr);
  EXPECT_NE(s.message().find(":5: bad count '0'"), std::string::npos) << s.ToString();
  // Skipped and counted.
  CorpusReadOptions skip;
  skip.skip_bad_lines = true;
  CorpusReadInfo info;
  ASSERT_TRUE(ReadDocword(p, skip, &c, &info).ok());
  EXPECT_EQ(info.skipped, 1u);
  EXPECT_EQ(c.num_tokens, 1u);
  EXPECT_TRUE(ReadDocword("/nonexistent/docword.txt", {}, &c, nullptr).IsNotFound());
}

TEST_F(CorpusDataTest, ReadsOneDocumentPerLine) {
  Corpus c;
  ASSERT_TRUE(ReadDocsText(Write("docs.txt", "the cat sat\n\nthe  dog\tsat sat\n"), &c).ok());
  ASSERT_EQ(c.docs.size(), 3u);
  EXPECT_EQ(c.vocab, (std::vector<std::string>{"the", "cat", "sat", "dog"}));
  EXPECT_EQ(c.docs[0], (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_TRUE(c.docs[1].empty());
  EXPECT_EQ(c.docs[2], (std::vector<uint32_t>{0, 3, 2, 2}));
  EXPECT_EQ(c.num_tokens, 7u);
  EXPECT_FALSE(ReadDocsText(Write("empty.txt", "\n\n"), &c).ok());
}

}  // namespace
}  // namespace lda
}  // namespace pace
