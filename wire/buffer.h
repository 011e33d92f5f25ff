// wire/buffer.h — explicit big-endian Reader and Writer over byte spans.
//
// Never overlay structs on packet memory (STYLE §5). A Reader that failed stays failed:
// every later read returns zero and ok() is false, so a decoder checks once at the end.
// A Writer that ran out of room likewise stays failed; encoders size first so this is a
// bug guard, not a control path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

// The byte swaps below assume a little-endian host; a big-endian port changes only them.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "wire/buffer.h assumes little-endian");

namespace mroce::wire {

// Fixed-offset big-endian loads and stores, for the hot-path codecs (DATA, ACK) that check
// the datagram's length once and then read or write every field at its spec offset.
inline uint16_t load_be16(const std::byte* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return __builtin_bswap16(v);
}
inline uint32_t load_be32(const std::byte* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}
inline uint64_t load_be64(const std::byte* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}
inline void store_be16(std::byte* p, uint16_t v) {
    v = __builtin_bswap16(v);
    std::memcpy(p, &v, 2);
}
inline void store_be32(std::byte* p, uint32_t v) {
    v = __builtin_bswap32(v);
    std::memcpy(p, &v, 4);
}
inline void store_be64(std::byte* p, uint64_t v) {
    v = __builtin_bswap64(v);
    std::memcpy(p, &v, 8);
}

class Reader {
public:
    explicit Reader(std::span<const std::byte> in) : in_(in) {}

    uint8_t u8() { return static_cast<uint8_t>(take(1)); }
    uint16_t u16() { return static_cast<uint16_t>(take(2)); }
    uint32_t u32() { return static_cast<uint32_t>(take(4)); }
    uint64_t u64() { return take(8); }
    // bytes(out) copies out.size() bytes or fails.
    void bytes(std::span<std::byte> out) {
        if (!ok_ || remaining() < out.size()) return fail();
        std::memcpy(out.data(), in_.data() + pos_, out.size());
        pos_ += out.size();
    }
    void skip(size_t n) {
        if (!ok_ || remaining() < n) return fail();
        pos_ += n;
    }
    std::span<const std::byte> rest() const { return ok_ ? in_.subspan(pos_) : std::span<const std::byte>{}; }

    bool ok() const { return ok_; }
    size_t pos() const { return pos_; }
    size_t remaining() const { return in_.size() - pos_; }

private:
    uint64_t take(size_t n) {
        if (!ok_ || remaining() < n) {
            fail();
            return 0;
        }
        const std::byte* p = in_.data() + pos_;
        pos_ += n;
        // Fixed-width loads compile to one load and one byte swap (hot path: every packet).
        switch (n) {
            case 1: return static_cast<uint8_t>(*p);
            case 2: { uint16_t v; std::memcpy(&v, p, 2); return __builtin_bswap16(v); }
            case 4: { uint32_t v; std::memcpy(&v, p, 4); return __builtin_bswap32(v); }
            default: { uint64_t v; std::memcpy(&v, p, 8); return __builtin_bswap64(v); }
        }
    }
    void fail() { ok_ = false; }

    std::span<const std::byte> in_;
    size_t pos_ = 0;
    bool ok_ = true;
};

class Writer {
public:
    explicit Writer(std::span<std::byte> out) : out_(out) {}

    void u8(uint8_t v) { put(v, 1); }
    void u16(uint16_t v) { put(v, 2); }
    void u32(uint32_t v) { put(v, 4); }
    void u64(uint64_t v) { put(v, 8); }
    void bytes(std::span<const std::byte> in) {
        if (!ok_ || out_.size() - pos_ < in.size()) {
            ok_ = false;
            return;
        }
        if (!in.empty()) std::memcpy(out_.data() + pos_, in.data(), in.size());
        pos_ += in.size();
    }
    void zeros(size_t n) {
        if (!ok_ || out_.size() - pos_ < n) {
            ok_ = false;
            return;
        }
        std::memset(out_.data() + pos_, 0, n);
        pos_ += n;
    }

    bool ok() const { return ok_; }
    size_t pos() const { return pos_; }

private:
    void put(uint64_t v, size_t n) {
        if (!ok_ || out_.size() - pos_ < n) {
            ok_ = false;
            return;
        }
        std::byte* p = out_.data() + pos_;
        pos_ += n;
        switch (n) {
            case 1: *p = static_cast<std::byte>(v); return;
            case 2: { const uint16_t b = __builtin_bswap16(static_cast<uint16_t>(v)); std::memcpy(p, &b, 2); return; }
            case 4: { const uint32_t b = __builtin_bswap32(static_cast<uint32_t>(v)); std::memcpy(p, &b, 4); return; }
            default: { const uint64_t b = __builtin_bswap64(v); std::memcpy(p, &b, 8); return; }
        }
    }

    std::span<std::byte> out_;
    size_t pos_ = 0;
    bool ok_ = true;
};

}  // namespace mroce::wire
