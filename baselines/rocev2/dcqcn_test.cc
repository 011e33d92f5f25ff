// Tests for the DCQCN state machines (dcqcn.h): the cut on a CNP, alpha's update and
// decay, the three increase stages, the return to idle, and the NP's CNP spacing.
#include "baselines/rocev2/dcqcn.h"

#include <gtest/gtest.h>

namespace mroce::rocev2 {
namespace {

constexpr uint64_t kLine = 100'000'000'000;
const Time kT0 = time_from_ns(1'000'000);

TEST(Dcqcn, IdleUntilTheFirstCnp) {
    DcqcnSender s{DcqcnConfig{}};
    EXPECT_EQ(s.rate_bps(), kLine);
    EXPECT_FALSE(s.limited());
    EXPECT_EQ(s.next_deadline(), kNever);
    s.on_sent(100'000'000);  // bytes at line rate start no stage
    EXPECT_EQ(s.rate_bps(), kLine);
    EXPECT_EQ(s.next_deadline(), kNever);
}

TEST(Dcqcn, FirstCnpHalvesTheRateAndKeepsTheTarget) {
    DcqcnSender s{DcqcnConfig{}};
    s.on_cnp(kT0);
    // alpha starts at 1 and stays 1 after (1-g)·1 + g: the cut is Rc·(1 - 1/2).
    EXPECT_EQ(s.alpha(), kAlphaOne);
    EXPECT_EQ(s.rate_bps(), kLine / 2);
    EXPECT_EQ(s.target_rate_bps(), kLine);
    EXPECT_TRUE(s.limited());
    EXPECT_EQ(s.next_deadline(), kT0 + 55us);
}

TEST(Dcqcn, AlphaDecaysWithoutCnpsAndTheNextCutIsSmaller) {
    DcqcnConfig c;
    c.rate_timer = 1s;  // keep the rate still while alpha decays
    DcqcnSender s{c};
    s.on_cnp(kT0);
    const uint32_t a0 = s.alpha();
    s.on_timeout(kT0 + 55us * 100);
    EXPECT_EQ(s.stats().alpha_updates, 100u);
    // (1 - 1/256)^100 = 0.676; integer rounding may differ by a few ulps of 2^-20.
    EXPECT_NEAR(static_cast<double>(s.alpha()) / a0, 0.676, 0.002);
    const uint64_t before = s.rate_bps();
    const uint32_t alpha_before = s.alpha();
    s.on_cnp(kT0 + 55us * 100 + 1us);
    const uint32_t expected_alpha = alpha_before - (alpha_before >> 8) + (kAlphaOne >> 8);
    EXPECT_EQ(s.alpha(), expected_alpha);
    EXPECT_EQ(s.rate_bps(), before - before * expected_alpha / (2 * uint64_t{kAlphaOne}));
    EXPECT_GT(s.rate_bps(), before / 2);
}

TEST(Dcqcn, TimerStagesGoFastRecoveryThenAdditive) {
    DcqcnConfig c;
    c.alpha_timer = 1s;
    DcqcnSender s{c};
    s.on_cnp(kT0);
    uint64_t rc = s.rate_bps();
    const uint64_t rt = s.target_rate_bps();
    // The first F-1 timer events (T = 1..4 < F) halve the distance to the target.
    for (uint32_t i = 1; i < c.fast_recovery_steps; ++i) {
        s.on_timeout(kT0 + 55us * i);
        rc = (rt + rc + 1) / 2;
        EXPECT_EQ(s.rate_bps(), rc) << "step " << i;
        EXPECT_EQ(s.target_rate_bps(), rt);
    }
    EXPECT_EQ(s.stats().fast_recovery, c.fast_recovery_steps - 1);
    // No bytes were sent, so BC stays 0 and T >= F means additive increase.
    s.on_timeout(kT0 + 55us * c.fast_recovery_steps);
    EXPECT_EQ(s.stats().additive, 1u);
    EXPECT_EQ(s.stats().hyper, 0u);
}

TEST(Dcqcn, ByteCounterAndTimerTogetherReachHyperIncrease) {
    DcqcnConfig c;
    c.alpha_timer = 1s;
    DcqcnSender s{c};
    s.on_cnp(kT0);
    s.on_cnp(kT0 + 1us);  // a second cut, so the target sits well below line rate
    const uint64_t rt0 = s.target_rate_bps();
    for (uint32_t i = 1; i <= 7; ++i) {
        s.on_sent(static_cast<uint32_t>(c.byte_counter));  // BC += 1
        s.on_timeout(kT0 + 1us + 55us * i);                 // T += 1
    }
    EXPECT_GT(s.stats().hyper, 0u);
    EXPECT_GT(s.target_rate_bps(), rt0 + c.rate_hai_bps);
}

TEST(Dcqcn, RecoversToLineRateAndGoesIdle) {
    DcqcnSender s{DcqcnConfig{}};
    s.on_cnp(kT0);
    Time t = kT0;
    int steps = 0;
    while (s.next_deadline() != kNever && steps < 1'000'000) {
        t = s.next_deadline();
        s.on_timeout(t);
        ++steps;
    }
    EXPECT_EQ(s.next_deadline(), kNever);
    EXPECT_EQ(s.rate_bps(), kLine);
    EXPECT_EQ(s.alpha(), 0u);
    EXPECT_FALSE(s.limited());
}

TEST(Dcqcn, RateNeverFallsBelowTheFloor) {
    DcqcnConfig c;
    c.min_rate_bps = 1'000'000'000;
    DcqcnSender s{c};
    for (int i = 0; i < 100; ++i) s.on_cnp(kT0 + 1us * i);
    EXPECT_EQ(s.rate_bps(), c.min_rate_bps);
    EXPECT_EQ(s.stats().min_rate_bps, c.min_rate_bps);
}

TEST(Dcqcn, DisabledIgnoresCnps) {
    DcqcnConfig c;
    c.enabled = false;
    DcqcnSender s{c};
    s.on_cnp(kT0);
    EXPECT_EQ(s.rate_bps(), kLine);
    EXPECT_EQ(s.next_deadline(), kNever);
}

TEST(CnpLimiter, AtMostOnePerInterval) {
    CnpLimiter l(50us);
    int sent = 0;
    // A marked packet every microsecond for a millisecond: 20 CNPs, spaced >= 50 us.
    Time last = Time::min();
    for (int i = 0; i < 1000; ++i) {
        const Time t = kT0 + 1us * i;
        if (l.should_send(t)) {
            ++sent;
            if (last != Time::min()) {
                EXPECT_GE(t - last, 50us);
            }
            last = t;
        }
    }
    EXPECT_EQ(sent, 20);
}

TEST(Dcqcn, ConfigErrorsNameTheSetting) {
    DcqcnConfig c;
    EXPECT_STREQ(dcqcn_config_error(c), "");
    c.min_rate_bps = c.line_rate_bps + 1;
    EXPECT_NE(std::string(dcqcn_config_error(c)).find("min_rate_bps"), std::string::npos);
    c = DcqcnConfig{};
    c.byte_counter = 0;
    EXPECT_NE(std::string(dcqcn_config_error(c)).find("byte_counter"), std::string::npos);
}

}  // namespace
}  // namespace mroce::rocev2
