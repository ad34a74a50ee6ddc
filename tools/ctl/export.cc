#include "tools/ctl/export.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "common/hash.h"
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

namespace {

std::string NpyHeaderFor(const std::string& descr, const std::string& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
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

}  // namespace

std::string NpyHeader(ElementType t, uint64_t rows, uint64_t cols) {
  return NpyHeaderFor(NpyDescr(t), "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")");
}

std::string NpyHeaderU64(uint64_t n) { return NpyHeaderFor("<u8", "(" + std::to_string(n) + ",)"); }

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

void WriteCsvHeader(const TableSchema& schema, std::ostream* out) {
  if (schema.kind == RowKind::kDense) {
    *out << "row";
    for (uint32_t c = 0; c < schema.width; ++c) *out << ",c" << c;
    *out << '\n';
  } else {
    *out << "row,col,value\n";
  }
}

// Appends the CSV lines of one row to `line`; returns the number of lines.
uint64_t AppendCsvLines(const TableSchema& schema, uint64_t row, std::string_view value,
                        std::string* line) {
  const std::string row_text = std::to_string(row);
  if (schema.kind == RowKind::kDense) {
    *line += row_text;
    for (uint32_t c = 0; c < schema.width; ++c) {
      line->push_back(',');
      *line += ElementText(schema.type, value.data(), c);
    }
    line->push_back('\n');
    return 1;
  }
  const uint32_t n = SparseCount(value);
  const char* cols = value.data() + 4;
  const char* vals = cols + 4 * static_cast<size_t>(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t col;
    std::memcpy(&col, cols + 4 * static_cast<size_t>(i), 4);
    *line += row_text + ',' + std::to_string(col) + ',' + ElementText(schema.type, vals, i) + '\n';
  }
  return n;
}

namespace {

uint32_t OwnerOf(const TableSchema& schema, uint64_t row, size_t num_shards) {
  return num_shards <= 1 ? 0 : ShardOf(schema.id, row, static_cast<uint32_t>(num_shards));
}

constexpr size_t kChunkRows = 4096;

// Reads `rows` (sorted, written) from their owners into values[i].
Status ReadFromOwners(const std::vector<const ShardStore*>& shards, const TableSchema& schema,
                      const uint64_t* rows, size_t n, std::vector<std::string>* values) {
  values->assign(n, std::string());
  std::vector<std::vector<uint64_t>> ask(shards.size());
  std::vector<std::vector<size_t>> index(shards.size());
  for (size_t i = 0; i < n; ++i) {
    const uint32_t k = OwnerOf(schema, rows[i], shards.size());
    ask[k].push_back(rows[i]);
    index[k].push_back(i);
  }
  std::vector<std::string> got;
  for (size_t k = 0; k < shards.size(); ++k) {
    if (ask[k].empty()) continue;
    RETURN_IF_ERROR(shards[k]->MultiGet(schema.id, ask[k], &got));
    for (size_t j = 0; j < got.size(); ++j) (*values)[index[k][j]] = std::move(got[j]);
  }
  return Status::OK();
}

}  // namespace

Status PlanMerged(const std::vector<const ShardStore*>& shards, const TableSchema& schema, bool npy,
                  uint64_t rows_flag, uint64_t max_rows, MergedPlan* plan) {
  if (npy && schema.kind != RowKind::kDense) {
    return Status::InvalidArgument("table '" + schema.name +
                                   "' is sparse; npy export needs a dense table (use "
                                   "--format=csv for row,col,value triples)");
  }
  *plan = MergedPlan{};
  std::vector<uint64_t> merged, mine;
  for (size_t k = 0; k < shards.size(); ++k) {
    mine.clear();
    Status limit;
    RETURN_IF_ERROR(shards[k]->Scan(schema.id, 0, [&](uint64_t row, std::string_view) {
      if (OwnerOf(schema, row, shards.size()) != k) {
        ++plan->foreign_rows;
        return true;
      }
      if (npy && rows_flag != 0 && row >= rows_flag) {
        limit = Status::InvalidArgument("table '" + schema.name + "' has written row " +
                                        std::to_string(row) +
                                        ", which does not fit --rows=" + std::to_string(rows_flag));
        return false;
      }
      if (npy && rows_flag == 0 && row >= max_rows) {
        limit = Status::InvalidArgument(
            "table '" + schema.name + "' has row " + std::to_string(row) +
            ", so its npy array would have more than --max_rows=" + std::to_string(max_rows) +
            " rows; raise --max_rows or use --format=csv (written rows only)");
        return false;
      }
      mine.push_back(row);
      return true;
    }));
    RETURN_IF_ERROR(limit);
    std::vector<uint64_t> both(merged.size() + mine.size());
    std::merge(merged.begin(), merged.end(), mine.begin(), mine.end(), both.begin());
    merged.swap(both);
  }
  plan->written = std::move(merged);
  if (npy)
    plan->rows = rows_flag != 0 ? rows_flag : plan->written.empty() ? 0 : plan->written.back() + 1;
  return Status::OK();
}

Status WriteMergedNpy(const std::vector<const ShardStore*>& shards, const TableSchema& schema,
                      const MergedPlan& plan, std::ostream* out, ExportStats* stats) {
  *stats = ExportStats{};
  stats->array_rows = plan.rows;
  stats->written_rows = plan.written.size();
  *out << NpyHeader(schema.type, plan.rows, schema.width);
  const RowFormat format = RowFormat::Of(schema);
  const size_t row_bytes = format.dense_bytes();
  const bool zero_init = schema.init.kind == InitKind::kZeros;
  const std::string zeros = ZeroRow(format);
  std::string buffer, init;
  std::vector<std::string> values;
  size_t w = 0;  // next index into plan.written
  for (uint64_t a = 0; a < plan.rows; a += kChunkRows) {
    const uint64_t b = std::min<uint64_t>(plan.rows, a + kChunkRows);
    buffer.resize((b - a) * row_bytes);
    for (uint64_t r = a; r < b; ++r) {
      if (zero_init) {
        std::memcpy(&buffer[(r - a) * row_bytes], zeros.data(), row_bytes);
      } else {
        InitRow(schema, r, &init);
        std::memcpy(&buffer[(r - a) * row_bytes], init.data(), row_bytes);
      }
    }
    size_t end = w;
    while (end < plan.written.size() && plan.written[end] < b) ++end;
    RETURN_IF_ERROR(ReadFromOwners(shards, schema, plan.written.data() + w, end - w, &values));
    for (size_t i = 0; i < values.size(); ++i) {
      const uint64_t r = plan.written[w + i];
      if (values[i].size() != row_bytes) {
        return Status::Corruption("row " + std::to_string(r) + " of table '" + schema.name +
                                  "' has " + std::to_string(values[i].size()) +
                                  " bytes, expected " + std::to_string(row_bytes));
      }
      std::memcpy(&buffer[(r - a) * row_bytes], values[i].data(), row_bytes);
    }
    w = end;
    out->write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    RETURN_IF_ERROR(StreamStatus(*out, "npy export"));
  }
  out->flush();
  return StreamStatus(*out, "npy export");
}

Status WriteMergedCsv(const std::vector<const ShardStore*>& shards, const TableSchema& schema,
                      const MergedPlan& plan, std::ostream* out, ExportStats* stats) {
  *stats = ExportStats{};
  stats->written_rows = plan.written.size();
  WriteCsvHeader(schema, out);
  std::vector<std::string> values;
  std::string text;
  for (size_t a = 0; a < plan.written.size(); a += kChunkRows) {
    const size_t n = std::min(kChunkRows, plan.written.size() - a);
    RETURN_IF_ERROR(ReadFromOwners(shards, schema, plan.written.data() + a, n, &values));
    text.clear();
    for (size_t i = 0; i < n; ++i) {
      stats->lines += AppendCsvLines(schema, plan.written[a + i], values[i], &text);
    }
    *out << text;
    RETURN_IF_ERROR(StreamStatus(*out, "csv export"));
  }
  out->flush();
  return StreamStatus(*out, "csv export");
}

Status WriteRowIdsNpy(const std::vector<uint64_t>& rows, std::ostream* out) {
  *out << NpyHeaderU64(rows.size());
  std::string bytes(rows.size() * 8, '\0');
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int b = 0; b < 8; ++b) bytes[i * 8 + b] = static_cast<char>((rows[i] >> (8 * b)) & 0xFF);
  }
  out->write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out->flush();
  return StreamStatus(*out, "row ids export");
}

}  // namespace pace::ctl
