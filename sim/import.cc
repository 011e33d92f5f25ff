// sim/import.cc — see import.h. Each parser goes line by line so that every error names
// file:line; numbers are parsed strictly (the whole token, no trailing junk).
#include "sim/import.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

namespace mroce::sim {
namespace {

struct ImportError {
    std::string message;
};

// Lines walks a text's lines, keeping the 1-based number of the current one.
class Lines {
  public:
    Lines(const std::string& text, const std::string& name) : in_(text), name_(name) {}
    // next stores the next line's whitespace-separated tokens (blank lines skipped when
    // skip_blank); returns false at the end.
    bool next(std::vector<std::string>& tokens, bool skip_blank = true) {
        std::string line;
        while (std::getline(in_, line)) {
            ++line_;
            tokens.clear();
            std::istringstream ls(line);
            for (std::string t; ls >> t;) tokens.push_back(t);
            if (!tokens.empty() || !skip_blank) return true;
        }
        return false;
    }
    uint32_t line() const { return line_; }
    [[noreturn]] void fail(const std::string& what) const {
        throw ImportError{name_ + ":" + std::to_string(line_) + ": " + what};
    }
    [[noreturn]] void fail_at(uint32_t line, const std::string& what) const {
        throw ImportError{name_ + ":" + std::to_string(line) + ": " + what};
    }
    [[noreturn]] void fail_at_end(const std::string& what) const {
        throw ImportError{name_ + ": " + what};
    }

    uint64_t unsigned_at(const std::string& t, const char* what, uint64_t lo, uint64_t hi) const {
        uint64_t v = 0;
        const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        if (ec != std::errc() || end != t.data() + t.size())
            fail(std::string(what) + " '" + t + "' is not an unsigned integer");
        if (v < lo || v > hi)
            fail(std::string(what) + " " + t + " is outside " + std::to_string(lo) + ".." +
                 std::to_string(hi));
        return v;
    }
    double real_at(const std::string& t, const char* what) const {
        double v = 0;
        const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        if (ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v))
            fail(std::string(what) + " '" + t + "' is not a number");
        return v;
    }
    // host_at maps a node id token to its host index, or fails naming the problem.
    uint32_t host_at(const std::string& t, const char* what, const NodeMap& nodes) const {
        const uint64_t node = unsigned_at(t, what, 0, UINT32_MAX);
        if (node >= nodes.host_of_node.size())
            fail(std::string(what) + " node " + t + ": the topology has " +
                 std::to_string(nodes.host_of_node.size()) + " nodes");
        const uint32_t h = nodes.host_of_node[node];
        if (h == NodeMap::kNotAHost)
            fail(std::string(what) + " node " + t + " is a switch, not a host");
        return h;
    }

  private:
    std::istringstream in_;
    std::string name_;
    uint32_t line_ = 0;
};

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

// ---- htsim topology files ----------------------------------------------------------------

namespace mroce::sim {
namespace {

// htsim's per-tier keys (fat_tree_topology.cpp), spelled as its example files spell them;
// a file may write them in any case, as htsim lowercases them.
enum TierKey : uint8_t {
    kSpeedGbps,
    kLatencyNs,
    kSwitchLatencyNs,
    kRadixUp,
    kRadixDown,
    kQueueUp,
    kQueueDown,
    kBundle,
    kOversubscribed,
    kTierKeys
};
constexpr std::array<const char*, kTierKeys> kTierKeyNames = {
    "Downlink_speed_Gbps", "Downlink_Latency_ns", "Switch_Latency_ns", "Radix_Up", "Radix_Down",
    "Queue_Up", "Queue_Down", "Bundle", "Oversubscribed"};

// Setting: a value and the line that set it (0: not set).
struct Setting {
    uint64_t value = 0;
    uint32_t line = 0;
};

// HtsimTier: one `Tier t` section. get returns the value, or htsim's default when unset.
struct HtsimTier {
    uint32_t line = 0;  // its `Tier t` line; 0: the file has none
    std::array<Setting, kTierKeys> keys{};
    uint64_t get(TierKey k, uint64_t otherwise = 0) const {
        return keys[k].line ? keys[k].value : otherwise;
    }
};

std::string lowercase(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// The ranges a value may take (htsim reads each with stoi; these keep the graph buildable).
std::pair<uint64_t, uint64_t> tier_key_range(TierKey k) {
    switch (k) {
        case kSpeedGbps:
            return {1, 1'000'000};  // up to 1 Pbit/s
        case kLatencyNs:
            return {1, 1'000'000'000};  // htsim takes 0 as not set
        case kSwitchLatencyNs:
            return {0, 1'000'000'000};
        case kQueueUp:
        case kQueueDown:
            return {1, uint64_t{1} << 40};
        default:
            return {1, 4096};  // radix, bundle, oversubscription
    }
}

std::string tier_key(TierKey k, uint32_t tier) {
    return std::string(kTierKeyNames[k]) + " of tier " + std::to_string(tier);
}

// HtsimShape: the switch counts htsim's set_custom_params derives from the file.
struct HtsimShape {
    uint32_t pods = 0, tors_per_pod = 0, aggs_per_pod = 0, tors = 0, aggs = 0, cores = 0;
};

// htsim_shape repeats set_custom_params's arithmetic and each of its refusals (an exit or
// an assert there), naming the line of the key that does not fit.
HtsimShape htsim_shape(const Lines& in, uint32_t tiers, const Setting& nodes,
                       const Setting& podsize, const std::array<HtsimTier, 3>& tier) {
    auto value = [&](uint32_t t, TierKey k) { return tier[t].get(k, 1); };
    auto line = [&](uint32_t t, TierKey k) {
        return tier[t].keys[k].line ? tier[t].keys[k].line : tier[t].line;
    };
    for (uint32_t t = 0; t < tiers; ++t) {
        if (value(t, kRadixDown) % value(t, kBundle) != 0)
            in.fail_at(line(t, kBundle), tier_key(kRadixDown, t) + " (" +
                                             std::to_string(value(t, kRadixDown)) +
                                             ") is not a multiple of its Bundle " +
                                             std::to_string(value(t, kBundle)));
        if (t + 1 < tiers && value(t, kRadixUp) % value(t + 1, kBundle) != 0)
            in.fail_at(line(t, kRadixUp),
                       tier_key(kRadixUp, t) + " (" + std::to_string(value(t, kRadixUp)) +
                           ") is not a multiple of tier " + std::to_string(t + 1) + "'s Bundle " +
                           std::to_string(value(t + 1, kBundle)));
    }
    const uint64_t n = nodes.value;
    if (n % podsize.value != 0)
        in.fail_at(podsize.line, "Nodes " + std::to_string(n) + " is not a multiple of Podsize " +
                                     std::to_string(podsize.value));
    if (tiers == 2 && podsize.value != n)
        in.fail_at(podsize.line,
                   "Podsize " + std::to_string(podsize.value) +
                       " in a 2-tier topology must be Nodes " + std::to_string(n) +
                       " (htsim's leaf-spine is one pod; other sizes wire each ToR to more "
                       "spines than its Radix_Up)");
    if (value(0, kBundle) != 1)
        in.fail_at(line(0, kBundle), "Bundle " + std::to_string(value(0, kBundle)) +
                                         " of tier 0: htsim does not bundle host links");
    HtsimShape s;
    s.pods = static_cast<uint32_t>(n / podsize.value);
    if (podsize.value % value(0, kRadixDown) != 0)
        in.fail_at(line(0, kRadixDown), "Podsize " + std::to_string(podsize.value) +
                                            " is not a multiple of " + tier_key(kRadixDown, 0) +
                                            " (" + std::to_string(value(0, kRadixDown)) + ")");
    s.tors_per_pod = static_cast<uint32_t>(podsize.value / value(0, kRadixDown));
    // ToR uplinks: the hosts' capacity over tier 1's link speed and tier 0's oversubscription.
    const uint64_t tor_uplinks_per = value(1, kSpeedGbps) * value(0, kOversubscribed);
    if (n * value(0, kSpeedGbps) % tor_uplinks_per != 0)
        in.fail_at(line(1, kSpeedGbps),
                   "Nodes x tier 0's Downlink_speed_Gbps is not a multiple of tier 1's "
                   "Downlink_speed_Gbps x tier 0's Oversubscribed: no whole number of ToR uplinks");
    const uint64_t tor_uplinks = n * value(0, kSpeedGbps) / tor_uplinks_per;
    if (value(0, kRadixDown) / value(0, kRadixUp) != value(0, kOversubscribed))
        in.fail_at(line(0, kRadixUp), tier_key(kRadixDown, 0) + " / Radix_Up (" +
                                          std::to_string(value(0, kRadixDown)) + " / " +
                                          std::to_string(value(0, kRadixUp)) +
                                          ", rounded down) is not its Oversubscribed " +
                                          std::to_string(value(0, kOversubscribed)));
    if (tor_uplinks % (s.pods * value(1, kRadixDown)) != 0)
        in.fail_at(line(1, kRadixDown),
                   std::to_string(tor_uplinks) + " ToR uplinks in " + std::to_string(s.pods) +
                       " pods do not fill whole aggregation switches of " +
                       tier_key(kRadixDown, 1) + " (" + std::to_string(value(1, kRadixDown)) + ")");
    s.aggs_per_pod = static_cast<uint32_t>(tor_uplinks / (s.pods * value(1, kRadixDown)));
    if (uint64_t{s.aggs_per_pod} * value(1, kBundle) != value(0, kRadixUp))
        in.fail_at(line(0, kRadixUp), tier_key(kRadixUp, 0) + " is " +
                                          std::to_string(value(0, kRadixUp)) + ", but " +
                                          std::to_string(s.aggs_per_pod) +
                                          " aggregation switches per pod x tier 1's Bundle " +
                                          std::to_string(value(1, kBundle)) + " is " +
                                          std::to_string(s.aggs_per_pod * value(1, kBundle)));
    s.tors = s.tors_per_pod * s.pods;
    s.aggs = s.aggs_per_pod * s.pods;
    if (tiers == 3) {
        const uint64_t per = value(2, kSpeedGbps) * value(1, kOversubscribed);
        if (tor_uplinks * value(1, kSpeedGbps) % per != 0)
            in.fail_at(
                line(2, kSpeedGbps),
                "the ToR uplinks x tier 1's Downlink_speed_Gbps is not a multiple of tier 2's "
                "Downlink_speed_Gbps x tier 1's Oversubscribed: no whole number of "
                "aggregation uplinks");
        const uint64_t agg_uplinks = tor_uplinks * value(1, kSpeedGbps) / per;
        if (agg_uplinks % value(2, kRadixDown) != 0)
            in.fail_at(line(2, kRadixDown), std::to_string(agg_uplinks) +
                                                " aggregation uplinks do not fill whole core "
                                                "switches of " +
                                                tier_key(kRadixDown, 2) + " (" +
                                                std::to_string(value(2, kRadixDown)) + ")");
        s.cores = static_cast<uint32_t>(agg_uplinks / value(2, kRadixDown));
        if (s.cores % s.aggs_per_pod != 0)
            in.fail_at(line(2, kRadixDown),
                       std::to_string(s.cores) + " core switches are not a multiple of the " +
                           std::to_string(s.aggs_per_pod) + " aggregation switches per pod");
        if (uint64_t{s.cores} * value(2, kBundle) / s.aggs_per_pod != value(1, kRadixUp))
            in.fail_at(line(1, kRadixUp),
                       tier_key(kRadixUp, 1) + " is " + std::to_string(value(1, kRadixUp)) +
                           ", but " + std::to_string(s.cores) +
                           " core switches x tier 2's Bundle " + std::to_string(value(2, kBundle)) +
                           " over " + std::to_string(s.aggs_per_pod) +
                           " aggregation switches per pod is " +
                           std::to_string(uint64_t{s.cores} * value(2, kBundle) / s.aggs_per_pod));
    }
    return s;
}

// check_htsim_queues returns the one buffer size of every switch port the file sets, or
// nullopt when it sets none; a partial or unequal set cannot be mapped and is refused.
std::optional<uint64_t> check_htsim_queues(const Lines& in, uint32_t tiers,
                                           const std::array<HtsimTier, 3>& tier) {
    const Setting* first = nullptr;
    std::string first_name;
    for (uint32_t t = 0; t < tiers; ++t)
        for (TierKey k : {kQueueUp, kQueueDown})
            if (tier[t].keys[k].line && (k == kQueueDown || t + 1 < tiers) &&
                (!first || tier[t].keys[k].line < first->line)) {
                first = &tier[t].keys[k];
                first_name = tier_key(k, t);
            }
    if (!first) return std::nullopt;
    for (uint32_t t = 0; t < tiers; ++t) {
        for (TierKey k : {kQueueUp, kQueueDown}) {
            if (k == kQueueUp && t + 1 == tiers) continue;  // the top tier has no uplinks
            const Setting& q = tier[t].keys[k];
            if (!q.line)
                in.fail_at(first->line,
                           first_name + " is set but not " + tier_key(k, t) +
                               ": the simulator has one buffer size for every switch port, so "
                               "set every tier's Queue_Up and Queue_Down, equal, or none "
                               "(then buffer_bytes applies, as htsim's -q)");
            if (q.value != first->value)
                in.fail_at(q.line,
                           tier_key(k, t) + " " + std::to_string(q.value) + " differs from " +
                               first_name + " " + std::to_string(first->value) + " (line " +
                               std::to_string(first->line) +
                               "): the simulator has one buffer size for every switch port");
        }
    }
    return first->value;
}

}  // namespace

std::optional<HtsimTopology> parse_htsim_topology(const std::string& text, const std::string& name,
                                                  std::string& err) {
    try {
        Lines in(text, name);
        std::vector<std::string> t;
        Setting nodes, tiers, podsize;
        std::array<HtsimTier, 3> tier{};
        int current = -1;  // the tier whose section this is; -1: the header
        while (in.next(t)) {
            if (t[0][0] == '#') continue;
            if (t.size() < 2) in.fail("'" + t[0] + "' without a value");
            if (t.size() > 2 && t[2][0] != '#')
                in.fail("expected `" + t[0] + " value`, got " + std::to_string(t.size()) +
                        " fields");
            const std::string key = lowercase(t[0]);
            if (key == "nodes" || key == "tiers" || key == "podsize") {
                if (current >= 0)
                    in.fail(
                        "'" + t[0] +
                        "' after the first `Tier` line (htsim reads the header only before it)");
                Setting& s = key == "nodes" ? nodes : key == "tiers" ? tiers : podsize;
                if (s.line)
                    in.fail("'" + t[0] + "' again (line " + std::to_string(s.line) + " sets it)");
                s.line = in.line();
                if (key == "nodes") {
                    s.value = in.unsigned_at(t[1], "Nodes", 2, kMaxHosts);
                } else if (key == "tiers") {
                    s.value = in.unsigned_at(t[1], "Tiers", 0, UINT32_MAX);
                    if (s.value < 2 || s.value > 3)
                        in.fail("Tiers " + t[1] + ": htsim builds 2 or 3 tiers");
                } else {
                    s.value = in.unsigned_at(t[1], "Podsize", 1, kMaxHosts);
                }
                continue;
            }
            if (key == "tier") {
                if (current < 0) {
                    // htsim's header ends here; it refuses a file without all three.
                    if (!nodes.line) in.fail("the header has no `Nodes N` before the first Tier");
                    if (!tiers.line) in.fail("the header has no `Tiers 2|3` before the first Tier");
                    if (!podsize.line)
                        in.fail("the header has no `Podsize P` before the first Tier");
                }
                const uint64_t n = in.unsigned_at(t[1], "Tier", 0, UINT32_MAX);
                if (n >= tiers.value)
                    in.fail("Tier " + t[1] + " in a topology of Tiers " +
                            std::to_string(tiers.value) + " (its tiers are 0 .. " +
                            std::to_string(tiers.value - 1) + ")");
                current = static_cast<int>(n);
                if (!tier[n].line) tier[n].line = in.line();
                continue;
            }
            size_t k = 0;
            while (k < kTierKeys && lowercase(kTierKeyNames[k]) != key) ++k;
            if (k == kTierKeys)
                in.fail("unknown key '" + t[0] +
                        "' (htsim's: Nodes, Tiers, Podsize, Tier, Downlink_speed_Gbps, "
                        "Downlink_Latency_ns, "
                        "Switch_Latency_ns, Radix_Up, Radix_Down, Queue_Up, Queue_Down, Bundle, "
                        "Oversubscribed)");
            const auto tk = static_cast<TierKey>(k);
            if (current < 0)
                in.fail("'" + t[0] + "' before the first `Tier t` line (htsim ignores it there)");
            const uint32_t ct = static_cast<uint32_t>(current);
            Setting& s = tier[ct].keys[tk];
            if (s.line)
                in.fail(tier_key(tk, ct) + " again (line " + std::to_string(s.line) + " sets it)");
            if ((tk == kRadixUp || tk == kQueueUp) && ct == 2)
                in.fail(std::string(kTierKeyNames[tk]) +
                        " of tier 2: the core tier has no uplinks");
            const auto [lo, hi] = tier_key_range(tk);
            s.value = in.unsigned_at(t[1], kTierKeyNames[tk], lo, hi);
            s.line = in.line();
        }
        if (!nodes.line) in.fail_at_end("no `Nodes N` header");
        if (!tiers.line) in.fail_at_end("no `Tiers 2|3` header");
        if (!podsize.line) in.fail_at_end("no `Podsize P` header");
        const auto n_tiers = static_cast<uint32_t>(tiers.value);
        for (uint32_t ti = 0; ti < n_tiers; ++ti) {
            const HtsimTier& tt = tier[ti];
            if (!tt.line) in.fail_at_end("no `Tier " + std::to_string(ti) + "` section");
            for (TierKey k : {kSpeedGbps, kLatencyNs, kRadixUp, kRadixDown}) {
                if (k == kRadixUp && ti + 1 == n_tiers) continue;  // the top tier has no uplinks
                if (!tt.keys[k].line)
                    in.fail_at(tt.line,
                               "Tier " + std::to_string(ti) + " has no " + kTierKeyNames[k]);
            }
        }
        HtsimTopology out;
        out.tiers = n_tiers;
        out.queue_bytes = check_htsim_queues(in, n_tiers, tier);
        const HtsimShape s = htsim_shape(in, n_tiers, nodes, podsize, tier);

        // Build it as htsim's init_network wires it: hosts, then ToRs, aggregation and core
        // switches. A link's delay is its tier's Downlink_Latency_ns plus half the switch
        // latency of each switch end.
        const auto n = static_cast<uint32_t>(nodes.value);
        auto value = [&](uint32_t ti, TierKey k) {
            return tier[ti].get(k, 1);
        };  // Bundle's default
        auto half_switch = [&](uint32_t ti) {
            return SimDuration{static_cast<int64_t>(tier[ti].get(kSwitchLatencyNs, 0)) * 500};
        };
        auto link_delay = [&](uint32_t ti) {
            return SimDuration{static_cast<int64_t>(value(ti, kLatencyNs)) * 1000};
        };
        const uint64_t cables = n + uint64_t{s.tors} * value(0, kRadixUp) +
                                (n_tiers == 3 ? uint64_t{s.aggs} * value(1, kRadixUp) : 0);
        if (cables > (1u << 22))
            in.fail_at_end("builds " + std::to_string(cables) + " links, over the simulator's " +
                           std::to_string(1u << 22));
        GraphSpec& g = out.graph;
        g.format = "htsim";
        g.nodes = n + s.tors + s.aggs + s.cores;
        g.is_switch.assign(g.nodes, true);
        g.tiers.assign(g.nodes, 0);
        const uint32_t tor0 = n, agg0 = n + s.tors, core0 = n + s.tors + s.aggs;
        for (uint32_t h = 0; h < n; ++h) {
            g.is_switch[h] = false;
            g.host_nodes.push_back(h);
        }
        for (uint32_t a = 0; a < s.aggs; ++a) g.tiers[agg0 + a] = 1;
        for (uint32_t c = 0; c < s.cores; ++c) g.tiers[core0 + c] = 2;
        auto add = [&](uint32_t a, uint32_t b, uint32_t ti, SimDuration switch_halves) {
            g.links.push_back(GraphLink{a, b, value(ti, kSpeedGbps) * 1'000'000'000,
                                        link_delay(ti) + switch_halves, 0});
        };
        const uint32_t rd0 = static_cast<uint32_t>(value(0, kRadixDown));
        for (uint32_t tor = 0; tor < s.tors; ++tor)
            for (uint32_t l = 0; l < rd0; ++l) add(tor * rd0 + l, tor0 + tor, 0, half_switch(0));
        for (uint32_t tor = 0; tor < s.tors; ++tor) {
            // 3 tiers: the aggregation switches of the ToR's pod; 2 tiers: every spine.
            const uint32_t pod = tor / s.tors_per_pod;
            const uint32_t first = n_tiers == 3 ? pod * s.aggs_per_pod : 0;
            const uint32_t last = n_tiers == 3 ? first + s.aggs_per_pod : s.aggs;
            for (uint32_t a = first; a < last; ++a)
                for (uint64_t b = 0; b < value(1, kBundle); ++b)
                    add(tor0 + tor, agg0 + a, 1, half_switch(0) + half_switch(1));
        }
        if (n_tiers == 3) {
            // Aggregation switch j of a pod goes to cores j, j + aggs_per_pod, j + 2 aggs_per_pod,
            // ...
            for (uint32_t a = 0; a < s.aggs; ++a) {
                const uint32_t pos = a % s.aggs_per_pod;
                for (uint64_t l = 0; l < value(1, kRadixUp) / value(2, kBundle); ++l) {
                    const uint64_t core = pos + s.aggs_per_pod * l;
                    if (core >= s.cores)
                        in.fail_at_end(
                            "wires an aggregation switch to a core switch it does not have");
                    for (uint64_t b = 0; b < value(2, kBundle); ++b)
                        add(agg0 + a, core0 + static_cast<uint32_t>(core), 2,
                            half_switch(1) + half_switch(2));
                }
            }
        }
        return out;
    } catch (const ImportError& e) {
        err = e.message;
        return std::nullopt;
    }
}

}  // namespace mroce::sim
