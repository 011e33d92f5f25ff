// cc/fair_share_test.cc — the receiver's fair share ([CC-11]..[CC-15]) driven by arrival
// events: equal and weighted shares, demand-limited senders, the queue that lowers the
// allocation, idle senders that leave, and the push of raised shares.
#include "cc/fair_share.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace mroce::cc {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kC = 100'000'000'000;  // 100 Gbit/s
constexpr uint32_t kMss = 4096;

FairShareConfig config() {
    FairShareConfig c;
    c.capacity_bps = kC;
    c.interval = 10us;
    c.mss = kMss;
    c.header_bytes = 0;  // shares in the capacity's own units (see PayloadCapacity)
    return c;
}

// Feeds `rates[i]` bit/s from sender i (class classes[i]) for `dur`, in whole packets,
// each with one-way delay base + queue, and runs update() as the endpoint would.
struct Feed {
    explicit Feed(FairShareConfig c = config()) : fs(c) {}
    void run(const std::vector<uint64_t>& rates, Duration dur, uint32_t queue_ns = 0,
             const std::vector<uint8_t>& classes = {}) {
        std::vector<int64_t> next(rates.size(), to_ns(now));
        const Time end = now + dur;
        while (now < end) {
            for (size_t i = 0; i < rates.size(); ++i) {
                if (rates[i] == 0) continue;
                while (next[i] <= to_ns(now)) {
                    const uint8_t tc = classes.empty() ? 0 : classes[i];
                    fs.on_arrival(static_cast<uint32_t>(i), tc, kMss, 5000 + queue_ns, now);
                    fs.hint_mbps(static_cast<uint32_t>(i));  // an ACK per packet
                    next[i] += static_cast<int64_t>(uint64_t{kMss} * 8'000'000'000ull / rates[i]);
                }
            }
            for (uint32_t id : fs.update(now)) raised.push_back(id);
            now += 100ns;
        }
    }
    FairShare fs;
    Time now{1ms};
    std::vector<uint32_t> raised;
};

// [CC-13] equal long senders split the capacity equally, within 1%.
TEST(FairShare, EqualSendersGetEqualShares) {
    Feed f;
    f.run({kC / 2, kC / 2, kC / 2, kC / 2}, 200us);
    EXPECT_EQ(f.fs.active_senders(), 4u);
    for (uint32_t i = 0; i < 4; ++i) {
        EXPECT_NEAR(static_cast<double>(f.fs.share_bps(i)), kC / 4.0, kC / 400.0) << i;
        EXPECT_EQ(f.fs.hint_mbps(i), f.fs.share_bps(i) / 1'000'000);
    }
}

// [CC-13] class weights 4:1 split the capacity 4:1.
TEST(FairShare, ClassWeightsSplitByWeight) {
    FairShareConfig c = config();
    c.class_weights = {1, 4, 1, 1, 1, 1, 1, 1};
    Feed f(c);
    f.run({kC, kC}, 200us, 0, {1, 0});
    EXPECT_NEAR(static_cast<double>(f.fs.share_bps(0)), kC * 0.8, kC * 0.008);
    EXPECT_NEAR(static_cast<double>(f.fs.share_bps(1)), kC * 0.2, kC * 0.002);
}

// [CC-13] max-min: a sender that uses little is given twice its use (its peak over
// intervals, which whole packets make up to one packet per interval more); the others share
// the rest.
TEST(FairShare, DemandLimitedSenderLeavesTheRestToOthers) {
    Feed f;
    f.run({kC / 20, kC, kC}, 300us);  // 5 Gbit/s, and two that would take everything
    const double small = static_cast<double>(f.fs.share_bps(0));
    EXPECT_GE(small, 2 * 0.95 * kC / 20.0);  // its rate, measured in whole packets
    EXPECT_LE(small, 2 * (kC / 20.0 + kMss * 8 / 10e-6));
    const double rest = (static_cast<double>(kC) - small) / 2;
    EXPECT_NEAR(static_cast<double>(f.fs.share_bps(1)), rest, rest / 100);
    EXPECT_NEAR(static_cast<double>(f.fs.share_bps(2)), rest, rest / 100);
}

// [CC-14] a standing queue lowers the allocation: by (queue − interval/4) / (2 intervals),
// floored at C/256; a queue within the target does not; an idle downlink gives it back.
TEST(FairShare, StandingQueueLowersTheAllocation) {
    Feed f;
    f.run({kC / 2, kC / 2}, 50us);
    EXPECT_EQ(f.fs.allocation_bps(), kC);
    f.run({kC / 2, kC / 2}, 30us, /*queue_ns=*/2500);  // the 2.5 µs target: no cut
    EXPECT_EQ(f.fs.queue_delay(), 2500ns);
    EXPECT_EQ(f.fs.allocation_bps(), kC);
    f.run({kC / 2, kC / 2}, 30us, /*queue_ns=*/7500);  // 5 µs above: a quarter of 20 µs
    EXPECT_EQ(f.fs.queue_delay(), 7500ns);
    EXPECT_EQ(f.fs.allocation_bps(), kC * 3 / 4);
    f.run({kC / 2, kC / 2}, 30us, /*queue_ns=*/200'000);  // far more than can drain
    EXPECT_EQ(f.fs.allocation_bps(), kC / FairShare::kFloorDivisor);
    EXPECT_GE(f.fs.hint_mbps(0), 1u);
    // The same delay with the downlink at half its capacity is a queue elsewhere.
    f.run({kC / 4, kC / 4}, 30us, /*queue_ns=*/200'000);
    EXPECT_EQ(f.fs.queue_delay(), 0ns);
    EXPECT_EQ(f.fs.allocation_bps(), kC);
}

// [CC-14] drain distance: at least the time half of the active senders' packets take at C.
// With a full packet 1 µs at C, 8 senders drain over the usual 2 intervals (20 µs), 80 over
// 40 µs: the same 12.5 µs of queue (10 µs above the target) cuts the allocation to half
// for 8 senders and only by a quarter for 80, whose chance bunching alone is about 9
// packets' time.
TEST(FairShare, ManySendersDrainAQueueOverTheirPacketTimes) {
    FairShareConfig c = config();
    c.capacity_bps = 32'768'000'000;  // a 4096-byte payload is 1 µs at C
    const auto allocation_with = [&](size_t senders) {
        Feed f(c);
        const std::vector<uint64_t> busy(senders, c.capacity_bps / 4);
        f.run(busy, 50us);
        EXPECT_EQ(f.fs.allocation_bps(), c.capacity_bps) << senders;
        f.run(busy, 40us, /*queue_ns=*/12'500);
        EXPECT_EQ(f.fs.queue_delay(), 12500ns) << senders;
        return f.fs.allocation_bps();
    };
    EXPECT_EQ(allocation_with(8), c.capacity_bps / 2);
    EXPECT_EQ(allocation_with(40), c.capacity_bps / 2);  // 40 × 1 µs / 2 = 20 µs: the same
    EXPECT_EQ(allocation_with(80), c.capacity_bps / 4 * 3);
}

// [CC-14] growth: a queue delay that grew by at least three quarters of an interval since
// the last recomputation is answered with the growth added once more; a slower growth, or
// a queue that holds, is answered as measured. (Each run's samples are measured by the
// recomputation at the start of the next run.)
TEST(FairShare, FastGrowingQueueIsAnsweredAsItWillBe) {
    Feed f;  // interval 10 us: target 2.5 us, drain distance 20 us, growth threshold 7.5 us
    const std::vector<uint64_t> busy{kC / 2, kC / 2};
    f.run(busy, 50us);
    f.run(busy, 10us, 8000);
    f.run(busy, 10us, 8000);  // measures 8 us, 8 us above the last: answered as 16 us
    EXPECT_EQ(f.fs.queue_delay(), 8us);
    EXPECT_EQ(f.fs.allocation_bps(), kC / 40 * 13);  // 1 - (16 - 2.5) / 20
    f.run(busy, 10us, 8000);  // 8 us again: no growth
    EXPECT_EQ(f.fs.allocation_bps(), kC / 40 * 29);  // 1 - (8 - 2.5) / 20
    f.run(busy, 10us, 15000);
    f.run(busy, 10us, 15000);  // grew by 7 us, below 7.5: as measured
    EXPECT_EQ(f.fs.queue_delay(), 15us);
    EXPECT_EQ(f.fs.allocation_bps(), kC / 8 * 3);  // 1 - (15 - 2.5) / 20
}

// [CC-19] the allocation falls at once but rises at most to max(4 × its last value, C/4)
// per recomputation: from the floor, C/4 and then C (not C at once); from C/8, C/2 and
// then C. (Each 10 µs run holds one recomputation, at its start; it sees the run's first
// packets, so a queue that is gone shows at once: the minimum over the interval.)
TEST(FairShare, AllocationRisesAtMostFourfoldPerInterval) {
    Feed f;  // interval 10 us: target 2.5 us, drain distance 20 us
    const std::vector<uint64_t> busy{kC / 2, kC / 2};
    f.run(busy, 50us);
    ASSERT_EQ(f.fs.allocation_bps(), kC);
    const auto rise_after = [&](uint32_t queue_ns) {
        f.run(busy, 30us, queue_ns);  // held long enough to be answered as it is
        std::vector<uint64_t> rise{f.fs.allocation_bps()};
        for (int i = 0; i < 3; ++i) {
            f.run(busy, 10us, 0);
            rise.push_back(f.fs.allocation_bps());
        }
        return rise;
    };
    // Far more queue than can drain: the floor; then the queue is gone.
    EXPECT_EQ(rise_after(200'000),
              (std::vector<uint64_t>{kC / FairShare::kFloorDivisor, kC / 4, kC, kC}));
    // 20 us of queue, 17.5 above the target: 1/8 of C; then gone.
    EXPECT_EQ(rise_after(20'000), (std::vector<uint64_t>{kC / 8, kC / 2, kC, kC}));
}

// [CC-14] the delay of one sender's own route is not the shared queue: the minimum over
// senders is.
TEST(FairShare, OneSlowRouteIsNotTheSharedQueue) {
    FairShare fs(config());
    Time now{1ms};
    for (int i = 0; i < 400; ++i) {
        fs.on_arrival(0, 0, kMss, 1000, now);
        fs.on_arrival(1, 0, kMss, i < 100 ? 1000u : 9000u, now);  // its route queues
        fs.update(now);
        now += 500ns;
    }
    EXPECT_EQ(fs.queue_delay(), 0ns);
    EXPECT_EQ(fs.allocation_bps(), kC);
}

// [CC-14] the downlink's busy run bounds its queue: the first packet after the downlink
// idled found no queue in front of it, whatever its delay. A lone sender's route through a
// core queue delays its packets by 20 µs while it sends at C/8; when that queue drains it
// arrives at C with the same delay. Read as this downlink's queue, and grown by 20 µs in
// an interval, that delay held the sender at the floor; its run is a few µs old, so the
// allocation stays near C. The same delay after a run as long as itself is answered.
TEST(FairShare, ADelayFromBeforeTheDownlinkWasBusyIsNotItsQueue) {
    Feed f;  // interval 10 us: target 2.5 us, drain distance 20 us
    f.run({kC / 8}, 20us);  // its base: no queue anywhere
    f.run({kC / 8}, 40us, /*queue_ns=*/20'000);
    EXPECT_EQ(f.fs.allocation_bps(), kC);  // not busy: a queue elsewhere
    f.run({kC}, 10us, 20'000);
    f.run({kC}, 1us, 20'000);  // the recomputation that measures the busy interval
    EXPECT_LT(f.fs.queue_delay(), 5us);
    EXPECT_GE(f.fs.allocation_bps(), kC / 10 * 9);
    f.run({kC}, 30us, 20'000);  // the run is as long as the delay now
    EXPECT_EQ(f.fs.queue_delay(), 20us);
    EXPECT_LT(f.fs.allocation_bps(), kC / 4);
}

// [CC-14] a sender whose first packet meets a queue does not take that queue for its
// base: sender 0 starts at an empty queue, the queue grows to 8 µs, then sender 1 starts
// (its own route delay differs by 3 µs) and both see the queue; the shared queue is read
// as 8 µs, so the allocation falls by 6/16 (the 6 µs above the 2 µs target, of a 16 µs
// drain).
TEST(FairShare, ALateSenderDoesNotHideTheQueue) {
    FairShareConfig c = config();
    c.interval = 8us;
    FairShare fs(c);
    Time now{1ms};
    for (uint32_t i = 0; i < 200; ++i) {
        const uint32_t queue = std::min(i, 80u) * 100;  // 0 -> 8 µs over 80 arrivals
        fs.on_arrival(0, 0, kMss, 1000 + queue, now);
        if (i >= 80) fs.on_arrival(1, 0, kMss, 4000 + queue, now);
        fs.update(now);
        now += 300ns;  // 2 × 4096 B in 300 ns: the downlink is busy
    }
    EXPECT_EQ(fs.queue_delay(), 8us);
    EXPECT_EQ(fs.allocation_bps(), kC * 10 / 16);
}

// [CC-14] first-RTT backlog. 16 senders each send their 32 KiB first-RTT budget back to
// back (8 packets at line rate) at the same moment; the downlink takes one packet per
// packet time, so the bursts arrive interleaved. The first packet of each sender met no
// queue, so at the first recomputation the delay shows none, but 16 x 32 KiB less the
// ~30 packets that arrived is still queued: about 31 us at C, past what the allocation
// can drain, so it drops to the floor. The same arrivals from senders whose own NICs
// spread their packets (an all-to-all's: each sends at C/16) are no backlog.
uint64_t allocation_after_first_interval(bool burst) {
    FairShare fs(config());  // interval 10 us, first_rtt_bytes 32 KiB
    const int64_t t0 = to_ns(1ms);
    const int64_t pkt = 330;  // ns per 4096 B at 100 Gbit/s, rounded up
    const uint32_t prop = 5000;
    for (int64_t slot = 0; slot < 16 * 8; ++slot) {
        const uint32_t i = static_cast<uint32_t>(slot % 16), k = static_cast<uint32_t>(slot / 16);
        const Time now{std::chrono::nanoseconds(t0 + prop + slot * pkt)};
        fs.update(now);  // before the datagram, as the endpoint does
        if (now >= Time{std::chrono::nanoseconds(t0 + prop)} + 10us) break;
        // Sent at t0 + k packets (burst) or t0 + k x 16 packets (NIC-limited); the
        // receiver's clock is the sender's here, so owd = now - sent.
        const int64_t sent = t0 + static_cast<int64_t>(k) * pkt * (burst ? 1 : 16);
        fs.on_arrival(i, 0, kMss, static_cast<uint32_t>(to_ns(now) - sent), now);
    }
    return fs.allocation_bps();
}

TEST(FairShare, FirstRttBurstsStillOnTheWayLowerTheAllocation) {
    EXPECT_EQ(allocation_after_first_interval(/*burst=*/true), kC / FairShare::kFloorDivisor);
    EXPECT_EQ(allocation_after_first_interval(/*burst=*/false), kC);
}

// [CC-12] shares are payload rates: the capacity less each packet's header.
TEST(FairShare, PayloadCapacity) {
    FairShareConfig c = config();
    c.header_bytes = 72;
    Feed f(c);
    f.run({kC}, 50us);
    EXPECT_EQ(f.fs.share_bps(0), kC * 4096 / (4096 + 72));
}

// [CC-13] a bursty sender alone gets everything: what no sender wants is shared out.
TEST(FairShare, SpareCapacityGoesToEveryone) {
    Feed f;
    f.run({kC / 100}, 200us);
    EXPECT_EQ(f.fs.share_bps(0), kC);
    f.run({kC / 100, kC / 100}, 200us);
    EXPECT_NEAR(static_cast<double>(f.fs.share_bps(0) + f.fs.share_bps(1)), kC, 2.0);
}

// [CC-12] a sender that falls silent leaves after two intervals, and its share goes to the
// ones left; [CC-14] those whose share rose a quarter above their last hint are pushed.
TEST(FairShare, SilentSenderLeavesAndTheOthersArePushed) {
    Feed f;
    f.run({kC, kC, kC, kC}, 100us);
    EXPECT_EQ(f.fs.active_senders(), 4u);
    f.raised.clear();
    f.run({kC, 0, 0, 0}, 100us);
    EXPECT_EQ(f.fs.active_senders(), 1u);
    EXPECT_EQ(f.fs.hint_mbps(1), 0u);
    EXPECT_NEAR(static_cast<double>(f.fs.share_bps(0)), kC, kC / 100.0);
    ASSERT_FALSE(f.raised.empty());
    EXPECT_EQ(f.raised.front(), 0u);
}

// [CC-12] Drained: a sender whose newest DATA carried DRAINED leaves at the next
// recomputation, long before its silence would let it go (four packets' time at a 1/4
// share is 1.3 us here, but at a 1/64 share of a slow receiver it is tens of microseconds:
// the timeout is stretched below to make the difference plain).
TEST(FairShare, DrainedSenderLeavesAtTheNextRecomputation) {
    for (const bool drained : {false, true}) {
        FairShareConfig c = config();
        c.capacity_bps = kC / 64;  // 1.56 Gbit/s: a 1/4 share's packet takes 84 us
        Feed f(c);
        f.run({kC, kC, kC, kC}, 400us);
        ASSERT_EQ(f.fs.active_senders(), 4u);
        // Sender 1's last DATA; the others go on.
        f.fs.on_arrival(1, 0, kMss, 5000, f.now, drained);
        f.raised.clear();
        f.run({c.capacity_bps, 0, c.capacity_bps, c.capacity_bps}, 25us);
        if (!drained) {
            EXPECT_EQ(f.fs.active_senders(), 4u) << "silence alone takes four packets' time";
            continue;
        }
        EXPECT_EQ(f.fs.active_senders(), 3u);
        EXPECT_EQ(f.fs.hint_mbps(1), 0u);
        EXPECT_NEAR(static_cast<double>(f.fs.share_bps(0)), c.capacity_bps / 3.0, c.capacity_bps / 300.0);
        EXPECT_FALSE(f.raised.empty()) << "the others' shares rose a third: pushed";
    }
}

// [CC-12] The DATA that drained a sender may overtake older ones on another path: those
// leave it drained and do not make it active again; a DATA sent after the drained one does.
TEST(FairShare, OnlyANewerDataUndoesDrained) {
    Feed f;
    f.run({kC, kC}, 100us);
    const uint32_t base = 5000;  // the Feed's delay: no queue
    f.fs.on_arrival(1, 0, kMss, base, f.now, true);  // sender 1's DRAINED DATA
    f.run({kC, 0}, 30us);
    ASSERT_EQ(f.fs.active_senders(), 1u);
    // 30 us later, a DATA it sent 2 us before the drained one, held on a slow path.
    f.fs.on_arrival(1, 0, kMss, base + 30000 + 2000, f.now, false);
    EXPECT_EQ(f.fs.active_senders(), 1u) << "an older DATA must not make it active again";
    // A late duplicate of the drained DATA itself changes nothing either.
    f.fs.on_arrival(1, 0, kMss, base + 30000, f.now, true);
    EXPECT_EQ(f.fs.active_senders(), 1u);
    f.run({kC, 0}, 30us);
    EXPECT_EQ(f.fs.active_senders(), 1u);
    // New work: a DATA sent now, without DRAINED.
    f.fs.on_arrival(1, 0, kMss, base, f.now, false);
    EXPECT_EQ(f.fs.active_senders(), 2u);
    EXPECT_GT(f.fs.hint_mbps(1), 0u);
}

// [CC-12] A sender that posts one message at a time drains with each: every DATA it sends
// carries DRAINED. Each new one makes it active again, so it holds a share while it sends
// and leaves only between its messages.
TEST(FairShare, ASenderThatDrainsWithEveryMessageStillHoldsAShare) {
    Feed f;
    f.run({kC, kC}, 100us);
    f.fs.on_arrival(1, 0, kMss, 5000, f.now, true);
    f.run({kC, 0}, 30us);
    ASSERT_EQ(f.fs.active_senders(), 1u);
    for (int i = 0; i < 5; ++i) {
        f.fs.on_arrival(1, 0, kMss, 5000, f.now, true);  // sent now: newer than the last
        EXPECT_EQ(f.fs.active_senders(), 2u) << i;
        EXPECT_GT(f.fs.hint_mbps(1), 0u) << i;
        f.run({kC, 0}, 2us);
    }
}

// A sender's clock may sit anywhere modulo 2^32: delays that wrap are still compared right.
TEST(FairShare, OneWayDelayWrapsModulo32Bits) {
    FairShare fs(config());
    Time now{1ms};
    for (int i = 0; i < 300; ++i) {
        const uint32_t owd = 0xffffff00u + (i >= 150 ? 10000u : 0u);  // wraps past 0
        fs.on_arrival(0, 0, kMss, owd, now);
        fs.update(now);
        now += 200ns;
    }
    EXPECT_EQ(fs.queue_delay(), 10us);
}

// forget: an ended connection stops counting at once; nothing is allocated to it.
TEST(FairShare, ForgottenSenderIsGone) {
    Feed f;
    f.run({kC, kC}, 50us);
    f.fs.forget(1);
    EXPECT_EQ(f.fs.active_senders(), 1u);
    EXPECT_EQ(f.fs.hint_mbps(1), 0u);
    f.run({kC}, 50us);
    EXPECT_NEAR(static_cast<double>(f.fs.share_bps(0)), kC, kC / 100.0);
    EXPECT_EQ(f.fs.next_update() == kNever, false);
    f.fs.forget(0);
    EXPECT_EQ(f.fs.next_update(), kNever);
}

// [CC-20] a HELLO_ACK's grant is the share the new sender would get now: the whole
// allocation at an idle receiver, an equal part beside active senders, the share itself
// for a sender already active.
TEST(FairShare, HelloGrantIsTheShareOfANewSender) {
    FairShareConfig c = config();
    c.young_weight = 1;  // [CC-20] alone; with [CC-21]: YoungSendersTogether... below
    Feed f(c);
    EXPECT_EQ(f.fs.grant_bps(5, f.now), kC);  // idle receiver: C before any recomputation
    f.fs.forget(5);
    f.run({kC, kC, kC}, 50us);
    ASSERT_EQ(f.fs.active_senders(), 3u);
    const uint64_t a = f.fs.allocation_bps();
    EXPECT_EQ(f.fs.grant_bps(7, f.now), a / 4);
    EXPECT_EQ(f.fs.grant_bps(0, f.now), f.fs.share_bps(0));  // active: its share
    EXPECT_EQ(f.fs.pending_grants(), 1u);
}

// [CC-15], [CC-20] a sender that becomes active while others granted a share by a HELLO_ACK
// are still on their way is offered its part beside them, as its grant counted them, not
// the whole allocation: the first of an 8 -> 1 incast to arrive gets A/8. Lapsed grants no
// longer count.
TEST(FairShare, FirstShareCountsThePendingGrants) {
    FairShare fs(config());
    const Time t{1ms};
    for (uint32_t i = 0; i < 8; ++i) fs.grant_bps(i, t);
    fs.on_arrival(0, 0, kMss, 5000, t + 1us);
    EXPECT_EQ(fs.share_bps(0), kC / 8);
    fs.on_arrival(1, 0, kMss, 5000, t + 2us);
    EXPECT_EQ(fs.share_bps(1), kC / 8);  // one active and six pending beside it
    fs.on_arrival(9, 0, kMss, 5000, t + 25us);  // the other six grants lapsed at t + 20 us
    EXPECT_EQ(fs.share_bps(9), kC / 3);
}

// [CC-12] a sender's silence counts from its share's last rise when that is later than its
// last arrival. Senders held at the floor while a queue drained are raised when it is gone
// (C/4, then C, [CC-19]) and need a round trip to answer: they are not let go 20 us after
// their last packet (they would come back as new senders, [CC-21]), only 20 us after the
// rise. (Interval 10 us: T = 2 intervals here.)
TEST(FairShare, SilenceCountsFromTheShareRise) {
    Feed f;
    const std::vector<uint64_t> busy{kC / 2, kC / 2};
    f.run(busy, 50us);
    f.run(busy, 30us, 200'000);  // a queue far deeper than can drain: the floor
    ASSERT_EQ(f.fs.allocation_bps(), kC / FairShare::kFloorDivisor);
    const Time quiet = f.now;
    const auto silence_until = [&](Duration d) {
        while (f.now < quiet + d) {
            f.raised.clear();
            f.run({0, 0}, 1us);
            for (uint32_t id : f.raised) f.fs.hint_mbps(id);  // each push told at once
        }
    };
    silence_until(35us);
    EXPECT_EQ(f.fs.allocation_bps(), kC);  // raised: C/4, then C
    EXPECT_EQ(f.fs.active_senders(), 2u);  // silent 35 us, but raised less than 20 us ago
    EXPECT_EQ(f.fs.share_bps(0), kC / 2);
    silence_until(70us);
    EXPECT_EQ(f.fs.active_senders(), 0u);  // silent 20 us after the rise: gone
}

// [CC-20] the grants of an incast's handshakes fall as A, A/2, ..., A/N: each counts the
// pending ones before it, a repeat (another copy of a HELLO) counts once and keeps its
// expiry, a grant ends when its sender becomes active (then counted as active, once) or
// after 2 intervals.
TEST(FairShare, GrantsOfAnIncastFall) {
    FairShare fs(config());
    const Time t{1ms};
    for (uint32_t i = 0; i < 64; ++i) EXPECT_EQ(fs.grant_bps(i, t + 1ns * i), kC / (i + 1)) << i;
    EXPECT_EQ(fs.grant_bps(3, t + 100ns), kC / 64);  // a repeat: the 63 others are pending
    EXPECT_EQ(fs.pending_grants(), 64u);
    fs.on_arrival(0, 0, kMss, 5000, t + 1us);  // sender 0 is active: counted once
    EXPECT_EQ(fs.grant_bps(64, t + 1us), kC / 65);
    // Senders 1..63 were granted at t + i ns (sender 3's repeat did not extend its grant):
    // lapsed at t + 20.5 µs, when sender 0 (active) and sender 64 (pending) remain.
    EXPECT_EQ(fs.grant_bps(65, t + 20500ns), kC / 3);
    // Lapsed grants no longer count; an active sender does.
    EXPECT_EQ(fs.grant_bps(66, t + 42us), kC / 2);
}

// [CC-21] a young sender (fewer than young_bytes since it became active) counts young_weight
// times its weight: a newcomer beside three long senders gets 4/7 of the allocation from
// its first hint on, not 1/4, and an equal part once it has brought young_bytes. Without
// the preference (young_weight 1) it gets 1/4 throughout.
TEST(FairShare, YoungSenderIsFavouredUntilItHasBroughtYoungBytes) {
    for (const uint8_t young : {uint8_t{1}, uint8_t{4}}) {
        FairShareConfig c = config();
        c.young_weight = young;
        c.young_bytes = 64 * 1024;
        Feed f(c);
        f.run({kC, kC, kC}, 200us);  // three long senders, long past young
        ASSERT_EQ(f.fs.active_senders(), 3u);
        const uint64_t a = f.fs.allocation_bps();
        // The newcomer at an eighth of C: 64 KiB take 42 µs, four intervals.
        f.run({kC, kC, kC, kC / 8}, 100ns);
        ASSERT_EQ(f.fs.active_senders(), 4u);
        // [CC-15] at once (and, with the preference, divided again at once: [CC-21]).
        EXPECT_NEAR(static_cast<double>(f.fs.share_bps(3)), a * young / (young + 3.0), a / 1000.0)
            << int{young};
        f.run({kC, kC, kC, kC / 8}, 25us);  // two recomputations, still young
        const uint64_t a2 = f.fs.allocation_bps();
        EXPECT_NEAR(static_cast<double>(f.fs.share_bps(3)), a2 * young / (young + 3.0), a2 / 100.0)
            << int{young};
        for (uint32_t i = 0; i < 3; ++i)
            EXPECT_NEAR(static_cast<double>(f.fs.share_bps(i)), a2 / (young + 3.0), a2 / 100.0) << i;
        f.run({kC, kC, kC, kC / 8}, 40us);  // 65 µs: more than 64 KiB have arrived
        const uint64_t a3 = f.fs.allocation_bps();
        for (uint32_t i = 0; i < 4; ++i)
            EXPECT_NEAR(static_cast<double>(f.fs.share_bps(i)), a3 / 4.0, a3 / 100.0) << i;
    }
}

// [CC-21] senders of an incast into an idle receiver are not favoured (no old sender was
// active when they came): their shares stay equal while some of them grow old before the
// others, and their grants still fall as A, A/2, ..., A/N. A grant counts a favoured young
// sender's weight raised, but not the new sender's own.
TEST(FairShare, YoungSendersTogetherShareEquallyAndGrantsStillFall) {
    FairShareConfig c = config();
    c.young_weight = 4;
    {
        FairShare fs(c);
        const Time t{1ms};
        for (uint32_t i = 0; i < 16; ++i) EXPECT_EQ(fs.grant_bps(i, t + 1ns * i), kC / (i + 1)) << i;
    }
    Feed f(c);
    f.run({kC / 2, kC / 2, kC / 2, kC / 2, kC / 2, kC / 2, kC / 2, kC / 2}, 12us);  // 8 → 1, young
    ASSERT_EQ(f.fs.active_senders(), 8u);
    const uint64_t a = f.fs.allocation_bps();
    for (uint32_t i = 0; i < 8; ++i)
        EXPECT_NEAR(static_cast<double>(f.fs.share_bps(i)), a / 8.0, a / 800.0) << i;
    // Half of them at twice the rate: they pass young_bytes (128 KiB) first, at 10.5 µs.
    f.run({kC, kC / 2, kC, kC / 2, kC, kC / 2, kC, kC / 2}, 8us);
    const uint64_t a1 = f.fs.allocation_bps();
    for (uint32_t i = 0; i < 8; ++i)
        EXPECT_NEAR(static_cast<double>(f.fs.share_bps(i)), a1 / 8.0, a1 / 800.0) << i;
    Feed g(c);
    g.run({kC, kC, kC}, 200us);
    const uint64_t a2 = g.fs.allocation_bps();
    EXPECT_EQ(g.fs.grant_bps(7, g.now), a2 / 4);  // beside three old senders: as without [CC-21]
    g.run({kC, kC, kC, kC / 8}, 1us);              // sender 3 joins them, favoured
    const uint64_t a3 = g.fs.allocation_bps();
    EXPECT_EQ(g.fs.grant_bps(8, g.now), a3 / (1 + 3 + 4 + 1));  // and sender 7, pending
}

// [CC-21] when a young sender's whole first-RTT budget has arrived (without DRAINED) beside
// senders that are no longer young, the shares are divided again at the next update and the
// old senders, now below half of their last hint, are pushed at once, not at the next
// recomputation. Without the preference nothing moves until then.
TEST(FairShare, YoungSenderPastItsBudgetMakesTheOldOnesRoomAtOnce) {
    for (const uint8_t young : {uint8_t{1}, uint8_t{16}}) {
        FairShareConfig c = config();  // interval 10 µs, first_rtt_bytes 32 KiB
        c.young_weight = young;
        Feed f(c);
        f.run({kC, kC, kC}, 201us);  // 1 µs past a recomputation
        const uint64_t a = f.fs.allocation_bps();
        f.raised.clear();
        f.run({kC, kC, kC, kC / 2}, 7us);  // 32 KiB at C/2 take 5.2 µs; no recomputation yet
        const bool pushed = std::count(f.raised.begin(), f.raised.end(), 0u) > 0;
        EXPECT_EQ(pushed, young > 1) << int{young};
        if (young > 1) {
            for (uint32_t i = 0; i < 3; ++i)
                EXPECT_NEAR(static_cast<double>(f.fs.share_bps(i)), a / 19.0, a / 1000.0) << i;
            EXPECT_NEAR(static_cast<double>(f.fs.share_bps(3)), a * 16 / 19.0, a / 1000.0);
        } else {
            EXPECT_NEAR(static_cast<double>(f.fs.share_bps(0)), a / 3.0, a / 1000.0);
        }
    }
}

}  // namespace
}  // namespace mroce::cc
