#include "storage/rocks_status.h"

#include <string>

namespace pace {

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status::OK();
  std::string msg = std::string(what) + ": " + s.ToString();
  switch (s.code()) {
    case rocksdb::Status::kNotFound:
      return Status::NotFound(msg);
    case rocksdb::Status::kCorruption:
      return Status::Corruption(msg);
    case rocksdb::Status::kNotSupported:
      return Status::Unimplemented(msg);
    case rocksdb::Status::kInvalidArgument:
      return Status::InvalidArgument(msg);
    case rocksdb::Status::kIOError:
      return Status::IOError(msg);
    case rocksdb::Status::kMergeInProgress:
    case rocksdb::Status::kIncomplete:
    case rocksdb::Status::kBusy:
    case rocksdb::Status::kTryAgain:
      return Status::Unavailable(msg);
    case rocksdb::Status::kTimedOut:
      return Status::TimedOut(msg);
    case rocksdb::Status::kAborted:
    case rocksdb::Status::kShutdownInProgress:
      return Status::Aborted(msg);
    case rocksdb::Status::kColumnFamilyDropped:
      return Status::FailedPrecondition(msg);
    default:
      return Status::IOError(msg);
  }
}

}  // namespace pace
