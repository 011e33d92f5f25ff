// Tests for the common header (docs/spec.md §3.1) and the rules every decoder shares.
#include "wire/header.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "wire/ack.h"
#include "wire/codec_internal.h"
#include "wire/control.h"
#include "wire/data.h"
#include "wire/test_util.h"

namespace mroce::wire {
namespace {

using testing::Annotated;
using testing::check_every_prefix;
using testing::expect_bytes;
using testing::join;

constexpr Error kT = Error::kTruncated;

// spec §3.1 [WIRE-1] [WIRE-2] [WIRE-6]: the common header, 16 bytes.
const Annotated kCommonVector = {
    // {offset, expected bytes, field, error if the datagram ends inside or before it}
    {0, {0x02}, "version", kT},                                              // [WIRE-1] 2
    {1, {0x03}, "type", kT},                                                 // [WIRE-2] NACK
    {2, {0x00, 0x00}, "reserved", kT},                                       // [WIRE-6] zero
    {4, {0x0A, 0x0B, 0x0C, 0x0D}, "dst_conn_id", kT},                        // 0x0A0B0C0D
    {8, {0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}, "dst_token", kT},  // 0x1112...18
};

CommonHeader vector_header() {
    CommonHeader h;
    h.version = 2;
    h.type = PacketType::kNack;
    h.dst_conn_id = 0x0A0B0C0D;
    h.dst_token = 0x1112131415161718ULL;
    return h;
}

std::vector<std::byte> write_header(const CommonHeader& h, PacketType type) {
    std::vector<std::byte> buf(kCommonHeaderSize, testing::kCanary);
    Writer w(buf);
    write_common_header(w, h, type);
    EXPECT_TRUE(w.ok());
    EXPECT_EQ(w.pos(), kCommonHeaderSize);
    return buf;
}

// [WIRE-1] [WIRE-2] [UDP-1] [UDP-3] [UDP-4]: constants match the spec tables.
TEST(CommonHeader, ConstantsMatchSpec) {
    EXPECT_EQ(kProtocolVersion, 2);                     // [WIRE-1]
    EXPECT_EQ(static_cast<int>(PacketType::kRetry), 8);  // [WIRE-2]
    EXPECT_EQ(kCommonHeaderSize, 16u);                  // §3.1
    EXPECT_EQ(static_cast<int>(PacketType::kData), 1);  // [WIRE-2]
    EXPECT_EQ(static_cast<int>(PacketType::kAck), 2);
    EXPECT_EQ(static_cast<int>(PacketType::kNack), 3);
    EXPECT_EQ(static_cast<int>(PacketType::kHello), 4);
    EXPECT_EQ(static_cast<int>(PacketType::kHelloAck), 5);
    EXPECT_EQ(static_cast<int>(PacketType::kProbe), 6);
    EXPECT_EQ(static_cast<int>(PacketType::kClose), 7);
    EXPECT_EQ(kDefaultPort, 4797);  // [UDP-1]
    // [UDP-4]: the largest DATA datagram and the IP packets that carry it.
    EXPECT_EQ(kDataHeaderSize + kDefaultMaxPayload, 4168u);
    EXPECT_EQ(kDataHeaderSize + kDefaultMaxPayload + 8 + 20, 4196u);
    EXPECT_EQ(kDataHeaderSize + kDefaultMaxPayload + 8 + 40, 4216u);
    EXPECT_EQ(kDataHeaderSize + kMaxMaxPayload + 8 + 40, 9120u);
    EXPECT_EQ(kDataHeaderSize + 1400 + 8 + 20, 1500u);
    EXPECT_EQ(kDefaultMaxPayload, 4096u);  // [UDP-3]
    EXPECT_EQ(kMinMaxPayload, 256u);       // [UDP-3]
    EXPECT_EQ(kMaxMaxPayload, 9000u);      // [UDP-3]
}

// [WIRE-1] [WIRE-2] [WIRE-6]: annotated vector, encoded and decoded.
TEST(CommonHeader, AnnotatedVector) {
    const CommonHeader h = vector_header();
    const auto bytes = write_header(h, PacketType::kNack);
    expect_bytes(kCommonVector, bytes);
    auto d = decode_common_header(join(kCommonVector));
    ASSERT_TRUE(d.ok()) << to_string(d.error());
    EXPECT_EQ(*d, h);
}

// [WIRE-7]: every datagram shorter than 16 bytes is truncated.
TEST(CommonHeader, EveryPrefixIsTruncated) {
    check_every_prefix(kCommonVector,
                       [](std::span<const std::byte> b) { return decode_common_header(b); });
}

// [WIRE-9] [WIRE-7] [WIRE-3]: length is checked before the version, so a short datagram with a bad
// version byte counts as truncated.
TEST(CommonHeader, TruncationIsCheckedBeforeVersion) {
    auto bytes = join(kCommonVector);
    bytes[0] = std::byte{0x03};
    bytes[1] = std::byte{0xFF};
    for (size_t len = 0; len < kCommonHeaderSize; ++len)
        EXPECT_EQ(decode_common_header(std::span(bytes).first(len)).error(), Error::kTruncated);
}

// [WIRE-3]: every version other than 2 is rejected.
TEST(CommonHeader, UnknownVersionIsRejected) {
    auto bytes = join(kCommonVector);
    for (int v = 0; v < 256; ++v) {
        bytes[0] = std::byte(v);
        auto d = decode_common_header(bytes);
        if (v == kProtocolVersion) {
            EXPECT_TRUE(d.ok());
        } else {
            EXPECT_EQ(d.error(), Error::kBadVersion) << "version " << v;
        }
    }
}

// [WIRE-9] [WIRE-3] [WIRE-4]: the version is checked before the type.
TEST(CommonHeader, VersionIsCheckedBeforeType) {
    auto bytes = join(kCommonVector);
    bytes[0] = std::byte{0x03};
    for (int t : {0, 1, 8, 255}) {
        bytes[1] = std::byte(t);
        EXPECT_EQ(decode_common_header(bytes).error(), Error::kBadVersion) << "type " << t;
    }
}

// [WIRE-2] [WIRE-4]: types 1..8 are known, every other value is rejected.
TEST(CommonHeader, UnknownTypeIsRejected) {
    auto bytes = join(kCommonVector);
    for (int t = 0; t < 256; ++t) {
        bytes[1] = std::byte(t);
        auto d = decode_common_header(bytes);
        if (t >= 1 && t <= 8) {
            ASSERT_TRUE(d.ok()) << "type " << t;
            EXPECT_EQ(static_cast<int>(d->type), t);
            EXPECT_TRUE(is_known_type(static_cast<uint8_t>(t)));
        } else {
            EXPECT_EQ(d.error(), Error::kBadType) << "type " << t;
            EXPECT_FALSE(is_known_type(static_cast<uint8_t>(t)));
        }
    }
}

// [WIRE-6]: reserved bytes are sent as zero and ignored on receive.
TEST(CommonHeader, ReservedIsIgnoredOnReceive) {
    auto bytes = join(kCommonVector);
    bytes[2] = std::byte{0xFF};
    bytes[3] = std::byte{0x5A};
    auto d = decode_common_header(bytes);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, vector_header());
}

// §3.1: decode_common_header parses the first 16 bytes of any longer datagram; the typed
// decoders check the rest.
TEST(CommonHeader, LongerDatagramParsesTheHeader) {
    auto bytes = testing::with_trailing(kCommonVector, 100);
    auto d = decode_common_header(bytes);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, vector_header());
}

// [WIRE-1] [WIRE-2]: random headers round-trip.
TEST(CommonHeader, RoundTripProperty) {
    for (uint64_t seed : testing::property_seeds(2000)) {
        SCOPED_TRACE(::testing::Message() << "seed=" << seed);
        Rng rng(seed);
        CommonHeader h;
        h.type = static_cast<PacketType>(rng.uniform_range(1, 7));
        h.dst_conn_id = rng.next_u32();
        h.dst_token = rng.next_u64();
        auto d = decode_common_header(write_header(h, h.type));
        ASSERT_TRUE(d.ok()) << to_string(d.error());
        ASSERT_EQ(*d, h);
    }
}

// One valid datagram of every type, for the cross-decoder tests below.
struct Sample {
    PacketType type;
    std::vector<std::byte> bytes;
};

std::vector<Sample> samples() {
    std::vector<Sample> out;
    {
        DataHeader h;
        h.opcode = Opcode::kSend;
        h.flags = data_flag::kLast;
        h.payload_len = 2;
        h.msg_len = 2;
        std::vector<std::byte> b(kDataHeaderSize + 2, std::byte{0x77});
        EXPECT_TRUE(encode_data_header(h, b).ok());
        out.push_back({PacketType::kData, b});
    }
    {
        AckPacket a;
        a.stream_count = 1;
        a.streams[0] = {5, 6};
        std::vector<std::byte> b(encoded_size(a));
        EXPECT_TRUE(encode_ack(a, b).ok());
        out.push_back({PacketType::kAck, b});
    }
    {
        NackPacket n;
        std::vector<std::byte> b(kNackSize);
        EXPECT_TRUE(encode_nack(n, b).ok());
        out.push_back({PacketType::kNack, b});
    }
    for (PacketType t : {PacketType::kHello, PacketType::kHelloAck}) {
        HelloPacket h;
        h.common.type = t;
        h.num_paths = 8;
        h.max_payload = 4096;
        std::vector<std::byte> b(kHelloSize);
        EXPECT_TRUE(encode_hello(h, b).ok());
        out.push_back({t, b});
    }
    {
        ProbePacket p;
        std::vector<std::byte> b(kProbeSize);
        EXPECT_TRUE(encode_probe(p, b).ok());
        out.push_back({PacketType::kProbe, b});
    }
    {
        ClosePacket c;
        std::vector<std::byte> b(kCloseSize);
        EXPECT_TRUE(encode_close(c, b).ok());
        out.push_back({PacketType::kClose, b});
    }
    {
        RetryPacket r;
        r.cookie[0] = 1;
        std::vector<std::byte> b(kRetrySize);
        EXPECT_TRUE(encode_retry(r, b).ok());
        out.push_back({PacketType::kRetry, b});
    }
    return out;
}

// Each typed decoder, reduced to its error code, with the types it accepts.
struct Decoder {
    const char* name;
    std::function<Error(std::span<const std::byte>)> decode;
    std::vector<PacketType> accepts;
};

std::vector<Decoder> decoders() {
    return {
        {"decode_data", [](auto b) { return decode_data(b).error(); }, {PacketType::kData}},
        {"decode_ack", [](auto b) { return decode_ack(b).error(); }, {PacketType::kAck}},
        {"decode_nack", [](auto b) { return decode_nack(b).error(); }, {PacketType::kNack}},
        {"decode_hello",
         [](auto b) { return decode_hello(b).error(); },
         {PacketType::kHello, PacketType::kHelloAck}},
        {"decode_probe", [](auto b) { return decode_probe(b).error(); }, {PacketType::kProbe}},
        {"decode_close", [](auto b) { return decode_close(b).error(); }, {PacketType::kClose}},
        {"decode_retry", [](auto b) { return decode_retry(b).error(); }, {PacketType::kRetry}},
    };
}

// [WIRE-2] [WIRE-4]: a typed decoder accepts only its own type(s) and answers any other
// known type with kBadType.
TEST(TypedDecoders, RejectOtherTypes) {
    for (const Sample& s : samples()) {
        for (const Decoder& d : decoders()) {
            SCOPED_TRACE(::testing::Message() << d.name << " on type " << static_cast<int>(s.type));
            const bool accepts =
                std::find(d.accepts.begin(), d.accepts.end(), s.type) != d.accepts.end();
            EXPECT_EQ(d.decode(s.bytes), accepts ? Error::kOk : Error::kBadType);
        }
    }
}

// [WIRE-3] [WIRE-9]: every typed decoder rejects an unknown version, before anything else.
TEST(TypedDecoders, RejectUnknownVersion) {
    for (Sample s : samples()) {
        s.bytes[0] = std::byte{0x03};
        s.bytes[1] = std::byte{0xEE};
        for (const Decoder& d : decoders()) {
            SCOPED_TRACE(::testing::Message() << d.name << " on type " << static_cast<int>(s.type));
            EXPECT_EQ(d.decode(s.bytes), Error::kBadVersion);
        }
    }
}

// [WIRE-4]: every typed decoder rejects an unknown type.
TEST(TypedDecoders, RejectUnknownType) {
    for (Sample s : samples()) {
        for (int t : {0, 9, 0x80, 0xFF}) {
            s.bytes[1] = std::byte(t);
            for (const Decoder& d : decoders()) {
                SCOPED_TRACE(::testing::Message() << d.name << " on type " << t);
                EXPECT_EQ(d.decode(s.bytes), Error::kBadType);
            }
        }
    }
}

// [WIRE-7]: every typed decoder answers a datagram shorter than the common header with
// kTruncated.
TEST(TypedDecoders, ShortDatagramIsTruncated) {
    for (const Sample& s : samples()) {
        for (size_t len = 0; len < kCommonHeaderSize; ++len) {
            for (const Decoder& d : decoders()) {
                SCOPED_TRACE(::testing::Message() << d.name << " on " << len << " bytes");
                EXPECT_EQ(d.decode(std::span(s.bytes).first(len)), Error::kTruncated);
            }
        }
    }
}

}  // namespace
}  // namespace mroce::wire
