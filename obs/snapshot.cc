// obs/snapshot.cc — see snapshot.h.
#include "obs/snapshot.h"

#include <algorithm>

#include "util/check.h"
#include "util/counters.h"

namespace mroce::obs {

namespace {

RttSummary summarize(const Histogram& h) {
    RttSummary s;
    s.count = h.count();
    s.sum_ns = h.sum();
    s.min_ns = h.min();
    s.p50_ns = h.quantile(0.5);
    s.p99_ns = h.quantile(0.99);
    s.p999_ns = h.quantile(0.999);
    s.max_ns = h.max();
    return s;
}

}  // namespace

Snapshot Snapshot::take(const core::Endpoint& ep, Observer* obs, Time now, uint64_t events_after) {
    Snapshot s;
    s.endpoint = ep.local_address().to_string();
    s.engine_now_ns = to_ns(now);
    s.endpoint_stats = ep.stats();
    s.streams = ep.num_streams();
    std::vector<uint32_t> live;
    ep.for_each_connection([&](const core::Connection& c) {
        live.push_back(c.id());
        ConnectionSnapshot cs = snapshot_of(c, now);
        if (obs) {
            for (PathSnapshot& ps : cs.paths) {
                if (const Histogram* h = obs->path_rtt(c.id(), ps.id)) {
                    ps.rtt = summarize(*h);
                    s.rtt.merge(*h);
                }
            }
        }
        s.connections.push_back(std::move(cs));
    });
    if (obs) {
        s.rtt.merge(obs->overflow_rtt());
        obs->forget_except(live);
        s.events = obs->events_since(events_after);
        s.events_dropped = obs->events_dropped();
    }
    return s;
}

Snapshot merge_shards(std::vector<Snapshot> shards, uint64_t complete_through) {
    Snapshot s;
    if (shards.empty()) return s;
    s.endpoint = shards[0].endpoint;  // one address for every shard (SO_REUSEPORT)
    s.engine_now_ns = shards[0].engine_now_ns;
    s.wall_now_ns = shards[0].wall_now_ns;
    s.driver_counters = shards[0].driver_counters;
    for (auto& c : s.driver_counters) c.value = 0;
    for (uint32_t i = 0; i < shards.size(); ++i) {
        Snapshot& one = shards[i];
        ShardSnapshot sh;
        sh.index = i;
        sh.endpoint_stats = one.endpoint_stats;
        sh.streams = one.streams;
        sh.connections = one.connections.size();
        sh.driver_counters = one.driver_counters;
        s.shards.push_back(std::move(sh));
        add_counters<22>(s.endpoint_stats, one.endpoint_stats);
        s.streams += one.streams;
        // Every shard lists the same driver counters in the same order (api/metrics.cc).
        MROCE_DCHECK(one.driver_counters.size() == s.driver_counters.size());
        for (size_t k = 0; k < std::min(s.driver_counters.size(), one.driver_counters.size()); ++k)
            s.driver_counters[k].value += one.driver_counters[k].value;
        for (ConnectionSnapshot& c : one.connections) {
            c.shard = i;
            s.connections.push_back(std::move(c));
        }
        s.rtt.merge(one.rtt);
        for (const LoggedEvent& e : one.events)
            if (e.seq <= complete_through) s.events.push_back(e);
        s.events_dropped += one.events_dropped;
    }
    std::sort(s.events.begin(), s.events.end(),
              [](const LoggedEvent& a, const LoggedEvent& b) { return a.seq < b.seq; });
    return s;
}

ConnectionSnapshot snapshot_of(const core::Connection& c, Time now) {
    ConnectionSnapshot cs;
    cs.id = c.id();
    cs.peer = c.peer().to_string();
    cs.state = c.state();
    cs.rate_hint_mbps = c.rate_hint_mbps();
    cs.pacing_rate_bps = c.pacing_rate_bps(now);
    cs.window_rate_bps = c.congestion().window_rate_bps();
    cs.in_flight_bytes = c.in_flight_bytes();
    cs.stats = c.stats();
    for (uint16_t p = 0; p < c.num_paths(); ++p) {
        const core::TxPath& tp = c.tx_path(p);
        PathSnapshot ps;
        ps.id = p;
        ps.state = tp.state;
        ps.src_port = tp.src_port;
        ps.plane = tp.local_port;
        ps.generation = tp.gen;
        ps.srtt_ns = tp.rtt.has_rtt ? to_ns(tp.rtt.srtt) : 0;
        ps.rttvar_ns = tp.rtt.has_rtt ? to_ns(tp.rtt.rttvar) : 0;
        ps.cwnd_bytes = c.congestion().window_bytes(p);
        ps.in_flight_bytes = tp.in_flight_bytes;
        ps.ecn_alpha = c.congestion().ecn_alpha(p);
        ps.stats = c.path_stats(p);
        cs.paths.push_back(ps);
    }
    return cs;
}

const char* state_name(core::ConnState s) {
    switch (s) {
        case core::ConnState::kConnecting: return "connecting";
        case core::ConnState::kEstablished: return "established";
        case core::ConnState::kFailed: return "failed";
        case core::ConnState::kClosed: return "closed";
    }
    return "unknown";
}

const char* state_name(core::PathState s) {
    switch (s) {
        case core::PathState::kActive: return "active";
        case core::PathState::kSuspect: return "suspect";
        case core::PathState::kFailed: return "failed";
    }
    return "unknown";
}

}  // namespace mroce::obs
