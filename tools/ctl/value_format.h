// Text and JSON renderings of schemas, row values, clocks and sizes for
// pacectl. Pure functions; thread-safe.
#ifndef PACE_TOOLS_CTL_VALUE_FORMAT_H_
#define PACE_TOOLS_CTL_VALUE_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/schema.h"

namespace pace::ctl {

class JsonWriter;

// The shortest text that parses back to `v` ("0.1", "1e+30"); "nan", "inf",
// "-inf" for non-finite values. DoubleText(float) rounds-trips as a float.
std::string DoubleText(double v);
std::string FloatText(float v);
// As DoubleText but valid JSON: non-finite values become the strings "NaN",
// "Infinity", "-Infinity".
std::string DoubleJson(double v);

// Element `i` of packed little-endian elements of type `t` at `data`:
// integers exactly, floats as FloatText / DoubleText (JSON: as DoubleJson).
std::string ElementText(ElementType t, const char* data, size_t i);
std::string ElementJson(ElementType t, const char* data, size_t i);

// A row value of table `s` as text: dense "v0 v1 ..."; sparse "col:value ..."
// or "(empty)". REQUIRES: ValidateRow(RowFormat::Of(s), value) is OK.
std::string RowText(const TableSchema& s, std::string_view value);
// Writes a row value as members of the open JSON object: dense
// "values":[...]; sparse "columns":[...],"values":[...]. Same REQUIRES.
void RowJsonMembers(const TableSchema& s, std::string_view value, JsonWriter* w);

// "zeros", "uniform[-0.1,0.1) seed 7", "normal(mean=0,sd=0.01) seed 3".
std::string InitializerText(const Initializer& init);
// The staleness column: the bound, or "-" for async (no bound).
std::string StalenessText(const TableSchema& s);
// The schema as a JSON object {"id":..,"name":..,...,"initializer":{...}}.
void SchemaJson(const TableSchema& s, JsonWriter* w);

// "0 B", "512 B", "12.3 KiB", "4.0 GiB".
std::string BytesText(uint64_t bytes);
// "2024-05-01T12:00:00.123Z" (UTC).
std::string UnixMsText(int64_t unix_ms);
// "client 0: 5, client 1: 7".
std::string ClocksText(const std::vector<ClockT>& clocks);

// The memory lines of `pacectl stats`: from Stats counters
// "memory_<component>_bytes" / "memory_<component>_limit_bytes", one row
// {"  <component>", "<used> / <bound>"} per component (bound "-" if none),
// prefixed by `indent`.
std::vector<std::vector<std::string>> MemoryRows(
    const std::vector<std::pair<std::string, int64_t>>& counters, const std::string& indent);

// Renders rows of cells as left-aligned columns separated by two spaces,
// one line per row (trailing spaces trimmed).
std::string AlignColumns(const std::vector<std::vector<std::string>>& rows);

}  // namespace pace::ctl

#endif  // PACE_TOOLS_CTL_VALUE_FORMAT_H_
