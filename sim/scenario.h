// sim/scenario.h — scenario files: one TOML file describes a topology, a protocol and its
// parameters, a workload, a fault timeline, budgets and output sampling; `--set k=v`
// overrides any key by dotted path; a [sweep] table runs every point of the cartesian
// product of its arrays. Parsing and validation live here; running is scenario_run.h.
//
//   file ──toml++──► table ──--set──► table ──[sweep] points──► RunSpec per point
//                                                   (strict: unknown keys, wrong types and
//                                                    out-of-range values are one-line errors)
//
// The format reference is docs/sim.md. Threading: none; no I/O except reading the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "baselines/rocev2/config.h"
#include "core/config.h"
#include "sim/topology.h"
#include "sim/workload.h"

namespace mroce::sim {

enum class Protocol : uint8_t { kMroce, kRocev2 };
const char* to_string(Protocol p);

// A swept or overridden parameter's value, as written in the file or on the command line.
using ParamValue = std::variant<bool, int64_t, double, std::string>;

struct MroceSpec {
    core::EndpointConfig endpoint;  // num_paths, max_payload, window_bytes_per_path, ...
    bool window_auto = true;        // window_bytes_per_path = BDP / paths + one packet
    bool stream_per_flow = true;    // false: one stream per (src, dst) pair
    bool pfc = false;               // use topology.pfc (MetaRoCE is built for lossy fabrics)
    // Open the connection of every pair of hosts the workload joins at time 0, before its
    // flows: RoCEv2's QPs are connected for free when a flow posts, so without this only
    // MetaRoCE's first flow of a pair pays a connection's handshake (docs/sim.md).
    bool preconnect = false;
};

struct RoceSpec {
    rocev2::RoceConfig config;  // mtu, window, timeouts, dcqcn.enabled
    uint32_t qps_per_pair = 1;  // a flow is split evenly over the pair's QPs
    bool pfc = true;            // use topology.pfc when it is enabled there
};

enum class WorkloadKind : uint8_t { kExplicit, kIncast, kPermutation, kAllToAll, kRingAllreduce, kBackground };

struct WorkloadSpec {
    WorkloadKind kind = WorkloadKind::kAllToAll;
    uint64_t bytes = 65536;       // per flow (ring: the buffer reduced)
    uint64_t message_bytes = 0;   // flows are posted as WRs of this size (0 = one WR)
    uint32_t hosts = 0;           // hosts taking part (0 = all)
    uint32_t senders = 0;         // incast: senders (0 = every other participating host)
    uint32_t receiver = 0;        // incast
    uint32_t first_sender = 0;    // incast: senders are taken from this host on
    SimDuration start{0};
    uint8_t traffic_class = 0;
    double load = 0.3;            // background
    std::string cdf;              // background: CDF file (relative to the scenario file)
    SimDuration duration = std::chrono::microseconds(1000);  // background arrivals window
    uint64_t max_flows = 0;       // background cap (0 = none)
    Workload flows;               // explicit; for the generators, extra flows after theirs
    // hpcc_flows: the file's time of the run's 0, its first flow's start (HPCC's
    // traffic_gen.py starts flows at 2 s); fct_hpcc.txt adds it back to its start column.
    SimDuration time_origin{0};
};

enum class FaultKind : uint8_t { kPlaneDown, kPlaneUp, kCableDown, kCableUp, kLoss, kRate, kBurstLoss };

struct FaultSpec {
    SimDuration at{0};
    FaultKind kind = FaultKind::kPlaneDown;
    uint32_t plane = 0;
    uint32_t host = 0;  // cable faults: the cable from this host's NIC port in `plane`
    // cable faults: the cable on this switch port, named as in queue.csv ("leaf0/p4",
    // "P1.spine0/p2"); switch-to-switch cables included. Empty: host and plane say.
    std::string port;
    std::optional<SimDuration> reconverge;  // nullopt: routing never learns
    double loss = 0;
    uint64_t rate_bps = 0;
    GilbertElliott burst;  // kind burst_loss
};

struct OutputSpec {
    SimDuration sample = std::chrono::microseconds(10);  // 0 = no time series
    uint32_t flows = 16;               // throughput.csv: the first N flows (plus "all")
    std::vector<std::string> queue_ports;  // queue.csv: port names; empty = automatic
    uint32_t max_queue_ports = 8;      // automatic choice: the hottest ToR downlinks... at most
    uint32_t cc_conns = 4;             // cc.csv: the first N connections / QPs
};

struct RunSpec {
    Protocol protocol = Protocol::kMroce;
    std::string label;  // unique per scenario, filesystem-safe
    std::vector<std::pair<std::string, ParamValue>> params;  // swept and --set keys
    TopologyConfig topology;
    double loss = 0;  // Bernoulli loss on every cable
    MroceSpec mroce;
    RoceSpec rocev2;
    WorkloadSpec workload;
    std::vector<FaultSpec> faults;
    SimDuration time_limit = std::chrono::milliseconds(100);
    uint64_t max_events = 0;  // 0 = no cap
    OutputSpec output;
};

struct Scenario {
    std::string name;
    std::string file;
    uint64_t seed = 1;
    std::vector<RunSpec> runs;
};

// load_scenario reads `path`, applies `overrides` ("dotted.key=value"; the value is TOML,
// or a bare string) and expands [sweep]. seed, if given, replaces the file's seed. On
// failure returns nullopt and sets err to one line naming the key (file:line when known).
std::optional<Scenario> load_scenario(const std::string& path, const std::vector<std::string>& overrides,
                                      std::optional<uint64_t> seed, std::string& err);
// parse_scenario is load_scenario on text (name stands for the file in errors and paths).
std::optional<Scenario> parse_scenario(const std::string& text, const std::string& name,
                                       const std::vector<std::string>& overrides,
                                       std::optional<uint64_t> seed, std::string& err);

// param_to_string renders a parameter value as in a label ("0.01", "rocev2", "true").
std::string param_to_string(const ParamValue& v);

}  // namespace mroce::sim
