// obs/histogram_test.cc — the log-linear histogram: bucket geometry, quantiles against
// exact sorted samples (seeded; MROCE_SEED replays), merge, bounded memory.
#include "obs/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "util/rng.h"

namespace mroce::obs {
namespace {

uint64_t seed_from_env(uint64_t fallback) {
    const char* s = std::getenv("MROCE_SEED");
    return s ? std::strtoull(s, nullptr, 0) : fallback;
}

TEST(Histogram, BucketsTileTheRangeWithoutGapsOrOverlap) {
    for (uint32_t b = 0; b + 1 < Histogram::kBuckets; ++b) {
        ASSERT_EQ(Histogram::bucket_high(b) + 1, Histogram::bucket_low(b + 1)) << "bucket " << b;
        ASSERT_EQ(Histogram::bucket_of(Histogram::bucket_low(b)), b);
        ASSERT_EQ(Histogram::bucket_of(Histogram::bucket_high(b)), b);
        // At most 1/16 of its values wide (exact below 16).
        const uint64_t width = Histogram::bucket_high(b) - Histogram::bucket_low(b) + 1;
        ASSERT_LE(width * 16, std::max<uint64_t>(16, Histogram::bucket_low(b)));
    }
    EXPECT_EQ(Histogram::bucket_of(~uint64_t{0}), Histogram::kBuckets - 1);
}

TEST(Histogram, SmallValuesAreExactAndStatsAreExact) {
    Histogram h;
    for (uint64_t v : {3, 1, 7, 7, 15}) h.record(v);
    EXPECT_EQ(h.count(), 5u);
    EXPECT_EQ(h.sum(), 33u);
    EXPECT_EQ(h.min(), 1u);
    EXPECT_EQ(h.max(), 15u);
    EXPECT_EQ(h.quantile(0.5), 7u);  // rank ceil(2.5) - 1 = 2: 1 3 [7] 7 15
    EXPECT_EQ(h.quantile(0.0), 1u);
    EXPECT_EQ(h.quantile(1.0), 15u);
    EXPECT_EQ(h.at_rank(1), 3u);
}

TEST(Histogram, EmptyReportsZeros) {
    Histogram h;
    EXPECT_EQ(h.quantile(0.99), 0u);
    EXPECT_EQ(h.min(), 0u);
    EXPECT_EQ(h.max(), 0u);
    EXPECT_EQ(h.stdev(), 0.0);
}

// Quantiles (perftest's rank rule) within 1/32 of the exact sample of that rank, for
// log-normal-ish latencies spanning microseconds to tens of milliseconds.
TEST(Histogram, QuantilesWithinThreePercentOfExact) {
    const uint64_t seed = seed_from_env(7);
    SCOPED_TRACE("seed " + std::to_string(seed) + " (MROCE_SEED replays)");
    Rng rng(seed);
    for (int round = 0; round < 20; ++round) {
        Histogram h;
        std::vector<uint64_t> v;
        const uint64_t n = 1 + rng.uniform(20000);
        for (uint64_t i = 0; i < n; ++i) {
            const uint64_t octave = rng.uniform(16);
            const uint64_t x = 1000 + (uint64_t{1} << octave) * (1 + rng.uniform(1000));
            v.push_back(x);
            h.record(x);
        }
        std::sort(v.begin(), v.end());
        for (double q : {0.0, 0.5, 0.9, 0.99, 0.999, 1.0}) {
            const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(n * q)));
            const double exact = static_cast<double>(v[rank - 1]);
            const double got = static_cast<double>(h.quantile(q));
            EXPECT_LE(std::abs(got - exact), exact / 32) << "q " << q << " n " << n;
        }
        double mean = 0, var = 0;
        for (uint64_t x : v) mean += static_cast<double>(x);
        mean /= static_cast<double>(n);
        for (uint64_t x : v) var += (static_cast<double>(x) - mean) * (static_cast<double>(x) - mean);
        EXPECT_NEAR(h.stdev(), std::sqrt(var / static_cast<double>(n)), 1e-6 * mean + 1e-9);
        EXPECT_DOUBLE_EQ(h.mean(), mean);
    }
}

TEST(Histogram, MergeEqualsRecordingIntoOne) {
    const uint64_t seed = seed_from_env(11);
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(seed);
    Histogram a, b, both;
    for (int i = 0; i < 5000; ++i) {
        const uint64_t x = rng.uniform(1u << 30);
        (i % 3 ? a : b).record(x);
        both.record(x);
    }
    a.merge(b);
    EXPECT_EQ(a.count(), both.count());
    EXPECT_EQ(a.sum(), both.sum());
    EXPECT_EQ(a.min(), both.min());
    EXPECT_EQ(a.max(), both.max());
    for (uint32_t k = 0; k < Histogram::kBuckets; ++k) ASSERT_EQ(a.bucket_count(k), both.bucket_count(k));
    for (double q : {0.5, 0.99, 0.999}) EXPECT_EQ(a.quantile(q), both.quantile(q));
}

TEST(Histogram, HugeValuesLandInTheLastBucketAndKeepTheirMax) {
    Histogram h;
    h.record(Histogram::kMaxValue * 4);
    EXPECT_EQ(h.bucket_count(Histogram::kBuckets - 1), 1u);
    EXPECT_EQ(h.max(), Histogram::kMaxValue * 4);
    EXPECT_EQ(h.quantile(0.5), Histogram::kMaxValue * 4);  // clamped into [min, max]
}

TEST(Histogram, MemoryIsFixed) {
    static_assert(sizeof(Histogram) < 5 * 1024, "the histogram's memory is documented as 4.7 KiB");
    Histogram h;
    for (uint64_t i = 0; i < 1'000'000; ++i) h.record(i * 7919);
    EXPECT_EQ(h.count(), 1'000'000u);
}

}  // namespace
}  // namespace mroce::obs
