// The shard side of the simulated world (consistency/sim/world.h): the real
// ShardEngine over FakeStore, with its writer, undo tasks and crashes.
#include "consistency/sim/world.h"

namespace pace::sim::internal {

bool World::AdmitHello(ClientId c, uint32_t k) {
  Shard& sh = *shards_[k];
  const uint64_t incarnation = IncarnationOf(clients_[c].process);
  const IncompleteClock ic = IncompleteClockAt(k, c);
  const bool pending = sh.undo_pending.count(c) != 0;
  const uint64_t served = Planted(PlantedBug::kServeBeforeTheWriter) ? 0 : sh.served[c];
  if (!pending && !HelloWaitsForWriter(ic, incarnation, served)) {
    sh.served[c] = incarnation;
    return true;
  }
  if (!pending) {
    Trace("shard " + std::to_string(k) + ": process " + std::to_string(clients_[c].process) +
          " of client " + std::to_string(c) + " waits for the writer (" + std::to_string(ic.parts) +
          " part(s) of clock " + std::to_string(ic.clock) + ")");
    sh.undo_pending.insert(c);
    QueuedBatch task;
    task.client = c;
    task.incarnation = incarnation;
    task.undo = true;
    sh.queue.push_back(std::move(task));
    if (!sh.commit_scheduled) {
      sh.commit_scheduled = true;
      const uint64_t inc = sh.incarnation;
      At(now_ + rng_.Between(0, max_delay_), [this, k, inc] { Commit(k, inc); });
    }
  }
  return false;
}
void World::ShardReceive(uint32_t k, ClientId c, uint64_t epoch, ToShard m) {
  Shard& sh = *shards_[k];
  if (sh.engine == nullptr) return;
  const PeerId peer = Conn(c, k).peer;
  if (auto* r = std::get_if<ReadRequest>(&m)) {
    Trace("shard " + std::to_string(k) + " Read from " + std::to_string(c) + " min " +
          std::to_string(r->min_version) + " C=" + std::to_string(sh.engine->shard_clock()));
    if (sh.engine->AdmitRead(peer, r) != ShardEngine::ReadAction::kAnswer) return;
    if (rng_.Chance(0.5)) {
      ReadAnswer answer;
      Status st = ShardEngine::AnswerFromView(sh.engine->InfoOf(peer), *r, sh.store, &answer);
      return sh.engine->FinishRead(peer, *r, st, std::move(answer));
    }
    // On a "reader thread": later, from the state at that moment (read and
    // finished in one step, as the service holds its view until it sent).
    const uint64_t inc = sh.incarnation;
    At(now_ + rng_.Between(0, max_delay_), [this, k, inc, peer, read = std::move(*r)] {
      Shard& s = *shards_[k];
      if (s.incarnation != inc || s.engine == nullptr) return;
      ReadAnswer answer;
      Status st = ShardEngine::AnswerFromView(s.engine->InfoOf(peer), read, s.store, &answer);
      s.engine->FinishRead(peer, read, st, std::move(answer));
    });
    return;
  }
  if (auto* u = std::get_if<UnsubscribeMsg>(&m)) {
    return sh.engine->Unsubscribe(peer, u->table, u->rows);
  }
  auto& a = std::get<ApplyMsg>(m);
  Trace("shard " + std::to_string(k) + " queues clock " + std::to_string(a.clock) + " of client " +
        std::to_string(c));
  sh.queue.push_back(QueuedBatch{c, epoch, peer, std::move(a), Conn(c, k).incarnation});
  if (!sh.commit_scheduled) {
    sh.commit_scheduled = true;
    const uint64_t inc = sh.incarnation;
    At(now_ + rng_.Between(0, max_delay_), [this, k, inc] { Commit(k, inc); });
  }
}

void World::CommitLater(uint32_t k, uint64_t incarnation) {
  Shard& sh = *shards_[k];
  sh.commit_scheduled = !sh.queue.empty();
  if (sh.commit_scheduled) {
    At(now_ + rng_.Between(0, max_delay_), [this, k, incarnation] { Commit(k, incarnation); });
  }
}

World::Written World::WriteBatch(uint32_t k, const QueuedBatch& b) {
  Shard& sh = *shards_[k];
  ClockT& applied = sh.store.applied[b.client];
  uint32_t& parts = sh.store.parts[b.client];
  const ApplyMsg& m = b.msg;
  const AppliedPosition at{applied, parts};
  const BatchId id{m.clock, m.part, m.more};
  const BatchAdmission admission = ClassifyBatch(at, id);
  if (admission == BatchAdmission::kDuplicate) {
    if (m.clock == applied) ++result_.parts_skipped;
    return Written{};
  }
  if (admission == BatchAdmission::kGap &&
      b.incarnation != IncarnationOf(clients_[b.client].process)) {
    // Sent by a process that is gone, after parts of its clock were taken
    // back: refused (its session is closed), nothing applied.
    Trace("shard " + std::to_string(k) + " refuses clock " + std::to_string(m.clock) + " part " +
          std::to_string(m.part) + " of a dead process of client " + std::to_string(b.client));
    return Written{false, 0, 0, true};
  }
  if (admission == BatchAdmission::kGap) {
    Fail("shard " + std::to_string(k) + ": clock gap, batch " + std::to_string(m.clock) + " part " +
         std::to_string(m.part) + " of client " + std::to_string(b.client) +
         " with applied clock " + std::to_string(applied) + " and " + std::to_string(parts) +
         " part(s)");
    return Written{};
  }
  if (admission == BatchAdmission::kCompletesClock) {
    // Only a process that numbers its parts from 0 over parts another
    // process left cuts a clock into fewer parts than the shard has; a new
    // simulated process starts only after its shards took those back (or,
    // without undo records, numbers its parts after them).
    Fail("shard " + std::to_string(k) + ": last part " + std::to_string(m.part) + " of clock " +
         std::to_string(m.clock) + " of client " + std::to_string(b.client) + " below the " +
         std::to_string(parts) + " part(s) applied");
    return Written{};
  }
  const Contribution from{b.client, Stamp(ProcessOfIncarnation(b.incarnation), m.clock, m.part)};
  for (const auto& [key, d] : m.deltas) {
    FakeStore::Row& row = sh.store.committed[key];
    row.value += d;
    row.prov.push_back(from);
  }
  // The undo record of a part with more to come, in the same commit (as
  // ShardStore::Impl::NoteUndoLocked).
  UndoState& undo_state = sh.store.undo[b.client];
  undo_state = UndoStateAfter(undo_state, at, id, admission, b.incarnation);
  std::vector<FakeStore::UndoRecord>& records = sh.store.undo_records[b.client];
  if (!m.more) records.clear();
  if (m.more && undo_state.kept) records.push_back(FakeStore::UndoRecord{m.deltas, from});
  const AppliedPosition next = PositionAfter(at, id, admission);
  applied = next.clock;
  parts = next.parts;
  Trace("shard " + std::to_string(k) + " commits clock " + std::to_string(m.clock) + " part " +
        std::to_string(m.part) + (m.more ? " (more)" : "") + " of client " +
        std::to_string(b.client));
  return Written{true, applied, parts};
}

void World::Commit(uint32_t k, uint64_t incarnation) {
  Shard& sh = *shards_[k];
  if (sh.incarnation != incarnation || sh.engine == nullptr) return;
  if (!sh.queue.empty() && sh.queue.front().undo) {
    // A writer task of its own, after the groups before it were recorded.
    const QueuedBatch task = std::move(sh.queue.front());
    sh.queue.erase(sh.queue.begin());
    Undo(k, task);
    if (result_.ok) CommitLater(k, incarnation);
    return;
  }
  // The group: the batches up to the next undo task.
  auto group = std::make_shared<std::vector<QueuedBatch>>();
  auto undo =
      std::find_if(sh.queue.begin(), sh.queue.end(), [](const QueuedBatch& b) { return b.undo; });
  group->assign(std::make_move_iterator(sh.queue.begin()), std::make_move_iterator(undo));
  sh.queue.erase(sh.queue.begin(), undo);
  // Per batch: duplicate, or written (the store's state moves on), with the
  // (applied clock, parts) record it left (as ShardStore::ApplyBatches).
  auto written = std::make_shared<std::vector<Written>>();
  for (const QueuedBatch& b : *group) {
    written->push_back(WriteBatch(k, b));
    if (!result_.ok) return;
    const Written& w = written->back();
    if (w.written && !group_publish_) {
      // The old shard: write and bookkeeping of each batch in one step.
      for (const auto& [key, d] : b.msg.deltas) sh.engine->MarkChanged(b.peer, key);
      SendToClient(b.client, k, b.epoch, AckMsg{b.msg.clock, false, b.msg.part});
      sh.engine->RecordApplied(b.client, w.applied, now_, w.parts);
      sh.engine->Publish(sh.store);
    }
  }
  if (!group_publish_) {
    for (size_t i = 0; i < group->size(); ++i) {
      const QueuedBatch& b = (*group)[i];
      if (!(*written)[i].written && !(*written)[i].refused) {
        SendToClient(b.client, k, b.epoch, AckMsg{b.msg.clock, true, b.msg.part});
      }
    }
    CommitLater(k, incarnation);  // an undo task and what came after it
    return;
  }
  // Group commit: the group is durable and visible to reads now; the writer
  // records it (clocks, Acks, parked reads, pushes) a little later, while
  // reads keep being answered from the newer state.
  At(now_ + rng_.Between(0, max_delay_), [this, k, incarnation, group, written] {
    Shard& s = *shards_[k];
    if (s.incarnation != incarnation || s.engine == nullptr) return;
    for (size_t i = 0; i < group->size(); ++i) {
      const QueuedBatch& b = (*group)[i];
      const Written& w = (*written)[i];
      if (w.written) {
        for (const auto& [key, d] : b.msg.deltas) s.engine->MarkChanged(b.peer, key);
        s.engine->RecordApplied(b.client, w.applied, now_, w.parts);
      }
      if (!w.refused)
        SendToClient(b.client, k, b.epoch, AckMsg{b.msg.clock, !w.written, b.msg.part});
    }
    // The writer plans under its lock, then reads and sends a little later
    // (as the shard service, which reads with the lock released): reads,
    // subscriptions and disconnects may come in between; no commit does.
    auto plan = std::make_shared<PublishPlan>(s.engine->PlanPublish());
    s.publishing = true;
    At(now_ + rng_.Between(0, max_delay_), [this, k, incarnation, plan] {
      Shard& t = *shards_[k];
      if (t.incarnation != incarnation || t.engine == nullptr) return;
      ShardEngine::ReadPublish(t.store, plan.get());
      t.engine->FinishPublish(std::move(*plan));
      t.publishing = false;
      CommitLater(k, incarnation);
    });
  });
}

void World::Undo(uint32_t k, const QueuedBatch& task) {
  Shard& sh = *shards_[k];
  const ClientId c = task.client;
  sh.undo_pending.erase(c);
  sh.served[c] = task.incarnation;  // every batch of an earlier process is in
  const IncompleteClock ic = IncompleteClockAt(k, c);
  if (!NeedsUndo(ic, task.incarnation)) return;
  std::vector<FakeStore::UndoRecord>& records = sh.store.undo_records[c];
  if (records.size() != ic.parts) {
    return Fail("shard " + std::to_string(k) + " holds " + std::to_string(ic.parts) +
                " undoable part(s) of client " + std::to_string(c) + "'s clock " +
                std::to_string(ic.clock) + " but " + std::to_string(records.size()) +
                " undo record(s)");
  }
  const int rounds = Planted(PlantedBug::kUndoTwice) ? 2 : 1;
  std::set<RowKey> rows;
  for (int round = 0; round < rounds; ++round) {
    for (const FakeStore::UndoRecord& rec : records) {
      for (const auto& [key, d] : rec.deltas) {
        FakeStore::Row& row = sh.store.committed[key];
        row.value -= d;
        auto it = std::find(row.prov.begin(), row.prov.end(), rec.contribution);
        if (it != row.prov.end()) row.prov.erase(it);
        rows.insert(key);
      }
    }
  }
  result_.parts_undone += ic.parts;
  Trace("shard " + std::to_string(k) + " took back " + std::to_string(ic.parts) +
        " part(s) of clock " + std::to_string(ic.clock) + " of client " + std::to_string(c));
  records.clear();
  sh.store.parts[c] = 0;
  sh.store.undo[c] = UndoState{};
  // Subscribers hold values with the parts in them: the next push carries
  // the values without them.
  for (const RowKey& key : rows) sh.engine->MarkChanged(0, key);
  sh.engine->RecordApplied(c, ic.clock, now_, 0);
}

void World::Crash(uint32_t k) {
  Shard& sh = *shards_[k];
  if (sh.engine == nullptr) return;
  ++result_.crashes;
  Trace("crash shard " + std::to_string(k) + " losing " + std::to_string(sh.queue.size()) +
        " uncommitted batch(es)");
  for (ClientId c = 0; c < clients_.size(); ++c) DropConnection(c, k);
  sh.engine.reset();
  sh.queue.clear();
  sh.commit_scheduled = false;
  sh.retry_scheduled = false;
  sh.publishing = false;
  sh.undo_pending.clear();
  std::fill(sh.served.begin(), sh.served.end(), 0);
  ++sh.incarnation;
  At(now_ + Delay() * 2, [this, k] { Restart(k); });
}

void World::Restart(uint32_t k) {
  Shard& sh = *shards_[k];
  sh.engine =
      std::make_unique<ShardEngine>(ShardEngineOptions{}, sh.store.applied, now_, sh.store.parts);
  Trace("restart shard " + std::to_string(k));
  for (ClientId c = 0; c < clients_.size(); ++c) {
    At(now_ + Delay(), [this, c, k] { Connect(c, k); });
  }
}
}  // namespace pace::sim::internal
