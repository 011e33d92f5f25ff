// Tests of the host driver: two hosts, scripted core::Engine implementations, 8 routes.
#include "sim/host.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <set>
#include <tuple>
#include <vector>

#include "sim/network.h"
#include "sim/test_seed.h"

namespace mroce::sim {
namespace {

using namespace std::chrono_literals;
using testing::seed_note;
using testing::test_seed;

// ScriptedEngine sends `count` datagrams of `size` bytes to `peer`, datagram i from UDP
// source port base_port + i (so each may take another route), optionally paced `pace`
// apart through its deadline; fires scripted timers; records everything it is told.
class ScriptedEngine final : public core::Engine {
  public:
    struct Options {
        Address peer;
        uint32_t count = 0;
        size_t size = 1000;
        uint16_t base_port = 49152;
        Duration pace{0};
        std::vector<Time> timers;            // extra deadlines, ascending
        bool event_per_datagram = false;     // emit one completion per datagram received
        std::optional<Time> stuck_deadline;  // misbehave: always report this deadline
        bool full_payload = true;            // fill and check every byte (else the seq only)
        std::vector<uint8_t> classes;        // datagram i's traffic class: classes[i % size]
    };
    struct Rx {
        Time at;
        PacketMeta meta;
        uint32_t seq;
        size_t size;
        bool payload_ok;
    };

    explicit ScriptedEngine(Options o) : o_(std::move(o)) {}

    void on_datagram(std::span<const std::byte> d, const PacketMeta& meta, Time now) override {
        ++calls;
        Rx rx{now, meta, 0, d.size(), d.size() >= 4};
        if (rx.payload_ok) {
            for (int i = 0; i < 4; ++i) rx.seq = rx.seq << 8 | std::to_integer<uint32_t>(d[i]);
            for (size_t i = 4; o_.full_payload && i < d.size(); ++i)
                rx.payload_ok &= d[i] == static_cast<std::byte>((rx.seq + i) & 0xff);
        }
        received.push_back(rx);
        if (o_.event_per_datagram) {
            core::Event e;
            e.kind = core::EventKind::kCompletion;
            e.peer = meta.src;
            e.completion.wr_id = rx.seq;
            pending_events_.push_back(e);
        }
    }

    void on_timeout(Time now) override {
        ++calls;
        timeouts.push_back(now);
        while (!o_.timers.empty() && o_.timers.front() <= now) o_.timers.erase(o_.timers.begin());
    }

    size_t poll_transmit(std::span<std::byte> buf, PacketMeta& meta, Time now) override {
        ++polls;
        if (sent_ >= o_.count || now < release_) return 0;
        EXPECT_GE(buf.size(), o_.size);
        const uint32_t seq = sent_++;
        for (int i = 0; i < 4; ++i) buf[i] = static_cast<std::byte>(seq >> (24 - 8 * i));
        for (size_t i = 4; o_.full_payload && i < o_.size; ++i)
            buf[i] = static_cast<std::byte>((seq + i) & 0xff);
        meta.dst = o_.peer;
        meta.src.port = static_cast<uint16_t>(o_.base_port + seq);
        meta.ecn = ecn::kEct0;
        meta.traffic_class = o_.classes.empty() ? 0 : o_.classes[seq % o_.classes.size()];
        sent_at.push_back(now);
        if (o_.pace > Duration{0}) release_ = now + o_.pace;
        return o_.size;
    }

    Time next_deadline() const override {
        if (o_.stuck_deadline) return *o_.stuck_deadline;
        Time d = o_.timers.empty() ? kNever : o_.timers.front();
        if (sent_ < o_.count && o_.pace > Duration{0}) d = std::min(d, release_);
        return d;
    }

    std::optional<core::Event> poll_event() override {
        if (pending_events_.empty()) return std::nullopt;
        core::Event e = pending_events_.front();
        pending_events_.erase(pending_events_.begin());
        return e;
    }

    size_t max_datagram_size() const override { return 1500; }

    // allow_more lets the engine send n more datagrams (work posted from outside).
    void allow_more(uint32_t n) { o_.count += n; }
    uint32_t sent() const { return sent_; }

    std::vector<Rx> received;
    std::vector<Time> sent_at;
    std::vector<Time> timeouts;
    uint64_t polls = 0;
    uint64_t calls = 0;  // on_datagram + on_timeout

  private:
    Options o_;
    uint32_t sent_ = 0;
    Time release_ = Time::min();
    std::vector<core::Event> pending_events_;
};

Time at_ns(int64_t ns) { return time_from_ns(ns); }

NetworkConfig exact_network(uint64_t nic_bps, uint64_t link_bps, SimDuration delay) {
    NetworkConfig c;
    c.routes = 8;
    c.host.line_rate_bps = nic_bps;
    c.link.rate_bps = link_bps;
    c.link.delay = delay;
    c.link.jitter_max = SimDuration{0};
    return c;
}

TEST(Host, DeliversSerialisesAtLineRateAndDoesNotSpin) {
    Sim sim(1);
    // 1000 B: 800 ns on the 10 Gbit/s NIC, 80 ns on a 100 Gbit/s route, 1 us delay.
    Network net(sim, exact_network(10'000'000'000, 100'000'000'000, 1us));
    Host& a = net.add_host();
    Host& b = net.add_host();
    const uint32_t n = 16;
    ScriptedEngine ea({.peer = b.address(), .count = n});
    ScriptedEngine eb({.peer = a.address()});
    a.attach(&ea);
    b.attach(&eb);
    std::vector<uint32_t> routes;
    net.set_tap([&](const Packet& p, const Host&) { routes.push_back(p.route); });

    const RunResult r = sim.run_until({});
    EXPECT_EQ(r.reason, StopReason::kQueueEmpty);  // nothing left: no host spins
    ASSERT_EQ(eb.received.size(), n);
    for (uint32_t i = 0; i < n; ++i) {
        const auto& rx = eb.received[i];
        EXPECT_EQ(rx.seq, i);
        EXPECT_TRUE(rx.payload_ok);
        EXPECT_EQ(rx.size, 1000u);
        EXPECT_EQ(ea.sent_at[i], at_ns(800 * i));            // polled as soon as the NIC is idle
        EXPECT_EQ(rx.at, at_ns(800 * (i + 1) + 80 + 1000));  // NIC + route + propagation
        EXPECT_EQ(rx.meta.src, a.address().with_port(static_cast<uint16_t>(49152 + i)));
        EXPECT_EQ(rx.meta.dst, b.address());
        EXPECT_EQ(rx.meta.ecn, ecn::kEct0);
        EXPECT_EQ(routes[i], net.route_of(a, b, static_cast<uint16_t>(49152 + i), 4797));
    }
    EXPECT_GE(std::set<uint32_t>(routes.begin(), routes.end()).size(), 4u);  // sprayed
    EXPECT_EQ(net.route_stats(a, b).delivered_packets, n);

    EXPECT_EQ(a.stats().tx_packets, n);
    EXPECT_EQ(a.stats().tx_bytes, n * 1000u);
    EXPECT_EQ(b.stats().rx_packets, n);
    // One poll per idle NIC plus the final empty one; the receiver is polled once per
    // datagram and once at attach, all empty. No timers were ever needed.
    EXPECT_EQ(a.stats().polls, n + 1);
    EXPECT_EQ(a.stats().empty_polls, 1u);
    EXPECT_EQ(b.stats().polls, n + 1);
    EXPECT_EQ(b.stats().empty_polls, n + 1);
    EXPECT_EQ(a.stats().timer_arms + b.stats().timer_arms, 0u);
    EXPECT_EQ(a.stats().timeouts + b.stats().timeouts, 0u);

    // Work posted from outside starts with a kick.
    ea.allow_more(2);
    a.kick();
    sim.run_until({});
    EXPECT_EQ(eb.received.size(), n + 2);
}

// Received sequence numbers in arrival order.
std::vector<uint32_t> arrival_order(const ScriptedEngine& e) {
    std::vector<uint32_t> v;
    for (const auto& rx : e.received) v.push_back(rx.seq);
    return v;
}

// PFC pauses a class of a NIC port, not the port: with class 0 paused, class 1 keeps
// going back to back while class 0's datagrams are held; they go after the resume.
TEST(Host, APausedClassDoesNotBlockAnother) {
    Sim sim(1);
    Network net(sim, exact_network(10'000'000'000, 100'000'000'000, 1us));
    Host& a = net.add_host();
    Host& b = net.add_host();
    ScriptedEngine ea({.peer = b.address(), .count = 20, .classes = {1, 0}});
    ScriptedEngine eb({.peer = a.address()});
    a.attach(&ea);
    b.attach(&eb);
    std::vector<uint8_t> classes_seen;
    net.set_tap([&](const Packet& p, const Host&) { classes_seen.push_back(p.traffic_class); });
    a.pause_target(0).set_paused(0, true);
    sim.run_until({}, SimTime{} + 50us);
    // Class 1 (even seqs) went at the NIC's line rate, 800 ns apart, unblocked.
    ASSERT_EQ(eb.received.size(), 10u);
    for (uint32_t k = 0; k < 10; ++k) {
        EXPECT_EQ(eb.received[k].seq, 2 * k);
        EXPECT_EQ(eb.received[k].at, at_ns(800 * (k + 1) + 80 + 1000));
    }
    EXPECT_EQ(ea.sent(), 20u);
    EXPECT_EQ(a.port_waiting(0, 0), 10u);  // every class-0 datagram held
    EXPECT_EQ(a.port_waiting(0, 1), 0u);
    EXPECT_EQ(a.port_queued(0), 10u);
    EXPECT_EQ(a.tx_packets_in_class(0), 0u);
    EXPECT_EQ(a.tx_packets_in_class(1), 10u);
    EXPECT_TRUE(a.port_paused(0, 0));
    EXPECT_FALSE(a.port_paused(0, 1));

    a.pause_target(0).set_paused(0, false);
    sim.run_until({});
    ASSERT_EQ(eb.received.size(), 20u);
    for (uint32_t k = 10; k < 20; ++k) EXPECT_EQ(eb.received[k].seq, 2 * (k - 10) + 1);  // FIFO in a class
    EXPECT_EQ(a.tx_packets_in_class(0), 10u);
    EXPECT_EQ(std::count(classes_seen.begin(), classes_seen.end(), 1), 10);
    EXPECT_EQ(a.port_queued(0), 0u);
}

// An engine that uses one class: a paused datagram stops polling altogether (nothing
// else could go), exactly as a host with one waiting slot per port did.
TEST(Host, OneClassInUseStopsPollingWhenPaused) {
    Sim sim(1);
    Network net(sim, exact_network(10'000'000'000, 100'000'000'000, 1us));
    Host& a = net.add_host();
    Host& b = net.add_host();
    ScriptedEngine ea({.peer = b.address(), .count = 20, .classes = {3}});
    ScriptedEngine eb({.peer = a.address()});
    a.attach(&ea);
    b.attach(&eb);
    a.pause_target(0).set_paused(3, true);
    sim.run_until({}, SimTime{} + 50us);
    EXPECT_EQ(ea.sent(), 1u);
    EXPECT_EQ(a.port_waiting(0, 3), 1u);
    EXPECT_TRUE(eb.received.empty());
    a.pause_target(0).set_paused(2, false);  // another class: changes nothing
    a.pause_target(0).set_paused(3, false);
    sim.run_until({});
    EXPECT_EQ(eb.received.size(), 20u);
    EXPECT_EQ(a.tx_packets_in_class(3), 20u);
}

// Strict priority among unpaused classes: held datagrams of two classes that resume
// while the port is busy leave highest class first, not in the order they were polled.
TEST(Host, StrictPriorityAmongUnpausedClasses) {
    Sim sim(1);
    Network net(sim, exact_network(10'000'000'000, 100'000'000'000, 1us));
    Host& a = net.add_host();
    Host& b = net.add_host();
    ScriptedEngine ea({.peer = b.address(), .count = 6, .classes = {1, 0, 2, 0, 2, 1}});
    ScriptedEngine eb({.peer = a.address()});
    a.attach(&ea);
    b.attach(&eb);
    a.pause_target(0).set_paused(0, true);
    a.pause_target(0).set_paused(2, true);
    // 0 (class 1) is on the wire 0-800 ns; at 800 the NIC polls 1-4 (classes 0 and 2,
    // held) and 5 (class 1), on the wire 800-1600; both classes resume meanwhile; from
    // 1600 class 2 (2, 4) goes before class 0 (1, 3).
    sim.schedule_at(SimTime{} + 1000ns, [&] { a.pause_target(0).set_paused(0, false); });
    sim.schedule_at(SimTime{} + 1100ns, [&] { a.pause_target(0).set_paused(2, false); });
    sim.run_until({});
    EXPECT_EQ(arrival_order(eb), (std::vector<uint32_t>{0, 5, 2, 4, 1, 3}));
}

// PortEngine sends `count` 1000-byte datagrams, each on the lowest port the NIC says can
// send ([PATH-15]), and records the ports it was told at each poll.
class PortEngine final : public core::Engine {
  public:
    PortEngine(Address peer, uint32_t count) : peer_(peer), count_(count) {}
    void on_datagram(std::span<const std::byte>, const PacketMeta&, Time) override {}
    void on_timeout(Time) override {}
    void set_ready_ports(uint64_t mask) override { ready_ = mask; }
    size_t poll_transmit(std::span<std::byte> buf, PacketMeta& meta, Time) override {
        masks.push_back(ready_);
        if (sent.size() >= count_ || (ready_ & 0xf) == 0) return 0;
        std::fill_n(buf.begin(), 1000, std::byte{1});
        meta.dst = peer_;
        meta.local_port = static_cast<uint16_t>(std::countr_zero(ready_));
        sent.push_back(meta.local_port);
        return 1000;
    }
    Time next_deadline() const override { return kNever; }
    std::optional<core::Event> poll_event() override { return std::nullopt; }
    size_t max_datagram_size() const override { return 1500; }

    std::vector<uint64_t> masks;  // the ready ports at each poll
    std::vector<uint16_t> sent;   // the port of each datagram sent

  private:
    uint64_t ready_ = kAllPorts;
    Address peer_;
    uint32_t count_;
};

class Swallow final : public PacketSink {
  public:
    void receive(PacketPtr) override { ++packets; }
    uint64_t packets = 0;
};

// [PATH-15]: before each poll a multi-port NIC says which ports can start a datagram: the
// idle ones that are not paused for the class in use. An engine that follows it keeps all
// four ports busy at once. Only when it has nothing for those is it asked again with every
// port, and what it gives then waits behind its busy port.
TEST(Host, AMultiPortNicSaysWhichPortsCanSend) {
    Sim sim(1);
    Swallow wire;
    HostConfig hc;
    hc.line_rate_bps = 8'000'000'000;  // 1000 bytes: 1 us
    hc.ports = 4;
    Host host(sim, 0, host_ipv4(0), hc, &wire);
    for (uint16_t p = 1; p < 4; ++p) host.set_uplink(p, &wire);
    PortEngine e(Address::ipv4(host_ipv4(1), kDefaultUdpPort), 9);
    host.attach(&e);
    sim.run_for(500ns);
    // At t = 0: all four idle, then one fewer after each datagram starts; no fifth poll
    // (the NIC does not poll with every port busy).
    EXPECT_EQ(e.masks, (std::vector<uint64_t>{kAllPorts, kAllPorts & ~0b1ull, kAllPorts & ~0b11ull,
                                              kAllPorts & ~0b111ull}));
    EXPECT_EQ(e.sent, (std::vector<uint16_t>{0, 1, 2, 3}));
    // Port 2 paused for class 0, the only class in use: not ready once its datagram left.
    host.pause_target(2).set_paused(0, true);
    sim.run_until({});
    ASSERT_EQ(e.sent.size(), 9u);
    for (size_t i = 4; i < e.sent.size(); ++i) EXPECT_NE(e.sent[i], 2) << "datagram " << i;
    for (size_t i = 4; i < e.masks.size(); ++i)
        if (e.masks[i] != kAllPorts) {
            EXPECT_EQ(e.masks[i] & 0b0100, 0u) << "poll " << i;
        }
    EXPECT_EQ(host.stats().tx_packets, 9u);
    EXPECT_EQ(host.stats().polls, e.masks.size());
    host.attach(nullptr);
}

TEST(Host, TimersFireAtTheirDeadlinesOnce) {
    Sim sim(1);
    Network net(sim, exact_network(100'000'000'000, 100'000'000'000, 1us));
    Host& a = net.add_host();
    const std::vector<Time> deadlines = {at_ns(5000), at_ns(7000), at_ns(7001), at_ns(12000)};
    ScriptedEngine e({.timers = deadlines});
    a.attach(&e);
    EXPECT_EQ(sim.run_until({}).reason, StopReason::kQueueEmpty);
    EXPECT_EQ(e.timeouts, deadlines);
    EXPECT_EQ(a.stats().timeouts, 4u);
    EXPECT_EQ(a.stats().timer_arms, 4u);  // armed once per new deadline, not per call
    EXPECT_EQ(a.stats().stale_deadlines, 0u);
    EXPECT_EQ(sim.now(), SimTime{} + 12us);
    EXPECT_EQ(a.armed_deadline(), kNever);
}

TEST(Host, PacingThroughTheDeadline) {
    Sim sim(1);
    Network net(sim, exact_network(100'000'000'000, 100'000'000'000, 1us));
    Host& a = net.add_host();
    Host& b = net.add_host();
    ScriptedEngine ea({.peer = b.address(), .count = 5, .pace = 3us});
    ScriptedEngine eb({});
    a.attach(&ea);
    b.attach(&eb);
    EXPECT_EQ(sim.run_until({}).reason, StopReason::kQueueEmpty);
    ASSERT_EQ(eb.received.size(), 5u);
    for (int i = 0; i < 5; ++i) {
        EXPECT_EQ(ea.sent_at[i], at_ns(3000 * i));
        EXPECT_EQ(eb.received[i].at, at_ns(3000 * i + 80 + 80 + 1000));
    }
    EXPECT_EQ(a.stats().timeouts, 4u);
    EXPECT_EQ(a.stats().stale_deadlines, 0u);
}

TEST(Host, PacingFasterThanTheNicIsLimitedByTheNic) {
    Sim sim(1);
    Network net(sim, exact_network(10'000'000'000, 100'000'000'000, 1us));
    Host& a = net.add_host();
    Host& b = net.add_host();
    ScriptedEngine ea({.peer = b.address(), .count = 20, .pace = 100ns});
    ScriptedEngine eb({});
    a.attach(&ea);
    b.attach(&eb);
    EXPECT_EQ(sim.run_until({}).reason, StopReason::kQueueEmpty);
    ASSERT_EQ(ea.sent_at.size(), 20u);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(ea.sent_at[i], at_ns(800 * i));
    EXPECT_EQ(a.stats().stale_deadlines, 0u);
    // The pacing deadline passes while the NIC is busy: at most one timeout per packet,
    // and no timer is armed for an instant the engine was already told about.
    EXPECT_LE(a.stats().timeouts, 20u);
}

TEST(Host, AnEngineThatNeverAdvancesItsDeadlineCannotSpinInPlace) {
    Sim sim(1);
    Network net(sim);
    Host& a = net.add_host();
    ScriptedEngine e({.stuck_deadline = at_ns(0)});
    a.attach(&e);
    const RunResult r = sim.run_until({}, SimTime{} + 1us, 100'000);
    EXPECT_EQ(r.reason, StopReason::kTimeLimit);  // time moves on; the budget is not hit
    // At most one on_timeout per nanosecond of engine time.
    EXPECT_GE(a.stats().timeouts, 1000u);
    EXPECT_LE(a.stats().timeouts, 1001u);
    EXPECT_GE(a.stats().stale_deadlines, 999u);
    for (size_t i = 1; i < e.timeouts.size(); ++i) ASSERT_GT(e.timeouts[i], e.timeouts[i - 1]);
}

TEST(Host, EventsGoToTheCallbackWhichMayCallTheEngine) {
    Sim sim(1);
    Network net(sim, exact_network(100'000'000'000, 100'000'000'000, 1us));
    Host& a = net.add_host();
    Host& b = net.add_host();
    const uint32_t n = 10;
    ScriptedEngine ea({.peer = b.address(), .count = n, .event_per_datagram = true});
    ScriptedEngine eb({.peer = a.address(), .event_per_datagram = true});
    a.attach(&ea);
    b.attach(&eb);
    // b answers every datagram with one of its own, posted from its event callback.
    std::vector<uint64_t> b_events;
    b.set_event_callback([&](const core::Event& ev) {
        b_events.push_back(ev.completion.wr_id);
        EXPECT_EQ(ev.peer.port, 49152 + ev.completion.wr_id);
        b.with_engine([](core::Engine& e) { static_cast<ScriptedEngine&>(e).allow_more(1); });
    });
    EXPECT_EQ(sim.run_until({}).reason, StopReason::kQueueEmpty);
    EXPECT_EQ(b_events.size(), n);
    EXPECT_TRUE(b.events().empty());
    EXPECT_EQ(eb.sent(), n);
    EXPECT_EQ(ea.received.size(), n);
    // a has no callback: its events are stored, oldest first.
    ASSERT_EQ(a.events().size(), n);
    for (uint32_t i = 0; i < n; ++i) EXPECT_EQ(a.events()[i].completion.wr_id, i);
    EXPECT_EQ(a.stats().events, n);
}

TEST(Host, EcnMarksReachTheEngine) {
    Sim sim(1);
    NetworkConfig c = exact_network(100'000'000'000, 100'000'000'000, 1us);
    c.link.ecn_threshold_bytes = 0;  // mark every ECT packet
    Network net(sim, c);
    Host& a = net.add_host();
    Host& b = net.add_host();
    ScriptedEngine ea({.peer = b.address(), .count = 8});
    ScriptedEngine eb({});
    a.attach(&ea);
    b.attach(&eb);
    sim.run_until({});
    ASSERT_EQ(eb.received.size(), 8u);
    for (const auto& rx : eb.received) EXPECT_EQ(rx.meta.ecn, ecn::kCe);
    EXPECT_EQ(net.route_stats(a, b).ecn_marked, 8u);
}

TEST(Host, WrongPortAndDetachedEngineDropAndCount) {
    Sim sim(1);
    Network net(sim, exact_network(100'000'000'000, 100'000'000'000, 1us));
    Host& a = net.add_host();
    Host& b = net.add_host();
    ScriptedEngine ea({.peer = b.address().with_port(1234), .count = 3});
    ScriptedEngine eb({});
    a.attach(&ea);
    b.attach(&eb);
    sim.run_until({});
    EXPECT_EQ(b.stats().rx_dropped_wrong_port, 3u);
    EXPECT_TRUE(eb.received.empty());

    ScriptedEngine ea2({.peer = b.address(), .count = 3});
    a.attach(&ea2);
    b.attach(nullptr);
    sim.run_until({});
    EXPECT_EQ(b.stats().rx_dropped_no_engine, 3u);
    EXPECT_EQ(eb.calls, 0u);
}

// A lossy, jittery, reordering two-way run; returns every delivery as seen by a tap.
std::vector<std::tuple<int64_t, uint16_t, uint64_t, bool, uint32_t>> lossy_run(uint64_t seed) {
    Sim sim(seed);
    NetworkConfig c;  // default jitter on
    c.link.loss_probability = 0.05;
    c.link.reorder_probability = 0.02;
    c.link.duplicate_probability = 0.02;
    c.link.rate_bps = 25'000'000'000;
    Network net(sim, c);
    Host& a = net.add_host();
    Host& b = net.add_host();
    net.link(a, b, 1).config().delay = 3us;
    net.link(a, b, 5).config().burst_loss =
        GilbertElliott{.p_good_to_bad = 0.1, .p_bad_to_good = 0.3};
    ScriptedEngine ea({.peer = b.address(), .count = 500});
    ScriptedEngine eb({.peer = a.address(), .count = 500, .base_port = 30000});
    a.attach(&ea);
    b.attach(&eb);
    std::vector<std::tuple<int64_t, uint16_t, uint64_t, bool, uint32_t>> log;
    net.set_tap([&](const Packet& p, const Host&) {
        log.emplace_back(to_ps(sim.now()), p.meta.src.port, p.id, p.duplicate, p.route);
    });
    EXPECT_EQ(sim.run_until({}).reason, StopReason::kQueueEmpty);
    return log;
}

TEST(Host, SameSeedSameRun) {
    const uint64_t seed = test_seed(1234);
    SCOPED_TRACE(seed_note(seed));
    const auto first = lossy_run(seed);
    EXPECT_GT(first.size(), 800u);
    EXPECT_LT(first.size(), 1000u);  // some were lost
    EXPECT_EQ(first, lossy_run(seed));
    EXPECT_NE(first, lossy_run(seed + 1));
}

// DatagramsEngine sends the datagrams it is given to `peer`, one per poll, and keeps
// every datagram it receives (a copy: the span is the host's to reuse).
class DatagramsEngine final : public core::Engine {
  public:
    DatagramsEngine(Address peer, std::vector<std::vector<std::byte>> out)
        : peer_(peer), out_(std::move(out)) {}
    void on_datagram(std::span<const std::byte> d, const PacketMeta&, Time) override {
        received.emplace_back(d.begin(), d.end());
    }
    void on_timeout(Time) override {}
    size_t poll_transmit(std::span<std::byte> buf, PacketMeta& meta, Time) override {
        if (next_ == out_.size()) return 0;
        const std::vector<std::byte>& d = out_[next_++];
        std::copy(d.begin(), d.end(), buf.begin());
        meta.dst = peer_;
        return d.size();
    }
    Time next_deadline() const override { return kNever; }
    std::optional<core::Event> poll_event() override { return std::nullopt; }
    size_t max_datagram_size() const override { return 4096 + 128; }

    std::vector<std::vector<std::byte>> received;

  private:
    Address peer_;
    std::vector<std::vector<std::byte>> out_;
    size_t next_ = 0;
};

// patterned returns n bytes with no two neighbours equal: byte k is (seed * 31 + k) mod 251.
std::vector<std::byte> patterned(size_t n, size_t seed) {
    std::vector<std::byte> d(n);
    for (size_t k = 0; k < n; ++k) d[k] = static_cast<std::byte>((seed * 31 + k) % 251);
    return d;
}

// with_run returns `head` patterned bytes, `run` bytes of value v, `tail` patterned bytes:
// the shape of a simulated DATA datagram (header, a payload of one value, trailer).
std::vector<std::byte> with_run(size_t head, size_t run, std::byte v, size_t tail) {
    std::vector<std::byte> d = patterned(head, 7);
    d.insert(d.end(), run, v);
    const std::vector<std::byte> t = patterned(tail, 9);
    d.insert(d.end(), t.begin(), t.end());
    return d;
}

// A control-sized datagram travels in a packet with a small slab, and so does a larger one
// whose middle is a run of one byte value if what is left fits (elided, PacketPool::compact);
// any other datagram in a 4 KB slab. Whatever the form, the receiving engine and the tap
// get the exact bytes, the packet's size is the whole datagram's (serialisation and byte
// counts unchanged), and packet ids still grow in the order the datagrams were sent.
TEST(Host, DatagramsTravelSmallOrElidedAndArriveWhole) {
    Sim sim(1);
    NetworkConfig c;
    c.routes = 1;
    Network net(sim, c);
    Host& a = net.add_host();
    Host& b = net.add_host();
    constexpr size_t kSmall = PacketPool::kSmallSlabBytes;
    struct Case {
        std::vector<std::byte> bytes;
        bool small, elided;
    };
    const std::vector<Case> cases{
        {patterned(100, 0), true, false},
        {patterned(4096 + 64, 1), false, false},  // no run: travels as it is
        {patterned(kSmall, 2), true, false},
        {patterned(kSmall + 1, 3), true, true},   // its middle byte elided, 256 left
        {patterned(kSmall + 2, 4), false, false}, // 257 left: does not fit
        {patterned(1, 5), true, false},
        {with_run(72, 4096, std::byte{0x42}, 4), true, true},  // DATA with a trailer
        {with_run(72, 4096, std::byte{0x00}, 0), true, true},  // DATA without
        {with_run(0, 4160, std::byte{0xff}, 0), true, true},   // all run: nothing stored
        {with_run(kSmall - 8, 2000, std::byte{0x42}, 9), false, false},  // 257 left
        {with_run(kSmall - 8, 2000, std::byte{0x42}, 8), true, true},    // 256 left
        {with_run(72, 1000, std::byte{0x42}, 1500), false, false},  // run not in the middle
        {patterned(2000, 6), false, false},
    };
    std::vector<std::vector<std::byte>> datagrams;
    for (const Case& k : cases) datagrams.push_back(k.bytes);
    DatagramsEngine ea(b.address(), datagrams);
    DatagramsEngine eb(a.address(), {});
    struct Seen {
        uint64_t id;
        bool small, elided;
        size_t size;
        bool bytes_ok;
        SimTime sent_at;
    };
    std::vector<Seen> got;
    b.set_rx_tap([&](const Packet& p, const Host&) {
        const std::vector<std::byte>& sent = datagrams.at(got.size());
        bool ok = p.size() == sent.size();
        for (size_t k = 0; ok && k < sent.size(); ++k) ok = p.bytes[k] == sent[k];
        std::vector<std::byte> scratch;
        const std::span<const std::byte> v = p.bytes.view(scratch);
        ok = ok && std::equal(v.begin(), v.end(), sent.begin(), sent.end());
        got.push_back({p.id, p.small, p.bytes.elided(), p.size(), ok, p.sent_at});
    });
    a.attach(&ea);
    b.attach(&eb);
    sim.run_until({});
    ASSERT_EQ(got.size(), cases.size());
    EXPECT_EQ(eb.received, datagrams);  // what the engine got, whole and in order
    uint64_t bytes = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        SCOPED_TRACE(i);
        bytes += cases[i].bytes.size();
        if (i > 0) {
            EXPECT_GT(got[i].id, got[i - 1].id) << "ids in send order";
            // Back to back on one port: each leaves one serialisation time of its whole
            // size after the one before.
            EXPECT_EQ(got[i].sent_at - got[i - 1].sent_at,
                      serialization_time(cases[i].bytes.size(), c.host.line_rate_bps));
        }
        EXPECT_EQ(got[i].small, cases[i].small);
        EXPECT_EQ(got[i].elided, cases[i].elided);
        EXPECT_EQ(got[i].size, cases[i].bytes.size());
        EXPECT_TRUE(got[i].bytes_ok);
    }
    EXPECT_EQ(a.stats().tx_bytes, bytes);
    EXPECT_EQ(b.stats().rx_bytes, bytes);
    a.attach(nullptr);
    b.attach(nullptr);
    EXPECT_EQ(sim.packets().outstanding(), 0u);
}

// A link that duplicates (PacketPool::clone) copies an elided packet as it is: every copy
// reaches the engine whole.
TEST(Host, DuplicatesOfElidedDatagramsArriveWhole) {
    Sim sim(1);
    NetworkConfig c;
    c.routes = 1;
    c.link.duplicate_probability = 1;
    c.link.late_duplicate_probability = 1;
    Network net(sim, c);
    Host& a = net.add_host();
    Host& b = net.add_host();
    const std::vector<std::vector<std::byte>> datagrams{
        with_run(72, 4096, std::byte{0x42}, 4), patterned(3000, 1),
        with_run(72, 900, std::byte{1}, 0)};
    DatagramsEngine ea(b.address(), datagrams);
    DatagramsEngine eb(a.address(), {});
    size_t elided = 0, duplicates = 0;
    b.set_rx_tap([&](const Packet& p, const Host&) {
        elided += p.bytes.elided();
        duplicates += p.duplicate;
    });
    a.attach(&ea);
    b.attach(&eb);
    sim.run_until({});
    EXPECT_EQ(duplicates, 2 * datagrams.size());
    EXPECT_EQ(elided, 3 * 2u);  // the first and the last, and their two copies each
    ASSERT_EQ(eb.received.size(), 3 * datagrams.size());
    for (const std::vector<std::byte>& got : eb.received)
        EXPECT_TRUE(std::find(datagrams.begin(), datagrams.end(), got) != datagrams.end());
    for (const std::vector<std::byte>& sent : datagrams)
        EXPECT_EQ(std::count(eb.received.begin(), eb.received.end(), sent), 3);
    a.attach(nullptr);
    b.attach(nullptr);
    EXPECT_EQ(sim.packets().outstanding(), 0u);
}

TEST(Host, ThroughputAndEventRate) {
    // Not a benchmark (see README for Release numbers), but a smoke test that a bulk
    // run keeps the NIC busy back to back, with the events/second it achieved printed.
    Sim sim(1);
    NetworkConfig c;
    c.link.rate_bps = 100'000'000'000;
    c.host.line_rate_bps = 100'000'000'000;
    Network net(sim, c);
    Host& a = net.add_host();
    Host& b = net.add_host();
    const uint32_t n = 20'000;
    ScriptedEngine ea({.peer = b.address(), .count = n, .size = 1000, .full_payload = false});
    ScriptedEngine eb(
        {.peer = a.address(), .count = n, .size = 1000, .base_port = 30000, .full_payload = false});
    a.attach(&ea);
    b.attach(&eb);
    const auto start = std::chrono::steady_clock::now();
    const RunResult r = sim.run_until({});
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.reason, StopReason::kQueueEmpty);
    EXPECT_EQ(ea.received.size(), n);
    EXPECT_EQ(eb.received.size(), n);
    // Back to back at 100 Gbit/s: 1000 B every 80 ns.
    EXPECT_EQ(ea.sent_at.back(), at_ns(80 * (n - 1)));
    std::printf("[   PERF   ] %llu events in %.3f s: %.2f M events/s, %.2f M packets/s\n",
                static_cast<unsigned long long>(r.events), secs, r.events / secs / 1e6,
                2.0 * n / secs / 1e6);
    // An attached host keeps one spare packet to poll into; detached, it holds none.
    EXPECT_LE(sim.packets().outstanding(), 2u);
    a.attach(nullptr);
    b.attach(nullptr);
    EXPECT_EQ(sim.packets().outstanding(), 0u);
    // 40,000 datagrams through one chunk of packets of each slab size (the spares' 4 KB
    // slabs; the datagrams, whose unset payloads are runs, elided in small ones): recycled,
    // not allocated.
    EXPECT_LE(sim.packets().allocated(), 2 * PacketPool::kChunkPackets);
}

}  // namespace
}  // namespace mroce::sim
