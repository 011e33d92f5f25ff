#include "baselines/rocev2/packet.h"

#include "wire/buffer.h"

namespace mroce::rocev2 {

bool is_supported_opcode(uint8_t op) {
    return op <= static_cast<uint8_t>(Opcode::kWriteOnlyImm) ||
           op == static_cast<uint8_t>(Opcode::kAck) || op == static_cast<uint8_t>(Opcode::kCnp);
}

bool is_send(Opcode op) { return op <= Opcode::kSendOnlyImm; }
bool is_write(Opcode op) { return op >= Opcode::kWriteFirst && op <= Opcode::kWriteOnlyImm; }
bool is_data(Opcode op) { return op <= Opcode::kWriteOnlyImm; }

bool is_first(Opcode op) {
    switch (op) {
        case Opcode::kSendFirst: case Opcode::kSendOnly: case Opcode::kSendOnlyImm:
        case Opcode::kWriteFirst: case Opcode::kWriteOnly: case Opcode::kWriteOnlyImm:
            return true;
        default:
            return false;
    }
}

bool is_last(Opcode op) {
    switch (op) {
        case Opcode::kSendLast: case Opcode::kSendLastImm: case Opcode::kSendOnly:
        case Opcode::kSendOnlyImm: case Opcode::kWriteLast: case Opcode::kWriteLastImm:
        case Opcode::kWriteOnly: case Opcode::kWriteOnlyImm:
            return true;
        default:
            return false;
    }
}

bool has_reth(Opcode op) {
    return op == Opcode::kWriteFirst || op == Opcode::kWriteOnly || op == Opcode::kWriteOnlyImm;
}

bool has_imm(Opcode op) {
    return op == Opcode::kSendLastImm || op == Opcode::kSendOnlyImm ||
           op == Opcode::kWriteLastImm || op == Opcode::kWriteOnlyImm;
}

const char* to_string(Opcode op) {
    switch (op) {
        case Opcode::kSendFirst: return "SEND_FIRST";
        case Opcode::kSendMiddle: return "SEND_MIDDLE";
        case Opcode::kSendLast: return "SEND_LAST";
        case Opcode::kSendLastImm: return "SEND_LAST_WITH_IMMEDIATE";
        case Opcode::kSendOnly: return "SEND_ONLY";
        case Opcode::kSendOnlyImm: return "SEND_ONLY_WITH_IMMEDIATE";
        case Opcode::kWriteFirst: return "RDMA_WRITE_FIRST";
        case Opcode::kWriteMiddle: return "RDMA_WRITE_MIDDLE";
        case Opcode::kWriteLast: return "RDMA_WRITE_LAST";
        case Opcode::kWriteLastImm: return "RDMA_WRITE_LAST_WITH_IMMEDIATE";
        case Opcode::kWriteOnly: return "RDMA_WRITE_ONLY";
        case Opcode::kWriteOnlyImm: return "RDMA_WRITE_ONLY_WITH_IMMEDIATE";
        case Opcode::kAck: return "ACKNOWLEDGE";
        case Opcode::kCnp: return "CNP";
    }
    return "unknown";
}

size_t header_size(Opcode op) {
    if (op == Opcode::kCnp) return kBthSize + kCnpReservedSize;
    if (op == Opcode::kAck) return kBthSize + kAethSize;
    return kBthSize + (has_reth(op) ? kRethSize : 0) + (has_imm(op) ? kImmSize : 0);
}

size_t encoded_size(Opcode op, size_t payload_len) {
    const size_t pad = (4 - payload_len % 4) % 4;
    return header_size(op) + payload_len + pad + kIcrcSize;
}

Result<size_t> encode(const Headers& h, std::span<const std::byte> payload, std::span<std::byte> out) {
    const Bth& b = h.bth;
    if (!is_supported_opcode(static_cast<uint8_t>(b.opcode))) return Error::kInvalidArgument;
    if (!is_data(b.opcode) && !payload.empty()) return Error::kInvalidArgument;
    if (b.dest_qp > kPsnMask || b.psn > kPsnMask || h.aeth.msn > kPsnMask)
        return Error::kInvalidArgument;
    const size_t size = encoded_size(b.opcode, payload.size());
    if (out.size() < size) return Error::kBufferTooSmall;
    const uint8_t pad = static_cast<uint8_t>((4 - payload.size() % 4) % 4);

    wire::Writer w(out);
    // BTH (IBTA §9.2): opcode | SE M PadCnt(2) TVer(4) | P_Key | reserved 8 | DestQP 24 |
    // AckReq, reserved 7 | PSN 24.
    w.u8(static_cast<uint8_t>(b.opcode));
    w.u8(static_cast<uint8_t>((b.solicited ? 0x80 : 0) | (b.migration ? 0x40 : 0) | pad << 4));
    w.u16(b.pkey);
    w.u32(b.dest_qp);  // the top byte is the reserved byte: dest_qp <= 0xFFFFFF keeps it 0
    w.u32((b.ack_request ? 0x80000000u : 0) | b.psn);
    if (b.opcode == Opcode::kCnp) {
        w.zeros(kCnpReservedSize);
    } else if (b.opcode == Opcode::kAck) {
        w.u32(uint32_t{h.aeth.syndrome} << 24 | h.aeth.msn);
    } else {
        if (has_reth(b.opcode)) {
            w.u64(h.reth.virtual_address);
            w.u32(h.reth.rkey);
            w.u32(h.reth.dma_length);
        }
        if (has_imm(b.opcode)) w.u32(h.imm);
        w.bytes(payload);
        w.zeros(pad);
    }
    w.zeros(kIcrcSize);  // ICRC not computed (see packet.h)
    MROCE_DCHECK(w.ok() && w.pos() == size);
    return size;
}

Result<Decoded> decode(std::span<const std::byte> datagram) {
    wire::Reader r(datagram);
    Decoded d;
    Bth& b = d.h.bth;
    const uint8_t op = r.u8();
    const uint8_t flags = r.u8();
    b.pkey = r.u16();
    const uint32_t qp_word = r.u32();
    const uint32_t psn_word = r.u32();
    if (!r.ok()) return Error::kTruncated;
    if (!is_supported_opcode(op)) return Error::kBadType;
    if ((flags & 0x0F) != 0) return Error::kBadVersion;  // TVer must be 0
    b.opcode = static_cast<Opcode>(op);
    b.solicited = flags & 0x80;
    b.migration = flags & 0x40;
    b.pad_count = (flags >> 4) & 0x3;
    b.dest_qp = qp_word & kPsnMask;  // the reserved byte above it is ignored
    b.ack_request = psn_word & 0x80000000u;
    b.psn = psn_word & kPsnMask;

    if (b.opcode == Opcode::kCnp) {
        r.skip(kCnpReservedSize);
        r.skip(kIcrcSize);
        if (!r.ok()) return Error::kTruncated;
        if (r.remaining() != 0 || b.pad_count != 0) return Error::kBadLength;
        return d;
    }
    if (b.opcode == Opcode::kAck) {
        const uint32_t aeth = r.u32();
        r.skip(kIcrcSize);
        if (!r.ok()) return Error::kTruncated;
        if (r.remaining() != 0 || b.pad_count != 0) return Error::kBadLength;
        d.h.aeth.syndrome = static_cast<uint8_t>(aeth >> 24);
        d.h.aeth.msn = aeth & kPsnMask;
        const AckKind kind = d.h.aeth.kind();
        if (kind != AckKind::kAck && kind != AckKind::kRnrNak && kind != AckKind::kNak)
            return Error::kBadType;
        if (kind == AckKind::kNak && d.h.aeth.value() > kMaxNakCode) return Error::kBadType;
        return d;
    }
    if (has_reth(b.opcode)) {
        d.h.reth.virtual_address = r.u64();
        d.h.reth.rkey = r.u32();
        d.h.reth.dma_length = r.u32();
    }
    if (has_imm(b.opcode)) d.h.imm = r.u32();
    if (!r.ok() || r.remaining() < kIcrcSize) return Error::kTruncated;
    const size_t body = r.remaining() - kIcrcSize;  // payload + pad
    // PadCnt pads the payload to a multiple of 4 bytes (IBTA §9.2), so the two together
    // always are one.
    if (b.pad_count > body || body % 4 != 0) return Error::kBadLength;
    d.payload = datagram.subspan(r.pos(), body - b.pad_count);
    return d;
}

}  // namespace mroce::rocev2
