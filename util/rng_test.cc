#include "util/rng.h"

#include <gtest/gtest.h>

namespace mroce {
namespace {

TEST(Rng, SameSeedSameSequence) {
    Rng a(42), b(42);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(a.next_u64(), b.next_u64());
}

TEST(Rng, ForkIsIndependentOfParentConsumption) {
    Rng a(7);
    Rng fa = a.fork("loss");
    Rng b(7);
    (void)b.next_u64();  // the parent consumes; a fork taken before is unaffected
    Rng fb = Rng(7).fork("loss");
    for (int i = 0; i < 100; ++i) ASSERT_EQ(fa.next_u64(), fb.next_u64());
    EXPECT_NE(Rng(7).fork("loss").next_u64(), Rng(7).fork("jitter").next_u64());
}

TEST(Rng, UniformStaysInRangeAndCoversIt) {
    Rng r(1);
    int counts[10] = {};
    for (int i = 0; i < 100000; ++i) {
        auto v = r.uniform(10);
        ASSERT_LT(v, 10u);
        counts[v]++;
    }
    for (int c : counts) EXPECT_NEAR(c, 10000, 600);
    EXPECT_EQ(r.uniform(0), 0u);
}

TEST(Rng, BernoulliPpmMatchesRate) {
    Rng r(3);
    int hits = 0;
    for (int i = 0; i < 200000; ++i) hits += r.bernoulli_ppm(100000);  // 10%
    EXPECT_NEAR(hits, 20000, 800);
}

}  // namespace
}  // namespace mroce
