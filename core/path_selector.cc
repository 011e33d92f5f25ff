// core/path_selector.cc — the path policies for new data and the retransmission choice
// (spec [PATH-10], [PATH-13], [LOSS-6]).
#include "core/path_selector.h"

#include <algorithm>

#include "core/path_health.h"

namespace mroce::core {

std::unique_ptr<PathSelector> make_path_selector(const EndpointConfig& cfg, uint16_t num_paths) {
    (void)cfg;
    return std::make_unique<RoundRobinSelector>(num_paths);
}

uint16_t PathSelector::retransmit_path(const PathView& paths, uint32_t bytes) {
    // [LOSS-6]: the path that just lost the packet usually scores worst, its loss having
    // just raised its score; it is not excluded.
    const TxPath* best = nullptr;
    for (uint16_t i = 0; i < paths.size(); ++i) {
        const TxPath& p = paths[i];
        if (!paths.can_send(i, bytes)) continue;
        if (!best || p.loss_score < best->loss_score ||
            (p.loss_score == best->loss_score && p.rtt.srtt < best->rtt.srtt))
            best = &p;
    }
    return best ? best->id : kNoPathChoice;
}

uint16_t RoundRobinSelector::next_path(const PathView& paths, uint32_t bytes) {
    const uint16_t n = paths.size();
    uint16_t p = cursor_;  // < n
    uint16_t passed_over = kNoPathChoice;
    uint16_t after_passed = 0;
    for (uint16_t i = 0; i < n; ++i) {
        const uint16_t here = p;
        if (++p == n) p = 0;  // p is now the path after this one
        if (!paths.can_send(here, bytes)) continue;
        // [PATH-13]: a lossy path gives up a share of its turns in proportion to its loss,
        // unless no other path can take the segment.
        if (passed_over == kNoPathChoice &&
            path_health::skip_for_loss(skip_debt_[here], paths[here].loss_score)) {
            passed_over = here;
            after_passed = p;
            continue;
        }
        cursor_ = p;
        return here;
    }
    if (passed_over != kNoPathChoice) cursor_ = after_passed;
    return passed_over;
}

}  // namespace mroce::core
