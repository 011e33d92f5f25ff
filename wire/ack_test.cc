// Tests for the ACK packet (docs/spec.md §3.3).
#include "wire/ack.h"

#include <gtest/gtest.h>

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

// spec §3.3: a probe reply for path 258 generation 7 with two stream entries, 96 bytes.
// A cut in the 80-byte fixed part is kTruncated; a cut in the entries leaves stream_count
// disagreeing with the datagram, which is kBadLength [ACK-1].
const Annotated kAckVector = {
    // {offset, expected bytes, field, error if the datagram ends inside or before it}
    {0, {0x02}, "version", kT},         // [WIRE-1]
    {1, {0x02}, "type", kT},            // [WIRE-2] ACK
    {2, {0x00, 0x00}, "reserved", kT},  // [WIRE-6]
    {4, {0x0A, 0x0B, 0x0C, 0x0D}, "dst_conn_id", kT},
    {8, {0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}, "dst_token", kT},
    {16, {0x01, 0x02}, "path_id", kT},              // [ACK-3] 258
    {18, {0x07}, "path_gen", kT},                   // [ACK-3] 7
    {19, {0x01}, "flags", kT},                      // [ACK-8] PROBE_REPLY
    {20, {0xFF, 0xFF, 0xFF, 0xFF}, "cum_psn", kT},  // [ACK-3] 2^32 - 1
    // [ACK-2] bit 1 (PSN 1), bit 8 (PSN 8), bit 255 (PSN 255): the window wraps past 0.
    {24,
     {0x40, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,   // bits 0..63: 1 and 8 set
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,   // bits 64..127
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,   // bits 128..191
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01},  // bits 192..255: 255 set
     "sack",
     kT},
    {56, {0x00, 0x00, 0x00, 0x03}, "ecn_ce_count", kT},          // [ACK-4] 3
    {60, {0x3B, 0x9A, 0xCA, 0x00}, "ts_echo", kT},               // [ACK-6] 1e9
    {64, {0x00, 0x00, 0x03, 0xE8}, "ack_delay_ns", kT},          // [ACK-6] 1000 ns
    {68, {0x00, 0x01, 0x86, 0xA0}, "rate_hint_mbps", kT},        // [ACK-7] 100 Gbit/s
    {72, {0x00, 0x00, 0x00, 0x09}, "probe_psn", kT},             // [ACK-8] 9
    {76, {0x00, 0x02}, "stream_count", kT},                      // [ACK-5] 2
    {78, {0x00, 0x00}, "reserved", kT},                          // [WIRE-6]
    {80, {0x00, 0x00, 0x00, 0x21}, "streams[0].stream_id", kL},  // [ACK-9] 33
    {84, {0x80, 0x00, 0x00, 0x02}, "streams[0].delivered_seq", kL},
    {88, {0x00, 0x00, 0x00, 0x22}, "streams[1].stream_id", kL},  // 34
    {92, {0x00, 0x00, 0x00, 0x00}, "streams[1].delivered_seq", kL},
};

// spec §3.3 [ACK-21]: the same probe reply in the SHORT form (no SACK bit set), 64 bytes:
// the bitmap is left out and every field after it moves 32 bytes up.
const Annotated kShortAckVector = {
    {0, {0x02}, "version", kT},
    {1, {0x02}, "type", kT},
    {2, {0x00, 0x00}, "reserved", kT},
    {4, {0x0A, 0x0B, 0x0C, 0x0D}, "dst_conn_id", kT},
    {8, {0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}, "dst_token", kT},
    {16, {0x01, 0x02}, "path_id", kT},
    {18, {0x07}, "path_gen", kT},
    {19, {0x05}, "flags", kT},                                   // [ACK-8] PROBE_REPLY | SHORT
    {20, {0xFF, 0xFF, 0xFF, 0xFF}, "cum_psn", kT},
    {24, {0x00, 0x00, 0x00, 0x03}, "ecn_ce_count", kT},
    {28, {0x3B, 0x9A, 0xCA, 0x00}, "ts_echo", kT},
    {32, {0x00, 0x00, 0x03, 0xE8}, "ack_delay_ns", kT},
    {36, {0x00, 0x01, 0x86, 0xA0}, "rate_hint_mbps", kT},
    {40, {0x00, 0x00, 0x00, 0x09}, "probe_psn", kT},
    {44, {0x00, 0x02}, "stream_count", kT},
    {46, {0x00, 0x05}, "return_path", kT},                       // [PATH-12] 5
    {48, {0x00, 0x00, 0x00, 0x21}, "streams[0].stream_id", kL},
    {52, {0x80, 0x00, 0x00, 0x02}, "streams[0].delivered_seq", kL},
    {56, {0x00, 0x00, 0x00, 0x22}, "streams[1].stream_id", kL},
    {60, {0x00, 0x00, 0x00, 0x00}, "streams[1].delivered_seq", kL},
};

AckPacket vector_ack() {
    AckPacket a;
    a.common.dst_conn_id = 0x0A0B0C0D;
    a.common.dst_token = 0x1112131415161718ULL;
    a.path_id = 0x0102;
    a.path_gen = 7;
    a.flags = ack_flag::kProbeReply;
    a.cum_psn = 0xFFFFFFFF;
    a.sack.set(1);
    a.sack.set(8);
    a.sack.set(255);
    a.ecn_ce_count = 3;
    a.ts_echo = 1'000'000'000;
    a.ack_delay_ns = 1000;
    a.rate_hint_mbps = 100'000;
    a.probe_psn = 9;
    a.stream_count = 2;
    a.streams[0] = {0x21, 0x80000002};
    a.streams[1] = {0x22, 0};
    return a;
}

// spec §3.3: the smallest ACK, no stream entries, 80 bytes.
const Annotated kAckNoStreamsVector = {
    {0, {0x02}, "version", kT},
    {1, {0x02}, "type", kT},
    {2, {0x00, 0x00}, "reserved", kT},
    {4, {0x00, 0x00, 0x00, 0x01}, "dst_conn_id", kT},
    {8, {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02}, "dst_token", kT},
    {16, {0x00, 0x00}, "path_id", kT},
    {18, {0x00}, "path_gen", kT},
    {19, {0x00}, "flags", kT},
    {20, {0x00, 0x00, 0x00, 0x64}, "cum_psn", kT},  // 100
    {24,
     {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,   // bits 0..63
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,   // bits 64..127
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,   // bits 128..191
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00},  // bits 192..255
     "sack",
     kT},
    {56, {0x00, 0x00, 0x00, 0x00}, "ecn_ce_count", kT},
    {60, {0x00, 0x00, 0x00, 0x05}, "ts_echo", kT},
    {64, {0x00, 0x00, 0x00, 0x00}, "ack_delay_ns", kT},
    {68, {0x00, 0x00, 0x00, 0x00}, "rate_hint_mbps", kT},  // [ACK-7] no hint
    {72, {0x00, 0x00, 0x00, 0x00}, "probe_psn", kT},       // [ACK-8] zero without PROBE_REPLY
    {76, {0x00, 0x00}, "stream_count", kT},
    {78, {0x00, 0x00}, "reserved", kT},
};

AckPacket no_streams_ack() {
    AckPacket a;
    a.common.dst_conn_id = 1;
    a.common.dst_token = 2;
    a.cum_psn = 100;
    a.ts_echo = 5;
    return a;
}

AckPacket short_vector_ack() {
    AckPacket a = vector_ack();
    a.flags = ack_flag::kProbeReply | ack_flag::kShort;
    a.sack = Sack{};
    a.return_path = 5;
    return a;
}

std::vector<std::byte> encode(const AckPacket& a) {
    std::vector<std::byte> b(encoded_size(a), kCanary);
    auto n = encode_ack(a, b);
    EXPECT_TRUE(n.ok());
    EXPECT_EQ(n.ok() ? *n : 0, b.size());
    return b;
}

// set_count overwrites the stream_count field of an encoded ACK.
void set_count(std::vector<std::byte>& b, uint16_t count) {
    b[76] = std::byte(count >> 8);
    b[77] = std::byte(count & 0xFF);
}

// [ACK-1] [ACK-2] [ACK-3] [ACK-4] [ACK-5] [ACK-6] [ACK-7] [ACK-8] [ACK-9]: annotated vector.
TEST(Ack, AnnotatedVector) {
    const AckPacket a = vector_ack();
    EXPECT_EQ(encoded_size(a), 96u);
    expect_bytes(kAckVector, encode(a));
    auto d = decode_ack(join(kAckVector));
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    EXPECT_EQ(*d, a);
}

// [WIRE-7] [ACK-1]: every prefix of the vector fails as annotated.
TEST(Ack, EveryPrefix) {
    check_every_prefix(kAckVector, [](auto b) { return decode_ack(b); });
}

// [ACK-1] [ACK-7] [ACK-8]: annotated vector of an ACK without stream entries.
TEST(Ack, NoStreamsAnnotatedVector) {
    const AckPacket a = no_streams_ack();
    EXPECT_EQ(encoded_size(a), kAckFixedSize);
    expect_bytes(kAckNoStreamsVector, encode(a));
    auto d = decode_ack(join(kAckNoStreamsVector));
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    EXPECT_EQ(*d, a);
}

// [WIRE-7]: every prefix of the 80-byte ACK is truncated.
TEST(Ack, NoStreamsEveryPrefix) {
    check_every_prefix(kAckNoStreamsVector, [](auto b) { return decode_ack(b); });
}

// [ACK-21] [ACK-1] [ACK-8]: the SHORT form's annotated vector; it decodes with an empty
// bitmap, and every field but the bitmap is the full form's.
TEST(Ack, ShortAnnotatedVector) {
    const AckPacket a = short_vector_ack();
    EXPECT_EQ(kAckShortFixedSize, 48u);
    EXPECT_EQ(encoded_size(a), 64u);
    expect_bytes(kShortAckVector, encode(a));
    auto d = decode_ack(join(kShortAckVector));
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    EXPECT_EQ(*d, a);
    EXPECT_TRUE(sack_empty(d->sack));
}

// [WIRE-7] [ACK-1]: a cut inside the SHORT form's 48-byte fixed part is truncated, one in
// its entries a bad length; under 20 bytes the flags are not there to say which form.
TEST(Ack, ShortEveryPrefix) {
    check_every_prefix(kShortAckVector, [](auto b) { return decode_ack(b); });
}

// [ACK-21]: SHORT says the bitmap is empty; encoding one with a bit set would lose that PSN.
TEST(Ack, ShortWithASackBitIsRefused) {
    for (uint32_t bit : {0u, 1u, 200u, 255u}) {
        AckPacket a = short_vector_ack();
        a.sack.set(bit);
        std::vector<std::byte> b(kAckFixedSize + 2 * kAckStreamEntrySize, kCanary);
        EXPECT_EQ(encode_ack(a, b).error(), Error::kInvalidArgument) << bit;
        expect_untouched(b);
    }
}

// [ACK-21] [WIRE-6]: where SHORT_ACK was not negotiated the bit means nothing: the ACK is
// read at its full length (so a SHORT datagram of 48 bytes is truncated) and the flag is
// not reported.
TEST(Ack, ShortFlagWithoutTheCapabilityIsReadAtFullLength) {
    const auto short_bytes = join(kShortAckVector);
    AckPacket a;
    EXPECT_EQ(parse_ack_body(std::span(short_bytes).first(48), a, false), Error::kTruncated);
    EXPECT_EQ(parse_ack_body(std::span(short_bytes), a, false), Error::kTruncated);  // 64 < 80
    // A full-length ACK with the bit set reads as the full form, the bit cleared.
    auto full = join(kAckVector);
    full[19] = std::byte{0x05};
    ASSERT_EQ(parse_ack_body(full, a, false), Error::kOk);
    EXPECT_EQ(a.flags, ack_flag::kProbeReply);
    EXPECT_EQ(a.sack, vector_ack().sack);
    EXPECT_EQ(a.stream_count, 2u);
    // The same bytes on a connection that negotiated it read as SHORT: 96 bytes then
    // disagree with the count at the moved offset.
    EXPECT_NE(parse_ack_body(full, a, true), Error::kOk);
    // coalesced_ack_size follows the same rule.
    auto followed = join(kShortAckVector);
    followed[19] = std::byte{0x07};  // PROBE_REPLY | FOLLOWED | SHORT
    followed.resize(followed.size() + 80, std::byte{0});
    EXPECT_EQ(coalesced_ack_size(followed, true), 64u);
    // Read at full length, its count is at byte 76, here one of the zeros after the ACK.
    EXPECT_EQ(coalesced_ack_size(followed, false), kAckFixedSize);
}

// [ACK-2]: bit i covers PSN cum_psn + 1 + i and lives in byte i / 8 under mask 0x80 >> (i % 8),
// at datagram offset 24 + i / 8.
TEST(Ack, SackBitNumbering) {
    EXPECT_EQ(kSackBits, 256u);
    for (uint32_t i = 0; i < kSackBits; ++i) {
        SCOPED_TRACE(::testing::Message() << "bit " << i);
        AckPacket a;
        a.sack.set(i);
        for (uint32_t j = 0; j < kSackBits / 8; ++j)
            ASSERT_EQ(a.sack.bytes[j], j == i / 8 ? (0x80u >> (i % 8)) : 0u);
        for (uint32_t j = 0; j < kSackBits; ++j) ASSERT_EQ(a.sack.test(j), j == i);
        const auto b = encode(a);
        for (size_t off = 24; off < 56; ++off)
            ASSERT_EQ(static_cast<unsigned>(b[off]), off == 24 + i / 8 ? (0x80u >> (i % 8)) : 0u);
        auto d = decode_ack(b);
        ASSERT_TRUE(d.ok());
        ASSERT_TRUE(d->sack.test(i));
    }
    Sack s;
    s.set(kSackBits);  // out of range: ignored
    EXPECT_EQ(s, Sack{});
    s.bytes.fill(0xFF);
    EXPECT_FALSE(s.test(kSackBits));
}

// random_ack returns an ACK with 0..32 entries; entries past stream_count stay zero, as
// decode_ack leaves them.
AckPacket random_ack(Rng& rng) {
    AckPacket a;
    a.common.dst_conn_id = rng.next_u32();
    a.common.dst_token = rng.next_u64();
    a.path_id = static_cast<uint16_t>(rng.next_u32());
    a.path_gen = static_cast<uint8_t>(rng.next_u32());
    a.flags = static_cast<uint8_t>(rng.next_u32() & ~uint32_t{ack_flag::kShort});
    a.cum_psn = rng.next_u32();
    for (auto& b : a.sack.bytes) b = static_cast<uint8_t>(rng.uniform(4) == 0 ? 0 : rng.next_u32());
    if (rng.uniform(3) == 0) {  // [ACK-21]: a third are SHORT, their bitmap empty
        a.flags |= ack_flag::kShort;
        a.sack = Sack{};
    }
    a.ecn_ce_count = rng.next_u32();
    a.ts_echo = rng.next_u32();
    a.ack_delay_ns = rng.next_u32();
    a.rate_hint_mbps = rng.uniform(4) == 0 ? 0 : rng.next_u32();
    a.probe_psn = rng.next_u32();
    switch (rng.uniform(4)) {
        case 0:
            a.stream_count = 0;
            break;
        case 1:
            a.stream_count = kMaxAckStreams;
            break;
        default:
            a.stream_count = static_cast<uint16_t>(rng.uniform_range(1, kMaxAckStreams));
    }
    for (uint16_t i = 0; i < a.stream_count; ++i) a.streams[i] = {rng.next_u32(), rng.next_u32()};
    return a;
}

// [ACK-1] [ACK-2] [ACK-5]: random ACKs round-trip.
TEST(Ack, RoundTripProperty) {
    for (uint64_t seed : testing::property_seeds(2000)) {
        SCOPED_TRACE(::testing::Message() << "seed=" << seed);
        Rng rng(seed);
        const AckPacket a = random_ack(rng);
        const auto b = encode(a);
        ASSERT_EQ(b.size(), ack_fixed_size(a.flags) + kAckStreamEntrySize * a.stream_count);
        auto d = decode_ack(b);
        ASSERT_TRUE(d.ok()) << to_string(d.error());
        ASSERT_EQ(*d, a);
    }
}

// [ACK-5]: at most 32 entries; 32 is accepted, any larger count is kBadLength even when
// the datagram really holds that many entries.
TEST(Ack, StreamCountOverCapIsBadLength) {
    EXPECT_EQ(kMaxAckStreams, 32);
    AckPacket a = no_streams_ack();
    a.stream_count = kMaxAckStreams;
    for (uint16_t i = 0; i < a.stream_count; ++i) a.streams[i] = {i, i * 2u};
    auto b = encode(a);
    ASSERT_TRUE(decode_ack(b).ok());
    b.resize(b.size() + kAckStreamEntrySize);
    set_count(b, kMaxAckStreams + 1);
    EXPECT_EQ(decode_ack(b).error(), Error::kBadLength);
    for (uint16_t count : {uint16_t{33}, uint16_t{0x100}, uint16_t{0xFFFF}}) {
        auto c = encode(no_streams_ack());
        set_count(c, count);
        EXPECT_EQ(decode_ack(c).error(), Error::kBadLength) << count;
    }
}

// [ACK-1] [ACK-5]: stream_count must match the datagram length exactly, in both directions.
TEST(Ack, StreamCountNotMatchingLengthIsBadLength) {
    auto b = join(kAckVector);  // two entries
    set_count(b, 3);
    EXPECT_EQ(decode_ack(b).error(), Error::kBadLength);
    set_count(b, 1);
    EXPECT_EQ(decode_ack(b).error(), Error::kBadLength);
    set_count(b, 0);
    EXPECT_EQ(decode_ack(b).error(), Error::kBadLength);
    set_count(b, 2);
    EXPECT_TRUE(decode_ack(b).ok());
    for (size_t extra = 1; extra <= 2 * kAckStreamEntrySize; ++extra) {
        auto t = testing::with_trailing(kAckVector, extra);
        EXPECT_EQ(decode_ack(t).error(), Error::kBadLength) << extra << " trailing bytes";
        auto u = testing::with_trailing(kAckNoStreamsVector, extra);
        EXPECT_EQ(decode_ack(u).error(), Error::kBadLength) << extra << " trailing bytes";
    }
}

// [WIRE-6] [ACK-8]: reserved bytes are ignored; flag bits this version does not define are
// carried, not rejected.
TEST(Ack, ReservedIsIgnoredOnReceive) {
    auto b = join(kAckVector);
    for (size_t off : {2u, 3u}) b[off] = std::byte{0xFF};
    auto d = decode_ack(b);
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    EXPECT_EQ(*d, vector_ack());
    // [PATH-12]: bytes 78-79 are return_path now, decoded whatever their value (the user
    // checks it against num_paths).
    b[78] = std::byte{0x01};
    b[79] = std::byte{0x02};
    d = decode_ack(b);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->return_path, 0x0102);
    // Every flag bit but SHORT ([ACK-21], which changes the layout) leaves it as it is.
    b[19] = std::byte{0xFB};
    d = decode_ack(b);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->flags, 0xFB);
    EXPECT_EQ(ack_flag::kProbeReply, 0x01);
}

// [WIRE-3] [WIRE-4]: version and type are checked through decode_ack too.
TEST(Ack, BadVersionAndType) {
    auto b = join(kAckVector);
    b[0] = std::byte{0x01};
    EXPECT_EQ(decode_ack(b).error(), Error::kBadVersion);
    b[0] = std::byte{0x02};
    b[1] = std::byte{0x01};  // DATA
    EXPECT_EQ(decode_ack(b).error(), Error::kBadType);
    b[1] = std::byte{0x00};
    EXPECT_EQ(decode_ack(b).error(), Error::kBadType);
}

// §3.3: encode_ack into a too-small buffer fails and writes nothing.
TEST(Ack, EncoderBufferTooSmallWritesNothing) {
    for (const AckPacket& a : {vector_ack(), no_streams_ack()}) {
        for (size_t size = 0; size < encoded_size(a); ++size) {
            SCOPED_TRACE(::testing::Message() << "buffer of " << size << " bytes");
            std::vector<std::byte> buf(size, kCanary);
            EXPECT_EQ(encode_ack(a, buf).error(), Error::kBufferTooSmall);
            expect_untouched(buf);
        }
    }
}

// [ACK-5]: encode_ack refuses more than 32 entries and writes nothing.
TEST(Ack, EncoderRejectsTooManyStreams) {
    AckPacket a = vector_ack();
    a.stream_count = kMaxAckStreams + 1;
    std::vector<std::byte> buf(4096, kCanary);
    EXPECT_EQ(encode_ack(a, buf).error(), Error::kInvalidArgument);
    expect_untouched(buf);
}

// §3.3: the encoder writes exactly encoded_size() bytes.
TEST(Ack, EncoderWritesExactlyItsSize) {
    const AckPacket a = vector_ack();
    std::vector<std::byte> buf(encoded_size(a) + 8, kCanary);
    auto n = encode_ack(a, buf);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, encoded_size(a));
    expect_untouched(std::span(buf).subspan(*n));
}

}  // namespace
}  // namespace mroce::wire
