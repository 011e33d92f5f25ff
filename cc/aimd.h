// cc/aimd.h — ECN-driven AIMD per path (spec [CC-7]..[CC-10]).
//
// Each path has its own window, cut once per round trip by the fraction of its packets that
// came back CE-marked (DCTCP: cwnd × (1 − α/2), α a moving average of that fraction), or
// halved on loss that takes more than an eighth of a round, or, on a path that never saw
// CE, on loss that comes with a queue (the RTT above twice its minimum): a queue that
// overflowed, which a network without ECN (or a dying route) shows only that way. Random
// loss costs no rate ([CC-2]) unless it meets a queue on a fabric that does not mark. Between
// signals a path grows one segment per round trip, after a slow start from the initial
// window that ends at the first signal. All arithmetic is integer ([CC-3]).
#pragma once

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
    // A round that loses more than 1/2^kLossShift of its packets is congestion ([CC-9]).
    static constexpr uint32_t kLossShift = 3;

    Aimd(uint16_t paths, const AimdConfig& cfg);

    void on_sent(uint16_t path, uint32_t bytes, Time now) override;
    void on_ack(uint16_t path, uint32_t bytes, Duration rtt, Time now) override;
    void on_ecn(uint16_t path, uint32_t ce_packets, Time now) override;
    void on_loss(uint16_t path, uint32_t bytes, Time now) override;
    void on_rate_hint(uint32_t, Time) override {}
    uint64_t window_bytes(uint16_t path) const override { return paths_[path].cwnd; }
    uint64_t pacing_rate_bps() const override { return 0; }

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
        bool ecn_seen = false;  // a CE echo arrived once: this path's fabric marks
    };
    void end_round(PathCc& p);
    void clamp(PathCc& p) const;

    AimdConfig cfg_;
    std::vector<PathCc> paths_;
};

}  // namespace mroce::cc
