// core/tx_segments.h — the per-segment send state of one message: which segments are
// acknowledged at path level, which wait in the retransmit queue, and how often each was
// sent again ([LOSS-7]).
//
// Every message that starts sending needs it, and a small message is on the latency path
// twice: when its first segment is produced and when its completion pops it. Three
// std::vectors cost three allocations and three frees per message there, about 600
// instructions of a ping-pong's round trip; a message of up to kInlineSegments segments
// (with a 4 KiB segment, 256 KiB) keeps its state inline instead; a larger one takes two
// heap blocks, one of bits and one of counts.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace mroce::core {

class TxSegments {
public:
    static constexpr uint32_t kInlineSegments = 64;

    // start: n segments (n >= 1), none acknowledged, queued or sent again.
    void start(uint32_t n) {
        n_ = n;
        if (n <= kInlineSegments) {
            heap_bits_.reset();
            heap_retries_.reset();
            acked_ = queued_ = 0;
            retries_.fill(0);
            return;
        }
        heap_bits_ = std::make_unique<uint64_t[]>(2 * bit_words(n));  // value-initialized: 0
        heap_retries_ = std::make_unique<uint16_t[]>(n);
    }
    bool started() const { return n_ != 0; }

    bool acked(uint32_t s) const { return (acked_words()[s / 64] >> (s % 64)) & 1; }
    void set_acked(uint32_t s) { acked_words()[s / 64] |= bit(s); }
    void clear_acked(uint32_t s) { acked_words()[s / 64] &= ~bit(s); }
    // try_queue marks segment s queued for retransmission; false if it already was.
    bool try_queue(uint32_t s) {
        uint64_t& w = queued_words()[s / 64];
        if (w & bit(s)) return false;
        w |= bit(s);
        return true;
    }
    void unqueue(uint32_t s) { queued_words()[s / 64] &= ~bit(s); }
    uint16_t& retries(uint32_t s) { return retry_counts()[s]; }

private:
    static size_t bit_words(uint32_t n) { return (size_t{n} + 63) / 64; }
    static uint64_t bit(uint32_t s) { return uint64_t{1} << (s % 64); }
    // The heap bits: the acked words, then the queued words.
    uint64_t* acked_words() { return heap_bits_ ? heap_bits_.get() : &acked_; }
    const uint64_t* acked_words() const { return heap_bits_ ? heap_bits_.get() : &acked_; }
    uint64_t* queued_words() { return heap_bits_ ? heap_bits_.get() + bit_words(n_) : &queued_; }
    uint16_t* retry_counts() { return heap_retries_ ? heap_retries_.get() : retries_.data(); }

    uint32_t n_ = 0;  // 0: not started
    uint64_t acked_ = 0, queued_ = 0;
    std::array<uint16_t, kInlineSegments> retries_{};
    std::unique_ptr<uint64_t[]> heap_bits_;      // messages above kInlineSegments segments
    std::unique_ptr<uint16_t[]> heap_retries_;
};

}  // namespace mroce::core
