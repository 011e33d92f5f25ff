// util/time.h — the one clock abstraction of mroce.
//
// Time and Duration are integer nanoseconds. Time lives on a private clock tag so a
// std::chrono::steady_clock time point cannot be passed into the core by mistake; the
// datapaths convert at their boundary (see datapath/clock.h) and the simulator converts
// from its picoseconds.
#pragma once

#include <chrono>
#include <cstdint>

namespace mroce {

// CoreClock is never read: it only tags time points. Whoever drives the core owns "now".
struct CoreClock {
    using rep = int64_t;
    using period = std::nano;
    using duration = std::chrono::duration<rep, period>;
    using time_point = std::chrono::time_point<CoreClock>;
    static constexpr bool is_steady = true;
};

using Duration = CoreClock::duration;
using Time = CoreClock::time_point;

// kNever is the "unset" deadline: later than every real time. Never use 0 for unset.
inline constexpr Time kNever = Time::max();

// Builds a Time from nanoseconds since an arbitrary epoch chosen by the driver.
constexpr Time time_from_ns(int64_t ns) { return Time{Duration{ns}}; }
constexpr int64_t to_ns(Time t) { return t.time_since_epoch().count(); }
constexpr int64_t to_ns(Duration d) { return d.count(); }

using namespace std::chrono_literals;

}  // namespace mroce
