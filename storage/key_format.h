// Key spaces and record encodings of a shard store's RocksDB database. The
// authoritative description is docs/storage-format.md; this header implements
// it. Everything here is a pure function (thread-safe).
//
// Every key starts with a one-byte key-space prefix; integers inside keys are
// big-endian so RocksDB's bytewise order sorts rows by (table, row). Integers
// inside values are little-endian.
#ifndef PACE_STORAGE_KEY_FORMAT_H_
#define PACE_STORAGE_KEY_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/schema.h"
#include "common/status.h"

namespace pace {
namespace storage_format {

// Key-space prefixes. Part of the on-disk format: never renumber.
inline constexpr char kMetaPrefix = 0x01;     // store-wide records
inline constexpr char kCatalogPrefix = 0x02;  // table schemas, by id
inline constexpr char kClockPrefix = 0x03;    // applied clock, by client
inline constexpr char kRowPrefix = 0x04;      // parameter rows
inline constexpr char kUndoPrefix = 0x05;     // parts of an incomplete clock, by client

// Meta keys: prefix + ASCII name. kFormatVersionKey is stable across every
// format version so any build can tell which format a store has.
inline constexpr std::string_view kFormatVersionKey =
    "\x01"
    "format_version";
inline constexpr std::string_view kIdentityKey =
    "\x01"
    "identity";
inline constexpr std::string_view kNextTableIdKey =
    "\x01"
    "next_table_id";
inline constexpr std::string_view kCreatedKey =
    "\x01"
    "created_unix_ms";
// The last import (pacectl import): one "key=value ..." text line.
inline constexpr std::string_view kLastImportKey =
    "\x01"
    "last_import";
// The job the store belongs to: its id as text (ShardStoreOptions::job).
inline constexpr std::string_view kJobKey =
    "\x01"
    "job";

// The clock log's state (docs/storage-format.md section 15): u64 LE log file
// number, u64 LE end offset, u64 LE sequence number of the file's first
// record, u64 LE sequence number of the next record (32 bytes).
inline constexpr std::string_view kClockLogKey =
    "\x01"
    "clock_log";

// The clock log's state after a row write-back (same encoding), written in
// the write-back's ingested SST file (format 3). One byte, in the row key
// space but no row key (those are 13 bytes), so it sorts right before the
// rows and the file spans no key the memtable holds: RocksDB ingests it
// without flushing the memtable first. The newer of this and kClockLogKey
// (by log file number) is the log's state.
inline constexpr std::string_view kWriteBackLogKey = "\x04";

// Present while a store opened with ShardStoreOptions::durable = false is
// open (written at its open, removed at its clean close): an open that finds
// it refuses the store, whose acknowledged updates may be lost.
inline constexpr std::string_view kUndurableKey =
    "\x01"
    "undurable";

inline constexpr size_t kRowKeySize = 13;      // prefix + u32 table + u64 row
inline constexpr size_t kTablePrefixSize = 5;  // prefix + u32 table

// Big-endian fixed-width integers.
void PutBigEndian32(char* out, uint32_t v);
void PutBigEndian64(char* out, uint64_t v);
uint32_t GetBigEndian32(const char* in);
uint64_t GetBigEndian64(const char* in);

// Row keys: kRowPrefix, u32 BE table, u64 BE row.
void EncodeRowKey(uint32_t table, uint64_t row, char out[kRowKeySize]);
std::string MakeRowKey(uint32_t table, uint64_t row);
// Returns false unless `key` is a well-formed row key.
bool DecodeRowKey(std::string_view key, uint32_t* table, uint64_t* row);
// [TableRowsBegin(t), TableRowsEnd(t)) holds exactly the row keys of table t.
std::string TableRowsBegin(uint32_t table);
std::string TableRowsEnd(uint32_t table);

// Catalog keys: kCatalogPrefix, u32 BE table id.
std::string CatalogKey(uint32_t table);
bool DecodeCatalogKey(std::string_view key, uint32_t* table);

// Clock keys: kClockPrefix, u32 BE client id.
std::string ClockKey(ClientId client);
bool DecodeClockKey(std::string_view key, ClientId* client);

// Undo keys (docs/storage-format.md section 4): kUndoPrefix, u32 BE client id,
// u32 BE part. [UndoKey(c, 0), UndoKeysEnd(c)) holds exactly client c's.
inline constexpr size_t kUndoKeySize = 9;
std::string UndoKey(ClientId client, uint32_t part);
std::string UndoKeysEnd(ClientId client);
bool DecodeUndoKey(std::string_view key, ClientId* client, uint32_t* part);

// Undo record value: u32 LE record version (1), i64 LE clock, u64 LE
// incarnation of the client process that sent the part, u32 LE entry count,
// then per entry u32 LE table, u32 LE length, u64 LE row and the delta (a
// common/row.h payload), exactly as the clock log's payload.
struct UndoEntry {
  uint32_t table = 0;
  uint64_t row = 0;
  std::string_view bytes;
};
struct UndoRecord {
  ClockT clock = 0;
  uint64_t incarnation = 0;
  std::vector<UndoEntry> entries;  // point into the decoded value
};
// Appends the record of part (clock, incarnation) whose deltas are
// entry(i), i in [0, count), to *out (cleared first).
void EncodeUndoRecord(ClockT clock, uint64_t incarnation, size_t count,
                      const std::function<UndoEntry(size_t)>& entry, std::string* out);
// Decodes `in` (which must outlive *record). Corruption naming the record
// when it is malformed.
Status DecodeUndoRecord(std::string_view in, UndoRecord* record);

// The value of an undo key: where the part's undo record is (docs/
// storage-format.md section 4). Version 1 (32 bytes): u32 LE version, i64 LE
// clock, u64 LE incarnation, u64 LE bytes of the record file, u32 LE CRC-32C
// of them; the record is the file UndoFileName(client, part). Version 2
// (56 bytes): the same five fields (bytes and CRC of the clock log record's
// payload), then u64 LE log number, u64 LE offset of the record in that
// log, u64 LE its sequence number: the part's deltas are the payload of
// that clock log record (a group that was the part alone), with no copy of
// them anywhere else.
struct UndoPointer {
  ClockT clock = 0;
  uint64_t incarnation = 0;
  uint64_t bytes = 0;
  uint32_t crc = 0;
  bool in_log = false;  // version 2
  uint64_t log_number = 0;
  uint64_t log_offset = 0;
  uint64_t log_seq = 0;
};
std::string EncodeUndoPointer(const UndoPointer& p);
Status DecodeUndoPointer(std::string_view in, UndoPointer* p);
// "UNDO-<client>-<part>".
std::string UndoFileName(ClientId client, uint32_t part);

// The smallest key greater than every key of the key space `prefix`.
std::string KeySpaceEnd(char prefix);

// Little-endian value codecs. Decoders return Corruption naming `what`.
std::string EncodeFixed32(uint32_t v);
std::string EncodeFixed64(uint64_t v);
Status DecodeFixed32(std::string_view in, std::string_view what, uint32_t* v);
Status DecodeFixed64(std::string_view in, std::string_view what, uint64_t* v);

// Applied clock value: i64 LE, >= 0 (clocks < it are complete), followed by
// u32 LE parts > 0 when that many parts of the next clock are applied too (a
// partial Apply, docs/wire-protocol.md "Apply parts"); without parts the
// record is the 8 bytes it always was.
std::string EncodeClock(ClockT clock, uint32_t parts = 0);
// *parts may be null (then parts are not returned).
Status DecodeClock(std::string_view in, ClockT* clock, uint32_t* parts = nullptr);

// Identity value: u32 LE shard_id, num_shards, num_clients.
struct IdentityRecord {
  uint32_t shard_id = 0;
  uint32_t num_shards = 1;
  uint32_t num_clients = 1;
};
std::string EncodeIdentity(const IdentityRecord& id);
Status DecodeIdentity(std::string_view in, IdentityRecord* id);

// Schema value (catalog record), version 1; see docs/storage-format.md.
// DecodeSchema also runs ValidateSchema and returns Corruption on failure.
std::string EncodeSchema(const TableSchema& s);
Status DecodeSchema(std::string_view in, TableSchema* s);

}  // namespace storage_format
}  // namespace pace

#endif  // PACE_STORAGE_KEY_FORMAT_H_
