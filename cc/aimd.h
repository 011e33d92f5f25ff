// cc/aimd.h — ECN-driven AIMD per path (spec [CC-7]..[CC-10]).
//
// Each path has its own window, cut once per round trip by the fraction of its packets that
// came back CE-marked (DCTCP: cwnd × (1 − α/2), α a moving average of that fraction), or
// halved on loss that comes with signs of a queue — CE echoed in the same round, or the RTT
// above twice its minimum: a queue that overflowed. Loss without either is random loss
// and costs no rate ([CC-2]), however much of it there is. Between
// signals a path grows one segment per round trip, after a slow start from the initial
// window that ends at the first signal. All arithmetic is integer ([CC-3]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cc/congestion.h"

namespace mroce::cc {

struct AimdConfig {
    uint32_t mss = 4096;                // bytes of one full segment (max_payload)
    uint64_t initial_window = 16 * 4096;  // per path, where slow start begins
    uint64_t max_window = 64 * 4096;    // per path, the cap (window_bytes_per_path)
};

class Aimd final : public CongestionControl {
public:
    // α is kept in units of 1/kAlphaOne; its gain is 1/2^kGainShift per round ([CC-8]).
    static constexpr uint32_t kAlphaOne = 1024;
    static constexpr uint32_t kGainShift = 4;

    Aimd(uint16_t paths, const AimdConfig& cfg);

    void on_sent(uint16_t path, uint32_t bytes, Time now) override;
    void on_ack(uint16_t path, uint32_t bytes, Duration rtt, Time now) override;
    void on_ecn(uint16_t path, uint32_t ce_packets, Time now) override;
    void on_loss(uint16_t path, uint32_t bytes, Time now) override;
    uint64_t window_bytes(uint16_t path) const override { return paths_[path].cwnd; }
    uint64_t window_rate_bps() const override { return rate_ + unsampled_rate_; }
    int32_t ecn_alpha(uint16_t path) const override { return static_cast<int32_t>(paths_[path].alpha); }

    // For tests and counters.
    uint32_t alpha(uint16_t path) const { return paths_[path].alpha; }
    bool in_slow_start(uint16_t path) const { return paths_[path].cwnd < paths_[path].ssthresh; }

private:
    struct PathCc {
        uint64_t cwnd = 0;
        uint64_t ssthresh = 0;
        uint32_t alpha = 0;
        // The current round: what was acknowledged, echoed CE and declared lost in it.
        uint64_t acked_bytes = 0;
        uint64_t ce_packets = 0;
        uint64_t lost_packets = 0;
        Time round_end{};
        Duration rtt{};      // the latest smoothed RTT reported with an ACK
        Duration min_rtt{};  // the smallest of those: the path without queues
        bool round_started = false;
        uint64_t rate = 0;   // this path's part of window_rate_bps
    };

public:
    // Bytes of one path's controller state (spec §9.3 "State per path and per
    // connection"; measured by cc/state_size_test.cc).
    static constexpr size_t kPathStateBytes = sizeof(PathCc);

private:
    void end_round(PathCc& p);
    void clamp(PathCc& p) const;
    void refresh_rate(PathCc& p);
    void refresh_unsampled();

    AimdConfig cfg_;
    std::vector<PathCc> paths_;
    uint64_t rate_ = 0;  // Σ of the sampled paths' rate: kept as they change, asked per packet
    // [CC-17]: the paths without an RTT sample, at the smallest RTT any path reported.
    Duration min_rtt_{};           // the smallest RTT reported on any path; 0 before one
    uint64_t unsampled_rate_ = 0;  // their windows over min_rtt_, with the quarter more
};

}  // namespace mroce::cc
