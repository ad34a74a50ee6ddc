// Integration tests of the real pacectl binary: it is spawned as a child
// process (found next to this test binary) on stores built with ShardStore,
// beside a live writer process, and against a running paced.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "common/hash.h"
#include "common/read_file.h"
#include "common/row.h"
#include "storage/shard_store.h"
#include "tests/testing/subprocess.h"
#include "tools/ctl/testing/mini_json.h"
#include "tools/ctl/testing/sample_store.h"

namespace pace {
namespace {

using testing::BinaryDir;
using testing::Json;
using testing::Subprocess;
using testing::TempDir;

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

Json MustParse(const std::string& text) {
  Json j;
  std::string error;
  EXPECT_TRUE(testing::ParseJson(text, &j, &error)) << error << "\n" << text;
  return j;
}

std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

class PacectlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    ASSERT_TRUE(std::filesystem::exists(BinaryDir() + "/pacectl"))
        << "pacectl is not built next to " << BinaryDir();
    dir_ = tmp_.path() + "/store";
  }

  void BuildStore(uint32_t num_clients = 2) {
    ASSERT_TRUE(testing::BuildSampleStore(dir_, num_clients).ok());
  }

  // Runs pacectl with `args`; stdout and stderr are captured.
  Result Run(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {BinaryDir() + "/pacectl"};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string err_path = tmp_.path() + "/stderr." + std::to_string(++runs_);
    Result r;
    Subprocess p;
    Status s = p.Start(argv, err_path);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return r;
    std::string line;
    while (p.ReadLine(&line, 60000).ok()) r.out += line + "\n";
    int status = 0;
    s = p.Wait(60000, &status);
    EXPECT_TRUE(s.ok()) << "pacectl did not exit: " << s.ToString();
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.err = ReadFile(err_path);
    return r;
  }
  Result Offline(std::vector<std::string> args) {
    args.insert(args.begin(), "--data_dir=" + dir_);
    return Run(args);
  }

  TableSchema Schema(const std::string& name) {
    ShardStoreOptions o;
    o.read_only = true;
    o.check_identity = false;
    std::unique_ptr<ShardStore> store;
    EXPECT_TRUE(ShardStore::Open(o, dir_, &store).ok());
    return store ? store->FindTable(name).value() : TableSchema{};
  }

  TempDir tmp_;
  std::string dir_;
  int runs_ = 0;
};

TEST_F(PacectlTest, TablesTextAndJson) {
  BuildStore();
  Result r = Offline({"tables"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<std::vector<std::string>> rows;
  for (std::string l; std::getline(lines, l);) rows.push_back(Words(l));
  ASSERT_EQ(rows.size(), 5u) << r.out;
  EXPECT_EQ(rows[0], (std::vector<std::string>{"id", "name", "kind", "type", "width", "consistency",
                                               "staleness", "initializer"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"1", "w", "dense", "f32", "4", "essp", "2",
                                               "uniform[-0.1,0.1)", "seed", "7"}));
  EXPECT_EQ(rows[2],
            (std::vector<std::string>{"2", "counts", "dense", "i64", "3", "ssp", "1", "zeros"}));
  EXPECT_EQ(rows[3],
            (std::vector<std::string>{"3", "topics", "sparse", "i32", "100", "bsp", "0", "zeros"}));
  EXPECT_EQ(rows[4], (std::vector<std::string>{"4", "emb", "dense", "f64", "2", "async", "-",
                                               "normal(mean=0,sd=0.5)", "seed", "3"}));

  r = Offline({"tables", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json j = MustParse(r.out);
  ASSERT_EQ(j["tables"].size(), 4u);
  EXPECT_EQ(j["tables"][1]["name"].text, "counts");
  EXPECT_EQ(j["tables"][2]["width"].number, 100);
}

TEST_F(PacectlTest, DescribeGetAndScan) {
  BuildStore();
  Result r = Offline({"describe", "counts"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* want :
       {"table counts (id 2)", "consistency  ssp", "identity     shard 0 of 1, 2 clients",
        "shard clock  3", "applied      client 0: 3, client 1: 3", "approx size"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }

  r = Offline({"get", "counts", "1", "3", "7"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "row 1: 11 22 33\nrow 3: 0 1 8\nrow 7: 0 0 0  (never written: initializer value)\n");

  // A never-written row of a uniform-initialized table shows its initializer.
  const TableSchema w = Schema("w");
  r = Offline({"get", "w", "4", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json j = MustParse(r.out);
  EXPECT_FALSE(j["rows"][0]["written"].b);
  ASSERT_EQ(j["rows"][0]["values"].size(), 4u);
  for (uint32_t c = 0; c < 4; ++c) {
    EXPECT_EQ(std::strtof(j["rows"][0]["values"][c].text.c_str(), nullptr),
              static_cast<float>(InitialValue(w, 4, c)));
  }
  // A written row is initializer + deltas.
  r = Offline({"get", "w", "0", "--json"});
  j = MustParse(r.out);
  for (uint32_t c = 0; c < 4; ++c) {
    float expected = static_cast<float>(InitialValue(w, 0, c)) + static_cast<float>(c + 1);
    EXPECT_EQ(std::strtof(j["rows"][0]["values"][c].text.c_str(), nullptr), expected);
  }

  r = Offline({"scan", "topics"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "row 0: 3:5 10:-2\nrow 7: 1:1\n");
  r = Offline({"scan", "w", "--start=1", "--limit=1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("row 2: ", 0), 0u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1);
  EXPECT_NE(r.err.find("--start=5"), std::string::npos) << r.err;
  r = Offline({"scan", "topics", "--json"});
  j = MustParse(r.out);
  EXPECT_EQ(j["rows"][0]["columns"][1].number, 10);
  EXPECT_EQ(j["rows"][0]["values"][1].number, -2);

  r = Offline({"stats", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  j = MustParse(r.out);
  EXPECT_EQ(j["shard_clock"].number, 3);
  EXPECT_EQ(j["identity"]["num_clients"].number, 2);
  EXPECT_GT(j["memory"]["memory_block_cache_limit_bytes"].number, 0);
}

// Parses an .npy file: checks the v1.0 preamble and returns dict and data.
void ParseNpy(const std::string& bytes, std::string* dict, std::string* data) {
  ASSERT_GE(bytes.size(), 10u);
  ASSERT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  ASSERT_EQ(bytes[6], 1);
  ASSERT_EQ(bytes[7], 0);
  size_t len =
      static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
  ASSERT_EQ((10 + len) % 64, 0u);
  ASSERT_LE(10 + len, bytes.size());
  *dict = bytes.substr(10, len);
  ASSERT_EQ(dict->back(), '\n');
  *data = bytes.substr(10 + len);
}

TEST_F(PacectlTest, ExportCsvAndNpy) {
  BuildStore();
  const std::string csv = tmp_.path() + "/counts.csv";
  Result r = Offline({"export", "counts", "--format=csv", "--out=" + csv});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(csv), "row,c0,c1,c2\n1,11,22,33\n3,0,1,8\n");
  r = Offline({"export", "topics", "--format=csv", "--out=-"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "row,col,value\n0,3,5\n0,10,-2\n7,1,1\n");

  struct Case {
    std::string table;
    std::string descr;
    uint64_t rows;
  };
  for (const Case& c : {Case{"w", "<f4", 6}, Case{"counts", "<i8", 4}, Case{"emb", "<f8", 11}}) {
    const std::string npy = tmp_.path() + "/" + c.table + ".npy";
    r = Offline({"export", c.table, "--format=npy", "--out=" + npy, "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    Json j = MustParse(r.out);
    EXPECT_EQ(j["shape"][0].number, c.rows);
    std::string dict, data;
    ParseNpy(ReadFile(npy), &dict, &data);
    const TableSchema t = Schema(c.table);
    EXPECT_EQ(dict.rfind("{'descr': '" + c.descr + "', 'fortran_order': False, 'shape': (" +
                             std::to_string(c.rows) + ", " + std::to_string(t.width) + "), }",
                         0),
              0u)
        << dict;
    const size_t row_bytes = RowFormat::Of(t).dense_bytes();
    ASSERT_EQ(data.size(), c.rows * row_bytes) << c.table;
    ShardStoreOptions o;
    o.read_only = true;
    o.check_identity = false;
    std::unique_ptr<ShardStore> store;
    ASSERT_TRUE(ShardStore::Open(o, dir_, &store).ok());
    for (uint64_t row = 0; row < c.rows; ++row) {
      std::string expected;
      ASSERT_TRUE(store->Get(t.id, row, &expected).ok());
      EXPECT_EQ(data.substr(row * row_bytes, row_bytes), expected) << c.table << " row " << row;
    }
  }
  // counts: exact integers, never-written rows 0 and 2 are zeros.
  std::string dict, data;
  ParseNpy(ReadFile(tmp_.path() + "/counts.npy"), &dict, &data);
  std::vector<int64_t> counts = DecodeDense<int64_t>(data);
  EXPECT_EQ(counts, (std::vector<int64_t>{0, 0, 0, 11, 22, 33, 0, 0, 0, 0, 1, 8}));
  // w row 1 was never written: the uniform initializer's values.
  ParseNpy(ReadFile(tmp_.path() + "/w.npy"), &dict, &data);
  std::vector<float> w = DecodeDense<float>(data);
  const TableSchema ws = Schema("w");
  for (uint32_t c = 0; c < 4; ++c) {
    EXPECT_EQ(w[4 + c], static_cast<float>(InitialValue(ws, 1, c)));
  }

  r = Offline({"export", "topics", "--format=npy", "--out=" + tmp_.path() + "/t.npy"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("'topics' is sparse"), std::string::npos) << r.err;
  const std::string refused = tmp_.path() + "/refused.npy";
  r = Offline({"export", "emb", "--format=npy", "--out=" + refused, "--max_rows=10"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--max_rows=10"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(refused));
  r = Offline({"export", "w", "--format=parquet", "--out=x"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "pacectl: --format must be csv or npy, got 'parquet'\n");
}

TEST_F(PacectlTest, VerifyExitsZeroOnGoodStoreAndTwoOnPlantedCorruption) {
  BuildStore();
  Result r = Offline({"verify"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("result: ok"), std::string::npos) << r.out;

  ASSERT_TRUE(testing::PutRawRowValue(dir_, 2, 2, std::string("\x14short")).ok());
  r = Offline({"verify"});
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("table counts: 1 rows checked, 1 problem(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("row 2 of table 'counts'"), std::string::npos) << r.out;
  r = Offline({"verify", "--json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(MustParse(r.out)["ok"].b);
}

TEST_F(PacectlTest, VerifyDetectsDamagedSstFile) {
  BuildStore();
  std::string sst;
  ASSERT_TRUE(testing::AddBigTableAndFlush(dir_, 2, 20000, &sst).ok());
  Result r = Offline({"verify"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("table big: 20000 rows checked, ok"), std::string::npos) << r.out;
  // The middle of the file holds data blocks of table big.
  ASSERT_TRUE(testing::OverwriteBytes(sst, 0.5, 64).ok());
  r = Offline({"verify"});
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("CORRUPT"), std::string::npos) << r.out;
}

// Every kind of damage exits 2 from verify and from the other offline
// commands, naming the damaged file and its kind: a truncated SST (once
// reported as a damaged write-ahead log), an SST with a bad block checksum, an
// overwritten CURRENT (once "its writer kept changing it", exit 1), a
// garbage MANIFEST.
TEST_F(PacectlTest, EveryCorruptionExitsTwoNamingTheFile) {
  BuildStore();
  std::string sst;
  ASSERT_TRUE(testing::AddBigTableAndFlush(dir_, 2, 20000, &sst).ok());
  const std::string sst_name = std::filesystem::path(sst).filename().string();
  const std::string good = dir_;
  std::string manifest;
  for (const auto& e : std::filesystem::directory_iterator(good)) {
    if (e.path().filename().string().rfind("MANIFEST-", 0) == 0) {
      manifest = e.path().filename().string();
    }
  }
  ASSERT_FALSE(manifest.empty());
  struct Case {
    const char* name;
    std::function<void(const std::string& dir)> damage;
    std::string expect;  // names the file, relative to the copy's dir
  };
  const std::vector<Case> cases = {
      {"truncated-sst",
       [&](const std::string& d) {
         std::filesystem::resize_file(d + "/" + sst_name,
                                      std::filesystem::file_size(d + "/" + sst_name) / 2);
       },
       "SST file DIR/" + sst_name + " is damaged"},
      {"sst-checksum",
       [&](const std::string& d) {
         ASSERT_TRUE(testing::OverwriteBytes(d + "/" + sst_name, 0.5, 64).ok());
       },
       "SST file DIR/" + sst_name + " is damaged"},
      {"current", [&](const std::string& d) { std::ofstream(d + "/CURRENT") << "garbage\n"; },
       "CURRENT (DIR/CURRENT) is damaged"},
      {"manifest",
       [&](const std::string& d) {
         std::ofstream(d + "/" + manifest, std::ios::trunc) << std::string(300, 'x');
       },
       "the MANIFEST DIR/" + manifest + " is damaged"},
  };
  for (const Case& c : cases) {
    dir_ = tmp_.path() + "/" + c.name;
    std::filesystem::copy(good, dir_, std::filesystem::copy_options::recursive);
    c.damage(dir_);
    std::string expect = c.expect;
    expect.replace(expect.find("DIR"), 3, dir_);
    Result r = Offline({"verify"});
    EXPECT_EQ(r.code, 2) << c.name << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find(expect), std::string::npos) << c.name << "\n" << r.out;
    EXPECT_EQ(r.out.find("a write-ahead log is damaged"), std::string::npos) << c.name << r.out;
    r = Offline({"export", "big", "--format=csv", "--out=" + tmp_.path() + "/big.csv"});
    EXPECT_EQ(r.code, 2) << c.name << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find(expect), std::string::npos) << c.name << "\n" << r.err;
  }
}

// An SST with a bad block checksum opens fine and can be read around; a job
// refuses it at start instead of training on it: paced exits 2 naming the
// file, pacectl verify and pacectl checkpoint restore (and serves it with
// --allow_damaged_store), and pace_mf --resume fails the same way. Before,
// pace_mf --resume trained 10 clocks on it and exited 0.
TEST_F(PacectlTest, AJobRefusesAStoreWithAChecksumError) {
  for (const char* bin : {"paced", "pace_mf", "pace_gen"}) {
    if (!std::filesystem::exists(BinaryDir() + "/" + bin)) GTEST_SKIP() << bin << " not built";
  }
  const std::string train = tmp_.path() + "/train.txt";
  auto run = [&](std::vector<std::string> argv, std::string* err_text) {
    const std::string err = tmp_.path() + "/run.err." + std::to_string(++runs_);
    Subprocess p;
    EXPECT_TRUE(p.Start(argv, err).ok());
    std::string line;
    while (p.ReadLine(&line, 120000).ok()) {
    }
    int status = 0;
    EXPECT_TRUE(p.Wait(120000, &status).ok());
    *err_text = ReadFile(err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  };
  std::string err;
  ASSERT_EQ(run({BinaryDir() + "/pace_gen", "ratings", "--users=60", "--items=50", "--rank=2",
                 "--ratings=1500", "--seed=3", "--out=" + train},
                &err),
            0)
      << err;
  const std::vector<std::string> mf = {BinaryDir() + "/pace_mf", "--train=" + train, "--rank=3",
                                       "--data_dir=" + dir_, "--lr=0.01"};
  std::vector<std::string> first = mf;
  first.push_back("--clocks=2");
  ASSERT_EQ(run(first, &err), 0) << err;
  std::string sst;
  ASSERT_TRUE(testing::AddBigTableAndFlush(dir_, 1, 20000, &sst).ok());
  ASSERT_TRUE(testing::OverwriteBytes(sst, 0.5, 64).ok());
  const std::string file = "SST file " + sst + " is damaged";

  std::vector<std::string> resume = mf;
  resume.insert(resume.end(), {"--clocks=4", "--resume"});
  EXPECT_NE(run(resume, &err), 0) << err;
  std::printf("pace_mf --resume: %s", err.c_str());
  EXPECT_NE(err.find(file), std::string::npos) << err;
  EXPECT_NE(err.find("pacectl --data_dir=" + dir_ + " verify"), std::string::npos) << err;
  EXPECT_NE(err.find("pacectl checkpoint restore"), std::string::npos) << err;

  const std::vector<std::string> paced = {BinaryDir() + "/paced", "--data_dir=" + dir_,
                                          "--insecure", "--listen=127.0.0.1:0"};
  EXPECT_EQ(run(paced, &err), 2) << err;
  std::printf("paced: %s", err.c_str());
  EXPECT_NE(err.find("paced: cannot open --data_dir=" + dir_ +
                     ": Corruption: refusing to serve a damaged store: " + file),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("pacectl --data_dir=" + dir_ + " verify"), std::string::npos) << err;
  EXPECT_NE(err.find("pacectl checkpoint restore"), std::string::npos) << err;
  EXPECT_NE(err.find("(--allow_damaged_store serves it anyway)"), std::string::npos) << err;
  Subprocess told;
  uint16_t port = 0;
  Status s = testing::StartPaced(&told, dir_, 0, 1, 1, {"--allow_damaged_store"}, &port);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (s.ok()) {
    told.Signal(SIGTERM);
    int status = 0;
    EXPECT_TRUE(told.Wait(30000, &status).ok());
  }
}

TEST_F(PacectlTest, UsageErrorsAndHelp) {
  BuildStore();
  Result r = Offline({"get", "foo", "1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "pacectl: unknown table 'foo' (tables: w, counts, topics, emb)\n");
  r = Offline({"describe", "nope", "--json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "pacectl: unknown table 'nope' (tables: w, counts, topics, emb)\n");
  r = Offline({"tables", "--limit=3"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "pacectl: --limit does not apply to 'tables' (only to scan)\n");
  r = Run({"tables"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("needs --data_dir=DIR"), std::string::npos) << r.err;
  r = Offline({"verify", "--server=127.0.0.1:7100"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("not both"), std::string::npos) << r.err;
  r = Offline({"tables", "--no_such_flag"});
  EXPECT_EQ(r.code, 1);
  r = Run({"--data_dir=" + tmp_.path() + "/missing", "tables"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no PaceDB store in " + tmp_.path() + "/missing"), std::string::npos)
      << r.err;
  r = Run({"--help"});
  EXPECT_EQ(r.code, 0);
  for (const char* c : {"tables", "describe", "get", "scan", "stats", "export", "checkpoint create",
                        "checkpoint list", "checkpoint restore", "verify"}) {
    EXPECT_NE(r.out.find(c), std::string::npos) << c << "\n" << r.out;
  }
}

TEST_F(PacectlTest, ImportRoundTripsBitForBitAndRefusesAMismatch) {
  BuildStore();
  const std::string p = tmp_.path() + "/";
  // npy: w (uniform initializer, f32), counts (i64), emb (normal, f64) into
  // new tables; exported again, each array is the same bytes.
  for (const std::string table : {"w", "counts", "emb"}) {
    Result r = Offline({"export", table, "--format=npy", "--out=" + p + table + ".npy"});
    ASSERT_EQ(r.code, 0) << r.err;
    r = Offline({"import", table + "2", p + table + ".npy"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("into new table " + table + "2"), std::string::npos) << r.out;
    EXPECT_EQ(r.err, "");
    r = Offline({"export", table + "2", "--format=npy", "--out=" + p + table + "2.npy"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(ReadFile(p + table + "2.npy"), ReadFile(p + table + ".npy")) << table;
    const TableSchema a = Schema(table), b = Schema(table + "2");
    EXPECT_EQ(b.type, a.type);
    EXPECT_EQ(b.width, a.width);
    Result ga = Offline({"get", table, "0", "1", "2"}),
           gb = Offline({"get", table + "2", "0", "1", "2"});
    ASSERT_EQ(gb.code, 0) << gb.err;
    // The same values; the imported rows are written ones.
    const std::string note = "  (never written: initializer value)";
    for (size_t at; (at = ga.out.find(note)) != std::string::npos;) ga.out.erase(at, note.size());
    EXPECT_EQ(gb.out, ga.out);
  }
  // Importing the same array again changes nothing (the deltas are zero).
  Result r = Offline({"import", "w2", p + "w.npy"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(p + "w2.npy"), ReadFile(p + "w.npy"));
  // CSV (the export format) into a new table: the written rows only.
  r = Offline({"export", "counts", "--format=csv", "--out=" + p + "counts.csv"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = Offline({"import", "c3", p + "counts.csv"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = Offline({"get", "c3", "1", "3"});
  EXPECT_EQ(r.out, "row 1: 11 22 33\nrow 3: 0 1 8\n");
  r = Offline({"stats"});
  EXPECT_NE(r.out.find("table=c3 rows=2 shard_clock=3"), std::string::npos) << r.out;

  // A schema mismatch (f64 x 2 into f32 x 4): exit 1, one line, nothing written.
  const std::string before = ReadFile(p + "w2.npy");
  r = Offline({"import", "w2", p + "emb.npy"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "pacectl: " + p + "emb.npy holds 11 rows of f64 x 2, but table 'w2' is dense " +
                       "f32 x 4: nothing imported (import into a new table name, or convert the " +
                       "array)\n");
  r = Offline({"export", "w2", "--format=npy", "--out=" + p + "w2.after.npy"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(p + "w2.after.npy"), before);
  r = Offline({"stats"});
  EXPECT_NE(r.out.find("table=c3 rows=2"), std::string::npos) << r.out;
  // A CSV of the wrong width into an existing table, and a sparse table.
  r = Offline({"import", "w2", p + "counts.csv"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("but table 'w2' is dense f32 x 4: nothing imported"), std::string::npos)
      << r.err;
  r = Offline({"import", "topics", p + "w.npy"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("table 'topics' is sparse"), std::string::npos) << r.err;
  // Online: refused, it writes the store.
  r = Run({"--server=127.0.0.1:1", "import", "w2", p + "w.npy"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("works offline only"), std::string::npos) << r.err;
}

// An int64 array of `rows` x 8 as an npy file: row r holds r * 8 + c.
void WriteNpy(const std::string& path, uint64_t rows) {
  std::string header =
      "{'descr': '<i8', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", 8), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const char len[2] = {static_cast<char>(header.size() & 0xff),
                       static_cast<char>(header.size() >> 8)};
  out.write(len, 2);
  out << header;
  for (uint64_t i = 0; i < rows * 8; ++i) {
    const int64_t v = static_cast<int64_t>(i);
    out.write(reinterpret_cast<const char*>(&v), 8);
  }
}

// pacectl import over two shards, SIGKILLed while paused at each stage in
// turn (after the markers, after the table exists on shard 0 only, after
// shard 0's batch only): each time both shards are refused by a job (paced
// exits 1 naming the command that completes the import), and that command
// completes it: the merged export is the array.
TEST_F(PacectlTest, ImportOverShardsIsAllOrNothingUnderSigkill) {
  if (!std::filesystem::exists(BinaryDir() + "/paced")) GTEST_SKIP() << "paced is not built";
  std::string dirs[2];
  for (uint32_t k = 0; k < 2; ++k) {
    dirs[k] = tmp_.path() + "/shard" + std::to_string(k);
    ShardStoreOptions o;
    o.shard_id = k;
    o.num_shards = 2;
    o.num_clients = 1;
    std::unique_ptr<ShardStore> store;
    ASSERT_TRUE(ShardStore::Open(o, dirs[k], &store).ok());
  }
  const std::string npy = tmp_.path() + "/a.npy";
  WriteNpy(npy, 2000);
  const std::string data_dir = "--data_dir=" + dirs[0] + "," + dirs[1];
  const std::string command = "pacectl " + data_dir + " import t " + npy;
  for (const char* stage :
       {"markers written", "table created on a shard", "batch written on a shard"}) {
    SCOPED_TRACE(stage);
    const std::string err = tmp_.path() + "/import.err." + std::to_string(++runs_);
    setenv("PACE_TEST_IMPORT_STOP_AT", stage, 1);
    Subprocess import;
    ASSERT_TRUE(import.Start({BinaryDir() + "/pacectl", data_dir, "import", "t", npy}, err).ok());
    unsetenv("PACE_TEST_IMPORT_STOP_AT");
    const std::string line = std::string("import stage: ") + stage;
    bool reached = false;
    for (int i = 0; i < 3000 && !reached; ++i) {
      reached = ReadFile(err).find(line) != std::string::npos;
      if (!reached) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(reached) << ReadFile(err);
    import.Signal(SIGKILL);
    int status = 0;
    ASSERT_TRUE(import.Wait(10000, &status).ok());
    ASSERT_TRUE(WIFSIGNALED(status));

    // A job refuses either shard, in one line naming the command.
    for (uint32_t k = 0; k < 2; ++k) {
      Subprocess paced;
      const std::string perr = tmp_.path() + "/paced.err." + std::to_string(++runs_);
      ASSERT_TRUE(paced
                      .Start({BinaryDir() + "/paced", "--data_dir=" + dirs[k], "--insecure",
                              "--shard=" + std::to_string(k), "--num_shards=2", "--num_clients=1",
                              "--listen=127.0.0.1:0"},
                             perr)
                      .ok());
      ASSERT_TRUE(paced.Wait(30000, &status).ok());
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
      const std::string text = ReadFile(perr);
      EXPECT_NE(text.find("an import did not complete on every shard (pacectl import was "
                          "stopped); run `" +
                          command + "` to complete it\n"),
                std::string::npos)
          << text;
    }
  }
  // The named command completes it.
  Result r = Run({data_dir, "import", "t", npy});
  ASSERT_EQ(r.code, 0) << r.err;
  for (uint32_t k = 0; k < 2; ++k) {
    EXPECT_FALSE(std::filesystem::exists(dirs[k] + "/IMPORT-INCOMPLETE"));
  }
  r = Run({data_dir, "export", "t", "--format=npy", "--out=" + tmp_.path() + "/b.npy"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string dict, want, got;
  ParseNpy(ReadFile(npy), &dict, &want);
  ParseNpy(ReadFile(tmp_.path() + "/b.npy"), &dict, &got);
  EXPECT_TRUE(want == got) << "the merged export differs from the imported array";
}

TEST_F(PacectlTest, OfflineInspectionWorksWhileAnotherProcessHoldsTheStore) {
  Subprocess writer;
  ASSERT_TRUE(writer
                  .Start({BinaryDir() + "/ctl_test_writer", dir_, "2", "populate"},
                         tmp_.path() + "/writer.stderr")
                  .ok());
  std::string line;
  ASSERT_TRUE(writer.ReadLine(&line, 60000).ok()) << ReadFile(tmp_.path() + "/writer.stderr");
  ASSERT_EQ(line, "ready");

  // The writer keeps the store open (RocksDB LOCK held, data only in its WAL).
  Result r = Offline({"get", "counts", "1", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "row 1: 11 22 33\nrow 3: 0 1 8\n");
  r = Offline({"tables"});
  EXPECT_EQ(r.code, 0) << r.err;
  r = Offline({"verify"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  r = Offline({"export", "counts", "--format=csv", "--out=-"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "row,c0,c1,c2\n1,11,22,33\n3,0,1,8\n");

  // Checkpointing needs the store for writing: refused with a clear message.
  r = Offline({"checkpoint", "create", tmp_.path() + "/ckpt"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is in use by another process (pid " + std::to_string(writer.pid())),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp_.path() + "/ckpt"));
  // So does import: refused in words, naming the holder.
  r = Offline({"export", "counts", "--format=csv", "--out=" + tmp_.path() + "/c.csv"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = Offline({"import", "c2", tmp_.path() + "/c.csv"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(dir_ + " is in use by another process (pid " + std::to_string(writer.pid())),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(writer.running());
}

TEST_F(PacectlTest, CheckpointCreateListRestore) {
  BuildStore();
  const std::string ckpts = tmp_.path() + "/ckpts";
  Result r = Offline({"checkpoint", "create", ckpts + "/first"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("shard clock 3, 4 table(s) (w,counts,topics,emb)"), std::string::npos)
      << r.out;
  r = Offline({"checkpoint", "create", ckpts + "/second", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(MustParse(r.out)["shard_clock"].number, 3);

  r = Run({"checkpoint", "list", ckpts});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(ckpts + "/first"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(ckpts + "/second"), std::string::npos) << r.out;
  r = Run({"checkpoint", "list", ckpts, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json j = MustParse(r.out);
  ASSERT_EQ(j["checkpoints"].size(), 2u);
  EXPECT_EQ(j["checkpoints"][0]["path"].text, ckpts + "/first");
  EXPECT_EQ(j["checkpoints"][0]["tables"][3].text, "emb");
  EXPECT_EQ(j["checkpoints"][0]["applied_clocks"].size(), 2u);

  const std::string restored = tmp_.path() + "/restored";
  r = Run({"checkpoint", "restore", ckpts + "/first", "--data_dir=" + restored});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("--num_clients=2"), std::string::npos) << r.out;
  r = Run({"--data_dir=" + restored, "get", "counts", "1", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "row 1: 11 22 33\nrow 3: 0 1 8\n");
  r = Run({"--data_dir=" + restored, "verify"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  r = Run({"checkpoint", "restore", ckpts + "/first", "--data_dir=" + restored});
  EXPECT_EQ(r.code, 1);
  r = Run({"checkpoint", "restore", tmp_.path() + "/none", "--data_dir=" + tmp_.path() + "/x"});
  EXPECT_EQ(r.code, 1);

  // A damaged manifest is corruption.
  std::ofstream(ckpts + "/second/PACE-CHECKPOINT", std::ios::app) << "tampered=1\n";
  r = Run({"checkpoint", "list", ckpts});
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("ERROR"), std::string::npos) << r.out;
}

// get/scan/export --at a checkpoint (by path and by shard clock) read the
// past; diff names the rows that changed and by how much.
TEST_F(PacectlTest, AtCheckpointAndDiff) {
  std::unique_ptr<ShardStore> store;
  ASSERT_TRUE(testing::BuildSampleStore(dir_, 2, &store).ok());
  const std::string c3 = dir_ + "/checkpoints/c3";
  std::filesystem::create_directories(dir_ + "/checkpoints");
  ASSERT_TRUE(store->CreateCheckpoint(c3).ok());
  // Clock 3: counts row 1 += [3,4,0] (client 0), row 3 += [0,0,12] (client 1).
  const uint32_t counts = store->FindTable("counts").value().id;
  const std::string d1 = EncodeDense<int64_t>({3, 4, 0});
  const std::string d3 = EncodeDense<int64_t>({0, 0, 12});
  bool dup = false;
  ASSERT_TRUE(store->ApplyBatch(0, 3, {RowDelta{counts, 1, d1}}, &dup).ok());
  ASSERT_TRUE(store->ApplyBatch(1, 3, {RowDelta{counts, 3, d3}}, &dup).ok());
  const std::string c4 = dir_ + "/checkpoints/c4";
  ASSERT_TRUE(store->CreateCheckpoint(c4).ok());
  store.reset();

  Result r = Offline({"get", "counts", "1", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "row 1: 14 26 33\nrow 3: 0 1 20\n");
  r = Offline({"get", "counts", "1", "3", "--at=3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "row 1: 11 22 33\nrow 3: 0 1 8\n");
  r = Run({"get", "counts", "1", "--at=" + c3});
  EXPECT_EQ(r.out, "row 1: 11 22 33\n") << r.err;
  r = Run({"scan", "counts", "--at=" + c4});
  EXPECT_EQ(r.out, "row 1: 14 26 33\nrow 3: 0 1 20\n") << r.err;
  const std::string csv = tmp_.path() + "/c3.csv";
  r = Run({"export", "counts", "--format=csv", "--out=" + csv, "--at=" + c3});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(ReadFile(csv).find("1,11,22,33"), std::string::npos) << ReadFile(csv);
  r = Offline({"get", "counts", "1", "--at=7"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no checkpoint of shard clock 7 under " + dir_ +
                       "/checkpoints (shard clocks there: 3, 4)"),
            std::string::npos)
      << r.err;
  r = Run({"get", "counts", "1", "--at=" + dir_});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is not a checkpoint"), std::string::npos) << r.err;

  r = Run({"diff", c3, c4, "counts"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("2 rows compared, 2 changed, L2 norm of the change 13\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("3    12  12\n1    5   4\n"), std::string::npos) << r.out;
  r = Run({"diff", c3, c4, "counts", "--top=1", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json j = MustParse(r.out);
  EXPECT_EQ(j["rows_changed"].number, 2);
  EXPECT_EQ(j["l2"].number, 13);
  ASSERT_EQ(j["top"].size(), 1u);
  EXPECT_EQ(j["top"][0]["row"].number, 3);
  EXPECT_EQ(j["a"]["shard_clock"].number, 3);
  EXPECT_EQ(j["b"]["shard_clock"].number, 4);
  r = Run({"diff", c3, c3, "w"});
  EXPECT_NE(r.out.find("3 rows compared, 0 changed"), std::string::npos) << r.out;
}

// pacectl checkpoint create SIGKILLed at points spread over its run: a
// directory it leaves is a whole checkpoint (its manifest reads), and what it
// leaves never blocks the next create into the same directory.
TEST_F(PacectlTest, KilledCheckpointCreateNeverBlocksTheNext) {
  BuildStore();
  std::string sst;
  ASSERT_TRUE(testing::AddBigTableAndFlush(dir_, 2, 100000, &sst).ok());
  const std::string ck = tmp_.path() + "/ck";
  // The kill points are spread over the fastest whole run so far (three
  // first, then the one after each kill): the first run of a cold process
  // (and of a sanitizer build, or one beside another test) can take several
  // times the later ones, which would put most kills after the end.
  Result r;
  auto full = std::chrono::steady_clock::duration::max();
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    r = Offline({"checkpoint", "create", ck});
    ASSERT_EQ(r.code, 0) << r.err;
    full = std::min(full, std::chrono::steady_clock::now() - t0);
    std::filesystem::remove_all(ck);
  }
  constexpr int kKills = 16;
  int killed = 0;
  for (int i = 0; i < kKills; ++i) {
    Subprocess p;
    ASSERT_TRUE(
        p.Start({BinaryDir() + "/pacectl", "--data_dir=" + dir_, "checkpoint", "create", ck},
                tmp_.path() + "/killed.err")
            .ok());
    std::this_thread::sleep_for(full * i / kKills);
    p.Signal(SIGKILL);
    int st = 0;
    ASSERT_TRUE(p.Wait(60000, &st).ok());
    killed += WIFSIGNALED(st) ? 1 : 0;
    if (std::filesystem::exists(ck)) {
      CheckpointManifest m;
      Status s = ShardStore::ReadCheckpointManifest(ck, &m);
      EXPECT_TRUE(s.ok()) << "kill " << i << " left " << ck << ": " << s.ToString();
      if (s.ok()) std::filesystem::remove_all(ck);
    }
    const auto t0 = std::chrono::steady_clock::now();
    r = Offline({"checkpoint", "create", ck});
    EXPECT_EQ(r.code, 0) << "after kill " << i << ": " << r.err;
    if (r.code == 0) full = std::min(full, std::chrono::steady_clock::now() - t0);
    EXPECT_FALSE(std::filesystem::exists(ck + ".partial"));
    std::filesystem::remove_all(ck);
  }
  EXPECT_GE(killed, kKills / 2);
}

TEST_F(PacectlTest, OnlineAgainstRunningPaced) {
  // Needs no server: a refused connection names the address.
  Result r = Run({"--server=127.0.0.1:1", "--connect_timeout_ms=300", "tables"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot connect to 127.0.0.1:1"), std::string::npos) << r.err;

  if (!std::filesystem::exists(BinaryDir() + "/paced")) {
    GTEST_SKIP() << "paced is not built in " << BinaryDir() << "; online mode not tested";
  }
  BuildStore(1);
  const std::string token = tmp_.path() + "/token";
  std::ofstream(token) << "s3cret\n";
  Subprocess paced;
  uint16_t port = 0;
  Status s = testing::StartPaced(&paced, dir_, 0, 1, 1, {"--token_file=" + token}, &port);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string server = "--server=127.0.0.1:" + std::to_string(port);
  const std::string tok = "--token_file=" + token;

  r = Run({server, tok, "tables", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(MustParse(r.out)["tables"].size(), 4u);
  r = Run({server, tok, "get", "counts", "1", "3", "5"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "row 1: 11 22 33\nrow 3: 0 1 8\nrow 5: 0 0 0\n");
  r = Run({server, tok, "get", "topics", "0", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json j = MustParse(r.out);
  EXPECT_EQ(j["version"].number, 3);
  EXPECT_EQ(j["rows"][0]["columns"][0].number, 3);
  r = Run({server, tok, "describe", "w"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("shard clock  3"), std::string::npos) << r.out;
  r = Run({server, tok, "stats", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  j = MustParse(r.out);
  EXPECT_EQ(j["shard_clock"].number, 3);
  EXPECT_EQ(j["counters"].type, Json::kObject);
  // Memory per component against its bound (the shard's RocksDB and row cache).
  EXPECT_GT(j["counters"]["memory_block_cache_limit_bytes"].number, 0);
  EXPECT_GT(j["counters"]["memory_memtables_limit_bytes"].number, 0);
  EXPECT_TRUE(j["counters"].has("memory_table_readers_bytes"));
  r = Run({server, tok, "stats"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("memory"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  block_cache"), std::string::npos) << r.out;
  r = Run({server, tok, "get", "foo", "1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "pacectl: unknown table 'foo' (tables: w, counts, topics, emb)\n");
  r = Run({server, tok, "scan", "w"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("scan online needs --limit=N"), std::string::npos) << r.err;
  r = Run({server, tok, "scan", "counts", "--limit=4"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "row 0: 0 0 0\nrow 1: 11 22 33\nrow 2: 0 0 0\nrow 3: 0 1 8\n");
  r = Run({server, "tables"});  // no token
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot connect to 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << r.err;

  // Offline inspection beside the running server.
  r = Offline({"get", "counts", "1"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "row 1: 11 22 33\n");
}

// A real 2-shard job: two paced shard servers and one pace_mf client. The
// merged export of both data dirs is one array equal, row for row, to what
// `pacectl get` shows on each row's owning shard; --servers routes get by the
// placement hash and aggregates tables/stats.
TEST_F(PacectlTest, TwoShardJobMergedExportAndServers) {
  for (const char* bin : {"paced", "pace_mf", "pace_gen"}) {
    if (!std::filesystem::exists(BinaryDir() + "/" + bin)) {
      GTEST_SKIP() << bin << " is not built in " << BinaryDir();
    }
  }
  const std::string train = tmp_.path() + "/train.txt";
  {
    Subprocess gen;
    ASSERT_TRUE(gen.Start({BinaryDir() + "/pace_gen", "ratings", "--users=60", "--items=50",
                           "--rank=2", "--ratings=1500", "--seed=3", "--out=" + train},
                          tmp_.path() + "/gen.err")
                    .ok());
    int status = 0;
    ASSERT_TRUE(gen.Wait(60000, &status).ok());
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << ReadFile(tmp_.path() + "/gen.err");
  }
  Subprocess shard[2];
  uint16_t port[2];
  std::string dirs[2], addr[2];
  for (uint32_t k = 0; k < 2; ++k) {
    dirs[k] = tmp_.path() + "/shard" + std::to_string(k);
    Status s = testing::StartPaced(&shard[k], dirs[k], k, 2, 1, {}, &port[k]);
    ASSERT_TRUE(s.ok()) << s.ToString();
    addr[k] = "127.0.0.1:" + std::to_string(port[k]);
  }
  const std::string servers = "--servers=" + addr[0] + "," + addr[1];
  {
    Subprocess mf;
    const std::string err = tmp_.path() + "/mf.err";
    ASSERT_TRUE(mf.Start({BinaryDir() + "/pace_mf", "--train=" + train, "--clocks=3", "--rank=3",
                          servers, "--client_id=0", "--num_clients=1"},
                         err)
                    .ok());
    std::string line;
    while (mf.ReadLine(&line, 120000).ok()) {
    }
    int status = 0;
    ASSERT_TRUE(mf.Wait(120000, &status).ok());
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(err);
  }

  // Online over both shards.
  Result r = Run({servers, "tables", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_GE(MustParse(r.out)["tables"].size(), 3u) << r.out;
  r = Run({servers, "stats", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json st = MustParse(r.out);
  ASSERT_EQ(st["shards"].size(), 2u) << r.out;
  EXPECT_EQ(st["shards"][1]["identity"]["shard_id"].number, 1);
  EXPECT_EQ(st["shard_clock"].number,
            std::min(st["shards"][0]["shard_clock"].number, st["shards"][1]["shard_clock"].number));
  r = Run({servers, "describe", "mf.item"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("server " + addr[1]), std::string::npos) << r.out;
  // Listed out of shard order: refused, naming the mismatch.
  r = Run({"--servers=" + addr[1] + "," + addr[0], "tables"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("in shard id order"), std::string::npos) << r.err;

  // Merged offline export, beside the running shards.
  const std::string npy = tmp_.path() + "/item.npy";
  r = Run({"--data_dir=" + dirs[0] + "," + dirs[1], "export", "mf.item", "--format=npy",
           "--out=" + npy, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json ex = MustParse(r.out);
  EXPECT_EQ(ex["shards"].number, 2);
  const uint64_t n = static_cast<uint64_t>(ex["shape"][0].number);
  const uint32_t width = static_cast<uint32_t>(ex["shape"][1].number);
  ASSERT_GT(n, 10u);
  ASSERT_EQ(width, 4u);  // rank 3 + bias
  std::string dict, data;
  ParseNpy(ReadFile(npy), &dict, &data);
  const std::vector<float> merged = DecodeDense<float>(data);
  ASSERT_EQ(merged.size(), n * width);

  // Each shard alone: the row ids it holds (NAME.rows.npy); the merged ids are
  // their union, and every shard holds only rows it owns.
  auto row_ids = [&](const std::string& path) {
    std::string d, bytes;
    ParseNpy(ReadFile(path), &d, &bytes);
    EXPECT_NE(d.find("'descr': '<u8'"), std::string::npos) << d;
    return DecodeDense<uint64_t>(bytes);
  };
  std::vector<uint64_t> union_ids;
  uint32_t table_id = 0;
  for (uint32_t k = 0; k < 2; ++k) {
    const std::string one = tmp_.path() + "/item" + std::to_string(k) + ".npy";
    r = Run({"--data_dir=" + dirs[k], "export", "mf.item", "--format=npy", "--out=" + one});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("shard " + std::to_string(k) + " of 2"), std::string::npos) << r.err;
    if (table_id == 0) {
      ShardStoreOptions o;
      o.read_only = true;
      o.check_identity = false;
      std::unique_ptr<ShardStore> store;
      ASSERT_TRUE(ShardStore::Open(o, dirs[k], &store).ok());
      table_id = store->FindTable("mf.item").value().id;
    }
    std::vector<uint64_t> ids = row_ids(tmp_.path() + "/item" + std::to_string(k) + ".rows.npy");
    ASSERT_FALSE(ids.empty());
    for (uint64_t id : ids) EXPECT_EQ(ShardOf(table_id, id, 2), k) << id;
    union_ids.insert(union_ids.end(), ids.begin(), ids.end());
  }
  std::sort(union_ids.begin(), union_ids.end());
  EXPECT_EQ(row_ids(tmp_.path() + "/item.rows.npy"), union_ids);
  EXPECT_EQ(union_ids.back() + 1, n);

  // Every row of the merged array equals `pacectl get` on its owning shard
  // (--server=that shard alone), and `get` over --servers routes the same.
  std::vector<std::string> owned[2];
  std::vector<std::string> all = {servers, "get", "mf.item", "--json"};
  for (uint64_t row = 0; row < n; ++row) {
    owned[ShardOf(table_id, row, 2)].push_back(std::to_string(row));
    all.push_back(std::to_string(row));
  }
  std::map<uint64_t, std::vector<float>> got;
  for (uint32_t k = 0; k < 2; ++k) {
    std::vector<std::string> a = {"--server=" + addr[k], "get", "mf.item", "--json"};
    a.insert(a.end(), owned[k].begin(), owned[k].end());
    r = Run(a);
    ASSERT_EQ(r.code, 0) << r.err;
    Json j = MustParse(r.out);
    ASSERT_EQ(j["rows"].size(), owned[k].size());
    for (const Json& row : j["rows"].items) {
      for (uint32_t c = 0; c < width; ++c) {
        got[static_cast<uint64_t>(row["row"].number)].push_back(
            std::strtof(row["values"][c].text.c_str(), nullptr));
      }
    }
  }
  ASSERT_EQ(got.size(), n);
  for (uint64_t row = 0; row < n; ++row) {
    for (uint32_t c = 0; c < width; ++c) {
      EXPECT_EQ(merged[row * width + c], got[row][c]) << "row " << row << " col " << c;
    }
  }
  r = Run(all);
  ASSERT_EQ(r.code, 0) << r.err;
  Json routed = MustParse(r.out);
  ASSERT_EQ(routed["rows"].size(), n);
  for (uint64_t row = 0; row < n; ++row) {
    for (uint32_t c = 0; c < width; ++c) {
      EXPECT_EQ(std::strtof(routed["rows"][row]["values"][c].text.c_str(), nullptr),
                merged[row * width + c]);
    }
  }
  // scan over --servers: rows 2..n-1, each from its owner, in row order.
  r = Run({servers, "scan", "mf.item", "--start=2", "--limit=" + std::to_string(n - 2), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json scanned = MustParse(r.out);
  ASSERT_EQ(scanned["rows"].size(), n - 2);
  for (uint64_t i = 0; i < n - 2; ++i) {
    EXPECT_EQ(scanned["rows"][i]["row"].number, i + 2);
    for (uint32_t c = 0; c < width; ++c) {
      EXPECT_EQ(std::strtof(scanned["rows"][i]["values"][c].text.c_str(), nullptr),
                merged[(i + 2) * width + c]);
    }
  }
  // A single --server refuses a row the other shard owns.
  r = Run({"--server=" + addr[0], "get", "mf.item", owned[1][0]});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("lives on shard 1"), std::string::npos) << r.err;

  // Offline get over both dirs (repeated --data_dir) routes the same way.
  uint64_t w1 = 0, w0 = 0;  // written rows owned by shard 1 and shard 0
  for (uint64_t id : union_ids) (ShardOf(table_id, id, 2) == 1 ? w1 : w0) = id;
  r = Run({"--data_dir=" + dirs[0], "--data_dir=" + dirs[1], "get", "mf.item", std::to_string(w1),
           std::to_string(w0), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json off = MustParse(r.out);
  ASSERT_EQ(off["rows"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const uint64_t row = i == 0 ? w1 : w0;
    EXPECT_TRUE(off["rows"][i]["written"].b) << row;
    for (uint32_t c = 0; c < width; ++c) {
      EXPECT_EQ(std::strtof(off["rows"][i]["values"][c].text.c_str(), nullptr),
                merged[row * width + c]);
    }
  }

  // --rows sizes the array; the extra rows hold their initializer's values.
  r = Run({"--data_dir=" + dirs[0] + "," + dirs[1], "export", "mf.item", "--format=npy",
           "--out=" + npy, "--rows=" + std::to_string(n + 5), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(MustParse(r.out)["shape"][0].number, n + 5);
  ParseNpy(ReadFile(npy), &dict, &data);
  const std::vector<float> sized = DecodeDense<float>(data);
  ASSERT_EQ(sized.size(), (n + 5) * width);
  EXPECT_TRUE(std::equal(merged.begin(), merged.end(), sized.begin()));
  r = Run({servers, "get", "mf.item", std::to_string(n + 4), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(std::strtof(MustParse(r.out)["rows"][0]["values"][2].text.c_str(), nullptr),
            sized[(n + 4) * width + 2]);
  r = Run({"--data_dir=" + dirs[0] + "," + dirs[1], "export", "mf.item", "--format=npy",
           "--out=" + tmp_.path() + "/small.npy", "--rows=" + std::to_string(n - 1)});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("does not fit --rows="), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp_.path() + "/small.npy"));

  // Online export over --servers: rows 0..N-1 from their owners, the same
  // array as the merged offline export (training has finished).
  const std::string online_npy = tmp_.path() + "/online.npy";
  r = Run({servers, "export", "mf.item", "--format=npy", "--out=" + online_npy,
           "--rows=" + std::to_string(n + 5), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json oj = MustParse(r.out);
  EXPECT_EQ(oj["shards"].number, 2);
  EXPECT_EQ(oj["shape"][0].number, n + 5);
  EXPECT_EQ(ReadFile(online_npy), ReadFile(npy));
  EXPECT_FALSE(std::filesystem::exists(tmp_.path() + "/online.rows.npy"));
  r = Run({servers, "export", "mf.item", "--format=csv", "--out=-", "--rows=" + std::to_string(n)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(static_cast<size_t>(std::count(r.out.begin(), r.out.end(), '\n')), n + 1);
  r = Run({servers, "export", "mf.item", "--format=npy", "--out=" + online_npy});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("needs --rows=N"), std::string::npos) << r.err;
  r = Run({"--server=" + addr[0], "export", "mf.item", "--format=npy", "--out=" + online_npy,
           "--rows=3"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--servers=A,B"), std::string::npos) << r.err;

  // Merged CSV: one line per written row, in row order.
  r = Run(
      {"--data_dir=" + dirs[0] + "," + dirs[1], "export", "mf.item", "--format=csv", "--out=-"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(static_cast<size_t>(std::count(r.out.begin(), r.out.end(), '\n')),
            union_ids.size() + 1);

  // Not the shards of one job: refused.
  r = Run({"--data_dir=" + dirs[0] + "," + dirs[0], "tables"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("are both shard 0"), std::string::npos) << r.err;
  r = Run({"--data_dir=" + dirs[0] + "," + dirs[1], "verify"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("takes one --data_dir"), std::string::npos) << r.err;

  // Import over both shards (stopped: import writes): each row to its owner,
  // one table id on both; the merged export of the new table is the array.
  r = Run({"--data_dir=" + dirs[0] + "," + dirs[1], "import", "pre.item", npy});
  EXPECT_EQ(r.code, 1);  // the shards still run
  EXPECT_NE(r.err.find("is in use by another process"), std::string::npos) << r.err;
  for (uint32_t k = 0; k < 2; ++k) {
    shard[k].Signal(SIGTERM);
    int status = 0;
    ASSERT_TRUE(shard[k].Wait(30000, &status).ok());
  }
  r = Run({"--data_dir=" + dirs[1] + "," + dirs[0], "import", "pre.item", npy});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("one batch per shard on 2 shards"), std::string::npos) << r.out;
  const std::string again = tmp_.path() + "/pre.npy";
  r = Run({"--data_dir=" + dirs[0] + "," + dirs[1], "export", "pre.item", "--format=npy",
           "--out=" + again});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(again), ReadFile(npy));
  // Each shard holds only the rows it owns, under one table id.
  uint32_t pre_id = 0;
  for (uint32_t k = 0; k < 2; ++k) {
    ShardStoreOptions o;
    o.read_only = true;
    o.check_identity = false;
    std::unique_ptr<ShardStore> store;
    ASSERT_TRUE(ShardStore::Open(o, dirs[k], &store).ok());
    const uint32_t id = store->FindTable("pre.item").value().id;
    if (k == 1) {
      EXPECT_EQ(id, pre_id);
    }
    pre_id = id;
    uint64_t rows = 0;
    ASSERT_TRUE(store
                    ->Scan(id, 0,
                           [&](uint64_t row, std::string_view) {
                             EXPECT_EQ(ShardOf(id, row, 2), k) << row;
                             ++rows;
                             return true;
                           })
                    .ok());
    EXPECT_GT(rows, 0u);
  }
}

}  // namespace
}  // namespace pace
