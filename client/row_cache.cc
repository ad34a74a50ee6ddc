#include "client/row_cache.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace pace::client {

namespace {

template <typename T>
void AddCellTyped(char* data, uint32_t col, double value) {
  T x;
  std::memcpy(&x, data + sizeof(T) * col, sizeof(T));
  if constexpr (std::is_integral_v<T>) {
    // Wrap like AddRow does for integers.
    using U = std::make_unsigned_t<T>;
    x = static_cast<T>(static_cast<U>(x) + static_cast<U>(static_cast<T>(value)));
  } else {
    x = static_cast<T>(x + static_cast<T>(value));
  }
  std::memcpy(data + sizeof(T) * col, &x, sizeof(T));
}

void AddCell(ElementType t, char* data, uint32_t col, double value) {
  switch (t) {
    case ElementType::kF32:
      AddCellTyped<float>(data, col, value);
      break;
    case ElementType::kF64:
      AddCellTyped<double>(data, col, value);
      break;
    case ElementType::kI32:
      AddCellTyped<int32_t>(data, col, value);
      break;
    case ElementType::kI64:
      AddCellTyped<int64_t>(data, col, value);
      break;
  }
}

}  // namespace

CacheEntry* CacheStripe::FindOrCreate(const RowKey& key, uint32_t shard, TableState* table) {
  auto [it, inserted] = map.try_emplace(key);
  CacheEntry* e = &it->second;
  if (inserted) {
    e->key = key;
    e->shard = shard;
    e->table = table;
  }
  return e;
}

void CacheStripe::AddDelta(CacheEntry* e, ClockT c, std::string_view delta) {
  const RowFormat& f = e->table->format;
  PendingDelta* p = e->FindPending(c);
  if (p == nullptr) {
    e->pending.push_back(PendingDelta{c, std::string(delta)});
    auto it =
        std::find_if(dirty.rbegin(), dirty.rend(), [c](const auto& d) { return d.first == c; });
    if (it == dirty.rend()) {
      dirty.emplace_back(c, std::vector<CacheEntry*>{e});
    } else {
      it->second.push_back(e);
    }
  } else if (f.kind == RowKind::kDense) {
    AddDenseElements(f.type, p->delta.data(), delta.data(), f.width);
  } else {
    AddRowUnchecked(f, &p->delta, delta);
  }
  if (e->has_value) {
    if (f.kind == RowKind::kDense) {
      AddDenseElements(f.type, e->value.data(), delta.data(), f.width);
    } else {
      size_t before = e->value.capacity();
      AddRowUnchecked(f, &e->value, delta);
      bytes = bytes - before + e->value.capacity();
    }
  }
}

void CacheStripe::AddDenseCell(CacheEntry* e, ClockT c, uint32_t col, double value) {
  const RowFormat& f = e->table->format;
  PendingDelta* p = e->FindPending(c);
  if (p == nullptr) {
    std::string zero = ZeroRow(f);
    AddDelta(e, c, zero);  // registers the clock; adds zeros to the value
    p = e->FindPending(c);
  }
  AddCell(f.type, p->delta.data(), col, value);
  if (e->has_value) AddCell(f.type, e->value.data(), col, value);
}

void CacheStripe::InstallValue(CacheEntry* e, std::string server_value, Version v, ClockT a) {
  const RowFormat& f = e->table->format;
  size_t old_charge = e->has_value ? Charge(*e) : 0;
  e->value = std::move(server_value);
  for (const PendingDelta& p : e->pending) {
    if (p.clock >= a) AddRowUnchecked(f, &e->value, p.delta);
  }
  e->version = v;
  e->applied = a;
  if (!e->has_value) {
    e->has_value = true;
    e->ring_index = static_cast<int32_t>(ring.size());
    ring.push_back(e);
  }
  e->referenced = true;
  bytes = bytes - old_charge + Charge(*e);
}

void CacheStripe::DropValue(CacheEntry* e) {
  if (!e->has_value) return;
  bytes -= Charge(*e);
  size_t idx = static_cast<size_t>(e->ring_index);
  CacheEntry* last = ring.back();
  ring[idx] = last;
  last->ring_index = static_cast<int32_t>(idx);
  ring.pop_back();
  e->ring_index = -1;
  e->has_value = false;
  std::string().swap(e->value);
}

void CacheStripe::MaybeErase(CacheEntry* e) {
  if (e->has_value || !e->pending.empty() || e->pinned()) return;
  map.erase(e->key);
}

void CacheStripe::PurgeAcked(const RowKey& key, ClockT c) {
  CacheEntry* e = Find(key);
  if (e == nullptr) return;
  auto& pd = e->pending;
  pd.erase(
      std::remove_if(pd.begin(), pd.end(), [c](const PendingDelta& p) { return p.clock <= c; }),
      pd.end());
  MaybeErase(e);
}

std::vector<CacheEntry*> CacheStripe::TakeDirty(ClockT c) {
  for (auto it = dirty.begin(); it != dirty.end(); ++it) {
    if (it->first == c) {
      std::vector<CacheEntry*> out = std::move(it->second);
      dirty.erase(it);
      return out;
    }
  }
  return {};
}

}  // namespace pace::client
