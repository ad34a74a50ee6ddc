#include "common/row.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "common/hash.h"

namespace pace {

namespace {

std::string FormatName(const RowFormat& f) {
  return std::string(RowKindName(f.kind)) + " " + std::string(ElementTypeName(f.type)) + " x " +
         std::to_string(f.width);
}

Status ValidateSparse(const RowFormat& f, std::string_view b) {
  if (b.size() < 4) {
    return Status::Corruption("sparse row of " + std::to_string(b.size()) +
                              " bytes is shorter than its 4-byte count");
  }
  uint32_t n;
  std::memcpy(&n, b.data(), 4);
  size_t es = f.element_size();
  // Compare in 64 bits so a huge count cannot overflow the expected size.
  uint64_t want = 4 + static_cast<uint64_t>(n) * (4 + es);
  if (want != b.size()) {
    return Status::Corruption("sparse row claims " + std::to_string(n) + " entries (" +
                              std::to_string(want) + " bytes) but has " + std::to_string(b.size()) +
                              " bytes");
  }
  const char* cols = b.data() + 4;
  uint32_t prev = 0;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t c;
    std::memcpy(&c, cols + 4 * static_cast<size_t>(i), 4);
    if (i > 0 && c <= prev) {
      return Status::Corruption("sparse row columns not strictly increasing at entry " +
                                std::to_string(i));
    }
    if (f.width != 0 && c >= f.width) {
      return Status::OutOfRange("sparse column " + std::to_string(c) + " >= width " +
                                std::to_string(f.width));
    }
    prev = c;
  }
  return Status::OK();
}

template <typename T>
void AddSparseTyped(std::string* value, std::string_view delta) {
  auto a = DecodeSparse<T>(*value);
  auto d = DecodeSparse<T>(delta);
  std::vector<std::pair<uint32_t, T>> out;
  out.reserve(a.size() + d.size());
  size_t i = 0, j = 0;
  while (i < a.size() || j < d.size()) {
    if (j == d.size() || (i < a.size() && a[i].first < d[j].first)) {
      out.push_back(a[i++]);
    } else if (i == a.size() || d[j].first < a[i].first) {
      if (d[j].second != T(0)) out.push_back(d[j]);
      ++j;
    } else {
      T sum = AddElement(a[i].second, d[j].second);
      if (sum != T(0)) out.emplace_back(a[i].first, sum);
      ++i;
      ++j;
    }
  }
  *value = EncodeSparse(out);
}

// Uniform double in [0, 1) from the top 53 bits of a hash.
double UnitFromHash(uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

}  // namespace

Status ValidateRow(const RowFormat& f, std::string_view bytes) {
  if (f.kind == RowKind::kDense) {
    if (bytes.size() != f.dense_bytes()) {
      return Status::InvalidArgument("row of " + std::to_string(bytes.size()) +
                                     " bytes does not match " + FormatName(f) + " (" +
                                     std::to_string(f.dense_bytes()) + " bytes)");
    }
    return Status::OK();
  }
  if (f.kind == RowKind::kSparse) return ValidateSparse(f, bytes);
  return Status::InvalidArgument("unknown row kind");
}

void AddDenseElements(ElementType t, void* dst, const void* src, size_t n) {
  VisitElementType(t, [&](auto zero) { AddUnaligned<decltype(zero)>(dst, src, n); });
}

void AddDenseCell(ElementType t, void* data, uint32_t col, double value) {
  VisitElementType(t, [&](auto zero) {
    using T = decltype(zero);
    StoreElement<T>(data, col, AddElement(LoadElement<T>(data, col), static_cast<T>(value)));
  });
}

void AddRowUnchecked(const RowFormat& f, std::string* value, std::string_view delta) {
  if (f.kind == RowKind::kDense) {
    if (value->empty()) {
      value->assign(delta.data(), delta.size());
      return;
    }
    AddDenseElements(f.type, value->data(), delta.data(), f.width);
    return;
  }
  if (value->empty()) value->assign(4, '\0');
  VisitElementType(f.type, [&](auto zero) { AddSparseTyped<decltype(zero)>(value, delta); });
}

Status AddRow(const RowFormat& f, std::string* value, std::string_view delta) {
  Status s = ValidateRow(f, delta);
  if (!s.ok()) return s.WithPrefix("bad delta");
  if (!value->empty()) {
    s = ValidateRow(f, *value);
    if (!s.ok()) return s.WithPrefix("bad value");
  }
  AddRowUnchecked(f, value, delta);
  return Status::OK();
}

namespace {

// `x`, as a value the compiler cannot fuse with the operation that made it:
// an initializer's product and the add after it are two roundings on every
// CPU and with any build's flags (a fused multiply-add, which a compiler may
// use wherever the target has it, rounds once and changes the last bit; row
// initializers are a function of seed, table, row and column that every
// process computes to the same bits).
template <typename T>
inline T Unfused(T x) {
  asm("" : "+m"(x));
  return x;
}

// The part of an element's initializer hash that depends on the row only:
// InitRow computes it once per row instead of once per element.
uint64_t RowInitHash(const TableSchema& s, uint64_t row) {
  return Mix64(Mix64(Mix64(s.init.seed ^ 0x5041434544420000ull) ^ s.id) ^ row);
}

double ElementInitValue(const TableSchema& s, uint64_t row_hash, uint32_t col) {
  const uint64_t h = Mix64(row_hash ^ col);
  if (s.init.kind == InitKind::kUniform) {
    return s.init.a + Unfused((s.init.b - s.init.a) * UnitFromHash(h));
  }
  // Box-Muller from two independent uniforms; u1 in (0, 1].
  double u1 = 1.0 - UnitFromHash(h);
  double u2 = UnitFromHash(Mix64(h ^ 0xA5A5A5A5A5A5A5A5ull));
  double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  return s.init.a + Unfused(s.init.b * z);
}

template <typename T>
void InitDense(const TableSchema& s, uint64_t row, char* out, uint32_t from = 0) {
  const uint64_t row_hash = RowInitHash(s, row);
  for (uint32_t c = from; c < s.width; ++c) {
    const T x = static_cast<T>(ElementInitValue(s, row_hash, c));
    std::memcpy(out + sizeof(T) * static_cast<size_t>(c), &x, sizeof(T));
  }
}

#if defined(__x86_64__)
// The uniform initializer several columns at a time: the same integer hash,
// the same double arithmetic as ElementInitValue (one correctly rounded
// operation each, the multiply and the add unfused in both), hence the same
// bits. A row's initializer took ~0.25 us a row of 129 elements one at a
// time; the client computes one for every row it creates. Written with the
// compiler's vector types (GCC 12 warns inside its AVX-512 intrinsics'
// headers). Each returns the columns done (a multiple of its lanes);
// InitDense does the rest.
typedef uint64_t U64x8 __attribute__((vector_size(64)));
typedef double F64x8 __attribute__((vector_size(64)));
typedef float F32x8 __attribute__((vector_size(32)));
typedef uint64_t U64x4 __attribute__((vector_size(32)));
typedef double F64x4 __attribute__((vector_size(32)));
typedef float F32x4 __attribute__((vector_size(16)));

// *x = Mix64 (common/hash.h) of every lane; inlined into each vector path
// (in place: a vector returned by value would change the default target's
// ABI).
template <typename V>
__attribute__((always_inline)) inline void MixLanes(V* x) {
  *x += 0x9E3779B97F4A7C15ull;
  *x = (*x ^ (*x >> 30)) * 0xBF58476D1CE4E5B9ull;
  *x = (*x ^ (*x >> 27)) * 0x94D049BB133111EBull;
  *x ^= *x >> 31;
}

// Stores the lanes of `v` as T at column `c` of `out`; inlined into each
// vector path, as MixLanes is.
template <typename T, typename F32V, typename F64V>
__attribute__((always_inline)) inline void StoreLanes(const F64V& v, char* out, uint32_t c) {
  if constexpr (std::is_same_v<T, float>) {
    const F32V f = __builtin_convertvector(v, F32V);
    std::memcpy(out + sizeof(float) * c, &f, sizeof(f));
  } else {
    std::memcpy(out + sizeof(double) * c, &v, sizeof(v));
  }
}

// Eight columns with AVX-512 (F for the 64-bit multiplies, DQ for the
// conversion of 64-bit integers).
template <typename T>
__attribute__((target("avx512f,avx512dq"))) uint32_t InitUniformAvx512(const TableSchema& s,
                                                                       uint64_t row, char* out) {
  const uint64_t row_hash = RowInitHash(s, row);
  const double a = s.init.a, scale = s.init.b - s.init.a;
  U64x8 col = {0, 1, 2, 3, 4, 5, 6, 7};
  uint32_t c = 0;
  for (; c + 8 <= s.width; c += 8) {
    U64x8 x = col ^ row_hash;
    MixLanes(&x);
    const F64x8 u = __builtin_convertvector(x >> 11, F64x8) * 0x1.0p-53;  // UnitFromHash
    F64x8 product = scale * u;
    asm("" : "+v"(product));  // as Unfused, in a register
    StoreLanes<T, F32x8>(F64x8(a + product), out, c);
    col += 8;
  }
  return c;
}

// Four columns with AVX2, which has neither a 64-bit multiply (the compiler
// composes it of 32-bit ones, exact modulo 2^64) nor a conversion of 64-bit
// integers: the 53-bit integer x >> 11 is converted in two exact halves,
// each placed in the mantissa of a power of two (2^52 for the low 32 bits,
// 2^84 for the high 21, which then count units of 2^32) that is subtracted
// again; their sum is below 2^53, so the add is exact too.
template <typename T>
__attribute__((target("avx2"))) uint32_t InitUniformAvx2(const TableSchema& s, uint64_t row,
                                                         char* out) {
  const uint64_t row_hash = RowInitHash(s, row);
  const double a = s.init.a, scale = s.init.b - s.init.a;
  const U64x4 low_exp = {0x4330000000000000ull, 0x4330000000000000ull, 0x4330000000000000ull,
                         0x4330000000000000ull};
  const U64x4 high_exp = {0x4530000000000000ull, 0x4530000000000000ull, 0x4530000000000000ull,
                          0x4530000000000000ull};
  U64x4 col = {0, 1, 2, 3};
  uint32_t c = 0;
  for (; c + 4 <= s.width; c += 4) {
    U64x4 x = col ^ row_hash;
    MixLanes(&x);
    const U64x4 top = x >> 11;  // UnitFromHash's 53 bits
    F64x4 low, high;
    const U64x4 low_bits = (top & 0xFFFFFFFFull) | low_exp;
    const U64x4 high_bits = (top >> 32) | high_exp;
    std::memcpy(&low, &low_bits, sizeof(low));
    std::memcpy(&high, &high_bits, sizeof(high));
    const F64x4 integer = (high - 0x1.0p84) + (low - 0x1.0p52);
    F64x4 product = scale * (integer * 0x1.0p-53);
    asm("" : "+x"(product));  // as Unfused, in a register
    StoreLanes<T, F32x4>(F64x4(a + product), out, c);
    col += 4;
  }
  return c;
}

bool HaveAvx512Init() {
  static const bool have = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return have;
}

bool HaveAvx2Init() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}
#endif

// The widest path the CPU has, or the one a test asks for.
template <typename T>
void InitDenseRow(const TableSchema& s, uint64_t row, char* out, InitPath path) {
  uint32_t from = 0;
#if defined(__x86_64__)
  if (s.init.kind == InitKind::kUniform) {
    if (HaveAvx512Init() && (path == InitPath::kWidest || path == InitPath::kAvx512)) {
      from = InitUniformAvx512<T>(s, row, out);
    } else if (HaveAvx2Init() && (path == InitPath::kWidest || path == InitPath::kAvx2)) {
      from = InitUniformAvx2<T>(s, row, out);
    }
  }
#endif
  InitDense<T>(s, row, out, from);
}

}  // namespace

double InitialValue(const TableSchema& s, uint64_t row, uint32_t col) {
  if (s.init.kind == InitKind::kZeros) return 0.0;
  return ElementInitValue(s, RowInitHash(s, row), col);
}

void InitRow(const TableSchema& s, uint64_t row, std::string* out) {
  InitRowVia(InitPath::kWidest, s, row, out);
}

bool HaveInitPath(InitPath path) {
#if defined(__x86_64__)
  if (path == InitPath::kAvx512) return HaveAvx512Init();
  if (path == InitPath::kAvx2) return HaveAvx2Init();
#else
  if (path == InitPath::kAvx512 || path == InitPath::kAvx2) return false;
#endif
  return true;
}

void InitRowVia(InitPath path, const TableSchema& s, uint64_t row, std::string* out) {
  RowFormat f = RowFormat::Of(s);
  if (s.kind == RowKind::kSparse) {
    out->assign(4, '\0');
    return;
  }
  out->assign(f.dense_bytes(), '\0');
  if (s.init.kind == InitKind::kZeros) return;
  if (s.type == ElementType::kF32) {
    InitDenseRow<float>(s, row, out->data(), path);
  } else {
    InitDenseRow<double>(s, row, out->data(), path);
  }
}

std::string ZeroRow(const RowFormat& f) {
  if (f.kind == RowKind::kSparse) return std::string(4, '\0');
  return std::string(f.dense_bytes(), '\0');
}

double DenseElementAsDouble(ElementType t, const char* data, size_t i) {
  return VisitElementType(
      t, [&](auto zero) { return static_cast<double>(LoadElement<decltype(zero)>(data, i)); });
}

bool SparseHasZero(const RowFormat& f, std::string_view row) {
  return VisitElementType(f.type, [&](auto zero) {
    using T = decltype(zero);
    const uint32_t n = SparseCount(row);
    const char* vals = row.data() + 4 + 4 * static_cast<size_t>(n);
    for (uint32_t i = 0; i < n; ++i) {
      if (LoadElement<T>(vals, i) == T(0)) return true;
    }
    return false;
  });
}

void StripSparseZeros(const RowFormat& f, std::string_view row, std::string* out) {
  VisitElementType(f.type, [&](auto zero) {
    using T = decltype(zero);
    std::vector<std::pair<uint32_t, T>> entries = DecodeSparse<T>(row);
    entries.erase(std::remove_if(entries.begin(), entries.end(),
                                 [](const std::pair<uint32_t, T>& e) { return e.second == T(0); }),
                  entries.end());
    *out = EncodeSparse(entries);
  });
}

uint32_t SparseCount(std::string_view bytes) {
  uint32_t n = 0;
  if (bytes.size() >= 4) std::memcpy(&n, bytes.data(), 4);
  return n;
}

}  // namespace pace
