#include "client/vap_gate.h"

namespace pace {
namespace client {

void VapGate::Register(const TableSchema& schema) {
  if (schema.consistency != Consistency::kVap) return;
  MutexLock l(&mu_);
  tables_[schema.id] = VapTable{RowFormat::Of(schema), schema.value_bound};
  active_.store(true, std::memory_order_release);
}

void VapGate::Sealed(ClockT c, const std::vector<std::vector<net::Apply>>& parts,
                     const std::vector<uint32_t>& last_part) {
  if (!active()) return;
  MutexLock l(&mu_);
  for (uint32_t k = 0; k < parts.size(); ++k) {
    // SendBatch numbers shard k's parts so that the last is last_part[k].
    uint32_t part = last_part[k] + 1 - static_cast<uint32_t>(parts[k].size());
    for (const net::Apply& a : parts[k]) {
      for (const net::DeltaRow& u : a.updates) {
        auto it = tables_.find(u.table);
        if (it == tables_.end()) continue;
        ledger_.Add(k, c, part, RowKey{u.table, u.row}, AbsSum(it->second.format, u.bytes),
                    it->second.bound);
      }
      ++part;
    }
  }
}

void VapGate::Acked(uint32_t shard, ClockT through, uint32_t parts) {
  if (!active()) return;
  MutexLock l(&mu_);
  ledger_.Acked(shard, through, parts);
}

bool VapGate::WithinBound() const {
  if (!active()) return true;
  MutexLock l(&mu_);
  return ledger_.WithinBound();
}

double VapGate::MaxInFlight() const {
  if (!active()) return 0;
  MutexLock l(&mu_);
  return ledger_.MaxInFlight();
}

}  // namespace client
}  // namespace pace
