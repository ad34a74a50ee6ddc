// PaceDB client: the public API that training programs use.
//
//   pace::ClientOptions opts;            // no servers: embedded shard in ./pace-data
//   std::unique_ptr<pace::Client> client;
//   RETURN_IF_ERROR(pace::Client::Open(opts, &client));
//   pace::TableSchema schema;            // common/schema.h
//   schema.name = "w"; schema.width = 16; schema.consistency = pace::Consistency::kEssp;
//   schema.staleness = 2;
//   pace::Table w;
//   RETURN_IF_ERROR(client->CreateTable(schema, &w));
//   // in each training thread:
//   std::unique_ptr<pace::Worker> worker;
//   RETURN_IF_ERROR(client->RegisterWorker(&worker));
//   float row[16];
//   RETURN_IF_ERROR(worker->Get(w, 7, row));       // blocks until fresh enough
//   RETURN_IF_ERROR(worker->Inc(w, 7, delta));     // additive, read-my-writes
//   RETURN_IF_ERROR(worker->Clock());              // end of this worker's clock
//
// Semantics are docs/design.md, "Semantics": the read rule v >= c - s per table,
// read-my-writes within a process, one coalesced batch per shard per process
// clock, SSP pull / ESSP push, durability by re-sending unacknowledged batches.
// A vap table (TableSchema::value_bound = v) has no read rule; instead a
// worker's Clock() waits while its process's unacknowledged updates to a row
// of it exceed v in L1 norm. That bounds what each writer has in flight, not
// what a reader misses, which the paper's VAP bounds (docs/design.md, "VAP:
// the value bound").
//
// Thread-safety: a Client is safe for concurrent use by many threads. A Worker
// belongs to one thread at a time (it is the identity of an application
// thread); different Workers may run concurrently. Table is a small value,
// freely copyable and shareable.
//
// This header includes only std and common/ (no Boost, FlatBuffers, RocksDB,
// glog): the implementation is behind pimpl.
#ifndef PACE_CLIENT_PACE_H_
#define PACE_CLIENT_PACE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/schema.h"
#include "common/status.h"

namespace pace {

// Embedded mode only: the in-process shard's options, the same paced takes as
// flags (docs/operations.md).
struct EmbeddedShardOptions {
  // The in-process shard's memory budget, in MiB, split over the components
  // below by the shares of common/memory_budget.h (block cache 40%, memtables
  // 40% over 3 memtables of a sixth each, row cache 20%). 0: kEmbeddedShardSharePct (40%) of
  // ClientOptions::memory_mb, or each component's default when that is 0
  // too. Default: 0.
  size_t memory_mb = 0;
  // RocksDB block cache, one memtable (the shard keeps up to 3) and the
  // shard's row cache, in MiB. 0: the share of memory_mb, or the defaults
  // 256, 64, 256 without a budget. Nonzero: overrides the share. Default: 0.
  size_t block_cache_mb = 0;
  size_t write_buffer_mb = 0;
  size_t row_cache_mb = 0;
  // fsync the WAL before acknowledging a (group of) batch(es). Default: false.
  bool sync = false;
  // The shard's write path (ShardStoreOptions::clock_log). Default: true.
  bool clock_log = true;
  // false: for measuring the cost of durability only (ShardStoreOptions::
  // durable): nothing is logged, a crash loses the updates since the last
  // row write-back, and a store not closed cleanly is refused. Default: true.
  bool durable = true;
  // Write a checkpoint every K shard clocks into checkpoint_dir (empty:
  // DATA_DIR/checkpoints), keeping the newest checkpoint_keep. Defaults: 0
  // (never), "", 3.
  int64_t checkpoint_every = 0;
  std::string checkpoint_dir;
  int checkpoint_keep = 3;
  // Warn when the shard clock has been held back this long. Default: 10000.
  int64_t holdback_warn_ms = 10000;
};

struct ClientOptions {
  // Shard addresses "host:port", index = shard id. Empty: run embedded, with an
  // in-process shard on data_dir. Default: empty.
  std::vector<std::string> servers;
  // This process's id in [0, num_clients) and the job's number of client
  // processes. Defaults: 0 and 1.
  ClientId client_id = 0;
  uint32_t num_clients = 1;
  // The job's shared secret (contents of --token_file). Default: empty.
  std::string token;
  // The job this process belongs to (paced --job; docs/operations.md, "Jobs
  // and tokens"). Nonempty: a shard (or the embedded store) of another job is
  // refused, naming both. Empty: the job of the first shard's Welcome is
  // pinned, and a shard of another job (another shard of --servers, or one
  // restarted on another data dir) is refused. Default: empty.
  std::string job{};
  // Embedded mode only: the data directory and the in-process shard's
  // options. Defaults: "./pace-data", EmbeddedShardOptions defaults.
  std::string data_dir = "./pace-data";
  EmbeddedShardOptions embedded;
  // The process's memory budget, in MiB (docs/design.md, "Memory budgets";
  // docs/operations.md "Sizing the memory budget"). The client's components
  // get their shares of it (common/memory_budget.h): row cache 50%, open
  // deltas 20%, unacknowledged batches 10%, and 20% reserved for the copies
  // of those batches in flight (message, the shard's write batch). Embedded,
  // the in-process shard
  // takes 40% first (EmbeddedShardOptions::memory_mb) and the client the
  // rest. A component given explicitly (nonzero below) overrides its share.
  // 0: no process budget, every component at its own default. Default: 0.
  size_t memory_mb = 0;
  // Process cache budget across all tables, in MiB. Rows are evicted (LRU)
  // beyond it; un-sent updates are never lost by eviction. 0: the share of
  // memory_mb, or 1024 without a budget. Default: 0.
  size_t cache_mb = 0;
  // Bound on the open deltas (updates not sent yet), in MiB. A worker that
  // runs ahead of the slowest one and would take them beyond it, or its own
  // clock's beyond one part (below), waits in Inc until the process clock
  // catches up (its deltas are then sealed and sent).
  // The slowest worker (at the process clock) must be able to finish its
  // clock, so it never waits for others: once its clock's open deltas reach
  // half of min(open_delta_mb, unacked_mb), at most 32 MiB, they are sent
  // early as a part of the clock's batch (docs/wire-protocol.md "Apply
  // parts"; docs/operations.md "What happens at each bound"). No semantics
  // change.
  // 0: the share of memory_mb, or 256 without a budget. Default: 0.
  size_t open_delta_mb = 0;
  // Bound on the deltas of sent, not yet acknowledged batches (kept so that
  // they can be re-sent after a reconnect), in MiB. A Clock() whose batch
  // takes them beyond it blocks until the shards' acknowledgements bring them
  // back within it (or until every batch is acknowledged, if one batch alone
  // is larger), so they exceed it by at most the batch being sent. Nothing
  // else changes: the read rule, read-my-writes and exact totals hold.
  // ClientStats reports all three. 0: the share of memory_mb, or 256
  // without a budget. Default: 0.
  size_t unacked_mb = 0;
  // How long to keep trying to connect at Open. Default: 10000.
  int64_t connect_timeout_ms = 10000;
  // A shard unreachable for longer than this makes Get/Clock return
  // Unavailable instead of blocking forever. A connection that goes silent
  // (link down, host gone) counts as lost after half of it (TCP keepalive and
  // TCP_USER_TIMEOUT), so such calls fail within ~1.5x. Default: 60000.
  int64_t shard_timeout_ms = 60000;
  // A shard's transient answer to a request (an Error the shard marks
  // retriable: too many parked reads, a failed read of its store, shutting
  // down) is not fatal: the request is sent again after a backoff that starts
  // at retry_backoff_min_ms and doubles up to retry_backoff_max_ms. A request
  // that keeps failing for shard_timeout_ms fails its shard with the last
  // error. Errors the shard does not mark retriable (unknown table, bad rows)
  // fail at once with the shard's message. Defaults: 1, 200.
  int64_t retry_backoff_min_ms = 1;
  int64_t retry_backoff_max_ms = 200;
  // In a one-client job, a table this process's CreateTable made has no row
  // with a record at any shard until this process sends a delta of it: the
  // first read of such a row is answered by the client with the table's
  // initializer (the value a shard's Read would return) instead of a Read.
  // This ends for the table once a row the process sent leaves its cache
  // (docs/design.md, "Rows of a table the process created"). No semantics
  // change; false reads every such row from its shard. Default: true.
  bool init_new_rows = true;
  // The library logs through glog (stderr unless the program configured
  // glog otherwise). At Open, a value >= 0 sets glog's minimum level for the
  // process: 0 INFO, 1 WARNING (the library's reconnects, retries and holdback
  // notices), 2 ERROR (only failures), 3 FATAL. -1: leave glog as the program
  // set it. Default: -1.
  int min_log_level = -1;
};

// A handle to a table. Cheap to copy. Valid while its Client lives.
class Table {
 public:
  Table() = default;
  const TableSchema& schema() const { return schema_; }
  uint32_t id() const { return schema_.id; }
  const std::string& name() const { return schema_.name; }
  bool valid() const { return schema_.id != 0; }

 private:
  friend class Client;
  friend class Worker;
  TableSchema schema_;
  void* impl_ = nullptr;  // owned by the Client
};

// A read-only view of a cached row, valid only inside a Worker::Read callback.
struct RowView {
  RowKind kind = RowKind::kDense;
  ElementType type = ElementType::kF32;
  uint32_t width = 0;
  // The row's bytes in the encoding of common/row.h (dense: width elements).
  std::string_view bytes;
  // The row's version v and the reading worker's clock c (staleness = c - v).
  Version version = 0;
  template <typename T>
  const T* dense() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
};

// Per-table measurements (docs/design.md, "The read rule": staleness c - v).
struct TableStats {
  std::string name;
  uint32_t staleness_bound = 0;
  // staleness_hist[k] = reads with staleness c - v == k, for k in [0, s];
  // staleness_hist[s + 1] = reads with staleness > s (only under async).
  std::vector<uint64_t> staleness_hist;
  double staleness_mean = 0;
  int64_t staleness_p99 = 0;
  uint64_t reads = 0;             // Get/Read calls
  uint64_t reads_cache_hit = 0;   // served from cache without waiting
  uint64_t reads_blocked = 0;     // had to wait for a fresh enough value
  uint64_t rows_fetched = 0;      // rows requested from shards
  uint64_t rows_initialized = 0;  // made by the client, no Read (init_new_rows)
  uint64_t pushes_applied = 0;    // rows refreshed by ESSP pushes
  uint64_t evictions = 0;
  uint64_t incs = 0;
};

struct ClientStats {
  std::vector<TableStats> tables;
  double get_blocked_seconds = 0;    // total time workers waited in Get/Read
  double clock_blocked_seconds = 0;  // total time workers waited in Clock/GlobalBarrier
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t rows_sent = 0;
  uint64_t rows_received = 0;
  uint64_t batches_sent = 0;
  uint64_t batches_resent = 0;  // re-sent after a reconnect
  // Requests sent again after a retriable shard error (ClientOptions::
  // retry_backoff_min_ms).
  uint64_t requests_retried = 0;
  // Memory, in bytes, against its bound (ClientOptions, as resolved from
  // memory_mb and the per-component options).
  uint64_t cache_bytes = 0;              // current cache size (values and entries)
  uint64_t cache_budget_bytes = 0;       // cache_mb
  uint64_t open_delta_bytes = 0;         // updates of clocks whose batch is not sent yet
  uint64_t open_delta_budget_bytes = 0;  // open_delta_mb
  uint64_t unacked_bytes = 0;            // deltas of sent batches waiting for their Ack
  uint64_t unacked_budget_bytes = 0;     // unacked_mb
  uint64_t memory_budget_bytes = 0;      // memory_mb (0: none)
  // A clock's open deltas leave early, as a part of its batch, once they
  // reach this (half of min(open_delta_mb, unacked_mb), at most 32 MiB): the
  // worker at the process clock keeps at most two parts' worth of them
  // besides the rows it leases (Worker::LeaseRows).
  uint64_t part_bytes = 0;
  // Parts sent before their clock completed (the rest of a clock leaves
  // with its last part, at the process clock's step).
  uint64_t parts_sent_early = 0;
  // Times an Inc waited for the open-delta bound (ClientOptions::open_delta_mb).
  uint64_t open_delta_waits = 0;
  // Every component, the client's and (embedded) the in-process shard's, with
  // its bound (0: unbounded or not configured). Names: "client.cache",
  // "client.open_deltas", "client.unacked", "client.spare_deltas" (without a
  // memory budget: buffers of sealed open deltas kept for the next ones),
  // "shard.block_cache",
  // "shard.block_cache_pinned", "shard.memtables", "shard.table_readers",
  // "shard.row_cache", "shard.write_batch", "shard.apply_batches" (docs/operations.md
  // "Metrics").
  struct MemoryComponent {
    std::string name;
    uint64_t bytes = 0;
    uint64_t bound_bytes = 0;
  };
  std::vector<MemoryComponent> memory;
};

// A client process that holds a shard clock back (Client::Laggards).
struct ClientLag {
  ClientId client = 0;
  // The least applied clock of this client over the shards it lags on (the
  // job cannot pass it until the client's batch for it arrives).
  ClockT applied = 0;
  // False if some shard it lags on has no connection from it now.
  bool connected = false;
};

class Worker;

class Client {
 public:
  // Connects to every shard (or starts the embedded shard) and learns this
  // process's applied clock from each. Errors: InvalidArgument for bad options,
  // Unavailable if a shard cannot be reached within connect_timeout_ms,
  // PermissionDenied for a wrong token, Incompatible for a wrong wire version.
  static Status Open(const ClientOptions& options, std::unique_ptr<Client>* client);

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  // Flushes nothing implicitly: call Flush() to wait for outstanding batches.
  ~Client();

  // Creates the table on every shard, or opens it if it exists with the same
  // schema (AlreadyExists if the name has another schema). schema.id is
  // ignored (assigned by shard 0).
  Status CreateTable(const TableSchema& schema, Table* table);
  // Opens an existing table. NotFound if unknown.
  Status OpenTable(std::string_view name, Table* table);
  Status ListTables(std::vector<TableSchema>* tables);

  // Registers the calling application thread as a worker. Its clock starts at
  // the process's resume clock (0 for a new job; min over shards of this
  // client's applied clock after a restart).
  Status RegisterWorker(std::unique_ptr<Worker>* worker);

  // The clock a new worker starts at (see RegisterWorker).
  ClockT start_clock() const;
  ClientId client_id() const;
  uint32_t num_clients() const;
  uint32_t num_shards() const;
  bool embedded() const;

  // Blocks until every batch sent so far is acknowledged by its shard.
  // Unavailable if a shard stays away longer than shard_timeout_ms; the
  // shard's error if one has failed (e.g. ResourceExhausted for a row that
  // cannot fit a frame: its batch was never sent).
  Status Flush();

  ClientStats Stats() const;
  // Zeroes the counters and histograms.
  void ResetStats();
  // Asks every shard for its clocks and connections and returns the client
  // processes that hold a shard clock back: on some shard, their applied
  // clock is the least while another client's is ahead. Empty when no shard
  // is held back. For telling a user what a blocked run waits for; one round
  // trip per shard. Thread-safe. Errors: a shard's health error.
  Status Laggards(std::vector<ClientLag>* laggards);
  // The job's clock: the least shard clock over the shards (every client's
  // updates of clocks < it are in every shard). One round trip per shard.
  // Thread-safe. Errors: a shard's health error.
  Status JobClock(Version* clock);
  // essp/async (pushed tables): the least version, over the shards, whose
  // push has completed here (its PushDone): every row this process is
  // subscribed to reads at least this version. 0 before the first push and
  // under bsp/ssp. For a worker that keeps copies of rows within a clock, a
  // growth says its copies are older than the cache. No round trip; cheap
  // (one atomic load per shard). Thread-safe.
  Version PushedVersion() const;

  class Impl;

 private:
  friend class Worker;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// An application thread's identity: its clock and its reads and updates.
// Not thread-safe: one thread uses a Worker at a time. Destroying a Worker
// deregisters it (the process clock no longer waits for it). When the last
// Worker is destroyed, the process clock moves to the highest clock any
// Worker reached, so every clock some Worker finished is sent; updates a
// Worker made at a clock it never finished with Clock() are sent only if
// another Worker finished that clock.
class Worker {
 public:
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  ClockT clock() const;

  // Dense reads into a caller buffer of width elements; T must match the
  // table's element type (InvalidArgument otherwise). Blocks until the read
  // rule holds. Includes every earlier Inc of this process.
  Status Get(const Table& t, uint64_t row, float* out);
  Status Get(const Table& t, uint64_t row, double* out);
  Status Get(const Table& t, uint64_t row, int32_t* out);
  Status Get(const Table& t, uint64_t row, int64_t* out);
  // Sparse reads (also accepted for dense tables: all columns).
  Status Get(const Table& t, uint64_t row, std::map<uint32_t, float>* out);
  Status Get(const Table& t, uint64_t row, std::map<uint32_t, double>* out);
  Status Get(const Table& t, uint64_t row, std::map<uint32_t, int32_t>* out);
  Status Get(const Table& t, uint64_t row, std::map<uint32_t, int64_t>* out);
  // Dense reads of many rows into a caller buffer: rows[i] into
  // out[i * width, (i + 1) * width). Each row as Get would read it (the read
  // rule, blocking for rows not fresh enough), faster for many rows: the
  // cache lookups of the rows overlap instead of waiting for each other, and
  // the rows not cached fresh are fetched with one Read per shard. For
  // hot loops that work on blocks of rows (e.g. the rows of a look-ahead
  // window that Prefetch requested earlier). Duplicates are fine.
  Status GetRows(const Table& t, const std::vector<uint64_t>& rows, float* out);
  Status GetRows(const Table& t, const std::vector<uint64_t>& rows, double* out);
  Status GetRows(const Table& t, const std::vector<uint64_t>& rows, int32_t* out);
  Status GetRows(const Table& t, const std::vector<uint64_t>& rows, int64_t* out);
  // Zero-copy accessor for hot loops: calls fn with a view of the cached row.
  // fn runs under a cache lock: it must be short and must not call back into
  // the client.
  Status Read(const Table& t, uint64_t row, const std::function<void(const RowView&)>& fn);

  // Rows this worker alone updates, updated where they are cached: no copy
  // in and no delta out (the fastest way for a hot loop over rows it owns,
  // as pace_mf's workers own their user rows). For each rows[i] of a dense
  // table: values[i] points to the row's cached value (width elements, read
  // only) and deltas[i] to this worker's delta of its current clock; the row
  // reads as values[i][k] + deltas[i][k], and the worker updates it by adding
  // to deltas[i][k], as Inc would. Blocks as GetRows does until every row is
  // fresh enough for the read rule. A row it cannot lease gets nullptr in
  // both: read and update it with GetRows / Inc as usual (another worker
  // leased it, or it holds an update of an earlier clock of this process not
  // sent yet). A worker ahead of the process clock leases nothing (it may
  // have to wait for the other workers, and must not hold rows they may be
  // waiting for meanwhile). Duplicates in `rows` get the same pointers.
  //
  // The leases add up over calls (a row this worker leased already gets the
  // same pointers again) and last until ReleaseRows(), Clock() or the
  // Worker's destruction; the pointers are invalid after. While a row is leased its value does not
  // change (a fresher value arriving is installed at the release) and is not
  // evicted, and its delta is not sent (a part of the clock sealed meanwhile
  // leaves it for a later part). Other workers' reads of a leased row wait
  // for the release; their updates of it fail with FailedPrecondition (a
  // leased row is its worker's alone), and so does a read that would wait
  // while its worker holds leases itself (two workers waiting for each
  // other's leases would never wake).
  // Errors: InvalidArgument for a sparse or vap table, or T not the table's
  // element type; as GetRows for the reads.
  Status LeaseRows(const Table& t, const std::vector<uint64_t>& rows, const float** values,
                   float** deltas);
  Status LeaseRows(const Table& t, const std::vector<uint64_t>& rows, const double** values,
                   double** deltas);
  Status LeaseRows(const Table& t, const std::vector<uint64_t>& rows, const int32_t** values,
                   int32_t** deltas);
  Status LeaseRows(const Table& t, const std::vector<uint64_t>& rows, const int64_t** values,
                   int64_t** deltas);
  // Ends this worker's leases (LeaseRows); a no-op without any.
  void ReleaseRows();
  // Ends this worker's `count` oldest leases (all if it holds fewer): the
  // rows are released in the order they were first leased, call by call (the
  // order within one call is the client's). With leased_rows() before and
  // after each LeaseRows call, a hot loop can keep a window of its latest
  // calls' rows leased and release the oldest call's as the window moves: a
  // row used again within the window is not leased again, and the rows
  // released become sendable a call's worth at a time.
  void ReleaseRows(size_t count);
  // The number of distinct rows this worker leases.
  size_t leased_rows() const;

  // Starts fetching rows this worker is about to read, without blocking. Rows
  // that are cached fresh enough for the worker's current clock, kept fresh by
  // pushes (essp, subscribed) or already being fetched are skipped; the rest
  // are requested with one Read per shard (subscribing under essp), so that
  // the later Gets hit the cache instead of paying one round trip each. Use it
  // as a look-ahead window: while computing, prefetch the rows of the next
  // part of the clock's work (pace_mf: the next 256..8192 ratings), so that
  // fetching overlaps computing; on the first clock after start or resume
  // every row is a miss, under ssp/bsp stale rows are pulled, never pushed,
  // and under essp rows the process has not read yet are misses. Prefetched
  // rows not read yet are evicted after other rows (three more passes of the
  // CLOCK hand), so keep the window well within the cache budget
  // (ClientStats::cache_budget_bytes); rows beyond it may still be evicted
  // before they are read. Duplicates in `rows` are fine. A pushed table this
  // process created in a one-client job, while its rows are local to it
  // (docs/design.md, "Rows of a table the process created"), has nothing to
  // fetch unless this worker is ahead of the process clock by more than the
  // bound: the call then returns at once.
  // Errors: NotFound/InvalidArgument for a bad table handle; a shard's health
  // error (Unavailable if it has been unreachable for shard_timeout_ms, or
  // the error that failed it): its rows are skipped, the other shards' rows
  // are still requested.
  Status Prefetch(const Table& t, const std::vector<uint64_t>& rows);

  // A hint for rows read as a stream (e.g. in key order, each once per
  // clock, as pace_mf reads user rows when the model is larger than the
  // cache): this worker will not read them again soon, so the cache evicts
  // them before any row read since, and rows read often (a model's hot rows)
  // stay cached. The rows stay readable (a later read may fetch them again)
  // and their deltas are kept as always. Rows not cached are skipped.
  // Errors: NotFound/InvalidArgument for a bad table handle.
  Status EvictFirst(const Table& t, const std::vector<uint64_t>& rows);

  // Dense additive updates of width elements.
  Status Inc(const Table& t, uint64_t row, const float* delta);
  Status Inc(const Table& t, uint64_t row, const double* delta);
  Status Inc(const Table& t, uint64_t row, const int32_t* delta);
  Status Inc(const Table& t, uint64_t row, const int64_t* delta);
  // Dense updates of many rows: deltas[i * width, (i + 1) * width) is added to
  // rows[i] (duplicates add up). The same as one Inc per row, faster for many
  // rows: the cache lookups of consecutive rows overlap instead of waiting
  // for each other. `deltas` holds rows.size() * width elements.
  Status Inc(const Table& t, const std::vector<uint64_t>& rows, const float* deltas);
  Status Inc(const Table& t, const std::vector<uint64_t>& rows, const double* deltas);
  Status Inc(const Table& t, const std::vector<uint64_t>& rows, const int32_t* deltas);
  Status Inc(const Table& t, const std::vector<uint64_t>& rows, const int64_t* deltas);
  // Dense updates of many rows given as their changed copies: adds
  // current[i] - base[i] (element by element; width each) to rows[i], e.g. a
  // worker's copies of rows read with GetRows into `base` and updated in
  // `current`. The same as computing the deltas into an array and calling
  // Inc(t, rows, deltas), in one pass over the rows. Rows that did not change
  // are updated by zero.
  Status IncDiff(const Table& t, const std::vector<uint64_t>& rows, const float* current,
                 const float* base);
  Status IncDiff(const Table& t, const std::vector<uint64_t>& rows, const double* current,
                 const double* base);
  Status IncDiff(const Table& t, const std::vector<uint64_t>& rows, const int32_t* current,
                 const int32_t* base);
  Status IncDiff(const Table& t, const std::vector<uint64_t>& rows, const int64_t* current,
                 const int64_t* base);
  // Inc(t, rows, deltas) and then GetRows(t, rows, out), in one pass: each
  // row's cache entry is looked up once and read right after its update (a
  // read-modify-write of optimizer state, e.g. Adagrad's accumulators, whose
  // new value the step needs). Every row is read after all of the call's
  // deltas (duplicates read the row with all of theirs). `out` holds
  // rows.size() * width elements.
  Status IncGetRows(const Table& t, const std::vector<uint64_t>& rows, const float* deltas,
                    float* out);
  Status IncGetRows(const Table& t, const std::vector<uint64_t>& rows, const double* deltas,
                    double* out);
  Status IncGetRows(const Table& t, const std::vector<uint64_t>& rows, const int32_t* deltas,
                    int32_t* out);
  Status IncGetRows(const Table& t, const std::vector<uint64_t>& rows, const int64_t* deltas,
                    int64_t* out);
  // One cell (dense or sparse tables). The value is converted to the table's type.
  Status IncCell(const Table& t, uint64_t row, uint32_t col, double value);
  // Sparse updates: (column, delta) pairs, any order, duplicates summed.
  Status Inc(const Table& t, uint64_t row, const std::vector<std::pair<uint32_t, float>>& delta);
  Status Inc(const Table& t, uint64_t row, const std::vector<std::pair<uint32_t, double>>& delta);
  Status Inc(const Table& t, uint64_t row, const std::vector<std::pair<uint32_t, int32_t>>& delta);
  Status Inc(const Table& t, uint64_t row, const std::vector<std::pair<uint32_t, int64_t>>& delta);
  // Many rows at once: deltas in the encoding of common/row.h, one per row.
  Status BatchInc(const Table& t, const std::vector<uint64_t>& rows,
                  const std::vector<std::string>& encoded_deltas);

  // Ends this worker's current clock. When the process clock (min over its
  // workers) advances, the process's coalesced updates go to the shards.
  // With vap tables, then waits while some vap row's updates in flight (sent,
  // not yet acknowledged) exceed its table's value bound.
  // Errors: Unavailable if a shard has been unreachable for shard_timeout_ms.
  Status Clock();
  // Blocks until every shard has applied every client's updates of all clocks
  // before this worker's current clock (all processes reached it).
  Status GlobalBarrier();

  class Impl;

 private:
  friend class Client;
  explicit Worker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Fills options.client_id / num_clients from a launcher's environment
// (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SLURM_PROCID/NTASKS) if present.
// Returns true if one was found.
bool ClientIdFromEnvironment(ClientOptions* options);

// Fills the memory components of `options` left at 0 (cache_mb,
// open_delta_mb, unacked_mb and, embedded, the in-process shard's
// memory_mb, block_cache_mb, write_buffer_mb, row_cache_mb) from memory_mb
// by the documented shares (common/memory_budget.h), or with their defaults
// when memory_mb is 0. Nonzero components are kept. Client::Open does this;
// call it to see the split before opening. Idempotent.
void ResolveMemoryBudget(ClientOptions* options);

// Parses "host:port,host:port" into options->servers (InvalidArgument on a bad entry).
Status ParseServers(std::string_view list, ClientOptions* options);

}  // namespace pace

#endif  // PACE_CLIENT_PACE_H_
