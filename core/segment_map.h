// core/segment_map.h — the receive state of one message in fixed space (spec §8,
// [PLACE-31]): which of its segments are written, and the held tail of an early last
// segment ([PLACE-12]). Neither grows with the message's length, which comes from the
// wire: a receiver (or a NIC) keeps the same few hundred bytes per message slot whether
// the message is 1 byte or 4 GiB long.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mroce::core {

// [PLACE-31]: a message's segments at or above `floor` + kSegmentWindow are never sent
// before every segment below `floor` is acknowledged, so the receiver tracks a window of
// this many segments above the first one it has not written. A protocol constant: both
// ends must agree. 1024 segments is 4 MiB at 4 KiB segments, more than a 400 Gbit/s link
// carries during a retransmission round, and 128 bytes of bitmap per message.
inline constexpr uint32_t kSegmentWindow = 1024;
static_assert(kSegmentWindow % 64 == 0, "the bitmap is whole 64-bit words");

// [PLACE-12]: what of an early last segment is held back and written last.
inline constexpr uint32_t kHeldTailBytes = 64;

class SegmentMap {
public:
    enum class Add { kNew, kDuplicate, kOutOfWindow };

    // reset: a message of `nseg` segments (at least 1), none written.
    void reset(uint32_t nseg) {
        nseg_ = nseg;
        base_ = 0;
        bits_ = {};
    }

    // add records segment `seg` (< nseg) as written. kOutOfWindow: the sender broke
    // [PLACE-31]; the caller drops the segment without writing it.
    Add add(uint32_t seg) {
        if (seg < base_) return Add::kDuplicate;
        if (seg - base_ >= kSegmentWindow) return Add::kOutOfWindow;
        const uint32_t i = seg % kSegmentWindow;
        uint64_t& w = bits_[i / 64];
        const uint64_t bit = uint64_t{1} << (i % 64);
        if (w & bit) return Add::kDuplicate;
        w |= bit;
        // Slide over the written run: a bit below base_ is never looked at again, so it is
        // cleared for the segment that will reuse its position, kSegmentWindow later.
        while (base_ < nseg_) {
            const uint32_t j = base_ % kSegmentWindow;
            uint64_t& v = bits_[j / 64];
            const uint64_t b = uint64_t{1} << (j % 64);
            if (!(v & b)) break;
            v &= ~b;
            ++base_;
        }
        return Add::kNew;
    }

    bool complete() const { return base_ == nseg_; }
    // others_written: every segment but the last is in place (the last may be too).
    bool others_written() const { return base_ + 1 >= nseg_; }
    uint32_t nseg() const { return nseg_; }
    uint32_t base() const { return base_; }  // every segment below it is written

private:
    uint32_t nseg_ = 0;
    uint32_t base_ = 0;
    std::array<uint64_t, kSegmentWindow / 64> bits_{};
};

// HeldTail: the last bytes of a message's last segment when that segment arrived before
// the others were in place ([PLACE-12]). The rest of the segment is written at once; these
// bytes are written when the message is complete, so the message's last byte changes
// only once every other byte is in place.
struct HeldTail {
    std::array<std::byte, kHeldTailBytes> bytes{};
    uint32_t off = 0;  // the message offset of bytes[0]
    uint8_t len = 0;   // 0: nothing held

    // split holds the last min(n, kHeldTailBytes) bytes of a last segment at message
    // offset `off`, and returns how many of its leading bytes the caller writes now.
    size_t split(uint64_t seg_off, const std::byte* data, size_t n) {
        len = static_cast<uint8_t>(std::min<size_t>(n, kHeldTailBytes));
        const size_t now = n - len;
        off = static_cast<uint32_t>(seg_off + now);
        std::memcpy(bytes.data(), data + now, len);
        return now;
    }
    bool held() const { return len != 0; }
    void clear() { len = 0; }
};

}  // namespace mroce::core
