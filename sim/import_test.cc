// sim/import_test.cc — the importers' parsers (sim/import.h) and the graph topology they
// build. End to end through `mroce sim`: tests/sim/import_test.py.
#include "sim/import.h"

#include <gtest/gtest.h>

#include "sim/event_queue.h"

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

}  // namespace
}  // namespace mroce::sim
