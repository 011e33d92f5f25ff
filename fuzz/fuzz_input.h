// fuzz/fuzz_input.h — the fuzzer's input read as a stream of decisions.
//
// Structure-aware targets draw every choice (what to post, which packet to drop, which
// field to change and to what) from the input, so libFuzzer's byte mutations become
// changes of the scenario, and an input replays exactly. An exhausted input answers 0 to
// every read: the target's "0" choices are its default, harmless ones, so a short input is
// a clean run.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mroce::fuzz {

class Input {
public:
    Input() = default;
    Input(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}

    bool empty() const { return p_ == end_; }
    size_t remaining() const { return static_cast<size_t>(end_ - p_); }

    uint8_t u8() { return p_ == end_ ? 0 : *p_++; }
    // Multi-byte reads are big-endian. (Each read is its own statement: the operands of
    // `|` are unsequenced, and the order must not depend on the compiler.)
    uint16_t u16() {
        const uint16_t hi = u8();
        return static_cast<uint16_t>(hi << 8 | u8());
    }
    uint32_t u32() {
        const uint32_t hi = u16();
        return hi << 16 | u16();
    }
    uint64_t u64() {
        const uint64_t hi = u32();
        return hi << 32 | u32();
    }
    // below: a choice in [0, n) (n > 0) from one byte, or two when n is over 256.
    uint32_t below(uint32_t n) { return (n <= 256 ? u8() : u16()) % n; }
    bool bit() { return u8() & 1; }

    // take splits off the next n bytes (fewer if the input is shorter) as an Input.
    Input take(size_t n) {
        if (n > remaining()) n = remaining();
        Input part(p_, n);
        p_ += n;
        return part;
    }

private:
    const uint8_t* p_ = nullptr;
    const uint8_t* end_ = nullptr;
};

}  // namespace mroce::fuzz
