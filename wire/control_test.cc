// Tests for NACK, HELLO / HELLO_ACK, PROBE and CLOSE (docs/spec.md §3.4–§3.7).
#include "wire/control.h"

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

// [WIRE-5]: a fixed-size packet followed by any extra bytes is kBadLength.
template <typename Decode>
void expect_trailing_rejected(const Annotated& v, Decode decode) {
    for (size_t extra = 1; extra <= 64; ++extra) {
        auto r = decode(testing::with_trailing(v, extra));
        ASSERT_FALSE(r.ok()) << extra << " trailing bytes";
        EXPECT_EQ(r.error(), Error::kBadLength) << extra << " trailing bytes";
    }
}

// Encoders write all or nothing: every buffer shorter than `size` is kBufferTooSmall and
// left untouched.
template <typename Encode>
void expect_small_buffer_rejected(size_t size, Encode encode) {
    for (size_t n = 0; n < size; ++n) {
        SCOPED_TRACE(::testing::Message() << "buffer of " << n << " bytes");
        std::vector<std::byte> buf(n, kCanary);
        EXPECT_EQ(encode(std::span<std::byte>(buf)).error(), Error::kBufferTooSmall);
        expect_untouched(buf);
    }
    std::vector<std::byte> buf(size + 8, kCanary);
    auto r = encode(std::span<std::byte>(buf));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, size);
    expect_untouched(std::span(buf).subspan(size));
}

CommonHeader random_common(Rng& rng, PacketType type) {
    CommonHeader h;
    h.type = type;
    h.dst_conn_id = rng.next_u32();
    h.dst_token = rng.next_u64();
    return h;
}

// ---------------------------------------------------------------------------------------
// NACK, spec §3.4

const Annotated kNackVector = {
    // {offset, expected bytes, field, error if the datagram ends inside or before it}
    {0, {0x02}, "version", kT},         // [WIRE-1]
    {1, {0x03}, "type", kT},            // [WIRE-2] NACK
    {2, {0x00, 0x00}, "reserved", kT},  // [WIRE-6]
    {4, {0x0A, 0x0B, 0x0C, 0x0D}, "dst_conn_id", kT},
    {8, {0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}, "dst_token", kT},
    {16, {0x01}, "reason", kT},                       // [NACK-1] RECEIVER_NOT_READY
    {17, {0x00}, "reserved", kT},                     // [WIRE-6]
    {18, {0x00, 0x03}, "path_id", kT},                // [NACK-3] 3
    {20, {0x02}, "path_gen", kT},                     // [NACK-3] 2
    {21, {0x00, 0x00, 0x00}, "reserved", kT},         // [WIRE-6]
    {24, {0x00, 0x00, 0x10, 0x00}, "path_psn", kT},   // [NACK-3] 4096
    {28, {0x00, 0x00, 0x00, 0x21}, "stream_id", kT},  // [NACK-3] 33
    {32, {0x00, 0x00, 0x00, 0x07}, "msg_seq", kT},    // [NACK-3] 7
    {36, {0x00, 0x00, 0x00, 0x64}, "detail", kT},     // [NACK-4] 100 us
};

NackPacket vector_nack() {
    NackPacket p;
    p.common.dst_conn_id = 0x0A0B0C0D;
    p.common.dst_token = 0x1112131415161718ULL;
    p.reason = NackReason::kReceiverNotReady;
    p.path_id = 3;
    p.path_gen = 2;
    p.path_psn = 4096;
    p.stream_id = 0x21;
    p.msg_seq = 7;
    p.detail = 100;
    return p;
}

std::vector<std::byte> encode(const NackPacket& p) {
    std::vector<std::byte> b(kNackSize);
    EXPECT_TRUE(encode_nack(p, b).ok());
    return b;
}

// [NACK-1] [NACK-3] [NACK-4] [WIRE-6]: annotated vector.
TEST(Nack, AnnotatedVector) {
    EXPECT_EQ(kNackSize, 40u);
    expect_bytes(kNackVector, encode(vector_nack()));
    auto d = decode_nack(join(kNackVector));
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    EXPECT_EQ(*d, vector_nack());
}

// [WIRE-5] [WIRE-7]: every prefix is truncated.
TEST(Nack, EveryPrefix) {
    check_every_prefix(kNackVector, [](auto b) { return decode_nack(b); });
}

// [WIRE-5]: trailing bytes are kBadLength.
TEST(Nack, TrailingBytesAreBadLength) {
    expect_trailing_rejected(kNackVector, [](auto b) { return decode_nack(b); });
}

// [NACK-1] [NACK-2]: reasons 1..5 decode; every other value is kBadType.
TEST(Nack, ReasonValues) {
    EXPECT_EQ(static_cast<int>(NackReason::kReceiverNotReady), 1);
    EXPECT_EQ(static_cast<int>(NackReason::kRemoteAccess), 2);
    EXPECT_EQ(static_cast<int>(NackReason::kInvalidRequest), 3);
    EXPECT_EQ(static_cast<int>(NackReason::kOutOfWindow), 4);
    EXPECT_EQ(static_cast<int>(NackReason::kNoResources), 5);
    auto b = join(kNackVector);
    for (int reason = 0; reason < 256; ++reason) {
        b[16] = std::byte(reason);
        auto d = decode_nack(b);
        if (reason >= 1 && reason <= 5) {
            ASSERT_TRUE(d.ok()) << reason;
            EXPECT_EQ(static_cast<int>(d->reason), reason);
        } else {
            EXPECT_EQ(d.error(), Error::kBadType) << reason;
        }
    }
}

// [WIRE-9] [WIRE-5] [NACK-2]: the length is checked before the reason.
TEST(Nack, LengthIsCheckedBeforeReason) {
    auto b = testing::with_trailing(kNackVector, 1);
    b[16] = std::byte{0x00};
    EXPECT_EQ(decode_nack(b).error(), Error::kBadLength);
    b.resize(kNackSize - 1);
    EXPECT_EQ(decode_nack(b).error(), Error::kTruncated);
}

// [WIRE-6]: reserved bytes 2, 3, 17 and 21..23 are ignored on receive.
TEST(Nack, ReservedIsIgnoredOnReceive) {
    auto b = join(kNackVector);
    for (size_t off : {2u, 3u, 17u, 21u, 22u, 23u}) b[off] = std::byte{0xFF};
    auto d = decode_nack(b);
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    EXPECT_EQ(*d, vector_nack());
}

// §3.4: encode_nack is all or nothing.
TEST(Nack, EncoderBufferTooSmallWritesNothing) {
    expect_small_buffer_rejected(
        kNackSize, [](std::span<std::byte> b) { return encode_nack(vector_nack(), b); });
}

// [NACK-1]: random NACKs round-trip.
TEST(Nack, RoundTripProperty) {
    for (uint64_t seed : testing::property_seeds(2000)) {
        SCOPED_TRACE(::testing::Message() << "seed=" << seed);
        Rng rng(seed);
        NackPacket p;
        p.common = random_common(rng, PacketType::kNack);
        p.reason = static_cast<NackReason>(rng.uniform_range(1, 5));
        p.path_id = static_cast<uint16_t>(rng.next_u32());
        p.path_gen = static_cast<uint8_t>(rng.next_u32());
        p.path_psn = rng.next_u32();
        p.stream_id = rng.next_u32();
        p.msg_seq = rng.next_u32();
        p.detail = rng.next_u32();
        auto d = decode_nack(encode(p));
        ASSERT_TRUE(d.ok()) << to_string(d.error());
        ASSERT_EQ(*d, p);
    }
}

// ---------------------------------------------------------------------------------------
// HELLO and HELLO_ACK, spec §3.5

const Annotated kHelloVector = {
    // {offset, expected bytes, field, error if the datagram ends inside or before it}
    {0, {0x02}, "version", kT},                                              // [WIRE-1]
    {1, {0x04}, "type", kT},                                                 // [WIRE-2] HELLO
    {2, {0x00}, "hello_flags", kT},                                          // [CC-20] not SENDING
    {3, {0x07}, "hello_seq", kT},                                            // [CONN-32] 7th HELLO
    {4, {0x00, 0x00, 0x00, 0x00}, "dst_conn_id", kT},                        // [CONN-2] 0 in HELLO
    {8, {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, "dst_token", kT},  // [CONN-2] 0
    {16, {0x00, 0x00, 0x00, 0x2A}, "src_conn_id", kT},                       // [CONN-2] 42
    {20, {0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7, 0xA8}, "src_token", kT},
    {28, {0x12, 0x34, 0x56, 0x78}, "isn", kT},           // [CONN-2]
    {32, {0x00, 0x00, 0x10, 0x00}, "msg_isn", kT},       // [CONN-2] 4096
    {36, {0x12, 0xBD}, "endpoint_port", kT},             // [CONN-2] 4797
    {38, {0x00, 0x08}, "num_paths", kT},                 // [CONN-3] 8
    {40, {0x00, 0x00, 0x10, 0x00}, "max_payload", kT},   // [CONN-3] 4096
    {44, {0x00, 0x00, 0x00, 0x00}, "capabilities", kT},  // [CONN-2] 0 in v2
    {48, {0xC0, 0xC1, 0xC2, 0xC3, 0xC4, 0xC5, 0xC6, 0xC7, 0xC8, 0xC9, 0xCA, 0xCB, 0xCC, 0xCD,
          0xCE, 0xCF}, "cookie", kT},                    // [CONN-25] echoed from a RETRY
};

HelloPacket vector_hello() {
    HelloPacket p;
    p.common.type = PacketType::kHello;
    p.src_conn_id = 42;
    p.src_token = 0xA1A2A3A4A5A6A7A8ULL;
    p.isn = 0x12345678;
    p.msg_isn = 4096;
    p.endpoint_port = 4797;
    p.num_paths = 8;
    p.max_payload = 4096;
    for (int i = 0; i < 16; ++i) p.cookie[i] = static_cast<uint8_t>(0xC0 + i);
    p.hello_seq = 7;
    return p;
}

// The answer to kHelloVector: addressed with the initiator's id and token, at the caps.
const Annotated kHelloAckVector = {
    {0, {0x02}, "version", kT},
    {1, {0x05}, "type", kT},  // [WIRE-2] HELLO_ACK
    {2, {0x00}, "reserved", kT},
    {3, {0x07}, "hello_echo", kT},  // [CONN-32] answers the HELLO numbered 7
    {4, {0x00, 0x00, 0x00, 0x2A}, "dst_conn_id", kT},  // [CONN-2] initiator's 42
    {8, {0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7, 0xA8}, "dst_token", kT},  // [CONN-2]
    {16, {0x00, 0x00, 0x00, 0x63}, "src_conn_id", kT},                       // 99
    {20, {0xB1, 0xB2, 0xB3, 0xB4, 0xB5, 0xB6, 0xB7, 0xB8}, "src_token", kT},
    {28, {0xFF, 0xFF, 0xFF, 0x00}, "isn", kT},
    {32, {0x00, 0x00, 0x00, 0x01}, "msg_isn", kT},
    {36, {0xC0, 0x00}, "endpoint_port", kT},            // 49152
    {38, {0x01, 0x00}, "num_paths", kT},                // [CONN-3] 256, the cap
    {40, {0x00, 0x00, 0x23, 0x28}, "max_payload", kT},  // [CONN-3] 9000, the cap
    {44, {0x00, 0x00, 0x00, 0x00}, "capabilities", kT},
    {48, {0x00, 0x0C, 0x35, 0x00}, "grant_mbps", kT},   // [CC-20] 800000 Mbit/s
    {52, std::vector<uint8_t>(12, 0x00), "cookie", kT},  // [CONN-2] rest 0 in HELLO_ACK
};

HelloPacket vector_hello_ack() {
    HelloPacket p;
    p.common.type = PacketType::kHelloAck;
    p.common.dst_conn_id = 42;
    p.common.dst_token = 0xA1A2A3A4A5A6A7A8ULL;
    p.src_conn_id = 99;
    p.src_token = 0xB1B2B3B4B5B6B7B8ULL;
    p.isn = 0xFFFFFF00;
    p.msg_isn = 1;
    p.endpoint_port = 49152;
    p.num_paths = 256;
    p.max_payload = 9000;
    p.grant_mbps = 800000;
    p.hello_echo = 7;
    return p;
}

std::vector<std::byte> encode(const HelloPacket& p) {
    std::vector<std::byte> b(kHelloSize);
    EXPECT_TRUE(encode_hello(p, b).ok());
    return b;
}

// set_u16 / set_u32 overwrite a big-endian field of an encoded packet.
void set_u16(std::vector<std::byte>& b, size_t off, uint16_t v) {
    b[off] = std::byte(v >> 8);
    b[off + 1] = std::byte(v & 0xFF);
}
void set_u32(std::vector<std::byte>& b, size_t off, uint32_t v) {
    for (size_t i = 0; i < 4; ++i) b[off + i] = std::byte((v >> (24 - 8 * i)) & 0xFF);
}

// [CONN-2] [CONN-3]: annotated HELLO.
TEST(Hello, AnnotatedVector) {
    EXPECT_EQ(kHelloSize, 64u);
    expect_bytes(kHelloVector, encode(vector_hello()));
    auto d = decode_hello(join(kHelloVector));
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    EXPECT_EQ(*d, vector_hello());
}

// [CONN-2] [CONN-3]: annotated HELLO_ACK; decode_hello keeps the type.
TEST(Hello, HelloAckAnnotatedVector) {
    expect_bytes(kHelloAckVector, encode(vector_hello_ack()));
    auto d = decode_hello(join(kHelloAckVector));
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    EXPECT_EQ(*d, vector_hello_ack());
    EXPECT_EQ(d->common.type, PacketType::kHelloAck);
}

// [CC-20]: the grant is a HELLO_ACK's alone. A HELLO's cookie bytes are never read as a
// grant, and a HELLO encodes its cookie whatever grant_mbps holds.
TEST(Hello, GrantOnlyInHelloAck) {
    HelloPacket h = vector_hello();
    h.grant_mbps = 12345;
    std::vector<std::byte> b = encode(h);
    expect_bytes(kHelloVector, b);
    auto d = decode_hello(b);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->grant_mbps, 0u);
    EXPECT_EQ(d->cookie, vector_hello().cookie);
}

// [CC-20] [CONN-31]: SENDING and DROPPED are bits 0x01 and 0x02 of byte 2; a HELLO_ACK
// carries DROPPED only, and the other bits of the byte are ignored.
TEST(Hello, SendingAndDroppedFlags) {
    struct Case {
        bool sending, dropped;
        uint8_t byte2;
    };
    for (const Case c : {Case{true, false, 0x01}, Case{false, true, 0x02}, Case{true, true, 0x03}}) {
        HelloPacket h = vector_hello();
        h.sending = c.sending;
        h.dropped = c.dropped;
        std::vector<std::byte> b = encode(h);
        EXPECT_EQ(b[2], std::byte{c.byte2});
        auto d = decode_hello(b);
        ASSERT_TRUE(d.ok());
        EXPECT_EQ(d->sending, c.sending);
        EXPECT_EQ(d->dropped, c.dropped);
        EXPECT_EQ(d->hello_seq, 7u);
    }
    std::vector<std::byte> b = encode(vector_hello());
    b[2] = std::byte{0xFC};
    auto d = decode_hello(b);
    ASSERT_TRUE(d.ok());
    EXPECT_FALSE(d->sending);
    EXPECT_FALSE(d->dropped);
    HelloPacket a = vector_hello_ack();
    a.sending = true;
    std::vector<std::byte> ab = encode(a);
    EXPECT_EQ(ab[2], std::byte{0});
    a.dropped = true;
    ab = encode(a);
    EXPECT_EQ(ab[2], std::byte{0x02});
    ab[2] = std::byte{0xFF};
    auto da = decode_hello(ab);
    ASSERT_TRUE(da.ok());
    EXPECT_FALSE(da->sending);
    EXPECT_TRUE(da->dropped);
}

// [CONN-32] [CC-20]: byte 3 is a HELLO's number and a HELLO_ACK's echo of one; each reads as 0 in
// the other type, so neither is ever taken for the other.
TEST(Hello, SeqAndEchoShareByteThree) {
    struct Form {
        HelloPacket packet;
        uint8_t HelloPacket::*own;    // the field byte 3 is in this type
        uint8_t HelloPacket::*other;  // the other type's field: not encoded
    };
    for (const Form& form : {Form{vector_hello(), &HelloPacket::hello_seq, &HelloPacket::hello_echo},
                             Form{vector_hello_ack(), &HelloPacket::hello_echo, &HelloPacket::hello_seq}}) {
        for (int v : {0, 1, 200, 255}) {
            HelloPacket h = form.packet;
            h.*form.own = static_cast<uint8_t>(v);
            h.*form.other = 9;
            std::vector<std::byte> b = encode(h);
            EXPECT_EQ(b[3], std::byte(v));
            auto d = decode_hello(b);
            ASSERT_TRUE(d.ok());
            EXPECT_EQ((*d).*form.own, v);
            EXPECT_EQ((*d).*form.other, 0u);
        }
    }
}

// [CC-20] [CONN-2]: a HELLO_ACK's cookie bytes after the grant are ignored on receive (a
// hostile or older peer's garbage there is not a cookie), and the grant round-trips at
// every width, 0 (no grant) and 2^32 - 1 included.
TEST(Hello, HelloAckGrantRoundTripsAndRestIsIgnored) {
    for (uint32_t g : {0u, 1u, 800000u, 0xFFFFFFFFu}) {
        HelloPacket p = vector_hello_ack();
        p.grant_mbps = g;
        p.cookie[5] = 0x77;  // not encoded in a HELLO_ACK
        std::vector<std::byte> b = encode(p);
        EXPECT_EQ(b[53], std::byte{0});
        auto d = decode_hello(b);
        ASSERT_TRUE(d.ok());
        EXPECT_EQ(d->grant_mbps, g);
        EXPECT_EQ(d->cookie, Cookie{});
    }
    std::vector<std::byte> b = join(kHelloAckVector);
    for (size_t i = 52; i < kHelloSize; ++i) b[i] = std::byte{0xEE};
    auto d = decode_hello(b);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->grant_mbps, 800000u);
    EXPECT_EQ(d->cookie, Cookie{});
}

// [WIRE-5] [WIRE-7]: every prefix of both is truncated.
TEST(Hello, EveryPrefix) {
    check_every_prefix(kHelloVector, [](auto b) { return decode_hello(b); });
    check_every_prefix(kHelloAckVector, [](auto b) { return decode_hello(b); });
}

// [WIRE-5]: trailing bytes are kBadLength.
TEST(Hello, TrailingBytesAreBadLength) {
    expect_trailing_rejected(kHelloVector, [](auto b) { return decode_hello(b); });
    expect_trailing_rejected(kHelloAckVector, [](auto b) { return decode_hello(b); });
}

// [CONN-3]: num_paths must be 1..256.
TEST(Hello, NumPathsOutOfRangeIsBadLength) {
    EXPECT_EQ(kMaxPaths, 256);
    auto b = join(kHelloVector);
    for (uint16_t n : {uint16_t{1}, uint16_t{2}, uint16_t{255}, uint16_t{256}}) {
        set_u16(b, 38, n);
        auto d = decode_hello(b);
        ASSERT_TRUE(d.ok()) << n;
        EXPECT_EQ(d->num_paths, n);
    }
    for (uint16_t n : {uint16_t{0}, uint16_t{257}, uint16_t{0x1000}, uint16_t{0xFFFF}}) {
        set_u16(b, 38, n);
        EXPECT_EQ(decode_hello(b).error(), Error::kBadLength) << n;
    }
}

// [CONN-3] [UDP-3]: max_payload must be 256..9000.
TEST(Hello, MaxPayloadOutOfRangeIsBadLength) {
    auto b = join(kHelloVector);
    for (uint32_t n : {256u, 257u, 1500u, 4096u, 8999u, 9000u}) {
        set_u32(b, 40, n);
        auto d = decode_hello(b);
        ASSERT_TRUE(d.ok()) << n;
        EXPECT_EQ(d->max_payload, n);
    }
    for (uint32_t n : {0u, 1u, 255u, 9001u, 65535u, 0xFFFFFFFFu}) {
        set_u32(b, 40, n);
        EXPECT_EQ(decode_hello(b).error(), Error::kBadLength) << n;
    }
}

// [WIRE-9] [WIRE-7] [CONN-3]: the caps are checked after the length; a short HELLO stays
// truncated.
TEST(Hello, LengthIsCheckedBeforeCaps) {
    auto b = join(kHelloVector);
    set_u16(b, 38, 0);
    b.pop_back();
    EXPECT_EQ(decode_hello(b).error(), Error::kTruncated);
}

// [CONN-2] [WIRE-6]: capability bits this version does not know are carried, not
// rejected; reserved bytes are ignored.
TEST(Hello, UnknownCapabilitiesAndReservedAreIgnored) {
    auto b = join(kHelloVector);
    set_u32(b, 44, 0xFFFFFFFF);
    b[2] = std::byte{0xFF};
    auto d = decode_hello(b);
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    HelloPacket want = vector_hello();
    want.capabilities = 0xFFFFFFFF;
    want.sending = true;  // [CC-20]: byte 2's 0x01 is SENDING in a HELLO,
    want.dropped = true;  // [CONN-31] 0x02 DROPPED; its other bits are ignored
    EXPECT_EQ(*d, want);
}

// [WIRE-2]: encode_hello only encodes HELLO or HELLO_ACK and then writes nothing.
TEST(Hello, EncoderRejectsOtherTypes) {
    for (PacketType t : {PacketType::kData, PacketType::kAck, PacketType::kNack, PacketType::kProbe,
                         PacketType::kClose, PacketType::kRetry}) {
        HelloPacket p = vector_hello();
        p.common.type = t;
        std::vector<std::byte> buf(kHelloSize, kCanary);
        EXPECT_EQ(encode_hello(p, buf).error(), Error::kInvalidArgument);
        expect_untouched(buf);
    }
}

// §3.5: encode_hello is all or nothing.
TEST(Hello, EncoderBufferTooSmallWritesNothing) {
    expect_small_buffer_rejected(
        kHelloSize, [](std::span<std::byte> b) { return encode_hello(vector_hello(), b); });
    expect_small_buffer_rejected(
        kHelloSize, [](std::span<std::byte> b) { return encode_hello(vector_hello_ack(), b); });
}

// [CONN-2] [CONN-3]: random HELLO and HELLO_ACK within the caps round-trip.
TEST(Hello, RoundTripProperty) {
    for (uint64_t seed : testing::property_seeds(2000)) {
        SCOPED_TRACE(::testing::Message() << "seed=" << seed);
        Rng rng(seed);
        HelloPacket p;
        p.common = random_common(rng, rng.uniform(2) ? PacketType::kHello : PacketType::kHelloAck);
        p.src_conn_id = rng.next_u32();
        p.src_token = rng.next_u64();
        p.isn = rng.next_u32();
        p.msg_isn = rng.next_u32();
        p.endpoint_port = static_cast<uint16_t>(rng.next_u32());
        p.num_paths = static_cast<uint16_t>(rng.uniform_range(1, kMaxPaths));
        p.max_payload = static_cast<uint32_t>(rng.uniform_range(kMinMaxPayload, kMaxMaxPayload));
        p.capabilities = rng.uniform(2) ? 0 : rng.next_u32();
        if (p.common.type == PacketType::kHello) {
            if (rng.uniform(2))
                for (uint8_t& c : p.cookie) c = static_cast<uint8_t>(rng.next_u32());
            p.sending = rng.uniform(2) != 0;  // [CC-20]
            p.dropped = rng.uniform(2) != 0;  // [CONN-31]
            p.hello_seq = static_cast<uint8_t>(rng.next_u32());
        } else {
            p.grant_mbps = rng.uniform(2) ? 0 : rng.next_u32();  // [CC-20]: its cookie is the grant
            p.dropped = rng.uniform(2) != 0;                      // [CONN-31]
            p.hello_echo = static_cast<uint8_t>(rng.next_u32());
        }
        auto d = decode_hello(encode(p));
        ASSERT_TRUE(d.ok()) << to_string(d.error());
        ASSERT_EQ(*d, p);
    }
}

// [VER-1]: version 1's HELLO is version 2's first 48 bytes with version 1 and no cookie;
// decode_hello_v1 reads it (to refuse its sender clearly) and nothing else.
TEST(HelloV1, IsTheVersion2PrefixWithVersion1) {
    HelloPacket p = vector_hello();
    std::vector<std::byte> v1(kHelloV1Size);
    ASSERT_EQ(*encode_hello_v1(p, v1), kHelloV1Size);
    auto v2 = join(kHelloVector);
    EXPECT_EQ(v1[0], std::byte{0x01});
    EXPECT_EQ(v1[kHelloSeqOffset], std::byte{0});  // version 1 has no hello_seq
    v2[kHelloSeqOffset] = std::byte{0};
    EXPECT_TRUE(std::equal(v1.begin() + 1, v1.end(), v2.begin() + 1));
    auto d = decode_hello_v1(v1);
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    HelloPacket want = p;
    want.common.version = 1;
    want.cookie = {};
    want.hello_seq = 0;
    EXPECT_EQ(*d, want);
    // A version-2 decoder refuses it, and the version-1 decoder refuses version 2.
    EXPECT_EQ(decode_hello(v1).error(), Error::kBadVersion);
    EXPECT_EQ(decode_hello_v1(v2).error(), Error::kBadVersion);
    // Exactly 48 bytes.
    v1.push_back(std::byte{0});
    EXPECT_EQ(decode_hello_v1(v1).error(), Error::kBadLength);
    v1.resize(kHelloV1Size - 1);
    EXPECT_EQ(decode_hello_v1(v1).error(), Error::kTruncated);
}

// ---------------------------------------------------------------------------------------
// RETRY, spec §3.8

const Annotated kRetryVector = {
    {0, {0x02}, "version", kT},
    {1, {0x08}, "type", kT},  // [WIRE-2] RETRY
    {2, {0x00, 0x00}, "reserved", kT},
    {4, {0x00, 0x00, 0x00, 0x2A}, "dst_conn_id", kT},  // [CONN-25] the HELLO's src_conn_id
    {8, {0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7, 0xA8}, "dst_token", kT},  // and src_token
    {16, {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E,
          0x0F, 0x10}, "cookie", kT},
};

RetryPacket vector_retry() {
    RetryPacket p;
    p.common.dst_conn_id = 42;
    p.common.dst_token = 0xA1A2A3A4A5A6A7A8ULL;
    for (int i = 0; i < 16; ++i) p.cookie[i] = static_cast<uint8_t>(i + 1);
    return p;
}

TEST(Retry, AnnotatedVector) {
    std::vector<std::byte> b(kRetrySize);
    ASSERT_EQ(*encode_retry(vector_retry(), b), kRetrySize);
    expect_bytes(kRetryVector, b);
    auto d = decode_retry(b);
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    EXPECT_EQ(*d, vector_retry());
}

TEST(Retry, EveryPrefixAndTrailingBytes) {
    check_every_prefix(kRetryVector, [](std::span<const std::byte> b) { return decode_retry(b); });
    auto b = join(kRetryVector);
    b.push_back(std::byte{0});
    EXPECT_EQ(decode_retry(b).error(), Error::kBadLength);
}

// [CONN-25]: a RETRY is no larger than the HELLO it answers, nor is a HELLO_ACK, so
// neither amplifies what a forger sends.
TEST(Retry, NoReplyIsLargerThanTheHello) {
    static_assert(kRetrySize <= kHelloSize);
    static_assert(kCloseSize <= kHelloV1Size);  // [VER-1]'s refusal of a version-1 HELLO
    SUCCEED();
}

// ---------------------------------------------------------------------------------------
// PROBE, spec §3.6

const Annotated kProbeVector = {
    // {offset, expected bytes, field, error if the datagram ends inside or before it}
    {0, {0x02}, "version", kT},
    {1, {0x06}, "type", kT},  // [WIRE-2] PROBE
    {2, {0x00, 0x00}, "reserved", kT},
    {4, {0x0A, 0x0B, 0x0C, 0x0D}, "dst_conn_id", kT},
    {8, {0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}, "dst_token", kT},
    {16, {0x00, 0x05}, "path_id", kT},                // [PROBE-1] 5
    {18, {0xFF}, "path_gen", kT},                     // [PROBE-1] 255
    {19, {0x00}, "reserved", kT},                     // [WIRE-6]
    {20, {0x00, 0x00, 0x00, 0x00}, "next_psn", kT},   // [PROBE-1] 0 (wrapped)
    {24, {0xFF, 0xFF, 0xFF, 0xF0}, "psn_floor", kT},  // [PROBE-1]
    {28, {0x00, 0x00, 0x00, 0x2A}, "timestamp", kT},  // [PROBE-1]
};

ProbePacket vector_probe() {
    ProbePacket p;
    p.common.dst_conn_id = 0x0A0B0C0D;
    p.common.dst_token = 0x1112131415161718ULL;
    p.path_id = 5;
    p.path_gen = 255;
    p.next_psn = 0;
    p.psn_floor = 0xFFFFFFF0;
    p.timestamp = 42;
    return p;
}

std::vector<std::byte> encode(const ProbePacket& p) {
    std::vector<std::byte> b(kProbeSize);
    EXPECT_TRUE(encode_probe(p, b).ok());
    return b;
}

// [PROBE-1] [WIRE-6]: annotated vector.
TEST(Probe, AnnotatedVector) {
    EXPECT_EQ(kProbeSize, 32u);
    expect_bytes(kProbeVector, encode(vector_probe()));
    auto d = decode_probe(join(kProbeVector));
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    EXPECT_EQ(*d, vector_probe());
}

// [WIRE-5] [WIRE-7]: every prefix is truncated.
TEST(Probe, EveryPrefix) {
    check_every_prefix(kProbeVector, [](auto b) { return decode_probe(b); });
}

// [WIRE-5]: trailing bytes are kBadLength.
TEST(Probe, TrailingBytesAreBadLength) {
    expect_trailing_rejected(kProbeVector, [](auto b) { return decode_probe(b); });
}

// [WIRE-6]: reserved bytes 2 and 3, and byte 19's undefined flag bits, are ignored on receive.
TEST(Probe, ReservedIsIgnoredOnReceive) {
    auto b = join(kProbeVector);
    for (size_t off : {2u, 3u}) b[off] = std::byte{0xFF};
    b[19] = std::byte{0xFE};  // every flag bit but FAILED ([PROBE-4]) is undefined
    auto d = decode_probe(b);
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    EXPECT_EQ(*d, vector_probe());
}

// [PROBE-4]: FAILED is byte 19's bit 0, kept on decode with the undefined bits dropped.
TEST(Probe, FailedFlagRoundTrips) {
    ProbePacket p = vector_probe();
    p.flags = kProbeFailed;
    std::array<std::byte, kProbeSize> b{};
    ASSERT_TRUE(encode_probe(p, b).ok());
    EXPECT_EQ(static_cast<uint8_t>(b[19]), 0x01);
    b[19] = std::byte{0xFF};
    auto d = decode_probe(b);
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    EXPECT_EQ(d->flags, kProbeFailed);
    EXPECT_EQ(*d, p);
}

// §3.6: encode_probe is all or nothing.
TEST(Probe, EncoderBufferTooSmallWritesNothing) {
    expect_small_buffer_rejected(
        kProbeSize, [](std::span<std::byte> b) { return encode_probe(vector_probe(), b); });
}

// [PROBE-1]: random PROBEs round-trip.
TEST(Probe, RoundTripProperty) {
    for (uint64_t seed : testing::property_seeds(2000)) {
        SCOPED_TRACE(::testing::Message() << "seed=" << seed);
        Rng rng(seed);
        ProbePacket p;
        p.common = random_common(rng, PacketType::kProbe);
        p.path_id = static_cast<uint16_t>(rng.next_u32());
        p.path_gen = static_cast<uint8_t>(rng.next_u32());
        p.next_psn = rng.next_u32();
        p.psn_floor = rng.next_u32();
        p.timestamp = rng.next_u32();
        auto d = decode_probe(encode(p));
        ASSERT_TRUE(d.ok()) << to_string(d.error());
        ASSERT_EQ(*d, p);
    }
}

// ---------------------------------------------------------------------------------------
// CLOSE, spec §3.7

const Annotated kCloseVector = {
    // {offset, expected bytes, field, error if the datagram ends inside or before it}
    {0, {0x02}, "version", kT},
    {1, {0x07}, "type", kT},  // [WIRE-2] CLOSE
    {2, {0x00, 0x00}, "reserved", kT},
    {4, {0x0A, 0x0B, 0x0C, 0x0D}, "dst_conn_id", kT},
    {8, {0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}, "dst_token", kT},
    {16, {0x00, 0x00, 0x00, 0x01}, "reason", kT},    // [CLOSE-1] PROTOCOL_ERROR
    {20, {0x00, 0x00, 0x00, 0x00}, "reserved", kT},  // [WIRE-6]
};

ClosePacket vector_close() {
    ClosePacket p;
    p.common.dst_conn_id = 0x0A0B0C0D;
    p.common.dst_token = 0x1112131415161718ULL;
    p.reason = static_cast<uint32_t>(CloseReason::kProtocolError);
    return p;
}

std::vector<std::byte> encode(const ClosePacket& p) {
    std::vector<std::byte> b(kCloseSize);
    EXPECT_TRUE(encode_close(p, b).ok());
    return b;
}

// [CLOSE-1] [WIRE-6]: annotated vector.
TEST(Close, AnnotatedVector) {
    EXPECT_EQ(kCloseSize, 24u);
    EXPECT_EQ(static_cast<uint32_t>(CloseReason::kNormal), 0u);
    EXPECT_EQ(static_cast<uint32_t>(CloseReason::kProtocolError), 1u);
    EXPECT_EQ(static_cast<uint32_t>(CloseReason::kLocalFailure), 2u);
    expect_bytes(kCloseVector, encode(vector_close()));
    auto d = decode_close(join(kCloseVector));
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    EXPECT_EQ(*d, vector_close());
}

// [WIRE-5] [WIRE-7]: every prefix is truncated.
TEST(Close, EveryPrefix) {
    check_every_prefix(kCloseVector, [](auto b) { return decode_close(b); });
}

// [WIRE-5]: trailing bytes are kBadLength.
TEST(Close, TrailingBytesAreBadLength) {
    expect_trailing_rejected(kCloseVector, [](auto b) { return decode_close(b); });
}

// [CLOSE-2]: a reason this version does not define is accepted as it is.
TEST(Close, UnknownReasonIsAccepted) {
    auto b = join(kCloseVector);
    for (uint32_t reason : {3u, 0x100u, 0xFFFFFFFFu}) {
        set_u32(b, 16, reason);
        auto d = decode_close(b);
        ASSERT_TRUE(d.ok()) << reason;
        EXPECT_EQ(d->reason, reason);
    }
}

// [WIRE-6]: reserved bytes 2, 3 and 20..23 are ignored on receive.
TEST(Close, ReservedIsIgnoredOnReceive) {
    auto b = join(kCloseVector);
    for (size_t off : {2u, 3u, 20u, 21u, 22u, 23u}) b[off] = std::byte{0xFF};
    auto d = decode_close(b);
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    EXPECT_EQ(*d, vector_close());
}

// §3.7: encode_close is all or nothing.
TEST(Close, EncoderBufferTooSmallWritesNothing) {
    expect_small_buffer_rejected(
        kCloseSize, [](std::span<std::byte> b) { return encode_close(vector_close(), b); });
}

// [CLOSE-1]: random CLOSEs round-trip.
TEST(Close, RoundTripProperty) {
    for (uint64_t seed : testing::property_seeds(2000)) {
        SCOPED_TRACE(::testing::Message() << "seed=" << seed);
        Rng rng(seed);
        ClosePacket p;
        p.common = random_common(rng, PacketType::kClose);
        p.reason = rng.uniform(2) ? static_cast<uint32_t>(rng.uniform(3)) : rng.next_u32();
        auto d = decode_close(encode(p));
        ASSERT_TRUE(d.ok()) << to_string(d.error());
        ASSERT_EQ(*d, p);
    }
}

}  // namespace
}  // namespace mroce::wire
