// util/crypto.h — the two keyed primitives the engine's secrets need: SipHash-2-4 (a keyed
// pseudo-random function, for handshake cookies) and a ChaCha20 keystream generator (for
// tokens and memory-key tags).
//
// Why not util/rng.h: xoshiro256** is fast and replayable but not unpredictable; anyone
// who sees a few outputs (ISNs, source ports) can compute the rest, tokens included. These
// two are standard constructions with published test vectors (util/crypto_test.cc); the
// caller still supplies the 32-byte seed, so a seeded test replays exactly (spec [CONN-5]).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace mroce {

namespace crypto_detail {
constexpr uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
constexpr uint32_t rotl32(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }
inline uint64_t load_le64(const std::byte* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(p[i]);
    return v;
}
inline uint32_t load_le32(const uint8_t* p) {
    return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
}  // namespace crypto_detail

// SipHash-2-4 of `msg` under the 128-bit key (k0, k1): k0 is the key's first 8 bytes read
// little-endian, k1 the next 8.
inline uint64_t siphash24(uint64_t k0, uint64_t k1, std::span<const std::byte> msg) {
    using crypto_detail::rotl64;
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    auto round = [&] {
        v0 += v1; v1 = rotl64(v1, 13); v1 ^= v0; v0 = rotl64(v0, 32);
        v2 += v3; v3 = rotl64(v3, 16); v3 ^= v2;
        v0 += v3; v3 = rotl64(v3, 21); v3 ^= v0;
        v2 += v1; v1 = rotl64(v1, 17); v1 ^= v2; v2 = rotl64(v2, 32);
    };
    const size_t full = msg.size() / 8 * 8;
    for (size_t i = 0; i < full; i += 8) {
        const uint64_t m = crypto_detail::load_le64(msg.data() + i);
        v3 ^= m;
        round();
        round();
        v0 ^= m;
    }
    // The last word: the remaining bytes, little-endian, with the length's low byte on top.
    uint64_t last = static_cast<uint64_t>(msg.size()) << 56;
    for (size_t i = full; i < msg.size(); ++i)
        last |= static_cast<uint64_t>(static_cast<uint8_t>(msg[i])) << (8 * (i - full));
    v3 ^= last;
    round();
    round();
    v0 ^= last;
    v2 ^= 0xff;
    for (int i = 0; i < 4; ++i) round();
    return v0 ^ v1 ^ v2 ^ v3;
}

// chacha20_block writes the 64-byte ChaCha20 block (RFC 8439 §2.3) for key, block counter
// and 96-bit nonce.
inline void chacha20_block(const std::array<uint8_t, 32>& key, uint32_t counter,
                           const std::array<uint8_t, 12>& nonce, uint8_t out[64]) {
    using crypto_detail::load_le32;
    using crypto_detail::rotl32;
    uint32_t s[16] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574};
    for (int i = 0; i < 8; ++i) s[4 + i] = load_le32(key.data() + 4 * i);
    s[12] = counter;
    for (int i = 0; i < 3; ++i) s[13 + i] = load_le32(nonce.data() + 4 * i);
    uint32_t x[16];
    std::memcpy(x, s, sizeof(x));
    auto qr = [&x](int a, int b, int c, int d) {
        x[a] += x[b]; x[d] ^= x[a]; x[d] = rotl32(x[d], 16);
        x[c] += x[d]; x[b] ^= x[c]; x[b] = rotl32(x[b], 12);
        x[a] += x[b]; x[d] ^= x[a]; x[d] = rotl32(x[d], 8);
        x[c] += x[d]; x[b] ^= x[c]; x[b] = rotl32(x[b], 7);
    };
    for (int i = 0; i < 10; ++i) {
        qr(0, 4, 8, 12); qr(1, 5, 9, 13); qr(2, 6, 10, 14); qr(3, 7, 11, 15);
        qr(0, 5, 10, 15); qr(1, 6, 11, 12); qr(2, 7, 8, 13); qr(3, 4, 9, 14);
    }
    for (int i = 0; i < 16; ++i) {
        const uint32_t v = x[i] + s[i];
        for (int b = 0; b < 4; ++b) out[4 * i + b] = static_cast<uint8_t>(v >> (8 * b));
    }
}

using CryptoSeed = std::array<uint8_t, 32>;

// CryptoRng: the ChaCha20 keystream under a 32-byte seed (nonce 0, counter from 0), read
// 8 bytes at a time. Unpredictable to whoever does not know the seed; the same seed gives
// the same sequence. 2^32 blocks (256 GiB) before the counter wraps, far beyond an
// endpoint's life.
class CryptoRng {
public:
    explicit CryptoRng(const CryptoSeed& seed) : key_(seed) {}

    uint64_t next_u64() {
        if (used_ == sizeof(block_)) refill();
        uint64_t v = 0;
        for (int i = 7; i >= 0; --i) v = v << 8 | block_[used_ + i];
        used_ += 8;
        return v;
    }
    uint32_t next_u32() { return static_cast<uint32_t>(next_u64() >> 32); }
    // next_nonzero_u64: a 64-bit value other than 0 (tokens: 0 means "none", [CONN-5]).
    uint64_t next_nonzero_u64() {
        for (;;)
            if (const uint64_t v = next_u64()) return v;
    }

private:
    void refill() {
        chacha20_block(key_, counter_++, std::array<uint8_t, 12>{}, block_);
        used_ = 0;
    }
    CryptoSeed key_;
    uint32_t counter_ = 0;
    uint8_t block_[64] = {};
    size_t used_ = sizeof(block_);
};

// crypto_seed_from: a 32-byte seed expanded from a 64-bit one, for tests and the simulator,
// which replay from a number. A deployment passes 32 bytes from the OS instead.
inline CryptoSeed crypto_seed_from(uint64_t seed) {
    CryptoSeed key{};
    for (int i = 0; i < 8; ++i) key[i] = static_cast<uint8_t>(seed >> (8 * i));
    key[8] = 0x6d;  // "mroce": the key differs from one made of the seed bytes alone
    key[9] = 0x72;
    key[10] = 0x6f;
    key[11] = 0x63;
    key[12] = 0x65;
    CryptoSeed out{};
    uint8_t block[64];
    chacha20_block(key, 0, std::array<uint8_t, 12>{}, block);
    std::memcpy(out.data(), block, out.size());
    return out;
}

}  // namespace mroce
