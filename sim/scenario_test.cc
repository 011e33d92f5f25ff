// sim/scenario_test.cc — scenario parsing: defaults, overrides, sweeps, one-line errors.
#include "sim/scenario.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

namespace mroce::sim {
namespace {

const char* kBase = R"(name = "t"
seed = 7
protocol = "mroce"
[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 4
rate_gbps = 25
delay_us = 2
[workload]
kind = "incast"
bytes = 1000
)";

std::optional<Scenario> parse(const std::string& text, std::string& err, std::vector<std::string> sets = {}) {
    return parse_scenario(text, "s.toml", sets, std::nullopt, err);
}

TEST(Scenario, ReadsValuesAndDefaults) {
    std::string err;
    auto s = parse(kBase, err);
    ASSERT_TRUE(s) << err;
    EXPECT_EQ(s->name, "t");
    EXPECT_EQ(s->seed, 7u);
    ASSERT_EQ(s->runs.size(), 1u);
    const RunSpec& r = s->runs[0];
    EXPECT_EQ(r.label, "mroce");
    EXPECT_EQ(r.topology.kind, TopologyKind::kLeafSpine);
    EXPECT_EQ(r.topology.cable.rate_bps, 25'000'000'000u);
    EXPECT_EQ(r.topology.cable.delay, std::chrono::microseconds(2));
    EXPECT_EQ(r.workload.kind, WorkloadKind::kIncast);
    EXPECT_EQ(r.workload.bytes, 1000u);
    EXPECT_EQ(r.rocev2.config.port_choice, rocev2::PortChoice::kSourcePort);
    EXPECT_TRUE(r.params.empty());
    auto rr = parse(kBase, err, {"rocev2.qp_ports=round_robin"});
    ASSERT_TRUE(rr) << err;
    EXPECT_EQ(rr->runs[0].rocev2.config.port_choice, rocev2::PortChoice::kRoundRobin);
}

TEST(Scenario, SetOverridesByDottedPathAndBecomesAParam) {
    std::string err;
    auto s = parse(kBase, err, {"workload.bytes=65536", "fabric.loss=0.01", "protocol=rocev2", "rocev2.qps_per_pair=4"});
    ASSERT_TRUE(s) << err;
    const RunSpec& r = s->runs[0];
    EXPECT_EQ(r.workload.bytes, 65536u);
    EXPECT_DOUBLE_EQ(r.loss, 0.01);
    EXPECT_EQ(r.protocol, Protocol::kRocev2);
    EXPECT_EQ(r.rocev2.qps_per_pair, 4u);
    ASSERT_EQ(r.params.size(), 4u);
    EXPECT_EQ(r.params[0].first, "workload.bytes");
    EXPECT_EQ(std::get<int64_t>(r.params[0].second), 65536);
}

// spec §4.9 [INT-1]: mroce.integrity makes every host announce INTEGRITY; the endpoint's
// default otherwise.
TEST(Scenario, IntegrityFollowsTheEndpointDefaultUnlessSet) {
    std::string err;
    auto plain = parse(kBase, err);
    ASSERT_TRUE(plain) << err;
    EXPECT_EQ(plain->runs[0].mroce.endpoint.integrity_check, core::EndpointConfig{}.integrity_check);
    for (const bool on : {true, false}) {
        auto s = parse(kBase, err, {std::string("mroce.integrity=") + (on ? "true" : "false")});
        ASSERT_TRUE(s) << err;
        EXPECT_EQ(s->runs[0].mroce.endpoint.integrity_check, on);
    }
}

TEST(Scenario, SweepRunsTheCartesianProductWithUniqueLabels) {
    std::string err;
    const std::string text = std::string(kBase) + "[sweep]\nprotocol = [\"mroce\", \"rocev2\"]\nfabric.loss = [0, 0.001, 0.01]\n";
    auto s = parse(text, err);
    ASSERT_TRUE(s) << err;
    ASSERT_EQ(s->runs.size(), 6u);
    std::set<std::string> labels;
    for (const RunSpec& r : s->runs) {
        labels.insert(r.label);
        EXPECT_EQ(r.params.size(), 2u);
        EXPECT_EQ(r.label.find('/'), std::string::npos);
    }
    EXPECT_EQ(labels.size(), 6u);
    // Keys in table order (fabric.loss, protocol), the last varying fastest.
    EXPECT_EQ(s->runs[0].label, "mroce_loss-0");
    EXPECT_EQ(s->runs[1].label, "rocev2_loss-0");
    EXPECT_EQ(s->runs[5].protocol, Protocol::kRocev2);
    EXPECT_DOUBLE_EQ(s->runs[5].loss, 0.01);
}

// A dimension of cases sets several keys per point, so one sweep holds runs that are not a
// cartesian product; a key one case sets and the next does not goes back to the file's.
TEST(Scenario, SweepCasesSetSeveralKeysAndRestoreTheRest) {
    std::string err;
    const std::string text = std::string(kBase) + R"([rocev2]
qps_per_pair = 2
[sweep]
collective = [
  { label = "ring", workload = { kind = "ring_allreduce", bytes = 4096 } },
  { label = "a2a", workload.kind = "all_to_all", workload.bytes = 512 },
]
fabric.loss = [0, 0.01]
stack = [
  { label = "mroce", protocol = "mroce" },
  { label = "8qp", protocol = "rocev2", rocev2.qps_per_pair = 8 },
  { label = "dflt", protocol = "rocev2" },
]
)";
    auto s = parse(text, err);
    ASSERT_TRUE(s) << err;
    ASSERT_EQ(s->runs.size(), 12u);
    const RunSpec& ring = s->runs[1];
    EXPECT_EQ(ring.label, "rocev2_collective-ring_loss-0_stack-8qp");
    EXPECT_EQ(ring.workload.kind, WorkloadKind::kRingAllreduce);
    EXPECT_EQ(ring.workload.bytes, 4096u);
    EXPECT_EQ(ring.protocol, Protocol::kRocev2);
    EXPECT_EQ(ring.rocev2.qps_per_pair, 8u);
    // The next case sets no qps_per_pair: the file's 2, not the previous case's 8.
    EXPECT_EQ(s->runs[2].label, "rocev2_collective-ring_loss-0_stack-dflt");
    EXPECT_EQ(s->runs[2].rocev2.qps_per_pair, 2u);
    const RunSpec& a2a = s->runs[9];
    EXPECT_EQ(a2a.label, "mroce_collective-a2a_loss-0.01_stack-mroce");
    EXPECT_EQ(a2a.workload.kind, WorkloadKind::kAllToAll);
    EXPECT_EQ(a2a.workload.bytes, 512u);
    EXPECT_DOUBLE_EQ(a2a.loss, 0.01);
    // params: each dimension's label, then the keys its case set.
    ASSERT_EQ(ring.params.size(), 7u);
    EXPECT_EQ(ring.params[0].first, "collective");
    EXPECT_EQ(std::get<std::string>(ring.params[0].second), "ring");
    EXPECT_EQ(ring.params[1].first, "workload.bytes");  // toml++ orders a table's keys
    EXPECT_EQ(ring.params[2].first, "workload.kind");
    EXPECT_EQ(ring.params[3].first, "fabric.loss");
    EXPECT_EQ(ring.params[6].first, "rocev2.qps_per_pair");
    EXPECT_EQ(std::get<int64_t>(ring.params[6].second), 8);
    // A case's key with a wrong value is named like any other key.
    EXPECT_FALSE(parse(std::string(kBase) + "[sweep]\nx = [{ label = \"a\", workload.bytes = \"big\" }]\n", err));
    EXPECT_NE(err.find("'workload.bytes' must be an integer"), std::string::npos) << err;
}

// Flows of an explicit workload keep their own traffic class ([STREAM-14]); the rest
// take the workload's; PFC's lossless classes are a list.
TEST(Scenario, PerFlowTrafficClassesAndLosslessClasses) {
    const std::string text = R"(
[topology]
traffic_classes = 3
[topology.pfc]
enabled = true
classes = [0, 2]
[rocev2]
pfc = true
[workload]
kind = "explicit"
traffic_class = 1
flows = [{src = 0, dst = 1, traffic_class = 2}, {src = 1, dst = 2}, {src = 2, dst = 3, traffic_class = 0}]
)";
    std::string err;
    auto s = parse(text, err, {"protocol=rocev2"});
    ASSERT_TRUE(s) << err;
    const RunSpec& r = s->runs[0];
    ASSERT_EQ(r.workload.flows.size(), 3u);
    EXPECT_EQ(r.workload.flows[0].traffic_class, 2);
    EXPECT_EQ(r.workload.flows[1].traffic_class, 1);  // the workload's
    EXPECT_EQ(r.workload.flows[2].traffic_class, 0);
    EXPECT_EQ(r.topology.switches.pfc.lossless_classes, 0b101);
    auto d = parse("[topology.pfc]\nenabled = true\n[rocev2]\npfc = true\n", err, {"protocol=rocev2"});
    ASSERT_TRUE(d) << err;
    EXPECT_EQ(d->runs[0].topology.switches.pfc.lossless_classes, 0b1);  // class 0 by default
}

// topology.class_queues maps traffic classes onto egress queues: two classes in the one
// queue of a traffic_classes = 1 fabric; its length bounds the flows' classes; PFC refuses
// a shared queue only in a run that uses PFC.
TEST(Scenario, ClassQueuesMapClassesOntoQueues) {
    const std::string text = R"(
[topology]
traffic_classes = 1
class_queues = [0, 0]
[topology.pfc]
enabled = true
[rocev2]
pfc = false
[workload]
kind = "explicit"
flows = [{src = 0, dst = 1, traffic_class = 1}, {src = 2, dst = 1}]
)";
    std::string err;
    for (const char* protocol : {"protocol=mroce", "protocol=rocev2"}) {
        auto s = parse(text, err, {protocol});
        ASSERT_TRUE(s) << protocol << ": " << err;
        const SwitchConfig& sw = s->runs[0].topology.switches;
        EXPECT_EQ(sw.classes(), 2);
        EXPECT_EQ(sw.class_queue[0], 0);
        EXPECT_EQ(sw.class_queue[1], 0);
        EXPECT_FALSE(sw.class_queue_identity());
        EXPECT_EQ(s->runs[0].workload.flows[0].traffic_class, 1);
    }
    // Without the key: the identity, one class per queue.
    auto d = parse("[topology]\ntraffic_classes = 3\n", err);
    ASSERT_TRUE(d) << err;
    EXPECT_EQ(d->runs[0].topology.switches.classes(), 3);
    EXPECT_TRUE(d->runs[0].topology.switches.class_queue_identity());
    // The identity listed explicitly is accepted with PFC.
    d = parse("[topology]\ntraffic_classes = 2\nclass_queues = [0, 1]\n[topology.pfc]\nenabled = true\n",
              err, {"protocol=rocev2"});
    ASSERT_TRUE(d) << err;
    // A run that uses PFC refuses a shared queue, naming why.
    EXPECT_FALSE(parse(text, err, {"protocol=rocev2", "rocev2.pfc=true"}));
    EXPECT_NE(err.find("topology: PFC needs each class in its own queue"), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

TEST(Scenario, ErrorsAreOneLineAndNameTheKey) {
    struct Case {
        std::string text;
        std::string expect;
    };
    const std::vector<Case> cases = {
        {std::string(kBase) + "colour = 3\n", "s.toml:14: unknown key 'workload.colour'"},
        {"[topology]\nleaves = \"two\"\n", "s.toml:2: 'topology.leaves' must be an integer"},
        {"[topology]\nkind = \"torus\"\n", "'topology.kind' must be one of single_switch|leaf_spine|fat_tree|hpcc|htsim, not 'torus'"},
        {"[fabric]\nloss = 1.5\n", "s.toml:2: 'fabric.loss' must be in [0, 1]"},
        {"[rocev2]\nqp_ports = \"spread\"\n", "s.toml:2: 'rocev2.qp_ports' must be one of source_port|round_robin, not 'spread'"},
        {"[topology.ecn]\nmode = \"red\"\nkmn_bytes = 5\n", "s.toml:3: unknown key 'topology.ecn.kmn_bytes'"},
        {"[[faults]]\nkind = \"plane_down\"\nplane = 3\n", "'faults[0].plane' must be in 0..0"},
        {"[[faults]]\nkind = \"plane_down\"\nport = \"spine0/p1\"\n", "'faults[0].port' applies to cable faults"},
        {"[[faults]]\nkind = \"loss\"\nport = 3\n", "'faults[0].port' must be a switch port name"},
        {"[[faults]]\nkind = \"burst_loss\"\n", "'faults[0].p_good_to_bad' must be positive"},
        {"[[faults]]\nkind = \"burst_loss\"\np_good_to_bad = 0.01\np_bad_to_good = 0\n",
         "'faults[0].p_bad_to_good' must be positive"},
        {"[[faults]]\nkind = \"burst_loss\"\np_good_to_bad = 2\n", "'faults[0].p_good_to_bad' must be in [0, 1]"},
        {"[workload]\nkind = \"background\"\n", "'workload.cdf' is required"},
        {"[sweep]\nfabric.loss = 0.1\n", "'sweep.fabric.loss' must be a non-empty array"},
        {"[sweep]\nx = [{ label = \"a\", fabric.loss = 0.1 }, 3]\n", "s.toml:2: 'sweep.x' mixes tables (cases) and values"},
        {"[sweep]\nx = [3, { label = \"a\" }]\n", "s.toml:2: 'sweep.x' mixes tables (cases) and values"},
        {"[sweep]\nx = [{ fabric.loss = 0.1 }]\n", "'sweep.x': every case needs a 'label'"},
        {"[sweep]\nx = [{ label = 1, fabric.loss = 0.1 }]\n", "'sweep.x': a case's 'label' must be a non-empty string"},
        {"[sweep]\nx = [{ label = \"a\" }]\n", "'sweep.x': case 'a' sets no key"},
        {"[sweep]\nx = [{ label = \"a\", fabric.loss = 0 }, { label = \"a\", fabric.loss = 1 }]\n",
         "'sweep.x': two cases are labelled 'a'"},
        {"[sweep]\nfabric.loss = [0]\nx = [{ label = \"a\", fabric.loss = 0.1 }]\n",
         "'sweep.x' sets 'fabric.loss', which another sweep key sets too"},
        {"[workload\n", "s.toml:1:"},
        {"[workload]\nkind = \"explicit\"\nflows = [{src = 0, dst = 1, depends_on = [0]}]\n",
         "'workload.flows[0].depends_on' must list ids of earlier flows"},
        {"[workload]\nkind = \"explicit\"\nflows = [{src = 0, dst = 1, traffic_class = 2}]\n",
         "s.toml:3: 'workload.flows[0].traffic_class' must be below topology.traffic_classes (1)"},
        {"[topology]\ntraffic_classes = 2\n[topology.pfc]\nenabled = true\nclasses = [0, 2]\n",
         "s.toml:5: 'topology.pfc.classes' must list classes below topology.traffic_classes (2)"},
        {"[topology.pfc]\nenabled = true\nclasses = []\n", "'topology.pfc.classes' must not be empty"},
        {"[topology]\nclass_queues = []\n", "s.toml:2: 'topology.class_queues' must list 1..8 queues"},
        {"[topology]\nclass_queues = [0, 0, 0, 0, 0, 0, 0, 0, 0]\n", "'topology.class_queues' must list 1..8 queues"},
        {"[topology]\ntraffic_classes = 2\nclass_queues = [0, 2]\n",
         "s.toml:3: 'topology.class_queues' must list queues below topology.traffic_classes (2)"},
        {"[topology]\nclass_queues = [\"a\"]\n", "'topology.class_queues' must list queues below"},
        {"[topology]\nclass_queues = [0, 0]\n[workload]\nkind = \"explicit\"\nflows = [{src = 0, dst = 1, traffic_class = 2}]\n",
         "'workload.flows[0].traffic_class' must be below the classes topology.class_queues maps (2)"},
        {"[topology]\nclass_queues = [0, 0]\n[workload]\ntraffic_class = 2\n",
         "'workload.traffic_class' must be below the classes topology.class_queues maps (2)"},
    };
    for (const Case& c : cases) {
        std::string err;
        EXPECT_FALSE(parse(c.text, err)) << c.text;
        EXPECT_NE(err.find(c.expect), std::string::npos) << "got: " << err;
        EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    }
    std::string err;
    EXPECT_FALSE(parse(kBase, err, {"nokey"}));
    EXPECT_EQ(err, "--set 'nokey': expected key=value");
    EXPECT_FALSE(parse(kBase, err, {"topology.planes=0"}));
    EXPECT_NE(err.find("'topology.planes' must be in 1..16"), std::string::npos) << err;
}

TEST(Scenario, HtsimTopologyFileGivesTheNetwork) {
    // A scenario beside its topology file (a fresh directory, so paths resolve as for a file).
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("mroce-htsim-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string topo =
        "Nodes 4\nTiers 2\nPodsize 4\nTier 0\nDownlink_speed_Gbps 25\nRadix_Down 2\n"
        "Radix_Up 2\nDownlink_Latency_ns 500\n";
    const std::string top =
        "Tier 1\nDownlink_speed_Gbps 25\nRadix_Down 2\nDownlink_Latency_ns 700\n";
    std::ofstream(dir / "plain.topo") << topo << top;
    std::ofstream(dir / "queues.topo") << topo << "Queue_Up 50000\nQueue_Down 50000\n"
                                       << top << "Queue_Down 50000\n";
    const std::string name = (dir / "s.toml").string();
    auto parse_in_dir = [&](const std::string& text, std::string& err) {
        return parse_scenario(text, name, {}, std::nullopt, err);
    };
    std::string err;
    auto s = parse_in_dir(
        "[topology]\nkind = \"htsim\"\nfile = \"plain.topo\"\nbuffer_bytes = 70000\n", err);
    ASSERT_TRUE(s) << err;
    const TopologyConfig& t = s->runs[0].topology;
    EXPECT_EQ(t.kind, TopologyKind::kGraph);
    EXPECT_EQ(t.graph.host_nodes.size(), 4u);
    EXPECT_EQ(t.cable.rate_bps, 25'000'000'000u);             // the hosts' line rate
    EXPECT_EQ(t.cable.delay, std::chrono::nanoseconds(700));  // the longest link
    EXPECT_EQ(t.switches.buffer.port_bytes, 70000u);
    s = parse_in_dir("[topology]\nkind = \"htsim\"\nfile = \"queues.topo\"\n", err);
    ASSERT_TRUE(s) << err;
    EXPECT_EQ(s->runs[0].topology.switches.buffer.port_bytes, 50000u);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"[topology]\nkind = \"htsim\"\n", "'topology.file' is required by kind = \"htsim\""},
        {"[topology]\nkind = \"htsim\"\nfile = \"plain.topo\"\nk = 8\n",
         ":4: 'topology.k' does not apply to kind = \"htsim\" (the file gives the network)"},
        {"[topology]\nkind = \"htsim\"\nfile = \"plain.topo\"\nrate_gbps = 100\n",
         ":4: 'topology.rate_gbps' does not apply to kind = \"htsim\""},
        {"[topology]\nkind = \"htsim\"\nfile = \"queues.topo\"\nbuffer_bytes = 1000\n",
         ":4: 'topology.buffer_bytes' does not apply: the file sets every port's (Queue_Up, "
         "Queue_Down)"},
        {"[topology]\nkind = \"htsim\"\nfile = \"none.topo\"\n", "none.topo: cannot open"},
        {"[topology]\nkind = \"fat_tree\"\nfile = \"plain.topo\"\n",
         "'topology.file' applies only to kind = \"hpcc\" or \"htsim\""},
    };
    for (const auto& [text, want] : cases) {
        EXPECT_FALSE(parse_in_dir(text, err)) << text;
        EXPECT_NE(err.find(want), std::string::npos) << err;
        EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    }
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mroce::sim
