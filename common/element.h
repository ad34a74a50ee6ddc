// Element arithmetic: the one definition of how two row elements add, used by
// every layer (the client's cache and oplog, the shard's merge operator and row
// cache, the tools). Read-my-writes needs the client's rebasing to equal the
// shard's merge bit for bit, so there is exactly one add:
//   - integers wrap (two's complement), never overflow (no UB);
//   - floats add in IEEE order, a + b, with no reassociation or fused ops.
// Sums of several deltas are always taken left to right (value + d1 + d2 ...).
//
// VisitElementType maps an ElementType to its C++ type, so a function over
// element types is written once as a template instead of a switch per use.
//
// Header-only; all functions are thread-compatible.
#ifndef PACE_COMMON_ELEMENT_H_
#define PACE_COMMON_ELEMENT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/schema.h"

namespace pace {

// a + b for one element of type T, per the rule above.
template <typename T>
inline T AddElement(T a, T b) {
  static_assert(std::is_arithmetic_v<T>, "row elements are numbers");
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

// dst[i] += src[i] for n elements. REQUIRES: aligned, non-overlapping arrays.
// Inline so hot paths (the client's Inc) compile to one vectorized loop.
template <typename T>
inline void AddInPlace(T* __restrict dst, const T* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = AddElement(dst[i], src[i]);
}

// a - b for one element of type T (integers wrap): the delta that AddElement
// adds to b to give a.
template <typename T>
inline T SubElement(T a, T b) {
  static_assert(std::is_arithmetic_v<T>, "row elements are numbers");
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}

// dst[i] += a[i] - b[i] for n elements: the same as computing the delta
// a - b into an array and AddInPlace-ing it, in one pass. REQUIRES: aligned;
// dst does not overlap a or b.
template <typename T>
inline void AddDiffInPlace(T* __restrict dst, const T* a, const T* b, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = AddElement(dst[i], SubElement(a[i], b[i]));
}

// out[i] = a[i] + b[i] for n elements (one fused pass). REQUIRES: aligned; out
// does not overlap a or b.
template <typename T>
inline void AddInto(T* __restrict out, const T* a, const T* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = AddElement(a[i], b[i]);
}

// Element i of an unaligned array of T (row bytes come from the network and
// from RocksDB with no alignment; memcpy compiles to a plain load).
template <typename T>
inline T LoadElement(const void* data, size_t i) {
  T x;
  std::memcpy(&x, static_cast<const char*>(data) + i * sizeof(T), sizeof(T));
  return x;
}
template <typename T>
inline void StoreElement(void* data, size_t i, T x) {
  std::memcpy(static_cast<char*>(data) + i * sizeof(T), &x, sizeof(T));
}

// dst[i] += src[i] for n elements of T; neither pointer needs alignment.
template <typename T>
inline void AddUnaligned(void* dst, const void* src, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    StoreElement<T>(dst, i, AddElement(LoadElement<T>(dst, i), LoadElement<T>(src, i)));
  }
}

// Calls f(T{}) with T the C++ type of `t` (float, double, int32_t, int64_t)
// and returns its result. REQUIRES: t is one of the four ElementType values
// (every decoded schema and row tag is validated); anything else is treated
// as f32.
template <typename F>
inline decltype(auto) VisitElementType(ElementType t, F&& f) {
  switch (t) {
    case ElementType::kF64:
      return f(double{});
    case ElementType::kI32:
      return f(int32_t{});
    case ElementType::kI64:
      return f(int64_t{});
    case ElementType::kF32:
      break;
  }
  return f(float{});
}

}  // namespace pace

#endif  // PACE_COMMON_ELEMENT_H_
