// util/crc32c.h — CRC32C (Castagnoli): the integrity trailer's checksum (spec [INT-2]).
//
// Polynomial 0x1EDC6F41 (reflected 0x82F63B78), reflected input and output, initial value
// and final XOR 0xFFFFFFFF: the CRC of iSCSI (RFC 3720 B.4), ext4 and SCTP. Check value
// crc32c("123456789") = 0xE3069283.
//
// Three implementations that give the same answer (util/crc32c_test.cc checks that they do):
// - crc32c_fold: carry-less multiplication with VPCLMULQDQ, 256 bytes per loop in AVX-512
//   registers or 128 in AVX2 ones (util/crc32c_fold.h), for buffers of kFoldMinBytes or
//   more: about four times the speed of the CRC32 instruction, which retires at most one
//   per cycle.
// - crc32c_hw: the SSE4.2 CRC32 instruction, 8 bytes per instruction, three blocks in
//   parallel.
// - crc32c_sw: slicing-by-8 over tables computed at compile time, for any CPU.
// The first two are compiled with target attributes, so the rest of the build needs no
// -msse4.2 or -mavx512f, and only called when the CPU has them. crc32c() picks at run time
// from what the CPU has, found once (crc32c_detail::impl()); the choice costs a load and a
// branch or two per call.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#include "util/crc32c_fold.h"

namespace mroce {

inline constexpr uint32_t kCrc32cPolyReflected = 0x82F63B78u;

namespace crc32c_detail {

using Tables = std::array<std::array<uint32_t, 256>, 8>;

// tables[0] is the classic byte-at-a-time table; tables[k][b] is the CRC of byte b
// followed by k zero bytes, so eight table look-ups advance the CRC by 8 bytes.
constexpr Tables make_tables() {
    Tables t{};
    for (uint32_t b = 0; b < 256; ++b) {
        uint32_t c = b;
        for (int i = 0; i < 8; ++i) c = (c >> 1) ^ (kCrc32cPolyReflected & (0u - (c & 1u)));
        t[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; ++b)
        for (size_t k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
    return t;
}
inline constexpr Tables kTables = make_tables();

// Shifting a CRC over n zero bytes is linear over GF(2): a 32x32 bit matrix, applied here
// through four 256-entry tables (one per byte of the CRC). The hardware path runs three
// independent CRCs over three adjacent blocks (the instruction has a latency of 3 cycles and
// a throughput of 1, so one dependent chain uses a third of it) and joins them with these
// shifts; the construction is Mark Adler's (crc32c.c, zlib licence).
using ShiftTables = std::array<std::array<uint32_t, 256>, 4>;
constexpr uint32_t gf2_times(const std::array<uint32_t, 32>& m, uint32_t v) {
    uint32_t sum = 0;
    for (int i = 0; v; v >>= 1, ++i)
        if (v & 1) sum ^= m[static_cast<size_t>(i)];
    return sum;
}
constexpr std::array<uint32_t, 32> gf2_square(const std::array<uint32_t, 32>& m) {
    std::array<uint32_t, 32> sq{};
    for (size_t i = 0; i < 32; ++i) sq[i] = gf2_times(m, m[i]);
    return sq;
}
// make_shift: the tables that append `len` zero bytes to a CRC register.
constexpr ShiftTables make_shift(size_t len) {
    std::array<uint32_t, 32> odd{}, even{};
    odd[0] = kCrc32cPolyReflected;  // one zero bit
    for (size_t i = 1; i < 32; ++i) odd[i] = 1u << (i - 1);
    even = gf2_square(odd);  // two zero bits
    odd = gf2_square(even);  // four
    std::array<uint32_t, 32> op{};
    for (;;) {  // squaring steps: eight bits, then doubling, as len's bits say
        even = gf2_square(odd);
        len >>= 1;
        if (len == 0) {
            op = even;
            break;
        }
        odd = gf2_square(even);
        len >>= 1;
        if (len == 0) {
            op = odd;
            break;
        }
    }
    ShiftTables t{};
    for (uint32_t n = 0; n < 256; ++n)
        for (size_t k = 0; k < 4; ++k) t[k][n] = gf2_times(op, n << (8 * k));
    return t;
}
inline constexpr size_t kLongBlock = 512, kShortBlock = 64;
inline constexpr ShiftTables kShiftLong = make_shift(kLongBlock);
inline constexpr ShiftTables kShiftShort = make_shift(kShortBlock);
inline uint32_t shift(const ShiftTables& t, uint32_t crc) {
    return t[0][crc & 0xFF] ^ t[1][(crc >> 8) & 0xFF] ^ t[2][(crc >> 16) & 0xFF] ^ t[3][crc >> 24];
}

inline uint64_t load_le64(const std::byte* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);  // unaligned-safe; the build is little-endian (wire/buffer.h)
    return v;
}

}  // namespace crc32c_detail

// crc32c_sw_update continues a CRC over `data`. `state` is the running register (start
// with 0xFFFFFFFF, XOR the end with 0xFFFFFFFF), so a buffer may be fed in pieces.
inline uint32_t crc32c_sw_update(uint32_t state, std::span<const std::byte> data) {
    using crc32c_detail::kTables;
    const std::byte* p = data.data();
    size_t n = data.size();
    uint32_t c = state;
    while (n >= 8) {
        const uint64_t v = crc32c_detail::load_le64(p) ^ c;
        c = kTables[7][v & 0xFF] ^ kTables[6][(v >> 8) & 0xFF] ^ kTables[5][(v >> 16) & 0xFF] ^
            kTables[4][(v >> 24) & 0xFF] ^ kTables[3][(v >> 32) & 0xFF] ^
            kTables[2][(v >> 40) & 0xFF] ^ kTables[1][(v >> 48) & 0xFF] ^ kTables[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n-- > 0) c = (c >> 8) ^ kTables[0][(c ^ static_cast<uint8_t>(*p++)) & 0xFF];
    return c;
}

inline uint32_t crc32c_sw(std::span<const std::byte> data) {
    return crc32c_sw_update(0xFFFFFFFFu, data) ^ 0xFFFFFFFFu;
}

#if defined(__x86_64__)
// crc32c_hw_supported: this CPU has SSE4.2's CRC32 instruction.
inline bool crc32c_hw_supported() { return __builtin_cpu_supports("sse4.2"); }

// Call only when crc32c_hw_supported(). Same contract as crc32c_sw_update.
__attribute__((target("sse4.2"))) inline uint32_t crc32c_hw_update(
    uint32_t state, std::span<const std::byte> data) {
    using crc32c_detail::load_le64;
    const std::byte* p = data.data();
    size_t n = data.size();
    uint64_t c = state;
    // Three blocks at a time, joined by shifts (see crc32c_detail): a 4 KiB payload takes
    // two rounds of 3 x 512 bytes and the rest in rounds of 3 x 64.
    for (const auto& [block, table] : {std::pair{crc32c_detail::kLongBlock, &crc32c_detail::kShiftLong},
                                       std::pair{crc32c_detail::kShortBlock, &crc32c_detail::kShiftShort}}) {
        while (n >= 3 * block) {
            uint64_t c1 = 0, c2 = 0;
            for (size_t i = 0; i < block; i += 8) {
                c = _mm_crc32_u64(c, load_le64(p + i));
                c1 = _mm_crc32_u64(c1, load_le64(p + block + i));
                c2 = _mm_crc32_u64(c2, load_le64(p + 2 * block + i));
            }
            c = crc32c_detail::shift(*table, static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c1);
            c = crc32c_detail::shift(*table, static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c2);
            p += 3 * block;
            n -= 3 * block;
        }
    }
    while (n >= 8) {
        c = _mm_crc32_u64(c, load_le64(p));
        p += 8;
        n -= 8;
    }
    uint32_t c32 = static_cast<uint32_t>(c);
    while (n-- > 0) c32 = _mm_crc32_u8(c32, static_cast<uint8_t>(*p++));
    return c32;
}
#else
inline bool crc32c_hw_supported() { return false; }
inline uint32_t crc32c_hw_update(uint32_t state, std::span<const std::byte> data) {
    return crc32c_sw_update(state, data);  // never called: no instruction to use
}
#endif

inline uint32_t crc32c_hw(std::span<const std::byte> data) {
    return crc32c_hw_update(0xFFFFFFFFu, data) ^ 0xFFFFFFFFu;
}

// crc32c_fold: the CRC32C of `data` by folding, with the widest registers the CPU has;
// only when crc32c_fold_supported().
inline bool crc32c_fold_supported() {
    return crc32c_detail::fold512_supported() || crc32c_detail::fold256_supported();
}
inline uint32_t crc32c_fold(std::span<const std::byte> data) {
    if (data.size() < crc32c_detail::kFoldMinBytes) return crc32c_hw(data);
    const uint32_t c = crc32c_detail::fold512_supported() ? crc32c_detail::crc32c_fold512_update(0xFFFFFFFFu, data)
                                                          : crc32c_detail::crc32c_fold256_update(0xFFFFFFFFu, data);
    return c ^ 0xFFFFFFFFu;
}

namespace crc32c_detail {
enum class Impl : uint8_t { kTables, kInstruction, kFold256, kFold512 };
// impl: the fastest implementation this CPU runs, found on the first call.
inline Impl impl() {
    static const Impl best = [] {
#if defined(__x86_64__)
        __builtin_cpu_init();  // may run before the runtime's own constructor
#endif
        if (fold512_supported()) return Impl::kFold512;
        if (fold256_supported()) return Impl::kFold256;
        return crc32c_hw_supported() ? Impl::kInstruction : Impl::kTables;
    }();
    return best;
}
}  // namespace crc32c_detail

// crc32c: the CRC32C of `data`, with the fastest instructions the CPU has.
inline uint32_t crc32c(std::span<const std::byte> data) {
    using crc32c_detail::Impl;
    const Impl i = crc32c_detail::impl();
    if (i == Impl::kTables) return crc32c_sw(data);
    if (data.size() < crc32c_detail::kFoldMinBytes || i == Impl::kInstruction) return crc32c_hw(data);
    const uint32_t c = i == Impl::kFold512 ? crc32c_detail::crc32c_fold512_update(0xFFFFFFFFu, data)
                                           : crc32c_detail::crc32c_fold256_update(0xFFFFFFFFu, data);
    return c ^ 0xFFFFFFFFu;
}

}  // namespace mroce
