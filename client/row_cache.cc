#include "client/row_cache.h"

#include <glog/logging.h>

#include <algorithm>

#include "consistency/client_engine.h"

namespace pace::client {

CacheEntry* CacheStripe::FindOrCreate(const RowKey& key, uint32_t shard, TableState* table) {
  const size_t hash = RowKeyHash()(key);
  CacheEntry* e = map.Find(key, hash);
  if (e == nullptr) {
    e = map.Insert(key, hash);
    e->shard = static_cast<uint16_t>(shard);
    e->table = table;
  }
  return e;
}

template <typename Fill>
void CacheStripe::OpenDelta(CacheEntry* e, ClockT c, size_t size, Fill&& fill) {
  AddOpenBytes(size, 0);
  if (!e->has_open) {
    e->open.clock = c;
    e->open.sealed = false;
    fill(&e->open.delta);
    e->has_open = true;
  } else {
    // A later clock's delta while the open slot holds an earlier one (a
    // worker a clock ahead): it takes a kept buffer too, or the buffers
    // its seal keeps would pile up to the spares' bound.
    PendingDelta& added = e->pending.push_back(PendingDelta{c, std::string(), {}, 0, false});
    fill(&added.delta);
  }
  auto it = std::find_if(dirty.rbegin(), dirty.rend(), [c](const auto& d) { return d.clock == c; });
  if (it == dirty.rend()) {
    dirty.push_back(DirtyClock{c, std::vector<CacheEntry*>{e}, size});
  } else {
    it->entries.push_back(e);
    it->bytes += size;
  }
}

void CacheStripe::OpenZeroDelta(CacheEntry* e, ClockT c, size_t size) {
  DCHECK(e->FindPending(c) == nullptr);
  OpenDelta(e, c, size, [&](std::string* buf) REQUIRES(mu) { AssignZeroInSpareDelta(buf, size); });
}

void CacheStripe::AddDelta(CacheEntry* e, ClockT c, std::string_view delta) {
  const RowFormat& f = e->table->format;
  PendingDelta* p = e->FindPending(c);
  if (p == nullptr) {
    OpenDelta(e, c, delta.size(),
              [&](std::string* buf) REQUIRES(mu) { AssignInSpareDelta(buf, delta); });
  } else if (f.kind == RowKind::kDense) {
    AddDenseElements(f.type, p->delta.data(), delta.data(), f.width);
  } else {
    const size_t before = p->delta.size();
    AddRowUnchecked(f, &p->delta, delta);  // a sparse delta may grow
    AddOpenBytes(p->delta.size(), before);
    auto it =
        std::find_if(dirty.rbegin(), dirty.rend(), [c](const auto& d) { return d.clock == c; });
    if (it != dirty.rend()) it->bytes = it->bytes - before + p->delta.size();
  }
}

void CacheStripe::AddDenseCell(CacheEntry* e, ClockT c, uint32_t col, double value) {
  const RowFormat& f = e->table->format;
  PendingDelta* p = e->FindPending(c);
  if (p == nullptr) {
    AddDelta(e, c, ZeroRow(f));  // registers the clock
    p = e->FindPending(c);
  }
  ::pace::AddDenseCell(f.type, p->delta.data(), col, value);
}

const PendingDelta* CacheStripe::Seal(CacheEntry* e, ClockT c, uint32_t part, ByteArena* arena) {
  PendingDelta* p = e->FindPending(c);
  if (p == nullptr) return nullptr;
  e->sent = true;
  AddOpenBytes(0, p->delta.size());
  // A value's (applied, applied_parts) never exceeds what was sent, so a
  // newly sealed (clock, part) always comes after it: it belongs in the value.
  if (e->has_value) {
    size_t before = e->value.capacity();
    const char* data = e->value.data();
    AddRowUnchecked(e->table->format, &e->value, p->delta);
    bytes = bytes - before + e->value.capacity();
    if (e->value.data() != data) map.SetValueHint(e->key, RowKeyHash()(e->key), e->value.data());
  }
  const std::string_view sealed = arena->Add(p->delta);
  if (p != &e->open) {  // an open delta of a clock before the open slot's (rare)
    p->sealed = true;
    p->part = part;
    p->sealed_bytes = sealed;
    GiveSpareDelta(&p->delta);
    return p;
  }
  // The sealed delta joins the pending ones; the open slot's buffer is kept
  // for the stripe's next open delta (or, under a budget, freed), and the
  // slot takes another open delta of this row if there is one.
  e->pending.push_back(PendingDelta{c, std::string(), sealed, part, true});
  e->has_open = false;
  GiveSpareDelta(&e->open.delta);
  for (size_t i = 0; i + 1 < e->pending.size(); ++i) {
    if (!e->pending[i].sealed) {
      e->open.clock = e->pending[i].clock;
      e->open.delta.swap(e->pending[i].delta);
      e->has_open = true;
      e->pending.erase(e->pending.begin() + i);
      break;
    }
  }
  return &e->pending.back();
}

void CacheStripe::InstallValue(CacheEntry* e, std::string server_value, Version v, ClockT a,
                               uint32_t parts) {
  const RowFormat& f = e->table->format;
  client_engine::Rebase(e->pending, AppliedPosition{a, parts}, [&](const PendingDelta& p) {
    AddRowUnchecked(f, &server_value, p.bytes());
  });
  if (e->lease_owner == 0) {
    CommitValue(e, std::move(server_value), v, a, parts);
    return;
  }
  // Leased: its worker reads the value without the lock. The highest
  // version waits for the release (e->version, which would refuse an older
  // arrival, does not change until then).
  auto [it, added] = deferred.try_emplace(e);
  if (!added && it->second.version > v) return;
  it->second = DeferredInstall{std::move(server_value), v, a, parts};
}

void CacheStripe::Release(CacheEntry* e) {
  if (e->lease_owner == 0) return;
  e->lease_owner = 0;
  --leases;
  AddLeasedBytes(0, e->table->format.dense_bytes());
  if (deferred.empty()) return;
  auto it = deferred.find(e);
  if (it == deferred.end()) return;
  DeferredInstall d = std::move(it->second);
  deferred.erase(it);
  CommitValue(e, std::move(d.value), d.version, d.applied, d.parts);
}

void CacheStripe::ReturnDirty(ClockT c, const std::vector<CacheEntry*>& entries) {
  if (entries.empty()) return;
  auto it = std::find_if(dirty.rbegin(), dirty.rend(), [c](const auto& d) { return d.clock == c; });
  if (it == dirty.rend()) {
    dirty.push_back(DirtyClock{c, {}, 0});
    it = dirty.rbegin();
  }
  for (CacheEntry* e : entries) {
    it->entries.push_back(e);
    if (const PendingDelta* p = e->FindPending(c)) it->bytes += p->delta.size();
  }
}

void CacheStripe::CommitValue(CacheEntry* e, std::string value, Version v, ClockT a,
                              uint32_t parts) {
  size_t old_charge = e->has_value ? Charge(*e) : 0;
  e->value = std::move(value);
  e->version = v;
  e->applied = a;
  e->applied_parts = parts;
  if (!e->has_value) {
    e->has_value = true;
    e->ring_index = static_cast<int32_t>(ring.size());
    ring.push_back(e);
  }
  e->referenced = true;
  bytes = bytes - old_charge + Charge(*e);
  map.SetValueHint(e->key, RowKeyHash()(e->key), e->value.data());
}

std::string_view ReaderView(const CacheEntry& e, const RowFormat& f, std::string* scratch) {
  if (!e.has_open) return e.value;
  scratch->assign(e.value);
  AddRowUnchecked(f, scratch, e.open.delta);
  for (const PendingDelta& p : e.pending) {
    if (!p.sealed) AddRowUnchecked(f, scratch, p.delta);
  }
  return *scratch;
}

void CacheStripe::DropValue(CacheEntry* e) {
  if (!e->has_value || e->lease_owner != 0) return;
  bytes -= Charge(*e);
  size_t idx = static_cast<size_t>(e->ring_index);
  CacheEntry* last = ring.back();
  ring[idx] = last;
  last->ring_index = static_cast<int32_t>(idx);
  ring.pop_back();
  e->ring_index = -1;
  e->has_value = false;
  std::string().swap(e->value);
  map.SetValueHint(e->key, RowKeyHash()(e->key), nullptr);
}

void CacheStripe::MaybeErase(CacheEntry* e) {
  if (e->has_value || e->HoldsDeltas() || e->pinned()) return;
  // Without the entry the client could no longer tell this row from one the
  // shard has no record of.
  if (e->sent && e->table != nullptr) e->table->rows_local.store(false, std::memory_order_relaxed);
  RowKey key = e->key;
  map.Erase(key, RowKeyHash()(key));
}

size_t CacheStripe::PurgeAcked(const RowKey& key, size_t hash, ClockT c, uint32_t part) {
  CacheEntry* e = map.Lookup(key, hash);  // the value is not read
  if (e == nullptr) return 0;
  auto& pd = e->pending;
  auto acked = [c, part](const PendingDelta& p) { return client_engine::AckedBy(p, c, part); };
  size_t purged = 0;
  for (const PendingDelta& p : pd) {
    if (acked(p)) purged += p.bytes().size();
  }
  pd.erase(std::remove_if(pd.begin(), pd.end(), acked), pd.end());
  // Storage never shrinks by itself, so a row would keep the largest
  // backlog it ever had for the rest of the job: the room an outage gave it
  // (one pending delta per clock it was touched in). More rows reach a new
  // high-water mark as the job goes on (the soak's client heap crept with
  // the job's length). So a row with no more than kKeptPendingCapacity left
  // keeps room for that many (a row whose Acks come after its next clock was
  // sealed goes from two pending deltas to one to none and back: giving the
  // room back each time made that a free and an allocation per row per
  // clock), and under a memory budget one with nothing left keeps only its
  // inline room.
  if (pd.size() <= kKeptPendingCapacity) {
    pd.ShrinkTo(pd.empty() && !recycle_delta_buffers ? 1 : kKeptPendingCapacity);
  }
  MaybeErase(e);
  return purged;
}

void CacheStripe::TakeDirty(ClockT c, size_t max, std::vector<CacheEntry*>* out) {
  out->clear();
  auto it = std::find_if(dirty.begin(), dirty.end(), [c](const auto& d) { return d.clock == c; });
  if (it == dirty.end()) return;
  std::vector<CacheEntry*>& entries = it->entries;
  const size_t n = std::min(max, entries.size());
  out->assign(entries.end() - static_cast<long>(n), entries.end());
  entries.resize(entries.size() - n);
  if (entries.empty()) {
    dirty.erase(it);
    return;
  }
  for (size_t i = 0; i < out->size(); ++i) {
    if (i + 8 < out->size()) PrefetchEntryLines((*out)[i + 8]);
    const PendingDelta* p = (*out)[i]->FindPending(c);
    if (p != nullptr) it->bytes -= std::min(it->bytes, p->delta.size());
  }
}

}  // namespace pace::client
