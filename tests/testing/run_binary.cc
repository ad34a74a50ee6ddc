#include "tests/testing/run_binary.h"

#include <sys/wait.h>

#include <fstream>
#include <sstream>

namespace pace::testing {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) lines.push_back(line);
  return lines;
}

Status StartBinary(Subprocess* p, std::vector<std::string> args, const std::string& err_path,
                   const std::vector<std::string>& env) {
  args[0] = BinaryDir() + "/" + args[0];
  if (!env.empty()) {
    std::vector<std::string> with_env = {"/usr/bin/env"};
    with_env.insert(with_env.end(), env.begin(), env.end());
    with_env.insert(with_env.end(), args.begin(), args.end());
    args = with_env;
  }
  return p->Start(args, err_path);
}

RunResult FinishBinary(Subprocess* p, const std::string& err_path, int timeout_ms) {
  RunResult r;
  std::string line;
  while (p->ReadLine(&line, timeout_ms).ok()) r.out += line + "\n";
  int st = 0;
  Status s = p->Wait(timeout_ms, &st);
  r.exit_code = s.ok() && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = ReadFile(err_path);
  if (!s.ok()) r.err += "\n(test: " + s.ToString() + ")";
  return r;
}

RunResult RunBinary(const std::vector<std::string>& args, const std::string& err_path,
                    const std::vector<std::string>& env) {
  Subprocess p;
  Status s = StartBinary(&p, args, err_path, env);
  if (!s.ok()) {
    RunResult r;
    r.err = "(test: cannot start " + args[0] + ": " + s.ToString() + ")";
    return r;
  }
  return FinishBinary(&p, err_path);
}

}  // namespace pace::testing
