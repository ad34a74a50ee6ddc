// PYBIND11_MODULE for pacedb._pacedb (imported by pacedb/__init__.py), and the
// module-level functions: the log level and the version.
#include <glog/logging.h>

#include <algorithm>
#include <cctype>

#include "python/src/pacedb.h"

#ifndef PACEDB_VERSION
#define PACEDB_VERSION "unknown"
#endif

namespace pace {
namespace python {

namespace {

constexpr const char* kLevelNames[] = {"info", "warning", "error", "fatal"};

}  // namespace

int ParseLogLevel(const py::handle& level) {
  if (py::isinstance<py::str>(level)) {
    std::string name = level.cast<std::string>();
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (int i = 0; i < 4; ++i) {
      if (name == kLevelNames[i]) return i;
    }
    ThrowStatus(
        Status::InvalidArgument("log level must be \"info\", \"warning\", \"error\" or "
                                "\"fatal\" (or 0..3), not \"" +
                                level.cast<std::string>() + "\""));
  }
  CheckArg(py::isinstance<py::int_>(level) && !py::isinstance<py::bool_>(level),
           "log level must be a name (\"info\", \"warning\", \"error\", \"fatal\") or 0..3");
  const int64_t n = level.cast<int64_t>();
  CheckArg(n >= 0 && n <= 3, "log level must be in 0..3 (info..fatal), got " + std::to_string(n));
  return static_cast<int>(n);
}

void SetLogLevel(int level) { FLAGS_minloglevel = level; }

}  // namespace python
}  // namespace pace

PYBIND11_MODULE(_pacedb, m) {
  namespace py = pybind11;
  m.doc() = "PaceDB client for Python (see python/README.md)";
  m.attr("__version__") = PACEDB_VERSION;
  pace::python::RegisterErrors(m);
  pace::python::RegisterClient(m);
  pace::python::RegisterWorker(m);
  pace::python::RegisterOffline(m);
  pace::python::RegisterJob(m);
  m.def(
      "set_log_level",
      [](const py::handle& level) {
        pace::python::SetLogLevel(pace::python::ParseLogLevel(level));
      },
      py::arg("level"), R"doc(
Sets the least severe log line written to stderr: "info", "warning" (the
default), "error" or "fatal" (or 0..3). Process-wide: glog is one library per
process, shared with any other extension that loaded it (PyTorch does), so the
level holds whichever was imported first.)doc");
  m.def(
      "get_log_level",
      [] {
        const int l = std::clamp(static_cast<int>(FLAGS_minloglevel), 0, 3);
        return std::string(pace::python::kLevelNames[l]);
      },
      "The current log level as a name (\"info\", \"warning\", \"error\" or \"fatal\").");
}
