// The clock log: a shard store's redo log of applied groups
// (docs/storage-format.md section 15).
//
// Each group commit appends ONE record holding every delta of the group to
// the active log file, `DIR/CLOCKLOG-<n>` (n: 6+ decimal digits), before the
// group's applied clocks are written to RocksDB together with the log's new
// end. RocksDB's record of that end is the commit point: bytes past it are
// never read. The deltas of the records in [0, end) are held in memory by the
// store (its row cache, as dirty rows) and written to RocksDB in bulk by a
// row write-back, which then starts the next log file (reusing the old one's
// file, whose pages are usually still in the page cache: overwriting cached
// pages costs a memory copy, appending to a fresh file allocates every page).
//
// Record layout (integers little-endian):
//   u32 magic "PCLG" | u32 crc32c of bytes [8, 40) | u64 seq | u64 payload
//   bytes | u32 crc32c of the payload | u32 entry count | u64 record bytes
//   (header + payload + padding: where the next record starts)
//   payload: per entry u32 table | u32 bytes | u64 row | delta payload
// Where the file system allows it the log is written with O_DIRECT (no page
// cache: a model-scale record is written at the device's speed instead of
// the kernel's page allocation, and the page cache of a memory-bounded
// process stays its own), and records are padded to 4 KiB.
//
// Thread-compatibility: a ClockLogWriter is used by one writer at a time (the
// store's write_mu_); readers open their own ClockLogReader.
#ifndef PACE_STORAGE_CLOCK_LOG_H_
#define PACE_STORAGE_CLOCK_LOG_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pace {

// CRC-32C (Castagnoli) of `data` continuing from `crc` (0 to start): the
// SSE4.2 instruction where the CPU has it, a table otherwise.
uint32_t Crc32c(uint32_t crc, const void* data, size_t n);
// Whether Crc32c runs on the CPU's instruction.
bool Crc32cIsHardware();

// Requests the first lines of `bytes` (at most kPrefetchLines of 64 bytes)
// into the CPU's caches: passes over entries scattered in memory call it a
// few entries ahead.
inline void PrefetchBytes(std::string_view bytes) {
  constexpr size_t kPrefetchLines = 8;
  const size_t n = std::min(bytes.size(), 64 * kPrefetchLines);
  for (size_t o = 0; o < n; o += 64) __builtin_prefetch(bytes.data() + o);
}

inline constexpr size_t kClockLogHeaderBytes = 40;
inline constexpr size_t kClockLogEntryHeaderBytes = 16;

// The path of log file `number` in `dir`.
std::string ClockLogPath(const std::string& dir, uint64_t number);
// Parses a file name "CLOCKLOG-<n>"; false for anything else.
bool ParseClockLogName(std::string_view name, uint64_t* number);

// One entry of a record as it is appended.
struct ClockLogEntry {
  uint32_t table;
  uint64_t row;
  std::string_view bytes;
};

class ClockLogWriter {
 public:
  // Records are staged through two buffers of `stage_bytes` each (clamped
  // to [kMinStageBytes, kMaxStageBytes], rounded up to kAlign): larger stages
  // mean fewer, larger writes; the buffers are memory the store holds while
  // open.
  explicit ClockLogWriter(size_t stage_bytes = kMaxStageBytes);
  ~ClockLogWriter();
  ClockLogWriter(const ClockLogWriter&) = delete;
  ClockLogWriter& operator=(const ClockLogWriter&) = delete;

  // Opens (creating if missing) log file `number` in `dir` for writing at
  // `offset`. Bytes past `offset` are left as they are and overwritten by
  // later appends.
  Status Open(const std::string& dir, uint64_t number, uint64_t offset);
  // Appends one record of `count` entries, produced by entry(i) for i in
  // [0, count), with sequence number `seq`, at the current offset; with
  // `sync`, fdatasyncs before returning. On success the offset moves past the
  // record. On failure the offset stays (the next append overwrites the
  // partial record) and the Status carries the OS error text.
  // With `payload` given, the record's payload bytes and their CRC-32C go
  // there.
  struct Payload {
    uint64_t bytes = 0;
    uint32_t crc = 0;
  };
  Status Append(uint64_t seq, size_t count, const std::function<ClockLogEntry(size_t)>& entry,
                bool sync, Payload* payload = nullptr);
  // Renames the open file to log file `number` and continues writing it at
  // offset 0 (the file is reused, not truncated). Syncs the directory.
  Status Restart(uint64_t number);
  void Close();

  uint64_t number() const { return number_; }
  uint64_t offset() const { return offset_; }
  // Bytes of the buffer used to stage records (kept between appends).
  size_t buffer_bytes() const { return buffer_ != nullptr ? 2 * stage_bytes_ : 0; }
  size_t stage_bytes() const { return stage_bytes_; }
  // Whether the file is written with O_DIRECT.
  bool direct() const { return direct_; }

  static constexpr size_t kMaxStageBytes = size_t{8} << 20;
  static constexpr size_t kMinStageBytes = size_t{256} << 10;
  static constexpr size_t kAlign = 4096;

 private:
  Status WriteAt(const char* data, size_t n, uint64_t offset);

  const size_t stage_bytes_;
  std::string dir_;
  uint64_t number_ = 0;
  uint64_t offset_ = 0;
  int fd_ = -1;
  bool direct_ = false;
  struct FreeDeleter {
    void operator()(char* p) const;
  };
  // Two stages of stage_bytes_, kAlign-aligned: one filled while the other
  // is written.
  std::unique_ptr<char, FreeDeleter> buffer_;
  std::unique_ptr<char, FreeDeleter> first_block_;  // kAlign bytes
};

// Reads the records of a log file in [0, end), checking every checksum and
// that sequence numbers run on from `first_seq`. fn(seq, entries) gets each
// record's entries (valid during the call). Corruption names the file and
// offset; NotFound if the file is missing while end > 0.
Status ReadClockLog(const std::string& dir, uint64_t number, uint64_t end, uint64_t first_seq,
                    const std::function<Status(uint64_t, const std::vector<ClockLogEntry>&)>& fn);
// Reads the one record at `offset` of log file `number`, which must end by
// `end` and have sequence number `seq`, checking every checksum: its entries
// into *entries, pointing into *payload. Corruption names the file and
// offset; NotFound if the file is missing.
Status ReadClockLogRecord(const std::string& dir, uint64_t number, uint64_t offset, uint64_t end,
                          uint64_t seq, std::string* payload, std::vector<ClockLogEntry>* entries);

}  // namespace pace

#endif  // PACE_STORAGE_CLOCK_LOG_H_
