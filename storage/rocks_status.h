// Conversion of rocksdb::Status into pace::Status. Only storage/ sees RocksDB
// types; every RocksDB error crosses the module border through FromRocks().
#ifndef PACE_STORAGE_ROCKS_STATUS_H_
#define PACE_STORAGE_ROCKS_STATUS_H_

#include <rocksdb/status.h>

#include <string_view>

#include "common/status.h"

namespace pace {

// Maps a RocksDB status to the closest pace::StatusCode; the message is
// "<what>: <rocksdb message>". OK maps to OK.
Status FromRocks(const rocksdb::Status& s, std::string_view what);

}  // namespace pace

#endif  // PACE_STORAGE_ROCKS_STATUS_H_
