#include "sim/link.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "sim/test_seed.h"

namespace mroce::sim {
namespace {

using namespace std::chrono_literals;
using testing::seed_note;
using testing::sweep_seeds;
using testing::test_seed;

struct Arrival {
    SimTime at;
    uint64_t id;
    uint8_t ecn;
    bool duplicate;
    friend bool operator==(const Arrival&, const Arrival&) = default;
};

class Collector final : public PacketSink {
  public:
    explicit Collector(Sim& sim) : sim_(sim) {}
    void receive(PacketPtr p) override {
        log.push_back(Arrival{sim_.now(), p->id, p->meta.ecn, p->duplicate});
    }
    std::vector<Arrival> log;

  private:
    Sim& sim_;
};

PacketPtr make_packet(Sim& sim, size_t size, uint8_t ecn_codepoint = ecn::kNotEct) {
    PacketPtr p = sim.packets().acquire();
    p->bytes.resize(size);
    p->meta.ecn = ecn_codepoint;
    return p;
}

// An exact-timing link: no jitter.
LinkConfig quiet(uint64_t rate_bps, SimDuration delay) {
    LinkConfig c;
    c.rate_bps = rate_bps;
    c.delay = delay;
    c.jitter_max = SimDuration{0};
    return c;
}

// A count of n Bernoulli(p) trials lies within 5 standard deviations of n*p.
void expect_binomial(uint64_t count, uint64_t n, double p, const char* what) {
    const double mean = static_cast<double>(n) * p;
    const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
    EXPECT_NEAR(static_cast<double>(count), mean, 5 * sd + 1) << what << " n=" << n << " p=" << p;
}

void expect_conservation(const Link& link) {
    const LinkStats& s = link.stats();
    EXPECT_EQ(s.offered_packets + s.duplicated + s.late_duplicated,
              s.delivered_packets + s.dropped_total() + link.in_flight());
}

TEST(Link, SerializationTime) {
    EXPECT_EQ(serialization_time(1500, 100'000'000'000), SimDuration{120ns});
    EXPECT_EQ(serialization_time(64, 100'000'000'000), SimDuration{5120});
    EXPECT_EQ(serialization_time(1, 800'000'000'000), SimDuration{10});
    EXPECT_EQ(serialization_time(4096, 400'000'000'000), SimDuration{81'920});
    EXPECT_EQ(serialization_time(1, 3), SimDuration{2'666'666'666'667});  // rounds up
    EXPECT_EQ(serialization_time(1500, 0), SimDuration{0});
}

TEST(Link, SerializesAtRateThenPropagatesExactly) {
    Sim sim(1);
    Collector out(sim);
    Link link(sim, quiet(100'000'000'000, 1us), "l", &out);
    for (int i = 0; i < 3; ++i) link.receive(make_packet(sim, 1500));
    EXPECT_EQ(link.queue_bytes(), 4500u);
    sim.run_until({});
    ASSERT_EQ(out.log.size(), 3u);
    EXPECT_EQ(out.log[0].at, SimTime{} + 1120ns);  // 120 ns on the wire + 1 us
    EXPECT_EQ(out.log[1].at, SimTime{} + 1240ns);
    EXPECT_EQ(out.log[2].at, SimTime{} + 1360ns);
    EXPECT_EQ(link.queue_bytes(), 0u);
    EXPECT_EQ(link.stats().delivered_bytes, 4500u);

    // An idle link starts serialising at once.
    sim.schedule_at(SimTime{} + 10us, [&] { link.receive(make_packet(sim, 64)); });
    sim.run_until({});
    EXPECT_EQ(out.log.back().at, SimTime{} + 11us + SimDuration{5120});
}

TEST(Link, InfiniteRateIsPureDelay) {
    Sim sim(1);
    Collector out(sim);
    Link link(sim, quiet(0, 3us), "l", &out);
    for (int i = 0; i < 10; ++i) link.receive(make_packet(sim, 9000));
    sim.run_until({});
    ASSERT_EQ(out.log.size(), 10u);
    for (const Arrival& a : out.log) EXPECT_EQ(a.at, SimTime{} + 3us);
    EXPECT_EQ(link.stats().max_queue_bytes, 0u);
}

TEST(Link, DropTailAtCapacityCountsTheOneInService) {
    Sim sim(1);
    Collector out(sim);
    LinkConfig c = quiet(1'000'000'000, 1us);  // 1500 B take 12 us
    c.queue_capacity_bytes = 4500;
    Link link(sim, c, "l", &out);
    for (int i = 0; i < 5; ++i) link.receive(make_packet(sim, 1500));
    EXPECT_EQ(link.stats().dropped(DropReason::kQueueFull), 2u);
    EXPECT_EQ(link.stats().max_queue_bytes, 4500u);
    // Once the first packet has left, there is room for one more.
    sim.schedule_at(SimTime{} + 12us, [&] { link.receive(make_packet(sim, 1500)); });
    sim.schedule_at(SimTime{} + 12us, [&] { link.receive(make_packet(sim, 1500)); });
    sim.run_until({});
    EXPECT_EQ(out.log.size(), 4u);
    EXPECT_EQ(link.stats().dropped(DropReason::kQueueFull), 3u);
    EXPECT_EQ(link.stats().dropped_bytes, 4500u);
    EXPECT_EQ(link.stats().offered_packets, 7u);
    expect_conservation(link);
}

TEST(Link, EcnMarksEctPacketsAtOrAboveThreshold) {
    Sim sim(1);
    Collector out(sim);
    LinkConfig c = quiet(1'000'000'000, 1us);
    c.ecn_threshold_bytes = 3000;
    Link link(sim, c, "l", &out);
    // Occupancy found at enqueue: 0, 1500, 3000, 4500, 6000.
    for (uint8_t e : {ecn::kEct0, ecn::kEct1, ecn::kEct0, ecn::kNotEct, ecn::kEct1})
        link.receive(make_packet(sim, 1500, e));
    sim.run_until({});
    ASSERT_EQ(out.log.size(), 5u);
    EXPECT_EQ(out.log[0].ecn, ecn::kEct0);
    EXPECT_EQ(out.log[1].ecn, ecn::kEct1);
    EXPECT_EQ(out.log[2].ecn, ecn::kCe);
    EXPECT_EQ(out.log[3].ecn, ecn::kNotEct);  // not ECN-capable: never marked
    EXPECT_EQ(out.log[4].ecn, ecn::kCe);
    EXPECT_EQ(link.stats().ecn_marked, 2u);
}

// Offers n packets to an infinitely fast link and returns which were delivered (by
// index), so the loss decision of every packet is visible. Chunks of 1000 let the pool
// recycle packets, which keeps sanitizer builds fast.
std::vector<bool> delivered_mask(Sim& sim, Link& link, Collector& out, uint64_t n) {
    const uint64_t first = sim.packets().acquire()->id + 1;
    for (uint64_t i = 0; i < n; ++i) {
        link.receive(make_packet(sim, 100));
        if (i % 1000 == 999) sim.run_until({});
    }
    sim.run_until({});
    std::vector<bool> got(n);
    for (const Arrival& a : out.log) got[a.id - first] = true;
    return got;
}

TEST(Link, BernoulliLossRateWithinBound) {
    for (uint64_t seed : sweep_seeds(100, 4)) {
        SCOPED_TRACE(seed_note(seed));
        for (double p : {0.001, 0.01, 0.2}) {
            Sim sim(seed);
            Collector out(sim);
            LinkConfig c = quiet(0, 1us);
            c.loss_probability = p;
            Link link(sim, c, "l", &out);
            const uint64_t n = 40'000;
            delivered_mask(sim, link, out, n);
            expect_binomial(link.stats().dropped(DropReason::kRandomLoss), n, p, "random loss");
            EXPECT_EQ(link.stats().dropped_total(), link.stats().dropped(DropReason::kRandomLoss));
            expect_conservation(link);
        }
    }
}

TEST(Link, GilbertElliottLossRateAndBurstiness) {
    const uint64_t seed = test_seed(7);
    SCOPED_TRACE(seed_note(seed));
    Sim sim(seed);
    Collector out(sim);
    LinkConfig c = quiet(0, 1us);
    c.burst_loss = GilbertElliott{.p_good_to_bad = 0.01, .p_bad_to_good = 0.2, .loss_in_bad = 0.5};
    Link link(sim, c, "l", &out);
    const uint64_t n = 200'000;
    std::vector<bool> got = delivered_mask(sim, link, out, n);

    const double expected = 0.5 * 0.01 / (0.01 + 0.2);  // 2.38 %
    const double lost = static_cast<double>(link.stats().dropped(DropReason::kBurstLoss));
    // Losses come in correlated runs, so the spread is wider than binomial (sd ~3.3 %
    // of the mean for 200k packets); 20 % is 6 sd.
    EXPECT_NEAR(lost / static_cast<double>(n), expected, 0.20 * expected);
    uint64_t losses_after_loss = 0, losses = 0;
    for (uint64_t i = 1; i < n; ++i) {
        if (!got[i - 1]) {
            ++losses;
            losses_after_loss += !got[i];
        }
    }
    // P(loss | previous lost) ~ 0.8 * 0.5 = 0.4, far above the 2.4 % average: bursts.
    EXPECT_GT(static_cast<double>(losses_after_loss) / static_cast<double>(losses), 0.3);
}

TEST(Link, DropPatternByIndexAndMask) {
    Sim sim(1);
    Collector out(sim);
    LinkConfig c = quiet(0, 1us);
    c.drop_pattern.indices = {7, 0, 5};
    c.drop_pattern.mask = 0b1010;  // indices 1 and 3, first block only
    Link link(sim, c, "l", &out);
    std::vector<bool> got = delivered_mask(sim, link, out, 200);
    std::set<uint64_t> dropped;
    for (uint64_t i = 0; i < got.size(); ++i)
        if (!got[i]) dropped.insert(i);
    EXPECT_EQ(dropped, (std::set<uint64_t>{0, 1, 3, 5, 7}));
    EXPECT_EQ(link.stats().dropped(DropReason::kPattern), 5u);

    Sim sim2(1);
    Collector out2(sim2);
    c.drop_pattern = DropPattern{.mask = 0x8000000000000001ULL, .mask_repeats = true};
    Link repeating(sim2, c, "l", &out2);
    got = delivered_mask(sim2, repeating, out2, 200);
    dropped.clear();
    for (uint64_t i = 0; i < got.size(); ++i)
        if (!got[i]) dropped.insert(i);
    EXPECT_EQ(dropped, (std::set<uint64_t>{0, 63, 64, 127, 128, 191, 192}));
}

TEST(Link, PatternCountsOnlyPacketsThatReachTheWire) {
    Sim sim(1);
    Collector out(sim);
    LinkConfig c = quiet(1'000'000'000, 1us);
    c.queue_capacity_bytes = 3000;
    c.drop_pattern.indices = {1};
    Link link(sim, c, "l", &out);
    for (int i = 0; i < 4; ++i) link.receive(make_packet(sim, 1500));  // #2, #3: queue full
    sim.run_until({});
    EXPECT_EQ(link.stats().dropped(DropReason::kQueueFull), 2u);
    EXPECT_EQ(link.stats().dropped(DropReason::kPattern), 1u);  // the 2nd that was sent
    EXPECT_EQ(out.log.size(), 1u);
}

// A wire with no impairment configured takes a shorter path (link.cc); it must draw the same
// jitter, count the same wire indices and notice an impairment switched on mid-run.
TEST(Link, PlainWireMatchesTheGeneralPathAndSeesConfigChanges) {
    auto run = [](bool force_general) {
        Sim sim(7);
        Collector out(sim);
        LinkConfig c;  // default jitter on: the plain path must draw it like the general one
        c.rate_bps = 0;
        // An index no packet reaches: the pattern drops nothing but makes the link impaired.
        if (force_general) c.drop_pattern.indices = {1'000'000};
        Link link(sim, c, "l", &out);
        for (int i = 0; i < 40; ++i)
            sim.schedule_at(SimTime{} + i * 100ns, [&] { link.receive(make_packet(sim, 100)); });
        sim.run_until({});
        return out.log;
    };
    const auto plain = run(false);
    ASSERT_EQ(plain.size(), 40u);
    EXPECT_EQ(plain, run(true));

    Sim sim(1);
    Collector out(sim);
    Link link(sim, quiet(0, 1us), "l", &out);
    for (int i = 0; i < 30; ++i)
        sim.schedule_at(SimTime{} + i * 100ns, [&] { link.receive(make_packet(sim, 100)); });
    // Packets 0-9 go over the plain wire; then index 12 is to be dropped (the indices count
    // the plain packets too) and every packet from 20 on is lost until loss is cleared.
    sim.schedule_at(SimTime{} + 950ns, [&] { link.config().drop_pattern.indices = {12}; });
    sim.schedule_at(SimTime{} + 1950ns, [&] {
        link.config().drop_pattern = DropPattern{};
        link.config().loss_probability = 1;
    });
    sim.schedule_at(SimTime{} + 2450ns, [&] { link.config().loss_probability = 0; });
    sim.run_until({});
    EXPECT_EQ(link.stats().dropped(DropReason::kPattern), 1u);
    EXPECT_EQ(link.stats().dropped(DropReason::kRandomLoss), 5u);
    std::vector<uint64_t> got;
    for (const Arrival& a : out.log) got.push_back((to_ps(a.at) - 1'000'000) / 100'000);
    std::vector<uint64_t> want;
    for (uint64_t i = 0; i < 30; ++i)
        if (i != 12 && (i < 20 || i >= 25)) want.push_back(i);
    EXPECT_EQ(got, want);
    expect_conservation(link);
}

TEST(Link, BlackholeWindowThenForever) {
    Sim sim(1);
    Collector out(sim);
    LinkConfig c = quiet(0, 1us);
    c.blackhole = TimeWindow{SimTime{} + 2us, SimTime{} + 5us};
    Link link(sim, c, "l", &out);
    // Scheduled first, so it runs before the packet sent at the same instant (tie order).
    sim.schedule_at(SimTime{} + 8us, [&] { link.config().blackhole = TimeWindow{sim.now()}; });
    for (int i = 0; i < 100; ++i)
        sim.schedule_at(SimTime{} + i * 100ns, [&] { link.receive(make_packet(sim, 100)); });
    sim.run_until({});
    EXPECT_EQ(link.stats().dropped(DropReason::kBlackhole), 30u + 20u);
    ASSERT_EQ(out.log.size(), 50u);
    for (const Arrival& a : out.log) {
        const SimTime sent = a.at - 1us;
        EXPECT_TRUE(sent < SimTime{} + 2us || (sent >= SimTime{} + 5us && sent < SimTime{} + 8us))
            << to_ps(sent);
    }
}

TEST(Link, DuplicatesArriveRightAfterTheOriginal) {
    const uint64_t seed = test_seed(21);
    SCOPED_TRACE(seed_note(seed));
    Sim sim(seed);
    Collector out(sim);
    LinkConfig c = quiet(0, 1us);
    c.duplicate_probability = 0.1;
    Link link(sim, c, "l", &out);
    const uint64_t n = 20'000;
    delivered_mask(sim, link, out, n);
    expect_binomial(link.stats().duplicated, n, 0.1, "duplicated");
    EXPECT_EQ(out.log.size(), n + link.stats().duplicated);
    uint64_t copies = 0;
    for (size_t i = 0; i < out.log.size(); ++i) {
        if (!out.log[i].duplicate) continue;
        ++copies;
        ASSERT_GT(i, 0u);
        EXPECT_EQ(out.log[i - 1].id, out.log[i].id);
        EXPECT_FALSE(out.log[i - 1].duplicate);
        EXPECT_EQ(out.log[i - 1].at, out.log[i].at);
    }
    EXPECT_EQ(copies, link.stats().duplicated);
    expect_conservation(link);
}

TEST(Link, DelayedDuplicatesArriveMuchLater) {
    const uint64_t seed = test_seed(22);
    SCOPED_TRACE(seed_note(seed));
    Sim sim(seed);
    Collector out(sim);
    LinkConfig c = quiet(0, 1us);
    c.late_duplicate_probability = 0.05;
    c.late_duplicate_delay = 100us;
    Link link(sim, c, "l", &out);
    const uint64_t n = 10'000;
    for (uint64_t i = 0; i < n; ++i)
        sim.schedule_at(SimTime{} + i * 1us, [&] { link.receive(make_packet(sim, 100)); });
    sim.run_until([&] { return sim.now() > SimTime{} + 5ms && link.in_flight() > 0; });
    expect_conservation(link);  // mid-run, with copies still in flight
    sim.run_until({});
    expect_binomial(link.stats().late_duplicated, n, 0.05, "late duplicates");
    std::map<uint64_t, SimTime> first_arrival;
    uint64_t copies = 0, overtaken = 0;
    uint64_t max_id = 0;
    for (const Arrival& a : out.log) {
        if (a.duplicate) {
            ++copies;
            EXPECT_EQ(a.at - first_arrival.at(a.id), SimDuration{100us});
            overtaken += a.id < max_id;
        } else {
            first_arrival[a.id] = a.at;
            max_id = std::max(max_id, a.id);
        }
    }
    EXPECT_EQ(copies, link.stats().late_duplicated);
    // Every late copy arrives after newer packets (unless it copies the very last one).
    EXPECT_GE(overtaken + 1, copies);
    EXPECT_GT(copies, 0u);
    expect_conservation(link);
}

TEST(Link, ReorderingHoldsBackSomePacketsSoLaterOnesOvertake) {
    const uint64_t seed = test_seed(23);
    SCOPED_TRACE(seed_note(seed));
    Sim sim(seed);
    Collector out(sim);
    LinkConfig c = quiet(0, 1us);
    c.reorder_probability = 0.05;
    c.reorder_delay = 10us;
    Link link(sim, c, "l", &out);
    const uint64_t n = 10'000;
    const uint64_t first = sim.packets().acquire()->id + 1;
    for (uint64_t i = 0; i < n; ++i)
        sim.schedule_at(SimTime{} + i * 1us, [&] { link.receive(make_packet(sim, 100)); });
    sim.run_until({});
    ASSERT_EQ(out.log.size(), n);
    expect_binomial(link.stats().reordered, n, 0.05, "reordered");
    uint64_t late = 0, max_id = 0;
    for (const Arrival& a : out.log) {
        const SimTime sent = SimTime{} + static_cast<int64_t>(a.id - first) * 1us;
        if (a.id < max_id) {
            ++late;
            EXPECT_EQ(a.at, sent + 11us);
        } else {
            EXPECT_TRUE(a.at == sent + 1us || a.at == sent + 11us);
        }
        max_id = std::max(max_id, a.id);
    }
    // Every held-back packet is overtaken, except one sent in the last 10 us.
    EXPECT_LE(late, link.stats().reordered);
    EXPECT_GE(late + 10, link.stats().reordered);
    EXPECT_GT(late, 0u);
}

TEST(Link, JitterIsSmallAndNeverReorders) {
    const uint64_t seed = test_seed(24);
    SCOPED_TRACE(seed_note(seed));
    Sim sim(seed);
    Collector out(sim);
    LinkConfig c = quiet(0, 1us);
    c.jitter_max = 50ns;  // larger than the 10 ns spacing, to provoke the FIFO clamp
    Link link(sim, c, "l", &out);
    for (int i = 0; i < 2000; ++i)
        sim.schedule_at(SimTime{} + i * 10ns, [&] { link.receive(make_packet(sim, 100)); });
    sim.run_until({});
    ASSERT_EQ(out.log.size(), 2000u);
    std::set<int64_t> gaps;
    for (size_t i = 1; i < out.log.size(); ++i) {
        ASSERT_GT(out.log[i].id, out.log[i - 1].id);
        ASSERT_GE(out.log[i].at, out.log[i - 1].at);
        gaps.insert(to_ps(out.log[i].at - out.log[i - 1].at));
    }
    EXPECT_GT(gaps.size(), 100u);  // the jitter is real

    // The default jitter is on and tiny.
    LinkConfig d;
    EXPECT_GT(d.jitter_max, SimDuration{0});
    EXPECT_LE(d.jitter_max, SimDuration{1ns});
}

// Runs a link with every impairment on and returns the delivery log.
std::vector<Arrival> impaired_run(uint64_t seed, bool with_duplication) {
    Sim sim(seed);
    Collector out(sim);
    LinkConfig c;  // default jitter on
    c.rate_bps = 10'000'000'000;
    c.queue_capacity_bytes = 20'000;
    c.ecn_threshold_bytes = 5'000;
    c.loss_probability = 0.02;
    c.burst_loss = GilbertElliott{.p_good_to_bad = 0.005, .p_bad_to_good = 0.3, .loss_in_bad = 0.7};
    c.reorder_probability = with_duplication ? 0.02 : 0;
    c.duplicate_probability = with_duplication ? 0.02 : 0;
    c.late_duplicate_probability = with_duplication ? 0.01 : 0;
    Link link(sim, c, "l", &out);
    Rng workload = sim.fork_rng("workload");
    SimTime t{};
    for (int i = 0; i < 5000; ++i) {
        t += SimDuration{static_cast<int64_t>(workload.uniform(2'000'000))};
        const size_t size = 64 + workload.uniform(1500);
        sim.schedule_at(t, [&, size] { link.receive(make_packet(sim, size, ecn::kEct0)); });
    }
    sim.run_until({});
    expect_conservation(link);
    return out.log;
}

TEST(Link, SameSeedSameRunAndStreamsAreIndependent) {
    const uint64_t seed = test_seed(31);
    SCOPED_TRACE(seed_note(seed));
    const auto a = impaired_run(seed, true);
    const auto b = impaired_run(seed, true);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, impaired_run(seed + 1, true));

    // Turning duplication and reordering on does not change which packets the loss
    // models drop: each impairment has its own stream.
    auto survivors = [](const std::vector<Arrival>& log) {
        std::set<uint64_t> ids;
        for (const Arrival& x : log) ids.insert(x.id);
        return ids;
    };
    EXPECT_EQ(survivors(a), survivors(impaired_run(seed, false)));
}

}  // namespace
}  // namespace mroce::sim
