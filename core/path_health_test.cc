// core/path_health_test.cc — [PATH-13]: what a path's loss score makes of its probing and
// its share of new data; [PATH-12]: how much missing evidence a lossy return route excuses.
#include "core/path_health.h"

#include <gtest/gtest.h>

#include <cmath>

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

// [PATH-13] item 5: a score that starts at 0 reads low for its first tens of deliveries;
// started from a prior weighted (63/64)^d it estimates the loss from the first packet, and
// unbiased_score corrects a score that has no prior. Deterministic: losses every 1/l-th event.
TEST(PathHealth, AScoreStartedFromAPriorIsNotBiasedLow) {
    constexpr double l = 0.344;
    const uint32_t settled = settled_score(l);
    uint32_t score = 0;
    uint32_t weight = kOne;
    double carry = 0;
    int deliveries = 0;
    for (int event = 1; event <= 40; ++event) {
        carry += l;
        if (carry >= 1) {
            carry -= 1;
            score_loss(score);
        } else {
            score_delivery(score);
            weight_delivery(weight);
            ++deliveries;
        }
        // Early on the plain score is far below the settled one; with the settled score as
        // its prior, the estimate stays within 20 % of it.
        const double with_prior = loss_q16(score_with_prior(score, weight, settled)) / 65536.0;
        EXPECT_NEAR(with_prior, l, 0.2 * l) << "event " << event;
        if (event >= 5) {  // the unbiased score follows the losses seen so far
            const double seen = 1.0 - static_cast<double>(deliveries) / event;
            const double unbiased = loss_q16(unbiased_score(score, weight)) / 65536.0;
            EXPECT_NEAR(unbiased, seen, 0.1 * seen) << "event " << event;
        }
        if (event == 10) {
            EXPECT_LT(loss_q16(score) / 65536.0, l / 2);  // the bias removed
        }
    }
    // The prior's weight fades as the score's own samples come: (63/64)^d after d
    // deliveries; none of the prior is left at weight 0.
    EXPECT_NEAR(weight / 65536.0, std::pow(63.0 / 64, deliveries), 0.01);
    EXPECT_EQ(score_with_prior(score, 0, settled), score);
    EXPECT_EQ(score_with_prior(0, kOne, settled), settled);
    // No sample at all: no loss reads as none, a loss before any delivery as the cap.
    EXPECT_EQ(unbiased_score(0, kOne), 0u);
    EXPECT_EQ(unbiased_score(1024, kOne), kMaxEstimate);
    EXPECT_EQ(score_with_prior(kMaxEstimate, kOne, kMaxEstimate), kMaxEstimate);
}

// [LOSS-17]: a drained sender's retransmission goes as the fewest copies n (at most 4)
// for which L^n <= 1/16: one at the losses of a healthy fabric, three at 34 %.
TEST(PathHealth, RetxCopiesFollowTheLoss) {
    const auto score_of = [](double l) { return static_cast<uint32_t>(65536 * l / (1 - l)); };
    EXPECT_EQ(retx_copies(0), 1u);
    EXPECT_EQ(retx_copies(score_of(0.039)), 1u);  // 1 % on each of 4 cables
    EXPECT_EQ(retx_copies(score_of(0.0625)), 1u);
    EXPECT_EQ(retx_copies(score_of(0.07)), 2u);
    EXPECT_EQ(retx_copies(score_of(0.185)), 2u);  // 5 % per cable
    EXPECT_EQ(retx_copies(score_of(0.26)), 3u);
    EXPECT_EQ(retx_copies(score_of(0.344)), 3u);  // 10 % per cable
    EXPECT_EQ(retx_copies(score_of(0.45)), 4u);
    EXPECT_EQ(retx_copies(0xFFFFFFFFu), kMaxRetxCopies);
    for (uint32_t score = 0; score < (1u << 22); score += 997) {  // at least as many with more loss
        EXPECT_LE(retx_copies(score), retx_copies(score + 997)) << score;
        const double l = loss_q16(score) / 65536.0;
        const uint32_t n = retx_copies(score);
        if (n < kMaxRetxCopies) {
            EXPECT_LE(std::pow(l, n), 1.0 / 16 + 1e-3) << score;
        }
        if (n > 1) {
            EXPECT_GT(std::pow(l, n - 1), 1.0 / 16 - 1e-3) << score;
        }
    }
}

TEST(PathHealth, TheStepThatFailsAPathSendsEnoughForItsLoss) {
    // [PATH-13]: the last step's PROBEs must all die on a live path with a chance of at
    // most 2^-12, not 1/64.
    EXPECT_EQ(probes_per_step(0, kLastStepMissLog2), 1u);
    EXPECT_EQ(probes_per_step(settled_score(0.04), kLastStepMissLog2), 3u);   // 1 % per cable
    EXPECT_EQ(probes_per_step(settled_score(0.078), kLastStepMissLog2), 4u);  // 2 % per cable
    EXPECT_EQ(probes_per_step(~0u, kLastStepMissLog2), kMaxProbesPerStep);
    for (uint32_t s = 0; s < 4'000'000; s += 997)
        ASSERT_GE(probes_per_step(s, kLastStepMissLog2), probes_per_step(s)) << "score " << s;
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


// rounds_needed: the fewest unechoed rounds that unechoed_is_dead accepts at this score.
uint32_t rounds_needed(uint32_t score) {
    uint32_t n = 1;
    while (!unechoed_is_dead(n, score) && n < 100000) ++n;
    return n;
}

TEST(PathHealth, PowerByRepeatedSquaring) {
    EXPECT_EQ(pow_q30(kOneQ30, 1000), kOneQ30);
    EXPECT_EQ(pow_q30(kOneQ30 / 2, 0), kOneQ30);
    EXPECT_EQ(pow_q30(kOneQ30 / 2, 3), kOneQ30 / 8);
    EXPECT_EQ(pow_q30(kOneQ30 / 2, 23), kOneQ30 >> 23);  // 128: still above 2^-24
    EXPECT_EQ(pow_q30(kOneQ30 / 2, 25), 0u);             // below 2^-24: reported as 0
    EXPECT_EQ(pow_q30(0, 1), 0u);
}

// [PATH-12] item 5: a clean receive side keeps the configured count (the rule as it was);
// random loss asks for the run a live route would leave unechoed with a chance of 2^-24,
// where an echo is missed when the ACK or the DATA carrying its echo is lost.
TEST(PathHealth, UnechoedRoundsNeededGrowWithTheLoss) {
    EXPECT_TRUE(unechoed_is_dead(1, 0));  // no loss: nothing excuses a missing echo
    EXPECT_LE(rounds_needed(settled_score(0.01)), 8u);  // 1 %: 16 rounds are plenty
    for (const double l : {0.05, 0.185, 0.3, 0.344, 0.6}) {
        const uint32_t score = settled_score(l);
        const double miss = 1 - std::pow(1 - loss_q16(score) / 65536.0, 2);
        const double exact = std::ceil(-24 / std::log2(miss));
        const uint32_t n = rounds_needed(score);
        EXPECT_NEAR(n, exact, 1.0) << "loss " << l;
        EXPECT_LT(std::pow(miss, n), 1.1 / (1 << 24)) << "loss " << l;
    }
    // 30 %, the in-process test's loss: the 21 rounds that once failed a live path are not
    // enough; 16 (the configured count) were not either.
    EXPECT_FALSE(unechoed_is_dead(21, settled_score(0.3)));
    EXPECT_TRUE(unechoed_is_dead(30, settled_score(0.3)));
    uint32_t last = 1;
    for (uint32_t s = 0; s < 4'000'000; s += 4999) {  // never fewer for a lossier receive side
        const uint32_t n = rounds_needed(s);
        ASSERT_GE(n, last) << "score " << s;
        last = n;
    }
}

}  // namespace
}  // namespace mroce::core::path_health
