#include "sim/network.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "sim/test_seed.h"

namespace mroce::sim {
namespace {

using namespace std::chrono_literals;
using testing::seed_note;
using testing::test_seed;

NetworkConfig quiet_network(uint32_t routes = 8) {
    NetworkConfig c;
    c.routes = routes;
    c.link.jitter_max = SimDuration{0};
    return c;
}

// Injects a datagram into the fabric as if host src's NIC had just sent it.
void inject(Sim& sim, Network& net, const Host& src, const Host& dst, uint16_t src_port,
            size_t size = 200) {
    PacketPtr p = sim.packets().acquire();
    p->bytes.resize(size);
    p->meta.src = src.address().with_port(src_port);
    p->meta.dst = dst.address();
    net.receive(std::move(p));
}

TEST(Network, HostAddressesAreInTheBenchmarkingRange) {
    Sim sim(1);
    Network net(sim);
    Host& a = net.add_host();
    Host& b = net.add_host(HostConfig{.line_rate_bps = 25'000'000'000, .udp_port = 5000});
    EXPECT_EQ(a.address().to_string(), "198.18.0.1:4797");
    EXPECT_EQ(b.address().to_string(), "198.18.0.2:5000");
    EXPECT_EQ(a.index(), 0u);
    EXPECT_EQ(b.index(), 1u);
    EXPECT_EQ(net.find_host(Address::ipv4(0xC6120002, 1)), &b);
    EXPECT_EQ(net.find_host(Address::ipv4(0xC6120000, 1)), nullptr);  // the network address
    EXPECT_EQ(net.find_host(Address::ipv4(0x0A000001, 1)), nullptr);
    EXPECT_EQ(&net.host(1), &b);
    for (int i = 2; i < 300; ++i) net.add_host();
    EXPECT_EQ(net.host(299).address().to_string(), "198.18.1.44:4797");
    EXPECT_EQ(net.find_host(net.host(299).address()), &net.host(299));
}

TEST(Network, RouteChoiceIsDeterministicForASalt) {
    Sim sim1(1), sim2(2);
    NetworkConfig c = quiet_network();
    c.ecmp_salt = 0x1234;
    Network n1(sim1, c), n2(sim2, c);
    c.ecmp_salt = 0x1235;
    Network n3(sim1, NetworkConfig{.ecmp_salt = 0x1235, .name = "other"});
    for (auto* n : {&n1, &n2, &n3}) {
        n->add_host();
        n->add_host();
    }
    int differ = 0;
    for (uint16_t port = 1000; port < 2000; ++port) {
        const uint32_t r = n1.route_of(n1.host(0), n1.host(1), port, 4797);
        ASSERT_LT(r, 8u);
        ASSERT_EQ(r, n2.route_of(n2.host(0), n2.host(1), port, 4797));  // same salt, other seed
        ASSERT_EQ(r, n1.route_of(n1.host(0), n1.host(1), port, 4797));  // stable
        differ += r != n3.route_of(n3.host(0), n3.host(1), port, 4797);
    }
    EXPECT_GT(differ, 800);  // another salt is another hash (7/8 expected to differ)
    // The reverse direction and the destination port are part of the tuple too.
    int asymmetric = 0;
    for (uint16_t port = 1000; port < 1100; ++port)
        asymmetric += n1.route_of(n1.host(0), n1.host(1), port, 4797) !=
                      n1.route_of(n1.host(1), n1.host(0), port, 4797);
    EXPECT_GT(asymmetric, 50);

    // Default salt: from the Sim's seed, so the same seed gives the same salt.
    Sim s1(9), s2(9), s3(10);
    EXPECT_EQ(Network(s1).ecmp_salt(), Network(s2).ecmp_salt());
    EXPECT_NE(Network(s1).ecmp_salt(), Network(s3).ecmp_salt());
}

TEST(Network, RoutesSpreadEvenlyOverSourcePorts) {
    const uint64_t seed = test_seed(5);
    SCOPED_TRACE(seed_note(seed));
    Sim sim(seed);
    Network net(sim, quiet_network(8));
    Host& a = net.add_host();
    Host& b = net.add_host();
    std::vector<uint64_t> counts(8);
    uint64_t n = 0;
    for (uint32_t port = 1024; port <= 65535; ++port, ++n)
        ++counts[net.route_of(a, b, static_cast<uint16_t>(port), 4797)];
    const double expected = static_cast<double>(n) / 8;
    double chi2 = 0;
    for (uint64_t c : counts) chi2 += (c - expected) * (c - expected) / expected;
    // 7 degrees of freedom: P(chi2 > 30) < 1e-4.
    EXPECT_LT(chi2, 30.0);

    // Also for a few ports at a time: 64 consecutive ports touch most routes.
    std::vector<bool> seen(8);
    for (uint16_t port = 50000; port < 50064; ++port) seen[net.route_of(a, b, port, 4797)] = true;
    EXPECT_EQ(std::count(seen.begin(), seen.end(), true), 8);
}

TEST(Network, PacketsTakeTheirHashedRouteAndTheTapSeesThem) {
    Sim sim(1);
    Network net(sim, quiet_network());
    Host& a = net.add_host();
    Host& b = net.add_host();
    std::vector<std::pair<uint16_t, uint32_t>> tapped;  // (src port, route)
    net.set_tap([&](const Packet& p, const Host& receiver) {
        EXPECT_EQ(&receiver, &b);
        tapped.emplace_back(p.meta.src.port, p.route);
    });
    std::map<uint32_t, uint64_t> expected_per_route;
    for (uint16_t port = 40000; port < 40100; ++port) {
        inject(sim, net, a, b, port);
        ++expected_per_route[net.route_of(a, b, port, 4797)];
    }
    sim.run_until({});
    ASSERT_EQ(tapped.size(), 100u);
    for (auto [port, route] : tapped) EXPECT_EQ(route, net.route_of(a, b, port, 4797));
    for (uint32_t r = 0; r < 8; ++r)
        EXPECT_EQ(net.link(a, b, r).stats().delivered_packets, expected_per_route[r]) << r;
    EXPECT_EQ(net.route_stats(a, b).delivered_packets, 100u);
    EXPECT_EQ(net.route_stats(b, a).offered_packets, 0u);
    EXPECT_EQ(net.stats().routed_packets, 100u);
    EXPECT_EQ(b.stats().rx_dropped_no_engine, 100u);  // nobody attached: counted, dropped
}

TEST(Network, BlackholingOneRouteOnlyHitsPortsHashedToIt) {
    Sim sim(1);
    Network net(sim, quiet_network());
    Host& a = net.add_host();
    Host& b = net.add_host();
    net.link(a, b, 3).config().blackhole = TimeWindow{};  // from t=0, forever
    std::vector<uint16_t> arrived;
    net.set_tap([&](const Packet& p, const Host&) { arrived.push_back(p.meta.src.port); });
    uint64_t on_route_3 = 0;
    for (uint16_t port = 40000; port < 40200; ++port) {
        inject(sim, net, a, b, port);
        on_route_3 += net.route_of(a, b, port, 4797) == 3;
    }
    sim.run_until({});
    EXPECT_GT(on_route_3, 0u);
    EXPECT_EQ(arrived.size(), 200 - on_route_3);
    for (uint16_t port : arrived) EXPECT_NE(net.route_of(a, b, port, 4797), 3u);
    EXPECT_EQ(net.link(a, b, 3).stats().dropped(DropReason::kBlackhole), on_route_3);
    // The other direction is a different link and unaffected.
    EXPECT_EQ(net.link(b, a, 3).config().blackhole, std::nullopt);
}

TEST(Network, DifferentRouteDelaysReorderAcrossPaths) {
    Sim sim(1);
    Network net(sim, quiet_network(2));
    Host& a = net.add_host();
    Host& b = net.add_host();
    net.link(a, b, 0).config().delay = 5us;
    net.link(a, b, 1).config().delay = 1us;
    uint16_t slow = 0, fast = 0;
    for (uint16_t port = 30000; slow == 0 || fast == 0; ++port)
        (net.route_of(a, b, port, 4797) == 0 ? slow : fast) = port;
    std::vector<uint16_t> order;
    net.set_tap([&](const Packet& p, const Host&) { order.push_back(p.meta.src.port); });
    inject(sim, net, a, b, slow);
    inject(sim, net, a, b, fast);
    sim.run_until({});
    EXPECT_EQ(order, (std::vector<uint16_t>{fast, slow}));
}

TEST(Network, UnknownDestinationIsCountedAndDropped) {
    Sim sim(1);
    Network net(sim);
    Host& a = net.add_host();
    PacketPtr p = sim.packets().acquire();
    p->meta.src = a.address();
    p->meta.dst = Address::ipv4(0x0A000001, 4797);
    net.receive(std::move(p));
    inject(sim, net, a, a, 1000);  // to itself: no route either
    EXPECT_EQ(net.stats().dropped_no_route, 2u);
    EXPECT_EQ(sim.packets().outstanding(), 0u);
}

TEST(Network, RouteRandomStreamsDependOnIdentityNotCreationOrder) {
    // Route a->b #2 sees the same losses whether or not other routes were created first.
    auto losses = [](bool touch_others_first) {
        Sim sim(77);
        NetworkConfig c = quiet_network();
        c.link.loss_probability = 0.3;
        Network net(sim, c);
        Host& a = net.add_host();
        Host& b = net.add_host();
        Host& x = net.add_host();
        if (touch_others_first) {
            (void)net.link(x, a, 0);
            (void)net.link(b, a, 0);
        }
        uint16_t port = 20000;
        while (net.route_of(a, b, port, 4797) != 2) ++port;
        std::vector<uint64_t> got;
        net.set_tap([&](const Packet& p, const Host&) { got.push_back(p.id); });
        for (int i = 0; i < 200; ++i) inject(sim, net, a, b, port);
        sim.run_until({});
        return got;
    };
    EXPECT_EQ(losses(false), losses(true));
}

}  // namespace
}  // namespace mroce::sim
