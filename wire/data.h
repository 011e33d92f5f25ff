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
}  // namespace data_flag

// spec §3.2: DATA header, 72 bytes, then payload_len bytes of payload.
struct DataHeader {
    CommonHeader common{.type = PacketType::kData};
    Opcode opcode = Opcode::kSend;
    uint8_t flags = 0;
    uint16_t path_id = 0;
    uint8_t path_gen = 0;
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

// encode_data_header writes the 72-byte header (payload_len taken from hdr) or nothing.
// Returns bytes written. Errors: kBufferTooSmall.
Result<size_t> encode_data_header(const DataHeader& hdr, std::span<std::byte> out);

// decode_data parses a whole DATA datagram. Checks [DATA-3]: payload_len equals the bytes
// after the header, offset + payload_len <= msg_len, and the LAST flag is set exactly
// when the payload ends the message. Errors: kTruncated, kBadVersion, kBadType, kBadLength.
Result<DataPacket> decode_data(std::span<const std::byte> datagram);
// decode_data with the common header already decoded by the caller (who dispatched on its
// type): the same checks on the rest, without decoding the first 16 bytes twice.
Result<DataPacket> decode_data(std::span<const std::byte> datagram, const CommonHeader& common);

}  // namespace mroce::wire
