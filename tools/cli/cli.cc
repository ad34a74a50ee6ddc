#include "tools/cli/cli.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "tools/cli/version.h"

namespace pace {
namespace cli {
namespace {

// Flags defined in this project's sources (not gflags' or the logging
// library's own), by the path gflags recorded for them.
bool IsProjectFlag(const gflags::CommandLineFlagInfo& f) {
  // librocksdb.so (linked by sanitizer and -DPACE_ROCKSDB_STATIC=OFF builds)
  // brings its tools' flags, recorded as "./tools/...": not ours.
  if (f.filename.rfind("./", 0) == 0) return false;
  for (const char* dir : {"apps/", "tools/", "server/", "tests/", "client/"}) {
    if (f.filename.find(dir) != std::string::npos) return true;
  }
  return false;
}

std::string Placeholder(const std::string& type) {
  if (type == "bool") return "";
  if (type == "string") return "=STR";
  if (type == "double") return "=NUM";
  return "=INT";
}

std::string FlagLine(const gflags::CommandLineFlagInfo& f) {
  std::string left = "  --" + f.name + Placeholder(f.type);
  std::string line = left;
  const size_t column = 26;
  line += left.size() + 2 <= column ? std::string(column - left.size(), ' ')
                                    : "\n" + std::string(column, ' ');
  line += f.description;
  const std::string def = ReadableDefault(f.type, f.default_value);
  if (!(f.type == "string" && f.default_value.empty())) line += " (default: " + def + ")";
  return line + "\n";
}

bool WantsHelp(int argc, char** argv, const char* const* names) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return false;
    for (const char* const* n = names; *n != nullptr; ++n) {
      if (std::strcmp(argv[i], *n) == 0) return true;
    }
  }
  return false;
}

}  // namespace

std::string VersionString() {
  std::string v = PACE_VERSION;
  std::string rev = PACE_GIT_REVISION;
  if (!rev.empty() && rev != "v" + v) v += " (git " + rev + ")";
  return v;
}

std::string VersionText(const std::string& program) { return program + " " + VersionString(); }

std::string ReadableDefault(const std::string& type, const std::string& value) {
  if (type == "double") {
    double v = std::strtod(value.c_str(), nullptr);
    char buf[40];
    for (int p = 1; p <= 17; ++p) {
      std::snprintf(buf, sizeof(buf), "%.*g", p, v);
      if (std::strtod(buf, nullptr) != v) continue;
      // 10, not 1e+01: exponents only where %g would use them at full precision.
      if (std::strchr(buf, 'e') == nullptr || std::fabs(v) < 1e-4 || std::fabs(v) >= 1e15) break;
    }
    return buf;
  }
  if (type == "string" && value.empty()) return "\"\"";
  return value;
}

std::string HelpText(const ProgramInfo& info) {
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  auto find = [&](const std::string& name) -> const gflags::CommandLineFlagInfo* {
    for (const auto& f : all) {
      if (f.name == name) return &f;
    }
    return nullptr;
  };
  std::string out = info.name + ": " + info.summary + "\n\nusage:\n";
  size_t start = 0;
  while (start < info.usage.size()) {
    size_t end = info.usage.find('\n', start);
    if (end == std::string::npos) end = info.usage.size();
    out += "  " + info.usage.substr(start, end - start) + "\n";
    start = end + 1;
  }
  std::set<std::string> listed;
  for (const FlagGroup& g : info.groups) {
    std::string lines;
    for (const std::string& name : g.flags) {
      const gflags::CommandLineFlagInfo* f = find(name);
      if (f == nullptr || listed.count(name)) continue;
      listed.insert(name);
      lines += FlagLine(*f);
    }
    if (!lines.empty()) out += "\n" + g.title + ":\n" + lines;
  }
  std::string other;
  for (const auto& f : all) {
    if (IsProjectFlag(f) && !listed.count(f.name)) other += FlagLine(f);
  }
  if (!other.empty()) out += "\nother:\n" + other;
  out +=
      "\n  --help                  this text; --helpfull: every flag, including the logging "
      "library's\n  --version               " +
      VersionText(info.name) + "\n";
  if (!info.footer.empty()) out += "\n" + info.footer + "\n";
  return out;
}

void ParseCommandLine(const ProgramInfo& info, int* argc, char*** argv) {
  static const char* const kHelp[] = {"--help",      "-help",      "-h",
                                      "--helpshort", "-helpshort", nullptr};
  static const char* const kVersion[] = {"--version", "-version", nullptr};
  static const char* const kFull[] = {"--helpfull", "-helpfull", nullptr};
  if (WantsHelp(*argc, *argv, kFull)) {
    gflags::SetUsageMessage(info.summary);
    gflags::ParseCommandLineFlags(argc, argv, true);  // prints every flag, exits
  }
  // Help and version are answered before parsing, so that `--help` works
  // whatever else is on the line.
  if (WantsHelp(*argc, *argv, kHelp)) {
    std::fputs(HelpText(info).c_str(), stdout);
    std::exit(0);
  }
  if (WantsHelp(*argc, *argv, kVersion)) {
    std::printf("%s\n", VersionText(info.name).c_str());
    std::exit(0);
  }
  gflags::SetUsageMessage(info.summary);
  gflags::SetVersionString(VersionString());
  gflags::ParseCommandLineFlags(argc, argv, true);
}

}  // namespace cli
}  // namespace pace
