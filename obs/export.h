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

// event_json: one logged event as a JSON object: {"seq", "time_ns", "event",
// "connection", ...}. time_ns is wall-clock Unix time when the snapshot has it (engine
// time shifted by wall_now_ns - engine_now_ns), else engine time.
nlohmann::json event_json(const LoggedEvent& e, const Snapshot& s);

}  // namespace mroce::obs
