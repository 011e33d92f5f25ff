// obs/histogram.h — the one histogram of the project: log-linear buckets over unsigned
// integers (nanoseconds, bytes, ...), fixed memory, no allocation, mergeable (STYLE §8).
//
// Values below 2^kSubBits each have a bucket of their own (exact). Above, every power of two
// [2^m, 2^(m+1)) is split into 2^kSubBits equal buckets, so a bucket is at most 1/16 = 6.25%
// of its values wide and a quantile, reported as its bucket's midpoint (clamped to the
// exact min and max), is within 3.2% of the true sample. Values at or above kMaxValue are
// counted in the last bucket (and max keeps the true value). count, sum, min and max are
// exact. Memory: kBuckets (592) 64-bit counts, 4.7 KiB, whatever the number of samples.
//
// Not thread-safe: one writer, or copies made under the writer's lock.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <limits>

namespace mroce::obs {

class Histogram {
public:
    static constexpr uint32_t kSubBits = 4;
    static constexpr uint32_t kSub = 1u << kSubBits;
    static constexpr uint32_t kMaxBits = 40;  // 2^40 ns is 18 minutes
    static constexpr uint64_t kMaxValue = (uint64_t{1} << kMaxBits) - 1;
    static constexpr uint32_t kBuckets = (kMaxBits + 1 - kSubBits) * kSub;

    // bucket_of: the bucket index of v (v clamped to kMaxValue).
    static constexpr uint32_t bucket_of(uint64_t v) {
        if (v > kMaxValue) v = kMaxValue;
        if (v < kSub) return static_cast<uint32_t>(v);
        const uint32_t m = 63u - static_cast<uint32_t>(std::countl_zero(v));  // msb, >= kSubBits
        const uint32_t shift = m - kSubBits;
        return (shift + 1) * kSub + static_cast<uint32_t>((v >> shift) - kSub);
    }
    // bucket_low / bucket_high: the smallest and largest value of bucket b (inclusive).
    static constexpr uint64_t bucket_low(uint32_t b) {
        if (b < kSub) return b;
        const uint32_t shift = b / kSub - 1;
        return (uint64_t{kSub} + b % kSub) << shift;
    }
    static constexpr uint64_t bucket_high(uint32_t b) {
        if (b < kSub) return b;
        const uint32_t shift = b / kSub - 1;
        return bucket_low(b) + (uint64_t{1} << shift) - 1;
    }

    // record adds n samples of value v.
    void record(uint64_t v, uint64_t n = 1) {
        if (n == 0) return;
        counts_[bucket_of(v)] += n;
        count_ += n;
        sum_ += v * n;
        const double d = static_cast<double>(v);
        sum_squares_ += d * d * static_cast<double>(n);
        if (v < min_) min_ = v;
        if (v > max_) max_ = v;
    }
    // merge adds every sample of o (the result is as if both had recorded into one).
    void merge(const Histogram& o);
    // clear forgets every sample.
    void clear() { *this = Histogram{}; }

    uint64_t count() const { return count_; }
    uint64_t sum() const { return sum_; }  // wraps after 2^64 (1.8e19 ns: 584 years)
    uint64_t min() const { return count_ ? min_ : 0; }
    uint64_t max() const { return max_; }
    double mean() const { return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0; }
    // stdev: the population standard deviation (0 with fewer than two samples).
    double stdev() const;
    uint64_t bucket_count(uint32_t b) const { return counts_[b]; }

    // at_rank: the k-th smallest sample (0-based), as its bucket's midpoint clamped to
    // [min, max]; 0 when empty, max() when k >= count().
    uint64_t at_rank(uint64_t k) const;
    // quantile: perftest's rule, the sample of rank ceil(count * q) - 1 (q in [0, 1]);
    // 0 when empty.
    uint64_t quantile(double q) const;

private:
    std::array<uint64_t, kBuckets> counts_{};
    uint64_t count_ = 0;
    uint64_t sum_ = 0;
    double sum_squares_ = 0;
    uint64_t min_ = std::numeric_limits<uint64_t>::max();
    uint64_t max_ = 0;
};

static_assert(Histogram::bucket_of(Histogram::kMaxValue) == Histogram::kBuckets - 1);
static_assert(Histogram::bucket_high(Histogram::kBuckets - 1) == Histogram::kMaxValue);

}  // namespace mroce::obs
