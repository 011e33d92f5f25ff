// core/path_health.h — what a path's measured loss changes in how it is probed and used
// (spec [PATH-13]). Random loss must make a path carry less, not make it look dead: these
// are pure functions of the path's loss score ([LOSS-6]), kept apart from the connection so
// the rule can be read and tested on its own.
#pragma once

#include <algorithm>
#include <cstdint>

namespace mroce::core::path_health {

// [LOSS-6]: +1024 per loss declared, -score/64 per in-flight packet acknowledged. At a
// steady loss rate l the two balance where score = 65536 l / (1 - l), so
// score / (score + 65536) estimates l.
inline constexpr uint64_t kScoreScale = 65536;
inline constexpr uint32_t kOne = 1u << 16;  // 1.0 in the Q16 fractions below

// score_loss, score_delivery: the two updates of a loss score, for a path, a connection
// or an endpoint (whose scores count every path's losses and deliveries).
constexpr void score_loss(uint32_t& score) { score += 1024; }
constexpr void score_delivery(uint32_t& score) { score -= score >> 6; }

// loss_q16: the estimated loss rate of a path, in 1/65536.
constexpr uint32_t loss_q16(uint32_t score) {
    return static_cast<uint32_t>((uint64_t{score} << 16) / (score + kScoreScale));
}

inline constexpr uint32_t kMaxProbesPerStep = 8;

// probes_per_step: how many PROBEs one step of the timeout ladder sends ([PATH-13]): the
// fewest m (1..8) for which all m round trips failing, q^m, is at most 2^-miss_log2 (1/64
// for an ordinary step), where q = 1 - (1 - L)(1 - L^2) is the chance that a PROBE or both
// copies of its reply ([PROBE-2]) are lost. The step whose silence fails the path asks for
// 2^-12: a live path then fails at most about once in q^-1 x 4096 ladders.
constexpr uint32_t probes_per_step(uint32_t score, uint32_t miss_log2 = 6) {
    if (score == 0) return 1;
    const uint64_t l = loss_q16(score);
    const uint64_t l2 = (l * l) >> 16;
    const uint64_t q = kOne - (((kOne - l) * (kOne - l2)) >> 16);  // Q16
    uint64_t all_lost = uint64_t{kOne} << 16;                       // q^m, Q32
    for (uint32_t m = 1; m <= kMaxProbesPerStep; ++m) {
        all_lost = (all_lost * q) >> 16;
        if ((all_lost << miss_log2) <= (uint64_t{kOne} << 16)) return m;
    }
    return kMaxProbesPerStep;
}

inline constexpr uint32_t kMaxRetxCopies = 4;

// retx_copies: how many times a drained sender sends each retransmission ([LOSS-17]): the
// fewest n (1..4) for which all n copies being lost, L^n, is at most 1/16, L the
// connection's measured loss. 1 up to L = 1/16, 2 up to 1/4, 3 up to about 0.4.
constexpr uint32_t retx_copies(uint32_t score) {
    if (score == 0) return 1;
    const uint64_t l = loss_q16(score);
    uint64_t all_lost = l;  // L^n, Q16
    for (uint32_t n = 1; n < kMaxRetxCopies; ++n) {
        if ((all_lost << 4) <= kOne) return n;
        all_lost = (all_lost * l) >> 16;
    }
    return kMaxRetxCopies;
}

// The chance a failing step's PROBEs may all go unanswered on a live path, as a power of 2.
inline constexpr uint32_t kLastStepMissLog2 = 12;

// skip_for_loss: new data passes over a path a fraction L of the times its turn comes
// ([PATH-13], [PATH-10]), so a path carries new data in proportion to 1 - L. `debt`
// accumulates L per turn (Q16); each whole unit is one skipped turn.
constexpr bool skip_for_loss(uint32_t& debt, uint32_t score) {
    if (score == 0) return false;
    debt += loss_q16(score);
    if (debt < kOne) return false;
    debt -= kOne;
    return true;
}

// --- [PATH-13] item 5: a window's loss estimate that starts from a prior ---
//
// A score that starts at 0 reads as no loss until it has seen tens of packets: after d
// deliveries at a steady loss rate it holds only 1 - (63/64)^d of its settled value. A
// path carries few packets in its first round trips, so [PATH-13] item 4's stretch would
// start at nothing where it matters most. The remedy is to start the score from a prior:
// the estimate of something that has seen more packets (the connection's, all paths
// together; the endpoint's, all connections together), weighted by (63/64)^d, the share of
// its memory that the score has not yet filled with its own samples. The weight is kept in
// Q16: it starts at kOne and loses 1/64 per delivery, as the score itself does.
constexpr void weight_delivery(uint32_t& weight) { weight -= weight >> 6; }

// kMaxEstimate: a cap on the estimates below (L = 255/256); callers cap L lower still.
inline constexpr uint32_t kMaxEstimate = 255 * kOne;

// score_with_prior: score + weight x prior, the score as if it had started at `prior`.
constexpr uint32_t score_with_prior(uint32_t score, uint32_t weight, uint32_t prior) {
    return static_cast<uint32_t>(
        std::min<uint64_t>(score + ((uint64_t{weight} * prior) >> 16), kMaxEstimate));
}

// unbiased_score: a score with no prior, corrected for the memory it has not filled:
// score / (1 - weight). Before any delivery (weight = kOne) any loss reads as kMaxEstimate.
constexpr uint32_t unbiased_score(uint32_t score, uint32_t weight) {
    if (score == 0) return 0;
    if (weight >= kOne) return kMaxEstimate;
    return static_cast<uint32_t>(
        std::min<uint64_t>((uint64_t{score} << 16) / (kOne - weight), kMaxEstimate));
}

// window_for_loss: the bytes a path may have in flight under its measured loss ([PATH-13]
// item 4): the congestion window divided by 1 - L, L at most 1/2 (so at most twice the
// window). A lost DATA keeps its place in flight until it is declared lost, a round trip
// or more after it left; a window that is to deliver its size per round trip on a path that
// loses L of what it carries must hold that much more. Congestion is not helped by it: a
// loss that comes with a queue cuts the window itself ([CC-9]).
constexpr uint64_t window_for_loss(uint64_t window, uint32_t score) {
    if (score == 0) return window;
    const uint64_t l = std::min<uint64_t>(loss_q16(score), kOne / 2);
    return window * kOne / (kOne - l);
}

// --- [PATH-12]: evidence against a return route, weighed against random loss ---
//
// A return route is judged dead from things that went missing: ACK rounds never echoed,
// probe replies never answered. Random loss makes things go missing too, so the verdict
// waits until a live route whose loss is what we measure would have lost all of them with
// a chance below kMisfireQ30. Chances are in Q30 (1.0 = 2^30) so that products fit 64 bits.
inline constexpr uint64_t kOneQ30 = uint64_t{1} << 30;
inline constexpr uint64_t kMisfireQ30 = 64;  // 2^-24: a wrong verdict per 16 M judgements

// pow_q30: x^n, x in Q30 (at most 1.0), by squaring; once the result is known to be below
// kMisfireQ30 it stops early and returns 0 (only the comparison matters to the callers).
constexpr uint64_t pow_q30(uint64_t x, uint32_t n) {
    uint64_t result = kOneQ30;
    while (n) {
        if (n & 1) result = (result * x) >> 30;
        if (result < kMisfireQ30) return 0;
        n >>= 1;
        x = (x * x) >> 30;
    }
    return result;
}

// loss_q30: the loss rate estimated from a score ([LOSS-6]), in Q30.
constexpr uint64_t loss_q30(uint32_t score) { return uint64_t{loss_q16(score)} << 14; }

// echo_miss_q30: the chance that one ACK round on a live return route brings back no echo:
// the ACK or the peer's DATA that would carry its echo is lost, 1 - (1 - l)^2, l the loss
// of the peer's DATA as this side receives it (the ACKs' own loss is taken to be the same:
// random loss per cable hits both directions alike, and a route's ACK loss is the very
// thing being judged).
constexpr uint64_t echo_miss_q30(uint32_t rx_loss_score) {
    const uint64_t kept = kOneQ30 - loss_q30(rx_loss_score);
    return kOneQ30 - ((kept * kept) >> 30);
}

// unechoed_is_dead: `rounds` rounds in a row left unechoed are too many for a live route
// at this loss: every one of them missing would happen with a chance below kMisfireQ30.
constexpr bool unechoed_is_dead(uint32_t rounds, uint32_t rx_loss_score) {
    return pow_q30(echo_miss_q30(rx_loss_score), rounds) < kMisfireQ30;
}

}  // namespace mroce::core::path_health
