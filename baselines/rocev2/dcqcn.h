// baselines/rocev2/dcqcn.h — DCQCN (Zhu et al., SIGCOMM 2015): the sender's rate
// state machine (the "reaction point", RP) and the receiver's CNP pacing (the
// "notification point", NP). Parameters and their sources: README.md.
//
//   CNP ──► alpha = (1-g)·alpha + g;  Rt = Rc;  Rc = Rc·(1 - alpha/2);  reset T, BC
//   every alpha_timer without a CNP:    alpha = (1-g)·alpha
//   every rate_timer (T += 1) and every byte_counter bytes sent (BC += 1):
//       max(T, BC) <  F : fast recovery   Rc = (Rt + Rc) / 2
//       min(T, BC) >  F : hyper increase  Rt += (min(T, BC) - F)·R_HAI; Rc = (Rt + Rc) / 2
//       otherwise       : additive        Rt += R_AI;                    Rc = (Rt + Rc) / 2
//
// Integer arithmetic only (STYLE §4): rates in bit/s, alpha in units of 2^-20. The state
// machine is idle (no timers) until the first CNP and goes idle again once the rate is
// back at line rate and alpha has decayed to zero, so an uncongested QP costs nothing.
// Time comes from the caller; nothing here reads a clock.
#pragma once

#include <cstdint>

#include "util/time.h"

namespace mroce::rocev2 {

struct DcqcnConfig {
    bool enabled = true;
    uint64_t line_rate_bps = 100'000'000'000;  // start rate and ceiling
    uint64_t min_rate_bps = 100'000'000;       // floor of the current rate
    uint32_t g_shift = 8;                      // g = 2^-g_shift = 1/256
    Duration cnp_interval = 50us;              // NP: at most one CNP per QP per interval
    Duration alpha_timer = 55us;               // alpha decays once per interval without CNP
    Duration rate_timer = 55us;                // T: rate increase timer
    uint64_t byte_counter = 10'000'000;        // B: rate increase every B bytes sent
    uint32_t fast_recovery_steps = 5;          // F
    uint64_t rate_ai_bps = 40'000'000;         // R_AI
    uint64_t rate_hai_bps = 200'000'000;       // R_HAI
};

// config_error names the first invalid DCQCN setting in one line, or "" if it is usable.
const char* dcqcn_config_error(const DcqcnConfig& c);

inline constexpr uint32_t kAlphaOne = 1u << 20;  // alpha == 1.0

struct DcqcnStats {
    uint64_t cnps = 0;             // CNPs that cut the rate
    uint64_t alpha_updates = 0;    // alpha timer expiries
    uint64_t fast_recovery = 0;    // increase events by stage
    uint64_t additive = 0;
    uint64_t hyper = 0;
    uint64_t min_rate_bps = UINT64_MAX;  // lowest current rate reached
};

// DcqcnSender is the RP state of one QP. on_cnp/on_sent/on_timeout are events in;
// rate_bps()/next_deadline() are answers out.
class DcqcnSender {
public:
    explicit DcqcnSender(const DcqcnConfig& c);

    void on_cnp(Time now);
    // on_sent counts bytes for the byte-counter stage.
    void on_sent(uint32_t bytes);
    // on_timeout runs the alpha and rate timers due at or before now.
    void on_timeout(Time now);
    // next_deadline is the earliest timer (kNever while idle).
    Time next_deadline() const;

    uint64_t rate_bps() const { return rc_; }         // current rate Rc
    uint64_t target_rate_bps() const { return rt_; }  // target rate Rt
    uint32_t alpha() const { return alpha_; }         // in units of 1/kAlphaOne
    bool limited() const { return rc_ < cfg_.line_rate_bps; }  // pacing needed
    const DcqcnStats& stats() const { return stats_; }

private:
    void increase();

    DcqcnConfig cfg_;
    uint64_t rc_, rt_;
    uint32_t alpha_ = kAlphaOne;  // the paper starts alpha at 1
    uint32_t timer_count_ = 0, byte_count_stage_ = 0;
    uint64_t bytes_ = 0;
    Time alpha_deadline_ = kNever, rate_deadline_ = kNever;
    DcqcnStats stats_;
};

// CnpLimiter is the NP side of one QP: should a CE-marked packet arriving now trigger a
// CNP? At most one per cnp_interval.
class CnpLimiter {
public:
    explicit CnpLimiter(Duration interval) : interval_(interval) {}
    bool should_send(Time now) {
        if (sent_any_ && now - last_ < interval_) return false;
        sent_any_ = true;
        last_ = now;
        return true;
    }

private:
    Duration interval_;
    bool sent_any_ = false;
    Time last_{};
};

}  // namespace mroce::rocev2
