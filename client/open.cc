// Client::Open (choosing embedded or remote channels) and the option helpers
// ParseServers and ClientIdFromEnvironment.
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "client/client_impl.h"
#include "client/embedded_channel.h"
#include "client/pace.h"
#include "client/remote_channel.h"
#include "common/memory_budget.h"
#include "net/address.h"

namespace pace {

namespace {

// Random, nonzero, the same for every Client of this process: the Hello
// incarnation that lets a reconnect of this process replace its old session
// at a shard while a different process with the same client id is refused.
uint64_t ProcessIncarnation() {
  static const uint64_t incarnation = [] {
    std::random_device rd;
    uint64_t x = (uint64_t{rd()} << 32) ^ rd();
    x ^= static_cast<uint64_t>(getpid()) << 17;
    x ^= static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return x == 0 ? 1 : x;
  }();
  return incarnation;
}

}  // namespace

void ResolveMemoryBudget(ClientOptions* o) {
  size_t client_mb = o->memory_mb;
  if (o->servers.empty()) {
    EmbeddedShardOptions& e = o->embedded;
    if (o->memory_mb > 0) {
      size_t shard_mb = 0;
      SplitEmbeddedBudget(o->memory_mb, &client_mb, &shard_mb);
      if (e.memory_mb == 0) {
        e.memory_mb = shard_mb;
      } else {
        client_mb = o->memory_mb > e.memory_mb ? o->memory_mb - e.memory_mb : 1;
      }
    }
    const ShardMemorySplit shard = SplitShardBudget(e.memory_mb);
    if (e.block_cache_mb == 0) e.block_cache_mb = shard.block_cache_mb;
    if (e.write_buffer_mb == 0) e.write_buffer_mb = shard.write_buffer_mb;
    if (e.row_cache_mb == 0) e.row_cache_mb = shard.row_cache_mb;
  }
  const ClientMemorySplit split = SplitClientBudget(client_mb);
  if (o->cache_mb == 0) o->cache_mb = split.cache_mb;
  if (o->open_delta_mb == 0) o->open_delta_mb = split.open_delta_mb;
  if (o->unacked_mb == 0) o->unacked_mb = split.unacked_mb;
}

Status Client::Open(const ClientOptions& given, std::unique_ptr<Client>* client) {
  ClientOptions options = given;
  ResolveMemoryBudget(&options);
  // Before the embedded shard opens (it logs too); Create validates the range.
  if (options.min_log_level >= 0 && options.min_log_level <= 3) {
    FLAGS_minloglevel = options.min_log_level;
  }
  std::vector<std::unique_ptr<client::ShardChannel>> channels;
  const bool embedded = options.servers.empty();
  if (embedded) {
    if (options.data_dir.empty()) {
      return Status::InvalidArgument("embedded mode needs a data_dir");
    }
    channels.push_back(std::make_unique<client::EmbeddedChannel>(options, ProcessIncarnation()));
  } else {
    if (options.connect_timeout_ms <= 0 || options.shard_timeout_ms <= 0) {
      return Status::InvalidArgument("connect_timeout_ms and shard_timeout_ms must be > 0");
    }
    if (options.servers.size() > client::kMaxShards) {
      return Status::InvalidArgument(std::to_string(options.servers.size()) +
                                     " servers: a client reaches at most " +
                                     std::to_string(client::kMaxShards) + " shards");
    }
    auto job = std::make_shared<client::JobPin>(options.job, options.servers.size());
    for (size_t k = 0; k < options.servers.size(); ++k) {
      net::RemoteShardOptions ro;
      RETURN_IF_ERROR(net::ParseHostPort(options.servers[k], &ro.host, &ro.port)
                          .WithPrefix("server " + std::to_string(k)));
      ro.hello.client_id = options.client_id;
      ro.hello.token = options.token;
      ro.hello.role = net::Hello::kClientProcess;
      ro.hello.incarnation = ProcessIncarnation();
      ro.hello.features = net::Hello::kAbsentRows;  // InstallRows computes them
      // Two parts' Apply frames in flight to the socket at once, each a part
      // plus its rows' wire overhead (a few percent for rows of hundreds of
      // bytes) and the pool's rounding up (an eighth): a model-scale clock's
      // frames then reuse two blocks instead of faulting in 32 MiB of fresh
      // pages each (docs/data-path.md, "Frames over TCP").
      const uint64_t part = Impl::PartBytesOf(options.open_delta_mb, options.unacked_mb);
      ro.frame_pool.max_block_bytes =
          std::max<size_t>(ro.frame_pool.max_block_bytes, part + part / 4 + (size_t{1} << 20));
      ro.frame_pool.max_pooled_bytes =
          std::max<size_t>(ro.frame_pool.max_pooled_bytes, 2 * ro.frame_pool.max_block_bytes);
      ro.connect_timeout_ms = static_cast<int>(options.connect_timeout_ms);
      // A silent shard (link down, host gone) counts as disconnected after
      // half the shard timeout, so calls fail within ~1.5 x shard_timeout_ms.
      ro.dead_peer_timeout_ms =
          static_cast<int>(std::min<int64_t>(options.shard_timeout_ms / 2, 1 << 30));
      channels.push_back(
          std::make_unique<client::RemoteChannel>(static_cast<uint32_t>(k), ro, job));
    }
  }
  return Impl::Create(options, std::move(channels), embedded, client);
}

Status ParseServers(std::string_view list, ClientOptions* options) {
  std::vector<std::string> servers;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view item = list.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    std::string host;
    uint16_t port = 0;
    Status s = net::ParseHostPort(item, &host, &port);
    if (!s.ok()) {
      return Status::InvalidArgument("bad server '" + std::string(item) + "' in '" +
                                     std::string(list) + "': " + s.message());
    }
    if (port == 0) {
      return Status::InvalidArgument("server '" + std::string(item) + "' needs a nonzero port");
    }
    servers.emplace_back(item);
    start = comma + 1;
  }
  options->servers = std::move(servers);
  return Status::OK();
}

namespace {

bool ReadUint(const char* name, uint64_t* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return false;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 10);
  if (end == v || *end != '\0') return false;
  *out = x;
  return true;
}

}  // namespace

bool ClientIdFromEnvironment(ClientOptions* options) {
  static const char* const kPairs[][2] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI_RANK", "PMI_SIZE"},
      {"SLURM_PROCID", "SLURM_NTASKS"},
  };
  for (const auto& pair : kPairs) {
    uint64_t rank = 0, size = 0;
    if (ReadUint(pair[0], &rank) && ReadUint(pair[1], &size) && size > 0 && rank < size &&
        size <= UINT32_MAX) {
      options->client_id = static_cast<ClientId>(rank);
      options->num_clients = static_cast<uint32_t>(size);
      return true;
    }
  }
  return false;
}

}  // namespace pace
