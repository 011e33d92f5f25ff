// util/muldiv.h — a × b / c in integers without overflowing the product: rates in bit/s
// times nanoseconds exceed 64 bits (100 Gbit/s × 1 s = 10^20).
#pragma once

#include <cstdint>

namespace mroce {

// mul_div: a × b / c rounded down (up when `round_up`); c must not be 0. The result must
// fit 64 bits, which the callers' ranges guarantee.
inline uint64_t mul_div(uint64_t a, uint64_t b, uint64_t c, bool round_up = false) {
    uint64_t p64;
    if (!__builtin_mul_overflow(a, b, &p64) && (!round_up || p64 <= UINT64_MAX - (c - 1)))
        return (p64 + (round_up ? c - 1 : 0)) / c;  // the common case: one 64-bit division
    __extension__ using u128 = unsigned __int128;
    const u128 p = static_cast<u128>(a) * b;
    return static_cast<uint64_t>((p + (round_up ? c - 1 : 0)) / c);
}

}  // namespace mroce
