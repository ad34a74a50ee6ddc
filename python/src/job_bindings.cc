// Client.start_job and pacedb.input_fingerprint: the job record of the C++
// apps (apps/shared/job_record.h, docs/design.md "Jobs and --resume") for
// Python jobs, so that a Python run is checked and resumed as pace_mf is.
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "apps/shared/job_record.h"
#include "python/src/pacedb.h"

namespace pace {
namespace python {

namespace {

// A flag's value as the apps print theirs: bools "true"/"false", floats the
// shortest text that reads back (ShortestDouble: 0.08, 20), others str().
std::string FlagText(const py::handle& v) {
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>() ? "true" : "false";
  if (py::isinstance<py::float_>(v)) return apps::ShortestDouble(v.cast<double>());
  return py::str(v).cast<std::string>();
}

// Adds each array's shape, dtype and bytes (C order) to the fingerprint.
void AddArrays(const py::handle& arrays, apps::InputFingerprint* fp) {
  for (const py::handle& item : arrays) {
    py::array a = py::array::ensure(item, py::array::c_style);
    CheckArg(static_cast<bool>(a), "inputs must be arrays (or array-likes)");
    fp->AddValue(static_cast<uint64_t>(a.ndim()));
    for (py::ssize_t d = 0; d < a.ndim(); ++d) fp->AddValue(static_cast<uint64_t>(a.shape(d)));
    const std::string dtype = py::str(a.dtype()).cast<std::string>();
    fp->Add(dtype.data(), dtype.size() + 1);
    const void* data = a.data();
    const size_t bytes = static_cast<size_t>(a.nbytes());
    py::gil_scoped_release release;
    fp->Add(data, bytes);
  }
}

uint64_t Fingerprint(const py::handle& arrays) {
  apps::InputFingerprint fp;
  AddArrays(arrays, &fp);
  return fp.value();
}

ClockT StartJob(const std::shared_ptr<PyClient>& c, const std::string& app,
                const std::string& table_prefix, const py::object& flags, const py::object& inputs,
                const std::string& input_desc, bool resume) {
  if (!c->client) ThrowStatus(Status::FailedPrecondition("the client is closed"));
  CheckArg(!app.empty(), "app must not be empty");
  CheckArg(!table_prefix.empty(), "table_prefix must not be empty");
  apps::JobDescription job;
  job.app = app;
  job.table_prefix = table_prefix;
  job.input_desc = input_desc;
  job.input = Fingerprint(inputs);
  if (!flags.is_none()) {
    for (const auto& [key, value] : flags.cast<py::dict>()) {
      job.flags.emplace_back(py::str(key).cast<std::string>(), FlagText(value));
    }
  }
  Status s;
  {
    py::gil_scoped_release release;
    s = apps::CheckAndRecordJob(c->client.get(), job, resume);
  }
  Check(s);
  return c->client->start_clock();
}

}  // namespace

void RegisterJob(py::module_& m) {
  m.def("input_fingerprint", &Fingerprint, py::arg("arrays"),
        "The 64-bit FNV-1a fingerprint of arrays (shapes, dtypes and bytes, in order) that "
        "Client.start_job records.");
  auto client =
      py::reinterpret_borrow<py::class_<PyClient, std::shared_ptr<PyClient>>>(m.attr("Client"));
  client.def("start_job", &StartJob, py::arg("app"), py::arg("table_prefix"),
             py::arg("flags") = py::none(), py::arg("inputs") = py::tuple(),
             py::arg("input_desc") = "", py::arg("resume") = false, R"doc(
Checks the store against the job this run would train, and records a fresh job:
the job record of pace_mf and pace_lda (the table "<table_prefix>.job": app,
table prefix, the flags that shape the model, a fingerprint of `inputs`). Call
it right after opening the client, before creating tables. Returns the clock
the job resumes at (start_clock; 0 for a fresh job).

flags: {name: value} of the options that shape the model (floats recorded as
the shortest text that reads back). inputs: arrays the model learns from
(input_fingerprint). resume: continue the stored job.

FailedPreconditionError, one line saying why and what to do: a fresh run on a
store whose job is past clock 0; a resume of a store without a job, of another
app's or table prefix's job, or with other flags or inputs (naming them).)doc");
}

}  // namespace python
}  // namespace pace
