// tests/sim/traffic_class_test.cc — per-flow traffic classes through a PFC fabric, both
// engines ([STREAM-14] for MetaRoCE, the per-QP class for RoCEv2): an incast in class 0
// keeps PFC pausing class 0 while two class-1 flows cross the paused points (a spine port
// towards the incast's leaf, and an incast sender's own NIC). Class 1 is not held up by
// class 0's pauses: its flows finish near their ideal time and no PAUSE is ever sent for
// class 1; PFC still drops nothing. The same flows in class 0 are slowed down, so the
// bounds below do tell the two apart. And a scenario file's per-flow classes reach the
// packets of both engines.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "sim/scenario.h"
#include "sim/scenario_run.h"
#include "sim/test_seed.h"

namespace mroce::sim {
namespace {

// Leaf 0 = hosts 0-5, leaf 1 = hosts 6-11. Flows 0-8: incast of hosts 1-4 and 6-10 into
// host 0 in class 0; flow 9: host 11 -> host 5 (through a spine port that class 0 pauses);
// flow 10: host 1 -> host 7 (host 1's NIC is paused for class 0). Both in class `cls`.
std::string two_class_scenario(int cls) {
    std::string flows;
    for (int src : {1, 2, 3, 4, 6, 7, 8, 9, 10})
        flows += "  { src = " + std::to_string(src) + ", dst = 0, bytes = 1000000 },\n";
    const std::string c = std::to_string(cls);
    flows += "  { src = 11, dst = 5, bytes = 1000000, start_us = 100, traffic_class = " + c + " },\n";
    flows += "  { src = 1, dst = 7, bytes = 1000000, start_us = 100, traffic_class = " + c + " },\n";
    return R"(
[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 6
rate_gbps = 100
delay_us = 1
buffer_bytes = 1048576
traffic_classes = 2
[topology.ecn]
mode = "red"
kmin_bytes = 20000
kmax_bytes = 200000
pmax = 0.01
[topology.pfc]
enabled = true
classes = [0, 1]
xoff_bytes = 24576
xon_bytes = 12288
headroom_bytes = 98304            # 2 x 1 us at the 300 Gbit/s uplinks + 2 MTU
[mroce]
pfc = true
[rocev2]
pfc = true
[workload]
kind = "explicit"
message_bytes = 65536
flows = [
)" + flows + "]\n[run]\ntime_limit_us = 20000\n[output]\nsample_us = 0\n";
}

RunOutput run(const std::string& protocol, int cls, uint64_t seed, std::vector<std::string> sets = {}) {
    std::string err;
    sets.push_back("protocol=" + protocol);
    auto s = parse_scenario(two_class_scenario(cls), "two-class.toml", sets, std::nullopt, err);
    EXPECT_TRUE(s) << err;
    RunOutput out;
    if (!s) return out;
    EXPECT_TRUE(run_spec(s->runs.at(0), seed, out, err)) << err;
    return out;
}

double slowdown(const FlowOutcome& o) {
    return static_cast<double>(o.finish_ps - o.start_ps) / static_cast<double>(o.ideal_ps);
}

class TwoClasses : public ::testing::TestWithParam<std::string> {};

TEST_P(TwoClasses, APausedClassDoesNotHoldUpAnother) {
    const uint64_t seed = testing::test_seed(41);
    SCOPED_TRACE(testing::seed_note(seed));
    const RunOutput out = run(GetParam(), 1, seed);
    const RunMetrics& m = out.metrics;
    ASSERT_EQ(m.completed_flows, 11u) << m.stop_reason;
    EXPECT_EQ(m.failed_ops, 0u);
    // PFC never drops, in either class; nothing else drops on this fabric.
    EXPECT_EQ(m.pfc_overflow_drops, 0u);
    EXPECT_EQ(m.drops, 0u);
    // Pauses only for the incast's class.
    ASSERT_EQ(m.by_class.size(), 2u);
    EXPECT_EQ(m.by_class[0].traffic_class, 0);
    EXPECT_GT(m.by_class[0].pauses, 0u);
    EXPECT_EQ(m.by_class[1].traffic_class, 1);
    EXPECT_EQ(m.by_class[1].pauses, 0u);
    EXPECT_EQ(m.by_class[1].flows, 2u);
    EXPECT_EQ(m.pauses, m.by_class[0].pauses);
    // The class-1 flows ran while class 0 was paused. Flow 9's sender is quiet: it crosses
    // class 0's paused spine port at nearly its ideal time: 1.32-1.33 over seeds 1-8 and 41
    // (1.28 before spec 2.0, whose simultaneous open waits for the HELLO_ACK, [CONN-7]:
    // half a round trip more for this short flow).
    // Flow 10 shares host 1's NIC with a class-0 flow, which takes its turns whenever it is
    // not paused, and what host 1 polled for class 0 during a pause leaves first after the
    // resume (sim/host.h), so it gets between half and all of the port (1.25-2.07).
    for (uint32_t f : {9u, 10u}) {
        const FlowOutcome& o = out.flows[f];
        EXPECT_EQ(o.flow.traffic_class, 1);
        EXPECT_LT(o.finish_ps, out.flows[0].finish_ps) << "flow " << f << " outlived the incast";
    }
    EXPECT_LE(slowdown(out.flows[9]), 1.4);
    EXPECT_LE(slowdown(out.flows[10]), 2.5);
    EXPECT_GT(m.by_class[0].slowdown_p50, 4.0);  // the incast itself is 9-fold oversubscribed
}

// The control: the same two flows in class 0 share the incast's pauses; the quiet
// sender's flow is slowed down far beyond the bound above (4.6-7.6 over seeds 1-8).
// MetaRoCE runs it without its receiver's hint: with the hint the incast senders are paced
// to their shares, the pauses nearly vanish and there is nothing left to control for.
TEST_P(TwoClasses, TheSameFlowsInThePausedClassAreHeldUp) {
    const uint64_t seed = testing::test_seed(41);
    SCOPED_TRACE(testing::seed_note(seed));
    const RunOutput out = run(GetParam(), 0, seed, {"mroce.rate_hint=false"});
    const RunMetrics& m = out.metrics;
    ASSERT_EQ(m.completed_flows, 11u) << m.stop_reason;
    EXPECT_EQ(m.pfc_overflow_drops, 0u);
    ASSERT_EQ(m.by_class.size(), 1u);  // class 1 has neither flows nor pauses
    EXPECT_GT(slowdown(out.flows[9]), 3.0);
}

// A scenario file's per-flow classes reach the packets: every datagram between two hosts
// (data one way, ACKs and CNPs the other) leaves in its flow's class, and the switches
// queue it there.
TEST_P(TwoClasses, PerFlowClassesFromTheFileReachThePackets) {
    const uint64_t seed = testing::test_seed(42);
    SCOPED_TRACE(testing::seed_note(seed));
    std::string err;
    auto s = parse_scenario(R"(
[topology]
kind = "single_switch"
hosts = 5
traffic_classes = 4
[workload]
kind = "explicit"
traffic_class = 1
flows = [
  { src = 0, dst = 1, bytes = 300000, traffic_class = 2 },
  { src = 2, dst = 3, bytes = 300000, traffic_class = 3 },
  { src = 4, dst = 0, bytes = 300000 },
]
)", "classes.toml", {"protocol=" + GetParam()}, std::nullopt, err);
    ASSERT_TRUE(s) << err;
    // (sender host, receiver host) -> classes of the datagrams between them.
    std::map<std::pair<uint32_t, uint32_t>, std::set<uint8_t>> seen;
    uint64_t mismatched = 0;
    const RunHook hook = [&](Topology& topo, const RunSpec&) {
        for (uint32_t h = 0; h < topo.host_count(); ++h)
            topo.host(h).set_rx_tap([&](const Packet& p, const Host& to) {
                mismatched += p.traffic_class != p.meta.traffic_class;
                seen[{host_index_of(p.meta.src.ipv4_host_order()), to.index()}].insert(p.traffic_class);
            });
        return std::string();
    };
    RunOutput out;
    ASSERT_TRUE(run_spec(s->runs.at(0), seed, out, err, hook)) << err;
    ASSERT_EQ(out.metrics.completed_flows, 3u);
    EXPECT_EQ(mismatched, 0u);
    using Seen = std::map<std::pair<uint32_t, uint32_t>, std::set<uint8_t>>;
    EXPECT_EQ(seen, (Seen{{{0, 1}, {2}}, {{1, 0}, {2}}, {{2, 3}, {3}}, {{3, 2}, {3}}, {{4, 0}, {1}}, {{0, 4}, {1}}}));
}

INSTANTIATE_TEST_SUITE_P(Protocols, TwoClasses, ::testing::Values("mroce", "rocev2"));

}  // namespace
}  // namespace mroce::sim
