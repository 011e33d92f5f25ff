// core/connection_tx.cc — what a connection sends next: control first, then
// retransmissions on the best path, then new data round-robin over streams, each segment
// on the path its selector picks (core/path_selector.h; spec §5, §7).
#include <algorithm>
#include <cstring>

#include "core/connection.h"
#include "core/endpoint.h"
#include "util/seq.h"

namespace mroce::core {

namespace {
uint32_t ts32(Time now) { return static_cast<uint32_t>(to_ns(now)); }
}  // namespace

size_t Connection::produce(std::span<std::byte> buf, PacketMeta& meta, Time now, InPlace* in_place,
                           bool data_only) {
    if (data_only)  // a CLOSE due goes before any more DATA
        return state_ == ConnState::kEstablished && !close_pending_ ? produce_data(buf, meta, now, in_place) : 0;
    if (state_ == ConnState::kConnecting) {
        if (hello_acks_pending_ > 0) {  // [CONN-7]: the answer to the peer's own HELLO
            --hello_acks_pending_;
            return write_hello(buf, meta, wire::PacketType::kHelloAck, now);
        }
        if (hellos_pending_ == 0) return 0;
        --hellos_pending_;  // [CONN-30]: one copy of the round
        return write_hello(buf, meta, wire::PacketType::kHello, now);
    }
    if (close_pending_) {
        close_pending_ = false;
        const size_t n = write_close(buf, meta, now);
        if (n) {
            ++closes_sent_;
            last_close_ = now;
        }
        return n;
    }
    if (state_ != ConnState::kEstablished) return 0;
    if (hello_acks_pending_ > 0) {
        --hello_acks_pending_;
        return write_hello(buf, meta, wire::PacketType::kHelloAck, now);
    }
    if (!nacks_.empty()) {
        auto n = wire::encode_nack(nacks_.front(), buf);
        nacks_.pop_front();
        if (n) {
            set_meta(tx_paths_[next_return_path(now)], meta);
            ++stats_.nacks_sent;
            return *n;
        }
    }
    if (size_t n = write_queued_ack(buf, meta, now)) return n;
    if (probes_pending_ > 0) {
        // [LOSS-13]: the PROBE of a path in a timeout step leaves before that of an idle path
        // probed beside it. The step is timed from when its own PROBE leaves (probe_left),
        // and only an answer to something sent after that singles its route out; an idle
        // path's PROBE that left first was answered in vain, and a dead route beside an idle
        // live one was probed for ever (Connection.HandshakeRetriesLeaveFromNewPorts, seed
        // 148: path 1 dead, path 0 idle, 481 stalled timeouts in 200 ms).
        TxPath* idle = nullptr;
        for (TxPath& p : tx_paths_) {
            if (!p.probe_pending) continue;
            if (in_timed_step(p)) return write_probe(p, buf, meta, now);
            if (!idle) idle = &p;
        }
        if (idle) return write_probe(*idle, buf, meta, now);
    }
    return produce_data(buf, meta, now, in_place);
}

size_t Connection::write_queued_ack(std::span<std::byte> buf, PacketMeta& meta, Time now) {
    // [ACK-13] gather_acks: a new round takes the ACKs still delayed on other paths too, so
    // that they leave in this round's system call instead of each in a round of its own.
    if (cfg_.gather_acks && ack_round_path_ == kNoAckRound && !ack_queue_.empty()) queue_delayed_acks();
    while (!ack_queue_.empty()) {
        const uint16_t p = ack_queue_.front();
        ack_queue_.pop_front();
        rx_paths_[p].ack_queued = false;
        if (size_t n = write_ack(p, buf, meta, now)) return n;
    }
    return 0;
}

bool Connection::acks_delayed() const {
    for (const RxPath& rp : rx_paths_)
        if (rp.ack_deadline != kNever) return true;
    return false;
}

size_t Connection::next_ack_size() const {
    const size_t entries = std::min<size_t>(final_reports_.size() + stream_acks_.size(), wire::kMaxAckStreams);
    // [ACK-21]: SHORT when the path the next ACK reports has no gap in its window: the
    // queue's first, or else the first delayed one (send_delayed_acks queues them in order).
    const RxPath* next = ack_queue_.empty() ? nullptr : &rx_paths_[ack_queue_.front()];
    for (size_t i = 0; !next && i < rx_paths_.size(); ++i)
        if (rx_paths_[i].ack_deadline != kNever) next = &rx_paths_[i];
    const bool short_form = short_acks_ && next && !next->window.has_gap();
    return (short_form ? wire::kAckShortFixedSize : wire::kAckFixedSize) + entries * wire::kAckStreamEntrySize;
}

bool Connection::queue_delayed_acks() {
    bool any = false;
    for (uint16_t i = 0; i < rx_paths_.size(); ++i)
        if (rx_paths_[i].ack_deadline != kNever) {
            queue_ack(i);
            any = true;
        }
    return any;
}

// send_delayed_acks: [ACK-11] lets an ACK leave before max_ack_delay; with
// ack_with_reverse_data the delayed ones go with the DATA this connection sends now on
// `data_path` (queued, they leave in the same transmit batch). A new round of them takes
// that DATA's path as its return path ([ACK-13]): they then leave from the DATA's source
// port, after it, in the same system call, and reach the peer together with it. From
// another port they would leave in a second send, and the ACK, which completes the peer's
// request, could overtake the answer the peer's application then looks for in its memory
// (ib_write_lat), which nobody there would be receiving any more.
void Connection::send_delayed_acks(uint16_t data_path, Time now) {
    const bool any = queue_delayed_acks();
    if (any && ack_round_path_ == kNoAckRound && tx_paths_[data_path].state != PathState::kFailed) {
        ack_round_path_ = data_path;
        return_routes_.round_sent(data_path, now);  // [PATH-12]
    }
}

bool Connection::nothing_unsent() const {
    for (uint32_t sid : streams_) {
        const Stream* s = ep_.stream(sid);
        if (s && !s->failed && (s->send_cursor < s->tx.size() || s->answer_cursor < s->answers.size()))
            return false;
    }
    return true;
}

uint32_t Connection::segment_bytes(const TxMessage& m, uint32_t seg) const {
    const uint64_t off = uint64_t{seg} * segment_size_;
    return static_cast<uint32_t>(std::min<uint64_t>(segment_size_, m.msg_len - off));
}

Stream* Connection::stream_by_remote(uint32_t remote_id) {
    auto it = by_remote_.find(remote_id);
    return it == by_remote_.end() ? nullptr : ep_.stream_mut(it->second);
}

void Connection::make_room(TxPath& p) {
    // Lost records are kept at the bottom of the window so that a late ACK can reveal a
    // spurious retransmission; they are dropped when the window needs the space.
    while (p.span() >= wire::kSackBits && p.rec(p.base).state != TxRecord::State::kInFlight) {
        p.rec(p.base).state = TxRecord::State::kFree;
        ++p.base;
    }
    if (p.span() < p.ring.size()) return;
    // Grow the ring (power of two, at most kSackBits) keeping every record at its PSN.
    std::vector<TxRecord> bigger(p.ring.size() * 2);
    for (uint32_t psn = p.base; psn != p.next_psn; ++psn)
        bigger[psn & (bigger.size() - 1)] = p.rec(psn);
    p.ring.swap(bigger);
}

uint32_t Connection::psn_floor(const TxPath& p) const {
    uint32_t psn = p.base;
    while (psn != p.next_psn &&
           const_cast<TxPath&>(p).rec(psn).state != TxRecord::State::kInFlight)
        ++psn;
    return psn;
}

uint32_t Connection::window_loss_prior() const {
    // A queue's losses are not to be stretched for ([PATH-13] item 4): once the peer has
    // echoed a CE mark on any path, each path's own score stands alone.
    if (ce_echoed_) return 0;
    return path_health::unbiased_score(tx_loss_score_, tx_prior_weight_);
}

PathView Connection::path_view() const {
    return PathView{tx_paths_, *cc_, ep_.ready_ports(), window_loss_prior()};
}

TxPath* Connection::pick_new_data_path(uint32_t bytes) {
    const uint16_t p = selector_->next_path(path_view(), bytes);
    return p == kNoPathChoice ? nullptr : &tx_paths_[p];
}

// [LOSS-6]: a retransmission goes to the usable path with the lowest recent loss score,
// then the lowest smoothed RTT; the path that just lost the packet scores worst.
TxPath* Connection::pick_retx_path(uint32_t bytes) {
    const uint16_t p = PathSelector::retransmit_path(path_view(), bytes);
    return p == kNoPathChoice ? nullptr : &tx_paths_[p];
}

size_t Connection::produce_data(std::span<std::byte> buf, PacketMeta& meta, Time now,
                                InPlace* in_place) {
    // The Engine contract: buf holds max_datagram_size(). Checked before any state moves,
    // so a short buffer can never lose a segment.
    if (buf.size() < wire::kDataHeaderSize + segment_size_) return 0;
    // [CC-15] [CC-17] [CC-18]: the connection-wide limits come before any path's window.
    // A full-size segment is assumed: a shorter one waits at most one segment's time.
    if (!data_gate_open(segment_size_, now)) {
        // The gate may have closed since has_work said it was open (a hint that rose
        // re-times the held packet to this connection's phase of the new gap). The
        // connection now leaves the ready list, so a closed pacer must have its timer:
        // nothing else would wake it. (The in-flight cap reopens on an ACK.)
        arm_pacer(now);
        return 0;
    }
    if (retx_copies_.left > 0) {
        if (size_t n = send_retx_copy(buf, meta, now, in_place)) return n;
    }
    while (!retx_.empty()) {
        const SegRef r = retx_.front();
        Stream* s = ep_.stream_mut(r.stream);
        TxMessage* m = live_msg(s, r.answer, r.msg_seq);
        if (!m || m->seg_acked(r.seg)) {
            if (m) m->unqueue(r.seg);
            // [LOSS-14]: the segment declared lost was acknowledged, or its message
            // completed, before this retransmission left: the loss was not real.
            if (s && !s->failed) ++stats_.retransmits_cancelled;
            retx_.pop_front();
            continue;
        }
        if (m->rnr_wait) {
            // [PLACE-6] [STREAM-8]: the peer refused the message for now, after this copy
            // was queued (a loss or a tail copy found before the NACK arrived). Its readiness
            // probe sends it again after the NACK's delay; nothing of it leaves before.
            m->unqueue(r.seg);
            retx_.pop_front();
            continue;
        }
        if (!m->in_segment_window(r.seg)) {
            // [PLACE-31]: not yet; it goes back in the queue when the floor rises.
            defer_segment(*m, r.seg);
            retx_.pop_front();
            continue;
        }
        TxPath* p = pick_retx_path(segment_bytes(*m, r.seg));
        if (!p) return 0;
        retx_.pop_front();
        m->unqueue(r.seg);
        // [LOSS-17]: a sender with no new data left has the bandwidth to send a
        // retransmission more than once, and nothing sent later would reveal its loss
        // before a timeout: at a high measured loss it also goes on other paths.
        if (cfg_.retx_copies && nothing_unsent()) {
            const uint32_t copies = path_health::retx_copies(tx_loss_score_);
            if (copies > 1) {
                retx_copies_ = RetxCopies{r, copies - 1, 1, {p->id}};
            }
        }
        return send_segment(*s, *m, r.seg, true, *p, buf, meta, now, in_place);
    }
    for (size_t tries = ready_streams_.size(); tries > 0; --tries) {
        // The stream stays at the front until we know where it goes: a lone ready stream
        // that keeps sending is never popped and pushed back.
        const uint32_t sid = ready_streams_.front();
        Stream* s = ep_.stream_mut(sid);
        if (!s) {
            ready_streams_.pop_front();
            continue;
        }
        const size_t ntx = s->tx.size();  // a deque's size() costs a division: once
        TxMessage* m = nullptr;
        if (!s->failed && s->answers.empty() && s->send_cursor < ntx) {  // the common case
            TxMessage& head = s->tx[s->send_cursor];
            m = head.started() ? &head : try_start(*s, head);
        } else if (!s->failed) {
            m = next_new_message(*s, ntx);
        }
        // [PLACE-31]: a message whose next segment is a whole segment window above its
        // first unacknowledged one waits; an ACK that moves the floor brings it back.
        if (m && !m->in_segment_window(m->next_new_seg)) m = nullptr;
        if (!m) {
            // Nothing may start now: re-added when the oldest message completes, a READ
            // completes, or an answer is queued (stream_has_work).
            ready_streams_.pop_front();
            s->in_ready_list = false;
            continue;
        }
        const uint32_t bytes = segment_bytes(*m, m->next_new_seg);
        // A path kept for this segment while its ACKs went first (below) is taken if it
        // still can send it.
        const uint16_t kept = kept_data_path_;
        kept_data_path_ = kNoPathChoice;
        TxPath* p = kept != kNoPathChoice && path_view().can_send(kept, bytes)
                        ? &tx_paths_[kept]
                        : pick_new_data_path(bytes);
        if (!p) return 0;  // it stays at the front
        // [ACK-12], [ACK-13]: with ack_with_reverse_data the delayed ACKs leave with this
        // DATA, from its path's source port, the longer of the two first: UDP GSO packs
        // datagrams of one size followed by one shorter, so the pair then travels as one
        // super-packet and the peer receives both in one read. A tiny DATA (a ping-pong
        // of 8-byte WRITEs) is shorter than the ACK, so the ACK goes first; otherwise the
        // DATA does (send_segment queues the ACKs after it). [WIRE-10]: on a connection
        // that negotiated COALESCE, one ACK and a DATA that fit a full DATA's size share
        // one datagram instead, the ACK first: cheaper to send and receive than a
        // two-datagram super-packet.
        size_t ack_bytes = 0;
        // Only with the segment that ends its message (send_segment, below).
        const bool ends_message = m->next_new_seg + 1 == m->nseg;
        if (cfg_.ack_with_reverse_data && ends_message && ack_queue_.empty() && acks_delayed()) {
            const bool ack_first = data_header_size(m->opcode) + bytes < next_ack_size();
            const bool coalesce = coalesce_ && next_ack_size() + bytes <= segment_size_;
            if (ack_first || coalesce) {
                send_delayed_acks(p->id, now);
                const bool one_ack = ack_queue_.size() == 1;
                if (size_t n = write_queued_ack(buf, meta, now)) {
                    // (A probe reply's ACK may have grown beyond next_ack_size().)
                    if (!coalesce || !one_ack || n + bytes > segment_size_) {
                        kept_data_path_ = p->id;  // the segment itself leaves on the next call
                        return n;
                    }
                    buf[19] |= std::byte{wire::ack_flag::kFollowed};
                    ack_bytes = n;
                    ++stats_.acks_coalesced;
                }
            }
        }
        const uint32_t seg = m->next_new_seg++;
        const bool answer = is_response(m->opcode);
        if (m->next_new_seg == m->nseg) ++(answer ? s->answer_cursor : s->send_cursor);
        s->answer_turn = !answer;  // [PLACE-30]: answers and the stream's messages alternate
        if (s->send_cursor < ntx || (!s->answers.empty() && s->answer_cursor < s->answers.size())) {
            if (&ready_streams_.front() != &ready_streams_.back()) {  // round-robin: one segment per turn
                ready_streams_.pop_front();
                ready_streams_.push_back(sid);
            }
        } else {
            ready_streams_.pop_front();
            s->in_ready_list = false;
        }
        return ack_bytes + send_segment(*s, *m, seg, false, *p, buf.subspan(ack_bytes), meta, now, in_place);
    }
    return 0;
}

size_t Connection::send_retx_copy(std::span<std::byte> buf, PacketMeta& meta, Time now,
                                  InPlace* in_place) {
    RetxCopies& c = retx_copies_;
    Stream* s = ep_.stream_mut(c.ref.stream);
    TxMessage* m = live_msg(s, c.ref.answer, c.ref.msg_seq);
    // Acknowledged meanwhile, refused for now ([PLACE-6]), or no other path can take it
    // now: the copies are given up (the original still stands for the segment).
    if (!m || m->seg_acked(c.ref.seg) || m->rnr_wait || !m->in_segment_window(c.ref.seg)) {
        c.left = 0;
        return 0;
    }
    const uint16_t p = PathSelector::retransmit_path(path_view(), segment_bytes(*m, c.ref.seg),
                                                     std::span(c.used, c.used_n));
    if (p == kNoPathChoice) {
        c.left = 0;
        return 0;
    }
    --c.left;
    c.used[c.used_n++] = p;
    ++stats_.retransmits_copied;
    return send_segment(*s, *m, c.ref.seg, true, tx_paths_[p], buf, meta, now, in_place);
}

TxMessage* Connection::next_new_message(Stream& s, size_t ntx) {
    // (Most streams owe no answers: empty() spares a deque's size() on the hot path.)
    const bool have_answer = !s.answers.empty() && s.answer_cursor < s.answers.size();
    // [PLACE-30]: an answer needs no window and no turn of the stream's own messages; when
    // both have something to send they take turns, so neither starves the other.
    if (have_answer && (s.answer_turn || s.send_cursor >= ntx)) return &s.answers[s.answer_cursor];
    if (s.send_cursor < ntx) {
        TxMessage& m = s.tx[s.send_cursor];
        if (m.started()) return &m;
        if (TxMessage* started = try_start(s, m)) return started;
    }
    return have_answer ? &s.answers[s.answer_cursor] : nullptr;
}

TxMessage* Connection::try_start(Stream& s, TxMessage& m) {
    // [STREAM-3]: at most kStreamWindow messages of a stream are in flight.
    const uint32_t front = s.tx.front().started() ? s.tx.front().msg_seq : s.next_msg_seq;
    if (seq_diff(s.next_msg_seq, front) >= static_cast<int32_t>(kStreamWindow)) return nullptr;
    // [PLACE-20]: READs and atomics beyond max_rd_atomic wait, as does a fenced request
    // behind earlier ones [PLACE-21]; both resume when one completes.
    if ((is_request(m.opcode) && s.rd_outstanding >= s.limits.max_rd_atomic) ||
        (m.wr.fence && s.rd_outstanding > 0))
        return nullptr;
    if (is_request(m.opcode)) ++s.rd_outstanding;
    m.msg_seq = s.next_msg_seq++;
    if (wire::consumes_receive(m.opcode)) m.recv_seq = s.next_recv_seq++;
    // 64-bit: a length near 2^32 must not wrap the segment count.
    m.nseg = static_cast<uint32_t>(
        std::max<uint64_t>(1, (uint64_t{m.msg_len} + segment_size_ - 1) / segment_size_));
    m.segs.start(m.nseg);
    return &m;
}

size_t Connection::send_segment(Stream& s, TxMessage& m, uint32_t seg, bool retx, TxPath& path,
                                std::span<std::byte> buf, PacketMeta& meta, Time now,
                                InPlace* in_place) {
    const uint32_t bytes = segment_bytes(m, seg);
    MROCE_DCHECK(buf.size() >= wire::kDataHeaderSize + bytes);  // checked in produce_data (full size)
    if (!outstanding_data()) {
        last_progress_ = now;  // [ERR-2] the dead-peer clock starts
        note_deadline(now + cfg_.peer_dead_timeout);
    }
    // The common case needs neither of make_room's steps: nothing to drop below a span of
    // kSackBits, and the ring holds the span.
    if (path.span() >= wire::kSackBits || path.span() >= path.ring.size()) make_room(path);
    const uint32_t psn = path.next_psn++;
    TxRecord& rec = path.rec(psn);
    const bool answer = is_response(m.opcode);
    rec = TxRecord{TxRecord::State::kInFlight, retx, answer, s.id, m.msg_seq, seg, bytes, now};
    ++path.in_flight_pkts;
    ++in_flight_total_;
    path.in_flight_bytes += bytes;
    in_flight_bytes_ += bytes;

    wire::DataHeader h;
    h.common = peer_header(wire::PacketType::kData);
    h.opcode = m.opcode;
    const bool last = seg + 1 == m.nseg;
    // [ACK-12]: the last segment of a message (of the last one queued, when configured so)
    // and retransmissions ask for an immediate ACK. With ack_with_reverse_data none does at
    // a pause, SENDs included: the ACK rides with the answer. (A receiver that destroys the
    // stream as soon as the message completes keeps its delivery report for that ACK,
    // [ACK-14].)
    const bool nothing_queued = ready_streams_.empty() && retx_.empty() && retx_copies_.left == 0;
    const bool pause = nothing_queued && !cfg_.ack_with_reverse_data;
    // [ACK-12]: and, without ack_with_reverse_data, the DATA that spends the connection's
    // in-flight cap ([CC-5]: the first-RTT budget, [CC-15], or max_inflight_bytes): nothing
    // more may leave until an ACK returns, and the budget's one or two segments per path,
    // below ack_every, would each have theirs held for max_ack_delay. Only that one: its
    // ACK, a round trip later, finds the other senders of an incast's first packets in at
    // the receiver and so carries a share that counts them.
    const bool spends_cap = !cfg_.ack_with_reverse_data &&
                            in_flight_bytes_ + segment_size_ > rate_.inflight_cap(now);
    const bool ack_now = retx || (last && (cfg_.ack_now_every_message || pause)) || spends_cap;
    // With ack_with_reverse_data the delayed ACKs follow the segment that ends a message
    // (or a retransmission), not an earlier one: the ACK completes the peer's request, and
    // the peer's application then looks for this answer in its memory, which must by then
    // hold all of it. After a message's first segment, the ACK would be read with it and
    // the rest after the peer's application stopped polling (ib_write_lat, 16 KiB: the
    // rest waited for another thread). Until then the ACKs wait at most max_ack_delay.
    if (cfg_.ack_with_reverse_data && (last || retx)) send_delayed_acks(path.id, now);
    h.flags = static_cast<uint8_t>((last ? wire::data_flag::kLast : 0) |
                                   (retx ? wire::data_flag::kRetx : 0) |
                                   (ack_now ? wire::data_flag::kAckNow : 0));
    // [CC-12]: nothing left to send after this one; the receiver may let this sender go.
    if (nothing_queued && nothing_unsent()) h.flags |= wire::data_flag::kDrained;
    if (return_routes_.echo_owed()) {  // [PATH-12]: one of the peer's return paths that works
        h.flags |= wire::data_flag::kReturnEcho;
        h.return_echo = static_cast<uint8_t>(return_routes_.take_echo());
    }
    h.path_id = path.id;
    h.path_gen = path.gen;
    h.payload_len = static_cast<uint16_t>(bytes);
    h.path_psn = psn;
    h.psn_floor = psn_floor(path);
    h.stream_id = s.remote_id;
    // [PLACE-30]: an answer is outside the stream's sequence; it carries the msg_seq of
    // the request it answers (as remote_addr does), and its own answer_seq stays local.
    h.msg_seq = answer ? m.resp_to : m.msg_seq;
    h.recv_seq = wire::consumes_receive(m.opcode) ? m.recv_seq : 0;
    h.msg_len = m.msg_len;
    h.offset = seg * segment_size_;
    h.timestamp = ts32(now);
    if (wire::is_write(m.opcode) || is_request(m.opcode)) {
        h.rkey = m.wr.rkey;
        h.remote_addr = m.wr.remote_addr;
    } else if (answer) {
        h.remote_addr = m.resp_to;  // [PLACE-16]: names the request it answers
    }
    if (wire::has_immediate(m.opcode)) h.immediate = m.wr.imm;
    // [DATA-9]: recv_seq and immediate, unused by this opcode, stay home where negotiated.
    if (sends_compact(m.opcode)) h.flags |= wire::data_flag::kCompact;
    const size_t header = wire::data_header_size(h.flags);
    wire::store_data_header(h, buf.data());  // room checked in produce_data
    size_t copied = bytes;  // payload bytes written into buf
    if (bytes) {
        std::byte* out = buf.data() + header;
        // A READ's source is re-checked as it is read: the application may have
        // deregistered it since the request ran, and freed memory must never be sent.
        if (m.opcode == wire::Opcode::kReadResponse &&
            !ep_.memory_.check_remote(m.wr.rkey, s.pd, m.wr.remote_addr + h.offset, bytes,
                                      access::kRemoteRead)) {
            ++stats_.read_source_gone;
            std::memset(out, 0, bytes);
        } else if (!m.sg.empty() && !is_request(m.opcode)) {  // a READ's list is its destination
            copy_from_pieces(m.sg.data(), m.sg.size(), h.offset, out, bytes);  // [PLACE-22]
        } else if (in_place && bytes >= Engine::kInPlaceMinBytes && m.payload() == m.src &&
                   m.inline_bytes.empty() &&
                   (wire::is_write(m.opcode) || wire::consumes_receive(m.opcode))) {
            // The application's own buffer (not a copy the engine keeps, nor a READ's
            // source, which is checked as it is read): left where it lies (Engine,
            // poll_transmit_in_place).
            *in_place = std::span<const std::byte>(m.src + h.offset, bytes);
            copied = 0;
        } else {
            std::memcpy(out, m.payload() + h.offset, bytes);
        }
    }
    set_meta(path, meta);
    meta.traffic_class = s.limits.traffic_class;  // [STREAM-14]: DATA in its stream's class

    PathStats& ps = path_stats_[path.id];
    ++ps.packets_sent;
    ps.bytes_sent += bytes;
    if (retx) {
        ++ps.retransmits_sent;
        ++stats_.retransmits;
    }
    cc_->on_sent(path.id, bytes, now);
    const uint64_t rate = cfg_.pacing ? pacing_rate_bps(now) : 0;
    rate_.on_sent(bytes, rate, now);
    const Time next = rate ? rate_.send_time(rate, now) : now;
    if (next > now) {  // [CC-17]: the pacer's timer brings the next DATA
        pace_deadline_ = next;
        note_deadline(next);
        ++stats_.paced_waits;
    }
    // [LOSS-4]: no delayed ACK to wait for; but the cap-spending DATA keeps max_ack_delay
    // in its path's PTO (without it, 7 live paths failed in the 64-host all-to-all at 1 %).
    path.newest_asks_ack = ack_now && !spends_cap;
    if (path.pto_deadline == kNever) arm_pto(path, now);
    if (path.overdue_since == kNever) set_overdue(path, now);  // [PATH-11]
    return header + copied;
}

size_t Connection::write_probe(TxPath& p, std::span<std::byte> buf, PacketMeta& meta, Time now) {
    // [PATH-13]: every copy of one step carries the first copy's timestamp, so the peer
    // does not take the copies for PROBEs repeated after a lost reply ([PATH-12]).
    if (p.probe_ts == 0) {
        p.probe_ts = ts32(now) | 1;
        probe_left(p, now);
    }
    if (p.probe_copies <= 1) {
        p.probe_pending = false;
        --probes_pending_;
    }
    p.probe_copies = static_cast<uint8_t>(p.probe_copies > 0 ? p.probe_copies - 1 : 0);
    wire::ProbePacket pr;
    pr.common = peer_header(wire::PacketType::kProbe);
    pr.path_id = p.id;
    pr.path_gen = p.gen;
    pr.next_psn = p.next_psn;
    pr.psn_floor = psn_floor(p);
    pr.timestamp = p.probe_ts;
    // [PROBE-4]: a Failed path waits for this reply, so the peer can count a PROBE repeated
    // after its reply as a lost reply even when nothing is in flight ([PATH-12] item 6).
    if (p.state == PathState::kFailed) pr.flags = wire::kProbeFailed;
    auto n = wire::encode_probe(pr, buf);
    if (!n) return 0;
    set_meta(p, meta);  // a probe travels the path it tests
    ++path_stats_[p.id].probes_sent;
    return *n;
}

size_t Connection::write_close(std::span<std::byte> buf, PacketMeta& meta, Time now) {
    wire::ClosePacket c;
    c.common = peer_header(wire::PacketType::kClose);
    c.reason = static_cast<uint32_t>(close_reason_);  // [CONN-29]: NORMAL or CONFIRM
    auto n = wire::encode_close(c, buf);
    if (!n) return 0;
    set_meta(tx_paths_[next_return_path(now)], meta);
    return *n;
}

}  // namespace mroce::core
