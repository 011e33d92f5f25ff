// core/connection_rx.cc — the receiving half: path accounting and ACK generation
// (spec §6), direct placement, duplicate suppression and in-order completion (spec §8).
#include <algorithm>
#include <cstring>

#include "core/connection.h"
#include "core/endpoint.h"
#include "util/seq.h"

namespace mroce::core {

Connection::RxGen Connection::rx_generation(RxPath& rp, uint8_t gen) {
    // [PATH-7]: a newer generation restarts the path's receive window at the peer's isn;
    // an older one is stale: its data may still be placed but it is not acknowledged.
    if (!rp.seen || gen_diff(gen, rp.gen) > 0) {
        rp.seen = true;
        rp.gen = gen;
        rp.window.reset(peer_isn_);
        rp.ce_count = 0;
        rp.unacked = 0;
        return RxGen::kCurrent;
    }
    return gen == rp.gen ? RxGen::kCurrent : RxGen::kStale;
}

void Connection::on_data_unread() {
    ++stats_.wrong_state;  // e.g. DATA overtook the HELLO_ACK; the sender retransmits
    if (state_ == ConnState::kConnecting) dropped_while_opening();  // [CONN-31]
}

void Connection::on_data(const wire::DataPacket& p, const PacketMeta& meta, Time now) {
    const wire::DataHeader& h = p.hdr;
    ack_round_path_ = kNoAckRound;  // [ACK-13]: the next ACKs written start a new round
    if (state_ != ConnState::kEstablished) return on_data_unread();
    if (h.path_id >= rx_paths_.size()) {
        ++stats_.malformed;
        return;
    }
    // [PATH-12]: whatever becomes of the packet, it shows that an ACK of ours reached the
    // peer on the path it names.
    if ((h.flags & wire::data_flag::kReturnEcho) && h.return_echo < num_paths())
        on_return_echo(h.return_echo, now);
    RxPath& rp = rx_paths_[h.path_id];
    PathStats& ps = path_stats_[h.path_id];
    ++ps.packets_received;
    ps.bytes_received += h.payload_len;
    const bool current = rx_generation(rp, h.path_gen) == RxGen::kCurrent;
    if (current) {
        // [PATH-6]: the floor never lies above the packet that carries it.
        if (seq_gt(h.psn_floor, h.path_psn)) {
            ++stats_.malformed;
            return;
        }
        note_skipped(ps, rp.window.advance_to(h.psn_floor - 1));
        const RxWindow::Mark mark = rp.window.mark(h.path_psn);
        if (mark == RxWindow::Mark::kAboveWindow) {
            ++stats_.out_of_window;  // [PATH-5] violated by the sender: dropped, not acked
            return;
        }
        if (mark != RxWindow::Mark::kNew)
            ++ps.duplicate_psns;
        else
            return_routes_.data_arrived();  // [PATH-12]: the peer's DATA gets through
        if (meta.ecn == ecn::kCe) {
            ++rp.ce_count;
            ++ps.ecn_marks;
        }
        rp.last_ts = h.timestamp;
        rp.last_rx_time = now;
        ++rp.unacked;
        // [ACK-11]: ACK at once on request, on anything out of order, and every
        // ack_every packets; otherwise within max_ack_delay.
        if ((h.flags & wire::data_flag::kAckNow) || mark != RxWindow::Mark::kNew ||
            rp.window.has_gap() || rp.unacked >= cfg_.ack_every)
            queue_ack(h.path_id);
        else if (rp.ack_deadline == kNever) {
            rp.ack_deadline = now + cfg_.max_ack_delay;
            note_deadline(rp.ack_deadline);
        }
    } else {
        ++stats_.stale_generation;
    }
    Stream* s = ep_.stream_mut(h.stream_id);
    if (current && cfg_.rate_hint) {
        // [CC-12]: what arrived on the wire (duplicates too: they took the downlink), in the
        // class of the stream it belongs to as this end configured it.
        last_rx_path_ = h.path_id;
        const uint8_t tc = s && s->conn == id_ ? s->limits.traffic_class : control_class_;
        // [CC-14]: the one-way delay ends where the datagram reached this host: a
        // software receiver's own backlog (its socket buffer) is not the downlink's queue.
        const Time reached = std::min(meta.arrival, now);
        const uint32_t owd = static_cast<uint32_t>(to_ns(reached)) - h.timestamp;
        ep_.fair_share_.on_arrival(slot(), tc, h.payload_len, owd, now,
                                   (h.flags & wire::data_flag::kDrained) != 0);
    }
    if (!s || s->conn != id_) {
        // [STREAM-13]: a destroyed (or reset) stream's id is never reused, so its late
        // packets land here, counted apart, and are never placed.
        if (!s && ep_.retired_stream(h.stream_id)) ++stats_.retired_stream;
        ++stats_.unknown_stream;  // [STREAM-8]
        // [PLACE-30]: an answer gets no NACK; its msg_seq is not the responder's.
        if (!is_response(h.opcode))
            queue_nack(h, wire::NackReason::kInvalidRequest, wire::kNackDetailUnknownStream);
        return;
    }
    place(*s, p, now);
}

void Connection::place(Stream& s, const wire::DataPacket& p, Time now) {
    const wire::DataHeader& h = p.hdr;
    if (!s.seq_ready) return;
    // [PLACE-30]: an answer is outside the stream's sequence and window; it goes straight
    // to the request it names.
    if (is_response(h.opcode)) return place_answer(s, p, now);
    // [STREAM-9]: a retransmission (a delivery probe among them) is always answered with
    // the stream's delivery state, whatever becomes of its payload.
    if (h.flags & wire::data_flag::kRetx) report_delivery(s);
    if (s.rx_failed && seq_ge(h.msg_seq, s.rx_fail_seq)) {
        queue_nack(h, static_cast<wire::NackReason>(s.rx_fail_reason), 0);
        return;
    }
    const int32_t ahead = seq_diff(h.msg_seq, s.delivered_seq);
    if (ahead < 0) {
        // [STREAM-4]: the message already completed; its buffer may belong to the
        // application again. Drop without writing, and re-report delivery.
        ++stats_.stale_duplicates;
        report_delivery(s);
        // [PLACE-28]: a request re-sent after its delivery waits for an answer; if this
        // side holds none for it (its answer was acknowledged, [PLACE-30], or the message
        // delivered under its msg_seq was no request), none will come: say so.
        if (is_request(h.opcode) &&
            std::none_of(s.answers.begin(), s.answers.end(), [&](const TxMessage& m) {
                return !m.done && m.resp_to == h.msg_seq;
            }))
            queue_nack(h, wire::NackReason::kInvalidRequest, 0);
        return;
    }
    if (static_cast<uint32_t>(ahead) >= kStreamWindow) {
        ++stats_.out_of_window;  // [STREAM-3] violated by the sender
        return;
    }
    if (h.offset % segment_size_ != 0) {
        ++stats_.malformed;
        return;
    }
    // The slots are made when the stream first receives, and only as many as it has
    // messages in flight: a stream that only sends (or one of thousands that is idle)
    // costs no receive ring.
    RxMessage& slot = s.ring.make_room(h.msg_seq, static_cast<uint32_t>(ahead));
    if (!slot.active) {
        std::byte* target = nullptr;
        const Piece* sg = nullptr;
        uint32_t nsg = 0;
        uint32_t read_len = 0;
        if (is_request(h.opcode)) {
            if (!accept_request(s, p, target, read_len)) return;
        } else if (wire::consumes_receive(h.opcode)) {
            const PostedRecv* pr = nullptr;
            if (s.srq != 0) {
                // [PLACE-24]: receives are taken in the stream's recv_seq order. idx earlier
                // receive-consuming messages have none yet: this one needs the SRQ's
                // (idx + 1)-th oldest, the others go to them. Below 0: one was taken for it.
                const int32_t idx = seq_diff(h.recv_seq, s.posted_front_seq);
                if (idx < 0) {
                    auto c = std::find_if(s.srq_claimed.begin(), s.srq_claimed.end(),
                                          [&](const Stream::SrqClaim& x) { return x.recv_seq == h.recv_seq; });
                    if (c == s.srq_claimed.end()) {
                        ++stats_.malformed;
                        return;
                    }
                    if (c->bound) {  // [PLACE-14]: one message per receive
                        ++stats_.malformed;
                        return refuse(s, h, wire::NackReason::kInvalidRequest);
                    }
                    pr = &c->pr;
                } else if (idx > ahead) {
                    // More earlier messages without a receive than undelivered messages
                    // before this one: no sender numbers them so. Never trusted for a count.
                    ++stats_.malformed;
                    return;
                } else {
                    const Srq* q = ep_.srq_mut(s.srq);
                    if (q && q->posted.size() > static_cast<size_t>(idx)) pr = &q->posted[static_cast<size_t>(idx)];
                }
            } else {
                const int32_t idx = seq_diff(h.recv_seq, s.posted_front_seq);
                if (idx < 0) {
                    ++stats_.malformed;
                    return;
                }
                if (static_cast<size_t>(idx) < s.posted.size()) {
                    pr = &s.posted[static_cast<size_t>(idx)];
                    // [PLACE-14]: one message per receive. A second message naming a
                    // receive already claimed would keep a pointer into a buffer that
                    // completes with the first one; it is refused.
                    if (pr->claimed) {
                        ++stats_.malformed;
                        return refuse(s, h, wire::NackReason::kInvalidRequest);
                    }
                }
            }
            if (!pr) {
                // [PLACE-6]: no receive posted yet: NACK(RNR); the sender retries later.
                ++stats_.rnr_nacks_sent;
                queue_nack(h, wire::NackReason::kReceiverNotReady, s.limits.rnr_delay_us);
                return;
            }
            if (!wire::is_write(h.opcode)) {
                // [PLACE-2]: a SEND longer than its receive buffer is an invalid request.
                if (h.msg_len > pr->wr.length) return refuse(s, h, wire::NackReason::kInvalidRequest);
                target = pr->buf;
                if (!pr->sg.empty()) {
                    sg = pr->sg.data();
                    nsg = static_cast<uint32_t>(pr->sg.size());
                }
            }
        }
        if (wire::is_write(h.opcode)) {
            // [PLACE-4]: rkey, protection domain, REMOTE_WRITE and bounds, for the whole
            // message, before any byte is written.
            target = remote_target(s, h.rkey, h.remote_addr, h.msg_len, access::kRemoteWrite);
            if (!target) {
                ++stats_.access_errors;
                return refuse(s, h, wire::NackReason::kRemoteAccess);
            }
        }
        if (wire::consumes_receive(h.opcode) && s.srq != 0)
            take_srq_receive(s, h.recv_seq);  // every check passed: now it is consumed
        else if (wire::consumes_receive(h.opcode))
            s.posted[static_cast<size_t>(seq_diff(h.recv_seq, s.posted_front_seq))].claimed = true;
        slot.active = true;
        slot.complete = false;
        slot.msg_seq = h.msg_seq;
        slot.opcode = h.opcode;
        slot.msg_len = h.msg_len;
        slot.recv_seq = h.recv_seq;
        slot.imm = h.immediate;
        slot.rkey = h.rkey;
        slot.remote_addr = h.remote_addr;
        slot.segs.reset(static_cast<uint32_t>(
            std::max<uint64_t>(1, (uint64_t{h.msg_len} + segment_size_ - 1) / segment_size_)));
        slot.target = target;
        slot.sg = sg;
        slot.nsg = nsg;
        slot.read_len = read_len;
        slot.tail.clear();
        slot.last_asked_ack = false;
    } else if (slot.msg_seq != h.msg_seq || slot.opcode != h.opcode || slot.msg_len != h.msg_len ||
               slot.recv_seq != h.recv_seq || slot.rkey != h.rkey ||
               slot.remote_addr != h.remote_addr || slot.imm != h.immediate) {
        ++stats_.malformed;  // [PLACE-1] every packet of a message agrees with the first
        return;
    } else if (wire::is_write(slot.opcode) && !slot.complete &&
               remote_target(s, slot.rkey, slot.remote_addr, slot.msg_len,
                             access::kRemoteWrite) != slot.target) {
        // [PLACE-25]: the region was deregistered (or the queue pair lost REMOTE_WRITE)
        // since the first DATA: the application may have freed it, so no later segment,
        // the held last one included, is written. The requester gets the access error.
        // The pointer is compared too: an 8-bit key tag can come back on a slot
        // registered again, and the first DATA's pointer must still be that region's.
        ++stats_.access_errors;
        drop_slot(slot);
        return refuse(s, h, wire::NackReason::kRemoteAccess);
    }
    const uint32_t seg = h.offset / segment_size_;
    const uint32_t expect = std::min<uint32_t>(segment_size_, h.msg_len - h.offset);
    if (seg >= slot.segs.nseg() || h.payload_len != expect) {
        ++stats_.malformed;
        return;
    }
    const bool early_last = seg + 1 == slot.segs.nseg() && !slot.segs.others_written();
    switch (slot.segs.add(seg)) {
        case SegmentMap::Add::kNew: break;
        case SegmentMap::Add::kDuplicate: ++stats_.duplicate_segments; return;
        case SegmentMap::Add::kOutOfWindow: ++stats_.out_of_window; return;  // [PLACE-31]
    }
    // [PLACE-3]: bytes go straight to their final place; there is no reorder buffer.
    if (h.payload_len) {
        if (is_request(slot.opcode)) {
            std::memcpy(slot.body.data(), p.payload.data(), h.payload_len);  // one segment
        } else if (slot.target || slot.sg) {
            size_t now_bytes = h.payload_len;
            if (early_last) {
                // [PLACE-12]: the last segment came early: its end is held until the rest
                // of the message is in place.
                now_bytes = slot.tail.split(h.offset, p.payload.data(), h.payload_len);
                ++stats_.held_last_segments;
            }
            write_payload(slot, h.offset, p.payload.data(), now_bytes);
        }
    }
    s.bytes_placed += h.payload_len;  // first copy only: duplicates returned above
    if ((h.flags & wire::data_flag::kLast) && (h.flags & wire::data_flag::kAckNow))
        slot.last_asked_ack = true;
    if (slot.segs.complete()) {
        if (slot.tail.held()) {
            write_payload(slot, slot.tail.off, slot.tail.bytes.data(), slot.tail.len);
            slot.tail.clear();
        }
        slot.complete = true;
        // [ACK-11]: a message whose LAST segment asked for ACK_NOW but arrived before
        // another of its segments is reported at once by the DATA that lets it deliver,
        // not max_ack_delay later. (When the LAST itself delivers it, its ACK is queued.)
        if (deliver_in_order(s) && rx_paths_[h.path_id].seen && rx_paths_[h.path_id].gen == h.path_gen)
            queue_ack(h.path_id);
    }
}

// take_srq_receive binds the receive of the message with recv_seq to it, first moving the
// SRQ's oldest receives to the stream for it and every earlier receive-consuming message
// without one, in order ([PLACE-24]; on_data checked that the SRQ holds them), and raises
// the SRQ's limit event if that leaves too few.
void Connection::take_srq_receive(Stream& s, uint32_t recv_seq) {
    const int32_t idx = seq_diff(recv_seq, s.posted_front_seq);
    if (idx < 0) {
        for (Stream::SrqClaim& c : s.srq_claimed)
            if (c.recv_seq == recv_seq) c.bound = true;
        return;
    }
    Srq* q = ep_.srq_mut(s.srq);
    for (int32_t i = 0; i <= idx; ++i) {
        s.srq_claimed.push_back(Stream::SrqClaim{s.posted_front_seq++, i == idx, std::move(q->posted.front())});
        q->posted.pop_front();
    }
    if (q->limit > 0 && q->posted.size() < q->limit) {
        q->limit = 0;  // one event per arming, as verbs does
        Event e;
        e.kind = EventKind::kSrqLimit;
        e.connection = id_;
        e.srq = q->id;
        ep_.emit(e);
    }
}

// complete_srq_receive reports the receive a delivered message took from the SRQ.
void Connection::complete_srq_receive(Stream& s, const RxMessage& slot) {
    auto it = std::find_if(s.srq_claimed.begin(), s.srq_claimed.end(),
                           [&](const Stream::SrqClaim& c) { return c.recv_seq == slot.recv_seq; });
    MROCE_DCHECK(it != s.srq_claimed.end() && it->bound);  // bound when its first DATA was accepted
    if (it == s.srq_claimed.end()) return;
    complete_receive(s, it->pr.wr.wr_id, slot);
    s.srq_claimed.erase(it);
}

// complete_receive reports a receive that message `slot` consumed ([PLACE-10]).
void Connection::complete_receive(const Stream& s, uint64_t wr_id, const RxMessage& slot) {
    Event e;
    e.kind = EventKind::kCompletion;
    e.connection = id_;
    e.completion.wr_id = wr_id;
    e.completion.stream = s.id;
    e.completion.status = Status::kSuccess;
    e.completion.opcode =
        slot.opcode == wire::Opcode::kWriteImm ? WorkOpcode::kRecvWriteImm : WorkOpcode::kRecv;
    e.completion.byte_len = slot.msg_len;
    e.completion.has_imm = wire::has_immediate(slot.opcode);
    e.completion.imm = slot.imm;
    ep_.emit(e);
}

// remote_target resolves [addr, addr + len) under rkey for a peer's access `need`: a live
// region in the stream's protection domain with that access and the range inside it
// ([PLACE-4], [PLACE-15], [PLACE-17]), and the queue pair's own access flags
// ([STREAM-12]). nullptr when any of them refuses.
std::byte* Connection::remote_target(const Stream& s, uint32_t rkey, uint64_t addr, uint64_t len,
                                     uint32_t need) const {
    if (!(s.limits.remote_access & need)) return nullptr;
    auto t = ep_.memory_.check_remote(rkey, s.pd, addr, len, need);
    return t ? *t : nullptr;
}

// drop_slot forgets a message that was partly placed and is now refused: nothing more of
// it is written, and the stream's delivery stops before it ([ERR-3]).
void Connection::drop_slot(RxMessage& slot) {
    slot.active = false;
    slot.target = nullptr;
    slot.sg = nullptr;
    slot.tail.clear();
}

// accept_request checks the first (only) DATA of a READ or atomic request before any
// state is kept: body size and the memory it names. On refusal it
// has answered with a NACK and returns false.
bool Connection::accept_request(Stream& s, const wire::DataPacket& p, std::byte*& target,
                                uint32_t& read_len) {
    const wire::DataHeader& h = p.hdr;
    const bool read = h.opcode == wire::Opcode::kReadRequest;
    const uint32_t body = read ? wire::kReadRequestBodySize : wire::kAtomicRequestBodySize;
    if (h.msg_len != body || h.payload_len != body) {  // [DATA-8]
        ++stats_.malformed;
        refuse(s, h, wire::NackReason::kInvalidRequest);
        return false;
    }
    uint64_t len = 8;
    uint32_t need = access::kRemoteAtomic;
    if (read) {
        read_len = wire::decode_read_request(p.payload.first<wire::kReadRequestBodySize>());
        len = read_len;
        need = access::kRemoteRead;
    } else if (h.remote_addr % 8 != 0) {
        refuse(s, h, wire::NackReason::kInvalidRequest);  // [PLACE-17] misaligned
        return false;
    }
    // [PLACE-15], [PLACE-17]: rkey, protection domain, access flag and bounds.
    target = remote_target(s, h.rkey, h.remote_addr, len, need);
    if (!target) {
        ++stats_.access_errors;
        refuse(s, h, wire::NackReason::kRemoteAccess);
        return false;
    }
    return true;
}

bool Connection::deliver_in_order(Stream& s) {
    if (s.ring.empty()) return false;  // nothing received yet
    bool moved = false;
    bool asked_ack = false;
    for (;;) {
        RxMessage& slot = s.ring.at(s.delivered_seq);
        if (!slot.active || slot.msg_seq != s.delivered_seq || !slot.complete) break;
        if (is_request(slot.opcode) && s.answers.size() >= s.limits.max_dest_rd_atomic) {
            // [PLACE-20] [PLACE-30]: the answer credit is used up. The request waits,
            // complete in its slot, until the requester has every segment of an earlier
            // answer (answer_acked resumes delivery); it only sees a slower answer.
            ++stats_.requests_deferred;
            break;
        }
        if (wire::consumes_receive(slot.opcode) && s.srq != 0) {
            complete_srq_receive(s, slot);
        } else if (wire::consumes_receive(slot.opcode)) {
            // [PLACE-5]: receives are consumed strictly in order.
            if (s.posted.empty() || slot.recv_seq != s.posted_front_seq) {
                ++stats_.malformed;
                slot.active = false;
                s.rx_failed = true;
                s.rx_fail_seq = s.delivered_seq;
                s.rx_fail_reason = static_cast<uint8_t>(wire::NackReason::kInvalidRequest);
                break;
            }
            complete_receive(s, s.posted.front().wr.wr_id, slot);
            s.posted.pop_front();
            ++s.posted_front_seq;
        }
        if (is_request(slot.opcode)) {
            const bool read = slot.opcode == wire::Opcode::kReadRequest;
            if (remote_target(s, slot.rkey, slot.remote_addr, read ? slot.read_len : 8,
                              read ? access::kRemoteRead : access::kRemoteAtomic) != slot.target) {
                // [PLACE-26]: the memory was checked when the request arrived, but the
                // region may have been deregistered (and freed) while the request waited
                // for its turn: it is not executed, and the stream is refused from it on,
                // reported on the request's next DATA (a delivery probe), as [PLACE-5].
                ++stats_.access_errors;
                drop_slot(slot);
                s.rx_failed = true;
                s.rx_fail_seq = s.delivered_seq;
                s.rx_fail_reason = static_cast<uint8_t>(wire::NackReason::kRemoteAccess);
                break;
            }
            execute_request(s, slot);
        }
        ++stats_.messages_received;
        ++ep_.messages_delivered_;
        asked_ack |= slot.last_asked_ack;
        slot.active = false;
        ++s.delivered_seq;
        moved = true;
    }
    if (moved) report_delivery(s);
    return asked_ack;
}

// report_delivery puts the stream's delivery state in the next ACKs ([ACK-14]), once.
void Connection::report_delivery(Stream& s) {
    if (s.stream_ack_pending) return;
    s.stream_ack_pending = true;
    stream_acks_.push_back(s.id);
}

void Connection::note_reported(uint32_t id) {
    if (!recent_reports_.empty() && recent_reports_.front() == id) return;  // the usual case
    const auto it = std::find(recent_reports_.begin(), recent_reports_.end(), id);
    if (it != recent_reports_.end())
        recent_reports_.erase(it);
    else if (recent_reports_.size() == wire::kMaxAckStreams)
        recent_reports_.pop_back();
    recent_reports_.push_front(id);
}

void Connection::refuse(Stream& s, const wire::DataHeader& h, wire::NackReason reason) {
    // [ERR-3]: the message and every later one on this stream are refused with the same
    // reason; other streams are unaffected.
    if (!s.rx_failed || seq_lt(h.msg_seq, s.rx_fail_seq)) {
        s.rx_failed = true;
        s.rx_fail_seq = h.msg_seq;
        s.rx_fail_reason = static_cast<uint8_t>(reason);
    }
    queue_nack(h, reason, 0);
}

void Connection::queue_nack(const wire::DataHeader& h, wire::NackReason reason, uint32_t detail) {
    // A flood of bad packets cannot grow the queue without bound.
    static constexpr size_t kMaxQueuedNacks = 64;
    if (nacks_.size() >= kMaxQueuedNacks) {
        ++stats_.nacks_dropped;
        return;
    }
    wire::NackPacket n;
    n.common = peer_header(wire::PacketType::kNack);
    n.reason = reason;
    n.path_id = h.path_id;
    n.path_gen = h.path_gen;
    n.path_psn = h.path_psn;
    n.stream_id = h.stream_id;
    n.msg_seq = h.msg_seq;
    n.detail = detail;
    nacks_.push_back(n);
}

size_t Connection::write_ack(uint16_t rx_path, std::span<std::byte> buf, PacketMeta& meta, Time now) {
    RxPath& rp = rx_paths_[rx_path];
    // One AckPacket per endpoint, reused: only the fields below and the first
    // stream_count entries are written and encoded, so there is nothing to clear.
    wire::AckPacket& a = ep_.tx_ack_;
    a.common = peer_header(wire::PacketType::kAck);
    a.path_id = rx_path;
    a.path_gen = rp.gen;
    a.flags = rp.probe_reply ? wire::ack_flag::kProbeReply : 0;
    a.cum_psn = rp.window.cum();
    rp.window.to_wire(a.sack);
    // [ACK-21]: nothing to report above cum_psn (every loss-free ACK): the bitmap stays home.
    if (short_acks_ && wire::sack_empty(a.sack)) a.flags |= wire::ack_flag::kShort;
    a.ecn_ce_count = rp.ce_count;
    a.ts_echo = rp.last_ts;
    a.ack_delay_ns = static_cast<uint32_t>(std::clamp<int64_t>(to_ns(now - rp.last_rx_time), 0,
                                                               UINT32_MAX));
    a.rate_hint_mbps = cfg_.rate_hint ? ep_.fair_share_.hint_mbps(slot()) : 0;  // [CC-11]
    a.probe_psn = rp.probe_reply ? rp.probe_psn : 0;
    a.stream_count = 0;
    // [ACK-14]: streams whose delivery moved (or that saw a stale duplicate) ride along,
    // the destroyed ones' last reports first.
    while (!final_reports_.empty() && a.stream_count < wire::kMaxAckStreams) {
        a.streams[a.stream_count++] = final_reports_.back();
        final_reports_.pop_back();
    }
    while (!stream_acks_.empty() && a.stream_count < wire::kMaxAckStreams) {
        Stream* s = ep_.stream_mut(stream_acks_.front());
        stream_acks_.pop_front();
        if (!s) continue;
        s->stream_ack_pending = false;
        a.streams[a.stream_count++] = wire::StreamAck{s->id, s->delivered_seq};
        note_reported(s->id);
    }
    if (rp.probe_reply) {
        // [ACK-20]: the peer probes because this path's ACKs stopped; the lost ones may
        // have carried the last report of a stream, which nothing else would repeat until
        // the peer's delivery timer. The reply repeats the latest reported streams' state.
        const uint16_t fresh = a.stream_count;
        for (uint32_t id : recent_reports_) {
            if (a.stream_count == wire::kMaxAckStreams) break;
            bool in_ack = false;
            for (uint16_t i = 0; i < fresh; ++i) in_ack |= a.streams[i].stream_id == id;
            const Stream* s = in_ack ? nullptr : ep_.stream(id);
            if (s) a.streams[a.stream_count++] = wire::StreamAck{id, s->delivered_seq};
        }
    }
    if (buf.size() < wire::encoded_size(a)) return 0;
    // [ACK-13]: the ACKs of one round (written between two inputs) leave together on one
    // random usable path, so the datapath sends them with one system call; each round
    // covers every path, so a dead return route costs each path a share of its ACKs.
    if (ack_round_path_ == kNoAckRound || tx_paths_[ack_round_path_].state == PathState::kFailed) {
        ack_round_path_ = next_return_path(now);
        return_routes_.round_sent(ack_round_path_, now);  // [PATH-12]
    }
    uint16_t out = ack_round_path_;
    if (rp.probe_reply) {
        // [PROBE-2]: the reply goes twice, on two return routes (two planes when there are
        // several): the peer probes because this path's ACKs stopped, and one dead return
        // route must not make a healthy forward path look dead too.
        // (Copies of one probing step add a pair each, [PATH-13]: pairs are sent in turn.)
        const bool first_of_pair = rp.probe_copies % kProbeReplyCopies == 0;
        if (first_of_pair) {
            rp.probe_first_path = out;
        } else {
            out = other_return_path(rp.probe_first_path, now);
            if (out != ack_round_path_) return_routes_.round_sent(out, now);
        }
        rp.reply_paths[first_of_pair ? 0 : 1] = out;
        if (rp.reply_sent == kNever) rp.reply_sent = now;
        rp.replies_sent = static_cast<uint8_t>(std::min(rp.replies_sent + 1, 255));
        if (--rp.probe_copies > 0)
            queue_ack(rx_path);
        else
            rp.probe_reply = false;
    }
    a.return_path = out;  // [PATH-12]: the peer echoes it when the ACK arrives
    const size_t n = wire::store_ack(a, buf.data());
    rp.unacked = 0;
    rp.ack_deadline = kNever;
    set_meta(tx_paths_[out], meta);
    ++path_stats_[rx_path].acks_sent;
    return n;
}

void Connection::on_probe(const wire::ProbePacket& p, Time now) {
    ack_round_path_ = kNoAckRound;
    if (state_ != ConnState::kEstablished) return;
    ++stats_.probes_received;
    if (p.path_id >= rx_paths_.size() || seq_gt(p.psn_floor, p.next_psn)) {
        ++stats_.malformed;
        return;
    }
    RxPath& rp = rx_paths_[p.path_id];
    if (rx_generation(rp, p.path_gen) != RxGen::kCurrent) return;
    note_skipped(path_stats_[p.path_id], rp.window.advance_to(p.psn_floor - 1));
    // [PATH-12]: the same PROBE again, still waiting for PSNs we had all received and
    // acknowledged in our reply to it: that reply died on its way back, both copies.
    // Random loss takes both copies of one reply now and then (p^2); twice in a row (p^4)
    // is what a dead return route does.
    // A copy of the PROBE last answered (the same step: one timestamp, [PATH-13]) is answered
    // again but is no repeat, and leaves the count of repeats as it was.
    const bool unchanged = p.next_psn == rp.answered_next_psn && p.psn_floor == rp.answered_floor;
    const bool copy = unchanged && p.timestamp == rp.answered_ts;
    // Random loss takes replies too: the repeats count as evidence once a live route, at the
    // loss measured on the peer's DATA, would have lost every copy of those replies with a
    // chance below path_health::kMisfireQ30 (at no loss, at the second repeat as before).
    if (!copy) {
        // The peer still waits for PSNs, or for the reply itself (a Failed path, [PROBE-4]):
        // an idle path's PROBE ([LOSS-13]) is sent whether or not the last reply came.
        const bool waits = seq_lt(p.psn_floor, p.next_psn) || (p.flags & wire::kProbeFailed) != 0;
        const bool repeated = rp.probe_answered_whole && unchanged && waits;
        // A repeat that comes before our reply left, or sooner after it than the peer takes
        // to act on an ACK (the echo delay), may have crossed that reply: a peer busy for a
        // while (a loaded host) sends its next probing step before it reads what came in.
        // It is no evidence either way and leaves the run as it was.
        const bool crossed = rp.reply_sent == kNever || now - rp.reply_sent < return_routes_.echo_srtt();
        if (repeated && crossed) {
            ++stats_.probe_repeats_crossed;
        } else {
            if (repeated) {
                rp.probe_repeats = static_cast<uint8_t>(std::min(rp.probe_repeats + 1, 255));
                const uint64_t lost = path_health::pow_q30(
                    path_health::loss_q30(return_routes_.rx_loss_score()), rp.replies_sent);
                rp.replies_lost_chance = (rp.replies_lost_chance * lost) >> 30;
            } else {
                rp.probe_repeats = 0;
                rp.replies_lost_chance = path_health::kOneQ30;
            }
            if (rp.probe_repeats >= kRepeatsForLostReplies && rp.replies_lost_chance < path_health::kMisfireQ30)
                reply_lost(rp, now);
        }
        rp.replies_sent = 0;
    }
    rp.probe_answered_whole = seq_ge(rp.window.cum(), p.next_psn - 1);
    rp.answered_next_psn = p.next_psn;
    rp.answered_floor = p.psn_floor;
    rp.answered_ts = p.timestamp;
    if (!copy) {
        rp.reply_paths = {RxPath::kNoPath, RxPath::kNoPath};
        rp.reply_sent = kNever;
    }
    rp.last_ts = p.timestamp;
    rp.last_rx_time = now;
    // [PROBE-2]: a PROBE is answered at once with an ACK that echoes its next_psn.
    const bool more = copy && rp.probe_reply && rp.probe_copies <= kMaxReplyCopies - kProbeReplyCopies;
    rp.probe_copies = more ? static_cast<uint8_t>(rp.probe_copies + kProbeReplyCopies) : kProbeReplyCopies;
    rp.probe_reply = true;
    rp.probe_psn = p.next_psn;
    queue_ack(p.path_id);
}

}  // namespace mroce::core
