#include "apps/shared/job_start.h"

#include <chrono>
#include <cstdio>

namespace pace {
namespace apps {

WaitReporter::WaitReporter(std::string program, Client* client, int64_t wait_ms)
    : program_(std::move(program)), client_(client), wait_ms_(wait_ms) {
  thread_ = std::thread([this] { Run(); });
}

WaitReporter::~WaitReporter() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::string WaitReporter::Describe(const std::vector<ClientLag>& laggards, ClientId self) {
  std::string text;
  for (const ClientLag& lag : laggards) {
    if (lag.client == self) continue;
    if (!text.empty()) text += ", ";
    text += "client " + std::to_string(lag.client) + (lag.connected ? "" : " (not connected)") +
            " at clock " + std::to_string(lag.applied);
  }
  return text;
}

void WaitReporter::Run() {
  using Clock = std::chrono::steady_clock;
  const auto poll = std::chrono::milliseconds(std::min<int64_t>(1000, wait_ms_));
  uint64_t last_batches = client_->Stats().batches_sent;
  Clock::time_point since = Clock::now();
  int64_t next_report_ms = wait_ms_;
  std::unique_lock<std::mutex> l(mu_);
  while (!cv_.wait_for(l, poll, [this] { return stop_; })) {
    const uint64_t batches = client_->Stats().batches_sent;
    const auto now = Clock::now();
    if (batches != last_batches) {
      last_batches = batches;
      since = now;
      next_report_ms = wait_ms_;
      continue;
    }
    const int64_t waited_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - since).count();
    if (waited_ms < next_report_ms) continue;
    next_report_ms = std::min<int64_t>(2 * next_report_ms, 10 * 60 * 1000);
    l.unlock();
    std::vector<ClientLag> laggards;
    const Status s = client_->Laggards(&laggards);
    const std::string who = s.ok() ? Describe(laggards, client_->client_id()) : "";
    if (!who.empty()) {
      std::fprintf(stderr, "%s: waiting for %s, for %lld s\n", program_.c_str(), who.c_str(),
                   static_cast<long long>(waited_ms / 1000));
      std::fflush(stderr);
    }
    l.lock();
  }
}

Status StartJob(Client* client, const JobDescription& job, const JobStartOptions& options,
                ReportWriter* report, JobSession* session) {
  RETURN_IF_ERROR(CheckAndRecordJob(client, job, options.resume, options.recorded_split));
  if (!options.csv.empty()) RETURN_IF_ERROR(report->OpenCsv(options.csv, options.resume));
  if (!options.metrics_listen.empty()) {
    RETURN_IF_ERROR(ClientMetricsServer::Start(options.metrics_listen, client, &session->metrics)
                        .WithPrefix("--metrics_listen"));
    std::printf("# metrics on %s\n", session->metrics->address().c_str());
    std::fflush(stdout);
  }
  if (options.wait_report_ms > 0 && client->num_clients() > 1) {
    session->waits =
        std::make_unique<WaitReporter>(options.program, client, options.wait_report_ms);
  }
  return Status::OK();
}

}  // namespace apps
}  // namespace pace
