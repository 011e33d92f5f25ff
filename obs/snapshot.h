// obs/snapshot.h — a copy of what one engine exposes (core/stats.h counters, path and
// congestion state) plus its observer's RTT percentiles and events: everything the
// exporters (obs/export.h) print, taken in one go under the engine's lock and formatted
// after it is released.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/connection.h"
#include "core/endpoint.h"
#include "core/stats.h"
#include "obs/histogram.h"
#include "obs/observer.h"

namespace mroce::obs {

// RttSummary: a path's RTT distribution in ns (from its histogram; zeros when no sample).
struct RttSummary {
    uint64_t count = 0;
    uint64_t sum_ns = 0;
    uint64_t min_ns = 0, p50_ns = 0, p99_ns = 0, p999_ns = 0, max_ns = 0;
};

struct PathSnapshot {
    uint16_t id = 0;
    core::PathState state = core::PathState::kActive;
    uint16_t src_port = 0;
    uint16_t plane = 0;
    uint8_t generation = 0;
    int64_t srtt_ns = 0;     // 0 before the first sample
    int64_t rttvar_ns = 0;
    uint64_t cwnd_bytes = 0;
    uint64_t in_flight_bytes = 0;
    int32_t ecn_alpha = -1;  // marked fraction in 1/1024; -1 when the controller keeps none
    core::PathStats stats;
    RttSummary rtt;
};

struct ConnectionSnapshot {
    uint32_t id = 0;
    uint32_t shard = 0;              // the engine (shard) of a sharded device that has it
    std::string peer;
    core::ConnState state = core::ConnState::kConnecting;
    uint32_t rate_hint_mbps = 0;     // the latest hint received (0: none)
    uint64_t pacing_rate_bps = 0;    // what the pacer allows now (0: not paced)
    uint64_t window_rate_bps = 0;    // what the windows carry per RTT (0: unknown)
    uint64_t in_flight_bytes = 0;
    core::ConnectionStats stats;
    std::vector<PathSnapshot> paths;
};

// NamedCounter: a counter of the layer that drives the engine (api/: driver loop, UDP
// datapath), with its stable key, Prometheus name and help (docs/observability.md).
struct NamedCounter {
    const char* key;
    const char* prometheus;
    const char* help;
    uint64_t value;
};

// ShardSnapshot: what one shard of a sharded device (api::DeviceConfig::threads) adds to
// the device's sums, so an operator sees how the work is spread.
struct ShardSnapshot {
    uint32_t index = 0;
    core::EndpointStats endpoint_stats;
    uint64_t streams = 0;
    uint64_t connections = 0;
    std::vector<NamedCounter> driver_counters;
};

struct Snapshot {
    std::string endpoint;            // "ip:port"
    int64_t engine_now_ns = 0;       // the engine's clock when taken
    int64_t wall_now_ns = 0;         // CLOCK_REALTIME (Unix ns) at the same moment; 0 in the simulator
    core::EndpointStats endpoint_stats;
    uint64_t streams = 0;            // stream slots in use
    std::vector<ConnectionSnapshot> connections;
    Histogram rtt;                   // every RTT sample of the endpoint, merged
    std::vector<NamedCounter> driver_counters;
    std::vector<LoggedEvent> events;  // since the `events_after` given to take()
    uint64_t events_dropped = 0;
    // A sharded device's shards, in order (empty for one engine): the fields above are
    // then their sums (counters, RTT samples), their union (connections, each with its
    // shard) and their merged event log (merge_shards).
    std::vector<ShardSnapshot> shards;

    // take copies ep's state and, when given, obs's RTT histograms (as summaries) and its
    // events with seq > events_after. Call it under the engine's lock, at engine time now.
    // It also lets obs forget connections the endpoint no longer has.
    static Snapshot take(const core::Endpoint& ep, Observer* obs, Time now,
                         uint64_t events_after = 0);
};

// merge_shards: one snapshot of a device from its shards' (in shard order, each taken
// with Snapshot::take under its own engine lock, in turn): counters and driver counters
// summed, connections listed with their shard, RTT histograms merged, and events in
// sequence order. The shards' observers number events from one shared sequence
// (Observer::share_sequence); `complete_through` is that sequence's last number handed
// out before the first shard was read, and only events up to it are kept: a later one
// may have been logged in a shard already read while an earlier one was not yet in
// another, and a reader that followed the log past it would miss the earlier one.
Snapshot merge_shards(std::vector<Snapshot> shards, uint64_t complete_through);

// snapshot_of copies one connection's state and counters (no RTT histograms: those are the
// Observer's, which Snapshot::take adds) at engine time now. The simulator's cc.csv
// samples connections through it, so its columns are these fields under these names.
ConnectionSnapshot snapshot_of(const core::Connection& c, Time now);

const char* state_name(core::ConnState s);
const char* state_name(core::PathState s);

}  // namespace mroce::obs
