#include "client/vap_gate.h"

namespace pace {
namespace client {

void VapGate::Register(const TableSchema& schema) {
  if (schema.consistency != Consistency::kVap) return;
  MutexLock l(&mu_);
  tables_[schema.id] = VapTable{RowFormat::Of(schema), schema.value_bound};
  active_.store(true, std::memory_order_release);
}

void VapGate::Sealed(ClockT c, const std::vector<std::vector<net::Apply>>& parts) {
  if (!active()) return;
  MutexLock l(&mu_);
  for (uint32_t k = 0; k < parts.size(); ++k) {
    for (const net::Apply& a : parts[k]) {
      for (const net::RowData& u : a.updates) {
        auto it = tables_.find(u.table);
        if (it == tables_.end()) continue;
        ledger_.Add(k, c, RowKey{u.table, u.row}, AbsSum(it->second.format, u.bytes),
                    it->second.bound);
      }
    }
  }
}

void VapGate::Acked(uint32_t shard, ClockT through) {
  if (!active()) return;
  MutexLock l(&mu_);
  ledger_.Acked(shard, through);
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
