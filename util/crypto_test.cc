#include "util/crypto.h"

#include <gtest/gtest.h>

#include <vector>

namespace mroce {
namespace {

std::vector<std::byte> counting(size_t n) {
    std::vector<std::byte> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(i);
    return v;
}

// Key 00 01 .. 0f and messages 00 01 .. (n-1): the vectors of the SipHash paper's
// reference implementation.
TEST(SipHash, ReferenceVectors) {
    const uint64_t k0 = 0x0706050403020100ULL, k1 = 0x0f0e0d0c0b0a0908ULL;
    EXPECT_EQ(siphash24(k0, k1, counting(0)), 0x726fdb47dd0e0e31ULL);
    EXPECT_EQ(siphash24(k0, k1, counting(15)), 0xa129ca6149be45e5ULL);
}

TEST(SipHash, EveryBitOfKeyAndMessageMatters) {
    const auto msg = counting(24);
    const uint64_t base = siphash24(1, 2, msg);
    EXPECT_NE(siphash24(1 ^ (1ULL << 63), 2, msg), base);
    EXPECT_NE(siphash24(1, 2 ^ 1, msg), base);
    auto flipped = msg;
    flipped[23] ^= std::byte{0x80};
    EXPECT_NE(siphash24(1, 2, flipped), base);
    // A message and the same message with a zero byte appended differ (the length counts).
    auto longer = msg;
    longer.push_back(std::byte{0});
    EXPECT_NE(siphash24(1, 2, longer), base);
}

// RFC 8439 §2.3.2: key 00 .. 1f, nonce 00 00 00 09 00 00 00 4a 00 00 00 00, counter 1.
TEST(ChaCha20, Rfc8439BlockVector) {
    CryptoSeed key{};
    for (int i = 0; i < 32; ++i) key[i] = static_cast<uint8_t>(i);
    const std::array<uint8_t, 12> nonce{0, 0, 0, 9, 0, 0, 0, 0x4a, 0, 0, 0, 0};
    uint8_t out[64];
    chacha20_block(key, 1, nonce, out);
    const uint8_t want[16] = {0x10, 0xf1, 0xe7, 0xe4, 0xd1, 0x3b, 0x59, 0x15,
                              0x50, 0x0f, 0xdd, 0x1f, 0xa3, 0x20, 0x71, 0xc4};
    EXPECT_EQ(0, std::memcmp(out, want, 16));
    const uint8_t want_tail[4] = {0xa2, 0x50, 0x3c, 0x4e};
    EXPECT_EQ(0, std::memcmp(out + 60, want_tail, 4));
}

TEST(CryptoRng, SameSeedSameSequenceAndSeedsDiffer) {
    CryptoRng a(crypto_seed_from(7)), b(crypto_seed_from(7)), c(crypto_seed_from(8));
    bool differs = false;
    for (int i = 0; i < 100; ++i) {  // crosses several 64-byte blocks
        const uint64_t va = a.next_u64();
        EXPECT_EQ(va, b.next_u64());
        differs |= va != c.next_u64();
    }
    EXPECT_TRUE(differs);
    CryptoRng z(crypto_seed_from(0));
    for (int i = 0; i < 1000; ++i) EXPECT_NE(z.next_nonzero_u64(), 0u);
}

}  // namespace
}  // namespace mroce
