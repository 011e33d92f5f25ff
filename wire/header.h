// wire/header.h — protocol constants and the common header shared by every packet type.
//
// Byte layouts are in docs/spec.md §3; every field here cites its requirement id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "util/result.h"
#include "wire/buffer.h"

namespace mroce::wire {

// spec §3.1 [WIRE-1]: the version this codec speaks. Version 1 is still recognised, only to
// answer a version-1 peer with a clear refusal (spec §4.8, [VER-1]).
inline constexpr uint8_t kProtocolVersion = 2;
inline constexpr uint8_t kLegacyVersion = 1;
// spec §2 [UDP-1]: default UDP destination port (not 4791/RoCEv2 nor 4793/UEC).
inline constexpr uint16_t kDefaultPort = 4797;
// spec §2 [UDP-3]: default and maximum payload bytes per DATA packet.
inline constexpr uint32_t kDefaultMaxPayload = 4096;
inline constexpr uint32_t kMinMaxPayload = 256;
inline constexpr uint32_t kMaxMaxPayload = 9000;

// spec §3.1 [WIRE-2]: packet types. Values not listed are dropped and counted.
enum class PacketType : uint8_t {
    kData = 1,
    kAck = 2,
    kNack = 3,
    kHello = 4,
    kHelloAck = 5,
    kProbe = 6,
    kClose = 7,
    kRetry = 8,  // version 2: the responder's cookie, [CONN-25]
};

// spec §3.1: common header, 16 bytes.
//   0 version u8 | 1 type u8 | 2 reserved u16 | 4 dst_conn_id u32 | 8 dst_token u64
struct CommonHeader {
    uint8_t version = kProtocolVersion;
    PacketType type = PacketType::kData;
    uint32_t dst_conn_id = 0;  // the receiver's connection id (0 in HELLO)
    uint64_t dst_token = 0;    // the receiver's secret token (0 in HELLO)
    friend bool operator==(const CommonHeader&, const CommonHeader&) = default;
};
inline constexpr size_t kCommonHeaderSize = 16;

// decode_common_header parses the first 16 bytes.
// Errors: kTruncated, kBadVersion [WIRE-3], kBadType [WIRE-4].
Result<CommonHeader> decode_common_header(std::span<const std::byte> datagram);

// is_known_type reports whether t is a packet type of this version [WIRE-2].
inline bool is_known_type(uint8_t t) { return t >= 1 && t <= 8; }

// parse_common_header is decode_common_header for the per-packet path: the same checks
// and errors, the header written to `out` (unspecified on error) instead of returned in a
// Result, and inline, so dispatching a datagram costs a few loads and compares.
inline Error parse_common_header(std::span<const std::byte> datagram, CommonHeader& out) {
    if (datagram.size() < kCommonHeaderSize) return Error::kTruncated;
    const std::byte* p = datagram.data();
    out.version = static_cast<uint8_t>(p[0]);
    const uint8_t type = static_cast<uint8_t>(p[1]);
    // 2..3 reserved, ignored on receive [WIRE-6]
    out.dst_conn_id = load_be32(p + 4);
    out.dst_token = load_be64(p + 8);
    if (out.version != kProtocolVersion) return Error::kBadVersion;  // [WIRE-3]
    if (!is_known_type(type)) return Error::kBadType;                // [WIRE-4]
    out.type = static_cast<PacketType>(type);
    return Error::kOk;
}

// store_common_header writes the 16-byte common header at p (room checked by the caller).
inline void store_common_header(std::byte* p, const CommonHeader& h, PacketType type) {
    p[0] = static_cast<std::byte>(h.version);
    p[1] = static_cast<std::byte>(type);
    p[2] = p[3] = std::byte{0};  // [WIRE-6]: reserved, sent as zero
    store_be32(p + 4, h.dst_conn_id);
    store_be64(p + 8, h.dst_token);
}

}  // namespace mroce::wire
