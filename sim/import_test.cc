// sim/import_test.cc — the importers' parsers (sim/import.h) and the graph topology they
// build. End to end through `mroce sim`: tests/sim/import_test.py.
#include "sim/import.h"

#include <gtest/gtest.h>

#include <sstream>

#include "sim/event_queue.h"
#include "sim/test_seed.h"
#include "util/rng.h"

namespace mroce::sim {
namespace {

constexpr const char* kTopology =
    "6 2 5\n"
    "4 5\n"
    "0 4 25Gbps 0.001ms 0\n"
    "1 4 25Gb/s 500ns 0.01\n"
    "2 5 25Gbps 1us 0\n"
    "3 5 3125MBps 1000ns 0\n"  // 3125 MB/s = 25 Gbit/s
    "4 5 100Gbps 2us 0\n";

TEST(Import, HpccTopologyReadsNs3RatesAndDelays) {
    std::string err;
    const auto g = parse_hpcc_topology(kTopology, "t.txt", err);
    ASSERT_TRUE(g) << err;
    EXPECT_EQ(g->nodes, 6u);
    EXPECT_EQ(g->host_nodes, (std::vector<uint32_t>{0, 1, 2, 3}));
    ASSERT_EQ(g->links.size(), 5u);
    EXPECT_EQ(g->links[0].delay, std::chrono::microseconds(1));
    EXPECT_EQ(g->links[1].delay, std::chrono::nanoseconds(500));
    EXPECT_EQ(g->links[1].rate_bps, 25'000'000'000u);
    EXPECT_DOUBLE_EQ(g->links[1].loss, 0.01);
    EXPECT_EQ(g->links[3].rate_bps, 25'000'000'000u);
    EXPECT_EQ(g->links[4].rate_bps, 100'000'000'000u);
    EXPECT_EQ(g->links[4].delay, std::chrono::microseconds(2));
}

TEST(Import, HpccTopologyMustBeConnected) {
    std::string err;
    // Hosts 0 and 1 on switch 4, hosts 2 and 3 on switch 5, no link between the switches.
    EXPECT_FALSE(parse_hpcc_topology("6 2 4\n4 5\n0 4 25Gbps 1us 0\n1 4 25Gbps 1us 0\n"
                                     "2 5 25Gbps 1us 0\n3 5 25Gbps 1us 0\n",
                                     "t.txt", err));
    EXPECT_EQ(err, "t.txt: host 2 has no path to host 0 through switches");
}

TEST(Import, GraphTopologyKeepsEachLinksRateAndDelay) {
    std::string err;
    TopologyConfig c;
    c.kind = TopologyKind::kGraph;
    c.graph = *parse_hpcc_topology(kTopology, "t.txt", err);
    c.cable.rate_bps = 25'000'000'000;
    ASSERT_EQ(check_topology_config(c), "");
    Sim sim(1);
    Topology t(sim, c);
    ASSERT_EQ(t.host_count(), 4u);
    ASSERT_EQ(t.switch_count(), 2u);
    ASSERT_EQ(t.cable_count(), 5u);
    EXPECT_EQ(t.cable(1).a_to_b->config().delay, std::chrono::nanoseconds(500));
    EXPECT_DOUBLE_EQ(t.cable(1).b_to_a->config().loss_probability, 0.01);
    const Cable& trunk = t.cable(4);  // sw4 - sw5 at 100 Gbit/s
    EXPECT_FALSE(trunk.a.is_host || trunk.b.is_host);
    EXPECT_EQ(t.switch_at(trunk.a.node).port(trunk.a.port).rate_bps(), 100'000'000'000u);
    EXPECT_EQ(t.cable(4).a_to_b->config().delay, std::chrono::microseconds(2));
    // Host 0 to host 3: 1 us + 2 us + 1 us over 3 cables, bottleneck 25 Gbit/s.
    const GraphPath p = graph_paths(c.graph, 0).at(3);
    EXPECT_EQ(p.hops, 3u);
    EXPECT_EQ(p.delay, std::chrono::microseconds(4));
    EXPECT_EQ(p.rate_bps, 25'000'000'000u);
    EXPECT_EQ(graph_paths(c.graph, 0).at(1).hops, 2u);
}

TEST(Import, HpccFlowsReadNFlowsAsHpccDoes) {
    NodeMap nodes;
    nodes.host_of_node = {0, 1, 2, NodeMap::kNotAHost};
    std::string err;
    // Like third.cc: exactly N flows; the line after them is never read.
    const auto w = parse_hpcc_flows("2\n0 1 3 100 1000 2.0\n2 0 3 200 5 2.000001\nnot a flow\n", "f", nodes, err);
    ASSERT_TRUE(w) << err;
    ASSERT_EQ(w->size(), 2u);
    EXPECT_EQ((*w)[1].src, 2u);
    EXPECT_EQ((*w)[1].hpcc_dport, 200);
    EXPECT_EQ((*w)[1].bytes, 5u);
    EXPECT_EQ((*w)[1].start, std::chrono::microseconds(2'000'001));
    EXPECT_FALSE(parse_hpcc_flows("1\n0 3 3 100 1000 0\n", "f", nodes, err));
    EXPECT_EQ(err, "f:2: dst node 3 is a switch, not a host");
    EXPECT_FALSE(parse_hpcc_flows("1\n0 1 3 100 0 0\n", "f", nodes, err));
    EXPECT_EQ(err, "f:2: size 0: a flow must carry at least 1 byte");
}

TEST(Import, HtsimMatrixStartsArePicoseconds) {
    NodeMap nodes = NodeMap::of(TopologyConfig{}, 4);
    std::string err;
    const auto w = parse_htsim_cm("# c\nNodes 4\nConnections 2\n0->3 id 1 start 1500000 size 9\n"
                                  "3->0 start 0.5 size 1 prio 7\n",
                                  "m.cm", nodes, err);
    ASSERT_TRUE(w) << err;
    ASSERT_EQ(w->size(), 2u);
    EXPECT_EQ((*w)[0].start, std::chrono::microseconds(1) + std::chrono::nanoseconds(500));
    EXPECT_EQ((*w)[1].start, SimDuration{1});  // 0.5 ps rounds to 1 ps
    EXPECT_EQ((*w)[0].dst, 3u);
    EXPECT_FALSE(parse_htsim_cm("Nodes 4\nConnections 1\n0->1 start 0\n", "m.cm", nodes, err));
    EXPECT_EQ(err, "m.cm:3: no size");
    EXPECT_FALSE(parse_htsim_cm("Nodes 5\nConnections 1\n", "m.cm", nodes, err));
    EXPECT_EQ(err, "m.cm:1: Nodes 5, but the topology has 4 hosts");
}

// htsim's own sim/datacenter/topologies/leaf_spine_tiny.topo (github.com/Broadcom/csg-htsim):
// 4 ToRs of 8 hosts, each with 2 uplinks (oversubscribed 4:1), under 2 spines.
constexpr const char* kLeafSpineTiny =
    "Nodes 32\nTiers 2\nPodsize 32\n\n"
    "Tier 0\nDownlink_speed_Gbps 100\nRadix_Down 8\nRadix_Up 2\nDownlink_Latency_ns 1000\n"
    "Switch_Latency_ns 0\nOversubscribed 4\n\n"
    "Tier 1\nDownlink_speed_Gbps 100\nRadix_Down 4\nDownlink_Latency_ns 1000\nSwitch_Latency_ns "
    "0\n";

// htsim's sim/datacenter/topologies/test.topo, lower-cased in places (htsim's keys are
// case-insensitive) and with switch latencies: 2 pods of 2 ToRs (2 hosts each, 200 Gbit/s)
// and 2 aggregation switches; 4 cores, each reached by a bundle of 2 links at 100 Gbit/s.
constexpr const char* kThreeTier =
    "# a comment\nNodes 8\nTIERS 3\nPodsize 4\n"
    "Tier 0\nDownlink_speed_Gbps 200\nRadix_Down 2\nRadix_Up 2\nDownlink_Latency_ns 1000\n"
    "switch_latency_ns 100  # ToRs\n"
    "Tier 1\nDownlink_speed_Gbps 200\nRadix_Down 2\nRadix_Up 4\nDownlink_Latency_ns 1000\nBundle "
    "1\n"
    "Switch_Latency_ns 300\n"
    "Tier 2\nDownlink_speed_Gbps 100\nRadix_Down 4\nDownlink_Latency_ns 2000\nBundle 2\n";

// Links of g between nodes a and b (either order).
size_t links_between(const GraphSpec& g, uint32_t a, uint32_t b) {
    size_t n = 0;
    for (const GraphLink& l : g.links) n += (l.a == a && l.b == b) || (l.a == b && l.b == a);
    return n;
}

TEST(Import, HtsimLeafSpineBuildsHtsimsSwitchesAndLinks) {
    std::string err;
    const auto h = parse_htsim_topology(kLeafSpineTiny, "ls.topo", err);
    ASSERT_TRUE(h) << err;
    const GraphSpec& g = h->graph;
    EXPECT_EQ(h->tiers, 2u);
    EXPECT_FALSE(h->queue_bytes);
    EXPECT_EQ(g.format, "htsim");
    ASSERT_EQ(g.host_nodes.size(), 32u);
    EXPECT_EQ(g.nodes, 32u + 4 + 2);
    ASSERT_EQ(g.links.size(), 32u + 4 * 2);
    for (uint32_t host = 0; host < 32; ++host) {
        EXPECT_EQ(g.host_nodes[host], host);                           // htsim's node n is host n
        EXPECT_EQ(links_between(g, host, 32 + host / 8), 1u) << host;  // ToR j: hosts 8j .. 8j+7
    }
    for (uint32_t tor = 32; tor < 36; ++tor) {
        EXPECT_EQ(g.tiers[tor], 0u);
        for (uint32_t spine = 36; spine < 38; ++spine) EXPECT_EQ(links_between(g, tor, spine), 1u);
    }
    EXPECT_EQ(g.tiers[36], 1u);
    for (const GraphLink& l : g.links) {
        EXPECT_EQ(l.rate_bps, 100'000'000'000u);
        EXPECT_EQ(l.delay, std::chrono::microseconds(1));
        EXPECT_EQ(l.loss, 0);
    }
}

TEST(Import, HtsimThreeTiersBundlesAndSwitchLatency) {
    std::string err;
    const auto h = parse_htsim_topology(kThreeTier, "t.topo", err);
    ASSERT_TRUE(h) << err;
    const GraphSpec& g = h->graph;
    // 8 hosts, 4 ToRs (8..11), 4 aggregation switches (12..15), 4 cores (16..19).
    ASSERT_EQ(g.nodes, 20u);
    ASSERT_EQ(g.links.size(), 8u + 4 * 2 + 4 * 4);
    // Pod p's ToRs reach pod p's aggregation switches only.
    EXPECT_EQ(links_between(g, 8, 12), 1u);
    EXPECT_EQ(links_between(g, 9, 13), 1u);
    EXPECT_EQ(links_between(g, 8, 14), 0u);
    EXPECT_EQ(links_between(g, 10, 14), 1u);
    // Aggregation switch j of a pod: cores j and j + 2, each a bundle of 2.
    EXPECT_EQ(links_between(g, 12, 16), 2u);
    EXPECT_EQ(links_between(g, 12, 18), 2u);
    EXPECT_EQ(links_between(g, 12, 17), 0u);
    EXPECT_EQ(links_between(g, 15, 17), 2u);
    EXPECT_EQ(links_between(g, 15, 19), 2u);
    EXPECT_EQ(g.tiers[8], 0u);
    EXPECT_EQ(g.tiers[12], 1u);
    EXPECT_EQ(g.tiers[16], 2u);
    // Across pods: host 50 ns + 1 us, ToR 50 + 150 ns + 1 us, agg 150 ns + 2 us, and back:
    // the cables' delays add up to htsim's links and switch latencies on the path.
    const std::vector<GraphPath> from0 = graph_paths(g, 0);
    EXPECT_EQ(from0[7].hops, 6u);
    EXPECT_EQ(from0[7].delay,
              std::chrono::nanoseconds(2 * 1000 + 2 * 1000 + 2 * 2000 + 2 * 100 + 2 * 300));
    EXPECT_EQ(from0[7].rate_bps, 100'000'000'000u);                       // the core links
    EXPECT_EQ(from0[1].delay, std::chrono::nanoseconds(2 * 1000 + 100));  // one ToR
    EXPECT_EQ(from0[1].rate_bps, 200'000'000'000u);
}

TEST(Import, HtsimTopologyBuildsInTheSimulator) {
    std::string err;
    TopologyConfig c;
    c.kind = TopologyKind::kGraph;
    c.graph = parse_htsim_topology(kThreeTier, "t.topo", err)->graph;
    c.cable.rate_bps = 200'000'000'000;
    c.planes = 2;
    ASSERT_EQ(check_topology_config(c), "");
    Sim sim(1);
    Topology t(sim, c);
    ASSERT_EQ(t.host_count(), 8u);
    ASSERT_EQ(t.switch_count(), 2u * 12);
    ASSERT_EQ(t.cable_count(), 2u * 32);
    uint32_t per_tier[3] = {};
    for (size_t s = 0; s < t.switch_count(); ++s) ++per_tier[t.switch_tier(s)];
    EXPECT_EQ(per_tier[0], 8u);
    EXPECT_EQ(per_tier[1], 8u);
    EXPECT_EQ(per_tier[2], 8u);
    // A core has 2 aggregation switches x bundles of 2 below it, at 100 Gbit/s.
    for (size_t s = 0; s < t.switch_count(); ++s) {
        if (t.switch_tier(s) != 2) continue;
        ASSERT_EQ(t.switch_at(s).port_count(), 4u);
        for (size_t p = 0; p < 4; ++p)
            EXPECT_EQ(t.switch_at(s).port(p).rate_bps(), 100'000'000'000u);
    }
    EXPECT_EQ(t.cable(t.host_cable(3, 1)).a_to_b->config().delay, std::chrono::nanoseconds(1050));
    // ECMP towards host 7 (pod 1) from pod 0: ToR node 8 over its 2 aggregation switches,
    // aggregation node 12 over its 2 cores x bundles of 2, core node 16 down its bundle of 2
    // to pod 1's aggregation switch 14; within a ToR, the host's one port.
    auto sw = [&](uint32_t node) -> const Switch& {
        for (size_t i = 0; i < t.switch_count(); ++i)
            if (t.switch_at(i).name() == "topo/p0/sw" + std::to_string(node)) return t.switch_at(i);
        ADD_FAILURE() << "no switch for node " << node;
        return t.switch_at(0);
    };
    EXPECT_EQ(sw(8).next_hops(7).size(), 2u);
    EXPECT_EQ(sw(8).next_hops(1).size(), 1u);
    EXPECT_EQ(sw(12).next_hops(7).size(), 4u);
    EXPECT_EQ(sw(16).next_hops(7).size(), 2u);
    EXPECT_EQ(sw(14).next_hops(7).size(), 1u);  // down to ToR 11
}

TEST(Import, HtsimTopologyQueueSizes) {
    const std::string base =
        "Nodes 4\nTiers 2\nPodsize 4\nTier 0\nDownlink_speed_Gbps 100\nRadix_Down 2\n"
        "Radix_Up 2\nDownlink_Latency_ns 500\n";
    const std::string top =
        "Tier 1\nDownlink_speed_Gbps 100\nRadix_Down 2\nDownlink_Latency_ns 500\n";
    std::string err;
    const auto h = parse_htsim_topology(
        base + "Queue_Up 90000\nQueue_Down 90000\n" + top + "Queue_Down 90000\n", "q.topo", err);
    ASSERT_TRUE(h) << err;
    EXPECT_EQ(h->queue_bytes, 90000u);
    // Tier 1 of 2 has no uplinks: its Queue_Up and Radix_Up change nothing, as in htsim.
    const auto top_up = parse_htsim_topology(base + "Queue_Up 90000\nQueue_Down 90000\n" + top +
                                                 "Queue_Down 90000\nQueue_Up 5\nRadix_Up 3\n",
                                             "q.topo", err);
    ASSERT_TRUE(top_up) << err;
    EXPECT_EQ(top_up->queue_bytes, 90000u);
    EXPECT_EQ(top_up->graph.links.size(), h->graph.links.size());
    EXPECT_FALSE(parse_htsim_topology(
        base + "Queue_Up 90000\nQueue_Down 90000\n" + top + "Queue_Down 1000\n", "q.topo", err));
    EXPECT_EQ(
        err,
        "q.topo:15: Queue_Down of tier 1 1000 differs from Queue_Up of tier 0 90000 (line 9): the "
        "simulator has one buffer size for every switch port");
    EXPECT_FALSE(parse_htsim_topology(base + "Queue_Down 90000\n" + top, "q.topo", err));
    EXPECT_EQ(err.substr(0, err.find(':', 9)),
              "q.topo:9: Queue_Down of tier 0 is set but not Queue_Up of tier 0");
}

TEST(Import, HtsimTopologyErrorsNameFileLineAndKey) {
    const std::string ls = kLeafSpineTiny;  // lines: 1 Nodes, 2 Tiers, 3 Podsize, 5 Tier 0,
    // 6 speed, 7 Radix_Down, 8 Radix_Up, 9 latency, 10 switch latency, 11 Oversubscribed,
    // 13 Tier 1, 14 speed, 15 Radix_Down, 16 latency, 17 switch latency.
    auto edit = [&](const std::string& from, const std::string& to) {
        const size_t at = ls.find(from);
        EXPECT_NE(at, std::string::npos) << from;
        return ls.substr(0, at) + to + ls.substr(at + from.size());
    };
    const std::vector<std::pair<std::string, std::string>> cases = {
        {edit("Tiers 2", "Tiers 4"), "t:2: Tiers 4: htsim builds 2 or 3 tiers"},
        {edit("Tiers 2\n", ""), "t:4: the header has no `Tiers 2|3` before the first Tier"},
        {edit("Nodes 32", "Nodes 32x"), "t:1: Nodes '32x' is not an unsigned integer"},
        {edit("Tier 1\n", "Tier 2\n"),
         "t:13: Tier 2 in a topology of Tiers 2 (its tiers are 0 .. 1)"},
        {edit("Radix_Up 2", "Radix_Upp 2"), "t:8: unknown key 'Radix_Upp'"},
        {edit("Podsize 32\n", "Podsize 32\nRadix_Down 8\n"),
         "t:4: 'Radix_Down' before the first `Tier t` line"},
        {edit("Switch_Latency_ns 0\nOversubscribed", "Nodes 32\nOversubscribed"),
         "t:10: 'Nodes' after the first `Tier` line"},
        {edit("Radix_Up 2", "Radix_Up 2\nradix_up 2"),
         "t:9: Radix_Up of tier 0 again (line 8 sets it)"},
        {edit("Downlink_speed_Gbps 100\nRadix_Down 8", "Downlink_speed_Gbps 12.5\nRadix_Down 8"),
         "t:6: Downlink_speed_Gbps '12.5' is not an unsigned integer"},
        {edit("Downlink_Latency_ns 1000\nSwitch_Latency_ns 0\nOversubscribed",
              "Downlink_Latency_ns 0\nSwitch_Latency_ns 0\nOversubscribed"),
         "t:9: Downlink_Latency_ns 0 is outside 1..1000000000"},
        {edit("Radix_Up 2", "Radix_Up 2 3"), "t:8: expected `Radix_Up value`, got 3 fields"},
        {edit("Radix_Up 2", "Radix_Up"), "t:8: 'Radix_Up' without a value"},
        {edit("Radix_Up 2\n", ""), "t:5: Tier 0 has no Radix_Up"},
        {ls.substr(0, ls.find("Tier 1")), "t: no `Tier 1` section"},
        {edit("Podsize 32", "Podsize 16"),
         "t:3: Podsize 16 in a 2-tier topology must be Nodes 32 (htsim's leaf-spine is one pod"},
        {edit("Nodes 32", "Nodes 30"), "t:3: Nodes 30 is not a multiple of Podsize 32"},
        {edit("Oversubscribed 4", "Oversubscribed 4\nBundle 2"),
         "t:12: Bundle 2 of tier 0: htsim does not bundle"},
        {edit("Oversubscribed 4", "Oversubscribed 2"),
         "t:8: Radix_Down of tier 0 / Radix_Up (8 / 2, rounded down) is not its Oversubscribed 2"},
        {edit("Radix_Down 4", "Radix_Down 3"),
         "t:15: 8 ToR uplinks in 1 pods do not fill whole aggregation switches of Radix_Down of "
         "tier 1 (3)"},
        {edit("Radix_Down 4", "Radix_Down 8"),
         "t:8: Radix_Up of tier 0 is 2, but 1 aggregation switches per pod x tier 1's Bundle 1 is "
         "1"},
        {edit("Radix_Down 4", "Radix_Down 3\nBundle 2"),
         "t:16: Radix_Down of tier 1 (3) is not a multiple of its Bundle 2"},
        {edit("Radix_Down 4", "Radix_Down 4\nBundle 3"),
         "t:8: Radix_Up of tier 0 (2) is not a multiple of tier 1's Bundle 3"},
        {edit("Oversubscribed 4\n", "Oversubscribed 4\nQueue_Up 1000\n"),
         "t:12: Queue_Up of tier 0 is set but not Queue_Down of tier 0"},
    };
    for (const auto& [text, want] : cases) {
        std::string err;
        EXPECT_FALSE(parse_htsim_topology(text, "t", err)) << want;
        EXPECT_EQ(err.substr(0, want.size()), want);
    }
}

TEST(Import, HtsimTopologyThreeTierErrors) {
    const std::string three = kThreeTier;
    auto edit = [&](const std::string& from, const std::string& to) {
        const size_t at = three.find(from);
        EXPECT_NE(at, std::string::npos) << from;
        return three.substr(0, at) + to + three.substr(at + from.size());
    };
    std::string err;
    // Tier 1's Radix_Up is 4: 4 cores x Bundle 2 over 2 aggregation switches per pod.
    EXPECT_FALSE(parse_htsim_topology(edit("Radix_Up 4", "Radix_Up 2"), "t", err));
    EXPECT_EQ(
        err,
        "t:14: Radix_Up of tier 1 is 2, but 4 core switches x tier 2's Bundle 2 over 2 aggregation "
        "switches per pod is 4");
    EXPECT_FALSE(parse_htsim_topology(edit("Radix_Down 4", "Radix_Down 6"), "t", err));
    EXPECT_EQ(
        err,
        "t:20: 16 aggregation uplinks do not fill whole core switches of Radix_Down of tier 2 (6)");
    EXPECT_FALSE(parse_htsim_topology(edit("Radix_Up 4", "Radix_Up 5"), "t", err));
    EXPECT_EQ(err, "t:14: Radix_Up of tier 1 (5) is not a multiple of tier 2's Bundle 2");
    EXPECT_FALSE(parse_htsim_topology(edit("Bundle 2", "Bundle 2\nRadix_Up 1"), "t", err));
    EXPECT_EQ(err, "t:23: Radix_Up of tier 2: the core tier has no uplinks");
    // The 1024-host fat tree htsim ships (fat_tree_1024.topo): 128 ToRs and 128
    // aggregation switches in 16 pods, 64 cores.
    const auto big = parse_htsim_topology(
        "Nodes 1024\nTiers 3\nPodsize 64\nTier 0\nOversubscribed 1\nDownlink_speed_Gbps "
        "100\nRadix_Down 8\n"
        "Radix_Up 8\nDownlink_Latency_ns 1000\nSwitch_Latency_ns 0\nTier 1\nOversubscribed 1\n"
        "Downlink_speed_Gbps 100\nRadix_Down 8\nRadix_Up 8\nDownlink_Latency_ns "
        "1000\nSwitch_Latency_ns 0\n"
        "Bundle 1\nTier 2\nDownlink_speed_Gbps 100\nRadix_Down 16\nDownlink_Latency_ns 1000\n"
        "Switch_Latency_ns 0\nBundle 1\n",
        "fat_tree_1024.topo", err);
    ASSERT_TRUE(big) << err;
    EXPECT_EQ(big->graph.nodes, 1024u + 128 + 128 + 64);
    EXPECT_EQ(big->graph.links.size(), 1024u + 128 * 8 + 128 * 8);
}

TEST(Import, HtsimMatrixOnAnHtsimTopologyNamesEveryNode) {
    std::string err;
    TopologyConfig c;
    c.kind = TopologyKind::kGraph;
    c.graph = parse_htsim_topology(kThreeTier, "t.topo", err)->graph;
    const NodeMap nodes = NodeMap::of(c, 8);
    EXPECT_EQ(nodes.htsim_nodes, 8u);
    EXPECT_TRUE(parse_htsim_cm("Nodes 8\nConnections 1\n0->7 start 0 size 1\n", "m.cm", nodes, err))
        << err;
    EXPECT_FALSE(
        parse_htsim_cm("Nodes 4\nConnections 1\n0->1 start 0 size 1\n", "m.cm", nodes, err));
    EXPECT_EQ(err, "m.cm:1: Nodes 4, but the htsim topology has 8 (htsim refuses a mismatch)");
    EXPECT_FALSE(
        parse_htsim_cm("Nodes 8\nConnections 1\n0->9 start 0 size 1\n", "m.cm", nodes, err));
    EXPECT_EQ(err, "m.cm:3: dst node 9 is a switch, not a host");
}

// Mutated htsim files (a value replaced, a line dropped or repeated) either build a graph
// the simulator accepts, with Nodes hosts of one link each, or are refused in one line
// naming the file: never a crash, an exception or a graph the builder would reject.
TEST(Import, HtsimTopologyMutationsBuildOrFailInOneLine) {
    const uint64_t seed = testing::test_seed(18);
    SCOPED_TRACE(testing::seed_note(seed));
    Rng rng(seed);
    const std::vector<std::string> values = {"0",  "1",   "2",    "3", "4",  "8",   "16",
                                             "32", "100", "4096", "x", "-1", "3.5", "99999999999"};
    int built = 0, refused = 0;
    for (int i = 0; i < 3000; ++i) {
        std::vector<std::string> lines;
        std::istringstream in(rng.uniform(2) ? kLeafSpineTiny : kThreeTier);
        for (std::string l; std::getline(in, l);) lines.push_back(l);
        for (uint64_t m = 0, n = 1 + rng.uniform(3); m < n && !lines.empty(); ++m) {
            const size_t at = rng.uniform(lines.size());
            const size_t space = lines[at].find(' ');
            switch (rng.uniform(3)) {
                case 0:
                    if (space != std::string::npos)
                        lines[at] =
                            lines[at].substr(0, space + 1) + values[rng.uniform(values.size())];
                    break;
                case 1:
                    lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(at));
                    break;
                default:
                    lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(at),
                                 lines[rng.uniform(lines.size())]);
            }
        }
        std::string text;
        uint64_t nodes = 0;
        for (const std::string& l : lines) {
            text += l + "\n";
            if (nodes == 0 && l.rfind("Nodes ", 0) == 0)
                nodes = std::strtoull(l.c_str() + 6, nullptr, 10);
        }
        std::string err;
        const auto h = parse_htsim_topology(text, "t.topo", err);
        if (!h) {
            ++refused;
            EXPECT_EQ(err.rfind("t.topo", 0), 0u) << err;
            EXPECT_EQ(err.find('\n'), std::string::npos) << err;
            continue;
        }
        ++built;
        TopologyConfig c;
        c.kind = TopologyKind::kGraph;
        c.graph = h->graph;
        c.cable.rate_bps = h->graph.links.at(0).rate_bps;
        EXPECT_EQ(check_topology_config(c), "") << text;
        EXPECT_EQ(h->graph.host_nodes.size(), nodes) << text;
        EXPECT_EQ(graph_paths(h->graph, 0).back().hops > 0, true) << text;  // connected
    }
    std::printf("htsim mutations: %d built, %d refused\n", built, refused);
    EXPECT_GT(built, 100);
    EXPECT_GT(refused, 100);
}

// Random consistent shapes, written as htsim files: P pods of T ToRs with R hosts each and A
// aggregation switches (bundles of B1 from each ToR), tier 0 oversubscribed O0; with 3
// tiers, tier 1 oversubscribed O1 and cores reached in bundles of B2. The graph has
// htsim's counts: every ToR R hosts and A x B1 uplinks, every aggregation switch T x B1
// downlinks (and its uplinks on 3 tiers), every core one bundle per pod.
TEST(Import, HtsimTopologyRandomShapesHaveHtsimsCounts) {
    const uint64_t seed = testing::test_seed(1800);
    SCOPED_TRACE(testing::seed_note(seed));
    Rng rng(seed);
    for (int i = 0; i < 300; ++i) {
        const bool three = rng.uniform(2) == 1;
        const uint64_t pods = three ? rng.uniform_range(1, 4) : 1, tors = rng.uniform_range(1, 4);
        const uint64_t aggs = rng.uniform_range(1, 3), b1 = rng.uniform_range(1, 2);
        const uint64_t o0 = rng.uniform_range(1, 2), radix_up0 = aggs * b1, hosts = radix_up0 * o0;
        // 3 tiers: an aggregation switch has T x B1 downlinks and T x B1 / O1 uplinks, in
        // bundles of B2 (O1 and B2 drawn among the divisors that keep them whole).
        std::vector<uint64_t> o1s, b2s;
        for (uint64_t d = 1; d <= tors * b1; ++d)
            if (tors * b1 % d == 0) o1s.push_back(d);
        const uint64_t o1 = o1s[rng.uniform(o1s.size())], radix_up1 = tors * b1 / o1;
        for (uint64_t d = 1; d <= radix_up1; ++d)
            if (radix_up1 % d == 0) b2s.push_back(d);
        const uint64_t b2 = b2s[rng.uniform(b2s.size())], cores = three ? radix_up1 * aggs / b2 : 0;
        const uint64_t nodes = pods * tors * hosts, latency = rng.uniform_range(1, 3000);
        if (nodes < 2) continue;  // htsim needs two hosts
        std::string text = "Nodes " + std::to_string(nodes) + "\nTiers " + (three ? "3" : "2") +
                           "\nPodsize " + std::to_string(tors * hosts) + "\n";
        text += "Tier 0\nDownlink_speed_Gbps 400\nDownlink_Latency_ns " + std::to_string(latency) +
                "\nRadix_Down " + std::to_string(hosts) + "\nRadix_Up " +
                std::to_string(radix_up0) + "\nOversubscribed " + std::to_string(o0) + "\n";
        text += "Tier 1\nDownlink_speed_Gbps 400\nDownlink_Latency_ns 1000\nRadix_Down " +
                std::to_string(tors * b1) + "\nBundle " + std::to_string(b1) + "\n";
        if (three)
            text += "Radix_Up " + std::to_string(radix_up1) + "\nOversubscribed " +
                    std::to_string(o1) +
                    "\nTier 2\nDownlink_speed_Gbps 400\nDownlink_Latency_ns 1000\nRadix_Down " +
                    std::to_string(pods * b2) + "\nBundle " + std::to_string(b2) + "\n";
        SCOPED_TRACE(text);
        std::string err;
        const auto h = parse_htsim_topology(text, "r.topo", err);
        ASSERT_TRUE(h) << err;
        const GraphSpec& g = h->graph;
        ASSERT_EQ(g.host_nodes.size(), nodes);
        ASSERT_EQ(g.nodes, nodes + pods * tors + pods * aggs + cores);
        std::vector<uint64_t> down(g.nodes, 0), up(g.nodes, 0);
        for (const GraphLink& l : g.links) {
            ++up[l.a];  // a is the lower end
            ++down[l.b];
            EXPECT_EQ(l.rate_bps, 400'000'000'000u);
            EXPECT_EQ(l.delay, std::chrono::nanoseconds(l.a < nodes ? latency : 1000));
        }
        for (uint64_t n = 0; n < g.nodes; ++n) {
            if (n < nodes) {
                EXPECT_EQ(up[n], 1u) << "host " << n;
            } else if (g.tiers[n] == 0) {
                EXPECT_EQ(down[n], hosts) << "ToR " << n;
                EXPECT_EQ(up[n], radix_up0) << "ToR " << n;
            } else if (g.tiers[n] == 1) {
                EXPECT_EQ(down[n], tors * b1) << "aggregation " << n;
                EXPECT_EQ(up[n], three ? radix_up1 : 0) << "aggregation " << n;
            } else {
                EXPECT_EQ(down[n], pods * b2) << "core " << n;
            }
        }
        TopologyConfig c;
        c.kind = TopologyKind::kGraph;
        c.graph = g;
        c.cable.rate_bps = 400'000'000'000;
        ASSERT_EQ(check_topology_config(c), "");
        const std::vector<GraphPath> from0 = graph_paths(g, 0);
        for (size_t dst = 1; dst < from0.size(); ++dst) EXPECT_GT(from0[dst].hops, 0u) << dst;
    }
}

}  // namespace
}  // namespace mroce::sim
