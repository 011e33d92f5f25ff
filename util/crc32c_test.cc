#include "util/crc32c.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "util/rng.h"

namespace mroce {
namespace {

std::vector<std::byte> bytes_of(std::string_view s) {
    std::vector<std::byte> v(s.size());
    for (size_t i = 0; i < s.size(); ++i) v[i] = static_cast<std::byte>(s[i]);
    return v;
}
std::vector<std::byte> filled(size_t n, uint8_t (*f)(size_t)) {
    std::vector<std::byte> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(f(i));
    return v;
}

// Both implementations, and the dispatching one, must give `want`.
void expect_all(std::span<const std::byte> data, uint32_t want) {
    EXPECT_EQ(crc32c_sw(data), want);
    EXPECT_EQ(crc32c(data), want);
    if (crc32c_hw_supported()) {
        EXPECT_EQ(crc32c_hw(data), want);
    }
    if (data.size() >= crc32c_detail::kFoldMinBytes) {
        if (crc32c_detail::fold512_supported()) {
            EXPECT_EQ(crc32c_detail::crc32c_fold512_update(0xFFFFFFFFu, data) ^ 0xFFFFFFFFu, want);
        }
        if (crc32c_detail::fold256_supported()) {
            EXPECT_EQ(crc32c_detail::crc32c_fold256_update(0xFFFFFFFFu, data) ^ 0xFFFFFFFFu, want);
        }
    }
    if (crc32c_fold_supported()) {
        EXPECT_EQ(crc32c_fold(data), want);
    }
}

uint64_t test_seed() {
    uint64_t seed = 0xC0FFEE;
    if (const char* s = std::getenv("MROCE_CRC_SEED")) seed = std::strtoull(s, nullptr, 0);
    std::printf("crc32c random seed %llu (MROCE_CRC_SEED replays)\n",
                static_cast<unsigned long long>(seed));
    return seed;
}

// [INT-2]: the check value of the CRC-32C parameter set ("123456789").
TEST(Crc32c, CheckValue) {
    expect_all(bytes_of("123456789"), 0xE3069283u);
    expect_all({}, 0x00000000u);
}

// RFC 3720 B.4: the CRC bytes there are as sent on the wire, least significant first.
TEST(Crc32c, Rfc3720Vectors) {
    expect_all(filled(32, [](size_t) -> uint8_t { return 0x00; }), 0x8A9136AAu);
    expect_all(filled(32, [](size_t) -> uint8_t { return 0xFF; }), 0x62A8AB43u);
    expect_all(filled(32, [](size_t i) -> uint8_t { return static_cast<uint8_t>(i); }), 0x46DD794Eu);
    expect_all(filled(32, [](size_t i) -> uint8_t { return static_cast<uint8_t>(31 - i); }),
               0x113FDB5Cu);
    const uint8_t scsi_read[48] = {0x01, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                   0x14, 0,    0, 0, 0, 0, 0x04, 0, 0, 0, 0, 0x14, 0, 0, 0, 0x18,
                                   0x28, 0,    0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0};
    expect_all(std::as_bytes(std::span(scsi_read)), 0xD9963A56u);
}

// Every start offset (unaligned loads) and every tail length of the 8-byte loops.
TEST(Crc32c, UnalignedAndShortBuffers) {
    const auto msg = bytes_of("123456789");
    for (size_t off = 0; off < 16; ++off) {
        std::vector<std::byte> buf(off + msg.size() + 3, std::byte{0x5A});
        std::copy(msg.begin(), msg.end(), buf.begin() + static_cast<std::ptrdiff_t>(off));
        expect_all(std::span(buf).subspan(off, msg.size()), 0xE3069283u);
    }
}

// Pieces fed through *_update give the CRC of the whole.
TEST(Crc32c, IncrementalEqualsWhole) {
    const auto msg = filled(100, [](size_t i) -> uint8_t { return static_cast<uint8_t>(i * 7 + 3); });
    const std::span<const std::byte> all(msg);
    for (size_t cut = 0; cut <= all.size(); cut += 13) {
        const uint32_t sw = crc32c_sw_update(crc32c_sw_update(0xFFFFFFFFu, all.first(cut)),
                                             all.subspan(cut)) ^ 0xFFFFFFFFu;
        EXPECT_EQ(sw, crc32c_sw(all)) << cut;
    }
}

// The instruction and the tables agree on random buffers of random lengths and offsets.
// MROCE_CRC_SEED replays a run.
TEST(Crc32c, HardwareAgreesWithTablesOnRandomInput) {
    if (!crc32c_hw_supported()) GTEST_SKIP() << "no SSE4.2 on this CPU";
    const uint64_t seed = test_seed();
    Rng rng(seed);
    std::vector<std::byte> buf(9100);
    for (int round = 0; round < 2000; ++round) {
        const size_t off = rng.uniform(8);
        const size_t len = rng.uniform(buf.size() - off);
        for (size_t i = 0; i < off + len; ++i) buf[i] = static_cast<std::byte>(rng.next_u32());
        const auto data = std::span<const std::byte>(buf).subspan(off, len);
        ASSERT_EQ(crc32c_hw(data), crc32c_sw(data))
            << "seed " << seed << " round " << round << " len " << len << " off " << off;
    }
}

// The lengths where the folding paths change loops: 256 bytes (the first round only),
// 320 and 288 (one step of one accumulator, 512 and 256 bits), 336 and 272 (one 16-byte
// step), 4172 (a DATA datagram of 4096 bytes of payload and its trailer's room), each
// with 1..15 tail bytes.
TEST(Crc32c, FoldingLoopBoundaries) {
    for (size_t len : {255u, 256u, 257u, 271u, 272u, 288u, 289u, 319u, 320u, 321u, 336u, 383u, 384u,
                       511u, 512u, 513u, 767u, 768u, 4168u, 4172u, 9072u}) {
        std::vector<std::byte> v(len);
        for (size_t i = 0; i < len; ++i) v[i] = static_cast<std::byte>(i * 131 + (i >> 8));
        expect_all(v, crc32c_sw(v));
    }
}

// Each folding path agrees with the tables on random buffers of random lengths (from
// kFoldMinBytes to a 9000-byte payload's datagram), offsets and running states.
// MROCE_CRC_SEED replays.
void folding_agrees_with_tables(uint32_t (*fold)(uint32_t, std::span<const std::byte>)) {
    const uint64_t seed = test_seed();
    Rng rng(seed);
    std::vector<std::byte> buf(9200);
    for (int round = 0; round < 4000; ++round) {
        const size_t off = rng.uniform(64);
        const size_t len = crc32c_detail::kFoldMinBytes + rng.uniform(9100 - crc32c_detail::kFoldMinBytes);
        for (size_t i = 0; i < off + len; ++i) buf[i] = static_cast<std::byte>(rng.next_u32());
        const auto data = std::span<const std::byte>(buf).subspan(off, len);
        const uint32_t state = rng.next_u32();
        ASSERT_EQ(fold(state, data), crc32c_sw_update(state, data))
            << "seed " << seed << " round " << round << " len " << len << " off " << off;
    }
}
TEST(Crc32c, Folding512AgreesWithTablesOnRandomInput) {
    if (!crc32c_detail::fold512_supported()) GTEST_SKIP() << "no AVX-512 VPCLMULQDQ on this CPU";
    folding_agrees_with_tables(&crc32c_detail::crc32c_fold512_update);
}
TEST(Crc32c, Folding256AgreesWithTablesOnRandomInput) {
    if (!crc32c_detail::fold256_supported()) GTEST_SKIP() << "no AVX2 VPCLMULQDQ on this CPU";
    folding_agrees_with_tables(&crc32c_detail::crc32c_fold256_update);
}

// A CRC32C detects every single-bit error: flipping any one bit of a 64-byte buffer changes it.
TEST(Crc32c, EverySingleBitFlipChangesIt) {
    auto msg = filled(64, [](size_t i) -> uint8_t { return static_cast<uint8_t>(i * 31); });
    const uint32_t base = crc32c(msg);
    for (size_t bit = 0; bit < msg.size() * 8; ++bit) {
        msg[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
        EXPECT_NE(crc32c(msg), base) << bit;
        msg[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    }
}

}  // namespace
}  // namespace mroce
