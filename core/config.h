// core/config.h — every tunable of an endpoint, with the spec's defaults.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "util/time.h"
#include "wire/control.h"
#include "wire/header.h"

namespace mroce::core {

struct EndpointConfig {
    // spec §2 [UDP-1]: the UDP port this endpoint receives on.
    uint16_t port = wire::kDefaultPort;
    // spec §5 [PATH-1]: paths per connection and how many NIC ports (planes) to spread them on.
    uint16_t num_paths = 8;
    uint16_t num_local_ports = 1;
    // spec §2 [UDP-3]: payload bytes per DATA packet.
    uint32_t max_payload = wire::kDefaultMaxPayload;
    // spec §4.9 [INT-1], [INT-7]: announce INTEGRITY, a CRC32C trailer on every packet of a
    // connection whose peer announces it too. Off by default in this revision; the aim is
    // on: it now costs about 5% of CPU per byte (docs/results.md), and a corrupted byte
    // placed in application memory is the worst a transport can do.
    bool integrity_check = false;
    // spec [WIRE-10]: announce COALESCE, an ACK and a DATA of one connection in one datagram.
    // Used only with ack_with_reverse_data ([ACK-12]), where the ACK that rides with an
    // answer would otherwise go as a second datagram of a GSO super-packet.
    bool coalesce = true;
    // spec [ACK-21]: announce SHORT_ACK; with a peer that announces it too, an ACK whose SACK
    // bitmap is empty (every loss-free ACK) leaves the bitmap out: 48 bytes instead of 80.
    // ACKs share the links with DATA in both directions, so this is link capacity.
    bool short_acks = true;
    // spec [DATA-9]: announce COMPACT_DATA; with a peer that announces it too, a DATA whose
    // opcode consumes no receive (WRITEs, READ and atomic requests and answers) leaves out
    // recv_seq and immediate, which it does not use: a 64-byte header instead of 72.
    // Off by default: in the simulator it gained nothing on bench-a2a64 (seeds 1-7) and
    // moved the 16 -> 1 incast's settling point into its idle dip (docs/results.md,
    // "Compact DATA headers").
    bool compact_data = false;
    // spec §9: the congestion controller, ECN AIMD ([CC-7], the default) or the fixed
    // window ([CC-1], kept as an ablation and for the loss-theory tests).
    enum class Cc : uint8_t { kFixed, kAimd };
    Cc congestion_control = Cc::kAimd;
    // spec §9.2: this endpoint computes each sender's fair share of its inbound capacity and
    // returns it in every ACK ([CC-11]); as a sender it paces at the peer's hint ([CC-16]).
    bool rate_hint = true;
    // spec §9.3 [CC-17]: pace new DATA at min(window rate, hint); false = ack-clocked only.
    bool pacing = true;
    // spec §5: which path new data goes to: round-robin ([PATH-10], [PATH-13]; the default)
    // or round-robin over the paths with at least half the most window room ([PATH-14]).
    enum class PathSelection : uint8_t { kRoundRobin, kRoom };
    PathSelection path_selection = PathSelection::kRoundRobin;
    // [PATH-10]: round-robin gives a path a run of up to this many consecutive new
    // segments before the cursor moves on. 1 sprays segment by segment (a NIC, the
    // simulator); a kernel UDP datapath sends each source port's run as one GSO
    // super-packet and the receiver reads it as one GRO receive, so runs save both hosts
    // CPU per byte (api/udp_tuning.h).
    uint16_t path_run_segments = 1;
    // [CC-12]: inbound capacity = port_rate_bps x num_local_ports, unless
    // inbound_capacity_bps is set (non-zero).
    uint64_t port_rate_bps = 100'000'000'000;
    uint64_t inbound_capacity_bps = 0;
    // [CC-13]: the weight of each traffic class in the receiver's fair share (1..255).
    std::array<uint8_t, 8> class_weights{1, 1, 1, 1, 1, 1, 1, 1};
    // [CC-12]: how often the receiver recomputes the shares; about one base RTT.
    Duration hint_interval = 8us;
    // [CC-15]: bytes a connection may have in flight before its first ACK (its first RTT),
    // and at any time (all paths together).
    uint64_t first_rtt_bytes = 32 * 1024;
    uint64_t max_inflight_bytes = 8 * 1024 * 1024;
    // [CC-15]: a connection that idles after a hint starts again with one BDP at that hint,
    // halved for each idle_halving_rtts round trips since the hint expired (0: with
    // first_rtt_bytes, as a new one).
    uint16_t idle_halving_rtts = 8;
    // [CC-20]: a responder's HELLO_ACK grants the new sender a share of its downlink, and an
    // initiator's first round trip may have one handshake RTT's worth of it in flight
    // (false: no grant sent, none taken; the ablation).
    bool hello_grant = true;
    // [CC-20]: the grant also caps a new connection's first round trip below
    // first_rtt_bytes (at least one packet) unless this endpoint's own ports would spread
    // its first round trips: while its connections in their first round trip, more than
    // one, at first_rtt_bytes each, hold more than one BDP of its ports over the
    // handshake's round trip (a lone connection is always capped). An incast's senders,
    // one connection each, then send what the receiver granted
    // (A, A/2, ..., A/N: about A x S x ln N together, not N x first_rtt_bytes), while an
    // all-to-all's senders, held by their own NICs, keep first_rtt_bytes each. Off by
    // default: it settles an incast's queue sooner but reads worse on converge_rtts
    // (docs/results.md, "The grant as the first round trip's cap").
    bool grant_caps_first_rtt = false;
    // [CC-21]: a sender that has brought fewer than young_bytes since it became active counts
    // young_weight times its weight in the receiver's shares (1: no preference).
    uint8_t young_weight = 16;
    uint32_t young_bytes = 128 * 1024;
    // [CC-17]: the pacer's bucket depth: how far ahead of its rate a connection may send.
    uint64_t pacing_burst_bytes = 16 * 1024;
    // Bytes in flight per path: the fixed window, or AIMD's cap ([CC-1], [CC-7]).
    uint64_t window_bytes_per_path = 64 * 4096;
    // Where AIMD's slow start begins on every path ([CC-7]); kept within one max_payload
    // packet .. window_bytes_per_path.
    uint64_t initial_window_bytes_per_path = 16 * 4096;

    // spec §6 [ACK-11]: acknowledge every ack_every packets, or after max_ack_delay.
    uint32_t ack_every = 2;
    Duration max_ack_delay = 10us;
    // spec §6 [ACK-12]: ACK_NOW on the last segment of every message (true), or only on
    // the last segment that leaves while nothing else of the connection waits to be sent
    // (false). A datapath that coalesces ACKs with a large ack_every sets false, or every
    // message end would cost an ACK datagram (api/udp_tuning.h).
    bool ack_now_every_message = true;
    // spec §6 [ACK-12], [ACK-11]: with ack_now_every_message false, true makes the last
    // message before a pause leave without ACK_NOW, and makes a receiver send its delayed
    // ACKs as soon as it sends DATA of its own on the connection. In a request/response
    // exchange the ACK then rides with the response, and neither side's progress thread
    // has to be woken for a lone ACK while the application waits in the library (the Verbs
    // library sets it: ib_write_lat, docs/results.md). A message that no DATA answers
    // completes after max_ack_delay instead of a round trip.
    bool ack_with_reverse_data = false;
    // spec §6 [ACK-13]: a round of ACKs also takes the delayed ACKs of the connection's
    // other paths, written before their max_ack_delay. Where each round costs a system
    // call and each datagram a pass through the host's stack, fewer, fuller rounds are
    // cheaper (api/udp_tuning.h sets it); on a fabric whose ACKs cost only their bytes
    // (the simulator), it would only send ACKs that cover fewer packets.
    bool gather_acks = false;

    // spec §7 loss recovery and path health.
    // [LOSS-15] how late this host's datapath may fire a timer or process an arrival
    // (200 µs: UDP on an OS-scheduled host). The defaults of min_pto, stall_tolerance and
    // handshake_timeout below are the ones it derives; a datapath with another granularity
    // sets them all with with_timer_granularity().
    Duration timer_granularity = 200us;
    Duration initial_rtt = 100us;       // [LOSS-4] before the first sample
    Duration min_pto = 200us;           // [LOSS-4] floor of the probe timeout: G
    Duration max_pto = 200ms;           // cap of the backed-off probe timeout
    Duration min_reorder_window = 2us;  // [LOSS-2] floor of the reorder window
    uint32_t reorder_window_shift = 3;  // [LOSS-2] reorder window = srtt >> shift
    uint32_t path_fail_timeouts = 3;    // [PATH-3] consecutive timeouts that fail a path
    // [LOSS-16] a sender with nothing else to send copies a path's tail to the best path at
    // the path's first timeout, beside the PROBE. false: the PROBE alone (for comparison).
    bool tail_copies = true;
    // [LOSS-17] a sender with no new data left sends each retransmission on 1-4 paths, as
    // many as its measured loss asks. false: once (for comparison).
    bool retx_copies = true;
    // [PATH-11] a path whose oldest unanswered packet was overtaken by packets sent this
    // much later (srtt >> overtake_shift, plus max_ack_delay, at least min_pto) on other paths times out at once.
    bool detect_overtaken = true;
    uint32_t overtake_shift = 0;
    // [PATH-12] a path with nothing in flight whose last this-many ACK rounds the peer has
    // not echoed, the oldest sent longer ago than the echo timeout, is failed: its ACKs
    // are dying on a dead return route. 0 turns the rule off (for comparison).
    uint32_t return_fail_rounds = 16;
    // [LOSS-13] a path's later timeouts only probe, while no other path overtook it and
    // the last ACK on any path is younger than this (a quiet peer, not a dead route).
    Duration stall_tolerance = 50ms;    // 250 × G
    uint32_t retry_limit = 16;          // [LOSS-7] timeouts of one segment (a SACK-found loss: 1/16)
    Duration peer_dead_timeout = 1s;    // [ERR-2] no ACK on any path for this long

    // spec §4 handshake.
    Duration handshake_timeout = 1ms;   // [CONN-12] first HELLO retransmission: max(5 G, initial_rtt)
    uint32_t handshake_retries = 16;   // [CONN-12] gaps double up to 32 x handshake_timeout
    // [CONN-30] each round of HELLOs leaves as this many copies on as many paths, the first
    // at once and the others handshake_timeout / hello_copies apart until established: a
    // round is lost only with every copy. 1..kMaxHelloCopies. (All at once, 4 made 256 -> 1
    // incast cycle at 7 of 10 seeds; spread, a handshake answered within the gap sends one.)
    uint32_t hello_copies = 4;
    bool resend_to_opening_peer = true;  // [CONN-31] DATA in flight again when the peer is still opening
    static constexpr uint32_t kMaxHelloCopies = 8;

    // spec §8: RNR wait. (The per-stream window is the protocol constant kStreamWindow.)
    uint32_t rnr_delay_us = 100;        // [PLACE-6]
    uint32_t rnr_retry = 7;             // 7 = forever, as in verbs

    // spec §8.1 [PLACE-20]: READs and atomics per stream. The requester keeps at most
    // max_rd_atomic unanswered and queues the rest; the responder holds at most
    // max_dest_rd_atomic answers not yet acknowledged, and runs a further request only when
    // one is. Larger than max_rd_atomic by default because a responder frees an answer a
    // round trip after the requester has seen it.
    uint32_t max_rd_atomic = 16;
    uint32_t max_dest_rd_atomic = 64;

    // spec [PLACE-29]: random bits in every memory key (8..24); the other 32 − bits number
    // the regions, so at most 2^(32 − bits) − 1 are registered at once (65535 at 16).
    uint32_t memory_key_tag_bits = 16;

    // spec [PLACE-23]: the largest inline send.
    uint32_t max_inline_data = 256;

    // Resource caps (spec §10 [ERR-5]).
    uint32_t max_connections = 65535;  // at most 65535: the slot is the id's low 16 bits
    uint32_t max_streams = 1u << 20;   // at most 2^20: the slot is the id's low 20 bits
    // Sharded endpoints (api/ DeviceConfig::threads, docs/design.md §12): the top
    // conn_id_shard_bits (0..4) of every connection id's random half ([CONN-11]) are
    // conn_id_shard, so the kernel can steer a packet to its shard by the id it carries.
    // Also forks this endpoint's secret generator by the shard after the memory table has
    // drawn its seed: shards built from one secret then mirror memory keys but not tokens.
    // 0 bits: ids fully random, nothing forked.
    uint32_t conn_id_shard_bits = 0;
    uint32_t conn_id_shard = 0;
    // [CONN-24], [STREAM-15]: a Failed or Closed connection's slot, and a destroyed
    // stream's slot, are given back this long after the end. 0 means the default,
    // 2 × peer_dead_timeout; otherwise at least peer_dead_timeout.
    Duration quiet_period = Duration::zero();
    // spec §4.2 [CONN-25], [CONN-26]: a HELLO that would bind a connection must prove that
    // its sender receives at its address (echo a RETRY's cookie) unless it creates a new
    // connection while fewer than `unproven_connections` connections are unproven (0: every
    // HELLO must prove). A cookie is valid for `cookie_lifetime` after it was issued.
    uint32_t unproven_connections = 64;
    Duration cookie_lifetime = 2s;
    uint32_t max_outstanding_wrs = 1u << 16;  // per stream, send and receive each

    // Test-only: force the initial sequence numbers (0 = random). Used to start near
    // wraparound.
    uint32_t forced_isn = 0;
};

// ports_bps: the rate of this endpoint's NIC ports summed (the default inbound capacity of
// [CC-12], and what spreads its own first round trips for [CC-20]).
inline uint64_t ports_bps(const EndpointConfig& c) {
    return c.port_rate_bps * std::max<uint16_t>(c.num_local_ports, 1);
}

// config_error names the first invalid setting in one line, or returns "" when the config
// is usable. Endpoint requires a valid config; drivers check it first and print this.
inline std::string config_error(const EndpointConfig& c) {
    if (c.num_paths < 1 || c.num_paths > wire::kMaxPaths)
        return "num_paths must be 1.." + std::to_string(wire::kMaxPaths);
    if (c.num_local_ports < 1) return "num_local_ports must be at least 1";
    if (c.max_payload < wire::kMinMaxPayload || c.max_payload > wire::kMaxMaxPayload)
        return "max_payload must be " + std::to_string(wire::kMinMaxPayload) + ".." +
               std::to_string(wire::kMaxMaxPayload) + " bytes";
    if (c.window_bytes_per_path < c.max_payload)
        return "window_bytes_per_path must hold at least one max_payload packet";
    if (c.ack_every < 1) return "ack_every must be at least 1";
    if (c.port_rate_bps < 1'000'000) return "port_rate_bps must be at least 1 Mbit/s";
    if (c.inbound_capacity_bps != 0 && c.inbound_capacity_bps < 1'000'000)
        return "inbound_capacity_bps must be 0 (derived) or at least 1 Mbit/s";
    for (uint8_t w : c.class_weights)
        if (w == 0) return "class_weights must be 1..255";
    if (c.hint_interval <= Duration::zero()) return "hint_interval must be positive";
    if (c.first_rtt_bytes < c.max_payload || c.max_inflight_bytes < c.max_payload)
        return "first_rtt_bytes and max_inflight_bytes must hold at least one max_payload packet";
    if (c.path_run_segments < 1) return "path_run_segments must be at least 1";
    if (c.pacing_burst_bytes < c.max_payload)
        return "pacing_burst_bytes must hold at least one max_payload packet";
    if (c.path_fail_timeouts < 2) return "path_fail_timeouts must be at least 2";
    if (c.overtake_shift > 16) return "overtake_shift must be 0..16";
    if (c.retry_limit < 1 || c.retry_limit > 1000) return "retry_limit must be 1..1000";
    if (c.timer_granularity <= Duration::zero()) return "timer_granularity must be positive";
    if (c.min_pto <= Duration::zero() || c.max_pto < c.min_pto)
        return "min_pto must be positive and no larger than max_pto";
    if (c.initial_rtt <= Duration::zero()) return "initial_rtt must be positive";
    if (c.max_ack_delay < Duration::zero()) return "max_ack_delay must not be negative";
    if (c.stall_tolerance < Duration::zero()) return "stall_tolerance must not be negative";
    if (c.peer_dead_timeout <= Duration::zero()) return "peer_dead_timeout must be positive";
    if (c.handshake_timeout <= Duration::zero()) return "handshake_timeout must be positive";
    if (c.cookie_lifetime <= Duration::zero()) return "cookie_lifetime must be positive";
    if (c.hello_copies < 1 || c.hello_copies > EndpointConfig::kMaxHelloCopies)
        return "hello_copies must be 1..8";
    if (c.memory_key_tag_bits < 8 || c.memory_key_tag_bits > 24)
        return "memory_key_tag_bits must be 8..24";
    if (c.max_connections < 1 || c.max_connections > 65535)
        return "max_connections must be 1..65535";
    if (c.max_streams < 1 || c.max_outstanding_wrs < 1) return "resource caps must be at least 1";
    if (c.max_streams > (1u << 20)) return "max_streams must be at most 2^20";
    if (c.conn_id_shard_bits > 4 || c.conn_id_shard >= (1u << c.conn_id_shard_bits))
        return "conn_id_shard_bits must be 0..4 and conn_id_shard below 2^bits";
    if (c.quiet_period != Duration::zero() && c.quiet_period < c.peer_dead_timeout)
        return "quiet_period must be 0 (2 x peer_dead_timeout) or at least peer_dead_timeout";
    if (c.max_rd_atomic < 1 || c.max_dest_rd_atomic < 1)
        return "max_rd_atomic and max_dest_rd_atomic must be at least 1";
    return "";
}

// with_timer_granularity sets the timer floors [LOSS-15] derives from a datapath's timer
// granularity g: min_pto = g, stall_tolerance = 250 g, handshake_timeout =
// max(5 g, initial_rtt). Call it before setting any of the three explicitly.
inline EndpointConfig with_timer_granularity(EndpointConfig c, Duration g) {
    c.timer_granularity = g;
    c.min_pto = g;
    c.stall_tolerance = 250 * g;
    c.handshake_timeout = std::max(5 * g, c.initial_rtt);
    return c;
}

// quiet_period is the effective [CONN-24] / [STREAM-15] quiet period of a config.
inline Duration quiet_period(const EndpointConfig& c) {
    return c.quiet_period != Duration::zero() ? c.quiet_period : 2 * c.peer_dead_timeout;
}

}  // namespace mroce::core
