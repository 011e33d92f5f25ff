// sim/sim_time.h — simulated time: integer picoseconds, and the conversion to core time.
//
// The simulator keeps picoseconds so that serialisation times at 100–800 Gbit/s are exact
// (one byte at 800 Gbit/s is 10 ps) and equal-time ties are rare and deliberate. The core
// sees nanoseconds (util/time.h); the only conversions are the functions below, used at
// the engine boundary (sim/host.cc). SimTime is a time_point on its own clock tag, so a
// core Time or a steady_clock time cannot be mixed in by mistake, while chrono literals
// still work: `sim.schedule_in(2us, ...)` converts exactly.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>

#include "util/time.h"

namespace mroce::sim {

struct SimClock {
    using rep = int64_t;
    using period = std::pico;
    using duration = std::chrono::duration<rep, period>;
    using time_point = std::chrono::time_point<SimClock>;
    static constexpr bool is_steady = true;
};

// SimDuration and SimTime are int64 picoseconds. SimTime{} (0 ps) is the start of a
// simulation unless Sim was given another start time.
using SimDuration = SimClock::duration;
using SimTime = SimClock::time_point;

// kSimForever is "no limit" / "never": later than every reachable time (~106 days).
inline constexpr SimTime kSimForever = SimTime::max();

constexpr SimTime sim_time_from_ps(int64_t ps) { return SimTime{SimDuration{ps}}; }
constexpr int64_t to_ps(SimTime t) { return t.time_since_epoch().count(); }
constexpr int64_t to_ps(SimDuration d) { return d.count(); }

// to_core_time converts to the engine's nanoseconds, rounding down (an engine must never
// be told a time later than the simulated instant). kSimForever maps to kNever.
constexpr Time to_core_time(SimTime t) {
    if (t == kSimForever) return kNever;
    int64_t ps = to_ps(t);
    int64_t ns = ps / 1000;
    if (ps < 0 && ns * 1000 != ps) --ns;  // floor for negative times too
    return time_from_ns(ns);
}

// from_core_time converts an engine time (a deadline) to picoseconds, exactly.
// kNever, and any time too large for int64 ps, maps to kSimForever.
constexpr SimTime from_core_time(Time t) {
    const int64_t ns = to_ns(t);
    constexpr int64_t kMaxNs = std::numeric_limits<int64_t>::max() / 1000;
    constexpr int64_t kMinNs = std::numeric_limits<int64_t>::min() / 1000;
    if (ns >= kMaxNs) return kSimForever;
    if (ns <= kMinNs) return SimTime::min();
    return sim_time_from_ps(ns * 1000);
}

}  // namespace mroce::sim
