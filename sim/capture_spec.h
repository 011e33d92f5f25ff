// sim/capture_spec.h — where to capture, as text: what `mroce sim --pcap` and scenario
// files can name.
//
// A spec is a comma-separated list of points:
//   host:N     host N's NIC ports, both directions, every plane (Topology::capture_host)
//   cable:N    both wires of cable N (Topology::capture_cable)
//   hosts      every host (each packet then appears twice: at its sender and receiver)
// e.g. "host:0,host:5" or "cable:12". Spaces around items are ignored.
#pragma once

#include <string>
#include <string_view>

#include "sim/capture.h"
#include "sim/topology.h"

namespace mroce::sim {

// apply_capture_spec checks the whole spec, then splices tap into each point it names.
// Returns an empty string, or a one-line reason naming the bad item (nothing is captured
// then).
std::string apply_capture_spec(Topology& topo, std::string_view spec, PacketTap& tap);

}  // namespace mroce::sim
