// Integration tests of a real `paced` process over loopback TCP: tables,
// batches from several clients, parked reads, duplicate re-sends, hostile
// input, the default job token, and SIGKILL + restart without losing an
// acknowledged batch.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "common/read_file.h"
#include "common/row.h"
#include "common/sanitizers.h"
#include "common/token_file.h"
#include "net/codec.h"
#include "net/remote_shard.h"
#include "tests/testing/run_binary.h"
#include "tests/testing/shard_peer.h"
#include "tests/testing/subprocess.h"

namespace pace {
namespace {

using namespace std::chrono_literals;
using testing::StartPaced;
using testing::Subprocess;
using testing::TempDir;

using testing::Await;
using testing::RawConn;
using Client = testing::PeerClient;

Status Connect(uint16_t port, ClientId id, Client* c, const std::string& token = "",
               net::Hello::Role role = net::Hello::kClientProcess) {
  return testing::ConnectPeer(port, id, c, token, role);
}

TableSchema IntTable(const std::string& name, uint32_t width) {
  TableSchema s;
  s.name = name;
  s.type = ElementType::kI64;
  s.width = width;
  return s;
}

net::RowData Delta(uint32_t table, uint64_t row, std::vector<int64_t> v) {
  return net::RowData{table, row, EncodeDense(v)};
}

class PacedTest : public ::testing::Test {
 protected:
  void StartServer(uint32_t num_clients, std::vector<std::string> extra = {}) {
    data_dir_ = dir_.path() + "/shard0";
    ASSERT_TRUE(StartPaced(&paced_, data_dir_, 0, 1, num_clients, extra, &port_, port_).ok());
  }
  // Runs paced with `args` to its exit; returns the exit code (-1: killed)
  // and its stderr in *err.
  int RunToExit(const std::vector<std::string>& args, std::string* err) {
    std::vector<std::string> argv = {testing::BinaryDir() + "/paced"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::string err_path = dir_.path() + "/err.log";
    unlink(err_path.c_str());
    Subprocess p;
    EXPECT_TRUE(p.Start(argv, err_path).ok());
    int st = 0;
    EXPECT_TRUE(p.Wait(20000, &st).ok());
    *err = ReadFile(err_path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  TempDir dir_;
  std::string data_dir_;
  Subprocess paced_;
  uint16_t port_ = 0;
};

TEST_F(PacedTest, SeveralClientsParkedReadAndDuplicate) {
  StartServer(3);
  Client c[3];
  for (ClientId i = 0; i < 3; ++i) ASSERT_TRUE(Connect(port_, i, &c[i]).ok());
  TableSchema t = Await(c[0].shard->CreateTable(IntTable("counts", 2)));
  ASSERT_EQ(t.id, 1u);
  // Idempotent create from another client returns the same table.
  EXPECT_EQ(Await(c[1].shard->CreateTable(IntTable("counts", 2))).id, t.id);

  // Clients 0 and 1 apply clock 0; client 2 has not yet.
  ASSERT_TRUE(c[0].shard->Send(net::Apply{0, {Delta(t.id, 5, {1, 10})}}).ok());
  ASSERT_TRUE(c[1].shard->Send(net::Apply{0, {Delta(t.id, 5, {2, 20})}}).ok());
  net::Ack ack;
  ASSERT_TRUE(c[0].inbox.Next(&ack));
  EXPECT_EQ(ack.clock, 0);
  EXPECT_FALSE(ack.duplicate);
  ASSERT_TRUE(c[1].inbox.Next(&ack));

  // A read needing version 1 parks until the last client's batch arrives.
  auto parked = c[0].shard->Read(t.id, {5}, /*min_version=*/1);
  EXPECT_EQ(parked.wait_for(300ms), std::future_status::timeout);
  ASSERT_TRUE(c[2].shard->Send(net::Apply{0, {Delta(t.id, 5, {4, 40})}}).ok());
  net::ReadReply reply = Await(std::move(parked));
  EXPECT_EQ(reply.version, 1);
  EXPECT_EQ(reply.applied_clock, 1);
  ASSERT_EQ(reply.rows.size(), 1u);
  EXPECT_EQ(DecodeDense<int64_t>(reply.rows[0].bytes), (std::vector<int64_t>{7, 70}));

  // Re-sending clock 0 is acknowledged as a duplicate and not applied twice.
  ASSERT_TRUE(c[1].shard->Send(net::Apply{0, {Delta(t.id, 5, {2, 20})}}).ok());
  ASSERT_TRUE(c[1].inbox.Next(&ack));
  EXPECT_EQ(ack.clock, 0);
  EXPECT_TRUE(ack.duplicate);
  reply = Await(c[2].shard->Read(t.id, {5}, 0));
  EXPECT_EQ(DecodeDense<int64_t>(reply.rows[0].bytes), (std::vector<int64_t>{7, 70}));

  auto tables = Await(c[2].shard->ListTables());
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(tables[0].name, "counts");
  auto stats = Await(c[0].shard->Stats());
  EXPECT_EQ(stats.shard_clock, 1);
  EXPECT_EQ(stats.applied_clocks, (std::vector<ClockT>{1, 1, 1}));
}

// --- Hostile input -------------------------------------------------------------

std::string Frame(const net::Message& m) {
  std::string out;
  EXPECT_TRUE(net::EncodeFrame(m, &out).ok());
  return out;
}

// Expects an Error frame with `code` and then the connection closed.
void ExpectErrorAndClose(RawConn* conn, StatusCode code, const char* what,
                         const std::string& message_part = "") {
  net::Message m;
  ASSERT_TRUE(conn->ReadMessage(&m)) << what << ": no reply";
  auto* err = std::get_if<net::Error>(&m);
  ASSERT_NE(err, nullptr) << what << ": reply is " << net::MessageName(m);
  EXPECT_EQ(err->code, code) << what << ": " << err->message;
  EXPECT_NE(err->message.find(message_part), std::string::npos) << what << ": " << err->message;
  EXPECT_TRUE(conn->ClosedByPeer()) << what << ": connection not closed";
}

TEST_F(PacedTest, HostileInputIsRefusedAndServerKeepsServing) {
  const std::string token = "s3cret-token";
  std::string token_file = dir_.path() + "/token";
  FILE* f = fopen(token_file.c_str(), "w");
  fputs((token + "\n").c_str(), f);
  fclose(f);
  StartServer(1, {"--token_file=" + token_file});

  Client good;
  ASSERT_TRUE(Connect(port_, 0, &good, token).ok());
  TableSchema t = Await(good.shard->CreateTable(IntTable("w", 4)));
  auto still_serving = [&](const char* after) {
    auto r = good.shard->ListTables();
    ASSERT_EQ(r.wait_for(10s), std::future_status::ready) << "server stuck after " << after;
    ASSERT_TRUE(r.get().ok()) << "after " << after;
  };

  {  // Random bytes: the length prefix is garbage (too large) or the payload fails verification.
    std::mt19937 rng(7);
    std::string junk(64, '\0');
    for (auto& ch : junk) ch = static_cast<char>(rng());
    junk[3] = 0;  // keep the length small so the payload is read and fails verification
    junk[2] = 0;
    junk[1] = 0;
    junk[0] = 40;
    RawConn conn(port_);
    ASSERT_TRUE(conn.connected());
    conn.Write(junk);
    ExpectErrorAndClose(&conn, StatusCode::kCorruption, "random bytes");
  }
  still_serving("random bytes");
  {  // A length prefix of 4 GiB - 1 is refused before anything is allocated.
    RawConn conn(port_);
    conn.Write(std::string("\xff\xff\xff\xff", 4));
    ExpectErrorAndClose(&conn, StatusCode::kResourceExhausted, "4 GiB length");
  }
  still_serving("4 GiB length");
  {  // A truncated frame: the prefix promises more than is sent, then the peer half-closes.
    RawConn conn(port_);
    std::string frame = Frame(net::Hello{net::kWireVersion, 0, token});
    conn.Write(frame.substr(0, frame.size() - 5));
    EXPECT_FALSE(conn.ClosedByPeer(300));  // the server waits for the rest…
  }                                        // …and the peer going away is harmless
  still_serving("truncated frame");
  {  // Wrong wire version.
    RawConn conn(port_);
    conn.Write(Frame(net::Hello{net::kWireVersion + 1, 0, token}));
    ExpectErrorAndClose(&conn, StatusCode::kIncompatible, "wrong wire version");
  }
  {  // Wrong token.
    RawConn conn(port_);
    conn.Write(Frame(net::Hello{net::kWireVersion, 0, "wrong"}));
    ExpectErrorAndClose(&conn, StatusCode::kPermissionDenied, "wrong token", "wrong job token");
  }
  {  // No token, where the server requires one: another message.
    RawConn conn(port_);
    conn.Write(Frame(net::Hello{net::kWireVersion, 0, ""}));
    ExpectErrorAndClose(&conn, StatusCode::kPermissionDenied, "no token",
                        "no job token: this shard requires one: pass --token_file=" + token_file +
                            " (the token paced was started with)");
  }
  {  // A first frame that is not Hello.
    RawConn conn(port_);
    conn.Write(Frame(net::ListTables{1}));
    net::Message m;
    ASSERT_TRUE(conn.ReadMessage(&m));
    EXPECT_NE(std::get_if<net::Error>(&m), nullptr);
    EXPECT_TRUE(conn.ClosedByPeer());
  }
  {  // A client id outside [0, num_clients).
    Client bad;
    Status s = Connect(port_, 5, &bad, token);
    EXPECT_FALSE(s.ok());
  }
  still_serving("handshake refusals");

  // Semantic errors keep the connection: unknown table, wrong delta width.
  auto unknown = good.shard->Read(999, {1}, 0);
  ASSERT_EQ(unknown.wait_for(10s), std::future_status::ready);
  StatusOr<net::ReadReply> r = unknown.get();
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();

  ASSERT_TRUE(good.shard->Send(net::Apply{0, {Delta(t.id, 1, {1, 2})}}).ok());  // width 2 != 4
  net::Error err;
  ASSERT_TRUE(good.inbox.Next(&err));
  EXPECT_EQ(err.code, StatusCode::kInvalidArgument) << err.message;
  // Nothing was applied: the applied clock is still 0, and a correct batch works.
  ASSERT_TRUE(good.shard->Send(net::Apply{0, {Delta(t.id, 1, {1, 2, 3, 4})}}).ok());
  net::Ack ack;
  ASSERT_TRUE(good.inbox.Next(&ack));
  EXPECT_FALSE(ack.duplicate);
  auto reply = Await(good.shard->Read(t.id, {1}, 1));
  EXPECT_EQ(DecodeDense<int64_t>(reply.rows[0].bytes), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_TRUE(good.shard->connected());
}

// paced's default: a job token created in DATA_DIR/token (mode 0600) on the
// first start and reused by later ones; a client without it is refused with
// one line that says what to do; --insecure takes none.
TEST_F(PacedTest, DefaultTokenIsCreatedOnceRequiredAndReused) {
  StartServer(1, {"--noinsecure"});
  const std::string token_path =
      std::filesystem::absolute(data_dir_ + "/token").lexically_normal().string();
  struct stat st;
  ASSERT_EQ(stat(token_path.c_str(), &st), 0) << "paced created no " << token_path;
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string token;
  ASSERT_TRUE(ReadTokenFile(token_path, &token).ok());
  EXPECT_EQ(token.size(), 32u) << token;

  // A real client process without --token_file: refused, and told what to do.
  const std::string where = "127.0.0.1:" + std::to_string(port_);
  const std::string told = "shard " + where + " requires a token: pass --token_file=" + token_path +
                           " (created by paced) or start paced with --insecure";
  auto client_proc = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {testing::BinaryDir() + "/pace_client_proc",
                                     "--servers=" + where, "--clocks=2", "--rows=4"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    Subprocess p;
    EXPECT_TRUE(p.Start(argv, dir_.path() + "/client.err").ok());
    std::string out, line;
    while (p.ReadLine(&line, 20000).ok()) out += line + "\n";
    int status = 0;
    EXPECT_TRUE(p.Wait(20000, &status).ok());
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, out);
  };
  auto [code, out] = client_proc({});
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("FAIL open: PermissionDenied: " + told + "\n"), std::string::npos) << out;
  std::tie(code, out) = client_proc({"--token_file=" + token_path});
  EXPECT_EQ(code, 0) << out;
  Client nothing;
  Status s = Connect(port_, 0, &nothing);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), told);

  // A restart reuses the token: the same file, the same secret.
  paced_.Signal(SIGTERM);
  int exit_status = 0;
  ASSERT_TRUE(paced_.Wait(20000, &exit_status).ok());
  StartServer(1, {"--noinsecure"});
  std::string again;
  ASSERT_TRUE(ReadTokenFile(token_path, &again).ok());
  EXPECT_EQ(again, token);
  Client with_token;
  ASSERT_TRUE(Connect(port_, 0, &with_token, token).ok());
  EXPECT_EQ(with_token.shard->welcome().applied_clock, 2) << "the run above was kept";
  with_token.shard.reset();

  // --insecure: no token needed (and the token file is left alone).
  paced_.Signal(SIGTERM);
  ASSERT_TRUE(paced_.Wait(20000, &exit_status).ok());
  StartServer(1, {"--insecure"});
  Client insecure;
  EXPECT_TRUE(Connect(port_, 0, &insecure).ok());
  ASSERT_TRUE(ReadTokenFile(token_path, &again).ok());
  EXPECT_EQ(again, token);
}

// A token in DATA_DIR that another user could have planted or rewritten is
// refused, naming the owner or mode and the way out: one owned by another
// user (needs root to create), one writable by the group. Before, paced used
// it silently, so that user chose the secret the clients present.
TEST_F(PacedTest, ATokenAnotherUserCouldPlantIsRefused) {
  const std::string data = dir_.path() + "/planted";
  ASSERT_EQ(mkdir(data.c_str(), 0700), 0);
  const std::string token = data + "/token";
  {
    std::ofstream out(token);
    out << "chosen-by-someone-else\n";
  }
  const std::vector<std::string> args = {"--data_dir=" + data, "--listen=127.0.0.1:0"};
  std::string err;
  ASSERT_EQ(chmod(token.c_str(), 0620), 0);
  EXPECT_EQ(RunToExit(args, &err), 1) << err;
  EXPECT_NE(err.find("PermissionDenied: the job token " + token +
                     " is writable by other users (mode 620)"),
            std::string::npos)
      << err;
  ASSERT_EQ(chmod(token.c_str(), 0600), 0);
  if (geteuid() != 0 || chown(token.c_str(), 65534, 65534) != 0) {
    GTEST_SKIP() << "giving the token to another user needs root";
  }
  EXPECT_EQ(RunToExit(args, &err), 1) << err;
  EXPECT_NE(err.find("PermissionDenied: the job token " + token +
                     " belongs to uid 65534, not to this user (uid 0): another user may have "
                     "planted it: remove it (paced creates a new one on its next start)"),
            std::string::npos)
      << err;
}

// A process's GLIBC_TUNABLES as it was started ("(unset)" if it was not).
std::string TunablesOf(pid_t pid) {
  const std::string env = ReadFile("/proc/" + std::to_string(pid) + "/environ");
  const std::string key = "GLIBC_TUNABLES=";
  for (size_t at = 0; at < env.size();) {
    const size_t end = env.find('\0', at);
    const std::string item = env.substr(at, end == std::string::npos ? end : end - at);
    if (item.rfind(key, 0) == 0) return item.substr(key.size());
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return "(unset)";
}

// Whether a [heap] mapping of the process is advised for transparent huge
// pages (VmFlags "hg": glibc madvises the heap as it grows under
// glibc.malloc.hugetlb=1).
bool HeapAdvisedHuge(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps");
  std::string line;
  bool heap = false;
  while (std::getline(in, line)) {
    if (line.find("[heap]") != std::string::npos) heap = true;
    if (heap && line.rfind("VmFlags:", 0) == 0) {
      if ((line + " ").find(" hg ") != std::string::npos) return true;
      heap = false;
    }
  }
  return false;
}

// paced's heap grows in 4 KiB pages, as started (no restart with other
// GLIBC_TUNABLES): on a virtual machine whose host takes freed memory back,
// fresh huge pages cost it several times their zeroing (docs/operations.md,
// "Pages of the heap"). A user's glibc.malloc.hugetlb=1 still gives them.
TEST_F(PacedTest, HeapGrowsInSmallPagesUnlessHugePagesAreAskedFor) {
  StartServer(1);
  EXPECT_EQ(TunablesOf(paced_.pid()), TunablesOf(getpid()));
  EXPECT_FALSE(HeapAdvisedHuge(paced_.pid()));
  Client c;
  ASSERT_TRUE(Connect(port_, 0, &c).ok());  // and it serves

#if defined(PACE_ASAN) || defined(PACE_TSAN)
  GTEST_SKIP() << "a sanitizer replaces glibc's malloc";
#endif
  const std::string thp = ReadFile("/sys/kernel/mm/transparent_hugepage/enabled");
  if (thp.empty() || thp.find("[never]") != std::string::npos) {
    GTEST_SKIP() << "transparent huge pages off";
  }
  const char* before = std::getenv("GLIBC_TUNABLES");
  const std::string saved = before != nullptr ? before : "";
  setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1);
  Subprocess huge;
  uint16_t huge_port = 0;
  Status started = StartPaced(&huge, dir_.path() + "/shard-huge", 0, 1, 1, {}, &huge_port);
  if (before != nullptr) {
    setenv("GLIBC_TUNABLES", saved.c_str(), 1);
  } else {
    unsetenv("GLIBC_TUNABLES");
  }
  ASSERT_TRUE(started.ok()) << started.ToString();
  EXPECT_EQ(TunablesOf(huge.pid()), "glibc.malloc.hugetlb=1");
  EXPECT_TRUE(HeapAdvisedHuge(huge.pid()));
}

TEST_F(PacedTest, BadFlagsGiveClearErrors) {
  struct Case {
    std::vector<std::string> args;
    const char* expect;
  } cases[] = {
      {{"--shard=2", "--num_shards=2", "--data_dir=" + dir_.path() + "/x"}, "--shard=2 must be <"},
      {{"--listen=nonsense", "--data_dir=" + dir_.path() + "/x"}, "--listen"},
      {{}, "--data_dir is required"},
      {{"--data_dir=" + dir_.path() + "/x", "--token_file=/nonexistent/t"}, "token_file"},
      {{"--data_dir=" + dir_.path() + "/x", "--token_file=" + dir_.path() + "/t", "--insecure"},
       "give --token_file or --insecure, not both"},
  };
  for (const auto& c : cases) {
    std::string text;
    EXPECT_EQ(RunToExit(c.args, &text), 1) << c.expect;
    EXPECT_NE(text.find(c.expect), std::string::npos) << "stderr was: " << text;
  }
}

// A data dir that cannot be reached (a symbolic link loop, a name too long, a
// path through a file, a directory without search permission) is refused with
// exit 1 and one line naming it and why; paced must not abort.
TEST_F(PacedTest, UnreachableDataDirExitsOneInWords) {
  const std::string loop = dir_.path() + "/loop";
  ASSERT_EQ(symlink("loop", loop.c_str()), 0);
  const std::string file = dir_.path() + "/afile";
  std::ofstream(file) << "x\n";
  const std::string long_name = dir_.path() + "/" + std::string(300, 'n');
  struct Case {
    std::string data_dir;
    std::string expect;  // after "paced: cannot open --data_dir=DATA_DIR: IOError: "
  };
  std::vector<Case> cases = {
      {loop + "/d", loop + "/d: Too many levels of symbolic links"},
      {long_name + "/d", long_name + "/d: File name too long"},
      {file + "/d", file + ": Not a directory"},
      {file, file + ": Not a directory"},
  };
  const std::string locked = dir_.path() + "/locked";
  if (geteuid() != 0) {  // root searches any directory
    ASSERT_EQ(mkdir((locked).c_str(), 0700), 0);
    ASSERT_EQ(mkdir((locked + "/sub").c_str(), 0700), 0);
    ASSERT_EQ(chmod(locked.c_str(), 0), 0);
    cases.push_back({locked + "/sub/d", locked + "/sub/d: Permission denied"});
  }
  for (const Case& c : cases) {
    std::string err;
    EXPECT_EQ(RunToExit({"--listen=127.0.0.1:0", "--data_dir=" + c.data_dir}, &err), 1)
        << c.data_dir << ": " << err;
    const std::string want =
        "paced: cannot open --data_dir=" + c.data_dir + ": IOError: " + c.expect + "\n";
    EXPECT_NE(err.find(want), std::string::npos) << "want: " << want << "stderr was: " << err;
    EXPECT_EQ(err.find("terminate"), std::string::npos) << err;
    size_t lines = 0;
    for (size_t at = err.find("paced: "); at != std::string::npos; at = err.find("paced: ", at + 1))
      ++lines;
    EXPECT_EQ(lines, 1u) << err;
  }
  if (geteuid() != 0) chmod(locked.c_str(), 0700);
}

// Under umask 000 a new data dir is still private (0700, its missing parents
// 0755), and the token in it 0600.
TEST_F(PacedTest, NewDataDirIsPrivateWhateverTheUmask) {
  const std::string data_dir = dir_.path() + "/p/q/shard0";
  const mode_t old_umask = umask(0);
  Subprocess p;
  Status started =
      p.Start({testing::BinaryDir() + "/paced", "--listen=127.0.0.1:0", "--data_dir=" + data_dir},
              dir_.path() + "/umask.err");
  umask(old_umask);
  ASSERT_TRUE(started.ok()) << started.ToString();
  std::string line;
  do {
    ASSERT_TRUE(p.ReadLine(&line, 20000).ok()) << testing::ReadFile(dir_.path() + "/umask.err");
  } while (line.rfind("paced listening on ", 0) != 0);
  auto mode = [](const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0xffffu;
  };
  EXPECT_EQ(mode(data_dir), 0700u) << std::oct << mode(data_dir);
  EXPECT_EQ(mode(dir_.path() + "/p/q"), 0755u) << std::oct << mode(dir_.path() + "/p/q");
  EXPECT_EQ(mode(dir_.path() + "/p"), 0755u) << std::oct << mode(dir_.path() + "/p");
  EXPECT_EQ(mode(data_dir + "/token"), 0600u) << std::oct << mode(data_dir + "/token");
  p.Signal(SIGTERM);
  int st = 0;
  ASSERT_TRUE(p.Wait(20000, &st).ok());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

// --insecure on an address other hosts can reach is refused before any store
// is created, unless --insecure_remote says so too; then the warning says
// that any host may join.
TEST_F(PacedTest, InsecureOnANonLoopbackAddressNeedsInsecureRemote) {
  const std::string data_dir = dir_.path() + "/open";
  std::string err;
  EXPECT_EQ(RunToExit({"--listen=0.0.0.0:0", "--data_dir=" + data_dir, "--insecure"}, &err), 1);
  EXPECT_NE(err.find("paced: --insecure on 0.0.0.0:"), std::string::npos) << err;
  EXPECT_NE(err.find("an address other hosts can reach"), std::string::npos) << err;
  EXPECT_NE(err.find("add --insecure_remote"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(data_dir)) << "a store was created";
  EXPECT_EQ(RunToExit({"--data_dir=" + data_dir, "--insecure_remote"}, &err), 1);
  EXPECT_NE(err.find("--insecure_remote goes with --insecure"), std::string::npos) << err;

  Subprocess p;
  const std::string err_path = dir_.path() + "/remote.err";
  ASSERT_TRUE(p.Start({testing::BinaryDir() + "/paced", "--listen=0.0.0.0:0",
                       "--data_dir=" + data_dir, "--insecure", "--insecure_remote"},
                      err_path)
                  .ok());
  std::string line;
  do {
    ASSERT_TRUE(p.ReadLine(&line, 20000).ok()) << testing::ReadFile(err_path);
  } while (line.rfind("paced listening on ", 0) != 0);
  const std::string text = testing::ReadFile(err_path);
  EXPECT_NE(text.find("--insecure --insecure_remote: no job token on 0.0.0.0:"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ANY host that can connect to it can join the job"), std::string::npos)
      << text;
  p.Signal(SIGTERM);
  int st = 0;
  ASSERT_TRUE(p.Wait(20000, &st).ok());

  // On loopback the old warning stands.
  StartServer(1, {"--insecure"});
  const std::string loop_err = testing::ReadFile(data_dir_ + ".stderr.log");
  EXPECT_NE(loop_err.find("--insecure: no job token; any process that can connect to 127.0.0.1:"),
            std::string::npos)
      << loop_err;
  EXPECT_EQ(loop_err.find("ANY host"), std::string::npos) << loop_err;
}

// A port in use is found before any store is created; a data dir another
// paced holds is refused in words naming it; --listen takes a host name.
TEST_F(PacedTest, BusyPortAndHeldDataDirAreRefusedInWords) {
  StartServer(1);
  const std::string fresh = dir_.path() + "/fresh";
  std::string err;
  EXPECT_EQ(RunToExit({"--listen=127.0.0.1:" + std::to_string(port_), "--data_dir=" + fresh}, &err),
            1);
  EXPECT_NE(err.find("cannot listen on 127.0.0.1:" + std::to_string(port_) +
                     ": IOError: 127.0.0.1:" + std::to_string(port_) + ": Address already in use"),
            std::string::npos)
      << err;
  EXPECT_FALSE(std::filesystem::exists(fresh)) << "a store was created";

  EXPECT_EQ(RunToExit({"--listen=127.0.0.1:0", "--data_dir=" + data_dir_}, &err), 1);
  EXPECT_NE(err.find("paced: cannot open --data_dir=" + data_dir_ +
                     ": FailedPrecondition: " + data_dir_ + " is in use by another process (pid " +
                     std::to_string(paced_.pid()) + ", a paced or an app's embedded shard)"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("LOCK"), std::string::npos) << err;

  Subprocess named;
  ASSERT_TRUE(named
                  .Start({testing::BinaryDir() + "/paced", "--listen=localhost:0",
                          "--data_dir=" + dir_.path() + "/named", "--insecure"},
                         dir_.path() + "/named.err")
                  .ok());
  std::string line;
  ASSERT_TRUE(named.ReadLine(&line, 20000).ok());
  EXPECT_EQ(line.rfind("paced listening on localhost:", 0), 0u) << line;
  Client c;
  ASSERT_TRUE(
      Connect(static_cast<uint16_t>(std::stoi(line.substr(line.rfind(':') + 1))), 0, &c).ok());
}

TEST_F(PacedTest, RefusesDataDirOfAnotherShard) {
  StartServer(2);
  paced_.Signal(SIGTERM);
  int st = 0;
  ASSERT_TRUE(paced_.Wait(20000, &st).ok());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "SIGTERM must exit 0";
  Subprocess other;
  uint16_t port = 0;
  // Same dir, another num_clients: refused in one line naming the command
  // that changes it.
  Status s = StartPaced(&other, data_dir_, 0, 1, 3, {}, &port);
  EXPECT_FALSE(s.ok());
  ASSERT_TRUE(other.Wait(20000, &st).ok());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1) << st;
  const std::string err = testing::ReadFile(data_dir_ + ".stderr.log");
  EXPECT_NE(err.find("paced: cannot open --data_dir=" + data_dir_ +
                     ": the store holds shard 0 of a job of 1 shards and 2 clients, not 3: "),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("pacectl checkpoint restore CKPT0,CKPT1,... --num_shards=1 --num_clients=3 "
                     "--out=DIR"),
            std::string::npos)
      << err;
}

// Kills paced with SIGKILL while clients stream batches, restarts it on the same
// data dir and port, and checks that every acknowledged batch survived.
TEST_F(PacedTest, SigkillLosesNoAcknowledgedBatch) {
  StartServer(1);
  Client c;
  ASSERT_TRUE(Connect(port_, 0, &c).ok());
  TableSchema t = Await(c.shard->CreateTable(IntTable("sum", 1)));
  // Batch k adds k+1 to row (k % 7).
  auto batch = [&](ClockT k) {
    return net::Apply{k, {Delta(t.id, static_cast<uint64_t>(k % 7), {k + 1})}};
  };
  ClockT sent = 0;
  for (; sent < 200; ++sent) ASSERT_TRUE(c.shard->Send(batch(sent)).ok());
  ClockT acked = -1;
  net::Ack ack;
  while (acked < 100 && c.inbox.Next(&ack)) acked = ack.clock;
  ASSERT_GE(acked, 100);
  paced_.Kill();  // SIGKILL mid-stream
  // Drain acks that arrived before the kill.
  while (c.inbox.Next(&ack, 200ms)) acked = std::max(acked, ack.clock);

  ASSERT_TRUE(StartPaced(&paced_, data_dir_, 0, 1, 1, {}, &port_, port_).ok());
  Client again;
  ASSERT_TRUE(Connect(port_, 0, &again).ok());
  ClockT applied = again.shard->welcome().applied_clock;
  EXPECT_GE(applied, acked + 1) << "an acknowledged batch was lost";
  EXPECT_LE(applied, sent);
  // The client re-sends everything from the restart clock; earlier ones would be duplicates.
  for (ClockT k = applied; k < sent; ++k) ASSERT_TRUE(again.shard->Send(batch(k)).ok());
  if (applied > 0) {
    ASSERT_TRUE(again.shard->Send(batch(applied - 1)).ok());
  }
  auto reply = Await(again.shard->Read(t.id, {0, 1, 2, 3, 4, 5, 6}, sent));
  std::vector<int64_t> want(7, 0);
  for (ClockT k = 0; k < sent; ++k) want[k % 7] += k + 1;
  ASSERT_EQ(reply.rows.size(), 7u);
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(DecodeDense<int64_t>(reply.rows[i].bytes)[0], want[i]) << "row " << i;
  }
}

}  // namespace
}  // namespace pace
