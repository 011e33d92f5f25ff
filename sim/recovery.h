// sim/recovery.h — how long a fault run takes to get its goodput back (issue 14's
// `recovery_us`): from the fault until aggregate goodput, in the sampler's bins, stays at
// or above 95% of what the fault leaves of the rate the run had before it.
#pragma once

#include <optional>
#include <vector>

namespace mroce::sim {

struct GoodputBin {
    double end_us;  // the bin covers (end_us - width, end_us]
    double gbps;    // aggregate goodput placed in it
};

struct RecoveryInput {
    std::vector<GoodputBin> bins;  // in time order, one width
    double width_us = 10;
    double fault_us = 0;
    double surviving = 1;     // fraction of the pre-fault capacity the fault leaves
    double until_us = 0;      // the window ends here (the first flow to finish after the fault)
    double before_us = 50;    // the pre-fault rate: median of the bins in [fault - before, fault]
    double threshold = 0.95;
};

// recovery_us: the time from the fault to the start of the first bin from which every bin
// that ends by `until_us` carries at least threshold × surviving × the pre-fault rate;
// nullopt when there is no pre-fault rate, no bin after the fault, or the last bin before
// `until_us` is still below it (not recovered in the window).
std::optional<double> recovery_us(const RecoveryInput& in);

}  // namespace mroce::sim
