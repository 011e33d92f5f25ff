// util/counters.h — adding one struct of counters to another of the same kind: the sums
// of a sharded device's shards (api/device.cc, obs/snapshot.cc).
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace mroce {

// add_counters adds each counter of `b` to `a`, for structs made only of uint64_t counters
// (core/stats.h, the driver's and datapath's stats; STYLE §8). kFields is checked against
// the size, so a field added to one of them stops the build where it is summed until it
// is counted there (and is a uint64_t).
template <size_t kFields, class T>
void add_counters(T& a, const T& b) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) == kFields * sizeof(uint64_t));
    auto x = std::bit_cast<std::array<uint64_t, kFields>>(a);
    const auto y = std::bit_cast<std::array<uint64_t, kFields>>(b);
    for (size_t i = 0; i < kFields; ++i) x[i] += y[i];
    a = std::bit_cast<T>(x);
}

}  // namespace mroce
