// ShardService: construction, the handshake, message dispatch, catalog and
// stats requests, holdback warnings. Reads, applies and pushes are in
// shard_service_data.cc.
#include "server/shard_service.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <utility>
#include <variant>

#include "common/import_marker.h"
#include "common/store_damage.h"
#include "common/thread_name.h"
#include "server/engine_adapters.h"

namespace pace {

namespace {

constexpr int64_t kMaxWarnIntervalMs = 10 * 60 * 1000;
// How often a failed store's recovery is tried while batches are held.
constexpr auto kHeldRetryInterval = std::chrono::milliseconds(1000);
// A client id reserved by OnHello whose OnConnect has not come this long
// after (the Welcome could not be sent) is free again.
constexpr int64_t kReservationExpiryMs = 2000;
// Why a session is closed when a newer connection of the same client
// process (same Hello.incarnation) replaces it. AlreadyExists: a client that
// still hears it (two Clients with one id in one process) must not reconnect.
constexpr const char* kReplaced =
    "replaced by a newer connection of the same client process (same client id and "
    "incarnation)";

// One applied clock per client of the job, whatever the store returned.
std::vector<ClockT> ClocksFor(std::vector<ClockT> clocks, uint32_t num_clients) {
  if (clocks.size() != num_clients) {
    LOG(WARNING) << "store returned " << clocks.size() << " applied clocks for " << num_clients
                 << " clients";
    clocks.resize(num_clients, 0);
  }
  return clocks;
}

// The parts of each client's next clock the store holds (partial Apply).
std::vector<uint32_t> PartsFor(const ShardStore& store, uint32_t num_clients) {
  std::vector<uint32_t> parts(num_clients);
  for (uint32_t c = 0; c < num_clients; ++c) parts[c] = store.AppliedParts(c);
  return parts;
}

}  // namespace

Status ShardService::Open(const ShardServiceOptions& options,
                          std::unique_ptr<ShardService>* service) {
  if (options.data_dir.empty()) return Status::InvalidArgument("ShardService: empty data_dir");
  RETURN_IF_ERROR(CheckImportComplete(options.data_dir));
  std::unique_ptr<ShardStore> store;
  RETURN_IF_ERROR(ShardStore::Open(options.store, options.data_dir, &store));
  if (options.verify_checksums) {
    const auto t0 = std::chrono::steady_clock::now();
    size_t verified = 0;
    size_t skipped = 0;
    Status checked = options.verify_all_checksums ? store->VerifyChecksums()
                                                  : store->VerifyNewChecksums(&verified, &skipped);
    VLOG(1)
        << options.data_dir << ": checksums of "
        << (options.verify_all_checksums
                ? std::string("every SST file")
                : std::to_string(verified) + " new SST file(s) (" + std::to_string(skipped) +
                      " verified at an earlier start)")
        << " in "
        << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()
        << " ms: " << checked.ToString();
    Status damage = ClassifyStoreCorruption(options.data_dir, checked);
    if (!damage.ok() &&
        (!(damage.code() == StatusCode::kCorruption) || !options.allow_damaged_store)) {
      return (damage.code() == StatusCode::kCorruption)
                 ? Status::Corruption("refusing to serve a damaged store: " + damage.message())
                 : damage;
    }
    if (!damage.ok()) LOG(WARNING) << "serving a damaged store, as told: " << damage.message();
  }
  return Open(options, std::move(store), service);
}

Status ShardService::Open(const ShardServiceOptions& options, std::unique_ptr<ShardStore> store,
                          std::unique_ptr<ShardService>* service) {
  if (store == nullptr) return Status::InvalidArgument("ShardService: null store");
  if (store->identity().num_shards == 0 ||
      store->identity().shard_id >= store->identity().num_shards) {
    return Status::InvalidArgument("ShardService: store identity has shard id " +
                                   std::to_string(store->identity().shard_id) + " of " +
                                   std::to_string(store->identity().num_shards) + " shards");
  }
  if (options.checkpoint_every < 0 || options.checkpoint_keep < 1) {
    return Status::InvalidArgument(
        "ShardService: checkpoint_every must be >= 0 and "
        "checkpoint_keep >= 1");
  }
  if (options.reader_threads < 1 || options.reader_threads > 64) {
    return Status::InvalidArgument("ShardService: reader_threads must be in [1, 64], got " +
                                   std::to_string(options.reader_threads));
  }
  service->reset(new ShardService(options, std::move(store)));
  (*service)->StartThreads();
  VLOG(1) << "shard " << (*service)->shard_id_ << "/" << (*service)->num_shards_ << " serving "
          << (*service)->num_clients_ << " client process(es), shard clock "
          << (*service)->ShardClock();
  return Status::OK();
}

ShardService::ShardService(const ShardServiceOptions& options, std::unique_ptr<ShardStore> store)
    : options_(options),
      store_(std::move(store)),
      shard_id_(store_->identity().shard_id),
      num_shards_(store_->identity().num_shards),
      num_clients_(store_->identity().num_clients),
      engine_(ShardEngineOptions{options.max_parked_reads_per_session, options.max_push_bytes,
                                 options.max_parked_read_bytes_per_session,
                                 options.max_parked_read_bytes_total,
                                 options.max_subscriptions_per_session,
                                 options.max_subscriptions_total},
              ClocksFor(store_->AppliedClocks(), num_clients_),
              NowMs(std::chrono::steady_clock::now()), PartsFor(*store_, num_clients_)) {}

ShardService::~ShardService() {
  StopThreads();
  MutexLock lock(&mu_);
  engine_.AbortParked(Status::Aborted("shard shutting down"));
  const PushLatency pl = PushLatencyLocked();
  if (pl.samples > 0) {
    auto ms = [](int64_t us) { return static_cast<double>(us) / 1000.0; };
    const PushLatency q = push_queue_us_.Summary(), c = push_commit_us_.Summary(),
                      snd = push_send_us_.Summary();
    LOG(INFO) << "shard " << shard_id_ << ": push latency (last Apply of a clock received -> "
              << "pushes sent) over " << pl.samples << " clock(s): p50 " << ms(pl.p50_us)
              << " ms, p99 " << ms(pl.p99_us) << " ms, max " << ms(pl.max_us)
              << " ms; stages p50/p99: writer queue " << ms(q.p50_us) << "/" << ms(q.p99_us)
              << " ms, commit " << ms(c.p50_us) << "/" << ms(c.p99_us) << " ms, acks+reads+pushes "
              << ms(snd.p50_us) << "/" << ms(snd.p99_us) << " ms";
  }
}

// --- Writer and reader threads -------------------------------------------------

void ShardService::StartThreads() {
  writer_ = std::thread([this] {
    SetThreadName("pace-writer");
    WriterLoop();
  });
  for (int i = 0; i < options_.reader_threads; ++i) {
    readers_.emplace_back([this, i] {
      SetThreadName("pace-reader-" + std::to_string(i));
      ReaderLoop();
    });
  }
  if (options_.housekeeping_interval_ms > 0) {
    housekeeper_ = std::thread([this] {
      SetThreadName("pace-housekeep");
      HousekeepingLoop();
    });
  }
}

void ShardService::StopThreads() {
  {
    MutexLock l(&queue_mu_);
    stop_housekeeping_ = true;
  }
  housekeeping_cv_.SignalAll();
  if (housekeeper_.joinable()) housekeeper_.join();
  {
    MutexLock l(&queue_mu_);
    stopping_ = true;
  }
  writer_cv_.SignalAll();
  reader_cv_.SignalAll();
  // Both drain their queues first: every batch handed over is committed.
  if (writer_.joinable()) writer_.join();
  for (std::thread& t : readers_) t.join();
  readers_.clear();
}

void ShardService::PostToWriter(WriterItem item) {
  {
    MutexLock l(&queue_mu_);
    writer_queue_.push_back(std::move(item));
  }
  writer_cv_.Signal();
}

void ShardService::PostRead(std::function<void()> task) {
  {
    MutexLock l(&queue_mu_);
    read_queue_.push_back(std::move(task));
  }
  reader_cv_.Signal();
}

void ShardService::WriterLoop() {
  for (;;) {
    std::deque<WriterItem> items;
    {
      MutexLock l(&queue_mu_);
      auto ready = [this]() REQUIRES(queue_mu_) { return stopping_ || !writer_queue_.empty(); };
      if (held_.empty()) {
        writer_cv_.Wait(&queue_mu_, ready);
      } else {
        // A failed store: retry its recovery every second.
        writer_cv_.WaitUntil(&queue_mu_, std::chrono::steady_clock::now() + kHeldRetryInterval,
                             ready);
      }
      // Stopping, and everything is committed (held batches are not: their
      // clients still have them and re-send them to the next paced).
      if (writer_queue_.empty() && stopping_) {
        if (!held_.empty()) {
          LOG(WARNING) << "shard " << shard_id_ << ": stopping with " << held_.size()
                       << " batch(es) held and not acknowledged (the store is failed); their "
                          "clients re-send them to the next paced";
        }
        return;
      }
      items.swap(writer_queue_);
      ++busy_;
      // Group commit under sync: the fsync, not the bytes, is the cost of a
      // small batch. When fewer batches wait than the last group had (their
      // senders are still answering its acks), wait a little for them, at
      // most half the last commit's time, so one fsync serves them all
      // instead of two. Never without sync (a WAL append costs little).
      if (options_.store.sync && last_group_applies_ > 1) {
        auto applies = [&items] {
          size_t n = 0;
          for (const WriterItem& i : items) n += i.apply != nullptr ? 1 : 0;
          return n;
        };
        size_t have = applies();
        if (have > 0 && have < last_group_applies_) {
          const auto wait = std::min<std::chrono::steady_clock::duration>(
              last_commit_time_ / 2, std::chrono::milliseconds(2));
          const auto deadline = std::chrono::steady_clock::now() + wait;
          while (have < last_group_applies_ && !stopping_) {
            if (!writer_cv_.WaitUntil(&queue_mu_, deadline, [this]() REQUIRES(queue_mu_) {
                  return stopping_ || !writer_queue_.empty();
                })) {
              break;
            }
            for (WriterItem& i : writer_queue_) items.push_back(std::move(i));
            writer_queue_.clear();
            have = applies();
          }
        }
      }
    }
    RetryHeld();
    // Every Apply waiting now goes into one group; another write (a table
    // creation) ends the group before it, so writes keep their order. A part
    // that does not complete its clock is a group of its own: its group's
    // clock log record is then its undo record (docs/storage-format.md, §4),
    // where in a group of several it is written again to a file of its own
    // (a model-scale clock whose parts queued up wrote 111 MB so).
    std::vector<std::unique_ptr<PendingApply>> group;
    for (WriterItem& item : items) {
      if (item.apply != nullptr) {
        const bool kept_part = item.apply->apply.more;
        if (kept_part) CommitGroup(&group);
        group.push_back(std::move(item.apply));
        if (kept_part) CommitGroup(&group);
        continue;
      }
      CommitGroup(&group);
      item.task();
    }
    CommitGroup(&group);
    {
      MutexLock l(&queue_mu_);
      --busy_;
    }
    idle_cv_.SignalAll();
  }
}

void ShardService::ReaderLoop() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock l(&queue_mu_);
      reader_cv_.Wait(&queue_mu_,
                      [this]() REQUIRES(queue_mu_) { return stopping_ || !read_queue_.empty(); });
      if (read_queue_.empty()) return;
      task = std::move(read_queue_.front());
      read_queue_.pop_front();
      ++busy_;
    }
    task();
    {
      MutexLock l(&queue_mu_);
      --busy_;
    }
    idle_cv_.SignalAll();
  }
}

void ShardService::HousekeepingLoop() {
  const auto interval = std::chrono::milliseconds(options_.housekeeping_interval_ms);
  for (;;) {
    {
      MutexLock l(&queue_mu_);
      const auto deadline = std::chrono::steady_clock::now() + interval;
      if (housekeeping_cv_.WaitUntil(&queue_mu_, deadline,
                                     [this]() REQUIRES(queue_mu_) { return stop_housekeeping_; })) {
        return;
      }
    }
    CheckHoldback(std::chrono::steady_clock::now());
    if (store_->failed()) continue;  // no checkpoints of a failed store
    StatusOr<std::string> cp = MaybeCheckpoint();
    if (!cp.ok()) LOG(WARNING) << "shard " << shard_id_ << ": " << cp.status().ToString();
  }
}

void ShardService::TEST_WaitIdle() {
  MutexLock l(&queue_mu_);
  idle_cv_.Wait(&queue_mu_, [this]() REQUIRES(queue_mu_) {
    return busy_ == 0 && writer_queue_.empty() && read_queue_.empty();
  });
}

int64_t ShardService::NowMs(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// --- Handshake and session lifetime ------------------------------------------

Status ShardService::OnHello(const net::Hello& hello, net::Welcome* welcome) {
  if (hello.role != net::Hello::kClientProcess && hello.role != net::Hello::kObserver) {
    return Status::InvalidArgument("unknown peer role " +
                                   std::to_string(static_cast<int>(hello.role)));
  }
  if (hello.role == net::Hello::kClientProcess && hello.client_id >= num_clients_) {
    return Status::InvalidArgument("client id " + std::to_string(hello.client_id) +
                                   " out of range: this job has " + std::to_string(num_clients_) +
                                   " client process(es)");
  }
  const std::string& job = store_->identity().job;
  if (!hello.job.empty() && !job.empty() && hello.job != job) {
    // Before fencing: a client of another job must not take (or be told
    // about) a client id of this one.
    LOG(WARNING) << "refused a Hello of job '" << hello.job << "' as client " << hello.client_id
                 << ": this shard belongs to job '" << job << "'";
    return Status::FailedPrecondition("this shard belongs to job '" + job +
                                      "', the client to job '" + hello.job + "'");
  }
  MutexLock lock(&mu_);
  if (hello.role == net::Hello::kClientProcess) {
    // Fencing: one live session per client id (docs/wire-protocol.md, Hello).
    const int64_t now_ms = NowMs(std::chrono::steady_clock::now());
    auto it = owners_.find(hello.client_id);
    if (it != owners_.end()) {
      Owner& owner = it->second;
      const bool stale_reservation =
          owner.session == nullptr && now_ms - owner.reserved_ms > kReservationExpiryMs;
      const bool same_process = hello.incarnation != 0 && hello.incarnation == owner.incarnation;
      if (!stale_reservation && !same_process) {
        const std::string where =
            owner.session == nullptr
                ? std::string("a connection being accepted")
                : (owner.session->peer().empty() ? std::string("this process (in-process)")
                                                 : owner.session->peer()) +
                      " (session " + std::to_string(owner.session->id()) + ")";
        const std::string k = std::to_string(hello.client_id);
        LOG(WARNING) << "refused a second Hello as client " << k << ": it is connected from "
                     << where;
        return Status::AlreadyExists("client " + k + " is already connected from " + where +
                                     "; another process is running as client " + k);
      }
      if (same_process && owner.session != nullptr) {
        // A reconnect of the same process whose old connection we have not
        // seen die yet: fence the old session.
        LOG(INFO) << "client " << hello.client_id << " reconnected; closing its old session "
                  << owner.session->id();
        owner.session->Close(Status::AlreadyExists(kReplaced));
      }
    }
    RETURN_IF_ERROR(CheckIncompleteClockLocked(hello.client_id, hello.incarnation));
    owners_[hello.client_id] = Owner{hello.incarnation, nullptr, now_ms};
  }
  welcome->wire_version = net::kWireVersion;
  welcome->shard_id = shard_id_;
  welcome->num_shards = num_shards_;
  welcome->num_clients = num_clients_;
  welcome->job = job;
  const ClockVector& clocks = engine_.clocks();
  welcome->shard_clock = clocks.Min();
  welcome->applied_clock =
      hello.role == net::Hello::kClientProcess ? clocks.Get(hello.client_id) : clocks.Min();
  welcome->applied_parts =
      hello.role == net::Hello::kClientProcess ? engine_.AppliedParts(hello.client_id) : 0;
  return Status::OK();
}

Status ShardService::CheckIncompleteClockLocked(ClientId client, uint64_t incarnation) {
  const IncompleteClock ic = store_->IncompleteClockOf(client);
  const bool pending = undo_pending_.count(client) != 0;
  auto served = served_.find(client);
  if (!pending &&
      !HelloWaitsForWriter(ic, incarnation, served == served_.end() ? 0 : served->second)) {
    served_[client] = incarnation;
    return Status::OK();
  }
  if (!pending) {
    undo_pending_.insert(client);
    if (NeedsUndo(ic, incarnation)) {
      LOG(INFO) << "shard " << shard_id_ << ": a new process of client " << client << " started; "
                << ic.parts << " part(s) of its clock " << ic.clock
                << " sent by its previous process are taken back before it is served";
    }
    WriterItem item;
    item.task = [this, client, incarnation] { UndoOnWriter(client, incarnation); };
    PostToWriter(std::move(item));
  }
  const std::string what = ic.parts > 0
                               ? "taking back " + std::to_string(ic.parts) + " part(s) of clock " +
                                     std::to_string(ic.clock) +
                                     " that a previous process of this client sent before it ended"
                               : "committing what a previous process of this client sent";
  return Status::Unavailable("client " + std::to_string(client) + ": the shard is " + what +
                             "; retry");
}

void ShardService::OnConnect(const SessionPtr& session) {
  MutexLock lock(&mu_);
  sessions_[session->id()] = session;
  EnsurePeer(session);
  const net::Hello& hello = session->hello();
  if (hello.role == net::Hello::kClientProcess) {
    auto it = owners_.find(hello.client_id);
    if (it == owners_.end() ||
        (it->second.session == nullptr && it->second.incarnation == hello.incarnation)) {
      // Ours (or an expired reservation nobody took): this session is the owner.
      owners_[hello.client_id] = Owner{hello.incarnation, session, 0};
    } else if (it->second.incarnation == hello.incarnation && hello.incarnation != 0) {
      // Two connections of one process raced: the later one wins.
      it->second.session->Close(Status::AlreadyExists(kReplaced));
      it->second.session = session;
    } else {
      // Our reservation expired and another process took the id.
      session->Close(Status::AlreadyExists("client " + std::to_string(hello.client_id) +
                                           " is already connected; another process is running "
                                           "as client " +
                                           std::to_string(hello.client_id)));
    }
  }
  VLOG(1) << "session " << session->id() << " connected: client " << session->hello().client_id
          << (session->hello().role == net::Hello::kObserver ? " (observer)" : "");
}

void ShardService::OnDisconnect(const SessionPtr& session) {
  const uint64_t id = session->id();
  MutexLock lock(&mu_);
  const ShardEngine::Dropped dropped = engine_.Disconnect(id);
  sessions_.erase(id);
  if (session->hello().role == net::Hello::kClientProcess) {
    auto it = owners_.find(session->hello().client_id);
    if (it != owners_.end() && it->second.session == session) owners_.erase(it);
  }
  VLOG(1) << "session " << id << " disconnected: dropped " << dropped.parked << " parked read(s), "
          << dropped.subscriptions << " subscription(s)";
}

// --- Dispatch ------------------------------------------------------------------

void ShardService::OnMessage(const SessionPtr& s, net::Message m) {
  if (auto* read = std::get_if<net::Read>(&m)) return HandleRead(s, *read);
  if (auto* apply = std::get_if<net::Apply>(&m)) return HandleApply(s, *apply);
  if (auto* unsub = std::get_if<net::Unsubscribe>(&m)) return HandleUnsubscribe(s, *unsub);
  if (auto* create = std::get_if<net::CreateTable>(&m)) return HandleCreateTable(s, *create);
  if (auto* list = std::get_if<net::ListTables>(&m)) return HandleListTables(s, *list);
  if (auto* desc = std::get_if<net::DescribeTable>(&m)) return HandleDescribeTable(s, *desc);
  if (auto* stats = std::get_if<net::StatsRequest>(&m)) return HandleStats(s, *stats);
  if (auto* err = std::get_if<net::Error>(&m)) {
    LOG(WARNING) << "session " << s->id() << " (client " << s->hello().client_id
                 << ") sent an error, closing: " << err->ToStatus().ToString();
    s->Close(Status::OK());
    return;
  }
  const char* name = net::MessageName(m);
  LOG(WARNING) << "session " << s->id() << " (client " << s->hello().client_id << ") sent a "
               << name << " message, which clients may not send; closing";
  s->Close(Status::InvalidArgument(std::string("unexpected ") + name + " message from a client"));
}

void ShardService::SendError(const SessionPtr& s, uint64_t req_id, const Status& st,
                             bool retriable) {
  counters_.request_errors.fetch_add(1, std::memory_order_relaxed);
  s->Send(net::Error{req_id, st.code(), st.message(), retriable});
}

Status ShardService::ReserveReadReply(const net::Session& s, uint64_t bytes) {
  const uint64_t cap = options_.max_read_reply_bytes_total;
  const uint64_t queued = s.transport_queued_bytes();
  MutexLock l(&reply_mu_);
  uint64_t& mine = reply_bytes_by_session_[s.id()];
  if (cap > 0 && reply_bytes_pending_ + queued + bytes > cap &&
      (mine > 0 || s.queued_bytes() > 0)) {
    if (mine == 0) reply_bytes_by_session_.erase(s.id());
    return Status::ResourceExhausted(
        "too many Read replies waiting on this shard: " + std::to_string(reply_bytes_pending_) +
        " bytes being read and " + std::to_string(queued) + " queued for sending, at most " +
        std::to_string(cap) +
        " (paced --max_read_replies_mb); retry once this session has "
        "read its replies");
  }
  mine += bytes;
  reply_bytes_pending_ += bytes;
  return Status::OK();
}

void ShardService::ReleaseReadReply(const net::Session& s, uint64_t bytes) {
  MutexLock l(&reply_mu_);
  reply_bytes_pending_ -= bytes;
  auto it = reply_bytes_by_session_.find(s.id());
  if (it == reply_bytes_by_session_.end()) return;
  it->second -= bytes;
  if (it->second == 0) reply_bytes_by_session_.erase(it);
}

// --- Catalog -------------------------------------------------------------------

void ShardService::HandleCreateTable(const SessionPtr& s, const net::CreateTable& m) {
  // A catalog write (synced): the writer's, in order with the batches.
  WriterItem item;
  item.task = [this, s, m] {
    TableSchema created;
    const bool existed = store_->FindTable(m.schema.name).ok();
    Status st = store_->CreateTable(m.schema, &created);
    // A failed store (a full disk): the client retries with backoff.
    if (!st.ok()) return SendError(s, m.req_id, st, /*retriable=*/store_->failed());
    // One line per table created, not per client that opens it.
    if (!existed) {
      LOG(INFO) << "table " << DescribeSchema(created) << " created by client "
                << s->hello().client_id;
    }
    s->Send(net::TablesReply{m.req_id, {created}, /*created=*/!existed});
  };
  PostToWriter(std::move(item));
}

void ShardService::HandleListTables(const SessionPtr& s, const net::ListTables& m) {
  s->Send(net::TablesReply{m.req_id, store_->ListTables()});
}

void ShardService::HandleDescribeTable(const SessionPtr& s, const net::DescribeTable& m) {
  StatusOr<TableSchema> schema = store_->FindTable(std::string_view(m.name));
  if (!schema.ok()) {
    Status st = schema.status().IsNotFound() ? Status::NotFound("unknown table '" + m.name + "'")
                                             : schema.status();
    return SendError(s, m.req_id, st);
  }
  s->Send(net::TablesReply{m.req_id, {std::move(schema).value()}});
}

// --- Stats and clocks ----------------------------------------------------------

Version ShardService::ShardClock() const {
  MutexLock lock(&mu_);
  return engine_.shard_clock();
}

std::vector<ClockT> ShardService::AppliedClocks() const {
  MutexLock lock(&mu_);
  return engine_.clocks().clocks();
}

size_t ShardService::TEST_NumParkedReads() const {
  MutexLock lock(&mu_);
  return engine_.num_parked();
}

size_t ShardService::TEST_NumSubscriptions() const {
  MutexLock lock(&mu_);
  return engine_.subscriptions().num_subscriptions();
}

ShardService::MemoryStats ShardService::memory_stats() const {
  MemoryStats m;
  m.store = store_->memory_stats();
  m.apply_bytes = static_cast<uint64_t>(
      std::max<int64_t>(0, counters_.apply_bytes.load(std::memory_order_relaxed)));
  return m;
}

ShardService::PushLatency ShardService::push_latency() const {
  MutexLock lock(&mu_);
  return PushLatencyLocked();
}

ShardService::PushLatencySplit ShardService::push_latency_split() const {
  MutexLock lock(&mu_);
  return PushLatencySplit{push_latency_us_.Summary(), push_queue_us_.Summary(),
                          push_commit_us_.Summary(), push_send_us_.Summary()};
}

ShardService::PushLatency ShardService::PushLatencyLocked() const {
  return push_latency_us_.Summary();
}

void ShardService::LatencyRing::Add(int64_t us) {
  if (us_.size() < kPushLatencySamples) {
    us_.push_back(us);
  } else {
    us_[next_] = us;
    next_ = (next_ + 1) % kPushLatencySamples;
  }
}

ShardService::PushLatency ShardService::LatencyRing::Summary() const {
  std::vector<int64_t> v = us_;
  PushLatency r;
  r.samples = static_cast<int64_t>(v.size());
  if (v.empty()) return r;
  std::sort(v.begin(), v.end());
  // Nearest rank, as common/percentile.h.
  auto rank = [&v](double q) {
    size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()) - 1e-9));
    return v[std::clamp<size_t>(k, 1, v.size()) - 1];
  };
  r.p50_us = rank(0.5);
  r.p99_us = rank(0.99);
  r.max_us = v.back();
  return r;
}

net::StatsReply ShardService::Stats() const {
  net::StatsReply r;
  r.shard_id = shard_id_;
  auto load = [](const std::atomic<int64_t>& v) { return v.load(std::memory_order_relaxed); };
  // The store's figures first: no store lock is taken under mu_, and
  // MaybeCheckpoint holds checkpoint_mu_ while it reads the clock.
  const CheckpointStats cp = checkpoint_stats();
  const RowCacheStats cache = store_->row_cache_stats();
  const DataPathStats dp = store_->data_path_stats();
  std::vector<std::pair<std::string, int64_t>> memory;
  AppendMemoryCounters(cache.bytes, &memory);
  MutexLock lock(&mu_);
  const ShardEngineCounters& e = engine_.counters();
  r.counters = {{"batches_applied", load(counters_.batches_applied)},
                {"duplicates", load(counters_.duplicates)},
                {"apply_errors", load(counters_.apply_errors)},
                {"reads", load(counters_.reads)},
                {"parked_reads", e.parked_reads},
                {"rows_read", e.rows_read},
                {"rows_read_absent", e.rows_read_absent},
                {"rows_pushed", e.rows_pushed},
                {"pushes", e.pushes},
                {"push_dones", e.push_dones},
                {"delta_bytes_in", load(counters_.delta_bytes_in)},
                {"value_bytes_out", e.value_bytes_out},
                {"request_errors", load(counters_.request_errors) + e.read_errors},
                {"commit_groups", load(counters_.commit_groups)},
                {"commit_group_batches", load(counters_.commit_group_batches)},
                {"commit_group_max", load(counters_.commit_group_max)},
                {"undone_parts", load(counters_.undone_parts)}};
  r.counters.insert(r.counters.end(), memory.begin(), memory.end());
  r.counters.emplace_back("row_cache_hits", static_cast<int64_t>(cache.hits));
  r.counters.emplace_back("row_cache_misses", static_cast<int64_t>(cache.misses));
  r.counters.emplace_back("row_cache_evictions", static_cast<int64_t>(cache.evictions));
  r.counters.emplace_back("row_cache_rows", static_cast<int64_t>(cache.entries));
  r.counters.emplace_back("row_cache_bytes", static_cast<int64_t>(cache.bytes));
  // The write path's stages, in bytes (docs/data-path.md).
  for (const auto& [name, v] : std::initializer_list<std::pair<const char*, uint64_t>>{
           {"clock_log_records", dp.log_records},
           {"clock_log_bytes", dp.log_bytes},
           {"clock_log_pending_bytes", dp.log_offset},
           {"dirty_rows", dp.dirty_rows},
           {"dirty_bytes", dp.dirty_bytes},
           {"writebacks", dp.writebacks},
           {"writeback_rows", dp.writeback_rows},
           {"writeback_bytes", dp.writeback_bytes},
           {"rows_read_for_write", dp.rows_read_for_write},
           {"delta_only_rows", dp.delta_only_rows},
           {"writeback_operands", dp.writeback_operands},
           {"clock_log_replayed_records", dp.replayed_records},
           {"rocksdb_write_bytes", dp.rocksdb_write_bytes}}) {
    r.counters.emplace_back(name, static_cast<int64_t>(v));
  }
  const PushLatency pl = PushLatencyLocked();
  r.counters.emplace_back("push_latency_samples", pl.samples);
  r.counters.emplace_back("push_latency_p50_us", pl.p50_us);
  r.counters.emplace_back("push_latency_p99_us", pl.p99_us);
  const std::pair<const char*, const LatencyRing*> stages[] = {
      {"queue", &push_queue_us_}, {"commit", &push_commit_us_}, {"send", &push_send_us_}};
  for (const auto& [name, ring] : stages) {
    const PushLatency st = ring->Summary();
    r.counters.emplace_back(std::string("push_latency_") + name + "_p50_us", st.p50_us);
    r.counters.emplace_back(std::string("push_latency_") + name + "_p99_us", st.p99_us);
  }
  const ClockVector& clocks = engine_.clocks();
  r.shard_clock = clocks.Min();
  r.applied_clocks = clocks.clocks();
  r.counters.emplace_back("sessions", static_cast<int64_t>(sessions_.size()));
  int64_t parts = 0;
  for (ClientId c = 0; c < num_clients_; ++c) parts += engine_.AppliedParts(c);
  r.counters.emplace_back("incomplete_clock_parts", parts);
  r.connected_clients = ConnectedClientsLocked();
  r.counters.emplace_back("parked_now", static_cast<int64_t>(engine_.num_parked()));
  r.counters.emplace_back("subscribers",
                          static_cast<int64_t>(engine_.subscriptions().num_subscribers()));
  r.counters.emplace_back("subscriptions",
                          static_cast<int64_t>(engine_.subscriptions().num_subscriptions()));
  r.counters.emplace_back("checkpoints", cp.count);
  r.counters.emplace_back("checkpoint_bytes", static_cast<int64_t>(cp.usage.bytes));
  r.counters.emplace_back("checkpoint_exclusive_bytes",
                          static_cast<int64_t>(cp.usage.exclusive_bytes));
  r.counters.emplace_back("last_checkpoint_clock", cp.last_clock);
  return r;
}

void ShardService::AppendMemoryCounters(uint64_t row_cache_bytes,
                                        std::vector<std::pair<std::string, int64_t>>* out) const {
  // RocksDB's in-memory properties (no disk access, safe on any thread).
  auto prop = [this](const char* name) {
    uint64_t v = 0;
    return store_->GetIntProperty(name, &v) ? static_cast<int64_t>(v) : int64_t{0};
  };
  const ShardStoreOptions& so = options_.store;
  const int64_t mib = int64_t{1} << 20;
  out->emplace_back("memory_block_cache_bytes", prop("rocksdb.block-cache-usage"));
  out->emplace_back("memory_block_cache_limit_bytes", prop("rocksdb.block-cache-capacity"));
  out->emplace_back("memory_block_cache_pinned_bytes", prop("rocksdb.block-cache-pinned-usage"));
  const MemoryStats mem = memory_stats();
  // Active and immutable memtables (rocksdb.size-all-mem-tables).
  out->emplace_back("memory_memtables_bytes", static_cast<int64_t>(mem.store.memtable_bytes));
  out->emplace_back("memory_memtables_limit_bytes",
                    static_cast<int64_t>(so.write_buffer_mb) * so.max_write_buffer_number * mib);
  out->emplace_back("memory_table_readers_bytes", prop("rocksdb.estimate-table-readers-mem"));
  out->emplace_back("memory_row_cache_bytes", static_cast<int64_t>(row_cache_bytes));
  out->emplace_back("memory_row_cache_limit_bytes", static_cast<int64_t>(so.row_cache_mb) * mib);
  // The write path's buffers (memory_stats()): the WriteBatch kept between
  // group commits, and the Apply batches received and not yet freed.
  out->emplace_back("memory_write_batch_bytes", static_cast<int64_t>(mem.store.write_batch_bytes));
  out->emplace_back(
      "memory_write_batch_limit_bytes",
      static_cast<int64_t>(std::min<size_t>(
          so.retained_write_batch_mb,
          so.write_buffer_mb * static_cast<size_t>(std::max(1, so.max_write_buffer_number)))) *
          mib);
  out->emplace_back("memory_apply_batches_bytes", static_cast<int64_t>(mem.apply_bytes));
}

void ShardService::HandleStats(const SessionPtr& s, const net::StatsRequest& m) {
  net::StatsReply r = Stats();
  r.req_id = m.req_id;
  s->Send(std::move(r));
}

Status ShardService::CreateCheckpoint(const std::string& dir) {
  return store_->CreateCheckpoint(dir);
}

std::string ShardService::CheckpointDir() const {
  if (!options_.checkpoint_dir.empty()) return options_.checkpoint_dir;
  const std::string& data = options_.data_dir.empty() ? store_->dir() : options_.data_dir;
  return (std::filesystem::path(data) / "checkpoints").string();
}

StatusOr<std::string> ShardService::MaybeCheckpoint() {
  if (options_.checkpoint_every <= 0) return std::string();
  MutexLock l(&checkpoint_mu_);
  const Version clock = ShardClock();
  const Version due = clock / options_.checkpoint_every * options_.checkpoint_every;
  if (due <= last_checkpoint_ || due == 0) return std::string();
  const std::string dir = CheckpointDir();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  char name[64];
  std::snprintf(name, sizeof(name), "clock-%012lld", static_cast<long long>(due));
  const std::string path = (std::filesystem::path(dir) / name).string();
  // A restarted shard finds the checkpoint of `due` that the process before
  // it wrote: it counts as written (creating it again would be refused, and
  // retried every second until the next multiple).
  CheckpointManifest found;
  const bool written_before = ShardStore::ReadCheckpointManifest(path, &found).ok();
  if (!written_before) {
    Status s = store_->CreateCheckpoint(path);
    if (!s.ok()) {
      return s.WithPrefix("checkpoint at shard clock " + std::to_string(clock) + " into " + path);
    }
    LOG(INFO) << "shard " << shard_id_ << ": checkpoint at shard clock " << clock << ": " << path;
  }
  last_checkpoint_ = due;
  // The error_code forms throughout (a range-for's increment throws): a
  // directory that cannot be listed keeps its checkpoints, never aborts.
  std::vector<std::string> names;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("clock-", 0) != 0) continue;
    if (IsCheckpointStagingName(name)) {
      // A checkpoint whose writer was killed (none is being written now).
      std::error_code rm_ec;
      std::filesystem::remove_all(it->path(), rm_ec);
      continue;
    }
    names.push_back(it->path().string());
  }
  if (ec) {
    LOG(WARNING) << "shard " << shard_id_ << ": cannot list " << dir
                 << " to drop old checkpoints: " << ec.message();
    return path;
  }
  std::sort(names.begin(), names.end());
  const size_t keep = static_cast<size_t>(options_.checkpoint_keep);
  for (size_t i = 0; i + keep < names.size(); ++i) std::filesystem::remove_all(names[i], ec);
  CheckpointStats stats;
  stats.last_clock = due;
  for (size_t i = names.size() > keep ? names.size() - keep : 0; i < names.size(); ++i) {
    CheckpointUsage u;
    if (!CheckpointDiskUsage(names[i], &u).ok()) continue;
    ++stats.count;
    stats.usage.bytes += u.bytes;
    stats.usage.exclusive_bytes += u.exclusive_bytes;
  }
  checkpoint_stats_ = stats;
  return written_before ? std::string() : path;
}

ShardService::CheckpointStats ShardService::checkpoint_stats() const {
  MutexLock l(&checkpoint_mu_);
  return checkpoint_stats_;
}

// --- Holdback warning ------------------------------------------------------------

std::vector<uint32_t> ShardService::ConnectedClientsLocked() const {
  std::vector<bool> connected(num_clients_, false);
  for (const auto& [id, session] : sessions_) {
    const net::Hello& h = session->hello();
    if (h.role == net::Hello::kClientProcess && h.client_id < num_clients_) {
      connected[h.client_id] = true;
    }
  }
  std::vector<uint32_t> ids;
  for (uint32_t c = 0; c < num_clients_; ++c) {
    if (connected[c]) ids.push_back(c);
  }
  return ids;
}

HoldbackReport ShardService::CheckHoldback(std::chrono::steady_clock::time_point now) {
  HoldbackReport r;
  const int64_t now_ms = NowMs(now);
  MutexLock lock(&mu_);
  // The timer that calls this also retries pushes that could not read
  // their rows (else subscribers waiting for them wait for the next clock,
  // which may never come), on the writer (RetryPushesOnWriter).
  if (engine_.push_retry_pending() && !retry_posted_) {
    retry_posted_ = true;
    WriterItem item;
    item.task = [this] { RetryPushesOnWriter(); };
    PostToWriter(std::move(item));
  }
  const ClockVector& clocks = engine_.clocks();
  r.shard_clock = clocks.Min();
  r.held_back = clocks.HoldsBack();
  if (!r.held_back) return r;
  r.laggards = clocks.Laggards();
  const int64_t since = clocks.held_back_since_ms();
  r.stalled_ms = now_ms - since;
  if (options_.holdback_warn_ms <= 0 || r.stalled_ms < options_.holdback_warn_ms) return r;
  if (warned_clock_ != r.shard_clock || warned_since_ms_ != since) {  // a new stall
    warned_clock_ = r.shard_clock;
    warned_since_ms_ = since;
    warn_interval_ms_ = options_.holdback_warn_ms;
    next_warn_ms_ = now_ms;
  }
  if (now_ms < next_warn_ms_) return r;
  next_warn_ms_ = now_ms + warn_interval_ms_;
  warn_interval_ms_ = std::min(2 * warn_interval_ms_, kMaxWarnIntervalMs);

  std::vector<bool> connected(num_clients_, false);
  for (uint32_t c : ConnectedClientsLocked()) connected[c] = true;
  std::ostringstream msg;
  msg << "shard " << shard_id_ << ": shard clock " << r.shard_clock << " held back for "
      << r.stalled_ms << " ms by client";
  if (r.laggards.size() > 1) msg << "s";
  size_t shown = 0;
  for (ClientId c : r.laggards) {
    if (shown++ == 8) {
      msg << " and " << (r.laggards.size() - 8) << " more";
      break;
    }
    msg << (shown > 1 ? ", " : " ") << c << (connected[c] ? "" : " (not connected)");
  }
  msg << "; the fastest client is at clock " << clocks.Max();
  r.message = msg.str();
  r.warned = true;
  LOG(WARNING) << r.message;
  return r;
}

}  // namespace pace
