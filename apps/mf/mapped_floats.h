// An array of floats in a file-backed shared memory mapping, for the
// out-of-core baseline of pace_mf (--baseline_mmap): the OS's demand paging
// moves its pages between the page cache and the file, so inside a memory
// cgroup the array can be larger than the memory the cgroup allows.
//
// The file is created in a directory, sized, mapped MAP_SHARED, advised
// MADV_RANDOM (no read-ahead: rows are visited in random order, and the pages
// around a row would only crowd the cache), and unlinked at once: the mapping
// keeps it until it is unmapped, and nothing is left behind, even after a
// crash. Starts zero-filled.
//
// Thread-compatible.
#ifndef PACE_APPS_MF_MAPPED_FLOATS_H_
#define PACE_APPS_MF_MAPPED_FLOATS_H_

#include <cstddef>
#include <memory>
#include <string>

#include "common/status.h"

namespace pace {
namespace mf {

class MappedFloats {
 public:
  // Maps `count` floats in a new file "<dir>/<name>-<pid>-<n>.bin". IOError if
  // the file cannot be created, sized or mapped; InvalidArgument if count is 0.
  static StatusOr<std::unique_ptr<MappedFloats>> Create(const std::string& dir,
                                                        const std::string& name, size_t count);
  ~MappedFloats();
  MappedFloats(const MappedFloats&) = delete;
  MappedFloats& operator=(const MappedFloats&) = delete;

  float* data() { return data_; }
  size_t size() const { return count_; }
  // The file's path when it was created (it is unlinked already).
  const std::string& path() const { return path_; }

 private:
  MappedFloats(float* data, size_t count, std::string path)
      : data_(data), count_(count), path_(std::move(path)) {}

  float* data_;
  size_t count_;
  std::string path_;
};

}  // namespace mf
}  // namespace pace

#endif  // PACE_APPS_MF_MAPPED_FLOATS_H_
