#include "common/token_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

namespace pace {

namespace {

Status Errno(const std::string& what, int err) {
  return Status::IOError(what + ": " + std::strerror(err));
}

// 128 random bits as 32 lowercase hex digits.
Status NewToken(std::string* token) {
  uint8_t bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("getrandom", errno);
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  token->clear();
  for (uint8_t b : bytes) {
    token->push_back(kHex[b >> 4]);
    token->push_back(kHex[b & 15]);
  }
  return Status::OK();
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
  RETURN_IF_ERROR(NewToken(&fresh));
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
