// sim/import.h — other simulators' input files, so that a published experiment can be
// rerun on this simulator unchanged (issue 18):
//
//   HPCC (github.com/alibaba-edu/High-Precision-Congestion-Control; its
//   simulation/scratch/third.cc reads these, traffic_gen/traffic_gen.py writes flows):
//     flow file      first line N, then N lines `src dst pg dport size start_time`
//                    (node ids, priority group, destination port, bytes, seconds)
//     topology file  `node_num switch_num link_num`, the switch_num switch node ids, then
//                    link_num lines `src dst rate delay error_rate` ("100Gbps", "0.001ms")
//   htsim (github.com/Broadcom/csg-htsim; sim/datacenter/connection_matrix.cpp reads it):
//     connection matrix (.cm)  `Nodes N`, `Connections M`, then M lines
//                    `src->dst [id I] start T size S [prio P]` (T in picoseconds, S bytes)
//     topology (.topo)  sim/datacenter/fat_tree_topology.cpp, FatTreeTopology::load, which
//                    the datacenter mains read with -topo: a header `Nodes N`, `Tiers 2|3`,
//                    `Podsize P`, then per tier `Tier t` and `Key value` lines
//                    (Downlink_speed_Gbps, Downlink_Latency_ns, Radix_Up, Radix_Down, ...)
//
// Each parser reads a whole file and returns what it describes, or nullopt and one line
// `file:line: problem` in err. Node ids map to host indices through the topology: an
// HPCC topology's hosts are its non-switch nodes in node order; any other topology's
// host h is node h. Threading: none; no I/O except reading the named file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/topology.h"
#include "sim/workload.h"

namespace mroce::sim {

// NodeMap: the host index of each node id a file may name (kNotAHost for a switch).
struct NodeMap {
    static constexpr uint32_t kNotAHost = UINT32_MAX;
    std::vector<uint32_t> host_of_node;
    // An htsim topology's Nodes (0: another topology): its connection matrices must have
    // as many (htsim's mains exit on a mismatch).
    uint32_t htsim_nodes = 0;
    // of builds the map of a topology config: GraphSpec's host_nodes, or identity.
    static NodeMap of(const TopologyConfig& t, uint32_t hosts);
};

// parse_hpcc_flows reads an HPCC flow file. HPCC reads exactly N flows after the count and
// ignores anything further, and so does this (docs/sim.md). Start times must not go
// back (HPCC schedules them in file order). pg is checked and not used: a flow's traffic
// class is the scenario's; dport goes to Flow::hpcc_dport (fct_hpcc.txt).
std::optional<Workload> parse_hpcc_flows(const std::string& text, const std::string& name,
                                         const NodeMap& nodes, std::string& err);

// parse_htsim_cm reads an htsim connection matrix. Triggers, failures and htsim's
// endless flows (size 0) have no equivalent here and are refused; `prio` is accepted
// and not used; `id` must be nonzero, as htsim requires. On an htsim topology, Nodes
// must be the topology's (nodes.htsim_nodes).
std::optional<Workload> parse_htsim_cm(const std::string& text, const std::string& name,
                                       const NodeMap& nodes, std::string& err);

// parse_hpcc_topology reads an HPCC topology file into an explicit graph. Hosts must
// each have exactly one link, to a switch, and share one line rate (the simulator's hosts
// have one); links between two hosts or from a node to itself are refused.
std::optional<GraphSpec> parse_hpcc_topology(const std::string& text, const std::string& name,
                                             std::string& err);

// HtsimTopology: an htsim topology file as this simulator builds it. graph's nodes are
// the hosts 0..Nodes-1 (htsim's node n is host n, as in its connection matrices), then
// the ToR (tier 0), aggregation (tier 1) and core (tier 2) switches in htsim's order;
// graph.tiers gives each switch's tier. Bundles are parallel links; a switch's
// Switch_Latency_ns goes half into each of its links' delay, so every path crosses the
// same total latency as in htsim (the simulator's switches forward without delay).
struct HtsimTopology {
    GraphSpec graph;
    uint32_t tiers = 0;
    // Every switch port's buffer when the file sets Queue_Up/Queue_Down (it must then
    // set every tier's, all equal: the simulator has one buffer size for every port);
    // nullopt: the scenario's buffer_bytes, as htsim's -q.
    std::optional<uint64_t> queue_bytes;
};

// parse_htsim_topology reads an htsim topology file and builds what htsim's
// FatTreeTopology builds from it: the same checks (each of htsim's refusals is refused
// here, with the key's file:line), the same switches and wiring. Keys are
// case-insensitive, as in htsim. Stricter than htsim: an unknown key, a header key after
// the first `Tier`, a tier key before it, a repeated key, a non-integer value, a Tier at
// or beyond Tiers and a 2-tier Podsize other than Nodes (htsim ignores the first ones
// and wires the last one inconsistently) are refused rather than ignored.
std::optional<HtsimTopology> parse_htsim_topology(const std::string& text, const std::string& name,
                                                  std::string& err);

// read_file returns the file's text, or nullopt and "path: cannot open" in err.
std::optional<std::string> read_file(const std::string& path, std::string& err);

// hpcc_node_ipv4 is HPCC's address of a node (third.cc's node_id_to_ip): 11.x.y.1 with
// x.y the node id in base 256, which fct_hpcc.txt uses for sip and dip.
constexpr uint32_t hpcc_node_ipv4(uint32_t node) {
    return 0x0b000001u + (node / 256) * 0x00010000u + (node % 256) * 0x00000100u;
}

}  // namespace mroce::sim
