// sim/capture.h — capture points: a PacketTap sees packets at a place in the fabric, a
// TapSink puts one in front of any PacketSink.
//
// A capture point is spliced into the chain of sinks (host NIC port -> wire -> switch
// port -> ... -> host NIC port) rather than tested for on the packet path, so a simulation
// without captures pays nothing, not even a branch, and the hot files stay untouched.
// Topology::capture_host / capture_cable (topology.h) do the splicing; PcapWriter (pcap.h)
// is the usual tap.
//
// Threading: single-threaded, like its Sim.
#pragma once

#include <utility>

#include "sim/event_queue.h"
#include "sim/packet.h"

namespace mroce::sim {

// PacketTap sees a packet (read-only) at simulated time `at`. It must not keep the
// reference or run the simulation.
class PacketTap {
  public:
    virtual ~PacketTap() = default;
    virtual void on_packet(const Packet& packet, SimTime at) = 0;
};

// TapSink shows every packet to its tap, then hands it on to `next` unchanged.
class TapSink final : public PacketSink {
  public:
    TapSink(Sim& sim, PacketTap& tap, PacketSink& next) : sim_(sim), tap_(tap), next_(next) {}
    void receive(PacketPtr packet) override {
        tap_.on_packet(*packet, sim_.now());
        next_.receive(std::move(packet));
    }
    PacketSink& next() const { return next_; }

  private:
    Sim& sim_;
    PacketTap& tap_;
    PacketSink& next_;
};

}  // namespace mroce::sim
