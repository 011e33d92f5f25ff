// core/path.h — one path of a connection (spec §5): a UDP source port with its own PSN
// space, window, RTT estimate and health; plus the receiver-side state of the peer's path
// with the same id.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/path_health.h"
#include "core/rtt.h"
#include "core/rx_window.h"
#include "core/stats.h"
#include "util/time.h"

namespace mroce::core {

enum class PathState : uint8_t {
    kActive,   // carries data
    kSuspect,  // a timeout without answer: carries no new data until an ACK arrives
    kFailed,   // [PATH-3] re-rolled, probed on the new generation until it answers
};

// TxRecord: what the packet with one PSN carried.
struct TxRecord {
    enum class State : uint8_t { kFree, kInFlight, kAcked, kLost };
    State state = State::kFree;
    bool is_retx = false;
    bool answer = false;  // a segment of an answer ([PLACE-30]): msg_seq is its answer_seq
    uint32_t stream = 0;
    uint32_t msg_seq = 0;
    uint32_t seg = 0;
    uint32_t bytes = 0;
    Time sent;
};

struct TxPath {
    uint16_t id = 0;
    uint16_t src_port = 0;
    uint16_t local_port = 0;  // NIC port / plane
    uint8_t gen = 0;
    PathState state = PathState::kActive;

    // [PATH-5] PSN window: records for [base, next_psn); next_psn - base <= kSackBits.
    uint32_t next_psn = 0;
    uint32_t base = 0;
    uint32_t highest_acked = 0;   // highest PSN acknowledged in this generation
    bool any_acked = false;
    std::vector<TxRecord> ring;   // power-of-two size, indexed psn & (size - 1)
    uint32_t in_flight_pkts = 0;
    uint64_t in_flight_bytes = 0;

    // RTT ([LOSS-4]) and timers
    RttEstimate rtt;
    uint32_t backoff = 0;          // consecutive timeouts without an ACK
    Time pto_deadline = kNever;
    Time reorder_deadline = kNever;
    uint32_t reorder_limit = 0;    // holes below this PSN are lost at reorder_deadline
    Time probe_deadline = kNever;  // failed path: next PROBE
    // [PATH-11]: send time of the oldest packet still awaiting an answer (its oldest DATA in
    // flight, or the PROBE of its last timeout); kNever when none is or the path is Failed.
    Time overdue_since = kNever;
    bool overtaken = false;        // pto_deadline was brought forward by [PATH-11]
    bool probe_pending = false;    // a PROBE should go out now
    bool newest_asks_ack = false;  // [LOSS-4]: the newest DATA sent had ACK_NOW
    uint8_t probe_copies = 0;      // [PATH-13]: PROBEs of this step still to send
    uint32_t probe_ts = 0;         // [PATH-13]: the timestamp every copy of this step carries
    uint32_t last_ce = 0;          // last ecn_ce_count echoed
    uint32_t rerolled_ts = 0;      // [PATH-4]: ts32 of the last re-roll; older PROBE
                                   // replies answered another route
    bool handshake_sent = false;   // [CONN-33]: a HELLO or HELLO_ACK left from this port
    // [ERR-2] [LOSS-13]: the newest send time an ACK of this path that made progress
    // echoed; a probe reply echoing nothing later answers nothing new (a copy, a late
    // reply, or an old one replayed) and restarts neither the peer-dead nor the stall clock.
    Time answered_sent{};
    uint32_t loss_score = 0;       // decaying count of losses, for path choice [LOSS-6]
    // [PATH-13] item 5: the weight (Q16, 1.0 at first) of the connection's loss estimate in
    // this path's, for its window: (63/64)^(packets acknowledged on the path).
    uint32_t prior_weight = 1u << 16;

    TxRecord& rec(uint32_t psn) { return ring[psn & (ring.size() - 1)]; }
    const TxRecord& rec(uint32_t psn) const { return ring[psn & (ring.size() - 1)]; }
    uint32_t span() const { return next_psn - base; }
};

struct RxPath {
    uint8_t gen = 0;
    bool seen = false;
    RxWindow window;
    uint32_t ce_count = 0;
    uint32_t unacked = 0;
    bool ack_queued = false;
    Time ack_deadline = kNever;
    uint32_t last_ts = 0;       // timestamp of the packet that will be echoed
    Time last_rx_time;
    bool probe_reply = false;
    uint32_t probe_psn = 0;
    // [PROBE-2]: copies of the probe reply still to send, and the return path of the first.
    uint8_t probe_copies = 0;
    uint16_t probe_first_path = 0;
    // [PATH-12]: the last PROBE answered with everything below its next_psn received, and
    // the return paths its reply's copies left on (kNoPath: not sent yet).
    bool probe_answered_whole = false;
    uint8_t probe_repeats = 0;  // consecutive unchanged PROBEs after a whole answer
    uint8_t replies_sent = 0;   // copies of the reply to the PROBE last answered, sent
    // the chance that a live return route lost every reply of those repeats (Q30)
    uint64_t replies_lost_chance = path_health::kOneQ30;
    uint32_t answered_next_psn = 0;
    uint32_t answered_ts = 0;   // [PATH-13]: copies of one probing step share a timestamp
    uint32_t answered_floor = 0;
    std::array<uint16_t, 2> reply_paths{kNoPath, kNoPath};
    Time reply_sent = kNever;  // when the reply's first copy left
    static constexpr uint16_t kNoPath = 0xffff;
};

}  // namespace mroce::core
