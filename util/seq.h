// util/seq.h — 32-bit serial-number arithmetic (RFC 1982 style) for PSNs and stream
// sequence numbers, which start at random values and wrap.
#pragma once

#include <cstdint>

namespace mroce {

// seq_diff(a, b) is the signed distance a - b, valid while |a - b| < 2^31.
constexpr int32_t seq_diff(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b); }
constexpr bool seq_lt(uint32_t a, uint32_t b) { return seq_diff(a, b) < 0; }
constexpr bool seq_le(uint32_t a, uint32_t b) { return seq_diff(a, b) <= 0; }
constexpr bool seq_gt(uint32_t a, uint32_t b) { return seq_diff(a, b) > 0; }
constexpr bool seq_ge(uint32_t a, uint32_t b) { return seq_diff(a, b) >= 0; }
constexpr uint32_t seq_max(uint32_t a, uint32_t b) { return seq_gt(a, b) ? a : b; }

// 8-bit generation numbers compare the same way.
constexpr int8_t gen_diff(uint8_t a, uint8_t b) { return static_cast<int8_t>(a - b); }

}  // namespace mroce
