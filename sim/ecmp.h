// sim/ecmp.h — the ECMP hash shared by the flat Network and the switches.
//
// A route is chosen by hashing the UDP 5-tuple with a per-element salt, so the sender's
// UDP source port picks the path (what MetaRoCE's paths rely on) and two switches with
// different salts make independent choices (no polarisation between tiers).
#pragma once

#include <cstdint>

namespace mroce::sim {

inline constexpr uint8_t kProtocolUdp = 17;

// ecmp_hash is the route hash of one 5-tuple under salt: a seeded 64-bit mix, so routes
// are uniform over source ports and independent between salts (switches).
uint64_t ecmp_hash(uint64_t salt, uint32_t src_ip, uint32_t dst_ip, uint16_t src_port,
                   uint16_t dst_port, uint8_t protocol = kProtocolUdp);

}  // namespace mroce::sim
