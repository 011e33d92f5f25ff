// fuzz/fuzz_check.h — checks shared by the decoder fuzz targets.
//
// A fuzz target never trusts the code under test: FUZZ_CHECK aborts (which libFuzzer and the
// replay driver both report as a crash) whatever the build type, unlike MROCE_DCHECK.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <span>
#include <utility>

#include "util/result.h"

#define FUZZ_CHECK(cond)                                                                         \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            std::fprintf(stderr, "FUZZ_CHECK failed: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
            std::abort();                                                                        \
        }                                                                                        \
    } while (0)

namespace mroce::fuzz {

// Reserved is a byte range {offset, length} that encoders write as zero and decoders ignore
// (docs/spec.md §3 [WIRE-6]).
using Reserved = std::pair<size_t, size_t>;

// check_canonical checks that re-encoding a decoded packet reproduces the input byte for
// byte, except that reserved ranges come back as zero: a decoder that drops or misreads a
// field shows up here even when encoder and decoder agree with each other.
inline void check_canonical(std::span<const std::byte> input, std::span<const std::byte> encoded,
                            std::initializer_list<Reserved> reserved) {
    FUZZ_CHECK(input.size() == encoded.size());
    for (size_t i = 0; i < input.size(); ++i) {
        bool is_reserved = false;
        for (const Reserved& r : reserved)
            if (i >= r.first && i < r.first + r.second) is_reserved = true;
        if (is_reserved) {
            FUZZ_CHECK(encoded[i] == std::byte{0});
        } else if (input[i] != encoded[i]) {
            std::fprintf(stderr, "re-encoded byte %zu differs\n", i);
            FUZZ_CHECK(input[i] == encoded[i]);
        }
    }
}

// kCommonReserved is the reserved u16 at offset 2 of every packet.
inline constexpr Reserved kCommonReserved{2, 2};

// last_input_accepted is set by each target to whether its decoder(s) accepted the last
// input. The replay driver checks it against the names gen_corpus.py gives its seeds
// (seed-valid-* must be accepted, seed-bad-* must not); libFuzzer ignores it.
inline bool last_input_accepted = false;

}  // namespace mroce::fuzz
