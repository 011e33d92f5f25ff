// cc/congestion.h — the pluggable congestion-control interface and the fixed window.
//
// One controller per connection; it sees events per path, never packets (cc depends on
// util only). The engine asks window_bytes(path) before every DATA, and window_rate_bps()
// for the pacer (cc/send_rate.h), which combines it with the receiver's hint (spec §9.3).
// Rates and windows are integers: no floating point in protocol decisions (STYLE §4).
#pragma once

#include <cstdint>
#include <memory>

#include "util/time.h"

namespace mroce::cc {

class CongestionControl {
public:
    virtual ~CongestionControl() = default;
    // on_sent: a packet of `bytes` left on `path` (new data or retransmission).
    virtual void on_sent(uint16_t path, uint32_t bytes, Time now) = 0;
    // on_ack: `bytes` newly acknowledged on `path`; rtt is the latest sample (0 if none).
    virtual void on_ack(uint16_t path, uint32_t bytes, Duration rtt, Time now) = 0;
    // on_ecn: `ce_packets` of the packets acknowledged since the last call were CE-marked.
    virtual void on_ecn(uint16_t path, uint32_t ce_packets, Time now) = 0;
    // on_loss: `bytes` on `path` were declared lost (by SACK or timeout).
    virtual void on_loss(uint16_t path, uint32_t bytes, Time now) = 0;
    // window_bytes: how many bytes may be unacknowledged on `path`.
    virtual uint64_t window_bytes(uint16_t path) const = 0;
    // window_rate_bps: what the windows carry per round trip, in bit/s, with a margin
    // ([CC-17]); 0 = unknown (the pacer then follows the hint alone).
    virtual uint64_t window_rate_bps() const = 0;
    // ecn_alpha: the path's marked fraction in 1/1024, for counters; -1 = not kept.
    virtual int32_t ecn_alpha(uint16_t) const { return -1; }
};

// FixedWindow keeps the same window on every path and ignores signals ([CC-1]). It is the
// ablation of AIMD and the model used by the loss-theory tests; it has no window rate, so
// with pacing on it is paced at the receiver's hint alone.
class FixedWindow final : public CongestionControl {
public:
    explicit FixedWindow(uint64_t window_bytes_per_path) : window_(window_bytes_per_path) {}
    void on_sent(uint16_t, uint32_t, Time) override {}
    void on_ack(uint16_t, uint32_t, Duration, Time) override {}
    void on_ecn(uint16_t, uint32_t, Time) override {}
    void on_loss(uint16_t, uint32_t, Time) override {}
    uint64_t window_bytes(uint16_t) const override { return window_; }
    uint64_t window_rate_bps() const override { return 0; }

private:
    uint64_t window_;
};

}  // namespace mroce::cc
