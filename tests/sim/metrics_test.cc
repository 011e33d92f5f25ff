// tests/sim/metrics_test.cc — the run metrics of issue 13 on small scenarios, both engines
// where they apply (docs/sim.md "What the fields mean"): drop_fraction, stall_p99_us,
// retransmits_by_reason, timeouts, the incast metrics (t_know, settle, converge_rtts,
// jain_index), goodput counted where bytes are placed, and per-cable delays; and (issue
// 18, item 8) percentiles from obs::Histogram and counters under obs/'s catalogue names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>

#include "obs/catalog.h"

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

RunOutput run(const RunSpec& spec, uint64_t seed) {
    RunOutput out;
    std::string err;
    EXPECT_TRUE(run_spec(spec, seed, out, err)) << err;
    return out;
}

const char* kIncast = R"(
[topology]
kind = "single_switch"
hosts = 5
[workload]
kind = "incast"
bytes = 200000
message_bytes = 20000
[output]
sample_us = 2
)";

class RunMetricsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RunMetricsTest, DropFractionIsZeroWithoutLossAndCountsDataDropsWithLoss) {
    const uint64_t seed = testing::test_seed(31);
    SCOPED_TRACE(testing::seed_note(seed));
    const RunOutput clean = run(spec_from(kIncast, {"protocol=" + GetParam()}), seed);
    EXPECT_EQ(clean.metrics.completed_flows, 4u);
    EXPECT_GT(clean.metrics.data_packets_sent, 4u * 200000 / 4096);
    EXPECT_EQ(clean.metrics.data_drops, 0u);
    EXPECT_EQ(clean.metrics.drop_fraction, 0.0);
    EXPECT_EQ(clean.metrics.timeouts, 0u);
    const RetransmitReasons& c = clean.metrics.retransmits_by_reason;
    EXPECT_EQ(c.sack + c.timeout + c.path_failure + c.rnr + c.read_request, 0u);

    const RunOutput lossy =
        run(spec_from(kIncast, {"protocol=" + GetParam(), "fabric.loss=0.02", "rocev2.retransmit_timeout_us=50"}), seed);
    const RunMetrics& m = lossy.metrics;
    EXPECT_EQ(m.completed_flows, 4u) << m.stop_reason;
    EXPECT_GT(m.data_drops, 0u);
    EXPECT_LE(m.data_drops, m.drops);  // ACKs are lost too
    EXPECT_GT(m.drop_fraction, 0.0);
    EXPECT_LT(m.drop_fraction, 0.1);  // 2 % per cable, two cables per path
    EXPECT_DOUBLE_EQ(m.drop_fraction, static_cast<double>(m.data_drops) / static_cast<double>(m.data_packets_sent));
    const RetransmitReasons& r = m.retransmits_by_reason;
    EXPECT_GT(r.sack + r.timeout, 0u);
    EXPECT_EQ(r.path_failure + r.read_request, 0u);
    if (GetParam() == "rocev2") {
        EXPECT_EQ(r.probe, 0u);
    }
    EXPECT_EQ(m.path_failures, 0u);
}

TEST_P(RunMetricsTest, StallIsAtLeastOneMessageSerialisation) {
    const uint64_t seed = testing::test_seed(32);
    SCOPED_TRACE(testing::seed_note(seed));
    const RunOutput out = run(spec_from(R"(
[topology]
kind = "single_switch"
hosts = 2
rate_gbps = 100
[workload]
kind = "explicit"
message_bytes = 40000
flows = [ { src = 0, dst = 1, bytes = 400000 } ]
)", {"protocol=" + GetParam()}),
                              seed);
    ASSERT_EQ(out.metrics.completed_flows, 1u);
    const double message_us = 40000.0 * 8 / 100e9 * 1e6;  // 3.2 us
    EXPECT_GE(out.metrics.stall_p99_us, message_us);
    // The first completion needs a round trip too; the stall is at most the whole FCT.
    EXPECT_LE(out.metrics.stall_p99_us, out.metrics.fct_p99_us);
    // One flow: its gap is the percentile. obs::Histogram (issue 18, item 8) records ns, so
    // the figure is the gap rounded to the ns (it was exact in ps with the old sort).
    EXPECT_EQ((out.flows[0].longest_gap_ps + 500) / 1000, static_cast<int64_t>(std::llround(out.metrics.stall_p99_us * 1e3)));
}

// Goodput is counted where bytes are placed: one WRITE of a whole flow used to land in
// one sampling interval at once; now no sample of a flow exceeds what its receiver's
// ports can take.
TEST_P(RunMetricsTest, ThroughputSamplesNeverExceedTheLineRate) {
    const uint64_t seed = testing::test_seed(33);
    SCOPED_TRACE(testing::seed_note(seed));
    for (const char* planes : {"1", "2"}) {
        const RunOutput out = run(spec_from(kIncast, {"protocol=" + GetParam(), "workload.message_bytes=0",
                                                      "topology.planes=" + std::string(planes), "rocev2.qps_per_pair=2"}),
                                  seed);
        ASSERT_EQ(out.metrics.completed_flows, 4u);
        const double cap = 100.0 * std::stoi(planes) * 1.01;
        // The run total is at the bottleneck's rate too, but placement is per packet: a
        // 2 us interval may hold one packet more than its share of line-rate time.
        const double packet_gbps = 4168.0 * 8 / 2e3 * std::stoi(planes);
        double placed_all = 0, prev = 0;
        for (const ThroughputRow& t : out.throughput) {
            EXPECT_LE(t.gbps, t.flow >= 0 ? cap : cap + packet_gbps)
                << "flow " << t.flow << " at " << t.time_us << " us, planes " << planes;
            if (t.flow < 0) {
                placed_all += t.gbps * (t.time_us - prev) * 1e3 / 8;
                prev = t.time_us;
            }
        }
        EXPECT_NEAR(placed_all, 4 * 200000.0, 1.0);
        for (const FlowOutcome& o : out.flows) EXPECT_EQ(o.bytes_placed, o.flow.bytes);
    }
}

TEST_P(RunMetricsTest, IncastConvergenceMetricsFollowTheirDefinitions) {
    const uint64_t seed = testing::test_seed(34);
    SCOPED_TRACE(testing::seed_note(seed));
    // A symmetric incast of 4 long flows on one switch, fixed windows (MetaRoCE: 4 KiB per
    // path; RoCEv2: 4 packets, DCQCN off) whose sum is about one BDP: fair and settled.
    const RunOutput out = run(spec_from(R"(
[topology]
kind = "single_switch"
hosts = 5
[mroce]
paths = 4
window_bytes = 4096
[rocev2]
dcqcn = false
window_packets = 4
[workload]
kind = "incast"
bytes = 2000000
[output]
sample_us = 0
)", {"protocol=" + GetParam()}),
                              seed);
    const RunMetrics& m = out.metrics;
    ASSERT_EQ(m.completed_flows, 4u);
    ASSERT_TRUE(m.incast);
    const IncastMetrics& i = *m.incast;
    // One switch, 1 us cables, 4 KiB payloads: base RTT = 2 x (2 us + 1 packet) + 1 packet.
    const double pkt_us = (GetParam() == "mroce" ? 4096.0 + 72 : 4096.0 + 16) * 8 / 100e9 * 1e6;
    EXPECT_NEAR(i.base_rtt_us, 4 + 3 * pkt_us, 1e-6);
    EXPECT_EQ(i.bdp_bytes, static_cast<uint64_t>(100e9 / 8 * i.base_rtt_us / 1e6));
    ASSERT_TRUE(i.t_know_us);
    EXPECT_GE(*i.t_know_us, 2.0);   // two cables away
    EXPECT_LT(*i.t_know_us, 20.0);  // everyone starts at once
    EXPECT_GT(i.queue_peak_bytes, 0u);
    EXPECT_LE(i.queue_peak_bytes, m.max_queue_bytes);
    ASSERT_TRUE(i.settle_us) << "peak " << i.queue_peak_bytes << " bdp " << i.bdp_bytes;
    EXPECT_GE(*i.settle_us, 0.0);
    ASSERT_TRUE(i.converge_rtts);
    const double excess = i.queue_peak_bytes > i.bdp_bytes ? static_cast<double>(i.queue_peak_bytes - i.bdp_bytes) : 0;
    EXPECT_NEAR(*i.converge_rtts, (*i.settle_us - excess * 8 / 100e9 * 1e6) / i.base_rtt_us, 1e-9);
    // Window: 8 packets per sender at a quarter of 100 Gbit/s, rounded up to a microsecond.
    EXPECT_DOUBLE_EQ(i.jain_window_us, std::ceil(8 * pkt_us * 4));
    ASSERT_TRUE(i.jain_index);
    EXPECT_GT(i.jain_windows, 10u);
    EXPECT_GT(*i.jain_index, 0.95);
    EXPECT_LE(*i.jain_index, 1.0 + 1e-12);
}

TEST_P(RunMetricsTest, IncastMetricsAreNullWhenTheQueueNeverSettles) {
    const uint64_t seed = testing::test_seed(35);
    SCOPED_TRACE(testing::seed_note(seed));
    // Windows far above the BDP and a deep buffer, and the run stops before any sender
    // finishes: the queue is known and deep, but it has not settled. (MetaRoCE without its
    // congestion control, which would keep the queue short: this checks the metric.)
    const RunOutput out = run(spec_from(R"(
[topology]
kind = "single_switch"
hosts = 5
buffer_bytes = 8000000
[mroce]
paths = 4
window_bytes = 200000
congestion_control = "fixed"
rate_hint = false
pacing = false
first_rtt_bytes = 8000000
[rocev2]
dcqcn = false
window_packets = 200
[workload]
kind = "incast"
bytes = 1000000
[run]
time_limit_us = 50
[output]
sample_us = 0
)", {"protocol=" + GetParam()}),
                              seed);
    ASSERT_TRUE(out.metrics.incast);
    EXPECT_EQ(out.metrics.completed_flows, 0u);
    const IncastMetrics& i = *out.metrics.incast;
    EXPECT_TRUE(i.t_know_us);
    EXPECT_GT(i.queue_peak_bytes, 2 * i.bdp_bytes);
    EXPECT_FALSE(i.settle_us);
    EXPECT_FALSE(i.converge_rtts);
    EXPECT_FALSE(i.jain_index);
}

TEST_P(RunMetricsTest, NonIncastRunsHaveNoIncastMetrics) {
    const uint64_t seed = testing::test_seed(36);
    const RunOutput out = run(spec_from(R"(
[topology]
kind = "single_switch"
hosts = 3
[workload]
kind = "all_to_all"
bytes = 10000
)", {"protocol=" + GetParam()}),
                              seed);
    EXPECT_FALSE(out.metrics.incast);
}

// A host behind a 1 ms cable: its flow's ideal FCT and its FCT grow by the extra
// propagation (data out and the acknowledgement back), the others' do not.
TEST_P(RunMetricsTest, OneMillisecondCableStretchesOnlyItsFlows) {
    const uint64_t seed = testing::test_seed(37);
    SCOPED_TRACE(testing::seed_note(seed));
    const RunOutput out = run(spec_from(R"(
[topology]
kind = "single_switch"
hosts = 4
[[topology.cable_delays]]
host = 2
delay_us = 1000
[mroce]
min_pto_us = 5000
initial_rtt_us = 2000
[rocev2]
retransmit_timeout_us = 10000
[workload]
kind = "explicit"
flows = [ { src = 0, dst = 1, bytes = 30000 }, { src = 2, dst = 3, bytes = 30000 } ]
)", {"protocol=" + GetParam()}),
                              seed);
    ASSERT_EQ(out.metrics.completed_flows, 2u);
    const FlowOutcome &near = out.flows[0], &far = out.flows[1];
    EXPECT_EQ(far.ideal_ps - near.ideal_ps, 999'000'000);  // 1000 us instead of 1 us, once
    const int64_t fct_near = near.finish_ps - near.start_ps, fct_far = far.finish_ps - far.start_ps;
    EXPECT_LT(fct_near, 100'000'000);                     // well under 100 us
    EXPECT_GE(fct_far - fct_near, int64_t{1'998'000'000});  // out and back over the long cable
    // And not much more: MetaRoCE's handshake may add up to one more round trip (the flows
    // fit the first RTT's budget, [CC-15], so the data needs one).
    EXPECT_LT(fct_far, int64_t{4'100'000'000});
}

TEST(CableDelays, AutoWindowCoversTheLongestPathAndErrorsAreOneLine) {
    const RunSpec plain = spec_from("[topology]\nkind = \"single_switch\"\nhosts = 4\n");
    const RunSpec slow = spec_from(
        "[topology]\nkind = \"single_switch\"\nhosts = 4\n"
        "[[topology.cable_delays]]\nhost = 3\ndelay_us = 1000\n");
    // rtt = 2 x (4 x 1 us + 1000 us + 1 us) instead of 2 x 6 x 1 us.
    const uint64_t bdp = static_cast<uint64_t>(100e9 / 8 * 2 * 1005e-6);
    EXPECT_EQ(slow.mroce.endpoint.window_bytes_per_path, bdp / slow.mroce.endpoint.num_paths + 4096);
    EXPECT_GT(slow.mroce.endpoint.window_bytes_per_path, 100 * plain.mroce.endpoint.window_bytes_per_path);
    ASSERT_EQ(slow.topology.cable_delays.size(), 1u);
    EXPECT_FALSE(slow.topology.cable_delays[0].plane);

    const std::map<std::string, std::string> bad = {
        {"host = 4\ndelay_us = 5\n", "'topology.cable_delays[0].host' must be in 0..3"},
        {"host = 1\nplane = 1\ndelay_us = 5\n", "'topology.cable_delays[0].plane' must be in 0..0"},
        {"host = 1\n", "'topology.cable_delays[0].delay_us' is required"},
        {"host = 1\ndelay_us = -1\n", "'topology.cable_delays[0].delay_us' must be in"},
        {"host = 1\ndelay_us = 1\nspeed = 2\n", "unknown key 'topology.cable_delays[0].speed'"},
    };
    for (const auto& [entry, want] : bad) {
        std::string err;
        auto s = parse_scenario("[topology]\nkind = \"single_switch\"\nhosts = 4\n[[topology.cable_delays]]\n" + entry,
                                "test.toml", {}, std::nullopt, err);
        EXPECT_FALSE(s) << entry;
        EXPECT_NE(err.find(want), std::string::npos) << err;
        EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    }
}

// Percentiles are obs::Histogram's (the one histogram of the project, issue 18): the FCT
// and slowdown figures are exactly what that histogram gives for the flows' outcomes, and
// within its 3.2% of the exact nearest-rank sample (the simulator's old sort-based rule).
TEST_P(RunMetricsTest, PercentilesAreTheObsHistogramsWithinItsResolution) {
    const uint64_t seed = testing::test_seed(39);
    SCOPED_TRACE(testing::seed_note(seed));
    const RunOutput out = run(spec_from(kIncast, {"protocol=" + GetParam(), "fabric.loss=0.01",
                                                  "rocev2.retransmit_timeout_us=50"}),
                              seed);
    ASSERT_EQ(out.metrics.completed_flows, 4u);
    obs::Histogram fct, slow;
    std::vector<double> exact_fct, exact_slow;
    for (const FlowOutcome& o : out.flows) {
        const int64_t ps = o.finish_ps - o.start_ps;
        fct.record(static_cast<uint64_t>((ps + 500) / 1000));
        const double sd = static_cast<double>(ps) / static_cast<double>(o.ideal_ps);
        slow.record(static_cast<uint64_t>(std::llround(sd * 1e6)));
        exact_fct.push_back(static_cast<double>(ps) / 1e6);
        exact_slow.push_back(sd);
    }
    const RunMetrics& m = out.metrics;
    EXPECT_DOUBLE_EQ(m.fct_p50_us, static_cast<double>(fct.quantile(0.5)) / 1e3);
    EXPECT_DOUBLE_EQ(m.fct_p99_us, static_cast<double>(fct.quantile(0.99)) / 1e3);
    EXPECT_DOUBLE_EQ(m.slowdown_p50, static_cast<double>(slow.quantile(0.5)) / 1e6);
    EXPECT_DOUBLE_EQ(m.slowdown_p99, static_cast<double>(slow.quantile(0.99)) / 1e6);
    std::sort(exact_fct.begin(), exact_fct.end());
    std::sort(exact_slow.begin(), exact_slow.end());
    // Nearest rank of 4 samples: p50 is the 2nd, p99 the 4th (the max, which is exact).
    EXPECT_NEAR(m.fct_p50_us, exact_fct[1], exact_fct[1] * 0.032);
    EXPECT_NEAR(m.fct_p99_us, exact_fct[3], exact_fct[3] * 0.032);
    EXPECT_NEAR(m.slowdown_p50, exact_slow[1], exact_slow[1] * 0.032);
    EXPECT_NEAR(m.slowdown_max, exact_slow[3], 1e-6);
}

// MetaRoCE runs carry the engines' counters under the names `mroce stat --json` and
// `mroce perf --json` use (obs/catalog.h), summed over the hosts, and the RTT histogram;
// the sums agree with the simulator's own figures. RoCEv2 runs have none (other engine).
TEST_P(RunMetricsTest, CountersUseTheCatalogueNames) {
    const uint64_t seed = testing::test_seed(40);
    SCOPED_TRACE(testing::seed_note(seed));
    const RunOutput out = run(spec_from(kIncast, {"protocol=" + GetParam(), "fabric.loss=0.02",
                                                  "rocev2.retransmit_timeout_us=50"}),
                              seed);
    const RunMetrics& m = out.metrics;
    if (GetParam() == "rocev2") {
        EXPECT_TRUE(m.counters.empty());
        EXPECT_EQ(m.rtt.count(), 0u);
        return;
    }
    std::set<std::string> names{"connections", "streams"};
    for (const auto& f : obs::endpoint_counters()) names.insert(f.key);
    for (const auto& f : obs::connection_counters())
        if (f.total) names.insert(f.total);
    for (const auto& f : obs::path_counters())
        if (f.total) names.insert(f.total);
    std::map<std::string, uint64_t> c;
    for (const auto& [k, v] : m.counters) {
        EXPECT_TRUE(names.count(k)) << k << " is not a catalogue name";
        c[k] = v;
    }
    EXPECT_EQ(c.size(), names.size());  // every name, once
    EXPECT_GT(c["retransmits"], 0u);
    EXPECT_EQ(c["retransmits"], m.retransmits);
    EXPECT_EQ(c["retransmits_sack"], m.retransmits_by_reason.sack);
    EXPECT_EQ(c["retransmits_timeout"], m.retransmits_by_reason.timeout);
    EXPECT_EQ(c["timeouts"], m.timeouts);
    EXPECT_EQ(c["tx_probes"], m.retransmits_by_reason.probe);
    // Every DATA packet a host sent is in tx_data_packets (the fabric counts the same).
    EXPECT_EQ(c["tx_data_packets"], m.data_packets_sent);
    EXPECT_EQ(c["messages_sent"], 4u * 200000 / 20000);
    EXPECT_EQ(c["connections"], 8u);  // 4 senders and the receiver's 4
    EXPECT_GT(m.rtt.count(), 0u);
    EXPECT_LE(m.rtt.min(), m.rtt.quantile(0.5));
    EXPECT_LE(m.rtt.quantile(0.5), m.rtt.max());
}

INSTANTIATE_TEST_SUITE_P(Protocols, RunMetricsTest, ::testing::Values("mroce", "rocev2"));

}  // namespace
}  // namespace mroce::sim

namespace mroce::sim {
namespace {

// An 8 -> 1 incast of 1 MiB per sender on one switch (4 MiB port buffer, RED ECN): MetaRoCE
// with its defaults (ECN AIMD, the receiver's hint, pacing) against the same run with the
// hint off. Issue 13's invariants on a small scenario: no drops, fair shares once the
// queue has settled, and the hint is what keeps the queue short.
RunOutput incast8(const std::vector<std::string>& sets, uint64_t seed) {
    return run(spec_from(R"(
[topology]
kind = "single_switch"
hosts = 9
buffer_bytes = 4194304
[topology.ecn]
mode = "red"
kmin_bytes = 100000
kmax_bytes = 400000
pmax = 0.2
[workload]
kind = "incast"
bytes = 1048576
message_bytes = 65536
[output]
sample_us = 5
flows = 8
)", sets),
               seed);
}

// sender_shares: each of the first `senders` flows' goodput (throughput.csv: bytes placed
// at the receiver) over the samples that lie wholly in [t0_us, t1_us], over the senders'
// mean in the same samples: 1 = exactly its fair share of what the bottleneck delivered.
// Empty when no sample fits.
std::vector<double> sender_shares(const RunOutput& out, double t0_us, double t1_us,
                                  size_t senders, double sample_us) {
    std::vector<double> sum(senders, 0);
    bool any = false;
    for (const ThroughputRow& r : out.throughput) {
        if (r.flow < 0 || static_cast<size_t>(r.flow) >= senders) continue;
        if (r.time_us - sample_us < t0_us || r.time_us > t1_us) continue;
        sum[static_cast<size_t>(r.flow)] += r.gbps;
        any = true;
    }
    if (!any) return {};
    double mean = 0;
    for (double x : sum) mean += x / static_cast<double>(senders);
    for (double& x : sum) x = mean > 0 ? x / mean : 0;
    return sum;
}

// first_finish_us: when the first flow completed (the end of the incast's fair phase).
double first_finish_us(const RunOutput& out) {
    int64_t first = INT64_MAX;
    for (const FlowOutcome& o : out.flows)
        if (o.completed) first = std::min(first, o.finish_ps);
    return static_cast<double>(first) / 1e6;
}

TEST(CongestionControl, IncastSettlesFairlyWithoutDropsAndTheHintKeepsTheQueueShort) {
    const uint64_t seed = testing::test_seed(43);
    SCOPED_TRACE(testing::seed_note(seed));
    const RunOutput on = incast8({"protocol=mroce"}, seed);
    const RunOutput off = incast8({"protocol=mroce", "mroce.rate_hint=false"}, seed);
    ASSERT_EQ(on.metrics.completed_flows, 8u);
    ASSERT_EQ(off.metrics.completed_flows, 8u);
    ASSERT_TRUE(on.metrics.incast && off.metrics.incast);
    const IncastMetrics &a = *on.metrics.incast, &b = *off.metrics.incast;
    std::printf("hint on: queue peak %llu B, settle %.1f us, jain %.4f, drops %llu; hint off: queue peak %llu B, drops %llu\n",
                static_cast<unsigned long long>(a.queue_peak_bytes), a.settle_us.value_or(-1), a.jain_index.value_or(-1),
                static_cast<unsigned long long>(on.metrics.drops), static_cast<unsigned long long>(b.queue_peak_bytes),
                static_cast<unsigned long long>(off.metrics.drops));
    EXPECT_EQ(on.metrics.drops, 0u);
    EXPECT_EQ(on.metrics.failed_ops, 0u);
    ASSERT_TRUE(a.jain_index);
    EXPECT_GE(*a.jain_index, 0.95);
    ASSERT_TRUE(a.settle_us && a.t_know_us);
    // Each sender's share within 5% of the fair share once settled (issue 13): from t_know +
    // settle until the first sender finishes. Jain >= 0.95 alone would let one sender of 8
    // run 30% below its share. The hint-off run is printed for contrast (its queue never
    // settles; from the same start to its own first finish its shares spread wider).
    const double t0 = *a.t_know_us + *a.settle_us, t1 = first_finish_us(on);
    const std::vector<double> shares = sender_shares(on, t0, t1, 8, 5);
    const std::vector<double> shares_off = sender_shares(off, t0, first_finish_us(off), 8, 5);
    ASSERT_EQ(shares.size(), 8u) << "no 5 us sample between " << t0 << " and " << t1 << " us";
    ASSERT_GT(t1 - t0, 200) << "too short a settled phase to judge shares";
    for (size_t i = 0; i < shares.size(); ++i) {
        std::printf("sender %zu: share %.4f (hint off %.4f) of the fair share over %.0f..%.0f us\n", i,
                    shares[i], i < shares_off.size() ? shares_off[i] : -1.0, t0, t1);
        EXPECT_NEAR(shares[i], 1.0, 0.05) << "sender " << i;
    }
    // The check tells the hint's shares from the windows' alone: without the hint some
    // sender strays more than 5% from its share (seeds 1-8 and 43: by 6-13%).
    ASSERT_EQ(shares_off.size(), 8u);
    double off_spread = 0;
    for (double x : shares_off) off_spread = std::max(off_spread, std::abs(x - 1.0));
    EXPECT_GT(off_spread, 0.05);
    // The first RTT's burst (8 x 32 KiB) is all that queues; without the hint the windows
    // alone let the queue grow several times deeper.
    EXPECT_LT(a.queue_peak_bytes, 8u * 32 * 1024 * 11 / 10);
    EXPECT_GT(b.queue_peak_bytes, 2 * a.queue_peak_bytes);
    // Goodput stays at the line rate: the ideal is 8 MiB at 100 Gbit/s.
    EXPECT_GT(on.metrics.goodput_fraction, 0.9);
}

// A leaf-spine of 3 leaves of 16 hosts, 4 spines, 100 Gbit/s, 4 MiB buffers with RED ECN,
// and an incast into host 32 (leaf 2) of 256 KiB per sender in 64 KiB WRITEs; the tests
// set the senders, and the next test the line rate and the bytes.
constexpr const char* kIncastAcrossRacks = R"(
[topology]
kind = "leaf_spine"
leaves = 3
hosts_per_leaf = 16
spines = 4
rate_gbps = 100
delay_us = 1
buffer_bytes = 4194304
[topology.ecn]
mode = "red"
kmin_bytes = 100000
kmax_bytes = 400000
pmax = 0.2
[workload]
kind = "incast"
receiver = 32
bytes = 262144
message_bytes = 65536
)";

// Issue 13's settling target on a small leaf-spine: N -> 1 across racks (16 hosts per leaf,
// senders on leaves 0 and 1, the receiver on leaf 2), 256 KiB per sender. The senders'
// first-RTT bursts arrive spread over several hint intervals, so the queue's delay grows
// too slowly for [CC-14]'s growth rule; without the first-RTT backlog of [CC-14] these
// settled in 2.03-2.42 base RTTs at seeds 1-5 and 43, with it in 0.48-1.42. At 8 -> 1 the
// first HELLOs' grants ([CC-20]: A, A/2, ...) gave their senders a head start (196 KB in
// flight against 65 KB) and Jain 0.92-0.94 at seeds 1-5 and 43; taking the lower grants of
// the later HELLO_ACKs (the answers to the HELLOs' other copies): 0.98-0.99.
TEST(CongestionControl, IncastAcrossRacksSettlesWithinTwoRoundTrips) {
    const uint64_t seed = testing::test_seed(43);
    SCOPED_TRACE(testing::seed_note(seed));
    for (const int n : {8, 16, 24}) {
        const RunOutput out =
            run(spec_from(kIncastAcrossRacks, {"protocol=mroce", "workload.senders=" + std::to_string(n)}), seed);
        ASSERT_EQ(out.metrics.completed_flows, static_cast<uint64_t>(n));
        ASSERT_TRUE(out.metrics.incast);
        const IncastMetrics& i = *out.metrics.incast;
        std::printf("%d -> 1: queue peak %llu B, settle %.1f us, converge %.2f RTT, jain %.4f, drops %llu\n", n,
                    static_cast<unsigned long long>(i.queue_peak_bytes), i.settle_us.value_or(-1),
                    i.converge_rtts.value_or(-99), i.jain_index.value_or(-1),
                    static_cast<unsigned long long>(out.metrics.drops));
        EXPECT_EQ(out.metrics.drops, 0u) << n;
        ASSERT_TRUE(i.converge_rtts) << n;
        EXPECT_LE(*i.converge_rtts, 2.0) << n;
        ASSERT_TRUE(i.jain_index) << n;
        EXPECT_GE(*i.jain_index, 0.95) << n;
        // [CC-20]: senders took the lower grants of the receiver's later HELLO_ACKs.
        uint64_t lowered = 0;
        for (const auto& [key, v] : out.metrics.counters)
            if (key == "hello_grants_lowered") lowered = v;
        EXPECT_GT(lowered, 0u) << n;
    }
}

// [CC-14] drain distance: at 10 Gbit/s a full packet is 3.3 µs, and 24 or 32 paced senders
// bunch by chance by several packets. Draining that within two intervals took the
// allocation to the floor, again and again, and the downlink idled. Over seeds 1-20, with a
// drain of two intervals: 0.70-0.83 of the ideal completion, or 0.98 at the few seeds where
// the cycle never starts (seed 1: 0.795 and 0.793); with one of at least half the senders'
// packet times: 0.889-0.911, or 0.98.
TEST(CongestionControl, ManySendersAtALowLineRateKeepTheDownlinkBusy) {
    const uint64_t seed = testing::test_seed(1);
    SCOPED_TRACE(testing::seed_note(seed));
    for (const int n : {24, 32}) {
        const RunOutput out = run(spec_from(kIncastAcrossRacks, {"protocol=mroce", "topology.rate_gbps=10",
                                                                 "workload.bytes=1048576",
                                                                 "workload.senders=" + std::to_string(n)}),
                                  seed);
        ASSERT_EQ(out.metrics.completed_flows, static_cast<uint64_t>(n));
        std::printf("%d -> 1 at 10 Gbit/s: %.3f of the ideal completion, stall p99 %.0f us\n", n,
                    out.metrics.finish_fraction_of_ideal, out.metrics.stall_p99_us);
        EXPECT_GE(out.metrics.finish_fraction_of_ideal, 0.87) << n;
    }
}

}  // namespace
}  // namespace mroce::sim
