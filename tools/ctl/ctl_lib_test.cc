// Unit tests of pacectl's library: formatting, JSON, NPY headers, and the
// commands run in-process (RunCtl) on a sample store.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "common/hash.h"
#include "common/row.h"
#include "common/scoped_temp_dir.h"
#include "storage/shard_store.h"
#include "tools/ctl/ctl.h"
#include "tools/ctl/export.h"
#include "tools/ctl/json_writer.h"
#include "tools/ctl/output_file.h"
#include "tools/ctl/testing/mini_json.h"
#include "tools/ctl/testing/sample_store.h"
#include "tools/ctl/value_format.h"

namespace pace::ctl {
namespace {

using pace::testing::Json;
using pace::testing::ParseJson;

Json MustParse(const std::string& text) {
  Json j;
  std::string error;
  EXPECT_TRUE(ParseJson(text, &j, &error)) << error << "\n" << text;
  return j;
}

// --- Formatting ------------------------------------------------------------------

TEST(JsonQuoteTest, EscapesWhatJsonRequires) {
  EXPECT_EQ(JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(JsonQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonQuote("l1\nl2\tx\r"), "\"l1\\nl2\\tx\\r\"");
  EXPECT_EQ(JsonQuote(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(JsonQuote(std::string("nul\0x", 5)), "\"nul\\u0000x\"");
}

TEST(JsonQuoteTest, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(JsonQuote("caf\xc3\xa9 \xe2\x82\xac"), "\"caf\xc3\xa9 \xe2\x82\xac\"");
  EXPECT_EQ(JsonQuote("bad\xff"), "\"bad\\ufffd\"");
  EXPECT_EQ(JsonQuote("\xc3"), "\"\\ufffd\"");                        // truncated sequence
  EXPECT_EQ(JsonQuote("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate
  // Whatever goes in, the result parses back as a JSON string.
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  Json j = MustParse(JsonQuote(all));
  EXPECT_EQ(j.type, Json::kString);
}

TEST(JsonWriterTest, WritesNestedDocumentsWithCorrectCommas) {
  std::ostringstream out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Member("name", "w\"1");
  w.Key("list");
  w.BeginArray();
  w.Int(-3);
  w.Uint(18446744073709551615ull);
  w.BeginObject();
  w.EndObject();
  w.BeginArray();
  w.EndArray();
  w.Double(0.1);
  w.Double(std::numeric_limits<double>::quiet_NaN());
  w.Double(-std::numeric_limits<double>::infinity());
  w.Null();
  w.Bool(true);
  w.EndArray();
  w.MemberBool("ok", false);
  w.EndObject();
  Json j = MustParse(out.str());
  EXPECT_EQ(j["name"].text, "w\"1");
  ASSERT_EQ(j["list"].size(), 9u);
  EXPECT_EQ(j["list"][0].number, -3);
  EXPECT_EQ(j["list"][1].text, "18446744073709551615");
  EXPECT_EQ(j["list"][4].text, "0.1");
  EXPECT_EQ(j["list"][5].text, "NaN");
  EXPECT_EQ(j["list"][6].text, "-Infinity");
  EXPECT_EQ(j["list"][7].type, Json::kNull);
  EXPECT_EQ(j["ok"].type, Json::kBool);
}

TEST(ExportProgressTest, ReportsBytesThroughTheStreamAndStaysQuietWhenFast) {
  std::ostringstream err, sink;
  {  // The default interval (1 s): a fast export prints nothing.
    ExportProgress quiet(&err, "export w", 4u << 20);
    ProgressStream out(&sink, &quiet);
    out << std::string(4u << 20, 'x');
    quiet.Finish(out.bytes());
    EXPECT_EQ(out.bytes(), 4u << 20);
    EXPECT_EQ(err.str(), "");
  }
  {  // Interval 0: every check (each MiB) prints, and Finish prints 100%.
    ExportProgress p(&err, "export w", 4u << 20, /*rows=*/false, std::chrono::milliseconds(0));
    ProgressStream out(&sink, &p);
    for (int i = 0; i < 4; ++i) out << std::string(1u << 20, 'y');
    p.Finish(out.bytes());
    EXPECT_NE(err.str().find("pacectl: export w: 25%, 1.0 MiB of 4.0 MiB"), std::string::npos)
        << err.str();
    EXPECT_NE(err.str().find("pacectl: export w: 100%, 4.0 MiB of 4.0 MiB"), std::string::npos)
        << err.str();
  }
  EXPECT_EQ(sink.str().size(), 8u << 20);  // every byte reached the inner stream
  err.str("");
  ExportProgress rows(&err, "export h", 10, /*rows=*/true, std::chrono::milliseconds(0));
  rows.Update(5);
  EXPECT_NE(err.str().find("pacectl: export h: 50%, 5 rows of 10 rows"), std::string::npos)
      << err.str();
}

TEST(ValueFormatTest, FloatsRoundTripAndIntegersAreExact) {
  for (float f : {0.1f, -3.4028235e38f, 1e-45f, 0.95855075f, 123456.78f}) {
    EXPECT_EQ(std::strtof(FloatText(f).c_str(), nullptr), f) << FloatText(f);
  }
  for (double d : {0.1, 1.0 / 3, -2.5e-300, 9007199254740993.0}) {
    EXPECT_EQ(std::strtod(DoubleText(d).c_str(), nullptr), d) << DoubleText(d);
  }
  EXPECT_EQ(FloatText(0.1f), "0.1");
  EXPECT_EQ(DoubleText(std::nan("")), "nan");
  EXPECT_EQ(DoubleText(-INFINITY), "-inf");
  int64_t big = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(ElementText(ElementType::kI64, reinterpret_cast<const char*>(&big), 0),
            "-9223372036854775808");
}

TEST(ValueFormatTest, RowText) {
  TableSchema dense;
  dense.type = ElementType::kI32;
  dense.width = 3;
  EXPECT_EQ(RowText(dense, EncodeDense<int32_t>({1, -2, 3})), "1 -2 3");
  TableSchema sparse;
  sparse.kind = RowKind::kSparse;
  sparse.type = ElementType::kF64;
  sparse.width = 0;
  EXPECT_EQ(RowText(sparse, EncodeSparse<double>(std::map<uint32_t, double>{{2, 0.5}, {9, -1}})),
            "2:0.5 9:-1");
  EXPECT_EQ(RowText(sparse, ZeroRow(RowFormat::Of(sparse))), "(empty)");
}

TEST(ValueFormatTest, AlignColumnsAndBytes) {
  EXPECT_EQ(AlignColumns({{"a", "bb", "c"}, {"ccc", "d", ""}}), "a    bb  c\nccc  d\n");
  EXPECT_EQ(BytesText(0), "0 B");
  EXPECT_EQ(BytesText(1536), "1.5 KiB");
  EXPECT_EQ(BytesText(uint64_t{3} << 30), "3.0 GiB");
  EXPECT_EQ(UnixMsText(1700000000123), "2023-11-14T22:13:20.123Z");
}

TEST(NpyHeaderTest, IsAValidVersion1HeaderPaddedTo64) {
  for (uint64_t rows : {uint64_t{0}, uint64_t{6}, uint64_t{50000000}, ~uint64_t{0}}) {
    std::string h = NpyHeader(ElementType::kF64, rows, 16);
    ASSERT_EQ(h.size() % 64, 0u) << h;
    EXPECT_EQ(h.substr(0, 6), "\x93NUMPY");
    EXPECT_EQ(h[6], 1);
    EXPECT_EQ(h[7], 0);
    size_t len =
        static_cast<uint8_t>(h[8]) | (static_cast<size_t>(static_cast<uint8_t>(h[9])) << 8);
    EXPECT_EQ(len + 10, h.size());
    EXPECT_EQ(h.back(), '\n');
    std::string dict = h.substr(10);
    EXPECT_EQ(dict.rfind("{'descr': '<f8', 'fortran_order': False, 'shape': (" +
                             std::to_string(rows) + ", 16), }",
                         0),
              0u)
        << dict;
    EXPECT_EQ(dict.find_first_not_of(' ', dict.find('}') + 1), dict.size() - 1);
  }
  EXPECT_EQ(NpyDescr(ElementType::kF32), "<f4");
  EXPECT_EQ(NpyDescr(ElementType::kI32), "<i4");
  EXPECT_EQ(NpyDescr(ElementType::kI64), "<i8");
}

// --- Commands in-process -------------------------------------------------------------

class CtlCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path() + "/store";
    ASSERT_TRUE(pace::testing::BuildSampleStore(dir_, 2).ok());
  }

  // Runs pacectl in-process with --data_dir set; returns the exit code.
  int Run(std::vector<std::string> args, CtlOptions options = {}) {
    if (options.data_dir.empty() && options.server.empty()) options.data_dir = dir_;
    std::ostringstream out, err;
    int code = RunCtl(args, options, out, err);
    out_ = out.str();
    err_ = err.str();
    return code;
  }
  CtlOptions Json() {
    CtlOptions o;
    o.json = true;
    return o;
  }

  ScopedTempDir tmp_;
  std::string dir_;
  std::string out_, err_;
};

TEST_F(CtlCommandTest, TablesJsonListsEverySchemaField) {
  ASSERT_EQ(Run({"tables"}, Json()), kExitOk) << err_;
  auto j = MustParse(out_);
  ASSERT_EQ(j["tables"].size(), 4u);
  const auto& w = j["tables"][0];
  EXPECT_EQ(w["name"].text, "w");
  EXPECT_EQ(w["kind"].text, "dense");
  EXPECT_EQ(w["type"].text, "f32");
  EXPECT_EQ(w["width"].number, 4);
  EXPECT_EQ(w["consistency"].text, "essp");
  EXPECT_EQ(w["staleness"].number, 2);
  EXPECT_EQ(w["initializer"]["kind"].text, "uniform");
  EXPECT_EQ(w["initializer"]["low"].number, -0.1);
  EXPECT_EQ(w["initializer"]["seed"].number, 7);
  EXPECT_EQ(j["tables"][2]["kind"].text, "sparse");
  EXPECT_EQ(j["tables"][3]["initializer"]["sd"].number, 0.5);
}

TEST_F(CtlCommandTest, GetShowsWrittenValuesAndInitializerForNeverWrittenRows) {
  ASSERT_EQ(Run({"get", "counts", "1", "3", "2"}, Json()), kExitOk) << err_;
  auto j = MustParse(out_);
  ASSERT_EQ(j["rows"].size(), 3u);
  EXPECT_EQ(j["rows"][0]["values"][2].text, "33");
  EXPECT_EQ(j["rows"][1]["values"][0].text, "0");
  EXPECT_EQ(j["rows"][1]["values"][2].text, "8");
  EXPECT_TRUE(j["rows"][1]["written"].b);
  EXPECT_FALSE(j["rows"][2]["written"].b);
  EXPECT_EQ(j["shard_clock"].number, pace::testing::kSampleClocks);

  // Row 1 of w was never written: its value is the uniform initializer's.
  std::unique_ptr<ShardStore> store;
  ShardStoreOptions ro;
  ro.read_only = true;
  ro.check_identity = false;
  ASSERT_TRUE(ShardStore::Open(ro, dir_, &store).ok());
  TableSchema w = store->FindTable("w").value();
  store.reset();
  ASSERT_EQ(Run({"get", "w", "1"}, Json()), kExitOk) << err_;
  j = MustParse(out_);
  for (uint32_t c = 0; c < 4; ++c) {
    float expected = static_cast<float>(InitialValue(w, 1, c));
    EXPECT_NE(expected, 0.0f);
    EXPECT_EQ(std::strtof(j["rows"][0]["values"][c].text.c_str(), nullptr), expected) << c;
  }
  ASSERT_EQ(Run({"get", "topics", "0"}), kExitOk) << err_;
  EXPECT_EQ(out_, "row 0: 3:5 10:-2\n");
}

TEST_F(CtlCommandTest, ScanListsWrittenRowsInOrderWithLimit) {
  ASSERT_EQ(Run({"scan", "counts"}), kExitOk) << err_;
  EXPECT_EQ(out_, "row 1: 11 22 33\nrow 3: 0 1 8\n");
  CtlOptions o = Json();
  o.limit = 2;
  ASSERT_EQ(Run({"scan", "w"}, o), kExitOk) << err_;
  auto j = MustParse(out_);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["row"].number, 0);
  EXPECT_EQ(j["rows"][1]["row"].number, 2);
  EXPECT_TRUE(j["truncated"].b);
  EXPECT_EQ(j["next_row"].number, 5);
  o.start = 3;
  ASSERT_EQ(Run({"scan", "topics"}, o), kExitOk) << err_;
  j = MustParse(out_);
  ASSERT_EQ(j["rows"].size(), 1u);
  EXPECT_EQ(j["rows"][0]["row"].number, 7);
  EXPECT_EQ(j["rows"][0]["columns"][0].number, 1);
  EXPECT_FALSE(j["truncated"].b);
}

TEST_F(CtlCommandTest, DescribeAndStatsReportIdentityAndClocks) {
  ASSERT_EQ(Run({"describe", "emb"}, Json()), kExitOk) << err_;
  auto j = MustParse(out_);
  EXPECT_EQ(j["table"]["consistency"].text, "async");
  EXPECT_EQ(j["identity"]["num_clients"].number, 2);
  EXPECT_EQ(j["applied_clocks"].size(), 2u);
  EXPECT_EQ(j["shard_clock"].number, 3);
  // RocksDB's estimate; a few rows still in the memtable can estimate to 0.
  ASSERT_TRUE(j.has("approximate_bytes"));
  EXPECT_GE(j["approximate_bytes"].number, 0);
  ASSERT_EQ(Run({"stats"}), kExitOk) << err_;
  EXPECT_NE(out_.find("client 0: 3, client 1: 3"), std::string::npos) << out_;
  ASSERT_EQ(Run({"stats"}, Json()), kExitOk) << err_;
  j = MustParse(out_);
  EXPECT_EQ(j["tables"].size(), 4u);
}

TEST_F(CtlCommandTest, UserErrorsExitOneWithOneLineMessages) {
  EXPECT_EQ(Run({"get", "foo", "1"}), kExitUserError);
  EXPECT_EQ(err_, "pacectl: unknown table 'foo' (tables: w, counts, topics, emb)\n");
  EXPECT_EQ(Run({"get", "w", "x1"}), kExitUserError);
  EXPECT_NE(err_.find("bad row 'x1'"), std::string::npos) << err_;
  EXPECT_EQ(Run({"frobnicate"}), kExitUserError);
  EXPECT_NE(err_.find("unknown command 'frobnicate'"), std::string::npos) << err_;
  EXPECT_EQ(Run({"get", "w"}), kExitUserError);
  EXPECT_NE(err_.find("usage: pacectl get NAME ROW"), std::string::npos) << err_;
  EXPECT_EQ(Run({"checkpoint", "zap", "x"}), kExitUserError);
  EXPECT_NE(err_.find("unknown checkpoint subcommand 'zap'"), std::string::npos) << err_;
  EXPECT_EQ(Run({}), kExitUserError);

  CtlOptions both;
  both.data_dir = dir_;
  both.server = "127.0.0.1:1";
  EXPECT_EQ(Run({"tables"}, both), kExitUserError);
  EXPECT_NE(err_.find("not both"), std::string::npos) << err_;
  CtlOptions online;
  online.server = "127.0.0.1:1";
  EXPECT_EQ(Run({"scan", "w"}, online), kExitUserError);  // online scan needs --limit
  EXPECT_NE(err_.find("scan online needs --limit=N"), std::string::npos) << err_;
  CtlOptions none;
  none.data_dir = "";
  none.server = "";
  std::ostringstream out, err;
  EXPECT_EQ(RunCtl({"tables"}, none, out, err), kExitUserError);
  EXPECT_NE(err.str().find("needs --data_dir=DIR"), std::string::npos) << err.str();

  CtlOptions flag;
  flag.set_flags = {"format"};
  EXPECT_EQ(Run({"tables"}, flag), kExitUserError);
  EXPECT_EQ(err_, "pacectl: --format does not apply to 'tables' (only to export)\n");
  flag.set_flags = {"token_file"};
  EXPECT_EQ(Run({"tables"}, flag), kExitUserError);
  EXPECT_NE(err_.find("--token_file applies only with --server"), std::string::npos) << err_;

  CtlOptions missing;
  missing.data_dir = tmp_.path() + "/nothing-here";
  EXPECT_EQ(Run({"tables"}, missing), kExitUserError);
  EXPECT_NE(err_.find("nothing-here"), std::string::npos) << err_;
}

TEST_F(CtlCommandTest, HelpListsEveryCommand) {
  EXPECT_EQ(Run({"help"}), kExitOk);
  for (const char* c : {"tables", "describe NAME", "get NAME ROW", "scan NAME", "stats",
                        "export NAME", "checkpoint create DIR", "checkpoint list",
                        "checkpoint restore CKPT", "verify", "--json", "--max_rows"}) {
    EXPECT_NE(out_.find(c), std::string::npos) << c;
  }
}

// Reads an npy file written by WriteNpy into its header dict and data.
struct Npy {
  std::string dict;
  std::string data;
};
Npy SplitNpy(const std::string& bytes) {
  Npy n;
  size_t len =
      static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
  n.dict = bytes.substr(10, len);
  n.data = bytes.substr(10 + len);
  return n;
}

TEST_F(CtlCommandTest, NpyExportEqualsGetForEveryRow) {
  std::unique_ptr<ShardStore> store;
  ShardStoreOptions ro;
  ro.read_only = true;
  ro.check_identity = false;
  ASSERT_TRUE(ShardStore::Open(ro, dir_, &store).ok());
  for (const char* name : {"w", "counts", "emb"}) {
    TableSchema t = store->FindTable(name).value();
    NpyPlan plan;
    ASSERT_TRUE(PlanNpy(*store, t, 1000, &plan).ok());
    std::ostringstream out;
    ExportStats stats;
    ASSERT_TRUE(WriteNpy(*store, t, plan, &out, &stats).ok());
    Npy npy = SplitNpy(out.str());
    const size_t row_bytes = RowFormat::Of(t).dense_bytes();
    ASSERT_EQ(npy.data.size(), plan.rows * row_bytes) << name;
    EXPECT_NE(npy.dict.find("'shape': (" + std::to_string(plan.rows) + ", " +
                            std::to_string(t.width) + ")"),
              std::string::npos);
    for (uint64_t r = 0; r < plan.rows; ++r) {
      std::string expected;
      ASSERT_TRUE(store->Get(t.id, r, &expected).ok());
      EXPECT_EQ(npy.data.substr(r * row_bytes, row_bytes), expected) << name << " row " << r;
    }
  }
  TableSchema w = store->FindTable("w").value();
  NpyPlan plan;
  Status s = PlanNpy(*store, w, 5, &plan);  // w has row 5, so 6 rows > 5
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--max_rows=5"), std::string::npos) << s.ToString();
  EXPECT_TRUE(PlanNpy(*store, w, 6, &plan).ok());
  EXPECT_EQ(PlanNpy(*store, store->FindTable("topics").value(), 100, &plan).code(),
            StatusCode::kInvalidArgument);
}

TEST_F(CtlCommandTest, CsvExportOfDenseAndSparseTables) {
  std::unique_ptr<ShardStore> store;
  ShardStoreOptions ro;
  ro.read_only = true;
  ro.check_identity = false;
  ASSERT_TRUE(ShardStore::Open(ro, dir_, &store).ok());
  std::ostringstream counts, topics;
  ExportStats stats;
  ASSERT_TRUE(ExportCsv(*store, store->FindTable("counts").value(), &counts, &stats).ok());
  EXPECT_EQ(counts.str(), "row,c0,c1,c2\n1,11,22,33\n3,0,1,8\n");
  ASSERT_TRUE(ExportCsv(*store, store->FindTable("topics").value(), &topics, &stats).ok());
  EXPECT_EQ(topics.str(), "row,col,value\n0,3,5\n0,10,-2\n7,1,1\n");
  EXPECT_EQ(stats.written_rows, 2u);
  EXPECT_EQ(stats.lines, 3u);
}

TEST_F(CtlCommandTest, VerifyPassesOnAGoodStoreAndFindsAPlantedBadValue) {
  ASSERT_EQ(Run({"verify"}, Json()), kExitOk) << err_;
  auto j = MustParse(out_);
  EXPECT_TRUE(j["ok"].b);
  EXPECT_EQ(j["tables"][0]["rows_checked"].number, 3);

  // A stored value with the wrong format tag for row 3 of table w (id 1).
  ASSERT_TRUE(pace::testing::PutRawRowValue(dir_, 1, 3, std::string("\x77garbage")).ok());
  ASSERT_EQ(Run({"verify"}, Json()), kExitCorruption) << err_;
  j = MustParse(out_);
  EXPECT_FALSE(j["ok"].b);
  EXPECT_EQ(j["tables"][0]["problem_count"].number, 1);
  EXPECT_NE(j["tables"][0]["problems"][0].text.find("row 3"), std::string::npos) << out_;
  EXPECT_EQ(j["tables"][1]["problem_count"].number, 0);  // other tables still checked
  EXPECT_NE(err_.find("verify found 1 problem"), std::string::npos) << err_;
  // Reading the bad row is corruption too.
  EXPECT_EQ(Run({"get", "w", "3"}), kExitCorruption);
  EXPECT_EQ(Run({"get", "w", "2"}), kExitOk) << err_;
}

TEST_F(CtlCommandTest, CheckpointCreateListRestoreRoundTrip) {
  const std::string ckpts = tmp_.path() + "/ckpts";
  ASSERT_EQ(Run({"checkpoint", "create", ckpts + "/c1"}), kExitOk) << err_;
  EXPECT_EQ(Run({"checkpoint", "create", ckpts + "/c1"}), kExitUserError);  // exists
  CtlOptions list = Json();
  list.data_dir = "";
  std::ostringstream out, err;
  ASSERT_EQ(RunCtl({"checkpoint", "list", ckpts}, list, out, err), kExitOk) << err.str();
  auto j = MustParse(out.str());
  ASSERT_EQ(j["checkpoints"].size(), 1u);
  EXPECT_EQ(j["checkpoints"][0]["shard_clock"].number, 3);
  EXPECT_EQ(j["checkpoints"][0]["tables"].size(), 4u);
  CtlOptions restore;
  restore.data_dir = tmp_.path() + "/restored";
  ASSERT_EQ(Run({"checkpoint", "restore", ckpts + "/c1"}, restore), kExitOk) << err_;
  ASSERT_EQ(Run({"scan", "counts"}, restore), kExitOk) << err_;
  EXPECT_EQ(out_, "row 1: 11 22 33\nrow 3: 0 1 8\n");
  EXPECT_EQ(Run({"checkpoint", "restore", ckpts + "/c1"}, restore), kExitUserError);  // not empty
}

// Two real stores, shards 0 and 1 of one job, each holding the rows it owns,
// plus one row shard 0 holds but shard 1 owns (as a bug would leave it): the
// merged export takes every row from its owner and skips the stray copy.
TEST(MergedExportTest, EachRowComesFromItsOwningShard) {
  ScopedTempDir tmp;
  std::unique_ptr<ShardStore> shard[2];
  TableSchema t;
  t.name = "v";
  t.kind = RowKind::kDense;
  t.type = ElementType::kI64;
  t.width = 2;
  t.init.kind = InitKind::kZeros;
  for (uint32_t k = 0; k < 2; ++k) {
    ShardStoreOptions o;
    o.shard_id = k;
    o.num_shards = 2;
    ASSERT_TRUE(ShardStore::Open(o, tmp.path() + "/s" + std::to_string(k), &shard[k]).ok());
    ASSERT_TRUE(shard[k]->CreateTable(t, &t).ok());
  }
  // Rows 0..19 hold (row, 100 + row) on their owner; row 7 is never written.
  std::vector<std::string> values(20);
  std::vector<RowDelta> deltas[2];
  uint64_t stray = 20;  // a row shard 1 owns; shard 0 gets a stray copy
  for (uint64_t r = 0; r < 20; ++r) {
    const uint32_t k = ShardOf(t.id, r, 2);
    if (k == 1 && stray == 20) stray = r;
    values[r] = EncodeDense<int64_t>({static_cast<int64_t>(r), 100 + static_cast<int64_t>(r)});
    if (r != 7) deltas[k].push_back(RowDelta{t.id, r, values[r]});
  }
  ASSERT_LT(stray, 20u);
  const std::string junk = EncodeDense<int64_t>({-5, -5});
  deltas[0].push_back(RowDelta{t.id, stray, junk});
  std::sort(deltas[0].begin(), deltas[0].end(),
            [](const RowDelta& a, const RowDelta& b) { return a.row < b.row; });
  bool dup = false;
  for (uint32_t k = 0; k < 2; ++k) ASSERT_TRUE(shard[k]->ApplyBatch(0, 0, deltas[k], &dup).ok());

  const std::vector<const ShardStore*> shards = {shard[0].get(), shard[1].get()};
  MergedPlan plan;
  ASSERT_TRUE(PlanMerged(shards, t, true, 0, 1000, &plan).ok());
  EXPECT_EQ(plan.rows, 20u);
  EXPECT_EQ(plan.foreign_rows, 1u);
  std::vector<uint64_t> want;
  for (uint64_t r = 0; r < 20; ++r) {
    if (r != 7) want.push_back(r);
  }
  EXPECT_EQ(plan.written, want);
  std::ostringstream out;
  ExportStats stats;
  ASSERT_TRUE(WriteMergedNpy(shards, t, plan, &out, &stats).ok());
  const std::string file = out.str();
  const std::string header = NpyHeader(t.type, 20, 2);
  ASSERT_EQ(file.size(), header.size() + 20 * 16);
  EXPECT_EQ(file.substr(0, header.size()), header);
  std::vector<int64_t> v = DecodeDense<int64_t>(file.substr(header.size()));
  for (uint64_t r = 0; r < 20; ++r) {
    EXPECT_EQ(v[2 * r], r == 7 ? 0 : static_cast<int64_t>(r)) << r;
    EXPECT_EQ(v[2 * r + 1], r == 7 ? 0 : 100 + static_cast<int64_t>(r)) << r;
  }
  std::ostringstream csv;
  ASSERT_TRUE(WriteMergedCsv(shards, t, plan, &csv, &stats).ok());
  EXPECT_EQ(csv.str().substr(0, 26), "row,c0,c1\n0,0,100\n1,1,101\n");
  EXPECT_EQ(stats.lines, 19u);
  std::ostringstream ids;
  ASSERT_TRUE(WriteRowIdsNpy(plan.written, &ids).ok());
  const std::string ids_header = NpyHeaderU64(19);
  EXPECT_NE(ids_header.find("'descr': '<u8', 'fortran_order': False, 'shape': (19,)"),
            std::string::npos);
  ASSERT_EQ(ids.str().size(), ids_header.size() + 19 * 8);
  EXPECT_EQ(DecodeDense<uint64_t>(ids.str().substr(ids_header.size())), want);
  // --rows: sized up, or refused when a written row does not fit.
  ASSERT_TRUE(PlanMerged(shards, t, true, 25, 1000, &plan).ok());
  EXPECT_EQ(plan.rows, 25u);
  Status s = PlanMerged(shards, t, true, 19, 1000, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("written row 19"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace pace::ctl
