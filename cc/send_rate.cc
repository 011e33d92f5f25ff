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
    hint_bps_ = uint64_t{mbps} * 1'000'000;
    hint_expiry_ = now + ttl(srtt, hint_bps_);
}

void SendRate::on_acked(Duration srtt, Time now) {
    acked_expiry_ = now + ttl(srtt, hint_bps(now));
}

uint64_t SendRate::rate_bps(uint64_t window_rate_bps, Time now) const {
    if (!cfg_.pacing) return 0;
    const uint64_t hint = hint_bps(now);
    if (hint && window_rate_bps) return std::min(hint, window_rate_bps);
    return hint ? hint : window_rate_bps;
}

void SendRate::on_sent(uint32_t bytes, uint64_t rate, Time now) {
    if (rate == 0) return;
    const Time floor = now - Duration{ns_for(cfg_.burst_bytes, rate)};
    next_ = std::max(next_, floor) + Duration{ns_for(bytes, rate, true)};
}

}  // namespace mroce::cc
