#include "tools/ctl/export.h"

#include <cstring>
#include <string_view>

#include "common/row.h"
#include "tools/ctl/value_format.h"

namespace pace::ctl {

namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyPreambleSize = 10;  // magic (6) + version (2) + header length (2)
constexpr size_t kNpyAlignment = 64;

Status StreamStatus(const std::ostream& out, std::string_view what) {
  if (out.good()) return Status::OK();
  return Status::IOError(std::string(what) + ": write failed");
}

}  // namespace

std::string NpyDescr(ElementType t) {
  switch (t) {
    case ElementType::kF32:
      return "<f4";
    case ElementType::kF64:
      return "<f8";
    case ElementType::kI32:
      return "<i4";
    case ElementType::kI64:
      return "<i8";
  }
  return "?";
}

std::string NpyHeader(ElementType t, uint64_t rows, uint64_t cols) {
  std::string dict = "{'descr': '" + NpyDescr(t) + "', 'fortran_order': False, 'shape': (" +
                     std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  size_t total = kNpyPreambleSize + dict.size() + 1;  // + '\n'
  size_t padded = (total + kNpyAlignment - 1) / kNpyAlignment * kNpyAlignment;
  dict.append(padded - total, ' ');
  dict.push_back('\n');
  const uint16_t header_len = static_cast<uint16_t>(dict.size());
  std::string out(kNpyMagic, 6);
  out.push_back('\x01');  // major version
  out.push_back('\x00');  // minor version
  out.push_back(static_cast<char>(header_len & 0xFF));
  out.push_back(static_cast<char>(header_len >> 8));
  out += dict;
  return out;
}

Status ExportCsv(const ShardStore& store, const TableSchema& schema, std::ostream* out,
                 ExportStats* stats) {
  *stats = ExportStats{};
  if (schema.kind == RowKind::kDense) {
    *out << "row";
    for (uint32_t c = 0; c < schema.width; ++c) *out << ",c" << c;
    *out << '\n';
  } else {
    *out << "row,col,value\n";
  }
  std::string line;
  Status write_status;
  Status s = store.Scan(schema.id, 0, [&](uint64_t row, std::string_view value) {
    ++stats->written_rows;
    const std::string row_text = std::to_string(row);
    if (schema.kind == RowKind::kDense) {
      line = row_text;
      for (uint32_t c = 0; c < schema.width; ++c) {
        line.push_back(',');
        line += ElementText(schema.type, value.data(), c);
      }
      line.push_back('\n');
      *out << line;
      ++stats->lines;
    } else {
      const uint32_t n = SparseCount(value);
      const char* cols = value.data() + 4;
      const char* vals = cols + 4 * static_cast<size_t>(n);
      for (uint32_t i = 0; i < n; ++i) {
        uint32_t col;
        std::memcpy(&col, cols + 4 * static_cast<size_t>(i), 4);
        *out << row_text << ',' << col << ',' << ElementText(schema.type, vals, i) << '\n';
        ++stats->lines;
      }
    }
    write_status = StreamStatus(*out, "csv export");
    return write_status.ok();
  });
  RETURN_IF_ERROR(s);
  RETURN_IF_ERROR(write_status);
  out->flush();
  return StreamStatus(*out, "csv export");
}

Status PlanNpy(const ShardStore& store, const TableSchema& schema, uint64_t max_rows,
               NpyPlan* plan) {
  if (schema.kind != RowKind::kDense) {
    return Status::InvalidArgument("table '" + schema.name +
                                   "' is sparse; npy export needs a dense table (use "
                                   "--format=csv for row,col,value triples)");
  }
  *plan = NpyPlan{};
  uint64_t max_row = 0;
  bool too_many = false;
  RETURN_IF_ERROR(store.Scan(schema.id, 0, [&](uint64_t row, std::string_view) {
    ++plan->written_rows;
    max_row = row;
    if (row >= max_rows) {
      too_many = true;
      return false;
    }
    return true;
  }));
  if (too_many) {
    return Status::InvalidArgument(
        "table '" + schema.name + "' has row " + std::to_string(max_row) +
        ", so its npy array would have more than --max_rows=" + std::to_string(max_rows) +
        " rows; raise --max_rows or use --format=csv (written rows only)");
  }
  plan->rows = plan->written_rows == 0 ? 0 : max_row + 1;
  return Status::OK();
}

Status WriteNpy(const ShardStore& store, const TableSchema& schema, const NpyPlan& plan,
                std::ostream* out, ExportStats* stats) {
  *stats = ExportStats{};
  stats->array_rows = plan.rows;
  *out << NpyHeader(schema.type, plan.rows, schema.width);
  const bool zero_init = schema.init.kind == InitKind::kZeros;
  const std::string zeros = zero_init ? ZeroRow(RowFormat::Of(schema)) : std::string();
  std::string init;
  uint64_t next = 0;  // the next row of the array to write
  // Fills rows [next, end) with their initializer values.
  auto fill_to = [&](uint64_t end) {
    for (; next < end && out->good(); ++next) {
      if (zero_init) {
        out->write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
      } else {
        InitRow(schema, next, &init);
        out->write(init.data(), static_cast<std::streamsize>(init.size()));
      }
    }
  };
  Status inner;
  Status s = store.Scan(schema.id, 0, [&](uint64_t row, std::string_view value) {
    if (row >= plan.rows) {
      inner = Status::Aborted("table '" + schema.name + "' changed during the export");
      return false;
    }
    fill_to(row);
    out->write(value.data(), static_cast<std::streamsize>(value.size()));
    ++next;
    ++stats->written_rows;
    inner = StreamStatus(*out, "npy export");
    return inner.ok();
  });
  RETURN_IF_ERROR(s);
  RETURN_IF_ERROR(inner);
  fill_to(plan.rows);
  out->flush();
  return StreamStatus(*out, "npy export");
}

}  // namespace pace::ctl
