// pacedb.Error and one subclass per StatusCode, and the dtype/array helpers
// every binding file uses.
#include <string_view>

#include "python/src/pacedb.h"

namespace pace {
namespace python {

namespace {

constexpr int kMaxCode = static_cast<int>(StatusCode::kIncompatible);
// Owned by the module (set as its attributes); never freed.
PyObject* g_error = nullptr;
PyObject* g_by_code[kMaxCode + 1] = {};

std::string ClassName(StatusCode code) {
  std::string name(StatusCodeName(code));
  if (name.size() < 5 || name.compare(name.size() - 5, 5, "Error") != 0) name += "Error";
  return name;
}

}  // namespace

void ThrowStatus(const Status& s) {
  const int code = static_cast<int>(s.code());
  PyObject* cls = code > 0 && code <= kMaxCode && g_by_code[code] ? g_by_code[code] : g_error;
  PyErr_SetString(cls, s.message().c_str());
  throw py::error_already_set();
}

void RegisterErrors(py::module_& m) {
  g_error = PyErr_NewExceptionWithDoc(
      "pacedb.Error",
      "A PaceDB Status that is not OK. `code` is the StatusCode number, `code_name` its name.",
      PyExc_Exception, nullptr);
  py::handle base(g_error);
  base.attr("code") = 0;
  base.attr("code_name") = "Unknown";
  m.attr("Error") = base;
  for (int c = 1; c <= kMaxCode; ++c) {
    const StatusCode code = static_cast<StatusCode>(c);
    const std::string qualified = "pacedb." + ClassName(code);
    PyObject* cls = PyErr_NewException(qualified.c_str(), g_error, nullptr);
    py::handle h(cls);
    h.attr("code") = c;
    h.attr("code_name") = std::string(StatusCodeName(code));
    m.attr(ClassName(code).c_str()) = h;
    g_by_code[c] = cls;
  }
}

py::dtype DtypeOf(ElementType t) {
  return DispatchType(t, [](auto z) { return py::dtype::of<decltype(z)>(); });
}

ElementType ElementTypeOf(const py::handle& dtype_like) {
  py::dtype d;
  try {
    d = py::dtype::from_args(py::reinterpret_borrow<py::object>(dtype_like));
  } catch (const py::error_already_set&) {
    ThrowStatus(Status::InvalidArgument("dtype " + std::string(py::repr(dtype_like)) +
                                        " is not a NumPy dtype"));
  }
  if (d.is(py::dtype::of<float>()) || d.equal(py::dtype::of<float>())) return ElementType::kF32;
  if (d.equal(py::dtype::of<double>())) return ElementType::kF64;
  if (d.equal(py::dtype::of<int32_t>())) return ElementType::kI32;
  if (d.equal(py::dtype::of<int64_t>())) return ElementType::kI64;
  ThrowStatus(Status::InvalidArgument("dtype " + std::string(py::str(d)) +
                                      " is not supported: use float32, float64, int32 or int64"));
}

std::vector<uint64_t> RowIds(const py::handle& rows) {
  py::array a = py::array::ensure(rows);
  CheckArg(a && a.ndim() == 1, "rows must be a 1-D array of row ids");
  std::vector<uint64_t> out(static_cast<size_t>(a.size()));
  if (a.size() == 0) return out;
  const char kind = a.dtype().kind();
  if (kind == 'u') {
    auto u = py::array_t<uint64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    std::memcpy(out.data(), u.data(), out.size() * sizeof(uint64_t));
    return out;
  }
  if (kind != 'i') {  // the message is built only on failure: rows arrive once a batch
    ThrowStatus(
        Status::InvalidArgument("rows must be integers, not " + std::string(py::str(a.dtype()))));
  }
  auto i = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  const int64_t* p = i.data();
  for (size_t k = 0; k < out.size(); ++k) {
    CheckArg(p[k] >= 0, "row ids must be >= 0, got " + std::to_string(p[k]));
    out[k] = static_cast<uint64_t>(p[k]);
  }
  return out;
}

py::array ContiguousAs(const py::handle& value, const py::dtype& dtype, const char* what) {
  py::array a = py::array::ensure(value);
  CheckArg(static_cast<bool>(a), std::string(what) + " must be an array");
  const int c_style = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_;
  if (a.dtype().equal(dtype) && (a.flags() & c_style)) return a;
  py::module_ np = py::module_::import("numpy");
  if (!np.attr("can_cast")(a.dtype(), dtype, "same_kind").cast<bool>()) {
    ThrowStatus(Status::InvalidArgument(
        std::string(what) + " has dtype " + std::string(py::str(a.dtype())) + ", the table holds " +
        std::string(py::str(static_cast<const py::handle&>(dtype)))));
  }
  return np.attr("ascontiguousarray")(a, dtype);
}

}  // namespace python
}  // namespace pace
