// Tests for the DATA packet (docs/spec.md §3.2).
#include "wire/data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "wire/test_util.h"

namespace mroce::wire {
namespace {

using testing::Annotated;
using testing::check_every_prefix;
using testing::expect_bytes;
using testing::expect_untouched;
using testing::join;
using testing::kCanary;

constexpr Error kT = Error::kTruncated;
constexpr Error kL = Error::kBadLength;

// spec §3.2: the last 4-byte segment of a 4100-byte WRITE_IMM, retransmitted.
// Every header field is kTruncated when cut; a cut inside the payload leaves payload_len
// disagreeing with the datagram, which is kBadLength [DATA-3].
const Annotated kWriteImmVector = {
    // {offset, expected bytes, field, error if the datagram ends inside or before it}
    {0, {0x02}, "version", kT},                        // [WIRE-1]
    {1, {0x01}, "type", kT},                           // [WIRE-2] DATA
    {2, {0x00, 0x00}, "reserved", kT},                 // [WIRE-6]
    {4, {0x0A, 0x0B, 0x0C, 0x0D}, "dst_conn_id", kT},  //
    {8, {0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}, "dst_token", kT},
    {16, {0x04}, "opcode", kT},                       // [DATA-1] WRITE_IMM
    {17, {0x03}, "flags", kT},                        // [DATA-2] LAST|RETX
    {18, {0x01, 0x02}, "path_id", kT},                // 258
    {20, {0x07}, "path_gen", kT},                     // 7
    {21, {0x00}, "reserved", kT},                     // [WIRE-6]
    {22, {0x00, 0x04}, "payload_len", kT},            // 4
    {24, {0xFF, 0xFF, 0xFF, 0xFE}, "path_psn", kT},   // 2^32 - 2
    {28, {0xFF, 0xFF, 0xFF, 0xF0}, "psn_floor", kT},  // 2^32 - 16
    {32, {0x00, 0x00, 0x00, 0x21}, "stream_id", kT},  // 33
    {36, {0x80, 0x00, 0x00, 0x01}, "msg_seq", kT},    //
    {40, {0x00, 0x00, 0x00, 0x05}, "recv_seq", kT},   //
    {44, {0x00, 0x00, 0x10, 0x04}, "msg_len", kT},    // 4100
    {48, {0x00, 0x00, 0x10, 0x00}, "offset", kT},     // 4096
    {52, {0x3B, 0x9A, 0xCA, 0x00}, "timestamp", kT},  // 1e9 ns
    {56, {0xCA, 0xFE, 0xBA, 0xBE}, "rkey", kT},       //
    {60, {0x00, 0x00, 0x7F, 0x00, 0x12, 0x34, 0x50, 0x00}, "remote_addr", kT},
    {68, {0xDE, 0xAD, 0xBE, 0xEF}, "immediate", kT},  //
    {72, {'m', 'r', 'o', 'c'}, "payload", kL},        // [DATA-3]
};

DataHeader write_imm_header() {
    DataHeader h;
    h.common.dst_conn_id = 0x0A0B0C0D;
    h.common.dst_token = 0x1112131415161718ULL;
    h.opcode = Opcode::kWriteImm;
    h.flags = data_flag::kLast | data_flag::kRetx;
    h.path_id = 0x0102;
    h.path_gen = 7;
    h.payload_len = 4;
    h.path_psn = 0xFFFFFFFE;
    h.psn_floor = 0xFFFFFFF0;
    h.stream_id = 0x21;
    h.msg_seq = 0x80000001;
    h.recv_seq = 5;
    h.msg_len = 4100;
    h.offset = 4096;
    h.timestamp = 1'000'000'000;
    h.rkey = 0xCAFEBABE;
    h.remote_addr = 0x00007F0012345000ULL;
    h.immediate = 0xDEADBEEF;
    return h;
}

// spec §3.2 [DATA-3]: a zero-length SEND is one DATA packet with no payload, offset 0, LAST.
const Annotated kEmptySendVector = {
    {0, {0x02}, "version", kT},
    {1, {0x01}, "type", kT},
    {2, {0x00, 0x00}, "reserved", kT},
    {4, {0x00, 0x00, 0x00, 0x2A}, "dst_conn_id", kT},  // 42
    {8, {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01}, "dst_token", kT},
    {16, {0x01}, "opcode", kT},  // [DATA-1] SEND
    {17, {0x05}, "flags", kT},   // [DATA-2] LAST|ACK_NOW
    {18, {0x00, 0x00}, "path_id", kT},
    {20, {0x00}, "path_gen", kT},
    {21, {0x00}, "reserved", kT},
    {22, {0x00, 0x00}, "payload_len", kT},  // 0
    {24, {0x12, 0x34, 0x56, 0x78}, "path_psn", kT},
    {28, {0x12, 0x34, 0x56, 0x70}, "psn_floor", kT},
    {32, {0x00, 0x00, 0x00, 0x01}, "stream_id", kT},
    {36, {0x00, 0x00, 0x00, 0x09}, "msg_seq", kT},
    {40, {0x00, 0x00, 0x00, 0x08}, "recv_seq", kT},
    {44, {0x00, 0x00, 0x00, 0x00}, "msg_len", kT},  // 0
    {48, {0x00, 0x00, 0x00, 0x00}, "offset", kT},   // 0
    {52, {0x00, 0x00, 0x00, 0x63}, "timestamp", kT},
    {56, {0x00, 0x00, 0x00, 0x00}, "rkey", kT},  // [DATA-5] unused by SEND: zero
    {60, {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, "remote_addr", kT},  // [DATA-5]
    {68, {0x00, 0x00, 0x00, 0x00}, "immediate", kT},                            // [DATA-5]
};

DataHeader empty_send_header() {
    DataHeader h;
    h.common.dst_conn_id = 42;
    h.common.dst_token = 1;
    h.opcode = Opcode::kSend;
    h.flags = data_flag::kLast | data_flag::kAckNow;
    h.path_psn = 0x12345678;
    h.psn_floor = 0x12345670;
    h.stream_id = 1;
    h.msg_seq = 9;
    h.recv_seq = 8;
    h.timestamp = 0x63;
    return h;
}

// encode builds a datagram: the header as given, then `payload_bytes` bytes of payload
// (which may disagree with hdr.payload_len, for the rejection tests).
std::vector<std::byte> encode(const DataHeader& h, size_t payload_bytes) {
    std::vector<std::byte> b(kDataHeaderSize + payload_bytes, std::byte{0x5C});
    auto n = encode_data_header(h, b);
    EXPECT_TRUE(n.ok());
    EXPECT_EQ(n.ok() ? *n : 0, kDataHeaderSize);
    return b;
}
std::vector<std::byte> encode(const DataHeader& h) { return encode(h, h.payload_len); }

DataHeader segment(uint32_t msg_len, uint32_t offset, uint16_t payload_len, uint8_t flags) {
    DataHeader h;
    h.opcode = Opcode::kSend;
    h.msg_len = msg_len;
    h.offset = offset;
    h.payload_len = payload_len;
    h.flags = flags;
    return h;
}

// [DATA-1] [DATA-2] [DATA-3] [WIRE-6]: annotated vector of a WRITE_IMM segment.
TEST(Data, WriteImmAnnotatedVector) {
    const DataHeader h = write_imm_header();
    std::vector<std::byte> buf(kDataHeaderSize + 4);
    ASSERT_EQ(*encode_data_header(h, buf), kDataHeaderSize);
    const char payload[] = {'m', 'r', 'o', 'c'};
    std::memcpy(buf.data() + kDataHeaderSize, payload, 4);
    expect_bytes(kWriteImmVector, buf);

    const auto bytes = join(kWriteImmVector);  // decode_data's payload points into it
    auto p = decode_data(bytes);
    ASSERT_TRUE(p.ok()) << to_string(p.error());
    EXPECT_EQ(p->hdr, h);
    ASSERT_EQ(p->payload.size(), 4u);
    EXPECT_EQ(p->payload.data(), bytes.data() + kDataHeaderSize);
    EXPECT_EQ(std::memcmp(p->payload.data(), payload, 4), 0);
}

// [WIRE-7] [DATA-3]: every prefix of the WRITE_IMM vector fails as annotated.
TEST(Data, WriteImmEveryPrefix) {
    check_every_prefix(kWriteImmVector, [](auto b) { return decode_data(b); });
}

// [DATA-3] [DATA-5]: annotated vector of a zero-length SEND.
TEST(Data, EmptySendAnnotatedVector) {
    const DataHeader h = empty_send_header();
    std::vector<std::byte> buf(kDataHeaderSize);
    ASSERT_TRUE(encode_data_header(h, buf).ok());
    expect_bytes(kEmptySendVector, buf);
    const auto bytes = join(kEmptySendVector);
    auto p = decode_data(bytes);
    ASSERT_TRUE(p.ok()) << to_string(p.error());
    EXPECT_EQ(p->hdr, h);
    EXPECT_TRUE(p->payload.empty());
}

// [WIRE-7]: every prefix of the zero-length SEND is truncated.
TEST(Data, EmptySendEveryPrefix) {
    check_every_prefix(kEmptySendVector, [](auto b) { return decode_data(b); });
}

// random_data returns a header whose offset, payload_len, msg_len and LAST agree [DATA-3].
DataHeader random_data(Rng& rng) {
    DataHeader h;
    h.common.dst_conn_id = rng.next_u32();
    h.common.dst_token = rng.next_u64();
    h.opcode = static_cast<Opcode>(rng.uniform_range(0x01, 0x09));
    h.path_id = static_cast<uint16_t>(rng.next_u32());
    h.path_gen = static_cast<uint8_t>(rng.next_u32());
    h.path_psn = rng.next_u32();
    h.psn_floor = rng.next_u32();
    h.stream_id = rng.next_u32();
    h.msg_seq = rng.next_u32();
    h.recv_seq = rng.next_u32();
    h.timestamp = rng.next_u32();
    h.rkey = rng.next_u32();
    h.remote_addr = rng.next_u64();
    h.immediate = rng.next_u32();
    switch (rng.uniform(4)) {
        case 0:
            h.msg_len = 0;
            break;
        case 1:
            h.msg_len = static_cast<uint32_t>(rng.uniform_range(1, 3 * kMaxMaxPayload));
            break;
        case 2:
            h.msg_len = static_cast<uint32_t>(rng.uniform_range(1, UINT32_MAX));
            break;
        default:
            h.msg_len = UINT32_MAX - static_cast<uint32_t>(rng.uniform(kMaxMaxPayload));
            break;
    }
    if (h.msg_len != 0) {
        h.payload_len = static_cast<uint16_t>(
            rng.uniform_range(1, std::min<uint64_t>(h.msg_len, kMaxMaxPayload)));
        const uint32_t max_offset = h.msg_len - h.payload_len;
        switch (rng.uniform(3)) {
            case 0:
                h.offset = 0;
                break;
            case 1:
                h.offset = max_offset;
                break;
            default:
                h.offset = static_cast<uint32_t>(rng.uniform_range(0, max_offset));
                break;
        }
    }
    // Unknown flag bits are carried through [DATA-2]; LAST must match the message end.
    h.flags = static_cast<uint8_t>(rng.next_u32()) & ~(data_flag::kLast | data_flag::kCompact);
    if (uint64_t{h.offset} + h.payload_len == h.msg_len) h.flags |= data_flag::kLast;
    // [DATA-9]: a third of the opcodes that may be compact are, without the fields they omit.
    if (may_be_compact(h.opcode) && rng.uniform(3) == 0) {
        h.flags |= data_flag::kCompact;
        h.recv_seq = 0;
        h.immediate = 0;
    }
    return h;
}

// [DATA-1] [DATA-2] [DATA-3]: random consistent segments round-trip with their payload.
TEST(Data, RoundTripProperty) {
    for (uint64_t seed : testing::property_seeds(2000)) {
        SCOPED_TRACE(::testing::Message() << "seed=" << seed);
        Rng rng(seed);
        const DataHeader h = random_data(rng);
        const size_t header = data_header_size(h.flags);
        std::vector<std::byte> buf(header + h.payload_len);
        testing::fill_random(rng, std::span(buf).subspan(header));
        const std::vector<std::byte> payload(buf.begin() + static_cast<ptrdiff_t>(header), buf.end());
        auto n = encode_data_header(h, buf);
        ASSERT_TRUE(n.ok());
        ASSERT_EQ(*n, header);
        auto p = decode_data(buf);
        ASSERT_TRUE(p.ok()) << to_string(p.error());
        ASSERT_EQ(p->hdr, h);
        ASSERT_TRUE(
            std::equal(p->payload.begin(), p->payload.end(), payload.begin(), payload.end()));
    }
}

// [DATA-3]: payload_len must equal the bytes after the header, in both directions.
TEST(Data, PayloadLenMismatchIsBadLength) {
    const DataHeader h = segment(100, 0, 10, 0);
    EXPECT_TRUE(decode_data(encode(h, 10)).ok());
    EXPECT_EQ(decode_data(encode(h, 9)).error(), Error::kBadLength);
    EXPECT_EQ(decode_data(encode(h, 11)).error(), Error::kBadLength);
    EXPECT_EQ(decode_data(encode(h, 0)).error(), Error::kBadLength);
    const DataHeader empty = segment(0, 0, 0, data_flag::kLast);
    EXPECT_TRUE(decode_data(encode(empty, 0)).ok());
    EXPECT_EQ(decode_data(encode(empty, 1)).error(), Error::kBadLength);
}

// [DATA-3]: offset + payload_len must not pass msg_len (computed without 32-bit wrap).
TEST(Data, SegmentBeyondMessageIsBadLength) {
    EXPECT_TRUE(decode_data(encode(segment(14, 10, 4, data_flag::kLast))).ok());
    EXPECT_EQ(decode_data(encode(segment(13, 10, 4, data_flag::kLast))).error(), Error::kBadLength);
    EXPECT_EQ(decode_data(encode(segment(13, 10, 4, 0))).error(), Error::kBadLength);
    // 0xFFFFFFFF + 2 wraps to 1 in 32 bits; the decoder must not be fooled.
    EXPECT_EQ(decode_data(encode(segment(UINT32_MAX, UINT32_MAX, 2, 0))).error(),
              Error::kBadLength);
    EXPECT_EQ(decode_data(encode(segment(1, UINT32_MAX, 2, data_flag::kLast))).error(),
              Error::kBadLength);
    // The largest message: its last segment ends exactly at 2^32 - 1.
    EXPECT_TRUE(decode_data(encode(segment(UINT32_MAX, UINT32_MAX - 3, 2, 0))).ok());
    EXPECT_TRUE(decode_data(encode(segment(UINT32_MAX, UINT32_MAX - 2, 2, data_flag::kLast))).ok());
    EXPECT_EQ(decode_data(encode(segment(UINT32_MAX, UINT32_MAX - 2, 3, data_flag::kLast))).error(),
              Error::kBadLength);
}

// [DATA-2] [DATA-3]: LAST is set exactly on the segment that reaches msg_len.
TEST(Data, WrongLastFlagIsBadLength) {
    EXPECT_TRUE(decode_data(encode(segment(20, 0, 10, 0))).ok());
    EXPECT_EQ(decode_data(encode(segment(20, 0, 10, data_flag::kLast))).error(), Error::kBadLength);
    EXPECT_TRUE(decode_data(encode(segment(20, 10, 10, data_flag::kLast))).ok());
    EXPECT_EQ(decode_data(encode(segment(20, 10, 10, 0))).error(), Error::kBadLength);
    // Single-segment message: first and last at once.
    EXPECT_EQ(decode_data(encode(segment(10, 0, 10, data_flag::kRetx))).error(), Error::kBadLength);
    // Zero-length message without LAST.
    EXPECT_EQ(decode_data(encode(segment(0, 0, 0, 0))).error(), Error::kBadLength);
}

// [DATA-3]: an empty payload is legal only for a zero-length message.
TEST(Data, EmptyPayloadInNonEmptyMessageIsBadLength) {
    EXPECT_EQ(decode_data(encode(segment(10, 10, 0, data_flag::kLast))).error(), Error::kBadLength);
    EXPECT_EQ(decode_data(encode(segment(10, 0, 0, 0))).error(), Error::kBadLength);
    EXPECT_EQ(decode_data(encode(segment(10, 4, 0, 0))).error(), Error::kBadLength);
    EXPECT_EQ(decode_data(encode(segment(0, 1, 0, data_flag::kLast))).error(), Error::kBadLength);
    EXPECT_TRUE(decode_data(encode(segment(0, 0, 0, data_flag::kLast))).ok());
}

// [DATA-1]: opcodes 0x01..0x09 decode (0x05..0x09 are reserved; the connection answers them
// with NACK(kInvalidRequest)); every other value is kBadType.
TEST(Data, OpcodeValues) {
    EXPECT_EQ(static_cast<int>(Opcode::kSend), 0x01);
    EXPECT_EQ(static_cast<int>(Opcode::kSendImm), 0x02);
    EXPECT_EQ(static_cast<int>(Opcode::kWrite), 0x03);
    EXPECT_EQ(static_cast<int>(Opcode::kWriteImm), 0x04);
    EXPECT_EQ(static_cast<int>(Opcode::kReadRequest), 0x05);
    EXPECT_EQ(static_cast<int>(Opcode::kReadResponse), 0x06);
    EXPECT_EQ(static_cast<int>(Opcode::kAtomicFetchAdd), 0x07);
    EXPECT_EQ(static_cast<int>(Opcode::kAtomicCompareSwap), 0x08);
    EXPECT_EQ(static_cast<int>(Opcode::kAtomicResponse), 0x09);
    auto bytes = encode(segment(3, 0, 3, data_flag::kLast));
    for (int op = 0; op < 256; ++op) {
        bytes[16] = std::byte(op);
        auto p = decode_data(bytes);
        if (op >= 0x01 && op <= 0x09) {
            ASSERT_TRUE(p.ok()) << "opcode " << op;
            EXPECT_EQ(static_cast<int>(p->hdr.opcode), op);
        } else {
            EXPECT_EQ(p.error(), Error::kBadType) << "opcode " << op;
        }
    }
}

// [WIRE-9] [DATA-1] [DATA-3]: the opcode is checked before the lengths.
TEST(Data, UnknownOpcodeIsCheckedBeforeLengths) {
    auto bytes = encode(segment(3, 0, 3, 0), 1);  // LAST wrong and payload short
    bytes[16] = std::byte{0x00};
    EXPECT_EQ(decode_data(bytes).error(), Error::kBadType);
}

// [DATA-1]: which opcodes consume a posted receive, carry an immediate, are writes.
TEST(Data, OpcodeProperties) {
    EXPECT_TRUE(consumes_receive(Opcode::kSend));
    EXPECT_TRUE(consumes_receive(Opcode::kSendImm));
    EXPECT_FALSE(consumes_receive(Opcode::kWrite));
    EXPECT_TRUE(consumes_receive(Opcode::kWriteImm));
    EXPECT_FALSE(has_immediate(Opcode::kSend));
    EXPECT_TRUE(has_immediate(Opcode::kSendImm));
    EXPECT_FALSE(has_immediate(Opcode::kWrite));
    EXPECT_TRUE(has_immediate(Opcode::kWriteImm));
    EXPECT_FALSE(is_write(Opcode::kSend));
    EXPECT_FALSE(is_write(Opcode::kSendImm));
    EXPECT_TRUE(is_write(Opcode::kWrite));
    EXPECT_TRUE(is_write(Opcode::kWriteImm));
}

// [DATA-2]: flag values; bits this version does not define do not make a packet invalid.
TEST(Data, FlagBits) {
    EXPECT_EQ(data_flag::kLast, 0x01);
    EXPECT_EQ(data_flag::kRetx, 0x02);
    EXPECT_EQ(data_flag::kAckNow, 0x04);
    EXPECT_EQ(data_flag::kCompact, 0x20);
    for (uint8_t unknown : {0x40, 0x80, 0xC0}) {
        auto p = decode_data(encode(segment(8, 0, 8, static_cast<uint8_t>(unknown | 0x01))));
        ASSERT_TRUE(p.ok()) << int{unknown};
        auto q = decode_data(encode(segment(8, 0, 4, unknown)));
        ASSERT_TRUE(q.ok()) << int{unknown};
    }
}

// [WIRE-6]: reserved bytes 2, 3 and 21 are ignored on receive.
TEST(Data, ReservedIsIgnoredOnReceive) {
    auto bytes = join(kWriteImmVector);
    for (size_t off : {2u, 3u}) bytes[off] = std::byte{0xFF};
    bytes[17] |= std::byte{0xC0};  // flags not defined in version 2
    auto p = decode_data(bytes);
    ASSERT_TRUE(p.ok()) << to_string(p.error());
    DataHeader want = write_imm_header();
    want.flags |= 0xC0;
    EXPECT_EQ(p->hdr, want);
}

// spec [DATA-9]: the last 4-byte segment of a 4100-byte WRITE in the COMPACT form: no
// recv_seq, no immediate; every field after msg_seq 4 bytes up, the payload at 64.
const Annotated kCompactWriteVector = {
    {0, {0x02}, "version", kT},
    {1, {0x01}, "type", kT},
    {2, {0x00, 0x00}, "reserved", kT},
    {4, {0x0A, 0x0B, 0x0C, 0x0D}, "dst_conn_id", kT},
    {8, {0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}, "dst_token", kT},
    {16, {0x03}, "opcode", kT},                       // [DATA-1] WRITE
    {17, {0x21}, "flags", kT},                        // [DATA-2] LAST|COMPACT
    {18, {0x01, 0x02}, "path_id", kT},
    {20, {0x07}, "path_gen", kT},
    {21, {0x00}, "reserved", kT},
    {22, {0x00, 0x04}, "payload_len", kT},
    {24, {0xFF, 0xFF, 0xFF, 0xFE}, "path_psn", kT},
    {28, {0xFF, 0xFF, 0xFF, 0xF0}, "psn_floor", kT},
    {32, {0x00, 0x00, 0x00, 0x21}, "stream_id", kT},
    {36, {0x80, 0x00, 0x00, 0x01}, "msg_seq", kT},
    {40, {0x00, 0x00, 0x10, 0x04}, "msg_len", kT},    // 4100
    {44, {0x00, 0x00, 0x10, 0x00}, "offset", kT},     // 4096
    {48, {0x3B, 0x9A, 0xCA, 0x00}, "timestamp", kT},
    {52, {0xCA, 0xFE, 0xBA, 0xBE}, "rkey", kT},
    {56, {0x00, 0x00, 0x7F, 0x00, 0x12, 0x34, 0x50, 0x00}, "remote_addr", kT},
    {64, {'m', 'r', 'o', 'c'}, "payload", kL},        // [DATA-3]
};

DataHeader compact_write_header() {
    DataHeader h = write_imm_header();
    h.opcode = Opcode::kWrite;
    h.flags = data_flag::kLast | data_flag::kCompact;
    h.recv_seq = 0;
    h.immediate = 0;
    return h;
}

// [DATA-9] [DATA-3]: the COMPACT vector, encoded and decoded.
TEST(Data, CompactAnnotatedVector) {
    const DataHeader h = compact_write_header();
    std::vector<std::byte> buf(kDataCompactHeaderSize + 4);
    ASSERT_EQ(*encode_data_header(h, buf), kDataCompactHeaderSize);
    const char payload[] = {'m', 'r', 'o', 'c'};
    std::memcpy(buf.data() + kDataCompactHeaderSize, payload, 4);
    expect_bytes(kCompactWriteVector, buf);
    const auto bytes = join(kCompactWriteVector);
    auto p = decode_data(bytes);
    ASSERT_TRUE(p.ok()) << to_string(p.error());
    EXPECT_EQ(p->hdr, h);
    ASSERT_EQ(p->payload.size(), 4u);
    EXPECT_EQ(p->payload.data(), bytes.data() + kDataCompactHeaderSize);
    DataPacket q;
    ASSERT_EQ(parse_data_body(bytes, q), Error::kOk);
    EXPECT_EQ(q.hdr.offset, 4096u);
}

// [WIRE-7] [DATA-9]: every prefix of the COMPACT vector fails as annotated (below 64
// bytes truncated, inside the payload a bad length).
TEST(Data, CompactEveryPrefix) {
    check_every_prefix(kCompactWriteVector, [](auto b) { return decode_data(b); });
}

// [DATA-9]: every opcode that consumes no receive round-trips in the COMPACT form; one
// that consumes a receive is refused as a bad length even with its fields all zero.
TEST(Data, CompactOnlyWithoutAReceive) {
    for (uint8_t op = 0x01; op <= 0x09; ++op) {
        SCOPED_TRACE(int{op});
        DataHeader h = compact_write_header();
        h.opcode = static_cast<Opcode>(op);
        // Room for either form (the compiler cannot see that the compact one is written).
        std::vector<std::byte> buf(kDataHeaderSize + 4);
        store_data_header(h, buf.data());  // what a broken sender would write
        auto p = decode_data(std::span(buf).first(kDataCompactHeaderSize + 4));
        if (consumes_receive(h.opcode)) {
            ASSERT_FALSE(p.ok());
            EXPECT_EQ(p.error(), Error::kBadLength);
        } else {
            ASSERT_TRUE(p.ok()) << to_string(p.error());
            EXPECT_EQ(p->hdr, h);
        }
    }
}

// [DATA-9] [WIRE-6]: where COMPACT_DATA was not negotiated the bit means nothing: it is
// cleared and the header read at its full 72 bytes, so a compact datagram no longer
// parses (68 bytes are short of a full header; with a longer payload its payload_len
// would disagree) and a full one with the bit set parses as full.
TEST(Data, CompactFlagWithoutTheCapabilityIsReadAtFullLength) {
    const auto compact = join(kCompactWriteVector);
    DataPacket p;
    EXPECT_EQ(parse_data_body(compact, p, /*compact_ok=*/false), Error::kTruncated);
    auto longer = compact;
    longer.resize(compact.size() + 8);
    EXPECT_EQ(parse_data_body(longer, p, /*compact_ok=*/false), Error::kBadLength);
    EXPECT_EQ(parse_data_body(longer, p, /*compact_ok=*/true), Error::kBadLength);

    auto full = join(kWriteImmVector);
    full[16] = std::byte{0x03};  // WRITE
    full[17] |= std::byte{data_flag::kCompact};
    auto q = decode_data(full, /*compact_ok=*/false);
    ASSERT_TRUE(q.ok()) << to_string(q.error());
    DataHeader want = write_imm_header();
    want.opcode = Opcode::kWrite;
    EXPECT_EQ(q->hdr, want);  // the bit cleared; recv_seq and immediate read where they lie
    EXPECT_EQ(q->payload.data(), full.data() + kDataHeaderSize);
    // The same bytes where COMPACT_DATA was negotiated: a 64-byte header, 12 bytes of
    // payload against payload_len 4.
    EXPECT_EQ(decode_data(full).error(), Error::kBadLength);
}

// [PATH-12]: byte 21 carries return_echo, flagged by RETURN_ECHO, both ways.
TEST(Data, ReturnEchoRoundTrips) {
    DataHeader h = write_imm_header();
    h.flags |= data_flag::kReturnEcho;
    h.return_echo = 255;
    std::vector<std::byte> buf(kDataHeaderSize + h.payload_len);
    ASSERT_TRUE(encode_data_header(h, buf).ok());
    EXPECT_EQ(buf[21], std::byte{255});
    EXPECT_EQ(buf[17] & std::byte{data_flag::kReturnEcho}, std::byte{data_flag::kReturnEcho});
    auto p = decode_data(buf);
    ASSERT_TRUE(p.ok()) << to_string(p.error());
    EXPECT_EQ(p->hdr, h);
}

// [WIRE-3] [WIRE-4]: version and type are checked through decode_data too.
TEST(Data, BadVersionAndType) {
    auto bytes = join(kWriteImmVector);
    bytes[0] = std::byte{0x00};
    EXPECT_EQ(decode_data(bytes).error(), Error::kBadVersion);
    bytes[0] = std::byte{0x02};
    bytes[1] = std::byte{0x02};  // ACK
    EXPECT_EQ(decode_data(bytes).error(), Error::kBadType);
    bytes[1] = std::byte{0x09};
    EXPECT_EQ(decode_data(bytes).error(), Error::kBadType);
}

// §3.2: encode_data_header into a too-small buffer fails and writes nothing.
TEST(Data, EncoderBufferTooSmallWritesNothing) {
    const DataHeader h = write_imm_header();
    for (size_t size = 0; size < kDataHeaderSize; ++size) {
        SCOPED_TRACE(::testing::Message() << "buffer of " << size << " bytes");
        std::vector<std::byte> buf(size, kCanary);
        auto n = encode_data_header(h, buf);
        EXPECT_EQ(n.error(), Error::kBufferTooSmall);
        expect_untouched(buf);
    }
}

// §3.2: the encoder writes the 72-byte header only; the payload area is the caller's.
TEST(Data, EncoderWritesOnlyTheHeader) {
    std::vector<std::byte> buf(kDataHeaderSize + 16, kCanary);
    auto n = encode_data_header(write_imm_header(), buf);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, kDataHeaderSize);
    expect_untouched(std::span(buf).subspan(kDataHeaderSize));
}

}  // namespace
}  // namespace mroce::wire
