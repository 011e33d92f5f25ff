// core/return_routes.h — spec §5 [PATH-12]: which of this side's paths still carry its ACKs
// to the peer. A path that only carries ACKs has no timeout of its own, so without this a
// receiver would keep sending a share of its ACKs into a dead route ([ACK-13]) and the peer
// would see healthy forward paths fall silent.
//
// Two halves, one per direction of the conversation:
// - echoes owed: the peer's paths on which its ACKs reached us (`return_path`, [ACK-13]),
//   each echoed once in one of our DATA (`return_echo`, RETURN_ECHO);
// - echoes awaited: for each of our paths, the ACK rounds sent on it since the peer last
//   echoed it, and the echo delay (round to echo), which sets how long "unechoed" must last.
// The connection decides what an unechoed path means; this unit only keeps the counts.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <vector>

#include "core/rtt.h"
#include "util/time.h"

namespace mroce::core {

class ReturnRoutes {
public:
    static constexpr uint16_t kMaxPaths = 256;  // [CONN-3]: path ids fit one byte

    void reset(uint16_t own_paths, uint16_t peer_paths) {
        peer_paths_ = std::min(peer_paths, kMaxPaths);
        owed_.fill(0);
        owed_count_ = 0;
        echo_cursor_ = 0;
        waits_.assign(own_paths, Wait{});
        examine_cursor_ = 0;
        delay_ = RttEstimate{};
        rx_loss_score_ = 0;
    }

    // --- echoes owed (we send DATA, the peer ACKs it) ---

    // ack_arrived: an ACK of the peer left on its path `peer_path`. An id the peer does not
    // have is ignored: nothing from the wire indexes our state unchecked.
    void ack_arrived(uint16_t peer_path) {
        if (peer_path >= peer_paths_) return;
        uint64_t& word = owed_[peer_path / 64];
        const uint64_t bit = uint64_t{1} << (peer_path % 64);
        if (word & bit) return;
        word |= bit;
        ++owed_count_;
    }

    bool echo_owed() const { return owed_count_ != 0; }

    // take_echo: the next owed id at or after the cursor (wrapping), cleared; the cursor
    // moves past it, so every owed id goes out within peer_paths DATA. Call only when
    // echo_owed().
    uint16_t take_echo() {
        uint16_t id = echo_cursor_;
        for (uint16_t i = 0; i < kWords + 1; ++i) {
            const uint16_t w = static_cast<uint16_t>((id / 64) % kWords);
            const uint64_t bits = owed_[w] >> (id % 64);
            if (bits) {
                id = static_cast<uint16_t>(w * 64 + id % 64 + std::countr_zero(bits));
                break;
            }
            id = static_cast<uint16_t>(((w + 1) % kWords) * 64);
        }
        owed_[id / 64] &= ~(uint64_t{1} << (id % 64));
        --owed_count_;
        echo_cursor_ = static_cast<uint16_t>((id + 1) % peer_paths_);
        return id;
    }

    // --- echoes awaited (the peer sends DATA, we ACK it) ---

    // round_sent: a round of ACKs (or a probe reply's copy) left on our path `path`.
    void round_sent(uint16_t path, Time now) {
        Wait& w = waits_[path];
        if (w.rounds++ == 0) w.since = now;
    }

    // echo_arrived: the peer echoed our path `path` (checked < own paths by the caller).
    // The echo delay is timed from the oldest round awaited: the echo may answer a later
    // round, so the sample errs long, never short. Timing only echoes of a lone round
    // let the estimate lag a queue that builds (rounds pile up exactly then), and clean
    // routes through queues of milliseconds were failed.
    void echo_arrived(uint16_t path, Time now) {
        Wait& w = waits_[path];
        if (w.rounds > 0) sample_delay(now - w.since);
        w = Wait{};
    }

    // next_to_examine: one of our paths in round-robin order, so that each echo costs
    // constant work and every path is examined within own_paths echoes.
    uint16_t next_to_examine() {
        const uint16_t p = examine_cursor_;
        examine_cursor_ = static_cast<uint16_t>((p + 1) % waits_.size());
        return p;
    }
    uint32_t unechoed_rounds(uint16_t path) const { return waits_[path].rounds; }
    Time unechoed_since(uint16_t path) const { return waits_[path].since; }
    void forget(uint16_t path) { waits_[path] = Wait{}; }

    // --- the peer's DATA as it arrives: its loss is what kills echoes on a live route ---

    // data_arrived / data_missed: a new DATA of the peer arrived; `psns` PSNs of the peer
    // were skipped by its floor without arriving ([PATH-6]: declared lost by the peer).
    // The score is [LOSS-6]'s (+1024 per loss, -score/64 per packet through), so that
    // path_health::loss_q16 reads it as a loss rate; it saturates below L = 63/64.
    void data_arrived() { rx_loss_score_ -= rx_loss_score_ >> 6; }
    void data_missed(uint32_t psns) {
        rx_loss_score_ = static_cast<uint32_t>(
            std::min<uint64_t>(rx_loss_score_ + uint64_t{1024} * psns, kMaxRxLossScore));
    }
    uint32_t rx_loss_score() const { return rx_loss_score_; }

    // echo_srtt: the smoothed echo delay, how long the peer takes to act on an ACK (zero
    // before a sample).
    Duration echo_srtt() const { return delay_.has_rtt ? delay_.srtt : Duration::zero(); }
    // echo_timeout: how long a round may stay unechoed on a healthy route, 2 × (srtt +
    // 4 rttvar) of the echo delay, at least `floor`; `before_sample` until one is timed.
    Duration echo_timeout(Duration floor, Duration before_sample) const {
        if (!delay_.has_rtt) return std::max(floor, before_sample);
        return std::max(floor, 2 * (delay_.srtt + 4 * delay_.rttvar));
    }

private:
    static constexpr uint16_t kWords = kMaxPaths / 64;
    static constexpr uint64_t kMaxRxLossScore = 63 * 65536;
    struct Wait {
        uint32_t rounds = 0;  // rounds sent since the last echo
        Time since = kNever;  // send time of the oldest of them
    };

    // sample_delay: the RFC 6298 estimator of [LOSS-4]'s RTT samples (core/rtt.h).
    void sample_delay(Duration d) { delay_.on_sample(d); }

    uint16_t peer_paths_ = 0;
    std::array<uint64_t, kWords> owed_{};
    uint16_t owed_count_ = 0;
    uint16_t echo_cursor_ = 0;
    std::vector<Wait> waits_;
    uint16_t examine_cursor_ = 0;
    RttEstimate delay_;  // the echo delay
    uint32_t rx_loss_score_ = 0;
};

}  // namespace mroce::core
