#include "apps/shared/job_record.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "common/schema.h"

namespace pace {
namespace apps {
namespace {

using Entries = std::map<std::string, std::string>;

constexpr char kSuffix[] = ".job";
constexpr size_t kEntryBytes = kJobRecordWidth * sizeof(int64_t);
constexpr uint64_t kMaxEntries = 256;

TableSchema JobTableSchema(const std::string& prefix) {
  TableSchema s;
  s.name = prefix + kSuffix;
  s.kind = RowKind::kDense;
  s.type = ElementType::kI64;
  s.width = kJobRecordWidth;
  s.consistency = Consistency::kAsync;
  s.staleness = 0;
  return s;
}

bool IsJobTable(const TableSchema& s) {
  const size_t n = std::strlen(kSuffix);
  return s.name.size() > n && s.name.compare(s.name.size() - n, n, kSuffix) == 0 &&
         s.kind == RowKind::kDense && s.type == ElementType::kI64 && s.width == kJobRecordWidth;
}

std::string Quote(const std::string& v) { return v.empty() ? "''" : v; }

// A stored record: its entries, the row of each, and the first all-zero row.
struct Record {
  Entries entries;
  std::map<std::string, uint64_t> row_of;
  uint64_t end = 0;
  // Whether every entry the writer added has been applied. The rows of a
  // record live on the shards the placement hash picks, which apply the
  // writer's first clock each in its own time: another client that reads
  // the record meanwhile sees a prefix of it. A record of format 2 on says
  // in row 0 how many entries it was written with; format 1 (row 0 is
  // `format`) is taken as complete.
  bool Complete() const {
    if (entries.empty()) return false;
    auto it = entries.find("entries");
    if (it == entries.end()) return true;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(it->second.c_str(), &end, 10);
    return *end == '\0' && entries.size() >= n;
  }
};

// The 128 bytes of an entry as a row; text longer than an entry is cut.
void EntryRow(const std::string& key, const std::string& value, int64_t row[kJobRecordWidth]) {
  std::string entry = key + "=" + value;
  if (entry.size() > kEntryBytes - 1) entry.resize(kEntryBytes - 1);
  std::memset(row, 0, kEntryBytes);
  std::memcpy(row, entry.data(), entry.size());
}

// Reads rows 0, 1, ... up to the first all-zero one.
Status ReadRecord(Worker* worker, const Table& t, Record* out) {
  *out = Record();
  for (uint64_t r = 0; r < kMaxEntries; ++r) {
    int64_t row[kJobRecordWidth];
    RETURN_IF_ERROR(worker->Get(t, r, row).WithPrefix("reading the job record " + t.name()));
    char bytes[kEntryBytes + 1];
    std::memcpy(bytes, row, kEntryBytes);
    bytes[kEntryBytes] = '\0';
    std::string entry(bytes);
    out->end = r + 1;
    if (entry.empty()) {
      out->end = r;
      break;
    }
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    out->entries[entry.substr(0, eq)] = entry.substr(eq + 1);
    out->row_of[entry.substr(0, eq)] = r;
  }
  return Status::OK();
}

std::string Get(const Entries& e, const std::string& key) {
  auto it = e.find(key);
  return it == e.end() ? std::string() : it->second;
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// "the pace_mf job 'mf' at clock 40"
std::string NameJob(const Entries& e, ClockT clock) {
  std::string app = Get(e, "app");
  return "the " + (app.empty() ? std::string("unknown") : app) + " job '" + Get(e, "table_prefix") +
         "' at clock " + std::to_string(clock);
}

// Why the stored record `e` is not the job `job`, or "" if it is. The flag
// `unset` (if not empty) is not compared.
std::string Differences(const Entries& e, const JobDescription& job, ClockT first_clock,
                        const std::string& unset = "") {
  if (Get(e, "app") != job.app)
    return "it is a " + Get(e, "app") + " job, not a " + job.app + " one";
  std::string diff;
  for (const auto& [key, value] : JobEntries(job, first_clock)) {
    if (key.compare(0, 5, "flag.") != 0) continue;
    if (!unset.empty() && key.compare(5, std::string::npos, unset) == 0) continue;
    auto it = e.find(key);
    std::string stored = it == e.end() ? "(not recorded)" : it->second;
    if (stored == value) continue;
    if (!diff.empty()) diff += ", ";
    const std::string flag = "--" + key.substr(5);
    diff += "it has " + flag + "=" + Quote(stored) + ", this run " + flag + "=" + Quote(value);
  }
  if (!diff.empty()) return diff;
  if (Get(e, "input") != Hex(job.input)) {
    return "its input data differ from this run's (it was trained on " + Get(e, "input_desc") +
           ", fingerprint " + Get(e, "input") + "; this run reads " + job.input_desc +
           ", fingerprint " + Hex(job.input) + ")";
  }
  return "";
}

Status WriteEntries(Worker* worker, const Table& t, const JobDescription& job, ClockT first) {
  uint64_t r = 0;
  for (const auto& [key, value] : JobEntries(job, first)) {
    int64_t row[kJobRecordWidth];
    EntryRow(key, value, row);
    RETURN_IF_ERROR(worker->Inc(t, r++, row).WithPrefix("writing the job record"));
  }
  return Status::OK();
}

// The split entries of a record; num_clients 0 if it has none (or a bad one).
JobSplit StoredSplit(const Entries& e) {
  JobSplit split;
  const std::string clients = Get(e, "num_clients"), workers = Get(e, "workers"),
                    since = Get(e, "split_clock");
  if (clients.empty() || workers.empty() || since.empty()) return split;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(clients.c_str(), &end, 10);
  if (*end != '\0') return split;
  const unsigned long long w = std::strtoull(workers.c_str(), &end, 10);
  if (*end != '\0') return split;
  const long long c = std::strtoll(since.c_str(), &end, 10);
  if (*end != '\0' || n == 0 || n > UINT32_MAX || w == 0 || w > UINT32_MAX || c < 0) return split;
  split.num_clients = static_cast<uint32_t>(n);
  split.workers = static_cast<uint32_t>(w);
  split.since = c;
  return split;
}

std::vector<std::pair<std::string, std::string>> SplitEntries(const JobSplit& split, ClockT since) {
  return {{"num_clients", std::to_string(split.num_clients)},
          {"workers", std::to_string(split.workers)},
          {"split_clock", std::to_string(since)}};
}

// Rewrites the split entries of the stored record `stored` to `split` from
// clock `since`: an entry the record has gets the difference of the new row
// and the old one added (the rows are i64 deltas that add), a new one goes
// to the first all-zero row. Goes out with the worker's next clock.
Status RewriteSplit(Worker* worker, const Table& t, const Record& stored, const JobSplit& split,
                    ClockT since) {
  uint64_t next = stored.end;
  for (const auto& [key, value] : SplitEntries(split, since)) {
    int64_t row[kJobRecordWidth];
    EntryRow(key, value, row);
    uint64_t r = next;
    auto at = stored.row_of.find(key);
    if (at != stored.row_of.end()) {
      r = at->second;
      int64_t old[kJobRecordWidth];
      EntryRow(key, stored.entries.at(key), old);
      // Wrapping arithmetic: the text bytes are below 0x80, so every i64
      // of either row is non-negative and the sum is the new row exactly.
      for (uint32_t k = 0; k < kJobRecordWidth; ++k) {
        row[k] =
            static_cast<int64_t>(static_cast<uint64_t>(row[k]) - static_cast<uint64_t>(old[k]));
      }
    } else {
      ++next;
    }
    RETURN_IF_ERROR(worker->Inc(t, r, row).WithPrefix("writing the job record's split"));
  }
  return Status::OK();
}

}  // namespace

Status RecordIdNames(Client* client, bool resume, const std::string& name,
                     const std::vector<std::string>& names) {
  if (resume || client->client_id() != 0 || client->start_clock() != 0 || names.empty()) {
    return Status::OK();
  }
  TableSchema s;
  s.name = name;
  s.kind = RowKind::kDense;
  s.type = ElementType::kI64;
  s.width = kIdNameWidth;
  s.consistency = Consistency::kAsync;
  Table t;
  RETURN_IF_ERROR(client->CreateTable(s, &t).WithPrefix("creating " + name));
  std::unique_ptr<Worker> worker;
  RETURN_IF_ERROR(client->RegisterWorker(&worker));
  std::vector<uint64_t> rows(names.size());
  std::vector<int64_t> values(names.size() * kIdNameWidth, 0);
  for (size_t r = 0; r < names.size(); ++r) {
    rows[r] = r;
    std::memcpy(&values[r * kIdNameWidth], names[r].data(),
                std::min<size_t>(names[r].size(), kIdNameWidth * sizeof(int64_t)));
  }
  return worker->Inc(t, rows, values.data()).WithPrefix("writing " + name);
}

std::string ShortestDouble(double v) {
  char buf[40];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof(buf), "%.*g", p, v);
    if (std::strtod(buf, nullptr) != v) continue;
    // 10, not 1e+01: exponents only where %g would use them at full precision.
    if (std::strchr(buf, 'e') == nullptr || std::fabs(v) < 1e-4 || std::fabs(v) >= 1e15) break;
  }
  return buf;
}

std::string JobSplit::Text() const {
  return std::to_string(num_clients) + (num_clients == 1 ? " client x " : " clients x ") +
         std::to_string(workers) + (workers == 1 ? " worker" : " workers");
}

void InputFingerprint::Add(const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h_ ^= p[i];
    h_ *= 1099511628211ull;
  }
}

std::vector<std::pair<std::string, std::string>> JobEntries(const JobDescription& job,
                                                            ClockT first_clock) {
  std::vector<std::pair<std::string, std::string>> e = {
      {"entries", ""},  // row 0: the number of entries, set below
      {"format", std::to_string(kJobRecordFormat)},
      {"app", job.app},
      {"table_prefix", job.table_prefix},
      {"first_clock", std::to_string(first_clock)},
      {"input", Hex(job.input)},
      {"input_desc", job.input_desc},
  };
  for (const auto& [name, value] : job.flags) e.emplace_back("flag." + name, value);
  if (job.split.num_clients > 0) {
    for (auto& entry : SplitEntries(job.split, first_clock)) e.push_back(std::move(entry));
  }
  e[0].second = std::to_string(e.size());
  return e;
}

namespace {

// CheckAndRecordJob (write) or PrecheckJob (!write, not comparing `unset`).
Status CheckJob(Client* client, const JobDescription& job, bool resume, bool write,
                const std::string& unset, std::string* recorded, JobSplit* split) {
  const std::string where = client->embedded() ? "the data dir" : "the servers";
  const std::string holds = client->embedded() ? " holds " : " hold ";
  const std::string fresh_advice =
      client->embedded() ? "start a new job with another --data_dir (or delete this one)"
                         : "start a new job on servers with fresh --data_dirs";
  const ClockT clock = client->start_clock();
  const std::string own_name = job.table_prefix + kSuffix;

  std::vector<TableSchema> tables;
  RETURN_IF_ERROR(client->ListTables(&tables).WithPrefix("listing the tables"));
  std::unique_ptr<Worker> worker;
  RETURN_IF_ERROR(client->RegisterWorker(&worker));
  Table own_table;
  std::optional<Record> own_record;
  std::optional<Entries> other;
  for (const TableSchema& schema : tables) {
    if (!IsJobTable(schema)) continue;
    Table t;
    RETURN_IF_ERROR(client->OpenTable(schema.name, &t));
    Record r;
    RETURN_IF_ERROR(ReadRecord(worker.get(), t, &r));
    // Not yet applied, or in part: another client's first clock in flight.
    if (!r.Complete()) continue;
    if (schema.name == own_name) {
      own_table = t;
      own_record = std::move(r);
    } else if (!other) {
      other = std::move(r.entries);
    }
  }
  const std::string run = resume ? "--resume: " : "";

  if (own_record) {
    const Entries* own = &own_record->entries;
    if (recorded != nullptr) *recorded = Get(*own, "flag." + unset);
    std::string why = Differences(*own, job, 0, unset);
    if (clock > 0 && !resume) {
      return Status::FailedPrecondition(
          where + holds + NameJob(*own, clock) + ": pass --resume to continue it" +
          (why.empty() ? "" : " (with the job's flags and data: " + why + ")") + ", or " +
          fresh_advice);
    }
    if (!why.empty()) {
      return Status::FailedPrecondition(
          run + where + holds + NameJob(*own, clock) + " and " + why + ": " +
          (resume ? "rerun with the job's flags and data, or " : "") + fresh_advice);
    }
    const JobSplit stored = StoredSplit(*own);
    if (split != nullptr) *split = stored;
    if (!write || !resume || client->client_id() != 0 || job.split.num_clients == 0 ||
        stored.SameParts(job.split)) {
      return Status::OK();
    }
    return RewriteSplit(worker.get(), own_table, *own_record, job.split, clock);
  }
  if (other) {
    std::string advice = fresh_advice;
    if (Get(*other, "app") == job.app) {
      advice = "rerun with --table_prefix=" + Get(*other, "table_prefix") + ", or " + advice;
    }
    return Status::FailedPrecondition(run + where + holds + NameJob(*other, clock) + ", not a " +
                                      job.app + " job with --table_prefix=" + job.table_prefix +
                                      ": " + advice);
  }
  if (clock > 0) {
    return Status::FailedPrecondition(
        run + where + holds + "a job at clock " + std::to_string(clock) +
        " without a job record (made by an older PaceDB or another program), so it cannot be "
        "checked: " +
        fresh_advice);
  }
  if (resume) {
    return Status::FailedPrecondition("--resume: " + where + holds +
                                      "no job to resume: run without --resume to start it");
  }
  if (!write || client->client_id() != 0) return Status::OK();
  Table t;
  RETURN_IF_ERROR(client->CreateTable(JobTableSchema(job.table_prefix), &t)
                      .WithPrefix("creating the job record"));
  return WriteEntries(worker.get(), t, job, clock);
}

}  // namespace

Status CheckAndRecordJob(Client* client, const JobDescription& job, bool resume,
                         JobSplit* recorded) {
  if (recorded != nullptr) *recorded = JobSplit();
  return CheckJob(client, job, resume, /*write=*/true, "", nullptr, recorded);
}

Status PrecheckJob(Client* client, const JobDescription& job, bool resume,
                   const std::string& unset_flag, std::string* recorded) {
  recorded->clear();
  return CheckJob(client, job, resume, /*write=*/false, unset_flag, recorded, nullptr);
}

}  // namespace apps
}  // namespace pace
