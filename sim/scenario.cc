// sim/scenario.cc — TOML scenario files to RunSpecs: overrides, sweep expansion, and a
// strict reader that names every unknown key, wrong type and out-of-range value.
#include "sim/scenario.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "sim/import.h"

namespace mroce::sim {
namespace {

struct ScenarioError {
    std::string message;
};

[[noreturn]] void fail(const std::string& m) { throw ScenarioError{m}; }

// Ctx carries what every error message needs: the file's name.
struct Ctx {
    std::string file;
    std::string where(const toml::node* n) const {
        if (n && n->source().begin.line > 0) return file + ":" + std::to_string(n->source().begin.line) + ": ";
        return file + ": ";
    }
};

// Section reads one table strictly: every getter marks its key used, finish() rejects the
// rest. A missing table reads as empty (all defaults).
class Section {
  public:
    Section(const Ctx& ctx, const toml::table* t, std::string prefix)
        : ctx_(ctx), t_(t), prefix_(std::move(prefix)) {}

    const toml::node* node(const std::string& key) {
        used_.insert(key);
        return t_ ? t_->get(key) : nullptr;
    }
    [[noreturn]] void bad(const toml::node* n, const std::string& key, const std::string& what) const {
        fail(ctx_.where(n ? n : t_) + "'" + prefix_ + key + "' " + what);
    }

    bool boolean(const std::string& key, bool def) {
        const toml::node* n = node(key);
        if (!n) return def;
        if (!n->is_boolean()) bad(n, key, "must be true or false");
        return *n->value<bool>();
    }
    int64_t integer(const std::string& key, int64_t def, int64_t lo, int64_t hi) {
        const toml::node* n = node(key);
        if (!n) return def;
        if (!n->is_integer()) bad(n, key, "must be an integer");
        const int64_t v = *n->value<int64_t>();
        if (v < lo || v > hi) bad(n, key, "must be in " + std::to_string(lo) + ".." + std::to_string(hi));
        return v;
    }
    uint32_t u32(const std::string& key, uint32_t def, int64_t lo, int64_t hi) {
        return static_cast<uint32_t>(integer(key, def, lo, hi));
    }
    uint64_t u64(const std::string& key, uint64_t def, int64_t lo = 0, int64_t hi = INT64_MAX) {
        return static_cast<uint64_t>(integer(key, static_cast<int64_t>(def), lo, hi));
    }
    double real(const std::string& key, double def, double lo, double hi) {
        const toml::node* n = node(key);
        if (!n) return def;
        if (!n->is_number()) bad(n, key, "must be a number");
        const double v = *n->value<double>();
        if (!(v >= lo && v <= hi)) {
            std::ostringstream os;
            os << "must be in [" << lo << ", " << hi << "]";
            bad(n, key, os.str());
        }
        return v;
    }
    std::string choice(const std::string& key, const std::string& def, const std::vector<std::string>& allowed) {
        const toml::node* n = node(key);
        if (!n) return def;
        std::string all;
        for (const auto& a : allowed) all += (all.empty() ? "" : "|") + a;
        if (!n->is_string()) bad(n, key, "must be a string (" + all + ")");
        const std::string v = *n->value<std::string>();
        for (const auto& a : allowed)
            if (a == v) return v;
        bad(n, key, "must be one of " + all + ", not '" + v + "'");
    }
    std::string string(const std::string& key, const std::string& def) {
        const toml::node* n = node(key);
        if (!n) return def;
        if (!n->is_string()) bad(n, key, "must be a string");
        return *n->value<std::string>();
    }
    // duration_us reads microseconds (integer or real) into a SimDuration.
    SimDuration duration_us(const std::string& key, SimDuration def, double lo, double hi) {
        const double us = real(key, static_cast<double>(to_ps(def)) / 1e6, lo, hi);
        return SimDuration(static_cast<int64_t>(std::llround(us * 1e6)));
    }
    Section sub(const std::string& key) {
        const toml::node* n = node(key);
        if (n && !n->is_table()) bad(n, key, "must be a table");
        return Section(ctx_, n ? n->as_table() : nullptr, prefix_ + key + ".");
    }
    const toml::array* array(const std::string& key) {
        const toml::node* n = node(key);
        if (n && !n->is_array()) bad(n, key, "must be an array");
        return n ? n->as_array() : nullptr;
    }
    void finish() const {
        if (!t_) return;
        for (auto&& [k, v] : *t_)
            if (!used_.count(std::string(k.str()))) fail(ctx_.where(&v) + "unknown key '" + prefix_ + std::string(k.str()) + "'");
    }
    const Ctx& ctx() const { return ctx_; }
    const std::string& prefix() const { return prefix_; }

  private:
    const Ctx& ctx_;
    const toml::table* t_;
    std::string prefix_;
    std::set<std::string> used_;
};

std::vector<std::string> split_dots(const std::string& key) {
    std::vector<std::string> parts;
    std::string cur;
    for (char c : key) {
        if (c == '.') {
            parts.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    parts.push_back(cur);
    return parts;
}

// set_key stores value at a dotted path, creating tables on the way.
void set_key(toml::table& root, const std::string& key, const toml::node& value, const std::string& what) {
    const std::vector<std::string> parts = split_dots(key);
    toml::table* t = &root;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
        if (parts[i].empty()) fail(what + ": empty key segment in '" + key + "'");
        toml::node* n = t->get(parts[i]);
        if (!n) {
            t->insert(parts[i], toml::table{});
            n = t->get(parts[i]);
        }
        if (!n->is_table()) fail(what + ": '" + key + "': '" + parts[i] + "' is not a table");
        t = n->as_table();
    }
    if (parts.back().empty()) fail(what + ": empty key segment in '" + key + "'");
    value.visit([&](auto&& v) { t->insert_or_assign(parts.back(), v); });
}

// parse_value reads a command-line value as TOML ("0.01", "true", "[1,2]", "\"x\""), or
// takes it as a bare string when it is not TOML (`--set protocol=rocev2`).
toml::table parse_value(const std::string& value) {
    toml::table holder;
    try {
        holder = toml::parse("v = " + value);
    } catch (const toml::parse_error&) {
        holder = toml::table{};
        holder.insert("v", value);
    }
    return holder;
}

ParamValue to_param(const toml::node& n) {
    if (n.is_boolean()) return *n.value<bool>();
    if (n.is_integer()) return *n.value<int64_t>();
    if (n.is_floating_point()) return *n.value<double>();
    if (n.is_string()) return *n.value<std::string>();
    std::ostringstream os;
    n.visit([&](auto&& v) { os << toml::toml_formatter{v}; });
    return os.str();
}

// flatten_leaves lists (dotted key, value) for every value under t that is not a table,
// whether written `"workload.kind" = ...` or as the nested tables TOML makes of
// `workload.kind = ...` (a case of a sweep, below).
void flatten_leaves(const toml::table& t, const std::string& prefix,
                    std::vector<std::pair<std::string, const toml::node*>>& out) {
    for (auto&& [k, v] : t) {
        const std::string key = prefix + std::string(k.str());
        if (v.is_table()) flatten_leaves(*v.as_table(), key + ".", out);
        else out.emplace_back(key, &v);
    }
}

// A sweep dimension. Plain: a scenario key and its values. Cases (an array of tables):
// each case sets several keys at once, so one sweep can hold points that are not a
// cartesian product (a ring all-reduce of 64 MiB beside an all-to-all of 1 MiB per pair;
// RoCEv2 with 1 and 8 QPs beside one MetaRoCE run); `key` is then only the dimension's
// name in labels and params, and each case's `label` its value there.
struct SweepCase {
    std::string label;
    std::vector<std::pair<std::string, const toml::node*>> keys;  // (dotted key, value)
};
struct SweepDimension {
    std::string key;
    const toml::array* values = nullptr;  // plain
    std::vector<SweepCase> cases;         // cases
    size_t size() const { return values ? values->size() : cases.size(); }
};

SweepDimension read_cases(const Ctx& ctx, const std::string& key, const toml::node& array) {
    SweepDimension d{key, nullptr, {}};
    std::set<std::string> labels;
    // The array's line: toml++ gives no source to the values inside it.
    const std::string where = ctx.where(&array) + "'sweep." + key + "'";
    for (const toml::node& c : *array.as_array()) {
        if (!c.is_table()) fail(where + " mixes tables (cases) and values");
        SweepCase sc;
        std::vector<std::pair<std::string, const toml::node*>> leaves;
        flatten_leaves(*c.as_table(), "", leaves);
        for (const auto& [k, v] : leaves) {
            if (k != "label") {
                sc.keys.emplace_back(k, v);
            } else if (!v->is_string() || v->value<std::string>()->empty()) {
                fail(where + ": a case's 'label' must be a non-empty string");
            } else {
                sc.label = *v->value<std::string>();
            }
        }
        if (sc.label.empty()) fail(where + ": every case needs a 'label'");
        if (sc.keys.empty()) fail(where + ": case '" + sc.label + "' sets no key");
        if (!labels.insert(sc.label).second) fail(where + ": two cases are labelled '" + sc.label + "'");
        d.cases.push_back(std::move(sc));
    }
    return d;
}

// read_sweep lists the [sweep] table's dimensions in table order.
std::vector<SweepDimension> read_sweep(const Ctx& ctx, const toml::table& t, const std::string& prefix) {
    std::vector<SweepDimension> out;
    for (auto&& [k, v] : t) {
        const std::string key = prefix + std::string(k.str());
        if (v.is_table()) {
            for (SweepDimension& d : read_sweep(ctx, *v.as_table(), key + ".")) out.push_back(std::move(d));
        } else if (v.is_array() && !v.as_array()->empty()) {
            const toml::array& a = *v.as_array();
            if (a.front().is_table()) out.push_back(read_cases(ctx, key, v));
            else if (std::any_of(a.begin(), a.end(), [](const toml::node& e) { return e.is_table(); }))
                fail(ctx.where(&v) + "'sweep." + key + "' mixes tables (cases) and values");
            else out.push_back({key, &a, {}});
        } else {
            fail(ctx.where(&v) + "'sweep." + key + "' must be a non-empty array of values");
        }
    }
    // Two dimensions setting one key would make a point's value depend on their order.
    std::set<std::string> seen;
    for (const SweepDimension& d : out) {
        std::set<std::string> mine;
        if (d.values) mine.insert(d.key);
        for (const SweepCase& c : d.cases)
            for (const auto& [k, v] : c.keys) mine.insert(k);
        for (const std::string& k : mine)
            if (!seen.insert(k).second) fail(ctx.where(nullptr) + "'sweep." + d.key + "' sets '" + k + "', which another sweep key sets too");
    }
    return out;
}

// get_key is the node at a dotted path, or null.
const toml::node* get_key(const toml::table& root, const std::string& key) {
    const toml::table* t = &root;
    const std::vector<std::string> parts = split_dots(key);
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
        const toml::node* n = t->get(parts[i]);
        if (!n || !n->is_table()) return nullptr;
        t = n->as_table();
    }
    return t->get(parts.back());
}

// erase_key removes the value at a dotted path, if there is one.
void erase_key(toml::table& root, const std::string& key) {
    toml::table* t = &root;
    const std::vector<std::string> parts = split_dots(key);
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
        toml::node* n = t->get(parts[i]);
        if (!n || !n->is_table()) return;
        t = n->as_table();
    }
    t->erase(parts.back());
}

uint32_t host_count(const TopologyConfig& t) {
    switch (t.kind) {
        case TopologyKind::kSingleSwitch: return t.hosts;
        case TopologyKind::kLeafSpine: return t.leaves * t.hosts_per_leaf;
        case TopologyKind::kFatTree: return t.k * t.k * t.k / 4;
        case TopologyKind::kGraph: return static_cast<uint32_t>(t.graph.host_nodes.size());
    }
    return 0;
}

// path_near resolves a file named in the scenario against the scenario's directory.
std::string path_near(const std::string& file, const std::string& base_dir) {
    if (std::filesystem::path(file).is_relative()) return (std::filesystem::path(base_dir) / file).string();
    return file;
}

void read_topology(Section s, RunSpec& r, const std::string& base_dir) {
    TopologyConfig& t = r.topology;
    const std::string kind =
        s.choice("kind", "single_switch", {"single_switch", "leaf_spine", "fat_tree", "hpcc", "htsim"});
    t.kind = kind == "single_switch" ? TopologyKind::kSingleSwitch
             : kind == "leaf_spine"  ? TopologyKind::kLeafSpine
             : kind == "fat_tree"    ? TopologyKind::kFatTree
                                     : TopologyKind::kGraph;
    // kind = "hpcc" or "htsim": the simulator's topology file (sim/import.h) gives the
    // graph, its hosts' line rate and every link's rate and delay (HPCC's, its loss too;
    // htsim's, the switch buffers if it sets them), so the keys that shape or time the
    // built-in kinds do not apply.
    const std::string file = s.string("file", "");
    std::optional<uint64_t> file_buffer_bytes;
    if (t.kind == TopologyKind::kGraph) {
        if (file.empty()) s.bad(nullptr, "file", "is required by kind = \"" + kind + "\"");
        for (const char* key : {"rate_gbps", "delay_us", "cable_delays", "hosts", "leaves", "spines", "hosts_per_leaf",
                                "oversubscription", "k"})
            if (const toml::node* n = s.node(key))
                s.bad(n, key, "does not apply to kind = \"" + kind + "\" (the file gives the network)");
        std::string err;
        const std::string path = path_near(file, base_dir);
        const auto text = read_file(path, err);
        if (!text) fail(err);
        if (kind == "hpcc") {
            auto g = parse_hpcc_topology(*text, path, err);
            if (!g) fail(err);
            t.graph = std::move(*g);
        } else {
            auto h = parse_htsim_topology(*text, path, err);
            if (!h) fail(err);
            t.graph = std::move(h->graph);
            file_buffer_bytes = h->queue_bytes;
        }
        t.cable.delay = SimDuration{0};
        for (const GraphLink& l : t.graph.links) {
            t.cable.delay = std::max(t.cable.delay, l.delay);
            if (!t.graph.is_switch[l.a] || !t.graph.is_switch[l.b]) t.cable.rate_bps = l.rate_bps;
        }
    } else if (!file.empty()) {
        s.bad(s.node("file"), "file", "applies only to kind = \"hpcc\" or \"htsim\"");
    }
    t.hosts = s.u32("hosts", 4, 2, 65536);
    t.leaves = s.u32("leaves", 2, 1, 4096);
    t.spines = s.u32("spines", 2, 1, 4096);
    t.hosts_per_leaf = s.u32("hosts_per_leaf", 2, 1, 4096);
    t.oversubscription = s.real("oversubscription", 1.0, 0.01, 1000);
    t.k = s.u32("k", 4, 2, 64);
    t.planes = s.u32("planes", 1, 1, 16);
    if (t.kind != TopologyKind::kGraph) {
        t.cable.rate_bps = static_cast<uint64_t>(s.real("rate_gbps", 100, 0.001, 100000) * 1e9);
        t.cable.delay = s.duration_us("delay_us", std::chrono::microseconds(1), 0, 1e6);
    }
    if (const toml::array* delays = s.array("cable_delays")) {
        // [[topology.cable_delays]]: { host, plane (default: every plane), delay_us }.
        const uint32_t hosts = host_count(t);
        for (size_t i = 0; i < delays->size(); ++i) {
            const toml::node& n = *delays->get(i);
            const std::string pre = s.prefix() + "cable_delays[" + std::to_string(i) + "].";
            if (!n.is_table()) fail(s.ctx().where(&n) + "'" + pre + "' must be a table");
            Section d(s.ctx(), n.as_table(), pre);
            TopologyConfig::HostCableDelay e;
            if (!d.node("host")) d.bad(&n, "host", "is required");
            if (!d.node("delay_us")) d.bad(&n, "delay_us", "is required");
            e.host = d.u32("host", 0, 0, static_cast<int64_t>(hosts) - 1);
            if (d.node("plane")) e.plane = d.u32("plane", 0, 0, static_cast<int64_t>(t.planes) - 1);
            e.delay = d.duration_us("delay_us", {}, 0, 1e6);
            d.finish();
            t.cable_delays.push_back(e);
        }
    }
    t.switches.traffic_classes = static_cast<uint8_t>(s.u32("traffic_classes", 1, 1, kMaxTrafficClasses));
    // class_queues: traffic class -> egress queue, entry c for class c (default: the
    // identity). Listing it sets how many classes flows may use: [0, 0] puts two classes in
    // one queue of a traffic_classes = 1 fabric.
    if (const toml::array* map = s.array("class_queues")) {
        if (map->empty() || map->size() > kMaxTrafficClasses) s.bad(map, "class_queues", "must list 1..8 queues");
        for (size_t c = 0; c < map->size(); ++c) {
            const toml::node& q = *map->get(c);
            if (!q.is_integer() || *q.value<int64_t>() < 0 || *q.value<int64_t>() >= t.switches.traffic_classes)
                s.bad(&q, "class_queues", "must list queues below topology.traffic_classes (" +
                                              std::to_string(t.switches.traffic_classes) + ")");
            t.switches.class_queue[c] = static_cast<uint8_t>(*q.value<int64_t>());
        }
        t.switches.mapped_classes = static_cast<uint8_t>(map->size());
    }
    BufferConfig& b = t.switches.buffer;
    if (file_buffer_bytes && s.node("buffer_bytes"))
        s.bad(s.node("buffer_bytes"), "buffer_bytes", "does not apply: the file sets every port's (Queue_Up, Queue_Down)");
    b.port_bytes = s.u64("buffer_bytes", file_buffer_bytes.value_or(b.port_bytes), 1, int64_t{1} << 40);
    b.shared = s.boolean("shared_buffer", false);
    b.shared_bytes = s.u64("shared_buffer_bytes", b.shared_bytes, 1, int64_t{1} << 40);
    b.alpha = s.real("alpha", 1.0, 0.001, 1000);

    Section e = s.sub("ecn");
    const std::string mode = e.choice("mode", "off", {"off", "step", "red"});
    const uint64_t k = e.u64("k_bytes", 0);
    const uint64_t kmin = e.u64("kmin_bytes", 0), kmax = e.u64("kmax_bytes", 0);
    const double pmax = e.real("pmax", 1.0, 0, 1);
    if (mode == "step") t.switches.ecn = EcnConfig::step(k);
    if (mode == "red") {
        if (kmax < kmin) e.bad(nullptr, "kmax_bytes", "must be at least kmin_bytes");
        t.switches.ecn = EcnConfig::red(kmin, kmax, pmax);
    }
    e.finish();

    Section p = s.sub("pfc");
    if (p.boolean("enabled", false)) {
        // Defaults: headroom for what is in flight while a PAUSE travels (two wire delays
        // at line rate plus two maximum packets); XOFF at an eighth of the port buffer (set it
        // so that ingress ports x (xoff + headroom) fit the buffer).
        const uint64_t bytes_per_us = t.cable.rate_bps / 8 / 1'000'000;
        const uint64_t headroom = 2 * bytes_per_us * static_cast<uint64_t>(to_ps(t.cable.delay)) / 1'000'000 + 2 * 9216;
        // The lossless classes, as a bit set; class 0 alone by default.
        t.switches.pfc.lossless_classes = 1;
        if (const toml::array* classes = p.array("classes")) {
            t.switches.pfc.lossless_classes = 0;
            for (const toml::node& c : *classes) {
                if (!c.is_integer() || *c.value<int64_t>() < 0 || *c.value<int64_t>() >= t.switches.traffic_classes)
                    p.bad(&c, "classes", "must list classes below topology.traffic_classes (" +
                                             std::to_string(t.switches.traffic_classes) + ")");
                t.switches.pfc.lossless_classes |= static_cast<uint8_t>(1u << *c.value<int64_t>());
            }
            if (t.switches.pfc.lossless_classes == 0) p.bad(classes, "classes", "must not be empty");
        }
        t.switches.pfc.xoff_bytes = p.u64("xoff_bytes", b.port_bytes / 8, 1);
        t.switches.pfc.xon_bytes = p.u64("xon_bytes", t.switches.pfc.xoff_bytes / 2);
        t.switches.pfc.headroom_bytes = p.u64("headroom_bytes", headroom);
    } else {
        p.u64("xoff_bytes", 0), p.u64("xon_bytes", 0), p.u64("headroom_bytes", 0), p.array("classes");
    }
    p.finish();
    s.finish();
    // PFC against the class map is checked once the run's protocol has chosen PFC (read_run).
    TopologyConfig lossy = t;
    lossy.switches.pfc.lossless_classes = 0;
    if (const std::string err = check_topology_config(lossy); !err.empty()) fail(s.ctx().where(nullptr) + "topology: " + err);
}

// class_limit names the bound on a flow's traffic class: the classes topology.class_queues
// maps, else one per queue.
std::string class_limit(const SwitchConfig& sw) {
    return sw.mapped_classes ? "the classes topology.class_queues maps (" + std::to_string(sw.classes()) + ")"
                             : "topology.traffic_classes (" + std::to_string(sw.traffic_classes) + ")";
}

// longest_rtt_ps: the base RTT of the fabric's longest path, 2 x 6 hops of propagation
// (a fat tree's). With per-cable delays the longest path runs between the two hosts with
// the slowest cables (4 inner hops + those two).
uint64_t longest_rtt_ps(const TopologyConfig& t) {
    uint64_t rtt_ps = 2 * 6 * static_cast<uint64_t>(to_ps(t.cable.delay));
    if (!t.cable_delays.empty()) {
        const uint32_t hosts = host_count(t);
        int64_t d1 = 0, d2 = 0;  // the two largest host-cable delays of distinct hosts
        for (uint32_t h = 0; h < hosts; ++h) {
            const int64_t d = to_ps(max_host_cable_delay(t, h));
            if (d > d1) d2 = d1, d1 = d;
            else if (d > d2) d2 = d;
        }
        const int64_t inner = 4 * to_ps(t.cable.delay);
        rtt_ps = static_cast<uint64_t>(2 * (inner + d1 + d2));
    }
    return rtt_ps;
}

void read_mroce(Section s, RunSpec& r) {
    core::EndpointConfig& c = r.mroce.endpoint;
    c.num_paths = static_cast<uint16_t>(s.u32("paths", c.num_paths, 1, 65535));
    c.max_payload = s.u32("max_payload", 4096, 1, 65535);
    const uint64_t w = s.u64("window_bytes", 0);
    r.mroce.window_auto = w == 0;
    if (w) c.window_bytes_per_path = w;
    c.ack_every = s.u32("ack_every", c.ack_every, 1, 1 << 20);
    c.return_fail_rounds = s.u32("return_fail_rounds", c.return_fail_rounds, 0, 1 << 20);  // [PATH-12]
    r.mroce.stream_per_flow = s.choice("streams", "flow", {"flow", "pair"}) == "flow";
    r.mroce.pfc = s.boolean("pfc", false);
    r.mroce.preconnect = s.boolean("preconnect", false);
    // Wire forms negotiated by capability, defaulting to the engine's (SHORT_ACK on,
    // COMPACT_DATA off), for comparisons (docs/sim.md).
    c.short_acks = s.boolean("short_acks", c.short_acks);        // [ACK-21]
    c.compact_data = s.boolean("compact_data", c.compact_data);  // [DATA-9]
    // [LOSS-15]: the core's timer floors follow the datapath's timer granularity. A
    // simulated host fires its timers on time, like a NIC: 1 µs by default, from which
    // min_pto, stall_tolerance and handshake_timeout are derived unless set below.
    const auto us = [](SimDuration d) { return std::chrono::duration_cast<Duration>(d); };
    const auto sim = [](Duration d) { return std::chrono::duration_cast<SimDuration>(d); };
    // The RTT assumed before a sample is configured for the fabric, as an operator would:
    // four times the base RTT of its longest path (at least 1 µs), room for the queues a
    // first round trip meets (with twice, bench-a2a64 probed 4x as often and lost 100 packets).
    // (An imported graph's links carry their own delays: its longest path from host 0.)
    int64_t longest_ps = static_cast<int64_t>(longest_rtt_ps(r.topology));
    if (r.topology.kind == TopologyKind::kGraph)
        for (const GraphPath& gp : graph_paths(r.topology.graph, 0))
            longest_ps = std::max<int64_t>(longest_ps, 2 * to_ps(gp.delay));
    const SimDuration longest_rtt{std::max<int64_t>(longest_ps, 1'000'000)};
    c.initial_rtt = us(s.duration_us("initial_rtt_us", 4 * longest_rtt, 0.01, 1e7));
    c = core::with_timer_granularity(
        c, us(s.duration_us("timer_granularity_us", std::chrono::microseconds(1), 0.001, 1e6)));
    c.min_pto = us(s.duration_us("min_pto_us", sim(c.min_pto), 1, 1e7));
    c.handshake_timeout = us(s.duration_us("handshake_timeout_us", sim(c.handshake_timeout), 1, 1e7));
    c.retx_copies = s.boolean("retx_copies", c.retx_copies);  // [LOSS-17]
    c.hello_copies = s.u32("hello_copies", c.hello_copies, 1, core::EndpointConfig::kMaxHelloCopies);  // [CONN-30]
    c.resend_to_opening_peer = s.boolean("resend_to_opening_peer", c.resend_to_opening_peer);  // [CONN-31]
    // [LOSS-13]: how long every route may be silent before a timeout escalates (a
    // descheduled peer on a real host; a simulated host is never descheduled).
    c.stall_tolerance = us(s.duration_us("stall_tolerance_us", sim(c.stall_tolerance), 0, 1e8));
    // spec §9: the controller, the receiver's hint and the pacer, all on by default.
    c.congestion_control = s.choice("congestion_control", "aimd", {"aimd", "fixed"}) == "aimd"
                               ? core::EndpointConfig::Cc::kAimd
                               : core::EndpointConfig::Cc::kFixed;
    c.rate_hint = s.boolean("rate_hint", true);
    c.pacing = s.boolean("pacing", true);
    // spec §5: new data's path, round-robin ([PATH-10], the default) or round-robin over
    // the roomy paths ([PATH-14]).
    c.path_selection = s.choice("path_selection", "round_robin", {"round_robin", "room"}) == "room"
                           ? core::EndpointConfig::PathSelection::kRoom
                           : core::EndpointConfig::PathSelection::kRoundRobin;
    // spec §4.9 [INT-1]: every host announces INTEGRITY, so every connection carries the
    // CRC32C trailer; the endpoint's own default otherwise.
    c.integrity_check = s.boolean("integrity", c.integrity_check);
    if (const toml::array* w = s.array("class_weights")) {
        if (w->size() > c.class_weights.size()) s.bad(w, "class_weights", "must list at most 8 weights");
        for (size_t i = 0; i < w->size(); ++i) {
            const toml::node& n = *w->get(i);
            if (!n.is_integer() || *n.value<int64_t>() < 1 || *n.value<int64_t>() > 255)
                s.bad(&n, "class_weights", "must hold integers 1..255");
            c.class_weights[i] = static_cast<uint8_t>(*n.value<int64_t>());
        }
    }
    // The receiver recomputes its shares about once per base RTT of the fabric (its own
    // cables, not the per-host overrides: a receiver serves its near senders at their pace).
    uint32_t hops = r.topology.kind == TopologyKind::kSingleSwitch ? 2
                    : r.topology.kind == TopologyKind::kLeafSpine  ? 4
                                                                   : 6;
    if (r.topology.kind == TopologyKind::kGraph) {
        // The graph's cables to the farthest host from host 0 (cable.delay is its longest).
        hops = 0;
        for (const GraphPath& p : graph_paths(r.topology.graph, 0)) hops = std::max(hops, p.hops);
    }
    // (at least 1 µs: a fabric of zero-delay cables still serialises packets).
    const SimDuration base_rtt = std::max<SimDuration>(2 * hops * r.topology.cable.delay, std::chrono::microseconds(1));
    c.hint_interval = us(s.duration_us("hint_interval_us", base_rtt, 0.01, 1e7));
    c.first_rtt_bytes = s.u64("first_rtt_bytes", c.first_rtt_bytes, 1);
    c.max_inflight_bytes = s.u64("max_inflight_bytes", c.max_inflight_bytes, 1);
    c.idle_halving_rtts = static_cast<uint16_t>(s.u64("idle_halving_rtts", c.idle_halving_rtts, 0, 65535));
    c.hello_grant = s.boolean("hello_grant", c.hello_grant);  // [CC-20]
    c.grant_caps_first_rtt = s.boolean("grant_caps_first_rtt", c.grant_caps_first_rtt);  // [CC-20]
    c.young_weight = static_cast<uint8_t>(s.u64("young_weight", c.young_weight, 1, 255));  // [CC-21]
    c.young_bytes = static_cast<uint32_t>(s.u64("young_bytes", c.young_bytes, 0, UINT32_MAX));
    s.finish();
    c.num_local_ports = static_cast<uint16_t>(r.topology.planes);
    c.port_rate_bps = r.topology.cable.rate_bps;  // [CC-12]: line rate x planes
    if (r.mroce.window_auto) {
        // One bandwidth-delay product per connection over all paths (the host's rate on
        // every plane times the base RTT of the longest path), plus one packet per path, so
        // the longest path is not starved (shorter ones get more than they need).
        const uint64_t rtt_ps = longest_rtt_ps(r.topology);
        // In double: rate x planes x RTT in ps overflows 64 bits at realistic values.
        const auto bdp = static_cast<uint64_t>(static_cast<double>(r.topology.cable.rate_bps) * r.topology.planes /
                                               8 * static_cast<double>(rtt_ps) / 1e12);
        c.window_bytes_per_path = bdp / c.num_paths + c.max_payload;
    }
    if (const std::string err = core::config_error(c); !err.empty()) fail(s.ctx().where(nullptr) + "mroce: " + err);
}

void read_rocev2(Section s, RunSpec& r) {
    rocev2::RoceConfig& c = r.rocev2.config;
    r.rocev2.qps_per_pair = s.u32("qps_per_pair", 1, 1, 256);
    c.port_choice = s.choice("qp_ports", "source_port", {"source_port", "round_robin"}) == "round_robin"
                        ? rocev2::PortChoice::kRoundRobin
                        : rocev2::PortChoice::kSourcePort;
    c.dcqcn.enabled = s.boolean("dcqcn", true);
    r.rocev2.pfc = s.boolean("pfc", true);
    c.mtu = s.u32("mtu", 4096, 64, 9000);
    c.window_packets = s.u32("window_packets", c.window_packets, 1, rocev2::kMaxWindowPackets);
    c.ack_every = s.u32("ack_every", c.ack_every, 1, 1 << 20);
    const SimDuration rto = s.duration_us("retransmit_timeout_us", std::chrono::microseconds(1000), 1, 1e7);
    c.retransmit_timeout = std::chrono::duration_cast<Duration>(rto);
    s.finish();
    c.dcqcn.line_rate_bps = r.topology.cable.rate_bps;
    c.num_local_ports = static_cast<uint16_t>(r.topology.planes);
    if (const std::string err = rocev2::config_error(c); !err.empty()) fail(s.ctx().where(nullptr) + "rocev2: " + err);
}

void read_workload(Section s, RunSpec& r, uint32_t hosts, const std::string& base_dir) {
    WorkloadSpec& w = r.workload;
    const std::string kind = s.choice("kind", "all_to_all",
                                      {"explicit", "incast", "permutation", "all_to_all", "ring_allreduce", "background",
                                       "hpcc_flows", "htsim_cm"});
    // hpcc_flows, htsim_cm: the flows of another simulator's file (sim/import.h), run as
    // an explicit list; `file` is relative to the scenario file.
    const bool imported = kind == "hpcc_flows" || kind == "htsim_cm";
    const std::string file = s.string("file", "");
    if (imported) {
        if (file.empty()) s.bad(nullptr, "file", "is required by kind = \"" + kind + "\"");
        if (s.node("flows")) s.bad(s.node("flows"), "flows", "cannot be added to kind = \"" + kind + "\" (put them in the file)");
        std::string err;
        const std::string path = path_near(file, base_dir);
        const NodeMap nodes = NodeMap::of(r.topology, hosts);
        const auto text = read_file(path, err);
        auto flows = !text ? std::nullopt
                     : kind == "hpcc_flows" ? parse_hpcc_flows(*text, path, nodes, err)
                                            : parse_htsim_cm(*text, path, nodes, err);
        if (!flows) fail(err);
        w.flows = std::move(*flows);
        if (kind == "hpcc_flows") {
            // Run from the first flow's start, not from HPCC's warm-up (2 s of idle time
            // in every sample file and time series otherwise); fct_hpcc.txt restores it.
            w.time_origin = w.flows.front().start;
            for (Flow& f : w.flows) f.start -= w.time_origin;
        }
    } else if (!file.empty()) {
        s.bad(s.node("file"), "file", "applies only to kind = \"hpcc_flows\" or \"htsim_cm\"");
    }
    w.kind = kind == "explicit" || imported ? WorkloadKind::kExplicit
             : kind == "incast"         ? WorkloadKind::kIncast
             : kind == "permutation"    ? WorkloadKind::kPermutation
             : kind == "all_to_all"     ? WorkloadKind::kAllToAll
             : kind == "ring_allreduce" ? WorkloadKind::kRingAllreduce
                                        : WorkloadKind::kBackground;
    w.bytes = s.u64("bytes", w.bytes, 1, kMaxFlowBytes);
    w.message_bytes = s.u64("message_bytes", 0, 0, UINT32_MAX);
    w.hosts = s.u32("hosts", 0, 0, hosts);
    const uint32_t part = w.hosts ? w.hosts : hosts;
    if (part < 2) s.bad(nullptr, "hosts", "must leave at least 2 hosts");
    w.senders = s.u32("senders", 0, 0, part - 1);
    w.receiver = s.u32("receiver", 0, 0, part - 1);
    w.first_sender = s.u32("first_sender", 0, 0, part - 1);
    w.start = s.duration_us("start_us", {}, 0, 1e9);
    w.traffic_class = static_cast<uint8_t>(s.u32("traffic_class", 0, 0, kMaxTrafficClasses - 1));
    if (imported)
        for (Flow& f : w.flows) f.traffic_class = w.traffic_class;
    w.load = s.real("load", 0.3, 0, 1);
    w.cdf = s.string("cdf", "");
    w.duration = s.duration_us("duration_us", w.duration, 0, 1e9);
    w.max_flows = s.u64("max_flows", 0, 0, 100'000'000);
    if (w.kind == WorkloadKind::kBackground) {
        if (w.cdf.empty()) s.bad(nullptr, "cdf", "is required by kind = \"background\"");
        if (std::filesystem::path(w.cdf).is_relative()) w.cdf = (std::filesystem::path(base_dir) / w.cdf).string();
        FlowSizeCdf cdf;
        std::string err;
        if (!cdf.load(w.cdf, err)) fail(s.ctx().where(nullptr) + "'" + s.prefix() + "cdf': " + err);
    }
    if (const toml::array* flows = s.array("flows")) {
        for (size_t i = 0; i < flows->size(); ++i) {
            const toml::node& n = *flows->get(i);
            const std::string pre = s.prefix() + "flows[" + std::to_string(i) + "].";
            if (!n.is_table()) fail(s.ctx().where(&n) + "'" + pre + "' must be a table");
            Section f(s.ctx(), n.as_table(), pre);
            Flow fl;
            fl.id = static_cast<uint32_t>(i);
            fl.src = f.u32("src", 0, 0, hosts - 1);
            fl.dst = f.u32("dst", 1, 0, hosts - 1);
            fl.bytes = f.u64("bytes", w.bytes, 1, kMaxFlowBytes);
            fl.start = f.duration_us("start_us", w.start, 0, 1e9);
            fl.traffic_class = static_cast<uint8_t>(f.u32("traffic_class", w.traffic_class, 0, kMaxTrafficClasses - 1));
            // The flow's stream (QP) and its packets run in this class ([STREAM-14]); a
            // class the switches do not have would silently share the top queue.
            if (fl.traffic_class >= r.topology.switches.classes())
                fail(s.ctx().where(&n) + "'" + pre + "traffic_class' must be below " + class_limit(r.topology.switches));
            if (const toml::array* deps = f.array("depends_on")) {
                for (const toml::node& d : *deps) {
                    if (!d.is_integer() || *d.value<int64_t>() < 0 || *d.value<int64_t>() >= static_cast<int64_t>(i))
                        fail(s.ctx().where(&d) + "'" + pre + "depends_on' must list ids of earlier flows (0.." +
                             std::to_string(i) + ")");
                    fl.depends_on.push_back(static_cast<uint32_t>(*d.value<int64_t>()));
                }
            }
            f.finish();
            w.flows.push_back(std::move(fl));
        }
    }
    s.finish();
    if (w.kind == WorkloadKind::kExplicit && w.flows.empty())
        s.bad(nullptr, "flows", "must list at least one flow for kind = \"explicit\"");
    if (const std::string err = check_workload(w.flows, hosts); !w.flows.empty() && !err.empty())
        fail(s.ctx().where(nullptr) + "workload: " + err);
}

void read_faults(const Ctx& ctx, const toml::array* faults, RunSpec& r, uint32_t hosts) {
    if (!faults) return;
    for (size_t i = 0; i < faults->size(); ++i) {
        const toml::node& n = *faults->get(i);
        const std::string pre = "faults[" + std::to_string(i) + "].";
        if (!n.is_table()) fail(ctx.where(&n) + "'" + pre + "' must be a table");
        Section s(ctx, n.as_table(), pre);
        FaultSpec f;
        f.at = s.duration_us("at_us", {}, 0, 1e9);
        const std::string kind = s.choice("kind", "plane_down",
                                          {"plane_down", "plane_up", "cable_down", "cable_up", "loss", "rate", "burst_loss"});
        f.kind = kind == "plane_down"   ? FaultKind::kPlaneDown
                 : kind == "plane_up"   ? FaultKind::kPlaneUp
                 : kind == "cable_down" ? FaultKind::kCableDown
                 : kind == "cable_up"   ? FaultKind::kCableUp
                 : kind == "loss"       ? FaultKind::kLoss
                 : kind == "burst_loss" ? FaultKind::kBurstLoss
                                        : FaultKind::kRate;
        f.plane = s.u32("plane", 0, 0, r.topology.planes - 1);
        f.host = s.u32("host", 0, 0, hosts - 1);
        if (const toml::node* port = s.node("port")) {
            // The name is checked against the built topology when the run starts.
            if (!port->is_string() || port->value<std::string>()->empty())
                s.bad(port, "port", "must be a switch port name as in queue.csv, e.g. \"spine0/p1\"");
            if (f.kind == FaultKind::kPlaneDown || f.kind == FaultKind::kPlaneUp)
                s.bad(port, "port", "applies to cable faults, not to kind = \"" + kind + "\"");
            f.port = *port->value<std::string>();
        }
        // [[faults]] kind = "burst_loss": Gilbert-Elliott on both wires of the cable.
        f.burst.p_good_to_bad = s.real("p_good_to_bad", 0, 0, 1);
        f.burst.p_bad_to_good = s.real("p_bad_to_good", 1, 0, 1);
        f.burst.loss_in_bad = s.real("loss_in_bad", 1, 0, 1);
        if (f.kind == FaultKind::kBurstLoss && f.burst.p_good_to_bad <= 0)
            s.bad(&n, "p_good_to_bad", "must be positive for kind = \"burst_loss\"");
        if (f.kind == FaultKind::kBurstLoss && f.burst.p_bad_to_good <= 0)
            s.bad(&n, "p_bad_to_good", "must be positive for kind = \"burst_loss\" (0 never leaves the bad state)");
        if (s.node("reconverge_us")) f.reconverge = s.duration_us("reconverge_us", {}, 0, 1e9);
        f.loss = s.real("loss", 0, 0, 1);
        f.rate_bps = static_cast<uint64_t>(s.real("rate_gbps", 0, 0, 100000) * 1e9);
        if (f.kind == FaultKind::kRate && f.rate_bps == 0) s.bad(&n, "rate_gbps", "must be positive for kind = \"rate\"");
        s.finish();
        r.faults.push_back(f);
    }
}

void read_run(Section& root, RunSpec& r, const std::string& base_dir) {
    r.loss = 0;
    read_topology(root.sub("topology"), r, base_dir);
    const uint32_t hosts = host_count(r.topology);
    Section fabric = root.sub("fabric");
    r.loss = fabric.real("loss", 0, 0, 1);
    fabric.finish();
    read_mroce(root.sub("mroce"), r);
    read_rocev2(root.sub("rocev2"), r);
    read_workload(root.sub("workload"), r, hosts, base_dir);
    // PFC is the fabric's, but whether a run uses it is the protocol's choice.
    if (!(r.protocol == Protocol::kMroce ? r.mroce.pfc : r.rocev2.pfc)) r.topology.switches.pfc.lossless_classes = 0;
    if (const std::string err = check_topology_config(r.topology); !err.empty())
        fail(root.ctx().where(nullptr) + "topology: " + err + " (this run's protocol uses PFC)");
    if (r.workload.traffic_class >= r.topology.switches.classes())
        fail(root.ctx().where(nullptr) + "'workload.traffic_class' must be below " + class_limit(r.topology.switches));
    read_faults(root.ctx(), root.array("faults"), r, hosts);
    Section run = root.sub("run");
    r.time_limit = run.duration_us("time_limit_us", r.time_limit, 1, 1e10);
    r.max_events = run.u64("max_events", 0);
    run.finish();
    Section out = root.sub("output");
    r.output.sample = out.duration_us("sample_us", r.output.sample, 0, 1e9);
    r.output.flows = out.u32("flows", r.output.flows, 0, 1 << 20);
    if (const toml::array* ports = out.array("queue_ports")) {
        for (const toml::node& p : *ports) {
            if (!p.is_string()) fail(root.ctx().where(&p) + "'output.queue_ports' must list port names (strings)");
            r.output.queue_ports.push_back(*p.value<std::string>());
        }
    }
    r.output.max_queue_ports = out.u32("max_queue_ports", r.output.max_queue_ports, 0, 1 << 16);
    r.output.cc_conns = out.u32("cc_conns", r.output.cc_conns, 0, 1 << 20);
    out.finish();
}

std::string sanitize(const std::string& s) {
    std::string out;
    for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '-';
    return out;
}

}  // namespace

const char* to_string(Protocol p) { return p == Protocol::kMroce ? "mroce" : "rocev2"; }

std::string param_to_string(const ParamValue& v) {
    return std::visit(
        [](auto&& x) -> std::string {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
            else if constexpr (std::is_same_v<T, std::string>) return x;
            else {
                std::ostringstream os;
                os << x;
                return os.str();
            }
        },
        v);
}

std::optional<Scenario> parse_scenario(const std::string& text, const std::string& name,
                                       const std::vector<std::string>& overrides,
                                       std::optional<uint64_t> seed, std::string& err) {
    const Ctx ctx{name};
    try {
        toml::table root;
        try {
            root = toml::parse(text, name);
        } catch (const toml::parse_error& e) {
            fail(name + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
        }
        // --set: each key=value replaces or adds one value; remembered as a parameter.
        std::vector<std::string> set_keys;
        for (const std::string& o : overrides) {
            const size_t eq = o.find('=');
            if (eq == std::string::npos || eq == 0) fail("--set '" + o + "': expected key=value");
            const std::string key = o.substr(0, eq);
            const toml::table holder = parse_value(o.substr(eq + 1));
            set_key(root, key, *holder.get("v"), "--set");
            set_keys.push_back(key);
        }
        std::vector<SweepDimension> sweep;
        toml::table sweep_table;
        if (toml::node* s = root.get("sweep")) {
            if (!s->is_table()) fail(ctx.where(s) + "'sweep' must be a table");
            sweep_table = std::move(*s->as_table());  // a copy would lose the source lines
            sweep = read_sweep(ctx, sweep_table, "");
        }
        root.erase("sweep");
        // A case sets only its own keys, so before each point every key that some case
        // sets goes back to the file's value (or away), lest one case's key leak into the
        // next case's points.
        std::vector<std::pair<std::string, std::optional<toml::table>>> case_defaults;  // key, {"v": value}
        for (const SweepDimension& d : sweep)
            for (const SweepCase& c : d.cases)
                for (const auto& [k, v] : c.keys) {
                    if (std::any_of(case_defaults.begin(), case_defaults.end(), [&](const auto& e) { return e.first == k; }))
                        continue;
                    std::optional<toml::table> holder;
                    if (const toml::node* n = get_key(root, k)) {
                        holder.emplace();
                        n->visit([&](auto&& x) { holder->insert("v", x); });
                    }
                    case_defaults.emplace_back(k, std::move(holder));
                }

        Scenario sc;
        sc.file = name;
        const std::string base_dir = std::filesystem::path(name).parent_path().string();
        // Expand the cartesian product; the last sweep key varies fastest.
        size_t points = 1;
        for (const SweepDimension& d : sweep) {
            points *= d.size();  // checked at each step, so the product cannot wrap
            if (points > 10000) fail(ctx.where(nullptr) + "'sweep' has more than 10000 points");
        }
        std::set<std::string> labels;
        for (size_t p = 0; p < points; ++p) {
            toml::table& t = root;  // every point sets every swept key; copies would lose source lines
            std::vector<std::pair<std::string, ParamValue>> params;
            size_t rest = p;
            std::vector<size_t> idx(sweep.size());
            for (size_t i = sweep.size(); i-- > 0;) {
                idx[i] = rest % sweep[i].size();
                rest /= sweep[i].size();
            }
            for (const auto& [k, holder] : case_defaults) {
                if (holder) set_key(t, k, *holder->get("v"), name + ": sweep");
                else erase_key(t, k);
            }
            std::string suffix;
            for (size_t i = 0; i < sweep.size(); ++i) {
                const SweepDimension& d = sweep[i];
                if (d.values) {
                    const toml::node& v = *d.values->get(idx[i]);
                    set_key(t, d.key, v, name + ": sweep");
                    params.emplace_back(d.key, to_param(v));
                    if (d.key != "protocol")
                        suffix += "_" + split_dots(d.key).back() + "-" + param_to_string(to_param(v));
                    continue;
                }
                const SweepCase& c = d.cases[idx[i]];
                params.emplace_back(d.key, c.label);
                for (const auto& [k, v] : c.keys) {
                    set_key(t, k, *v, name + ": sweep");
                    params.emplace_back(k, to_param(*v));
                }
                suffix += "_" + split_dots(d.key).back() + "-" + c.label;
            }
            for (const std::string& k : set_keys) {
                const toml::node* v = t.at_path(k).node();
                if (v) params.emplace_back(k, to_param(*v));
            }
            Section top(ctx, &t, "");
            RunSpec r;
            sc.name = top.string("name", std::filesystem::path(name).stem().string());
            sc.seed = top.u64("seed", 1);
            const std::string proto = top.choice("protocol", "mroce", {"mroce", "rocev2"});
            r.protocol = proto == "mroce" ? Protocol::kMroce : Protocol::kRocev2;
            read_run(top, r, base_dir);
            top.finish();
            r.params = std::move(params);
            std::string label = sanitize(proto + suffix);
            for (int n = 2; labels.count(label); ++n) label = sanitize(proto + suffix) + "_" + std::to_string(n);
            labels.insert(label);
            r.label = label;
            sc.runs.push_back(std::move(r));
        }
        if (seed) sc.seed = *seed;
        return sc;
    } catch (const ScenarioError& e) {
        err = e.message;
        return std::nullopt;
    }
}

std::optional<Scenario> load_scenario(const std::string& path, const std::vector<std::string>& overrides,
                                      std::optional<uint64_t> seed, std::string& err) {
    std::ifstream in(path);
    if (!in) {
        err = path + ": cannot open";
        return std::nullopt;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_scenario(ss.str(), path, overrides, seed, err);
}

}  // namespace mroce::sim
