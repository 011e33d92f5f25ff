// util/packet_meta.h — addressing and ECN of one datagram, shared by the engine interface
// (core/engine.h) and the datapath interface (datapath/datapath.h) so neither depends on
// the other.
#pragma once

#include <cstdint>

#include "util/address.h"
#include "util/time.h"

namespace mroce {

// IP ECN codepoints (RFC 3168).
namespace ecn {
inline constexpr uint8_t kNotEct = 0b00;
inline constexpr uint8_t kEct1 = 0b01;
inline constexpr uint8_t kEct0 = 0b10;
inline constexpr uint8_t kCe = 0b11;
}  // namespace ecn

struct PacketMeta {
    Address src;              // local (tx) or remote (rx) IP and UDP port
    Address dst;              // remote (tx) or local (rx) IP and UDP port
    uint8_t ecn = ecn::kNotEct;
    uint16_t local_port = 0;  // NIC port / plane index the packet leaves or arrived on
    // Priority the packet leaves in (tx; 0 on rx): a switch queue / PFC class, 0..7 as the
    // 802.1Q priorities a queue pair's service level maps to (spec [STREAM-14]). Local
    // metadata for the datapath, never on the wire in a protocol header.
    uint8_t traffic_class = 0;
    // rx: when the datagram reached this host, on the engine's clock, where the datapath
    // can tell (a NIC's receive timestamp; the kernel's, datapath/udp); kNever where it
    // cannot (the engine then takes the time it handles the datagram). The gap between
    // the two is the host's own receive backlog, which the downlink's queue signal of
    // spec [CC-14] must not include. Unused on tx.
    Time arrival = kNever;
};

// A set of NIC ports (Engine::set_ready_ports): bit p stands for local_port p; ports from
// 64 on are always in it.
inline constexpr uint64_t kAllPorts = ~uint64_t{0};
constexpr bool port_ready(uint64_t ports, uint16_t local_port) {
    return local_port >= 64 || ((ports >> local_port) & 1u) != 0;
}

}  // namespace mroce
