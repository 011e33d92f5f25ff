// tools/perf_interval.h — `mroce perf -i SECONDS`: a row every interval while a run goes
// on, as iperf3 prints them (and perftest's --run_infinitely, every -D seconds), so a long
// run shows a path failure, a slow start or a stall when it happens, not only in the
// average at the end. The client prints them (it sees the completions); the rows also go
// into the result's "intervals" array (--json).
//
// Bandwidth rows: messages completed in the interval, their bytes, the rate in the
// table's unit (MB/sec or, with --report_gbits, Gb/sec) and in Mpps. Latency rows: the
// samples of the interval, their mean and 99th percentile (obs::Histogram, the one
// histogram of the project, within 3.2%).
#pragma once

#include <cstdint>

#include "obs/histogram.h"
#include "tools/perf_oob.h"
#include "tools/perf_options.h"

namespace mroce::tools::perf {

class IntervalRows {
public:
    // Rows every o.interval_s seconds of the run of one message size (none when 0).
    IntervalRows(const Options& o, uint32_t size);
    bool enabled() const { return every_ns_ > 0; }

    // bw: the run is now_ns from its start and `completed` messages have completed so
    // far. Prints the rows of every interval that ended before now_ns.
    void bw(int64_t now_ns, uint64_t completed);
    // lat: one latency sample (usec) taken now_ns from the start of the run.
    void lat(int64_t now_ns, double sample_usec);
    // finish prints the last, partial interval (when it has anything) and returns the rows
    // as a JSON array ([] when disabled).
    Json finish(int64_t end_ns);

private:
    void close_interval(int64_t end_ns);

    const Options& o_;
    uint32_t size_;
    int64_t every_ns_ = 0;
    int64_t start_ns_ = 0;       // of the open interval
    uint64_t completed_at_start_ = 0;
    uint64_t completed_ = 0;
    obs::Histogram lat_ns_;      // the open interval's latency samples, in ns
    bool head_printed_ = false;
    Json rows_ = Json::array();
};

}  // namespace mroce::tools::perf
