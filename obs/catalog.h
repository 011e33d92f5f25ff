// obs/catalog.h — the one list of metric names (the registry): every counter and gauge an
// engine exposes, its stable key (JSON, `mroce stat`), its Prometheus name and its help.
// docs/observability.md describes each; obs_test checks that it lists every name here.
//
// Keys follow the NIC-counter vocabulary where one fits (tx_/rx_ packets and bytes,
// ecn_ce_marked like np_ecn_marked_roce_packets, timeouts like local_ack_timeout_err);
// otherwise they are core/stats.h's field names. Prometheus names are
// mroce_<scope>_<key>_total for counters (scope endpoint, connection or path; endpoint-wide
// sums of connection and path counters drop the scope), and gauges carry their base unit
// (_seconds, _bytes, _bytes_per_second).
#pragma once

#include <cstdint>
#include <span>

#include "core/stats.h"
#include "obs/snapshot.h"

namespace mroce::obs {

// A counter of one of core's stats structs. `total` is the key of its endpoint-wide sum
// (mroce_<total>_total), or nullptr when another counter already is that sum.
template <class Stats>
struct CounterField {
    const char* key;
    uint64_t Stats::*field;
    const char* help;
    const char* total;
};

template <class Snap>
struct Gauge {
    const char* key;         // JSON key, with its unit suffix
    const char* prometheus;  // full Prometheus name
    const char* help;
    double (*json)(const Snap&);        // value in the JSON key's unit
    double (*prometheus_value)(const Snap&);  // value in the Prometheus name's base unit
};

std::span<const CounterField<core::EndpointStats>> endpoint_counters();
std::span<const CounterField<core::ConnectionStats>> connection_counters();
std::span<const CounterField<core::PathStats>> path_counters();
std::span<const Gauge<ConnectionSnapshot>> connection_gauges();
std::span<const Gauge<PathSnapshot>> path_gauges();

}  // namespace mroce::obs
