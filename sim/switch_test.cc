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
void burst(Topology& t, uint32_t src, uint32_t dst, uint32_t n, size_t size = 1000,
           uint8_t traffic_class = 0) {
    Switch& sw = t.switch_at(0);
    for (uint32_t i = 0; i < n; ++i) {
        PacketPtr p = t.sim().packets().acquire();
        p->bytes.resize(size);
        p->traffic_class = traffic_class;
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

// Classes that topology.class_queues maps to one queue share its FIFO; a class with its own
// queue keeps its strict priority. Three bursts reach one egress at once, classes 0, 1, 2
// in that order: with the identity class 2 goes first, then 1, then 0 (after the class-0
// packet already in service); with {0, 0, 1} class 2 goes first and 0 and 1 leave in
// arrival order.
std::string departure_order(uint8_t queues, std::vector<uint8_t> map) {
    Sim sim(1);
    TopologyConfig c = single_switch(4);
    c.switches.traffic_classes = queues;
    for (size_t k = 0; k < map.size(); ++k) c.switches.class_queue[k] = map[k];
    c.switches.mapped_classes = static_cast<uint8_t>(map.size());
    EXPECT_EQ(check_topology_config(c), "");
    Topology t(sim, c);
    std::string order;
    t.set_tap([&](const Packet& p, const Host&) { order += static_cast<char>('0' + p.traffic_class); });
    for (uint8_t cls = 0; cls < 3; ++cls) burst(t, cls, 3, 3, 1000, cls);
    sim.run_until({}, kSimForever, 10'000);
    return order;
}

TEST(Switch, ClassQueuesShareAFifoOrKeepTheirPriority) {
    EXPECT_EQ(departure_order(3, {0, 1, 2}), "022211100");
    EXPECT_EQ(departure_order(3, {}), "022211100");  // the default is the identity
    EXPECT_EQ(departure_order(2, {0, 0, 1}), "022200111");
    EXPECT_EQ(departure_order(1, {0, 0, 0}), "000111222");
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

// Blasters attaches a BlastEngine to each sender, all sending to one receiver (which
// gets a BlastEngine that sends nothing, so it counts arrivals).
struct Blasters {
    Blasters(Topology& t, const std::vector<uint32_t>& senders, uint32_t receiver, uint32_t count,
             uint16_t nic_ports = 1) {
        for (uint32_t s : senders) {
            engines.push_back(std::make_unique<BlastEngine>(t.host(receiver).address(), count,
                                                            1000, 64, nic_ports));
            t.host(s).attach(engines.back().get());
        }
        sink = std::make_unique<BlastEngine>(t.host(0).address(), 0);
        t.host(receiver).attach(sink.get());
    }
    std::vector<std::unique_ptr<BlastEngine>> engines;
    std::unique_ptr<BlastEngine> sink;
};

// conserved checks packet and byte conservation over the whole fabric at this instant.
void expect_conserved(const Topology& t) {
    const FabricTotals f = t.totals();
    EXPECT_EQ(f.host_tx_packets + f.wire_copies, f.host_rx_packets + f.switch_drops +
                                                     f.wire_drops + f.in_flight);
    if (f.in_flight == 0) {
        EXPECT_EQ(f.host_tx_bytes, f.host_rx_bytes + f.switch_drop_bytes + f.wire_drop_bytes);
    }
}

// expect_queues_within_buffers: no egress queue ever exceeded its buffer.
void expect_queues_within_buffers(Topology& t) {
    for (size_t s = 0; s < t.switch_count(); ++s) {
        const Switch& sw = t.switch_at(s);
        const BufferConfig& b = sw.config().buffer;
        if (b.shared) {
            EXPECT_LE(sw.max_buffer_used(), b.shared_bytes) << sw.name();
        }
        for (size_t p = 0; p < sw.port_count(); ++p)
            EXPECT_LE(sw.port(p).stats().max_queue_bytes,
                      b.shared ? b.shared_bytes : b.port_bytes)
                << sw.name() << " port " << p;
    }
}

// A lossless configuration at 10 Gbit/s, 1 us cables: headroom 16 KB covers a pause's
// round trip at the 40 Gbit/s uplinks below (2 * 5 KB on the wire + 2 packets).
TopologyConfig with_pfc(TopologyConfig c) {
    c.switches.pfc = PfcConfig{.lossless_classes = 1, .xoff_bytes = 10'000, .xon_bytes = 5'000,
                               .headroom_bytes = 16'000};
    c.switches.buffer.port_bytes = 200'000;
    return c;
}

TEST(Pfc, IncastOnOneSwitchPausesSendersAndNeverDrops) {
    for (uint64_t seed : testing::sweep_seeds(31, 3)) {
        SCOPED_TRACE(seed_note(seed));
        std::printf("[   SEED   ] %s\n", seed_note(seed).c_str());
        for (bool pfc : {true, false}) {
            Sim sim(seed);
            TopologyConfig c = single_switch(5);
            c.cable.jitter_max = 1ns;
            if (pfc) c = with_pfc(c);
            c.switches.buffer.port_bytes = 100'000;
            Topology t(sim, c);
            Blasters b(t, {0, 1, 2, 3}, 4, 400);
            sim.run_until({}, kSimForever, 2'000'000);
            expect_conserved(t);
            expect_queues_within_buffers(t);
            const FabricTotals f = t.totals();
            EXPECT_EQ(f.in_flight, 0u);
            if (pfc) {
                EXPECT_EQ(f.switch_drops, 0u);
                EXPECT_EQ(b.sink->received, 1600u);
                EXPECT_GT(f.pauses_sent, 0u);
                for (uint32_t h = 0; h < 4; ++h) EXPECT_GT(t.host(h).stats().pauses_received, 0u);
                EXPECT_GT(t.switch_at(0).port(4).stats().max_queue_bytes, 10'000u);
            } else {  // the same incast without PFC overflows the buffer
                EXPECT_GT(f.switch_drops, 0u);
                EXPECT_EQ(b.sink->received + f.switch_drops, 1600u);
            }
        }
    }
}

TEST(Pfc, PausePropagatesHopByHopAndNeverDrops) {
    const uint64_t seed = test_seed(41);
    SCOPED_TRACE(seed_note(seed));
    Sim sim(seed);
    TopologyConfig c;
    c.kind = TopologyKind::kLeafSpine;
    c.leaves = 2;
    c.spines = 1;
    c.hosts_per_leaf = 4;  // uplinks at 40 Gbit/s: the fabric core is not the bottleneck
    c.cable.rate_bps = 10'000'000'000;
    c = with_pfc(c);
    Topology t(sim, c);
    // Hosts 0-2 (leaf 0) and 4 (leaf 1) send to host 5 (leaf 1): leaf 1's port to host 5
    // congests, leaf 1 pauses the spine, the spine pauses leaf 0, leaf 0 pauses hosts.
    Blasters b(t, {0, 1, 2, 4}, 5, 500);
    sim.run_until({}, kSimForever, 2'000'000);
    const FabricTotals f = t.totals();
    EXPECT_EQ(f.switch_drops, 0u);
    EXPECT_EQ(f.in_flight, 0u);
    EXPECT_EQ(b.sink->received, 2000u);
    expect_conserved(t);
    expect_queues_within_buffers(t);
    // Find the ports of each hop and check each one was paused.
    uint64_t spine_pauses = 0, leaf0_uplink_pauses = 0;
    SimDuration spine_paused{0};
    for (size_t ci = 0; ci < t.cable_count(); ++ci) {
        const Cable& cab = t.cable(ci);
        if (cab.a.is_host) continue;
        const PortStats& up = t.switch_at(cab.a.node).port(cab.a.port).stats();   // leaf side
        const PortStats& down = t.switch_at(cab.b.node).port(cab.b.port).stats();  // spine side
        if (t.switch_at(cab.a.node).name().ends_with("leaf0")) leaf0_uplink_pauses += up.pauses_received;
        if (t.switch_at(cab.a.node).name().ends_with("leaf1")) {
            spine_pauses += down.pauses_received;
            spine_paused += down.paused_time;
        }
    }
    EXPECT_GT(spine_pauses, 0u);
    EXPECT_GT(spine_paused, SimDuration{0});
    // A pause lasts at least until the xon crossing: never longer than the whole run.
    EXPECT_LE(spine_paused, sim.now() - SimTime{});
    EXPECT_GT(leaf0_uplink_pauses, 0u);
    EXPECT_GT(t.host(0).stats().pauses_received, 0u);
    EXPECT_GT(t.host(4).stats().pauses_received, 0u);
}

TEST(Faults, CableDownBlackholesUntilRoutingReconverges) {
    const uint64_t seed = test_seed(51);
    SCOPED_TRACE(seed_note(seed));
    Sim sim(seed);
    TopologyConfig c;
    c.kind = TopologyKind::kLeafSpine;
    c.leaves = 2;
    c.spines = 2;
    c.hosts_per_leaf = 1;
    c.cable.rate_bps = 10'000'000'000;
    Topology t(sim, c);
    // Cable 1 is leaf 0 - spine 0 (cable 0 is host 0's).
    const size_t dead = 1;
    ASSERT_FALSE(t.cable(dead).a.is_host);
    FaultInjector faults(t);
    faults.cable_down(SimTime{} + 100us, dead, 50us);
    faults.cable_up(SimTime{} + 300us, dead, 20us);
    Blasters b(t, {0}, 1, 500);  // 0.8 us per packet: 400 us of traffic
    const Switch& leaf0 = t.switch_at(t.cable(dead).a.node);

    sim.run_until({}, SimTime{} + 99us);
    EXPECT_EQ(leaf0.next_hops(1).size(), 2u);
    sim.run_until({}, SimTime{} + 102us);  // what was on the wire at 100 us has arrived
    const uint64_t before = t.cable(dead).a_to_b->stats().delivered_packets;
    EXPECT_GT(before, 0u);
    sim.run_until({}, SimTime{} + 149us);  // down, routing has not noticed yet
    EXPECT_GT(t.cable(dead).a_to_b->stats().dropped(DropReason::kBlackhole), 0u);
    EXPECT_EQ(leaf0.next_hops(1).size(), 2u);
    sim.run_until({}, SimTime{} + 151us);  // reconverged: ECMP avoids the dead cable
    EXPECT_EQ(leaf0.next_hops(1).size(), 1u);
    // Packets queued at the leaf's port before reconvergence still drain into the dead
    // cable; nothing new is sent its way.
    const uint64_t enqueued = leaf0.port(t.cable(dead).a.port).stats().enqueued_packets;
    sim.run_until({}, SimTime{} + 299us);
    EXPECT_EQ(leaf0.port(t.cable(dead).a.port).stats().enqueued_packets, enqueued);
    EXPECT_EQ(t.cable(dead).a_to_b->stats().delivered_packets, before);
    sim.run_until({}, SimTime{} + 321us);  // up again and routed again
    EXPECT_EQ(leaf0.next_hops(1).size(), 2u);
    EXPECT_EQ(faults.applied(), 2u);
    EXPECT_EQ(faults.reconvergences(), 2u);
    sim.run_until({}, kSimForever, 1'000'000);
    EXPECT_GT(t.cable(dead).a_to_b->stats().delivered_packets, before);
    const uint64_t blackholed = t.cable(dead).a_to_b->stats().dropped(DropReason::kBlackhole);
    EXPECT_EQ(b.sink->received + blackholed, 500u);
    expect_conserved(t);
}

TEST(Faults, PlaneDownWithoutReconvergenceBlackholesThatPlaneOnly) {
    const uint64_t seed = test_seed(52);
    SCOPED_TRACE(seed_note(seed));
    Sim sim(seed);
    TopologyConfig c = single_switch(2);
    c.planes = 2;
    Topology t(sim, c);
    ASSERT_EQ(t.host(0).port_count(), 2u);
    ASSERT_EQ(t.switch_count(), 2u);
    FaultInjector faults(t);
    faults.plane_down(SimTime{} + 200us, 1, std::nullopt);
    Blasters b(t, {0}, 1, 1000, /*nic_ports=*/2);  // datagrams alternate planes
    sim.run_until({}, kSimForever, 1'000'000);
    const FabricTotals f = t.totals();
    EXPECT_GT(f.wire_drops, 0u);
    EXPECT_EQ(b.sink->received + f.wire_drops, 1000u);
    EXPECT_EQ(t.host(1).port_rx_packets(0), 500u);  // plane 0 delivered everything
    EXPECT_EQ(t.switch_at(1).next_hops(1).size(), 1u);  // routing never learnt
    EXPECT_EQ(t.switch_at(0).stats().dropped_no_route, 0u);
    expect_conserved(t);
}

TEST(Faults, LossyButUpAndDegradedRate) {
    const uint64_t seed = test_seed(53);
    SCOPED_TRACE(seed_note(seed));
    Sim sim(seed);
    TopologyConfig c = single_switch(3);
    Topology t(sim, c);
    FaultInjector faults(t);
    faults.set_loss(SimTime{}, t.host_cable(1, 0), 0.1);              // lossy but up
    faults.set_rate(SimTime{}, t.host_cable(2, 0), 1'000'000'000);    // 10 -> 1 Gbit/s
    faults.set_burst_loss(SimTime{}, t.host_cable(2, 0),
                          GilbertElliott{.p_good_to_bad = 0.01, .p_bad_to_good = 0.5});
    BlastEngine to1(t.host(1).address(), 4000), to2(t.host(2).address(), 200);
    BlastEngine rx1(t.host(0).address(), 0), rx2(t.host(0).address(), 0);
    t.host(0).attach(&to1);
    t.host(1).attach(&rx1);
    sim.run_until({}, kSimForever, 1'000'000);
    // Binomial(4000, 0.1): mean 400, sd 19; 6 sd either way.
    const uint64_t lost = t.cable(t.host_cable(1, 0)).b_to_a->stats().dropped(DropReason::kRandomLoss);
    EXPECT_NEAR(static_cast<double>(lost), 400.0, 114.0);
    EXPECT_EQ(rx1.received + lost, 4000u);
    EXPECT_EQ(t.switch_at(0).next_hops(1).size(), 1u);  // still routed

    const SimTime start = sim.now();
    t.host(0).attach(&to2);
    t.host(2).attach(&rx2);
    sim.run_until({}, kSimForever, 1'000'000);
    // 200 packets of 1000 B through a 1 Gbit/s port take at least 200 * 8 us.
    EXPECT_GE(sim.now() - start, 1600us);
    const LinkStats& w = t.cable(t.host_cable(2, 0)).b_to_a->stats();
    EXPECT_GT(w.dropped(DropReason::kBurstLoss), 0u);
    EXPECT_EQ(rx2.received + w.dropped(DropReason::kBurstLoss), 200u);
    expect_conserved(t);
}

TEST(Topology, BadConfigsGetAOneLineReason) {
    TopologyConfig c;
    EXPECT_EQ(check_topology_config(c), "");
    auto reason = [](auto&& change) {
        TopologyConfig bad;
        change(bad);
        return check_topology_config(bad);
    };
    EXPECT_EQ(reason([](TopologyConfig& b) { b.planes = 0; }), "planes must be at least 1");
    EXPECT_EQ(reason([](TopologyConfig& b) { b.cable.rate_bps = 0; }),
              "cable rate must be positive");
    EXPECT_EQ(reason([](TopologyConfig& b) {
                  b.kind = TopologyKind::kFatTree;
                  b.k = 5;
              }),
              "fat-tree k must be even and at least 2");
    EXPECT_EQ(reason([](TopologyConfig& b) {
                  b.kind = TopologyKind::kLeafSpine;
                  b.oversubscription = 0;
              }),
              "oversubscription must be positive");
    EXPECT_EQ(reason([](TopologyConfig& b) {
                  b.switches.pfc = PfcConfig{.lossless_classes = 1, .xoff_bytes = 1, .xon_bytes = 2};
              }),
              "PFC xon must not exceed xoff");
    EXPECT_EQ(reason([](TopologyConfig& b) {
                  b.switches.mapped_classes = 2;
                  b.switches.class_queue[1] = 1;  // traffic_classes = 1: no queue 1
              }),
              "class queues must name queues below traffic classes");
    EXPECT_EQ(reason([](TopologyConfig& b) {
                  b.switches.mapped_classes = 2;
                  b.switches.class_queue[1] = 0;
                  b.switches.pfc = PfcConfig{.lossless_classes = 1, .xoff_bytes = 2, .xon_bytes = 1};
              }),
              "PFC needs each class in its own queue (class queues = the identity)");
    EXPECT_EQ(reason([](TopologyConfig& b) { b.hosts = 200'000; }),
              "too many hosts for the address plan (max 131070)");
}

TEST(Topology, BuildersMakeTheDocumentedShapes) {
    Sim sim(1);
    TopologyConfig ls;
    ls.kind = TopologyKind::kLeafSpine;
    ls.leaves = 3;
    ls.spines = 2;
    ls.hosts_per_leaf = 4;
    ls.oversubscription = 4;  // uplinks: 4 * 100 G / (2 spines * 4) = 50 G
    ls.planes = 2;
    Topology t(sim, ls);
    EXPECT_EQ(t.host_count(), 12u);
    EXPECT_EQ(t.switch_count(), 2u * 5);
    EXPECT_EQ(t.cable_count(), 2u * (12 + 3 * 2));
    EXPECT_EQ(t.host(5).port_count(), 2u);
    for (uint32_t p = 0; p < 2; ++p) {
        const Cable& hc = t.cable(t.host_cable(5, p));
        EXPECT_EQ(hc.plane, p);
        EXPECT_EQ(t.switch_plane(hc.b.node), p);
        EXPECT_EQ(t.switch_tier(hc.b.node), 0u);
    }
    for (size_t c = 0; c < t.cable_count(); ++c) {
        const Cable& cab = t.cable(c);
        if (cab.a.is_host) continue;
        EXPECT_EQ(t.switch_at(cab.a.node).port(cab.a.port).rate_bps(), 50'000'000'000u);
    }
    // Every switch reaches every host; a spine has one port towards each host.
    for (size_t s = 0; s < t.switch_count(); ++s)
        for (uint32_t h = 0; h < t.host_count(); ++h) {
            ASSERT_FALSE(t.switch_at(s).next_hops(h).empty());
            if (t.switch_tier(s) == 1) {
                EXPECT_EQ(t.switch_at(s).next_hops(h).size(), 1u);
            }
        }
    EXPECT_EQ(t.cables_of_plane(1).size(), 12u + 6u);
}

}  // namespace
}  // namespace mroce::sim
