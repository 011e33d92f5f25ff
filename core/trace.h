// core/trace.h — what the engine tells an observer besides its counters: RTT samples and
// the connection and path events an operator needs on a timeline (STYLE §8: "the core
// emits structured trace events with stable names, through a sink it is given").
//
// The sink is optional (Endpoint::set_trace_sink); without one the engine pays one
// predictable branch at each call site. With one, it is called on the engine's thread,
// synchronously, from inside the engine: it must be quick and must not call back into the
// engine. obs::Observer (obs/observer.h) is the implementation the drivers install.
#pragma once

#include <cstdint>

#include "core/event.h"
#include "util/time.h"

namespace mroce::core {

enum class TraceKind : uint8_t {
    kConnectionUp,
    kConnectionFailed,   // status says why
    kConnectionClosed,
    kPathFailed,         // [PATH-3]
    kPathRecovered,      // [PATH-4] the re-rolled path answered
    kPathRerolled,       // [PATH-4] before/after: the old and new UDP source port
    kWindowCut,          // before/after: the path's congestion window in bytes (spec §9.1)
    kRateHintChanged,    // before/after: the receiver's hint in Mbit/s (spec §9.3)
};

struct TraceEvent {
    TraceKind kind = TraceKind::kConnectionUp;
    Time at{};
    uint32_t connection = 0;
    uint16_t path = 0;                 // path events and window cuts
    Status status = Status::kSuccess;  // kConnectionFailed
    uint64_t before = 0;
    uint64_t after = 0;
};

class TraceSink {
public:
    virtual ~TraceSink() = default;
    // on_rtt_sample: one RTT sample of `path` of connection `connection` (the echoed
    // timestamp's age less the peer's ACK delay, spec [LOSS-4]), as the engine takes it.
    virtual void on_rtt_sample(uint32_t connection, uint16_t path, Duration rtt, Time now) = 0;
    // on_trace: one event, in the order they happen.
    virtual void on_trace(const TraceEvent& e) = 0;
};

}  // namespace mroce::core
