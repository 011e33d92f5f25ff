// cc/send_rate.cc — the sender's hint, first RTT, in-flight cap and pacer; see send_rate.h.
#include "cc/send_rate.h"

#include <algorithm>

#include "util/muldiv.h"

namespace mroce::cc {

namespace {
constexpr int64_t kMaxTtlNs = 100'000'000;  // [CC-16]: no hint outlives 100 ms
// ns_for: the time `bytes` take at `rate_bps`, rounded up when `up` (a pacer that rounds
// its packet times down runs faster than its rate).
int64_t ns_for(uint64_t bytes, uint64_t rate_bps, bool up = false) {
    return static_cast<int64_t>(mul_div(bytes, 8'000'000'000u, rate_bps, up));
}
}  // namespace

Duration SendRate::ttl(Duration srtt, uint64_t rate_bps) const {
    // [CC-16]: four round trips, or four packets' time at the hint when that is longer (a
    // sender held to a small share hears from the receiver only that often).
    int64_t t = 4 * to_ns(srtt);
    if (rate_bps) t = std::max(t, 4 * ns_for(cfg_.mss, rate_bps));
    return Duration{std::min(t, kMaxTtlNs)};
}

void SendRate::on_hint(uint32_t mbps, Duration srtt, Time now) {
    last_hint_mbps_ = mbps;
    if (mbps == 0) return;  // no hint: the one in force runs out on its own
    const uint64_t bps = uint64_t{mbps} * 1'000'000;
    // [CC-17]: a rise is a hint at least twice the one in force (the floor lifted after a
    // drain, a sender left): the ordinary wobble of a share from one recomputation to the
    // next must not re-time the held packet each time. Ignored hints never rise.
    if (cfg_.use_hint && bps >= 2 * hint_bps(now)) hint_rose_ = now;
    hint_bps_ = bps;
    hint_expiry_ = now + ttl(srtt, hint_bps_);
    // [CC-15]: the grant outlives the hint. A hint of 0 (the receiver let this sender go
    // after its silence, [CC-12]) says nothing about the share it would have on return,
    // so it leaves the grant alone. No grant without an RTT sample or with hints ignored.
    if (cfg_.use_hint && to_ns(srtt) > 0) {
        grant_bps_ = bps;
        grant_srtt_ = srtt;
    }
}

void SendRate::on_grant(uint32_t mbps, Duration rtt, Time now, bool caps) {
    // [CC-20]: only a connection that obeys hints, with a round trip to scale by, and never
    // over a grant it already holds (a new connection has none).
    if (!cfg_.use_hint || mbps == 0 || to_ns(rtt) <= 0 || grant_bps_ != 0) return;
    grant_bps_ = uint64_t{mbps} * 1'000'000;
    // A grant is worth at most the 2 hint intervals the receiver reserves it for: a long
    // handshake RTT must not turn a share into a burst of megabytes.
    grant_srtt_ = std::min(rtt, 2 * cfg_.grant_interval);
    hint_expiry_ = now;  // no hint in force (hint_bps_ is 0); idle halving counts from now
    grant_caps_ = caps;
}

bool SendRate::lower_grant(uint32_t mbps) {
    const uint64_t g = uint64_t{mbps} * 1'000'000;
    if (!cfg_.use_hint || mbps == 0 || grant_bps_ == 0 || g >= grant_bps_) return false;
    grant_bps_ = g;
    return true;
}

uint64_t SendRate::idle_budget(Time now) const {
    if (grant_bps_ == 0 || cfg_.idle_halving_rtts == 0) return 0;
    const uint64_t srtt_ns = static_cast<uint64_t>(to_ns(grant_srtt_));
    const uint64_t bdp = std::min(cfg_.max_inflight_bytes, mul_div(grant_bps_, srtt_ns, 8'000'000'000u));
    // Halved once per idle_halving_rtts round trips since the hint expired: a ring's host
    // idles a few hint lifetimes between its steps and should still start its next step
    // at about its share (docs/results.md, "The budget after idle").
    const uint64_t idle = now <= hint_expiry_ ? 0 : static_cast<uint64_t>(to_ns(now - hint_expiry_));
    const uint64_t halvings = idle / (srtt_ns * cfg_.idle_halving_rtts);
    return halvings >= 64 ? 0 : bdp >> halvings;
}

void SendRate::on_acked(Duration srtt, Time now) {
    acked_expiry_ = now + ttl(srtt, hint_bps(now));
    grant_caps_ = false;  // [CC-20] only the first round trip; after idle, [CC-15]'s budget
}

uint64_t SendRate::rate_bps(uint64_t window_rate_bps, Time now) const {
    if (!cfg_.pacing) return 0;
    const uint64_t hint = hint_bps(now);
    if (hint && window_rate_bps) return std::min(hint, window_rate_bps);
    return hint ? hint : window_rate_bps;
}

Duration SendRate::gap(uint64_t bytes, uint64_t rate_bps) { return Duration{ns_for(bytes, rate_bps, true)}; }

void SendRate::on_sent(uint32_t bytes, uint64_t rate, Time now) {
    if (rate == 0) return;
    // Credit for at most a burst when the pacer is ahead; when it is behind, the virtual
    // time as send_time sees it (re-timed if the rate rose).
    // The burst: burst_bytes, or what the rate sends in burst_time if less (a slow sender
    // must not bank a burst that many like it would land on one queue at once), and
    // never less than one packet.
    const uint64_t burst = std::max<uint64_t>(
        cfg_.mss, std::min(cfg_.burst_bytes, mul_div(rate, static_cast<uint64_t>(to_ns(cfg_.burst_time)), 8'000'000'000u)));
    const Time base = next_ <= now ? std::max(next_, now - Duration{ns_for(burst, rate)}) : send_time(rate, now);
    next_ = base + gap(bytes, rate);
    last_sent_ = now;
    last_bytes_ = bytes;
    last_rate_ = rate;
}

}  // namespace mroce::cc
