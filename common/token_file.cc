#include "common/token_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace pace {

namespace {

Status Errno(const std::string& what, int err) {
  return Status::IOError(what + ": " + std::strerror(err));
}

Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("write " + path, errno);
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return Errno("fsync " + path, errno);
  return Status::OK();
}

}  // namespace

Status CheckOwnTokenFile(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    return Status::IOError("cannot examine the job token " + path + ": " + std::strerror(errno));
  }
  const std::string way_out =
      ": remove it (paced creates a new one on its next start) or pass --token_file=FILE of your "
      "own";
  if (S_ISLNK(st.st_mode)) {
    return Status::PermissionDenied("the job token " + path + " is a symbolic link" + way_out);
  }
  if (st.st_uid != ::geteuid()) {
    return Status::PermissionDenied("the job token " + path + " belongs to uid " +
                                    std::to_string(st.st_uid) + ", not to this user (uid " +
                                    std::to_string(::geteuid()) +
                                    "): another user may have planted it" + way_out);
  }
  if ((st.st_mode & 022) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%o", static_cast<unsigned>(st.st_mode & 0777));
    return Status::PermissionDenied("the job token " + path + " is writable by other users (mode " +
                                    mode + "), who could replace the secret" + way_out +
                                    " (or chmod 600 " + path + ")");
  }
  return Status::OK();
}

Status RandomHex(size_t bytes, std::string* out) {
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("getrandom", errno);
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  out->clear();
  for (char c : raw) {
    const uint8_t b = static_cast<uint8_t>(c);
    out->push_back(kHex[b >> 4]);
    out->push_back(kHex[b & 15]);
  }
  return Status::OK();
}

bool IsAutoJobId(const std::string& job) { return job.rfind(kAutoJobPrefix, 0) == 0; }

namespace {

bool JobChars(const std::string& job) {
  return std::all_of(job.begin(), job.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '-';
  });
}

}  // namespace

Status CheckStoredJobId(const std::string& job, const std::string& flag) {
  if (IsAutoJobId(job) && job.size() <= 128 && JobChars(job)) return Status::OK();
  return CheckJobId(job, flag);
}

Status CheckJobId(const std::string& job, const std::string& flag) {
  const bool ok_chars = JobChars(job);
  if (job.empty() || job.size() > 128 || !ok_chars || IsAutoJobId(job)) {
    return Status::InvalidArgument(flag + "='" + job +
                                   "': a job name is 1 to 128 characters of A-Z a-z 0-9 . _ : - "
                                   "and does not start with '" +
                                   kAutoJobPrefix + "'");
  }
  return Status::OK();
}

Status ReadTokenFile(const std::string& path, std::string* token) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read --token_file=" + path);
  std::stringstream ss;
  ss << in.rdbuf();
  *token = ss.str();
  while (!token->empty() && (token->back() == '\n' || token->back() == '\r')) token->pop_back();
  if (token->empty()) return Status::InvalidArgument("--token_file=" + path + " is empty");
  return Status::OK();
}

Status ReadOrCreateTokenFile(const std::string& path, std::string* token, bool* created) {
  *created = false;
  if (access(path.c_str(), F_OK) == 0) return ReadTokenFile(path, token);
  std::string fresh;
  RETURN_IF_ERROR(RandomHex(16, &fresh));
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("create " + tmp, errno);
  Status s = WriteAll(fd, fresh + "\n", tmp);
  if (close(fd) != 0 && s.ok()) s = Errno("close " + tmp, errno);
  // link(2) fails with EEXIST instead of replacing a token another process
  // created meanwhile.
  int link_errno = 0;
  if (s.ok() && link(tmp.c_str(), path.c_str()) != 0) link_errno = errno;
  unlink(tmp.c_str());
  RETURN_IF_ERROR(s);
  if (link_errno == EEXIST) return ReadTokenFile(path, token);
  if (link_errno != 0) return Errno("create " + path, link_errno);
  *token = fresh;
  *created = true;
  return Status::OK();
}

}  // namespace pace
