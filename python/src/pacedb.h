// The pacedb Python module's C++ side: shared declarations of the binding
// files. Everything here runs with the GIL held unless a function says it
// releases it. The module is built on client/pace.h (and, for the offline
// reader only, tools/ctl/export.h and storage/shard_store.h).
#ifndef PACE_PYTHON_SRC_PACEDB_H_
#define PACE_PYTHON_SRC_PACEDB_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "client/pace.h"
#include "common/mutex.h"
#include "common/schema.h"
#include "common/status.h"

namespace pace {
namespace python {

namespace py = pybind11;

// Raises the pacedb.Error subclass of s.code() with s.message(). REQUIRES:
// !s.ok() and the GIL held.
[[noreturn]] void ThrowStatus(const Status& s);
inline void Check(const Status& s) {
  if (!s.ok()) ThrowStatus(s);
}
inline void CheckArg(bool ok, const std::string& message) {
  if (!ok) ThrowStatus(Status::InvalidArgument(message));
}

// The NumPy dtype of an element type, and the element type of a dtype-like
// (np.float32, "f4", np.dtype("int64"), ...); InvalidArgument for others.
py::dtype DtypeOf(ElementType t);
ElementType ElementTypeOf(const py::handle& dtype_like);

// Calls f(T{}) with T the C++ type of `t`.
template <typename F>
auto DispatchType(ElementType t, F&& f) {
  switch (t) {
    case ElementType::kF64:
      return f(double{});
    case ElementType::kI32:
      return f(int32_t{});
    case ElementType::kI64:
      return f(int64_t{});
    case ElementType::kF32:
      break;
  }
  return f(float{});
}

// Row ids from an integer array-like (1-D, no negative values).
std::vector<uint64_t> RowIds(const py::handle& rows);

// `value` as a C-contiguous array of `dtype` with `n` elements in total
// (shape checked against `what`). Casts only within a kind ('same_kind'):
// InvalidArgument for a float array into an integer table.
py::array ContiguousAs(const py::handle& value, const py::dtype& dtype, const char* what);

// A Client shared by its Tables and Workers (they keep it alive).
class PyWorker;
struct PyClient {
  std::unique_ptr<Client> client;
  std::string data_dir;
  size_t cache_mb = 0;
  // The worker each thread created last (client.global_barrier() uses it).
  Mutex mu;
  std::unordered_map<std::thread::id, PyWorker*> thread_workers GUARDED_BY(mu);
};

struct PyTable {
  std::shared_ptr<PyClient> owner;
  Table table;
};

class PyWorker {
 public:
  PyWorker(std::shared_ptr<PyClient> owner, std::unique_ptr<Worker> worker);
  ~PyWorker();
  PyWorker(const PyWorker&) = delete;
  PyWorker& operator=(const PyWorker&) = delete;

  const std::shared_ptr<PyClient>& owner() const { return owner_; }
  // Marks the worker busy for one call: a Worker is one thread's at a time,
  // so a second thread calling into it concurrently gets FailedPrecondition
  // instead of undefined behaviour.
  class Use {
   public:
    explicit Use(PyWorker* w);
    ~Use();
    Worker* operator->() const { return w_->worker_.get(); }
    Worker* get() const { return w_->worker_.get(); }

   private:
    PyWorker* const w_;
  };
  const Table& Resolve(const PyTable& t) const;
  // Deregisters the worker (the process clock no longer waits for it) and
  // drops its reference to the client; later calls raise
  // FailedPreconditionError. Idempotent.
  void Close();
  bool closed() const { return worker_ == nullptr; }

 private:
  std::shared_ptr<PyClient> owner_;  // null once closed
  std::unique_ptr<Worker> worker_;
  std::atomic<bool> busy_{false};
  const std::thread::id creator_;
};

// The glog severity of a log level given as "info" / "warning" / "error" /
// "fatal" (any case) or 0..3; InvalidArgument otherwise. SetLogLevel sets the
// process's minimum severity (FLAGS_minloglevel).
int ParseLogLevel(const py::handle& level);
void SetLogLevel(int level);

void RegisterErrors(py::module_& m);
void RegisterClient(py::module_& m);
void RegisterWorker(py::module_& m);
void RegisterOffline(py::module_& m);
// Client.start_job, input_fingerprint. REQUIRES: RegisterClient first.
void RegisterJob(py::module_& m);

}  // namespace python
}  // namespace pace

#endif  // PACE_PYTHON_SRC_PACEDB_H_
