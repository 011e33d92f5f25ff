// core/path_selector.h — which path carries the next segment (spec [PATH-10], [PATH-13],
// [PATH-14], [LOSS-6]). A policy behind a small interface, in the style of htsim's
// multipath policies: a choice out (next_path). A selector sees a read-only view of the
// paths (PathView), never the connection, and keeps its own per-path state. (No feedback
// hook: the policies measured read everything they need from the view; an ECN- and
// RTT-weighted one that kept its own marks did worse, docs/results.md.)
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cc/congestion.h"
#include "core/config.h"
#include "core/path.h"
#include "core/path_health.h"
#include "util/packet_meta.h"
#include "wire/ack.h"

namespace mroce::core {

inline constexpr uint16_t kNoPathChoice = 0xffff;

// PathView: what a selector may read of a connection's paths: their state, PSN window,
// bytes in flight, loss score, RTT and plane, and each one's congestion window. Borrowed
// for one call; it allocates nothing.
class PathView {
public:
    // ready_ports: [PATH-15] the NIC ports that can start a datagram now (Engine::
    // set_ready_ports); a path on another port cannot send through this view.
    // loss_prior: [PATH-13] item 5 the connection's loss estimate, where a path's window
    // estimate starts (Connection::window_loss_prior; 0: each path's own score alone).
    PathView(std::span<const TxPath> paths, const cc::CongestionControl& cc,
             uint64_t ready_ports = kAllPorts, uint32_t loss_prior = 0)
        : paths_(paths), cc_(cc), ready_ports_(ready_ports), loss_prior_(loss_prior) {}

    uint16_t size() const { return static_cast<uint16_t>(paths_.size()); }
    const TxPath& operator[](uint16_t i) const { return paths_[i]; }
    uint64_t window_bytes(uint16_t i) const { return window(paths_[i], cc_, loss_prior_); }

    // window: what path p may have in flight: its congestion window ([CC-1], [CC-7]),
    // stretched for the path's estimated loss ([PATH-13] item 4), its score started from
    // the connection's estimate `loss_prior` (item 5).
    static uint64_t window(const TxPath& p, const cc::CongestionControl& cc, uint32_t loss_prior) {
        return path_health::window_for_loss(
            cc.window_bytes(p.id), path_health::score_with_prior(p.loss_score, p.prior_weight, loss_prior));
    }

    // can_send: [PATH-10] the path is Active, has room in its PSN window (open) and its
    // window allows `bytes` ([CC-1]; asked only when something is in flight).
    // Inline: asked for every path choice and every has_work.
    static bool can_send(const TxPath& p, uint32_t bytes, const cc::CongestionControl& cc,
                         uint32_t loss_prior) {
        if (!open(p)) return false;
        return p.in_flight_pkts == 0 || p.in_flight_bytes + bytes <= window(p, cc, loss_prior);
    }
    bool can_send(uint16_t i, uint32_t bytes) const {
        return port_ready(ready_ports_, paths_[i].local_port) &&
               can_send(paths_[i], bytes, cc_, loss_prior_);
    }

    // send_room: as can_send, but with one window look-up: the room left in path i's
    // congestion window (0 when it is full), or kCannotSend.
    static constexpr uint64_t kCannotSend = ~uint64_t{0};
    uint64_t send_room(uint16_t i, uint32_t bytes) const {
        const TxPath& p = paths_[i];
        if (!open(p) || !port_ready(ready_ports_, p.local_port)) return kCannotSend;
        const uint64_t window = PathView::window(p, cc_, loss_prior_);
        if (p.in_flight_pkts > 0 && p.in_flight_bytes + bytes > window) return kCannotSend;
        return window > p.in_flight_bytes ? window - p.in_flight_bytes : 0;
    }

private:
    // open: the path is Active and has room in its PSN window ([PATH-5]: at most kSackBits
    // PSNs between the lowest unresolved one and the next, so the receiver's 256-bit window
    // covers what is in flight).
    static bool open(const TxPath& p) {
        return p.state == PathState::kActive &&
               (p.span() < wire::kSackBits || p.rec(p.base).state != TxRecord::State::kInFlight);
    }

    std::span<const TxPath> paths_;
    const cc::CongestionControl& cc_;
    uint64_t ready_ports_;
    uint32_t loss_prior_;
};

// PathSelector: the policy for new data. Called on the sending thread of the connection's
// endpoint only, like the connection itself.
class PathSelector {
public:
    virtual ~PathSelector() = default;

    // next_path: the path the next new segment of `bytes` goes to, or kNoPathChoice when
    // no path can send it now ([PATH-10]: new data then waits).
    virtual uint16_t next_path(const PathView& paths, uint32_t bytes) = 0;

    // retransmit_path: [LOSS-6] the path a retransmission of `bytes` goes to, the same for
    // every policy: among the paths that can send, the lowest loss score, then the lowest
    // srtt (0 without a sample), then the lowest id. kNoPathChoice when none can send.
    // `avoid`: paths not to take (a copy's earlier copies, [LOSS-17]).
    static uint16_t retransmit_path(const PathView& paths, uint32_t bytes,
                                    std::span<const uint16_t> avoid = {});
};

// make_path_selector: the policy `cfg.path_selection` names, for `num_paths` paths.
std::unique_ptr<PathSelector> make_path_selector(const EndpointConfig& cfg, uint16_t num_paths);

// RoundRobinSelector: [PATH-10] the first path that can send, from a cursor that moves past
// each path chosen; [PATH-13] a lossy path gives up a share of its turns.
// With run > 1, a path chosen keeps the next segments, up to `run` in all, while it can
// send them (and is not passed over for loss).
class RoundRobinSelector final : public PathSelector {
public:
    explicit RoundRobinSelector(uint16_t num_paths, uint16_t run = 1)
        : skip_debt_(num_paths, 0), run_(run) {}
    uint16_t next_path(const PathView& paths, uint32_t bytes) override;

private:
    uint16_t cursor_ = 0;              // < number of paths
    std::vector<uint32_t> skip_debt_;  // [PATH-13]: turns owed to other paths for loss, Q16
    uint16_t run_;                     // segments per turn, at least 1
    uint16_t last_ = kNoPathChoice;    // the path of the current run
    uint16_t run_left_ = 0;            // segments it may still take in this run
};

// RoomSelector: [PATH-14] round-robin as [PATH-10], but only over the paths whose room
// (congestion window less bytes in flight), weighted by 1 − L for their loss, is at least
// half the largest: a path whose window an ECN cut or a queue has filled waits a turn
// instead of queueing more behind it.
class RoomSelector final : public PathSelector {
public:
    explicit RoomSelector(uint16_t num_paths) : weight_(num_paths, 0) {}
    uint16_t next_path(const PathView& paths, uint32_t bytes) override;

private:
    uint16_t cursor_ = 0;           // < number of paths
    uint16_t last_plane_ = 0xffff;  // local_port of the previous choice
    std::vector<uint64_t> weight_;  // this choice's weights, kept to spare a second can_send
};

}  // namespace mroce::core
