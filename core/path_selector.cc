// core/path_selector.cc — the path policies for new data and the retransmission choice
// (spec [PATH-10], [PATH-13], [PATH-14], [LOSS-6]).
#include "core/path_selector.h"

#include <algorithm>

#include "core/path_health.h"

namespace mroce::core {

std::unique_ptr<PathSelector> make_path_selector(const EndpointConfig& cfg, uint16_t num_paths) {
    if (cfg.path_selection == EndpointConfig::PathSelection::kRoom)
        return std::make_unique<RoomSelector>(num_paths);
    return std::make_unique<RoundRobinSelector>(num_paths, cfg.path_run_segments);
}

uint16_t PathSelector::retransmit_path(const PathView& paths, uint32_t bytes,
                                       std::span<const uint16_t> avoid) {
    // [LOSS-6]: the path that just lost the packet usually scores worst, its loss having
    // just raised its score; it is not excluded.
    const TxPath* best = nullptr;
    for (uint16_t i = 0; i < paths.size(); ++i) {
        const TxPath& p = paths[i];
        if (!paths.can_send(i, bytes)) continue;
        if (std::find(avoid.begin(), avoid.end(), i) != avoid.end()) continue;
        if (!best || p.loss_score < best->loss_score ||
            (p.loss_score == best->loss_score && p.rtt.srtt < best->rtt.srtt))
            best = &p;
    }
    return best ? best->id : kNoPathChoice;
}

uint16_t RoundRobinSelector::next_path(const PathView& paths, uint32_t bytes) {
    // [PATH-10]: the run goes on while its path can send (a loss skip ends it, below).
    if (run_left_ > 0 && last_ < paths.size() && paths.can_send(last_, bytes)) {
        --run_left_;
        return last_;
    }
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
        last_ = here;
        run_left_ = static_cast<uint16_t>(run_ - 1);
        return here;
    }
    if (passed_over != kNoPathChoice) cursor_ = after_passed;
    last_ = passed_over;  // a path taken only because no other could: no run
    run_left_ = 0;
    return passed_over;
}

uint16_t RoomSelector::next_path(const PathView& paths, uint32_t bytes) {
    // [PATH-14]: w = room × (1 − L), room clamped below 2^32 so that w × 2 fits 64 bits.
    const uint16_t n = paths.size();
    uint64_t best = 0;
    bool any = false;
    for (uint16_t p = 0; p < n; ++p) {
        const uint64_t room = paths.send_room(p, bytes);
        if (room == PathView::kCannotSend) {
            weight_[p] = PathView::kCannotSend;
            continue;
        }
        const uint32_t score = paths[p].loss_score;  // a clean path needs no division
        const uint64_t r = std::min<uint64_t>(room, 0xffffffffu);
        const uint64_t w =
            score ? (r * (path_health::kOne - path_health::loss_q16(score))) >> 16 : r;
        weight_[p] = w;
        best = std::max(best, w);
        any = true;
    }
    if (!any) return kNoPathChoice;
    // The first path from the cursor with at least half the best weight (the best one has),
    // on another plane than the previous choice's if one such path is. A path passed over
    // for its plane is first in line next time, so the paths of one plane still take turns.
    uint16_t first = kNoPathChoice;
    uint16_t p = cursor_;
    for (uint16_t i = 0; i < n; ++i) {
        const uint16_t here = p;
        if (++p == n) p = 0;
        if (weight_[here] == PathView::kCannotSend || 2 * weight_[here] < best) continue;
        if (paths[here].local_port != last_plane_) {
            cursor_ = first == kNoPathChoice ? p : first;
            last_plane_ = paths[here].local_port;
            return here;
        }
        if (first == kNoPathChoice) first = here;
    }
    cursor_ = static_cast<uint16_t>(first + 1 == n ? 0 : first + 1);
    return first;  // the best path qualifies: never kNoPathChoice
}

}  // namespace mroce::core
