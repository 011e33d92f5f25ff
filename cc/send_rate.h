// cc/send_rate.h — the sender's connection-wide limits beside the per-path windows (spec
// §9.3, [CC-15]..[CC-18]): the receiver's rate hint and when it expires, the first round
// trip of a new (or long idle) connection and its budget, the cap on bytes in flight, and
// the pacer.
//
//   ACK ─► on_hint(mbps, srtt) ─► hint, valid for max(4 srtt, 4 packets at the hint);
//                                 its grant: one BDP at the hint, remembered past it
//   ACK of new data ─► on_acked ─► the first RTT is over (until the connection idles)
//   idle ─► first RTT again, budget max(first_rtt_bytes, the grant halved per
//           idle_halving_rtts × srtt since the hint expired)
//   before each DATA: inflight_cap(now) and send_time(now) ≤ now?   after: on_sent
//
// The pacer is a token bucket written as one virtual time (GCRA): a packet of b bytes may
// leave when next_ ≤ now; it moves next_ to max(next_, now − burst time) + b / rate. The
// rate is min(window rate, hint), 0 = not paced.
//
// Integer arithmetic only ([CC-3]). No clock is read: every call gets `now`.
#pragma once

#include <algorithm>
#include <cstdint>

#include "util/time.h"

namespace mroce::cc {

struct SendRateConfig {
    bool use_hint = true;                     // obey the receiver's hint ([CC-16])
    bool pacing = true;                       // pace at the rate ([CC-17])
    uint64_t first_rtt_bytes = 32 * 1024;     // [CC-15]
    uint64_t max_inflight_bytes = 8 << 20;    // [CC-18]
    uint64_t burst_bytes = 16 * 1024;         // [CC-17] at most this much at once,
    Duration burst_time = std::chrono::microseconds(8);  // and at most this long at the rate
    uint32_t mss = 4096;
    // [CC-17]: where in a packet's gap this connection's re-timed packet falls, in 1/65536:
    // drawn at random per connection, so that senders whose hints rise together (a push
    // to every sender of a receiver) do not all send at once.
    uint16_t phase = 0;
    // [CC-15]: after idle, the budget is the grant (one BDP at the last hint) halved for
    // each idle_halving_rtts round trips since the hint expired; 0 = first_rtt_bytes only.
    uint16_t idle_halving_rtts = 8;
    // [CC-20]: the hint interval; a HELLO_ACK's grant counts over at most 2 of them.
    Duration grant_interval = std::chrono::microseconds(8);
};

class SendRate {
public:
    explicit SendRate(const SendRateConfig& cfg) : cfg_(cfg) {}

    // on_hint: the hint of an ACK of the current generation (0 = none), with the smoothed
    // RTT of the path it arrived on.
    void on_hint(uint32_t mbps, Duration srtt, Time now);
    // on_grant: [CC-20] the grant of a new connection's HELLO_ACK, with the handshake's round
    // trip as measured from the latest HELLO sent: the grant becomes the connection's grant
    // of [CC-15] and its hint for one TTL, so its first round trip may have
    // max(first_rtt_bytes, min(grant × rtt, max_inflight_bytes)) in flight, paced at it;
    // with `caps`, max(mss, min(grant × rtt, max_inflight_bytes)): the grant also caps the
    // first round trip below first_rtt_bytes (the sender's own ports would not spread it).
    void on_grant(uint32_t mbps, Duration rtt, Time now, bool caps = false);
    // lower_grant: [CC-20] the grant of a later HELLO_ACK (before any ACK), if lower than
    // the one held, replaces it (the round trip it scales by stays). Returns true if so.
    bool lower_grant(uint32_t mbps);
    // on_acked: an ACK acknowledged new data; srtt as on_hint.
    void on_acked(Duration srtt, Time now);

    // hint_bps: the hint in force, 0 when there is none or it expired.
    uint64_t hint_bps(Time now) const {
        return cfg_.use_hint && hint_bps_ && now < hint_expiry_ ? hint_bps_ : 0;
    }
    // inflight_cap: bytes the connection may have in flight over all paths now.
    uint64_t inflight_cap(Time now) const {
        if (now < acked_expiry_) return cfg_.max_inflight_bytes;
        return std::max<uint64_t>(grant_caps_ ? cfg_.mss : cfg_.first_rtt_bytes, idle_budget(now));
    }
    // idle_budget: what the last grant still allows a returning sender in its first round
    // trip ([CC-15]); 0 without a grant.
    uint64_t idle_budget(Time now) const;
    // rate_bps: the pacing rate for a window rate (bit/s, 0 = unknown), 0 = not paced.
    uint64_t rate_bps(uint64_t window_rate_bps, Time now) const;
    // ahead: the pacer has credit now at any rate (the common case, asked before the rate
    // is worked out).
    bool ahead(Time now) const { return next_ <= now; }
    // send_time: the earliest time the next packet may leave at `rate` (now if unpaced).
    // A rate above the one the last packet was paced at takes effect at once: the last
    // packet's gap is re-timed at the new rate (a hint raised after a drain must not wait
    // out a gap computed at the floor).
    Time send_time(uint64_t rate, Time now) const {
        if (rate == 0 || next_ <= now) return now;
        if (rate > last_rate_) return std::max(now, std::min(next_, retimed(rate)));
        return next_;
    }
    void on_sent(uint32_t bytes, uint64_t rate, Time now);

    uint32_t last_hint_mbps() const { return last_hint_mbps_; }

private:
    Duration ttl(Duration srtt, uint64_t rate_bps) const;
    static Duration gap(uint64_t bytes, uint64_t rate_bps);
    // retimed: the last packet's gap at a higher rate, counted from the later of the last
    // packet and the hint's rise, plus this connection's phase of it. From the rise: a
    // sender held long at a small hint has its last packet far behind, and when a push
    // raises every such sender of a receiver at once, they must not all send at once
    // ([CC-17]). Because a later rise can move this time on, a gate found open may be shut
    // by the time DATA is produced; produce_data then arms the pacer's timer.
    Time retimed(uint64_t rate) const {
        const Duration g = gap(last_bytes_, rate);
        return std::max(last_sent_ + g, hint_rose_) + Duration{to_ns(g) * cfg_.phase / 65536};
    }

    SendRateConfig cfg_;
    uint64_t hint_bps_ = 0;
    uint32_t last_hint_mbps_ = 0;
    bool grant_caps_ = false;  // [CC-20] until the first ACK: the grant caps the first RTT
    Time hint_expiry_{};
    // [CC-15] the grant: the last non-zero hint taken and the srtt it came with (its
    // budget after idle is one BDP at the hint, halved every idle_halving_rtts × srtt).
    uint64_t grant_bps_ = 0;
    Duration grant_srtt_{};
    Time hint_rose_{};     // when the hint last rose to twice what it was ([CC-17])
    Time acked_expiry_{};  // the first RTT is over until then
    Time next_{};          // the pacer's virtual time
    Time last_sent_{};     // the last paced packet: when, its size, its rate
    uint32_t last_bytes_ = 0;
    uint64_t last_rate_ = 0;
};

}  // namespace mroce::cc
