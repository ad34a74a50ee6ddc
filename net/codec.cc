#include "net/codec.h"

#include <cstddef>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "common/schema.h"
#include "net/schema/pace_generated.h"

namespace pace::net {
namespace {

namespace fb = ::pace::net::fb;
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

static_assert(std::variant_size_v<Message> == fb::Body_MAX,
              "every Message alternative needs a union member in pace.fbs");

// Message alternative i travels as union type i + 1 (0 is NONE).
template <typename FbT>
using StructOf = std::variant_alternative_t<fb::BodyTraits<FbT>::enum_value - 1, Message>;

// A built body and its union type.
struct Body {
  fb::Body type;
  Offset<void> offset;
};

template <typename FbT>
Body MakeBody(Offset<FbT> offset) {
  return Body{fb::BodyTraits<FbT>::enum_value, offset.Union()};
}

// ---------------------------------------------------------------------------
// Encoding

bool KnownRowKind(RowKind k) { return RowKindName(k) != "?"; }
bool KnownElementType(ElementType t) { return ElementTypeName(t) != "?"; }
bool KnownConsistency(Consistency c) { return ConsistencyName(c) != "?"; }
bool KnownInitKind(InitKind k) { return InitKindName(k) != "?"; }
bool KnownRole(Hello::Role r) { return r == Hello::kClientProcess || r == Hello::kObserver; }

// First pass over a message: rejects values that cannot be sent and
// estimates the encoded size (to size the builder once).
bool IsAbsent(const RowData& r) { return r.absent; }
bool IsAbsent(const DeltaRow&) { return false; }  // a delta cannot be absent

class SizeCheck {
 public:
  Status status;
  size_t bytes = 64;

  void operator()(const Hello& m) {
    bytes += 32 + m.token.size() + m.job.size();
    if (!KnownRole(m.role)) Fail("Hello.role");
  }
  void operator()(const Welcome& m) { bytes += 64 + m.job.size(); }
  void operator()(const Read& m) { bytes += 48 + 8 * m.rows.size(); }
  void operator()(const ReadReply& m) { Rows(m.rows); }
  void operator()(const Apply& m) { Rows(m.updates); }
  void operator()(const Ack&) { bytes += 24; }
  void operator()(const Push& m) { Rows(m.rows); }
  void operator()(const PushDone&) { bytes += 24; }
  void operator()(const Unsubscribe& m) { bytes += 24 + 8 * m.rows.size(); }
  void operator()(const CreateTable& m) { Schema(m.schema); }
  void operator()(const ListTables&) { bytes += 16; }
  void operator()(const DescribeTable& m) { bytes += 24 + m.name.size(); }
  void operator()(const TablesReply& m) {
    for (const TableSchema& s : m.tables) Schema(s);
  }
  void operator()(const StatsRequest&) { bytes += 16; }
  void operator()(const StatsReply& m) {
    bytes += 48 + 8 * m.applied_clocks.size();
    for (const auto& c : m.counters) bytes += 32 + c.first.size();
  }
  void operator()(const Error& m) {
    bytes += 32 + m.message.size();
    if (!IsKnownStatusCode(static_cast<uint8_t>(m.code)) || m.code == StatusCode::kOk) {
      Fail("Error.code");
    }
  }

 private:
  void Fail(const char* field) {
    if (status.ok())
      status =
          Status::InvalidArgument(std::string("cannot encode ") + field + ": value out of range");
  }
  template <typename Row>  // RowData or DeltaRow
  void Rows(const std::vector<Row>& rows) {
    bytes += 64 + (sizeof(fb::RowRef) + 1) * rows.size();
    for (const Row& r : rows) {
      if (r.bytes.size() > UINT32_MAX) Fail("RowData.bytes (longer than 4 GiB)");
      if (IsAbsent(r) && !r.bytes.empty()) Fail("RowData.bytes (an absent row has none)");
      bytes += r.bytes.size();
    }
  }
  void Schema(const TableSchema& s) {
    bytes += 128 + s.name.size();
    if (!KnownRowKind(s.kind)) Fail("TableSchema.kind");
    if (!KnownElementType(s.type)) Fail("TableSchema.type");
    if (!KnownConsistency(s.consistency)) Fail("TableSchema.consistency");
    if (!KnownInitKind(s.init.kind)) Fail("TableSchema.init.kind");
  }
};

Offset<flatbuffers::String> Str(FlatBufferBuilder& b, const std::string& s) {
  return b.CreateString(s.data(), s.size());
}

// Rows' bytes left out of the builder's buffer, to be written from where
// they are (EncodedFrame): the stretch of the buffer their data vector
// reserves, as a distance from the buffer's end (which does not move while
// the builder grows downwards), the runs of contiguous bytes that fill it,
// and what keeps those bytes alive.
struct GatheredRows {
  size_t from_end = 0;
  size_t bytes = 0;
  std::vector<std::string_view> runs;
  std::vector<std::shared_ptr<const void>> holders;
};

// The rows' bytes as runs of contiguous memory (a sealed part's deltas lie one
// after another in its arena's chunks: a run per chunk).
template <typename Row>
void RunsOf(const std::vector<Row>& rows, std::vector<std::string_view>* runs) {
  const char* start = nullptr;
  size_t n = 0;
  for (const Row& r : rows) {
    if (r.bytes.empty()) continue;
    if (start != nullptr && start + n == r.bytes.data()) {
      n += r.bytes.size();
      continue;
    }
    if (n != 0) runs->emplace_back(start, n);
    start = r.bytes.data();
    n = r.bytes.size();
  }
  if (n != 0) runs->emplace_back(start, n);
}

// With `gather` (the rows' bytes stay alive as long as the frame), rows of
// kGatherRowBytes or more are not copied: *gather says where they go.
template <typename Row>  // RowData or DeltaRow
Offset<fb::Rows> EncodeRows(FlatBufferBuilder& b, const std::vector<Row>& rows,
                            GatheredRows* gather = nullptr) {
  size_t total = 0;
  for (const Row& r : rows) total += r.bytes.size();
  uint8_t* data = nullptr;
  auto data_off = b.CreateUninitializedVector<uint8_t>(total, &data);
  if (gather != nullptr && total >= kGatherRowBytes) {
    gather->from_end = static_cast<size_t>(b.GetBufferPointer() + b.GetSize() - data);
    gather->bytes = total;
    RunsOf(rows, &gather->runs);
  } else {
    for (const Row& r : rows) {
      if (!r.bytes.empty()) std::memcpy(data, r.bytes.data(), r.bytes.size());
      data += r.bytes.size();
    }
  }
  fb::RowRef* refs = nullptr;
  auto refs_off = b.CreateUninitializedVectorOfStructs<fb::RowRef>(rows.size(), &refs);
  bool any_absent = false;
  for (const Row& r : rows) {
    *refs++ = fb::RowRef(r.row, r.table, static_cast<uint32_t>(r.bytes.size()));
    any_absent = any_absent || IsAbsent(r);
  }
  Offset<flatbuffers::Vector<uint8_t>> absent_off;
  if (any_absent) {
    uint8_t* flags = nullptr;
    absent_off = b.CreateUninitializedVector<uint8_t>(rows.size(), &flags);
    for (const Row& r : rows) *flags++ = IsAbsent(r) ? 1 : 0;
  }
  return fb::CreateRows(b, refs_off, data_off, absent_off);
}

Offset<fb::TableSchema> EncodeSchema(FlatBufferBuilder& b, const TableSchema& s) {
  auto name = Str(b, s.name);
  return fb::CreateTableSchema(
      b, s.id, name, static_cast<fb::RowKind>(s.kind), static_cast<fb::ElementType>(s.type),
      s.width, static_cast<fb::Consistency>(s.consistency), s.staleness,
      static_cast<fb::InitKind>(s.init.kind), s.init.a, s.init.b, s.init.seed, s.value_bound);
}

// Second pass: builds the body table. Each overload returns its offset.
struct BodyEncoder {
  FlatBufferBuilder& b;
  GatheredRows* gather = nullptr;  // an Apply with a backing gathers its rows here

  Body operator()(const Hello& m) {
    auto token = Str(b, m.token);
    auto job = m.job.empty() ? Offset<flatbuffers::String>() : Str(b, m.job);
    return MakeBody(fb::CreateHello(b, m.wire_version, m.client_id, token,
                                    static_cast<fb::Role>(m.role), m.incarnation, job, m.features));
  }
  Body operator()(const Welcome& m) {
    auto job = m.job.empty() ? Offset<flatbuffers::String>() : Str(b, m.job);
    return MakeBody(fb::CreateWelcome(b, m.wire_version, m.shard_id, m.num_shards, m.num_clients,
                                      m.applied_clock, m.shard_clock, m.applied_parts, job,
                                      m.max_frame_bytes));
  }
  Body operator()(const Read& m) {
    auto rows = b.CreateVector(m.rows);
    return MakeBody(fb::CreateRead(b, m.req_id, m.table, rows, m.min_version, m.subscribe));
  }
  Body operator()(const ReadReply& m) {
    auto rows = EncodeRows(b, m.rows);
    return MakeBody(
        fb::CreateReadReply(b, m.req_id, m.version, m.applied_clock, rows, m.applied_parts));
  }
  Body operator()(const Apply& m) {
    auto rows = EncodeRows(b, m.updates, m.backing != nullptr ? gather : nullptr);
    if (gather != nullptr && gather->bytes != 0) m.HoldersOfBytes(&gather->holders);
    return MakeBody(fb::CreateApply(b, m.clock, rows, m.part, m.more));
  }
  Body operator()(const Ack& m) { return MakeBody(fb::CreateAck(b, m.clock, m.duplicate, m.part)); }
  Body operator()(const Push& m) {
    auto rows = EncodeRows(b, m.rows);
    return MakeBody(fb::CreatePush(b, m.version, m.applied_clock, rows, m.applied_parts));
  }
  Body operator()(const PushDone& m) {
    return MakeBody(fb::CreatePushDone(b, m.version, m.applied_clock));
  }
  Body operator()(const Unsubscribe& m) {
    auto rows = b.CreateVector(m.rows);
    return MakeBody(fb::CreateUnsubscribe(b, m.table, rows));
  }
  Body operator()(const CreateTable& m) {
    auto schema = EncodeSchema(b, m.schema);
    return MakeBody(fb::CreateCreateTable(b, m.req_id, schema));
  }
  Body operator()(const ListTables& m) { return MakeBody(fb::CreateListTables(b, m.req_id)); }
  Body operator()(const DescribeTable& m) {
    auto name = Str(b, m.name);
    return MakeBody(fb::CreateDescribeTable(b, m.req_id, name));
  }
  Body operator()(const TablesReply& m) {
    std::vector<Offset<fb::TableSchema>> tables;
    tables.reserve(m.tables.size());
    for (const TableSchema& s : m.tables) tables.push_back(EncodeSchema(b, s));
    auto vec = b.CreateVector(tables);
    return MakeBody(fb::CreateTablesReply(b, m.req_id, vec, m.created));
  }
  Body operator()(const StatsRequest& m) { return MakeBody(fb::CreateStatsRequest(b, m.req_id)); }
  Body operator()(const StatsReply& m) {
    auto clocks = b.CreateVector(m.applied_clocks);
    std::vector<Offset<fb::Counter>> counters;
    counters.reserve(m.counters.size());
    for (const auto& c : m.counters) {
      auto name = Str(b, c.first);
      counters.push_back(fb::CreateCounter(b, name, c.second));
    }
    auto vec = b.CreateVector(counters);
    auto connected = b.CreateVector(m.connected_clients);
    return MakeBody(
        fb::CreateStatsReply(b, m.req_id, m.shard_id, m.shard_clock, clocks, vec, connected));
  }
  Body operator()(const Error& m) {
    auto message = Str(b, m.message);
    return MakeBody(
        fb::CreateError(b, m.req_id, static_cast<fb::StatusCode>(m.code), message, m.retriable));
  }
};

// Serves the builder's buffer from a FrameBufferPool block (or a plain block
// without a pool), placed at the block's end: the builder grows downwards, so
// the bytes a frame touches are always the block's tail, which stays mapped
// from one use of the block to the next. Not thread-safe; one per encode.
class BlockAllocator : public flatbuffers::Allocator {
 public:
  explicit BlockAllocator(FrameBufferPool* pool) : pool_(pool) {}
  ~BlockAllocator() override {
    for (const Live& l : live_) Give(l.block);
  }

  uint8_t* allocate(size_t size) override {
    FrameBufferPool::Block block =
        pool_ != nullptr ? pool_->Acquire(size) : FrameBufferPool::Block{new char[size], size};
    uint8_t* p = reinterpret_cast<uint8_t*>(block.data + block.capacity - size);
    live_.push_back(Live{block, p});
    return p;
  }

  void deallocate(uint8_t* p, size_t) override {
    for (size_t i = 0; i < live_.size(); ++i) {
      if (live_[i].start == p) {
        Give(live_[i].block);
        live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
        return;
      }
    }
  }

  // Hands the block holding `p` (returned by allocate) to the caller.
  FrameBufferPool::Block Take(uint8_t* p) {
    for (size_t i = 0; i < live_.size(); ++i) {
      if (live_[i].start == p) {
        FrameBufferPool::Block block = live_[i].block;
        live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
        return block;
      }
    }
    return FrameBufferPool::Block();
  }

 private:
  struct Live {
    FrameBufferPool::Block block;
    uint8_t* start;
  };
  void Give(FrameBufferPool::Block block) {
    if (pool_ != nullptr) {
      pool_->Release(block);
    } else {
      FrameBufferPool::Free(block);
    }
  }

  FrameBufferPool* const pool_;
  std::vector<Live> live_;
};

// ---------------------------------------------------------------------------
// Decoding

Status Bad(const std::string& what) { return Status::Corruption("bad wire message: " + what); }

template <typename E>
Status DecodeEnum(uint8_t raw, std::string_view (*name)(E), const char* field, E* out) {
  E v = static_cast<E>(raw);
  if (name(v) == "?") return Bad(std::string(field) + " has unknown value " + std::to_string(raw));
  *out = v;
  return Status::OK();
}

std::string ToString(const flatbuffers::String* s) {
  return s == nullptr ? std::string() : std::string(s->data(), s->size());
}

// The verifier checks vector starts for 4-byte alignment only, so vectors of
// 8-byte elements are read with memcpy, never through typed pointers.
template <typename T>
void CopyVector(const flatbuffers::Vector<T>* v, std::vector<T>* out) {
  out->clear();
  if (v == nullptr || v->size() == 0) return;
  out->resize(v->size());
  std::memcpy(out->data(), v->Data(), v->size() * sizeof(T));
}

fb::RowRef LoadRowRef(const flatbuffers::Vector<const fb::RowRef*>& refs, size_t i) {
  fb::RowRef ref;
  std::memcpy(static_cast<void*>(&ref), refs.Data() + i * sizeof(fb::RowRef), sizeof(ref));
  return ref;
}

// Rows.absent: none, or one flag per ref; a flagged row carries no bytes, and
// only values (ReadReply, Push) may be absent, never deltas.
Status CheckAbsent(const fb::Rows& rows, const char* field, bool allow_absent) {
  const auto* absent = rows.absent();
  if (absent == nullptr || absent->size() == 0) return Status::OK();
  const size_t n = rows.refs() == nullptr ? 0 : rows.refs()->size();
  if (absent->size() != n) {
    return Bad(std::string(field) + ": " + std::to_string(absent->size()) + " absent flags for " +
               std::to_string(n) + " rows");
  }
  for (size_t i = 0; i < n; ++i) {
    if (absent->Get(i) == 0) continue;
    const fb::RowRef ref = LoadRowRef(*rows.refs(), i);
    const std::string what = std::string(field) + ": row " + std::to_string(ref.table()) + "/" +
                             std::to_string(ref.row()) + " is marked absent";
    if (!allow_absent) return Bad(what + ", which a delta cannot be");
    if (ref.size() != 0) {
      return Bad(what + " (no record) but carries " + std::to_string(ref.size()) + " bytes");
    }
  }
  return Status::OK();
}

// The rows' sizes add up to the block of bytes that holds them.
Status CheckRowSizes(const fb::Rows& rows, const char* field) {
  const auto* refs = rows.refs();
  const size_t n = refs == nullptr ? 0 : refs->size();
  const size_t data_size = rows.data() == nullptr ? 0 : rows.data()->size();
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) total += LoadRowRef(*refs, i).size();
  if (total != data_size) {
    return Bad(std::string(field) + ": row sizes add up to " + std::to_string(total) +
               " bytes but the block holds " + std::to_string(data_size));
  }
  return Status::OK();
}

Status DecodeRows(const fb::Rows* rows, const char* field, std::vector<RowData>* out,
                  bool allow_absent = true) {
  out->clear();
  if (rows == nullptr) return Status::OK();
  RETURN_IF_ERROR(CheckAbsent(*rows, field, allow_absent));
  const auto* refs = rows->refs();
  const auto* data = rows->data();
  const auto* absent = rows->absent();
  const bool flags = absent != nullptr && absent->size() > 0;
  size_t n = refs == nullptr ? 0 : refs->size();
  size_t data_size = data == nullptr ? 0 : data->size();
  RETURN_IF_ERROR(CheckRowSizes(*rows, field));
  out->resize(n);
  const char* p = data_size == 0 ? nullptr : reinterpret_cast<const char*>(data->data());
  for (size_t i = 0; i < n; ++i) {
    fb::RowRef ref = LoadRowRef(*refs, i);
    RowData& r = (*out)[i];
    r.table = ref.table();
    r.row = ref.row();
    r.absent = flags && absent->Get(i) != 0;
    if (ref.size() > 0) {
      r.bytes.assign(p, ref.size());
      p += ref.size();
    }
  }
  return Status::OK();
}

Status DecodeSchema(const fb::TableSchema* s, TableSchema* out) {
  out->id = s->id();
  out->name = ToString(s->name());
  RETURN_IF_ERROR(DecodeEnum(s->kind(), RowKindName, "TableSchema.kind", &out->kind));
  RETURN_IF_ERROR(DecodeEnum(s->type(), ElementTypeName, "TableSchema.type", &out->type));
  out->width = s->width();
  RETURN_IF_ERROR(
      DecodeEnum(s->consistency(), ConsistencyName, "TableSchema.consistency", &out->consistency));
  out->staleness = s->staleness();
  RETURN_IF_ERROR(
      DecodeEnum(s->init_kind(), InitKindName, "TableSchema.init_kind", &out->init.kind));
  out->init.a = s->init_a();
  out->init.b = s->init_b();
  out->init.seed = s->init_seed();
  out->value_bound = s->value_bound();
  return Status::OK();
}

Status Decode(const fb::Hello& t, Hello* m) {
  m->wire_version = t.wire_version();
  m->client_id = t.client_id();
  m->token = ToString(t.token());
  uint8_t role = t.role();
  if (role != Hello::kClientProcess && role != Hello::kObserver) {
    return Bad("Hello.role has unknown value " + std::to_string(role));
  }
  m->role = static_cast<Hello::Role>(role);
  m->incarnation = t.incarnation();
  m->job = ToString(t.job());
  m->features = t.features();
  return Status::OK();
}

Status Decode(const fb::Welcome& t, Welcome* m) {
  m->wire_version = t.wire_version();
  m->shard_id = t.shard_id();
  m->num_shards = t.num_shards();
  m->num_clients = t.num_clients();
  m->applied_clock = t.applied_clock();
  m->shard_clock = t.shard_clock();
  m->applied_parts = t.applied_parts();
  m->job = ToString(t.job());
  m->max_frame_bytes = t.max_frame_bytes();
  return Status::OK();
}

Status Decode(const fb::Read& t, Read* m) {
  m->req_id = t.req_id();
  m->table = t.table();
  CopyVector(t.rows(), &m->rows);
  m->min_version = t.min_version();
  m->subscribe = t.subscribe();
  return Status::OK();
}

Status Decode(const fb::ReadReply& t, ReadReply* m) {
  m->req_id = t.req_id();
  m->version = t.version();
  m->applied_clock = t.applied_clock();
  m->applied_parts = t.applied_parts();
  return DecodeRows(t.rows(), "ReadReply.rows", &m->rows);
}

// An Apply's rows, copied into the message's arena in chunks of one size
// (kDecodeChunk), each row a view into it: a long-running shard's heap then
// reuses the chunks of applied batches for the next ones, where a block the
// frame's size, a different size each time, could leave holes between the
// rows the shard allocated meanwhile.
Status DecodeDeltaRows(const fb::Rows* rows, const char* field, Apply* m) {
  m->updates.clear();
  m->backing = nullptr;
  if (rows == nullptr) return Status::OK();
  RETURN_IF_ERROR(CheckAbsent(*rows, field, /*allow_absent=*/false));
  const auto* refs = rows->refs();
  const auto* data = rows->data();
  size_t n = refs == nullptr ? 0 : refs->size();
  size_t data_size = data == nullptr ? 0 : data->size();
  RETURN_IF_ERROR(CheckRowSizes(*rows, field));
  constexpr size_t kDecodeChunk = size_t{64} << 10;
  std::shared_ptr<ByteArena> arena;
  if (data_size != 0) arena = std::make_shared<ByteArena>(kDecodeChunk, kDecodeChunk);
  const char* p = data_size == 0 ? nullptr : reinterpret_cast<const char*>(data->data());
  m->updates.resize(n);
  for (size_t i = 0; i < n; ++i) {
    fb::RowRef ref = LoadRowRef(*refs, i);
    DeltaRow& r = m->updates[i];
    r.table = ref.table();
    r.row = ref.row();
    if (ref.size() > 0) {
      r.bytes = arena->Add(std::string_view(p, ref.size()));
      p += ref.size();
    }
  }
  m->backing = std::move(arena);
  return Status::OK();
}

Status Decode(const fb::Apply& t, Apply* m) {
  m->clock = t.clock();
  m->part = t.part();
  m->more = t.more();
  return DecodeDeltaRows(t.updates(), "Apply.updates", m);
}

Status Decode(const fb::Ack& t, Ack* m) {
  m->clock = t.clock();
  m->duplicate = t.duplicate();
  m->part = t.part();
  return Status::OK();
}

Status Decode(const fb::Push& t, Push* m) {
  m->version = t.version();
  m->applied_clock = t.applied_clock();
  m->applied_parts = t.applied_parts();
  return DecodeRows(t.rows(), "Push.rows", &m->rows);
}

Status Decode(const fb::PushDone& t, PushDone* m) {
  m->version = t.version();
  m->applied_clock = t.applied_clock();
  return Status::OK();
}

Status Decode(const fb::Unsubscribe& t, Unsubscribe* m) {
  m->table = t.table();
  CopyVector(t.rows(), &m->rows);
  return Status::OK();
}

Status Decode(const fb::CreateTable& t, CreateTable* m) {
  m->req_id = t.req_id();
  // `schema` is (required): the verifier already rejected its absence.
  return DecodeSchema(t.schema(), &m->schema);
}

Status Decode(const fb::ListTables& t, ListTables* m) {
  m->req_id = t.req_id();
  return Status::OK();
}

Status Decode(const fb::DescribeTable& t, DescribeTable* m) {
  m->req_id = t.req_id();
  m->name = ToString(t.name());
  return Status::OK();
}

Status Decode(const fb::TablesReply& t, TablesReply* m) {
  m->req_id = t.req_id();
  m->created = t.created();
  m->tables.clear();
  if (const auto* tables = t.tables()) {
    m->tables.resize(tables->size());
    for (size_t i = 0; i < tables->size(); ++i) {
      RETURN_IF_ERROR(DecodeSchema(tables->Get(i), &m->tables[i]));
    }
  }
  return Status::OK();
}

Status Decode(const fb::StatsRequest& t, StatsRequest* m) {
  m->req_id = t.req_id();
  return Status::OK();
}

Status Decode(const fb::StatsReply& t, StatsReply* m) {
  m->req_id = t.req_id();
  m->shard_id = t.shard_id();
  m->shard_clock = t.shard_clock();
  CopyVector(t.applied_clocks(), &m->applied_clocks);
  m->counters.clear();
  if (const auto* counters = t.counters()) {
    m->counters.reserve(counters->size());
    for (size_t i = 0; i < counters->size(); ++i) {
      const fb::Counter* c = counters->Get(i);
      m->counters.emplace_back(ToString(c->name()), c->value());
    }
  }
  CopyVector(t.connected_clients(), &m->connected_clients);
  return Status::OK();
}

Status Decode(const fb::Error& t, Error* m) {
  m->req_id = t.req_id();
  uint8_t code = t.code();
  if (!IsKnownStatusCode(code) || code == 0) {
    return Bad("Error.code has invalid value " + std::to_string(code));
  }
  m->code = static_cast<StatusCode>(code);
  m->message = ToString(t.message());
  m->retriable = t.retriable();
  return Status::OK();
}

// Decodes the body of `msg`, whose union type is FbT's, into `*out`.
template <typename FbT>
Status DecodeBody(const fb::Message& msg, Message* out) {
  using T = StructOf<FbT>;
  const auto* body = static_cast<const FbT*>(msg.body());
  if (body == nullptr) {
    return Bad(std::string(MessageName(Message{T{}})) + " message without a body");
  }
  T value;
  RETURN_IF_ERROR(Decode(*body, &value));
  *out = std::move(value);
  return Status::OK();
}

}  // namespace

EncodedFrame::~EncodedFrame() { Reset(); }

EncodedFrame::EncodedFrame(EncodedFrame&& other) noexcept { *this = std::move(other); }

EncodedFrame& EncodedFrame::operator=(EncodedFrame&& other) noexcept {
  if (this != &other) {
    Reset();
    pool_ = std::move(other.pool_);
    block_ = other.block_;
    pieces_ = std::move(other.pieces_);
    size_ = other.size_;
    gathered_ = other.gathered_;
    holders_ = std::move(other.holders_);
    other.block_ = FrameBufferPool::Block();
    other.pieces_.clear();
    other.size_ = other.gathered_ = 0;
    other.holders_.clear();
  }
  return *this;
}

void EncodedFrame::Reset() {
  if (pool_ != nullptr) {
    pool_->Release(block_);
  } else {
    FrameBufferPool::Free(block_);
  }
  pool_ = nullptr;
  block_ = FrameBufferPool::Block();
  pieces_.clear();
  size_ = gathered_ = 0;
  holders_.clear();
}

void EncodedFrame::AppendTo(std::string* out) const {
  out->reserve(out->size() + size());
  for (std::string_view p : pieces_) out->append(p);
}

Status EncodeFrame(const Message& m, EncodedFrame* out, std::shared_ptr<FrameBufferPool> pool) {
  out->Reset();
  SizeCheck check;
  std::visit(check, m);
  RETURN_IF_ERROR(check.status);
  if (check.bytes >= FLATBUFFERS_MAX_BUFFER_SIZE - 1024) {
    return Status::ResourceExhausted(std::string(MessageName(m)) + " message of about " +
                                     std::to_string(check.bytes) +
                                     " bytes exceeds the 2 GiB wire limit");
  }
  BlockAllocator allocator(pool.get());
  // Room for the length prefix, pushed in front of the finished buffer.
  FlatBufferBuilder b(check.bytes + 2 * kPayloadAlignment, &allocator);
  // Aligns the buffer to 8 bytes, so that its scalars are aligned whenever
  // the payload starts at an 8-byte boundary.
  b.Align(kPayloadAlignment);
  GatheredRows gather;
  BodyEncoder encoder{b, &gather};
  Body body = std::visit(encoder, m);
  b.Finish(fb::CreateMessage(b, body.type, body.offset), fb::MessageIdentifier());

  // Zero padding after the FlatBuffer makes the whole frame a multiple of 8
  // bytes, so every payload in a stream starts as aligned as the first.
  size_t size = b.GetSize();
  size_t frame_size =
      (kFrameHeaderBytes + size + kPayloadAlignment - 1) / kPayloadAlignment * kPayloadAlignment;
  size_t padded = frame_size - kFrameHeaderBytes;
  uint32_t len = static_cast<uint32_t>(padded);
  const uint8_t header[kFrameHeaderBytes] = {
      static_cast<uint8_t>(len & 0xff), static_cast<uint8_t>((len >> 8) & 0xff),
      static_cast<uint8_t>((len >> 16) & 0xff), static_cast<uint8_t>((len >> 24) & 0xff)};
  // The builder grows downwards: the prefix lands right before the payload.
  b.PushBytes(header, kFrameHeaderBytes);
  size_t reserved = 0, offset = 0;
  uint8_t* raw = b.ReleaseRaw(reserved, offset);
  out->pool_ = std::move(pool);
  out->block_ = allocator.Take(raw);
  const char* head = reinterpret_cast<const char*>(raw + offset);
  const char* end = reinterpret_cast<const char*>(raw + reserved);  // == head + prefix + size
  if (gather.bytes == 0) {
    out->pieces_.emplace_back(head, static_cast<size_t>(end - head));
  } else {
    // The buffer up to the rows' data vector, the rows from where they are,
    // then the rest of the buffer.
    const char* data = end - gather.from_end;
    out->pieces_.emplace_back(head, static_cast<size_t>(data - head));
    out->pieces_.insert(out->pieces_.end(), gather.runs.begin(), gather.runs.end());
    const size_t after = static_cast<size_t>(end - data) - gather.bytes;
    if (after != 0) out->pieces_.emplace_back(data + gather.bytes, after);
    out->gathered_ = gather.bytes;
    out->holders_ = std::move(gather.holders);
  }
  static constexpr char kZeros[kPayloadAlignment] = {};
  if (padded > size) out->pieces_.emplace_back(kZeros, padded - size);
  out->size_ = frame_size;
  return Status::OK();
}

Status EncodeFrame(const Message& m, std::string* out) {
  EncodedFrame frame;
  RETURN_IF_ERROR(EncodeFrame(m, &frame));
  frame.AppendTo(out);
  return Status::OK();
}

Status DecodePayload(std::string_view payload, Message* out, const DecodeOptions& options) {
  if (payload.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return Status::ResourceExhausted("payload of " + std::to_string(payload.size()) +
                                     " bytes exceeds the 2 GiB wire limit");
  }
  constexpr size_t kMinPayload =
      sizeof(flatbuffers::uoffset_t) + flatbuffers::kFileIdentifierLength;
  if (payload.size() < kMinPayload) {
    return Bad("payload of " + std::to_string(payload.size()) + " bytes is too short");
  }
  const uint8_t* data = reinterpret_cast<const uint8_t*>(payload.data());
  std::unique_ptr<uint64_t[]> aligned;
  if (reinterpret_cast<uintptr_t>(data) % kPayloadAlignment != 0) {
    aligned.reset(new uint64_t[(payload.size() + 7) / 8]);
    std::memcpy(aligned.get(), payload.data(), payload.size());
    data = reinterpret_cast<const uint8_t*>(aligned.get());
  }
  if (!fb::MessageBufferHasIdentifier(data)) {
    return Bad("payload does not carry the \"PACE\" file identifier (not a PaceDB peer?)");
  }
  flatbuffers::Verifier::Options vopts;
  vopts.max_depth = options.max_depth;
  vopts.max_tables = options.max_tables;
  flatbuffers::Verifier verifier(data, payload.size(), vopts);
  if (!fb::VerifyMessageBuffer(verifier)) {
    return Bad("payload of " + std::to_string(payload.size()) +
               " bytes failed FlatBuffers verification");
  }
  const fb::Message& msg = *fb::GetMessage(data);
  switch (msg.body_type()) {
    case fb::Body_NONE:
      return Bad("message without a body");
    case fb::Body_Hello:
      return DecodeBody<fb::Hello>(msg, out);
    case fb::Body_Welcome:
      return DecodeBody<fb::Welcome>(msg, out);
    case fb::Body_Read:
      return DecodeBody<fb::Read>(msg, out);
    case fb::Body_ReadReply:
      return DecodeBody<fb::ReadReply>(msg, out);
    case fb::Body_Apply:
      return DecodeBody<fb::Apply>(msg, out);
    case fb::Body_Ack:
      return DecodeBody<fb::Ack>(msg, out);
    case fb::Body_Push:
      return DecodeBody<fb::Push>(msg, out);
    case fb::Body_PushDone:
      return DecodeBody<fb::PushDone>(msg, out);
    case fb::Body_Unsubscribe:
      return DecodeBody<fb::Unsubscribe>(msg, out);
    case fb::Body_CreateTable:
      return DecodeBody<fb::CreateTable>(msg, out);
    case fb::Body_ListTables:
      return DecodeBody<fb::ListTables>(msg, out);
    case fb::Body_DescribeTable:
      return DecodeBody<fb::DescribeTable>(msg, out);
    case fb::Body_TablesReply:
      return DecodeBody<fb::TablesReply>(msg, out);
    case fb::Body_StatsRequest:
      return DecodeBody<fb::StatsRequest>(msg, out);
    case fb::Body_StatsReply:
      return DecodeBody<fb::StatsReply>(msg, out);
    case fb::Body_Error:
      return DecodeBody<fb::Error>(msg, out);
  }
  return Bad("unknown message type " + std::to_string(static_cast<int>(msg.body_type())) +
             " (sent by a newer wire version?)");
}

}  // namespace pace::net
