// util/rng.h — the project's only random source: xoshiro256** with explicit seeding.
//
// std::*_distribution is implementation-defined, so the helpers here are our own and give
// the same sequence with every standard library. fork(label) derives an independent stream
// so that adding a consumer never shifts the sequence seen by the others.
#pragma once

#include <cstdint>
#include <string_view>

namespace mroce {

class Rng {
public:
    explicit Rng(uint64_t seed) { reseed(seed); }

    void reseed(uint64_t seed) {
        uint64_t x = seed;
        for (auto& s : s_) s = splitmix64(x);
    }

    uint64_t next_u64() {
        const uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }
    uint32_t next_u32() { return static_cast<uint32_t>(next_u64() >> 32); }

    // uniform(n) returns a value in [0, n); n == 0 returns 0. Lemire's multiply-shift with
    // rejection, so the result is unbiased.
    uint64_t uniform(uint64_t n) {
        if (n == 0) return 0;
        for (;;) {
            __extension__ using u128 = unsigned __int128;
            const u128 m = static_cast<u128>(next_u64()) * n;
            const uint64_t low = static_cast<uint64_t>(m);
            if (low >= n || low >= (-n) % n) return static_cast<uint64_t>(m >> 64);
        }
    }
    // uniform_range(lo, hi) returns a value in [lo, hi].
    uint64_t uniform_range(uint64_t lo, uint64_t hi) { return lo + uniform(hi - lo + 1); }

    // bernoulli_ppm(p) is true with probability p / 1e6; integer so decisions never
    // depend on floating-point rounding.
    bool bernoulli_ppm(uint32_t ppm) { return uniform(1'000'000) < ppm; }

    // bernoulli(p) is the floating-point form for reports and workloads (never protocol).
    bool bernoulli(double p) {
        if (p <= 0) return false;
        if (p >= 1) return true;
        return static_cast<double>(next_u64() >> 11) * 0x1.0p-53 < p;
    }

    // fork(label) returns an independent generator derived from this one's seed state and
    // the label; it does not advance this generator.
    Rng fork(std::string_view label) const {
        uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the label
        for (char c : label) {
            h ^= static_cast<unsigned char>(c);
            h *= 0x100000001b3ULL;
        }
        return Rng(s_[0] ^ rotl(s_[1], 13) ^ rotl(s_[2], 29) ^ rotl(s_[3], 41) ^ h);
    }

private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    static uint64_t splitmix64(uint64_t& x) {
        uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    uint64_t s_[4];
};

}  // namespace mroce
