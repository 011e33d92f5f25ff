#include "baselines/rocev2/dcqcn.h"

#include <algorithm>

namespace mroce::rocev2 {

const char* dcqcn_config_error(const DcqcnConfig& c) {
    if (c.line_rate_bps == 0) return "dcqcn line_rate_bps must be positive";
    if (c.min_rate_bps == 0 || c.min_rate_bps > c.line_rate_bps)
        return "dcqcn min_rate_bps must be 1..line_rate_bps";
    if (c.g_shift < 1 || c.g_shift > 16) return "dcqcn g_shift must be 1..16";
    if (c.cnp_interval < Duration::zero()) return "dcqcn cnp_interval must not be negative";
    if (c.alpha_timer <= Duration::zero() || c.rate_timer <= Duration::zero())
        return "dcqcn alpha_timer and rate_timer must be positive";
    if (c.byte_counter == 0) return "dcqcn byte_counter must be positive";
    return "";
}

DcqcnSender::DcqcnSender(const DcqcnConfig& c)
    : cfg_(c), rc_(c.line_rate_bps), rt_(c.line_rate_bps) {}

void DcqcnSender::on_cnp(Time now) {
    if (!cfg_.enabled) return;
    ++stats_.cnps;
    const uint32_t g_alpha = alpha_ >> cfg_.g_shift;
    alpha_ = alpha_ - g_alpha + (kAlphaOne >> cfg_.g_shift);
    rt_ = rc_;
    // Rc·(1 - alpha/2); Rc < 2^40 and alpha <= 2^20, so the product fits in 64 bits.
    rc_ = std::max(cfg_.min_rate_bps, rc_ - rc_ * alpha_ / (2 * uint64_t{kAlphaOne}));
    stats_.min_rate_bps = std::min(stats_.min_rate_bps, rc_);
    timer_count_ = 0;
    byte_count_stage_ = 0;
    bytes_ = 0;
    alpha_deadline_ = now + cfg_.alpha_timer;
    rate_deadline_ = now + cfg_.rate_timer;
}

void DcqcnSender::on_sent(uint32_t bytes) {
    if (rate_deadline_ == kNever) return;  // idle: at line rate, nothing to recover
    bytes_ += bytes;
    while (bytes_ >= cfg_.byte_counter && rate_deadline_ != kNever) {
        bytes_ -= cfg_.byte_counter;
        ++byte_count_stage_;
        increase();
    }
}

void DcqcnSender::on_timeout(Time now) {
    while (alpha_deadline_ <= now) {
        ++stats_.alpha_updates;
        // (1-g)·alpha, rounding the decrement up so alpha reaches 0 and the timer stops.
        alpha_ -= (alpha_ + (1u << cfg_.g_shift) - 1) >> cfg_.g_shift;
        alpha_deadline_ = alpha_ == 0 ? kNever : alpha_deadline_ + cfg_.alpha_timer;
    }
    while (rate_deadline_ <= now) {
        ++timer_count_;
        rate_deadline_ += cfg_.rate_timer;
        increase();
    }
}

Time DcqcnSender::next_deadline() const { return std::min(alpha_deadline_, rate_deadline_); }

void DcqcnSender::increase() {
    const uint32_t f = cfg_.fast_recovery_steps;
    const uint32_t hi = std::max(timer_count_, byte_count_stage_);
    const uint32_t lo = std::min(timer_count_, byte_count_stage_);
    if (hi < f) {
        ++stats_.fast_recovery;
    } else if (lo > f) {
        ++stats_.hyper;
        rt_ += uint64_t{lo - f} * cfg_.rate_hai_bps;
    } else {
        ++stats_.additive;
        rt_ += cfg_.rate_ai_bps;
    }
    rt_ = std::min(rt_, cfg_.line_rate_bps);
    rc_ = (rt_ + rc_ + 1) / 2;  // rounded up so Rc reaches Rt
    if (rc_ >= cfg_.line_rate_bps) {
        rc_ = rt_ = cfg_.line_rate_bps;
        rate_deadline_ = kNever;  // recovered: the rate machine idles until the next CNP
    }
}

}  // namespace mroce::rocev2
