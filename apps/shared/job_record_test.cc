// The job record read back through an embedded client: a record whose rows
// the shards have applied only in part is not yet written (another client
// of a fresh job that reads it then must not refuse the job), a whole one is
// compared flag by flag, and a record of the first format (no entry count)
// is whole.
#include "apps/shared/job_record.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "client/pace.h"
#include "common/scoped_temp_dir.h"

namespace pace {
namespace apps {
namespace {

JobDescription Job(const std::string& rank) {
  JobDescription job;
  job.app = "pace_mf";
  job.table_prefix = "mf";
  job.input = 0x1234;
  job.input_desc = "ratings.txt";
  job.flags = {{"rank", rank}, {"lr", "0.08"}};
  return job;
}

TableSchema RecordSchema() {
  TableSchema s;
  s.name = "mf.job";
  s.kind = RowKind::kDense;
  s.type = ElementType::kI64;
  s.width = kJobRecordWidth;
  s.consistency = Consistency::kAsync;
  return s;
}

class JobRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClientOptions o;
    o.data_dir = dir_.path() + "/store";
    ASSERT_TRUE(Client::Open(o, &client_).ok());
    ASSERT_TRUE(client_->CreateTable(RecordSchema(), &table_).ok());
    ASSERT_TRUE(client_->RegisterWorker(&worker_).ok());
  }

  // Adds entries [first, last) of `entries` as rows first.. and ends the clock.
  void Write(const std::vector<std::pair<std::string, std::string>>& entries, size_t first,
             size_t last) {
    for (size_t r = first; r < last; ++r) {
      const std::string text = entries[r].first + "=" + entries[r].second;
      int64_t row[kJobRecordWidth] = {};
      ASSERT_LT(text.size(), sizeof(row));
      std::memcpy(row, text.data(), text.size());
      ASSERT_TRUE(worker_->Inc(table_, r, row).ok());
    }
    ASSERT_TRUE(worker_->Clock().ok());
    ASSERT_TRUE(client_->Flush().ok());
  }

  Status Precheck(const JobDescription& job) {
    std::string recorded;
    return PrecheckJob(client_.get(), job, /*resume=*/false, "", &recorded);
  }

  ScopedTempDir dir_;
  std::unique_ptr<Client> client_;
  Table table_;
  std::unique_ptr<Worker> worker_;
};

TEST_F(JobRecordTest, ARecordAppliedInPartIsNotYetWritten) {
  const auto entries = JobEntries(Job("16"), 0);
  ASSERT_EQ(entries[0].first, "entries");
  ASSERT_EQ(entries[0].second, std::to_string(entries.size()));
  // Rows 0..2 applied (entries, format, app), the rest not yet: a reader
  // sees `app` but no table prefix and no flags. Before the entry count this
  // refused the job ("it has --rank=(not recorded)").
  Write(entries, 0, 3);
  EXPECT_TRUE(Precheck(Job("32")).ok());
  // The whole record: compared.
  Write(entries, 3, entries.size());
  EXPECT_TRUE(Precheck(Job("16")).ok());
  Status s = Precheck(Job("32"));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.ToString().find("it has --rank=16, this run --rank=32"), std::string::npos)
      << s.ToString();
}

TEST_F(JobRecordTest, ARecordOfTheFirstFormatIsWhole) {
  auto entries = JobEntries(Job("16"), 0);
  entries.erase(entries.begin());  // no entry count
  entries[0].second = "1";         // format=1
  Write(entries, 0, entries.size());
  EXPECT_TRUE(Precheck(Job("16")).ok());
  Status s = Precheck(Job("32"));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
}

}  // namespace
}  // namespace apps
}  // namespace pace
