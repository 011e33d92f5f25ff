// sim/import_htsim_topology.cc — parse_htsim_topology (import.h): htsim's topology files,
// read and built as htsim's FatTreeTopology (csg-htsim sim/datacenter/fat_tree_topology.cpp)
// reads and builds them.
#include "sim/import.h"

#include <array>
#include <cctype>
#include <string>
#include <utility>

#include "sim/import_lines.h"

namespace mroce::sim {
namespace {

using import_detail::ImportError;
using import_detail::Lines;

// htsim's per-tier keys (fat_tree_topology.cpp), spelled as its example files spell them;
// a file may write them in any case, as htsim lowercases them.
enum class TierKey : uint8_t {
    kSpeedGbps,
    kLatencyNs,
    kSwitchLatencyNs,
    kRadixUp,
    kRadixDown,
    kQueueUp,
    kQueueDown,
    kBundle,
    kOversubscribed,
};
constexpr size_t kTierKeys = 9;
constexpr std::array<const char*, kTierKeys> kTierKeyNames = {
    "Downlink_speed_Gbps", "Downlink_Latency_ns", "Switch_Latency_ns", "Radix_Up", "Radix_Down",
    "Queue_Up", "Queue_Down", "Bundle", "Oversubscribed"};
using enum TierKey;

const char* key_name(TierKey k) { return kTierKeyNames[static_cast<size_t>(k)]; }

// Setting: a value and the line that set it (0: not set).
struct Setting {
    uint64_t value = 0;
    uint32_t line = 0;
};

// HtsimTier: one `Tier t` section. get returns the value, or htsim's default when unset.
struct HtsimTier {
    uint32_t line = 0;  // its `Tier t` line; 0: the file has none
    std::array<Setting, kTierKeys> keys{};
    Setting& at(TierKey k) { return keys[static_cast<size_t>(k)]; }
    const Setting& at(TierKey k) const { return keys[static_cast<size_t>(k)]; }
    uint64_t get(TierKey k, uint64_t otherwise = 0) const {
        return at(k).line ? at(k).value : otherwise;
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
    return std::string(key_name(k)) + " of tier " + std::to_string(tier);
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
        return tier[t].at(k).line ? tier[t].at(k).line : tier[t].line;
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
            if (tier[t].at(k).line && (k == kQueueDown || t + 1 < tiers) &&
                (!first || tier[t].at(k).line < first->line)) {
                first = &tier[t].at(k);
                first_name = tier_key(k, t);
            }
    if (!first) return std::nullopt;
    for (uint32_t t = 0; t < tiers; ++t) {
        for (TierKey k : {kQueueUp, kQueueDown}) {
            if (k == kQueueUp && t + 1 == tiers) continue;  // the top tier has no uplinks
            const Setting& q = tier[t].at(k);
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
            Setting& s = tier[ct].at(tk);
            if (s.line)
                in.fail(tier_key(tk, ct) + " again (line " + std::to_string(s.line) + " sets it)");
            if ((tk == kRadixUp || tk == kQueueUp) && ct == 2)
                in.fail(std::string(key_name(tk)) +
                        " of tier 2: the core tier has no uplinks");
            const auto [lo, hi] = tier_key_range(tk);
            s.value = in.unsigned_at(t[1], key_name(tk), lo, hi);
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
                if (!tt.at(k).line)
                    in.fail_at(tt.line,
                               "Tier " + std::to_string(ti) + " has no " + key_name(k));
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
