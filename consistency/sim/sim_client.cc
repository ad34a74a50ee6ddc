// The client side of the simulated world (consistency/sim/world.h): client
// processes whose protocol decisions are consistency/client_engine.h's.
#include <cmath>
#include <sstream>

#include "consistency/sim/world.h"

namespace pace::sim::internal {

void World::ScheduleStep(ClientId c, size_t wi, int64_t at) {
  const uint32_t process = clients_[c].process;
  At(at, [this, c, wi, process] {
    const Client& cl = clients_[c];
    if (cl.alive && cl.process == process) ClientStep(c, wi);
  });
}

void World::KillClient(ClientId c) {
  Client& cl = clients_[c];
  bool done = cl.alive && cl.started;
  for (const Worker& w : cl.workers) done = done && w.done;
  if (!cl.alive || !cl.started || done) return;
  ++result_.client_kills;
  if (cl.next_part > 0) ++result_.client_kills_mid_clock;
  Trace("kill client " + std::to_string(c) + " (process " + std::to_string(cl.process) +
        ") at process clock " + std::to_string(cl.clock) + " after " +
        std::to_string(cl.next_part) + " part(s) of it");
  for (uint32_t k = 0; k < shards_.size(); ++k) DropConnection(c, k);
  cl.alive = false;
  // Its open deltas never left the process.
  for (auto& [key, truth] : ledger_) {
    for (auto it = truth.begin(); it != truth.end();) {
      const bool open = it->first.first == c && it->first.second % kPartsPerClock == kOpenPart;
      it = open ? truth.erase(it) : std::next(it);
    }
  }
  At(now_ + Delay() * 2, [this, c] { StartProcess(c); });
}

void World::StartProcess(ClientId c) {
  Client& cl = clients_[c];
  ++cl.process;
  cl.alive = true;
  cl.started = false;
  cl.clock = 0;
  cl.next_part = 0;
  cl.entries.clear();
  cl.shards.assign(shards_.size(), ShardView());
  cl.vap = ValueBoundLedger();
  // A re-run: other deltas, possibly other cuts and another number of workers.
  cl.workers.assign(static_cast<size_t>(rng_.Between(1, 2)), Worker());
  for (Worker& w : cl.workers) w.script = MakeScript();
  Trace("start process " + std::to_string(cl.process) + " of client " + std::to_string(c));
  for (uint32_t k = 0; k < shards_.size(); ++k) Connect(c, k);
}

void World::FirstWelcome(Client& cl, uint32_t k) {
  ShardView& sh = cl.shards[k];
  const ShardEngine& engine = *shards_[k]->engine;
  // As the Welcome: the engine's record of the client.
  sh.welcomed = true;
  sh.resume = AppliedPosition{engine.clocks().Get(cl.id), engine.AppliedParts(cl.id)};
  sh.duplicates_below = sh.resume;
  Trace("shard " + std::to_string(k) + " welcomes process " + std::to_string(cl.process) +
        " of client " + std::to_string(cl.id) + " at clock " + std::to_string(sh.resume.clock) +
        " part " + std::to_string(sh.resume.parts));
  // The ground truth at this shard's rows: what earlier processes sent of
  // clocks this shard has not completed is gone (taken back, or never
  // applied).
  for (auto& [key, truth] : ledger_) {
    if (ShardOfKey(key) != k) continue;
    for (const auto& [u, d] : truth) {
      if (u.first == cl.id && ProcessOf(u.second) < cl.process &&
          ClockOf(u.second) >= sh.resume.clock) {
        dropped_.insert({key, u});
      }
    }
  }
  for (const ShardView& v : cl.shards) {
    if (!v.welcomed) return;
  }
  // Every shard welcomed it: the process resumes from the smallest applied
  // clock (a new job from 0).
  ClockT start = cl.shards[0].resume.clock;
  for (const ShardView& v : cl.shards) start = std::min(start, v.resume.clock);
  cl.started = true;
  cl.clock = start;
  for (ShardView& v : cl.shards) v.acked = AppliedPosition{start, 0};
  for (size_t wi = 0; wi < cl.workers.size(); ++wi) {
    cl.workers[wi].clock = start;
    ScheduleStep(cl.id, wi, now_ + rng_.Between(0, 3));
  }
}

void World::ClientStep(ClientId c, size_t wi) {
  Client& cl = clients_[c];
  Worker& w = cl.workers[wi];
  if (w.done || w.blocked || w.gated) return;
  if (evict_chance_ > 0 && rng_.Chance(evict_chance_)) ClientEvict(cl);
  const std::vector<Op>& ops = w.script[w.clock];
  if (w.op < ops.size()) {
    const Op& op = ops[w.op];
    if (op.is_get) {
      if (!ClientGet(cl, w.clock, op.key)) {
        w.blocked = true;
        ++cl.entries[op.key].waiters;
        return;
      }
    } else {
      ClientInc(cl, w.clock, op.key, op.delta);
    }
    ++w.op;
  } else if (w.clock == clocks_) {
    w.done = true;
    return;
  } else {
    WorkerClock(cl, w);
    if (!cl.vap.WithinBound() && !Planted(PlantedBug::kIgnoreValueBound)) {
      w.gated = true;  // RetryBlocked lets it go once the Acks come
      return;
    }
    CheckValueBound(cl);
  }
  ScheduleStep(c, wi, now_ + rng_.Between(0, 3));
}

// A worker that starts a clock: no vap row may have more than its bound in
// flight, counted from the batches this client holds unacknowledged (the
// truth the ledger approximates from above).
void World::CheckValueBound(const Client& cl) {
  std::map<RowKey, double> in_flight;
  for (const ShardView& sh : cl.shards) {
    for (const SentBatch& b : sh.unacked) {
      for (const auto& [key, d] : b.deltas) {
        if (Table(key.table).consistency == Consistency::kVap) {
          in_flight[key] += std::fabs(static_cast<double>(d));
        }
      }
    }
  }
  for (const auto& [key, sum] : in_flight) {
    if (sum > Table(key.table).value_bound) {
      return Fail("client " + std::to_string(cl.id) + " started a clock with " +
                  std::to_string(sum) + " of row " + std::to_string(key.table) + "/" +
                  std::to_string(key.row) + " unacknowledged, over the value bound " +
                  std::to_string(Table(key.table).value_bound));
    }
  }
}

void World::RetryBlocked(ClientId c) {
  Client& cl = clients_[c];
  for (size_t wi = 0; wi < cl.workers.size(); ++wi) {
    Worker& w = cl.workers[wi];
    if (w.gated && cl.vap.WithinBound()) {
      w.gated = false;
      CheckValueBound(cl);
      ScheduleStep(c, wi, now_ + rng_.Between(0, 3));
      continue;
    }
    if (!w.blocked) continue;
    const Op& op = w.script[w.clock][w.op];
    if (ClientGet(cl, w.clock, op.key)) {
      w.blocked = false;
      --cl.entries[op.key].waiters;
      ++w.op;
      ScheduleStep(c, wi, now_ + rng_.Between(0, 3));
    }
  }
}

bool World::ClientGet(Client& cl, ClockT c, const RowKey& key) {
  const ReadPolicy policy = Policy(key.table);
  Entry& e = cl.entries[key];
  Version v = 0;
  if (e.has_value && policy.IsFresh(v = EffectiveVersion(cl, key, e), c)) {
    CheckRead(cl, c, key, e, v);
    return true;
  }
  // Subscribed rows are refreshed by pushes; everything else is pulled.
  const Version need = policy.MinVersion(c);
  if (client_engine::AsksForRow(e, policy.uses_push(), need)) {
    SendRead(cl, key, e, need, policy.uses_push());
  }
  return false;
}

void World::CheckRead(const Client& cl, ClockT c, const RowKey& key, const Entry& e, Version v) {
  ++result_.reads_checked;
  int64_t value = e.value;
  Provenance prov = e.prov;
  for (const Pending& p : e.pending) {
    if (!p.sealed) {
      value += p.delta;
      prov.emplace_back(cl.id, Stamp(cl.process, p.clock, kOpenPart));
    }
  }
  std::sort(prov.begin(), prov.end());
  std::ostringstream where;
  where << "client " << cl.id << " (a worker at clock " << c << ") read row " << key.table << "/"
        << key.row << " (version " << v << ", applied " << e.applied << " part " << e.applied_parts
        << ")";
  if (std::adjacent_find(prov.begin(), prov.end()) != prov.end()) {
    return Fail(where.str() + ": a batch counted twice");
  }
  const std::map<Contribution, int64_t>& truth = ledger_[key];
  int64_t expect = 0;
  for (const Contribution& c : prov) {
    auto it = truth.find(c);
    if (it == truth.end()) return Fail(where.str() + ": holds an update nobody made");
    expect += it->second;
  }
  if (expect != value) {
    return Fail(where.str() + ": value " + std::to_string(value) + " is not the sum " +
                std::to_string(expect) + " of the updates it holds");
  }
  const ReadPolicy policy = Policy(key.table);
  for (const auto& [u, d] : truth) {
    if (dropped_.count({key, u}) != 0) continue;  // no read needs it
    const bool own = u.first == cl.id;
    const bool required =
        own || (policy.clock_bounded() && ClockOf(u.second) < c - policy.staleness());
    if (required && !std::binary_search(prov.begin(), prov.end(), u)) {
      return Fail(where.str() + ": lacks client " + std::to_string(u.first) + "'s update of " +
                  DescribeStamp(u.second) + (own ? " (read-my-writes)" : " (read rule)"));
    }
  }
}

void World::ClientInc(Client& cl, ClockT c, const RowKey& key, int64_t delta) {
  Entry& e = cl.entries[key];
  const Contribution open{cl.id, Stamp(cl.process, c, kOpenPart)};
  ledger_[key][open] += delta;
  // A re-run of a clock an earlier process completed at this row's shard:
  // the shard will skip it.
  if (c < cl.shards[ShardOfKey(key)].resume.clock) dropped_.insert({key, open});
  bool merged = false;
  for (Pending& p : e.pending) {
    if (!p.sealed && p.clock == c) {
      p.delta += delta;
      merged = true;
      break;
    }
  }
  if (!merged) e.pending.push_back(Pending{c, false, delta});
  // The open-delta bound of a worker at the process clock: its open deltas
  // leave early as the clock's next part (random here).
  if (c == cl.clock && part_chance_ > 0 && rng_.Chance(part_chance_)) SendPart(cl);
}

void World::WorkerClock(Client& cl, Worker& w) {
  ++w.clock;
  w.op = 0;
  ClockT min = w.clock;
  for (const Worker& o : cl.workers) min = std::min(min, o.clock);
  while (cl.clock < min) SendBatches(cl);  // the process clock advanced
}

// Seals the process clock's deltas and sends each shard its batch (the last
// part of the clock).
void World::SendBatches(Client& cl) {
  SealAndSend(cl, cl.next_part, /*more=*/false);
  cl.next_part = 0;
  ++cl.clock;
}

void World::SendPart(Client& cl) {
  Trace("client " + std::to_string(cl.id) + " sends part " + std::to_string(cl.next_part) +
        " of clock " + std::to_string(cl.clock));
  SealAndSend(cl, cl.next_part, /*more=*/true);
  ++cl.next_part;
  ++result_.parts_sent;
  if (kill_after_parts_[cl.id].count(++cl.parts_sent) != 0) {
    // Killed soon after: some parts applied, some in flight, some not sent.
    const ClientId c = cl.id;
    const uint32_t process = cl.process;
    At(now_ + rng_.Between(0, 2 * max_delay_), [this, c, process] {
      if (clients_[c].process == process) KillClient(c);
    });
  }
}

void World::SealAndSend(Client& cl, uint32_t part, bool more) {
  // Shard k's number for this part: after the parts an earlier process left
  // of this clock there (ShardState::resume_parts in client/; none when the
  // shard took them back).
  std::vector<uint32_t> part_of(shards_.size());
  for (uint32_t k = 0; k < shards_.size(); ++k) {
    const AppliedPosition& resume = cl.shards[k].resume;
    part_of[k] = part + (cl.clock == resume.clock ? resume.parts : 0);
  }
  std::vector<SentBatch> batches(shards_.size());
  for (auto& [key, e] : cl.entries) {
    for (Pending& p : e.pending) {
      if (p.sealed || p.clock != cl.clock) continue;
      const uint32_t k = ShardOfKey(key);
      p.sealed = true;
      p.part = part_of[k];
      const Contribution sealed{cl.id, Stamp(cl.process, p.clock, p.part)};
      // The ground truth: the open deltas become this part.
      auto& truth = ledger_[key];
      auto open = truth.find({cl.id, Stamp(cl.process, p.clock, kOpenPart)});
      if (open != truth.end()) {
        truth[sealed] += open->second;
        truth.erase(open);
      }
      // A clock an earlier process completed at this shard: skipped there.
      if (p.clock < cl.shards[k].resume.clock) dropped_.insert({key, sealed});
      if (e.has_value) {  // fold it into the value (it is now part of a batch)
        e.value += p.delta;
        e.prov.push_back(sealed);
      }
      batches[k].deltas.emplace_back(key, p.delta);
      const TableSpec& t = Table(key.table);
      if (t.consistency == Consistency::kVap) {
        cl.vap.Add(k, cl.clock, p.part, key, std::fabs(static_cast<double>(p.delta)),
                   t.value_bound);
      }
    }
  }
  for (uint32_t k = 0; k < shards_.size(); ++k) {
    batches[k].clock = cl.clock;
    batches[k].part = part_of[k];
    batches[k].more = more;
    cl.shards[k].unacked.push_back(batches[k]);
    ApplyMsg m{cl.clock, std::move(batches[k].deltas), part_of[k], more};
    SendToShard(cl.id, k, std::move(m));
  }
}

void World::ClientEvict(Client& cl) {
  std::vector<RowKey> candidates;
  for (auto& [key, e] : cl.entries) {
    if (e.has_value && e.waiters == 0 && e.reads_in_flight.empty()) candidates.push_back(key);
  }
  if (candidates.empty()) return;
  const RowKey key = candidates[rng_.Below(static_cast<int64_t>(candidates.size()))];
  Entry& e = cl.entries[key];
  e.has_value = false;
  e.value = 0;
  e.prov.clear();
  if (e.subscribed) {
    e.subscribed = false;
    SendToShard(cl.id, ShardOfKey(key), UnsubscribeMsg{key.table, {key.row}});
  }
}

void World::SendRead(Client& cl, const RowKey& key, Entry& e, Version min_version, bool subscribe) {
  ReadRequest r;
  r.req_id = cl.next_req++;
  r.table = key.table;
  r.rows = {key.row};
  r.min_version = min_version;
  r.subscribe = subscribe;
  e.reads_in_flight.push_back(min_version);
  const uint32_t k = ShardOfKey(key);
  cl.shards[k].requests.emplace(r.req_id, r);
  SendToShard(cl.id, k, std::move(r));
}

void World::InstallValue(Client& cl, Entry& e, int64_t value, Provenance prov, Version v, ClockT a,
                         uint32_t parts) {
  const AppliedPosition holds =
      Planted(PlantedBug::kRebaseEverySealedDelta) ? AppliedPosition{} : AppliedPosition{a, parts};
  client_engine::Rebase(e.pending, holds, [&](const Pending& p) {
    value += p.delta;
    prov.emplace_back(cl.id, Stamp(cl.process, p.clock, p.part));
  });
  e.has_value = true;
  e.value = value;
  e.prov = std::move(prov);
  e.version = v;
  e.applied = a;
  e.applied_parts = parts;
}

void World::InstallRow(Client& cl, uint32_t k, RowValue& row, Version v, ClockT a, uint32_t parts,
                       bool read, bool subscribe, Version read_min) {
  namespace engine = client_engine;
  const RowKey key{row.table, row.row};
  auto it = cl.entries.find(key);
  if (it == cl.entries.end()) return;
  Entry& e = it->second;
  if (read) e.ReadAnswered(read_min);
  const engine::ArrivalDecision d = engine::DecideArrival(
      engine::CachedRow{e.has_value, e.version, e.subscribed, e.waiters > 0},
      engine::RowArrival{v, AppliedPosition{a, parts}, read, subscribe}, cl.shards[k].acked);
  if (d.action == engine::Arrival::kStalePush) return;
  int64_t value = 0;
  Provenance prov;
  if (row.absent) {
    if (!row.bytes.empty() || cl.id % 2 != 0) return Fail("an absent row with bytes, or unasked");
    ++result_.rows_absent;
  } else if (!DecodeRow(row.bytes, &value, &prov)) {
    return Fail("undecodable row bytes");
  }
  if (d.action == engine::Arrival::kRefetch) {
    if (d.drop_value) {
      e.subscribed = false;
      e.has_value = false;
      e.value = 0;
      e.prov.clear();
    }
    if (d.send_read) SendRead(cl, key, e, d.read_min_version, Policy(key.table).uses_push());
    return;
  }
  if (d.action == engine::Arrival::kInstall) {
    InstallValue(cl, e, value, std::move(prov), v, a, parts);
  }
  if (d.subscribe) e.subscribed = true;
}

void World::ClientReceive(ClientId c, uint32_t k, ToClient m) {
  Client& cl = clients_[c];
  ShardView& sh = cl.shards[k];
  if (auto* r = std::get_if<ReadAnswer>(&m)) {
    auto it = sh.requests.find(r->req_id);
    if (it != sh.requests.end()) {
      const ReadRequest req = std::move(it->second);
      sh.requests.erase(it);
      if (r->rows.size() != req.rows.size()) return Fail("ReadAnswer with a wrong row count");
      if (r->version < req.min_version) {
        return Fail("shard " + std::to_string(k) + " answered a Read for min_version " +
                    std::to_string(req.min_version) + " with version " +
                    std::to_string(r->version));
      }
      for (RowValue& row : r->rows) {
        InstallRow(cl, k, row, r->version, r->applied_clock, r->applied_parts, true, req.subscribe,
                   req.min_version);
      }
    }
  } else if (auto* p = std::get_if<PushBatch>(&m)) {
    ++result_.pushes;
    for (RowValue& row : p->rows)
      InstallRow(cl, k, row, p->version, p->applied_clock, p->applied_parts, false, false, 0);
  } else if (auto* d = std::get_if<PushDoneMsg>(&m)) {
    sh.pushed_version = std::max(sh.pushed_version, d->version);
  } else if (auto* a = std::get_if<AckMsg>(&m)) {
    ClientAck(cl, k, *a);
  } else if (auto* err = std::get_if<ReadErrorMsg>(&m)) {
    return Fail("client " + std::to_string(c) + " got a read error: " + err->why);
  }
  RetryBlocked(c);
}

void World::ClientAck(Client& cl, uint32_t k, const AckMsg& a) {
  namespace engine = client_engine;
  ShardView& sh = cl.shards[k];
  if (a.duplicate && engine::DuplicateFromAnotherSender(a.clock, a.part, sh.duplicates_below)) {
    return Fail("shard " + std::to_string(k) + " acknowledged clock " + std::to_string(a.clock) +
                " part " + std::to_string(a.part) + " of client " + std::to_string(cl.id) +
                " as a duplicate, but the client sent it once");
  }
  const engine::AckOutcome ack = engine::TakeAck(sh.unacked, a.clock, a.part);
  if (ack.batches == 0) return;  // a duplicate Ack after a re-send
  sh.acked = ack.acked;
  cl.vap.Acked(k, sh.acked.clock, sh.acked.parts);
  // Each batch purges its rows' deltas, as the client's PurgeBatch.
  for (size_t i = 0; i < ack.batches; ++i) {
    const SentBatch& b = sh.unacked.front();
    for (const auto& [key, d] : b.deltas) {
      auto it = cl.entries.find(key);
      if (it == cl.entries.end()) continue;
      std::vector<Pending>& pd = it->second.pending;
      const bool all = Planted(PlantedBug::kPurgeLaterBatches);
      pd.erase(std::remove_if(pd.begin(), pd.end(),
                              [&b, all](const Pending& p) {
                                return all ? p.sealed : engine::AckedBy(p, b.clock, b.part);
                              }),
               pd.end());
    }
    sh.unacked.pop_front();
  }
}

void World::ClientReconnected(Client& cl, uint32_t k) {
  ShardView& sh = cl.shards[k];
  // 1. Unacknowledged batches, in clock order (the shard skips duplicates).
  if (!Planted(PlantedBug::kNoDuplicateBoundOnResend)) {
    sh.duplicates_below =
        client_engine::DuplicatesBelowAfterResend(sh.duplicates_below, sh.unacked);
  }
  for (const SentBatch& b : sh.unacked) {
    ++result_.resent_batches;
    if (b.more || b.part > 0) ++result_.parts_resent;
    SendToShard(cl.id, k, ApplyMsg{b.clock, b.deltas, b.part, b.more});
  }
  // 2. Requests in flight.
  std::vector<ReadRequest> again;
  for (const auto& [id, req] : sh.requests) again.push_back(req);
  for (ReadRequest& r : again) SendToShard(cl.id, k, std::move(r));
  // 3. Subscriptions lived in the old session: subscribe again, keeping the
  //    version the old session vouched for until the reply.
  for (auto& [key, e] : cl.entries) {
    if (ShardOfKey(key) != k || Planted(PlantedBug::kKeepSubscriptionsAcrossReconnects)) continue;
    if (client_engine::EndSessionSubscription(&e, sh.pushed_version)) SendRead(cl, key, e, 0, true);
  }
  sh.connected = true;
}

}  // namespace pace::sim::internal
