// Incremental framing for the PaceDB wire protocol: a stream of frames, each a
// u32 little-endian payload length followed by that many payload bytes
// (docs/wire-protocol.md, "Framing").
#ifndef PACE_NET_FRAME_H_
#define PACE_NET_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "common/status.h"
#include "net/codec.h"

namespace pace::net {

// Splits a byte stream into payloads. Bytes are fed either by copying
// (Append) or by reading straight into the reader's buffer (Prepare/Commit);
// Next() then yields complete payloads in order.
//
// A length prefix of zero or above `max_frame_bytes` is rejected as soon as
// its four bytes have arrived, before any memory is reserved for the payload;
// the buffer only grows as bytes actually arrive. Errors are sticky: after
// one, every Next() returns it again.
//
// Payloads are returned 8-byte aligned when every frame's total length is a
// multiple of 8 (as EncodeFrame produces), so DecodePayload need not copy.
//
// Thread-compatible: one reader per connection, used by one thread at a time.
class FrameReader {
 public:
  // REQUIRES: max_frame_bytes >= 1.
  explicit FrameReader(uint32_t max_frame_bytes = kDefaultMaxFrameBytes);
  FrameReader(const FrameReader&) = delete;
  FrameReader& operator=(const FrameReader&) = delete;

  // Copies `data` into the stream.
  void Append(std::string_view data);

  // Returns a writable area of at least `n` bytes at the end of the stream;
  // the caller fills a prefix of it and calls Commit with the count.
  // Invalidates views returned by Next.
  char* Prepare(size_t n);
  // REQUIRES: n <= the size passed to the last Prepare.
  void Commit(size_t n);

  // A good size for the next Prepare: at least 64 KiB, more while a large
  // frame is partly received (doubling what is buffered, so memory follows
  // the bytes that actually arrived, or the free room the buffer already has:
  // a buffer grown for large frames is kept while they keep coming).
  size_t SuggestedReadSize() const;

  // On success sets `*payload` to the next complete payload (a view valid
  // until the next call of a non-const method) or to an empty view if more
  // bytes are needed. Errors: ResourceExhausted for a length above the limit,
  // Corruption for a zero length.
  Status Next(std::string_view* payload);

  // Bytes received but not yet returned by Next.
  size_t buffered_bytes() const { return end_ - start_; }
  uint32_t max_frame_bytes() const { return max_frame_bytes_; }

 private:
  // Makes room for `n` more bytes after end_, keeping start_'s offset mod 8.
  void Reserve(size_t n);
  // True while a buffer grown for large frames is worth keeping.
  bool KeepsLargeBuffer() const;

  const uint32_t max_frame_bytes_;
  std::unique_ptr<char[]> buf_;
  size_t capacity_ = 0;
  size_t start_ = 0;  // first unconsumed byte
  size_t end_ = 0;    // one past the last received byte
  // Frames in a row that used less than a quarter of the buffer (capped).
  uint32_t small_frames_ = 0;
  Status error_;  // sticky
};

}  // namespace pace::net

#endif  // PACE_NET_FRAME_H_
