// The public API of client/pace.h: argument checking and type dispatch on top
// of Client::Impl. Opening channels is in open.cc.
#include <algorithm>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "client/client_impl.h"
#include "client/pace.h"

namespace pace {

using client::CacheEntry;
using client::TableState;

namespace {

template <typename T>
constexpr ElementType TypeOf() {
  if constexpr (std::is_same_v<T, float>) return ElementType::kF32;
  if constexpr (std::is_same_v<T, double>) return ElementType::kF64;
  if constexpr (std::is_same_v<T, int32_t>) return ElementType::kI32;
  return ElementType::kI64;
}

[[gnu::noinline, gnu::cold]] Status BadHandle(const Client::Impl* c, const TableState* t) {
  if (t == nullptr) return Status::InvalidArgument("invalid Table handle (not created or opened)");
  return Status::InvalidArgument("Table handle belongs to another Client");
}

[[gnu::noinline, gnu::cold]] Status BadType(const TableState* t, ElementType want, const char* op) {
  return Status::InvalidArgument(std::string(op) + " on table '" + t->schema.name + "' with " +
                                 std::string(ElementTypeName(want)) + " values; the table holds " +
                                 std::string(ElementTypeName(t->format.type)));
}

inline Status CheckHandle(const Client::Impl* c, void* impl, TableState** out) {
  auto* t = static_cast<TableState*>(impl);
  if (__builtin_expect(t == nullptr || t->owner != c, 0)) return BadHandle(c, t);
  *out = t;
  return Status::OK();
}

template <typename T>
inline Status CheckType(const TableState* t, const char* op) {
  if (__builtin_expect(t->format.type != TypeOf<T>(), 0)) return BadType(t, TypeOf<T>(), op);
  return Status::OK();
}

template <typename T>
Status GetDense(Worker::Impl* w, TableState* t, uint64_t row, T* out) {
  RETURN_IF_ERROR(CheckType<T>(t, "Get"));
  if (t->format.kind != RowKind::kDense) {
    return Status::InvalidArgument("table '" + t->schema.name +
                                   "' is sparse: Get into a std::map, or use Read");
  }
  return w->client_->ReadRow(
      w->clock_, w->stats_.get(), t, row,
      [out, t](const CacheEntry& e, Version) { client::ReadDense(e, t->format.width, out); });
}

template <typename T>
Status GetDenseRows(Worker::Impl* w, TableState* t, const std::vector<uint64_t>& rows, T* out) {
  RETURN_IF_ERROR(CheckType<T>(t, "GetRows"));
  if (t->format.kind != RowKind::kDense) {
    return Status::InvalidArgument("table '" + t->schema.name +
                                   "' is sparse: GetRows reads dense tables");
  }
  return w->client_->ReadDenseRows(w->clock_, w->stats_.get(), t, rows.data(), rows.size(), out);
}

template <typename T>
Status GetMap(Worker::Impl* w, TableState* t, uint64_t row, std::map<uint32_t, T>* out) {
  RETURN_IF_ERROR(CheckType<T>(t, "Get"));
  out->clear();
  std::string* scratch = &w->scratch_;
  return w->client_->ReadRow(w->clock_, w->stats_.get(), t, row,
                             [t, out, scratch](const CacheEntry& e, Version) {
                               std::string_view bytes = client::ReaderView(e, t->format, scratch);
                               if (t->format.kind == RowKind::kDense) {
                                 for (uint32_t i = 0; i < t->format.width; ++i) {
                                   T x;
                                   std::memcpy(&x, bytes.data() + sizeof(T) * i, sizeof(T));
                                   out->emplace_hint(out->end(), i, x);
                                 }
                               } else {
                                 for (const auto& [col, x] : DecodeSparse<T>(bytes))
                                   out->emplace_hint(out->end(), col, x);
                               }
                             });
}

// Dense Incs need a dense table of element type T.
template <typename T>
Status CheckDenseInc(const TableState* t) {
  RETURN_IF_ERROR(CheckType<T>(t, "Inc"));
  if (t->format.kind != RowKind::kDense) {
    return Status::InvalidArgument("table '" + t->schema.name +
                                   "' is sparse: Inc with (column, delta) pairs");
  }
  return Status::OK();
}

template <typename T>
Status IncDense(Worker::Impl* w, TableState* t, uint64_t row, const T* delta) {
  RETURN_IF_ERROR(CheckDenseInc<T>(t));
  RETURN_IF_ERROR(w->client_->IncDense(w->clock_, w->stats_.get(), t, row, delta));
  return w->AfterInc();
}

template <typename T>
Status LeaseDenseRows(Worker::Impl* w, TableState* t, const std::vector<uint64_t>& rows,
                      const T** values, T** deltas) {
  RETURN_IF_ERROR(CheckType<T>(t, "LeaseRows"));
  if (t->format.kind != RowKind::kDense) {
    return Status::InvalidArgument("table '" + t->schema.name + "' is sparse: LeaseRows leases " +
                                   "rows of dense tables");
  }
  if (t->schema.consistency == Consistency::kVap) {
    // Every delta of a vap table counts against its bound as it is added.
    return Status::InvalidArgument("table '" + t->schema.name +
                                   "' has a value bound (vap): its rows cannot be leased");
  }
  RETURN_IF_ERROR(
      w->client_->LeaseDenseRows(w->clock_, w->stats_.get(), t, rows, values, deltas, &w->leased_));
  return w->AfterInc(rows.size());
}

template <typename T>
Status IncDenseRows(Worker::Impl* w, TableState* t, const std::vector<uint64_t>& rows,
                    const T* deltas) {
  RETURN_IF_ERROR(CheckDenseInc<T>(t));
  RETURN_IF_ERROR(w->client_->IncDenseRows(w->clock_, w->stats_.get(), t, rows, deltas));
  return w->AfterInc(rows.size());
}

template <typename T>
Status IncDiffDenseRows(Worker::Impl* w, TableState* t, const std::vector<uint64_t>& rows,
                        const T* current, const T* base) {
  RETURN_IF_ERROR(CheckDenseInc<T>(t));
  RETURN_IF_ERROR(
      w->client_->IncDenseRows<T>(w->clock_, w->stats_.get(), t, rows, current, nullptr, base));
  return w->AfterInc(rows.size());
}

template <typename T>
Status IncGetDenseRows(Worker::Impl* w, TableState* t, const std::vector<uint64_t>& rows,
                       const T* deltas, T* out) {
  RETURN_IF_ERROR(CheckDenseInc<T>(t));
  RETURN_IF_ERROR(w->client_->IncDenseRows(w->clock_, w->stats_.get(), t, rows, deltas, out));
  return w->AfterInc(rows.size());
}

template <typename T>
Status IncSparse(Worker::Impl* w, TableState* t, uint64_t row,
                 const std::vector<std::pair<uint32_t, T>>& delta) {
  RETURN_IF_ERROR(CheckType<T>(t, "Inc"));
  const uint32_t width = t->format.width;
  for (const auto& [col, x] : delta) {
    if ((t->format.kind == RowKind::kDense || width != 0) && col >= width) {
      return Status::InvalidArgument("column " + std::to_string(col) + " is outside table '" +
                                     t->schema.name + "' (width " + std::to_string(width) + ")");
    }
  }
  if (t->format.kind == RowKind::kDense) {
    std::vector<T> dense(width, T{});
    for (const auto& [col, x] : delta) dense[col] += x;
    return IncDense(w, t, row, dense.data());
  }
  std::vector<std::pair<uint32_t, T>> sorted = delta;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<uint32_t, T>> merged;
  for (const auto& p : sorted) {
    if (!merged.empty() && merged.back().first == p.first) {
      merged.back().second += p.second;
    } else {
      merged.push_back(p);
    }
  }
  std::string enc = EncodeSparse(merged);
  RETURN_IF_ERROR(w->client_->IncRow(w->clock_, w->stats_.get(), t, row, enc));
  return w->AfterInc();
}

template <typename T>
std::string OneCellSparse(uint32_t col, double value) {
  std::vector<std::pair<uint32_t, T>> one{{col, static_cast<T>(value)}};
  return EncodeSparse(one);
}

}  // namespace

// --- Client ------------------------------------------------------------------

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Status Client::CreateTable(const TableSchema& schema, Table* table) {
  TableState* t = nullptr;
  RETURN_IF_ERROR(impl_->CreateTable(schema, &t));
  table->schema_ = t->schema;
  table->impl_ = t;
  return Status::OK();
}

Status Client::OpenTable(std::string_view name, Table* table) {
  TableState* t = nullptr;
  RETURN_IF_ERROR(impl_->OpenTable(name, &t));
  table->schema_ = t->schema;
  table->impl_ = t;
  return Status::OK();
}

Status Client::ListTables(std::vector<TableSchema>* tables) { return impl_->ListTables(tables); }

Status Client::RegisterWorker(std::unique_ptr<Worker>* worker) {
  std::shared_ptr<client::WorkerStats> stats;
  ClockT c = impl_->RegisterWorker(&stats);
  worker->reset(new Worker(std::make_unique<Worker::Impl>(impl_.get(), c, std::move(stats))));
  return Status::OK();
}

ClockT Client::start_clock() const { return impl_->start_clock(); }
ClientId Client::client_id() const { return impl_->client_id(); }
uint32_t Client::num_clients() const { return impl_->num_clients(); }
uint32_t Client::num_shards() const { return impl_->num_shards(); }
bool Client::embedded() const { return impl_->embedded(); }
Status Client::Flush() { return impl_->Flush(); }
ClientStats Client::Stats() const { return impl_->Stats(); }
void Client::ResetStats() { impl_->ResetStats(); }
Status Client::Laggards(std::vector<ClientLag>* laggards) { return impl_->Laggards(laggards); }
Status Client::JobClock(Version* clock) { return impl_->JobClock(clock); }
Version Client::PushedVersion() const { return impl_->PushedVersion(); }

// --- Worker ------------------------------------------------------------------

Worker::Worker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Worker::~Worker() = default;

ClockT Worker::clock() const { return impl_->clock_; }

#define PACE_TABLE_OR_RETURN(t, var) \
  TableState* var = nullptr;         \
  RETURN_IF_ERROR(CheckHandle(impl_->client_, (t).impl_, &var))

Status Worker::Get(const Table& t, uint64_t row, float* out) {
  PACE_TABLE_OR_RETURN(t, ts);
  return GetDense(impl_.get(), ts, row, out);
}
Status Worker::Get(const Table& t, uint64_t row, double* out) {
  PACE_TABLE_OR_RETURN(t, ts);
  return GetDense(impl_.get(), ts, row, out);
}
Status Worker::Get(const Table& t, uint64_t row, int32_t* out) {
  PACE_TABLE_OR_RETURN(t, ts);
  return GetDense(impl_.get(), ts, row, out);
}
Status Worker::Get(const Table& t, uint64_t row, int64_t* out) {
  PACE_TABLE_OR_RETURN(t, ts);
  return GetDense(impl_.get(), ts, row, out);
}
Status Worker::GetRows(const Table& t, const std::vector<uint64_t>& rows, float* out) {
  PACE_TABLE_OR_RETURN(t, ts);
  return GetDenseRows(impl_.get(), ts, rows, out);
}
Status Worker::GetRows(const Table& t, const std::vector<uint64_t>& rows, double* out) {
  PACE_TABLE_OR_RETURN(t, ts);
  return GetDenseRows(impl_.get(), ts, rows, out);
}
Status Worker::GetRows(const Table& t, const std::vector<uint64_t>& rows, int32_t* out) {
  PACE_TABLE_OR_RETURN(t, ts);
  return GetDenseRows(impl_.get(), ts, rows, out);
}
Status Worker::GetRows(const Table& t, const std::vector<uint64_t>& rows, int64_t* out) {
  PACE_TABLE_OR_RETURN(t, ts);
  return GetDenseRows(impl_.get(), ts, rows, out);
}
Status Worker::LeaseRows(const Table& t, const std::vector<uint64_t>& rows, const float** values,
                         float** deltas) {
  PACE_TABLE_OR_RETURN(t, ts);
  return LeaseDenseRows(impl_.get(), ts, rows, values, deltas);
}
Status Worker::LeaseRows(const Table& t, const std::vector<uint64_t>& rows, const double** values,
                         double** deltas) {
  PACE_TABLE_OR_RETURN(t, ts);
  return LeaseDenseRows(impl_.get(), ts, rows, values, deltas);
}
Status Worker::LeaseRows(const Table& t, const std::vector<uint64_t>& rows, const int32_t** values,
                         int32_t** deltas) {
  PACE_TABLE_OR_RETURN(t, ts);
  return LeaseDenseRows(impl_.get(), ts, rows, values, deltas);
}
Status Worker::LeaseRows(const Table& t, const std::vector<uint64_t>& rows, const int64_t** values,
                         int64_t** deltas) {
  PACE_TABLE_OR_RETURN(t, ts);
  return LeaseDenseRows(impl_.get(), ts, rows, values, deltas);
}
void Worker::ReleaseRows() { impl_->ReleaseLeases(); }
void Worker::ReleaseRows(size_t count) { impl_->ReleaseLeases(count); }
size_t Worker::leased_rows() const { return impl_->leased_.size(); }

Status Worker::Get(const Table& t, uint64_t row, std::map<uint32_t, float>* out) {
  PACE_TABLE_OR_RETURN(t, ts);
  return GetMap(impl_.get(), ts, row, out);
}
Status Worker::Get(const Table& t, uint64_t row, std::map<uint32_t, double>* out) {
  PACE_TABLE_OR_RETURN(t, ts);
  return GetMap(impl_.get(), ts, row, out);
}
Status Worker::Get(const Table& t, uint64_t row, std::map<uint32_t, int32_t>* out) {
  PACE_TABLE_OR_RETURN(t, ts);
  return GetMap(impl_.get(), ts, row, out);
}
Status Worker::Get(const Table& t, uint64_t row, std::map<uint32_t, int64_t>* out) {
  PACE_TABLE_OR_RETURN(t, ts);
  return GetMap(impl_.get(), ts, row, out);
}

Status Worker::Read(const Table& t, uint64_t row, const std::function<void(const RowView&)>& fn) {
  PACE_TABLE_OR_RETURN(t, ts);
  std::string* scratch = &impl_->scratch_;
  return impl_->client_->ReadRow(impl_->clock_, impl_->stats_.get(), ts, row,
                                 [ts, &fn, scratch](const CacheEntry& e, Version v) {
                                   RowView view;
                                   view.kind = ts->format.kind;
                                   view.type = ts->format.type;
                                   view.width = ts->format.width;
                                   view.bytes = client::ReaderView(e, ts->format, scratch);
                                   view.version = v;
                                   fn(view);
                                 });
}

Status Worker::Inc(const Table& t, const std::vector<uint64_t>& rows, const float* deltas) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncDenseRows(impl_.get(), ts, rows, deltas);
}
Status Worker::Inc(const Table& t, const std::vector<uint64_t>& rows, const double* deltas) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncDenseRows(impl_.get(), ts, rows, deltas);
}
Status Worker::Inc(const Table& t, const std::vector<uint64_t>& rows, const int32_t* deltas) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncDenseRows(impl_.get(), ts, rows, deltas);
}
Status Worker::Inc(const Table& t, const std::vector<uint64_t>& rows, const int64_t* deltas) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncDenseRows(impl_.get(), ts, rows, deltas);
}
Status Worker::IncDiff(const Table& t, const std::vector<uint64_t>& rows, const float* current,
                       const float* base) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncDiffDenseRows(impl_.get(), ts, rows, current, base);
}
Status Worker::IncDiff(const Table& t, const std::vector<uint64_t>& rows, const double* current,
                       const double* base) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncDiffDenseRows(impl_.get(), ts, rows, current, base);
}
Status Worker::IncDiff(const Table& t, const std::vector<uint64_t>& rows, const int32_t* current,
                       const int32_t* base) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncDiffDenseRows(impl_.get(), ts, rows, current, base);
}
Status Worker::IncDiff(const Table& t, const std::vector<uint64_t>& rows, const int64_t* current,
                       const int64_t* base) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncDiffDenseRows(impl_.get(), ts, rows, current, base);
}

Status Worker::IncGetRows(const Table& t, const std::vector<uint64_t>& rows, const float* deltas,
                          float* out) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncGetDenseRows(impl_.get(), ts, rows, deltas, out);
}
Status Worker::IncGetRows(const Table& t, const std::vector<uint64_t>& rows, const double* deltas,
                          double* out) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncGetDenseRows(impl_.get(), ts, rows, deltas, out);
}
Status Worker::IncGetRows(const Table& t, const std::vector<uint64_t>& rows, const int32_t* deltas,
                          int32_t* out) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncGetDenseRows(impl_.get(), ts, rows, deltas, out);
}
Status Worker::IncGetRows(const Table& t, const std::vector<uint64_t>& rows, const int64_t* deltas,
                          int64_t* out) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncGetDenseRows(impl_.get(), ts, rows, deltas, out);
}

Status Worker::Inc(const Table& t, uint64_t row, const float* delta) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncDense(impl_.get(), ts, row, delta);
}
Status Worker::Inc(const Table& t, uint64_t row, const double* delta) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncDense(impl_.get(), ts, row, delta);
}
Status Worker::Inc(const Table& t, uint64_t row, const int32_t* delta) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncDense(impl_.get(), ts, row, delta);
}
Status Worker::Inc(const Table& t, uint64_t row, const int64_t* delta) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncDense(impl_.get(), ts, row, delta);
}

Status Worker::IncCell(const Table& t, uint64_t row, uint32_t col, double value) {
  PACE_TABLE_OR_RETURN(t, ts);
  const RowFormat& f = ts->format;
  if ((f.kind == RowKind::kDense || f.width != 0) && col >= f.width) {
    return Status::InvalidArgument("column " + std::to_string(col) + " is outside table '" +
                                   ts->schema.name + "' (width " + std::to_string(f.width) + ")");
  }
  if (f.kind == RowKind::kDense) {
    RETURN_IF_ERROR(
        impl_->client_->IncDenseCell(impl_->clock_, impl_->stats_.get(), ts, row, col, value));
    return impl_->AfterInc();
  }
  std::string enc = VisitElementType(
      f.type, [&](auto zero) { return OneCellSparse<decltype(zero)>(col, value); });
  RETURN_IF_ERROR(impl_->client_->IncRow(impl_->clock_, impl_->stats_.get(), ts, row, enc));
  return impl_->AfterInc();
}

Status Worker::Inc(const Table& t, uint64_t row,
                   const std::vector<std::pair<uint32_t, float>>& delta) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncSparse(impl_.get(), ts, row, delta);
}
Status Worker::Inc(const Table& t, uint64_t row,
                   const std::vector<std::pair<uint32_t, double>>& delta) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncSparse(impl_.get(), ts, row, delta);
}
Status Worker::Inc(const Table& t, uint64_t row,
                   const std::vector<std::pair<uint32_t, int32_t>>& delta) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncSparse(impl_.get(), ts, row, delta);
}
Status Worker::Inc(const Table& t, uint64_t row,
                   const std::vector<std::pair<uint32_t, int64_t>>& delta) {
  PACE_TABLE_OR_RETURN(t, ts);
  return IncSparse(impl_.get(), ts, row, delta);
}

Status Worker::BatchInc(const Table& t, const std::vector<uint64_t>& rows,
                        const std::vector<std::string>& encoded_deltas) {
  PACE_TABLE_OR_RETURN(t, ts);
  if (rows.size() != encoded_deltas.size()) {
    return Status::InvalidArgument("BatchInc: " + std::to_string(rows.size()) + " rows but " +
                                   std::to_string(encoded_deltas.size()) + " deltas");
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    Status s = ValidateRow(ts->format, encoded_deltas[i]);
    if (!s.ok()) return s.WithPrefix("BatchInc delta " + std::to_string(i));
  }
  Status refused;  // the first row another worker leased (the others are updated)
  for (size_t i = 0; i < rows.size(); ++i) {
    Status s =
        impl_->client_->IncRow(impl_->clock_, impl_->stats_.get(), ts, rows[i], encoded_deltas[i]);
    if (!s.ok() && refused.ok()) refused = s;
  }
  if (!refused.ok()) return refused.WithPrefix("BatchInc (its other rows were updated)");
  return impl_->AfterInc(rows.size());
}

Status Worker::Prefetch(const Table& t, const std::vector<uint64_t>& rows) {
  PACE_TABLE_OR_RETURN(t, ts);
  return impl_->client_->Prefetch(impl_->clock_, impl_->stats_.get(), ts, rows);
}

Status Worker::EvictFirst(const Table& t, const std::vector<uint64_t>& rows) {
  PACE_TABLE_OR_RETURN(t, ts);
  impl_->client_->EvictFirst(ts, rows);
  return Status::OK();
}

Status Worker::Clock() {
  impl_->ReleaseLeases();
  return impl_->client_->ClockWorker(&impl_->clock_, impl_->stats_.get());
}

Status Worker::GlobalBarrier() {
  return impl_->client_->GlobalBarrier(impl_->clock_, impl_->stats_.get());
}

#undef PACE_TABLE_OR_RETURN

}  // namespace pace
