// RoceEngine, requester side: segmenting work requests into PSN-numbered packets, the
// go-back-N window, ACK/NAK handling, the retransmit timeout and DCQCN pacing.
#include <algorithm>

#include "baselines/rocev2/engine.h"

namespace mroce::rocev2 {
namespace {

Opcode data_opcode(core::WorkOpcode op, uint32_t seg, uint32_t packets) {
    const bool write = op == core::WorkOpcode::kWrite || op == core::WorkOpcode::kWriteImm;
    const bool imm = op == core::WorkOpcode::kSendImm || op == core::WorkOpcode::kWriteImm;
    if (packets == 1) {
        if (write) return imm ? Opcode::kWriteOnlyImm : Opcode::kWriteOnly;
        return imm ? Opcode::kSendOnlyImm : Opcode::kSendOnly;
    }
    if (seg == 0) return write ? Opcode::kWriteFirst : Opcode::kSendFirst;
    if (seg + 1 < packets) return write ? Opcode::kWriteMiddle : Opcode::kSendMiddle;
    if (write) return imm ? Opcode::kWriteLastImm : Opcode::kWriteLast;
    return imm ? Opcode::kSendLastImm : Opcode::kSendLast;
}

}  // namespace

bool RoceEngine::data_ready(const QueuePair& q, Time now) const {
    if (!data_pending(q)) return false;
    return !q.dcqcn.limited() || q.next_send_ps <= to_ns(now) * 1000;
}

size_t RoceEngine::write_data(QueuePair& q, std::span<std::byte> buf, Time now) {
    MROCE_DCHECK(q.cursor < q.sq.size());
    const TxWr& t = q.sq[q.cursor];
    MROCE_DCHECK(t.first_psn <= q.next_psn && q.next_psn < t.end_psn());
    const uint32_t seg = static_cast<uint32_t>(q.next_psn - t.first_psn);
    const uint64_t offset = uint64_t{seg} * cfg_.mtu;
    const uint32_t len = t.wr.length == 0 ? 0 : static_cast<uint32_t>(
        std::min<uint64_t>(cfg_.mtu, t.wr.length - offset));

    Headers h;
    h.bth.opcode = data_opcode(t.wr.opcode, seg, t.packets);
    h.bth.pkey = cfg_.pkey;
    h.bth.dest_qp = q.remote_qpn;
    h.bth.psn = static_cast<uint32_t>(q.next_psn) & kPsnMask;
    // AckReq on the last packet of a message: the responder acknowledges it at once, so
    // completions do not wait for the ACK coalescing timer.
    h.bth.ack_request = is_last(h.bth.opcode);
    if (has_reth(h.bth.opcode)) {
        h.reth.virtual_address = t.wr.remote_addr;
        h.reth.rkey = t.wr.rkey;
        h.reth.dma_length = t.wr.length;
    }
    if (has_imm(h.bth.opcode)) h.imm = t.wr.imm;
    const std::span<const std::byte> payload =
        len == 0 ? std::span<const std::byte>{} : std::span<const std::byte>(t.src + offset, len);
    Result<size_t> n = encode(h, payload, buf);
    if (!n) {
        MROCE_BUG("rocev2-encode-data");
        return 0;
    }

    if (q.next_psn < q.sent_high) ++q.stats.retransmitted_packets;
    ++q.stats.data_packets_sent;
    q.stats.data_bytes_sent += len;
    ++q.next_psn;
    if (q.next_psn == t.end_psn()) ++q.cursor;
    q.sent_high = std::max(q.sent_high, q.next_psn);
    if (q.rto_deadline == kNever) q.rto_deadline = now + cfg_.retransmit_timeout;

    q.dcqcn.on_sent(static_cast<uint32_t>(*n));
    if (q.dcqcn.limited()) {
        // Pace at the DCQCN rate: the next packet may leave bytes·8/rate after this one.
        const int64_t now_ps = to_ns(now) * 1000;
        const int64_t gap_ps =
            static_cast<int64_t>(*n * 8 * 1'000'000'000'000ULL / q.dcqcn.rate_bps());
        q.next_send_ps = std::max(q.next_send_ps, now_ps) + gap_ps;
    }
    return *n;
}

void RoceEngine::seek(QueuePair& q, uint64_t psn) {
    q.next_psn = psn;
    size_t i = 0;
    while (i < q.sq.size() && q.sq[i].end_psn() <= psn) ++i;
    q.cursor = i;
}

void RoceEngine::acknowledge_through(QueuePair& q, uint64_t last_acked, Time now) {
    if (last_acked + 1 <= q.una) return;
    q.una = last_acked + 1;
    q.retries = 0;
    q.rnr_retries = 0;
    while (!q.sq.empty() && q.sq.front().end_psn() <= q.una) {
        const TxWr& t = q.sq.front();
        if (t.wr.signaled) {
            core::Completion c;
            c.wr_id = t.wr.wr_id;
            c.opcode = t.wr.opcode;
            c.byte_len = t.wr.length;
            complete(q, c);
        }
        q.sq.pop_front();
        if (q.cursor > 0) --q.cursor;
    }
    if (q.next_psn < q.una) seek(q, q.una);
    q.rto_deadline = q.una < q.sent_high ? now + cfg_.retransmit_timeout : kNever;
}

void RoceEngine::on_ack(QueuePair& q, const Aeth& aeth, uint32_t psn24, Time now) {
    if (q.failed) return;
    const uint64_t psn = psn_unwrap(psn24, q.una);
    if (aeth.kind() == AckKind::kAck) {
        ++q.stats.acks_received;
        // Acknowledges every PSN up to and including psn.
        if (psn + 1 < q.una || psn >= q.sent_high) {
            ++q.stats.stale_acks;
            return;
        }
        acknowledge_through(q, psn, now);
        return;
    }
    // NAKs carry the PSN the responder expects (or the one it refused): everything
    // before it arrived.
    ++q.stats.naks_received;
    if (psn < q.una || psn > q.sent_high) {
        ++q.stats.stale_acks;
        return;
    }
    acknowledge_through(q, psn - 1, now);
    if (aeth.kind() == AckKind::kRnrNak) {
        ++q.stats.rnr_naks_received;
        ++q.rnr_retries;
        if (cfg_.rnr_retry != 7 && q.rnr_retries > cfg_.rnr_retry) {
            fail_qp(q, core::Status::kRnrRetryExceeded);
            return;
        }
        // Nothing is in flight now: resend from psn after the RNR delay.
        seek(q, psn);
        q.rnr_until = now + cfg_.rnr_delay;
        q.rto_deadline = kNever;
        return;
    }
    switch (static_cast<NakCode>(aeth.value())) {
        case NakCode::kPsnSequenceError:
            if (psn < q.sent_high) {
                ++q.stats.go_back_nak;
                seek(q, psn);  // go back N: resend everything from the expected PSN
            }
            return;
        case NakCode::kRemoteAccessError:
            fail_qp(q, core::Status::kRemoteAccess);
            return;
        default:
            fail_qp(q, core::Status::kRemoteInvalid);
            return;
    }
}

void RoceEngine::on_requester_timeout(QueuePair& q, Time now) {
    if (q.una >= q.sent_high) {
        q.rto_deadline = kNever;
        return;
    }
    ++q.stats.timeouts;
    if (++q.retries > cfg_.retry_count) {
        fail_qp(q, core::Status::kRetryExceeded);
        return;
    }
    seek(q, q.una);
    q.rto_deadline = now + cfg_.retransmit_timeout;
}

}  // namespace mroce::rocev2
