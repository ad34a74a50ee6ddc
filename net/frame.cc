#include "net/frame.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace pace::net {
namespace {

constexpr size_t kMinReadSize = 64 << 10;
// An idle reader keeps a buffer of up to kShrinkAbove bytes. A larger one
// (grown for large frames, at most one frame at the limit) is kept while such
// frames keep coming, so that each does not regrow it through fresh,
// page-faulting memory: a client's Apply parts of 32 MiB each regrew it from
// 64 KiB, doubling, and the shard's receiving thread spent 85% of its time
// zeroing fresh pages (docs/data-path.md, "Frames over TCP"). It is given back
// once kSmallFramesBeforeShrink frames in a row used less than a quarter of
// it.
constexpr size_t kShrinkAbove = 1 << 20;
constexpr uint32_t kSmallFramesBeforeShrink = 64;

uint32_t ReadLe32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint32_t>(u[0]) | (static_cast<uint32_t>(u[1]) << 8) |
         (static_cast<uint32_t>(u[2]) << 16) | (static_cast<uint32_t>(u[3]) << 24);
}

}  // namespace

// Frames start at offset 4 (mod 8) of the buffer, so that payloads whose
// lengths are multiples of 8 all start 8-byte aligned.
FrameReader::FrameReader(uint32_t max_frame_bytes)
    : max_frame_bytes_(max_frame_bytes), start_(kFrameHeaderBytes), end_(kFrameHeaderBytes) {}

void FrameReader::Reserve(size_t n) {
  size_t live = end_ - start_;
  if (live == 0) {
    start_ = end_ = kFrameHeaderBytes;
    if (capacity_ > kShrinkAbove && !KeepsLargeBuffer() && kFrameHeaderBytes + n < capacity_ / 4) {
      buf_.reset();
      capacity_ = 0;
      small_frames_ = 0;
    }
  }
  if (buf_ != nullptr && capacity_ - end_ >= n) return;
  size_t new_start = start_ % kPayloadAlignment;
  size_t needed = new_start + live + n;
  if (needed <= capacity_) {
    std::memmove(buf_.get() + new_start, buf_.get() + start_, live);
  } else {
    // Doubling, but never past the end of the frame being received (once its
    // length is known): a buffer kept for the next frames is then the frame's
    // size, not up to twice it.
    size_t grown = std::max(2 * capacity_, kMinReadSize);
    if (live >= kFrameHeaderBytes) {
      const uint32_t len = ReadLe32(buf_.get() + start_);
      if (len != 0 && len <= max_frame_bytes_) {
        grown = std::min(grown, new_start + kFrameHeaderBytes + static_cast<size_t>(len));
      }
    }
    size_t new_capacity = std::max(needed, grown);
    std::unique_ptr<char[]> bigger(new char[new_capacity]);
    if (live > 0) std::memcpy(bigger.get() + new_start, buf_.get() + start_, live);
    buf_ = std::move(bigger);
    capacity_ = new_capacity;
  }
  start_ = new_start;
  end_ = new_start + live;
}

void FrameReader::Append(std::string_view data) {
  if (data.empty()) return;
  std::memcpy(Prepare(data.size()), data.data(), data.size());
  Commit(data.size());
}

char* FrameReader::Prepare(size_t n) {
  Reserve(n);
  return buf_.get() + end_;
}

void FrameReader::Commit(size_t n) { end_ += n; }

bool FrameReader::KeepsLargeBuffer() const {
  return capacity_ > kShrinkAbove && small_frames_ < kSmallFramesBeforeShrink;
}

size_t FrameReader::SuggestedReadSize() const {
  size_t live = end_ - start_;
  if (!error_.ok()) return kMinReadSize;
  // Idle with a kept buffer: the next large frame can arrive in one read.
  if (live == 0 && KeepsLargeBuffer()) return capacity_ - kFrameHeaderBytes;
  if (live < kFrameHeaderBytes) return kMinReadSize;
  uint32_t len = ReadLe32(buf_.get() + start_);
  if (len == 0 || len > max_frame_bytes_) return kMinReadSize;
  size_t need = kFrameHeaderBytes + static_cast<size_t>(len) -
                std::min<size_t>(live, kFrameHeaderBytes + len);
  if (need <= kMinReadSize) return kMinReadSize;
  // Grow by doubling what arrived, or use the room the buffer already has.
  return std::min(need, std::max({kMinReadSize, live, capacity_ - end_}));
}

Status FrameReader::Next(std::string_view* payload) {
  *payload = std::string_view();
  if (!error_.ok()) return error_;
  size_t live = end_ - start_;
  if (live < kFrameHeaderBytes) return Status::OK();
  uint32_t len = ReadLe32(buf_.get() + start_);
  if (len == 0) {
    error_ = Status::Corruption("frame with a zero length prefix");
    return error_;
  }
  if (len > max_frame_bytes_) {
    error_ =
        Status::ResourceExhausted("frame length " + std::to_string(len) + " exceeds the limit of " +
                                  std::to_string(max_frame_bytes_) + " bytes");
    return error_;
  }
  if (live - kFrameHeaderBytes < len) return Status::OK();
  *payload = std::string_view(buf_.get() + start_ + kFrameHeaderBytes, len);
  start_ += kFrameHeaderBytes + len;
  if (kFrameHeaderBytes + static_cast<size_t>(len) < capacity_ / 4) {
    if (small_frames_ < kSmallFramesBeforeShrink) ++small_frames_;
  } else {
    small_frames_ = 0;
  }
  return Status::OK();
}

}  // namespace pace::net
