#include "net/testing/sample_messages.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>

#include "net/codec.h"

namespace pace::net::testing {
namespace {

constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();

RowData Row(uint32_t table, uint64_t row, std::string bytes) {
  return RowData{table, row, std::move(bytes)};
}

std::vector<RowData> SampleRows() {
  std::string dense(16, '\0');
  float values[4] = {1.5f, -2.25f, 0.0f, 3e38f};
  std::memcpy(dense.data(), values, sizeof(values));
  return {Row(7, 0, dense), Row(UINT32_MAX, UINT64_MAX, std::string("\0\x01\xff", 3)),
          Row(3, 12345678901234ull, ""), Row(0, 1, std::string(1000, 'x'))};
}

// Compares field by field, remembering the first difference.
class Diff {
 public:
  template <typename T>
  void Field(const char* name, const T& a, const T& b) {
    if (!(a == b) && first_.empty()) first_ = name;
  }
  void Float(const char* name, double a, double b) {
    bool same = (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof(double)) == 0;
    if (!same && first_.empty()) first_ = name;
  }
  void Schema(const char* name, const TableSchema& a, const TableSchema& b) {
    std::string prefix(name);
    Field((prefix + ".id").c_str(), a.id, b.id);
    Field((prefix + ".name").c_str(), a.name, b.name);
    Field((prefix + ".kind").c_str(), a.kind, b.kind);
    Field((prefix + ".type").c_str(), a.type, b.type);
    Field((prefix + ".width").c_str(), a.width, b.width);
    Field((prefix + ".consistency").c_str(), a.consistency, b.consistency);
    Field((prefix + ".staleness").c_str(), a.staleness, b.staleness);
    Field((prefix + ".init.kind").c_str(), a.init.kind, b.init.kind);
    Float((prefix + ".init.a").c_str(), a.init.a, b.init.a);
    Float((prefix + ".init.b").c_str(), a.init.b, b.init.b);
    Field((prefix + ".init.seed").c_str(), a.init.seed, b.init.seed);
    Float((prefix + ".value_bound").c_str(), a.value_bound, b.value_bound);
  }
  template <typename Row>  // RowData or DeltaRow (which has no absent flag)
  void Rows(const char* name, const std::vector<Row>& a, const std::vector<Row>& b) {
    std::string prefix(name);
    Field((prefix + ".size()").c_str(), a.size(), b.size());
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      std::string p = prefix + "[" + std::to_string(i) + "]";
      Field((p + ".table").c_str(), a[i].table, b[i].table);
      Field((p + ".row").c_str(), a[i].row, b[i].row);
      Field((p + ".bytes").c_str(), a[i].bytes, b[i].bytes);
      if constexpr (std::is_same_v<Row, RowData>) {
        Field((p + ".absent").c_str(), a[i].absent, b[i].absent);
      }
    }
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

void Compare(Diff& d, const Hello& a, const Hello& b) {
  d.Field("wire_version", a.wire_version, b.wire_version);
  d.Field("client_id", a.client_id, b.client_id);
  d.Field("token", a.token, b.token);
  d.Field("role", a.role, b.role);
  d.Field("incarnation", a.incarnation, b.incarnation);
  d.Field("job", a.job, b.job);
  d.Field("features", a.features, b.features);
}
void Compare(Diff& d, const Welcome& a, const Welcome& b) {
  d.Field("wire_version", a.wire_version, b.wire_version);
  d.Field("shard_id", a.shard_id, b.shard_id);
  d.Field("num_shards", a.num_shards, b.num_shards);
  d.Field("num_clients", a.num_clients, b.num_clients);
  d.Field("applied_clock", a.applied_clock, b.applied_clock);
  d.Field("shard_clock", a.shard_clock, b.shard_clock);
  d.Field("applied_parts", a.applied_parts, b.applied_parts);
  d.Field("job", a.job, b.job);
  d.Field("max_frame_bytes", a.max_frame_bytes, b.max_frame_bytes);
}
void Compare(Diff& d, const Read& a, const Read& b) {
  d.Field("req_id", a.req_id, b.req_id);
  d.Field("table", a.table, b.table);
  d.Field("rows", a.rows, b.rows);
  d.Field("min_version", a.min_version, b.min_version);
  d.Field("subscribe", a.subscribe, b.subscribe);
}
void Compare(Diff& d, const ReadReply& a, const ReadReply& b) {
  d.Field("req_id", a.req_id, b.req_id);
  d.Field("version", a.version, b.version);
  d.Field("applied_clock", a.applied_clock, b.applied_clock);
  d.Rows("rows", a.rows, b.rows);
}
void Compare(Diff& d, const Apply& a, const Apply& b) {
  d.Field("clock", a.clock, b.clock);
  d.Rows("updates", a.updates, b.updates);
}
void Compare(Diff& d, const Ack& a, const Ack& b) {
  d.Field("clock", a.clock, b.clock);
  d.Field("duplicate", a.duplicate, b.duplicate);
}
void Compare(Diff& d, const Push& a, const Push& b) {
  d.Field("version", a.version, b.version);
  d.Field("applied_clock", a.applied_clock, b.applied_clock);
  d.Rows("rows", a.rows, b.rows);
}
void Compare(Diff& d, const PushDone& a, const PushDone& b) {
  d.Field("version", a.version, b.version);
  d.Field("applied_clock", a.applied_clock, b.applied_clock);
}
void Compare(Diff& d, const Unsubscribe& a, const Unsubscribe& b) {
  d.Field("table", a.table, b.table);
  d.Field("rows", a.rows, b.rows);
}
void Compare(Diff& d, const CreateTable& a, const CreateTable& b) {
  d.Field("req_id", a.req_id, b.req_id);
  d.Schema("schema", a.schema, b.schema);
}
void Compare(Diff& d, const ListTables& a, const ListTables& b) {
  d.Field("req_id", a.req_id, b.req_id);
}
void Compare(Diff& d, const DescribeTable& a, const DescribeTable& b) {
  d.Field("req_id", a.req_id, b.req_id);
  d.Field("name", a.name, b.name);
}
void Compare(Diff& d, const TablesReply& a, const TablesReply& b) {
  d.Field("req_id", a.req_id, b.req_id);
  d.Field("created", a.created, b.created);
  d.Field("tables.size()", a.tables.size(), b.tables.size());
  for (size_t i = 0; i < a.tables.size() && i < b.tables.size(); ++i) {
    d.Schema(("tables[" + std::to_string(i) + "]").c_str(), a.tables[i], b.tables[i]);
  }
}
void Compare(Diff& d, const StatsRequest& a, const StatsRequest& b) {
  d.Field("req_id", a.req_id, b.req_id);
}
void Compare(Diff& d, const StatsReply& a, const StatsReply& b) {
  d.Field("req_id", a.req_id, b.req_id);
  d.Field("shard_id", a.shard_id, b.shard_id);
  d.Field("shard_clock", a.shard_clock, b.shard_clock);
  d.Field("applied_clocks", a.applied_clocks, b.applied_clocks);
  d.Field("counters", a.counters, b.counters);
  d.Field("connected_clients", a.connected_clients, b.connected_clients);
}
void Compare(Diff& d, const Error& a, const Error& b) {
  d.Field("req_id", a.req_id, b.req_id);
  d.Field("code", a.code, b.code);
  d.Field("message", a.message, b.message);
  d.Field("retriable", a.retriable, b.retriable);
}

}  // namespace

TableSchema SampleSchema(uint32_t id, const std::string& name) {
  TableSchema s;
  s.id = id;
  s.name = name;
  s.kind = RowKind::kSparse;
  s.type = ElementType::kI64;
  s.width = 1u << 20;
  s.consistency = Consistency::kEssp;
  s.staleness = 3;
  s.init.kind = InitKind::kNormal;
  s.init.a = -0.125;
  s.init.b = 1e-300;
  s.init.seed = UINT64_MAX - 5;
  return s;
}

std::vector<Message> SampleMessages() {
  std::vector<Message> out;
  out.push_back(Hello{kWireVersion, 4294967295u, std::string("tok\0en", 6), Hello::kObserver});
  out.push_back(Welcome{kWireVersion, 3, 8, 17, kMax64, kMin64});
  out.push_back(Welcome{kWireVersion, 0, 1, 1, 0, 0, 3, "job-7f3a"});
  out.push_back(Hello{kWireVersion, 2, "t", Hello::kClientProcess, 99, "job-7f3a"});
  out.push_back(Read{UINT64_MAX, 9, {0, 1, UINT64_MAX, 42}, -3, true});
  out.push_back(ReadReply{77, 12, 15, SampleRows()});
  out.push_back(Apply{kMax64, SampleRows()});
  out.push_back(Ack{-1, true});
  out.push_back(Apply{7, SampleRows(), 4294967295u, true});
  out.push_back(Ack{7, false, 2});
  out.push_back(ReadReply{78, 12, 15, SampleRows(), 5});
  {
    // Rows without a record (ReadReply and Push only), and the Hello that asks for them.
    std::vector<RowData> rows = SampleRows();
    rows.insert(rows.begin() + 1, RowData{7, 9, "", /*absent=*/true});
    rows.push_back(RowData{7, UINT64_MAX, "", /*absent=*/true});
    out.push_back(ReadReply{79, 12, 15, rows, 1});
    out.push_back(Push{6, 7, rows});
    Hello h{kWireVersion, 3, "t", Hello::kClientProcess, 5, "job-7f3a"};
    h.features = Hello::kAbsentRows;
    out.push_back(h);
  }
  out.push_back(Push{5, 6, SampleRows()});
  out.push_back(PushDone{kMin64, kMax64});
  out.push_back(Unsubscribe{11, {5, 4, 3}});
  out.push_back(CreateTable{8, SampleSchema(0, "weights.v2")});
  TableSchema vap = SampleSchema(0, "vap");
  vap.consistency = Consistency::kVap;
  vap.value_bound = 0.375;
  out.push_back(CreateTable{9, vap});
  out.push_back(ListTables{123456789});
  out.push_back(DescribeTable{2, std::string("na\0me", 5)});
  out.push_back(TablesReply{3, {SampleSchema(1, "a"), SampleSchema(UINT32_MAX, "b-c_d")}});
  out.push_back(TablesReply{4, {SampleSchema(7, "made")}, /*created=*/true});
  out.push_back(StatsRequest{99});
  out.push_back(StatsReply{
      4, 2, 10, {10, 11, kMax64}, {{"batches_applied", 5}, {"", kMin64}}, {0, 2, UINT32_MAX}});
  out.push_back(Error{6, StatusCode::kIncompatible, std::string("bad\0thing", 9)});
  out.push_back(Error{7, StatusCode::kResourceExhausted, "busy", /*retriable=*/true});
  out.push_back(Welcome{kWireVersion, 1, 2, 2, 5, 4, 0, "job-7f3a", 1u << 20});
  return out;
}

::testing::AssertionResult SameMessage(const Message& a, const Message& b) {
  if (a.index() != b.index()) {
    return ::testing::AssertionFailure()
           << "different types: " << MessageName(a) << " vs " << MessageName(b);
  }
  Diff d;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        Compare(d, x, std::get<T>(b));
      },
      a);
  if (!d.first().empty()) {
    return ::testing::AssertionFailure() << MessageName(a) << "." << d.first() << " differs";
  }
  return ::testing::AssertionSuccess();
}

std::string EncodeOrFail(const Message& m) {
  std::string out;
  Status s = EncodeFrame(m, &out);
  EXPECT_TRUE(s.ok()) << MessageName(m) << ": " << s.ToString();
  return out;
}

}  // namespace pace::net::testing
