// wire/test_util.h — helpers shared by wire/*_test.cc (test-only; never linked into mroce_wire).
//
// Annotated byte vectors (STYLE §5, tests 1 and 2): a packet is written out as one Fragment
// per field, each with its offset, its expected bytes, its name as in docs/spec.md §3 and the
// error a decoder returns when the datagram ends before the field is complete. check_vector()
// compares that with an encoder's output and check_every_prefix() decodes every strict
// prefix (quiche CheckFramingBoundaries).
//
// Property tests take their seeds from property_seeds(): MROCE_SEED=<n> replays seed n alone.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "util/result.h"
#include "util/rng.h"

namespace mroce::wire::testing {

struct Fragment {
    size_t offset;               // byte offset of the field from the start of the datagram
    std::vector<uint8_t> bytes;  // its expected encoding, big-endian
    const char* field;           // its name in docs/spec.md §3
    Error if_cut;                // decode error when the datagram ends inside or before it
};
using Annotated = std::vector<Fragment>;

// join concatenates the fragments and checks that each starts where the previous ended.
inline std::vector<std::byte> join(const Annotated& v) {
    std::vector<std::byte> out;
    for (const Fragment& f : v) {
        EXPECT_EQ(f.offset, out.size()) << "fragment '" << f.field << "' is not contiguous";
        for (uint8_t b : f.bytes) out.push_back(std::byte{b});
    }
    return out;
}

// field_at returns the fragment that holds byte index i.
inline const Fragment& field_at(const Annotated& v, size_t i) {
    for (const Fragment& f : v)
        if (i >= f.offset && i < f.offset + f.bytes.size()) return f;
    ADD_FAILURE() << "no fragment holds byte " << i;
    return v.back();
}

// hex renders bytes for failure messages.
inline std::string hex(std::span<const std::byte> b) {
    std::string s;
    char buf[4];
    for (size_t i = 0; i < b.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned>(b[i]));
        if (i != 0) s += (i % 8 == 0) ? " | " : " ";
        s += buf;
    }
    return s;
}

// expect_bytes compares an encoding with the annotated vector and names the first field
// that differs.
inline void expect_bytes(const Annotated& v, std::span<const std::byte> got) {
    const std::vector<std::byte> want = join(v);
    ASSERT_EQ(got.size(), want.size()) << "got  " << hex(got) << "\nwant " << hex(want);
    for (size_t i = 0; i < want.size(); ++i) {
        if (got[i] != want[i]) {
            const Fragment& f = field_at(v, i);
            ADD_FAILURE() << "byte " << i << " (field '" << f.field << "' at offset " << f.offset
                          << ") differs\ngot  " << hex(got) << "\nwant " << hex(want);
            return;
        }
    }
}

// check_every_prefix decodes every strict prefix of the vector and expects the error named
// by the fragment that holds the first missing byte.
template <typename Decode>
void check_every_prefix(const Annotated& v, Decode decode) {
    const std::vector<std::byte> bytes = join(v);
    for (size_t len = 0; len < bytes.size(); ++len) {
        const Fragment& f = field_at(v, len);
        SCOPED_TRACE(::testing::Message() << "prefix of " << len << " bytes ends in field '"
                                          << f.field << "' (offset " << f.offset << ")");
        auto r = decode(std::span<const std::byte>(bytes).first(len));
        ASSERT_FALSE(r.ok());
        EXPECT_EQ(r.error(), f.if_cut) << to_string(r.error()) << " vs " << to_string(f.if_cut);
    }
}

// with_trailing returns the vector's bytes followed by n extra bytes.
inline std::vector<std::byte> with_trailing(const Annotated& v, size_t n) {
    std::vector<std::byte> b = join(v);
    b.insert(b.end(), n, std::byte{0});
    return b;
}

// property_seeds returns the seeds a property test runs: the seed in env var MROCE_SEED
// alone when it is set, otherwise 1..n. It prints the range once so a log shows it.
inline std::vector<uint64_t> property_seeds(uint64_t n) {
    if (const char* env = std::getenv("MROCE_SEED"); env != nullptr && *env != '\0') {
        const uint64_t seed = std::strtoull(env, nullptr, 0);
        std::printf("[ seeds    ] MROCE_SEED=%llu\n", static_cast<unsigned long long>(seed));
        return {seed};
    }
    std::printf("[ seeds    ] 1..%llu (replay one with MROCE_SEED=<seed>)\n",
                static_cast<unsigned long long>(n));
    std::vector<uint64_t> seeds;
    for (uint64_t s = 1; s <= n; ++s) seeds.push_back(s);
    return seeds;
}

// fill_random fills a buffer from the generator.
inline void fill_random(Rng& rng, std::span<std::byte> out) {
    for (std::byte& b : out) b = std::byte{static_cast<uint8_t>(rng.next_u32())};
}

// kCanary pre-fills encoder output buffers, so a byte a failed encoder wrote shows up.
inline constexpr std::byte kCanary{0xA5};

// expect_untouched checks that an encoder that failed wrote nothing.
inline void expect_untouched(std::span<const std::byte> buf) {
    for (size_t i = 0; i < buf.size(); ++i)
        ASSERT_EQ(buf[i], kCanary) << "failed encoder wrote byte " << i;
}

}  // namespace mroce::wire::testing
