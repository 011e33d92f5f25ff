// baselines/rocev2/packet.h — the RoCEv2 packet codec: InfiniBand transport headers in a
// UDP payload (destination port 4791), as a RoCEv2 NIC puts them on the wire.
//
//   UDP payload = BTH (12) [RETH (16)] [ImmDt (4)] [AETH (4)] payload [pad 0..3] ICRC (4)
//   CNP         = BTH (12, opcode 0x81) + 16 reserved bytes + ICRC (4)
//
// Which optional headers follow the BTH is fixed by the opcode (IBTA vol. 1 §9.2, table
// "RC opcodes"); decode() enforces it. Only the reliable-connected opcodes this baseline
// implements are accepted (SEND, SEND with immediate, RDMA WRITE, RDMA WRITE with
// immediate, ACKNOWLEDGE) plus the RoCEv2 CNP; READ and atomics are kBadType for now.
//
// ICRC: written as four zero bytes and not checked on receive. The simulator cannot
// corrupt bits and UDP checksums cover real sockets, so the invariant CRC would only cost
// time; a capture of our packets therefore shows "bad ICRC" in Wireshark (documented in
// README.md). Reserved fields are sent as zero and ignored on receive, as IBTA asks.
// Decoders never touch engine state (STYLE §5: parse, then apply).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "util/result.h"

namespace mroce::rocev2 {

inline constexpr uint16_t kUdpPort = 4791;  // IANA "roce" (RoCEv2)

inline constexpr size_t kBthSize = 12;
inline constexpr size_t kRethSize = 16;
inline constexpr size_t kImmSize = 4;
inline constexpr size_t kAethSize = 4;
inline constexpr size_t kIcrcSize = 4;
inline constexpr size_t kCnpReservedSize = 16;
inline constexpr size_t kCnpSize = kBthSize + kCnpReservedSize + kIcrcSize;
// The largest header stack in front of a payload: BTH + RETH + ImmDt (WRITE_ONLY_IMM).
inline constexpr size_t kMaxHeaderSize = kBthSize + kRethSize + kImmSize;
static_assert(kCnpSize == 32, "RoCEv2 CNP: BTH + 16 reserved + ICRC");
static_assert(kMaxHeaderSize == 32);

inline constexpr uint32_t kPsnMask = 0xFFFFFF;  // PSNs and QP numbers are 24 bits
inline constexpr uint16_t kDefaultPkey = 0xFFFF;

// BTH opcodes (transport RC = 0b000 in the top three bits) and the RoCEv2 CNP.
enum class Opcode : uint8_t {
    kSendFirst = 0x00,
    kSendMiddle = 0x01,
    kSendLast = 0x02,
    kSendLastImm = 0x03,
    kSendOnly = 0x04,
    kSendOnlyImm = 0x05,
    kWriteFirst = 0x06,
    kWriteMiddle = 0x07,
    kWriteLast = 0x08,
    kWriteLastImm = 0x09,
    kWriteOnly = 0x0A,
    kWriteOnlyImm = 0x0B,
    kAck = 0x11,  // ACKNOWLEDGE: carries the AETH (ACK, NAK or RNR NAK)
    kCnp = 0x81,  // RoCEv2 congestion notification packet (IBTA annex A17)
};
bool is_supported_opcode(uint8_t op);
bool is_send(Opcode op);
bool is_write(Opcode op);
bool is_data(Opcode op);
bool is_first(Opcode op);   // FIRST or ONLY: starts a message
bool is_last(Opcode op);    // LAST or ONLY: ends a message
bool has_reth(Opcode op);   // WRITE_FIRST, WRITE_ONLY, WRITE_ONLY_IMM
bool has_imm(Opcode op);    // SEND/WRITE ..._IMM variants
const char* to_string(Opcode op);

// AETH syndrome: bits 7..5 say what it is, bits 4..0 qualify it.
enum class AckKind : uint8_t { kAck = 0b000, kRnrNak = 0b001, kNak = 0b011 };
// NAK codes (syndrome bits 4..0 when the kind is kNak).
enum class NakCode : uint8_t {
    kPsnSequenceError = 0,
    kInvalidRequest = 1,
    kRemoteAccessError = 2,
    kRemoteOperationalError = 3,
    kInvalidRdRequest = 4,
};
inline constexpr uint8_t kMaxNakCode = 4;
// An ACK's low five bits are the end-to-end credit count; 0b11111 means "no credit
// information", which is what we send (this baseline does not do credit flow control).
inline constexpr uint8_t kNoCredits = 0x1F;

constexpr uint8_t make_syndrome(AckKind k, uint8_t value) {
    return static_cast<uint8_t>(static_cast<uint8_t>(k) << 5 | (value & 0x1F));
}

struct Bth {
    Opcode opcode = Opcode::kSendOnly;
    bool solicited = false;   // SE
    bool migration = false;   // M (sent as 1 by RC senders that never migrate: we send 0)
    uint8_t pad_count = 0;    // 0..3 bytes of padding after the payload (set by encode)
    uint16_t pkey = kDefaultPkey;
    uint32_t dest_qp = 0;     // 24 bits
    bool ack_request = false;
    uint32_t psn = 0;         // 24 bits
};

struct Reth {
    uint64_t virtual_address = 0;
    uint32_t rkey = 0;
    uint32_t dma_length = 0;  // length of the whole WRITE message
};

struct Aeth {
    uint8_t syndrome = make_syndrome(AckKind::kAck, kNoCredits);
    uint32_t msn = 0;  // 24 bits: messages completed by the responder
    AckKind kind() const { return static_cast<AckKind>(syndrome >> 5); }
    uint8_t value() const { return syndrome & 0x1F; }
};

// Headers is one packet without its payload. The optional headers are read and written
// only when the opcode calls for them.
struct Headers {
    Bth bth;
    Reth reth;     // has_reth(opcode)
    uint32_t imm = 0;  // has_imm(opcode)
    Aeth aeth;     // opcode == kAck
};

struct Decoded {
    Headers h;
    std::span<const std::byte> payload;  // without padding and ICRC; points into the input
};

// header_size is the bytes in front of the payload for this opcode.
size_t header_size(Opcode op);
// encoded_size is the datagram size of a packet with opcode op and payload_len bytes.
size_t encoded_size(Opcode op, size_t payload_len);

// encode writes h (bth.pad_count is computed, the rest taken as given) and payload into
// out and returns the datagram length. Writes all or nothing.
// Errors: kInvalidArgument (unsupported opcode, a payload on ACK/CNP, a 24-bit field out
// of range), kBufferTooSmall (out shorter than encoded_size).
Result<size_t> encode(const Headers& h, std::span<const std::byte> payload, std::span<std::byte> out);

// decode parses one UDP payload. Errors: kTruncated (shorter than the opcode's headers
// and ICRC), kBadType (opcode not supported, unknown AETH syndrome), kBadVersion
// (TVer != 0), kBadLength (pad count larger than the payload, payload + pad not a
// multiple of 4, bytes after a fixed-size ACK or CNP, a pad count on an ACK or CNP).
Result<Decoded> decode(std::span<const std::byte> datagram);

// psn_unwrap maps a 24-bit PSN to the 64-bit counter nearest to reference (within
// +-2^23), the serial-number arithmetic of IBTA's PSN space.
inline uint64_t psn_unwrap(uint32_t psn24, uint64_t reference) {
    const uint32_t diff = (psn24 - static_cast<uint32_t>(reference)) & kPsnMask;
    const int64_t signed_diff = diff >= (1u << 23) ? int64_t{diff} - (int64_t{1} << 24) : int64_t{diff};
    return reference + static_cast<uint64_t>(signed_diff);
}

}  // namespace mroce::rocev2
