#include "sim/ecmp.h"

namespace mroce::sim {

namespace {

// The finaliser of MurmurHash3: a full-avalanche 64-bit bijection.
uint64_t fmix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

}  // namespace

uint64_t ecmp_hash(uint64_t salt, uint32_t src_ip, uint32_t dst_ip, uint16_t src_port,
                   uint16_t dst_port, uint8_t protocol) {
    const uint64_t ips = uint64_t{src_ip} << 32 | dst_ip;
    const uint64_t ports = uint64_t{src_port} << 24 | uint64_t{dst_port} << 8 | protocol;
    return fmix64(fmix64(salt ^ ips) ^ ports);
}

}  // namespace mroce::sim
