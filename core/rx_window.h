// core/rx_window.h — the receiver's view of one path: cumulative PSN plus a 256-bit
// bitmap of what arrived above it (spec §6 [ACK-10]).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

#include "util/seq.h"
#include "wire/ack.h"

namespace mroce::core {

class RxWindow {
public:
    static constexpr uint32_t kBits = wire::kSackBits;

    // reset: nothing received; the first expected PSN is `first_psn`.
    void reset(uint32_t first_psn) {
        cum_ = first_psn - 1;
        words_ = {};
    }

    enum class Mark { kNew, kDuplicate, kBelowWindow, kAboveWindow };

    // mark records PSN `psn`. kNew advances cum over any contiguous run.
    Mark mark(uint32_t psn) {
        const int32_t d = seq_diff(psn, cum_);
        if (d <= 0) return Mark::kBelowWindow;
        if (d > static_cast<int32_t>(kBits)) return Mark::kAboveWindow;
        if (d == 1 && !has_gap()) {  // in order with nothing above: the common case
            ++cum_;
            return Mark::kNew;
        }
        const uint32_t bit = static_cast<uint32_t>(d - 1);
        uint64_t& w = words_[bit / 64];
        const uint64_t m = uint64_t{1} << (bit % 64);
        if (w & m) return Mark::kDuplicate;
        w |= m;
        if (bit == 0) advance_contiguous();
        return Mark::kNew;
    }

    // advance_to moves cum forward to `psn` (used for the sender's psn_floor, [PATH-6]);
    // bits below are forgotten. Returns how many PSNs were skipped without arriving.
    uint32_t advance_to(uint32_t psn) {
        // Every DATA carries a floor; it is almost never above cum: keep that test inline.
        if (seq_diff(psn, cum_) <= 0) return 0;
        return skip_to(psn);
    }

    uint32_t cum() const { return cum_; }
    bool test(uint32_t bit) const { return bit < kBits && (words_[bit / 64] >> (bit % 64)) & 1; }
    bool has_gap() const { return words_[0] | words_[1] | words_[2] | words_[3]; }

    // to_wire renders the bitmap in ACK wire order ([ACK-2]).
    void to_wire(wire::Sack& out) const {
        for (uint32_t w = 0; w < 4; ++w) {
            uint64_t v = words_[w];
            if (v == 0) {  // the common case: no gap
                std::fill_n(out.bytes.begin() + w * 8, 8, uint8_t{0});
                continue;
            }
            // wire: bit i of a byte is mask 0x80 >> i, ours is 1 << i: reverse each byte.
            for (uint32_t k = 0; k < 8; ++k, v >>= 8)
                out.bytes[w * 8 + k] = reverse_bits(static_cast<uint8_t>(v));
        }
    }

private:
    [[gnu::noinline]] uint32_t skip_to(uint32_t psn) {
        const int32_t d = seq_diff(psn, cum_);
        uint32_t skipped = 0;
        const uint32_t n = static_cast<uint32_t>(d);
        for (uint32_t i = 0; i < n && i < kBits; ++i) skipped += !test(i);
        if (n > kBits) skipped += n - kBits;
        shift(n);
        cum_ = psn;
        advance_contiguous();
        return skipped;
    }
    static uint8_t reverse_bits(uint8_t b) {
        static constexpr auto kTable = [] {
            std::array<uint8_t, 256> t{};
            for (unsigned i = 0; i < 256; ++i) {
                unsigned r = 0;
                for (unsigned k = 0; k < 8; ++k) r |= ((i >> k) & 1u) << (7 - k);
                t[i] = static_cast<uint8_t>(r);
            }
            return t;
        }();
        return kTable[b];
    }
    void advance_contiguous() {
        // Count trailing ones of the whole 256-bit word, then shift them out.
        uint32_t ones = 0;
        for (uint64_t w : words_) {
            const uint32_t t = static_cast<uint32_t>(std::countr_one(w));
            ones += t;
            if (t < 64) break;
        }
        if (ones == 0) return;
        shift(ones);
        cum_ += ones;
    }
    void shift(uint32_t n) {
        if (n >= kBits) {
            words_ = {};
            return;
        }
        const uint32_t ws = n / 64, bs = n % 64;
        for (uint32_t i = 0; i < 4; ++i) {
            const uint32_t src = i + ws;
            uint64_t v = src < 4 ? words_[src] >> bs : 0;
            if (bs && src + 1 < 4) v |= words_[src + 1] << (64 - bs);
            words_[i] = v;
        }
    }

    uint32_t cum_ = 0;
    std::array<uint64_t, 4> words_{};  // bit i = PSN cum_ + 1 + i
};

}  // namespace mroce::core
