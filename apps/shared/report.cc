#include "apps/shared/report.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "common/percentile.h"

namespace pace {
namespace apps {

void AddHistogramDelta(const std::vector<uint64_t>& hist_now, double mean_now,
                       const std::vector<uint64_t>& hist_before, double mean_before, double* cols) {
  if (hist_now.empty()) return;
  const size_t overflow = hist_now.size() - 1;  // the "> s" bucket
  const size_t last = MeasureCols::kHistBuckets - 1;
  uint64_t n_now = 0, n_before = 0;
  for (size_t i = 0; i < hist_now.size(); ++i) {
    uint64_t before = i < hist_before.size() ? hist_before[i] : 0;
    uint64_t d = hist_now[i] >= before ? hist_now[i] - before : 0;
    n_now += hist_now[i];
    n_before += before;
    // Bucket i < overflow is staleness i; the overflow bucket means "> s" and
    // is reported as s + 1 = overflow.
    size_t col = std::min(i, last);
    if (i == overflow) col = std::min(overflow, last);
    cols[MeasureCols::kHist + col] += static_cast<double>(d);
  }
  if (n_now < n_before) return;
  cols[MeasureCols::kReads] += static_cast<double>(n_now - n_before);
  // Staleness values are integers, so their sums are too: rounding removes
  // the error of going through the means.
  double sum = std::round(mean_now * static_cast<double>(n_now)) -
               std::round(mean_before * static_cast<double>(n_before));
  cols[MeasureCols::kStalenessSum] += std::max(0.0, sum);
}

StalenessSummary SummarizeStaleness(const double* cols) {
  StalenessSummary s;
  double total = 0;
  for (int i = 0; i < MeasureCols::kHistBuckets; ++i) total += cols[MeasureCols::kHist + i];
  s.reads = static_cast<uint64_t>(std::llround(total));
  if (total <= 0) return s;
  s.mean = cols[MeasureCols::kReads] > 0
               ? cols[MeasureCols::kStalenessSum] / cols[MeasureCols::kReads]
               : 0.0;
  s.p99 = static_cast<int64_t>(
      HistogramPercentile(cols + MeasureCols::kHist, MeasureCols::kHistBuckets, 0.99));
  return s;
}

double BlockedPercent(const double* cols) {
  double wall = cols[MeasureCols::kWallSeconds];
  if (!(wall > 0)) return 0.0;
  return std::min(100.0, 100.0 * cols[MeasureCols::kBlockedSeconds] / wall);
}

ReportWriter::ReportWriter(std::vector<ReportColumn> columns, FILE* console)
    : columns_(std::move(columns)), console_(console) {}

ReportWriter::~ReportWriter() {
  if (csv_ != nullptr) std::fclose(csv_);
}

Status ReportWriter::OpenCsv(const std::string& path, bool append) {
  if (csv_ != nullptr) std::fclose(csv_);
  csv_ = nullptr;
  if (append) {
    std::ifstream in(path);
    std::string first;
    if (in && std::getline(in, first) && !first.empty()) {
      if (first != CsvHeader()) {
        return Status::InvalidArgument("CSV file '" + path + "' has another header ('" + first +
                                       "'): give a new --csv file");
      }
      csv_ = std::fopen(path.c_str(), "a");
      if (csv_ == nullptr) return Status::IOError("cannot open CSV file '" + path + "' to append");
      csv_path_ = path;
      return Status::OK();
    }
  }
  csv_ = std::fopen(path.c_str(), "w");
  if (csv_ == nullptr) return Status::IOError("cannot open CSV file '" + path + "' for writing");
  csv_path_ = path;
  std::fprintf(csv_, "%s\n", CsvHeader().c_str());
  std::fflush(csv_);
  return Status::OK();
}

std::string ReportWriter::CsvHeader() const {
  std::string h;
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (i) h += ",";
    h += columns_[i].name;
  }
  return h;
}

void ReportWriter::SetProgress(int64_t first_clock, int64_t end_clock) {
  first_clock_ = first_clock;
  end_clock_ = end_clock;
}

namespace {

std::string Duration(double seconds) {
  char buf[32];
  const long long s = std::llround(std::max(0.0, seconds));
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%llds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", s / 3600, (s % 3600) / 60);
  }
  return buf;
}

}  // namespace

void ReportWriter::PrintHeader() {
  if (console_ == nullptr) return;
  std::string line;
  for (size_t i = 0; i < columns_.size(); ++i) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), i == 0 ? "%6s" : " %14s", columns_[i].name.c_str());
    line += buf;
  }
  std::fprintf(console_, "%s\n", line.c_str());
  std::fflush(console_);
}

std::string ReportWriter::ConsoleValue(size_t col, const std::optional<double>& v) const {
  if (!v.has_value()) return "-";
  const int decimals = columns_[col].console_decimals;
  if (columns_[col].format == ColumnFormat::kNumber && decimals >= 0) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.*f", decimals, *v);
    return buf;
  }
  return Format(col, v);
}

std::string ReportWriter::Eta(const std::vector<std::optional<double>>& values) const {
  if (values.empty() || !values[0].has_value()) return "-";
  const int64_t clock = std::llround(*values[0]);
  const int64_t done = clock - first_clock_ + 1;
  const int64_t left = end_clock_ - 1 - clock;
  if (left <= 0) return "done";
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (columns_[i].format != ColumnFormat::kSeconds || !values[i].has_value()) continue;
    if (done <= 0) break;
    return "eta " + Duration(*values[i] / static_cast<double>(done) * static_cast<double>(left));
  }
  return "";
}

std::string ReportWriter::Format(size_t col, const std::optional<double>& v) const {
  if (!v.has_value()) return "";
  char buf[64];
  double x = *v;
  switch (columns_[col].format) {
    case ColumnFormat::kInteger:
      std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(std::llround(x)));
      break;
    case ColumnFormat::kSeconds:
      std::snprintf(buf, sizeof(buf), "%.3f", x);
      break;
    case ColumnFormat::kNumber:
      std::snprintf(buf, sizeof(buf), "%.6g", x);
      break;
  }
  return buf;
}

std::string ReportWriter::CsvLine(const std::vector<std::optional<double>>& values) const {
  std::string line;
  for (size_t i = 0; i < columns_.size() && i < values.size(); ++i) {
    if (i) line += ",";
    line += Format(i, values[i]);
  }
  return line;
}

Status ReportWriter::AddLine(const std::vector<std::optional<double>>& values) {
  if (values.size() != columns_.size()) {
    return Status::Internal("report line has " + std::to_string(values.size()) + " values for " +
                            std::to_string(columns_.size()) + " columns");
  }
  if (console_ != nullptr) {
    std::string line;
    for (size_t i = 0; i < values.size(); ++i) {
      const std::string v = ConsoleValue(i, values[i]);
      char buf[64];
      std::snprintf(buf, sizeof(buf), i == 0 ? "%6s" : " %14s", v.c_str());
      line += buf;
    }
    if (end_clock_ > 0 && !values.empty() && values[0].has_value()) {
      // Progress after the columns (not a column: the header and the CSV
      // stay the contract of docs/apps.md).
      line += "   " + std::to_string(std::llround(*values[0])) + "/" + std::to_string(end_clock_) +
              " " + Eta(values);
    }
    std::fprintf(console_, "%s\n", line.c_str());
    std::fflush(console_);
  }
  if (csv_ != nullptr) {
    std::fprintf(csv_, "%s\n", CsvLine(values).c_str());
    std::fflush(csv_);
    if (std::ferror(csv_)) return Status::IOError("writing CSV file '" + csv_path_ + "' failed");
  }
  return Status::OK();
}

Status ReportWriter::Close() {
  if (csv_ == nullptr) return Status::OK();
  bool failed = std::ferror(csv_) != 0;
  failed |= std::fclose(csv_) != 0;
  csv_ = nullptr;
  if (failed) return Status::IOError("writing CSV file '" + csv_path_ + "' failed");
  return Status::OK();
}

}  // namespace apps
}  // namespace pace
