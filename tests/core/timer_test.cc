// tests/core/timer_test.cc — no timer work without cause (issue 19): a loss-free ping-pong
// of small WRITE_WITH_IMMs, the shape of `mroce perf --lat`, on the in-process network.
// The simulated clock is the only clock, so an ACK is never late here: every timeout on a
// path, and every engine wake-up while nothing is outstanding, is the engine's own doing.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/core/harness.h"

namespace mroce::test {
namespace {

using namespace std::chrono_literals;

// CountingTap counts the engine's on_timeout calls (the host calls it at next_deadline).
class CountingTap : public EngineTap {
public:
    using EngineTap::EngineTap;
    void on_timeout(Time now) override {
        ++timeouts;
        EngineTap::on_timeout(now);
    }
    uint64_t timeouts = 0;
};

// The ACK rule a Device over UDP runs with (api/udp_tuning.h fit_udp_acks): delayed ACKs
// of up to 50 µs, ACK_NOW only on the last message before the sender pauses. The
// simulator's defaults ACK every other packet within 10 µs; the latency run is the UDP one.
core::EndpointConfig udp_like() {
    core::EndpointConfig c;
    c.ack_every = 32;
    c.max_ack_delay = 50us;
    c.ack_now_every_message = false;
    return c;
}

// PingPong: A and B each WRITE_WITH_IMM 8 bytes into the other's buffer; each answers the
// other's message as its receive completes, as `mroce perf --lat` does.
struct PingPong {
    explicit PingPong(uint64_t seed)
        : pair(seed, ten_gbit_net(), udp_like(), udp_like()), tap_a(*pair.a), tap_b(*pair.b) {
        pair.host_a().attach(&tap_a);
        pair.host_b().attach(&tap_b);
        const Time t = pair.now();
        pd_a = pair.a->alloc_pd();
        pd_b = pair.b->alloc_pd();
        const uint32_t flags = kAllAccess;
        key_a = *pair.a->register_memory(pd_a, buf_a.data(), buf_a.size(), flags);
        key_b = *pair.b->register_memory(pd_b, buf_b.data(), buf_b.size(), flags);
        stream_a = *pair.a->create_stream(pd_a, pair.host_b().address(), 1, t);
        stream_b = *pair.b->create_stream(pd_b, pair.host_a().address(), 1, t);
        pair.host_a().set_event_callback([this](const core::Event& e) { on_event(e, recv_a, sent_a); });
        pair.host_b().set_event_callback([this](const core::Event& e) { on_event(e, recv_b, sent_b); });
        for (int i = 0; i < 4; ++i) {
            post_recv(*pair.a, stream_a, key_a, buf_a);
            post_recv(*pair.b, stream_b, key_b, buf_b);
        }
    }
    void on_event(const core::Event& e, uint64_t& recvs, uint64_t& sends) {
        if (e.kind != core::EventKind::kCompletion) return;
        EXPECT_EQ(e.completion.status, core::Status::kSuccess);
        (e.completion.opcode == core::WorkOpcode::kRecvWriteImm ? recvs : sends)++;
    }
    void post_recv(core::Endpoint& ep, uint32_t stream, const core::MemoryKeys& k,
                   std::vector<std::byte>& buf) {
        core::RecvWr r;
        r.addr = reinterpret_cast<uint64_t>(buf.data());
        r.length = static_cast<uint32_t>(buf.size());
        r.lkey = k.lkey;
        EXPECT_EQ(ep.post_recv(stream, r, pair.now()), Error::kOk);
    }
    // send: `from` WRITE_WITH_IMMs 8 bytes to the peer's buffer and reposts a receive.
    void send(sim::Host& host, core::Endpoint& ep, uint32_t stream, const core::MemoryKeys& k,
              std::vector<std::byte>& buf, const core::MemoryKeys& peer_k,
              std::vector<std::byte>& peer_buf) {
        host.with_engine([&](core::Engine&) {
            post_recv(ep, stream, k, buf);
            core::SendWr wr;
            wr.opcode = core::WorkOpcode::kWriteImm;
            wr.local_addr = reinterpret_cast<uint64_t>(buf.data());
            wr.length = 8;
            wr.lkey = k.lkey;
            wr.remote_addr = reinterpret_cast<uint64_t>(peer_buf.data());
            wr.rkey = peer_k.rkey;
            EXPECT_EQ(ep.post_send(stream, wr, pair.now()), Error::kOk);
        });
    }
    bool run_until(const std::function<bool()>& done) {
        pair.sim.run_until(done, pair.sim.now() + 100ms, 10'000'000);
        return done();
    }
    // round_trip: one ping A -> B and its pong B -> A; false if either did not arrive.
    bool round_trip() {
        const uint64_t ra = recv_a, rb = recv_b;
        send(pair.host_a(), *pair.a, stream_a, key_a, buf_a, key_b, buf_b);
        if (!run_until([&] { return recv_b > rb; })) return false;
        send(pair.host_b(), *pair.b, stream_b, key_b, buf_b, key_a, buf_a);
        return run_until([&] { return recv_a > ra; });
    }
    const core::Connection& conn(const core::Endpoint& ep, const Address& peer) const {
        return *ep.connection(ep.connection_to(peer));
    }
    uint64_t path_timeouts(const core::Connection& c) const {
        uint64_t n = 0;
        for (uint16_t p = 0; p < c.num_paths(); ++p) n += c.path_stats(p).timeouts;
        return n;
    }

    Pair pair;
    CountingTap tap_a, tap_b;
    std::vector<std::byte> buf_a = std::vector<std::byte>(64), buf_b = std::vector<std::byte>(64);
    uint32_t pd_a = 0, pd_b = 0, stream_a = 0, stream_b = 0;
    core::MemoryKeys key_a, key_b;
    uint64_t recv_a = 0, recv_b = 0, sent_a = 0, sent_b = 0;
};

// [LOSS-4] [STREAM-5] A loss-free latency run fires no path timeout and sends no probe:
// every DATA is acknowledged within a round trip, far inside the 200 µs PTO floor.
TEST(Timers, LossFreePingPongHasNoTimeouts) {
    for (uint64_t seed : seeds_from_env(4, 1900)) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        std::printf("seed %llu (MROCE_SEED replays it)\n", static_cast<unsigned long long>(seed));
        PingPong pp(seed);
        for (int i = 0; i < 200; ++i) ASSERT_TRUE(pp.round_trip()) << "round trip " << i;
        for (const auto* c : {&pp.conn(*pp.pair.a, pp.pair.host_b().address()),
                              &pp.conn(*pp.pair.b, pp.pair.host_a().address())}) {
            EXPECT_EQ(pp.path_timeouts(*c), 0u);
            EXPECT_EQ(c->stats().retransmits, 0u);
            for (uint16_t p = 0; p < c->num_paths(); ++p) EXPECT_EQ(c->path_stats(p).probes_sent, 0u);
        }
    }
}

// [LOSS-4] [STREAM-5] With nothing outstanding, no timer is left armed for what is already
// answered: a ping whose pong came back and whose ACKs have all arrived leaves no probe
// timeout, no delivery timer and no stale entry in the endpoint's timer heap behind, so
// the engine is not woken at all. (Before issue 19's fix it was woken 25 times in the
// 10 ms after 50 round trips: once for each completed message's delivery timer and each
// deadline an ACK had moved, and a latency run's driver called on_timeout once per
// round trip.)
TEST(Timers, NothingOutstandingArmsNoTimer) {
    for (uint64_t seed : seeds_from_env(4, 1910)) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        std::printf("seed %llu (MROCE_SEED replays it)\n", static_cast<unsigned long long>(seed));
        PingPong pp(seed);
        for (int i = 0; i < 50; ++i) ASSERT_TRUE(pp.round_trip());
        // Let the last delayed ACKs leave and arrive (max_ack_delay 50 µs, 2 µs links).
        pp.pair.sim.run_until([] { return false; }, pp.pair.sim.now() + 100us, 1'000'000);
        const core::Connection& ca = pp.conn(*pp.pair.a, pp.pair.host_b().address());
        ASSERT_EQ(pp.sent_a, 50u);
        for (uint16_t p = 0; p < ca.num_paths(); ++p) {
            const core::TxPath& path = ca.tx_path(p);
            ASSERT_EQ(path.in_flight_pkts, 0u) << "path " << p;
            EXPECT_EQ(path.pto_deadline, kNever) << "path " << p;
        }
        // Nothing is outstanding: neither connection has a timer armed (an idle connection's
        // peer-dead timer runs only while data is outstanding, [ERR-2]).
        const core::Connection& cb = pp.conn(*pp.pair.b, pp.pair.host_a().address());
        EXPECT_EQ(ca.next_deadline(), kNever);
        EXPECT_EQ(cb.next_deadline(), kNever);
        // So in the next 10 ms each engine wakes at most once: when its receiver-side fair
        // share retires the sender that fell silent ([CC-12], two hint intervals later).
        const uint64_t before_a = pp.tap_a.timeouts, before_b = pp.tap_b.timeouts;
        pp.pair.sim.run_until([] { return false; }, pp.pair.sim.now() + 10ms, 1'000'000);
        EXPECT_LE(pp.tap_a.timeouts - before_a, 1u);
        EXPECT_LE(pp.tap_b.timeouts - before_b, 1u);
    }
}

}  // namespace
}  // namespace mroce::test
