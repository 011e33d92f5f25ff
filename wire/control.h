// wire/control.h — NACK, HELLO / HELLO_ACK, PROBE and CLOSE.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "util/result.h"
#include "wire/header.h"

namespace mroce::wire {

// spec §3.4 [NACK-1]: typed NACK reasons.
enum class NackReason : uint8_t {
    kReceiverNotReady = 1,
    kRemoteAccess = 2,
    kInvalidRequest = 3,
    kOutOfWindow = 4,
    kNoResources = 5,
};
inline bool is_known_nack_reason(uint8_t r) { return r >= 1 && r <= 5; }
// spec [NACK-4] [STREAM-8]: NACK(kInvalidRequest).detail for a stream the receiver does not
// know (yet): the requester retries with backoff instead of failing at once.
inline constexpr uint32_t kNackDetailUnknownStream = 1;

// spec §3.4: NACK, 40 bytes.
struct NackPacket {
    CommonHeader common{.type = PacketType::kNack};
    NackReason reason = NackReason::kInvalidRequest;
    uint16_t path_id = 0;
    uint8_t path_gen = 0;
    uint32_t path_psn = 0;
    uint32_t stream_id = 0;  // as carried by the offending DATA (the NACK sender's id)
    uint32_t msg_seq = 0;
    uint32_t detail = 0;     // reason-specific; for kReceiverNotReady a wait in microseconds
    friend bool operator==(const NackPacket&, const NackPacket&) = default;
};
inline constexpr size_t kNackSize = 40;

// spec §3.5 [CONN-25]: the responder's cookie, echoed in a second HELLO to prove that the
// initiator receives at its address. Opaque to the initiator.
using Cookie = std::array<uint8_t, 16>;

// spec §3.5 [CONN-2]: HELLO and HELLO_ACK share one body, 64 bytes in all.
struct HelloPacket {
    CommonHeader common{.type = PacketType::kHello};
    uint32_t src_conn_id = 0;
    uint64_t src_token = 0;
    uint32_t isn = 0;          // first PSN of every path of the sender, every generation
    uint32_t msg_isn = 0;      // first msg_seq of every stream the sender sends on
    uint16_t endpoint_port = 0;  // the UDP port the sender receives on
    uint16_t num_paths = 0;
    uint32_t max_payload = 0;
    uint32_t capabilities = 0;  // kCap* bits; unknown bits ignored [CONN-2]
    Cookie cookie{};            // HELLO: 0, or the cookie of a RETRY; HELLO_ACK: 0
    // HELLO_ACK only ([CC-20]): the rate in Mbit/s the responder grants the initiator's
    // first round trip, 0 = none. It takes the cookie's first 4 bytes (offset 48); the
    // other 12 are zero. Ignored (not encoded, decoded as 0) in a HELLO.
    uint32_t grant_mbps = 0;
    // HELLO only ([CC-20]): flag SENDING (0x01 of the common header's byte 2, `hello_flags`):
    // its sender has DATA waiting for this connection, so the answer's grant is reserved.
    bool sending = false;
    // HELLO and HELLO_ACK ([CONN-31]): flag DROPPED (0x02 of byte 2, `hello_flags`): its
    // sender, while Connecting, dropped DATA of this connection ([CONN-19]) since the last
    // HELLO or HELLO_ACK it sent that said so.
    bool dropped = false;
    // [CONN-32] [CC-20]: byte 3 of the common header (reserved in other types). In a HELLO,
    // `hello_seq`: this HELLO's number, 1..255 in the order its sender sent them (0: not
    // numbered). In a HELLO_ACK, `hello_echo`: the `hello_seq` of the latest HELLO its
    // sender had received from the peer (0: none), so the initiator times its handshake
    // from the HELLO that was answered. Each is decoded as 0 in the other type.
    uint8_t hello_seq = 0;
    uint8_t hello_echo = 0;
    friend bool operator==(const HelloPacket&, const HelloPacket&) = default;
};
inline constexpr size_t kHelloSize = 64;
// spec §4.8 [VER-2]: capability bits. INTEGRITY: the CRC32C trailer (§4.9, [INT-1]).
inline constexpr uint32_t kCapIntegrity = 0x00000001u;
// COALESCE: a datagram may carry an ACK (flag FOLLOWED) and then a DATA ([WIRE-10]).
inline constexpr uint32_t kCapCoalesce = 0x00000002u;
// SHORT_ACK: an ACK whose SACK bitmap is empty may leave the bitmap out (flag SHORT, [ACK-21]).
inline constexpr uint32_t kCapShortAck = 0x00000004u;
// COMPACT_DATA: a DATA whose opcode consumes no receive may leave out recv_seq and
// immediate (flag COMPACT, [DATA-9]).
inline constexpr uint32_t kCapCompactData = 0x00000008u;
// Every bit this revision defines; the others are reserved ([WIRE-6]).
inline constexpr uint32_t kCapDefined = kCapIntegrity | kCapCoalesce | kCapShortAck | kCapCompactData;
// spec §3.5 [CC-20] [CONN-31]: `hello_flags` (byte 2, reserved in other types): SENDING
// (HELLO only) and DROPPED (HELLO and HELLO_ACK).
inline constexpr size_t kHelloFlagsOffset = 2;
inline constexpr uint8_t kHelloFlagSending = 0x01;
inline constexpr uint8_t kHelloFlagDropped = 0x02;
inline constexpr uint8_t kHelloFlagsDefined = kHelloFlagSending | kHelloFlagDropped;
// spec §3.5 [CONN-32]: byte 3 is a HELLO's `hello_seq` and a HELLO_ACK's `hello_echo`.
inline constexpr size_t kHelloSeqOffset = 3;
// Version 1's HELLO / HELLO_ACK: the first 48 bytes of version 2's, with `version` 1 and no
// cookie. Decoded only to refuse the peer clearly (spec §4.8).
inline constexpr size_t kHelloV1Size = 48;
inline constexpr uint16_t kMaxPaths = 256;  // [CONN-3] cap on num_paths

// spec §3.6: PROBE, 32 bytes.
// spec §3.6 [PROBE-4]: `flags` (byte 19): FAILED, the probed path is Failed and its
// sender waits for this PROBE's reply to use it again. The other bits are reserved.
inline constexpr uint8_t kProbeFailed = 0x01;

struct ProbePacket {
    CommonHeader common{.type = PacketType::kProbe};
    uint16_t path_id = 0;
    uint8_t path_gen = 0;
    uint8_t flags = 0;       // kProbeFailed; undefined bits are sent 0, ignored on receive
    uint32_t next_psn = 0;   // every PSN before this was sent on this path generation
    uint32_t psn_floor = 0;
    uint32_t timestamp = 0;
    friend bool operator==(const ProbePacket&, const ProbePacket&) = default;
};
inline constexpr size_t kProbeSize = 32;

// spec §3.8: RETRY, 32 bytes: the answer to a HELLO that must prove its address
// ([CONN-25]), addressed to the HELLO's src_conn_id and src_token.
struct RetryPacket {
    CommonHeader common{.type = PacketType::kRetry};
    Cookie cookie{};
    friend bool operator==(const RetryPacket&, const RetryPacket&) = default;
};
inline constexpr size_t kRetrySize = 32;

// spec §3.7: CLOSE, 24 bytes (the same layout in versions 1 and 2).
enum class CloseReason : uint32_t {
    kNormal = 0,
    kProtocolError = 1,
    kLocalFailure = 2,
    kVersionMismatch = 3,  // [VER-1]
    kConfirm = 4,          // [CONN-29]: the answer to a peer's CLOSE; never answered itself
};
struct ClosePacket {
    CommonHeader common{.type = PacketType::kClose};
    uint32_t reason = 0;
    friend bool operator==(const ClosePacket&, const ClosePacket&) = default;
};
inline constexpr size_t kCloseSize = 24;

// Encoders write all or nothing and return bytes written. Errors: kBufferTooSmall.
// Decoders take the whole datagram. Errors: kTruncated, kBadVersion, kBadType, kBadLength.
Result<size_t> encode_nack(const NackPacket& p, std::span<std::byte> out);
Result<NackPacket> decode_nack(std::span<const std::byte> datagram);
Result<size_t> encode_hello(const HelloPacket& p, std::span<std::byte> out);
Result<HelloPacket> decode_hello(std::span<const std::byte> datagram);
// The version-1 HELLO / HELLO_ACK (kHelloV1Size bytes, version 1; cookie ignored on encode).
Result<size_t> encode_hello_v1(const HelloPacket& p, std::span<std::byte> out);
Result<HelloPacket> decode_hello_v1(std::span<const std::byte> datagram);
Result<size_t> encode_retry(const RetryPacket& p, std::span<std::byte> out);
Result<RetryPacket> decode_retry(std::span<const std::byte> datagram);
Result<size_t> encode_probe(const ProbePacket& p, std::span<std::byte> out);
Result<ProbePacket> decode_probe(std::span<const std::byte> datagram);
Result<size_t> encode_close(const ClosePacket& p, std::span<std::byte> out);
Result<ClosePacket> decode_close(std::span<const std::byte> datagram);

}  // namespace mroce::wire
