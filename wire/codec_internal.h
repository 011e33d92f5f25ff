// wire/codec_internal.h — helpers shared by the encoders and decoders of wire/ (not public).
#pragma once

#include "wire/buffer.h"
#include "wire/header.h"

namespace mroce::wire {

// write_common_header is shared by every encoder in this module. Inline, with
// decode_typed_header, so that the Writer and Reader stay in registers on the hot path.
inline void write_common_header(Writer& w, const CommonHeader& h, PacketType type) {
    w.u8(h.version);
    w.u8(static_cast<uint8_t>(type));
    w.u16(0);  // [WIRE-6]: reserved, sent as zero
    w.u32(h.dst_conn_id);
    w.u64(h.dst_token);
}

// decode_typed_header parses the common header and checks that it has the expected type.
inline Result<CommonHeader> decode_typed_header(Reader& r, std::span<const std::byte> datagram,
                                                PacketType type) {
    auto h = decode_common_header(datagram);
    if (!h) return h.error();
    if (h->type != type) return Error::kBadType;
    r.skip(kCommonHeaderSize);
    return h;
}

// finish_fixed checks a fixed-size packet: every field read and nothing left over
// ([WIRE-5]: a datagram longer or shorter than its type's size is dropped).
inline Error finish_fixed(const Reader& r) {
    if (!r.ok()) return Error::kTruncated;
    if (r.remaining() != 0) return Error::kBadLength;
    return Error::kOk;
}

}  // namespace mroce::wire
