// cc/aimd_test.cc — the AIMD controller's rules ([CC-7]..[CC-9]) driven event by event.
#include "cc/aimd.h"

#include <gtest/gtest.h>

namespace mroce::cc {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kMss = 1000;
constexpr Duration kRtt = 100us;

struct Driver {
    explicit Driver(uint64_t initial = 4 * kMss, uint64_t max = 100 * kMss)
        : cc(2, AimdConfig{kMss, initial, max}) {}
    // One round trip on path 0: the window's worth acknowledged in `acks` ACKs, `ce` of
    // the packets echoed CE and `lost` declared lost; the round closes at its end.
    void round(uint64_t ce = 0, uint64_t lost = 0, Duration rtt = kRtt) {
        const uint64_t w = cc.window_bytes(0);
        for (uint64_t i = 0; i < lost; ++i) cc.on_loss(0, kMss, now);
        if (ce) cc.on_ecn(0, static_cast<uint32_t>(ce), now);
        for (uint64_t b = 0; b < w; b += kMss) {
            cc.on_ack(0, kMss, rtt, now);
            now += rtt / static_cast<int64_t>(w / kMss);
        }
    }
    Aimd cc;
    Time now{};
};

// [CC-7] slow start doubles the window each round trip up to the cap, path by path.
TEST(Aimd, SlowStartDoublesToTheCap) {
    Driver d;
    EXPECT_EQ(d.cc.window_bytes(0), 4 * kMss);
    d.round();
    EXPECT_EQ(d.cc.window_bytes(0), 8 * kMss);
    d.round();
    EXPECT_EQ(d.cc.window_bytes(0), 16 * kMss);
    for (int i = 0; i < 5; ++i) d.round();
    EXPECT_EQ(d.cc.window_bytes(0), 100 * kMss);
    EXPECT_EQ(d.cc.window_bytes(1), 4 * kMss);  // path 1 saw nothing
}

// [CC-8] [CC-10] the first marked round halves (α starts at 1) and ends slow start; α
// then follows the marked fraction, and congestion avoidance adds about one segment per
// round.
TEST(Aimd, EcnCutsByHalfAlphaAndGrowsLinearlyAfter) {
    Driver d(64 * kMss);
    d.round();  // opens the first round
    d.round(/*ce=*/64);
    const uint64_t after_cut = d.cc.window_bytes(0);
    EXPECT_LT(after_cut, 100 * kMss * 6 / 10);
    EXPECT_GT(after_cut, 100 * kMss * 4 / 10);
    EXPECT_FALSE(d.cc.in_slow_start(0));
    d.round();
    d.round();
    const uint64_t grown = d.cc.window_bytes(0);
    EXPECT_GE(grown, after_cut + kMss);
    EXPECT_LE(grown, after_cut + 3 * kMss);
    // Rounds with a small marked fraction cut a little: α has decayed below 1.
    const uint32_t alpha = d.cc.alpha(0);
    EXPECT_LT(alpha, Aimd::kAlphaOne);
    const uint64_t before = d.cc.window_bytes(0);
    d.round(/*ce=*/1);
    EXPECT_LT(d.cc.window_bytes(0), before);
    EXPECT_GT(d.cc.window_bytes(0), before * 55 / 100);
}

// [CC-9] [CC-2] loss alone costs no window, however heavy: random loss is not congestion.
// Loss with CE in the same round, or with the RTT above twice its minimum (a queue that
// overflowed on a fabric that does not mark), halves it.
TEST(Aimd, LossCutsOnlyWithSignsOfAQueue) {
    Driver d(100 * kMss);
    d.round();
    d.round(0, /*lost=*/2);
    EXPECT_EQ(d.cc.window_bytes(0), 100 * kMss);
    d.round(0, /*lost=*/40);  // 34% of the round lost at random: still no cut
    d.round();
    EXPECT_EQ(d.cc.window_bytes(0), 100 * kMss);
    d.round(0, /*lost=*/3, /*rtt=*/3 * kRtt);  // the same loss with a standing queue
    d.round(0, 0, 3 * kRtt);                   // (the cut lands when that round closes)
    EXPECT_GE(d.cc.window_bytes(0), 50 * kMss);  // halved, then a segment or so per round
    EXPECT_LE(d.cc.window_bytes(0), 53 * kMss);
}

// [CC-9] loss in a round that also echoed CE is an overflowing marking queue: at least half,
// even when α has decayed and [CC-8] alone would cut less.
TEST(Aimd, LossWithCeCutsAtLeastHalf) {
    Driver d(100 * kMss);
    d.round();
    d.round(/*ce=*/1);  // first mark: halves, α starts decaying
    for (int i = 0; i < 30; ++i) d.round();
    const uint64_t before = d.cc.window_bytes(0);
    d.round(/*ce=*/1, /*lost=*/1);
    d.round();
    EXPECT_LE(d.cc.window_bytes(0), before / 2 + 2 * kMss);
}

// [CC-17] the window rate is Σ cwnd / RTT with a quarter more, and 0 before any RTT sample;
// a path without a sample counts at the smallest RTT the others reported.
TEST(Aimd, WindowRateIsWindowsOverRttWithAMargin) {
    Driver d(10 * kMss, 10 * kMss);
    EXPECT_EQ(d.cc.window_rate_bps(), 0u);
    d.round();
    // path 0: 10 000 bytes per 100 µs = 800 Mbit/s, × 5/4; path 1, without a sample, the
    // same at path 0's RTT.
    EXPECT_EQ(d.cc.window_rate_bps(), 2'000'000'000u);
    // Its own first sample (200 µs) replaces the borrowed RTT.
    d.cc.on_ack(1, kMss, 2 * kRtt, d.now);
    EXPECT_EQ(d.cc.window_rate_bps(), 1'500'000'000u);
    // A smaller RTT on path 0 moves only path 0's part: no path is without a sample now.
    d.round(0, 0, kRtt / 2);
    EXPECT_EQ(d.cc.window_rate_bps(), 2'500'000'000u);
}

// The window never falls below one segment nor rises above the cap.
TEST(Aimd, WindowStaysBetweenOneSegmentAndTheCap) {
    Driver d(64 * kMss, 64 * kMss);
    for (int i = 0; i < 20; ++i) {
        d.round(/*ce=*/50);
        EXPECT_GE(d.cc.window_bytes(0), kMss);
    }
    EXPECT_LE(d.cc.window_bytes(0), 4 * kMss);  // from 64: halved each round, +1 segment
    for (int i = 0; i < 200; ++i) d.round();
    EXPECT_EQ(d.cc.window_bytes(0), 64 * kMss);
}

}  // namespace
}  // namespace mroce::cc
