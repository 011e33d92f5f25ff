// wire/data.h — the DATA packet: one segment of a message, placed directly on arrival.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "util/result.h"
#include "wire/header.h"

namespace mroce::wire {

// spec §3.2 [DATA-1]: opcodes.
enum class Opcode : uint8_t {
    kSend = 0x01,
    kSendImm = 0x02,
    kWrite = 0x03,
    kWriteImm = 0x04,
    kReadRequest = 0x05,
    kReadResponse = 0x06,
    kAtomicFetchAdd = 0x07,
    kAtomicCompareSwap = 0x08,
    kAtomicResponse = 0x09,
};
inline bool is_known_opcode(uint8_t op) { return op >= 0x01 && op <= 0x09; }
// consumes_receive: SEND, SEND_IMM and WRITE_IMM each take the next posted receive.
inline bool consumes_receive(Opcode op) {
    return op == Opcode::kSend || op == Opcode::kSendImm || op == Opcode::kWriteImm;
}
inline bool has_immediate(Opcode op) { return op == Opcode::kSendImm || op == Opcode::kWriteImm; }
inline bool is_write(Opcode op) { return op == Opcode::kWrite || op == Opcode::kWriteImm; }

// spec §3.2 [DATA-2]: DATA flag bits; unknown bits are ignored on receive.
namespace data_flag {
inline constexpr uint8_t kLast = 0x01;    // the segment that ends the message
inline constexpr uint8_t kRetx = 0x02;    // a retransmission (for counters and capture)
inline constexpr uint8_t kAckNow = 0x04;  // receiver acks this path without delay
inline constexpr uint8_t kReturnEcho = 0x08;  // return_echo names one of the peer's paths [PATH-12]
inline constexpr uint8_t kDrained = 0x10;     // the sender has nothing left to send [CC-12]
inline constexpr uint8_t kCompact = 0x20;     // no recv_seq, no immediate: 64-byte header [DATA-9]
}  // namespace data_flag

// spec §3.2: DATA header, 72 bytes (64 with COMPACT, [DATA-9]), then payload_len bytes of payload.
struct DataHeader {
    CommonHeader common{.type = PacketType::kData};
    Opcode opcode = Opcode::kSend;
    uint8_t flags = 0;
    uint16_t path_id = 0;
    uint8_t path_gen = 0;
    uint8_t return_echo = 0;  // with kReturnEcho: a peer path whose ACK arrived [PATH-12]
    uint16_t payload_len = 0;
    uint32_t path_psn = 0;
    uint32_t psn_floor = 0;   // [PATH-6]: sender is done with every PSN below this
    uint32_t stream_id = 0;   // the receiver's stream id
    uint32_t msg_seq = 0;     // per-stream message sequence
    uint32_t recv_seq = 0;    // which posted receive (SEND, SEND_IMM, WRITE_IMM)
    uint32_t msg_len = 0;     // total message bytes
    uint32_t offset = 0;      // byte offset of this payload in the message
    uint32_t timestamp = 0;   // sender clock, low 32 bits of ns, echoed in ACK
    uint32_t rkey = 0;        // WRITE, WRITE_IMM
    uint64_t remote_addr = 0; // WRITE, WRITE_IMM: address of message byte 0
    uint32_t immediate = 0;   // SEND_IMM, WRITE_IMM
    friend bool operator==(const DataHeader&, const DataHeader&) = default;
};
inline constexpr size_t kDataHeaderSize = 72;
// spec [DATA-9]: the COMPACT form leaves out recv_seq and immediate, which an opcode that
// consumes no receive does not use (on a connection that negotiated COMPACT_DATA).
inline constexpr size_t kDataCompactHeaderSize = kDataHeaderSize - 8;
inline bool may_be_compact(Opcode op) { return !consumes_receive(op); }
// data_header_size: the header of a DATA with these flags (COMPACT already known to be
// meaningful on its connection).
constexpr size_t data_header_size(uint8_t flags) {
    return (flags & data_flag::kCompact) ? kDataCompactHeaderSize : kDataHeaderSize;
}

// spec §3.2 [DATA-8]: the payload of a READ request, of an atomic request and of an atomic
// response is a fixed-size body.
inline constexpr size_t kReadRequestBodySize = 8;     // u32 length, u32 reserved (zero)
inline constexpr size_t kAtomicRequestBodySize = 16;  // u64 swap-or-add, u64 compare
inline constexpr size_t kAtomicResponseBodySize = 8;  // u64 original value
struct AtomicRequestBody {
    uint64_t swap_add = 0;  // FETCH_ADD: the addend; COMPARE_SWAP: the new value
    uint64_t compare = 0;   // COMPARE_SWAP only
};
void encode_read_request(uint32_t length, std::span<std::byte, kReadRequestBodySize> out);
uint32_t decode_read_request(std::span<const std::byte, kReadRequestBodySize> in);
void encode_atomic_request(const AtomicRequestBody& b,
                           std::span<std::byte, kAtomicRequestBodySize> out);
AtomicRequestBody decode_atomic_request(std::span<const std::byte, kAtomicRequestBodySize> in);
void encode_atomic_response(uint64_t original, std::span<std::byte, kAtomicResponseBodySize> out);
uint64_t decode_atomic_response(std::span<const std::byte, kAtomicResponseBodySize> in);

struct DataPacket {
    DataHeader hdr;
    std::span<const std::byte> payload;  // points into the datagram
};

// encode_data_header writes the header (payload_len taken from hdr; 72 bytes, or 64 with
// COMPACT) or nothing. Returns bytes written. Errors: kBufferTooSmall.
Result<size_t> encode_data_header(const DataHeader& hdr, std::span<std::byte> out);

// store_data_header writes the header at p, which has room for data_header_size(h.flags)
// bytes (the caller checked). COMPACT only for an opcode that may_be_compact, whose
// recv_seq and immediate are 0 ([DATA-5], [DATA-9]). Inline for the sender's per-packet
// path: with a DataHeader built on the stack just before, the compiler stores the fields
// straight into the packet.
inline void store_data_header(const DataHeader& h, std::byte* p) {
    store_common_header(p, h.common, PacketType::kData);
    p[16] = static_cast<std::byte>(h.opcode);
    p[17] = static_cast<std::byte>(h.flags);
    store_be16(p + 18, h.path_id);
    p[20] = static_cast<std::byte>(h.path_gen);
    p[21] = static_cast<std::byte>(h.return_echo);
    store_be16(p + 22, h.payload_len);
    store_be32(p + 24, h.path_psn);
    store_be32(p + 28, h.psn_floor);
    store_be32(p + 32, h.stream_id);
    store_be32(p + 36, h.msg_seq);
    if (h.flags & data_flag::kCompact) {  // [DATA-9]: the fields after msg_seq move up by 4
        store_be32(p + 40, h.msg_len);
        store_be32(p + 44, h.offset);
        store_be32(p + 48, h.timestamp);
        store_be32(p + 52, h.rkey);
        store_be64(p + 56, h.remote_addr);
        return;
    }
    store_be32(p + 40, h.recv_seq);
    store_be32(p + 44, h.msg_len);
    store_be32(p + 48, h.offset);
    store_be32(p + 52, h.timestamp);
    store_be32(p + 56, h.rkey);
    store_be64(p + 60, h.remote_addr);
    store_be32(p + 68, h.immediate);
}

// decode_data parses a whole DATA datagram. Checks [DATA-3]: payload_len equals the bytes
// after the header, offset + payload_len <= msg_len, and the LAST flag is set exactly
// when the payload ends the message. Errors: kTruncated, kBadVersion, kBadType, kBadLength.
// compact_ok: the connection negotiated COMPACT_DATA ([DATA-9]); without it the COMPACT
// bit is undefined, cleared, and the header read at its full length.
Result<DataPacket> decode_data(std::span<const std::byte> datagram, bool compact_ok = true);
// decode_data with the common header already decoded by the caller (who dispatched on its
// type): the same checks on the rest, without decoding the first 16 bytes twice.
Result<DataPacket> decode_data(std::span<const std::byte> datagram, const CommonHeader& common,
                               bool compact_ok = true);

// parse_data_body is the receiver's per-packet decoder: decode_data's checks and errors
// for everything after the common header, written into `p` (p.hdr.common untouched; the
// rest unspecified on error) at fixed offsets, without a Result or a copy of the header.
// compact_ok as for decode_data.
inline Error parse_data_body(std::span<const std::byte> datagram, DataPacket& p, bool compact_ok = true) {
    // [WIRE-9] step 4: below the smaller fixed part, truncated whatever the flags say; the
    // flags byte then says which fixed part applies ([DATA-9]).
    if (datagram.size() < kDataCompactHeaderSize) return Error::kTruncated;
    const std::byte* b = datagram.data();
    DataHeader& h = p.hdr;
    h.flags = static_cast<uint8_t>(b[17]);
    if (!compact_ok) h.flags &= static_cast<uint8_t>(~data_flag::kCompact);
    const bool compact = (h.flags & data_flag::kCompact) != 0;
    const size_t header = compact ? kDataCompactHeaderSize : kDataHeaderSize;
    if (datagram.size() < header) return Error::kTruncated;
    const uint8_t opcode = static_cast<uint8_t>(b[16]);
    if (!is_known_opcode(opcode)) return Error::kBadType;
    h.opcode = static_cast<Opcode>(opcode);
    // [DATA-9]: a header without recv_seq and immediate cannot carry an opcode that needs them.
    if (compact && !may_be_compact(h.opcode)) return Error::kBadLength;
    h.path_id = load_be16(b + 18);
    h.path_gen = static_cast<uint8_t>(b[20]);
    h.return_echo = static_cast<uint8_t>(b[21]);
    h.payload_len = load_be16(b + 22);
    h.path_psn = load_be32(b + 24);
    h.psn_floor = load_be32(b + 28);
    h.stream_id = load_be32(b + 32);
    h.msg_seq = load_be32(b + 36);
    if (compact) {
        h.recv_seq = 0;
        h.msg_len = load_be32(b + 40);
        h.offset = load_be32(b + 44);
        h.timestamp = load_be32(b + 48);
        h.rkey = load_be32(b + 52);
        h.remote_addr = load_be64(b + 56);
        h.immediate = 0;
    } else {
        h.recv_seq = load_be32(b + 40);
        h.msg_len = load_be32(b + 44);
        h.offset = load_be32(b + 48);
        h.timestamp = load_be32(b + 52);
        h.rkey = load_be32(b + 56);
        h.remote_addr = load_be64(b + 60);
        h.immediate = load_be32(b + 68);
    }
    // spec §3.2 [DATA-3]: the payload fills the rest of the datagram exactly and lies
    // inside the message; LAST marks exactly the segment that reaches msg_len.
    if (datagram.size() - header != h.payload_len) return Error::kBadLength;
    const uint64_t end = uint64_t{h.offset} + h.payload_len;
    if (end > h.msg_len) return Error::kBadLength;
    const bool last = (h.flags & data_flag::kLast) != 0;
    if (last != (end == h.msg_len)) return Error::kBadLength;
    // A zero-length payload is legal only for a zero-length message.
    if (h.payload_len == 0 && h.msg_len != 0) return Error::kBadLength;
    p.payload = datagram.subspan(header);
    return Error::kOk;
}

}  // namespace mroce::wire
