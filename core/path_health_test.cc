// core/path_health_test.cc — [PATH-13]: what a path's loss score makes of its probing and
// its share of new data.
#include "core/path_health.h"

#include <gtest/gtest.h>

namespace mroce::core::path_health {
namespace {

// The loss score of [LOSS-6] after many packets at loss rate `l`, by its own update rule.
uint32_t settled_score(double l) {
    uint32_t score = 0;
    double carry = 0;
    for (int i = 0; i < 200000; ++i) {
        carry += l;
        if (carry >= 1) {
            carry -= 1;
            score += 1024;
        } else {
            score -= score / 64;
        }
    }
    return score;
}

TEST(PathHealth, ScoreEstimatesTheLossRate) {
    EXPECT_EQ(loss_q16(0), 0u);
    for (const double l : {0.01, 0.05, 0.185, 0.344, 0.6}) {
        const double est = loss_q16(settled_score(l)) / 65536.0;
        EXPECT_NEAR(est, l, 0.1 * l + 0.01) << "loss " << l;
    }
}

TEST(PathHealth, ProbesGrowWithLossAndStayBounded) {
    EXPECT_EQ(probes_per_step(0), 1u);                     // a clean path: one PROBE
    EXPECT_EQ(probes_per_step(300), 1u);                   // L = 0.5 %: one is enough
    EXPECT_EQ(probes_per_step(settled_score(0.04)), 2u);   // 1 % per cable, 4 hops: q = 5 %
    EXPECT_EQ(probes_per_step(settled_score(0.185)), 3u);  // 5 % per cable
    const uint32_t at34 = probes_per_step(settled_score(0.344));
    EXPECT_GE(at34, 4u);                                   // 10 % per cable
    EXPECT_LE(at34, 6u);
    EXPECT_EQ(probes_per_step(~0u), kMaxProbesPerStep);    // a dead path
    uint32_t last = 1;
    for (uint32_t s = 0; s < 4'000'000; s += 997) {        // never fewer for a worse path
        const uint32_t m = probes_per_step(s);
        ASSERT_GE(m, last) << "score " << s;
        last = m;
    }
}

TEST(PathHealth, SkippedTurnsFollowTheLoss) {
    for (const double l : {0.0, 0.1, 0.344, 0.9}) {
        const uint32_t score = settled_score(l);
        uint32_t debt = 0, skipped = 0;
        const uint32_t turns = 100000;
        for (uint32_t i = 0; i < turns; ++i) skipped += skip_for_loss(debt, score);
        EXPECT_NEAR(static_cast<double>(skipped) / turns, loss_q16(score) / 65536.0, 1e-4) << "loss " << l;
    }
}

}  // namespace
}  // namespace mroce::core::path_health
