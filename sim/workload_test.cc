// sim/workload_test.cc — workload generators and the flow-size CDF sampler.
#include "sim/workload.h"

#include <gtest/gtest.h>

#include <set>

#include "sim/test_seed.h"

namespace mroce::sim {
namespace {

TEST(Workload, PermutationIsADerangementWithOneFlowPerReceiver) {
    const uint64_t seed = testing::test_seed(3);
    Rng rng(seed);
    Workload w;
    permutation(w, 37, 1000, rng);
    ASSERT_EQ(w.size(), 37u);
    std::set<uint32_t> dsts;
    for (const Flow& f : w) {
        EXPECT_NE(f.src, f.dst);
        dsts.insert(f.dst);
    }
    EXPECT_EQ(dsts.size(), 37u);
    EXPECT_EQ(check_workload(w, 37), "");
}

TEST(Workload, AllToAllAndIncastCounts) {
    Workload w;
    all_to_all(w, 5, 10);
    EXPECT_EQ(w.size(), 20u);
    incast(w, {1, 2, 3}, 0, 7);
    EXPECT_EQ(w.size(), 23u);
    EXPECT_EQ(w.back().dst, 0u);
    EXPECT_EQ(check_workload(w, 5), "");
    EXPECT_NE(check_workload(w, 4), "");  // host 4 is out of range
}

TEST(Workload, RingAllreduceStepDependsOnPredecessorsPreviousStep) {
    Workload w;
    ring_allreduce(w, 4, 4000);
    ASSERT_EQ(w.size(), 4u * 6);  // 2(n-1) steps of n flows
    for (const Flow& f : w) {
        EXPECT_EQ(f.dst, (f.src + 1) % 4);
        EXPECT_EQ(f.bytes, 1000u);
        if (f.id < 4) {
            EXPECT_TRUE(f.depends_on.empty());
            continue;
        }
        ASSERT_EQ(f.depends_on.size(), 1u);
        const Flow& in = w[f.depends_on[0]];
        EXPECT_EQ(in.dst, f.src);       // its input arrived at this host
        EXPECT_EQ(in.id / 4 + 1, f.id / 4);  // in the previous step
    }
    EXPECT_EQ(check_workload(w, 4), "");
}

TEST(Workload, CheckRejectsForwardDependency) {
    Workload w;
    add_flow(w, 0, 1, 10, {}, 0, {1});
    add_flow(w, 1, 0, 10);
    EXPECT_NE(check_workload(w, 2).find("flow 0"), std::string::npos);
}

TEST(FlowSizeCdf, ParseErrorsNameTheLine) {
    FlowSizeCdf c;
    std::string err;
    EXPECT_FALSE(c.parse("# src\n100 0.5\n50 1\n", "x.cdf", err));
    EXPECT_EQ(err, "x.cdf:3: sizes must increase");
    EXPECT_FALSE(c.parse("100 0.5\n200 0.4\n", "x.cdf", err));
    EXPECT_EQ(err, "x.cdf:2: cum_prob must not decrease");
    EXPECT_FALSE(c.parse("100 0.5\n200 0.9\n", "x.cdf", err));
    EXPECT_EQ(err, "x.cdf: the last cum_prob must be 1");
    EXPECT_FALSE(c.parse("100 1.5\n", "x.cdf", err));
    EXPECT_EQ(err, "x.cdf:1: cum_prob must be in [0, 1]");
    EXPECT_FALSE(c.parse("100 0.5 7\n", "x.cdf", err));
}

TEST(FlowSizeCdf, SamplesFollowTheInterpolatedDistribution) {
    const uint64_t seed = testing::test_seed(11);
    FlowSizeCdf c;
    std::string err;
    // 20 % exactly 1000 B, then uniform 1000..11000 up to 100 %.
    ASSERT_TRUE(c.parse("# test\n1000 0.2\n11000 1.0\n", "t", err)) << err;
    EXPECT_DOUBLE_EQ(c.mean(), 0.2 * 1000 + 0.8 * 6000);
    Rng rng(seed);
    const int n = 200000;
    double sum = 0;
    int at_min = 0, below_6000 = 0;
    for (int i = 0; i < n; ++i) {
        const uint64_t s = c.sample(rng);
        ASSERT_GE(s, 1000u);
        ASSERT_LE(s, 11000u);
        sum += static_cast<double>(s);
        at_min += s == 1000;
        below_6000 += s < 6000;
    }
    EXPECT_NEAR(sum / n, c.mean(), c.mean() * 0.01);
    EXPECT_NEAR(static_cast<double>(at_min) / n, 0.2, 0.01);
    EXPECT_NEAR(static_cast<double>(below_6000) / n, 0.6, 0.01);
}

TEST(Workload, BackgroundOffersTheTargetLoad) {
    const uint64_t seed = testing::test_seed(5);
    FlowSizeCdf c;
    std::string err;
    ASSERT_TRUE(c.parse("10000 0.5\n30000 1\n", "t", err)) << err;
    Rng rng(seed);
    Workload w;
    const auto ms = std::chrono::milliseconds(20);
    background(w, 16, 0.4, 10'000'000'000, c, {}, ms, 0, rng);
    double bytes = 0;
    for (const Flow& f : w) {
        bytes += static_cast<double>(f.bytes);
        EXPECT_NE(f.src, f.dst);
        EXPECT_LT(f.start, SimDuration(ms));
    }
    // Offered: 0.4 x 16 x 10 Gbit/s x 20 ms = 1.28 Gbit = 160 MB.
    EXPECT_NEAR(bytes, 160e6, 160e6 * 0.05);
    EXPECT_EQ(check_workload(w, 16), "");
}

}  // namespace
}  // namespace mroce::sim
