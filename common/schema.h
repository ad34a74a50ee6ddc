// Table schemas: row kind, element type, width, consistency model, staleness
// and initializer. Shared by every layer; persisted by storage/ (see
// docs/storage-format.md) and carried on the wire by net/.
//
// All types here are plain values; thread-compatible.
#ifndef PACE_COMMON_SCHEMA_H_
#define PACE_COMMON_SCHEMA_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pace {

// Numeric values are part of the on-disk and wire formats. Never renumber.
enum class ElementType : uint8_t { kF32 = 1, kF64 = 2, kI32 = 3, kI64 = 4 };
enum class RowKind : uint8_t { kDense = 1, kSparse = 2 };
// kVap: value-bounded (docs/design.md, "VAP: the value bound"); no clock bound.
enum class Consistency : uint8_t { kBsp = 1, kSsp = 2, kEssp = 3, kAsync = 4, kVap = 5 };
enum class InitKind : uint8_t { kZeros = 1, kUniform = 2, kNormal = 3 };

// Size in bytes of one element.
size_t ElementSize(ElementType t);
bool IsIntegral(ElementType t);

// Names used by flags, the CLI and logs: "f32", "dense", "essp", "uniform".
std::string_view ElementTypeName(ElementType t);
std::string_view RowKindName(RowKind k);
std::string_view ConsistencyName(Consistency c);
std::string_view InitKindName(InitKind k);
Status ParseElementType(std::string_view s, ElementType* out);
Status ParseRowKind(std::string_view s, RowKind* out);
Status ParseConsistency(std::string_view s, Consistency* out);
Status ParseInitKind(std::string_view s, InitKind* out);

// The initial value of a row that was never written, as a pure function of
// (table id, row, column, seed). Uniform draws from [a, b); normal has mean a
// and standard deviation b. Integer tables support zeros only.
struct Initializer {
  InitKind kind = InitKind::kZeros;
  double a = 0.0;
  double b = 0.0;
  uint64_t seed = 0;
};

// Hard limits that make a schema valid.
inline constexpr uint32_t kMaxDenseWidth = 1u << 24;  // 16M elements per row
inline constexpr size_t kMaxTableNameLen = 128;

struct TableSchema {
  uint32_t id = 0;  // assigned by the shard catalog; 0 means "not yet assigned"
  std::string name;
  RowKind kind = RowKind::kDense;
  ElementType type = ElementType::kF32;
  // Dense: the number of elements in every row (>= 1).
  // Sparse: the column bound (columns must be < width), or 0 for any u32.
  uint32_t width = 1;
  Consistency consistency = Consistency::kSsp;
  // The staleness bound s. Forced to 0 for bsp; bounds no read under async
  // and vap (there it only sets how far the client's histogram is exact).
  uint32_t staleness = 0;
  // vap only: the value bound v (> 0, finite): a worker may not start its next
  // clock while the L1 norm of its process's unacknowledged updates to a row
  // exceeds v (consistency/value_bound.h). 0 for every other model.
  double value_bound = 0;
  Initializer init;
};

// Checks name, width, initializer and their combinations. Returns
// InvalidArgument with a message naming the offending field.
Status ValidateSchema(const TableSchema& s);

// True if the two schemas describe the same table (ignoring `id` when either
// is 0). Used to make CreateTable idempotent.
bool SameSchema(const TableSchema& a, const TableSchema& b);

// One line description, e.g. "w (id 3): dense f32 x 16, essp s=2, uniform[-0.1,0.1) seed 7"
// ("vap v=0.5 s=2" for vap).
std::string DescribeSchema(const TableSchema& s);

}  // namespace pace

#endif  // PACE_COMMON_SCHEMA_H_
