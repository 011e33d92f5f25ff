// sim/faults.h — faults scheduled at given simulated times on a Topology: cables and whole
// planes going down and up, routing reconverging after a delay (or never), per-cable loss
// (Bernoulli, Gilbert-Elliott bursts), a degraded rate, a "lossy but up" cable.
//
//   at t: cable down ──► both wires blackhole ──(reconvergence delay)──► recompute_routes
//                        (ECMP still hashes onto it)                   (ECMP avoids it)
//
// With no reconvergence (std::nullopt) routing never learns: every flow hashed onto the
// dead cable is blackholed for good, which is what MetaRoCE's path re-roll must survive.
// Reconvergence uses the cable states at the moment it runs, so flaps settle correctly.
// Loss and rate faults never touch routing: a lossy cable stays "up".
//
// Ownership: the injector refers to its Topology (which must outlive it) and cancels its
// pending faults when destroyed. Threading: single-threaded.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/topology.h"

namespace mroce::sim {

class FaultInjector {
  public:
    explicit FaultInjector(Topology& topology) : topo_(topology) {}
    ~FaultInjector();
    FaultInjector(const FaultInjector&) = delete;
    FaultInjector& operator=(const FaultInjector&) = delete;

    // cable_down at `at`: cable c drops everything; routing avoids it reconverge_after
    // later (std::nullopt: never).
    void cable_down(SimTime at, size_t c, std::optional<SimDuration> reconverge_after);
    // cable_up at `at`: cable c carries packets again; routing uses it reconverge_after
    // later (std::nullopt: routing is left as it is).
    void cable_up(SimTime at, size_t c, std::optional<SimDuration> reconverge_after);
    // plane_down / plane_up: the same for every cable of plane p (host cables included).
    void plane_down(SimTime at, uint32_t plane, std::optional<SimDuration> reconverge_after);
    void plane_up(SimTime at, uint32_t plane, std::optional<SimDuration> reconverge_after);

    // set_loss at `at`: Bernoulli loss probability p on both wires of cable c.
    void set_loss(SimTime at, size_t c, double p);
    // set_burst_loss at `at`: Gilbert-Elliott loss on both wires (nullopt turns it off).
    void set_burst_loss(SimTime at, size_t c, std::optional<GilbertElliott> model);
    // set_rate at `at`: both ports of cable c serialise at rate_bps (degraded link).
    void set_rate(SimTime at, size_t c, uint64_t rate_bps);

    uint64_t applied() const { return applied_; }        // faults that have taken effect
    uint64_t reconvergences() const { return reconvergences_; }

  private:
    template <class F>
    void at(SimTime t, F&& f);
    void set_state(SimTime t, std::vector<size_t> cables, bool up,
                   std::optional<SimDuration> reconverge_after);

    Topology& topo_;
    std::vector<EventHandle> events_;
    uint64_t applied_ = 0;
    uint64_t reconvergences_ = 0;
};

}  // namespace mroce::sim
