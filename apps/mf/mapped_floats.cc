#include "apps/mf/mapped_floats.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <utility>

namespace pace {
namespace mf {
namespace {

Status Errno(const std::string& what) {
  return Status::IOError(what + ": " + std::strerror(errno));
}

}  // namespace

StatusOr<std::unique_ptr<MappedFloats>> MappedFloats::Create(const std::string& dir,
                                                             const std::string& name,
                                                             size_t count) {
  if (count == 0) return Status::InvalidArgument("a mapped array of no floats");
  static std::atomic<int> serial{0};
  const std::string path = (dir.empty() ? std::string(".") : dir) + "/" + name + "-" +
                           std::to_string(::getpid()) + "-" + std::to_string(serial++) + ".bin";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("creating '" + path + "'");
  // Unlinked at once: the mapping keeps the file until it is unmapped.
  ::unlink(path.c_str());
  const size_t bytes = count * sizeof(float);
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    Status s = Errno("sizing '" + path + "' to " + std::to_string(bytes) + " bytes");
    ::close(fd);
    return s;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  Status mapped = p == MAP_FAILED ? Errno("mapping '" + path + "'") : Status::OK();
  ::close(fd);  // the mapping holds its own reference
  if (!mapped.ok()) return mapped;
  if (::madvise(p, bytes, MADV_RANDOM) != 0) {
    Status s = Errno("madvise(MADV_RANDOM) on '" + path + "'");
    ::munmap(p, bytes);
    return s;
  }
  return std::unique_ptr<MappedFloats>(new MappedFloats(static_cast<float*>(p), count, path));
}

MappedFloats::~MappedFloats() { ::munmap(data_, count_ * sizeof(float)); }

}  // namespace mf
}  // namespace pace
