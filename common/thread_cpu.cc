#include "common/thread_cpu.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace pace {
namespace {

// utime + stime (clock ticks, fields 14 and 15) of /proc/self/task/<tid>/stat,
// and the thread's name (field 2, in parentheses, which may hold spaces or
// parentheses itself: it ends at the last ')').
bool ReadTaskStat(const char* tid, std::string* name, double* seconds) {
  const std::string path = std::string("/proc/self/task/") + tid + "/stat";
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return false;  // the thread ended meanwhile
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* open = std::strchr(buf, '(');
  const char* close = std::strrchr(buf, ')');
  if (open == nullptr || close == nullptr || close < open) return false;
  name->assign(open + 1, close);
  // Fields from the 3rd on, after ") ": state, ppid, ..., utime (14th), stime (15th).
  const char* p = close + 1;
  unsigned long long utime = 0, stime = 0;
  for (int field = 3; field <= 15; ++field) {
    while (*p == ' ') ++p;
    if (*p == '\0') return false;
    if (field == 14) utime = std::strtoull(p, nullptr, 10);
    if (field == 15) stime = std::strtoull(p, nullptr, 10);
    while (*p != ' ' && *p != '\0') ++p;
  }
  const long ticks = sysconf(_SC_CLK_TCK);
  *seconds = static_cast<double>(utime + stime) / static_cast<double>(ticks > 0 ? ticks : 100);
  return true;
}

}  // namespace

std::string ThreadKind(const std::string& name) {
  size_t end = name.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(name[end - 1]))) --end;
  if (end == name.size() || end == 0) return name;  // no index, or digits only
  if (name[end - 1] == '-') --end;
  return end == 0 ? name : name.substr(0, end);
}

double ProcessCpuSeconds() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

CpuReading ReadThreadCpu() {
  CpuReading r;
  r.process = ProcessCpuSeconds();
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return r;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string name;
    double seconds = 0;
    if (ReadTaskStat(e->d_name, &name, &seconds)) r.by_kind[ThreadKind(name)] += seconds;
  }
  closedir(d);
  return r;
}

CpuReading CpuBetween(const CpuReading& before, const CpuReading& after) {
  CpuReading d;
  d.process = after.process - before.process;
  for (const auto& [kind, seconds] : after.by_kind) {
    auto it = before.by_kind.find(kind);
    d.by_kind[kind] = seconds - (it == before.by_kind.end() ? 0.0 : it->second);
  }
  return d;
}

}  // namespace pace
