#include "wire/ack.h"

#include "wire/codec_internal.h"

namespace mroce::wire {

static_assert(kAckFixedSize == kCommonHeaderSize + 64, "spec §3.3: ACK fixed part is 80 bytes");

static_assert(kAckShortFixedSize == 48, "spec §3.3 [ACK-21]: a SHORT ACK's fixed part is 48 bytes");

size_t encoded_size(const AckPacket& ack) {
    return ack_fixed_size(ack.flags) + size_t{ack.stream_count} * kAckStreamEntrySize;
}

Result<size_t> encode_ack(const AckPacket& a, std::span<std::byte> out) {
    if (a.stream_count > kMaxAckStreams) return Error::kInvalidArgument;
    // [ACK-21]: SHORT says the bitmap is empty; a set bit would be lost.
    if ((a.flags & ack_flag::kShort) && !sack_empty(a.sack)) return Error::kInvalidArgument;
    if (out.size() < encoded_size(a)) return Error::kBufferTooSmall;
    return store_ack(a, out.data());
}

Result<AckPacket> decode_ack(std::span<const std::byte> datagram) {
    Reader r(datagram);
    auto common = decode_typed_header(r, datagram, PacketType::kAck);
    if (!common) return common.error();
    return decode_ack(datagram, *common);
}

Result<AckPacket> decode_ack(std::span<const std::byte> datagram, const CommonHeader& common) {
    MROCE_DCHECK(common.type == PacketType::kAck && datagram.size() >= kCommonHeaderSize);
    AckPacket a;
    a.common = common;
    if (Error e = parse_ack_body(datagram, a); e != Error::kOk) return e;
    return a;
}

}  // namespace mroce::wire
