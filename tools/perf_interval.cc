// tools/perf_interval.cc — see perf_interval.h.
#include "tools/perf_interval.h"

#include <fmt/core.h>

#include <cmath>
#include <cstdio>

namespace mroce::tools::perf {

IntervalRows::IntervalRows(const Options& o, uint32_t size)
    : o_(o), size_(size), every_ns_(static_cast<int64_t>(std::llround(o.interval_s * 1e9))) {}

void IntervalRows::bw(int64_t now_ns, uint64_t completed) {
    if (!enabled()) return;
    // Completions up to now belong to the interval open now; a gap of several intervals
    // (a stall) prints a zero row for each, which is what shows it.
    while (now_ns >= start_ns_ + every_ns_) close_interval(start_ns_ + every_ns_);
    completed_ = completed;
}

void IntervalRows::lat(int64_t now_ns, double sample_usec) {
    if (!enabled()) return;
    while (now_ns >= start_ns_ + every_ns_) close_interval(start_ns_ + every_ns_);
    lat_ns_.record(static_cast<uint64_t>(std::llround(std::max(0.0, sample_usec) * 1e3)));
    ++completed_;
}

Json IntervalRows::finish(int64_t end_ns) {
    if (!enabled()) return Json::array();
    while (end_ns >= start_ns_ + every_ns_) close_interval(start_ns_ + every_ns_);
    if (end_ns > start_ns_ && completed_ > completed_at_start_) close_interval(end_ns);
    return rows_;
}

void IntervalRows::close_interval(int64_t end_ns) {
    const bool bw = o_.mode == Mode::kBandwidth;
    if (!head_printed_) {
        head_printed_ = true;
        const char* unit = o_.report_gbits ? "Gb/sec" : "MB/sec";
        if (bw)
            fmt::print(" interval[sec]     #bytes     #iterations    BW average[{}]   MsgRate[Mpps]\n", unit);
        else
            fmt::print(" interval[sec]     #bytes #iterations    t_avg[usec]    99% percentile[usec]\n");
    }
    const double t0 = static_cast<double>(start_ns_) * 1e-9, t1 = static_cast<double>(end_ns) * 1e-9;
    const double secs = t1 - t0;
    const uint64_t n = completed_ - completed_at_start_;
    Json row;
    row["start_s"] = t0;
    row["end_s"] = t1;
    row["n_iterations"] = n;
    if (bw) {
        const double bytes_per_s = secs > 0 ? static_cast<double>(n) * size_ / secs : 0;
        const double rate = o_.report_gbits ? bytes_per_s * 8 / 1e9 : bytes_per_s / (1 << 20);
        const double mpps = secs > 0 ? static_cast<double>(n) / secs / 1e6 : 0;
        row["bytes"] = n * size_;
        row["BW_average"] = rate;
        row["MsgRate"] = mpps;
        fmt::print(" {:>6.2f}-{:<6.2f}    {:<7}    {:<10}       {:<7.2f}\t\t     {:<7.6f}\n", t0, t1, size_, n,
                   rate, mpps);
    } else {
        const double avg = lat_ns_.mean() / 1e3, p99 = static_cast<double>(lat_ns_.quantile(0.99)) / 1e3;
        row["t_avg"] = avg;
        row["percentile_99"] = p99;
        fmt::print(" {:>6.2f}-{:<6.2f}    {:<7} {:<10}    {:<7.2f}        {:<7.2f}\n", t0, t1, size_, n, avg, p99);
        lat_ns_.clear();
    }
    std::fflush(stdout);
    rows_.push_back(std::move(row));
    start_ns_ = end_ns;
    completed_at_start_ = completed_;
}

}  // namespace mroce::tools::perf
