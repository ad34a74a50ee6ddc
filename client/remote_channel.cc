#include "client/remote_channel.h"

#include <glog/logging.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <utility>
#include <variant>

#include "common/thread_name.h"
#include "common/token_file.h"

namespace pace::client {

namespace {
// Each reconnect attempt runs RemoteShard::Connect for at most this long
// (it backs off internally), then starts over.
constexpr int kReconnectSliceMs = 2000;
// Between failed slices the loop backs off from the min to the max (doubling),
// woken early only by Shutdown.
constexpr int64_t kReconnectBackoffMinMs = 10;
constexpr int64_t kReconnectBackoffMaxMs = 100;
// How long Start retries a Hello refused because the client id is held
// (see Start).
constexpr int64_t kFencedGraceMs = 1000;
// What a reconnect allocates at once (the batches the client kept during the
// outage, up to unacked_mb, their re-sent copies, the replies re-subscribing
// its pushed rows) is freed within moments, but glibc keeps freed memory in
// its arenas. This long after a reconnect the channel returns the free arena
// pages to the OS. (The 10-minute soak when every pushed row was
// re-subscribed with a Read of its own: free arena memory 0.3 -> 2.6
// MB over the first reconnects, -1.4 MB RSS with the trim; with one Read per
// table it stays at 0.4-0.7 MB.)
constexpr int64_t kTrimAfterReconnectMs = 3000;

// Returns the free pages of every malloc arena to the OS (glibc
// malloc_trim). A few milliseconds, once per reconnect. No-op elsewhere.
void ReleaseFreedMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}
}  // namespace

JobPin::JobPin(std::string job, size_t num_shards)
    : given_(!job.empty()), job_(std::move(job)), per_shard_(num_shards) {}

std::string JobPin::Expected(uint32_t shard) const {
  MutexLock l(&mu_);
  if (shard < per_shard_.size() && !per_shard_[shard].empty()) return per_shard_[shard];
  return job_;
}

Status JobPin::Check(uint32_t shard, const std::string& who, const std::string& shard_job) {
  MutexLock l(&mu_);
  if (shard >= per_shard_.size()) return Status::InvalidArgument("JobPin: no shard " + who);
  auto named = [](const std::string& job) { return "job '" + job + "'"; };
  const std::string theirs = shard_job.empty() ? "no job id (an older paced)" : named(shard_job);
  if (!per_shard_[shard].empty() && shard_job != per_shard_[shard]) {
    return Status::FailedPrecondition(who + " came back as " + theirs + ", but it was " +
                                      named(per_shard_[shard]) +
                                      " when this client connected (restarted on another data "
                                      "dir?)");
  }
  if (given_) {
    if (shard_job != job_) {
      return Status::FailedPrecondition(who + " belongs to " + theirs + ", this client to " +
                                        named(job_) + " (--job)");
    }
  } else if (!shard_job.empty()) {
    const bool is_auto = IsAutoJobId(shard_job);
    if (!is_auto && job_.empty() && !auto_from_.empty()) {
      return Status::FailedPrecondition(
          who + " belongs to " + theirs + ", but " + auto_from_ +
          " was started without paced --job: give every shard of a job the same --job");
    }
    if (is_auto && !job_.empty()) {
      return Status::FailedPrecondition(who + " was started without paced --job (" + theirs +
                                        "), but " + job_from_ + " belongs to " + named(job_) +
                                        ": give every shard of a job the same --job");
    }
    if (!is_auto && !job_.empty() && shard_job != job_) {
      return Status::FailedPrecondition(who + " belongs to " + theirs + ", but " + job_from_ +
                                        " to " + named(job_) +
                                        ": all shards of a client must be of one job (check "
                                        "--servers)");
    }
    if (is_auto && auto_from_.empty()) auto_from_ = who;
    if (!is_auto && job_.empty()) {
      job_ = shard_job;
      job_from_ = who;
    }
  }
  if (per_shard_[shard].empty()) per_shard_[shard] = shard_job;
  return Status::OK();
}

bool IsJobMismatch(const Status& s) {
  return s.code() == StatusCode::kFailedPrecondition &&
         s.message().find("this shard belongs to job '") != std::string::npos;
}

RemoteChannel::RemoteChannel(uint32_t shard, net::RemoteShardOptions options,
                             std::shared_ptr<JobPin> job)
    : shard_(shard), options_(std::move(options)), job_(std::move(job)) {}

RemoteChannel::~RemoteChannel() { Shutdown(); }

std::string RemoteChannel::Describe() const {
  return "shard " + std::to_string(shard_) + " (" + options_.host + ":" +
         std::to_string(options_.port) + ")";
}

Status RemoteChannel::ConnectOnce(int timeout_ms, std::unique_ptr<net::RemoteShard>* out,
                                  uint64_t gen, bool* fatal) {
  net::RemoteShardOptions o = options_;
  o.connect_timeout_ms = timeout_ms;
  if (job_ != nullptr) o.hello.job = job_->Expected(shard_);
  Status s = net::RemoteShard::Connect(
      o, [this, gen](net::Message m) { OnConnMessage(gen, std::move(m)); },
      [this, gen](const Status& why) { OnConnLost(gen, why); }, out);
  if (!s.ok()) {
    *fatal = s.code() == StatusCode::kAlreadyExists || IsJobMismatch(s);
    return s;
  }
  s = job_ == nullptr ? Status::OK() : job_->Check(shard_, Describe(), (*out)->welcome().job);
  if (!s.ok()) {
    *fatal = true;
    {
      MutexLock l(&mu_);
      ++gen_;  // its callbacks (the close) are ignored
    }
    out->reset();  // nothing was sent on it but the Hello
  }
  return s;
}

Status RemoteChannel::Start(ChannelListener* listener, net::Welcome* welcome) {
  listener_ = listener;
  std::unique_ptr<net::RemoteShard> conn;
  uint64_t gen;
  {
    MutexLock l(&mu_);
    gen = ++gen_;
  }
  // A refusal because our client id is held (fencing) is retried for a short
  // grace period: a process that starts as client k right after the previous
  // client k exited can reach the shard before the shard has seen the old
  // connection close (seen under TSan: a verifier started right after the
  // job's client 0). A real second process still fails, after the grace.
  const auto fenced_deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kFencedGraceMs);
  const auto connect_deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.connect_timeout_ms);
  int64_t backoff_ms = 20;
  for (;;) {
    bool fatal = false;
    Status s = ConnectOnce(options_.connect_timeout_ms, &conn, gen, &fatal);
    if (s.ok()) break;
    // Unavailable from a shard that answered: it is taking back an
    // incomplete clock of this client's previous process (docs/wire-protocol.md,
    // Hello) and serves this one once that is done. Retried within the
    // connect timeout (an unreachable shard has used it up already).
    const auto now = std::chrono::steady_clock::now() + std::chrono::milliseconds(backoff_ms);
    const bool retry = s.code() == StatusCode::kAlreadyExists ? now <= fenced_deadline
                       : s.IsUnavailable()                    ? now <= connect_deadline
                                                              : false;
    if (!retry) return s;
    VLOG(1) << Describe() << ": " << s.ToString() << "; retrying in " << backoff_ms << " ms";
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms = std::min<int64_t>(2 * backoff_ms, 320);
    {
      MutexLock l(&mu_);
      gen = ++gen_;
    }
  }
  *welcome = conn->welcome();
  {
    MutexLock l(&mu_);
    conn_ = std::move(conn);
  }
  reconnect_thread_ = std::thread([this] {
    SetThreadName("pace-reconnect");
    ReconnectLoop();
  });
  // The listener is ready once Start returns; deliver anything that came.
  mu_.Lock();
  while (!held_.empty()) {
    net::Message m = std::move(held_.front());
    held_.pop_front();
    mu_.Unlock();
    listener_->OnMessage(shard_, std::move(m));
    mu_.Lock();
  }
  ready_ = true;
  mu_.Unlock();
  return Status::OK();
}

namespace {

// The smaller nonzero one of two frame limits (0: none).
uint64_t SmallerLimit(uint64_t a, uint64_t b) {
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}

}  // namespace

void RemoteChannel::Send(net::Message m) {
  MutexLock l(&mu_);
  if (conn_ == nullptr || lost_) return;
  if (const auto* a = std::get_if<net::Apply>(&m)) {
    // The client cuts its batches to fit (Client::Impl::SendBatch); a batch
    // that still does not fit (e.g. re-sent to a shard that came back with a
    // smaller limit) never will: reconnecting and re-sending it would loop.
    const uint64_t limit = SmallerLimit(options_.max_frame_bytes, conn_->welcome().max_frame_bytes);
    uint64_t bytes = 0;
    for (const net::DeltaRow& r : a->updates) bytes += r.bytes.size();
    const uint64_t size = net::RowsMessageBytes(a->updates.size(), bytes);
    if (size > limit) {
      unsendable_ = Status::ResourceExhausted(
          "Apply of clock " + std::to_string(a->clock) + " part " + std::to_string(a->part) + " (" +
          std::to_string(a->updates.size()) + " rows) needs up to " + std::to_string(size) +
          " bytes, over the frame limit of " + std::to_string(limit) +
          " bytes (the smaller of this client's and the shard's max_frame_bytes; paced "
          "--max_frame_mb): it cannot be sent");
      lost_ = true;
      cv_.SignalAll();
      return;
    }
  }
  Status s = conn_->Send(std::move(m));
  if (!s.ok() && !s.IsUnavailable()) {
    // E.g. the write queue is full: treat the connection as lost, so that
    // everything unacknowledged is re-sent on a fresh one.
    LOG(ERROR) << Describe() << ": send failed (" << s.ToString() << "); reconnecting";
    lost_ = true;
    cv_.SignalAll();
  }
}

void RemoteChannel::OnConnMessage(uint64_t gen, net::Message m) {
  {
    MutexLock l(&mu_);
    if (gen != gen_) return;
    if (!ready_) {
      held_.push_back(std::move(m));
      return;
    }
  }
  listener_->OnMessage(shard_, std::move(m));
}

void RemoteChannel::OnConnLost(uint64_t gen, const Status& why) {
  {
    MutexLock l(&mu_);
    if (gen != gen_ || stopping_) return;
    lost_ = true;
    ready_ = false;
    fenced_ = why.code() == StatusCode::kAlreadyExists;
    cv_.SignalAll();
  }
  listener_->OnDisconnect(shard_, why);
  if (why.code() == StatusCode::kAlreadyExists) {
    // Fenced by a newer session with our client id: reconnecting would take
    // the id back from it. Fail loudly instead.
    LOG(ERROR) << Describe() << ": " << why.ToString();
    listener_->OnMessage(shard_, net::Error{0, why.code(), why.message()});
  }
}

void RemoteChannel::ReconnectLoop() {
  // When to hand the memory of the last outage back (see kTrimAfterReconnectMs).
  std::optional<std::chrono::steady_clock::time_point> trim_at;
  mu_.Lock();
  for (;;) {
    if (trim_at.has_value()) {
      cv_.WaitUntil(&mu_, *trim_at, [&]() REQUIRES(mu_) { return stopping_ || lost_; });
      if (!stopping_ && !lost_) {
        trim_at.reset();
        mu_.Unlock();
        ReleaseFreedMemory();
        mu_.Lock();
        continue;
      }
    }
    cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return stopping_ || lost_; });
    if (stopping_ || fenced_) {
      mu_.Unlock();
      return;
    }
    if (!unsendable_.ok()) {
      // Fatal: fail loudly instead of reconnecting (see unsendable_).
      const Status why = unsendable_;
      std::unique_ptr<net::RemoteShard> old = std::move(conn_);
      ++gen_;  // callbacks of `old` are ignored from now on
      ready_ = false;
      held_.clear();
      mu_.Unlock();
      old.reset();
      LOG(ERROR) << Describe() << ": " << why.ToString();
      listener_->OnMessage(shard_, net::Error{0, why.code(), why.message()});
      return;
    }
    bool notified_listener = !ready_;  // OnConnLost ran (not a local send failure)
    std::unique_ptr<net::RemoteShard> old = std::move(conn_);
    uint64_t gen = ++gen_;  // callbacks of `old` are ignored from now on
    ready_ = false;
    held_.clear();
    mu_.Unlock();
    old.reset();  // closes it and joins its I/O thread (not from a callback)
    if (!notified_listener) {
      listener_->OnDisconnect(shard_, Status::Unavailable("connection reset after a send error"));
    }
    std::unique_ptr<net::RemoteShard> conn;
    Status s;
    int64_t backoff_ms = kReconnectBackoffMinMs;
    for (;;) {
      {
        MutexLock g(&mu_);
        if (stopping_) return;
      }
      bool fatal = false;
      s = ConnectOnce(kReconnectSliceMs, &conn, gen, &fatal);
      if (s.ok()) break;
      if (fatal) {
        // Fenced: another process holds our client id at this shard
        // (docs/wire-protocol.md, Hello), or the shard is of another job.
        // Retrying cannot help; fail loudly.
        LOG(ERROR) << Describe() << ": " << s.ToString();
        listener_->OnMessage(shard_, net::Error{0, s.code(), s.message()});
        return;
      }
      VLOG(1) << Describe() << ": reconnect attempt failed: " << s.ToString();
      const auto next = std::chrono::steady_clock::now() + std::chrono::milliseconds(backoff_ms);
      backoff_ms = std::min(2 * backoff_ms, kReconnectBackoffMaxMs);
      MutexLock g(&mu_);
      cv_.WaitUntil(&mu_, next, [&]() REQUIRES(mu_) { return stopping_; });
    }
    net::Welcome welcome = conn->welcome();
    {
      MutexLock g(&mu_);
      conn_ = std::move(conn);
      lost_ = false;
    }
    listener_->OnReconnect(shard_, welcome);
    trim_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(kTrimAfterReconnectMs);
    mu_.Lock();
    while (!held_.empty()) {
      net::Message m = std::move(held_.front());
      held_.pop_front();
      mu_.Unlock();
      listener_->OnMessage(shard_, std::move(m));
      mu_.Lock();
    }
    if (gen == gen_) ready_ = true;
  }
}

void RemoteChannel::Shutdown() {
  std::unique_ptr<net::RemoteShard> conn;
  {
    MutexLock l(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  if (reconnect_thread_.joinable()) reconnect_thread_.join();
  {
    MutexLock l(&mu_);
    conn = std::move(conn_);
    ++gen_;  // late callbacks of `conn` are ignored
  }
  conn.reset();
}

}  // namespace pace::client
