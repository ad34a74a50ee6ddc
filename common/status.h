// Status and StatusOr<T>: the one error type of PaceDB.
//
// A Status is either OK or carries a code and a message. Codes are stable
// numbers that travel on the wire (net/) and appear in logs; new codes are only
// appended. Status is cheap to copy when OK (no allocation).
//
// Thread-safety: a Status is a value; distinct objects may be used from
// different threads without synchronization.
#ifndef PACE_COMMON_STATUS_H_
#define PACE_COMMON_STATUS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace pace {

// Wire-stable status codes. Never renumber; only append.
enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument = 1,     // caller error: bad flag, bad schema, wrong width
  kNotFound = 2,            // unknown table, missing file
  kAlreadyExists = 3,       // table name taken with a different schema
  kCorruption = 4,          // bytes on disk or on the wire fail validation
  kIOError = 5,             // the OS or RocksDB failed
  kUnavailable = 6,         // peer down, connection lost; retrying may help
  kTimedOut = 7,            // a deadline passed
  kFailedPrecondition = 8,  // state does not allow the operation (e.g. clock gap)
  kPermissionDenied = 9,    // wrong token
  kOutOfRange = 10,         // value outside a permitted range
  kResourceExhausted = 11,  // frame too large, budget exceeded
  kAborted = 12,            // shut down while the operation was pending
  kUnimplemented = 13,
  kInternal = 14,      // a bug
  kIncompatible = 15,  // wrong wire or on-disk format version
};

// Returns a short name such as "InvalidArgument".
std::string_view StatusCodeName(StatusCode code);
// True if `raw` is a known StatusCode value (for decoding codes off the wire).
bool IsKnownStatusCode(uint8_t raw);

class [[nodiscard]] Status {
 public:
  Status() noexcept = default;
  Status(StatusCode code, std::string_view msg);
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string_view m) { return {StatusCode::kInvalidArgument, m}; }
  static Status NotFound(std::string_view m) { return {StatusCode::kNotFound, m}; }
  static Status AlreadyExists(std::string_view m) { return {StatusCode::kAlreadyExists, m}; }
  static Status Corruption(std::string_view m) { return {StatusCode::kCorruption, m}; }
  static Status IOError(std::string_view m) { return {StatusCode::kIOError, m}; }
  static Status Unavailable(std::string_view m) { return {StatusCode::kUnavailable, m}; }
  static Status TimedOut(std::string_view m) { return {StatusCode::kTimedOut, m}; }
  static Status FailedPrecondition(std::string_view m) {
    return {StatusCode::kFailedPrecondition, m};
  }
  static Status PermissionDenied(std::string_view m) { return {StatusCode::kPermissionDenied, m}; }
  static Status OutOfRange(std::string_view m) { return {StatusCode::kOutOfRange, m}; }
  static Status ResourceExhausted(std::string_view m) {
    return {StatusCode::kResourceExhausted, m};
  }
  static Status Aborted(std::string_view m) { return {StatusCode::kAborted, m}; }
  static Status Unimplemented(std::string_view m) { return {StatusCode::kUnimplemented, m}; }
  static Status Internal(std::string_view m) { return {StatusCode::kInternal, m}; }
  static Status Incompatible(std::string_view m) { return {StatusCode::kIncompatible, m}; }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // The message without the code name; empty when OK.
  const std::string& message() const;
  // "OK" or "<CodeName>: <message>".
  std::string ToString() const;

  // Returns a copy whose message is "<prefix>: <message>"; OK stays OK.
  Status WithPrefix(std::string_view prefix) const;

  bool IsNotFound() const { return code() == StatusCode::kNotFound; }
  bool IsUnavailable() const { return code() == StatusCode::kUnavailable; }

  // Explicitly drops a Status. Greppable: every ignored error is a decision.
  void IgnoreError() const {}

 private:
  struct Rep {
    StatusCode code;
    std::string msg;
  };
  std::unique_ptr<Rep> rep_;
};

inline bool operator==(const Status& a, const Status& b) {
  return a.code() == b.code() && a.message() == b.message();
}

// StatusOr<T> holds either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  // REQUIRES: !s.ok()
  StatusOr(Status s) : status_(std::move(s)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Status::Internal("StatusOr constructed from OK status");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok()
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace pace

#define PACE_CONCAT_INNER_(a, b) a##b
#define PACE_CONCAT_(a, b) PACE_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` yields a non-OK Status.
#define RETURN_IF_ERROR(expr)                    \
  do {                                           \
    ::pace::Status _pace_status = (expr);        \
    if (!_pace_status.ok()) return _pace_status; \
  } while (0)

// ASSIGN_OR_RETURN(lhs, expr): evaluates a StatusOr; returns its Status on
// error, else moves the value into `lhs` (which may be a declaration).
#define ASSIGN_OR_RETURN(lhs, expr) \
  PACE_ASSIGN_OR_RETURN_IMPL_(PACE_CONCAT_(_pace_statusor_, __LINE__), lhs, expr)
#define PACE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#endif  // PACE_COMMON_STATUS_H_
