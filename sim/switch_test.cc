// Tests of switches and topologies without the protocol core: ECN marking against its
// thresholds, buffer admission, ECMP spreading, PFC under incast, faults. Traffic comes
// from packets injected at a switch port or from BlastEngine, a core::Engine that sends a
// fixed number of datagrams as fast as its NIC allows.
#include "sim/switch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "sim/faults.h"
#include "sim/test_seed.h"
#include "sim/topology.h"

namespace mroce::sim {
namespace {

using namespace std::chrono_literals;
using testing::seed_note;
using testing::test_seed;

// BlastEngine sends `count` ECT datagrams of `size` bytes to `peer`, datagram i from UDP
// source port base_port + i % spread and NIC port i % nic_ports; it counts what it gets.
class BlastEngine final : public core::Engine {
  public:
    BlastEngine(Address peer, uint32_t count, size_t size = 1000, uint16_t spread = 64,
                uint16_t nic_ports = 1)
        : peer_(peer), count_(count), size_(size), spread_(spread), nic_ports_(nic_ports) {}

    void on_datagram(std::span<const std::byte> d, const PacketMeta&, Time) override {
        ++received;
        received_bytes += d.size();
    }
    void on_timeout(Time) override {}
    size_t poll_transmit(std::span<std::byte> buf, PacketMeta& meta, Time) override {
        if (sent >= count_) return 0;
        std::fill_n(buf.begin(), size_, std::byte{0x5a});
        meta.src.port = static_cast<uint16_t>(49152 + sent % spread_);
        meta.dst = peer_;
        meta.ecn = ecn::kEct0;
        meta.local_port = static_cast<uint16_t>(sent % nic_ports_);
        ++sent;
        return size_;
    }
    Time next_deadline() const override { return kNever; }
    std::optional<core::Event> poll_event() override { return std::nullopt; }
    size_t max_datagram_size() const override { return size_; }

    uint32_t sent = 0;
    uint64_t received = 0;
    uint64_t received_bytes = 0;

  private:
    Address peer_;
    uint32_t count_;
    size_t size_;
    uint16_t spread_;
    uint16_t nic_ports_;
};

TopologyConfig single_switch(uint32_t hosts, uint64_t rate_bps = 10'000'000'000) {
    TopologyConfig c;
    c.kind = TopologyKind::kSingleSwitch;
    c.hosts = hosts;
    c.cable.rate_bps = rate_bps;
    c.cable.jitter_max = SimDuration{0};
    return c;
}

// burst injects n ECT datagrams of `size` from host src to host dst at the switch's
// ingress from src, all at now(): packet i finds i * size bytes queued at the egress.
void burst(Topology& t, uint32_t src, uint32_t dst, uint32_t n, size_t size = 1000) {
    Switch& sw = t.switch_at(0);
    for (uint32_t i = 0; i < n; ++i) {
        PacketPtr p = t.sim().packets().acquire();
        p->bytes.resize(size);
        p->meta.src = t.host(src).address().with_port(static_cast<uint16_t>(40000 + i));
        p->meta.dst = t.host(dst).address();
        p->meta.ecn = ecn::kEct0;
        sw.port(t.cable(t.host_cable(src, 0)).b.port).receive(std::move(p));
    }
}

TEST(Ecn, RedProbabilityFollowsItsCurve) {
    const EcnConfig red = EcnConfig::red(20'000, 80'000, 0.2);
    EXPECT_EQ(red.mark_probability(0), 0);
    EXPECT_EQ(red.mark_probability(19'999), 0);
    EXPECT_EQ(red.mark_probability(20'000), 0);
    EXPECT_DOUBLE_EQ(red.mark_probability(50'000), 0.1);
    EXPECT_DOUBLE_EQ(red.mark_probability(79'999), 0.2 * 59'999 / 60'000);
    EXPECT_EQ(red.mark_probability(80'000), 1);
    EXPECT_EQ(EcnConfig::step(5000).mark_probability(4999), 0);
    EXPECT_EQ(EcnConfig::step(5000).mark_probability(5000), 1);
    EXPECT_EQ(EcnConfig{}.mark_probability(1 << 30), 0);
}

TEST(Ecn, RedMarkingFractionAtAFixedStandingQueue) {
    // For a standing queue q the marked fraction of n packets is Binomial(n, p(q)); allow
    // 5 standard deviations (a false failure has probability < 1e-6 per point).
    const uint64_t seed = test_seed(11);
    SCOPED_TRACE(seed_note(seed));
    Sim sim(seed);
    Rng rng = sim.fork_rng("red-test");
    const EcnConfig red = EcnConfig::red(20'000, 80'000, 0.5);
    const int n = 40'000;
    for (uint64_t q : {10'000u, 20'000u, 26'000u, 35'000u, 50'000u, 65'000u, 79'000u, 90'000u}) {
        int marked = 0;
        for (int i = 0; i < n; ++i) marked += ecn_should_mark(red, q, rng);
        const double p = red.mark_probability(q);
        const double sd = std::sqrt(n * p * (1 - p));
        EXPECT_NEAR(marked, n * p, 5 * sd + 0.5) << "queue " << q << " p " << p;
    }
}

TEST(Ecn, StepMarksExactlyThePacketsThatFindTheThreshold) {
    Sim sim(1);
    TopologyConfig c = single_switch(2);
    c.switches.ecn = EcnConfig::step(5000);
    Topology t(sim, c);
    std::vector<uint8_t> ecn_by_order;
    t.set_tap([&](const Packet& p, const Host&) { ecn_by_order.push_back(p.meta.ecn); });
    burst(t, 0, 1, 20);
    sim.run_until({}, kSimForever, 10'000);
    ASSERT_EQ(ecn_by_order.size(), 20u);
    for (uint32_t i = 0; i < 20; ++i)
        EXPECT_EQ(ecn_by_order[i], i * 1000 >= 5000 ? ecn::kCe : ecn::kEct0) << "packet " << i;
    const PortStats& ps = t.switch_at(0).port(1).stats();
    EXPECT_EQ(ps.ecn_marked, 15u);
    EXPECT_EQ(ps.max_queue_bytes, 20'000u);
}

TEST(Ecn, RedNeverMarksBelowKminAndAlwaysAtKmax) {
    const uint64_t seed = test_seed(3);
    SCOPED_TRACE(seed_note(seed));
    Sim sim(seed);
    TopologyConfig c = single_switch(2);
    c.switches.ecn = EcnConfig::red(10'000, 40'000, 0.5);
    Topology t(sim, c);
    std::vector<uint8_t> ecn_by_order;
    t.set_tap([&](const Packet& p, const Host&) { ecn_by_order.push_back(p.meta.ecn); });
    burst(t, 0, 1, 60);
    sim.run_until({}, kSimForever, 10'000);
    ASSERT_EQ(ecn_by_order.size(), 60u);
    int ramp_marks = 0;
    for (uint32_t i = 0; i < 60; ++i) {
        const uint64_t q = i * 1000;
        if (q < 10'000) {
            EXPECT_EQ(ecn_by_order[i], ecn::kEct0) << i;
        }
        if (q >= 40'000) {
            EXPECT_EQ(ecn_by_order[i], ecn::kCe) << i;
        }
        if (q >= 10'000 && q < 40'000) ramp_marks += ecn_by_order[i] == ecn::kCe;
    }
    // 30 packets on the ramp with mean p = 0.25 (sd 2.4): some but not all marked.
    EXPECT_GT(ramp_marks, 0);
    EXPECT_LT(ramp_marks, 30);
}

TEST(Buffer, PerPortDropTailNeverExceedsThePortBuffer) {
    Sim sim(1);
    TopologyConfig c = single_switch(3);
    c.switches.buffer.port_bytes = 20'000;
    Topology t(sim, c);
    burst(t, 0, 2, 50);
    burst(t, 1, 2, 10);  // the same egress port: also dropped once full
    sim.run_until({}, kSimForever, 10'000);
    const PortStats& ps = t.switch_at(0).port(2).stats();
    EXPECT_EQ(ps.max_queue_bytes, 20'000u);
    EXPECT_EQ(ps.dropped(SwitchDrop::kBufferFull), 40u);
    EXPECT_EQ(ps.tx_packets, 20u);
    EXPECT_EQ(t.host(2).port_rx_packets(0), 20u);
    EXPECT_EQ(t.totals().in_flight, 0u);
}

TEST(Buffer, SharedBufferDynamicThresholdLeavesRoomForOtherPorts) {
    Sim sim(1);
    TopologyConfig c = single_switch(4);
    c.switches.buffer.shared = true;
    c.switches.buffer.shared_bytes = 40'000;
    c.switches.buffer.alpha = 1.0;
    Topology t(sim, c);
    Switch& sw = t.switch_at(0);
    burst(t, 0, 2, 50);  // one congested port may take at most alpha/(1+alpha) of the pool
    const uint64_t first = sw.port(2).queue_bytes();
    EXPECT_LE(first, 20'000u);
    EXPECT_GE(first, 19'000u);
    burst(t, 1, 3, 50);  // a second port still gets room, less than the first
    const uint64_t second = sw.port(3).queue_bytes();
    EXPECT_GT(second, 0u);
    EXPECT_LE(second, first);
    EXPECT_LE(sw.buffer_used(), 40'000u);
    sim.run_until({}, kSimForever, 10'000);
    EXPECT_LE(sw.max_buffer_used(), 40'000u);
    EXPECT_GT(sw.port(2).stats().dropped(SwitchDrop::kBufferFull), 0u);
    EXPECT_EQ(sw.buffer_used(), 0u);
}

// chi_square of counts against a uniform spread.
double chi_square(const std::vector<uint64_t>& counts) {
    uint64_t n = 0;
    for (uint64_t c : counts) n += c;
    const double expected = static_cast<double>(n) / static_cast<double>(counts.size());
    double chi2 = 0;
    for (uint64_t c : counts) chi2 += (static_cast<double>(c) - expected) *
                                      (static_cast<double>(c) - expected) / expected;
    return chi2;
}

TEST(Ecmp, LeafSpreadsSourcePortsEvenlyOverSpines) {
    const uint64_t seed = test_seed(21);
    SCOPED_TRACE(seed_note(seed));
    Sim sim(seed);
    TopologyConfig c;
    c.kind = TopologyKind::kLeafSpine;
    c.leaves = 2;
    c.spines = 4;
    c.hosts_per_leaf = 2;
    Topology t(sim, c);
    const Switch& leaf = t.switch_at(0);
    ASSERT_EQ(leaf.next_hops(2).size(), 4u);  // host 2 is on the other leaf: any spine
    ASSERT_EQ(leaf.next_hops(1).size(), 1u);  // host 1 is local
    std::map<uint16_t, uint64_t> per_port;
    for (uint32_t sp = 1024; sp <= 65535; ++sp)
        ++per_port[leaf.route_port(t.host(0).ipv4(), t.host(2).ipv4(), static_cast<uint16_t>(sp),
                                   kDefaultUdpPort)];
    ASSERT_EQ(per_port.size(), 4u);
    std::vector<uint64_t> counts;
    for (auto& [port, n] : per_port) counts.push_back(n);
    // 3 degrees of freedom: P(chi2 > 21.1) = 1e-4 for a uniform hash.
    EXPECT_LT(chi_square(counts), 21.1);
}

TEST(Ecmp, FatTreeTiersHashIndependently) {
    // k = 4: the edge picks one of 2 aggregation switches, that one of 2 cores. With
    // independent per-switch salts, the 4 (agg, core) combinations are equally likely;
    // one shared salt would correlate the tiers (polarisation).
    const uint64_t seed = test_seed(22);
    SCOPED_TRACE(seed_note(seed));
    Sim sim(seed);
    TopologyConfig c;
    c.kind = TopologyKind::kFatTree;
    c.k = 4;
    Topology t(sim, c);
    ASSERT_EQ(t.host_count(), 16u);
    ASSERT_EQ(t.switch_count(), 20u);
    const uint32_t src = 0, dst = 15;  // different pods
    const Cable& hc = t.cable(t.host_cable(src, 0));
    const Switch& edge = t.switch_at(hc.b.node);
    std::vector<uint64_t> combos(4);
    for (uint32_t sp = 1024; sp <= 65535; ++sp) {
        const auto port = static_cast<uint16_t>(sp);
        const uint16_t up = edge.route_port(t.host(src).ipv4(), t.host(dst).ipv4(), port, 4797);
        // Find the aggregation switch behind that port and its choice.
        size_t agg = SIZE_MAX;
        for (size_t ci = 0; ci < t.cable_count(); ++ci) {
            const Cable& cab = t.cable(ci);
            if (!cab.a.is_host && cab.a.node == hc.b.node && cab.a.port == up) agg = cab.b.node;
        }
        ASSERT_NE(agg, SIZE_MAX);
        const Switch& a = t.switch_at(agg);
        ASSERT_EQ(a.next_hops(dst).size(), 2u);
        const uint16_t agg_choice = a.route_port(t.host(src).ipv4(), t.host(dst).ipv4(), port, 4797);
        const size_t agg_rank = up == edge.next_hops(dst)[0] ? 0 : 1;
        const size_t core_rank = agg_choice == a.next_hops(dst)[0] ? 0 : 1;
        ++combos[agg_rank * 2 + core_rank];
    }
    EXPECT_LT(chi_square(combos), 21.1) << combos[0] << " " << combos[1] << " " << combos[2]
                                        << " " << combos[3];
}

}  // namespace
}  // namespace mroce::sim
