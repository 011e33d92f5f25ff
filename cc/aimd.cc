// cc/aimd.cc — ECN-driven AIMD per path; see aimd.h and spec §9.
#include "cc/aimd.h"

#include <algorithm>

#include "util/muldiv.h"

namespace mroce::cc {

Aimd::Aimd(uint16_t paths, const AimdConfig& cfg) : cfg_(cfg), paths_(paths) {
    for (PathCc& p : paths_) {
        p.cwnd = std::min(cfg_.initial_window, cfg_.max_window);
        p.ssthresh = cfg_.max_window;
        p.alpha = kAlphaOne;  // as DCTCP: the first marked round halves the window
        clamp(p);
    }
}

void Aimd::on_sent(uint16_t, uint32_t, Time) {}

void Aimd::on_ack(uint16_t path, uint32_t bytes, Duration rtt, Time now) {
    PathCc& p = paths_[path];
    p.acked_bytes += bytes;
    // The unsampled paths' part of the window rate changes when one of them moves its window
    // or gets its first sample, or when the smallest RTT falls: a few times per connection.
    bool unsampled_changed = p.rtt == Duration::zero();
    if (rtt > Duration::zero()) {
        p.rtt = rtt;
        if (p.min_rtt == Duration::zero() || rtt < p.min_rtt) p.min_rtt = rtt;
        if (min_rtt_ == Duration::zero() || rtt < min_rtt_) {
            min_rtt_ = rtt;
            unsampled_changed = true;
        }
    }
    // [CC-7]: slow start adds what was acknowledged (doubling per round trip); congestion
    // avoidance adds one segment per window acknowledged.
    if (p.cwnd < p.ssthresh)
        p.cwnd += bytes;
    else
        p.cwnd += std::max<uint64_t>(1, uint64_t{cfg_.mss} * bytes / p.cwnd);
    clamp(p);
    refresh_rate(p);
    if (unsampled_changed) refresh_unsampled();
    // A round is one smoothed RTT long; the first ACK at or after its end closes it. Without
    // an RTT sample yet, every ACK closes one.
    if (!p.round_started) {
        p.round_started = true;
        p.round_end = now + rtt;
        return;
    }
    if (now < p.round_end) return;
    end_round(p);
    p.round_end = now + rtt;
}

void Aimd::on_ecn(uint16_t path, uint32_t ce_packets, Time) { paths_[path].ce_packets += ce_packets; }

void Aimd::on_loss(uint16_t path, uint32_t, Time) { ++paths_[path].lost_packets; }

void Aimd::end_round(PathCc& p) {
    const uint64_t acked = (p.acked_bytes + cfg_.mss - 1) / cfg_.mss;
    // [CC-8]: α ← α − α/16 + F/16, F the fraction of the round's packets echoed CE.
    const uint64_t ce = std::min(p.ce_packets, acked);
    const uint32_t f = acked ? static_cast<uint32_t>(ce * kAlphaOne / acked) : 0;
    p.alpha = p.alpha - (p.alpha >> kGainShift) + (f >> kGainShift);
    uint64_t cut = 0;
    if (p.ce_packets > 0) cut = p.cwnd * std::max<uint32_t>(p.alpha, 1) / (2 * kAlphaOne);
    // [CC-9]: loss is congestion only with a queue to show for it: CE in the same round (a
    // marking queue that overflowed), or the RTT standing above twice its minimum (a queue
    // on a fabric that does not mark). Loss alone, at any rate, is random loss ([CC-2]):
    // cutting on it would cost far more goodput than the loss itself.
    const bool queued = p.min_rtt > Duration::zero() && p.rtt > 2 * p.min_rtt;
    if (p.lost_packets > 0 && (p.ce_packets > 0 || queued)) cut = std::max(cut, p.cwnd / 2);
    if (cut > 0) {
        p.cwnd -= cut;
        clamp(p);
        p.ssthresh = p.cwnd;  // [CC-10]: the first signal ends slow start for good
        refresh_rate(p);
        if (p.rtt == Duration::zero()) refresh_unsampled();
    }
    p.acked_bytes = p.ce_packets = p.lost_packets = 0;
}

void Aimd::refresh_rate(PathCc& p) {
    // [CC-17]: the window over its round trip, with a quarter more, so that in steady state
    // the window, not the pacer, is what binds; the pacer only spreads the bursts.
    const uint64_t r =
        p.rtt > Duration::zero() ? mul_div(p.cwnd, 10'000'000'000u, static_cast<uint64_t>(to_ns(p.rtt))) : 0;
    rate_ = rate_ - p.rate + r;
    p.rate = r;
}

void Aimd::refresh_unsampled() {
    // [CC-17]: a path without an RTT sample counts at the smallest RTT of the others: the
    // paths of a connection are routes of similar delay ([PATH-11]). Counted as 0, they
    // held a new connection's pacing rate to the share of the paths its first-RTT budget
    // reached (8 of 16) for a round trip.
    uint64_t cwnd = 0;
    for (const PathCc& p : paths_)
        if (p.rtt == Duration::zero()) cwnd += p.cwnd;
    unsampled_rate_ = min_rtt_ > Duration::zero()
                          ? mul_div(cwnd, 10'000'000'000u, static_cast<uint64_t>(to_ns(min_rtt_)))
                          : 0;
}

void Aimd::clamp(PathCc& p) const {
    p.cwnd = std::clamp<uint64_t>(p.cwnd, cfg_.mss, std::max<uint64_t>(cfg_.max_window, cfg_.mss));
}

}  // namespace mroce::cc
