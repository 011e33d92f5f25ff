// tests/core/stream_reopen_test.cc — spec [STREAM-13]: a queue pair that starts over gets
// a fresh stream, and delayed packets of the old incarnation (late duplicates held back
// by the in-process network) are counted and never placed, under loss and duplication.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "tests/core/harness.h"

namespace mroce::test {
namespace {

using namespace std::chrono_literals;
using core::Status;
using core::WorkOpcode;

// Late duplicates arrive 3 ms after their original: long after the incarnation that sent
// them has completed and been replaced.
sim::NetworkConfig stale_net() {
    sim::NetworkConfig nc;
    nc.routes = 4;
    nc.link.rate_bps = 10'000'000'000;
    nc.link.delay = 2us;
    nc.link.loss_probability = 0.05;
    nc.link.duplicate_probability = 0.05;
    nc.link.late_duplicate_probability = 0.3;
    nc.link.late_duplicate_delay = 3ms;
    nc.host.line_rate_bps = 10'000'000'000;
    return nc;
}

struct End {
    core::Endpoint* ep = nullptr;
    uint32_t pd = 0;
    std::vector<std::byte> mem;
    core::MemoryKeys keys;
    std::vector<core::Completion> done;
    uint64_t addr(size_t off) { return reinterpret_cast<uint64_t>(mem.data() + off); }
};

constexpr uint32_t kMsgs = 16;
constexpr uint32_t kLen = 3000;  // one or two segments

TEST(StreamReopen, StalePacketsOfAnOldIncarnationAreNeverPlaced) {
    uint64_t retired_total = 0;
    for (uint64_t seed : seeds_from_env(12)) {
        SCOPED_TRACE("seed " + std::to_string(seed) + " (replay: MROCE_SEED=" +
                     std::to_string(seed) + ")");
        Pair p(seed, stale_net(), {}, {});
        End a, b;
        for (auto [e, ep] : {std::pair{&a, p.a.get()}, std::pair{&b, p.b.get()}}) {
            e->ep = ep;
            e->pd = ep->alloc_pd();
            e->mem.assign(4 * kMsgs * kLen, kSentinel);
            e->keys = *ep->register_memory(e->pd, e->mem.data(), e->mem.size(), kAllAccess);
        }
        p.host_a().set_event_callback([&](const core::Event& e) {
            if (e.kind == core::EventKind::kCompletion) a.done.push_back(e.completion);
        });
        p.host_b().set_event_callback([&](const core::Event& e) {
            if (e.kind == core::EventKind::kCompletion) b.done.push_back(e.completion);
        });
        uint32_t sa = 0, sb = 0;
        for (uint32_t inc = 0; inc < 3; ++inc) {
            // A new incarnation: fresh ids on both sides, exchanged "out of band".
            auto ra = p.a->reserve_stream(a.pd);
            auto rb = p.b->reserve_stream(b.pd);
            ASSERT_TRUE(ra.ok() && rb.ok());
            if (sa) {
                ASSERT_EQ(p.a->destroy_stream(sa, p.now()), Error::kOk);
            }
            if (sb) {
                ASSERT_EQ(p.b->destroy_stream(sb, p.now()), Error::kOk);
            }
            sa = *ra;
            sb = *rb;
            ASSERT_EQ(p.a->bind_stream(sa, p.host_b().address(), sb, p.now()), Error::kOk);
            ASSERT_EQ(p.b->bind_stream(sb, p.host_a().address(), sa, p.now()), Error::kOk);
            a.done.clear();
            b.done.clear();
            // Each incarnation receives into its own quarter of b's memory; the same
            // sizes and the same message sequence numbers every time.
            const size_t base = size_t{inc} * kMsgs * kLen;
            for (uint32_t m = 0; m < kMsgs; ++m) {
                const size_t off = base + size_t{m} * kLen;
                for (uint32_t i = 0; i < kLen; ++i) a.mem[off + i] = pattern_byte(inc, m, i);
                core::RecvWr r{m, b.addr(off), kLen, b.keys.lkey};
                ASSERT_EQ(p.b->post_recv(sb, r, p.now()), Error::kOk);
                core::SendWr w;
                w.wr_id = m;
                w.opcode = WorkOpcode::kSend;
                w.local_addr = a.addr(off);
                w.length = kLen;
                w.lkey = a.keys.lkey;
                ASSERT_EQ(p.a->post_send(sa, w, p.now()), Error::kOk);
            }
            p.host_a().kick();
            p.host_b().kick();
            p.sim.run_until([&] { return a.done.size() == kMsgs && b.done.size() == kMsgs; },
                            p.sim.now() + 2s, 50'000'000);
            ASSERT_EQ(a.done.size(), kMsgs);
            ASSERT_EQ(b.done.size(), kMsgs);
            for (uint32_t m = 0; m < kMsgs; ++m) {
                EXPECT_EQ(a.done[m].status, Status::kSuccess);
                EXPECT_EQ(b.done[m].status, Status::kSuccess);
                EXPECT_EQ(b.done[m].wr_id, m);
                EXPECT_EQ(b.done[m].stream, sb);
            }
        }
        // Let every late duplicate land, then check: each quarter holds exactly what its
        // incarnation sent, and the untouched quarter is still sentinel.
        p.sim.run_until([] { return false; }, p.sim.now() + 10ms, 50'000'000);
        for (uint32_t inc = 0; inc < 4; ++inc) {
            for (uint32_t m = 0; m < kMsgs; ++m) {
                const size_t off = (size_t{inc} * kMsgs + m) * kLen;
                for (uint32_t i = 0; i < kLen; ++i) {
                    const std::byte want = inc < 3 ? pattern_byte(inc, m, i) : kSentinel;
                    ASSERT_EQ(b.mem[off + i], want) << "incarnation " << inc << " msg " << m;
                }
            }
        }
        const auto& cb = *p.b->connection(p.b->connection_to(p.host_a().address()));
        EXPECT_GE(cb.stats().unknown_stream, cb.stats().retired_stream);
        retired_total += cb.stats().retired_stream;
        EXPECT_EQ(b.done.size(), kMsgs);  // no completion from a stale packet
        EXPECT_EQ(a.done.size(), kMsgs);
    }
    std::printf("stale DATA of retired streams dropped: %llu\n",
                static_cast<unsigned long long>(retired_total));
    // The impairments make late copies of the old incarnations' packets; they must have
    // been seen (else this test proves nothing).
    EXPECT_GT(retired_total, 0u);
}

}  // namespace
}  // namespace mroce::test
