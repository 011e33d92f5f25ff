// cc/fair_share.cc — the receiver's fair-share rate hint; see fair_share.h and spec §9.2.
#include "cc/fair_share.h"

#include <algorithm>
#include <limits>

#include "util/muldiv.h"

namespace mroce::cc {

namespace {
constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();
// [CC-13]: a sender's rate is measured over a window of at least kRateIntervals intervals
// and kRatePackets packets' time at its share: a shorter one holds too few of a paced
// sender's packets to tell its rate from its luck.
constexpr uint32_t kRateIntervals = 8;
constexpr uint32_t kRatePackets = 16;
constexpr int64_t kMaxGapIntervals = 64;
// bytes over ns as bit/s, without overflow for any byte count one interval can hold.
uint64_t bits_per_second(uint64_t bytes, int64_t ns) {
    if (ns <= 0) return 0;
    return mul_div(bytes, 8'000'000'000u, static_cast<uint64_t>(ns));
}
}  // namespace

// [CC-12]: shares are in payload bit/s, as senders pace payload: the capacity less each
// packet's DATA header.
FairShare::FairShare(const FairShareConfig& cfg)
    : cfg_(cfg),
      capacity_(mul_div(cfg.capacity_bps, cfg.mss, uint64_t{cfg.mss} + cfg.header_bytes)),
      allocation_(capacity_) {
    cfg_.young_weight = std::max<uint8_t>(cfg_.young_weight, 1);
}

void FairShare::on_arrival(uint32_t sender, uint8_t tc, uint32_t bytes, uint32_t owd, Time now,
                           bool drained) {
    if (sender >= senders_.size()) senders_.resize(sender + 1);
    Sender& s = senders_[sender];
    // [CC-12]: the sender's clock when it sent this DATA, from the one-way delay. A DATA
    // sent after the one that drained it is new activity, flagged or not.
    const uint32_t sent = static_cast<uint32_t>(to_ns(now)) - owd;
    const bool newer = !s.drained || static_cast<int32_t>(sent - s.drained_ts) > 0;
    if (drained && (newer || sent == s.drained_ts)) {
        s.drained = true;
        s.drained_ts = sent;
    } else if (!drained && newer) {
        s.drained = false;  // sent after its DRAINED one: it has more to send
    }
    const bool activates = !s.active && newer;
    if (activates) {
        // [CC-15]: a new sender counts from its first packet. Until the next recomputation
        // it is offered an equal weighted part of the allocation. (A DATA sent before the
        // one that drained it does not count: it is the tail of what the sender sent
        // before it drained; it took the downlink, but it asks for no share.)
        s.active = true;
        s.granted_until = Time{};  // [CC-20]: counted as active from now on
        s.told = 0;
        s.measured = false;
        s.window_start = now;
        s.window_bytes = 0;
        s.rate = 0;
        s.bytes = 0;
        s.classes = 0;
        s.owd_sampled = false;
        s.weight = cfg_.class_weights[tc & 7];
        s.backlog = static_cast<uint32_t>(std::min<uint64_t>(cfg_.first_rtt_bytes, UINT32_MAX));
        s.first_sent = sent;
        s.sent_span = 0;
        s.bytes_after_first = 0;
        s.attained = 0;
        // [CC-21]: favoured beside an old sender only: the senders of an incast into an idle
        // receiver are not, and share as they would without the preference (favoured ones
        // that became old at different times would starve each other in turn).
        s.favoured = cfg_.young_weight > 1 && any_old();
        // [CC-21]: weights as the shares count them, a favoured sender's raised.
        const uint64_t weight = effective_weight(s);
        uint64_t total_weight = weight;
        for (uint32_t id : active_) total_weight += effective_weight(senders_[id]);
        // [CC-15], [CC-20]: and the senders granted a share by a HELLO_ACK that are not
        // active yet, each as its grant counted it. The first sender of an incast to arrive
        // would otherwise be offered the whole allocation while the others' first round
        // trips, granted a part of it, are on their way.
        total_weight += pending_grant_weight(sender, now);
        s.share = allocation_ * weight / total_weight;
        active_.push_back(sender);
        if (active_.size() == 1) {
            last_update_ = now;
            next_update_ = now + cfg_.interval;
        }
    }
    // The gap since its previous packet, also across a spell of inactivity: a sender that
    // sends one packet every few intervals is still one sender. Gaps of more than
    // kMaxGapIntervals do not count: such a sender holds no share between its packets.
    if (s.has_base) s.gap = std::min<Duration>(now - s.last_arrival, kMaxGapIntervals * cfg_.interval);
    s.last_arrival = now;
    // [CC-14]: what is left of its first-RTT budget, and how fast it sent it (the send
    // times of later packets relative to the one that made it active; one sent earlier,
    // overtaken on another path, extends nothing).
    if (!activates && !s.measured) {
        s.bytes_after_first += bytes;
        const int32_t since = static_cast<int32_t>(sent - s.first_sent);
        if (since > static_cast<int32_t>(s.sent_span)) s.sent_span = static_cast<uint32_t>(since);
    }
    s.backlog -= std::min(s.backlog, bytes);
    const uint32_t attained_before = s.attained;
    s.attained = static_cast<uint32_t>(std::min<uint64_t>(uint64_t{s.attained} + bytes, UINT32_MAX));
    // [CC-21]: a young sender whose whole first-RTT budget has arrived without DRAINED has
    // more to send than its first round trip carries. Beside a sender that is no longer
    // young, the shares are divided again at the next update, not an interval later, so
    // that the old ones make room before its paced phase begins (its packets would queue
    // behind theirs). One that ends within its budget moves no one.
    if (s.favoured && !realloc_ && !s.drained && attained_before < cfg_.first_rtt_bytes &&
        s.attained >= cfg_.first_rtt_bytes && s.attained < cfg_.young_bytes && any_old()) {
        realloc_ = true;
        realloc_at_ = now;
    }
    if (s.drained) s.backlog = 0;  // it has nothing left to send
    s.bytes += bytes;
    s.classes |= static_cast<uint8_t>(1u << (tc & 7));
    // [CC-14]: the delay above the sender's base; serial arithmetic, as the offset between
    // the clocks may sit anywhere modulo 2^32. A new sender's base discounts the queue the
    // previous arrival showed, if that came within an interval (an older one says
    // nothing of the queue now); after that the base follows the smallest delay.
    if (!s.has_base) {
        s.owd_base = owd - (now - last_arrival_ < cfg_.interval ? last_excess_ : 0);
        s.has_base = true;
    } else if (static_cast<int32_t>(owd - s.owd_base) < 0) {
        s.owd_base = owd;
    }
    last_excess_ = owd - s.owd_base;
    last_arrival_ = now;
    bytes_ += bytes;
    // ... of which at most the downlink's busy run can have been met in front of this
    // downlink: the first packet after it idled found no queue there, whatever its delay.
    extend_run(now, bytes);
    const uint32_t here =
        static_cast<uint32_t>(std::min<int64_t>(last_excess_, to_ns(now - run_start_)));
    if (!s.owd_sampled || here < s.excess_min) {
        s.excess_min = here;
        s.owd_sampled = true;
    }
}

void FairShare::extend_run(Time now, uint64_t bytes) {
    // The downlink idled if less arrived since the run began than C sends in that time,
    // by more than a quarter interval at C (the queue's target, which absorbs a datapath's
    // batching) plus a sixteenth of the time (traffic the hint does not see: ACKs, other
    // protocols). The slack is credited once, when the run begins, not at every arrival.
    const int64_t ns = to_ns(now - run_start_);
    const uint64_t at_c =
        ns > 0 ? mul_div(static_cast<uint64_t>(ns), capacity_, 8'000'000'000u) : 0;
    if (at_c > run_bytes_ + at_c / 16) {
        run_start_ = now;
        run_bytes_ =
            mul_div(static_cast<uint64_t>(to_ns(cfg_.interval)) / 4, capacity_, 8'000'000'000u);
    }
    run_bytes_ += bytes;
}

void FairShare::forget(uint32_t sender) {
    if (sender >= senders_.size()) return;
    Sender& s = senders_[sender];
    if (s.active) active_.erase(std::find(active_.begin(), active_.end(), sender));
    s = Sender{};
}

uint64_t FairShare::pending_grant_weight(uint32_t sender, Time now) const {
    const uint64_t w = std::max<uint8_t>(cfg_.class_weights[0], 1);
    uint64_t total = 0;
    for (uint32_t id : granted_)
        if (id != sender && !senders_[id].active && senders_[id].granted_until > now) total += w;
    return total;
}

uint64_t FairShare::grant_bps(uint32_t sender, Time now) {
    if (sender >= senders_.size()) senders_.resize(sender + 1);
    if (senders_[sender].active) return senders_[sender].share;
    // [CC-20]: lapsed grants, and grants whose sender is active now (it counts as such),
    // no longer count.
    std::erase_if(granted_, [&](uint32_t id) { return senders_[id].active || senders_[id].granted_until <= now; });
    // [CC-21]: the active ones count as the shares count them; the new sender's own weight
    // is not raised (a favoured grant, a larger first round trip, cost a 10 ms-RTT sender
    // beside three 10 µs senders a third of its goodput after).
    const uint64_t w = std::max<uint8_t>(cfg_.class_weights[0], 1);
    uint64_t total = w + pending_grant_weight(sender, now);
    for (uint32_t id : active_) total += effective_weight(senders_[id]);
    const bool pending = std::find(granted_.begin(), granted_.end(), sender) != granted_.end();
    Sender& s = senders_[sender];
    if (!pending) {
        // A repeat (another copy of the HELLO) keeps its first grant's lifetime.
        s.granted_until = now + 2 * cfg_.interval;
        granted_.push_back(sender);
    }
    return allocation_ * w / total;
}

bool FairShare::any_old() const {
    for (uint32_t id : active_)
        if (senders_[id].attained >= cfg_.young_bytes) return true;
    return false;
}

bool FairShare::bursting(const Sender& s, Time now) const {
    // [CC-14]: still in its first two intervals (its first rate window cannot close before
    // eight), and its packets after the first left at least at half the capacity: it sent
    // its first-RTT budget back to back, so what has not arrived of it is queued or on
    // the way. A sender held back by its own NIC (an all-to-all's) spreads its packets and
    // has sent little of its budget; counting that would starve an idle downlink.
    if (s.measured || now - s.window_start >= 2 * cfg_.interval || s.sent_span == 0) return false;
    return 2 * mul_div(s.bytes_after_first, 8'000'000'000u, s.sent_span) >= capacity_;
}

const std::vector<uint32_t>& FairShare::update(Time now) {
    raised_.clear();
    if (active_.empty()) {
        realloc_ = false;
    } else if (now >= next_update_) {
        recompute(now);
    } else if (realloc_ && now >= realloc_at_) {
        allocate(now);  // [CC-21]: the allocation and the demands of the last recomputation
    }
    realloc_ = realloc_ && now < realloc_at_;
    return raised_;
}

uint32_t FairShare::hint_mbps(uint32_t sender) {
    if (sender >= senders_.size() || !senders_[sender].active) return 0;
    Sender& s = senders_[sender];
    s.told = std::max<uint64_t>(s.share, 1'000'000);
    // [CC-16]: Mbit/s, rounded down, at least 1 (0 on the wire means "no hint").
    const uint64_t mbps = s.share / 1'000'000;
    return static_cast<uint32_t>(std::clamp<uint64_t>(mbps, 1, std::numeric_limits<uint32_t>::max()));
}

Duration FairShare::idle_timeout(const Sender& s) const {
    // [CC-12]: silent for two intervals, or, when longer, for four of its own last gaps
    // between packets, or four packets' time at the hint it was last told or at the rate it
    // sends, whichever is slower: a sender held to a small hint, or one that sends little,
    // sends rarely and is still there.
    const uint64_t rate = s.rate ? std::min(s.rate, s.told) : s.told;
    const uint64_t packet_ns = rate ? mul_div(cfg_.mss, 8'000'000'000u, rate) : 0;
    const int64_t t = std::max<int64_t>(4 * to_ns(s.gap), static_cast<int64_t>(std::min<uint64_t>(4 * packet_ns, 1'000'000'000)));
    return std::max<Duration>(2 * cfg_.interval, Duration{std::min<int64_t>(t, 1'000'000'000)});
}

uint64_t FairShare::demand(const Sender& s, uint64_t equal) const {
    // Unbounded until measured, and while it uses at least three quarters of its share. One
    // that uses less is given twice its use: it then uses half, so the test is stable, and
    // it can double.
    if (!s.measured || 4 * s.rate >= 3 * s.share) return kUnbounded;
    // At least a quarter of an equal part, so that a sender that idles between bursts is
    // not held to a trickle when the next one comes.
    return std::max(2 * s.rate, equal / 4);
}

void FairShare::recompute(Time now) {
    const int64_t elapsed = to_ns(now - last_update_);
    last_update_ = now;
    next_update_ = now + cfg_.interval;

    // Rates, activity and the shared queue.
    bool any_sample = false;
    uint32_t queue = 0;
    uint64_t backlog = 0;  // [CC-14] first-RTT bytes of bursting senders not yet arrived
    for (size_t i = 0; i < active_.size();) {
        Sender& s = senders_[active_[i]];
        s.window_bytes += s.bytes;
        const int64_t window = to_ns(now - s.window_start);
        const int64_t needed = std::max<int64_t>(
            kRateIntervals * to_ns(cfg_.interval),
            s.share ? static_cast<int64_t>(mul_div(uint64_t{kRatePackets} * cfg_.mss, 8'000'000'000u, s.share)) : 0);
        if (window >= needed) {
            s.rate = bits_per_second(s.window_bytes, window);
            s.measured = true;
            s.window_bytes = 0;
            s.window_start = now;
        }
        if (s.classes) {
            uint16_t w = 0;
            for (uint8_t c = 0; c < 8; ++c)
                if (s.classes & (1u << c)) w = static_cast<uint16_t>(w + cfg_.class_weights[c]);
            s.weight = w;
        }
        if (s.backlog && bursting(s, now)) backlog += s.backlog;
        if (s.owd_sampled) {
            queue = any_sample ? std::min(queue, s.excess_min) : s.excess_min;
            any_sample = true;
        }
        s.bytes = 0;
        s.classes = 0;
        s.owd_sampled = false;
        // Silence counts from its last arrival or from its share's last rise, whichever is
        // later: a sender held at the floor while a queue drained had nothing to send; let
        // go before it could answer a raised hint, it came back as a new, favoured sender
        // ([CC-21]) beside the ones that had answered (8 -> 1 with 4 KiB messages: five of
        // eight senders at 16 times the others' share).
        if (s.drained || now - std::max(s.last_arrival, s.raised_at) > idle_timeout(s)) {
            s.active = false;  // [CC-12]: drained or gone quiet; no longer shares the capacity
            s.share = 0;
            active_[i] = active_.back();
            active_.pop_back();
            continue;
        }
        ++i;
    }
    // [CC-14]: a queue in front of this receiver needs its downlink busy: arrivals of at
    // least three quarters of the capacity. Below that, delay and marks come from a queue
    // elsewhere (one sender's own route, a slower core link), which the senders' AIMD
    // answers; and an interval without any arrival is an idle downlink.
    const uint64_t c = capacity_;
    const bool busy = 4 * bits_per_second(bytes_, elapsed) >= 3 * c;
    queue_ns_ = any_sample && busy ? queue : 0;
    bytes_ = 0;

    // [CC-14]: less than the capacity while the one-way delay shows a queue, enough less
    // to drain it in about two intervals. CE marks do not move the allocation: a mark may
    // come from any queue on a sender's route (in an all-to-all most come from the core),
    // and the sender's AIMD answers those per path ([CC-2]).
    // Only the queue above a target of a quarter interval counts: many senders paced at
    // shares that add up to C still queue a few packets by chance (63 senders into each
    // receiver of an all-to-all), and answering those with less allocation left the
    // downlinks idle (bench-a2a64: 0.886 of ideal without the target, 0.92 with it).
    // The drain distance is at least the time half of the active senders' packets take
    // at C: a sender paced at its share of C among N sends one packet per N packet times,
    // and a cut reaches the queue only with its next packet. A shorter distance answers the
    // chance bunching of many such senders (about √N packets, long ones at a low line
    // rate) with the floor, and the downlink idles until the held senders are raised again
    // (25 Gbit/s, 128 -> 1: 0.77 of ideal, stalls of 37 ms; 0.96 and 4 ms with this rule).
    // Up to 4 × interval / packet time senders (96 at 100 Gbit/s and 8 µs) it changes nothing.
    const uint64_t packet_ns = c ? mul_div(cfg_.mss, 8'000'000'000u, c) : 0;
    const uint64_t drain_ns = std::max<uint64_t>(2 * static_cast<uint64_t>(to_ns(cfg_.interval)),
                                                 active_.size() * packet_ns / 2);
    const uint64_t target_ns = static_cast<uint64_t>(to_ns(cfg_.interval)) / 4;
    // A queue that grew by three quarters of an interval since the last recomputation is
    // answered as it will be an interval from now: the delay shows a queue only once
    // packets have waited through it, an interval late, and only arrivals at 1.75 C or
    // more (the first round trip of an incast, [CC-15]) grow it that fast; the chance
    // queueing of paced senders never does (bench-a2a64 is unchanged by this rule, the
    // 32 -> 1 incast settles an interval sooner).
    const int64_t growth = queue_ns_ - previous_queue_ns_;
    previous_queue_ns_ = queue_ns_;
    uint64_t queue_ns = static_cast<uint64_t>(
        4 * growth >= 3 * to_ns(cfg_.interval) ? queue_ns_ + growth : queue_ns_);
    // The first-RTT backlog: bytes that new senders sent back to back before any hint
    // could reach them and that have not arrived are in the queue or about to join it,
    // where the delay cannot see them yet (it shows a queue only once packets have waited
    // through it). An incast whose bursts arrive spread out grew its queue too slowly for
    // the growth rule, and the hints of the next intervals rebuilt it (16 -> 1 to
    // 32 -> 1 settled in 1.7-2.8 base RTTs; with this rule in at most 1.7).
    if (busy) queue_ns = std::max(queue_ns, mul_div(backlog, 8'000'000'000u, c));
    const uint64_t excess = queue_ns > target_ns ? queue_ns - target_ns : 0;
    const uint64_t by_delay = excess >= drain_ns ? 0 : mul_div(c, drain_ns - excess, drain_ns);
    // [CC-19]: it falls at once but rises at most fourfold per interval, and from deep
    // below C at most to C/4 first. A jump from the floor straight to C raised every held
    // sender at once; their packets, all sent within an interval, rebuilt the queue before
    // the delay could show it, and the allocation fell to the floor again (256 -> 1 cycled
    // this way until its first sender finished).
    const uint64_t by_queue = std::max(by_delay, c / kFloorDivisor);
    allocation_ = std::min(by_queue, std::max(kRiseFactor * allocation_, c / kRiseBaseDivisor));
    allocate(now);
}

void FairShare::allocate(Time now) {
    // [CC-13]: weighted max-min (water-filling): senders in order of demand per unit of
    // weight; each takes its demand while that is below an equal weighted part of what is
    // left, and the rest split what remains by weight. What no sender wants is then split
    // by weight over all of them: the shares always add up to the allocation.
    // [CC-21]: with each sender's effective weight (a young one's raised).
    order_.clear();
    uint64_t total_weight = 0;
    for (uint32_t id : active_) total_weight += effective_weight(senders_[id]);
    const uint64_t all_weight = total_weight;
    for (uint32_t id : active_) {
        const Sender& s = senders_[id];
        const uint64_t w = effective_weight(s);
        const uint64_t d = demand(s, allocation_ * w / all_weight);
        order_.emplace_back(d == kUnbounded ? kUnbounded : d / w, id);
    }
    std::sort(order_.begin(), order_.end());
    uint64_t left = allocation_;
    for (const auto& [per_weight, id] : order_) {
        Sender& s = senders_[id];
        const uint64_t w = effective_weight(s);
        const uint64_t equal = total_weight ? left * w / total_weight : 0;
        const uint64_t d = per_weight == kUnbounded ? kUnbounded : demand(s, allocation_ * w / all_weight);
        s.share = std::min(d, equal);
        left -= s.share;
        total_weight -= w;
    }
    const uint64_t spare = left;
    for (size_t i = 0; i < active_.size(); ++i) {
        Sender& s = senders_[active_[i]];
        s.share += spare * effective_weight(s) / all_weight;
        // [CC-14]: pushed at once when its share is a quarter above the hint it last heard,
        // or below half of it: a sender told too much while an incast builds would
        // otherwise keep sending at it until its own packets, queued, bring back the ACKs.
        const bool rose = s.told > 0 && 4 * s.share >= 5 * s.told;
        if (rose) s.raised_at = now;  // [CC-12]: its silence counts from here
        if (rose || (s.told > 0 && 2 * s.share < s.told)) raised_.push_back(active_[i]);
    }
}

}  // namespace mroce::cc
