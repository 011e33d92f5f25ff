#include "sim/recovery.h"

#include <algorithm>

namespace mroce::sim {

std::optional<double> recovery_us(const RecoveryInput& in) {
    std::vector<double> before;
    for (const GoodputBin& b : in.bins)
        if (b.end_us - in.width_us >= in.fault_us - in.before_us && b.end_us <= in.fault_us) before.push_back(b.gbps);
    if (before.empty()) return std::nullopt;
    std::nth_element(before.begin(), before.begin() + static_cast<std::ptrdiff_t>(before.size() / 2), before.end());
    const double target = in.threshold * in.surviving * before[before.size() / 2];
    // Walk back from the end of the window: the recovery starts after the last bin below
    // the target (a bin that straddles the fault counts as after it).
    std::optional<double> start;
    bool any = false;
    for (auto it = in.bins.rbegin(); it != in.bins.rend(); ++it) {
        if (it->end_us > in.until_us) continue;
        if (it->end_us <= in.fault_us) break;
        if (!any && it->gbps < target) return std::nullopt;  // the window ends below it
        any = true;
        if (it->gbps < target) break;
        start = std::max(in.fault_us, it->end_us - in.width_us);
    }
    if (!start) return std::nullopt;
    return *start - in.fault_us;
}

}  // namespace mroce::sim
