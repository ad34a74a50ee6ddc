#include "common/schema.h"

#include <cmath>
#include <cstdio>

namespace pace {

size_t ElementSize(ElementType t) {
  switch (t) {
    case ElementType::kF32:
    case ElementType::kI32:
      return 4;
    case ElementType::kF64:
    case ElementType::kI64:
      return 8;
  }
  return 0;
}

bool IsIntegral(ElementType t) { return t == ElementType::kI32 || t == ElementType::kI64; }

std::string_view ElementTypeName(ElementType t) {
  switch (t) {
    case ElementType::kF32:
      return "f32";
    case ElementType::kF64:
      return "f64";
    case ElementType::kI32:
      return "i32";
    case ElementType::kI64:
      return "i64";
  }
  return "?";
}

std::string_view RowKindName(RowKind k) {
  switch (k) {
    case RowKind::kDense:
      return "dense";
    case RowKind::kSparse:
      return "sparse";
  }
  return "?";
}

std::string_view ConsistencyName(Consistency c) {
  switch (c) {
    case Consistency::kBsp:
      return "bsp";
    case Consistency::kSsp:
      return "ssp";
    case Consistency::kEssp:
      return "essp";
    case Consistency::kAsync:
      return "async";
    case Consistency::kVap:
      return "vap";
  }
  return "?";
}

std::string_view InitKindName(InitKind k) {
  switch (k) {
    case InitKind::kZeros:
      return "zeros";
    case InitKind::kUniform:
      return "uniform";
    case InitKind::kNormal:
      return "normal";
  }
  return "?";
}

namespace {

template <typename E, size_t N>
Status ParseEnum(std::string_view s, const E (&values)[N], std::string_view (*name)(E),
                 std::string_view what, E* out) {
  std::string allowed;
  for (E v : values) {
    if (name(v) == s) {
      *out = v;
      return Status::OK();
    }
    if (!allowed.empty()) allowed += "|";
    allowed += std::string(name(v));
  }
  return Status::InvalidArgument("unknown " + std::string(what) + " '" + std::string(s) +
                                 "' (expected " + allowed + ")");
}

}  // namespace

Status ParseElementType(std::string_view s, ElementType* out) {
  static constexpr ElementType kAll[] = {ElementType::kF32, ElementType::kF64, ElementType::kI32,
                                         ElementType::kI64};
  return ParseEnum(s, kAll, ElementTypeName, "element type", out);
}

Status ParseRowKind(std::string_view s, RowKind* out) {
  static constexpr RowKind kAll[] = {RowKind::kDense, RowKind::kSparse};
  return ParseEnum(s, kAll, RowKindName, "row kind", out);
}

Status ParseConsistency(std::string_view s, Consistency* out) {
  static constexpr Consistency kAll[] = {Consistency::kBsp, Consistency::kSsp, Consistency::kEssp,
                                         Consistency::kAsync, Consistency::kVap};
  return ParseEnum(s, kAll, ConsistencyName, "consistency", out);
}

Status ParseInitKind(std::string_view s, InitKind* out) {
  static constexpr InitKind kAll[] = {InitKind::kZeros, InitKind::kUniform, InitKind::kNormal};
  return ParseEnum(s, kAll, InitKindName, "initializer", out);
}

Status ValidateSchema(const TableSchema& s) {
  if (s.name.empty()) return Status::InvalidArgument("table name is empty");
  if (s.name.size() > kMaxTableNameLen) {
    return Status::InvalidArgument("table name longer than " + std::to_string(kMaxTableNameLen) +
                                   " bytes");
  }
  for (char ch : s.name) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '-' || ch == '.';
    if (!ok) {
      return Status::InvalidArgument("table name '" + s.name +
                                     "' may contain only letters, digits, '_', '-' and '.'");
    }
  }
  switch (s.kind) {
    case RowKind::kDense:
      if (s.width == 0 || s.width > kMaxDenseWidth) {
        return Status::InvalidArgument("dense table '" + s.name + "': width must be in [1, " +
                                       std::to_string(kMaxDenseWidth) + "], got " +
                                       std::to_string(s.width));
      }
      break;
    case RowKind::kSparse:
      break;
    default:
      return Status::InvalidArgument("table '" + s.name + "': unknown row kind");
  }
  if (ElementSize(s.type) == 0) {
    return Status::InvalidArgument("table '" + s.name + "': unknown element type");
  }
  switch (s.consistency) {
    case Consistency::kBsp:
    case Consistency::kSsp:
    case Consistency::kEssp:
    case Consistency::kAsync:
    case Consistency::kVap:
      break;
    default:
      return Status::InvalidArgument("table '" + s.name + "': unknown consistency");
  }
  if (s.consistency == Consistency::kVap) {
    if (!(std::isfinite(s.value_bound) && s.value_bound > 0)) {
      return Status::InvalidArgument("table '" + s.name +
                                     "': vap needs a finite value bound > 0 (got " +
                                     std::to_string(s.value_bound) + ")");
    }
  } else if (s.value_bound != 0) {
    return Status::InvalidArgument("table '" + s.name + "': a value bound is only for vap (" +
                                   std::string(ConsistencyName(s.consistency)) + " has none)");
  }
  if (s.consistency == Consistency::kBsp && s.staleness != 0) {
    return Status::InvalidArgument("table '" + s.name + "': bsp requires staleness 0");
  }
  if (s.staleness > 1000000) {
    return Status::InvalidArgument("table '" + s.name + "': staleness too large");
  }
  switch (s.init.kind) {
    case InitKind::kZeros:
      break;
    case InitKind::kUniform:
    case InitKind::kNormal:
      if (IsIntegral(s.type)) {
        return Status::InvalidArgument("table '" + s.name +
                                       "': integer tables support only the zeros initializer");
      }
      if (s.kind == RowKind::kSparse) {
        return Status::InvalidArgument("table '" + s.name +
                                       "': sparse tables support only the zeros initializer");
      }
      if (!std::isfinite(s.init.a) || !std::isfinite(s.init.b)) {
        return Status::InvalidArgument("table '" + s.name + "': initializer bounds not finite");
      }
      if (s.init.kind == InitKind::kUniform && !(s.init.a < s.init.b)) {
        return Status::InvalidArgument("table '" + s.name + "': uniform initializer needs a < b");
      }
      if (s.init.kind == InitKind::kNormal && !(s.init.b >= 0)) {
        return Status::InvalidArgument("table '" + s.name +
                                       "': normal initializer needs stddev >= 0");
      }
      break;
    default:
      return Status::InvalidArgument("table '" + s.name + "': unknown initializer");
  }
  return Status::OK();
}

bool SameSchema(const TableSchema& a, const TableSchema& b) {
  if (a.id != 0 && b.id != 0 && a.id != b.id) return false;
  return a.name == b.name && a.kind == b.kind && a.type == b.type && a.width == b.width &&
         a.consistency == b.consistency && a.staleness == b.staleness &&
         a.value_bound == b.value_bound && a.init.kind == b.init.kind && a.init.a == b.init.a &&
         a.init.b == b.init.b && a.init.seed == b.init.seed;
}

std::string DescribeSchema(const TableSchema& s) {
  char buf[256];
  std::string init(InitKindName(s.init.kind));
  if (s.init.kind != InitKind::kZeros) {
    std::snprintf(buf, sizeof(buf), "%s(%g,%g) seed %llu", init.c_str(), s.init.a, s.init.b,
                  static_cast<unsigned long long>(s.init.seed));
    init = buf;
  }
  std::string model(ConsistencyName(s.consistency));
  if (s.consistency == Consistency::kVap) {
    char v[48];
    std::snprintf(v, sizeof(v), " v=%g", s.value_bound);
    model += v;
  }
  std::snprintf(buf, sizeof(buf), "%s (id %u): %s %s x %u, %s s=%u, %s", s.name.c_str(), s.id,
                std::string(RowKindName(s.kind)).c_str(),
                std::string(ElementTypeName(s.type)).c_str(), s.width, model.c_str(), s.staleness,
                init.c_str());
  return buf;
}

}  // namespace pace
