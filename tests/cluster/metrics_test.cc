// Metrics endpoints: `paced --metrics_listen` and `pace_mf --metrics_listen`
// scraped with plain HTTP GETs over loopback during a run, and the bodies
// checked against the Prometheus text format strictly (ParsePromText below:
// HELP/TYPE before samples, valid names and labels, numbers, no duplicate
// series, contiguous families, cumulative histograms whose +Inf bucket equals
// _count). The checker itself is tested on broken inputs first.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/testing/http_get.h"
#include "tests/testing/subprocess.h"

namespace pace {
namespace {

using testing::BinaryDir;
using testing::HttpGet;
using testing::Subprocess;
using testing::TempDir;

// --- A strict Prometheus text-format checker -----------------------------------

bool IsMetricName(const std::string& s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
              (i > 0 && std::isdigit(static_cast<unsigned char>(c)));
    if (!ok) return false;
  }
  return true;
}
bool IsLabelName(const std::string& s) {
  return IsMetricName(s) && s.find(':') == std::string::npos && s.rfind("__", 0) != 0;
}
bool ParseNumber(const std::string& s, double* v) {
  if (s == "+Inf" || s == "Inf") return *v = INFINITY, true;
  if (s == "-Inf") return *v = -INFINITY, true;
  if (s == "NaN") return *v = NAN, true;
  if (s.empty()) return false;
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

struct Parsed {
  std::map<std::string, std::string> types;  // family -> type
  std::map<std::string, double> series;      // "name{a="x",b="y"}" -> value
};

// Returns "" if `text` is valid, else the first problem with its line number.
std::string ParsePromText(const std::string& text, Parsed* out) {
  if (text.empty() || text.back() != '\n') return "body does not end with a newline";
  std::map<std::string, std::string>& types = out->types;
  std::set<std::string> helped, closed;
  std::string current;  // family of the previous line
  // Histogram bookkeeping: family + labels without le -> (last le, last count).
  std::map<std::string, std::pair<double, double>> buckets;
  std::map<std::string, double> inf_bucket, counts;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  auto enter = [&](const std::string& family) -> std::string {
    if (family != current) {
      if (closed.count(family)) return "family " + family + " is not contiguous";
      if (!current.empty()) closed.insert(current);
      current = family;
    }
    return "";
  };
  while (std::getline(in, line)) {
    ++n;
    const std::string at = "line " + std::to_string(n) + " '" + line + "': ";
    if (line.empty()) return at + "empty line";
    if (line[0] == '#') {
      std::istringstream ls(line);
      std::string hash, kind, name;
      ls >> hash >> kind >> name;
      if (hash != "#") return at + "a comment starts with '# '";
      if (kind != "HELP" && kind != "TYPE") continue;  // a plain comment
      if (!IsMetricName(name)) return at + "bad metric name";
      std::string e = enter(name);
      if (!e.empty()) return at + e;
      if (kind == "HELP") {
        if (!helped.insert(name).second) return at + "second HELP";
        continue;
      }
      std::string type, extra;
      ls >> type;
      if (ls >> extra) return at + "junk after the type";
      if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" &&
          type != "untyped") {
        return at + "unknown type";
      }
      if (types.count(name)) return at + "second TYPE";
      if (out->series.size() && closed.count(name)) return at + "TYPE after samples";
      types[name] = type;
      continue;
    }
    // A sample: name[{labels}] value [timestamp]
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    std::string name = line.substr(0, i);
    if (!IsMetricName(name)) return at + "bad metric name";
    std::vector<std::pair<std::string, std::string>> labels;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos) return at + "label without '='";
        std::string lname = line.substr(i, eq - i);
        if (!IsLabelName(lname)) return at + "bad label name '" + lname + "'";
        i = eq + 1;
        if (i >= line.size() || line[i] != '"') return at + "label value not quoted";
        ++i;
        std::string value;
        for (;;) {
          if (i >= line.size()) return at + "unterminated label value";
          char c = line[i++];
          if (c == '"') break;
          if (c == '\\') {
            if (i >= line.size()) return at + "dangling backslash";
            char e = line[i++];
            if (e == 'n') {
              value += '\n';
            } else if (e == '\\' || e == '"') {
              value += e;
            } else {
              return at + "bad escape";
            }
          } else {
            value += c;
          }
        }
        for (const auto& l : labels) {
          if (l.first == lname) return at + "label " + lname + " twice";
        }
        labels.emplace_back(lname, value);
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) return at + "unterminated label set";
      ++i;  // '}'
    }
    if (i >= line.size() || line[i] != ' ') return at + "no space before the value";
    std::istringstream rest(line.substr(i + 1));
    std::string value_text, timestamp, extra;
    rest >> value_text >> timestamp >> extra;
    double value = 0;
    if (!ParseNumber(value_text, &value)) return at + "bad value '" + value_text + "'";
    if (!timestamp.empty()) {
      char* end = nullptr;
      std::strtoll(timestamp.c_str(), &end, 10);
      if (*end != '\0') return at + "bad timestamp";
    }
    if (!extra.empty()) return at + "junk after the value";
    // Its family: the name, or a histogram's name + _bucket/_sum/_count.
    std::string family = name, suffix;
    for (const char* s : {"_bucket", "_sum", "_count"}) {
      std::string sf = s;
      if (name.size() > sf.size() && name.compare(name.size() - sf.size(), sf.size(), sf) == 0) {
        std::string base = name.substr(0, name.size() - sf.size());
        if (types.count(base) && types[base] == "histogram") family = base, suffix = sf;
      }
    }
    if (!types.count(family)) return at + "sample without a TYPE line";
    std::string e = enter(family);
    if (!e.empty()) return at + e;
    const std::string& type = types[family];
    if (type == "histogram" && suffix.empty()) return at + "histogram sample without a suffix";
    if (type == "counter" && !(value >= 0)) return at + "negative counter";
    std::string key = name + "{", key_no_le = family + "{";
    double le = NAN;
    bool has_le = false;
    for (const auto& [k, v] : labels) {
      key += k + "=\"" + v + "\",";
      if (k == "le" && suffix == "_bucket") {
        has_le = true;
        if (!ParseNumber(v, &le)) return at + "bad le";
      } else {
        key_no_le += k + "=\"" + v + "\",";
      }
    }
    key += "}";
    key_no_le += "}";
    if (!out->series.emplace(key, value).second) return at + "duplicate series";
    if (suffix == "_bucket") {
      if (!has_le) return at + "bucket without le";
      auto it = buckets.find(key_no_le);
      if (it != buckets.end()) {
        if (!(le > it->second.first)) return at + "le not increasing";
        if (value < it->second.second) return at + "bucket counts not cumulative";
      }
      buckets[key_no_le] = {le, value};
      if (std::isinf(le)) inf_bucket[key_no_le] = value;
    } else if (suffix == "_count") {
      counts[key_no_le] = value;
    }
  }
  for (const auto& [k, v] : buckets) {
    if (!inf_bucket.count(k)) return "histogram " + k + " has no +Inf bucket";
    if (!counts.count(k) || counts[k] != inf_bucket[k])
      return "histogram " + k + ": +Inf != _count";
  }
  return "";
}

TEST(PromTextCheckerTest, AcceptsValidAndRejectsBrokenText) {
  const std::string good =
      "# HELP a_total things\n# TYPE a_total counter\na_total{x=\"1\"} 3\na_total{x=\"2\"} 4\n"
      "# TYPE h histogram\nh_bucket{le=\"0\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n";
  Parsed p;
  EXPECT_EQ(ParsePromText(good, &p), "");
  EXPECT_EQ(p.series.at("a_total{x=\"2\",}"), 4);
  const char* bad[] = {
      "a 1\n",                                       // no TYPE
      "# TYPE a gauge\na 1",                         // no final newline
      "# TYPE a gauge\na{x=1} 1\n",                  // unquoted label
      "# TYPE a gauge\na 1\na 2\n",                  // duplicate series
      "# TYPE a gauge\na one\n",                     // bad value
      "# TYPE a counter\na -1\n",                    // negative counter
      "# TYPE 1a gauge\n1a 1\n",                     // bad name
      "# TYPE a gauge\n# TYPE b gauge\nb 1\na 1\n",  // not contiguous
      "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\nh_sum 0\n",
      "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 1\nh_sum 0\n",
      "# TYPE a gauge\na{x=\"\\q\"} 1\n",  // bad escape
  };
  for (const char* b : bad) {
    Parsed q;
    EXPECT_NE(ParsePromText(b, &q), "") << b;
  }
}

// --- HTTP ------------------------------------------------------------------------

// Scrapes /metrics and checks status, content type and format.
void Scrape(uint16_t port, Parsed* parsed, const std::string& who) {
  int status = 0;
  std::string headers, body;
  std::string err = HttpGet(port, "/metrics", &status, &headers, &body);
  ASSERT_EQ(err, "") << who;
  ASSERT_EQ(status, 200) << who << ": " << headers;
  EXPECT_NE(headers.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << headers;
  ASSERT_EQ(ParsePromText(body, parsed), "") << who << " body:\n" << body;
}

// Reads child lines until one starts with `prefix`; returns its port (after
// the last ':').
uint16_t WaitForPortLine(Subprocess* p, const std::string& prefix, const std::string& who) {
  std::string line;
  for (;;) {
    Status s = p->ReadLine(&line, 60000);
    EXPECT_TRUE(s.ok()) << who << ": no '" << prefix << "' line: " << s.ToString();
    if (!s.ok()) return 0;
    if (line.rfind(prefix, 0) == 0)
      return static_cast<uint16_t>(std::atoi(line.c_str() + line.rfind(':') + 1));
  }
}

TEST(MetricsEndpointTest, PacedAndPaceMfServeValidPrometheusTextDuringARun) {
  TempDir dir;
  const std::string bin = BinaryDir();
  Subprocess gen;
  ASSERT_TRUE(
      gen.Start({bin + "/pace_gen", "ratings", "--users=300", "--items=200", "--rank=4",
                 "--ratings=20000", "--noise=0.5", "--seed=1", "--out=" + dir.path() + "/train.txt",
                 "--test_out=" + dir.path() + "/test.txt", "--test_fraction=0.1"},
                dir.path() + "/gen.log")
          .ok());
  int status = 0;
  ASSERT_TRUE(gen.Wait(60000, &status).ok());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  Subprocess paced;
  ASSERT_TRUE(
      paced
          .Start({bin + "/paced", "--listen=127.0.0.1:0", "--data_dir=" + dir.path() + "/shard",
                  "--num_clients=1", "--metrics_listen=127.0.0.1:0", "--insecure"},
                 dir.path() + "/paced.log")
          .ok());
  uint16_t shard_metrics = WaitForPortLine(&paced, "paced metrics on ", "paced");
  uint16_t shard_port = WaitForPortLine(&paced, "paced listening on ", "paced");
  ASSERT_NE(shard_metrics, 0);
  ASSERT_NE(shard_port, 0);

  // Stragglers keep the run going (>= 100 ms per clock) while we scrape.
  Subprocess mf;
  ASSERT_TRUE(mf.Start({bin + "/pace_mf", "--train=" + dir.path() + "/train.txt",
                        "--test=" + dir.path() + "/test.txt",
                        "--servers=127.0.0.1:" + std::to_string(shard_port), "--rank=4",
                        "--clocks=40", "--workers=2", "--consistency=ssp", "--staleness=2",
                        "--straggler_ms=100", "--straggler_prob=1", "--metrics_listen=127.0.0.1:0"},
                       dir.path() + "/mf.log")
                  .ok());
  uint16_t client_metrics = WaitForPortLine(&mf, "# metrics on ", "pace_mf");
  ASSERT_NE(client_metrics, 0);
  // Wait for the report of clock 3 (lines "     3   seconds ...").
  std::string line;
  for (;;) {
    ASSERT_TRUE(mf.ReadLine(&line, 60000).ok()) << "pace_mf stopped reporting";
    std::istringstream ls(line);
    std::string first;
    ls >> first;
    if (first == "3") break;
  }

  Parsed shard, client;
  Scrape(shard_metrics, &shard, "paced");
  Scrape(client_metrics, &client, "pace_mf");
  if (HasFatalFailure()) return;
  // A sample of what must be there, with values of a running job.
  EXPECT_GE(shard.series.at("pace_shard_clock{}"), 3);
  EXPECT_GE(shard.series.at("pace_shard_client_applied_clock{client=\"0\",}"), 3);
  EXPECT_EQ(shard.series.at("pace_shard_client_lag_clocks{client=\"0\",}"), 0);
  EXPECT_GE(shard.series.at("pace_shard_batches_applied_total{}"), 3);
  EXPECT_GT(shard.series.at("pace_shard_delta_bytes_applied_total{}"), 0);
  EXPECT_GT(shard.series.at("pace_shard_reads_total{}"), 0);
  EXPECT_EQ(shard.series.at("pace_shard_sessions_active{}"), 1);
  EXPECT_GE(shard.series.at("pace_shard_connections_accepted_total{}"), 1);
  EXPECT_EQ(shard.series.at("pace_shard_refused_peers_total{}"), 0);
  EXPECT_EQ(shard.series.at("pace_shard_memory_limit_bytes{component=\"row_cache\",}"),
            512.0 * (1 << 20));
  // Memory per component against its bound (RocksDB properties), group commits.
  EXPECT_GT(shard.series.at("pace_shard_memory_limit_bytes{component=\"block_cache\",}"), 0);
  EXPECT_GT(shard.series.at("pace_shard_memory_limit_bytes{component=\"memtables\",}"), 0);
  EXPECT_GT(shard.series.at("pace_shard_memory_bytes{component=\"memtables\",}"), 0);
  EXPECT_TRUE(shard.series.count("pace_shard_memory_bytes{component=\"table_readers\",}"));
  EXPECT_GE(shard.series.at("pace_shard_commit_groups_total{}"), 1);
  EXPECT_GE(shard.series.at("pace_shard_commit_group_batches_total{}"),
            shard.series.at("pace_shard_commit_groups_total{}"));
  EXPECT_TRUE(shard.series.count("pace_shard_table_bytes{table=\"mf.user\",}"));
  EXPECT_EQ(shard.types.at("pace_shard_batches_applied_total"), "counter");

  EXPECT_EQ(client.types.at("pace_client_read_staleness_clocks"), "histogram");
  EXPECT_GT(client.series.at("pace_client_memory_limit_bytes{component=\"client.cache\",}"), 0);
  EXPECT_TRUE(client.series.count("pace_client_memory_bytes{component=\"client.unacked\",}"));
  const double reads = client.series.at("pace_client_reads_total{table=\"mf.item\",}");
  EXPECT_GT(reads, 0);
  EXPECT_GT(client.series.at("pace_client_read_staleness_clocks_count{table=\"mf.item\",}"), 0);
  // ssp s=2: buckets le 0, 1, 2 and +Inf, nothing staler than 2.
  EXPECT_EQ(
      client.series.at("pace_client_read_staleness_clocks_bucket{table=\"mf.item\",le=\"2\",}"),
      client.series.at("pace_client_read_staleness_clocks_bucket{table=\"mf.item\",le=\"+Inf\",}"));
  EXPECT_EQ(client.series.at("pace_client_cache_hits_total{table=\"mf.item\",}") +
                client.series.at("pace_client_cache_misses_total{table=\"mf.item\",}"),
            reads);
  EXPECT_GT(client.series.at("pace_client_bytes_sent_total{}"), 0);
  EXPECT_GT(client.series.at("pace_client_bytes_received_total{}"), 0);
  EXPECT_GE(client.series.at("pace_client_batches_sent_total{}"), 3);
  EXPECT_GT(client.series.at("pace_client_blocked_seconds_total{in=\"clock\",}") +
                client.series.at("pace_client_blocked_seconds_total{in=\"get\",}"),
            0);

  // A later scrape: counters never go down.
  Parsed later;
  Scrape(shard_metrics, &later, "paced (2nd)");
  if (HasFatalFailure()) return;
  for (const auto& [key, value] : shard.series) {
    const std::string family = key.substr(0, key.find('{'));
    if (shard.types.count(family) && shard.types.at(family) == "counter") {
      EXPECT_GE(later.series.at(key), value) << key;
    }
  }
  // Other paths and methods get errors, not metrics.
  int code = 0;
  std::string headers, body;
  ASSERT_EQ(HttpGet(shard_metrics, "/nope", &code, &headers, &body), "");
  EXPECT_EQ(code, 404);

  ASSERT_TRUE(mf.Wait(120000, &status).ok());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "pace_mf status " << status;
  paced.Signal(SIGTERM);
  ASSERT_TRUE(paced.Wait(30000, &status).ok());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "paced status " << status;
}

TEST(MetricsEndpointTest, AnAddressInUseIsAClearError) {
  TempDir dir;
  Subprocess first;
  ASSERT_TRUE(first
                  .Start({BinaryDir() + "/paced", "--listen=127.0.0.1:0",
                          "--data_dir=" + dir.path() + "/a", "--metrics_listen=127.0.0.1:0"},
                         dir.path() + "/a.log")
                  .ok());
  uint16_t port = WaitForPortLine(&first, "paced metrics on ", "paced");
  ASSERT_NE(port, 0);
  Subprocess second;
  ASSERT_TRUE(
      second
          .Start({BinaryDir() + "/paced", "--listen=127.0.0.1:0", "--data_dir=" + dir.path() + "/b",
                  "--metrics_listen=127.0.0.1:" + std::to_string(port)},
                 dir.path() + "/b.log")
          .ok());
  int status = 0;
  ASSERT_TRUE(second.Wait(30000, &status).ok());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  std::ifstream log(dir.path() + "/b.log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("--metrics_listen: IOError: metrics: cannot listen on 127.0.0.1:" +
                      std::to_string(port)),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace pace
