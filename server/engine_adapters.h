// The shard service's side of the protocol engine's interfaces
// (consistency/shard_engine.h): a store view as RowsView and a transport
// session as a Peer.
//
// Thread-compatible. A ViewRows is read while its view is held, with the
// shard service's mutex released (ShardEngine::AnswerFromView, ReadPublish);
// a SessionPeer is called by the engine under that mutex.
#ifndef PACE_SERVER_ENGINE_ADAPTERS_H_
#define PACE_SERVER_ENGINE_ADAPTERS_H_

#include <iterator>
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
  Status ReadRowsOrAbsent(uint32_t table, const std::vector<uint64_t>& rows,
                          std::vector<std::string>* values,
                          std::vector<uint8_t>* absent) const override {
    return view_.MultiGetOrAbsent(table, rows, values, absent);
  }
  Version ShardClock() const override { return view_.ShardClock(); }
  ClockT AppliedClock(ClientId client) const override { return view_.AppliedClock(client); }
  uint32_t AppliedParts(ClientId client) const override { return view_.AppliedParts(client); }

 private:
  const ShardStore::ReadView& view_;
};

// Sends the engine's messages as net/ messages on one session, each within
// the frame limit `max_frame_bytes` (0: none; docs/wire-protocol.md, "Frame
// limits"): a Push above it leaves as several Pushes; a ReadReply cannot be
// cut (one reply per req_id), so one above it is answered with a final
// Error naming the sizes, as is a pushed row that cannot fit a frame alone.
// Sending either anyway would make the transport close the session, and the
// client would reconnect and ask again, forever.
class SessionPeer : public Peer {
 public:
  SessionPeer(std::shared_ptr<net::Session> session, size_t max_frame_bytes)
      : session_(std::move(session)), max_frame_bytes_(max_frame_bytes) {}
  void SendReadAnswer(ReadAnswer a) override {
    const uint64_t bytes = MessageBytes(a.rows.begin(), a.rows.end());
    if (!Fits(bytes)) {
      session_->Send(net::Error{a.req_id, StatusCode::kInvalidArgument,
                                "the reply to this Read of " + std::to_string(a.rows.size()) +
                                    " rows would be " + std::to_string(bytes) +
                                    " bytes, over the frame limit of " +
                                    std::to_string(max_frame_bytes_) +
                                    " bytes (paced --max_frame_mb): read fewer rows per request"});
      return;
    }
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
    if (Fits(MessageBytes(p.rows.begin(), p.rows.end()))) {
      session_->Send(net::Push{p.version, p.applied_clock, ToRowData(p.rows), p.applied_parts});
      return;
    }
    // Cut into Pushes that fit; they all precede the PushDone, as the
    // engine's own cuts (max_push_bytes) do.
    auto begin = p.rows.begin();
    while (begin != p.rows.end()) {
      auto end = begin;
      while (end != p.rows.end() && Fits(MessageBytes(begin, end + 1))) ++end;
      if (end == begin) {
        session_->Send(
            net::Error{0, StatusCode::kResourceExhausted,
                       "row " + std::to_string(begin->table) + "/" + std::to_string(begin->row) +
                           " holds " + std::to_string(begin->bytes.size()) +
                           " bytes: a Push of it would exceed the frame limit of " +
                           std::to_string(max_frame_bytes_) +
                           " bytes (paced --max_frame_mb), so it cannot be sent to a subscriber"});
        ++end;
      } else {
        std::vector<RowValue> rows(std::make_move_iterator(begin), std::make_move_iterator(end));
        session_->Send(net::Push{p.version, p.applied_clock, ToRowData(rows), p.applied_parts});
      }
      begin = end;
    }
  }
  void SendPushDone(Version version, ClockT applied_clock) override {
    session_->Send(net::PushDone{version, applied_clock});
  }

 private:
  // An upper bound on the payload of a message of rows [begin, end); an
  // absent row costs its flag.
  static uint64_t MessageBytes(std::vector<RowValue>::const_iterator begin,
                               std::vector<RowValue>::const_iterator end) {
    uint64_t bytes = 0;
    for (auto it = begin; it != end; ++it) bytes += it->absent ? 1 : it->bytes.size();
    return net::RowsMessageBytes(static_cast<uint64_t>(end - begin), bytes);
  }
  bool Fits(uint64_t bytes) const { return max_frame_bytes_ == 0 || bytes <= max_frame_bytes_; }
  static std::vector<net::RowData> ToRowData(std::vector<RowValue>& rows) {
    std::vector<net::RowData> out;
    out.reserve(rows.size());
    for (RowValue& r : rows) {
      out.push_back(net::RowData{r.table, r.row, std::move(r.bytes), r.absent});
    }
    return out;
  }
  const std::shared_ptr<net::Session> session_;
  const size_t max_frame_bytes_;
};

}  // namespace pace

#endif  // PACE_SERVER_ENGINE_ADAPTERS_H_
