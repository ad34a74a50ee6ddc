// Per-clock reports of the apps: the measurement columns every app adds to
// its per-clock stats row in PaceDB, their summary (staleness mean and p99,
// blocked %), and the writer that prints one line per clock on stdout and in
// a CSV file with the same columns.
//
// Thread-compatible.
#ifndef PACE_APPS_SHARED_REPORT_H_
#define PACE_APPS_SHARED_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace pace {
namespace apps {

// The first columns of every app's per-clock stats row (an f64 row per clock,
// summed over all workers of all processes with Inc).
struct MeasureCols {
  // Sum over workers of the seconds each spent in the clock.
  static constexpr int kWallSeconds = 0;
  // Seconds the processes' workers spent blocked in Get/Read and Clock.
  static constexpr int kBlockedSeconds = 1;
  // Reads of the measured tables, and the sum of their staleness.
  static constexpr int kReads = 2;
  static constexpr int kStalenessSum = 3;
  // Histogram of read staleness: column kHist + i counts reads of staleness
  // exactly i for i < kHistBuckets - 1; the last column counts larger ones.
  // A table's "> s" bucket lands in column s + 1 (or the last one).
  static constexpr int kHist = 4;
  static constexpr int kHistBuckets = 66;
  static constexpr int kCount = kHist + kHistBuckets;
};

// Adds, into cols (a row laid out as MeasureCols), the reads recorded between
// two snapshots of one table's staleness histogram. `hist_*` follow
// TableStats::staleness_hist (buckets 0..s, then "> s"); `mean_*` are the
// snapshots' exact means. A shorter `before` counts as zeros.
void AddHistogramDelta(const std::vector<uint64_t>& hist_now, double mean_now,
                       const std::vector<uint64_t>& hist_before, double mean_before, double* cols);

struct StalenessSummary {
  double mean = 0;
  // The smallest staleness x such that >= 99% of reads had staleness <= x.
  int64_t p99 = 0;
  uint64_t reads = 0;
};
StalenessSummary SummarizeStaleness(const double* cols);

// 100 * blocked / wall, 0 if wall is 0.
double BlockedPercent(const double* cols);

// How a report column is printed.
enum class ColumnFormat {
  kInteger,  // "12"
  kSeconds,  // "1.234"
  kNumber,   // 6 significant digits, "0.812345", "-1.23457e+06"
};

struct ReportColumn {
  std::string name;
  ColumnFormat format = ColumnFormat::kNumber;
  // kNumber on the console: this many decimals, fixed (so a column's values
  // line up); -1: 6 significant digits. The CSV keeps 6 significant digits.
  int console_decimals = -1;
};

// Writes a header and one line per AddLine, aligned on `console` (if not
// null) and as CSV on the file opened by OpenCsv (if any). A missing value
// (nullopt) is an empty CSV field and "-" on the console.
class ReportWriter {
 public:
  ReportWriter(std::vector<ReportColumn> columns, FILE* console);
  ~ReportWriter();
  ReportWriter(const ReportWriter&) = delete;
  ReportWriter& operator=(const ReportWriter&) = delete;

  // Creates (truncates) the CSV file and writes its header line. With
  // `append` (a resumed job), an existing non-empty file is kept and the new
  // lines go after its own; InvalidArgument if its header is another one.
  Status OpenCsv(const std::string& path, bool append = false);
  // Console only: each line ends with "clock/end_clock" and "eta 1m05s",
  // the time left from the average seconds per clock since first_clock (the
  // seconds column, cumulative), or "done" on the last clock. The header
  // and the CSV do not change.
  void SetProgress(int64_t first_clock, int64_t end_clock);
  // Prints the console header.
  void PrintHeader();
  // REQUIRES: values.size() == number of columns.
  Status AddLine(const std::vector<std::optional<double>>& values);
  // Flushes and closes the CSV file. IOError if writing it failed.
  Status Close();

  // The CSV text of one line (no newline), e.g. "3,1.250,0.81,,0.5,1,2.5".
  std::string CsvLine(const std::vector<std::optional<double>>& values) const;
  std::string CsvHeader() const;

 private:
  std::string Format(size_t col, const std::optional<double>& v) const;
  std::string ConsoleValue(size_t col, const std::optional<double>& v) const;
  std::string Eta(const std::vector<std::optional<double>>& values) const;

  const std::vector<ReportColumn> columns_;
  FILE* const console_;
  FILE* csv_ = nullptr;
  std::string csv_path_;
  int64_t first_clock_ = 0;
  int64_t end_clock_ = 0;  // 0: no progress columns
};

}  // namespace apps
}  // namespace pace

#endif  // PACE_APPS_SHARED_REPORT_H_
