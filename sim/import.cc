// sim/import.cc — see import.h. Each parser goes line by line so that every error names
// file:line; numbers are parsed strictly (the whole token, no trailing junk).
#include "sim/import.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "sim/import_lines.h"

namespace mroce::sim {
namespace {

using import_detail::ImportError;
using import_detail::Lines;

// A flow's bytes: what check_workload accepts.
uint64_t flow_bytes(const Lines& in, const std::string& t) {
    const uint64_t v = in.unsigned_at(t, "size", 0, UINT64_MAX);
    if (v == 0) in.fail("size 0: a flow must carry at least 1 byte");
    if (v > kMaxFlowBytes)
        in.fail("size " + t + " is over the simulator's " + std::to_string(kMaxFlowBytes) +
                " bytes per flow");
    return v;
}

// rate_bps parses an ns-3 DataRate string as HPCC's files write it: a number and a unit,
// bits (bps, b/s) or bytes (Bps, B/s), with k/K, M, G or T before it ("100Gbps").
uint64_t rate_bps(const Lines& in, const std::string& t) {
    size_t i = 0;
    while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
    const double v = in.real_at(t.substr(0, i), "rate");
    std::string unit = t.substr(i);
    double scale = 1;
    if (!unit.empty() && std::string("kKMGT").find(unit[0]) != std::string::npos) {
        const char p = unit[0];
        scale = p == 'M' ? 1e6 : p == 'G' ? 1e9 : p == 'T' ? 1e12 : 1e3;
        unit = unit.substr(1);
    }
    if (unit == "bps" || unit == "b/s") {
    } else if (unit == "Bps" || unit == "B/s") {
        scale *= 8;
    } else {
        in.fail("rate '" + t + "' has no unit bps, b/s, Bps or B/s (e.g. 100Gbps)");
    }
    const double bps = v * scale;
    if (!(bps >= 1) || bps > 1e15) in.fail("rate '" + t + "' is outside 1 bit/s .. 1 Pbit/s");
    return static_cast<uint64_t>(std::llround(bps));
}

// delay parses an ns-3 Time string: a number and s, ms, us, ns or ps ("0.001ms", "1000ns").
SimDuration delay(const Lines& in, const std::string& t) {
    size_t i = 0;
    while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
    const double v = in.real_at(t.substr(0, i), "delay");
    const std::string unit = t.substr(i);
    const double ps_per = unit == "s"    ? 1e12
                          : unit == "ms" ? 1e9
                          : unit == "us" ? 1e6
                          : unit == "ns" ? 1e3
                          : unit == "ps" ? 1.0
                                         : -1.0;
    if (ps_per < 0) in.fail("delay '" + t + "' has no unit s, ms, us, ns or ps (e.g. 0.001ms)");
    const double ps = v * ps_per;
    if (ps > 1e12) in.fail("delay '" + t + "' is over 1 s");
    return SimDuration{std::llround(ps)};
}

}  // namespace

NodeMap NodeMap::of(const TopologyConfig& t, uint32_t hosts) {
    NodeMap m;
    if (t.kind == TopologyKind::kGraph) {
        m.host_of_node.assign(t.graph.nodes, kNotAHost);
        for (uint32_t h = 0; h < t.graph.host_nodes.size(); ++h)
            m.host_of_node[t.graph.host_nodes[h]] = h;
        if (t.graph.format == "htsim")
            m.htsim_nodes = static_cast<uint32_t>(t.graph.host_nodes.size());
    } else {
        for (uint32_t h = 0; h < hosts; ++h) m.host_of_node.push_back(h);
    }
    return m;
}

std::optional<std::string> read_file(const std::string& path, std::string& err) {
    std::ifstream f(path);
    if (!f) {
        err = path + ": cannot open";
        return std::nullopt;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::optional<Workload> parse_hpcc_flows(const std::string& text, const std::string& name,
                                         const NodeMap& nodes, std::string& err) {
    try {
        Lines in(text, name);
        std::vector<std::string> t;
        if (!in.next(t)) in.fail_at_end("empty: the first line is the number of flows");
        if (t.size() != 1) in.fail("the first line must be the number of flows alone");
        const uint64_t n = in.unsigned_at(t[0], "flow count", 1, kMaxFlows - 1);
        Workload w;
        SimDuration last{0};
        while (w.size() < n) {
            if (!in.next(t))
                in.fail_at_end("ends after " + std::to_string(w.size()) +
                               " flows; its first line says " + std::to_string(n));
            if (t.size() != 6)
                in.fail("expected 6 fields `src dst pg dport size start_time`, got " +
                        std::to_string(t.size()));
            Flow f;
            f.id = static_cast<uint32_t>(w.size());
            f.src = in.host_at(t[0], "src", nodes);
            f.dst = in.host_at(t[1], "dst", nodes);
            if (f.src == f.dst) in.fail("src and dst are the same host");
            in.unsigned_at(t[2], "pg", 0, UINT32_MAX);
            f.hpcc_dport = static_cast<uint16_t>(in.unsigned_at(t[3], "dport", 0, UINT16_MAX));
            f.bytes = flow_bytes(in, t[4]);
            const double s = in.real_at(t[5], "start_time");
            if (s < 0 || s > 1e3) in.fail("start_time " + t[5] + " is outside 0..1000 s");
            f.start = SimDuration{std::llround(s * 1e12)};
            if (f.start < last)
                in.fail("start_time " + t[5] +
                        " is earlier than the flow before (HPCC reads flows in start order)");
            last = f.start;
            w.push_back(std::move(f));
        }
        return w;
    } catch (const ImportError& e) {
        err = e.message;
        return std::nullopt;
    }
}

std::optional<Workload> parse_htsim_cm(const std::string& text, const std::string& name,
                                       const NodeMap& nodes, std::string& err) {
    try {
        Lines in(text, name);
        std::vector<std::string> t;
        std::optional<uint64_t> declared_nodes, declared_conns;
        Workload w;
        while (in.next(t)) {
            if (t[0][0] == '#') continue;
            const size_t arrow = t[0].find("->");
            if (arrow == std::string::npos) {
                // The header: `Nodes N`, `Connections M` (and htsim's Triggers, Failures).
                if (!w.empty()) in.fail("'" + t[0] + "' after the connections");
                if (t[0] == "trigger" || t[0] == "failure")
                    in.fail("htsim " + t[0] +
                            "s are not supported (their flows start on events this simulator has "
                            "no equivalent of)");
                if (t.size() != 2)
                    in.fail("expected `Nodes N`, `Connections M` or a connection `src->dst ...`");
                if (t[0] == "Nodes") {
                    declared_nodes = in.unsigned_at(t[1], "Nodes", 1, UINT32_MAX);
                    if (nodes.htsim_nodes && *declared_nodes != nodes.htsim_nodes)
                        in.fail("Nodes " + t[1] + ", but the htsim topology has " +
                                std::to_string(nodes.htsim_nodes) + " (htsim refuses a mismatch)");
                    if (*declared_nodes > nodes.host_of_node.size())
                        in.fail("Nodes " + t[1] + ", but the topology has " +
                                std::to_string(nodes.host_of_node.size()) + " hosts");
                } else if (t[0] == "Connections") {
                    declared_conns = in.unsigned_at(t[1], "Connections", 1, kMaxFlows - 1);
                } else if (t[0] == "Triggers" || t[0] == "Failures") {
                    if (in.unsigned_at(t[1], t[0].c_str(), 0, UINT32_MAX) != 0)
                        in.fail("htsim " + t[0] +
                                " are not supported (their flows start on events this simulator "
                                "has no equivalent of)");
                } else {
                    in.fail("unknown header '" + t[0] + "' (Nodes, Connections)");
                }
                continue;
            }
            if (!declared_nodes || !declared_conns)
                in.fail("a connection before the `Nodes N` and `Connections M` header");
            if (w.size() == *declared_conns)
                in.fail("more connections than the header's Connections " +
                        std::to_string(*declared_conns));
            Flow f;
            f.id = static_cast<uint32_t>(w.size());
            const std::string src = t[0].substr(0, arrow), dst = t[0].substr(arrow + 2);
            f.src = in.host_at(src, "src", nodes);
            f.dst = in.host_at(dst, "dst", nodes);
            if (f.src >= *declared_nodes || f.dst >= *declared_nodes)
                in.fail("a node beyond the header's Nodes " + std::to_string(*declared_nodes));
            if (f.src == f.dst) in.fail("src and dst are the same host");
            bool has_start = false, has_size = false;
            for (size_t i = 1; i < t.size(); ++i) {
                const std::string& key = t[i];
                if (key == "trigger" || key == "send_done_trigger" || key == "recv_done_trigger" ||
                    key == "addon")
                    in.fail("'" + key + "': htsim triggers are not supported");
                if (key != "start" && key != "size" && key != "id" && key != "prio")
                    in.fail("unknown token '" + key + "'");
                if (++i == t.size()) in.fail("'" + key + "' without a value");
                if (key == "start") {
                    // htsim's start is in picoseconds (gen_*.py write integers; a float is
                    // allowed).
                    const double ps = in.real_at(t[i], "start");
                    if (ps < 0 || ps > 1e15)
                        in.fail("start " + t[i] + " ps is outside 0 .. 1000 s");
                    f.start = SimDuration{std::llround(ps)};
                    has_start = true;
                } else if (key == "size") {
                    f.bytes = flow_bytes(in, t[i]);
                    has_size = true;
                } else if (key == "id") {
                    if (in.unsigned_at(t[i], "id", 0, UINT32_MAX) == 0)
                        in.fail("id 0 (htsim refuses flow id zero)");
                } else {
                    in.unsigned_at(t[i], "prio", 0, UINT64_MAX);
                }
            }
            if (!has_start) in.fail("no start (htsim needs a start time or a trigger)");
            if (!has_size) in.fail("no size");
            w.push_back(std::move(f));
        }
        if (!declared_conns) in.fail_at_end("no `Connections M` header");
        if (w.size() != *declared_conns)
            in.fail_at_end("has " + std::to_string(w.size()) + " connections; its header says " +
                           std::to_string(*declared_conns));
        return w;
    } catch (const ImportError& e) {
        err = e.message;
        return std::nullopt;
    }
}

std::optional<GraphSpec> parse_hpcc_topology(const std::string& text, const std::string& name,
                                             std::string& err) {
    try {
        Lines in(text, name);
        std::vector<std::string> t;
        if (!in.next(t)) in.fail_at_end("empty: the first line is `node_num switch_num link_num`");
        if (t.size() != 3) in.fail("the first line must be `node_num switch_num link_num`");
        GraphSpec g;
        g.nodes = static_cast<uint32_t>(in.unsigned_at(t[0], "node_num", 2, 1u << 20));
        const uint64_t switches = in.unsigned_at(t[1], "switch_num", 1, g.nodes - 1);
        const uint64_t links = in.unsigned_at(t[2], "link_num", 1, 1u << 22);
        g.is_switch.assign(g.nodes, false);
        // The switch ids may span lines (third.cc reads them with >>).
        uint64_t seen = 0;
        while (seen < switches) {
            if (!in.next(t))
                in.fail_at_end("ends before its " + std::to_string(switches) + " switch ids");
            for (const std::string& s : t) {
                if (seen == switches)
                    in.fail("more switch ids than switch_num " + std::to_string(switches));
                const uint64_t id = in.unsigned_at(s, "switch id", 0, g.nodes - 1);
                if (g.is_switch[id]) in.fail("switch " + s + " listed twice");
                g.is_switch[id] = true;
                ++seen;
            }
        }
        std::vector<uint32_t> host_link(g.nodes, UINT32_MAX);  // a host's link, by node
        std::vector<uint32_t> host_line(g.nodes, 0);
        while (g.links.size() < links) {
            if (!in.next(t))
                in.fail_at_end("ends after " + std::to_string(g.links.size()) +
                               " links; its first line says " + std::to_string(links));
            if (t.size() != 5)
                in.fail("expected 5 fields `src dst rate delay error_rate`, got " +
                        std::to_string(t.size()));
            GraphLink l;
            l.a = static_cast<uint32_t>(in.unsigned_at(t[0], "src", 0, g.nodes - 1));
            l.b = static_cast<uint32_t>(in.unsigned_at(t[1], "dst", 0, g.nodes - 1));
            if (l.a == l.b) in.fail("a link from node " + t[0] + " to itself");
            if (!g.is_switch[l.a] && !g.is_switch[l.b])
                in.fail("a link between two hosts (" + t[0] + ", " + t[1] +
                        "): hosts connect to switches");
            l.rate_bps = rate_bps(in, t[2]);
            l.delay = delay(in, t[3]);
            l.loss = in.real_at(t[4], "error_rate");
            if (l.loss < 0 || l.loss >= 1) in.fail("error_rate " + t[4] + " is outside [0, 1)");
            for (uint32_t n : {l.a, l.b}) {
                if (g.is_switch[n]) continue;
                if (host_link[n] != UINT32_MAX)
                    in.fail("host " + std::to_string(n) + " has a second link (line " +
                            std::to_string(host_line[n]) +
                            " has its first): a simulated host has one NIC port per plane");
                host_link[n] = static_cast<uint32_t>(g.links.size());
                host_line[n] = in.line();
            }
            g.links.push_back(l);
        }
        uint64_t line_rate = 0;
        uint32_t first = 0;
        for (uint32_t n = 0; n < g.nodes; ++n) {
            if (g.is_switch[n]) continue;
            if (host_link[n] == UINT32_MAX)
                in.fail_at_end("host " + std::to_string(n) + " has no link");
            const uint64_t r = g.links[host_link[n]].rate_bps;
            if (line_rate == 0) {
                line_rate = r;
                first = n;
            }
            if (r != line_rate)
                in.fail_at_end("host " + std::to_string(n) + "'s link runs at " +
                               std::to_string(r) + " bit/s and host " + std::to_string(first) +
                               "'s at " + std::to_string(line_rate) +
                               ": the simulator's hosts share one line rate");
            g.host_nodes.push_back(n);
        }
        if (g.host_nodes.size() < 2) in.fail_at_end("fewer than 2 hosts");
        // Every host must reach every other (through switches only): a flow between two
        // parts of a split graph would have no route and no ideal FCT.
        const std::vector<GraphPath> from_first = graph_paths(g, 0);
        for (uint32_t h = 1; h < from_first.size(); ++h)
            if (from_first[h].hops == 0)
                in.fail_at_end("host " + std::to_string(g.host_nodes[h]) + " has no path to host " +
                               std::to_string(g.host_nodes[0]) + " through switches");
        return g;
    } catch (const ImportError& e) {
        err = e.message;
        return std::nullopt;
    }
}

}  // namespace mroce::sim
