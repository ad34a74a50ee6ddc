#include "tests/testing/offline_job.h"

#include <signal.h>

#include "tests/testing/run_binary.h"

namespace pace::testing {
namespace {

std::string Join(const std::vector<std::string>& parts) {
  std::string list;
  for (const std::string& p : parts) list += (list.empty() ? "" : ",") + p;
  return list;
}

// Runs a binary; Internal with its stderr unless it exits 0.
Status RunOk(const std::vector<std::string>& args, const std::string& err_path,
             std::string* out = nullptr) {
  RunResult r = RunBinary(args, err_path);
  if (out != nullptr) *out = r.out;
  if (r.exit_code == 0) return Status::OK();
  return Status::Internal(args[0] + " " + args[1] + " exited " + std::to_string(r.exit_code) +
                          ": " + r.err);
}

}  // namespace

ShardSet::~ShardSet() { Stop().IgnoreError(); }

Status ShardSet::Start(const std::vector<std::string>& dirs, uint32_t num_clients,
                       std::string* servers) {
  RETURN_IF_ERROR(Stop());
  servers->clear();
  for (uint32_t k = 0; k < dirs.size(); ++k) {
    shards_.push_back(std::make_unique<Subprocess>());
    uint16_t port = 0;
    RETURN_IF_ERROR(StartPaced(shards_.back().get(), dirs[k], k, static_cast<uint32_t>(dirs.size()),
                               num_clients, {}, &port));
    *servers += (servers->empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(port);
  }
  return Status::OK();
}

Status ShardSet::Stop(int timeout_ms) {
  for (auto& p : shards_) p->Signal(SIGTERM);
  Status status;
  for (auto& p : shards_) {
    int st = 0;
    Status s = p->Wait(timeout_ms, &st);
    if (status.ok()) status = s;
  }
  shards_.clear();
  return status;
}

Status ReshardStores(const std::vector<std::string>& dirs, uint32_t num_shards,
                     uint32_t num_clients, const std::string& out,
                     std::vector<std::string>* out_dirs, std::string* printed) {
  std::vector<std::string> ckpts;
  for (size_t k = 0; k < dirs.size(); ++k) {
    ckpts.push_back(out + ".ckpt-" + std::to_string(k));
    RETURN_IF_ERROR(RunOk({"pacectl", "--data_dir=" + dirs[k], "checkpoint", "create", ckpts[k]},
                          out + ".create.stderr"));
  }
  std::vector<std::string> args = {"pacectl",
                                   "checkpoint",
                                   "restore",
                                   Join(ckpts),
                                   "--num_shards=" + std::to_string(num_shards),
                                   "--out=" + out};
  if (num_clients > 0) args.push_back("--num_clients=" + std::to_string(num_clients));
  RETURN_IF_ERROR(RunOk(args, out + ".restore.stderr", printed));
  out_dirs->clear();
  for (uint32_t j = 0; j < num_shards; ++j)
    out_dirs->push_back(out + "/shard-" + std::to_string(j));
  return Status::OK();
}

Status ExportCsv(const std::vector<std::string>& dirs, const std::string& table,
                 const std::string& path, std::string* csv) {
  RETURN_IF_ERROR(RunOk(
      {"pacectl", "--data_dir=" + Join(dirs), "export", table, "--format=csv", "--out=" + path},
      path + ".stderr"));
  *csv = ReadFile(path);
  return Status::OK();
}

}  // namespace pace::testing
