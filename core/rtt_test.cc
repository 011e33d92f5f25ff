// core/rtt_test.cc — [LOSS-4] the RTT estimator and the probe timeout, [LOSS-2] the reorder
// window, on hand-computed values.
#include "core/rtt.h"

#include <gtest/gtest.h>

namespace mroce::core {
namespace {

using namespace std::chrono_literals;

TEST(Rtt, FirstSampleSetsSrttAndHalfOfItAsVariance) {
    RttEstimate r;
    EXPECT_FALSE(r.has_rtt);
    EXPECT_EQ(r.srtt_or(100us), 100us);
    r.on_sample(40us);
    EXPECT_TRUE(r.has_rtt);
    EXPECT_EQ(r.srtt, 40us);
    EXPECT_EQ(r.rttvar, 20us);
    EXPECT_EQ(r.srtt_or(100us), 40us);
}

TEST(Rtt, LaterSamplesAreSmoothedAnEighthAndAQuarterAtATime) {
    RttEstimate r;
    r.on_sample(40us);
    r.on_sample(80us);  // err 40: rttvar (3 x 20 + 40) / 4 = 25, srtt (7 x 40 + 80) / 8 = 45
    EXPECT_EQ(r.rttvar, 25us);
    EXPECT_EQ(r.srtt, 45us);
    r.on_sample(45us);  // err 0: rttvar 18.75, srtt unchanged
    EXPECT_EQ(r.rttvar, 18750ns);
    EXPECT_EQ(r.srtt, 45us);
}

TEST(Rtt, ProbeTimeoutFollowsTheFormulaFloorsAndCaps) {
    EndpointConfig cfg;
    cfg.initial_rtt = 100us;
    cfg.min_pto = 20us;
    cfg.max_pto = 10ms;
    cfg.max_ack_delay = 10us;
    RttEstimate r;
    EXPECT_EQ(probe_timeout(r, 0, cfg), 200us);  // 2 x initial_rtt before a sample
    r.on_sample(40us);                           // srtt 40, rttvar 20
    EXPECT_EQ(probe_timeout(r, 0, cfg), 40us + 80us + 10us);  // 4 rttvar > srtt
    EXPECT_EQ(probe_timeout(r, 1, cfg), 2 * 130us);           // doubled per timeout
    EXPECT_EQ(probe_timeout(r, 30, cfg), 10ms);               // capped at max_pto
    r = RttEstimate{};
    r.on_sample(40us);
    for (int i = 0; i < 40; ++i) r.on_sample(40us);  // rttvar decays below srtt / 4
    EXPECT_LT(4 * r.rttvar, r.srtt);
    EXPECT_EQ(probe_timeout(r, 0, cfg), 40us + 40us + 10us);  // the variance term is >= srtt
    // [LOSS-16]: the newest DATA asked for an ACK at once: no delayed ACK to wait for.
    EXPECT_EQ(probe_timeout(r, 0, cfg, false), 40us + 40us);
    EXPECT_EQ(probe_timeout(r, 1, cfg, false), 2 * 80us);
    cfg.min_pto = 1ms;
    EXPECT_EQ(probe_timeout(r, 0, cfg), 1ms);  // at least min_pto
    EXPECT_EQ(probe_timeout(r, 2, cfg), 4ms);  // the floor is doubled too
}

TEST(Rtt, ReorderWindowIsAnEighthOfSrttAtLeastItsFloor) {
    EndpointConfig cfg;
    cfg.initial_rtt = 100us;
    cfg.min_reorder_window = 2us;
    cfg.reorder_window_shift = 3;
    RttEstimate r;
    EXPECT_EQ(reorder_window(r, cfg), 12500ns);  // initial_rtt / 8
    r.on_sample(40us);
    EXPECT_EQ(reorder_window(r, cfg), 5us);
    r = RttEstimate{};
    r.on_sample(8us);
    EXPECT_EQ(reorder_window(r, cfg), 2us);  // 1 us, floored
}

}  // namespace
}  // namespace mroce::core
