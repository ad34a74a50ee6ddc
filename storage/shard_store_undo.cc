// ShardStore: the undo records of incomplete clocks (docs/storage-format.md
// section 4). A part that does not complete its clock is applied and kept as
// an undo record in the same commit; the clock's completion deletes its
// records in its own commit. When another process of the client starts, the
// parts are taken back: their negation is applied, the parts reset and the
// records deleted, as one group commit.
#include <errno.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <rocksdb/write_batch.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/replace_file.h"
#include "storage/clock_log.h"
#include "storage/key_format.h"
#include "storage/rocks_status.h"
#include "storage/row_merge.h"
#include "storage/shard_store.h"
#include "storage/shard_store_impl.h"

namespace pace {

namespace fs = std::filesystem;
namespace sf = storage_format;

rocksdb::Status ShardStore::Impl::AddUndoWrites(const UndoWrites& undo,
                                                rocksdb::WriteBatch* batch) {
  for (const auto& [client, parts] : undo.clears) {
    for (uint32_t p = 0; p < parts; ++p) {
      rocksdb::Status s = batch->Delete(sf::UndoKey(client, p));
      if (!s.ok()) return s;
    }
  }
  for (const UndoWrites::Put& p : undo.puts) {
    sf::UndoPointer ptr = p.log;
    if (!ptr.in_log) {
      ptr.bytes = p.record.size();
      ptr.crc = Crc32c(0, p.record.data(), p.record.size());
    }
    ptr.clock = p.clock;
    ptr.incarnation = p.incarnation;
    rocksdb::Status s = batch->Put(sf::UndoKey(p.client, p.part), sf::EncodeUndoPointer(ptr));
    if (!s.ok()) return s;
  }
  return rocksdb::Status::OK();
}

Status ShardStore::Impl::WriteUndoFilesLocked(const UndoWrites& undo) {
  bool wrote = false;
  for (const UndoWrites::Put& p : undo.puts) {
    if (p.log.in_log) continue;  // its record is the group's clock log record
    wrote = true;
    RETURN_IF_ERROR(WriteUndoFileLocked(p));
  }
  return wrote ? SyncUndoDirLocked() : Status::OK();
}

Status ShardStore::Impl::WriteUndoFileLocked(const UndoWrites::Put& p) {
  const std::string path = dir_ + "/" + sf::UndoFileName(p.client, p.part);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError("create " + path + ": " + std::strerror(errno));
  const char* data = p.record.data();
  size_t left = p.record.size();
  int err = 0;
  while (left > 0 && err == 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (err == 0 && options_.sync && ::fdatasync(fd) != 0) err = errno;
  ::close(fd);
  if (err != 0) return Status::IOError("write " + path + ": " + std::strerror(err));
  return Status::OK();
}

Status ShardStore::Impl::SyncUndoDirLocked() {
  // The new files' directory entries, before the commit that points to them.
  return options_.sync ? SyncDir(dir_) : Status::OK();
}

void ShardStore::Impl::RemoveUndoFilesLocked(const UndoWrites& undo) {
  for (const auto& [client, parts] : undo.clears) {
    for (uint32_t part = 0; part < parts; ++part) {
      bool rewritten = false;  // by a later clock of the same group
      for (const UndoWrites::Put& p : undo.puts) rewritten |= p.client == client && p.part == part;
      if (rewritten) continue;
      // Best effort: a file no key points to is never read.
      ::unlink((dir_ + "/" + sf::UndoFileName(client, part)).c_str());
    }
  }
}

Status ShardStore::Impl::ReadUndoFile(ClientId client, uint32_t part, const sf::UndoPointer& p,
                                      std::string* out) const {
  const std::string path = dir_ + "/" + sf::UndoFileName(client, part);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Corruption("undo record " + path + ": " + std::strerror(errno));
  out->resize(p.bytes);
  size_t got = 0;
  while (got < p.bytes) {
    const ssize_t n = ::pread(fd, out->data() + got, p.bytes - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got != p.bytes || Crc32c(0, out->data(), out->size()) != p.crc) {
    return Status::Corruption("undo record " + path + " is not the one its key points to (" +
                              std::to_string(got) + " of " + std::to_string(p.bytes) +
                              " bytes, or another checksum)");
  }
  return Status::OK();
}

Status ShardStore::Impl::ReadUndoInLogLocked(const sf::UndoPointer& p, std::string* payload,
                                             sf::UndoRecord* rec) const {
  if (p.log_number != log_state_.number || p.log_offset >= log_state_.end) {
    return Status::Corruption("its undo record points to offset " + std::to_string(p.log_offset) +
                              " of clock log " + std::to_string(p.log_number) +
                              ", which the active log (" + std::to_string(log_state_.number) +
                              ", " + std::to_string(log_state_.end) + " bytes) does not hold");
  }
  std::vector<ClockLogEntry> entries;
  RETURN_IF_ERROR(ReadClockLogRecord(dir_, p.log_number, p.log_offset, log_state_.end, p.log_seq,
                                     payload, &entries));
  if (payload->size() != p.bytes || Crc32c(0, payload->data(), payload->size()) != p.crc) {
    return Status::Corruption("the clock log record its undo key points to is another one (" +
                              std::to_string(payload->size()) + " bytes, " +
                              std::to_string(p.bytes) + " expected, or another checksum)");
  }
  rec->clock = p.clock;
  rec->incarnation = p.incarnation;
  rec->entries.clear();
  rec->entries.reserve(entries.size());
  for (const ClockLogEntry& e : entries) rec->entries.push_back({e.table, e.row, e.bytes});
  return Status::OK();
}

Status ShardStore::Impl::CopyUndoFilesLocked(const std::string& to) {
  for (ClientId c = 0; c < identity_.num_clients; ++c) {
    if (!undo_kept_[c].load()) continue;
    const uint32_t parts = applied_parts_[c].load();
    for (uint32_t part = 0; part < parts; ++part) {
      const std::string name = sf::UndoFileName(c, part);
      std::error_code ec;
      fs::copy_file(dir_ + "/" + name, to + "/" + name, fs::copy_options::overwrite_existing, ec);
      if (ec) return Status::IOError("copy " + dir_ + "/" + name + ": " + ec.message());
    }
  }
  return Status::OK();
}

void ShardStore::Impl::SetClockState(const ClockUpdate& c) {
  undo_kept_[c.client].store(c.undo_kept, std::memory_order_relaxed);
  undo_incarnation_[c.client].store(c.undo_incarnation, std::memory_order_relaxed);
  applied_[c.client].store(c.applied, std::memory_order_release);
  applied_parts_[c.client].store(c.parts, std::memory_order_release);
}

IncompleteClock ShardStore::Impl::IncompleteClockOf(ClientId client) const {
  IncompleteClock ic;
  if (client >= identity_.num_clients || applied_parts_ == nullptr) return ic;
  ic.parts = applied_parts_[client].load(std::memory_order_acquire);
  ic.clock = applied_[client].load(std::memory_order_acquire);
  ic.undoable = undo_kept_[client].load(std::memory_order_relaxed);
  ic.incarnation = undo_incarnation_[client].load(std::memory_order_relaxed);
  return ic;
}

Status ShardStore::Impl::LoadUndoStateLocked() {
  const uint32_t n = identity_.num_clients;
  if (undo_kept_ == nullptr) {
    undo_kept_ = std::make_unique<std::atomic<bool>[]>(n);
    undo_incarnation_ = std::make_unique<std::atomic<uint64_t>[]>(n);
  }
  for (ClientId c = 0; c < n; ++c) {
    bool kept = false;
    uint64_t incarnation = 0;
    if (applied_parts_[c].load() > 0) {
      std::string value;
      rocksdb::Status s = WriterDb()->Get(rocksdb::ReadOptions(), sf::UndoKey(c, 0), &value);
      if (!s.IsNotFound()) {
        RETURN_IF_ERROR(FromRocks(s, "read the undo records of " + dir_));
        sf::UndoPointer rec;
        Status decoded = sf::DecodeUndoPointer(value, &rec);
        if (decoded.ok() && rec.clock == applied_[c].load()) {
          kept = true;
          incarnation = rec.incarnation;
        } else {
          // Left by a build that completed a clock without deleting them
          // (before undo records), or damaged: these parts cannot be undone.
          LOG(WARNING) << dir_ << ": the parts of clock " << applied_[c].load() << " of client "
                       << c << " have no usable undo record ("
                       << (decoded.ok() ? "one of clock " + std::to_string(rec.clock)
                                        : decoded.ToString())
                       << "); they stay applied if another process of the client re-runs it";
        }
      }
    }
    undo_kept_[c].store(kept);
    undo_incarnation_[c].store(incarnation);
  }
  return Status::OK();
}

void ShardStore::Impl::NoteUndoLocked(const BatchRequest& req, BatchAdmission admission,
                                      const AppliedPosition& applied, size_t first,
                                      AdmittedGroup* group, ClockUpdate* update) {
  const ClientId client = req.client;
  auto prev_it = group->undo_next.find(client);
  const UndoState prev = prev_it != group->undo_next.end()
                             ? prev_it->second
                             : UndoState{undo_kept_[client].load(std::memory_order_relaxed),
                                         undo_incarnation_[client].load(std::memory_order_relaxed)};
  const UndoState after = UndoStateAfter(prev, applied, BatchId{req.clock, req.part, req.more},
                                         admission, req.incarnation);
  if (update->parts == 0) {
    // A whole clock, or the part that completes one: the clock's records go
    // (none for a whole clock sent at once: nothing to do, no cost).
    if (applied.parts > 0) {
      auto& puts = group->undo.puts;
      puts.erase(std::remove_if(puts.begin(), puts.end(),
                                [client](const UndoWrites::Put& p) { return p.client == client; }),
                 puts.end());
      group->undo.clears.emplace_back(client, applied.parts);
    }
  } else if (after.kept) {
    // A part with more to come: kept until its clock completes. Its record
    // is written by WriteAdmittedLocked (a file, or the group's log record).
    UndoWrites::Put& put = group->undo.puts.emplace_back();
    put.client = client;
    put.part = req.part;
    put.clock = req.clock;
    put.incarnation = after.incarnation;
    put.first = first;
    put.count = group->deltas.size() - first;
  }
  group->undo_next[client] = after;
  update->undo_kept = after.kept;
  update->undo_incarnation = after.incarnation;
}

bool ShardStore::Impl::UndoInLogLocked(const AdmittedGroup& group) const {
  // The log record holds the group's deltas: it is the part's record if the
  // part is all of them.
  return log_mode_ && options_.durable && group.undo.puts.size() == 1 &&
         group.import_record == nullptr && group.undo.puts[0].first == 0 &&
         group.undo.puts[0].count == group.deltas.size();
}

bool ShardStore::Impl::AnyPartsKeptLocked() const {
  for (ClientId c = 0; c < identity_.num_clients; ++c) {
    if (undo_kept_[c].load(std::memory_order_relaxed) &&
        applied_parts_[c].load(std::memory_order_relaxed) > 0) {
      return true;
    }
  }
  return false;
}

void ShardStore::Impl::EncodeUndoRecords(AdmittedGroup* group) {
  const auto& d = group->deltas;
  for (UndoWrites::Put& put : group->undo.puts) {
    const size_t first = put.first;
    sf::EncodeUndoRecord(
        put.clock, put.incarnation, put.count,
        [&d, first](size_t i) {
          const GroupDelta& g = d[first + i];
          return sf::UndoEntry{g.table, g.row, g.bytes};
        },
        &put.record);
  }
}

Status ShardStore::Impl::MoveUndoOutOfLogLocked() {
  const std::string end = sf::KeySpaceEnd(sf::kUndoPrefix);
  const rocksdb::Slice upper(end);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper;
  std::vector<std::pair<std::string, sf::UndoPointer>> in_log;
  {
    std::unique_ptr<rocksdb::Iterator> it(WriterDb()->NewIterator(ro));
    for (it->Seek(std::string(1, sf::kUndoPrefix)); it->Valid(); it->Next()) {
      sf::UndoPointer ptr;
      if (!sf::DecodeUndoPointer(std::string_view(it->value().data(), it->value().size()), &ptr)
               .ok() ||
          !ptr.in_log) {
        continue;  // a file, or damaged (reported when it is read)
      }
      in_log.emplace_back(it->key().ToString(), ptr);
    }
    RETURN_IF_ERROR(FromRocks(it->status(), "read the undo records of " + dir_));
  }
  if (in_log.empty()) return Status::OK();
  // One record at a time: read from the log, encoded, written to its file;
  // then the directory's sync and the keys that point to the files (the log
  // record stays valid until the restart after this). Holding every moved
  // record at once held a clock's kept parts twice over (8e: ~20 MB at each
  // write-back, and the heap grew by that much every few).
  UndoWrites one;
  one.puts.emplace_back();
  UndoWrites::Put& put = one.puts[0];
  rocksdb::WriteBatch batch;
  std::string payload;
  sf::UndoRecord rec;
  size_t moved = 0;
  for (const auto& [key, ptr] : in_log) {
    ClientId client;
    uint32_t part;
    if (!sf::DecodeUndoKey(key, &client, &part)) continue;
    Status read = ReadUndoInLogLocked(ptr, &payload, &rec);
    if (read.code() == StatusCode::kCorruption) {
      // A damaged record, or one in a log the store no longer holds, cannot
      // be taken back wherever it is kept: the key stays and reads as damaged
      // (the parts stay applied, section 4 of docs/storage-format.md).
      // Failing here would fail every write-back.
      LOG(WARNING) << dir_ << ": the undo record of part " << part << " of client " << client
                   << " cannot be moved out of the clock log: " << read.ToString()
                   << "; left as it is";
      continue;
    }
    RETURN_IF_ERROR(read.WithPrefix("the undo record of part " + std::to_string(part) +
                                    " of client " + std::to_string(client)));
    put.client = client;
    put.part = part;
    put.clock = ptr.clock;
    put.incarnation = ptr.incarnation;
    sf::EncodeUndoRecord(
        ptr.clock, ptr.incarnation, rec.entries.size(), [&rec](size_t i) { return rec.entries[i]; },
        &put.record);
    RETURN_IF_ERROR(WriteUndoFileLocked(put));
    RETURN_IF_ERROR(FromRocks(AddUndoWrites(one, &batch), "build batch"));
    ++moved;
  }
  if (moved == 0) return Status::OK();
  RETURN_IF_ERROR(SyncUndoDirLocked());
  RETURN_IF_ERROR(FromRocks(WriterDb()->Write(write_options_, &batch),
                            "move the undo records out of the clock log of " + dir_));
  LOG(INFO) << dir_ << ": " << moved
            << " undo record(s) of incomplete clocks moved from the clock log to files";
  return Status::OK();
}

Status ShardStore::Impl::AdmitUndoLocked(ClientId client, const IncompleteClock& ic,
                                         AdmittedGroup* group) {
  ReaderLock catalog_lock(&catalog_mu_);
  const std::string who =
      "client " + std::to_string(client) + "'s clock " + std::to_string(ic.clock) + " in " + dir_;
  for (uint32_t part = 0; part < ic.parts; ++part) {
    std::string key_value;
    rocksdb::Status s =
        WriterDb()->Get(rocksdb::ReadOptions(), sf::UndoKey(client, part), &key_value);
    if (s.IsNotFound()) {
      return Status::Corruption("the undo record of part " + std::to_string(part) + " of " + who +
                                " is missing");
    }
    RETURN_IF_ERROR(FromRocks(s, "read the undo records of " + who));
    sf::UndoPointer ptr;
    RETURN_IF_ERROR(sf::DecodeUndoPointer(key_value, &ptr));
    std::string& value = group->stripped_rows.emplace_back();
    sf::UndoRecord rec;
    if (ptr.in_log) {
      RETURN_IF_ERROR(ReadUndoInLogLocked(ptr, &value, &rec)
                          .WithPrefix("part " + std::to_string(part) + " of " + who));
    } else {
      RETURN_IF_ERROR(ReadUndoFile(client, part, ptr, &value));
      RETURN_IF_ERROR(sf::DecodeUndoRecord(value, &rec)
                          .WithPrefix("part " + std::to_string(part) + " of " + who));
    }
    if (rec.clock != ic.clock) {
      return Status::Corruption("the undo record of part " + std::to_string(part) + " of " + who +
                                " is of clock " + std::to_string(rec.clock));
    }
    for (const sf::UndoEntry& e : rec.entries) {
      auto it = by_id_.find(e.table);
      if (it == by_id_.end()) continue;  // dropped since: its rows are gone
      const TableEntry* entry = it->second.get();
      Status valid = ValidateRow(entry->format, e.bytes);
      if (!valid.ok()) {
        return Status::Corruption("the undo record of part " + std::to_string(part) + " of " + who +
                                  ": row " + std::to_string(e.row) + " of table '" +
                                  entry->schema.name + "': " + valid.message());
      }
      std::string& negated = group->stripped_rows.emplace_back(e.bytes);
      NegateRow(entry->format, &negated);
      group->deltas.push_back(GroupDelta{e.table, group->seq++, e.row, entry, negated});
      group->reserve += negated.size() + 32;
    }
  }
  group->clocks.push_back(ClockUpdate{client, ic.clock, 0});
  group->undo_next[client] = UndoState{};
  group->undo.clears.emplace_back(client, ic.parts);
  return Status::OK();
}

Status ShardStore::Impl::UndoIncompleteClock(ClientId client, uint64_t incarnation,
                                             UndoResult* result) {
  PACE_CHECK_STORE_THREAD("UndoIncompleteClock");
  *result = UndoResult();
  RETURN_IF_ERROR(CheckWritable("UndoIncompleteClock"));
  if (client >= identity_.num_clients) {
    return Status::InvalidArgument("client id " + std::to_string(client) + " is not in [0, " +
                                   std::to_string(identity_.num_clients) + ")");
  }
  MutexLock write_lock(&write_mu_);
  if (!failed_.ok()) return failed_;
  const IncompleteClock ic = IncompleteClockOf(client);
  if (!NeedsUndo(ic, incarnation)) return Status::OK();
  AdmittedGroup group;
  Status admitted = AdmitUndoLocked(client, ic, &group);
  if (admitted.code() == StatusCode::kCorruption) {
    // Better served with the parts applied (the client says so) than never.
    LOG(WARNING) << admitted.ToString() << "; the parts stay applied";
    undo_kept_[client].store(false);
    return Status::OK();
  }
  RETURN_IF_ERROR(admitted);
  RETURN_IF_ERROR(WriteAdmittedLocked(&group));
  result->undone = true;
  result->clock = ic.clock;
  result->parts = ic.parts;
  for (const GroupDelta& d : group.deltas) {  // sorted by WriteAdmittedLocked
    if (result->rows.empty() || result->rows.back() != std::make_pair(d.table, d.row)) {
      result->rows.emplace_back(d.table, d.row);
    }
  }
  LOG(INFO) << dir_ << ": took back " << ic.parts << " part(s) of clock " << ic.clock
            << " of client " << client << " (" << result->rows.size()
            << " rows): a process of that client sent them and ended before the clock was "
               "complete; the clock is re-run by the new process";
  return Status::OK();
}

// --- ShardStore: forwarding ---------------------------------------------------

IncompleteClock ShardStore::IncompleteClockOf(ClientId client) const {
  return impl_->IncompleteClockOf(client);
}

Status ShardStore::UndoIncompleteClock(ClientId client, uint64_t incarnation, UndoResult* result) {
  return impl_->UndoIncompleteClock(client, incarnation, result);
}

}  // namespace pace
