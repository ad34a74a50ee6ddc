// PassVector: a vector of a pass over many rows (the rows in stripe order,
// the entries they found, the rows left for a slow path), reused by the
// thread's next pass instead of allocated and freed each call.
//
// Every thread of a process allocates from one malloc arena
// (common/malloc_tuning.h), so each allocation may wait for another thread's:
// in a model-scale MF run (8a) the workers slept ~0.4 s on malloc's lock in
// the temporaries of their Prefetch, GetRows and IncDiff calls alone, a few
// per call of thousands of rows (docs/data-path.md). A thread keeps up to
// kKept vectors of each element type, each of at most kMaxKeptBytes, for its
// next passes; a pass nested in another takes its own (the outer one's stays
// checked out until it ends).
#ifndef PACE_CLIENT_PASS_VECTOR_H_
#define PACE_CLIENT_PASS_VECTOR_H_

#include <cstddef>
#include <utility>
#include <vector>

namespace pace {
namespace client {

template <typename T>
class PassVector {
 public:
  static constexpr size_t kKept = 4;
  static constexpr size_t kMaxKeptBytes = size_t{4} << 20;

  // `n` value-initialized elements.
  explicit PassVector(size_t n = 0) : v_(Take()) { v_.resize(n); }
  PassVector(PassVector&& other) noexcept : v_(std::move(other.v_)) {}
  PassVector& operator=(PassVector&&) = delete;
  PassVector(const PassVector&) = delete;
  PassVector& operator=(const PassVector&) = delete;
  ~PassVector() { Give(std::move(v_)); }

  std::vector<T>& operator*() { return v_; }
  const std::vector<T>& operator*() const { return v_; }
  std::vector<T>* operator->() { return &v_; }
  const std::vector<T>* operator->() const { return &v_; }
  T& operator[](size_t i) { return v_[i]; }
  const T& operator[](size_t i) const { return v_[i]; }
  size_t size() const { return v_.size(); }

 private:
  static std::vector<std::vector<T>>& Pool() {
    thread_local std::vector<std::vector<T>> pool;
    return pool;
  }
  static std::vector<T> Take() {
    std::vector<std::vector<T>>& pool = Pool();
    if (pool.empty()) return {};
    std::vector<T> v = std::move(pool.back());
    pool.pop_back();
    v.clear();
    return v;
  }
  static void Give(std::vector<T>&& v) {
    if (v.capacity() == 0 || v.capacity() * sizeof(T) > kMaxKeptBytes) return;
    std::vector<std::vector<T>>& pool = Pool();
    if (pool.size() < kKept) pool.push_back(std::move(v));
  }

  std::vector<T> v_;
};

}  // namespace client
}  // namespace pace

#endif  // PACE_CLIENT_PASS_VECTOR_H_
