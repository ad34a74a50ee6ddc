// Command-line plumbing every PaceDB binary shares (paced, pace_mf, pace_lda,
// pace_gen, pacectl): gflags parsing with a readable --help (only the
// program's own flags, grouped, defaults as written: 0.08, not
// 0.080000000000000002; exit 0) and --version (the version and the git
// revision the build was configured from; exit 0).
//
// A binaries-only library: it uses gflags, so libraries never link it
// (docs/design.md, "Layers"); tests/layering/check_layering.sh lets binaries of any
// layer include tools/cli/.
#ifndef PACE_TOOLS_CLI_CLI_H_
#define PACE_TOOLS_CLI_CLI_H_

#include <string>
#include <vector>

namespace pace {
namespace cli {

// A titled group of flags in --help, in the given order.
struct FlagGroup {
  std::string title;               // "model"
  std::vector<std::string> flags;  // flag names without "--"
};

struct ProgramInfo {
  std::string name;     // "pace_mf"
  std::string summary;  // one line: what the program does
  std::string usage;    // usage lines (without the program name's "usage:" prefix)
  std::vector<FlagGroup> groups;
  std::string footer;  // e.g. "Documentation: docs/apps.md"
};

// "0.1.0 (git v0.1.0-12-gabc1234)": the project version and the git revision
// CMake found at configure time (the project version alone without git).
std::string VersionString();
// "pace_mf 0.1.0 (git ...)".
std::string VersionText(const std::string& program);

// The --help text: summary, usage, then each group's flags as
// "  --name=TYPE   description (default: X)". Flags of the program that no
// group names (defined in this project's sources) are listed under "other";
// the logging library's and gflags' own flags are not listed (--helpfull).
std::string HelpText(const ProgramInfo& info);

// A flag's default as a user would write it: doubles in their shortest form
// that reads back exactly, strings quoted only when empty.
std::string ReadableDefault(const std::string& type, const std::string& value);

// Parses the command line like gflags::ParseCommandLineFlags(argc, argv,
// true), except that --help/-h/--helpshort print HelpText(info) on stdout
// and exit 0, --version prints VersionText and exits 0, and --helpfull prints
// gflags' complete list. Unknown flags: gflags' message, exit 1.
void ParseCommandLine(const ProgramInfo& info, int* argc, char*** argv);

}  // namespace cli
}  // namespace pace

#endif  // PACE_TOOLS_CLI_CLI_H_
