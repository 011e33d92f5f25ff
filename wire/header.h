// wire/header.h — protocol constants and the common header shared by every packet type.
//
// Byte layouts are in docs/spec.md §3; every field here cites its requirement id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "util/result.h"

namespace mroce::wire {

// spec §3.1 [WIRE-1]: the version this codec speaks.
inline constexpr uint8_t kProtocolVersion = 1;
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
inline bool is_known_type(uint8_t t) { return t >= 1 && t <= 7; }

}  // namespace mroce::wire
