// What both apps do right after Client::Open: check and record the job,
// open the per-clock CSV, start the metrics endpoint, and watch for a run
// that waits on another client process (WaitReporter).
//
// Uses only the public client API (client/pace.h, client/metrics.h).
#ifndef PACE_APPS_SHARED_JOB_START_H_
#define PACE_APPS_SHARED_JOB_START_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "apps/shared/job_record.h"
#include "apps/shared/report.h"
#include "client/metrics.h"
#include "client/pace.h"
#include "common/status.h"

namespace pace {
namespace apps {

// A thread that notices when this process has sent no batch for wait_ms and
// some other client process holds a shard clock back, and then prints one
// line on stderr saying whom the run waits for:
//   pace_mf: waiting for client 1 (not connected) at clock 0, for 5 s
// It repeats at doubling intervals while the wait lasts. Stops (and joins)
// in the destructor. Thread-safe.
class WaitReporter {
 public:
  WaitReporter(std::string program, Client* client, int64_t wait_ms);
  ~WaitReporter();
  WaitReporter(const WaitReporter&) = delete;
  WaitReporter& operator=(const WaitReporter&) = delete;

  // "client 1 (not connected) at clock 0, client 2 at clock 3"; the laggards
  // other than `self`.
  static std::string Describe(const std::vector<ClientLag>& laggards, ClientId self);

 private:
  void Run();

  const std::string program_;
  Client* const client_;
  const int64_t wait_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

// What an app keeps alive while it trains.
struct JobSession {
  std::unique_ptr<ClientMetricsServer> metrics;
  std::unique_ptr<WaitReporter> waits;
};

struct JobStartOptions {
  const char* program = "";
  bool resume = false;
  std::string csv;             // --csv: appended to on --resume
  std::string metrics_listen;  // --metrics_listen
  // The wait reporter's threshold; 0: none. Only with several clients.
  int64_t wait_report_ms = 5000;
  // If not null: the split the job record held before this run
  // (CheckAndRecordJob's *recorded). Default: null.
  JobSplit* recorded_split = nullptr;
};

// CheckAndRecordJob, then the CSV (report->OpenCsv), the metrics endpoint
// (prints "# metrics on HOST:PORT") and the wait reporter. Errors: those of
// each step, the last two prefixed with the flag.
Status StartJob(Client* client, const JobDescription& job, const JobStartOptions& options,
                ReportWriter* report, JobSession* session);

}  // namespace apps
}  // namespace pace

#endif  // PACE_APPS_SHARED_JOB_START_H_
