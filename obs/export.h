// obs/export.h — the exporters: one Snapshot (obs/snapshot.h) as the Prometheus text
// exposition format 0.0.4, as JSON (`mroce stat --json`, the stat socket), and events as
// JSON lines. Names come from obs/catalog.h only.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "obs/snapshot.h"

namespace mroce::obs {

// Per-connection and per-path series are written for at most this many connections of an
// endpoint (Prometheus cost grows with series); endpoint-wide sums always cover them all.
inline constexpr size_t kMaxLabelledConnections = 64;

// The Content-Type of to_prometheus's output.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// to_prometheus: the snapshot as the text exposition format, every series labelled
// endpoint="ip:port" (plus conn, peer and path where they apply).
std::string to_prometheus(const Snapshot& s);

// to_json: the snapshot as one JSON object ({"endpoint", "time_ns", "counters",
// "driver", "rtt", "connections": [{..., "paths": [...]}], "events": [...]}); keys are
// the catalog's (docs/observability.md).
nlohmann::json to_json(const Snapshot& s);

// counters_json: the snapshot's endpoint-wide counters ({"rx_datagrams", ..., "retransmits",
// "tx_data_packets", ..., "connections", "streams"}): to_json's "counters", also what the
// simulator writes per run (summary.json), so live and simulated figures share names.
nlohmann::json counters_json(const Snapshot& s);

// add_counters adds every number of `from` to the same key of `into` (keys missing from
// `into` are created): the sum of several endpoints' counters_json.
void add_counters(nlohmann::json& into, const nlohmann::json& from);

// histogram_json: {"count", "min_<unit>", "p50_<unit>", "p99_<unit>", "p999_<unit>",
// "max_<unit>"} of h (to_json's "rtt" with unit "ns").
nlohmann::json histogram_json(const Histogram& h, const char* unit = "ns");

// event_json: one logged event as a JSON object: {"seq", "time_ns", "event",
// "connection", ...}. time_ns is wall-clock Unix time when the snapshot has it (engine
// time shifted by wall_now_ns - engine_now_ns), else engine time.
nlohmann::json event_json(const LoggedEvent& e, const Snapshot& s);

}  // namespace mroce::obs
