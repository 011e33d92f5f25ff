#include "sim/topology.h"

#include <algorithm>
#include <cmath>

#include "util/check.h"

namespace mroce::sim {

SimDuration host_cable_delay(const TopologyConfig& c, uint32_t host, uint32_t plane) {
    SimDuration d = c.cable.delay;
    for (const TopologyConfig::HostCableDelay& e : c.cable_delays)
        if (e.host == host && (!e.plane || *e.plane == plane)) d = e.delay;
    return d;
}

SimDuration max_host_cable_delay(const TopologyConfig& c, uint32_t host) {
    SimDuration d{0};
    for (uint32_t p = 0; p < c.planes; ++p) d = std::max(d, host_cable_delay(c, host, p));
    return d;
}

std::string check_topology_config(const TopologyConfig& c) {
    if (c.planes < 1) return "planes must be at least 1";
    if (c.planes > UINT16_MAX) return "planes must be at most 65535";
    if (c.cable.rate_bps == 0) return "cable rate must be positive";
    if (c.cable.delay < SimDuration{0}) return "cable delay must not be negative";
    if (c.switches.traffic_classes < 1 || c.switches.traffic_classes > kMaxTrafficClasses)
        return "switch traffic classes must be 1..8";
    if (c.switches.mapped_classes > kMaxTrafficClasses) return "class queues must map at most 8 classes";
    for (uint8_t k = 0; k < c.switches.mapped_classes; ++k)
        if (c.switches.class_queue[k] >= c.switches.traffic_classes)
            return "class queues must name queues below traffic classes";
    if (c.switches.pfc.enabled() && !c.switches.class_queue_identity())
        return "PFC needs each class in its own queue (class queues = the identity)";
    if (c.switches.buffer.alpha <= 0) return "buffer alpha must be positive";
    if (c.switches.pfc.enabled() && c.switches.pfc.xon_bytes > c.switches.pfc.xoff_bytes)
        return "PFC xon must not exceed xoff";
    uint64_t hosts = 0;
    switch (c.kind) {
        case TopologyKind::kSingleSwitch:
            if (c.hosts < 1) return "single switch needs at least 1 host";
            hosts = c.hosts;
            break;
        case TopologyKind::kLeafSpine:
            if (c.leaves < 1 || c.spines < 1 || c.hosts_per_leaf < 1)
                return "leaf-spine needs at least 1 leaf, 1 spine and 1 host per leaf";
            if (!(c.oversubscription > 0)) return "oversubscription must be positive";
            hosts = uint64_t{c.leaves} * c.hosts_per_leaf;
            break;
        case TopologyKind::kFatTree:
            if (c.k < 2 || c.k % 2 != 0) return "fat-tree k must be even and at least 2";
            if (c.k > 64) return "fat-tree k must be at most 64";
            hosts = uint64_t{c.k} * c.k * c.k / 4;
            break;
        case TopologyKind::kGraph: {
            // sim/import.h names the problem with its file and line; this is the backstop.
            const GraphSpec& g = c.graph;
            if (g.is_switch.size() != g.nodes) return "graph: is_switch must have one entry per node";
            std::vector<uint32_t> host_links(g.nodes, 0);
            for (const GraphLink& l : g.links) {
                if (l.a >= g.nodes || l.b >= g.nodes || l.a == l.b) return "graph: a link with a bad end";
                if (!g.is_switch[l.a] && !g.is_switch[l.b]) return "graph: a link between two hosts";
                if (l.rate_bps == 0 || l.loss < 0 || l.loss >= 1) return "graph: a link with a bad rate or loss";
                for (uint32_t n : {l.a, l.b})
                    if (!g.is_switch[n]) ++host_links[n];
            }
            for (uint32_t n : g.host_nodes)
                if (n >= g.nodes || g.is_switch[n] || host_links[n] != 1) return "graph: every host needs exactly one link";
            if (g.host_nodes.size() < 2) return "graph: fewer than 2 hosts";
            if (!g.tiers.empty() && g.tiers.size() != g.nodes) return "graph: tiers must have one entry per node";
            hosts = g.host_nodes.size();
            break;
        }
    }
    if (hosts > kMaxHosts) return "too many hosts for the address plan (max 131070)";
    for (const TopologyConfig::HostCableDelay& e : c.cable_delays) {
        if (e.host >= hosts) return "cable delay for host " + std::to_string(e.host) + ": no such host";
        if (e.plane && *e.plane >= c.planes) return "cable delay for plane " + std::to_string(*e.plane) + ": no such plane";
        if (e.delay < SimDuration{0}) return "cable delay must not be negative";
    }
    return {};
}

Topology::Topology(Sim& sim, const TopologyConfig& config) : sim_(sim), config_(config) {
    if (!check_topology_config(config_).empty()) {
        MROCE_DCHECK(false && "invalid topology config (use check_topology_config)");
        return;
    }
    uint32_t n_hosts = 0;
    switch (config_.kind) {
        case TopologyKind::kSingleSwitch:
            n_hosts = config_.hosts;
            break;
        case TopologyKind::kLeafSpine:
            n_hosts = config_.leaves * config_.hosts_per_leaf;
            break;
        case TopologyKind::kFatTree:
            n_hosts = config_.k * config_.k * config_.k / 4;
            break;
        case TopologyKind::kGraph:
            n_hosts = static_cast<uint32_t>(config_.graph.host_nodes.size());
            break;
    }
    HostConfig hc = config_.host;
    hc.ports = static_cast<uint16_t>(config_.planes);
    hc.line_rate_bps = config_.cable.rate_bps;  // host ports run at the cable rate
    for (uint32_t h = 0; h < n_hosts; ++h)
        hosts_.push_back(std::make_unique<Host>(sim_, h, host_ipv4(h), hc, nullptr));
    host_cables_.assign(n_hosts, std::vector<size_t>(config_.planes));
    for (uint32_t p = 0; p < config_.planes; ++p) build_plane(p);
    recompute_routes();
}

Topology::~Topology() {
    // Wires first (they hold packets bound for ports and hosts), then switches, then hosts.
    cables_.clear();
    switches_.clear();
    hosts_.clear();
}

uint32_t Topology::add_switch(uint32_t tier, uint32_t plane, const std::string& role,
                              uint32_t n) {
    const std::string name =
        config_.name + "/p" + std::to_string(plane) + "/" + role + std::to_string(n);
    switches_.push_back(std::make_unique<Switch>(sim_, config_.switches, name));
    switch_info_.push_back(SwitchInfo{tier, plane});
    return static_cast<uint32_t>(switches_.size() - 1);
}

void Topology::wire_up(Cable& c) {
    const size_t i = static_cast<size_t>(&c - cables_.data());
    LinkConfig lc;
    lc.rate_bps = 0;  // the port in front serialises; the wire only delays and impairs
    lc.delay = c.a.is_host ? host_cable_delay(config_, c.a.node, c.plane) : config_.cable.delay;
    lc.jitter_max = config_.cable.jitter_max;
    const std::string name = config_.name + "/cable" + std::to_string(i);
    c.a_to_b = std::make_unique<Link>(sim_, lc, name + "/ab");
    c.b_to_a = std::make_unique<Link>(sim_, lc, name + "/ba");

    auto sink = [&](const CableEnd& e) -> PacketSink& {
        return e.is_host ? hosts_[e.node]->port_sink(e.port)
                         : static_cast<PacketSink&>(switches_[e.node]->port(e.port));
    };
    auto pause_target = [&](const CableEnd& e) -> PauseTarget& {
        return e.is_host ? hosts_[e.node]->pause_target(e.port)
                         : static_cast<PauseTarget&>(switches_[e.node]->port(e.port));
    };
    auto attach = [&](const CableEnd& self, const CableEnd& peer, Link* out) {
        out->set_sink(&sink(peer));
        if (self.is_host)
            hosts_[self.node]->set_uplink(self.port, out);
        else
            switches_[self.node]->port(self.port).connect(out, &pause_target(peer));
    };
    attach(c.a, c.b, c.a_to_b.get());
    attach(c.b, c.a, c.b_to_a.get());
}

void Topology::connect_host(uint32_t host, uint32_t plane, uint32_t sw) {
    SwitchPort& port = switches_[sw]->add_port(config_.cable.rate_bps);
    Cable c;
    c.a = CableEnd{true, host, static_cast<uint16_t>(plane)};
    c.b = CableEnd{false, sw, port.index()};
    c.plane = plane;
    cables_.push_back(std::move(c));
    host_cables_[host][plane] = cables_.size() - 1;
}

void Topology::connect_switches(uint32_t lower, uint32_t upper, uint32_t plane,
                                uint64_t rate_bps) {
    SwitchPort& down = switches_[lower]->add_port(rate_bps);
    SwitchPort& up = switches_[upper]->add_port(rate_bps);
    Cable c;
    c.a = CableEnd{false, lower, down.index()};
    c.b = CableEnd{false, upper, up.index()};
    c.plane = plane;
    cables_.push_back(std::move(c));
}

void Topology::build_plane(uint32_t plane) {
    const size_t first_cable = cables_.size();
    switch (config_.kind) {
        case TopologyKind::kSingleSwitch: {
            const uint32_t sw = add_switch(0, plane, "switch", 0);
            for (uint32_t h = 0; h < config_.hosts; ++h) connect_host(h, plane, sw);
            break;
        }
        case TopologyKind::kLeafSpine: {
            const double uplink = static_cast<double>(config_.cable.rate_bps) *
                                  config_.hosts_per_leaf /
                                  (config_.spines * config_.oversubscription);
            const auto uplink_bps = std::max<uint64_t>(1, std::llround(uplink));
            std::vector<uint32_t> leaves, spines;
            for (uint32_t l = 0; l < config_.leaves; ++l) leaves.push_back(add_switch(0, plane, "leaf", l));
            for (uint32_t s = 0; s < config_.spines; ++s) spines.push_back(add_switch(1, plane, "spine", s));
            for (uint32_t l = 0; l < config_.leaves; ++l) {
                for (uint32_t i = 0; i < config_.hosts_per_leaf; ++i)
                    connect_host(l * config_.hosts_per_leaf + i, plane, leaves[l]);
                for (uint32_t s : spines) connect_switches(leaves[l], s, plane, uplink_bps);
            }
            break;
        }
        case TopologyKind::kFatTree: {
            // Al-Fares et al.: k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 core
            // switches; aggregation switch j of every pod connects to cores j*k/2 .. +k/2-1.
            const uint32_t half = config_.k / 2;
            std::vector<uint32_t> cores;
            for (uint32_t c = 0; c < half * half; ++c) cores.push_back(add_switch(2, plane, "core", c));
            for (uint32_t pod = 0; pod < config_.k; ++pod) {
                std::vector<uint32_t> edges, aggs;
                for (uint32_t e = 0; e < half; ++e)
                    edges.push_back(add_switch(0, plane, "edge", pod * half + e));
                for (uint32_t a = 0; a < half; ++a)
                    aggs.push_back(add_switch(1, plane, "agg", pod * half + a));
                for (uint32_t e = 0; e < half; ++e) {
                    for (uint32_t i = 0; i < half; ++i)
                        connect_host((pod * half + e) * half + i, plane, edges[e]);
                    for (uint32_t a : aggs) connect_switches(edges[e], a, plane, config_.cable.rate_bps);
                }
                for (uint32_t a = 0; a < half; ++a)
                    for (uint32_t c = 0; c < half; ++c)
                        connect_switches(aggs[a], cores[a * half + c], plane, config_.cable.rate_bps);
            }
            break;
        }
        case TopologyKind::kGraph: {
            // Switches in node order (named by their node id, "sw<id>"), each of the tier the
            // graph gives, else a ToR (tier 0) if a host is on it and tier 1 if not. Each link becomes a cable with its own rate (the
            // ports at both ends), delay and loss (the wires).
            const GraphSpec& g = config_.graph;
            std::vector<uint32_t> host_of(g.nodes, UINT32_MAX), switch_of(g.nodes, UINT32_MAX);
            for (uint32_t h = 0; h < g.host_nodes.size(); ++h) host_of[g.host_nodes[h]] = h;
            std::vector<bool> tor(g.nodes, false);
            for (const GraphLink& l : g.links) {
                if (!g.is_switch[l.a]) tor[l.b] = true;
                if (!g.is_switch[l.b]) tor[l.a] = true;
            }
            for (uint32_t n = 0; n < g.nodes; ++n)
                if (g.is_switch[n])
                    switch_of[n] = add_switch(g.tiers.empty() ? (tor[n] ? 0 : 1) : g.tiers[n], plane, "sw", n);
            for (const GraphLink& l : g.links) {
                if (!g.is_switch[l.a] || !g.is_switch[l.b]) {
                    const bool a_host = !g.is_switch[l.a];
                    const uint32_t h = host_of[a_host ? l.a : l.b];
                    connect_host(h, plane, switch_of[a_host ? l.b : l.a]);
                    switches_[cables_.back().b.node]->port(cables_.back().b.port).set_rate(l.rate_bps);
                } else {
                    connect_switches(switch_of[l.a], switch_of[l.b], plane, l.rate_bps);
                }
                graph_links_.push_back(&l);
            }
            break;
        }
    }
    for (size_t i = first_cable; i < cables_.size(); ++i) {
        wire_up(cables_[i]);
        if (config_.kind == TopologyKind::kGraph) {
            const GraphLink& l = *graph_links_[i];
            for (Link* w : {cables_[i].a_to_b.get(), cables_[i].b_to_a.get()}) {
                w->config().delay = l.delay;
                w->config().loss_probability = l.loss;
            }
        }
    }
}

size_t Topology::host_cable(uint32_t host, uint32_t plane) const {
    return host_cables_.at(host).at(plane);
}

std::vector<size_t> Topology::cables_of_plane(uint32_t plane) const {
    std::vector<size_t> out;
    for (size_t i = 0; i < cables_.size(); ++i)
        if (cables_[i].plane == plane) out.push_back(i);
    return out;
}

void Topology::set_cable_up(size_t i, bool up) {
    Cable& c = cables_.at(i);
    c.up = up;
    for (Link* w : {c.a_to_b.get(), c.b_to_a.get()}) {
        if (up)
            w->config().blackhole.reset();
        else
            w->config().blackhole = TimeWindow{sim_.now(), kSimForever};
    }
}

void Topology::set_cable_rate(size_t i, uint64_t rate_bps) {
    MROCE_DCHECK(rate_bps > 0);
    Cable& c = cables_.at(i);
    for (const CableEnd& e : {c.a, c.b}) {
        if (e.is_host)
            hosts_[e.node]->set_port_rate(e.port, rate_bps);
        else
            switches_[e.node]->port(e.port).set_rate(rate_bps);
    }
}

void Topology::recompute_routes() {
    // Adjacency over routable switch-switch cables: (my port, peer switch, peer's port).
    struct Edge {
        uint16_t port;
        uint32_t peer;
        uint16_t peer_port;
    };
    const size_t n_sw = switches_.size();
    std::vector<std::vector<Edge>> adj(n_sw);
    for (const Cable& c : cables_) {
        if (!c.routable || c.a.is_host || c.b.is_host) continue;
        adj[c.a.node].push_back(Edge{c.a.port, c.b.node, c.b.port});
        adj[c.b.node].push_back(Edge{c.b.port, c.a.node, c.a.port});
    }
    // tables[s][h]: next-hop ports of switch s towards host h.
    std::vector<std::vector<std::vector<uint16_t>>> tables(
        n_sw, std::vector<std::vector<uint16_t>>(hosts_.size()));
    std::vector<uint32_t> dist(n_sw);
    std::vector<uint32_t> frontier, next;
    for (uint32_t h = 0; h < hosts_.size(); ++h) {
        // Breadth-first from the destination: a switch's next hops are its ports towards
        // neighbours one step closer (every shortest path, as ECMP groups are).
        std::fill(dist.begin(), dist.end(), UINT32_MAX);
        frontier.clear();
        for (size_t ci : host_cables_[h]) {
            const Cable& c = cables_[ci];
            if (!c.routable) continue;
            dist[c.b.node] = 1;
            tables[c.b.node][h].push_back(c.b.port);
            frontier.push_back(c.b.node);
        }
        for (uint32_t d = 1; !frontier.empty(); ++d) {
            next.clear();
            for (uint32_t s : frontier) {
                for (const Edge& e : adj[s]) {
                    if (dist[e.peer] < d + 1) continue;
                    if (dist[e.peer] == UINT32_MAX) {
                        dist[e.peer] = d + 1;
                        next.push_back(e.peer);
                    }
                    tables[e.peer][h].push_back(e.peer_port);
                }
            }
            frontier.swap(next);
        }
    }
    for (size_t s = 0; s < n_sw; ++s) {
        for (auto& hops : tables[s]) std::sort(hops.begin(), hops.end());
        switches_[s]->set_routes(tables[s]);
    }
}

void Topology::set_tap(const Host::RxTap& tap) {
    for (auto& h : hosts_) h->set_rx_tap(tap);
}

void Topology::capture_host(uint32_t h, PacketTap& tap) {
    Host& host = *hosts_.at(h);
    for (uint16_t p = 0; p < host.port_count(); ++p) {
        Link& down = *cables_[host_cable(h, p)].b_to_a;  // the wire into the host
        taps_.push_back(std::make_unique<TapSink>(sim_, tap, *host.uplink(p)));
        host.set_uplink(p, taps_.back().get());
        taps_.push_back(std::make_unique<TapSink>(sim_, tap, *down.sink()));
        down.set_sink(taps_.back().get());
    }
}

void Topology::capture_cable(size_t c, PacketTap& tap) {
    for (Link* wire : {cables_.at(c).a_to_b.get(), cables_.at(c).b_to_a.get()}) {
        taps_.push_back(std::make_unique<TapSink>(sim_, tap, *wire->sink()));
        wire->set_sink(taps_.back().get());
    }
}

FabricTotals Topology::totals() const {
    FabricTotals t;
    for (const auto& h : hosts_) {
        t.host_tx_packets += h->stats().tx_packets;
        t.host_tx_bytes += h->stats().tx_bytes;
        t.host_tx_data_packets += h->stats().tx_data_packets;
        for (uint16_t p = 0; p < h->port_count(); ++p) {
            t.host_rx_packets += h->port_rx_packets(p);
            t.host_rx_bytes += h->port_rx_bytes(p);
            t.in_flight += h->port_queued(p);
        }
    }
    for (const auto& s : switches_) {
        t.switch_drops += s->stats().dropped_no_route;
        t.switch_drop_bytes += s->stats().dropped_no_route_bytes;
        t.data_drops += s->stats().dropped_no_route_data;
        t.in_flight += s->in_flight();
        for (size_t p = 0; p < s->port_count(); ++p) {
            const PortStats& ps = s->port(p).stats();
            t.switch_drops += ps.dropped_total();
            t.switch_drop_bytes += ps.dropped_bytes;
            t.data_drops += ps.dropped_data_packets;
            t.pfc_overflow_drops += ps.dropped(SwitchDrop::kPfcOverflow);
            t.ecn_marks += ps.ecn_marked;
            t.pauses_sent += ps.pauses_sent;
            for (uint8_t c = 0; c < kMaxTrafficClasses; ++c) t.class_pauses_sent[c] += ps.class_pauses_sent[c];
            t.max_queue_bytes = std::max(t.max_queue_bytes, ps.max_queue_bytes);
        }
    }
    for (const Cable& c : cables_) {
        for (const Link* w : {c.a_to_b.get(), c.b_to_a.get()}) {
            const LinkStats& ls = w->stats();
            t.wire_drops += ls.dropped_total();
            t.wire_drop_bytes += ls.dropped_bytes;
            t.data_drops += ls.dropped_data_packets;
            t.wire_copies += ls.duplicated + ls.late_duplicated;
            t.ecn_marks += ls.ecn_marked;
            t.in_flight += w->in_flight();
        }
    }
    return t;
}

std::vector<GraphPath> graph_paths(const GraphSpec& g, uint32_t src) {
    // Breadth-first over switches from src's ToR, keeping per node the least delay and the
    // best bottleneck over the shortest paths that reach it (a DAG by BFS layer).
    struct Hop {
        uint32_t peer;
        const GraphLink* link;
    };
    std::vector<std::vector<Hop>> adj(g.nodes);
    for (const GraphLink& l : g.links) {
        adj[l.a].push_back({l.b, &l});
        adj[l.b].push_back({l.a, &l});
    }
    std::vector<GraphPath> at(g.nodes);
    std::vector<bool> seen(g.nodes, false);
    const uint32_t start = g.host_nodes.at(src);
    seen[start] = true;
    at[start] = GraphPath{0, SimDuration{0}, UINT64_MAX};
    std::vector<uint32_t> frontier{start}, next;
    while (!frontier.empty()) {
        next.clear();
        for (uint32_t n : frontier) {
            if (n != start && !g.is_switch[n]) continue;  // hosts never forward
            for (const Hop& h : adj[n]) {
                const GraphPath via{at[n].hops + 1, at[n].delay + h.link->delay,
                                    std::min(at[n].rate_bps, h.link->rate_bps)};
                if (!seen[h.peer]) {
                    seen[h.peer] = true;
                    at[h.peer] = via;
                    next.push_back(h.peer);
                } else if (at[h.peer].hops == via.hops) {
                    at[h.peer].delay = std::min(at[h.peer].delay, via.delay);
                    at[h.peer].rate_bps = std::max(at[h.peer].rate_bps, via.rate_bps);
                }
            }
        }
        frontier.swap(next);
    }
    std::vector<GraphPath> out;
    for (uint32_t n : g.host_nodes) out.push_back(at[n]);
    return out;
}

}  // namespace mroce::sim
