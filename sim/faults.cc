#include "sim/faults.h"

#include <memory>

namespace mroce::sim {

FaultInjector::~FaultInjector() {
    for (EventHandle h : events_) topo_.sim().cancel(h);
}

template <class F>
void FaultInjector::at(SimTime t, F&& f) {
    events_.push_back(topo_.sim().schedule_at(t, std::forward<F>(f)));
}

void FaultInjector::set_state(SimTime t, std::vector<size_t> cables, bool up,
                              std::optional<SimDuration> reconverge_after) {
    // Shared by the fault and its reconvergence; a plane's cable list may not fit inline.
    auto list = std::make_shared<const std::vector<size_t>>(std::move(cables));
    at(t, [this, list, up, reconverge_after] {
        ++applied_;
        for (size_t c : *list) topo_.set_cable_up(c, up);
        if (!reconverge_after) return;
        at(topo_.sim().now() + *reconverge_after, [this, list] {
            // Routing learns the state the cables are in now, not the one of the fault.
            for (size_t c : *list) topo_.set_cable_routable(c, topo_.cable(c).up);
            topo_.recompute_routes();
            ++reconvergences_;
        });
    });
}

void FaultInjector::cable_down(SimTime t, size_t c, std::optional<SimDuration> reconverge_after) {
    set_state(t, {c}, false, reconverge_after);
}

void FaultInjector::cable_up(SimTime t, size_t c, std::optional<SimDuration> reconverge_after) {
    set_state(t, {c}, true, reconverge_after);
}

void FaultInjector::plane_down(SimTime t, uint32_t plane,
                               std::optional<SimDuration> reconverge_after) {
    set_state(t, topo_.cables_of_plane(plane), false, reconverge_after);
}

void FaultInjector::plane_up(SimTime t, uint32_t plane,
                             std::optional<SimDuration> reconverge_after) {
    set_state(t, topo_.cables_of_plane(plane), true, reconverge_after);
}

void FaultInjector::set_loss(SimTime t, size_t c, double p) {
    at(t, [this, c, p] {
        ++applied_;
        topo_.cable(c).a_to_b->config().loss_probability = p;
        topo_.cable(c).b_to_a->config().loss_probability = p;
    });
}

void FaultInjector::set_burst_loss(SimTime t, size_t c, std::optional<GilbertElliott> model) {
    at(t, [this, c, model] {
        ++applied_;
        topo_.cable(c).a_to_b->config().burst_loss = model;
        topo_.cable(c).b_to_a->config().burst_loss = model;
    });
}

void FaultInjector::set_rate(SimTime t, size_t c, uint64_t rate_bps) {
    at(t, [this, c, rate_bps] {
        ++applied_;
        topo_.set_cable_rate(c, rate_bps);
    });
}

}  // namespace mroce::sim
