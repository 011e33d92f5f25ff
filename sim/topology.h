// sim/topology.h — switched networks built from one config: a single switch, a 2-tier
// leaf-spine, a 3-tier k-ary fat tree, each optionally in P independent planes (host h's
// NIC port p is cabled into plane p). The builder creates hosts, switches and cables,
// assigns addresses (host n = 198.18.0.0 + n + 1, see host.h) and fills every switch's
// routing table with all shortest paths (ECMP groups).
//
//   Host h ─port p─ cable ─ ToR/leaf ─ cables ─ spine (─ core) ─ ... ─ ToR ─ cable ─ Host g
//
// A cable is two wires (Links with rate 0: the NIC port or switch port in front of each
// serialises; the wire adds delay, jitter and the configured impairments). Faults act on
// cables and planes (faults.h); routing reconverges on request (recompute_routes) over the
// cables marked routable, so a dead cable blackholes traffic until then.
//
// Ownership: the Topology owns hosts, switches and wires; engines attached to hosts are
// not owned. Destroy the Topology before its Sim. Threading: single-threaded.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/capture.h"
#include "sim/event_queue.h"
#include "sim/host.h"
#include "sim/link.h"
#include "sim/switch.h"

namespace mroce::sim {

enum class TopologyKind : uint8_t { kSingleSwitch, kLeafSpine, kFatTree, kGraph };

// GraphSpec: an explicit graph (kGraph), as an imported topology file describes it
// (sim/import.h): nodes 0..nodes-1, some of them switches, and links, each with its own
// rate, delay and loss. The hosts are the other nodes, in node order: host i is node
// host_nodes[i], cabled by its one link to a switch. Every plane is a copy of the graph.
struct GraphLink {
    uint32_t a = 0, b = 0;  // node ids
    uint64_t rate_bps = 0;
    SimDuration delay{0};
    double loss = 0;        // per packet, each direction
};
struct GraphSpec {
    uint32_t nodes = 0;
    std::vector<bool> is_switch;       // by node id
    std::vector<GraphLink> links;
    std::vector<uint32_t> host_nodes;  // node id of host i (the non-switch nodes, in order)
    // Each switch's tier by node id (0 ToR, 1 aggregation/spine, 2 core), when the file
    // says; empty: a switch with a host on it is tier 0 and any other tier 1.
    std::vector<uint8_t> tiers;
    std::string format;  // the importer's ("hpcc", "htsim"), for checks across its files
};

// GraphPath: what an idle fabric offers between two hosts of a graph over its shortest
// paths (fewest cables): cables crossed, the least propagation delay and the best
// bottleneck rate among those paths (ECMP may pick any of them).
struct GraphPath {
    uint32_t hops = 0;
    SimDuration delay{0};
    uint64_t rate_bps = 0;
};
// graph_paths returns, for host src of g, the GraphPath to every host (index: host).
std::vector<GraphPath> graph_paths(const GraphSpec& g, uint32_t src);

// The parameters every cable shares: rate of the ports at both ends, propagation delay,
// jitter. Switch buffers, ECN and PFC come from TopologyConfig::switches.
struct CableConfig {
    uint64_t rate_bps = 100'000'000'000;
    SimDuration delay = std::chrono::microseconds(1);
    SimDuration jitter_max = std::chrono::nanoseconds(1);  // as LinkConfig: breaks phase locks
};

struct TopologyConfig {
    TopologyKind kind = TopologyKind::kSingleSwitch;
    uint32_t planes = 1;  // P independent copies; every host has P NIC ports

    uint32_t hosts = 4;  // kSingleSwitch: hosts on the one switch

    uint32_t leaves = 2;          // kLeafSpine
    uint32_t spines = 2;          //
    uint32_t hosts_per_leaf = 2;  //
    // Leaf downlink capacity over uplink capacity: uplinks run at
    // cable.rate_bps * hosts_per_leaf / (spines * oversubscription). 1 = non-blocking.
    double oversubscription = 1.0;

    uint32_t k = 4;  // kFatTree: even k; k^3/4 hosts, k pods of k/2 edge + k/2 aggregation

    // kGraph: the graph. cable.rate_bps is then its hosts' line rate, cable.delay its
    // longest link delay (for timers sized by the fabric); each cable keeps its own.
    GraphSpec graph;

    CableConfig cable;
    // Per-cable delay of host cables (both wires), overriding cable.delay: so one fabric
    // mixes us and ms RTTs. Later entries win. Validated by check_topology_config.
    struct HostCableDelay {
        uint32_t host = 0;
        std::optional<uint32_t> plane;  // nullopt: every plane
        SimDuration delay{0};
    };
    std::vector<HostCableDelay> cable_delays;
    SwitchConfig switches;  // every switch
    HostConfig host;        // every host (ports := planes, line rate := cable rate)
    std::string name = "topo";  // prefix of random-stream labels; unique per Sim
};

// host_cable_delay is the delay of the cable from host h's NIC port in `plane` (its
// cable_delays entry, else cable.delay).
SimDuration host_cable_delay(const TopologyConfig& c, uint32_t host, uint32_t plane);
// max_host_cable_delay is the largest host_cable_delay of host h over the planes.
SimDuration max_host_cable_delay(const TopologyConfig& c, uint32_t host);

// check_topology_config returns an empty string if c can be built, else a one-line reason.
std::string check_topology_config(const TopologyConfig& c);

// One end of a cable: a host's NIC port or a switch port.
struct CableEnd {
    bool is_host = false;
    uint32_t node = 0;  // host index or switch index
    uint16_t port = 0;  // NIC port (plane) or switch port
};

struct Cable {
    CableEnd a, b;      // a is the lower tier (the host, the leaf, the edge switch)
    uint32_t plane = 0;
    std::unique_ptr<Link> a_to_b, b_to_a;
    bool up = true;        // carries packets (false: both wires blackhole)
    bool routable = true;  // used by the next recompute_routes
};

// Totals over the whole fabric, for invariant checks and reports.
struct FabricTotals {
    uint64_t host_tx_packets = 0, host_tx_bytes = 0;  // datagrams hosts' NICs accepted
    uint64_t host_tx_data_packets = 0;                // of those, DATA (HostConfig::is_data)
    uint64_t data_drops = 0;  // DATA packets among switch_drops + wire_drops
    uint64_t host_rx_packets = 0, host_rx_bytes = 0;  // arrivals at hosts' NIC ports
    uint64_t switch_drops = 0, switch_drop_bytes = 0;  // buffer, PFC overflow, no route
    uint64_t pfc_overflow_drops = 0;
    uint64_t wire_drops = 0, wire_drop_bytes = 0;  // loss models, blackholes
    uint64_t wire_copies = 0;                      // duplicates made by impairments
    uint64_t ecn_marks = 0;
    uint64_t pauses_sent = 0;
    std::array<uint64_t, kMaxTrafficClasses> class_pauses_sent{};  // pauses_sent by class
    uint64_t max_queue_bytes = 0;  // the largest egress queue seen
    size_t in_flight = 0;          // packets in NICs, switch queues and on wires now
};

class Topology {
  public:
    // Topology builds the network of `config` (check it first with check_topology_config;
    // an invalid config is a caller bug and yields an empty topology).
    Topology(Sim& sim, const TopologyConfig& config);
    ~Topology();
    Topology(const Topology&) = delete;
    Topology& operator=(const Topology&) = delete;

    Sim& sim() { return sim_; }
    const TopologyConfig& config() const { return config_; }

    size_t host_count() const { return hosts_.size(); }
    Host& host(size_t i) { return *hosts_.at(i); }
    size_t switch_count() const { return switches_.size(); }
    Switch& switch_at(size_t i) { return *switches_.at(i); }
    const Switch& switch_at(size_t i) const { return *switches_.at(i); }
    // tier: 0 = ToR/leaf/edge, 1 = spine/aggregation, 2 = core. plane: its plane.
    uint32_t switch_tier(size_t i) const { return switch_info_.at(i).tier; }
    uint32_t switch_plane(size_t i) const { return switch_info_.at(i).plane; }

    size_t cable_count() const { return cables_.size(); }
    Cable& cable(size_t i) { return cables_.at(i); }
    const Cable& cable(size_t i) const { return cables_.at(i); }
    // host_cable is the cable from host h's NIC port p (plane p) to its ToR.
    size_t host_cable(uint32_t host, uint32_t plane) const;
    // cables_of_plane lists the cables of plane p.
    std::vector<size_t> cables_of_plane(uint32_t plane) const;

    // set_cable_up takes a cable down (both wires blackhole from now on) or up again. It
    // does not touch routing: see set_cable_routable / recompute_routes.
    void set_cable_up(size_t c, bool up);
    // set_cable_routable marks whether the next recompute_routes may use the cable.
    void set_cable_routable(size_t c, bool routable) { cables_.at(c).routable = routable; }
    // recompute_routes rebuilds every switch's table: all shortest paths over routable
    // cables (per destination host; hosts never forward).
    void recompute_routes();
    // set_cable_rate sets the egress rate of the ports at both ends (a degraded link).
    void set_cable_rate(size_t c, uint64_t rate_bps);

    // set_tap installs tap on every host: it sees every packet delivered to a host.
    void set_tap(const Host::RxTap& tap);

    // capture_host shows tap every packet host h's NIC ports send (when its last bit has
    // left the NIC) and receive (when it arrives), on every plane. capture_cable shows tap
    // every packet either wire of cable c delivers (after the wire's delay and losses).
    // Each splices TapSinks into the chain of sinks (capture.h), so a topology without
    // captures pays nothing. tap is not owned and must outlive the topology's runs.
    void capture_host(uint32_t h, PacketTap& tap);
    void capture_cable(size_t c, PacketTap& tap);

    FabricTotals totals() const;

  private:
    struct SwitchInfo {
        uint32_t tier = 0;
        uint32_t plane = 0;
    };
    uint32_t add_switch(uint32_t tier, uint32_t plane, const std::string& role, uint32_t n);
    void connect_host(uint32_t host, uint32_t plane, uint32_t sw);
    void connect_switches(uint32_t lower, uint32_t upper, uint32_t plane, uint64_t rate_bps);
    void wire_up(Cable& c);
    void build_plane(uint32_t plane);

    Sim& sim_;
    TopologyConfig config_;
    // Destroyed in reverse: cables (wires) first, then switches, then hosts; each cancels
    // its own events.
    std::vector<std::unique_ptr<Host>> hosts_;
    std::vector<std::unique_ptr<Switch>> switches_;
    std::vector<SwitchInfo> switch_info_;
    std::vector<Cable> cables_;
    std::vector<std::vector<size_t>> host_cables_;  // [host][plane] -> cable
    std::vector<std::unique_ptr<TapSink>> taps_;    // capture points, spliced in
    std::vector<const GraphLink*> graph_links_;     // kGraph: each cable's link (config_.graph)
};

}  // namespace mroce::sim
