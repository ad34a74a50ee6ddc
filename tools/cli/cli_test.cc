#include "tools/cli/cli.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

DEFINE_double(cli_test_rate, 0.08, "a step size");
DEFINE_string(cli_test_name, "", "a name");
DEFINE_bool(cli_test_ungrouped, false, "a flag no group names");

namespace pace {
namespace cli {
namespace {

TEST(CliTest, ReadableDefaults) {
  EXPECT_EQ(ReadableDefault("double", "0.080000000000000002"), "0.08");
  EXPECT_EQ(ReadableDefault("double", "1e+300"), "1e+300");
  EXPECT_EQ(ReadableDefault("double", "4"), "4");
  EXPECT_EQ(ReadableDefault("double", "10"), "10");
  EXPECT_EQ(ReadableDefault("double", "-1e+300"), "-1e+300");
  EXPECT_EQ(ReadableDefault("double", "1.0000000000000001e-05"), "1e-05");
  EXPECT_EQ(ReadableDefault("int32", "16"), "16");
  EXPECT_EQ(ReadableDefault("string", ""), "\"\"");
  EXPECT_EQ(ReadableDefault("string", "essp"), "essp");
}

TEST(CliTest, HelpListsGroupsAndOnlyProjectFlags) {
  ProgramInfo info;
  info.name = "cli_test";
  info.summary = "tests the help text";
  info.usage = "cli_test [flags]";
  info.groups = {{"model", {"cli_test_rate"}}, {"data", {"cli_test_name", "no_such_flag"}}};
  const std::string help = HelpText(info);
  EXPECT_EQ(help.find("cli_test: tests the help text\n"), 0u) << help;
  const size_t model = help.find("\nmodel:\n");
  const size_t data = help.find("\ndata:\n");
  const size_t other = help.find("\nother:\n");
  ASSERT_NE(model, std::string::npos) << help;
  ASSERT_NE(data, std::string::npos) << help;
  ASSERT_NE(other, std::string::npos) << help;
  EXPECT_LT(model, data);
  EXPECT_NE(help.find("--cli_test_rate=NUM"), std::string::npos) << help;
  EXPECT_NE(help.find("a step size (default: 0.08)"), std::string::npos) << help;
  EXPECT_EQ(help.find("0.0800000"), std::string::npos) << help;
  EXPECT_GT(help.find("--cli_test_ungrouped"), other) << help;
  // Not gflags' own flags (--flagfile, --fromenv), and no source paths.
  EXPECT_EQ(help.find("flagfile"), std::string::npos) << help;
  EXPECT_EQ(help.find(".cc"), std::string::npos) << help;
  EXPECT_EQ(help.find("no_such_flag"), std::string::npos) << help;
}

TEST(CliTest, VersionNamesTheProgram) {
  EXPECT_EQ(VersionText("x").find("x 0."), 0u) << VersionText("x");
}

}  // namespace
}  // namespace cli
}  // namespace pace
