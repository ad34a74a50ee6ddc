// FrontDroppingVector: a list appended at the back and released from the
// front, as a moving window is (a worker's leases, oldest first).
#ifndef PACE_COMMON_FRONT_DROPPING_VECTOR_H_
#define PACE_COMMON_FRONT_DROPPING_VECTOR_H_

#include <cassert>
#include <cstddef>
#include <vector>

namespace pace {

// The elements live in one vector; the dropped front is only skipped, and
// its storage is reclaimed (the rest moved down) once it is half of the
// vector or the list is empty. Erasing at each drop moved every later
// element down: a window of ~100k elements released a few thousand at a
// time spent its time in memmove; a std::deque cost more in its indexing
// than that saved.
template <typename T>
class FrontDroppingVector {
 public:
  size_t size() const { return items_.size() - head_; }
  bool empty() const { return size() == 0; }
  const T& operator[](size_t i) const {
    assert(i < size());
    return items_[head_ + i];
  }
  T& operator[](size_t i) {
    assert(i < size());
    return items_[head_ + i];
  }
  void push_back(const T& v) { items_.push_back(v); }
  // A value-initialized element appended, for the caller to fill in place.
  T& emplace_back() { return items_.emplace_back(); }
  void clear() {
    items_.clear();
    head_ = 0;
  }
  // Forgets the first n elements. REQUIRES: n <= size().
  void DropFront(size_t n) {
    assert(n <= size());
    head_ += n;
    if (head_ == items_.size()) {
      clear();
    } else if (head_ > items_.size() / 2) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }
  // Elements stored, the dropped ones not yet reclaimed among them.
  size_t stored() const { return items_.size(); }

 private:
  std::vector<T> items_;
  size_t head_ = 0;  // items_[0, head_) are dropped
};

}  // namespace pace

#endif  // PACE_COMMON_FRONT_DROPPING_VECTOR_H_
