// sim/scenario_run.h — runs one RunSpec: builds the topology, attaches one engine per host
// (core::Endpoint or rocev2::RoceEngine), drives the workload through them (a flow starts
// at max(start, completion of its dependencies) and is posted as RDMA WRITEs), applies the
// fault timeline, samples time series and collects metrics from the engines' and
// switches' own counters. The output files are written by tools/sim.cc.
//
//   RunSpec ─► Topology + FaultInjector ─► Driver (mroce | rocev2): streams/QPs per flow
//           ─► Sim::run_until(all flows done | time limit | event budget) ─► RunResult
//
// Deterministic: everything random is forked from `seed`. Threading: none.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "obs/histogram.h"
#include "sim/scenario.h"

namespace mroce::sim {

struct FlowOutcome {
    Flow flow;
    bool completed = false;
    bool failed = false;                 // a WR completed with an error
    int64_t start_ps = -1, finish_ps = -1;  // posted, last WR completed
    int64_t ideal_ps = 0;                // alone on an idle fabric
    uint64_t bytes_placed = 0;           // at the receiver (attributed per channel, docs/sim.md)
    int64_t longest_gap_ps = -1;         // longest time between completions (from the start)
    uint16_t src_port = 0, dst_port = 0;
};

struct ThroughputRow {
    double time_us;
    int64_t flow;  // -1 = all
    double gbps;
};
struct QueueRow {
    double time_us;
    uint32_t port;  // index into RunResult::queue_port_names
    uint64_t bytes;
};
// CcRow: one cc.csv row. The fields are obs::ConnectionSnapshot's / PathSnapshot's under
// the live system's names (docs/observability.md); -1 (or null state) = empty: not
// applicable to the row or the protocol, or not known yet.
struct CcRow {
    double time_us;
    uint32_t conn;
    int32_t path;                  // -1 = the connection / QP
    const char* state = nullptr;   // obs::state_name of the path or connection
    int64_t cwnd_bytes = -1;       // path: the controller's window
    int64_t srtt_ns = -1;          // path
    int64_t in_flight_bytes = -1;  // path and connection
    int32_t ecn_alpha = -1;        // path: CE-marked fraction in 1/1024
    int64_t window_rate_bps = -1;  // connection
    int64_t pacing_rate_bps = -1;  // connection (RoCEv2: the QP's DCQCN rate)
    int64_t rate_hint_mbps = -1;   // connection: the latest hint received
};

// ClassMetrics: the flows of one traffic class, and the PFC pauses sent for it.
struct ClassMetrics {
    uint8_t traffic_class = 0;
    uint64_t flows = 0, completed_flows = 0, pauses = 0;
    double fct_p50_us = 0, fct_p99_us = 0, slowdown_p50 = 0, slowdown_p99 = 0, slowdown_max = 0;
};

// RetransmitReasons: retransmissions by cause. MetaRoCE: segments re-sent per reason
// (ConnectionStats) and PROBE packets sent (PathStats); RoCEv2: go-back-N rewinds by
// cause (sack = NAK-driven, timeout = retransmit timer, rnr = RNR NAKs received).
struct RetransmitReasons {
    uint64_t sack = 0, timeout = 0, probe = 0, path_failure = 0, rnr = 0, read_request = 0;
};

// IncastMetrics: how an incast converges (workload.kind = "incast" only; docs/sim.md).
// An unset optional is written as null: the run never got there.
struct IncastMetrics {
    std::optional<double> t_know_us;  // the receiver has DATA from every sender
    uint64_t queue_peak_bytes = 0;    // the receiver's ToR downlink queue, max over planes
    uint64_t bdp_bytes = 0;           // line rate x planes x base RTT
    double base_rtt_us = 0;           // 2 x (ideal one-packet latency) + one packet
    std::optional<double> settle_us;  // t_know until the queue stays below one BDP
    std::optional<double> converge_rtts;
    std::optional<double> jain_index;  // mean over windows of per-sender placed bytes
    double jain_window_us = 0;         // the window length used
    uint64_t jain_windows = 0;
};

struct RunMetrics {
    double goodput_gbps = 0, goodput_fraction = 0, completion_time_us = 0;
    double fct_p50_us = 0, fct_p99_us = 0;
    double slowdown_p50 = 0, slowdown_p99 = 0, slowdown_max = 0;  // fct / ideal
    double finish_fraction_of_ideal = 0;  // busiest host's bytes at line rate / completion time
    uint64_t retransmits = 0, drops = 0, ecn_marks = 0, max_queue_bytes = 0, failed_ops = 0;
    uint64_t pauses = 0, pfc_overflow_drops = 0, flows = 0, completed_flows = 0;
    uint64_t events = 0, sim_packets = 0;
    std::string stop_reason;
    // With several traffic classes (SwitchConfig::classes() > 1): one entry per class
    // that has flows or pauses, by class; empty otherwise.
    std::vector<ClassMetrics> by_class;
    // DATA packets dropped (switch + wire) / DATA packets the hosts sent (0 when none).
    double drop_fraction = 0;
    uint64_t data_packets_sent = 0, data_drops = 0;
    double stall_p99_us = 0;  // p99 over started flows of FlowOutcome::longest_gap_ps
    // fault runs: from the first plane or cable cut until goodput stays at 95% of what it
    // leaves (sim/recovery.h); nullopt: no such fault, or not recovered before a flow ended.
    std::optional<double> recovery_us;
    RetransmitReasons retransmits_by_reason;
    uint64_t timeouts = 0, path_failures = 0;
    std::optional<IncastMetrics> incast;
    // MetaRoCE runs only (empty for RoCEv2): the hosts' endpoint-wide counters summed over
    // every host, under obs/'s catalogue keys (what `mroce stat --json` and `mroce perf
    // --json` show as "counters", docs/observability.md), sorted by key; and every RTT
    // sample of every endpoint in one histogram (ns; the live "rtt").
    std::vector<std::pair<std::string, uint64_t>> counters;
    obs::Histogram rtt;
};

struct RunOutput {
    std::vector<FlowOutcome> flows;
    std::vector<ThroughputRow> throughput;
    std::vector<std::string> queue_port_names;
    std::vector<QueueRow> queue;
    std::vector<CcRow> cc;
    RunMetrics metrics;
};

// RunHook is called once the topology is built and before the run starts: the place to
// attach observers such as a pcap writer on host taps (sim/pcap.h). It returns an empty
// string, or a one-line reason that stops the run before it starts (run_spec then fails
// with that reason).
using RunHook = std::function<std::string(Topology& topology, const RunSpec& spec)>;

// RunProgress: how far a run is, for a progress line (tools/sim.cc prints it on stderr).
struct RunProgress {
    double sim_us = 0;       // simulated time
    uint64_t flows_done = 0;  // completed or failed
    uint64_t flows = 0;
    uint64_t events = 0;     // events run so far (counted in steps of kProgressEvents)
};
// ProgressFn is called every kProgressEvents events of a run (the caller decides what to
// show and how often: sim/ knows no wall clock).
using ProgressFn = std::function<void(const RunProgress&)>;
inline constexpr uint64_t kProgressEvents = uint64_t{1} << 16;

// run_spec runs one point of a scenario. On a setup problem (an engine refusing a
// work request, an unknown port name) it returns false and sets err to one line.
bool run_spec(const RunSpec& spec, uint64_t seed, RunOutput& out, std::string& err,
              const RunHook& hook = {}, const ProgressFn& progress = {});

}  // namespace mroce::sim
