// pacedb.Worker: one Python thread's reads, updates and clock. Every call that
// may wait (a read that must fetch, a clock, a barrier) or copies many rows
// runs with the GIL released, so worker threads run in parallel.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <type_traits>
#include <utility>

#include "python/src/pacedb.h"

namespace pace {
namespace python {

PyWorker::PyWorker(std::shared_ptr<PyClient> owner, std::unique_ptr<Worker> worker)
    : owner_(std::move(owner)), worker_(std::move(worker)), creator_(std::this_thread::get_id()) {
  MutexLock l(&owner_->mu);
  owner_->thread_workers[creator_] = this;
}

PyWorker::~PyWorker() {
  if (closed()) return;  // Close() did it all
  {
    MutexLock l(&owner_->mu);
    auto it = owner_->thread_workers.find(creator_);
    if (it != owner_->thread_workers.end() && it->second == this) owner_->thread_workers.erase(it);
  }
  py::gil_scoped_release release;  // deregistering may wait for the client's lock
  worker_.reset();
}

PyWorker::Use::Use(PyWorker* w) : w_(w) {
  if (w_->busy_.exchange(true, std::memory_order_acquire)) {
    ThrowStatus(Status::FailedPrecondition(
        "this worker is in use by another thread: create one worker per thread "
        "(client.worker())"));
  }
  if (!w_->worker_) {
    w_->busy_.store(false, std::memory_order_release);
    ThrowStatus(Status::FailedPrecondition("this worker is closed"));
  }
}

void PyWorker::Close() {
  if (closed()) return;
  {
    MutexLock l(&owner_->mu);
    auto it = owner_->thread_workers.find(creator_);
    if (it != owner_->thread_workers.end() && it->second == this) owner_->thread_workers.erase(it);
  }
  {
    Use use(this);
    std::unique_ptr<Worker> w = std::move(worker_);
    py::gil_scoped_release release;  // deregistering may wait for the client's lock
    w.reset();
  }
  // A closed worker no longer keeps its client open: the client closes when
  // nothing else holds it (this worker object may live on in a variable).
  std::shared_ptr<PyClient> owner = std::move(owner_);
}
PyWorker::Use::~Use() { w_->busy_.store(false, std::memory_order_release); }

const Table& PyWorker::Resolve(const PyTable& t) const {
  if (closed()) ThrowStatus(Status::FailedPrecondition("this worker is closed"));
  CheckArg(t.owner == owner_, "table '" + t.table.name() + "' belongs to another client");
  return t.table;
}

namespace {

bool Dense(const Table& t) { return t.schema().kind == RowKind::kDense; }

// `out` checked as a writable C-contiguous array of the table's dtype and the
// given shape; returned as is (the rows are written into it, no copy).
py::array CheckOut(const py::object& out, const TableSchema& s, std::vector<py::ssize_t> shape) {
  CheckArg(py::isinstance<py::array>(out), "out must be a numpy.ndarray");
  py::array a = py::reinterpret_borrow<py::array>(out);
  CheckArg(a.dtype().equal(DtypeOf(s.type)), "out has dtype " + std::string(py::str(a.dtype())) +
                                                 ", table '" + s.name + "' holds " +
                                                 std::string(py::str(DtypeOf(s.type))));
  bool same = a.ndim() == static_cast<py::ssize_t>(shape.size());
  for (size_t i = 0; same && i < shape.size(); ++i) same = a.shape(i) == shape[i];
  std::string want = "(";
  for (size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + std::to_string(shape[i]);
  CheckArg(same, "out must have shape " + want + (shape.size() == 1 ? ",)" : ")"));
  CheckArg(a.flags() & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_, "out must be C-contiguous");
  CheckArg(a.writeable(), "out must be writeable");
  return a;
}

// The dense rows `rows` of `t` into out (rows.size() x width elements of the
// table's type): one Worker::GetRows, which looks each row up once (the
// lookups overlapped) and fetches the rows neither fresh in the cache nor on
// their way (a worker.prefetch) with one Read per shard. The one read loop of
// get_many, get_unique and adagrad_update. Call without the GIL.
Status ReadRows(Worker* w, const Table& t, const std::vector<uint64_t>& rows, void* out) {
  return DispatchType(t.schema().type, [&](auto z) -> Status {
    using T = decltype(z);
    return w->GetRows(t, rows, static_cast<T*>(out));
  });
}

py::object GetSparse(PyWorker* self, const Table& t, uint64_t row) {
  PyWorker::Use w(self);
  return DispatchType(t.schema().type, [&](auto z) -> py::object {
    using T = decltype(z);
    std::map<uint32_t, T> m;
    Status s;
    {
      py::gil_scoped_release release;
      s = w->Get(t, row, &m);
    }
    Check(s);
    py::array_t<uint32_t> cols(static_cast<py::ssize_t>(m.size()));
    py::array_t<T> vals(static_cast<py::ssize_t>(m.size()));
    uint32_t* c = cols.mutable_data();
    T* v = vals.mutable_data();
    for (const auto& [col, val] : m) {
      *c++ = col;
      *v++ = val;
    }
    return py::make_tuple(cols, vals);
  });
}

py::object Get(PyWorker* self, const PyTable& pt, uint64_t row, const py::object& out) {
  const Table& t = self->Resolve(pt);
  if (!Dense(t)) {
    CheckArg(out.is_none(), "out= needs a dense table");
    return GetSparse(self, t, row);
  }
  const TableSchema& s = t.schema();
  const std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(s.width)};
  py::array a = out.is_none() ? py::array(DtypeOf(s.type), shape) : CheckOut(out, s, shape);
  void* p = a.mutable_data();
  PyWorker::Use w(self);
  Status st;
  {
    py::gil_scoped_release release;
    st = DispatchType(s.type, [&](auto z) { return w->Get(t, row, static_cast<decltype(z)*>(p)); });
  }
  Check(st);
  return std::move(a);
}

// One batched read: a Prefetch of all rows (one Read per shard for the rows
// not fresh in the cache), then each row copied into its line of `out`.
py::array GetMany(PyWorker* self, const PyTable& pt, const py::handle& rows_like,
                  const py::object& out) {
  const Table& t = self->Resolve(pt);
  const TableSchema& s = t.schema();
  CheckArg(Dense(t), "get_many needs a dense table ('" + s.name + "' is sparse; use get)");
  std::vector<uint64_t> rows = RowIds(rows_like);
  const std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(rows.size()),
                                       static_cast<py::ssize_t>(s.width)};
  py::array a = out.is_none() ? py::array(DtypeOf(s.type), shape) : CheckOut(out, s, shape);
  void* base = a.mutable_data();
  PyWorker::Use w(self);
  Status st;
  {
    py::gil_scoped_release release;
    st = ReadRows(w.get(), t, rows, base);
  }
  Check(st);
  return a;
}

template <typename T>
std::vector<std::pair<uint32_t, T>> SparseDelta(const py::handle& delta, const TableSchema& s) {
  std::vector<std::pair<uint32_t, T>> out;
  if (py::isinstance<py::dict>(delta)) {
    for (const auto& [k, v] : py::reinterpret_borrow<py::dict>(delta)) {
      out.emplace_back(k.template cast<uint32_t>(), v.template cast<T>());
    }
    return out;
  }
  CheckArg(py::isinstance<py::tuple>(delta) && py::len(delta) == 2,
           "a sparse delta is a dict {col: value} or a tuple (cols, values)");
  py::tuple tup = py::reinterpret_borrow<py::tuple>(delta);
  std::vector<uint64_t> cols = RowIds(tup[0]);
  py::array vals = ContiguousAs(tup[1], DtypeOf(s.type), "values");
  CheckArg(static_cast<size_t>(vals.size()) == cols.size(),
           "cols and values differ in length (" + std::to_string(cols.size()) + " vs " +
               std::to_string(vals.size()) + ")");
  const T* v = static_cast<const T*>(vals.data());
  for (size_t i = 0; i < cols.size(); ++i) {
    CheckArg(cols[i] <= UINT32_MAX, "column " + std::to_string(cols[i]) + " is not a u32");
    out.emplace_back(static_cast<uint32_t>(cols[i]), v[i]);
  }
  return out;
}

void Inc(PyWorker* self, const PyTable& pt, uint64_t row, const py::handle& delta) {
  const Table& t = self->Resolve(pt);
  const TableSchema& s = t.schema();
  Status st;
  if (!Dense(t)) {
    DispatchType(s.type, [&](auto z) {
      using T = decltype(z);
      auto d = SparseDelta<T>(delta, s);
      PyWorker::Use w(self);
      py::gil_scoped_release release;
      st = w->Inc(t, row, d);
      return 0;
    });
    Check(st);
    return;
  }
  py::array d = ContiguousAs(delta, DtypeOf(s.type), "delta");
  CheckArg(d.size() == static_cast<py::ssize_t>(s.width),
           "delta has " + std::to_string(d.size()) + " elements, table '" + s.name +
               "' has width " + std::to_string(s.width));
  const void* p = d.data();
  PyWorker::Use w(self);
  {
    py::gil_scoped_release release;
    st = DispatchType(s.type,
                      [&](auto z) { return w->Inc(t, row, static_cast<const decltype(z)*>(p)); });
  }
  Check(st);
}

// `h` as a C-contiguous array of s's dtype with one row of s.width elements
// for each of `rows` rows (named `name` in the error).
py::array RowsArray(const py::handle& h, const TableSchema& s, size_t rows, const char* name) {
  py::array a = ContiguousAs(h, DtypeOf(s.type), name);
  CheckArg(a.ndim() == 2 && a.shape(0) == static_cast<py::ssize_t>(rows) &&
               a.shape(1) == static_cast<py::ssize_t>(s.width),
           std::string(name) + " must have shape (" + std::to_string(rows) + ", " +
               std::to_string(s.width) + ") for " + std::to_string(rows) + " rows of table '" +
               s.name + "'");
  return a;
}

void IncMany(PyWorker* self, const PyTable& pt, const py::handle& rows_like,
             const py::handle& deltas) {
  const Table& t = self->Resolve(pt);
  const TableSchema& s = t.schema();
  CheckArg(Dense(t), "inc_many needs a dense table ('" + s.name + "' is sparse; use inc)");
  std::vector<uint64_t> rows = RowIds(rows_like);
  py::array d = RowsArray(deltas, s, rows.size(), "deltas");
  const void* p = d.data();
  PyWorker::Use w(self);
  Status st;
  {
    py::gil_scoped_release release;
    st = DispatchType(s.type,
                      [&](auto z) { return w->Inc(t, rows, static_cast<const decltype(z)*>(p)); });
  }
  Check(st);
}

void IncDiff(PyWorker* self, const PyTable& pt, const py::handle& rows_like,
             const py::handle& current, const py::handle& base) {
  const Table& t = self->Resolve(pt);
  const TableSchema& s = t.schema();
  CheckArg(Dense(t), "inc_diff needs a dense table ('" + s.name + "' is sparse; use inc)");
  std::vector<uint64_t> rows = RowIds(rows_like);
  py::array cur = RowsArray(current, s, rows.size(), "current");
  py::array bas = RowsArray(base, s, rows.size(), "base");
  const void* c = cur.data();
  const void* b = bas.data();
  PyWorker::Use w(self);
  Status st;
  {
    py::gil_scoped_release release;
    st = DispatchType(s.type, [&](auto z) {
      using T = decltype(z);
      return w->IncDiff(t, rows, static_cast<const T*>(c), static_cast<const T*>(b));
    });
  }
  Check(st);
}

// Integer ids of any shape, flattened: a C-contiguous int64 or uint64 array
// (other integer dtypes are converted), read with the GIL released.
struct FlatIds {
  py::array array;  // owns the data
  const int64_t* i64 = nullptr;
  const uint64_t* u64 = nullptr;
  size_t n = 0;
  std::vector<py::ssize_t> shape;

  // ids[k] as a row id; false for a negative id.
  bool At(size_t k, uint64_t* id) const {
    if (u64 != nullptr) {
      *id = u64[k];
      return true;
    }
    if (i64[k] < 0) return false;
    *id = static_cast<uint64_t>(i64[k]);
    return true;
  }
  int64_t Signed(size_t k) const { return i64 != nullptr ? i64[k] : static_cast<int64_t>(u64[k]); }
};

FlatIds FlatIdsOf(const py::handle& ids_like) {
  FlatIds f;
  py::array a = py::array::ensure(ids_like);
  CheckArg(static_cast<bool>(a), "ids must be an array of integers");
  for (py::ssize_t d = 0; d < a.ndim(); ++d) f.shape.push_back(a.shape(d));
  f.n = static_cast<size_t>(a.size());
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u' && f.n != 0) {
    ThrowStatus(
        Status::InvalidArgument("ids must be integers, not " + std::string(py::str(a.dtype()))));
  }
  if (kind == 'u') {
    auto u = py::array_t<uint64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    f.u64 = u.data();
    f.array = std::move(u);
  } else {
    auto i = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    f.i64 = i.data();
    f.array = std::move(i);
  }
  return f;
}

// The distinct ids of `ids` in first-occurrence order and, for each id, the
// index of its row among them: an open-addressing table sized for the batch.
// Runs without the GIL. Returns false (with *bad the offending index) on a
// negative id.
bool Dedup(const FlatIds& ids, std::vector<uint64_t>* unique, int64_t* inverse, size_t* bad) {
  size_t cap = 16;
  while (cap < 2 * ids.n) cap <<= 1;
  std::vector<uint64_t> keys(cap);
  std::vector<int64_t> slots(cap, -1);
  const size_t mask = cap - 1;
  unique->clear();
  unique->reserve(ids.n);
  for (size_t k = 0; k < ids.n; ++k) {
    uint64_t id;
    if (!ids.At(k, &id)) {
      *bad = k;
      return false;
    }
    uint64_t h = id + 0x9e3779b97f4a7c15ULL;  // splitmix64's finalizer
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    h ^= h >> 31;
    size_t i = static_cast<size_t>(h) & mask;
    while (slots[i] >= 0 && keys[i] != id) i = (i + 1) & mask;
    if (slots[i] < 0) {
      keys[i] = id;
      slots[i] = static_cast<int64_t>(unique->size());
      unique->push_back(id);
    }
    inverse[k] = slots[i];
  }
  return true;
}

void CheckNoBadId(bool ok, const FlatIds& ids, size_t bad) {
  CheckArg(ok, "row ids must be >= 0, got " + std::to_string(ids.Signed(bad)) + " at index " +
                   std::to_string(bad));
}

// A NumPy array of `shape` over the memory of *owner, which it keeps alive
// (built without the GIL, handed over without a copy).
template <typename Owner>
py::array ArrayOver(std::unique_ptr<Owner> owner, void* data, const py::dtype& dtype,
                    std::vector<py::ssize_t> shape) {
  py::capsule keep(owner.get(), [](void* o) { delete static_cast<Owner*>(o); });
  owner.release();
  return py::array(dtype, std::move(shape), data, keep);
}

// One batched read of the distinct rows of a batch of ids (any shape):
// (unique_ids, inverse, rows) with unique_ids[inverse] == ids and rows[j] the
// row of unique_ids[j]. The dedup and the fetch run in one release of the
// GIL (each release is a hand-off to another worker thread waiting for it),
// into buffers the returned arrays then own.
py::tuple GetUnique(PyWorker* self, const PyTable& pt, const py::handle& ids_like,
                    const py::object& /*prefetch: accepted, changes nothing*/, bool gather) {
  const Table& t = self->Resolve(pt);
  const TableSchema& s = t.schema();
  CheckArg(Dense(t), "get_unique needs a dense table ('" + s.name + "' is sparse; use get)");
  FlatIds ids = FlatIdsOf(ids_like);
  py::array_t<int64_t> inverse(ids.shape);
  int64_t* inv = inverse.mutable_data();
  const py::dtype dtype = DtypeOf(s.type);
  const size_t row_bytes = s.width * static_cast<size_t>(dtype.itemsize());
  auto unique = std::make_unique<std::vector<uint64_t>>();
  auto rows = std::make_unique<std::vector<char>>();
  auto gathered = std::make_unique<std::vector<char>>();
  size_t bad = 0;
  bool ok;
  Status st;
  {
    PyWorker::Use w(self);
    py::gil_scoped_release release;
    ok = Dedup(ids, unique.get(), inv, &bad);
    if (ok) {
      rows->resize(std::max<size_t>(1, unique->size() * row_bytes));
      st = ReadRows(w.get(), t, *unique, rows->data());
    }
    if (ok && st.ok() && gather) {
      gathered->resize(std::max<size_t>(1, ids.n * row_bytes));
      for (size_t k = 0; k < ids.n; ++k) {
        std::memcpy(gathered->data() + k * row_bytes,
                    rows->data() + static_cast<size_t>(inv[k]) * row_bytes, row_bytes);
      }
    }
  }
  CheckNoBadId(ok, ids, bad);
  Check(st);
  const auto u = static_cast<py::ssize_t>(unique->size());
  char* row_data = rows->data();
  py::array row_array =
      ArrayOver(std::move(rows), row_data, dtype, {u, static_cast<py::ssize_t>(s.width)});
  void* id_data = unique->data();
  py::array unique_ids =
      ArrayOver(std::move(unique), id_data,
                ids.u64 != nullptr ? py::dtype::of<uint64_t>() : py::dtype::of<int64_t>(), {u});
  if (!gather) return py::make_tuple(unique_ids, inverse, row_array);
  std::vector<py::ssize_t> shape = ids.shape;
  shape.push_back(static_cast<py::ssize_t>(s.width));
  char* gathered_data = gathered->data();
  py::array gathered_array = ArrayOver(std::move(gathered), gathered_data, dtype, shape);
  return py::make_tuple(unique_ids, inverse, row_array, gathered_array);
}

// The rows of `grads` (len(inverse) rows of `width`) summed by inverse[k] into
// `unique` rows: the gradient of each distinct row of a gathered read.
// Checked: inverse[k] in [0, unique).
template <typename T>
bool CheckedSumByRow(const T* in, size_t n, size_t width, const int64_t* inverse, size_t unique,
                     std::vector<T>* sum) {
  sum->assign(unique * width, T{});
  for (size_t k = 0; k < n; ++k) {
    if (inverse[k] < 0 || static_cast<uint64_t>(inverse[k]) >= unique) return false;
    T* row = sum->data() + static_cast<size_t>(inverse[k]) * width;
    const T* src = in + k * width;
    for (size_t c = 0; c < width; ++c) row[c] += src[c];
  }
  return true;
}

// The int64 inverse index of a gathered read, C-contiguous.
py::array_t<int64_t> InverseOf(const py::handle& inverse) {
  py::array a = py::array::ensure(inverse);
  CheckArg(
      static_cast<bool>(a) && (a.dtype().kind() == 'i' || a.dtype().kind() == 'u' || a.size() == 0),
      "inverse must be an array of integers");
  return py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
}

// sum_rows(grads, inverse, n): grads (len(inverse) x width, float32/float64)
// summed into n rows by inverse (as nn.Embedding's backward sums the
// gradients of a row's occurrences). Short: runs with the GIL held.
py::array SumRows(const py::handle& grads_like, const py::handle& inverse_like, size_t n) {
  py::array_t<int64_t> inverse = InverseOf(inverse_like);
  py::array g = py::array::ensure(grads_like);
  CheckArg(static_cast<bool>(g), "grads must be an array");
  const bool f64 = g.dtype().is(py::dtype::of<double>());
  g = ContiguousAs(g, f64 ? py::dtype::of<double>() : py::dtype::of<float>(), "grads");
  const size_t m = static_cast<size_t>(inverse.size());
  CheckArg(m == 0 ? g.size() == 0 : static_cast<size_t>(g.size()) % m == 0,
           "grads must hold len(inverse) rows");
  const size_t width = m == 0 ? 0 : static_cast<size_t>(g.size()) / m;
  auto sum = [&](auto z) -> py::array {
    using T = decltype(z);
    std::vector<T> out;
    CheckArg(CheckedSumByRow(static_cast<const T*>(g.data()), m, width, inverse.data(), n, &out),
             "inverse holds an index outside [0, " + std::to_string(n) + ")");
    py::array_t<T> a({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(width)});
    if (!out.empty()) std::memcpy(a.mutable_data(), out.data(), out.size() * sizeof(T));
    return a;
  };
  return f64 ? sum(double{}) : sum(float{});
}

// Sums the rows of `in` (n x width) of equal ids into `sum` (unique x width).
template <typename T>
void SumByRow(const T* in, size_t n, size_t width, const int64_t* inverse, size_t unique, T scale,
              std::vector<T>* sum) {
  sum->assign(unique * width, T{});
  for (size_t k = 0; k < n; ++k) {
    T* row = sum->data() + static_cast<size_t>(inverse[k]) * width;
    const T* src = in + k * width;
    if (scale == T{1}) {
      for (size_t c = 0; c < width; ++c) row[c] += src[c];
    } else {
      for (size_t c = 0; c < width; ++c) row[c] += scale * src[c];
    }
  }
}

// One Adagrad step of the rows `ids` (duplicates' gradients summed first):
// with acc the accumulator rows of `state` (+ initial), acc += g^2 and
// row -= lr * g / (sqrt(acc) + eps), both as additive updates. Reads the
// accumulators and updates both tables without the GIL.
void AdagradUpdate(PyWorker* self, const PyTable& weights_pt, const PyTable& state_pt,
                   const py::handle& ids_like, const py::handle& grads, double lr, double eps,
                   double initial, const py::object& /*prefetch: accepted, changes nothing*/,
                   const py::object& inverse_like) {
  const Table& t = self->Resolve(weights_pt);
  const Table& st_table = self->Resolve(state_pt);
  const TableSchema& s = t.schema();
  const TableSchema& ss = st_table.schema();
  CheckArg(Dense(t) && Dense(st_table), "adagrad_update needs dense tables");
  CheckArg(s.type == ElementType::kF32 || s.type == ElementType::kF64,
           "adagrad_update needs a float table ('" + s.name + "' holds integers)");
  CheckArg(ss.type == s.type && ss.width == s.width,
           "the state table '" + ss.name + "' must have the dtype and width of '" + s.name + "'");
  FlatIds ids = FlatIdsOf(ids_like);
  py::array g = ContiguousAs(grads, DtypeOf(s.type), "grads");
  // Gathered: grads has a row per entry of inverse, ids are distinct.
  const bool gathered = !inverse_like.is_none();
  py::array_t<int64_t> given_inverse;
  if (gathered) given_inverse = InverseOf(inverse_like);
  const size_t grad_rows = gathered ? static_cast<size_t>(given_inverse.size()) : ids.n;
  CheckArg(static_cast<size_t>(g.size()) == grad_rows * s.width,
           "grads must have shape (" + std::to_string(grad_rows) + ", " + std::to_string(s.width) +
               "), not " + std::to_string(g.size()) + " elements");
  const void* p = g.data();
  std::vector<int64_t> inverse(gathered ? 0 : ids.n);
  std::vector<uint64_t> unique;
  size_t bad = 0;
  bool ok;
  bool inverse_ok = true;
  PyWorker::Use w(self);
  Status status;
  {
    py::gil_scoped_release release;
    if (gathered) {
      ok = true;
      unique.resize(ids.n);
      for (size_t k = 0; k < ids.n && ok; ++k) {
        ok = ids.At(k, &unique[k]);
        if (!ok) bad = k;
      }
    } else {
      ok = Dedup(ids, &unique, inverse.data(), &bad);
    }
    if (ok && !unique.empty()) {
      status = DispatchType(s.type, [&](auto z) -> Status {
        using T = decltype(z);
        if constexpr (std::is_floating_point_v<T>) {
          const size_t width = s.width;
          std::vector<T> grad;
          if (gathered) {
            inverse_ok = CheckedSumByRow(static_cast<const T*>(p), grad_rows, width,
                                         given_inverse.data(), unique.size(), &grad);
            if (!inverse_ok) return Status::OK();
          } else {
            SumByRow(static_cast<const T*>(p), ids.n, width, inverse.data(), unique.size(), T{1},
                     &grad);
          }
          // The accumulators' update, then their new values: one pass over
          // the state rows.
          std::vector<T> sq(grad.size());
          for (size_t k = 0; k < grad.size(); ++k) sq[k] = grad[k] * grad[k];
          std::vector<T> acc(grad.size());
          RETURN_IF_ERROR(w->IncGetRows(st_table, unique, sq.data(), acc.data()));
          std::vector<T>& delta = sq;  // reused for the rows' update
          for (size_t k = 0; k < grad.size(); ++k) {
            const T std_k = std::sqrt(acc[k] + static_cast<T>(initial)) + static_cast<T>(eps);
            delta[k] = static_cast<T>(-lr) * (grad[k] / std_k);
          }
          return w->Inc(t, unique, delta.data());
        } else {
          return Status::InvalidArgument("adagrad_update needs a float table");
        }
      });
    }
  }
  CheckNoBadId(ok, ids, bad);
  CheckArg(inverse_ok, "inverse holds an index outside [0, len(ids))");
  Check(status);
}

// Adds scale * deltas[k] to row ids[k] for every k, the deltas of equal ids
// summed here first (one Inc per distinct row). Without the GIL.
void IncSum(PyWorker* self, const PyTable& pt, const py::handle& ids_like, const py::handle& deltas,
            double scale) {
  const Table& t = self->Resolve(pt);
  const TableSchema& s = t.schema();
  CheckArg(Dense(t), "inc_sum needs a dense table ('" + s.name + "' is sparse; use inc)");
  CheckArg(s.type == ElementType::kF32 || s.type == ElementType::kF64 || scale == 1.0,
           "scale must be 1 for the integer table '" + s.name + "'");
  FlatIds ids = FlatIdsOf(ids_like);
  py::array d = ContiguousAs(deltas, DtypeOf(s.type), "deltas");
  CheckArg(static_cast<size_t>(d.size()) == ids.n * s.width,
           "deltas must hold len(ids) * width = " + std::to_string(ids.n) + " * " +
               std::to_string(s.width) + " elements (shape (" + std::to_string(ids.n) + ", " +
               std::to_string(s.width) + ")), not " + std::to_string(d.size()));
  std::vector<int64_t> inverse(ids.n);
  std::vector<uint64_t> unique;
  size_t bad = 0;
  const void* p = d.data();
  PyWorker::Use w(self);
  Status st;
  bool ok;
  {
    py::gil_scoped_release release;
    ok = Dedup(ids, &unique, inverse.data(), &bad);
    if (ok && !unique.empty()) {
      st = DispatchType(s.type, [&](auto z) {
        using T = decltype(z);
        std::vector<T> sum;
        SumByRow(static_cast<const T*>(p), ids.n, s.width, inverse.data(), unique.size(),
                 static_cast<T>(scale), &sum);
        return w->Inc(t, unique, sum.data());
      });
    }
  }
  CheckNoBadId(ok, ids, bad);
  Check(st);
}

template <typename Fn>
void Blocking(PyWorker* self, Fn fn) {
  PyWorker::Use w(self);
  Status st;
  {
    py::gil_scoped_release release;
    st = fn(w.get());
  }
  Check(st);
}

// A Worker call on a table's rows (`rows`: any sequence of row ids), with the
// GIL released: prefetch and evict_first.
template <Status (Worker::*kCall)(const Table&, const std::vector<uint64_t>&)>
void RowsCall(PyWorker* self, const PyTable& pt, const py::handle& rows) {
  const Table& t = self->Resolve(pt);
  const std::vector<uint64_t> r = RowIds(rows);
  Blocking(self, [&](Worker* w) { return (w->*kCall)(t, r); });
}

}  // namespace

void RegisterWorker(py::module_& m) {
  m.def("_sum_rows", &SumRows, py::arg("grads"), py::arg("inverse"), py::arg("n"),
        "grads (len(inverse) rows) summed by inverse into n rows (pacedb.torch's gathered "
        "reads).");
  py::class_<PyWorker>(m, "Worker", R"doc(
One application thread's identity: its clock, reads and updates (Client.worker()).
Use a worker from one thread at a time; create one per thread.)doc")
      .def("get", &Get, py::arg("table"), py::arg("row"), py::arg("out") = py::none(),
           "Dense: the row as a 1-D array of the table's dtype (written into `out` if given). "
           "Sparse: (cols: uint32 array, values: array). Blocks until the read rule holds; "
           "includes every earlier inc of this process.")
      .def("get_many", &GetMany, py::arg("table"), py::arg("rows"), py::arg("out") = py::none(),
           "Dense rows as a 2-D array (len(rows), width), one batched read. With `out` (a "
           "C-contiguous array of that shape and the table's dtype) the rows are written into "
           "it and it is returned: no copy.")
      .def("inc", &Inc, py::arg("table"), py::arg("row"), py::arg("delta"),
           "Adds `delta` to a row: dense, an array of width elements; sparse, a dict "
           "{col: value} or a tuple (cols, values).")
      .def("inc_many", &IncMany, py::arg("table"), py::arg("rows"), py::arg("deltas"),
           "Adds deltas[i] to rows[i] (dense; deltas of shape (len(rows), width); duplicates "
           "add up).")
      .def("inc_diff", &IncDiff, py::arg("table"), py::arg("rows"), py::arg("current"),
           py::arg("base"),
           "Adds current[i] - base[i] to rows[i] (dense; both of shape (len(rows), width)): "
           "copies read into `base` and updated in `current`, without an array of deltas.")
      .def("prefetch", &RowsCall<&Worker::Prefetch>, py::arg("table"), py::arg("rows"),
           "Starts fetching rows this worker is about to read, without blocking.")
      .def("evict_first", &RowsCall<&Worker::EvictFirst>, py::arg("table"), py::arg("rows"),
           "A hint for rows read as a stream (each once per clock, e.g. in key order): this "
           "worker will not read them again soon, so the cache evicts them before rows read "
           "since. The rows stay readable; their deltas are kept.")
      .def(
          "clock", [](PyWorker* self) { Blocking(self, [](Worker* w) { return w->Clock(); }); },
          "Ends this worker's current clock.")
      .def(
          "global_barrier",
          [](PyWorker* self) { Blocking(self, [](Worker* w) { return w->GlobalBarrier(); }); },
          "Blocks until every shard has applied all clients' updates of the clocks before "
          "this worker's clock.")
      .def("get_unique", &GetUnique, py::arg("table"), py::arg("ids"),
           py::arg("prefetch") = py::none(), py::arg("gather") = false,
           "The distinct rows of a batch of ids (an integer array of any shape) in one batched "
           "read: (unique_ids, inverse, rows), unique_ids in first-occurrence order, "
           "inverse (int64, the shape of ids) with unique_ids[inverse] == ids, rows of shape "
           "(len(unique_ids), width). De-duplicates without the GIL. The rows neither cached "
           "fresh nor being fetched are requested with one Read per shard; `prefetch` is "
           "accepted for compatibility and changes nothing. gather=True adds a fourth "
           "array, rows[inverse] (shape ids.shape + (width,)), built in the same call.")
      .def("adagrad_update", &AdagradUpdate, py::arg("table"), py::arg("state"), py::arg("ids"),
           py::arg("grads"), py::arg("lr"), py::arg("eps") = 1e-10,
           py::arg("initial_accumulator_value") = 0.0, py::arg("prefetch") = py::none(),
           py::arg("inverse") = py::none(),
           "One Adagrad step of rows `ids` of a float table, the gradients of equal ids summed "
           "first: with acc = state row + initial_accumulator_value + grad**2, adds grad**2 to "
           "the state row and -lr * grad / (sqrt(acc) + eps) to the row. `state` has the "
           "table's dtype and width. `prefetch` is accepted for compatibility and changes "
           "nothing (the reads fetch what is neither cached fresh nor being fetched). With "
           "`inverse` (get_unique's), `ids` are the distinct ids and grads has a row per entry "
           "of inverse, grads[k] the gradient of row ids[inverse[k]] (summed per row).")
      .def("inc_sum", &IncSum, py::arg("table"), py::arg("ids"), py::arg("deltas"),
           py::arg("scale") = 1.0,
           "Adds scale * deltas[k] to row ids[k] (dense; deltas of shape (len(ids), width)), "
           "summing the deltas of equal ids first: one update per distinct row. scale must be 1 "
           "for an integer table.")
      .def("close", &PyWorker::Close,
           "Deregisters this worker: the process clock no longer waits for it (end its last "
           "clock with clock() first, or that clock's updates are sent only if another worker "
           "ends it). Later calls raise FailedPreconditionError.")
      .def_property_readonly("closed", &PyWorker::closed)
      .def_property_readonly(
          "client", [](PyWorker* self) { return self->owner(); },
          "The Client of this worker (None once closed).")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyWorker* self, const py::args&) { self->Close(); })
      .def_property_readonly("current_clock", [](PyWorker* self) {
        PyWorker::Use w(self);
        return w->clock();
      });
}

}  // namespace python
}  // namespace pace
