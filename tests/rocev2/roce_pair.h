// tests/rocev2/roce_pair.h — two RoCEv2 engines on the in-process network (sim::Network),
// the RoCEv2 counterpart of tests/core/harness.h's Pair. Hosts listen on UDP 4791.
#pragma once

#include <cstdint>
#include <memory>

#include "baselines/rocev2/engine.h"
#include "sim/event_queue.h"
#include "sim/network.h"

namespace mroce::test {

struct RocePair {
    RocePair(uint64_t seed, sim::NetworkConfig net_cfg, const rocev2::RoceConfig& cfg)
        : sim(seed), net(sim, with_roce_port(net_cfg)) {
        sim::Host& ha = net.add_host();
        sim::Host& hb = net.add_host();
        a = std::make_unique<rocev2::RoceEngine>(cfg, ha.address(), seed * 2 + 1);
        b = std::make_unique<rocev2::RoceEngine>(cfg, hb.address(), seed * 2 + 2);
        ha.attach(a.get());
        hb.attach(b.get());
    }
    static sim::NetworkConfig with_roce_port(sim::NetworkConfig c) {
        c.host.udp_port = rocev2::kUdpPort;
        return c;
    }
    sim::Host& host_a() { return net.host(0); }
    sim::Host& host_b() { return net.host(1); }
    Time now() const { return sim::to_core_time(sim.now()); }

    sim::Sim sim;
    sim::Network net;
    std::unique_ptr<rocev2::RoceEngine> a, b;
};

}  // namespace mroce::test
