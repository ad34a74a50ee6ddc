// pacedb.Worker: one Python thread's reads, updates and clock. Every call that
// may wait (a read that must fetch, a clock, a barrier) or copies many rows
// runs with the GIL released, so worker threads run in parallel.
#include <map>
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
}
PyWorker::Use::~Use() { w_->busy_.store(false, std::memory_order_release); }

const Table& PyWorker::Resolve(const PyTable& t) const {
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
  char* base = static_cast<char*>(a.mutable_data());
  const size_t row_bytes = static_cast<size_t>(s.width) * ElementSize(s.type);
  PyWorker::Use w(self);
  Status st;
  {
    py::gil_scoped_release release;
    if (rows.size() > 1) st = w->Prefetch(t, rows);
    for (size_t i = 0; st.ok() && i < rows.size(); ++i) {
      st = DispatchType(s.type, [&](auto z) {
        return w->Get(t, rows[i], reinterpret_cast<decltype(z)*>(base + i * row_bytes));
      });
      if (!st.ok()) st = st.WithPrefix("row " + std::to_string(rows[i]));
    }
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

void IncMany(PyWorker* self, const PyTable& pt, const py::handle& rows_like,
             const py::handle& deltas) {
  const Table& t = self->Resolve(pt);
  const TableSchema& s = t.schema();
  CheckArg(Dense(t), "inc_many needs a dense table ('" + s.name + "' is sparse; use inc)");
  std::vector<uint64_t> rows = RowIds(rows_like);
  py::array d = ContiguousAs(deltas, DtypeOf(s.type), "deltas");
  CheckArg(d.ndim() == 2 && d.shape(0) == static_cast<py::ssize_t>(rows.size()) &&
               d.shape(1) == static_cast<py::ssize_t>(s.width),
           "deltas must have shape (" + std::to_string(rows.size()) + ", " +
               std::to_string(s.width) + ") for " + std::to_string(rows.size()) +
               " rows of table '" + s.name + "'");
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

}  // namespace

void RegisterWorker(py::module_& m) {
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
      .def(
          "prefetch",
          [](PyWorker* self, const PyTable& pt, const py::handle& rows) {
            const Table& t = self->Resolve(pt);
            std::vector<uint64_t> r = RowIds(rows);
            Blocking(self, [&](Worker* w) { return w->Prefetch(t, r); });
          },
          py::arg("table"), py::arg("rows"),
          "Starts fetching rows this worker is about to read, without blocking.")
      .def(
          "clock", [](PyWorker* self) { Blocking(self, [](Worker* w) { return w->Clock(); }); },
          "Ends this worker's current clock.")
      .def(
          "global_barrier",
          [](PyWorker* self) { Blocking(self, [](Worker* w) { return w->GlobalBarrier(); }); },
          "Blocks until every shard has applied all clients' updates of the clocks before "
          "this worker's clock.")
      .def_property_readonly("current_clock", [](PyWorker* self) {
        PyWorker::Use w(self);
        return w->clock();
      });
}

}  // namespace python
}  // namespace pace
