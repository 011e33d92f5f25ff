// obs/export.cc — see export.h.
#include "obs/export.h"

#include <fmt/format.h>

#include "obs/catalog.h"

namespace mroce::obs {

namespace {

using Json = nlohmann::json;

std::string conn_hex(uint32_t id) { return fmt::format("0x{:08x}", id); }

// Prom accumulates one exposition; families are written whole (HELP, TYPE, samples).
struct Prom {
    std::string out;
    void head(const std::string& name, const char* type, const char* help) {
        out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    }
    void sample(const std::string& name, const std::string& labels, double v) {
        out += name;
        if (!labels.empty()) out += "{" + labels + "}";
        if (v == static_cast<double>(static_cast<int64_t>(v)))
            out += fmt::format(" {}\n", static_cast<int64_t>(v));
        else
            out += fmt::format(" {}\n", v);
    }
};

template <class Stats>
uint64_t sum_connections(const Snapshot& s, uint64_t Stats::*field);

template <>
uint64_t sum_connections(const Snapshot& s, uint64_t core::ConnectionStats::*field) {
    uint64_t v = 0;
    for (const auto& c : s.connections) v += c.stats.*field;
    return v;
}

template <>
uint64_t sum_connections(const Snapshot& s, uint64_t core::PathStats::*field) {
    uint64_t v = 0;
    for (const auto& c : s.connections)
        for (const auto& p : c.paths) v += p.stats.*field;
    return v;
}

// write_shards: a sharded device's per-shard families, mroce_shard_* with a shard label:
// every endpoint and driver counter of each shard and its connections, so an operator
// sees how the work and the handshakes are spread (the unlabelled series are the sums).
void write_shards(Prom& p, const Snapshot& s, const std::string& ep) {
    if (s.shards.empty()) return;
    p.head("mroce_endpoint_shards", "gauge", "Engines (driver threads) of the device.");
    p.sample("mroce_endpoint_shards", ep, static_cast<double>(s.shards.size()));
    auto label = [&](const ShardSnapshot& sh) { return fmt::format("{},shard=\"{}\"", ep, sh.index); };
    for (const auto& f : endpoint_counters()) {
        const std::string name = fmt::format("mroce_shard_{}_total", f.key);
        p.head(name, "counter", f.help);
        for (const auto& sh : s.shards) p.sample(name, label(sh), static_cast<double>(sh.endpoint_stats.*f.field));
    }
    p.head("mroce_shard_connections", "gauge", "Connection slots in use in the shard.");
    for (const auto& sh : s.shards) p.sample("mroce_shard_connections", label(sh), static_cast<double>(sh.connections));
    p.head("mroce_shard_streams", "gauge", "Stream slots in use in the shard.");
    for (const auto& sh : s.shards) p.sample("mroce_shard_streams", label(sh), static_cast<double>(sh.streams));
    for (size_t k = 0; k < s.driver_counters.size(); ++k) {
        // mroce_udp_rx_packets_total -> mroce_shard_udp_rx_packets_total
        const std::string name = "mroce_shard_" + std::string(s.driver_counters[k].prometheus).substr(6);
        p.head(name, "counter", s.driver_counters[k].help);
        for (const auto& sh : s.shards)
            if (k < sh.driver_counters.size())
                p.sample(name, label(sh), static_cast<double>(sh.driver_counters[k].value));
    }
}

}  // namespace

std::string to_prometheus(const Snapshot& s) {
    Prom p;
    const std::string ep = fmt::format("endpoint=\"{}\"", s.endpoint);
    const size_t labelled = std::min(s.connections.size(), kMaxLabelledConnections);
    // A sharded device's connections and paths also name their shard (summing them over
    // shards is what the endpoint-wide series already do; the label says where one is).
    const bool sharded = !s.shards.empty();
    auto shard_label = [&](const ConnectionSnapshot& c) {
        return sharded ? fmt::format(",shard=\"{}\"", c.shard) : std::string();
    };
    auto conn_labels = [&](const ConnectionSnapshot& c) {
        return fmt::format("{},conn=\"{}\",peer=\"{}\"{}", ep, conn_hex(c.id), c.peer, shard_label(c));
    };

    for (const auto& f : endpoint_counters()) {
        const std::string name = fmt::format("mroce_endpoint_{}_total", f.key);
        p.head(name, "counter", f.help);
        p.sample(name, ep, static_cast<double>(s.endpoint_stats.*f.field));
    }
    p.head("mroce_endpoint_connections", "gauge", "Connection slots in use.");
    p.sample("mroce_endpoint_connections", ep, static_cast<double>(s.connections.size()));
    p.head("mroce_endpoint_streams", "gauge", "Stream slots in use.");
    p.sample("mroce_endpoint_streams", ep, static_cast<double>(s.streams));
    for (const auto& c : s.driver_counters) {
        p.head(c.prometheus, "counter", c.help);
        p.sample(c.prometheus, ep, static_cast<double>(c.value));
    }
    // Endpoint-wide sums of the connection and path counters.
    for (const auto& f : connection_counters()) {
        if (!f.total) continue;
        const std::string name = fmt::format("mroce_{}_total", f.total);
        p.head(name, "counter", f.help);
        p.sample(name, ep, static_cast<double>(sum_connections(s, f.field)));
    }
    for (const auto& f : path_counters()) {
        if (!f.total) continue;
        const std::string name = fmt::format("mroce_{}_total", f.total);
        p.head(name, "counter", f.help);
        p.sample(name, ep, static_cast<double>(sum_connections(s, f.field)));
    }
    // The endpoint's RTT histogram: cumulative counts at every power of two from 1.024 µs
    // to 2^30 ns, le in seconds (a bucket counts the samples below 2^k ns).
    {
        const std::string name = "mroce_rtt_seconds";
        p.head(name, "histogram", "RTT samples of every path (less the peer's ACK delay).");
        uint64_t cum = 0;
        uint32_t b = 0;
        for (uint32_t k = 10; k <= 30; ++k) {
            const uint64_t bound = uint64_t{1} << k;
            while (b < Histogram::kBuckets && Histogram::bucket_high(b) < bound) cum += s.rtt.bucket_count(b++);
            p.sample(name + "_bucket", fmt::format("{},le=\"{}\"", ep, static_cast<double>(bound) / 1e9),
                     static_cast<double>(cum));
        }
        p.sample(name + "_bucket", ep + ",le=\"+Inf\"", static_cast<double>(s.rtt.count()));
        p.sample(name + "_sum", ep, static_cast<double>(s.rtt.sum()) / 1e9);
        p.sample(name + "_count", ep, static_cast<double>(s.rtt.count()));
    }

    write_shards(p, s, ep);

    // Per connection.
    for (const auto& f : connection_counters()) {
        const std::string name = fmt::format("mroce_connection_{}_total", f.key);
        p.head(name, "counter", f.help);
        for (size_t i = 0; i < labelled; ++i)
            p.sample(name, conn_labels(s.connections[i]),
                     static_cast<double>(s.connections[i].stats.*f.field));
    }
    for (const auto& g : connection_gauges()) {
        p.head(g.prometheus, "gauge", g.help);
        for (size_t i = 0; i < labelled; ++i)
            p.sample(g.prometheus, conn_labels(s.connections[i]), g.prometheus_value(s.connections[i]));
    }
    // Per path.
    auto path_labels = [&](const ConnectionSnapshot& c, const PathSnapshot& ps) {
        return fmt::format("{},conn=\"{}\",path=\"{}\"{}", ep, conn_hex(c.id), ps.id, shard_label(c));
    };
    for (const auto& f : path_counters()) {
        const std::string name = fmt::format("mroce_path_{}_total", f.key);
        p.head(name, "counter", f.help);
        for (size_t i = 0; i < labelled; ++i)
            for (const auto& ps : s.connections[i].paths)
                p.sample(name, path_labels(s.connections[i], ps), static_cast<double>(ps.stats.*f.field));
    }
    for (const auto& g : path_gauges()) {
        p.head(g.prometheus, "gauge", g.help);
        for (size_t i = 0; i < labelled; ++i)
            for (const auto& ps : s.connections[i].paths)
                p.sample(g.prometheus, path_labels(s.connections[i], ps), g.prometheus_value(ps));
    }
    {
        const std::string name = "mroce_path_rtt_seconds";
        p.head(name, "summary", "RTT samples of the path: p50, p99, p99.9 (3% resolution).");
        for (size_t i = 0; i < labelled; ++i)
            for (const auto& ps : s.connections[i].paths) {
                const std::string l = path_labels(s.connections[i], ps);
                p.sample(name, l + ",quantile=\"0.5\"", static_cast<double>(ps.rtt.p50_ns) / 1e9);
                p.sample(name, l + ",quantile=\"0.99\"", static_cast<double>(ps.rtt.p99_ns) / 1e9);
                p.sample(name, l + ",quantile=\"0.999\"", static_cast<double>(ps.rtt.p999_ns) / 1e9);
                p.sample(name + "_sum", l, static_cast<double>(ps.rtt.sum_ns) / 1e9);
                p.sample(name + "_count", l, static_cast<double>(ps.rtt.count));
            }
    }
    return p.out;
}

Json event_json(const LoggedEvent& le, const Snapshot& s) {
    const core::TraceEvent& e = le.event;
    Json j;
    j["seq"] = le.seq;
    int64_t t = to_ns(e.at);
    if (s.wall_now_ns) t += s.wall_now_ns - s.engine_now_ns;
    j["time_ns"] = t;
    j["event"] = event_name(e.kind);
    j["endpoint"] = s.endpoint;
    j["connection"] = conn_hex(e.connection);
    switch (e.kind) {
        case core::TraceKind::kConnectionFailed: j["reason"] = core::to_string(e.status); break;
        case core::TraceKind::kPathFailed:
        case core::TraceKind::kPathRecovered: j["path"] = e.path; break;
        case core::TraceKind::kPathRerolled:
            j["path"] = e.path;
            j["old_source_port"] = e.before;
            j["new_source_port"] = e.after;
            break;
        case core::TraceKind::kWindowCut:
            j["path"] = e.path;
            j["old_cwnd_bytes"] = e.before;
            j["new_cwnd_bytes"] = e.after;
            break;
        case core::TraceKind::kRateHintChanged:
            j["old_hint_mbps"] = e.before;
            j["new_hint_mbps"] = e.after;
            break;
        default: break;
    }
    return j;
}

Json counters_json(const Snapshot& s) {
    Json counters = Json::object();
    for (const auto& f : endpoint_counters()) counters[f.key] = s.endpoint_stats.*f.field;
    for (const auto& f : connection_counters())
        if (f.total) counters[f.total] = sum_connections(s, f.field);
    for (const auto& f : path_counters())
        if (f.total) counters[f.total] = sum_connections(s, f.field);
    counters["connections"] = s.connections.size();
    counters["streams"] = s.streams;
    return counters;
}

void add_counters(Json& into, const Json& from) {
    for (const auto& [k, v] : from.items()) {
        if (!v.is_number_unsigned()) continue;
        into[k] = (into.contains(k) ? into[k].get<uint64_t>() : 0) + v.get<uint64_t>();
    }
}

Json histogram_json(const Histogram& h, const char* unit) {
    const std::string u(unit);
    return {{"count", h.count()},           {"min_" + u, h.min()},
            {"p50_" + u, h.quantile(0.5)},  {"p99_" + u, h.quantile(0.99)},
            {"p999_" + u, h.quantile(0.999)}, {"max_" + u, h.max()}};
}

Json to_json(const Snapshot& s) {
    Json j;
    j["endpoint"] = s.endpoint;
    j["time_ns"] = s.wall_now_ns ? s.wall_now_ns : s.engine_now_ns;
    j["counters"] = counters_json(s);
    Json driver = Json::object();
    for (const auto& c : s.driver_counters) driver[c.key] = c.value;
    j["driver"] = driver;
    j["rtt"] = histogram_json(s.rtt);
    Json conns = Json::array();
    for (const auto& c : s.connections) {
        Json jc;
        jc["connection"] = conn_hex(c.id);
        jc["peer"] = c.peer;
        if (!s.shards.empty()) jc["shard"] = c.shard;
        jc["state"] = state_name(c.state);
        for (const auto& g : connection_gauges())
            if (std::string_view(g.key) != "up") jc[g.key] = g.json(c);
        Json cc = Json::object();
        for (const auto& f : connection_counters()) cc[f.key] = c.stats.*f.field;
        jc["counters"] = cc;
        Json paths = Json::array();
        for (const auto& ps : c.paths) {
            Json jp;
            jp["path"] = ps.id;
            jp["state"] = state_name(ps.state);
            jp["plane"] = ps.plane;
            jp["generation"] = ps.generation;
            for (const auto& g : path_gauges())
                if (std::string_view(g.key) != "up") jp[g.key] = g.json(ps);
            jp["rtt"] = {{"count", ps.rtt.count}, {"min_ns", ps.rtt.min_ns}, {"p50_ns", ps.rtt.p50_ns},
                         {"p99_ns", ps.rtt.p99_ns}, {"p999_ns", ps.rtt.p999_ns}, {"max_ns", ps.rtt.max_ns}};
            Json pc = Json::object();
            for (const auto& f : path_counters()) pc[f.key] = ps.stats.*f.field;
            jp["counters"] = pc;
            paths.push_back(jp);
        }
        jc["paths"] = paths;
        conns.push_back(jc);
    }
    j["connections"] = conns;
    if (!s.shards.empty()) {
        // A sharded device: "counters" and "driver" are the sums; each shard's own here.
        Json shards = Json::array();
        for (const auto& sh : s.shards) {
            Json js;
            js["shard"] = sh.index;
            Json sc = Json::object();
            for (const auto& f : endpoint_counters()) sc[f.key] = sh.endpoint_stats.*f.field;
            sc["connections"] = sh.connections;
            sc["streams"] = sh.streams;
            js["counters"] = sc;
            Json sd = Json::object();
            for (const auto& c : sh.driver_counters) sd[c.key] = c.value;
            js["driver"] = sd;
            shards.push_back(js);
        }
        j["shards"] = shards;
    }
    Json events = Json::array();
    for (const auto& e : s.events) events.push_back(event_json(e, s));
    j["events"] = events;
    j["events_dropped"] = s.events_dropped;
    return j;
}

}  // namespace mroce::obs
