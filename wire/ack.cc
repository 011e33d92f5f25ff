#include "wire/ack.h"

#include "wire/codec_internal.h"

namespace mroce::wire {

static_assert(kAckFixedSize == kCommonHeaderSize + 64, "spec §3.3: ACK fixed part is 80 bytes");

size_t encoded_size(const AckPacket& ack) {
    return kAckFixedSize + size_t{ack.stream_count} * kAckStreamEntrySize;
}

Result<size_t> encode_ack(const AckPacket& a, std::span<std::byte> out) {
    if (a.stream_count > kMaxAckStreams) return Error::kInvalidArgument;
    const size_t size = encoded_size(a);
    if (out.size() < size) return Error::kBufferTooSmall;
    Writer w(out);
    write_common_header(w, a.common, PacketType::kAck);
    w.u16(a.path_id);                                    // 16
    w.u8(a.path_gen);                                    // 18
    w.u8(a.flags);                                       // 19
    w.u32(a.cum_psn);                                    // 20
    w.bytes(std::as_bytes(std::span(a.sack.bytes)));     // 24..55
    w.u32(a.ecn_ce_count);                               // 56
    w.u32(a.ts_echo);                                    // 60
    w.u32(a.ack_delay_ns);                               // 64
    w.u32(a.rate_hint_mbps);                             // 68
    w.u32(a.probe_psn);                                  // 72
    w.u16(a.stream_count);                               // 76
    w.u16(0);                                            // 78 reserved
    for (uint16_t i = 0; i < a.stream_count; ++i) {      // 80 + 8i
        w.u32(a.streams[i].stream_id);
        w.u32(a.streams[i].delivered_seq);
    }
    MROCE_DCHECK(w.ok() && w.pos() == size);
    return size;
}

Result<AckPacket> decode_ack(std::span<const std::byte> datagram) {
    Reader r(datagram);
    auto common = decode_typed_header(r, datagram, PacketType::kAck);
    if (!common) return common.error();
    return decode_ack(datagram, *common);
}

Result<AckPacket> decode_ack(std::span<const std::byte> datagram, const CommonHeader& common) {
    MROCE_DCHECK(common.type == PacketType::kAck && datagram.size() >= kCommonHeaderSize);
    Reader r(datagram);
    r.skip(kCommonHeaderSize);
    AckPacket a;
    a.common = common;
    a.path_id = r.u16();
    a.path_gen = r.u8();
    a.flags = r.u8();
    a.cum_psn = r.u32();
    r.bytes(std::as_writable_bytes(std::span(a.sack.bytes)));
    a.ecn_ce_count = r.u32();
    a.ts_echo = r.u32();
    a.ack_delay_ns = r.u32();
    a.rate_hint_mbps = r.u32();
    a.probe_psn = r.u32();
    a.stream_count = r.u16();
    r.skip(2);
    if (!r.ok()) return Error::kTruncated;
    // spec §3.3 [ACK-5]: never trust the count; cap it and check it against the length.
    if (a.stream_count > kMaxAckStreams) return Error::kBadLength;
    // spec §3.3 [ACK-1]: the entries fill the rest of the datagram exactly; a datagram
    // shorter or longer than stream_count entries disagrees with its count.
    if (r.remaining() != size_t{a.stream_count} * kAckStreamEntrySize) return Error::kBadLength;
    for (uint16_t i = 0; i < a.stream_count; ++i) {
        a.streams[i].stream_id = r.u32();
        a.streams[i].delivered_seq = r.u32();
    }
    if (Error e = finish_fixed(r); e != Error::kOk) return e;
    return a;
}

}  // namespace mroce::wire
