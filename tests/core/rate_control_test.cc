// tests/core/rate_control_test.cc — the connection-wide rate rules of spec §9 in the real
// engine on the in-process network: the ECN echo under reordered ACKs ([CC-4]), the
// receiver's hint reaching the sender ([CC-11], [CC-16]) and the pacer holding the sender
// to it ([CC-17]).
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/core/harness.h"
#include "wire/ack.h"

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
    for (uint32_t i = 0; i < messages; ++i) {
        core::SendWr wr;
        wr.wr_id = i;
        wr.opcode = core::WorkOpcode::kWrite;
        wr.local_addr = reinterpret_cast<uint64_t>(src.data());
        wr.length = len;
        wr.lkey = ka.lkey;
        wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
        wr.rkey = kb.rkey;
        EXPECT_EQ(p.a->post_send(sa, wr, t0), Error::kOk);
    }
    p.host_a().kick();
    p.sim.run_until([&] { return ok == messages; }, p.sim.now() + 1s, 20'000'000);
    if (ok != messages) return 0;
    EXPECT_EQ(src, dst);
    return static_cast<double>(uint64_t{messages} * len) * 8 / static_cast<double>(to_ns(last - t0));
}

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
    std::vector<std::byte> buf(256);
    auto inject = [&](uint32_t ce_count) {
        wire::AckPacket a;
        a.common.type = wire::PacketType::kAck;
        a.common.dst_conn_id = conn_a;
        a.common.dst_token = ca.token();
        a.path_id = path;
        a.path_gen = ca.tx_path(path).gen;
        a.cum_psn = ca.tx_path(path).base - 1;  // acknowledges nothing new
        a.ecn_ce_count = ce_count;
        a.ts_echo = static_cast<uint32_t>(to_ns(p.now()));
        const auto n = wire::encode_ack(a, buf);
        ASSERT_TRUE(n.ok());
        PacketMeta m;
        m.src = p.host_b().address();
        m.dst = p.host_a().address();
        p.a->on_datagram(std::span(buf.data(), *n), m, p.now());
    };
    for (uint32_t c : {10u, 12u, 10u, 12u, 11u, 13u}) inject(c);
    // 0 -> 10 -> 12 (the late 10, 12 and 11 are not forward steps) -> 13.
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

}  // namespace
}  // namespace mroce::test
