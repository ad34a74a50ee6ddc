// PYBIND11_MODULE for pacedb._pacedb (imported by pacedb/__init__.py).
#include "python/src/pacedb.h"

PYBIND11_MODULE(_pacedb, m) {
  m.doc() = "PaceDB client for Python (see python/README.md)";
  pace::python::RegisterErrors(m);
  pace::python::RegisterClient(m);
  pace::python::RegisterWorker(m);
  pace::python::RegisterOffline(m);
}
