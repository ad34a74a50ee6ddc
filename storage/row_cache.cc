#include "storage/row_cache.h"

#include <utility>

namespace pace {

namespace {

// Heap bytes behind a std::string (0 while it fits the inline buffer).
size_t HeapBytes(const std::string& s) {
  return s.capacity() > std::string().capacity() ? s.capacity() + 1 : 0;
}

}  // namespace

size_t RowCache::KeyHash::operator()(const Key& k) const {
  uint64_t h = k.row * 0x9E3779B97F4A7C15ull ^ (uint64_t{k.table} << 32 | k.table);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return static_cast<size_t>(h);
}

RowCache::RowCache(size_t capacity_bytes) : capacity_(capacity_bytes) {}

size_t RowCache::ChargeOf(const CachedRow& v) {
  return kEntryOverhead + HeapBytes(v.sum) + HeapBytes(v.init);
}

CachedRow* RowCache::Lookup(uint32_t table, uint64_t row) {
  auto it = map_.find(Key{table, row});
  if (it == map_.end()) {
    ++counters_.misses;
    return nullptr;
  }
  ++counters_.hits;
  if (it->second != lru_.begin()) lru_.splice(lru_.begin(), lru_, it->second);
  return &it->second->value;
}

CachedRow* RowCache::Peek(uint32_t table, uint64_t row) {
  auto it = map_.find(Key{table, row});
  return it == map_.end() ? nullptr : &it->second->value;
}

void RowCache::Insert(uint32_t table, uint64_t row, CachedRow value) {
  const Key key{table, row};
  const size_t charge = ChargeOf(value);
  auto it = map_.find(key);
  if (it != map_.end()) EraseIt(it->second);
  if (charge > capacity_) return;
  lru_.push_front(Entry{key, charge, std::move(value)});
  map_.emplace(key, lru_.begin());
  bytes_ += charge;
  ++counters_.inserts;
  EvictToCapacity();
}

void RowCache::Recharge(uint32_t table, uint64_t row) {
  auto it = map_.find(Key{table, row});
  if (it == map_.end()) return;
  Entry& e = *it->second;
  const size_t charge = ChargeOf(e.value);
  bytes_ = bytes_ - e.charge + charge;
  e.charge = charge;
  EvictToCapacity();
}

void RowCache::Erase(uint32_t table, uint64_t row) {
  auto it = map_.find(Key{table, row});
  if (it != map_.end()) EraseIt(it->second);
}

void RowCache::EraseTable(uint32_t table) {
  for (auto it = lru_.begin(); it != lru_.end();) {
    auto next = std::next(it);
    if (it->key.table == table) EraseIt(it);
    it = next;
  }
}

void RowCache::Clear() {
  map_.clear();
  lru_.clear();
  bytes_ = 0;
}

void RowCache::EraseIt(List::iterator it) {
  bytes_ -= it->charge;
  map_.erase(it->key);
  lru_.erase(it);
}

void RowCache::EvictToCapacity() {
  while (bytes_ > capacity_ && !lru_.empty()) {
    EraseIt(std::prev(lru_.end()));
    ++counters_.evictions;
  }
}

}  // namespace pace
