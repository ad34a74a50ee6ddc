// The job record: what a store's clocks belong to (docs/design.md, "Jobs and --resume"), so that
// --resume continues only the same job and refuses anything else.
//
// A store holds one job. Its record is the table PREFIX.job (dense i64 rows of
// kJobRecordWidth, async, zeros): row r holds one NUL-padded "key=value" text
// entry, rows 0, 1, ... up to the first all-zero row. Entries: entries (how
// many the record was written with: a reader that finds fewer, because the
// shards have applied the writer's first clock in part, treats the record
// as not yet written), format, app,
// table_prefix, first_clock, input (a fingerprint of the input data),
// input_desc (the input files, for messages), flag.NAME for every flag that
// shapes the model, and (apps that split their data by client process and
// worker) num_clients, workers and split_clock: how the job splits its data
// now and from which clock. Client 0 of a fresh job writes it with its first
// clock's batch, so the record is durable exactly when the job's first clock
// is; client 0 of a resumed job that splits its data another way rewrites
// the split entries with its first clock's batch. Format:
// docs/storage-format.md ("Job record").
//
// Uses only the public client API (client/pace.h).
#ifndef PACE_APPS_SHARED_JOB_RECORD_H_
#define PACE_APPS_SHARED_JOB_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "client/pace.h"
#include "common/status.h"

namespace pace {
namespace apps {

constexpr uint32_t kJobRecordWidth = 16;  // 128 bytes per entry
constexpr int kJobRecordFormat = 2;

// How a job's data are dealt to its workers: num_clients processes of
// `workers` workers each, from clock `since` on. num_clients == 0: the app
// records no split (the record has no split entries).
struct JobSplit {
  uint32_t num_clients = 0;
  uint32_t workers = 0;
  ClockT since = 0;
  // "2 clients x 1 worker"
  std::string Text() const;
  bool SameParts(const JobSplit& o) const {
    return num_clients == o.num_clients && workers == o.workers;
  }
};

// What a run would train: compared entry by entry with the stored record.
struct JobDescription {
  std::string app;           // "pace_mf"
  std::string table_prefix;  // "mf"
  // Fingerprint of the input data as loaded (InputFingerprint), and the
  // files it came from (for messages only).
  uint64_t input = 0;
  std::string input_desc;
  // The flags that shape the model, as name and printed value.
  std::vector<std::pair<std::string, std::string>> flags;
  // The split this run trains with (not compared: an app that can continue
  // with another split re-partitions; split.since is ignored, the run's
  // start clock is recorded). Default: none recorded.
  JobSplit split;
};

// 64-bit FNV-1a, for input fingerprints: feed the loaded data in a fixed order.
class InputFingerprint {
 public:
  void Add(const void* data, size_t n);
  template <typename T>
  void AddValue(const T& v) {
    Add(&v, sizeof(v));
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 1469598103934665603ull;
};

// The shortest "%g" text that reads back as v: 0.08, not 0.080000000000000002.
std::string ShortestDouble(double v);

// Checks the store behind `client` against the job `job` before anything is
// created, and in client 0 of a fresh job starts recording it (the entries go
// out with the first clock's batch). Call after Client::Open and before the
// app creates its tables. Errors (one line: why and what to do), all
// FailedPrecondition:
// - resume: the store holds no job, another app's job, a job of another
//   table prefix, or one whose flags or input data differ;
// - fresh (!resume): the store holds a job past clock 0, or a record of
//   another job.
// With job.split set, client 0 of a resumed job whose record holds another
// split (or none) rewrites the split entries (split_clock = the resume
// clock); *recorded (if not null) = the split the record held before this
// run (num_clients 0 if none, or a fresh job).
Status CheckAndRecordJob(Client* client, const JobDescription& job, bool resume,
                         JobSplit* recorded = nullptr);

// CheckAndRecordJob's checks, writing nothing and leaving out the flag
// `unset_flag`, one this run has not chosen yet (pace_mf's --lr before its
// step-size search): a store that no value of it could make right is refused
// before a long computation, and *recorded = the flag's value in the job's
// record ("" if the store holds no record of this job), which a resumed run
// reuses instead of choosing again. Call after Client::Open; then
// CheckAndRecordJob (StartJob) with the full description.
Status PrecheckJob(Client* client, const JobDescription& job, bool resume,
                   const std::string& unset_flag, std::string* recorded);

// Stores string ids beside the model: table `name` (dense i64 rows of
// kIdNameWidth, async, zeros), row r holding names[r] NUL-padded (a numpy
// view of its npy export as 'S64' gives the strings). Written by client 0 of
// a fresh job with its first clock's batch (as the job record); other runs
// do nothing (a resumed job's names are fixed by its input fingerprint).
// REQUIRES: every name is at most 8 * kIdNameWidth bytes.
constexpr uint32_t kIdNameWidth = 8;
Status RecordIdNames(Client* client, bool resume, const std::string& name,
                     const std::vector<std::string>& names);

// The "key=value" entries of a record (exposed for tests).
std::vector<std::pair<std::string, std::string>> JobEntries(const JobDescription& job,
                                                            ClockT first_clock);

}  // namespace apps
}  // namespace pace

#endif  // PACE_APPS_SHARED_JOB_RECORD_H_
