// core/rtt.h — a path's round-trip estimate and the timers derived from it (spec [LOSS-4],
// [LOSS-2]). Pure arithmetic on a small struct, kept apart from the connection so the
// estimator and the timeout formula can be read and tested on their own.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/config.h"
#include "util/time.h"

namespace mroce::core {

// RttEstimate: the smoothed RTT and its mean deviation of one path, RFC 6298's estimator
// ([LOSS-4]). A path keeps it across re-rolls ([PATH-4] step 5).
struct RttEstimate {
    Duration srtt{0};
    Duration rttvar{0};
    bool has_rtt = false;

    // on_sample folds one RTT sample in: the first sets srtt = r, rttvar = r / 2; later
    // ones rttvar = (3 rttvar + |srtt − r|) / 4, then srtt = (7 srtt + r) / 8.
    void on_sample(Duration r) {
        if (!has_rtt) {
            srtt = r;
            rttvar = r / 2;
            has_rtt = true;
            return;
        }
        const Duration err = srtt > r ? srtt - r : r - srtt;
        rttvar = (3 * rttvar + err) / 4;
        srtt = (7 * srtt + r) / 8;
    }

    // srtt_or: srtt, or `before_sample` (initial_rtt) while the path has none.
    Duration srtt_or(Duration before_sample) const { return has_rtt ? srtt : before_sample; }
};

// probe_timeout: [LOSS-4] pto = min(max_pto, max(min_pto, b) × 2^min(backoff, 16)), where
// b = srtt + max(4 rttvar, srtt) + max_ack_delay once sampled, 2 initial_rtt before. The
// variance term is at least srtt: a queue can double a path's RTT faster than rttvar
// follows, and with floors at the timer granularity ([LOSS-15]) nothing else would absorb
// the jump. max_ack_delay is left out when the path's newest DATA asked for an ACK at
// once (`ack_delayed` false, [LOSS-4]): its ACK, which covers every packet before it on
// the FIFO path, is not held back.
inline Duration probe_timeout(const RttEstimate& rtt, uint32_t backoff, const EndpointConfig& cfg,
                              bool ack_delayed = true) {
    const Duration delay = ack_delayed ? cfg.max_ack_delay : Duration::zero();
    Duration base = rtt.has_rtt ? rtt.srtt + std::max(4 * rtt.rttvar, rtt.srtt) + delay
                                : 2 * cfg.initial_rtt;
    base = std::max(base, cfg.min_pto);
    const uint32_t shift = std::min<uint32_t>(backoff, 16);
    return std::min(base * (int64_t{1} << shift), cfg.max_pto);
}

// reorder_window: [LOSS-2] how long a hole below an acknowledged PSN may wait before it is
// lost: srtt >> reorder_window_shift (initial_rtt before a sample), at least
// min_reorder_window.
inline Duration reorder_window(const RttEstimate& rtt, const EndpointConfig& cfg) {
    const Duration r = rtt.srtt_or(cfg.initial_rtt);
    return std::max(Duration{r.count() >> cfg.reorder_window_shift}, cfg.min_reorder_window);
}

}  // namespace mroce::core
