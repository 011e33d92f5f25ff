#include "wire/header.h"

#include "wire/codec_internal.h"

namespace mroce::wire {

Result<CommonHeader> decode_common_header(std::span<const std::byte> datagram) {
    Reader r(datagram);
    CommonHeader h;
    h.version = r.u8();
    const uint8_t type = r.u8();
    r.skip(2);  // spec §3.1 [WIRE-6]: reserved, ignored on receive
    h.dst_conn_id = r.u32();
    h.dst_token = r.u64();
    if (!r.ok()) return Error::kTruncated;
    // spec §3.1 [WIRE-3]: an unknown version is dropped without reply.
    if (h.version != kProtocolVersion) return Error::kBadVersion;
    // spec §3.1 [WIRE-4]: an unknown type is dropped without reply.
    if (!is_known_type(type)) return Error::kBadType;
    h.type = static_cast<PacketType>(type);
    return h;
}

}  // namespace mroce::wire
