// core/connection.h — one connection to one peer endpoint: P paths below, many streams
// above, one congestion controller (spec §4–§9). Internal to core; applications use
// core::Endpoint.
//
// The implementation is split by concern: connection.cc (handshake, lifecycle, timers),
// connection_tx.cc (what to send next, path choice), connection_rx.cc (DATA: placement,
// duplicate suppression, completions, ACK generation), connection_ack.cc (ACK/NACK:
// loss detection, retransmission, path health), connection_answer.cc (READ and atomic
// answers and their credit, [PLACE-30]).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "cc/congestion.h"
#include "cc/send_rate.h"
#include "core/config.h"
#include "core/hello_clock.h"
#include "core/path.h"
#include "core/path_health.h"
#include "core/path_selector.h"
#include "core/return_routes.h"
#include "core/stats.h"
#include "core/stream.h"
#include "core/trace.h"
#include "util/lazy_deque.h"
#include "util/packet_meta.h"
#include "util/rng.h"
#include "wire/ack.h"
#include "wire/control.h"
#include "wire/data.h"

namespace mroce::core {

class Endpoint;

enum class ConnState : uint8_t {
    kConnecting,   // HELLO sent, waiting for HELLO or HELLO_ACK
    kEstablished,
    kFailed,       // [ERR-1] every work request flushed; kept to answer with CLOSE
    kClosed,
};

class Connection {
public:
    // token: the connection's secret ([CONN-5]), drawn by the endpoint from its
    // cryptographic generator; rng: the replayable choices (ISNs, source ports, paths).
    Connection(Endpoint& ep, uint32_t id, const Address& peer, uint64_t token, Rng rng, Time now);

    uint32_t id() const { return id_; }
    // slot: the connection's index on its endpoint (the id's low 16 bits - 1); reused
    // after the quiet period with a new id ([CONN-24]).
    uint32_t slot() const { return (id_ & 0xFFFF) - 1; }
    const Address& peer() const { return peer_; }
    ConnState state() const { return state_; }
    const ConnectionStats& stats() const { return stats_; }
    const PathStats& path_stats(uint16_t path) const { return path_stats_[path]; }
    uint16_t num_paths() const { return static_cast<uint16_t>(tx_paths_.size()); }
    const TxPath& tx_path(uint16_t p) const { return tx_paths_[p]; }
    // acked_any: an ACK has arrived on some path.
    bool acked_any() const {
        for (const PathStats& ps : path_stats_)
            if (ps.acks_received > 0) return true;
        return false;
    }
    // in_first_round_trip: opening, or established with no ACK on any path yet ([CC-20]).
    bool in_first_round_trip() const {
        return (state_ == ConnState::kConnecting || state_ == ConnState::kEstablished) && !acked_any();
    }
    // window_loss_prior: [PATH-13] item 5: the connection's loss estimate (its score
    // corrected for the memory it has not filled), where each path's estimate for its
    // window starts; 0 once any path has had a CE mark echoed.
    uint32_t window_loss_prior() const;
    uint64_t token() const { return token_; }
    // Congestion state, for counters and cc.csv (spec §9).
    const cc::CongestionControl& congestion() const { return *cc_; }
    uint32_t rate_hint_mbps() const { return rate_.last_hint_mbps(); }  // the latest received
    uint64_t pacing_rate_bps(Time now) const { return rate_.rate_bps(cc_->window_rate_bps(), now); }
    uint64_t in_flight_bytes() const { return in_flight_bytes_; }
    uint32_t peer_conn_id() const { return peer_conn_id_; }

    // Handshake (spec §4).
    void start_connect(Time now);
    void on_hello(const wire::HelloPacket& h, Time now);
    // answer_hello: [CONN-7] the peer's HELLO reached this connection while it is still
    // opening: answer it with a HELLO_ACK addressed to the identity it claims, binding nothing.
    void answer_hello(const wire::HelloPacket& h);
    // on_retry: the peer asks this (initiating) connection to prove its address by echoing
    // the cookie in a HELLO, sent at once ([CONN-25]).
    void on_retry(const wire::RetryPacket& r, Time now);
    // on_v1_hello_ack: the peer answered our version-1 probe: it speaks version 1 ([VER-1]).
    // Returns true if the connection failed for it (it was waiting for this answer).
    bool on_v1_hello_ack(Time now);
    bool peer_known() const { return peer_known_; }
    // [CONN-26]: a connection made by a HELLO that proved nothing is unproven until a packet
    // carrying its token arrives; one with no stream ends after peer_dead_timeout.
    bool proven() const { return proven_; }
    // integrity: the connection negotiated INTEGRITY ([INT-1]): fixed when it became
    // Established; Endpoint appends and checks the trailer ([INT-2], [INT-3]).
    bool integrity() const { return integrity_; }
    bool coalesce() const { return coalesce_; }
    bool short_acks() const { return short_acks_; }
    bool compact_data() const { return compact_data_; }
    // sends_compact: a DATA of this opcode leaves in the COMPACT form ([DATA-9]);
    // data_header_size: the header it then has.
    bool sends_compact(wire::Opcode op) const { return compact_data_ && wire::may_be_compact(op); }
    size_t data_header_size(wire::Opcode op) const {
        return sends_compact(op) ? wire::kDataCompactHeaderSize : wire::kDataHeaderSize;
    }
    void set_unproven(Time now);
    void prove() { proven_ = true; }

    // Packet handlers; the endpoint has checked the connection id and token.
    void on_data(const wire::DataPacket& p, const PacketMeta& meta, Time now);
    // on_data_unread: DATA that passed the token check but is not read, because the
    // connection is not Established: its body's form (COMPACT, [DATA-9]) hangs on
    // capabilities a Connecting side has not learnt yet, and all it does is count the drop
    // and, while Connecting, tell the peer ([CONN-31]).
    void on_data_unread();
    void on_ack(const wire::AckPacket& a, Time now);
    void on_nack(const wire::NackPacket& n, Time now);
    void on_probe(const wire::ProbePacket& p, Time now);
    // on_close: the peer's CLOSE with its `reason` ([CLOSE-1]).
    void on_close(uint32_t reason, Time now);

    // Work from the application (via Endpoint).
    void attach_stream(Stream& s);
    // detach_stream flushes a stream's work and forgets it (Endpoint::destroy_stream).
    void detach_stream(Stream& s);
    bool bound_to_remote(uint32_t remote_stream) const { return by_remote_.count(remote_stream) != 0; }
    // update_control_class recomputes control_class() after a bound stream's class changed
    // (Endpoint::set_stream_limits); attach and detach keep it current themselves.
    void update_control_class();
    // control_class: the traffic class of packets that belong to no one stream ([STREAM-14]).
    uint8_t control_class() const { return control_class_; }
    void stream_has_work(Stream& s);
    void close(Time now);
    // peer_spoke_after_close: a packet of the peer passed the token check after this side
    // closed; [CONN-28]: its CLOSE may have been lost, so it is sent again (rate-limited).
    void peer_spoke_after_close(Time now);
    // close_unconfirmed: this side sent (or is about to send) a CLOSE and no CLOSE of the
    // peer has arrived since ([CONN-29]); the peer may not know the connection ended.
    bool close_unconfirmed() const {
        return state_ == ConnState::kClosed && (closes_sent_ > 0 || close_pending_) &&
               !peer_closed_;
    }
    // repeat_close: a lingering endpoint's resend ([CONN-29]): the CLOSE again if it is
    // unconfirmed and [CONN-28]'s pacing and budget allow one now. Returns true if queued.
    bool repeat_close(Time now);
    // push_hint: the receiver's share for this peer rose ([CC-14]): an ACK carries it now.
    void push_hint();

    // InPlace: where a DATA payload left in the application's memory is named (Engine,
    // poll_transmit_in_place); null where every payload is copied into buf.
    using InPlace = std::span<const std::byte>;
    // produce writes the next datagram; 0 when nothing may be sent now. With in_place, a
    // DATA payload may be left in place: *in_place names it and the datagram is what was
    // written (the length returned) followed by it. data_only: DATA or nothing, whatever
    // else is due (Engine::set_data_only).
    size_t produce(std::span<std::byte> buf, PacketMeta& meta, Time now, InPlace* in_place = nullptr,
                   bool data_only = false);
    // has_work: produce would write something now. Inline: asked after every packet in
    // and out; the common answers come from a few flags.
    bool has_work(Time now) const {
        if (state_ != ConnState::kEstablished)
            return state_ == ConnState::kConnecting ? hellos_pending_ > 0 || hello_acks_pending_ > 0
                                                    : close_pending_;
        if (close_pending_ || hello_acks_pending_ > 0 || !nacks_.empty() || !ack_queue_.empty() ||
            probes_pending_ > 0)
            return true;
        if (retx_.empty() && ready_streams_.empty() && retx_copies_.left == 0) return false;
        if (!data_gate_open(segment_size_, now)) return false;
        const uint32_t prior = window_loss_prior();
        for (const TxPath& p : tx_paths_)
            if (PathView::can_send(p, segment_size_, *cc_, prior)) return true;
        return false;
    }

    void on_timeout(Time now);
    // settle_deadline makes next_deadline exact again after input that may have ended
    // timers (an ACK: the PTO of a path with nothing left in flight, the delivery timers
    // of messages it completed), so that the engine is not woken for a timer that has
    // nothing left to do (issue 19). One pass over the paths; the Endpoint calls it once
    // per batch of input that held ACKs (when it flushes deadlines), not per packet.
    void settle_deadline();
    // next_deadline is a lower bound of the earliest timer: exact after on_timeout and
    // settle_deadline, and only ever moved earlier by note_deadline in between. An early
    // call to on_timeout is harmless (nothing is due yet) and makes it exact again.
    Time next_deadline() const {
        MROCE_SLOW_DCHECK(cached_deadline_ <= exact_deadline());
        return cached_deadline_;
    }

    // fail ends the connection: every outstanding work request completes with `why` (the
    // oldest per stream) or kFlushed (the rest). [ERR-1]
    void fail(Status why, Time now);

    // Scheduling state owned by the Endpoint (its ready list and timer heap), kept here
    // so the hot path needs no hash lookups.
    bool in_ready = false;
    bool deadline_dirty = false;
    bool settle_pending = false;  // an ACK arrived: settle_deadline at the next flush
    Time armed_deadline = kNever;

private:
    enum class LossReason : uint8_t { kSack, kTimeout, kPathFailure };

    // connection.cc
    void run_timers(Time now);
    void end(ConnState final_state, EventKind kind, Status why, Time now);
    // emit_state reports a connection or path event (not a completion) to the application.
    // With a trace sink (core/trace.h), the sink sees it too, at `now`.
    void emit_state(EventKind kind, Time now, Status why = Status::kSuccess, uint16_t path = 0);
    // trace hands one event to the endpoint's trace sink, which must be set.
    void trace(TraceKind kind, Time now, uint16_t path, uint64_t before, uint64_t after,
               Status why = Status::kSuccess);
    void closed_after_failure(Time now);
    // may_repeat_close: [CONN-28]'s limits allow one more CLOSE now.
    bool may_repeat_close(Time now) const {
        return closes_sent_ <= kMaxCloseRepeats && (closes_sent_ == 0 || now >= last_close_ + cfg_.min_pto);
    }
    void establish(const wire::HelloPacket& h, Time now);
    size_t write_hello(std::span<std::byte> buf, PacketMeta& meta, wire::PacketType type, Time now);
    // [CONN-30]: a round of hello_copies HELLOs, the first now and the others one
    // hello_copy_gap apart; owe_hello_acks: n more HELLO_ACKs.
    void start_hello_round(Time now);
    // dropped_while_opening: [CONN-31] DATA of the peer's was dropped while Connecting.
    void dropped_while_opening();
    Duration hello_copy_gap() const;
    void owe_hello_acks(uint32_t n);
    // take_grant: [CC-20] a HELLO_ACK's grant becomes the first round trip's budget.
    void take_grant(const wire::HelloPacket& h, Time now);
    // resend_to_opening_peer: [CONN-31] the peer dropped our DATA while opening; before any
    // ACK, everything in flight is declared lost and goes again.
    void resend_to_opening_peer(Time now);
    // next_copy_path: the path of a HELLO or HELLO_ACK copy: the first of a burst as
    // [ACK-13], each later one the next path that is not Failed ([CONN-30]).
    uint16_t next_copy_path(Time now);
    wire::CommonHeader peer_header(wire::PacketType type) const {
        wire::CommonHeader h;
        h.type = type;
        h.dst_conn_id = peer_conn_id_;
        h.dst_token = peer_token_;
        return h;
    }
    // set_meta addresses a packet to leave on `path` (written in place: no temporary).
    void set_meta(const TxPath& path, PacketMeta& m) const;
    // next_return_path: [ACK-13] the path of a control packet; not a failed one, nor one on
    // a quiet NIC port ([PATH-16]) while another can take it.
    uint16_t next_return_path(Time now);
    // other_return_path: as next_return_path, but not `avoid` and, where possible, on
    // another plane than avoid's ([PROBE-2]).
    uint16_t other_return_path(uint16_t avoid, Time now);

    // connection_tx.cc
    // ack_with_reverse_data: queue every delayed ACK now, to leave with the DATA on data_path
    void send_delayed_acks(uint16_t data_path, Time now);
    // queue_delayed_acks queues every path's delayed ACK now; true if there was one.
    bool queue_delayed_acks();
    size_t write_queued_ack(std::span<std::byte> buf, PacketMeta& meta, Time now);
    bool acks_delayed() const;     // some path's ACK waits under [ACK-11]'s max_ack_delay
    size_t next_ack_size() const;  // the size of the next ACK written, without a probe reply
    size_t produce_data(std::span<std::byte> buf, PacketMeta& meta, Time now, InPlace* in_place);
    size_t send_segment(Stream& s, TxMessage& m, uint32_t seg, bool retx, TxPath& path,
                        std::span<std::byte> buf, PacketMeta& meta, Time now, InPlace* in_place);
    // path_view: the paths as the selectors see them, on the NIC ports that can send now
    // ([PATH-15]).
    PathView path_view() const;
    TxPath* pick_new_data_path(uint32_t bytes);
    TxPath* pick_retx_path(uint32_t bytes);
    // send_retx_copy: the next copy of retx_copies_ ([LOSS-17]); 0 when none may go now.
    size_t send_retx_copy(std::span<std::byte> buf, PacketMeta& meta, Time now, InPlace* in_place);
    // data_gate_open: the connection-wide limits allow a DATA of `bytes` now: the cap on
    // bytes in flight ([CC-15], [CC-18]) and the pacer ([CC-17]). Inline: asked by has_work.
    bool data_gate_open(uint32_t bytes, Time now) const {
        if (in_flight_bytes_ > 0 && in_flight_bytes_ + bytes > rate_.inflight_cap(now)) return false;
        return rate_.ahead(now) || rate_.send_time(pacing_rate_bps(now), now) <= now;
    }
    // arm_pacer: the pacer's timer for the next DATA, if the pacer holds it back now.
    void arm_pacer(Time now) {
        const uint64_t rate = cfg_.pacing ? pacing_rate_bps(now) : 0;
        const Time t = rate ? rate_.send_time(rate, now) : now;
        if (t > now && t < pace_deadline_) {
            pace_deadline_ = t;
            note_deadline(t);
        }
    }
    void make_room(TxPath& p);
    uint32_t psn_floor(const TxPath& p) const;
    size_t write_probe(TxPath& p, std::span<std::byte> buf, PacketMeta& meta, Time now);
    size_t write_close(std::span<std::byte> buf, PacketMeta& meta, Time now);
    uint32_t segment_bytes(const TxMessage& m, uint32_t seg) const;
    // find_tx: the started message msg_seq of s, or nullptr. Inline: once per ACKed PSN.
    TxMessage* find_tx(Stream& s, uint32_t msg_seq) {
        if (s.tx.empty() || !s.tx.front().started()) return nullptr;
        const uint32_t idx = msg_seq - s.tx.front().msg_seq;  // negative wraps to huge
        if (idx >= s.tx.size()) return nullptr;
        TxMessage& m = s.tx[idx];
        return m.started() && m.msg_seq == msg_seq ? &m : nullptr;
    }
    // live_tx: the message msg_seq of stream s if both still need work (the stream has not
    // failed, the message is posted, started and not done), else nullptr.
    TxMessage* live_tx(Stream* s, uint32_t msg_seq) {
        TxMessage* m = s && !s->failed ? find_tx(*s, msg_seq) : nullptr;
        return m && !m->done ? m : nullptr;
    }
    // find_answer: the answer answer_seq of s ([PLACE-30]), or nullptr.
    TxMessage* find_answer(Stream& s, uint32_t answer_seq) {
        if (s.answers.empty()) return nullptr;
        const uint32_t idx = answer_seq - s.answers.front().msg_seq;
        if (idx >= s.answers.size()) return nullptr;
        TxMessage& m = s.answers[idx];
        return m.msg_seq == answer_seq ? &m : nullptr;
    }
    // live_msg: live_tx, or for `answer` the answer that still needs work.
    TxMessage* live_msg(Stream* s, bool answer, uint32_t seq) {
        if (!answer) return live_tx(s, seq);
        TxMessage* m = s && !s->failed ? find_answer(*s, seq) : nullptr;
        return m && !m->done ? m : nullptr;
    }
    // next_new_message: the message stream s takes its next new segment from, started if
    // it was not, or nullptr when nothing of s may start now ([STREAM-3], [PLACE-20],
    // [PLACE-21], [PLACE-30]). ntx is s.tx.size().
    TxMessage* next_new_message(Stream& s, size_t ntx);
    // try_start gives m, the message at s's send cursor, its msg_seq and segment state if
    // the stream window and the READ limit and fence allow it to start now; else nullptr.
    TxMessage* try_start(Stream& s, TxMessage& m);

    // connection_rx.cc
    void place(Stream& s, const wire::DataPacket& p, Time now);
    // deliver_in_order completes s's messages that are complete, in msg_seq order
    // ([PLACE-5]); true when one of them had ACK_NOW on its LAST segment ([ACK-11]).
    bool deliver_in_order(Stream& s);
    void report_delivery(Stream& s);
    // note_reported remembers stream id as the most recently reported ([ACK-20]).
    void note_reported(uint32_t id);
    void queue_ack(uint16_t rx_path) {  // inline: most DATA ask for an ACK
        RxPath& rp = rx_paths_[rx_path];
        rp.ack_deadline = kNever;
        if (rp.ack_queued) return;
        rp.ack_queued = true;
        ack_queue_.push_back(rx_path);
    }
    void queue_nack(const wire::DataHeader& h, wire::NackReason reason, uint32_t detail);
    void refuse(Stream& s, const wire::DataHeader& h, wire::NackReason reason);
    bool accept_request(Stream& s, const wire::DataPacket& p, std::byte*& target,
                        uint32_t& read_len);
    std::byte* remote_target(const Stream& s, uint32_t rkey, uint64_t addr, uint64_t len,
                             uint32_t need) const;
    void drop_slot(RxMessage& slot);
    // write_payload puts message bytes [off, off + n) at their final place: one buffer, or
    // a scatter list ([PLACE-22]). Inline: once per DATA.
    void write_payload(const RxMessage& slot, uint64_t off, const std::byte* data, size_t n) {
        if (slot.sg)
            copy_to_pieces(slot.sg, slot.nsg, off, data, n);
        else
            std::memcpy(slot.target + off, data, n);
    }
    void take_srq_receive(Stream& s, uint32_t recv_seq);
    void complete_srq_receive(Stream& s, const RxMessage& slot);
    void complete_receive(const Stream& s, uint64_t wr_id, const RxMessage& slot);
    // connection_answer.cc: READ and atomic answers, their own credit ([PLACE-30])
    void execute_request(Stream& s, const RxMessage& slot);
    void place_answer(Stream& s, const wire::DataPacket& p, Time now);
    TxMessage* answered_request(Stream& s, const wire::DataHeader& h);
    void answer_acked(Stream& s, TxMessage& m);
    size_t write_ack(uint16_t rx_path, std::span<std::byte> buf, PacketMeta& meta, Time now);

    // connection_ack.cc
    // AckedMsg remembers the message of the previous PSN acknowledged by one ACK:
    // consecutive PSNs mostly carry segments of one message, so the stream and message
    // lookups run once per message, not once per PSN. Valid only within on_ack's record
    // loops, where no message is added or removed.
    struct AckedMsg {
        bool valid = false;
        bool answer = false;
        uint32_t stream = 0;
        uint32_t msg_seq = 0;
        Stream* s = nullptr;
        TxMessage* m = nullptr;  // nullptr: no such started message
    };
    void ack_record(TxPath& path, uint32_t psn, bool by_sack, Time now, uint64_t& bytes_acked,
                    AckedMsg& cache);
    void segment_acked(uint32_t stream, bool answer, uint32_t msg_seq, uint32_t seg, Time now,
                       AckedMsg& cache);
    void declare_lost(TxPath& path, uint32_t psn, LossReason why, Time now);
    void declare_all_lost(TxPath& path, LossReason why, Time now);
    Duration delivery_timeout() const;
    Duration delivery_timeout(const Stream& s) const;
    Stream* stream_by_remote(uint32_t remote_id);
    enum class RxGen : uint8_t { kCurrent, kStale };
    RxGen rx_generation(RxPath& rp, uint8_t gen);
    // requeue queues a segment to go again, adding retry_weight to its [LOSS-7] count: 1
    // for a loss a SACK found, kUnansweredRetryWeight for a timeout or a path failure, 0
    // for a resend that is not a loss.
    void requeue(uint32_t stream, bool answer, uint32_t msg_seq, uint32_t seg, uint32_t retry_weight,
                 Time now);
    static constexpr uint32_t kUnansweredRetryWeight = 16;  // [LOSS-7]
    void advance_base(TxPath& path);
    void detect_holes(TxPath& path, Time now);
    void path_timeout(TxPath& path, Time now);
    // resend_tail: [LOSS-16] a drained sender's first timeout copies the path's tail.
    void resend_tail(TxPath& path, Time now);
    void fail_path(TxPath& path, Time now);
    // new_source_port gives the path a source port drawn as [PATH-2] draws one, other than
    // its previous one and the connection's other paths' ([PATH-4] item 1, [CONN-33]).
    void new_source_port(TxPath& path);
    // handshake_port: [CONN-33]: the port a HELLO, or a HELLO_ACK that answers a repeated
    // HELLO, leaves from on `path`: a new one if the path's port carried one before.
    void handshake_port(TxPath& path, bool hello, bool repeat_answer, Time now);
    // on_return_echo: the peer echoed our path `path` in a DATA ([PATH-12]); judges one path.
    void on_return_echo(uint16_t path, Time now);
    // note_skipped: `n` PSNs of the peer's path were passed by its floor without arriving
    // ([PATH-6]); they also measure the loss of the peer's DATA for [PATH-12].
    void note_skipped(PathStats& ps, uint32_t n) {
        ps.psns_skipped += n;
        if (n) return_routes_.data_missed(n);
    }
    // reply_lost: the peer repeated a PROBE our reply answered in full ([PATH-12]).
    void reply_lost(RxPath& rp, Time now);
    // fail_return_path fails our path `p` for its return route if it carries only ACKs.
    void fail_return_path(uint16_t p, Time now);
    void arm_pto(TxPath& path, Time now);
    Duration pto(const TxPath& path) const;
    void note_overdue(TxPath& path);
    // probe_loss_score: [PATH-13] the loss a path's PROBEs must outlast: the highest of its
    // own score, its connection's (all paths, either direction) and its endpoint's (all
    // connections). Random loss hits every route of a fabric alike, and one path carries
    // too few packets to measure it alone: a path of a 1 MiB flow over 8 paths carries 32.
    uint32_t probe_loss_score(const TxPath& p) const;
    void check_overtaken(const TxPath& acked, Time sent, Time now);
    // probe_left: the first PROBE of a probing step has just been written ([PATH-11],
    // [LOSS-5], [PATH-4]): the step is timed from here, not from when it was asked for.
    void probe_left(TxPath& p, Time now);
    bool is_overtaken(const TxPath& p) const {
        // [PATH-11]: another path answered a packet sent more than the margin after this
        // path's oldest unanswered one.
        if (p.overdue_since == kNever || newest_answered_sent_ <= p.overdue_since) return false;
        // The peer may hold this path's ACK for max_ack_delay ([ACK-11]) while it answers
        // another path at once, so only an overtaking by more than that proves a loss.
        const Duration rtt = p.rtt.srtt_or(cfg_.initial_rtt);
        const Duration margin =
            std::max(cfg_.min_pto, Duration{rtt.count() >> cfg_.overtake_shift} + cfg_.max_ack_delay);
        return newest_answered_sent_ - p.overdue_since > margin;
    }
    Duration reorder_window(const TxPath& path) const;
    bool stream_delivered(Stream& s, uint32_t delivered_seq, Time now);  // true: a new report
    void complete_front(Stream& s);
    void pop_completed(Stream& s, Time now);
    void fail_stream(Stream& s, Status why);
    void stream_timer_expired(Time now);
    void rnr_timer_expired(Time now);
    void resend_message(Stream& s, TxMessage& m, bool whole, Time now);
    void resend_segments(Stream& s, TxMessage& m, uint32_t first, uint32_t last, Time now);
    void raise_send_floor(Stream& s, TxMessage& m);
    void defer_segment(TxMessage& m, uint32_t seg);

    Endpoint& ep_;
    const EndpointConfig& cfg_;
    uint32_t id_;
    Address peer_;
    Rng rng_;
    ConnState state_ = ConnState::kConnecting;
    std::unique_ptr<cc::CongestionControl> cc_;
    cc::SendRate rate_;         // [CC-15]..[CC-18]: hint, first RTT, in-flight cap, pacer
    Time pace_deadline_ = kNever;  // the pacer holds DATA back until then

    // our side, announced in our HELLO
    uint64_t token_;
    uint32_t isn_;
    uint32_t msg_isn_;
    // the peer's side, learnt from its HELLO / HELLO_ACK
    bool peer_known_ = false;
    uint32_t peer_conn_id_ = 0;
    uint64_t peer_token_ = 0;
    uint32_t peer_isn_ = 0;
    uint32_t peer_msg_isn_ = 0;
    uint32_t segment_size_ = 0;  // min of both max_payloads [DATA-4]

    // handshake
    // [CONN-30]: copies of the current HELLO round still to send, and HELLO_ACKs owed (one
    // per HELLO received, plus the confirmation's copies; at most kMaxHelloCopies).
    uint32_t hellos_pending_ = 0;
    uint32_t hello_acks_pending_ = 0;
    uint32_t hello_copies_due_ = 0;          // copies of the round not yet due
    Time hello_copy_deadline_ = kNever;      // when the next of them is due
    bool hello_round_first_ = false;  // the round's first copy is still to go ([VER-1] form)
    bool retry_round_sent_ = false;   // a RETRY already prompted a round since the timer's
    uint16_t hello_cursor_ = kNoPathChoice;  // the path the burst's previous copy took
    uint16_t last_answer_path_ = kNoPathChoice;  // [CONN-6]: the path of our latest HELLO_ACK
    Time last_answer_sent_ = kNever;  // [CONN-33]: when our latest HELLO_ACK left
    bool initiator_ = false;       // start_connect ran: this side sends HELLOs
    HelloClock hellos_sent_;       // [CONN-32]: our HELLOs by number, for [CC-20]'s RTT
    uint8_t peer_hello_seq_ = 0;   // [CONN-32]: the number of the peer's latest HELLO, echoed
    bool peer_sending_ = false;    // [CC-20]: a HELLO of the peer's had SENDING
    // [CONN-31]: DATA of the peer's was dropped while Connecting since our last HELLO or
    // HELLO_ACK in version 2's form; the next one says so (DROPPED). The first drop after
    // each scheduled HELLO copy sends one at once (drop_prompted_ until the next copy).
    bool dropped_opening_ = false;
    bool drop_prompted_ = false;
    bool peer_speaks_v2_ = false;  // a RETRY or a v2 HELLO came: no version-1 probes ([VER-1])
    bool proven_ = true;           // [CONN-26]
    bool integrity_ = false;       // [INT-1] both HELLOs announced INTEGRITY
    bool coalesce_ = false;        // [WIRE-10] both HELLOs announced COALESCE
    bool short_acks_ = false;      // [ACK-21] both HELLOs announced SHORT_ACK
    bool compact_data_ = false;    // [DATA-9] both HELLOs announced COMPACT_DATA
    Time unproven_deadline_ = kNever;
    wire::Cookie cookie_{};        // [CONN-25]: echoed in every later HELLO
    // [CONN-7]: while Connecting, the identity a HELLO_ACK answers (nothing is bound).
    uint32_t answer_conn_id_ = 0;
    uint64_t answer_token_ = 0;
    Time hello_deadline_ = kNever;
    uint32_t hello_tries_ = 0;
    bool close_pending_ = false;
    // [CONN-28]: the CLOSEs this side sent after it closed, and when the last one left.
    uint32_t closes_sent_ = 0;
    Time last_close_ = kNever;
    // [CONN-29]: the reason of the next CLOSE (NORMAL, or CONFIRM when it answers the
    // peer's), and whether a CLOSE of the peer arrived (this side's close is confirmed).
    wire::CloseReason close_reason_ = wire::CloseReason::kNormal;
    bool peer_closed_ = false;

    std::vector<TxPath> tx_paths_;
    std::vector<RxPath> rx_paths_;
    std::vector<PathStats> path_stats_;
    std::unique_ptr<PathSelector> selector_;  // new data's path ([PATH-10], [PATH-14])

    std::vector<uint32_t> streams_;          // local stream ids on this connection
    uint8_t control_class_ = 0;              // [STREAM-14] highest class of streams_
    std::unordered_map<uint32_t, uint32_t> by_remote_;  // peer's stream id -> local id
    // The connection's queues are LazyDeques: empty nearly all the time, and a std::deque
    // allocates about 600 bytes even then (util/lazy_deque.h).
    LazyDeque<uint32_t> ready_streams_;      // streams with unsent new segments
    struct SegRef {
        uint32_t stream, msg_seq, seg;
        bool answer;  // msg_seq is an answer_seq ([PLACE-30])
    };
    LazyDeque<SegRef> retx_;                 // segments to retransmit, oldest first
    // [LOSS-17]: the copies still to send of the retransmission that left last, and the
    // paths its copies took.
    struct RetxCopies {
        SegRef ref{};
        uint32_t left = 0;
        uint32_t used_n = 0;
        uint16_t used[path_health::kMaxRetxCopies] = {};
    };
    RetxCopies retx_copies_;
    LazyDeque<uint16_t> ack_queue_;          // rx paths with an ACK to send now
    // [ACK-20]: the streams this side reported last, most recent first, at most
    // kMaxAckStreams: a probe reply repeats their state.
    LazyDeque<uint32_t> recent_reports_;
    LazyDeque<uint32_t> stream_acks_;        // streams to report in the next ACKs
    LazyDeque<wire::NackPacket> nacks_;
    struct Timed {
        Time at;
        uint32_t stream, msg_seq;
        bool operator>(const Timed& o) const { return at > o.at; }
    };
    // TimedQueue is a min-heap of per-message timers; an entry is re-checked against the
    // message when it fires, so stale entries cost nothing but a pop.
    class TimedQueue {
    public:
        void push(const Timed& t) {
            heap_.push_back(t);
            std::push_heap(heap_.begin(), heap_.end(), std::greater<>{});
        }
        bool empty() const { return heap_.empty(); }
        const Timed& top() const { return heap_.front(); }
        void pop() {
            std::pop_heap(heap_.begin(), heap_.end(), std::greater<>{});
            heap_.pop_back();
        }
        void clear() { heap_.clear(); }

    private:
        std::vector<Timed> heap_;
    };
    TimedQueue delivery_timers_;             // [STREAM-5] path-acked, awaiting delivery
    TimedQueue rnr_timers_;                  // [PLACE-6] RNR waits
    // [ERR-2] [LOSS-13]: the last ACK that answered something new (a PSN not acknowledged
    // before, a fresh probe reply, a new delivery report). Any ACK shows the peer is alive,
    // but one that repeats old state shows no progress: a peer (buggy or hostile) that
    // replays an old ACK must neither hold off [ERR-2] nor hold every path in [LOSS-13].
    Time last_progress_ = kNever;
    Time stranded_since_ = kNever;  // [ERR-2]: since when work waits with every path Failed
    Time newest_answered_sent_{};            // [PATH-11] newest send time any path's ACK proved
    // overdue_floor_ is at most every path's overdue_since (check_overtaken's shortcut):
    // set_overdue lowers it, check_overtaken's scan makes it exact; kNever values (a path
    // with nothing overdue) may leave it lower than needed, which only costs a scan.
    Time overdue_floor_ = kNever;
    // carried_data: the path sent DATA in its current generation (a re-roll restarts its
    // PSNs at isn, [PATH-4]); one that did not has nothing in flight to leave behind.
    bool carried_data(const TxPath& p) const { return p.next_psn != isn_; }
    // in_timed_step: the path's probing step is timed from when its PROBE leaves
    // (probe_left): a Failed path, or one in a timeout step since its overdue_since. An
    // idle path probed beside a stalled one ([LOSS-13]) is in none.
    static bool in_timed_step(const TxPath& p) {
        return p.state == PathState::kFailed || (p.backoff > 0 && p.overdue_since != kNever);
    }
    void set_overdue(TxPath& p, Time t) {
        p.overdue_since = t;
        if (t < overdue_floor_) overdue_floor_ = t;
    }
    static constexpr uint16_t kNoAckRound = 0xffff;
    static constexpr uint8_t kProbeReplyCopies = 2;  // [PROBE-2]
    // [PATH-13]: replies queued for the copies of one probing step, at most a pair per copy.
    static constexpr uint8_t kMaxReplyCopies = kProbeReplyCopies * path_health::kMaxProbesPerStep;
    static constexpr uint8_t kRepeatsForLostReplies = 2;  // [PATH-12] item 6
    static constexpr uint32_t kCeWindow = 1u << 24;  // [CC-4] a forward step of the CE count
    static constexpr uint32_t kMaxCloseRepeats = 8;   // [CONN-28] CLOSEs sent again, at most
    uint16_t ack_round_path_ = kNoAckRound;  // [ACK-13] return path of this round's ACKs
    // ack_with_reverse_data: the path chosen for the next new segment while the ACKs that
    // ride with it went first (produce_data); kNoPathChoice when none.
    uint16_t kept_data_path_ = kNoPathChoice;
    ReturnRoutes return_routes_;             // [PATH-12] echoes owed and awaited
    // [ACK-14]: the last reports of streams destroyed before an ACK carried them; at most
    // one per destroyed stream, sent in the next ACK.
    std::vector<wire::StreamAck> final_reports_;
    uint64_t in_flight_total_ = 0;           // sum of in_flight_pkts over the paths
    uint32_t tx_loss_score_ = 0;             // [PATH-13] loss score of all paths together
    uint32_t tx_prior_weight_ = 1u << 16;    // [PATH-13] item 5: (63/64)^(packets acknowledged)
    bool ce_echoed_ = false;                 // the peer has echoed a CE mark on some path
    uint64_t in_flight_bytes_ = 0;           // sum of in_flight_bytes over the paths
    uint16_t last_rx_path_ = 0;              // the peer's path that last brought DATA
    uint32_t probes_pending_ = 0;            // paths with probe_pending set
    Time cached_deadline_ = kNever;          // see next_deadline
    // note_deadline must follow every assignment of a timer to a real time.
    void note_deadline(Time t) {
        if (t < cached_deadline_) cached_deadline_ = t;
    }
    Time exact_deadline() const;
    // request_probe: one probing step on path p; a lossy path sends several copies of its
    // PROBE at once so that random loss alone rarely leaves a step unanswered ([PATH-13]).
    void request_probe(TxPath& p) {
        if (!p.probe_pending) ++probes_pending_;
        p.probe_pending = true;
        // The step whose silence fails the path (and a Failed path's re-probes) must outlast
        // the fabric's loss, which the path alone has seldom measured; the first step, the
        // common one, goes by the path's own score.
        const bool last = p.backoff + 1 >= cfg_.path_fail_timeouts || p.state == PathState::kFailed;
        p.probe_copies = static_cast<uint8_t>(
            last ? path_health::probes_per_step(probe_loss_score(p), path_health::kLastStepMissLog2)
                 : path_health::probes_per_step(p.loss_score));
        p.probe_ts = 0;  // stamped when the first copy leaves
    }
    // Only what awaits an ACK: a message waiting out an RNR or unknown-stream backoff, or
    // a delivery timer, expects none, so it must not run the dead-peer clock ([ERR-2]).
    bool outstanding_data() const { return in_flight_total_ > 0 || !retx_.empty(); }
    // nothing_unsent: every message and answer of this connection's streams has had each of
    // its segments sent once ([CC-12] DRAINED). Walks the streams: asked only when the ready
    // list and the retransmission queue are both empty, the end of a backlog.
    bool nothing_unsent() const;

    ConnectionStats stats_;
};

}  // namespace mroce::core
