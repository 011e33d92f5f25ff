// obs/histogram.cc — see histogram.h.
#include "obs/histogram.h"

#include <algorithm>
#include <cmath>

namespace mroce::obs {

void Histogram::merge(const Histogram& o) {
    if (o.count_ == 0) return;
    for (uint32_t b = 0; b < kBuckets; ++b) counts_[b] += o.counts_[b];
    count_ += o.count_;
    sum_ += o.sum_;
    sum_squares_ += o.sum_squares_;
    min_ = std::min(min_, o.min_);
    max_ = std::max(max_, o.max_);
}

double Histogram::stdev() const {
    if (count_ < 2) return 0;
    const double n = static_cast<double>(count_);
    const double mean = static_cast<double>(sum_) / n;
    const double var = sum_squares_ / n - mean * mean;
    return var > 0 ? std::sqrt(var) : 0;
}

uint64_t Histogram::at_rank(uint64_t k) const {
    if (count_ == 0) return 0;
    if (k >= count_) return max_;
    uint64_t seen = 0;
    for (uint32_t b = 0; b < kBuckets; ++b) {
        seen += counts_[b];
        if (seen > k) {
            const uint64_t lo = bucket_low(b), hi = bucket_high(b);
            const uint64_t mid = lo + (hi - lo) / 2;
            return std::clamp(mid, min_, max_);
        }
    }
    return max_;
}

uint64_t Histogram::quantile(double q) const {
    if (count_ == 0) return 0;
    const double r = std::ceil(static_cast<double>(count_) * std::clamp(q, 0.0, 1.0));
    const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(r));
    return at_rank(rank - 1);
}

}  // namespace mroce::obs
