// util/crc32c_fold.h — CRC32C of long buffers by carry-less multiplication (VPCLMULQDQ).
//
// Why: the CRC32 instruction retires one per cycle at best (8 bytes a cycle, however many
// chains run in parallel), so a 4 KiB packet costs about 520 cycles at each end. Folding
// with AVX-512's VPCLMULQDQ handles 256 bytes per loop with eight multiplications, about
// 32 bytes a cycle where the instruction is pipelined (Ice Lake and later, Zen 4); with
// 256-bit registers (VPCLMULQDQ without AVX-512: Zen 3, Alder Lake) 128 bytes per loop.
// The construction is the one of Intel's white paper "Fast CRC Computation for Generic
// Polynomials Using PCLMULQDQ Instruction" (Gopal et al., 2009), for a reflected CRC; the
// last 128 bits are reduced with two CRC32 instructions instead of a Barrett reduction.
//
// The algebra, for one 128-bit lane: the data is a polynomial over GF(2), its first bit
// the highest power (CRC32C is reflected: bit 0 of byte 0 comes first). A lane loaded from
// memory holds a block A = A_hi·x^64 + A_lo, where the lower quadword is A_hi (bit b is
// the coefficient of x^(63-b)). Moving A forward by D bits only matters modulo P, so
//     A·x^D ≡ A_hi·(x^(D+64) mod P) + A_lo·(x^D mod P),
// two 64 x 32-bit carry-less products of fewer than 128 bits. In this bit order a
// carry-less product of two quadwords comes out multiplied by x (its bit 127 is empty),
// so the constants are x^(D+63) mod P and x^(D-1) mod P, bit-reflected into a quadword
// (fold_constants below). XORing the next block in gives an accumulator congruent to all
// the data so far. At the end, one lane A left, the CRC register is A·x^32 mod P: exactly
// what the CRC32 instruction computes from a zero state over A's 16 bytes, and the last
// bytes (fewer than 16) continue from there. The running state s of a CRC "update" is
// taken in as the CRC32 instruction does: XORed into the first four bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace mroce::crc32c_detail {

// x^e mod P for the CRC32C polynomial P (normal bit order: bit d = coefficient of x^d).
constexpr uint32_t xpow_mod(uint32_t e) {
    constexpr uint64_t kPoly = 0x11EDC6F41u;  // x^32 + 0x1EDC6F41
    uint64_t r = 1;
    for (uint32_t i = 0; i < e; ++i) {
        r <<= 1;
        if (r & (uint64_t{1} << 32)) r ^= kPoly;
    }
    return static_cast<uint32_t>(r);
}
// reflect64: the coefficient of x^d at bit 63 - d, the order of a lane's quadwords.
constexpr uint64_t reflect64(uint64_t v) {
    uint64_t r = 0;
    for (int i = 0; i < 64; ++i)
        if (v & (uint64_t{1} << i)) r |= uint64_t{1} << (63 - i);
    return r;
}
// fold_constants: {multiplier of the lower quadword, of the upper} that move a 128-bit
// lane forward by `bits`.
constexpr std::array<uint64_t, 2> fold_constants(uint32_t bits) {
    return {reflect64(xpow_mod(bits + 63)), reflect64(xpow_mod(bits - 1))};
}

// Distances: 4 accumulators of 512 bits (2048) or of 256 bits (1024), one accumulator
// (512, 256), one lane (128, 256, 384: the lanes of the last accumulator to its last).
inline constexpr auto kFold2048 = fold_constants(2048);
inline constexpr auto kFold1024 = fold_constants(1024);
inline constexpr auto kFold512 = fold_constants(512);
inline constexpr auto kFold384 = fold_constants(384);
inline constexpr auto kFold256 = fold_constants(256);
inline constexpr auto kFold128 = fold_constants(128);

// The folding paths pay for their set-up from about this length on; shorter buffers take
// the CRC32 instruction alone.
inline constexpr size_t kFoldMinBytes = 256;

#if defined(__x86_64__)
#define MROCE_CRC_FOLD128 __attribute__((target("pclmul,sse4.2")))
#define MROCE_CRC_FOLD256 __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.2")))
#define MROCE_CRC_FOLD512 __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.2")))

// fold128: `acc` moved forward by the distance of `k`, XORed with `next`.
MROCE_CRC_FOLD128 inline __m128i fold128(__m128i acc, const std::array<uint64_t, 2>& k, __m128i next) {
    const __m128i kk = _mm_set_epi64x(static_cast<long long>(k[1]), static_cast<long long>(k[0]));
    const __m128i lo = _mm_clmulepi64_si128(acc, kk, 0x00);
    const __m128i hi = _mm_clmulepi64_si128(acc, kk, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

// fold_finish: the last 16-byte blocks into x, then x's CRC from a zero state (the
// register after everything folded so far), then the last 0..15 bytes.
MROCE_CRC_FOLD128 inline uint32_t fold_finish(__m128i x, const std::byte* p, size_t n) {
    while (n >= 16) {
        x = fold128(x, kFold128, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        p += 16;
        n -= 16;
    }
    uint64_t c = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(x)));
    c = _mm_crc32_u64(c, static_cast<uint64_t>(_mm_extract_epi64(x, 1)));
    if (n >= 8) {
        uint64_t v;
        __builtin_memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    auto c32 = static_cast<uint32_t>(c);
    while (n-- > 0) c32 = _mm_crc32_u8(c32, static_cast<uint8_t>(*p++));
    return c32;
}

MROCE_CRC_FOLD512 inline __m512i fold_constants_512(const std::array<uint64_t, 2>& k) {
    const auto lo = static_cast<long long>(k[0]), hi = static_cast<long long>(k[1]);
    return _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo);
}
MROCE_CRC_FOLD512 inline __m512i load512(const std::byte* p) { return _mm512_loadu_si512(p); }
// fold512: every lane of `acc` moved forward by the distance of `k`, XORed with `next`.
MROCE_CRC_FOLD512 inline __m512i fold512(__m512i acc, __m512i k, __m512i next) {
    const __m512i lo = _mm512_clmulepi64_epi128(acc, k, 0x00);
    const __m512i hi = _mm512_clmulepi64_epi128(acc, k, 0x11);
    return _mm512_ternarylogic_epi64(lo, hi, next, 0x96);  // lo ^ hi ^ next
}

// crc32c_fold512_update: same contract as crc32c_hw_update, for data.size() >=
// kFoldMinBytes, only on a CPU with AVX-512F, AVX-512VL and VPCLMULQDQ (fold512_supported).
MROCE_CRC_FOLD512 inline uint32_t crc32c_fold512_update(uint32_t state, std::span<const std::byte> data) {
    const std::byte* p = data.data();
    size_t n = data.size();
    __m512i a0 = _mm512_xor_si512(load512(p), _mm512_maskz_set1_epi32(1, static_cast<int>(state)));
    __m512i a1 = load512(p + 64), a2 = load512(p + 128), a3 = load512(p + 192);
    p += 256;
    n -= 256;
    const __m512i k2048 = fold_constants_512(kFold2048);
    while (n >= 256) {
        a0 = fold512(a0, k2048, load512(p));
        a1 = fold512(a1, k2048, load512(p + 64));
        a2 = fold512(a2, k2048, load512(p + 128));
        a3 = fold512(a3, k2048, load512(p + 192));
        p += 256;
        n -= 256;
    }
    const __m512i k512 = fold_constants_512(kFold512);
    a1 = fold512(a0, k512, a1);
    a2 = fold512(a1, k512, a2);
    a3 = fold512(a2, k512, a3);
    while (n >= 64) {
        a3 = fold512(a3, k512, load512(p));
        p += 64;
        n -= 64;
    }
    // The four lanes of the last accumulator into one: lane i moves by 128 x (3 - i) bits.
    // (The zero-masked extract: GCC 12 warns that the plain one reads an undefined value.)
    __m128i x = fold128(_mm512_maskz_extracti32x4_epi32(0xF, a3, 0), kFold384,
                        _mm512_maskz_extracti32x4_epi32(0xF, a3, 3));
    x = fold128(_mm512_maskz_extracti32x4_epi32(0xF, a3, 1), kFold256, x);
    x = fold128(_mm512_maskz_extracti32x4_epi32(0xF, a3, 2), kFold128, x);
    return fold_finish(x, p, n);
}

MROCE_CRC_FOLD256 inline __m256i fold_constants_256(const std::array<uint64_t, 2>& k) {
    const auto lo = static_cast<long long>(k[0]), hi = static_cast<long long>(k[1]);
    return _mm256_set_epi64x(hi, lo, hi, lo);
}
MROCE_CRC_FOLD256 inline __m256i load256(const std::byte* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
MROCE_CRC_FOLD256 inline __m256i fold256(__m256i acc, __m256i k, __m256i next) {
    const __m256i lo = _mm256_clmulepi64_epi128(acc, k, 0x00);
    const __m256i hi = _mm256_clmulepi64_epi128(acc, k, 0x11);
    return _mm256_xor_si256(_mm256_xor_si256(lo, hi), next);
}

// crc32c_fold256_update: the same with 256-bit registers, 128 bytes per loop, for CPUs with
// VPCLMULQDQ but no AVX-512 (AMD Zen 3, Intel Alder Lake): fold256_supported.
MROCE_CRC_FOLD256 inline uint32_t crc32c_fold256_update(uint32_t state, std::span<const std::byte> data) {
    const std::byte* p = data.data();
    size_t n = data.size();
    __m256i a0 = _mm256_xor_si256(load256(p), _mm256_setr_epi32(static_cast<int>(state), 0, 0, 0, 0, 0, 0, 0));
    __m256i a1 = load256(p + 32), a2 = load256(p + 64), a3 = load256(p + 96);
    p += 128;
    n -= 128;
    const __m256i k1024 = fold_constants_256(kFold1024);
    while (n >= 128) {
        a0 = fold256(a0, k1024, load256(p));
        a1 = fold256(a1, k1024, load256(p + 32));
        a2 = fold256(a2, k1024, load256(p + 64));
        a3 = fold256(a3, k1024, load256(p + 96));
        p += 128;
        n -= 128;
    }
    const __m256i k256 = fold_constants_256(kFold256);
    a1 = fold256(a0, k256, a1);
    a2 = fold256(a1, k256, a2);
    a3 = fold256(a2, k256, a3);
    while (n >= 32) {
        a3 = fold256(a3, k256, load256(p));
        p += 32;
        n -= 32;
    }
    const __m128i x = fold128(_mm256_castsi256_si128(a3), kFold128, _mm256_extracti128_si256(a3, 1));
    return fold_finish(x, p, n);
}
#undef MROCE_CRC_FOLD128
#undef MROCE_CRC_FOLD256
#undef MROCE_CRC_FOLD512

// fold512_supported, fold256_supported: this CPU (and the OS, for the wide registers) runs
// crc32c_fold512_update, crc32c_fold256_update.
inline bool fold512_supported() {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("sse4.2");
}
inline bool fold256_supported() {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq") &&
           __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.2");
}
#else
inline bool fold512_supported() { return false; }
inline bool fold256_supported() { return false; }
inline uint32_t crc32c_fold512_update(uint32_t state, std::span<const std::byte>) { return state; }  // never called
inline uint32_t crc32c_fold256_update(uint32_t state, std::span<const std::byte>) { return state; }  // never called
#endif

}  // namespace mroce::crc32c_detail
