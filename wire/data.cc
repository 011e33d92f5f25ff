#include "wire/data.h"

#include "wire/codec_internal.h"

namespace mroce::wire {

static_assert(kDataHeaderSize == kCommonHeaderSize + 56, "spec §3.2: DATA header is 72 bytes");

static_assert(kDataCompactHeaderSize == 64, "spec [DATA-9]: the COMPACT header is 64 bytes");

Result<size_t> encode_data_header(const DataHeader& h, std::span<std::byte> out) {
    MROCE_DCHECK(!(h.flags & data_flag::kCompact) || (may_be_compact(h.opcode) && h.recv_seq == 0 &&
                                                       h.immediate == 0));
    const size_t n = data_header_size(h.flags);
    if (out.size() < n) return Error::kBufferTooSmall;
    store_data_header(h, out.data());
    return n;
}

Result<DataPacket> decode_data(std::span<const std::byte> datagram, bool compact_ok) {
    Reader r(datagram);
    auto common = decode_typed_header(r, datagram, PacketType::kData);
    if (!common) return common.error();
    return decode_data(datagram, *common, compact_ok);
}

Result<DataPacket> decode_data(std::span<const std::byte> datagram, const CommonHeader& common,
                               bool compact_ok) {
    MROCE_DCHECK(common.type == PacketType::kData && datagram.size() >= kCommonHeaderSize);
    DataPacket p;
    p.hdr.common = common;
    if (Error e = parse_data_body(datagram, p, compact_ok); e != Error::kOk) return e;
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
