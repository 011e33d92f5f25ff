// sim/test_seed.h — seeds for simulator tests (test-only header).
//
// Every randomised test takes its seed from here: a fixed default, or MROCE_SEED=<n> to
// replay a failure. Sweeps run a bounded set of seeds by default; MROCE_SEED_SWEEP=<n>
// widens them, MROCE_SEED narrows them to the one seed. The seed is printed at the start
// and, through SCOPED_TRACE(seed_note(seed)), on every failing assertion.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace mroce::sim::testing {

inline std::string seed_note(uint64_t seed) {
    return "seed " + std::to_string(seed) + " (replay: MROCE_SEED=" + std::to_string(seed) + ")";
}

// test_seed returns MROCE_SEED if set, else default_seed, and prints it.
inline uint64_t test_seed(uint64_t default_seed) {
    uint64_t seed = default_seed;
    if (const char* env = std::getenv("MROCE_SEED")) seed = std::strtoull(env, nullptr, 0);
    std::printf("[   SEED   ] %s\n", seed_note(seed).c_str());
    ::testing::Test::RecordProperty("seed", std::to_string(seed));
    return seed;
}

// sweep_seeds returns {MROCE_SEED} if set, else base, base+1, ... (count of them, or
// MROCE_SEED_SWEEP of them).
inline std::vector<uint64_t> sweep_seeds(uint64_t base, uint64_t count) {
    if (const char* env = std::getenv("MROCE_SEED")) return {std::strtoull(env, nullptr, 0)};
    if (const char* env = std::getenv("MROCE_SEED_SWEEP")) count = std::strtoull(env, nullptr, 0);
    std::vector<uint64_t> seeds;
    for (uint64_t i = 0; i < count; ++i) seeds.push_back(base + i);
    return seeds;
}

}  // namespace mroce::sim::testing
