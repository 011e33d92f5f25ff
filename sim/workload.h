// sim/workload.h — what a simulated run asks the network to carry: a list of flows, each
// {id, src, dst, bytes, start, traffic class, depends-on}, and the generators of the
// shipped patterns (explicit, N->1 incast, permutation, all-to-all, ring all-reduce,
// Poisson background load with sizes drawn from a flow-size CDF file).
//
// A flow starts at max(start, completion of every flow it depends on); the runner
// (scenario_run.h) enforces that, the generators only describe it. Flow ids are indices
// into the list, and a flow only depends on flows with smaller ids, so the list is a DAG
// in topological order by construction (check_workload verifies it).
//
// Randomness comes from the caller's Rng (fork it from the Sim's seed); nothing here reads
// a clock. Threading: none.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/sim_time.h"
#include "util/rng.h"

namespace mroce::sim {

struct Flow {
    uint32_t id = 0;
    uint32_t src = 0, dst = 0;  // host indices
    uint64_t bytes = 0;
    SimDuration start{0};       // earliest start, from the beginning of the run
    uint8_t traffic_class = 0;
    std::vector<uint32_t> depends_on;  // flow ids that must complete first
    // HPCC's destination port, which its analysis reads as the flow's kind (fct_hpcc.txt;
    // analysis/fct_analysis.py keeps dport 100 as "normal", 200 as "incast"): an HPCC
    // flow file's own, else kHpccNormal, or kHpccIncast for the incast generator's flows.
    uint16_t hpcc_dport = kHpccNormal;
    static constexpr uint16_t kHpccNormal = 100, kHpccIncast = 200;
};

using Workload = std::vector<Flow>;

// check_workload returns "" or a one-line reason: ids not 0..n-1 in order, a host index
// out of range, src == dst, zero bytes, or a dependency on itself or a later flow.
std::string check_workload(const Workload& w, uint32_t hosts);

// add_flow appends a flow with the next id and returns that id.
uint32_t add_flow(Workload& w, uint32_t src, uint32_t dst, uint64_t bytes, SimDuration start = {},
                  uint8_t tc = 0, std::vector<uint32_t> deps = {});

// incast: every host in `senders` sends `bytes` to `receiver` at `start`.
void incast(Workload& w, const std::vector<uint32_t>& senders, uint32_t receiver, uint64_t bytes,
            SimDuration start = {});
// permutation: every host sends `bytes` to one other host, each host receiving exactly
// one flow (a random derangement of 0..hosts-1 drawn from rng).
void permutation(Workload& w, uint32_t hosts, uint64_t bytes, Rng& rng);
// all_to_all: every ordered pair of distinct hosts, `bytes` each.
void all_to_all(Workload& w, uint32_t hosts, uint64_t bytes);
// ring_allreduce: the ring all-reduce of a `bytes` buffer over hosts 0..n-1 (i -> i+1):
// 2(n-1) steps (reduce-scatter, then all-gather), each moving a chunk of bytes/n (rounded
// up) from every host to its successor. Step s of host i depends on step s-1 of host
// i-1: the chunk it forwards is the one that has just arrived.
void ring_allreduce(Workload& w, uint32_t hosts, uint64_t bytes);

// FlowSizeCdf: a piecewise-linear flow-size distribution. File format: '#' comments, then
// lines "size_bytes cum_prob" with sizes strictly increasing, cum_prob non-decreasing in
// [0, 1] and the last one exactly 1 (scenarios/data/*.cdf). Below the first point the
// first size is used; a sample is never below 1 byte.
class FlowSizeCdf {
  public:
    // load reads a CDF file; on failure returns false and sets err to "file:line: reason".
    bool load(const std::string& path, std::string& err);
    // parse reads the same format from text (name is used in errors).
    bool parse(const std::string& text, const std::string& name, std::string& err);
    // sample draws one size (>= 1 byte), interpolating linearly between points.
    uint64_t sample(Rng& rng) const;
    // mean is the distribution's mean in bytes (of the interpolated CDF).
    double mean() const;
    const std::vector<std::pair<double, double>>& points() const { return points_; }

  private:
    std::vector<std::pair<double, double>> points_;  // (size, cum_prob)
};

// Bounds on what one run may ask for, so a scenario value cannot exhaust memory: the
// run allocates a source and a destination buffer of its largest flow, and keeps one
// entry per flow and per message.
inline constexpr uint64_t kMaxFlowBytes = uint64_t{1} << 30;
inline constexpr uint64_t kMaxFlows = 10'000'000;
inline constexpr uint64_t kMaxMessages = 50'000'000;

// background: Poisson arrivals from `from` to `until` whose offered load is `load` of the
// hosts' aggregate line rate (hosts * rate_bps), sizes from cdf, src and dst uniform over
// distinct hosts, at most max_flows flows (0 = kMaxFlows; check_workload reports a run
// that reached kMaxFlows).
void background(Workload& w, uint32_t hosts, double load, uint64_t rate_bps,
                const FlowSizeCdf& cdf, SimDuration from, SimDuration until, uint64_t max_flows,
                Rng& rng, uint8_t tc = 0);

}  // namespace mroce::sim
