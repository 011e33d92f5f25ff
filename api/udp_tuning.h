// api/udp_tuning.h — the engine settings a Device over the UDP datapath uses where they
// differ from the spec's defaults: congestion control, the rate hint's interval and the
// pacer's burst (udp_endpoint_defaults), the window per path
// (DeviceConfig::fit_window_to_datapath) and the ACK rate (DeviceConfig::fit_acks_to_datapath),
// unless the application keeps its own.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/config.h"
#include "util/time.h"
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

// The rate hint's recomputation interval over UDP ([CC-12]: about one base RTT). The
// spec's 8 µs suits a data-centre fabric; through two kernels the RTT is tens of µs (perf
// --lat on loopback: ~15-30 µs one way), and the hint rides in ACKs that the receiver
// delays up to kUdpMaxAckDelay (50 µs, below): recomputing more often than ACKs leave
// would only spend CPU. 100 µs is about one RTT with the ACK delay.
inline constexpr Duration kUdpHintInterval = std::chrono::microseconds(100);
// The pacer's bucket over UDP, in max_payload packets ([CC-17]). The driver sends up to
// Driver::kBatch (120) datagrams per pass, which the datapath turns into one GSO
// super-packet of 15 full datagrams per path for the default 8 paths (api/driver.h). A
// bucket below one pass's worth would split those super-packets and cost a system call and
// a wake-up per few datagrams; the spec's 16 KiB (4 packets) is sized for a NIC that
// paces in hardware. The pacer also caps a burst at one hint_interval at its rate
// ([CC-17]), so below about 39 Gbit/s (120 packets per 100 µs) a pass is split all the
// same: a slow connection must not bank a whole pass. Checked against Driver::kBatch in
// api/driver.cc.
inline constexpr uint32_t kUdpPacingBurstPackets = 120;

// udp_endpoint_defaults: the engine settings a Device starts from (DeviceConfig::endpoint).
// They differ from the spec's defaults in what a kernel datapath needs:
// - ECN AIMD (spec §9.1), the engine's default too (set here so a Device never depends
//   on it). Over real
//   networks the fitted window (up to 1 MiB per path) is far more than a switch queue
//   holds; a fixed window that size turns every queue it meets into losses until retries
//   run out, where AIMD backs off to what the fabric carries.
// - hint_interval kUdpHintInterval and pacing_burst_bytes kUdpPacingBurstPackets packets
//   (above): RTTs and send batches of a kernel datapath, not of a NIC.
// - path_run_segments kUdpPathRun: round-robin gives each path runs of a GSO
//   super-packet's worth of full segments ([PATH-10]), so a pass that sends a few dozen
//   segments makes a few super-packets, not one per path with one or two datagrams each,
//   and the receiver reads as few GRO receives (issue 15: ib_write_bw's tight poll loop
//   sent 5.5 datagrams per GSO send, mroce perf 13.1).
// - tail_copies off ([LOSS-16]): on an OS-scheduled host a late ACK (a peer descheduled
//   past min_pto) makes a drained sender's first timeout spurious, and with the copies each
//   such timeout re-sends the path's tail as RETX DATA: bandwidth and duplicates for
//   nothing, where the rule saves a PTO's worth only after a real tail loss. Repeating the
//   conformance suite over loopback on a loaded machine with the copies on (5 Dec, about
//   340 runs) showed such copies taken for the retry of an RNR wait, for the delivery
//   probe and for an atomic's answer (the suite now passes over copies, and the engine no
//   longer sends one queued before an RNR NACK), and sender.path_failure failing 3 times
//   (once with the target's connection gone at 10 s; not explained), where the same
//   suite with the copies off failed only in ways both builds shared. The copies were
//   measured in the simulator, whose fabric they are for.
// rate_hint, pacing and port_rate_bps keep the engine's defaults (mroce perf --no-hint,
// --no-pacing, --line-rate change them).
inline constexpr uint16_t kUdpPathRun = 15;  // 15 x 4168 bytes: one GSO super-packet (<= 65000)

inline core::EndpointConfig udp_endpoint_defaults() {
    core::EndpointConfig c;
    c.congestion_control = core::EndpointConfig::Cc::kAimd;
    c.hint_interval = kUdpHintInterval;
    c.pacing_burst_bytes = uint64_t{kUdpPacingBurstPackets} * c.max_payload;
    c.path_run_segments = kUdpPathRun;
    c.tail_copies = false;
    return c;
}

// SO_BUSY_POLL a busy-polling device (DeviceConfig::busy_poll) asks for on its socket, in
// µs, unless UdpOptions::busy_poll_us says otherwise: the kernel's suggested value
// (Documentation/networking/napi.rst), about one wire round trip of a NIC with NAPI.
inline constexpr int kBusyPollSocketUs = 50;

// The delayed-ACK bound fit_udp_acks uses: far below the smallest probe timeout ([LOSS-4],
// 200 µs), so a delayed ACK never looks like a lost one, and long enough that a path
// receiving a few Gbit/s gathers several packets per ACK.
inline constexpr Duration kUdpMaxAckDelay = std::chrono::microseconds(50);

// fit_udp_acks: the engine's ACK rule ([ACK-11]: every 2 packets, 10 µs) was sized for the
// simulator, where an ACK costs a few hundred ns. Through the kernel each ACK datagram costs
// both hosts a socket write and read (µs), and the receiver already answers a whole receive
// batch with one round of ACKs ([ACK-13]). So: one ACK per eighth of the window on each
// path, within kUdpMaxAckDelay; ACK_NOW only on the last message before the sender pauses
// ([ACK-12]); and a round of ACKs takes the other paths' delayed ones along ([ACK-13]
// gather_acks), one system call for what would be several. The window here is the
// sender's cap (window_bytes_per_path), taken as the receiver's own: both ends of a Device
// pair run the same rule. An eighth leaves the sender seven eighths of its window to send
// while the ACK travels. The receiver cannot see the sender's congestion window: while AIMD
// holds it below an eighth of the cap (slow start, a marking fabric), the delay bound, not
// the count, paces the ACKs. Settings only grow.
inline void fit_udp_acks(core::EndpointConfig& cfg) {
    const uint64_t window_pkts = cfg.window_bytes_per_path / std::max<uint32_t>(cfg.max_payload, 1);
    cfg.ack_every = std::max<uint32_t>(cfg.ack_every, static_cast<uint32_t>(window_pkts / 8));
    cfg.max_ack_delay = std::max(cfg.max_ack_delay, kUdpMaxAckDelay);
    cfg.ack_now_every_message = false;
    cfg.gather_acks = true;
}

}  // namespace mroce::api
