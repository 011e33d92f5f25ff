// obs/catalog.cc — see catalog.h. Adding a counter to core/stats.h means adding it here
// and to docs/observability.md (obs_test checks the second).
#include "obs/catalog.h"

namespace mroce::obs {

namespace {

using ES = core::EndpointStats;
using CS = core::ConnectionStats;
using PS = core::PathStats;

constexpr CounterField<ES> kEndpoint[] = {
    {"rx_datagrams", &ES::datagrams_received, "Datagrams handed to the engine.", nullptr},
    {"truncated", &ES::truncated, "Dropped: shorter than its header says.", nullptr},
    {"bad_version", &ES::bad_version, "Dropped: unknown protocol version.", nullptr},
    {"bad_type", &ES::bad_type, "Dropped: unknown packet type.", nullptr},
    {"bad_length", &ES::bad_length, "Dropped: inconsistent length fields.", nullptr},
    {"unknown_connection", &ES::unknown_connection, "Dropped: no connection has that id.", nullptr},
    {"stale_connection", &ES::stale_connection,
     "Of unknown_connection: naming a slot another connection has or had.", nullptr},
    {"bad_token", &ES::bad_token, "Dropped: the connection token did not match.", nullptr},
    {"bad_integrity", &ES::bad_integrity, "Dropped: integrity trailer (CRC32C) missing or wrong.", nullptr},
    {"connections_refused", &ES::connections_refused, "HELLOs refused: over max_connections.", nullptr},
    {"malformed_hello", &ES::malformed_hello, "HELLOs dropped: src_conn_id or src_token 0.", nullptr},
    {"connections_reclaimed", &ES::connections_reclaimed,
     "Connection slots given back after their quiet period.", nullptr},
    {"streams_reclaimed", &ES::streams_reclaimed,
     "Stream slots given back after their quiet period.", nullptr},
    {"retries_sent", &ES::retries_sent, "HELLOs answered with a RETRY (no state kept).", nullptr},
    {"cookies_accepted", &ES::cookies_accepted, "HELLOs whose echoed cookie proved their address.", nullptr},
    {"bad_cookie", &ES::bad_cookie, "HELLOs dropped: cookie not ours or not for this HELLO.", nullptr},
    {"expired_cookie", &ES::expired_cookie, "HELLOs dropped: cookie older than its lifetime.", nullptr},
    {"replies_dropped", &ES::replies_dropped, "RETRYs and refusals not sent: the reply queue was full.", nullptr},
    {"unproven_ended", &ES::unproven_ended, "Connections that ended without proving their peer.", nullptr},
    {"peer_restarts", &ES::peer_restarts, "Peer restarts accepted (with proof).", nullptr},
    {"version_mismatch", &ES::version_mismatch, "Version-1 HELLOs and HELLO_ACKs refused.", nullptr},
    {"coalesced_received", &ES::coalesced_received,
     "Datagrams that carried an ACK and a DATA, both applied.", nullptr},
};

constexpr CounterField<CS> kConnection[] = {
    {"messages_sent", &CS::messages_sent, "Messages (work requests) sent to completion.", "messages_sent"},
    {"messages_received", &CS::messages_received, "Messages received and delivered.", "messages_received"},
    {"retransmits", &CS::retransmits, "Retransmitted DATA packets, all reasons.", "retransmits"},
    {"retransmits_sack", &CS::retransmits_sack, "Declared lost by a SACK hole.", "retransmits_sack"},
    {"retransmits_timeout", &CS::retransmits_timeout, "Declared lost by a timeout.", "retransmits_timeout"},
    {"retransmits_path_failure", &CS::retransmits_path_failure,
     "Declared lost because their path failed.", "retransmits_path_failure"},
    {"retransmits_rnr", &CS::retransmits_rnr, "Re-sent after a receiver-not-ready NACK.", "retransmits_rnr"},
    {"retransmits_read_request", &CS::retransmits_read_request,
     "READ/atomic requests re-sent while awaiting the answer.", "retransmits_read_request"},
    {"retransmits_tail", &CS::retransmits_tail,
     "A drained sender's tail copied at its path's first timeout (not declared lost).", "retransmits_tail"},
    {"retransmits_copied", &CS::retransmits_copied,
     "Extra copies of a drained sender's retransmissions, on other paths, for its measured loss.",
     "retransmits_copied"},
    {"acks_coalesced", &CS::acks_coalesced, "ACKs sent in one datagram with a DATA.", "acks_coalesced"},
    {"retransmits_cancelled", &CS::retransmits_cancelled,
     "Declared lost, then acknowledged before the retransmission left.", "retransmits_cancelled"},
    {"duplicate_segments", &CS::duplicate_segments, "Segments received that were already placed.",
     "duplicate_segments"},
    {"held_last_segments", &CS::held_last_segments, "Last segments that arrived early and were written last.",
     "held_last_segments"},
    {"stale_duplicates", &CS::stale_duplicates, "Duplicates of completed messages: dropped unwritten.",
     "stale_duplicates"},
    {"stale_generation", &CS::stale_generation, "DATA of an old path generation: dropped.", "stale_generation"},
    {"stale_probe_replies", &CS::stale_probe_replies, "Probe replies of a previous route: ignored.",
     "stale_probe_replies"},
    {"out_of_window", &CS::out_of_window, "Dropped: PSN or message beyond the window.", "out_of_window"},
    {"malformed", &CS::malformed, "Dropped: inconsistent with earlier packets.", "malformed"},
    {"unknown_stream", &CS::unknown_stream, "Dropped: no such stream.", "unknown_stream"},
    {"retired_stream", &CS::retired_stream, "Of unknown_stream: a destroyed stream.", "retired_stream"},
    {"wrong_state", &CS::wrong_state, "Dropped: before establishment or after the end.", "wrong_state"},
    {"nacks_dropped", &CS::nacks_dropped, "NACKs not sent: the queue was full.", "nacks_dropped"},
    {"access_errors", &CS::access_errors, "Remote accesses refused (rkey, PD, flags, bounds).", "access_errors"},
    {"rnr_nacks_sent", &CS::rnr_nacks_sent, "Receiver-not-ready NACKs sent.", "rnr_nacks_sent"},
    {"requests_deferred", &CS::requests_deferred, "READ/atomic requests that waited for max_dest_rd_atomic.",
     "requests_deferred"},
    {"atomics_executed", &CS::atomics_executed, "Atomic operations executed.", "atomics_executed"},
    {"orphan_responses", &CS::orphan_responses, "Responses no request waited for: refused.", "orphan_responses"},
    {"read_source_gone", &CS::read_source_gone, "READ responses sent as zeros: source deregistered.",
     "read_source_gone"},
    {"nacks_sent", &CS::nacks_sent, "NACKs sent.", "nacks_sent"},
    {"nacks_received", &CS::nacks_received, "NACKs received.", "nacks_received"},
    {"hello_sent", &CS::hello_sent, "HELLO and HELLO_ACK packets sent.", "hello_sent"},
    {"hello_grants_taken", &CS::hello_grants_taken,
     "Connections whose establishing HELLO_ACK carried a grant for the first round trip ([CC-20]).",
     "hello_grants_taken"},
    {"hello_grants_lowered", &CS::hello_grants_lowered,
     "Grants taken that a later HELLO_ACK of the peer lowered in the first round trip ([CC-20]).",
     "hello_grants_lowered"},

    {"closes_repeated", &CS::closes_repeated, "CLOSEs sent again to a peer that missed the first.",
     "closes_repeated"},
    {"closes_answered", &CS::closes_answered, "CLOSEs answered with a CLOSE(CONFIRM) ([CONN-29]).",
     "closes_answered"},
    {"probes_received", &CS::probes_received, "PROBE packets received.", "probes_received"},
    {"path_failures", &CS::path_failures, "Paths declared failed.", "paths_failed"},
    {"path_rerolls", &CS::path_rerolls, "Paths moved to a new UDP source port.", "paths_rerolled"},
    {"return_route_failures", &CS::return_route_failures,
     "Of path failures: the peer stopped echoing the path's ACKs ([PATH-12]).", "return_routes_failed"},
    {"probe_repeats_crossed", &CS::probe_repeats_crossed,
     "Repeated PROBEs that may have crossed our reply: no evidence of a dead return route ([PATH-12]).",
     "probe_repeats_crossed"},
    {"paced_waits", &CS::paced_waits, "DATA held back by the pacer.", "paced_waits"},
    {"hints_pushed", &CS::hints_pushed, "ACKs sent only to carry a raised rate hint.", "hints_pushed"},
    {"handshake_ports_changed", &CS::handshake_ports_changed,
     "Paths moved to a new UDP source port for a HELLO, or an answer to a repeated one, after an earlier one from their port went unanswered ([CONN-33]).",
     "handshake_ports_changed"},
};

constexpr CounterField<PS> kPath[] = {
    {"tx_data_packets", &PS::packets_sent, "DATA packets sent (retransmissions included).", "tx_data_packets"},
    {"tx_data_bytes", &PS::bytes_sent, "DATA payload bytes sent (retransmissions included).", "tx_data_bytes"},
    {"retransmitted_packets", &PS::retransmits_sent, "Retransmissions that left on this path.", nullptr},
    {"lost_sack_packets", &PS::lost_by_sack, "Packets declared lost by a SACK hole after the reorder window.",
     "lost_sack_packets"},
    {"lost_timeout_packets", &PS::lost_by_timeout, "Packets declared lost by a timeout or path failure.",
     "lost_timeout_packets"},
    {"spurious_retransmits", &PS::spurious_retransmits, "Declared lost, then acknowledged after all.",
     "spurious_retransmits"},
    {"sack_holes", &PS::sack_holes, "Holes first seen in an ACK.", "sack_holes"},
    {"timeouts", &PS::timeouts, "Probe timeouts (PTO) fired.", "timeouts"},
    {"timeouts_overtaken", &PS::overtaken, "Of timeouts: brought forward because other paths overtook.",
     "timeouts_overtaken"},
    {"timeouts_stalled", &PS::stalled_timeouts, "Of timeouts: only probed, not overtaken.", "timeouts_stalled"},
    {"tx_probes", &PS::probes_sent, "PROBE packets sent.", "tx_probes"},
    {"rx_acks", &PS::acks_received, "ACKs received for this path.", "rx_acks"},
    {"ecn_echoed_packets", &PS::ecn_echoed, "CE marks the peer reported for this path.", "ecn_echoed_packets"},
    {"failures", &PS::failures, "Times this path was declared failed.", nullptr},
    {"rerolls", &PS::rerolls, "Times this path moved to a new source port.", nullptr},
    {"recoveries", &PS::recoveries, "Times this path answered again after a failure.", "paths_recovered"},
    {"rx_data_packets", &PS::packets_received, "DATA packets received on the peer's path with this id.",
     "rx_data_packets"},
    {"rx_data_bytes", &PS::bytes_received, "DATA payload bytes received.", "rx_data_bytes"},
    {"duplicate_packets", &PS::duplicate_psns, "DATA received with a PSN already seen.", "duplicate_packets"},
    {"ecn_ce_marked_packets", &PS::ecn_marks, "CE-marked DATA received.", "ecn_ce_marked_packets"},
    {"tx_acks", &PS::acks_sent, "ACKs sent for the peer's path.", "tx_acks"},
    {"psns_skipped", &PS::psns_skipped, "PSNs advanced over by the sender's floor.", "psns_skipped"},
};

double bits_to_bytes(uint64_t bps) { return static_cast<double>(bps) / 8.0; }

constexpr Gauge<ConnectionSnapshot> kConnectionGauges[] = {
    {"up", "mroce_connection_up", "1 while the connection is established.",
     [](const ConnectionSnapshot& c) { return c.state == core::ConnState::kEstablished ? 1.0 : 0.0; },
     [](const ConnectionSnapshot& c) { return c.state == core::ConnState::kEstablished ? 1.0 : 0.0; }},
    {"rate_hint_mbps", "mroce_connection_rate_hint_bytes_per_second",
     "The receiver's latest rate hint (0: none).",
     [](const ConnectionSnapshot& c) { return static_cast<double>(c.rate_hint_mbps); },
     [](const ConnectionSnapshot& c) { return static_cast<double>(c.rate_hint_mbps) * 1e6 / 8; }},
    {"pacing_rate_bps", "mroce_connection_pacing_rate_bytes_per_second",
     "The pacer's rate now: min(window rate, hint) (0: not paced).",
     [](const ConnectionSnapshot& c) { return static_cast<double>(c.pacing_rate_bps); },
     [](const ConnectionSnapshot& c) { return bits_to_bytes(c.pacing_rate_bps); }},
    {"window_rate_bps", "mroce_connection_window_rate_bytes_per_second",
     "What the congestion windows carry per RTT (0: unknown).",
     [](const ConnectionSnapshot& c) { return static_cast<double>(c.window_rate_bps); },
     [](const ConnectionSnapshot& c) { return bits_to_bytes(c.window_rate_bps); }},
    {"in_flight_bytes", "mroce_connection_in_flight_bytes", "DATA bytes sent and not yet acknowledged.",
     [](const ConnectionSnapshot& c) { return static_cast<double>(c.in_flight_bytes); },
     [](const ConnectionSnapshot& c) { return static_cast<double>(c.in_flight_bytes); }},
};

double ns(int64_t v) { return static_cast<double>(v); }
double s_of_ns(double v) { return v / 1e9; }

constexpr Gauge<PathSnapshot> kPathGauges[] = {
    {"up", "mroce_path_up", "1 while the path is active (not suspect or failed).",
     [](const PathSnapshot& p) { return p.state == core::PathState::kActive ? 1.0 : 0.0; },
     [](const PathSnapshot& p) { return p.state == core::PathState::kActive ? 1.0 : 0.0; }},
    {"srtt_ns", "mroce_path_srtt_seconds", "Smoothed RTT (0 before the first sample).",
     [](const PathSnapshot& p) { return ns(p.srtt_ns); },
     [](const PathSnapshot& p) { return s_of_ns(ns(p.srtt_ns)); }},
    {"rttvar_ns", "mroce_path_rttvar_seconds", "RTT variation.",
     [](const PathSnapshot& p) { return ns(p.rttvar_ns); },
     [](const PathSnapshot& p) { return s_of_ns(ns(p.rttvar_ns)); }},
    {"cwnd_bytes", "mroce_path_cwnd_bytes", "Congestion window.",
     [](const PathSnapshot& p) { return static_cast<double>(p.cwnd_bytes); },
     [](const PathSnapshot& p) { return static_cast<double>(p.cwnd_bytes); }},
    {"in_flight_bytes", "mroce_path_in_flight_bytes", "DATA bytes in flight on the path.",
     [](const PathSnapshot& p) { return static_cast<double>(p.in_flight_bytes); },
     [](const PathSnapshot& p) { return static_cast<double>(p.in_flight_bytes); }},
    {"ecn_alpha", "mroce_path_ecn_alpha_ratio", "The controller's CE-marked fraction, 0..1 (-1: not kept).",
     [](const PathSnapshot& p) { return p.ecn_alpha < 0 ? -1.0 : p.ecn_alpha / 1024.0; },
     [](const PathSnapshot& p) { return p.ecn_alpha < 0 ? -1.0 : p.ecn_alpha / 1024.0; }},
    {"source_port", "mroce_path_source_port", "The path's UDP source port (its ECMP route).",
     [](const PathSnapshot& p) { return static_cast<double>(p.src_port); },
     [](const PathSnapshot& p) { return static_cast<double>(p.src_port); }},
};

}  // namespace

std::span<const CounterField<core::EndpointStats>> endpoint_counters() { return kEndpoint; }
std::span<const CounterField<core::ConnectionStats>> connection_counters() { return kConnection; }
std::span<const CounterField<core::PathStats>> path_counters() { return kPath; }
std::span<const Gauge<ConnectionSnapshot>> connection_gauges() { return kConnectionGauges; }
std::span<const Gauge<PathSnapshot>> path_gauges() { return kPathGauges; }

}  // namespace mroce::obs
