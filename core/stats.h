// core/stats.h — counters as plain integer structs (STYLE §8). They only grow; obs/
// exports them. Every drop has a reason and a counter.
#pragma once

#include <cstdint>

namespace mroce::core {

struct PathStats {
    // sender side (this endpoint's path)
    uint64_t packets_sent = 0;
    uint64_t bytes_sent = 0;
    uint64_t retransmits_sent = 0;      // retransmissions that left on this path
    uint64_t lost_by_sack = 0;          // declared lost here after the reorder window
    uint64_t lost_by_timeout = 0;       // declared lost here by a timeout or path failure
    uint64_t spurious_retransmits = 0;  // declared lost, then acknowledged after all
    uint64_t sack_holes = 0;            // holes first seen in an ACK
    uint64_t timeouts = 0;
    uint64_t overtaken = 0;             // of those, brought forward by [PATH-11]
    uint64_t stalled_timeouts = 0;      // of those, only probed: not overtaken [LOSS-13]
    uint64_t probes_sent = 0;
    uint64_t acks_received = 0;
    uint64_t ecn_echoed = 0;            // CE marks the peer reported for this path
    uint64_t failures = 0;
    uint64_t rerolls = 0;
    uint64_t recoveries = 0;
    // receiver side (the peer's path with the same id)
    uint64_t packets_received = 0;
    uint64_t bytes_received = 0;
    uint64_t duplicate_psns = 0;
    uint64_t ecn_marks = 0;             // CE-marked DATA received
    uint64_t acks_sent = 0;
    uint64_t psns_skipped = 0;          // advanced over by the sender's psn_floor
};

struct ConnectionStats {
    uint64_t messages_sent = 0;
    uint64_t messages_received = 0;
    uint64_t retransmits = 0;           // all reasons
    uint64_t retransmits_sack = 0;
    uint64_t retransmits_timeout = 0;
    uint64_t retransmits_path_failure = 0;
    uint64_t retransmits_rnr = 0;
    uint64_t retransmits_tail = 0;      // [LOSS-16] a drained sender's tail copied at a timeout
    uint64_t retransmits_cancelled = 0; // [LOSS-14] declared lost, then acknowledged (or its
                                        // message completed) before the retransmission left
    uint64_t duplicate_segments = 0;    // segment already placed (not yet completed)
    uint64_t held_last_segments = 0;    // [PLACE-12] last segment arrived early, written last
    uint64_t stale_duplicates = 0;      // message already completed: dropped, never written
    uint64_t stale_generation = 0;      // DATA of an old path generation
    uint64_t stale_probe_replies = 0;   // [PATH-4] a reply to a PROBE of a re-rolled path's
                                        // previous route: no proof for the new one
    uint64_t out_of_window = 0;         // PSN or msg_seq beyond the window: dropped
    uint64_t malformed = 0;             // inconsistent with earlier packets or the handshake
    uint64_t unknown_stream = 0;
    uint64_t retired_stream = 0;        // of those, for a destroyed stream [STREAM-13]
    uint64_t wrong_state = 0;           // arrived before establishment or after the end
    uint64_t nacks_dropped = 0;         // NACK queue full (a flood of bad packets)
    uint64_t access_errors = 0;         // rkey/PD/flags/bounds failures on our memory
    uint64_t rnr_nacks_sent = 0;
    uint64_t requests_deferred = 0;     // [PLACE-20] READ/atomic waited for max_dest_rd_atomic
    uint64_t atomics_executed = 0;
    uint64_t orphan_responses = 0;      // a response no request waits for: refused
    uint64_t read_source_gone = 0;      // READ source deregistered mid-response: zeros sent
    uint64_t nacks_sent = 0;
    uint64_t nacks_received = 0;
    uint64_t hello_sent = 0;
    uint64_t hello_grants_taken = 0;    // [CC-20] the establishing HELLO_ACK carried a grant, taken
    uint64_t hello_grants_lowered = 0;  // [CC-20] a later HELLO_ACK lowered the grant taken
    uint64_t closes_repeated = 0;       // [CONN-28] CLOSE sent again: the peer still sent
    uint64_t retries_received = 0;      // [CONN-25] RETRYs that asked us to echo a cookie
    uint64_t probes_received = 0;
    uint64_t path_failures = 0;
    uint64_t path_rerolls = 0;
    uint64_t return_route_failures = 0; // [PATH-12] of path_failures: the peer stopped echoing its ACKs
    uint64_t probe_repeats_crossed = 0; // [PATH-12] item 6: repeated PROBEs that may have crossed our reply
    uint64_t paced_waits = 0;           // [CC-17] DATA held back by the pacer (timer armed)
    uint64_t hints_pushed = 0;          // [CC-14] ACKs sent only to carry a raised hint
    uint64_t retransmits_read_request = 0;  // [PLACE-19] READ/atomic requests re-sent awaiting the answer
    uint64_t closes_answered = 0;       // [CONN-29] CLOSE(CONFIRM) sent: the peer's CLOSE arrived
    uint64_t retransmits_copied = 0;    // [LOSS-17] extra copies of a drained sender's retransmissions
    uint64_t acks_coalesced = 0;        // [WIRE-10] ACKs sent in one datagram with a DATA
    uint64_t handshake_ports_changed = 0;  // [CONN-33] a path's source port changed for a
                                           // HELLO or an answer to a repeated one
};

struct EndpointStats {
    uint64_t datagrams_received = 0;
    uint64_t truncated = 0;
    uint64_t bad_version = 0;
    uint64_t bad_type = 0;
    uint64_t bad_length = 0;
    uint64_t unknown_connection = 0;
    uint64_t stale_connection = 0;     // of those, naming a slot another connection has or had
    uint64_t connections_reclaimed = 0;  // [CONN-24] slots given back after the quiet period
    uint64_t streams_reclaimed = 0;      // [STREAM-15] likewise
    uint64_t bad_token = 0;
    uint64_t bad_integrity = 0;        // [INT-3] integrity trailer missing or wrong
    uint64_t connections_refused = 0;  // over max_connections
    uint64_t malformed_hello = 0;      // [CONN-23] src_conn_id or src_token 0
    // spec §4.2 [CONN-25], [CONN-26]: the handshake's proof of address.
    uint64_t retries_sent = 0;         // HELLOs answered with a RETRY (no state kept)
    uint64_t cookies_accepted = 0;     // HELLOs whose echoed cookie proved their address
    uint64_t bad_cookie = 0;           // cookie not ours or not for this HELLO's identity
    uint64_t expired_cookie = 0;       // cookie older than cookie_lifetime
    uint64_t replies_dropped = 0;      // RETRY / refusal not sent: the reply queue was full
    uint64_t unproven_ended = 0;       // [CONN-26] connections that never proved their peer
    uint64_t peer_restarts = 0;        // [CONN-14] restarts accepted (with proof)
    uint64_t version_mismatch = 0;     // [VER-1] version-1 HELLO / HELLO_ACK refused
    uint64_t coalesced_received = 0;   // [WIRE-10] datagrams of an ACK and a DATA, both applied
};

}  // namespace mroce::core
