// tests/sim/scenario_run_test.cc — the scenario runner on small scenarios, both engines:
// dependencies are honoured (a ring all-reduce step never starts before its input has
// arrived), start times are honoured, every flow completes once, and the counters add up.
#include <gtest/gtest.h>

#include "sim/scenario.h"
#include "sim/scenario_run.h"
#include "sim/test_seed.h"

namespace mroce::sim {
namespace {

RunSpec spec_from(const std::string& text, const std::vector<std::string>& sets = {}) {
    std::string err;
    auto s = parse_scenario(text, "test.toml", sets, std::nullopt, err);
    EXPECT_TRUE(s) << err;
    return s ? s->runs.at(0) : RunSpec{};
}

const char* kRing = R"(
[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 3
rate_gbps = 25
[workload]
kind = "ring_allreduce"
bytes = 393216
message_bytes = 16384
[output]
sample_us = 5
)";

class ScenarioRun : public ::testing::TestWithParam<std::string> {};

TEST_P(ScenarioRun, RingAllreduceStepNeverStartsBeforeItsInputArrived) {
    const uint64_t seed = testing::test_seed(21);
    SCOPED_TRACE(testing::seed_note(seed));
    const RunSpec spec = spec_from(kRing, {"protocol=" + GetParam(), "fabric.loss=0.002"});
    RunOutput out;
    std::string err;
    ASSERT_TRUE(run_spec(spec, seed, out, err)) << err;
    ASSERT_EQ(out.flows.size(), 6u * 10);  // 2(n-1) steps of n flows
    EXPECT_EQ(out.metrics.completed_flows, out.flows.size()) << out.metrics.stop_reason;
    EXPECT_EQ(out.metrics.failed_ops, 0u);
    int64_t checked = 0;
    for (const FlowOutcome& o : out.flows) {
        ASSERT_TRUE(o.completed) << "flow " << o.flow.id;
        EXPECT_GT(o.finish_ps, o.start_ps);
        for (uint32_t d : o.flow.depends_on) {
            const FlowOutcome& in = out.flows[d];
            EXPECT_EQ(in.flow.dst, o.flow.src);
            EXPECT_GE(o.start_ps, in.finish_ps) << "flow " << o.flow.id << " started before flow " << d << " completed";
            ++checked;
        }
    }
    EXPECT_EQ(checked, 6 * 9);
    // Steps are serialised per host: the last step ends no earlier than 10 chunk times.
    const double chunk_ps = 65536.0 * 8 / 25e9 * 1e12;
    EXPECT_GE(out.metrics.completion_time_us * 1e6, 10 * chunk_ps);
}

TEST_P(ScenarioRun, ExplicitFlowsStartAtMaxOfStartAndDependencies) {
    const uint64_t seed = testing::test_seed(22);
    SCOPED_TRACE(testing::seed_note(seed));
    const RunSpec spec = spec_from(R"(
[topology]
kind = "single_switch"
hosts = 4
[workload]
kind = "explicit"
flows = [
  { src = 0, dst = 1, bytes = 200000 },
  { src = 2, dst = 3, bytes = 1000, start_us = 500 },
  { src = 1, dst = 2, bytes = 5000, depends_on = [0] },
  { src = 3, dst = 0, bytes = 5000, start_us = 700, depends_on = [0, 1] },
]
)", {"protocol=" + GetParam()});
    RunOutput out;
    std::string err;
    ASSERT_TRUE(run_spec(spec, seed, out, err)) << err;
    ASSERT_EQ(out.metrics.completed_flows, 4u);
    EXPECT_EQ(out.flows[0].start_ps, 0);
    EXPECT_EQ(out.flows[1].start_ps, 500'000'000);
    EXPECT_EQ(out.flows[2].start_ps, out.flows[0].finish_ps);  // right when its input completed
    EXPECT_EQ(out.flows[3].start_ps, 700'000'000);             // both done well before 700 us
    for (const FlowOutcome& o : out.flows) EXPECT_GE(o.finish_ps - o.start_ps, o.ideal_ps / 2);
}

TEST_P(ScenarioRun, IncastCountersAddUpAndTimeSeriesCoverTheRun) {
    const uint64_t seed = testing::test_seed(23);
    SCOPED_TRACE(testing::seed_note(seed));
    const RunSpec spec = spec_from(R"(
[topology]
kind = "single_switch"
hosts = 7
buffer_bytes = 100000
[workload]
kind = "incast"
bytes = 300000
message_bytes = 30000
[output]
sample_us = 5
)", {"protocol=" + GetParam()});
    RunOutput out;
    std::string err;
    ASSERT_TRUE(run_spec(spec, seed, out, err)) << err;
    const RunMetrics& m = out.metrics;
    ASSERT_EQ(m.completed_flows, 6u);
    // Goodput counted from completions: all bytes over the completion time.
    EXPECT_NEAR(m.goodput_gbps * m.completion_time_us * 1e3 / 8, 6 * 300000.0, 1.0);
    EXPECT_LE(m.goodput_fraction, 1.0);
    EXPECT_GT(m.drops, 0u);                  // 6 x 300 kB into a 100 kB port without PFC
    EXPECT_GE(m.retransmits, 1u);
    EXPECT_LE(m.max_queue_bytes, 100000u);   // never above the buffer
    double bytes = 0, prev_us = 0;
    for (const ThroughputRow& t : out.throughput) {
        if (t.flow >= 0) continue;
        EXPECT_LE(t.time_us - prev_us, 5.0 + 1e-9);  // 5 us intervals, the last one shorter
        bytes += t.gbps * (t.time_us - prev_us) * 1e3 / 8;
        prev_us = t.time_us;
    }
    EXPECT_DOUBLE_EQ(prev_us, m.completion_time_us);
    EXPECT_NEAR(bytes, 6 * 300000.0, 1.0);   // every completed byte is in some interval
    ASSERT_FALSE(out.queue_port_names.empty());
    EXPECT_EQ(out.queue_port_names[0], "switch0/p0");  // the receiver's port
    uint64_t peak = 0;
    for (const QueueRow& q : out.queue) peak = std::max(peak, q.bytes);
    EXPECT_GT(peak, 0u);
    EXPECT_LE(peak, m.max_queue_bytes);
}

// A flow of more WRITEs than a stream (or QP) holds at once (max_outstanding_wrs, 65,536)
// is posted as the stream frees room, as an application keeps its send queue full; a
// second flow on the same stream (streams = "pair") goes after it. Before, the run stopped
// with "post_send refused".
TEST_P(ScenarioRun, AFlowOfMoreWritesThanAStreamHoldsCompletes) {
    const uint64_t seed = testing::test_seed(27);
    SCOPED_TRACE(testing::seed_note(seed));
    const RunSpec spec = spec_from(R"(
[topology]
kind = "single_switch"
hosts = 3
[mroce]
streams = "pair"
[workload]
kind = "explicit"
message_bytes = 1
flows = [ { src = 0, dst = 1, bytes = 70000 }, { src = 0, dst = 1, bytes = 3000 }, { src = 2, dst = 1, bytes = 100 } ]
)", {"protocol=" + GetParam()});
    RunOutput out;
    std::string err;
    ASSERT_TRUE(run_spec(spec, seed, out, err)) << err;
    EXPECT_EQ(out.metrics.completed_flows, 3u) << out.metrics.stop_reason;
    EXPECT_EQ(out.metrics.failed_ops, 0u);
    for (const FlowOutcome& o : out.flows) {
        ASSERT_TRUE(o.completed) << "flow " << o.flow.id;
        EXPECT_EQ(o.bytes_placed, o.flow.bytes) << "flow " << o.flow.id;
    }
}

// A RoCEv2 flow across a cable cut for good exhausts its retries: its WRITEs fail, the run
// counts them, and the flow that depends on it never starts; the unrelated flow completes.
TEST(ScenarioRunFailure, DependentsOfAFailedFlowNeverStart) {
    const uint64_t seed = testing::test_seed(24);
    SCOPED_TRACE(testing::seed_note(seed));
    const RunSpec spec = spec_from(R"(
protocol = "rocev2"
[topology]
kind = "single_switch"
hosts = 4
[rocev2]
retransmit_timeout_us = 20
[workload]
kind = "explicit"
message_bytes = 10000
flows = [
  { src = 0, dst = 1, bytes = 50000 },
  { src = 2, dst = 3, bytes = 50000 },
  { src = 1, dst = 2, bytes = 5000, depends_on = [0] },
]
[[faults]]
at_us = 0
kind = "cable_down"
host = 1
[run]
time_limit_us = 2000
)");
    RunOutput out;
    std::string err;
    ASSERT_TRUE(run_spec(spec, seed, out, err)) << err;
    EXPECT_TRUE(out.flows[0].failed);
    EXPECT_TRUE(out.flows[1].completed);
    EXPECT_EQ(out.flows[2].start_ps, -1);
    EXPECT_EQ(out.metrics.completed_flows, 1u);
    EXPECT_EQ(out.metrics.failed_ops, 5u);  // the failed WRITE and the four flushed after it
    EXPECT_EQ(out.metrics.stop_reason, "time limit");
}

// [[faults]] name a switch-to-switch cable by one of its ports, as queue.csv names ports:
// a leaf-spine cable cut for good (no reconvergence) and burst loss on another. MetaRoCE
// re-rolls the paths hashed onto the dead cable and completes; the burst loss drops
// packets on its cable (no other cable loses any); a port that does not exist is refused
// with one line.
TEST(ScenarioRunFaults, SwitchToSwitchCablesByPortName) {
    const uint64_t seed = testing::test_seed(26);
    SCOPED_TRACE(testing::seed_note(seed));
    const std::string base = R"(
[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 2
[mroce]
min_pto_us = 20
[workload]
kind = "explicit"
message_bytes = 65536
flows = [ { src = 0, dst = 2, bytes = 2000000 }, { src = 3, dst = 1, bytes = 2000000 } ]
[run]
time_limit_us = 100000
)";
    const RunSpec clean = spec_from(base);
    RunOutput ref;
    std::string err;
    ASSERT_TRUE(run_spec(clean, seed, ref, err)) << err;
    ASSERT_EQ(ref.metrics.completed_flows, 2u);
    EXPECT_EQ(ref.metrics.drops, 0u);
    const RunSpec faulty = spec_from(base + R"(
[[faults]]
at_us = 20
kind = "cable_down"
port = "spine0/p1"
[[faults]]
at_us = 0
kind = "burst_loss"
port = "spine1/p0"
p_good_to_bad = 0.02
p_bad_to_good = 0.25
)");
    RunOutput out;
    ASSERT_TRUE(run_spec(faulty, seed, out, err)) << err;
    EXPECT_EQ(out.metrics.completed_flows, 2u);
    EXPECT_EQ(out.metrics.failed_ops, 0u);
    EXPECT_GT(out.metrics.drops, 0u) << "neither fault dropped anything";
    EXPECT_GT(out.metrics.completion_time_us, ref.metrics.completion_time_us);
    RunSpec bad = spec_from(base + "[[faults]]\nkind = \"loss\"\nport = \"spine9/p0\"\nloss = 0.1\n");
    RunOutput none;
    EXPECT_FALSE(run_spec(bad, seed, none, err));
    EXPECT_NE(err.find("faults[0].port: no cabled switch port named 'spine9/p0'"), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

// A fabric of zero-delay cables is a valid scenario: the default hint interval (derived from
// the cable delay) must not fall below its own lower bound and reject the file.
TEST(ScenarioDefaults, ZeroDelayCablesStillRunWithTheHint) {
    const uint64_t seed = testing::test_seed(25);
    SCOPED_TRACE(testing::seed_note(seed));
    const RunSpec spec = spec_from(R"(
[topology]
kind = "single_switch"
hosts = 2
delay_us = 0
[workload]
kind = "explicit"
message_bytes = 8192
flows = [ { src = 0, dst = 1, bytes = 65536 } ]
)");
    EXPECT_GE(spec.mroce.endpoint.hint_interval, std::chrono::microseconds(1));
    RunOutput out;
    std::string err;
    ASSERT_TRUE(run_spec(spec, seed, out, err)) << err;
    EXPECT_EQ(out.metrics.completed_flows, 1u);
}

// Issue 14: random loss must not fail paths. An all-to-all of 32 hosts over 4 planes keeps
// 31 connections ready on every endpoint, so PROBEs wait for their connection's turn; with
// 2 % loss per cable (about 8 % end to end) the PROBE ladders were timed from the request
// rather than from when the PROBE left, overtaken by DATA that had left before it, and
// sent as if their paths had measured no loss: 17 live paths failed at seed 1 (10 at seed
// 2), none since ([LOSS-5], [PATH-13]). (At seed 3 one connection never hears its peer at
// all, no RTT sample in 300 us, and fails its paths: a separate matter, not random loss.)
TEST(ScenarioLoss, BusyAllToAllUnderRandomLossFailsNoPath) {
    const uint64_t seed = testing::test_seed(1);
    SCOPED_TRACE(testing::seed_note(seed));
    const RunSpec spec = spec_from(R"(
protocol = "mroce"
[topology]
kind = "leaf_spine"
leaves = 4
spines = 4
hosts_per_leaf = 8
planes = 4
rate_gbps = 100
delay_us = 1
buffer_bytes = 1048576
[fabric]
loss = 0.02
[workload]
kind = "all_to_all"
bytes = 262144
message_bytes = 262144
)");
    RunOutput out;
    std::string err;
    ASSERT_TRUE(run_spec(spec, seed, out, err)) << err;
    const RunMetrics& m = out.metrics;
    EXPECT_EQ(m.completed_flows, 32u * 31u);
    EXPECT_EQ(m.failed_ops, 0u);
    EXPECT_EQ(m.path_failures, 0u);
    uint64_t lost = 0;
    for (const auto& [key, value] : m.counters)
        if (key == "lost_sack_packets" || key == "lost_timeout_packets") lost += value;
    EXPECT_GT(lost, 1000u);  // the loss model did drop packets: every ladder was exercised
}

// mroce.preconnect (docs/sim.md): RoCEv2's QPs are connected for free when a flow posts,
// so without preconnect only MetaRoCE's first flow of a pair pays the handshake, one round
// trip (8 us of cables here) in its FCT. With it, the first flow of a pair, in either
// direction, finishes as fast as a flow on a connection that was up and idle.
TEST(ScenarioPreconnect, FirstFlowOfAPairFinishesAsOnAnEstablishedConnection) {
    const uint64_t seed = testing::test_seed(3);
    SCOPED_TRACE(testing::seed_note(seed));
    const char* text = R"(
protocol = "mroce"
[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 2
rate_gbps = 100
delay_us = 1
[workload]
kind = "explicit"
flows = [ { src = 0, dst = 2, bytes = 4096, start_us = 50 },
          { src = 3, dst = 1, bytes = 4096, start_us = 50 },
          { src = 0, dst = 2, bytes = 4096, start_us = 500 },
          { src = 1, dst = 3, bytes = 4096, start_us = 500 } ]
)";
    const auto fct_us = [](const FlowOutcome& o) { return static_cast<double>(o.finish_ps - o.start_ps) / 1e6; };
    RunOutput cold, warm;
    std::string err;
    ASSERT_TRUE(run_spec(spec_from(text), seed, cold, err)) << err;
    ASSERT_TRUE(run_spec(spec_from(text, {"mroce.preconnect=true"}), seed, warm, err)) << err;
    ASSERT_EQ(cold.metrics.completed_flows, 4u);
    ASSERT_EQ(warm.metrics.completed_flows, 4u);
    for (uint32_t first : {0u, 1u}) {
        // Flow 2 (3) is flow 0's pair (flow 1's pair, reversed) 450 us later, on a
        // connection long up and idle: the reference for a flow that pays no handshake.
        const double ref = fct_us(cold.flows[first + 2]);
        EXPECT_NEAR(fct_us(warm.flows[first + 2]), ref, 0.01) << "flow " << first + 2;
        EXPECT_GE(fct_us(cold.flows[first]), ref + 7.5) << "flow " << first << " paid no handshake";
        EXPECT_NEAR(fct_us(warm.flows[first]), ref, 0.5) << "flow " << first;
    }
}

INSTANTIATE_TEST_SUITE_P(Protocols, ScenarioRun, ::testing::Values("mroce", "rocev2"));

}  // namespace
}  // namespace mroce::sim
