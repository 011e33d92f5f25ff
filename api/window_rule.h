// api/window_rule.h — the congestion window per path that a Device over the UDP datapath
// uses unless the application sets its own (DeviceConfig::fit_window_to_datapath).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/config.h"
#include "wire/ack.h"

namespace mroce::api {

// udp_window_per_path: the engine's default window ([CC-1], 256 KiB) was sized for the
// simulator's shallow switch queues. Over UDP sockets the queue that matters is the
// receiver's socket buffer, and a window far below what it holds leaves the sender waiting
// for ACKs whenever either process is descheduled for a moment. So: every path's window
// together fits the receive buffer the kernel granted (the peer is assumed to run the same
// datapath configuration), no path holds more than a full PSN window of packets ([PATH-5]:
// the 256-bit SACK span), and the configured window is the floor (the rule only raises it).
inline uint64_t udp_window_per_path(const core::EndpointConfig& cfg, size_t recv_buffer_bytes) {
    const uint64_t psn_window = uint64_t{wire::kSackBits} * cfg.max_payload;
    const uint64_t share = recv_buffer_bytes / std::max<uint16_t>(cfg.num_paths, 1);
    return std::max(cfg.window_bytes_per_path, std::min(psn_window, share));
}

}  // namespace mroce::api
