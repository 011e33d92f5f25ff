// core/connection_answer.cc — READ and atomic answers (spec §8.1, [PLACE-30]): executing
// a request and queueing its answer at the responder, placing the answer at the requester,
// and the answer credit that keeps answers out of the stream window.
//
//   requester                               responder
//   tx: ... REQ(msg_seq q) ... ──────────► ring slot q ── delivered in order ──┐
//                                                                              │ execute
//   q's buffer ◄── place_answer ◄── ANSWER(msg_seq q, remote_addr q) ◄── answers
//                                      (at most max_dest_rd_atomic held)
//   path-level ACKs of every segment of the answer ──────────────────► answer_acked
//
// An answer is not a message of the responder's side of the stream: it has no place in
// that side's msg_seq order, its window or its delivery reports, so neither side's
// messages can hold up the other side's answers (issue 17, finding 1).
#include <algorithm>
#include <cstring>

#include "core/connection.h"
#include "core/endpoint.h"
#include "util/seq.h"

namespace mroce::core {

// execute_request runs a READ or atomic at its turn in the stream ([PLACE-18]: after every
// earlier message of the stream, exactly once) and queues the answer, which is sent
// reliably and retransmitted from here until the requester has every segment of it.
// The caller has checked the answer credit ([PLACE-20]).
void Connection::execute_request(Stream& s, const RxMessage& slot) {
    TxMessage r;
    r.resp_to = slot.msg_seq;
    if (slot.opcode == wire::Opcode::kReadRequest) {
        r.opcode = wire::Opcode::kReadResponse;
        r.src = slot.target;
        r.msg_len = slot.read_len;
        r.wr.rkey = slot.rkey;
        r.wr.remote_addr = slot.remote_addr;
    } else {
        const wire::AtomicRequestBody b =
            wire::decode_atomic_request(std::span(slot.body).first<wire::kAtomicRequestBodySize>());
        uint64_t old;
        std::memcpy(&old, slot.target, sizeof old);
        uint64_t now_value = old;
        if (slot.opcode == wire::Opcode::kAtomicFetchAdd)
            now_value = old + b.swap_add;
        else if (old == b.compare)
            now_value = b.swap_add;
        std::memcpy(slot.target, &now_value, sizeof now_value);
        r.opcode = wire::Opcode::kAtomicResponse;
        r.msg_len = wire::kAtomicResponseBodySize;
        wire::encode_atomic_response(old, std::span(r.body).first<wire::kAtomicResponseBodySize>());
        ++stats_.atomics_executed;
    }
    // [PLACE-30]: started at once, under a local answer_seq that never goes on the wire.
    r.msg_seq = s.next_answer_seq++;
    r.nseg = static_cast<uint32_t>(
        std::max<uint64_t>(1, (uint64_t{r.msg_len} + segment_size_ - 1) / segment_size_));
    r.segs.start(r.nseg);
    s.answers.push_back(std::move(r));
    stream_has_work(s);
}

// answer_acked: the requester has every segment of answer m ([PLACE-30]). Answers leave
// the credit oldest first, so it is bounded by the answers held, and a request deferred
// for want of credit ([PLACE-20]) may now run.
void Connection::answer_acked(Stream& s, TxMessage& m) {
    m.done = true;
    bool freed = false;
    while (!s.answers.empty() && s.answers.front().done) {
        s.answers.pop_front();
        if (s.answer_cursor > 0) --s.answer_cursor;
        freed = true;
    }
    if (freed && !s.failed && s.answers.size() < s.limits.max_dest_rd_atomic) deliver_in_order(s);
}

// answered_request: the request an answer's first DATA names ([PLACE-16]) if it still
// waits for exactly this answer: outstanding on this stream, of the matching kind, and
// asking for the answer's msg_len. nullptr otherwise.
TxMessage* Connection::answered_request(Stream& s, const wire::DataHeader& h) {
    TxMessage* m = live_tx(&s, h.msg_seq);
    const bool match =
        m && ((h.opcode == wire::Opcode::kReadResponse && m->opcode == wire::Opcode::kReadRequest &&
               h.msg_len == m->wr.length) ||
              (h.opcode == wire::Opcode::kAtomicResponse && is_request(m->opcode) &&
               m->opcode != wire::Opcode::kReadRequest &&
               h.msg_len == wire::kAtomicResponseBodySize));
    return match ? m : nullptr;
}

// place_answer writes an answer's DATA into the buffer of the request it names
// ([PLACE-16], [PLACE-30]). Its receive state lives with the request and has a fixed
// size ([PLACE-31]), never one taken from the packet. Nothing here answers with a NACK: a
// NACK names a message by msg_seq, and an answer's is the requester's, which the
// responder could not tell from one of its own messages.
void Connection::place_answer(Stream& s, const wire::DataPacket& p, Time now) {
    const wire::DataHeader& h = p.hdr;
    if ((h.remote_addr >> 32) != 0 || h.msg_seq != static_cast<uint32_t>(h.remote_addr)) {
        ++stats_.malformed;  // [PLACE-30] msg_seq and remote_addr both name the request
        return;
    }
    // A request older than every one outstanding has completed (or was flushed): this is a
    // late copy of its answer. Dropped without writing: the buffer is the application's.
    const uint32_t oldest =
        !s.tx.empty() && s.tx.front().started() ? s.tx.front().msg_seq : s.next_msg_seq;
    if (seq_lt(h.msg_seq, oldest)) {
        ++stats_.stale_duplicates;
        return;
    }
    TxMessage* m = answered_request(s, h);
    if (!m) {
        ++stats_.orphan_responses;  // [PLACE-16] a faulty or hostile peer
        return;
    }
    if (m->resp_done) {
        ++stats_.duplicate_segments;  // [STREAM-7] the whole answer is in place already
        return;
    }
    const uint32_t nseg = static_cast<uint32_t>(
        std::max<uint64_t>(1, (uint64_t{h.msg_len} + segment_size_ - 1) / segment_size_));
    const uint32_t seg = h.offset / segment_size_;
    if (h.offset % segment_size_ != 0 || seg >= nseg ||
        h.payload_len != std::min<uint32_t>(segment_size_, h.msg_len - h.offset)) {
        ++stats_.malformed;  // [PLACE-9]
        return;
    }
    if (!m->resp_rx) {
        m->resp_rx = std::make_unique<TxMessage::AnswerRx>();
        m->resp_rx->segs.reset(nseg);
    }
    TxMessage::AnswerRx& rx = *m->resp_rx;
    const bool early_last = seg + 1 == nseg && !rx.segs.others_written();
    switch (rx.segs.add(seg)) {
        case SegmentMap::Add::kNew: break;
        case SegmentMap::Add::kDuplicate: ++stats_.duplicate_segments; return;  // [STREAM-7]
        case SegmentMap::Add::kOutOfWindow: ++stats_.out_of_window; return;     // [PLACE-31]
    }
    auto write = [&](uint64_t off, const std::byte* data, size_t n) {
        if (!m->sg.empty())
            copy_to_pieces(m->sg.data(), m->sg.size(), off, data, n);  // [PLACE-22]
        else
            std::memcpy(m->dst + off, data, n);
    };
    if (h.payload_len) {
        if (h.opcode == wire::Opcode::kAtomicResponse) {
            // [PLACE-17]: the original value lands in the requester's byte order.
            const uint64_t v =
                wire::decode_atomic_response(p.payload.first<wire::kAtomicResponseBodySize>());
            std::memcpy(m->dst, &v, sizeof v);
        } else {
            size_t now_bytes = h.payload_len;
            if (early_last) {
                // [PLACE-12]: the last segment came early: its end is held until the rest
                // of the answer is in place.
                now_bytes = rx.tail.split(h.offset, p.payload.data(), h.payload_len);
                ++stats_.held_last_segments;
            }
            write(h.offset, p.payload.data(), now_bytes);
        }
    }
    s.bytes_placed += h.payload_len;
    if (!rx.segs.complete()) return;
    if (rx.tail.held()) write(rx.tail.off, rx.tail.bytes.data(), rx.tail.len);
    m->resp_rx.reset();
    m->resp_done = true;
    ++ep_.messages_delivered_;  // an answer is a message placed whole too
    pop_completed(s, now);  // [PLACE-19]: complete once the request is reported delivered too
}

}  // namespace mroce::core
