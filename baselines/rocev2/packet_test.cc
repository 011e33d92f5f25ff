// Tests for the RoCEv2 codec: annotated byte vectors (one fragment per field, naming the
// error if the datagram ends there), truncation at every offset, malformed input, and a
// random round trip. Field layouts: IBTA vol. 1 §9.2-9.3 (BTH, RETH, ImmDt, AETH) and
// annex A17 (RoCEv2 CNP).
#include "baselines/rocev2/packet.h"

#include <gtest/gtest.h>

#include <vector>

#include "wire/test_util.h"

namespace mroce::rocev2 {
namespace {

using wire::testing::Annotated;
using wire::testing::check_every_prefix;
using wire::testing::expect_bytes;
using wire::testing::join;
constexpr Error kT = Error::kTruncated;

std::vector<std::byte> encode_vec(const Headers& h, std::span<const std::byte> payload = {}) {
    std::vector<std::byte> out(encoded_size(h.bth.opcode, payload.size()), wire::testing::kCanary);
    Result<size_t> n = encode(h, payload, out);
    EXPECT_TRUE(n.ok()) << to_string(n.error());
    if (n) {
        EXPECT_EQ(*n, out.size());
    }
    return out;
}

// RDMA WRITE Only with Immediate, no payload: BTH + RETH + ImmDt + ICRC.
const Annotated kWriteOnlyImm = {
    {0, {0x0B}, "BTH.opcode (RDMA_WRITE_ONLY_WITH_IMMEDIATE)", kT},
    {1, {0x80}, "BTH.SE|M|PadCnt|TVer (solicited, pad 0, tver 0)", kT},
    {2, {0xFF, 0xFF}, "BTH.P_Key", kT},
    {4, {0x00}, "BTH.reserved", kT},
    {5, {0x12, 0x34, 0x56}, "BTH.DestQP", kT},
    {8, {0x80}, "BTH.AckReq|reserved", kT},
    {9, {0xAB, 0xCD, 0xEF}, "BTH.PSN", kT},
    {12, {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}, "RETH.VA", kT},
    {20, {0xCA, 0xFE, 0xBA, 0xBE}, "RETH.R_Key", kT},
    {24, {0x00, 0x00, 0x00, 0x00}, "RETH.DMA_Length", kT},
    {28, {0xDE, 0xAD, 0xBE, 0xEF}, "ImmDt", kT},
    {32, {0x00, 0x00, 0x00, 0x00}, "ICRC (zeros, unchecked)", kT},
};

Headers write_only_imm_headers() {
    Headers h;
    h.bth.opcode = Opcode::kWriteOnlyImm;
    h.bth.solicited = true;
    h.bth.dest_qp = 0x123456;
    h.bth.ack_request = true;
    h.bth.psn = 0xABCDEF;
    h.reth = Reth{0x0102030405060708ULL, 0xCAFEBABE, 0};
    h.imm = 0xDEADBEEF;
    return h;
}

TEST(RocePacket, WriteOnlyImmVector) {
    const Headers h = write_only_imm_headers();
    expect_bytes(kWriteOnlyImm, encode_vec(h));
    Result<Decoded> d = decode(join(kWriteOnlyImm));
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->h.bth.opcode, Opcode::kWriteOnlyImm);
    EXPECT_TRUE(d->h.bth.solicited);
    EXPECT_TRUE(d->h.bth.ack_request);
    EXPECT_EQ(d->h.bth.dest_qp, 0x123456u);
    EXPECT_EQ(d->h.bth.psn, 0xABCDEFu);
    EXPECT_EQ(d->h.reth.virtual_address, 0x0102030405060708ULL);
    EXPECT_EQ(d->h.reth.rkey, 0xCAFEBABEu);
    EXPECT_EQ(d->h.imm, 0xDEADBEEFu);
    EXPECT_TRUE(d->payload.empty());
    check_every_prefix(kWriteOnlyImm, [](std::span<const std::byte> b) { return decode(b); });
}

// ACKNOWLEDGE carrying a NAK(PSN sequence error) for PSN 0x000102, MSN 7.
const Annotated kNakSeq = {
    {0, {0x11}, "BTH.opcode (ACKNOWLEDGE)", kT},
    {1, {0x00}, "BTH.SE|M|PadCnt|TVer", kT},
    {2, {0x80, 0x01}, "BTH.P_Key", kT},
    {4, {0x00}, "BTH.reserved", kT},
    {5, {0x00, 0x00, 0x11}, "BTH.DestQP", kT},
    {8, {0x00}, "BTH.AckReq|reserved", kT},
    {9, {0x00, 0x01, 0x02}, "BTH.PSN", kT},
    {12, {0x60}, "AETH.syndrome (NAK, PSN sequence error)", kT},
    {13, {0x00, 0x00, 0x07}, "AETH.MSN", kT},
    {16, {0x00, 0x00, 0x00, 0x00}, "ICRC", kT},
};

TEST(RocePacket, NakVector) {
    Headers h;
    h.bth.opcode = Opcode::kAck;
    h.bth.pkey = 0x8001;
    h.bth.dest_qp = 0x11;
    h.bth.psn = 0x102;
    h.aeth.syndrome = make_syndrome(AckKind::kNak, 0);
    h.aeth.msn = 7;
    expect_bytes(kNakSeq, encode_vec(h));
    Result<Decoded> d = decode(join(kNakSeq));
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->h.aeth.kind(), AckKind::kNak);
    EXPECT_EQ(d->h.aeth.value(), 0);
    EXPECT_EQ(d->h.aeth.msn, 7u);
    EXPECT_EQ(d->h.bth.pkey, 0x8001);
    check_every_prefix(kNakSeq, [](std::span<const std::byte> b) { return decode(b); });
}

const Annotated kCnp = {
    {0, {0x81}, "BTH.opcode (CNP)", kT},
    {1, {0x00}, "BTH.SE|M|PadCnt|TVer", kT},
    {2, {0xFF, 0xFF}, "BTH.P_Key", kT},
    {4, {0x00}, "BTH.reserved", kT},
    {5, {0x00, 0x00, 0x02}, "BTH.DestQP", kT},
    {8, {0x00}, "BTH.AckReq|reserved", kT},
    {9, {0x00, 0x00, 0x00}, "BTH.PSN", kT},
    {12, std::vector<uint8_t>(16, 0), "CNP reserved", kT},
    {28, {0x00, 0x00, 0x00, 0x00}, "ICRC", kT},
};

TEST(RocePacket, CnpVector) {
    Headers h;
    h.bth.opcode = Opcode::kCnp;
    h.bth.dest_qp = 2;
    expect_bytes(kCnp, encode_vec(h));
    Result<Decoded> d = decode(join(kCnp));
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->h.bth.opcode, Opcode::kCnp);
    check_every_prefix(kCnp, [](std::span<const std::byte> b) { return decode(b); });
}

TEST(RocePacket, PayloadIsPaddedToFourBytes) {
    Headers h;
    h.bth.opcode = Opcode::kSendOnly;
    const std::vector<std::byte> payload = {std::byte{1}, std::byte{2}, std::byte{3}};
    const std::vector<std::byte> out = encode_vec(h, payload);
    ASSERT_EQ(out.size(), kBthSize + 4 + kIcrcSize);
    EXPECT_EQ(static_cast<uint8_t>(out[1]), 0x10);  // PadCnt = 1
    EXPECT_EQ(out[kBthSize + 3], std::byte{0});    // the pad byte
    Result<Decoded> d = decode(out);
    ASSERT_TRUE(d.ok());
    ASSERT_EQ(d->payload.size(), 3u);
    EXPECT_EQ(d->payload[2], std::byte{3});
}

TEST(RocePacket, MalformedInputIsRejectedWithItsReason) {
    std::vector<std::byte> v = join(kWriteOnlyImm);
    v[1] = std::byte{0x81};  // TVer 1
    EXPECT_EQ(decode(v).error(), Error::kBadVersion);
    for (uint8_t op : {0x0C, 0x0D, 0x12, 0x13, 0x14, 0x20, 0x64, 0x80, 0xFF}) {
        v = join(kWriteOnlyImm);
        v[0] = std::byte{op};
        EXPECT_EQ(decode(v).error(), Error::kBadType) << "opcode " << int{op};
    }
    v = join(kNakSeq);
    v[12] = std::byte{0x40};  // AETH kind 0b010 is reserved
    EXPECT_EQ(decode(v).error(), Error::kBadType);
    v[12] = std::byte{0x65};  // NAK code 5 is reserved
    EXPECT_EQ(decode(v).error(), Error::kBadType);
    v = join(kNakSeq);
    v.push_back(std::byte{0});  // an ACK has a fixed size
    EXPECT_EQ(decode(v).error(), Error::kBadLength);
    v = join(kCnp);
    v.push_back(std::byte{0});
    EXPECT_EQ(decode(v).error(), Error::kBadLength);
    v = join(kWriteOnlyImm);
    v[1] = std::byte{0x30};  // pad count 3 on a packet without payload
    EXPECT_EQ(decode(v).error(), Error::kBadLength);
    v = join(kWriteOnlyImm);
    v.insert(v.begin() + 32, 3, std::byte{7});  // 3 payload bytes but pad count 0
    EXPECT_EQ(decode(v).error(), Error::kBadLength);
    v[1] = std::byte{0x90};  // pad count 1: payload 2 + pad 1 is still not a multiple of 4
    EXPECT_EQ(decode(v).error(), Error::kBadLength);
    v[1] = std::byte{0x80};
    v.insert(v.begin() + 32, std::byte{7});  // 4 payload bytes, pad 0: fine
    EXPECT_TRUE(decode(v).ok());
    v = join(kNakSeq);
    v[1] = std::byte{0x10};  // pad count on an ACK
    EXPECT_EQ(decode(v).error(), Error::kBadLength);
}

TEST(RocePacket, EncoderRefusesBadInputAndWritesNothing) {
    Headers h = write_only_imm_headers();
    std::vector<std::byte> small(35, wire::testing::kCanary);
    EXPECT_EQ(encode(h, {}, small).error(), Error::kBufferTooSmall);
    wire::testing::expect_untouched(small);
    std::vector<std::byte> out(128, wire::testing::kCanary);
    h.bth.dest_qp = 1u << 24;
    EXPECT_EQ(encode(h, {}, out).error(), Error::kInvalidArgument);
    h = write_only_imm_headers();
    h.bth.psn = 1u << 24;
    EXPECT_EQ(encode(h, {}, out).error(), Error::kInvalidArgument);
    h.bth.psn = 0;
    h.bth.opcode = Opcode::kAck;
    const std::byte one[1] = {std::byte{1}};
    EXPECT_EQ(encode(h, one, out).error(), Error::kInvalidArgument);
    wire::testing::expect_untouched(out);
}

TEST(RocePacket, RandomRoundTrip) {
    static constexpr Opcode kOps[] = {
        Opcode::kSendFirst, Opcode::kSendMiddle, Opcode::kSendLast, Opcode::kSendLastImm,
        Opcode::kSendOnly, Opcode::kSendOnlyImm, Opcode::kWriteFirst, Opcode::kWriteMiddle,
        Opcode::kWriteLast, Opcode::kWriteLastImm, Opcode::kWriteOnly, Opcode::kWriteOnlyImm,
        Opcode::kAck, Opcode::kCnp};
    for (uint64_t seed : wire::testing::property_seeds(2000)) {
        SCOPED_TRACE(::testing::Message() << "seed " << seed << " (MROCE_SEED=" << seed << ")");
        Rng rng(seed);
        Headers h;
        h.bth.opcode = kOps[rng.uniform(std::size(kOps))];
        h.bth.solicited = rng.uniform(2);
        h.bth.migration = rng.uniform(2);
        h.bth.pkey = static_cast<uint16_t>(rng.next_u32());
        h.bth.dest_qp = rng.next_u32() & kPsnMask;
        h.bth.ack_request = rng.uniform(2);
        h.bth.psn = rng.next_u32() & kPsnMask;
        h.reth = Reth{rng.next_u64(), rng.next_u32(), rng.next_u32()};
        h.imm = rng.next_u32();
        static constexpr AckKind kKinds[] = {AckKind::kAck, AckKind::kRnrNak, AckKind::kNak};
        const AckKind kind = kKinds[rng.uniform(3)];
        h.aeth.syndrome = make_syndrome(kind, static_cast<uint8_t>(
                                                  kind == AckKind::kNak ? rng.uniform(5) : rng.uniform(32)));
        h.aeth.msn = rng.next_u32() & kPsnMask;
        std::vector<std::byte> payload(is_data(h.bth.opcode) ? rng.uniform(301) : 0);
        wire::testing::fill_random(rng, payload);
        const std::vector<std::byte> bytes = encode_vec(h, payload);
        Result<Decoded> d = decode(bytes);
        ASSERT_TRUE(d.ok()) << to_string(d.error());
        EXPECT_EQ(d->h.bth.opcode, h.bth.opcode);
        EXPECT_EQ(d->h.bth.solicited, h.bth.solicited);
        EXPECT_EQ(d->h.bth.migration, h.bth.migration);
        EXPECT_EQ(d->h.bth.pkey, h.bth.pkey);
        EXPECT_EQ(d->h.bth.dest_qp, h.bth.dest_qp);
        EXPECT_EQ(d->h.bth.ack_request, h.bth.ack_request);
        EXPECT_EQ(d->h.bth.psn, h.bth.psn);
        if (has_reth(h.bth.opcode)) {
            EXPECT_EQ(d->h.reth.virtual_address, h.reth.virtual_address);
            EXPECT_EQ(d->h.reth.rkey, h.reth.rkey);
            EXPECT_EQ(d->h.reth.dma_length, h.reth.dma_length);
        }
        if (has_imm(h.bth.opcode)) {
            EXPECT_EQ(d->h.imm, h.imm);
        }
        if (h.bth.opcode == Opcode::kAck) {
            EXPECT_EQ(d->h.aeth.syndrome, h.aeth.syndrome);
            EXPECT_EQ(d->h.aeth.msn, h.aeth.msn);
        }
        ASSERT_EQ(d->payload.size(), payload.size());
        EXPECT_TRUE(std::equal(payload.begin(), payload.end(), d->payload.begin()));
    }
}

TEST(RocePacket, PsnUnwrapIsSerialArithmetic) {
    const uint64_t ref = kPsnMask + 1 + 5;  // low 24 bits = 5
    EXPECT_EQ(psn_unwrap(5, ref), ref);
    EXPECT_EQ(psn_unwrap(0xFFFFFF, ref), ref - 6);  // just before the wrap
    EXPECT_EQ(psn_unwrap(100, ref), ref + 95);
    EXPECT_EQ(psn_unwrap((5 + (1u << 23) - 1) & kPsnMask, ref), ref + (1u << 23) - 1);
    EXPECT_EQ(psn_unwrap((5 + (1u << 23)) & kPsnMask, ref), ref - (1u << 23));
}

}  // namespace
}  // namespace mroce::rocev2
