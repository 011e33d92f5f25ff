// obs/observer.h — the engine's trace sink (core/trace.h): per-path RTT histograms and a
// bounded log of connection and path events, for snapshots (obs/snapshot.h).
//
// Called by the engine on its thread; read by whoever holds the same lock as the engine
// (api/: the engine lock; the simulator: its only thread). Memory is bounded: histograms
// for at most kMaxConnections connections (later ones share one overflow histogram per
// endpoint) and the last kMaxEvents events.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/trace.h"
#include "obs/histogram.h"

namespace mroce::obs {

// LoggedEvent: one trace event with the sequence number the log gave it (from 1, never
// reused), so a reader can ask for what is new since the last event it saw.
struct LoggedEvent {
    uint64_t seq = 0;
    core::TraceEvent event;
};

class Observer final : public core::TraceSink {
public:
    static constexpr size_t kMaxConnections = 256;
    static constexpr size_t kMaxEvents = 4096;
    // A rate-hint change is logged when the hint moved by at least a quarter since the last
    // one logged for that connection (the receiver may recompute it every 8 µs; the log
    // keeps the moves an operator can see). ACKs without a hint (0) are not changes.
    static constexpr uint32_t kHintLogQuarter = 4;
    // ... and at most one per kHintLogGap per connection: a hint that flaps (seen on
    // loopback: 98 Gbit/s and 383 Mbit/s in alternate ACKs of one batch) would otherwise
    // fill the log and push out the connection and path events within a second. The
    // current hint is always in the gauges (docs/observability.md).
    static constexpr Duration kHintLogGap = std::chrono::milliseconds(10);

    void on_rtt_sample(uint32_t connection, uint16_t path, Duration rtt, Time now) override;
    void on_trace(const core::TraceEvent& e) override;

    // path_rtt: the RTT histogram (ns) of one path, or nullptr if it has none.
    const Histogram* path_rtt(uint32_t connection, uint16_t path) const;
    // overflow_rtt: the samples of connections beyond kMaxConnections.
    const Histogram& overflow_rtt() const { return overflow_; }
    // events_since: the logged events with seq > after, oldest first.
    std::vector<LoggedEvent> events_since(uint64_t after) const;
    uint64_t last_event_seq() const { return events_.empty() ? 0 : events_.back().seq; }
    // share_sequence: number events from `next` (shared by several observers, each under
    // its own lock) instead of this observer's own count, so that the logs of a sharded
    // device's engines merge into one sequence a reader can follow (api/metrics.cc). One
    // atomic increment per logged event, never per packet. Call before the first event;
    // `next` outlives the observer.
    void share_sequence(std::atomic<uint64_t>* next) { shared_seq_ = next; }
    uint64_t events_dropped() const { return dropped_; }
    // forget_except drops the histograms of connections not in `live` (ids), so slots that
    // were reclaimed do not hold memory. Sorted or not.
    void forget_except(const std::vector<uint32_t>& live);

private:
    struct PerConnection {
        std::vector<Histogram> paths;
        uint32_t logged_hint = 0;
        Time logged_hint_at = kNever;  // when it was logged (kNever: not yet)
    };
    void log(const core::TraceEvent& e);

    std::unordered_map<uint32_t, PerConnection> conns_;
    Histogram overflow_;
    std::deque<LoggedEvent> events_;
    uint64_t next_seq_ = 1;
    std::atomic<uint64_t>* shared_seq_ = nullptr;  // share_sequence; else next_seq_
    uint64_t dropped_ = 0;
};

// event_name: the stable name of a trace kind in the JSON event log
// ("connection_up", "path_failed", "window_cut", ...).
const char* event_name(core::TraceKind kind);

}  // namespace mroce::obs
