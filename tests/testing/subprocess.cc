#include "tests/testing/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

namespace pace::testing {

Subprocess::~Subprocess() { Kill(); }

Status Subprocess::Start(const std::vector<std::string>& argv, const std::string& stderr_path) {
  if (pid_ > 0) return Status::FailedPrecondition("already running");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::IOError(std::strerror(errno));
  pid_t pid = fork();
  if (pid < 0) return Status::IOError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    dup2(fds[1], 1);
    if (!stderr_path.empty()) {
      int fd = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) dup2(fd, 2);
    }
    if (nofile_soft_ > 0) {
      rlimit lim{static_cast<rlim_t>(nofile_soft_), static_cast<rlim_t>(nofile_hard_)};
      if (setrlimit(RLIMIT_NOFILE, &lim) != 0) _exit(126);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  pid_ = pid;
  stdout_fd_ = fds[0];
  buffer_.clear();
  return Status::OK();
}

Status Subprocess::ReadLine(std::string* line, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      *line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return Status::OK();
    }
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
    if (left <= 0) return Status::TimedOut("no line from child within timeout");
    pollfd p{stdout_fd_, POLLIN, 0};
    int r = poll(&p, 1, left);
    if (r <= 0) continue;
    char buf[4096];
    ssize_t n = read(stdout_fd_, buf, sizeof(buf));
    if (n <= 0) return Status::Unavailable("child closed stdout");
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

void Subprocess::Signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

Status Subprocess::Wait(int timeout_ms, int* wait_status) {
  if (pid_ <= 0) return Status::FailedPrecondition("not running");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    int st = 0;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      if (stdout_fd_ >= 0) close(stdout_fd_);
      stdout_fd_ = -1;
      if (wait_status) *wait_status = st;
      return Status::OK();
    }
    if (std::chrono::steady_clock::now() > deadline) return Status::TimedOut("child still running");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void Subprocess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int st;
  waitpid(pid_, &st, 0);
  pid_ = -1;
  if (stdout_fd_ >= 0) close(stdout_fd_);
  stdout_fd_ = -1;
}

uint64_t ProcStatusKb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1));
  }
  return 0;
}

std::string BinaryDir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
}

Status StartPaced(Subprocess* proc, const std::string& data_dir, uint32_t shard,
                  uint32_t num_shards, uint32_t num_clients, const std::vector<std::string>& extra,
                  uint16_t* port, uint16_t fixed_port, uint16_t* metrics_port) {
  std::vector<std::string> argv = {BinaryDir() + "/paced",
                                   "--listen=127.0.0.1:" + std::to_string(fixed_port),
                                   "--data_dir=" + data_dir,
                                   "--shard=" + std::to_string(shard),
                                   "--num_shards=" + std::to_string(num_shards),
                                   "--num_clients=" + std::to_string(num_clients)};
  const bool auth_given = std::any_of(extra.begin(), extra.end(), [](const std::string& f) {
    return f.rfind("--token_file=", 0) == 0 || f == "--insecure" || f == "--noinsecure";
  });
  if (!auth_given) argv.push_back("--insecure");
  argv.insert(argv.end(), extra.begin(), extra.end());
  RETURN_IF_ERROR(proc->Start(argv, data_dir + ".stderr.log"));
  std::string line;
  const std::string prefix = "paced listening on ";
  auto port_of = [](const std::string& l) {
    return static_cast<uint16_t>(std::atoi(l.c_str() + l.rfind(':') + 1));
  };
  if (metrics_port != nullptr) *metrics_port = 0;
  while (true) {
    Status s = proc->ReadLine(&line, 20000);
    if (!s.ok()) return s.WithPrefix("paced did not start (see " + data_dir + ".stderr.log)");
    if (line.rfind(prefix, 0) == 0) break;
    if (metrics_port != nullptr && line.rfind("paced metrics on ", 0) == 0) {
      *metrics_port = port_of(line);
    }
  }
  *port = port_of(line);
  return Status::OK();
}

}  // namespace pace::testing
