// tests/rocev2/dcqcn_sim_test.cc — DCQCN end to end on the simulated network: a 100 Gbit/s
// sender into a 25 Gbit/s route that marks ECN above a queue threshold. The receiver's
// CNPs (at most one per 50 µs per QP) cut the sender's rate; once the route is fast again
// the marks stop and the rate climbs back. A control run without DCQCN shows what the
// rate limiting buys: a much smaller queue.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "sim/test_seed.h"
#include "tests/core/harness.h"
#include "tests/rocev2/roce_pair.h"

namespace mroce::test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kLine = 100'000'000'000;
constexpr uint64_t kBottleneck = 25'000'000'000;
constexpr uint32_t kQps = 2;
constexpr uint64_t kBytesPerQp = 48ull << 20;  // more than the run can send: always backlogged

struct Outcome {
    uint64_t min_rate = UINT64_MAX;  // lowest sampled rate of QP 0 while congested
    uint64_t rate_at_relief = 0;     // QP 0's rate when the route speeds up
    uint64_t final_rate = 0;
    uint64_t max_queue_bytes = 0;
    uint64_t ecn_marked = 0;
    uint64_t cnps_sent = 0;
    uint64_t late_cnps = 0;           // CNPs arriving 200 us or more after the relief
    int64_t min_cnp_gap_ns = INT64_MAX;  // per QP, between CNP arrivals at the sender
    rocev2::DcqcnStats dcqcn;
};

Outcome run(uint64_t seed, bool dcqcn, sim::SimDuration congested_for, sim::SimDuration total) {
    sim::NetworkConfig nc;
    nc.routes = 1;
    nc.link.rate_bps = kBottleneck;
    nc.link.delay = 2us;
    nc.link.queue_capacity_bytes = 64 << 20;  // no drops: this test is about marking
    nc.link.ecn_threshold_bytes = 40'000;
    nc.host.line_rate_bps = kLine;
    rocev2::RoceConfig cfg;
    cfg.mtu = 4096;
    cfg.window_packets = 4096;
    cfg.dcqcn.enabled = dcqcn;
    cfg.dcqcn.line_rate_bps = kLine;
    RocePair pair(seed, nc, cfg);
    rocev2::RoceEngine& a = *pair.a;
    rocev2::RoceEngine& b = *pair.b;
    std::vector<std::byte> src(kBytesPerQp), dst(kBytesPerQp * kQps);
    const uint32_t pd_a = a.alloc_pd(), pd_b = b.alloc_pd();
    const auto ka = *a.register_memory(pd_a, src.data(), src.size(), core::access::kLocalWrite);
    const auto kb = *b.register_memory(pd_b, dst.data(), dst.size(),
                                       core::access::kLocalWrite | core::access::kRemoteWrite);
    std::vector<uint32_t> qa, qb;
    for (uint32_t i = 0; i < kQps; ++i) {
        qa.push_back(*a.reserve_stream(pd_a));
        qb.push_back(*b.reserve_stream(pd_b));
    }
    for (uint32_t i = 0; i < kQps; ++i) {
        EXPECT_EQ(a.bind_stream(qa[i], pair.host_b().address(), qb[i], pair.now()), Error::kOk);
        EXPECT_EQ(b.bind_stream(qb[i], pair.host_a().address(), qa[i], pair.now()), Error::kOk);
        for (uint32_t m = 0; m < kBytesPerQp / (1 << 20); ++m) {
            core::SendWr wr;
            wr.wr_id = m;
            wr.opcode = core::WorkOpcode::kWrite;
            wr.local_addr = reinterpret_cast<uint64_t>(src.data()) + (uint64_t{m} << 20);
            wr.length = 1 << 20;
            wr.lkey = ka.lkey;
            wr.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + i * kBytesPerQp + (uint64_t{m} << 20);
            wr.rkey = kb.rkey;
            EXPECT_EQ(a.post_send(qa[i], wr, pair.now()), Error::kOk);
        }
    }
    pair.host_a().kick();

    Outcome out;
    const sim::SimTime relief = pair.sim.now() + congested_for;
    std::map<uint32_t, sim::SimTime> last_cnp;
    std::vector<std::byte> scratch;  // a datagram re-made (sim::PacketBytes::view)
    pair.net.set_tap([&](const sim::Packet& p, const sim::Host& to) {
        if (to.index() != 0 || p.bytes.empty() ||
            p.bytes[0] != static_cast<std::byte>(rocev2::Opcode::kCnp))
            return;
        const Result<rocev2::Decoded> d = rocev2::decode(p.bytes.view(scratch));
        if (!d) return;
        const uint32_t qp = d->h.bth.dest_qp;
        if (auto it = last_cnp.find(qp); it != last_cnp.end())
            out.min_cnp_gap_ns = std::min<int64_t>(out.min_cnp_gap_ns, (pair.sim.now() - it->second) / 1ns);
        last_cnp[qp] = pair.sim.now();
        if (pair.sim.now() >= relief + 200us) ++out.late_cnps;
    });
    // Sample QP 0's DCQCN rate every 10 us.
    std::function<void()> sample = [&] {
        const uint64_t r = a.qp(qa[0])->dcqcn.rate_bps();
        if (pair.sim.now() < relief) out.min_rate = std::min(out.min_rate, r);
        pair.sim.schedule_in(10us, sample);
    };
    pair.sim.schedule_in(10us, sample);
    pair.sim.schedule_at(relief, [&] {
        out.rate_at_relief = a.qp(qa[0])->dcqcn.rate_bps();
        pair.net.link(pair.host_a(), pair.host_b(), 0).config().rate_bps = kLine;
    });
    pair.sim.run_for(total, 50'000'000);
    out.final_rate = a.qp(qa[0])->dcqcn.rate_bps();
    const sim::LinkStats& ls = pair.net.link(pair.host_a(), pair.host_b(), 0).stats();
    out.max_queue_bytes = ls.max_queue_bytes;
    out.ecn_marked = ls.ecn_marked;
    out.cnps_sent = b.totals().cnps_sent;
    out.dcqcn = a.qp(qa[0])->dcqcn.stats();
    return out;
}

TEST(RoceDcqcn, RateDropsUnderEcnAndRecoversAfterwards) {
    const uint64_t seed = sim::testing::test_seed(7);
    SCOPED_TRACE(sim::testing::seed_note(seed));
    const Outcome o = run(seed, true, 3ms, 6ms);
    std::printf("[  DCQCN   ] min rate %.2f Gbit/s, at relief %.2f, final %.2f; max queue %llu B, "
                "%llu marked, %llu CNPs, min CNP gap %.1f us, late CNPs %llu; stages FR %llu AI %llu "
                "HAI %llu\n",
                o.min_rate / 1e9, o.rate_at_relief / 1e9, o.final_rate / 1e9,
                (unsigned long long)o.max_queue_bytes, (unsigned long long)o.ecn_marked,
                (unsigned long long)o.cnps_sent, o.min_cnp_gap_ns / 1e3,
                (unsigned long long)o.late_cnps, (unsigned long long)o.dcqcn.fast_recovery,
                (unsigned long long)o.dcqcn.additive, (unsigned long long)o.dcqcn.hyper);
    EXPECT_GT(o.ecn_marked, 0u);
    // The rate drops: each QP's fair share of the bottleneck is 12.5 Gbit/s.
    EXPECT_LT(o.min_rate, kLine / 4);
    // CNP limit: one per QP per 50 us at most (arrivals can be no closer: the reverse path
    // carries only small ACKs and CNPs, and it keeps its order).
    EXPECT_GE(o.min_cnp_gap_ns, 50'000 - 100);
    // It recovers once the marks stop: no CNPs long after the relief, rate well above
    // where it was, through the increase stages.
    EXPECT_EQ(o.late_cnps, 0u);
    EXPECT_GT(o.final_rate, 2 * o.rate_at_relief);
    EXPECT_GT(o.dcqcn.fast_recovery, 0u);
    EXPECT_GT(o.dcqcn.additive + o.dcqcn.hyper, 0u);
}

TEST(RoceDcqcn, WithoutDcqcnTheQueueGrowsMuchLarger) {
    const uint64_t seed = sim::testing::test_seed(7);
    SCOPED_TRACE(sim::testing::seed_note(seed));
    const Outcome with = run(seed, true, 2ms, 2ms);
    const Outcome without = run(seed, false, 2ms, 2ms);
    std::printf("[  DCQCN   ] max queue with %llu B, without %llu B\n",
                (unsigned long long)with.max_queue_bytes, (unsigned long long)without.max_queue_bytes);
    EXPECT_EQ(without.cnps_sent, 0u);
    EXPECT_EQ(without.min_rate, kLine);
    EXPECT_LT(with.max_queue_bytes * 4, without.max_queue_bytes);
}

}  // namespace
}  // namespace mroce::test
