// sim/recovery_test.cc — recovery_us on hand-made goodput series.
#include "sim/recovery.h"

#include <gtest/gtest.h>

namespace mroce::sim {
namespace {

RecoveryInput series(std::initializer_list<double> gbps, double fault_us, double until_us) {
    RecoveryInput in;
    double t = 10;
    for (double g : gbps) {
        in.bins.push_back({t, g});
        t += 10;
    }
    in.fault_us = fault_us;
    in.until_us = until_us;
    return in;
}

TEST(Recovery, FromTheFaultToTheFirstBinThatStaysUp) {
    // 100 before the fault at 50 us; a dip; back to 75 (3 of 4 planes) from the bin that
    // starts at 80 us.
    RecoveryInput in = series({100, 100, 100, 100, 100, 20, 30, 74, 76, 75, 75, 75}, 50, 120);
    in.surviving = 0.75;  // target 0.95 x 0.75 x 100 = 71.25
    ASSERT_TRUE(recovery_us(in));
    EXPECT_DOUBLE_EQ(*recovery_us(in), 20.0);  // the bin (70, 80] is the first at 74
}

TEST(Recovery, ADipAfterTheFirstRecoveryCountsFromAfterTheDip) {
    RecoveryInput in = series({100, 100, 100, 100, 100, 20, 99, 50, 99, 99}, 50, 100);
    EXPECT_DOUBLE_EQ(*recovery_us(in), 30.0);  // (80, 90] onwards
}

TEST(Recovery, NotRecoveredOrNoRateBeforeTheFault) {
    RecoveryInput in = series({100, 100, 100, 100, 100, 20, 30, 40}, 50, 80);
    EXPECT_FALSE(recovery_us(in));  // still below at the end of the window
    in = series({100, 100}, 0, 20);
    EXPECT_FALSE(recovery_us(in));  // nothing before a fault at 0
}

TEST(Recovery, BinsAfterTheWindowAreIgnored) {
    // The window ends at the first completion (90 us); the drain after it does not count.
    RecoveryInput in = series({100, 100, 100, 100, 100, 100, 100, 100, 100, 10, 10}, 50, 90);
    EXPECT_DOUBLE_EQ(*recovery_us(in), 0.0);
}

}  // namespace
}  // namespace mroce::sim
