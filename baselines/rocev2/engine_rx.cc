// RoceEngine, responder side: PSN-ordered receive, placement, ACK coalescing, NAKs and
// CNP generation (the DCQCN notification point).
#include <algorithm>
#include <cstring>

#include "baselines/rocev2/engine.h"

namespace mroce::rocev2 {

void RoceEngine::on_data(QueuePair& q, const Decoded& d, uint8_t ecn_bits, Time now) {
    if (ecn_bits == ecn::kCe) {
        ++q.stats.ecn_marked;
        // DCQCN NP: a CE-marked packet asks for a CNP, at most one per cnp_interval.
        if (cfg_.dcqcn.enabled && q.cnp_limiter.should_send(now)) q.cnp_pending = true;
    }
    if (q.failed) return;
    const uint64_t psn = psn_unwrap(d.h.bth.psn, q.epsn);
    if (psn < q.epsn) {
        // A duplicate (the requester went back further than needed, or the network
        // duplicated): never placed again; the ACK tells the requester where we are.
        ++q.stats.duplicates;
        respond(q, Response::kAck, q.epsn - 1);
        return;
    }
    if (psn > q.epsn) {
        // A gap: drop, and NAK once per gap (IBTA); see RoceConfig::renak_after_rewind.
        ++q.stats.out_of_sequence;
        if (!q.nak_outstanding) {
            q.nak_outstanding = true;
            q.highest_ooo_since_nak = psn;
            respond(q, Response::kNakSequence, q.epsn);
        } else if (cfg_.renak_after_rewind && psn <= q.highest_ooo_since_nak) {
            q.highest_ooo_since_nak = psn;
            respond(q, Response::kNakSequence, q.epsn);
        } else {
            q.highest_ooo_since_nak = std::max(q.highest_ooo_since_nak, psn);
        }
        return;
    }
    q.nak_outstanding = false;
    if (q.response == Response::kNakSequence) q.response = Response::kNone;  // gap filled
    place(q, d, psn, now);
}

// place applies the in-sequence packet at psn (== epsn) or refuses it with a NAK.
void RoceEngine::place(QueuePair& q, const Decoded& d, uint64_t psn, Time now) {
    const Opcode op = d.h.bth.opcode;
    const size_t len = d.payload.size();
    // Every packet but the last of a message carries exactly one MTU (IBTA); a packet
    // that does not is malformed and dropped, so it is never acknowledged.
    if (len > cfg_.mtu || (!is_last(op) && len != cfg_.mtu)) {
        ++q.stats.malformed;
        return;
    }
    // FIRST/ONLY must start a message and MIDDLE/LAST continue one of the same kind.
    if (is_first(op) == q.in_message || (!is_first(op) && q.message_is_write != is_write(op))) {
        respond(q, Response::kNakInvalid, psn);
        fail_qp(q, core::Status::kRemoteInvalid);
        return;
    }
    const bool needs_receive = is_send(op) || (has_imm(op) && is_write(op));
    // A SEND takes its receive at the first packet, a WRITE with immediate at its last.
    if (((is_send(op) && is_first(op)) || (is_write(op) && has_imm(op))) && q.rq.empty()) {
        respond(q, Response::kRnrNak, psn);
        // Like a NAK'd gap: what follows is dropped silently until psn comes again.
        q.nak_outstanding = true;
        q.highest_ooo_since_nak = psn;
        return;
    }
    if (is_first(op)) {
        if (is_send(op)) {
            q.message_dst = q.rq.front().dst;
            q.message_capacity = q.rq.front().wr.length;
        } else {
            const Reth& reth = d.h.reth;
            Result<std::byte*> dst = memory_.check_remote(reth.rkey, q.pd, reth.virtual_address,
                                                          reth.dma_length, core::access::kRemoteWrite);
            if (!dst) {
                respond(q, Response::kNakAccess, psn);
                fail_qp(q, core::Status::kRemoteAccess);
                return;
            }
            q.message_dst = *dst;
            q.message_capacity = reth.dma_length;
        }
        q.in_message = true;
        q.message_is_write = is_write(op);
        q.message_offset = 0;
    }
    const uint64_t end = q.message_offset + len;
    // Too long for the receive (SEND) or the RETH length (WRITE), or a WRITE that ends
    // short of its RETH length: invalid request, fatal for both sides as in IB.
    if (end > q.message_capacity || (is_write(op) && is_last(op) && end != q.message_capacity)) {
        respond(q, Response::kNakInvalid, psn);
        if (is_send(op)) {
            core::Completion c;
            c.wr_id = q.rq.front().wr.wr_id;
            c.status = core::Status::kLocalLength;
            c.opcode = core::WorkOpcode::kRecv;
            complete(q, c);
            q.rq.pop_front();
        }
        fail_qp(q, core::Status::kRemoteInvalid);
        return;
    }
    if (len > 0) std::memcpy(q.message_dst + q.message_offset, d.payload.data(), len);
    q.message_offset = end;
    ++q.epsn;
    ++q.stats.data_packets_received;
    q.stats.bytes_placed += len;
    ++q.unacked;

    if (is_last(op)) {
        q.in_message = false;
        q.msn = (q.msn + 1) & kPsnMask;
        if (needs_receive) {
            const RxPost r = q.rq.front();
            q.rq.pop_front();
            core::Completion c;
            c.wr_id = r.wr.wr_id;
            c.opcode = is_send(op) ? core::WorkOpcode::kRecv : core::WorkOpcode::kRecvWriteImm;
            c.byte_len = static_cast<uint32_t>(q.message_offset);
            c.has_imm = has_imm(op);
            c.imm = d.h.imm;
            complete(q, c);
        }
    }
    // Coalesced ACKs: at once on AckReq or every ack_every packets, else after ack_delay.
    if (d.h.bth.ack_request || q.unacked >= cfg_.ack_every) {
        respond(q, Response::kAck, q.epsn - 1);
    } else if (q.ack_deadline == kNever) {
        q.ack_deadline = now + cfg_.ack_delay;
    }
}

void RoceEngine::respond(QueuePair& q, Response r, uint64_t psn) {
    // Responses rank kAck < kNakSequence < kRnrNak < fatal NAKs: a pending NAK already
    // acknowledges everything before it, and a later gap must not hide an RNR or fatal
    // NAK that has not left yet.
    if (q.response != Response::kNone && static_cast<uint8_t>(r) < static_cast<uint8_t>(q.response))
        return;
    q.response = r;
    q.response_psn = psn;
}

size_t RoceEngine::write_response(QueuePair& q, std::span<std::byte> buf) {
    Headers h;
    h.bth.opcode = Opcode::kAck;
    h.bth.pkey = cfg_.pkey;
    h.bth.dest_qp = q.remote_qpn;
    uint64_t psn = q.response_psn;
    switch (q.response) {
        case Response::kAck:
            psn = q.epsn - 1;  // coalesced: the latest in-sequence PSN when it leaves
            h.aeth.syndrome = make_syndrome(AckKind::kAck, kNoCredits);
            ++q.stats.acks_sent;
            break;
        case Response::kNakSequence:
            h.aeth.syndrome = make_syndrome(AckKind::kNak, static_cast<uint8_t>(NakCode::kPsnSequenceError));
            ++q.stats.naks_sent;
            break;
        case Response::kRnrNak:
            // The timer field is informational here: the requester waits its own
            // rnr_delay (README.md). 0b00001 is IBTA's 0.01 ms code.
            h.aeth.syndrome = make_syndrome(AckKind::kRnrNak, 1);
            ++q.stats.rnr_naks_sent;
            break;
        case Response::kNakInvalid:
            h.aeth.syndrome = make_syndrome(AckKind::kNak, static_cast<uint8_t>(NakCode::kInvalidRequest));
            ++q.stats.fatal_naks_sent;
            break;
        case Response::kNakAccess:
            h.aeth.syndrome = make_syndrome(AckKind::kNak, static_cast<uint8_t>(NakCode::kRemoteAccessError));
            ++q.stats.fatal_naks_sent;
            break;
        case Response::kNone:
            return 0;
    }
    h.bth.psn = static_cast<uint32_t>(psn) & kPsnMask;
    h.aeth.msn = q.msn;
    Result<size_t> n = encode(h, {}, buf);
    if (!n) {
        MROCE_BUG("rocev2-encode-ack");
        return 0;
    }
    if (q.response == Response::kAck || q.response == Response::kNakSequence) {
        q.unacked = 0;
        q.ack_deadline = kNever;
    }
    q.response = Response::kNone;
    return *n;
}

size_t RoceEngine::write_cnp(QueuePair& q, std::span<std::byte> buf) {
    Headers h;
    h.bth.opcode = Opcode::kCnp;
    h.bth.pkey = cfg_.pkey;
    h.bth.dest_qp = q.remote_qpn;  // the QP whose packets were marked, at the sender
    Result<size_t> n = encode(h, {}, buf);
    q.cnp_pending = false;
    if (!n) {
        MROCE_BUG("rocev2-encode-cnp");
        return 0;
    }
    ++q.stats.cnps_sent;
    return *n;
}

}  // namespace mroce::rocev2
