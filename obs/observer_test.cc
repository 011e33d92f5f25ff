// obs/observer_test.cc — the observer's own rules: the event log's sequence numbers and
// bound, what counts as a rate-hint change, and the cap on connections with histograms.
#include "obs/observer.h"

#include <gtest/gtest.h>

namespace mroce::obs {
namespace {

core::TraceEvent hint(uint32_t conn, uint64_t mbps, Time at = Time{}) {
    core::TraceEvent e;
    e.kind = core::TraceKind::kRateHintChanged;
    e.connection = conn;
    e.after = mbps;
    e.at = at;
    return e;
}

TEST(Observer, EventsSinceReturnsWhatIsNewer) {
    Observer o;
    core::TraceEvent up;
    up.kind = core::TraceKind::kConnectionUp;
    EXPECT_TRUE(o.events_since(0).empty());
    o.on_trace(up);
    o.on_trace(up);
    EXPECT_EQ(o.events_since(0).size(), 2u);
    ASSERT_EQ(o.events_since(1).size(), 1u);
    EXPECT_EQ(o.events_since(1)[0].seq, 2u);
    EXPECT_TRUE(o.events_since(2).empty());
    EXPECT_TRUE(o.events_since(~uint64_t{0}).empty());  // "no events", as /metrics asks
}

TEST(Observer, LogKeepsTheLastEventsAndCountsTheRest) {
    Observer o;
    core::TraceEvent up;
    for (size_t i = 0; i < Observer::kMaxEvents + 10; ++i) o.on_trace(up);
    const auto all = o.events_since(0);
    ASSERT_EQ(all.size(), Observer::kMaxEvents);
    EXPECT_EQ(all.front().seq, 11u);
    EXPECT_EQ(o.events_dropped(), 10u);
}

TEST(Observer, RateHintChangesAreLoggedWhenTheyMoveByAQuarter) {
    Observer o;
    const Duration gap = Observer::kHintLogGap;
    o.on_trace(hint(1, 1000));            // first: logged
    o.on_trace(hint(1, 0, Time{} + gap)); // an ACK without a hint: not a change
    o.on_trace(hint(1, 1200, Time{} + gap));  // +20%: not logged
    o.on_trace(hint(1, 800, Time{} + gap));   // -20%: not logged
    o.on_trace(hint(1, 1250, Time{} + gap));  // +25%: logged, from 1000
    o.on_trace(hint(1, 100, Time{} + 2 * gap));   // logged, from 1250
    o.on_trace(hint(2, 100, Time{} + 2 * gap));   // another connection: its own history
    const auto ev = o.events_since(0);
    ASSERT_EQ(ev.size(), 4u);
    EXPECT_EQ(ev[0].event.after, 1000u);
    EXPECT_EQ(ev[1].event.before, 1000u);
    EXPECT_EQ(ev[1].event.after, 1250u);
    EXPECT_EQ(ev[2].event.before, 1250u);
    EXPECT_EQ(ev[2].event.after, 100u);
    EXPECT_EQ(ev[3].event.connection, 2u);
}

TEST(Observer, HistogramsForTheFirstConnectionsOnlyTheRestOverflow) {
    Observer o;
    for (uint32_t c = 1; c <= Observer::kMaxConnections + 5; ++c)
        o.on_rtt_sample(c, 3, std::chrono::microseconds(10), Time{});
    ASSERT_NE(o.path_rtt(1, 3), nullptr);
    EXPECT_EQ(o.path_rtt(1, 3)->count(), 1u);
    EXPECT_EQ(o.path_rtt(1, 0)->count(), 0u);  // paths below 3 exist, empty
    EXPECT_EQ(o.path_rtt(Observer::kMaxConnections + 1, 3), nullptr);
    EXPECT_EQ(o.overflow_rtt().count(), 5u);
    o.forget_except({1});
    EXPECT_NE(o.path_rtt(1, 3), nullptr);
    EXPECT_EQ(o.path_rtt(2, 3), nullptr);
}

}  // namespace
}  // namespace mroce::obs

namespace mroce::obs {
namespace {

// A flapping hint is logged at most once per kHintLogGap per connection, so it cannot push
// the connection's own events out of the bounded log.
TEST(Observer, AFlappingHintIsLoggedAtMostOncePerGap) {
    Observer o;
    core::TraceEvent up;
    up.kind = core::TraceKind::kConnectionUp;
    up.connection = 1;
    o.on_trace(up);
    const Duration step = std::chrono::microseconds(10);
    const int steps = static_cast<int>(Observer::kMaxEvents) * 4;
    for (int i = 0; i < steps; ++i) o.on_trace(hint(1, i % 2 ? 383 : 98272, Time{} + i * step));
    const auto ev = o.events_since(0);
    EXPECT_EQ(ev.front().event.kind, core::TraceKind::kConnectionUp) << "a flapping hint evicted it";
    const int64_t span = (steps - 1) * step / Observer::kHintLogGap;
    EXPECT_LE(static_cast<int64_t>(ev.size()) - 1, span + 1);
    EXPECT_GE(static_cast<int64_t>(ev.size()) - 1, span / 2) << "the flapping was hidden entirely";
}

}  // namespace
}  // namespace mroce::obs
