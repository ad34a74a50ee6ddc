#include "net/testing/transport_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <variant>

#include "net/codec.h"
#include "net/testing/sample_messages.h"

namespace pace::net::testing {

Status FakeService::OnHello(const Hello& hello, Welcome* welcome) {
  if (hello.client_id == kBannedClient) return Status::PermissionDenied("client 666 is banned");
  welcome->shard_id = 3;
  welcome->num_shards = 4;
  welcome->num_clients = 5;
  welcome->applied_clock = 7;
  welcome->shard_clock = 6;
  return Status::OK();
}

void FakeService::OnConnect(const std::shared_ptr<Session>& session) {
  std::lock_guard<std::mutex> lock(mu_);
  ++connects_;
  clients_.push_back(session->hello().client_id);
  last_session_ = session;
  cv_.notify_all();
}

void FakeService::OnDisconnect(const std::shared_ptr<Session>& session) {
  std::lock_guard<std::mutex> lock(mu_);
  ++disconnects_;
  cv_.notify_all();
}

void FakeService::OnMessage(const std::shared_ptr<Session>& s, Message m) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++messages_;
    cv_.notify_all();
  }
  if (auto* r = std::get_if<Read>(&m)) {
    if (r->table == kParkTable) return;
    ReadReply reply{r->req_id, 6, 7, {}};
    for (uint64_t row : r->rows) {
      reply.rows.push_back(RowData{r->table, row, std::string(reply_row_bytes.load(), 'r')});
    }
    s->Send(std::move(reply));
  } else if (auto* a = std::get_if<Apply>(&m)) {
    s->Send(Ack{a->clock, a->clock % 2 == 1});
  } else if (auto* c = std::get_if<CreateTable>(&m)) {
    TableSchema schema = c->schema;
    if (schema.id == 0) schema.id = 42;
    s->Send(TablesReply{c->req_id, {schema}});
  } else if (auto* l = std::get_if<ListTables>(&m)) {
    s->Send(TablesReply{l->req_id, {SampleSchema(1, "a"), SampleSchema(2, "b")}});
  } else if (auto* d = std::get_if<DescribeTable>(&m)) {
    if (d->name == "close-me") {
      s->Close(Status::InvalidArgument("closing as asked"));
    } else if (d->name == "a") {
      s->Send(TablesReply{d->req_id, {SampleSchema(1, "a")}});
    } else {
      s->Send(Error{d->req_id, StatusCode::kNotFound, "no table named '" + d->name + "'"});
    }
  } else if (auto* st = std::get_if<StatsRequest>(&m)) {
    s->Send(StatsReply{st->req_id, 3, 6, {1, 2}, {{"reads", 11}}, {}});
  } else if (auto* u = std::get_if<Unsubscribe>(&m)) {
    Push push{9, 9, {}};
    for (uint64_t row : u->rows) push.rows.push_back(RowData{u->table, row, "v"});
    s->Send(std::move(push));
    s->Send(PushDone{9, 9});
  } else {
    s->Send(Error{0, StatusCode::kUnimplemented, std::string("no handler for ") + MessageName(m)});
  }
}

bool FakeService::WaitConnects(int n, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return connects_ >= n; });
}

bool FakeService::WaitDisconnects(int n, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return disconnects_ >= n; });
}

int FakeService::connects() const {
  std::lock_guard<std::mutex> lock(mu_);
  return connects_;
}

int FakeService::disconnects() const {
  std::lock_guard<std::mutex> lock(mu_);
  return disconnects_;
}

int FakeService::messages() const {
  std::lock_guard<std::mutex> lock(mu_);
  return messages_;
}

std::shared_ptr<Session> FakeService::last_session() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_session_;
}

std::vector<ClientId> FakeService::connected_clients() const {
  std::lock_guard<std::mutex> lock(mu_);
  return clients_;
}

void Inbox::Add(Message m) {
  std::lock_guard<std::mutex> lock(mu_);
  messages_.push_back(std::move(m));
  cv_.notify_all();
}

std::vector<Message> Inbox::WaitFor(size_t n, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return messages_.size() >= n; });
  return messages_;
}

size_t Inbox::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return messages_.size();
}

RawClient::~RawClient() {
  if (fd_ >= 0) ::close(fd_);
}

bool RawClient::Connect(uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

bool RawClient::Send(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

void RawClient::ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }

void RawClient::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Message RawClient::Handshake(const std::string& token, ClientId client_id) {
  Send(EncodeOrFail(Hello{kWireVersion, client_id, token, Hello::kClientProcess}));
  std::vector<Message> got = ReadMessages(1, 10000);
  if (got.empty()) return Error{0, StatusCode::kTimedOut, "no reply to Hello"};
  return got.front();
}

bool RawClient::ReadSome(int timeout_ms, std::vector<Message>* out, bool* closed) {
  pollfd p{fd_, POLLIN, 0};
  int r = ::poll(&p, 1, timeout_ms);
  if (r <= 0) return false;  // timeout
  char* dst = reader_.Prepare(64 << 10);
  ssize_t n = ::recv(fd_, dst, 64 << 10, 0);
  if (n <= 0) {
    *closed = true;
    return false;
  }
  reader_.Commit(static_cast<size_t>(n));
  for (;;) {
    std::string_view payload;
    if (!reader_.Next(&payload).ok()) return false;
    if (payload.empty()) return true;
    Message m;
    if (!DecodePayload(payload, &m).ok()) return false;
    out->push_back(std::move(m));
  }
}

std::vector<Message> RawClient::ReadMessages(size_t n, int timeout_ms) {
  std::vector<Message> out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool closed = false;
  while (out.size() < n) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0 || !ReadSome(static_cast<int>(left), &out, &closed)) break;
  }
  return out;
}

std::vector<Message> RawClient::ReadUntilClosed(int timeout_ms, bool* closed) {
  std::vector<Message> out;
  *closed = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) break;
    if (!ReadSome(static_cast<int>(left), &out, closed)) break;
  }
  return out;
}

}  // namespace pace::net::testing
