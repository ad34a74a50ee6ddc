// The messages of the generic versioned key-value protocol, as plain C++
// values. net/codec.h turns them into FlatBuffers frames and back (schema in
// net/schema/pace.fbs, documented in docs/wire-protocol.md); everything above
// net/ (server/, client/, tools/) speaks these structs only.
//
// Semantics: docs/design.md, "Semantics", and docs/wire-protocol.md. Values are plain data:
// thread-compatible.
#ifndef PACE_NET_MESSAGES_H_
#define PACE_NET_MESSAGES_H_

#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/byte_arena.h"
#include "common/clock.h"
#include "common/schema.h"
#include "common/status.h"

namespace pace::net {

// Bumped when a change is not wire compatible. Fields are only appended.
inline constexpr uint32_t kWireVersion = 1;

// One row: a value (in replies and pushes) or an additive delta (in Apply).
// `bytes` uses the row encoding of common/row.h.
struct RowData {
  uint32_t table = 0;
  uint64_t row = 0;
  std::string bytes;
  // ReadReply and Push only, to a client whose Hello has kAbsentRows: the
  // row has no record at the shard in the state the message was read from
  // (never written), so its value is its table's initializer (InitRow,
  // common/row.h), which the receiver computes. `bytes` is then empty.
  bool absent = false;
};

// Client → shard, first frame on every connection.
struct Hello {
  uint32_t wire_version = kWireVersion;
  ClientId client_id = 0;
  std::string token;
  // kClientProcess for a training client (counts toward the shard clock); a
  // tool such as pacectl connects as kObserver and may not Apply.
  enum Role : uint8_t { kClientProcess = 0, kObserver = 1 };
  Role role = kClientProcess;
  // Random per client process (nonzero; 0 = unknown, e.g. an older client).
  // A shard holds one live session per client id: a Hello with the live
  // session's incarnation replaces it (a reconnect of the same process), any
  // other is refused (docs/wire-protocol.md).
  uint64_t incarnation = 0;
  // The client's job id ("" = not known yet: its first shard tells it); a
  // shard of another job refuses the Hello.
  std::string job{};
  // What the client accepts beyond the messages of wire version 1, as bits
  // (0: nothing, e.g. an older client or a tool). kAbsentRows: read replies
  // may carry rows as RowData::absent.
  static constexpr uint32_t kAbsentRows = 1;
  uint32_t features = 0;
};

// Shard → client, reply to a valid Hello.
struct Welcome {
  uint32_t wire_version = kWireVersion;
  uint32_t shard_id = 0;
  uint32_t num_shards = 1;
  uint32_t num_clients = 1;
  ClockT applied_clock = 0;  // this client's applied clock a_p at this shard
  Version shard_clock = 0;
  // Parts of clock applied_clock applied (a partial Apply in progress).
  uint32_t applied_parts = 0;
  std::string job{};  // the job of the shard's store ("" = an older shard)
  // The largest frame payload the shard accepts (0: not said, an older
  // shard). A client cuts its Apply batches to fit it (docs/wire-protocol.md,
  // "Frame limits").
  uint32_t max_frame_bytes = 0;
};

// Client → shard. Answered with a ReadReply once the shard clock is at least
// `min_version` (parked until then). With `subscribe`, the shard also adds the
// rows to this client's push subscriptions (ESSP).
struct Read {
  uint64_t req_id = 0;
  uint32_t table = 0;
  std::vector<uint64_t> rows;
  Version min_version = 0;
  bool subscribe = false;
};

// Shard → client. `version` is the shard clock when the values were read;
// `applied_clock` is the receiving client's a_p at that moment (a_p >= version)
// and `applied_parts` the parts of its clock a_p the values already hold.
struct ReadReply {
  uint64_t req_id = 0;
  Version version = 0;
  ClockT applied_clock = 0;
  std::vector<RowData> rows;
  uint32_t applied_parts = 0;
};

// Client → shard: the client's coalesced deltas for clock `clock` (may be
// empty), or part `part` of them (docs/wire-protocol.md, "Apply parts"):
// `more` says parts of this clock follow; the part with more = false
// completes the clock at the shard.
//
// The rows' bytes are views into `backing`, shared: a client seals a part's
// deltas once into an arena that its oplog (kept for rebases and re-sends
// until the Ack) and the message both point into, an in-process shard reads
// them from there, and a decoded frame's deltas are one copy of the frame's
// bytes. No string per row.
struct DeltaRow {
  uint32_t table = 0;
  uint64_t row = 0;
  std::string_view bytes;  // into the Apply's backing
};
struct Apply {
  Apply() = default;
  // With the rows' bytes copied into an arena of the message's own.
  Apply(ClockT clock_, const std::vector<RowData>& rows, uint32_t part_ = 0, bool more_ = false)
      : clock(clock_), part(part_), more(more_) {
    updates.reserve(rows.size());
    for (const RowData& r : rows) Add(r.table, r.row, r.bytes);
  }

  ClockT clock = 0;
  std::vector<DeltaRow> updates;
  uint32_t part = 0;
  bool more = false;
  // Holds every update's bytes (may hold more). Copies of the message share it.
  std::shared_ptr<const ByteArena> backing;

  // Appends a row whose bytes are copied into an arena of this message's own
  // (for tests and tools; a client's sealed batch points into its arena).
  void Add(uint32_t table, uint64_t row, std::string_view bytes) {
    if (own_ == nullptr) {
      own_ = std::make_shared<ByteArena>();
      extra_ = backing;  // what the views so far point into
      backing = own_;
    }
    updates.push_back(DeltaRow{table, row, own_->Add(bytes)});
  }
  // Appends to *out what the updates' bytes point into (backing, and an
  // arena Add replaced), for a holder that outlives the message (a frame
  // that gathers them). Nothing when the message has no backing.
  void HoldersOfBytes(std::vector<std::shared_ptr<const void>>* out) const {
    if (backing != nullptr) out->push_back(backing);
    if (extra_ != nullptr) out->push_back(extra_);
  }

 private:
  std::shared_ptr<ByteArena> own_;          // Add's arena (== backing once set)
  std::shared_ptr<const ByteArena> extra_;  // a backing Add replaced
};

// Shard → client: batch (clock, part) is durable (duplicate: it had been
// applied before and was skipped now).
struct Ack {
  ClockT clock = 0;
  bool duplicate = false;
  uint32_t part = 0;
};

// Shard → subscriber: fresh values of subscribed rows that changed, stamped
// `version`; `applied_clock` and `applied_parts` as in ReadReply.
struct Push {
  Version version = 0;
  ClockT applied_clock = 0;
  std::vector<RowData> rows;
  uint32_t applied_parts = 0;
};

// Shard → subscriber: every subscribed row on this shard is current as of
// `version` (rows not in the preceding Push did not change).
struct PushDone {
  Version version = 0;
  ClockT applied_clock = 0;
};

// Client → shard: stop pushing these rows (evicted from the client cache).
struct Unsubscribe {
  uint32_t table = 0;
  std::vector<uint64_t> rows;
};

// Client → shard. Idempotent: creating a table whose name exists with the same
// schema returns it. `schema.id` 0 lets the shard assign the id (shard 0 does
// this); a nonzero id is used as given (the client copies shard 0's choice to
// the other shards).
struct CreateTable {
  uint64_t req_id = 0;
  TableSchema schema;
};

struct ListTables {
  uint64_t req_id = 0;
};

struct DescribeTable {
  uint64_t req_id = 0;
  std::string name;
};

// Reply to CreateTable, ListTables and DescribeTable.
struct TablesReply {
  uint64_t req_id = 0;
  std::vector<TableSchema> tables;
  // Only in a CreateTable reply: this request made the table (no row of it
  // has a record yet).
  bool created = false;
};

struct StatsRequest {
  uint64_t req_id = 0;
};

struct StatsReply {
  uint64_t req_id = 0;
  uint32_t shard_id = 0;
  Version shard_clock = 0;
  std::vector<ClockT> applied_clocks;  // indexed by client id
  // Free-form counters (name, value), e.g. "batches_applied", "rows_pushed".
  std::vector<std::pair<std::string, int64_t>> counters;
  // The client processes connected now (ids, increasing): with
  // applied_clocks, who holds the shard clock back and whether it is there.
  std::vector<uint32_t> connected_clients;
};

// Either direction. `req_id` names the request it answers (0: none, e.g. a
// refused Hello or a bad frame). After an Error for a bad frame the sender
// closes the connection. `retriable`: the shard says the condition is
// transient (too many parked reads, a failed read of its store, shutting
// down): the same request may succeed later. Otherwise the request itself is
// at fault (unknown table, bad rows) and sending it again cannot help.
struct Error {
  uint64_t req_id = 0;
  StatusCode code = StatusCode::kInternal;
  std::string message;
  bool retriable = false;

  Status ToStatus() const { return Status(code, message); }
};

using Message = std::variant<Hello, Welcome, Read, ReadReply, Apply, Ack, Push, PushDone,
                             Unsubscribe, CreateTable, ListTables, DescribeTable, TablesReply,
                             StatsRequest, StatsReply, Error>;

// An upper bound on the encoded payload (padding included) of an Apply,
// ReadReply or Push (net/codec.h): kRowsMessageBytes, plus kRowBytes (its
// RowRef) and the row bytes per row. A sender that keeps this within the
// peer's frame limit never has the message refused for its size
// (docs/wire-protocol.md, "Frame limits"). Inline, like MessageName.
inline constexpr uint64_t kRowsMessageBytes = 256;
inline constexpr uint64_t kRowBytes = 16;
inline constexpr uint64_t RowsMessageBytes(uint64_t rows, uint64_t row_bytes) {
  return kRowsMessageBytes + rows * kRowBytes + row_bytes;
}

// A short name for logs, e.g. "Apply". Inline, so layers that only hold
// messages (server/) need not link the codec.
inline const char* MessageName(const Message& m) {
  static constexpr const char* kNames[] = {
      "Hello",       "Welcome",      "Read",        "ReadReply",   "Apply",      "Ack",
      "Push",        "PushDone",     "Unsubscribe", "CreateTable", "ListTables", "DescribeTable",
      "TablesReply", "StatsRequest", "StatsReply",  "Error"};
  static_assert(std::size(kNames) == std::variant_size_v<Message>,
                "kNames must list every Message alternative");
  return kNames[m.index()];
}

}  // namespace pace::net

#endif  // PACE_NET_MESSAGES_H_
