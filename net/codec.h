// Encoding and decoding of net/messages.h values as frames of the PaceDB wire
// protocol: a u32 little-endian payload length, then one FlatBuffers `Message`
// (schema net/schema/pace.fbs, format documented in docs/wire-protocol.md).
//
// Decoding treats its input as hostile: the payload is first checked by the
// FlatBuffers verifier (bounds, alignment, depth and table-count limits), then
// every field is validated (known message type, required fields, enum values,
// row block sizes) before a Message is produced. Any failure yields a non-OK
// Status; no input can crash the decoder.
//
// All functions are thread-safe (they share no state).
#ifndef PACE_NET_CODEC_H_
#define PACE_NET_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "net/frame_pool.h"
#include "net/messages.h"

namespace pace::net {

// Size of the length prefix in front of every payload.
inline constexpr size_t kFrameHeaderBytes = 4;
// Default cap on one payload (see FrameReader and ServerOptions).
inline constexpr uint32_t kDefaultMaxFrameBytes = 64u << 20;
// Encoded frames (length prefix included) are zero-padded to a multiple of
// this, so that consecutive frames in a stream keep every payload as aligned
// as the first (FrameReader places the first at an 8-byte boundary).
inline constexpr size_t kPayloadAlignment = 8;

struct DecodeOptions {
  // Maximum nesting of tables and vectors the verifier accepts. Default: 16
  // (the schema nests at most 4 deep).
  uint32_t max_depth = 16;
  // Maximum number of tables the verifier accepts in one payload. Default:
  // 1,000,000.
  uint32_t max_tables = 1000000;
};

// One encoded frame, ready to send without another copy: the length prefix
// and the FlatBuffer stay in the buffer they were built in (recycled through
// a FrameBufferPool if one was given), followed by the zero padding. The
// rows' bytes of a large Apply are not copied into that buffer at all: they
// are gathered from the arena the message holds them in (Apply::backing, which
// the frame keeps alive) when the frame is written, and that stretch of the
// buffer is never touched. Move-only; thread-compatible.
class EncodedFrame {
 public:
  EncodedFrame() = default;
  ~EncodedFrame();
  EncodedFrame(EncodedFrame&& other) noexcept;
  EncodedFrame& operator=(EncodedFrame&& other) noexcept;
  EncodedFrame(const EncodedFrame&) = delete;
  EncodedFrame& operator=(const EncodedFrame&) = delete;

  // Bytes on the wire: length prefix, payload (FlatBuffer and padding).
  size_t size() const { return size_; }
  // The wire bytes in order (a scatter-gather list, for one writev): pieces
  // of the frame's buffer, gathered rows' bytes, the zero padding last (none
  // when the frame needs no padding). Their sizes add up to size().
  const std::vector<std::string_view>& pieces() const { return pieces_; }
  // Bytes of pieces() that are gathered from the message's rows, not in the
  // frame's buffer.
  size_t gathered_bytes() const { return gathered_; }
  // Appends the wire bytes to `*out`.
  void AppendTo(std::string* out) const;

 private:
  friend Status EncodeFrame(const Message& m, EncodedFrame* out,
                            std::shared_ptr<FrameBufferPool> pool);
  void Reset();

  std::shared_ptr<FrameBufferPool> pool_;  // null: block_ is freed directly
  FrameBufferPool::Block block_;           // holds the length prefix and the FlatBuffer
  std::vector<std::string_view> pieces_;
  size_t size_ = 0;
  size_t gathered_ = 0;
  std::vector<std::shared_ptr<const void>> holders_;  // what gathered pieces point into
};

// Rows' bytes of an Apply of at least this many bytes are gathered, not copied
// (EncodedFrame); below it a copy costs less than the pieces.
inline constexpr size_t kGatherRowBytes = size_t{256} << 10;

// Encodes `m` as one frame into `*out` (replacing what it held), building the
// FlatBuffer in a block taken from `pool` if given (a block the frame gives
// back when destroyed). Errors: as the std::string overload; on error `*out`
// is empty.
Status EncodeFrame(const Message& m, EncodedFrame* out,
                   std::shared_ptr<FrameBufferPool> pool = nullptr);

// Appends one frame (length prefix + payload) holding `m` to `*out`.
// Errors: InvalidArgument if `m` holds a value that cannot be sent (an enum
// out of range, an Error with code OK); ResourceExhausted if the payload would
// exceed the FlatBuffers limit of 2 GiB. On error `*out` is unchanged.
Status EncodeFrame(const Message& m, std::string* out);

// Decodes one payload (a frame without its length prefix) into `*out`.
// `payload` should be 8-byte aligned; if it is not, it is copied once.
// Errors: Corruption if the bytes fail verification or hold an unknown message
// type, a missing field, an out-of-range enum value or inconsistent row sizes;
// ResourceExhausted if the payload is larger than 2 GiB. On error `*out` is
// unspecified.
Status DecodePayload(std::string_view payload, Message* out,
                     const DecodeOptions& options = DecodeOptions());

}  // namespace pace::net

#endif  // PACE_NET_CODEC_H_
