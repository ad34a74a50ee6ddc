#include "tools/ctl/value_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "common/row.h"
#include "tools/ctl/json_writer.h"

namespace pace::ctl {

namespace {

template <typename F>
std::string ShortestText(F v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

template <typename T>
T Load(const char* data, size_t i) {
  T v;
  std::memcpy(&v, data + i * sizeof(T), sizeof(T));
  return v;
}

bool ElementIsFinite(ElementType t, const char* data, size_t i) {
  if (t == ElementType::kF32) return std::isfinite(Load<float>(data, i));
  if (t == ElementType::kF64) return std::isfinite(Load<double>(data, i));
  return true;
}

}  // namespace

std::string DoubleText(double v) { return ShortestText(v); }
std::string FloatText(float v) { return ShortestText(v); }

std::string DoubleJson(double v) {
  if (std::isnan(v)) return "\"NaN\"";
  if (std::isinf(v)) return v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  return ShortestText(v);
}

std::string ElementText(ElementType t, const char* data, size_t i) {
  switch (t) {
    case ElementType::kF32:
      return FloatText(Load<float>(data, i));
    case ElementType::kF64:
      return DoubleText(Load<double>(data, i));
    case ElementType::kI32:
      return std::to_string(Load<int32_t>(data, i));
    case ElementType::kI64:
      return std::to_string(Load<int64_t>(data, i));
  }
  return "?";
}

std::string ElementJson(ElementType t, const char* data, size_t i) {
  if (ElementIsFinite(t, data, i)) return ElementText(t, data, i);
  double v = t == ElementType::kF32 ? Load<float>(data, i) : Load<double>(data, i);
  return DoubleJson(v);
}

std::string RowText(const TableSchema& s, std::string_view value) {
  std::string out;
  if (s.kind == RowKind::kDense) {
    for (uint32_t i = 0; i < s.width; ++i) {
      if (i > 0) out.push_back(' ');
      out += ElementText(s.type, value.data(), i);
    }
    return out;
  }
  const uint32_t n = SparseCount(value);
  if (n == 0) return "(empty)";
  const char* cols = value.data() + 4;
  const char* vals = cols + 4 * static_cast<size_t>(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (i > 0) out.push_back(' ');
    out += std::to_string(Load<uint32_t>(cols, i));
    out.push_back(':');
    out += ElementText(s.type, vals, i);
  }
  return out;
}

void RowJsonMembers(const TableSchema& s, std::string_view value, JsonWriter* w) {
  if (s.kind == RowKind::kDense) {
    w->Key("values");
    w->BeginArray();
    for (uint32_t i = 0; i < s.width; ++i) w->Raw(ElementJson(s.type, value.data(), i));
    w->EndArray();
    return;
  }
  const uint32_t n = SparseCount(value);
  const char* cols = value.data() + 4;
  const char* vals = cols + 4 * static_cast<size_t>(n);
  w->Key("columns");
  w->BeginArray();
  for (uint32_t i = 0; i < n; ++i) w->Uint(Load<uint32_t>(cols, i));
  w->EndArray();
  w->Key("values");
  w->BeginArray();
  for (uint32_t i = 0; i < n; ++i) w->Raw(ElementJson(s.type, vals, i));
  w->EndArray();
}

std::string InitializerText(const Initializer& init) {
  switch (init.kind) {
    case InitKind::kZeros:
      return "zeros";
    case InitKind::kUniform:
      return "uniform[" + DoubleText(init.a) + "," + DoubleText(init.b) + ") seed " +
             std::to_string(init.seed);
    case InitKind::kNormal:
      return "normal(mean=" + DoubleText(init.a) + ",sd=" + DoubleText(init.b) + ") seed " +
             std::to_string(init.seed);
  }
  return "unknown";
}

std::string StalenessText(const TableSchema& s) {
  if (s.consistency == Consistency::kAsync) return "-";
  return std::to_string(s.staleness);
}

void SchemaJson(const TableSchema& s, JsonWriter* w) {
  w->BeginObject();
  w->MemberUint("id", s.id);
  w->Member("name", s.name);
  w->Member("kind", RowKindName(s.kind));
  w->Member("type", ElementTypeName(s.type));
  w->MemberUint("width", s.width);
  w->Member("consistency", ConsistencyName(s.consistency));
  w->MemberUint("staleness", s.staleness);
  w->Key("initializer");
  w->BeginObject();
  w->Member("kind", InitKindName(s.init.kind));
  if (s.init.kind != InitKind::kZeros) {
    w->Key(s.init.kind == InitKind::kNormal ? "mean" : "low");
    w->Double(s.init.a);
    w->Key(s.init.kind == InitKind::kNormal ? "sd" : "high");
    w->Double(s.init.b);
    w->MemberUint("seed", s.init.seed);
  }
  w->EndObject();
  w->EndObject();
}

std::string BytesText(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  while (v >= 1024.0 && unit + 1 < sizeof(kUnits) / sizeof(kUnits[0])) {
    v /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[unit]);
  return buf;
}

std::vector<std::vector<std::string>> MemoryRows(
    const std::vector<std::pair<std::string, int64_t>>& counters, const std::string& indent) {
  const std::string kPrefix = "memory_", kLimit = "_limit_bytes", kBytes = "_bytes";
  auto ends_with = [](const std::string& s, const std::string& e) {
    return s.size() > e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
  };
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> mem;  // name -> used, bound
  auto slot = [&mem](const std::string& c) -> std::pair<int64_t, int64_t>& {
    for (auto& [name, v] : mem) {
      if (name == c) return v;
    }
    mem.push_back({c, {0, -1}});
    return mem.back().second;
  };
  for (const auto& [name, value] : counters) {
    if (name.rfind(kPrefix, 0) != 0) continue;
    const std::string rest = name.substr(kPrefix.size());
    if (ends_with(rest, kLimit)) {
      slot(rest.substr(0, rest.size() - kLimit.size())).second = value;
    } else if (ends_with(rest, kBytes)) {
      slot(rest.substr(0, rest.size() - kBytes.size())).first = value;
    }
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, v] : mem) {
    const std::string used = BytesText(static_cast<uint64_t>(std::max<int64_t>(0, v.first)));
    const std::string bound =
        v.second > 0 ? BytesText(static_cast<uint64_t>(v.second)) : std::string("-");
    rows.push_back({indent + name, used + " / " + bound});
  }
  return rows;
}

std::string UnixMsText(int64_t unix_ms) {
  std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  int ms = static_cast<int>(unix_ms % 1000);
  if (ms < 0) {
    ms += 1000;
    --secs;
  }
  std::tm tm{};
  if (gmtime_r(&secs, &tm) == nullptr) return std::to_string(unix_ms) + " ms";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

std::string ClocksText(const std::vector<ClockT>& clocks) {
  std::string out;
  for (size_t i = 0; i < clocks.size(); ++i) {
    if (i > 0) out += ", ";
    out += "client " + std::to_string(i) + ": " + std::to_string(clocks[i]);
  }
  return out.empty() ? "(none)" : out;
}

std::string AlignColumns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& r : rows) {
    if (widths.size() < r.size()) widths.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) widths[i] = std::max(widths[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      if (i > 0) line += "  ";
      line += r[i];
      if (i + 1 < r.size()) line.append(widths[i] - r[i].size(), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out.push_back('\n');
  }
  return out;
}

}  // namespace pace::ctl
