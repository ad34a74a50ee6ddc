#include "storage/row_cache.h"

#include <utility>

namespace pace {

namespace {

// Heap bytes behind a std::string (0 while it fits the inline buffer).
size_t HeapBytes(const std::string& s) {
  return s.capacity() > std::string().capacity() ? s.capacity() + 1 : 0;
}

}  // namespace

RowCache::RowCache(size_t capacity_bytes) : capacity_(capacity_bytes) {}

size_t RowCache::ChargeOf(const CachedRow& v) {
  return kEntryOverhead + HeapBytes(v.sum) + HeapBytes(v.init);
}

size_t RowCache::HashOf(uint32_t table, uint64_t row) {
  // Rows r and r + 1 of a block of kBlock consecutive rows get consecutive
  // home slots (blocks are hashed), so a batch or read in row order walks the
  // table nearly sequentially instead of missing the CPU cache once per row.
  constexpr uint64_t kBlock = 8;
  uint64_t h = (row / kBlock) * 0x9E3779B97F4A7C15ull ^ (uint64_t{table} << 32 | table);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return static_cast<size_t>(h * kBlock + row % kBlock);
}

uint32_t RowCache::FindNode(uint32_t table, uint64_t row) const {
  const Slot* s = slots_.Find(
      HashOf(table, row), [table, row](const Slot& x) { return x.row == row && x.table == table; });
  return s == nullptr ? kNil : s->node;
}

void RowCache::Unlink(uint32_t n) {
  Node& x = nodes_[n];
  if (x.dirty) {
    if (x.prev != kNil) {
      nodes_[x.prev].next = x.next;
    } else {
      dirty_head_ = x.next;
    }
    if (x.next != kNil) nodes_[x.next].prev = x.prev;
    x.prev = x.next = kNil;
    return;
  }
  if (x.prev != kNil) {
    nodes_[x.prev].next = x.next;
  } else {
    head_ = x.next;
  }
  if (x.next != kNil) {
    nodes_[x.next].prev = x.prev;
  } else {
    tail_ = x.prev;
  }
  x.prev = x.next = kNil;
}

uint32_t RowCache::AddNode(uint32_t table, uint64_t row, CachedRow value, size_t charge) {
  uint32_t n;
  if (!free_nodes_.empty()) {
    n = free_nodes_.back();
    free_nodes_.pop_back();
  } else {
    n = static_cast<uint32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  Node& x = nodes_[n];
  x.table = table;
  x.row = row;
  x.charge = charge;
  x.dirty = false;
  x.value = std::move(value);
  PushFront(n);
  slots_.Insert(HashOf(table, row), Slot{row, table, n});
  bytes_ += charge;
  ++counters_.inserts;
  return n;
}

uint32_t RowCache::PinDirty(uint32_t table, uint64_t row) {
  const uint32_t n = FindNode(table, row);
  if (n == kNil) return kNoHandle;
  MakeDirty(n);
  return n;
}

void RowCache::MakeDirty(uint32_t n) {
  Node& x = nodes_[n];
  if (x.dirty) return;
  Unlink(n);
  x.dirty = true;
  x.prev = kNil;
  x.next = dirty_head_;
  if (dirty_head_ != kNil) nodes_[dirty_head_].prev = n;
  dirty_head_ = n;
  dirty_bytes_ += x.charge;
  ++dirty_entries_;
}

uint32_t RowCache::InsertDirty(uint32_t table, uint64_t row, CachedRow value) {
  const uint32_t old = FindNode(table, row);
  if (old != kNil) EraseNode(old);
  const size_t charge = ChargeOf(value);
  const uint32_t n = AddNode(table, row, std::move(value), charge);
  MakeDirty(n);
  EvictToCapacity();
  return n;
}

void RowCache::RechargeDirty(uint32_t handle) {
  Node& x = nodes_[handle];
  const size_t charge = ChargeOf(x.value);
  bytes_ = bytes_ - x.charge + charge;
  dirty_bytes_ = dirty_bytes_ - x.charge + charge;
  x.charge = charge;
  EvictToCapacity();
}

void RowCache::CleanAll() {
  while (dirty_head_ != kNil) {
    const uint32_t n = dirty_head_;
    if (nodes_[n].value.delta_only) {
      EraseNode(n);
      continue;
    }
    Unlink(n);
    nodes_[n].dirty = false;
    PushFront(n);
  }
  dirty_bytes_ = 0;
  dirty_entries_ = 0;
  EvictToCapacity();
}

void RowCache::PushFront(uint32_t n) {
  Node& x = nodes_[n];
  x.prev = kNil;
  x.next = head_;
  if (head_ != kNil) nodes_[head_].prev = n;
  head_ = n;
  if (tail_ == kNil) tail_ = n;
}

CachedRow* RowCache::Lookup(uint32_t table, uint64_t row) {
  const uint32_t n = FindNode(table, row);
  if (n == kNil) {
    ++counters_.misses;
    return nullptr;
  }
  ++counters_.hits;
  if (n != head_ && !nodes_[n].dirty) {
    Unlink(n);
    PushFront(n);
  }
  return &nodes_[n].value;
}

CachedRow* RowCache::Peek(uint32_t table, uint64_t row) {
  const uint32_t n = FindNode(table, row);
  return n == kNil ? nullptr : &nodes_[n].value;
}

void RowCache::Insert(uint32_t table, uint64_t row, CachedRow value) {
  const size_t charge = ChargeOf(value);
  const uint32_t old = FindNode(table, row);
  if (old != kNil && nodes_[old].dirty) return;  // newer than what a reader read
  if (old != kNil) EraseNode(old);
  if (charge > capacity_) return;
  AddNode(table, row, std::move(value), charge);
  EvictToCapacity();
}

void RowCache::Recharge(uint32_t table, uint64_t row) {
  const uint32_t n = FindNode(table, row);
  if (n == kNil) return;
  Node& x = nodes_[n];
  const size_t charge = ChargeOf(x.value);
  bytes_ = bytes_ - x.charge + charge;
  if (x.dirty) dirty_bytes_ = dirty_bytes_ - x.charge + charge;
  x.charge = charge;
  EvictToCapacity();
}

void RowCache::Erase(uint32_t table, uint64_t row) {
  const uint32_t n = FindNode(table, row);
  if (n != kNil) EraseNode(n);
}

void RowCache::EraseTable(uint32_t table) {
  for (uint32_t list : {head_, dirty_head_}) {
    for (uint32_t n = list; n != kNil;) {
      const uint32_t next = nodes_[n].next;
      if (nodes_[n].table == table) EraseNode(n);
      n = next;
    }
  }
}

void RowCache::Clear() {
  nodes_.clear();
  free_nodes_.clear();
  slots_.Clear();
  head_ = tail_ = dirty_head_ = kNil;
  bytes_ = dirty_bytes_ = dirty_entries_ = 0;
}

void RowCache::EraseNode(uint32_t n) {
  Node& x = nodes_[n];
  bytes_ -= x.charge;
  const uint32_t table = x.table;
  const uint64_t row = x.row;
  slots_.Erase(HashOf(table, row),
               [table, row](const Slot& s) { return s.row == row && s.table == table; });
  Unlink(n);
  if (x.dirty) {
    dirty_bytes_ -= x.charge;
    --dirty_entries_;
    x.dirty = false;
  }
  x.value = CachedRow();  // frees its strings now
  x.charge = 0;
  free_nodes_.push_back(n);
}

void RowCache::EvictToCapacity() {
  while (bytes_ > capacity_ && tail_ != kNil) {
    EraseNode(tail_);
    ++counters_.evictions;
  }
}

}  // namespace pace
