// tests/obs/observer_sim_test.cc — obs::Observer as the trace sink of a real engine on the
// simulated network: a WRITE stream A->B whose path 0's route is black-holed mid-transfer.
// The observer sees the connection come up, the paths on that route fail, get re-rolled to
// new source ports and recover, in that order per path, with engine timestamps; every path
// that carried data has an RTT histogram whose percentiles lie in [min, max] and bracket
// the engine's own smoothed RTT; the snapshot's counters are the engine's. MROCE_SEED
// replays a seed.
#include <gtest/gtest.h>

#include <map>

#include "obs/export.h"
#include "obs/observer.h"
#include "obs/snapshot.h"
#include "sim/test_seed.h"
#include "tests/core/harness.h"

namespace mroce::test {
namespace {

using namespace std::chrono_literals;
using core::TraceKind;

TEST(ObserverSim, PathFailureRerollAndRecoveryAreLoggedAndRttIsMeasured) {
    const uint64_t seed = sim::testing::test_seed(5);
    SCOPED_TRACE(sim::testing::seed_note(seed));
    sim::NetworkConfig nc;
    nc.routes = 8;
    nc.link.rate_bps = 10'000'000'000;
    nc.link.delay = 2us;
    nc.host.line_rate_bps = 10'000'000'000;
    core::EndpointConfig cfg;
    cfg.max_payload = 1024;
    Pair p(seed, nc, cfg, cfg);
    obs::Observer oa;
    p.a->set_trace_sink(&oa);

    constexpr uint32_t kLen = 256 * 1024, kMessages = 60;
    std::vector<std::byte> src(kLen, std::byte{7}), dst(kLen);
    const uint32_t pa = p.a->alloc_pd(), pb = p.b->alloc_pd();
    const auto ka = *p.a->register_memory(pa, src.data(), kLen, core::access::kLocalWrite);
    const auto kb = *p.b->register_memory(pb, dst.data(), kLen,
                                          core::access::kLocalWrite | core::access::kRemoteWrite);
    const uint32_t sa = *p.a->create_stream(pa, p.host_b().address(), 1, p.now());
    (void)*p.b->create_stream(pb, p.host_a().address(), 1, p.now());
    uint32_t done = 0;
    p.host_a().set_event_callback([&](const core::Event& e) {
        if (e.kind == core::EventKind::kCompletion && e.completion.status == core::Status::kSuccess) ++done;
    });
    for (uint32_t i = 0; i < kMessages; ++i) {
        core::SendWr wr;
        wr.wr_id = i;
        wr.opcode = core::WorkOpcode::kWrite;
        wr.local_addr = reinterpret_cast<uint64_t>(src.data());
        wr.length = kLen;
        wr.lkey = ka.lkey;
        wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
        wr.rkey = kb.rkey;
        ASSERT_EQ(p.a->post_send(sa, wr, p.now()), Error::kOk);
    }
    p.host_a().kick();
    // Once data flows, path 0's route goes dark for good: path 0 fails and is re-rolled
    // onto another route (and any other path on that route with it).
    p.sim.run_until([&] { return done >= 2; }, p.sim.now() + 1s, 50'000'000);
    {
        const core::Connection& c0 = *p.a->connection(p.a->connection_to(p.host_b().address()));
        const uint32_t route = p.net.route_of(p.host_a(), p.host_b(), c0.tx_path(0).src_port,
                                              p.host_b().address().port);
        p.net.link(p.host_a(), p.host_b(), route).config().blackhole = sim::TimeWindow{p.sim.now()};
    }
    p.sim.run_until([&] { return done == kMessages; }, p.sim.now() + 2s, 50'000'000);
    ASSERT_EQ(done, kMessages);

    const uint32_t conn = p.a->connection_to(p.host_b().address());
    const core::Connection& c = *p.a->connection(conn);
    ASSERT_GE(c.stats().path_failures, 1u) << "the black-holed route failed no path";

    // Events: up first; per path failed -> rerolled -> ... -> recovered; times not decreasing.
    const auto events = oa.events_since(0);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.front().event.kind, TraceKind::kConnectionUp);
    std::map<uint16_t, std::vector<TraceKind>> by_path;
    Time last{};
    uint64_t seq = 0;
    for (const auto& le : events) {
        EXPECT_EQ(le.event.connection, conn);
        EXPECT_GE(le.event.at, last);
        EXPECT_GT(le.seq, seq);
        last = le.event.at;
        seq = le.seq;
        const TraceKind k = le.event.kind;
        if (k == TraceKind::kPathFailed || k == TraceKind::kPathRerolled || k == TraceKind::kPathRecovered)
            by_path[le.event.path].push_back(k);
        if (k == TraceKind::kPathRerolled) {
            EXPECT_NE(le.event.before, le.event.after) << "same source port";
        }
    }
    uint64_t failed = 0, recovered = 0, rerolled = 0;
    for (const auto& [path, kinds] : by_path) {
        ASSERT_EQ(kinds.front(), TraceKind::kPathFailed) << "path " << path;
        EXPECT_EQ(kinds[1], TraceKind::kPathRerolled) << "path " << path;
        for (TraceKind k : kinds) {
            failed += k == TraceKind::kPathFailed;
            recovered += k == TraceKind::kPathRecovered;
            rerolled += k == TraceKind::kPathRerolled;
        }
        EXPECT_EQ(c.tx_path(path).state, core::PathState::kActive) << "path " << path << " never recovered";
    }
    EXPECT_EQ(failed, c.stats().path_failures);
    EXPECT_EQ(rerolled, c.stats().path_rerolls);
    uint64_t recoveries = 0;
    for (uint16_t i = 0; i < c.num_paths(); ++i) recoveries += c.path_stats(i).recoveries;
    EXPECT_EQ(recovered, recoveries);

    // RTT histograms and the snapshot.
    const obs::Snapshot s = obs::Snapshot::take(*p.a, &oa, p.now());
    ASSERT_EQ(s.connections.size(), 1u);
    EXPECT_EQ(s.connections[0].stats.retransmits, c.stats().retransmits);
    uint64_t samples = 0;
    for (const obs::PathSnapshot& ps : s.connections[0].paths) {
        if (ps.stats.acks_received == 0) continue;
        const obs::RttSummary& r = ps.rtt;
        ASSERT_GT(r.count, 0u) << "path " << ps.id;
        EXPECT_LE(r.min_ns, r.p50_ns);
        EXPECT_LE(r.p50_ns, r.p99_ns);
        EXPECT_LE(r.p99_ns, r.p999_ns);
        EXPECT_LE(r.p999_ns, r.max_ns);
        EXPECT_GE(static_cast<uint64_t>(ps.srtt_ns), r.min_ns) << "path " << ps.id;
        EXPECT_LE(static_cast<uint64_t>(ps.srtt_ns), r.max_ns) << "path " << ps.id;
        EXPECT_GE(r.min_ns, 4'000u) << "below the 2 x 2 us propagation delay";
        samples += r.count;
    }
    EXPECT_EQ(samples, s.rtt.count());
    // The JSON event log carries the same events.
    const auto j = obs::to_json(s);
    EXPECT_EQ(j["events"].size(), events.size());
    std::printf("seed %llu: %zu events, %llu path failures, %llu recoveries, %llu RTT samples, p99 %llu ns\n",
                static_cast<unsigned long long>(seed), events.size(), static_cast<unsigned long long>(failed),
                static_cast<unsigned long long>(recovered), static_cast<unsigned long long>(samples),
                static_cast<unsigned long long>(s.rtt.quantile(0.99)));
}

}  // namespace
}  // namespace mroce::test
