#include "sim/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "sim/test_seed.h"

namespace mroce::sim {
namespace {

using namespace std::chrono_literals;

TEST(SimTime, ConvertsToCoreTimeRoundingDown) {
    EXPECT_EQ(to_core_time(sim_time_from_ps(0)), time_from_ns(0));
    EXPECT_EQ(to_core_time(sim_time_from_ps(999)), time_from_ns(0));
    EXPECT_EQ(to_core_time(sim_time_from_ps(1000)), time_from_ns(1));
    EXPECT_EQ(to_core_time(sim_time_from_ps(123'456'789)), time_from_ns(123'456));
    EXPECT_EQ(to_core_time(sim_time_from_ps(-1)), time_from_ns(-1));
    EXPECT_EQ(to_core_time(kSimForever), kNever);

    EXPECT_EQ(from_core_time(time_from_ns(7)), sim_time_from_ps(7000));
    EXPECT_EQ(from_core_time(kNever), kSimForever);
    EXPECT_EQ(from_core_time(time_from_ns(INT64_MAX / 2)), kSimForever);  // saturates
    EXPECT_EQ(SimTime{} + SimDuration{2us}, sim_time_from_ps(2'000'000));
}

TEST(Sim, TiesRunInInsertionOrder) {
    Sim sim(1);
    std::vector<int> order;
    sim.schedule_at(sim_time_from_ps(10), [&] { order.push_back(3); });
    sim.schedule_at(sim_time_from_ps(5), [&] { order.push_back(1); });
    sim.schedule_at(sim_time_from_ps(10), [&] { order.push_back(4); });
    sim.schedule_at(sim_time_from_ps(5), [&] {
        order.push_back(2);
        // Scheduled for "now" while other events at t=5/10 are queued: runs after the
        // ones already queued for t=5, before t=10.
        sim.schedule_in(SimDuration{0}, [&] { order.push_back(25); });
        sim.schedule_at(sim_time_from_ps(10), [&] { order.push_back(5); });
    });
    sim.schedule_at(sim_time_from_ps(5), [&] { order.push_back(21); });
    EXPECT_EQ(sim.run_until({}).reason, StopReason::kQueueEmpty);
    EXPECT_EQ(order, (std::vector<int>{1, 2, 21, 25, 3, 4, 5}));
    EXPECT_EQ(sim.now(), sim_time_from_ps(10));
}

TEST(Sim, ManySameTimeEventsKeepInsertionOrder) {
    Sim sim(1);
    std::vector<int> order;
    for (int i = 0; i < 5000; ++i)
        sim.schedule_at(SimTime{} + 1us, [&order, i] { order.push_back(i); });
    sim.run_until({});
    ASSERT_EQ(order.size(), 5000u);
    for (int i = 0; i < 5000; ++i) ASSERT_EQ(order[i], i);
}

TEST(Sim, CancelIsCheapAndExact) {
    Sim sim(1);
    std::vector<char> order;
    EventHandle a = sim.schedule_in(1ns, [&] { order.push_back('a'); });
    EventHandle b = sim.schedule_in(2ns, [&] { order.push_back('b'); });
    EventHandle c = sim.schedule_in(3ns, [&] { order.push_back('c'); });
    EXPECT_TRUE(sim.pending(b));
    EXPECT_TRUE(sim.cancel(b));
    EXPECT_FALSE(sim.pending(b));
    EXPECT_FALSE(sim.cancel(b));  // twice
    EXPECT_FALSE(sim.cancel(EventHandle{}));
    EXPECT_EQ(sim.pending_events(), 2u);
    sim.run_until({});
    EXPECT_EQ(order, (std::vector<char>{'a', 'c'}));
    EXPECT_FALSE(sim.cancel(a));  // already ran
    EXPECT_FALSE(sim.pending(c));

    // A slot reused by a new event is not cancelled through the old handle.
    EventHandle d = sim.schedule_in(1ns, [&] { order.push_back('d'); });
    EXPECT_FALSE(sim.cancel(a));
    EXPECT_FALSE(sim.cancel(b));
    EXPECT_TRUE(sim.pending(d));
    sim.run_until({});
    EXPECT_EQ(order.back(), 'd');
}

TEST(Sim, EventCancellingItselfOrALaterOne) {
    Sim sim(1);
    EventHandle self, later;
    int ran_later = 0;
    bool self_cancel_result = true;
    self = sim.schedule_in(1ns, [&] {
        self_cancel_result = sim.cancel(self);  // running: no longer pending
        EXPECT_TRUE(sim.cancel(later));
    });
    later = sim.schedule_in(2ns, [&] { ++ran_later; });
    sim.run_until({});
    EXPECT_FALSE(self_cancel_result);
    EXPECT_EQ(ran_later, 0);
}

TEST(Sim, MassCancellationKeepsOrder) {
    const uint64_t seed = testing::test_seed(11);
    SCOPED_TRACE(testing::seed_note(seed));
    Sim sim(seed);
    Rng rng = sim.fork_rng("test");
    std::vector<EventHandle> handles;
    std::vector<int64_t> ran;
    std::vector<bool> cancelled(20000);
    for (int i = 0; i < 20000; ++i) {
        const int64_t t = static_cast<int64_t>(rng.uniform(1'000'000));
        handles.push_back(sim.schedule_at(sim_time_from_ps(t),
                                          [&ran, &sim] { ran.push_back(to_ps(sim.now())); }));
    }
    size_t kept = 0;
    for (int i = 0; i < 20000; ++i) {
        if (rng.uniform(10) != 0) {
            ASSERT_TRUE(sim.cancel(handles[i]));
            cancelled[i] = true;
        } else {
            ++kept;
        }
    }
    EXPECT_EQ(sim.pending_events(), kept);
    sim.run_until({});
    ASSERT_EQ(ran.size(), kept);
    EXPECT_TRUE(std::is_sorted(ran.begin(), ran.end()));
}

// The queue is a monotone (radix) heap: this drives it the way a simulation does (events
// scheduling later events, ties, cancellations) plus the one non-monotone case, an event
// scheduled from outside after run_until stopped at a time limit, before the head it saw.
// The order must be exactly (time, insertion) order, checked against a sorted reference.
TEST(Sim, RandomScheduleRunsInTimeThenInsertionOrder) {
    const uint64_t seed = testing::test_seed(12);
    SCOPED_TRACE(testing::seed_note(seed));
    Sim sim(seed, sim_time_from_ps(-5'000'000));  // negative times order like the rest
    Rng rng = sim.fork_rng("test");
    struct Key {
        int64_t t;
        uint64_t n;
    };
    std::vector<Key> expected, ran;
    uint64_t next = 0;
    std::vector<std::pair<EventHandle, size_t>> cancellable;  // handle, index in expected
    std::vector<bool> cancelled;
    std::function<void(int64_t)> add = [&](int64_t t) {
        const uint64_t n = next++;
        expected.push_back({t, n});
        cancelled.push_back(false);
        const EventHandle h = sim.schedule_at(sim_time_from_ps(t), [&, n, t] {
            ran.push_back({t, n});
            // Each event schedules 0-2 more: at now (a tie), nearby, or far away.
            for (uint64_t k = rng.uniform(3); k > 0 && next < 30'000; --k) {
                const uint64_t kind = rng.uniform(4);
                add(t + (kind == 0   ? 0
                         : kind == 1 ? static_cast<int64_t>(rng.uniform(1000))
                         : kind == 2 ? static_cast<int64_t>(rng.uniform(1'000'000))
                                     : static_cast<int64_t>(rng.uniform(1ull << 40))));
            }
            if (!cancellable.empty() && rng.uniform(4) == 0) {
                const auto [handle, index] = cancellable[rng.uniform(cancellable.size())];
                if (sim.cancel(handle)) cancelled[index] = true;
            }
        });
        if (rng.uniform(8) == 0) cancellable.push_back({h, expected.size() - 1});
    };
    for (int i = 0; i < 200; ++i) add(-5'000'000 + static_cast<int64_t>(rng.uniform(3'000'000)));
    for (int round = 0; round < 50; ++round) {
        // Stop at a time limit before the head, then schedule below that head.
        const SimTime limit = sim.now() + SimDuration{static_cast<int64_t>(rng.uniform(2'000'000))};
        sim.run_until({}, limit, 400);
        add(to_ps(sim.now()) + static_cast<int64_t>(rng.uniform(10)));
    }
    sim.run_until({});
    std::vector<Key> want;
    for (size_t i = 0; i < expected.size(); ++i)
        if (!cancelled[i]) want.push_back(expected[i]);
    std::stable_sort(want.begin(), want.end(),
                     [](const Key& a, const Key& b) { return a.t < b.t; });
    ASSERT_EQ(ran.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(ran[i].t, want[i].t) << "event " << i;
        ASSERT_EQ(ran[i].n, want[i].n) << "event " << i;
    }
    EXPECT_GT(want.size(), 1000u);
}

TEST(Sim, RunUntilStopReasons) {
    Sim sim(1);
    int count = 0;
    for (int i = 1; i <= 10; ++i) sim.schedule_at(SimTime{} + i * 1us, [&] { ++count; });

    // Predicate already true: nothing runs.
    RunResult r = sim.run_until([&] { return true; });
    EXPECT_EQ(r.reason, StopReason::kPredicate);
    EXPECT_EQ(r.events, 0u);

    r = sim.run_until([&] { return count == 3; });
    EXPECT_EQ(r.reason, StopReason::kPredicate);
    EXPECT_EQ(r.events, 3u);
    EXPECT_EQ(sim.now(), SimTime{} + 3us);

    // The limit is inclusive; now() moves to the limit.
    r = sim.run_until({}, SimTime{} + 5us);
    EXPECT_EQ(r.reason, StopReason::kTimeLimit);
    EXPECT_EQ(count, 5);
    r = sim.run_until({}, SimTime{} + 5500ns);
    EXPECT_EQ(r.reason, StopReason::kTimeLimit);
    EXPECT_EQ(r.events, 0u);
    EXPECT_EQ(sim.now(), SimTime{} + 5500ns);

    r = sim.run_until({}, kSimForever, 2);
    EXPECT_EQ(r.reason, StopReason::kBudget);
    EXPECT_EQ(r.events, 2u);
    EXPECT_EQ(count, 7);

    r = sim.run_for(1ms);
    EXPECT_EQ(r.reason, StopReason::kQueueEmpty);
    EXPECT_EQ(count, 10);
    EXPECT_EQ(sim.now(), SimTime{} + 10us);  // empty queue: time stays at the last event
    EXPECT_EQ(to_string(StopReason::kBudget), std::string("event budget exhausted"));
}

TEST(Sim, BudgetStopsALivelock) {
    Sim sim(1);
    std::function<void()> again = [&] { sim.schedule_in(SimDuration{0}, again); };
    sim.schedule_in(SimDuration{0}, again);
    RunResult r = sim.run_until({}, kSimForever, 1000);
    EXPECT_EQ(r.reason, StopReason::kBudget);
    EXPECT_EQ(sim.now(), SimTime{});
}

TEST(Sim, CallbacksMayOwnMoveOnlyAndLargeState) {
    Sim sim(1);
    int sum = 0;
    auto owned = std::make_unique<int>(40);
    sim.schedule_in(1ns, [&sum, p = std::move(owned)] { sum += *p; });
    std::array<int64_t, 32> big{};  // 256 bytes: does not fit inline, goes to the heap
    big[31] = 2;
    struct Big {
        std::array<int64_t, 32> a;
        void operator()() {}
    };
    static_assert(!Callback::fits_inline<Big>());
    sim.schedule_in(2ns, [big, &sum] { sum += static_cast<int>(big[31]); });
    // Pending callbacks that own resources are destroyed with the Sim; ASan checks it.
    auto never = std::make_unique<int>(1);
    sim.schedule_in(1s, [p = std::move(never)] {});
    sim.run_until({}, SimTime{} + 1ms);
    EXPECT_EQ(sum, 42);
    EXPECT_EQ(sim.pending_events(), 1u);
}

TEST(Sim, PendingPacketsAreReturnedWhenTheSimDies) {
    auto sim = std::make_unique<Sim>(1);
    PacketPtr p = sim->packets().acquire();
    p->bytes.resize(100);
    sim->schedule_in(1us, [q = std::move(p)] {});
    EXPECT_EQ(sim->packets().outstanding(), 1u);
    sim.reset();  // must not leak or touch freed memory (ASan)
}

TEST(PacketPool, PayloadsHaveTheirOwnSlabsAndMayOutgrowThem) {
    Sim sim(1);
    PacketPool& pool = sim.packets();
    PacketPtr a = pool.acquire();
    PacketPtr b = pool.acquire();
    EXPECT_GE(a->bytes.capacity(), PacketPool::kSlabBytes);
    a->bytes.resize(PacketPool::kSlabBytes);
    b->bytes.resize(PacketPool::kSlabBytes);
    std::memset(a->bytes.data(), 0xAA, a->size());
    std::memset(b->bytes.data(), 0xBB, b->size());
    EXPECT_EQ(a->bytes[PacketPool::kSlabBytes - 1], std::byte{0xAA});  // slabs do not overlap
    EXPECT_EQ(b->bytes[0], std::byte{0xBB});

    // Beyond the slab: the bytes written so far move with it.
    const size_t big = 3 * PacketPool::kSlabBytes;
    a->bytes.resize(big);
    EXPECT_EQ(a->size(), big);
    EXPECT_EQ(a->bytes[PacketPool::kSlabBytes - 1], std::byte{0xAA});
    a->bytes[big - 1] = std::byte{0x11};
    PacketPtr c = pool.clone(*a);
    ASSERT_EQ(c->size(), big);
    EXPECT_EQ(c->bytes[0], std::byte{0xAA});
    EXPECT_EQ(c->bytes[big - 1], std::byte{0x11});
    EXPECT_EQ(b->bytes[0], std::byte{0xBB});

    // A returned packet comes back empty and keeps its storage.
    Packet* raw = a.get();
    a.reset();
    PacketPtr again = pool.acquire();
    ASSERT_EQ(again.get(), raw);
    EXPECT_TRUE(again->bytes.empty());
    EXPECT_GE(again->bytes.capacity(), big);
}

TEST(Sim, SimsAreIndependentAndForkedStreamsDependOnlyOnSeedAndLabel) {
    Sim a(5), b(5), c(6);
    EXPECT_EQ(a.fork_rng("x").next_u64(), b.fork_rng("x").next_u64());
    EXPECT_NE(a.fork_rng("x").next_u64(), a.fork_rng("y").next_u64());
    EXPECT_NE(a.fork_rng("x").next_u64(), c.fork_rng("x").next_u64());
    int na = 0, nb = 0;
    a.schedule_in(1us, [&] { ++na; });
    b.schedule_in(2us, [&] { ++nb; });
    a.run_until({});
    EXPECT_EQ(na, 1);
    EXPECT_EQ(nb, 0);
    EXPECT_EQ(b.now(), SimTime{});
}

TEST(Sim, StartTimeIsConfigurable) {
    Sim sim(1, SimTime{} + 1us);
    EXPECT_EQ(sim.now(), SimTime{} + 1us);
    EXPECT_EQ(to_core_time(sim.now()), time_from_ns(1000));
}

}  // namespace
}  // namespace mroce::sim
