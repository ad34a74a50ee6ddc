#include "apps/lda/lda_state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "common/replace_file.h"

namespace pace {
namespace lda {
namespace {

constexpr char kMagic[8] = {'P', 'A', 'C', 'E', 'L', 'D', 'A', 'Z'};
constexpr uint32_t kFormat = 1;
constexpr size_t kHeaderBytes = 8 + 4 * 4 + 8 + 8;

std::string Prefix(uint32_t client, uint32_t part) {
  return "lda-z.c" + std::to_string(client) + ".p" + std::to_string(part) + ".";
}

uint64_t Fnv(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

template <typename T>
T Take(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

Status Errno(const std::string& what, const std::string& path) {
  return Status::IOError(what + " " + path + ": " + std::strerror(errno));
}

Status MkdirOne(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) return Status::OK();
  return Errno("creating", dir);
}

}  // namespace

std::string AssignmentsDir(const std::string& data_dir) { return data_dir + "/lda-assignments"; }

std::string AssignmentsPath(const std::string& dir, uint32_t client, uint32_t part, ClockT clock) {
  return dir + "/" + Prefix(client, part) + std::to_string(clock);
}

Status MakeAssignmentsDir(const std::string& dir) {
  size_t slash = dir.rfind('/');
  if (slash != std::string::npos && slash > 0) RETURN_IF_ERROR(MkdirOne(dir.substr(0, slash)));
  return MkdirOne(dir);
}

Status WriteAssignments(const std::string& dir, uint32_t client, const AssignmentsHeader& h,
                        const std::vector<int32_t>& z, bool sync) {
  std::string head(kMagic, sizeof(kMagic));
  Put(&head, kFormat);
  Put(&head, h.part);
  Put(&head, h.num_parts);
  Put(&head, h.topics);
  Put(&head, static_cast<int64_t>(h.clock));
  Put(&head, static_cast<uint64_t>(z.size()));
  const size_t zbytes = z.size() * sizeof(int32_t);
  uint64_t sum = Fnv(head.data(), head.size());
  sum = Fnv(z.data(), zbytes, sum);
  return ReplaceFile(AssignmentsPath(dir, client, h.part, h.clock),
                     {head, std::string_view(reinterpret_cast<const char*>(z.data()), zbytes),
                      std::string_view(reinterpret_cast<const char*>(&sum), sizeof(sum))},
                     sync ? FileSync::kDurable : FileSync::kNone);
}

Status ReadAssignments(const std::string& dir, uint32_t client, const AssignmentsHeader& expect,
                       std::vector<int32_t>* z) {
  const std::string path = AssignmentsPath(dir, client, expect.part, expect.clock);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(path);
    return Errno("opening", path);
  }
  std::string data;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = Errno("reading", path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  auto bad = [&](const std::string& why) { return Status::Corruption(path + ": " + why); };
  if (data.size() < kHeaderBytes + 8 || std::memcmp(data.data(), kMagic, 8) != 0) {
    return bad("not an assignments file");
  }
  const char* p = data.data() + 8;
  if (Take<uint32_t>(p) != kFormat) return bad("unknown format");
  if (Take<uint32_t>(p + 4) != expect.part || Take<uint32_t>(p + 8) != expect.num_parts) {
    // Not damage: the job was started with another split of the documents.
    return Status::FailedPrecondition(
        path + ": written when the documents were split into " +
        std::to_string(Take<uint32_t>(p + 8)) + " parts; this run splits them into " +
        std::to_string(expect.num_parts) +
        " (--num_clients x --workers): pace_lda resumes only with the split it started with");
  }
  if (Take<uint32_t>(p + 12) != expect.topics) return bad("written for another --topics");
  if (Take<int64_t>(p + 16) != expect.clock) return bad("written for another clock");
  const uint64_t tokens = Take<uint64_t>(p + 24);
  if (tokens != expect.tokens) return bad("holds another number of tokens");
  if (data.size() != kHeaderBytes + tokens * sizeof(int32_t) + 8) return bad("truncated");
  const size_t body = kHeaderBytes + tokens * sizeof(int32_t);
  if (Fnv(data.data(), body) != Take<uint64_t>(data.data() + body)) return bad("bad checksum");
  z->resize(tokens);
  std::memcpy(z->data(), data.data() + kHeaderBytes, tokens * sizeof(int32_t));
  for (int32_t k : *z) {
    if (k < 0 || static_cast<uint32_t>(k) >= expect.topics) return bad("topic out of range");
  }
  return Status::OK();
}

std::vector<ClockT> ListAssignments(const std::string& dir, uint32_t client, uint32_t part) {
  std::vector<ClockT> clocks;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return clocks;
  const std::string prefix = Prefix(client, part);
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = name.substr(prefix.size());
    if (rest.empty() || rest.find_first_not_of("0123456789") != std::string::npos) continue;
    clocks.push_back(std::stoll(rest));
  }
  ::closedir(d);
  std::sort(clocks.begin(), clocks.end());
  return clocks;
}

void RemoveAssignmentsBelow(const std::string& dir, uint32_t client, uint32_t part, ClockT below) {
  for (ClockT c : ListAssignments(dir, client, part)) {
    if (c < below) ::unlink(AssignmentsPath(dir, client, part, c).c_str());
  }
}

}  // namespace lda
}  // namespace pace
