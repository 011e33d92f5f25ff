#include "wire/data.h"

#include "wire/codec_internal.h"

namespace mroce::wire {

static_assert(kDataHeaderSize == kCommonHeaderSize + 56, "spec §3.2: DATA header is 72 bytes");

Result<size_t> encode_data_header(const DataHeader& h, std::span<std::byte> out) {
    if (out.size() < kDataHeaderSize) return Error::kBufferTooSmall;
    store_data_header(h, out.data());
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
    DataPacket p;
    p.hdr.common = common;
    if (Error e = parse_data_body(datagram, p); e != Error::kOk) return e;
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
