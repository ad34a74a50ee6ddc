#include "apps/shared/text_input.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>

namespace pace {
namespace apps {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path =
      ::testing::TempDir() + "/text_input_test_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(LineReaderTest, LinesNumbersAndCrlf) {
  std::string path = WriteTemp("a.txt", "one\r\ntwo\n\nlast");
  std::unique_ptr<LineReader> r;
  ASSERT_TRUE(LineReader::Open(path, &r).ok());
  std::string_view line;
  std::vector<std::string> got;
  while (r->Next(&line)) got.emplace_back(line);
  EXPECT_TRUE(r->status().ok());
  EXPECT_EQ(got, (std::vector<std::string>{"one", "two", "", "last"}));
  EXPECT_EQ(r->line_number(), 4u);
  EXPECT_EQ(r->Where(), path + ":4");
  // Every byte, line ends included, and the file's size.
  EXPECT_EQ(r->bytes_read(), 14u);
  EXPECT_EQ(r->file_bytes(), 14u);
  std::remove(path.c_str());
}

TEST(LineReaderTest, ReadsGzipByItsMagicBytes) {
  std::string text;
  for (int i = 0; i < 50000; ++i) text += std::to_string(i) + " " + std::to_string(i * 7) + "\n";
  const std::string path =
      ::testing::TempDir() + "/text_input_test_" + std::to_string(::getpid()) + "_r.gz";
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
  std::unique_ptr<LineReader> r;
  ASSERT_TRUE(LineReader::Open(path, &r).ok());
  std::string_view line;
  std::string got;
  while (r->Next(&line)) got += std::string(line) + "\n";
  EXPECT_TRUE(r->status().ok()) << r->status().ToString();
  EXPECT_EQ(r->line_number(), 50000u);
  EXPECT_TRUE(got == text);
  // The text's bytes, but no size for a compressed file.
  EXPECT_EQ(r->bytes_read(), text.size());
  EXPECT_EQ(r->file_bytes(), 0u);
  std::remove(path.c_str());
}

TEST(LineReaderTest, MissingFileIsNotFound) {
  std::unique_ptr<LineReader> r;
  Status s = LineReader::Open("/nonexistent/dir/file.txt", &r);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("/nonexistent/dir/file.txt"), std::string::npos);
}

TEST(ParseTest, StrictNumbers) {
  uint64_t u;
  int64_t i;
  double d;
  EXPECT_TRUE(ParseU64("42", &u));
  EXPECT_EQ(u, 42u);
  EXPECT_FALSE(ParseU64("-1", &u));
  EXPECT_FALSE(ParseU64("4x", &u));
  EXPECT_FALSE(ParseU64("", &u));
  EXPECT_FALSE(ParseU64("99999999999999999999999", &u));
  EXPECT_TRUE(ParseI64("-7", &i));
  EXPECT_EQ(i, -7);
  EXPECT_TRUE(ParseDouble("3.5", &d));
  EXPECT_EQ(d, 3.5);
  EXPECT_TRUE(ParseDouble("+1e2", &d));
  EXPECT_EQ(d, 100.0);
  EXPECT_FALSE(ParseDouble("nan", &d));
  EXPECT_FALSE(ParseDouble("inf", &d));
  EXPECT_FALSE(ParseDouble("1.5.", &d));
}

// Numbers of any kind (what a header's column name is not).
TEST(ParseTest, NumberText) {
  for (const char* yes : {"1", "-2.5", "+3", "inf", "-inf", "nan", "NaN", "infinity", "1e999"}) {
    EXPECT_TRUE(IsNumberText(yes)) << yes;
  }
  for (const char* no : {"", "-", "rating", "1x", "1.5.", "userId"}) {
    EXPECT_FALSE(IsNumberText(no)) << no;
  }
}

TEST(SplitTest, WhitespaceAndSeparators) {
  std::vector<std::string_view> f;
  SplitWhitespace("  a \t b  c ", &f);
  EXPECT_EQ(f, (std::vector<std::string_view>{"a", "b", "c"}));
  SplitOn("1::2:: 3", "::", &f);
  EXPECT_EQ(f, (std::vector<std::string_view>{"1", "2", "3"}));
  SplitOn("a,,b", ",", &f);
  EXPECT_EQ(f, (std::vector<std::string_view>{"a", "", "b"}));
  EXPECT_EQ(Trim("  x \r"), "x");
  EXPECT_EQ(Excerpt(std::string(100, 'z')).size(), 60u + 5u);
}

TEST(BadLinePolicyTest, SkipsAndCountsOrFails) {
  BadLinePolicy strict(false);
  EXPECT_FALSE(strict.Handle(Status::InvalidArgument("f:3: bad")).ok());
  BadLinePolicy skip(true);
  EXPECT_TRUE(skip.Handle(Status::InvalidArgument("f:3: bad")).ok());
  EXPECT_TRUE(skip.Handle(Status::InvalidArgument("f:9: worse")).ok());
  EXPECT_EQ(skip.skipped(), 2u);
  EXPECT_EQ(skip.first_error(), "f:3: bad");
}

}  // namespace
}  // namespace apps
}  // namespace pace
