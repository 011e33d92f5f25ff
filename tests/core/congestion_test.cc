// tests/core/congestion_test.cc — the AIMD controller (spec §9.1) in the real engine on the
// in-process network: routes slower than the host, with shallow queues, with and without
// ECN marking, against the fixed window ([CC-1]) on the same network.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/core/harness.h"

namespace mroce::test {
namespace {

using namespace std::chrono_literals;

struct Outcome {
    bool done = false;
    bool bytes_ok = false;
    uint64_t errors = 0;
    double gbps = 0;
    uint64_t retransmits = 0;
    uint64_t drops = 0;
    uint64_t ecn_echoed = 0;
    uint64_t max_queue = 0;
    uint32_t routes_used = 0;  // routes that carried DATA (paths hash onto routes)
};

constexpr uint64_t kRouteBps = 1'000'000'000;
constexpr uint32_t kRoutes = 8;
constexpr uint64_t kQueueBytes = 64 * 1024;

// 32 MiB of WRITEs (1 MiB messages, one stream) A -> B over 8 routes of `route_bps` each
// (1 Gbit/s unless given; 2 µs, 64 KiB drop-tail queues, CE marked from `ecn` bytes of
// queue when set, random `loss`), from a 10 Gbit/s host whose window per path (256 KiB) is
// far above a 1 Gbit/s route's queue.
Outcome transfer(core::EndpointConfig::Cc cc, std::optional<uint64_t> ecn, uint64_t seed,
                 uint64_t route_bps = kRouteBps, double loss = 0) {
    sim::NetworkConfig nc;
    nc.routes = kRoutes;
    nc.link.rate_bps = route_bps;
    nc.link.loss_probability = loss;
    nc.link.delay = 2us;
    nc.link.queue_capacity_bytes = kQueueBytes;
    nc.link.ecn_threshold_bytes = ecn;
    nc.host.line_rate_bps = 10'000'000'000;
    core::EndpointConfig cfg;
    cfg.congestion_control = cc;
    Pair p(seed, nc, cfg, cfg);

    constexpr uint32_t kMsg = 1u << 20, kMessages = 32;
    std::vector<std::byte> src(kMsg), dst(kMsg * kMessages, kSentinel);
    for (uint32_t i = 0; i < kMsg; ++i) src[i] = pattern_byte(1, 0, i);
    const Time t0 = p.now();
    const uint32_t pa = p.a->alloc_pd(), pb = p.b->alloc_pd();
    const auto ka = *p.a->register_memory(pa, src.data(), src.size(), core::access::kLocalWrite);
    const auto kb = *p.b->register_memory(pb, dst.data(), dst.size(),
                                          core::access::kLocalWrite | core::access::kRemoteWrite);
    const uint32_t sa = *p.a->create_stream(pa, p.host_b().address(), 1, t0);
    (void)*p.b->create_stream(pb, p.host_a().address(), 1, t0);
    Outcome o;
    uint32_t completions = 0;
    Time last{};
    p.host_a().set_event_callback([&](const core::Event& e) {
        if (e.kind != core::EventKind::kCompletion) return;
        ++completions;
        last = p.now();
        if (e.completion.status != core::Status::kSuccess) ++o.errors;
    });
    for (uint32_t i = 0; i < kMessages; ++i) {
        core::SendWr wr;
        wr.wr_id = i;
        wr.opcode = core::WorkOpcode::kWrite;
        wr.local_addr = reinterpret_cast<uint64_t>(src.data());
        wr.length = kMsg;
        wr.lkey = ka.lkey;
        wr.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + uint64_t{i} * kMsg;
        wr.rkey = kb.rkey;
        EXPECT_EQ(p.a->post_send(sa, wr, t0), Error::kOk);
    }
    p.host_a().kick();
    p.sim.run_until([&] { return completions == kMessages; }, p.sim.now() + 2s, 50'000'000);
    o.done = completions == kMessages;
    o.bytes_ok = true;
    for (uint32_t i = 0; i < kMessages && o.bytes_ok; ++i)
        o.bytes_ok = std::equal(src.begin(), src.end(), dst.begin() + uint64_t{i} * kMsg);
    o.gbps = static_cast<double>(uint64_t{kMsg} * kMessages) * 8 / static_cast<double>(to_ns(last - t0));
    const auto& conn = *p.a->connection(p.a->connection_to(p.host_b().address()));
    o.retransmits = conn.stats().retransmits;
    for (uint16_t i = 0; i < conn.num_paths(); ++i) o.ecn_echoed += conn.path_stats(i).ecn_echoed;
    const sim::LinkStats ls = p.net.route_stats(p.host_a(), p.host_b());
    o.drops = ls.dropped_total();
    o.max_queue = ls.max_queue_bytes;
    for (uint32_t r = 0; r < kRoutes; ++r)
        o.routes_used += p.net.link(p.host_a(), p.host_b(), r).stats().delivered_packets > 1000;
    std::printf("seed %llu %s ecn %s: %u errors, %u routes used, %.2f Gbit/s, %llu retransmits, %llu drops, %llu CE echoed, "
                "max queue %llu B\n",
                static_cast<unsigned long long>(seed), cc == core::EndpointConfig::Cc::kAimd ? "aimd" : "fixed",
                ecn ? "on" : "off", static_cast<unsigned>(o.errors), o.routes_used, o.gbps, static_cast<unsigned long long>(o.retransmits),
                static_cast<unsigned long long>(o.drops), static_cast<unsigned long long>(o.ecn_echoed),
                static_cast<unsigned long long>(o.max_queue));
    return o;
}

uint64_t seed() { return seeds_from_env(1, 5).front(); }

// Packets of the transfer: 32 MiB in 4096-byte segments.
constexpr uint64_t kPackets = 32u * 256u;

// What the routes the paths hashed onto can carry (8 paths rarely cover all 8 routes).
double capacity_gbps(const Outcome& o) { return static_cast<double>(kRouteBps * o.routes_used) / 1e9; }

// [CC-8] with ECN marking at 16 KiB the AIMD windows settle where the routes mark: almost
// nothing is dropped (the first window's burst) and the routes stay busy. The fixed window
// overflows the same queues every round trip until work requests fail ([LOSS-7]).
TEST(Congestion, AimdFollowsEcnWhereTheFixedWindowOverflows) {
    const uint64_t s = seed();
    const Outcome fixed = transfer(core::EndpointConfig::Cc::kFixed, 16 * 1024, s);
    const Outcome aimd = transfer(core::EndpointConfig::Cc::kAimd, 16 * 1024, s);
    ASSERT_TRUE(aimd.done);
    EXPECT_TRUE(aimd.bytes_ok);
    EXPECT_EQ(aimd.errors, 0u);
    EXPECT_GT(aimd.ecn_echoed, 0u);
    EXPECT_GT(aimd.gbps, 0.9 * capacity_gbps(aimd));
    EXPECT_LT(aimd.drops * 100, kPackets);  // under 1%
    EXPECT_TRUE(fixed.errors > 0 || fixed.drops > 10 * aimd.drops);
}

// [CC-9] without ECN the only signal is an overflowing queue (loss with the RTT far above
// its minimum): the window halves, the transfer completes without error at the routes'
// rate, and the drops are the slow-start overshoot.
TEST(Congestion, AimdBacksOffOnQueueLossWithoutEcn) {
    const uint64_t s = seed();
    const Outcome aimd = transfer(core::EndpointConfig::Cc::kAimd, std::nullopt, s);
    ASSERT_TRUE(aimd.done);
    EXPECT_TRUE(aimd.bytes_ok);
    EXPECT_EQ(aimd.errors, 0u);
    EXPECT_EQ(aimd.ecn_echoed, 0u);
    EXPECT_GT(aimd.gbps, 0.9 * capacity_gbps(aimd));
    EXPECT_LT(aimd.drops * 10, kPackets);  // under 10%
}

// [CC-2] [CC-9] random loss on routes without queues is not congestion: with 1% loss on
// routes faster than the host, AIMD keeps the fixed window's goodput.
TEST(Congestion, AimdIgnoresRandomLossWithoutQueues) {
    const uint64_t s = seed();
    const Outcome fixed = transfer(core::EndpointConfig::Cc::kFixed, std::nullopt, s, 100 * kRouteBps, 0.01);
    const Outcome aimd = transfer(core::EndpointConfig::Cc::kAimd, std::nullopt, s, 100 * kRouteBps, 0.01);
    ASSERT_TRUE(aimd.done);
    EXPECT_TRUE(aimd.bytes_ok);
    EXPECT_EQ(aimd.errors, 0u);
    EXPECT_GT(aimd.retransmits, 0u);
    EXPECT_GT(aimd.gbps, 0.9 * fixed.gbps);
}

}  // namespace
}  // namespace mroce::test
