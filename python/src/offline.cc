// pacedb.open_store: reading a stored model offline, read-only (also while a
// server runs on the data dir). Store.table(name).to_numpy() is pacectl's
// `export --format=npy` (tools/ctl/export.h) written into a NumPy array
// instead of a file: the table's rows stream from RocksDB straight into the
// array's buffer.
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <ostream>
#include <streambuf>

#include "python/src/pacedb.h"
#include "storage/shard_store.h"
#include "tools/ctl/export.h"

namespace pace {
namespace python {

namespace {

// The default bound on the array's rows, as pacectl's --max_rows.
constexpr uint64_t kDefaultMaxRows = 50'000'000;

// A streambuf that drops the first `skip` bytes (the npy header) and writes
// the rest into [dst, dst + size); writing past the end fails the stream.
class ArraySink : public std::streambuf {
 public:
  ArraySink(size_t skip, char* dst, size_t size) : skip_(skip), dst_(dst), size_(size) {}
  size_t written() const { return pos_; }

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    size_t len = static_cast<size_t>(n);
    const size_t dropped = std::min(skip_, len);
    skip_ -= dropped;
    s += dropped;
    len -= dropped;
    if (len > size_ - pos_) return 0;
    std::memcpy(dst_ + pos_, s, len);
    pos_ += len;
    return n;
  }
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
  }

 private:
  size_t skip_;
  char* const dst_;
  const size_t size_;
  size_t pos_ = 0;
};

struct PyStore {
  std::unique_ptr<ShardStore> store;
};

struct PyStoreTable {
  std::shared_ptr<PyStore> owner;
  TableSchema schema;
};

py::array ToNumpy(const PyStoreTable& t, const py::object& max_rows_arg) {
  const uint64_t max_rows =
      max_rows_arg.is_none() ? kDefaultMaxRows : max_rows_arg.cast<uint64_t>();
  const ShardStore& store = *t.owner->store;
  ctl::NpyPlan plan;
  Status s;
  {
    py::gil_scoped_release release;
    s = ctl::PlanNpy(store, t.schema, max_rows, &plan);
  }
  Check(s);
  py::array a(DtypeOf(t.schema.type),
              {static_cast<py::ssize_t>(plan.rows), static_cast<py::ssize_t>(t.schema.width)});
  const size_t header = ctl::NpyHeader(t.schema.type, plan.rows, t.schema.width).size();
  const size_t bytes = static_cast<size_t>(a.nbytes());
  ArraySink sink(header, static_cast<char*>(a.mutable_data()), bytes);
  {
    py::gil_scoped_release release;
    std::ostream out(&sink);
    ctl::ExportStats stats;
    s = ctl::WriteNpy(store, t.schema, plan, &out, &stats);
    if (s.ok() && sink.written() != bytes) {
      s = Status::Internal("npy export wrote " + std::to_string(sink.written()) + " of " +
                           std::to_string(bytes) + " bytes");
    }
  }
  Check(s);
  return a;
}

// The written rows of the table, sorted, as a 1-D uint64 array.
py::array_t<uint64_t> WrittenRowIds(const PyStoreTable& t) {
  const ShardStore* store = t.owner->store.get();
  ctl::MergedPlan plan;
  Status s;
  {
    py::gil_scoped_release release;
    s = ctl::PlanMerged({store}, t.schema, /*npy=*/false, 0, 0, &plan);
  }
  Check(s);
  py::array_t<uint64_t> a(static_cast<py::ssize_t>(plan.written.size()));
  std::copy(plan.written.begin(), plan.written.end(), a.mutable_data());
  return a;
}

}  // namespace

void RegisterOffline(py::module_& m) {
  py::class_<PyStoreTable>(m, "StoreTable", "A table of a store opened by open_store.")
      .def_property_readonly("name", [](const PyStoreTable& t) { return t.schema.name; })
      .def_property_readonly("width", [](const PyStoreTable& t) { return t.schema.width; })
      .def_property_readonly("dtype", [](const PyStoreTable& t) { return DtypeOf(t.schema.type); })
      .def_property_readonly(
          "kind", [](const PyStoreTable& t) { return std::string(RowKindName(t.schema.kind)); })
      .def("to_numpy", &ToNumpy, py::arg("max_rows") = py::none(),
           "The dense table as a 2-D array (max written row + 1, width); rows never written "
           "hold their initializer's value (what Get returns). The same array as `pacectl "
           "export --format=npy`. InvalidArgumentError for a sparse table or more than "
           "max_rows (default 50,000,000) rows.")
      .def("row_ids", &WrittenRowIds,
           "The ids of the rows stored in the table (written at least once), sorted, as a "
           "uint64 array: the rows of a table of hashed or sparse ids, to read with "
           "Worker.get_many.")
      .def("__repr__", [](const PyStoreTable& t) {
        return "<pacedb.StoreTable " + DescribeSchema(t.schema) + ">";
      });

  py::class_<PyStore, std::shared_ptr<PyStore>>(m, "Store", "A shard's data dir opened read-only.")
      .def(
          "tables",
          [](const std::shared_ptr<PyStore>& s) {
            py::list out;
            for (const TableSchema& t : s->store->ListTables()) out.append(t.name);
            return out;
          },
          "The names of the stored tables.")
      .def(
          "table",
          [](const std::shared_ptr<PyStore>& s, const std::string& name) {
            StatusOr<TableSchema> t = s->store->FindTable(name);
            Check(t.status());
            return PyStoreTable{s, *t};
          },
          py::arg("name"))
      .def_property_readonly(
          "shard_clock", [](const std::shared_ptr<PyStore>& s) { return s->store->ShardClock(); })
      .def_property_readonly("dir",
                             [](const std::shared_ptr<PyStore>& s) { return s->store->dir(); });

  m.def(
      "open_store",
      [](const std::string& data_dir, size_t block_cache_mb) {
        ShardStoreOptions o;
        o.read_only = true;
        o.check_identity = false;
        o.block_cache_mb = block_cache_mb;
        auto s = std::make_shared<PyStore>();
        Status st;
        {
          py::gil_scoped_release release;
          st = ShardStore::Open(o, data_dir, &s->store);
        }
        Check(st.WithPrefix("open_store('" + data_dir + "')"));
        return s;
      },
      py::arg("data_dir"), py::arg("block_cache_mb") = 64,
      "Opens a data dir read-only (also while paced or an embedded client uses it).");
}

}  // namespace python
}  // namespace pace
