// wire/codec_internal.h — helpers shared by the encoders and decoders of wire/ (not public).
#pragma once

#include "wire/buffer.h"
#include "wire/header.h"

namespace mroce::wire {

void write_common_header(Writer& w, const CommonHeader& h, PacketType type);
Result<CommonHeader> decode_typed_header(Reader& r, std::span<const std::byte> datagram,
                                         PacketType type);

// finish_fixed checks a fixed-size packet: every field read and nothing left over
// ([WIRE-5]: a datagram longer or shorter than its type's size is dropped).
inline Error finish_fixed(const Reader& r) {
    if (!r.ok()) return Error::kTruncated;
    if (r.remaining() != 0) return Error::kBadLength;
    return Error::kOk;
}

}  // namespace mroce::wire
