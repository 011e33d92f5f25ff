#include "wire/data.h"

#include "wire/codec_internal.h"

namespace mroce::wire {

static_assert(kDataHeaderSize == kCommonHeaderSize + 56, "spec §3.2: DATA header is 72 bytes");

Result<size_t> encode_data_header(const DataHeader& h, std::span<std::byte> out) {
    if (out.size() < kDataHeaderSize) return Error::kBufferTooSmall;
    Writer w(out);
    write_common_header(w, h.common, PacketType::kData);
    w.u8(static_cast<uint8_t>(h.opcode));  // 16
    w.u8(h.flags);                         // 17
    w.u16(h.path_id);                      // 18
    w.u8(h.path_gen);                      // 20
    w.u8(0);                               // 21 reserved
    w.u16(h.payload_len);                  // 22
    w.u32(h.path_psn);                     // 24
    w.u32(h.psn_floor);                    // 28
    w.u32(h.stream_id);                    // 32
    w.u32(h.msg_seq);                      // 36
    w.u32(h.recv_seq);                     // 40
    w.u32(h.msg_len);                      // 44
    w.u32(h.offset);                       // 48
    w.u32(h.timestamp);                    // 52
    w.u32(h.rkey);                         // 56
    w.u64(h.remote_addr);                  // 60
    w.u32(h.immediate);                    // 68
    MROCE_DCHECK(w.ok() && w.pos() == kDataHeaderSize);
    return kDataHeaderSize;
}

Result<DataPacket> decode_data(std::span<const std::byte> datagram) {
    Reader r(datagram);
    auto common = decode_typed_header(r, datagram, PacketType::kData);
    if (!common) return common.error();
    return decode_data(datagram, *common);
}

Result<DataPacket> decode_data(std::span<const std::byte> datagram, const CommonHeader& common) {
    MROCE_DCHECK(common.type == PacketType::kData && datagram.size() >= kCommonHeaderSize);
    Reader r(datagram);
    r.skip(kCommonHeaderSize);
    DataPacket p;
    DataHeader& h = p.hdr;
    h.common = common;
    const uint8_t opcode = r.u8();
    h.flags = r.u8();
    h.path_id = r.u16();
    h.path_gen = r.u8();
    r.skip(1);
    h.payload_len = r.u16();
    h.path_psn = r.u32();
    h.psn_floor = r.u32();
    h.stream_id = r.u32();
    h.msg_seq = r.u32();
    h.recv_seq = r.u32();
    h.msg_len = r.u32();
    h.offset = r.u32();
    h.timestamp = r.u32();
    h.rkey = r.u32();
    h.remote_addr = r.u64();
    h.immediate = r.u32();
    if (!r.ok()) return Error::kTruncated;
    if (!is_known_opcode(opcode)) return Error::kBadType;
    h.opcode = static_cast<Opcode>(opcode);
    // spec §3.2 [DATA-3]: the payload fills the rest of the datagram exactly and lies
    // inside the message; LAST marks exactly the segment that reaches msg_len.
    if (r.remaining() != h.payload_len) return Error::kBadLength;
    const uint64_t end = uint64_t{h.offset} + h.payload_len;
    if (end > h.msg_len) return Error::kBadLength;
    const bool last = (h.flags & data_flag::kLast) != 0;
    if (last != (end == h.msg_len)) return Error::kBadLength;
    // A zero-length payload is legal only for a zero-length message.
    if (h.payload_len == 0 && h.msg_len != 0) return Error::kBadLength;
    p.payload = r.rest();
    return p;
}

void encode_read_request(uint32_t length, std::span<std::byte, kReadRequestBodySize> out) {
    Writer w(out);
    w.u32(length);
    w.u32(0);
}

uint32_t decode_read_request(std::span<const std::byte, kReadRequestBodySize> in) {
    Reader r(in);
    return r.u32();  // the reserved word is ignored on receive
}

void encode_atomic_request(const AtomicRequestBody& b,
                           std::span<std::byte, kAtomicRequestBodySize> out) {
    Writer w(out);
    w.u64(b.swap_add);
    w.u64(b.compare);
}

AtomicRequestBody decode_atomic_request(std::span<const std::byte, kAtomicRequestBodySize> in) {
    Reader r(in);
    AtomicRequestBody b;
    b.swap_add = r.u64();
    b.compare = r.u64();
    return b;
}

void encode_atomic_response(uint64_t original, std::span<std::byte, kAtomicResponseBodySize> out) {
    Writer w(out);
    w.u64(original);
}

uint64_t decode_atomic_response(std::span<const std::byte, kAtomicResponseBodySize> in) {
    Reader r(in);
    return r.u64();
}

}  // namespace mroce::wire
