#include "storage/key_format.h"

#include <cstring>

namespace pace {
namespace storage_format {

namespace {

// Version 2 appends the value bound (vap) after the name; version 1 records
// (no value bound: 0) are still read.
constexpr uint8_t kSchemaRecordVersion = 2;
// version, id, kind, type, width, consistency, staleness, init kind, a, b,
// seed, name length.
constexpr size_t kSchemaFixedSize = 1 + 4 + 1 + 1 + 4 + 1 + 4 + 1 + 8 + 8 + 8 + 2;
constexpr size_t kSchemaV2Extra = 8;  // value_bound

template <typename T>
void Append(std::string* out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out->append(buf, sizeof(T));
}

// Reads little-endian fields from a buffer whose total size was checked.
class Reader {
 public:
  explicit Reader(const char* p) : p_(p) {}
  template <typename T>
  T Get() {
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  const char* pos() const { return p_; }

 private:
  const char* p_;
};

std::string PrefixedId(char prefix, uint32_t id) {
  std::string k(kTablePrefixSize, '\0');
  k[0] = prefix;
  PutBigEndian32(&k[1], id);
  return k;
}

bool DecodePrefixedId(std::string_view key, char prefix, uint32_t* id) {
  if (key.size() != kTablePrefixSize || key[0] != prefix) return false;
  *id = GetBigEndian32(key.data() + 1);
  return true;
}

}  // namespace

void PutBigEndian32(char* out, uint32_t v) {
  for (int i = 3; i >= 0; --i) {
    out[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
}

void PutBigEndian64(char* out, uint64_t v) {
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
}

uint32_t GetBigEndian32(const char* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}

uint64_t GetBigEndian64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}

void EncodeRowKey(uint32_t table, uint64_t row, char out[kRowKeySize]) {
  out[0] = kRowPrefix;
  PutBigEndian32(out + 1, table);
  PutBigEndian64(out + 5, row);
}

std::string MakeRowKey(uint32_t table, uint64_t row) {
  std::string k(kRowKeySize, '\0');
  EncodeRowKey(table, row, k.data());
  return k;
}

bool DecodeRowKey(std::string_view key, uint32_t* table, uint64_t* row) {
  if (key.size() != kRowKeySize || key[0] != kRowPrefix) return false;
  *table = GetBigEndian32(key.data() + 1);
  *row = GetBigEndian64(key.data() + 5);
  return true;
}

std::string TableRowsBegin(uint32_t table) { return PrefixedId(kRowPrefix, table); }

std::string TableRowsEnd(uint32_t table) {
  if (table == UINT32_MAX) return KeySpaceEnd(kRowPrefix);
  return PrefixedId(kRowPrefix, table + 1);
}

std::string CatalogKey(uint32_t table) { return PrefixedId(kCatalogPrefix, table); }

bool DecodeCatalogKey(std::string_view key, uint32_t* table) {
  return DecodePrefixedId(key, kCatalogPrefix, table);
}

std::string ClockKey(ClientId client) { return PrefixedId(kClockPrefix, client); }

bool DecodeClockKey(std::string_view key, ClientId* client) {
  return DecodePrefixedId(key, kClockPrefix, client);
}

std::string UndoKey(ClientId client, uint32_t part) {
  std::string k(kUndoKeySize, '\0');
  k[0] = kUndoPrefix;
  PutBigEndian32(&k[1], client);
  PutBigEndian32(&k[5], part);
  return k;
}

std::string UndoKeysEnd(ClientId client) {
  if (client == UINT32_MAX) return KeySpaceEnd(kUndoPrefix);
  return PrefixedId(kUndoPrefix, client + 1);
}

bool DecodeUndoKey(std::string_view key, ClientId* client, uint32_t* part) {
  if (key.size() != kUndoKeySize || key[0] != kUndoPrefix) return false;
  *client = GetBigEndian32(key.data() + 1);
  *part = GetBigEndian32(key.data() + 5);
  return true;
}

namespace {
constexpr uint32_t kUndoRecordVersion = 1;
constexpr uint32_t kUndoInLogVersion = 2;  // an undo pointer into the clock log
constexpr size_t kUndoHeaderBytes = 4 + 8 + 8 + 4;
constexpr size_t kUndoEntryHeaderBytes = 4 + 4 + 8;
}  // namespace

void EncodeUndoRecord(ClockT clock, uint64_t incarnation, size_t count,
                      const std::function<UndoEntry(size_t)>& entry, std::string* out) {
  size_t bytes = kUndoHeaderBytes;
  for (size_t i = 0; i < count; ++i) bytes += kUndoEntryHeaderBytes + entry(i).bytes.size();
  out->clear();
  out->reserve(bytes);
  Append(out, kUndoRecordVersion);
  Append(out, static_cast<int64_t>(clock));
  Append(out, incarnation);
  Append(out, static_cast<uint32_t>(count));
  for (size_t i = 0; i < count; ++i) {
    const UndoEntry e = entry(i);
    Append(out, e.table);
    Append(out, static_cast<uint32_t>(e.bytes.size()));
    Append(out, e.row);
    out->append(e.bytes.data(), e.bytes.size());
  }
}

Status DecodeUndoRecord(std::string_view in, UndoRecord* record) {
  auto bad = [](const std::string& why) { return Status::Corruption("undo record: " + why); };
  if (in.size() < kUndoHeaderBytes) return bad(std::to_string(in.size()) + " bytes");
  Reader r(in.data());
  const uint32_t version = r.Get<uint32_t>();
  if (version != kUndoRecordVersion) return bad("version " + std::to_string(version));
  record->clock = static_cast<ClockT>(r.Get<int64_t>());
  record->incarnation = r.Get<uint64_t>();
  const uint32_t count = r.Get<uint32_t>();
  if (record->clock < 0) return bad("negative clock");
  record->entries.clear();
  size_t at = kUndoHeaderBytes;
  for (uint32_t i = 0; i < count; ++i) {
    if (in.size() - at < kUndoEntryHeaderBytes) return bad("entry " + std::to_string(i) + " cut");
    Reader e(in.data() + at);
    UndoEntry u;
    u.table = e.Get<uint32_t>();
    const uint32_t len = e.Get<uint32_t>();
    u.row = e.Get<uint64_t>();
    at += kUndoEntryHeaderBytes;
    if (in.size() - at < len) return bad("entry " + std::to_string(i) + " cut");
    u.bytes = in.substr(at, len);
    at += len;
    record->entries.push_back(u);
  }
  if (at != in.size()) return bad(std::to_string(in.size() - at) + " bytes after the entries");
  return Status::OK();
}

std::string EncodeUndoPointer(const UndoPointer& p) {
  std::string out;
  Append(&out, p.in_log ? kUndoInLogVersion : kUndoRecordVersion);
  Append(&out, static_cast<int64_t>(p.clock));
  Append(&out, p.incarnation);
  Append(&out, p.bytes);
  Append(&out, p.crc);
  if (p.in_log) {
    Append(&out, p.log_number);
    Append(&out, p.log_offset);
    Append(&out, p.log_seq);
  }
  return out;
}

Status DecodeUndoPointer(std::string_view in, UndoPointer* p) {
  if (in.size() != 32 && in.size() != 56) {
    return Status::Corruption("undo key value of " + std::to_string(in.size()) + " bytes");
  }
  Reader r(in.data());
  const uint32_t version = r.Get<uint32_t>();
  const bool in_log = version == kUndoInLogVersion;
  if ((version != kUndoRecordVersion && !in_log) || in.size() != (in_log ? 56u : 32u)) {
    return Status::Corruption("undo key value of version " + std::to_string(version) + " and " +
                              std::to_string(in.size()) + " bytes");
  }
  p->clock = static_cast<ClockT>(r.Get<int64_t>());
  p->incarnation = r.Get<uint64_t>();
  p->bytes = r.Get<uint64_t>();
  p->crc = r.Get<uint32_t>();
  p->in_log = in_log;
  p->log_number = in_log ? r.Get<uint64_t>() : 0;
  p->log_offset = in_log ? r.Get<uint64_t>() : 0;
  p->log_seq = in_log ? r.Get<uint64_t>() : 0;
  if (p->clock < 0) return Status::Corruption("undo key value with a negative clock");
  return Status::OK();
}

std::string UndoFileName(ClientId client, uint32_t part) {
  return "UNDO-" + std::to_string(client) + "-" + std::to_string(part);
}

std::string KeySpaceEnd(char prefix) { return std::string(1, static_cast<char>(prefix + 1)); }

std::string EncodeFixed32(uint32_t v) {
  std::string out;
  Append(&out, v);
  return out;
}

std::string EncodeFixed64(uint64_t v) {
  std::string out;
  Append(&out, v);
  return out;
}

Status DecodeFixed32(std::string_view in, std::string_view what, uint32_t* v) {
  if (in.size() != 4) {
    return Status::Corruption(std::string(what) + " record has " + std::to_string(in.size()) +
                              " bytes, expected 4");
  }
  std::memcpy(v, in.data(), 4);
  return Status::OK();
}

Status DecodeFixed64(std::string_view in, std::string_view what, uint64_t* v) {
  if (in.size() != 8) {
    return Status::Corruption(std::string(what) + " record has " + std::to_string(in.size()) +
                              " bytes, expected 8");
  }
  std::memcpy(v, in.data(), 8);
  return Status::OK();
}

std::string EncodeClock(ClockT clock, uint32_t parts) {
  std::string out = EncodeFixed64(static_cast<uint64_t>(clock));
  if (parts != 0) Append(&out, parts);
  return out;
}

Status DecodeClock(std::string_view in, ClockT* clock, uint32_t* parts) {
  uint64_t raw;
  uint32_t p = 0;
  if (in.size() == 12) {
    std::memcpy(&p, in.data() + 8, 4);
    if (p == 0) return Status::Corruption("applied-clock record with an explicit 0 parts");
    in = in.substr(0, 8);
  }
  RETURN_IF_ERROR(DecodeFixed64(in, "applied clock", &raw));
  ClockT c = static_cast<ClockT>(raw);
  if (c < 0) return Status::Corruption("negative applied clock " + std::to_string(c));
  *clock = c;
  if (parts != nullptr) *parts = p;
  return Status::OK();
}

std::string EncodeIdentity(const IdentityRecord& id) {
  std::string out;
  Append(&out, id.shard_id);
  Append(&out, id.num_shards);
  Append(&out, id.num_clients);
  return out;
}

Status DecodeIdentity(std::string_view in, IdentityRecord* id) {
  if (in.size() != 12) {
    return Status::Corruption("identity record has " + std::to_string(in.size()) +
                              " bytes, expected 12");
  }
  Reader r(in.data());
  IdentityRecord v;
  v.shard_id = r.Get<uint32_t>();
  v.num_shards = r.Get<uint32_t>();
  v.num_clients = r.Get<uint32_t>();
  if (v.num_shards == 0 || v.shard_id >= v.num_shards || v.num_clients == 0) {
    return Status::Corruption("identity record is invalid: shard " + std::to_string(v.shard_id) +
                              " of " + std::to_string(v.num_shards) + ", " +
                              std::to_string(v.num_clients) + " clients");
  }
  *id = v;
  return Status::OK();
}

std::string EncodeSchema(const TableSchema& s) {
  std::string out;
  out.reserve(kSchemaFixedSize + s.name.size() + kSchemaV2Extra);
  Append(&out, kSchemaRecordVersion);
  Append(&out, s.id);
  Append(&out, static_cast<uint8_t>(s.kind));
  Append(&out, static_cast<uint8_t>(s.type));
  Append(&out, s.width);
  Append(&out, static_cast<uint8_t>(s.consistency));
  Append(&out, s.staleness);
  Append(&out, static_cast<uint8_t>(s.init.kind));
  Append(&out, s.init.a);
  Append(&out, s.init.b);
  Append(&out, s.init.seed);
  Append(&out, static_cast<uint16_t>(s.name.size()));
  out.append(s.name);
  Append(&out, s.value_bound);
  return out;
}

Status DecodeSchema(std::string_view in, TableSchema* s) {
  if (in.size() < kSchemaFixedSize) {
    return Status::Corruption("schema record of " + std::to_string(in.size()) +
                              " bytes is truncated");
  }
  const uint8_t version = static_cast<uint8_t>(in[0]);
  if (version != 1 && version != kSchemaRecordVersion) {
    return Status::Corruption("schema record has unknown version " + std::to_string(version));
  }
  const size_t extra = version == 1 ? 0 : kSchemaV2Extra;
  Reader r(in.data() + 1);
  TableSchema v;
  v.id = r.Get<uint32_t>();
  v.kind = static_cast<RowKind>(r.Get<uint8_t>());
  v.type = static_cast<ElementType>(r.Get<uint8_t>());
  v.width = r.Get<uint32_t>();
  v.consistency = static_cast<Consistency>(r.Get<uint8_t>());
  v.staleness = r.Get<uint32_t>();
  v.init.kind = static_cast<InitKind>(r.Get<uint8_t>());
  v.init.a = r.Get<double>();
  v.init.b = r.Get<double>();
  v.init.seed = r.Get<uint64_t>();
  size_t name_len = r.Get<uint16_t>();
  if (in.size() != kSchemaFixedSize + name_len + extra) {
    return Status::Corruption("schema record of " + std::to_string(in.size()) +
                              " bytes does not match its name length " + std::to_string(name_len));
  }
  v.name.assign(r.pos(), name_len);
  if (extra != 0) std::memcpy(&v.value_bound, r.pos() + name_len, sizeof(double));
  Status st = ValidateSchema(v);
  if (!st.ok()) return Status::Corruption("stored schema is invalid: " + st.message());
  *s = std::move(v);
  return Status::OK();
}

}  // namespace storage_format
}  // namespace pace
