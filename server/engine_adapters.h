// The shard service's side of the protocol engine's interfaces
// (consistency/shard_engine.h): a store view as RowsView and a transport
// session as a Peer.
//
// Thread-compatible like the engine: used under the shard service's mutex.
#ifndef PACE_SERVER_ENGINE_ADAPTERS_H_
#define PACE_SERVER_ENGINE_ADAPTERS_H_

#include <memory>
#include <string>
#include <vector>

#include "consistency/shard_engine.h"
#include "net/messages.h"
#include "net/session.h"
#include "storage/shard_store.h"

namespace pace {

// One published state of the ShardStore (a ShardStore::ReadView: values,
// shard clock and applied clocks of the same state) as the engine reads it.
class ViewRows : public RowsView {
 public:
  explicit ViewRows(const ShardStore::ReadView& view) : view_(view) {}
  Status ReadRows(uint32_t table, const std::vector<uint64_t>& rows,
                  std::vector<std::string>* values) const override {
    return view_.MultiGet(table, rows, values);
  }
  Version ShardClock() const override { return view_.ShardClock(); }
  ClockT AppliedClock(ClientId client) const override { return view_.AppliedClock(client); }
  uint32_t AppliedParts(ClientId client) const override { return view_.AppliedParts(client); }

 private:
  const ShardStore::ReadView& view_;
};

// Sends the engine's messages as net/ messages on one session.
class SessionPeer : public Peer {
 public:
  explicit SessionPeer(std::shared_ptr<net::Session> session) : session_(std::move(session)) {}
  void SendReadAnswer(ReadAnswer a) override {
    session_->Send(
        net::ReadReply{a.req_id, a.version, a.applied_clock, ToRowData(a.rows), a.applied_parts});
  }
  // The engine's read errors are a full park queue (ResourceExhausted), a
  // store read that failed (IOError, Unavailable) or a shutdown (Aborted):
  // asking again may succeed. Anything else is final.
  void SendReadError(uint64_t req_id, const Status& st) override {
    const StatusCode c = st.code();
    const bool retriable = c == StatusCode::kResourceExhausted || c == StatusCode::kIOError ||
                           c == StatusCode::kUnavailable || c == StatusCode::kAborted;
    session_->Send(net::Error{req_id, c, st.message(), retriable});
  }
  void SendPush(PushBatch p) override {
    session_->Send(net::Push{p.version, p.applied_clock, ToRowData(p.rows), p.applied_parts});
  }
  void SendPushDone(Version version, ClockT applied_clock) override {
    session_->Send(net::PushDone{version, applied_clock});
  }

 private:
  static std::vector<net::RowData> ToRowData(std::vector<RowValue>& rows) {
    std::vector<net::RowData> out;
    out.reserve(rows.size());
    for (RowValue& r : rows) out.push_back(net::RowData{r.table, r.row, std::move(r.bytes)});
    return out;
  }
  const std::shared_ptr<net::Session> session_;
};

}  // namespace pace

#endif  // PACE_SERVER_ENGINE_ADAPTERS_H_
