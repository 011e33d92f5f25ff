// tests/core/rate_control_test.cc — the connection-wide rate rules of spec §9 in the real
// engine on the in-process network: the ECN echo under reordered ACKs ([CC-4]), the
// receiver's hint reaching the sender ([CC-11], [CC-16]) and the pacer holding the sender
// to it ([CC-17]).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <deque>

#include "tests/core/harness.h"
#include "wire/ack.h"
#include "wire/integrity.h"

namespace mroce::test {
namespace {

using namespace std::chrono_literals;

sim::NetworkConfig fast_net() {
    sim::NetworkConfig nc;
    nc.routes = 8;
    nc.link.rate_bps = 10'000'000'000;
    nc.link.delay = 2us;
    nc.host.line_rate_bps = 10'000'000'000;
    return nc;
}

// WRITEs of `messages` × `len` bytes A -> B; returns the sender's goodput in Gbit/s (0 when
// not every WRITE succeeded within the budget).
double write_gbps(Pair& p, uint32_t messages, uint32_t len) {
    std::vector<std::byte> src(len), dst(len);
    for (uint32_t i = 0; i < len; ++i) src[i] = pattern_byte(3, 0, i);
    const Time t0 = p.now();
    const uint32_t pa = p.a->alloc_pd(), pb = p.b->alloc_pd();
    const auto ka = *p.a->register_memory(pa, src.data(), len, core::access::kLocalWrite);
    const auto kb = *p.b->register_memory(pb, dst.data(), len,
                                          core::access::kLocalWrite | core::access::kRemoteWrite);
    const uint32_t sa = *p.a->create_stream(pa, p.host_b().address(), 1, t0);
    (void)*p.b->create_stream(pb, p.host_a().address(), 1, t0);
    uint32_t ok = 0;
    Time last{};
    p.host_a().set_event_callback([&](const core::Event& e) {
        if (e.kind != core::EventKind::kCompletion) return;
        ok += e.completion.status == core::Status::kSuccess;
        last = p.now();
    });
    for (uint32_t i = 0; i < messages; ++i)
        EXPECT_EQ(p.a->post_send(sa, write_wr(i, src, ka.lkey, dst, kb.rkey, len), t0), Error::kOk);
    p.host_a().kick();
    p.sim.run_until([&] { return ok == messages; }, p.sim.now() + 1s, 20'000'000);
    if (ok != messages) return 0;
    EXPECT_EQ(src, dst);
    return static_cast<double>(uint64_t{messages} * len) * 8 / static_cast<double>(to_ns(last - t0));
}

// inject_ack hands A an ACK from B for A's `path` that acknowledges nothing new, with the
// given echoed CE count and rate hint: the reordered, late or forged ACK a test needs.
void inject_ack(Pair& p, uint16_t path, uint32_t ce_count, uint32_t hint_mbps) {
    wire::AckPacket a = peer_ack(p, path);
    a.ecn_ce_count = ce_count;
    a.rate_hint_mbps = hint_mbps;
    give_to_a(p, a);
    p.host_a().kick();
}

// Buffers: a source at A and a destination at B of `bytes` each, registered in a PD of
// each side (B's for remote WRITE), and the WRITE of their first `len` bytes.
struct Buffers {
    Buffers(Pair& p, size_t bytes, std::byte fill = std::byte{0})
        : src(bytes, fill), dst(bytes), pa(p.a->alloc_pd()), pb(p.b->alloc_pd()) {
        ka = *p.a->register_memory(pa, src.data(), src.size(), core::access::kLocalWrite);
        kb = *p.b->register_memory(pb, dst.data(), dst.size(),
                                   core::access::kLocalWrite | core::access::kRemoteWrite);
    }
    core::SendWr wr(uint64_t id, uint32_t len) const { return write_wr(id, src, ka.lkey, dst, kb.rkey, len); }

    std::vector<std::byte> src, dst;
    uint32_t pa, pb;
    core::MemoryKeys ka, kb;
};

// Writer: stream 2 from A to B over an established connection, Buffers of `bytes` each,
// and A's successful completions counted in `ok`.
struct Writer : Buffers {
    Writer(Pair& p, size_t bytes, std::byte fill = std::byte{0}) : Buffers(p, bytes, fill) {
        stream = *p.a->create_stream(pa, p.host_b().address(), 2, p.now());
        (void)*p.b->create_stream(pb, p.host_a().address(), 2, p.now());
        p.host_a().set_event_callback([this](const core::Event& e) {
            ok += e.kind == core::EventKind::kCompletion && e.completion.status == core::Status::kSuccess;
        });
    }

    uint32_t stream = 0;
    uint32_t ok = 0;
};

// [CC-4] ACKs overtake each other on their random return paths: a late ACK's older CE
// count must not rewind the stored one, or the next ACK counts the same marks again.
TEST(RateControl, EcnEchoIsCountedOnceUnderReorderedAcks) {
    core::EndpointConfig cfg;
    Pair p(7, fast_net(), cfg, cfg);
    ASSERT_GT(write_gbps(p, 1, 4096), 0);  // establishes the connection
    const uint32_t conn_a = p.a->connection_to(p.host_b().address());
    const core::Connection& ca = *p.a->connection(conn_a);
    const uint16_t path = 0;
    const uint64_t before = ca.path_stats(path).ecn_echoed;
    // 0 -> 10 -> 12 (the late 10, 12 and 11 are not forward steps) -> 13.
    for (uint32_t c : {10u, 12u, 10u, 12u, 11u, 13u}) inject_ack(p, path, c, 0);
    EXPECT_EQ(ca.path_stats(path).ecn_echoed - before, 13u);
}

// [CC-11] [CC-16] [CC-17] a receiver whose inbound capacity is 2 Gbit/s tells its sender
// so in every ACK (in payload: 2 Gbit/s x 4096 / (4096 + 72) = 1965 Mbit/s, [CC-12]), and
// the sender's pacer holds it there on a 10 Gbit/s network; with the hint off the same
// sender runs at what the network carries.
TEST(RateControl, PacerHoldsTheSenderToTheReceiversHint) {
    core::EndpointConfig slow_rx;
    slow_rx.inbound_capacity_bps = 2'000'000'000;
    core::EndpointConfig tx;
    Pair p(11, fast_net(), tx, slow_rx);
    const double hinted = write_gbps(p, 64, 256 * 1024);
    const core::Connection& ca = *p.a->connection(p.a->connection_to(p.host_b().address()));
    std::printf("hinted: %.2f Gbit/s, hint %u Mbit/s, %llu paced waits\n", hinted, ca.rate_hint_mbps(),
                static_cast<unsigned long long>(ca.stats().paced_waits));
    EXPECT_EQ(ca.rate_hint_mbps(), 1965u);
    EXPECT_GT(ca.stats().paced_waits, 0u);
    EXPECT_LE(hinted, 1.965 * 1.02);  // never above the hint (the burst is 16 KiB of 16 MiB)
    EXPECT_GE(hinted, 1.965 * 0.9);   // and close to it

    core::EndpointConfig no_hint = tx;
    no_hint.rate_hint = false;
    Pair q(11, fast_net(), no_hint, slow_rx);
    const double unhinted = write_gbps(q, 64, 256 * 1024);
    std::printf("hint off: %.2f Gbit/s\n", unhinted);
    EXPECT_GT(unhinted, 4.0);
}

// SlowReader stands for a receiving process slower than its link (a software endpoint
// reading a socket): datagrams reach the host at once but the engine reads them at most at
// `read_bps`, in order, from a FIFO, the socket buffer. With `stamped`, each datagram comes
// with the time it reached the host (meta.arrival, [UDP-11]); without, the engine has only
// its own time.
class SlowReader final : public EngineTap {
public:
    SlowReader(core::Engine& inner, uint64_t read_bps, bool stamped)
        : EngineTap(inner), read_bps_(read_bps), stamped_(stamped) {}
    void on_datagram(std::span<const std::byte> d, const PacketMeta& m, Time now) override {
        const Time start = std::max(now, ready_);
        ready_ = start + Duration{static_cast<int64_t>(d.size() * 8 * 1'000'000'000 / read_bps_)};
        Held h{std::vector<std::byte>(d.begin(), d.end()), m, ready_};
        if (stamped_) h.meta.arrival = now;
        fifo_.push_back(std::move(h));
        read_due(now);
    }
    void on_timeout(Time now) override {
        read_due(now);
        inner_.on_timeout(now);
    }
    Time next_deadline() const override {
        const Time inner = inner_.next_deadline();
        return fifo_.empty() ? inner : std::min(inner, fifo_.front().ready);
    }
    Duration longest_wait{};

private:
    struct Held {
        std::vector<std::byte> bytes;
        PacketMeta meta;
        Time ready;
    };
    void read_due(Time now) {
        while (!fifo_.empty() && fifo_.front().ready <= now) {
            Held& h = fifo_.front();
            if (stamped_) longest_wait = std::max(longest_wait, now - h.meta.arrival);
            inner_.on_datagram(h.bytes, h.meta, now);
            fifo_.pop_front();
        }
    }
    uint64_t read_bps_;
    bool stamped_;
    Time ready_{};
    std::deque<Held> fifo_;
};

// [UDP-11] [CC-14] a receiver whose process reads at 5 Gbit/s behind a 10 Gbit/s link holds a
// backlog of its own (up to the sender's windows). Measured from when each DATA reached the
// host, the downlink has no queue: the hint stays at the receiver's capacity, and the
// sender runs at the reader's pace. Measured from when the engine read it, the backlog
// shows as delay; it read as a downlink queue (the lowest hint 2456 Mbit/s) until the
// delay was bounded by the downlink's busy run ([CC-14]): the engine reads at half of C,
// so no run lasts, and the hint stays up there too.
TEST(RateControl, HostBacklogIsNotTheDownlinksQueue) {
    core::EndpointConfig rx;
    rx.inbound_capacity_bps = 10'000'000'000;
    core::EndpointConfig tx;
    constexpr uint64_t kRead = 5'000'000'000;
    double gbps[2];
    uint32_t lowest_hint[2];
    for (const bool stamped : {true, false}) {
        Pair p(12, fast_net(), tx, rx);
        SlowReader reader(*p.b, kRead, stamped);
        p.host_b().attach(&reader);
        // The lowest hint A holds while the transfer runs, sampled every 20 us.
        uint32_t lowest = UINT32_MAX;
        bool running = true;
        std::function<void()> sample = [&] {
            if (!running) return;
            const core::Connection* ca = p.a->connection(p.a->connection_to(p.host_b().address()));
            if (ca && ca->rate_hint_mbps() != 0) lowest = std::min(lowest, ca->rate_hint_mbps());
            p.sim.schedule_in(20us, sample);
        };
        p.sim.schedule_in(200us, sample);
        gbps[stamped] = write_gbps(p, 64, 256 * 1024);
        running = false;
        lowest_hint[stamped] = lowest;
        std::printf("%s: %.2f Gbit/s, lowest hint %u Mbit/s%s\n",
                    stamped ? "arrival stamped" : "engine's time", gbps[stamped], lowest,
                    stamped ? "" : " (the backlog shows as delay)");
        if (stamped)
            std::printf("  longest wait in the reader's buffer: %.1f us\n", to_ns(reader.longest_wait) / 1e3);
        p.host_b().attach(p.b.get());
    }
    // Stamped: the reader's pace, and a hint that never fell below half the capacity.
    EXPECT_GE(gbps[1], 5.0 * 0.9 * 4096 / 4168);
    EXPECT_GE(lowest_hint[1], 4'000u);
    // The engine's time: the same, the delay being no longer than any busy run.
    EXPECT_GE(gbps[0], 5.0 * 0.9 * 4096 / 4168);
    EXPECT_GE(lowest_hint[0], 4'000u);
}

// [CC-15] a connection back from idle starts its first round trip with what is left of
// its grant (one BDP at its last hint, halved per idle_halving_rtts × srtt since the hint
// expired), not with first_rtt_bytes: idle past the hint's TTL (4 × srtt) on a 100 Gbit/s
// network, within about one halving (one BDP at the hint is tens of KB), it has more than
// 4 segments
// in flight within 3 µs of its next WRITE, before any ACK can return. With the rule off
// (idle_halving_rtts = 0) the same sender has one segment in flight (first_rtt_bytes =
// one segment here, so the two cases cannot meet by chance).
TEST(RateControl, ConnectionBackFromIdleStartsWithItsGrant) {
    sim::NetworkConfig nc = fast_net();
    nc.link.rate_bps = 100'000'000'000;
    nc.host.line_rate_bps = 100'000'000'000;
    for (const uint16_t halving : {uint16_t{8}, uint16_t{0}}) {
        core::EndpointConfig tx;
        tx.first_rtt_bytes = tx.max_payload;
        tx.idle_halving_rtts = halving;
        core::EndpointConfig rx;
        Pair p(17, nc, tx, rx);
        ASSERT_GT(write_gbps(p, 8, 256 * 1024), 0);  // alone at B: its hint is B's downlink
        const core::Connection& ca = *p.a->connection(p.a->connection_to(p.host_b().address()));
        ASSERT_GT(ca.rate_hint_mbps(), 50'000u);
        // Idle past the TTL (4 × the largest srtt), then half a halving (8 × srtt) more.
        Duration lo = Duration::max(), hi{};
        for (uint16_t i = 0; i < ca.num_paths(); ++i) {
            const Duration r = ca.tx_path(i).rtt.srtt;
            if (r.count() > 0) lo = std::min(lo, r), hi = std::max(hi, r);
        }
        ASSERT_GT(hi.count(), 0);
        const Duration idle = 4 * hi + 4 * lo + 10us;
        const Time idle_from = p.now();
        p.sim.schedule_at(p.sim.now() + idle, [] {});  // an empty queue would not let time pass
        p.sim.run_for(idle);
        ASSERT_GE(p.now(), idle_from + idle);
        ASSERT_EQ(ca.in_flight_bytes(), 0u);
        const uint32_t len = 1 << 20;
        Writer w(p, len);
        ASSERT_EQ(p.a->post_send(w.stream, w.wr(1, len), p.now()), Error::kOk);
        p.host_a().kick();
        const Time t0 = p.now();
        uint64_t peak = 0;
        p.sim.run_until([&] {
            peak = std::max(peak, ca.in_flight_bytes());
            return p.now() >= t0 + 3us;
        }, p.sim.now() + 3us, 1'000'000);
        std::printf("idle_halving_rtts %u: %llu bytes in flight within 3 us of the return\n", halving,
                    static_cast<unsigned long long>(peak));
        if (halving)
            EXPECT_GT(peak, 4u * tx.max_payload);
        else
            EXPECT_LE(peak, uint64_t{tx.max_payload});
    }
}

// FirstRoundTrip: what a new connection A -> B did before its first ACK: the most it had
// in flight, how long its handshake took (A's post to Established) and the grants it took.
struct FirstRoundTrip {
    uint64_t peak = 0;
    Duration handshake{};
    uint64_t grants_taken = 0;
};

// first_round_trip: A queues a 1 MiB WRITE to B while Connecting on a 100 Gbit/s network,
// B answers as a pure responder (its stream made on the connection A's HELLO made), and the
// run stops at A's first ACK.
FirstRoundTrip first_round_trip(const core::EndpointConfig& tx, const core::EndpointConfig& rx,
                                const sim::NetworkConfig& nc) {
    Pair p(23, nc, tx, rx);
    const uint32_t len = 1 << 20;
    const Buffers b(p, len);
    const Time t0 = p.now();
    const uint32_t sa = *p.a->create_stream(b.pa, p.host_b().address(), 1, t0);
    EXPECT_EQ(p.a->post_send(sa, b.wr(1, len), t0), Error::kOk);
    p.host_a().kick();
    p.sim.run_until([&] { return p.b->connection_to(p.host_a().address()) != 0; }, p.sim.now() + 1ms, 1'000'000);
    EXPECT_NE(p.b->connection_to(p.host_a().address()), 0u);
    (void)*p.b->create_stream(b.pb, p.host_a().address(), 1, p.now());
    const core::Connection& ca = *p.a->connection(p.a->connection_to(p.host_b().address()));
    Time up{};
    FirstRoundTrip r;
    auto acked = [&] {
        for (uint16_t i = 0; i < ca.num_paths(); ++i)
            if (ca.path_stats(i).acks_received > 0) return true;
        return false;
    };
    p.sim.run_until([&] {
        if (up == Time{} && ca.state() == core::ConnState::kEstablished) up = p.now();
        if (acked()) return true;
        r.peak = std::max(r.peak, ca.in_flight_bytes());
        return false;
    }, p.sim.now() + 1ms, 1'000'000);
    EXPECT_TRUE(acked());
    EXPECT_NE(up, Time{});
    r.handshake = up - t0;
    r.grants_taken = ca.stats().hello_grants_taken;
    return r;
}

sim::NetworkConfig net_100g() {
    sim::NetworkConfig nc = fast_net();
    nc.link.rate_bps = 100'000'000'000;
    nc.host.line_rate_bps = 100'000'000'000;
    return nc;
}

// bdp_bytes: `rtt` at the link rate of `nc`.
uint64_t bdp_bytes(const sim::NetworkConfig& nc, Duration rtt) {
    return nc.link.rate_bps / 8 * static_cast<uint64_t>(to_ns(rtt)) / 1'000'000'000;
}

// [CC-20] a new connection whose HELLO_ACK carries a grant starts its first round trip
// with one bandwidth-delay product at the grant over the handshake's RTT in flight, not
// first_rtt_bytes: B is idle, so it grants its whole downlink (100 Gbit/s), and A, which
// queued a 1 MiB WRITE while Connecting, has more than 4 segments in flight before its
// first ACK, and no more than the grant × the handshake's RTT (+ one segment). With
// hello_grant off, the same sender has one segment in flight (first_rtt_bytes = one
// segment here, so the two cases cannot meet by chance).
TEST(RateControl, GrantedNewConnectionSendsABandwidthDelayProductAtOnce) {
    const sim::NetworkConfig nc = net_100g();
    for (const bool grant : {true, false}) {
        core::EndpointConfig tx;
        tx.first_rtt_bytes = tx.max_payload;
        tx.hello_grant = grant;
        core::EndpointConfig rx;
        rx.port_rate_bps = nc.link.rate_bps;
        rx.hello_grant = grant;
        const FirstRoundTrip r = first_round_trip(tx, rx, nc);
        const uint64_t bdp = bdp_bytes(nc, r.handshake);
        std::printf("hello_grant %d: handshake %lld ns, %llu bytes in flight before the first ACK (grant x RTT %llu)\n",
                    grant, static_cast<long long>(to_ns(r.handshake)), static_cast<unsigned long long>(r.peak),
                    static_cast<unsigned long long>(bdp));
        EXPECT_EQ(r.grants_taken, grant ? 1u : 0u);
        if (grant) {
            EXPECT_GT(r.peak, 4u * tx.max_payload);
            EXPECT_LE(r.peak, bdp + tx.max_payload);
        } else {
            EXPECT_LE(r.peak, uint64_t{tx.max_payload});
        }
    }
}

// [CC-20] grant_caps_first_rtt: a receiver granting a small share (its port at 1 Gbit/s,
// so G × S is a few hundred bytes) holds A's first round trip to one packet: A starts one
// connection, which its port does not spread among others, whether that port runs at
// 100 Gbit/s or at 1 Gbit/s (a first_rtt_bytes longer than the port's BDP once exempted
// it, and so every sender of an incast at 25 Gbit/s; the senders' own ports pace nothing
// that the receiver's downlink does not get N times). With the rule off A sends
// first_rtt_bytes.
TEST(RateControl, AGrantCapsTheFirstRoundTripWhereTheSendersPortWouldNotSpreadIt) {
    const sim::NetworkConfig nc = net_100g();
    for (const auto& [caps, tx_port] : {std::pair{true, nc.link.rate_bps}, std::pair{false, nc.link.rate_bps},
                                        std::pair{true, uint64_t{1'000'000'000}}}) {
        core::EndpointConfig tx;
        tx.first_rtt_bytes = 4 * tx.max_payload;
        tx.grant_caps_first_rtt = caps;
        tx.port_rate_bps = tx_port;
        core::EndpointConfig rx;
        rx.port_rate_bps = 1'000'000'000;
        const FirstRoundTrip r = first_round_trip(tx, rx, nc);
        std::printf("caps %d, own port %llu bit/s: handshake %lld ns, %llu bytes in flight before the first ACK\n",
                    caps, static_cast<unsigned long long>(tx_port), static_cast<long long>(to_ns(r.handshake)),
                    static_cast<unsigned long long>(r.peak));
        EXPECT_EQ(r.grants_taken, 1u);
        if (caps)
            EXPECT_LE(r.peak, uint64_t{tx.max_payload});
        else
            EXPECT_EQ(r.peak, tx.first_rtt_bytes);
    }
}

// [CC-20] [CONN-30] [CONN-32]: with HELLO copies spread closer than the round trip, later
// copies leave before the answer to the first arrives. The HELLO_ACK echoes the number of
// the HELLO it answers (`hello_echo`), so the grant covers the round trip from that HELLO:
// the first round trip has more than half the grant × the handshake's RTT in flight. Timed
// from the latest copy (as before the echo), it would be the grant × one copy gap, about a
// quarter.
TEST(RateControl, GrantCoversTheRoundTripFromTheAnsweredHello) {
    const sim::NetworkConfig nc = net_100g();
    core::EndpointConfig tx;
    tx.first_rtt_bytes = tx.max_payload;
    tx.hello_copies = 4;
    core::EndpointConfig rx;
    rx.port_rate_bps = nc.link.rate_bps;
    // The handshake's round trip with the grant off: the copies' spread is set below it.
    tx.hello_grant = rx.hello_grant = false;
    const Duration rtt = first_round_trip(tx, rx, nc).handshake;
    tx.hello_grant = rx.hello_grant = true;
    tx.handshake_timeout = rtt;  // copies rtt / 4 apart: three leave before the answer
    const FirstRoundTrip r = first_round_trip(tx, rx, nc);
    const uint64_t bdp = bdp_bytes(nc, r.handshake);
    std::printf("copies %lld ns apart: handshake %lld ns, %llu bytes in flight before the first ACK (grant x RTT %llu)\n",
                static_cast<long long>(to_ns(rtt / 4)), static_cast<long long>(to_ns(r.handshake)),
                static_cast<unsigned long long>(r.peak), static_cast<unsigned long long>(bdp));
    EXPECT_EQ(r.grants_taken, 1u);
    EXPECT_GT(r.peak, bdp / 2);
    EXPECT_LE(r.peak, bdp + tx.max_payload);
}

// [CC-12], [INT-6]: with INTEGRITY every DATA datagram is 4 bytes longer, so the receiver
// divides its capacity by max_payload + H + 4 (H = 72, or 64 with COMPACT_DATA): the
// senders paced at its hints then fill its downlink and no more (without the 4, they would
// offer 4 bytes a packet too many, a queue that grows by 0.1 % of the line rate for as
// long as the hint binds).
TEST(RateControl, HintLeavesRoomForTheIntegrityTrailer) {
    core::EndpointConfig slow_rx;
    slow_rx.inbound_capacity_bps = 2'000'000'000;
    slow_rx.integrity_check = true;
    core::EndpointConfig tx;
    tx.integrity_check = true;
    Pair p(11, fast_net(), tx, slow_rx);
    EXPECT_GT(write_gbps(p, 16, 256 * 1024), 0.0);
    const core::Connection& ca = *p.a->connection(p.a->connection_to(p.host_b().address()));
    ASSERT_TRUE(ca.integrity());
    // H: the DATA header the receiver counts, 64 if it announces COMPACT_DATA ([DATA-9]).
    const uint64_t header = slow_rx.compact_data ? wire::kDataCompactHeaderSize : wire::kDataHeaderSize;
    const uint64_t datagram = header + slow_rx.max_payload + wire::kIntegritySize;
    EXPECT_EQ(ca.rate_hint_mbps(), slow_rx.inbound_capacity_bps * slow_rx.max_payload / datagram / 1'000'000);
}

// [CC-17] a hint that rises brings a held packet forward, and one that falls again before
// that time must not leave the data without a timer: every WRITE still completes. (The
// pacer's timer once followed the rise and was then dropped, and a connection stalled.)
TEST(RateControl, HintThatRisesAndFallsNeverStrandsPacedData) {
    core::EndpointConfig slow_rx;
    slow_rx.inbound_capacity_bps = 1'000'000'000;
    core::EndpointConfig tx;
    Pair p(13, fast_net(), tx, slow_rx);
    ASSERT_GT(write_gbps(p, 1, 4096), 0);  // establishes the connection
    const core::Connection& ca = *p.a->connection(p.a->connection_to(p.host_b().address()));
    Writer w(p, 1 << 20);
    uint32_t& ok = w.ok;
    constexpr uint32_t kWrites = 16;
    for (uint32_t i = 0; i < kWrites; ++i)
        ASSERT_EQ(p.a->post_send(w.stream, w.wr(i, 64 * 1024), p.now()), Error::kOk);
    p.host_a().kick();
    // Paced at its hint (982 Mbit/s: 1 Gbit/s of payload, [CC-12]). At each step, at a time
    // between paced packets, a rise (which brings the held packet's timer forward) and at
    // once a fall back to the hint; then 200 µs without interference, in which a packet
    // leaves every 33 µs: the data must never be left without a timer.
    auto sent = [&] {
        uint64_t n = 0;
        for (uint16_t i = 0; i < ca.num_paths(); ++i) n += ca.path_stats(i).packets_sent;
        return n;
    };
    for (int step = 0; step < 60 && ok < kWrites; ++step) {
        p.sim.run_until([] { return false; }, p.sim.now() + std::chrono::nanoseconds(1000 + 1733 * (step % 11)),
                        10'000'000);
        inject_ack(p, 0, 0, 1'200 + 400 * static_cast<uint32_t>(step % 5));
        inject_ack(p, 0, 0, ca.rate_hint_mbps() ? 982 : 0);
        const uint64_t before = sent();
        p.sim.run_until([] { return false; }, p.sim.now() + 200us, 10'000'000);
        if (ok < kWrites) {
            ASSERT_GT(sent(), before) << "paced data stranded at step " << step;
        }
    }
    p.sim.run_until([&] { return ok == kWrites; }, p.sim.now() + 500ms, 50'000'000);
    EXPECT_EQ(ok, kWrites);
    EXPECT_GT(ca.stats().paced_waits, 0u);
}

// [CC-17] the same rise and fall while no data waits: the rise brings the pacer's timer
// forward, it runs with nothing to send and stops, and the fall shuts the gate again until
// the time paced at the low hint. A WRITE posted then has no packet in flight and nothing
// else to wake it: the pacer must have kept its timer. (on_ack re-armed the pacer only while
// its timer ran, and such a WRITE waited for the next packet from the peer: for ever.)
TEST(RateControl, HintThatRisesAndFallsWhileIdleStillTimesTheNextPost) {
    core::EndpointConfig rx;
    rx.inbound_capacity_bps = 1'000'000'000;  // B's own hint: 982 Mbit/s
    core::EndpointConfig tx;
    Pair p(17, fast_net(), tx, rx);
    ASSERT_GT(write_gbps(p, 1, 4096), 0);  // establishes the connection
    const core::Connection& ca = *p.a->connection(p.a->connection_to(p.host_b().address()));
    Writer w(p, 4096, std::byte{7});
    uint32_t& ok = w.ok;
    // 10 Mbit/s: the next packet after a 4 KiB one may leave 3.3 ms later.
    inject_ack(p, 0, 0, 10);
    ASSERT_EQ(p.a->post_send(w.stream, w.wr(1, 4096), p.now()), Error::kOk);
    p.host_a().kick();
    // Its ACK brings B's 982 Mbit/s (a rise); the timer it brought forward runs and stops.
    p.sim.run_until([&] { return ok == 1; }, p.sim.now() + 1ms, 10'000'000);
    ASSERT_EQ(ok, 1u);
    p.sim.run_until([] { return false; }, p.sim.now() + 100us, 10'000'000);
    inject_ack(p, 0, 0, 10);  // the fall: the gate shuts until 3.3 ms after the WRITE
    const uint64_t waits = ca.stats().paced_waits;
    ASSERT_EQ(p.a->post_send(w.stream, w.wr(2, 4096), p.now()), Error::kOk);
    p.host_a().kick();
    p.sim.run_until([&] { return ok == 2; }, p.sim.now() + 50ms, 10'000'000);
    EXPECT_EQ(ok, 2u) << "a WRITE posted while the pacer held the gate shut never left";
    EXPECT_GE(ca.stats().paced_waits, waits);
}

// [CC-13] two senders into one receiver, one in class 1 (weight 4) and one in class 0
// (weight 1): the receiver's hint alone splits its capacity 4:1 (the network, 10 Gbit/s per
// sender, is no bottleneck: the receiver's 2.5 Gbit/s is), within 5% once converged.
TEST(RateControl, ClassWeightsSplitTheReceiverByTheHintAlone) {
    sim::Sim sim(21);
    sim::Network net(sim, fast_net());
    std::vector<sim::Host*> hosts;
    for (int i = 0; i < 3; ++i) hosts.push_back(&net.add_host());
    core::EndpointConfig rx_cfg;
    rx_cfg.inbound_capacity_bps = 2'500'000'000;
    rx_cfg.class_weights = {1, 4, 1, 1, 1, 1, 1, 1};
    core::EndpointConfig tx_cfg;
    std::vector<std::unique_ptr<core::Endpoint>> eps;
    eps.push_back(std::make_unique<core::Endpoint>(rx_cfg, hosts[0]->address(), 101));
    eps.push_back(std::make_unique<core::Endpoint>(tx_cfg, hosts[1]->address(), 102));
    eps.push_back(std::make_unique<core::Endpoint>(tx_cfg, hosts[2]->address(), 103));
    for (int i = 0; i < 3; ++i) hosts[i]->attach(eps[i].get());
    auto now = [&] { return sim::to_core_time(sim.now()); };

    constexpr uint32_t kLen = 16 * 1024, kMessages = 8000;
    std::vector<std::byte> src(kLen, std::byte{1}), dst(kLen);
    const uint32_t prx = eps[0]->alloc_pd();
    const auto krx = *eps[0]->register_memory(prx, dst.data(), kLen, core::access::kLocalWrite | core::access::kRemoteWrite);
    struct Side {
        uint32_t stream = 0;
        std::vector<Time> done;
    };
    Side side[2];
    for (int i = 0; i < 2; ++i) {
        core::Endpoint& tx = *eps[1 + i];
        const uint8_t tc = i == 0 ? 1 : 0;
        const uint32_t pd = tx.alloc_pd();
        const auto k = *tx.register_memory(pd, src.data(), kLen, core::access::kLocalWrite);
        side[i].stream = *tx.create_stream(pd, hosts[0]->address(), 1 + i, now());  // the receiver's i-th
        const uint32_t rs = *eps[0]->create_stream(prx, hosts[1 + i]->address(), 1, now());
        core::StreamLimits l = tx.default_stream_limits();
        l.traffic_class = tc;
        ASSERT_EQ(tx.set_stream_limits(side[i].stream, l), Error::kOk);
        l = eps[0]->default_stream_limits();
        l.traffic_class = tc;  // the receiver weighs by its own stream's class
        ASSERT_EQ(eps[0]->set_stream_limits(rs, l), Error::kOk);
        hosts[1 + i]->set_event_callback([&, i](const core::Event& e) {
            if (e.kind == core::EventKind::kCompletion && e.completion.status == core::Status::kSuccess)
                side[i].done.push_back(now());
        });
        for (uint32_t m = 0; m < kMessages; ++m)
            ASSERT_EQ(tx.post_send(side[i].stream, write_wr(m, src, k.lkey, dst, krx.rkey, kLen), now()), Error::kOk);
        hosts[1 + i]->kick();
    }
    const Time t0 = now();
    sim.run_until([] { return false; }, sim.now() + 30ms, 50'000'000);
    // Goodput once converged, while both are still sending.
    const Time from = t0 + 10ms, to = t0 + 30ms;
    double gbps[2];
    for (int i = 0; i < 2; ++i) {
        const auto n = std::count_if(side[i].done.begin(), side[i].done.end(),
                                     [&](Time t) { return t >= from && t < to; });
        gbps[i] = static_cast<double>(n) * kLen * 8 / static_cast<double>(to_ns(to - from));
    }
    std::printf("class 1 (weight 4): %.3f Gbit/s, class 0 (weight 1): %.3f Gbit/s, ratio %.3f\n", gbps[0], gbps[1],
                gbps[0] / gbps[1]);
    ASSERT_GT(gbps[1], 0);
    EXPECT_NEAR(gbps[0] / gbps[1], 4.0, 4.0 * 0.05);
    EXPECT_NEAR(gbps[0] + gbps[1], 2.5 * 4096 / 4168, 2.5 * 0.05);  // the receiver is full
    for (int i = 0; i < 3; ++i) hosts[i]->attach(nullptr);
}

}  // namespace
}  // namespace mroce::test
