// core/rx_window_test.cc — the receiver's per-path window: cumulative PSN, 256-bit
// bitmap, floor advance and the ACK wire order (spec [ACK-2], [ACK-10], [PATH-6]).
#include "core/rx_window.h"

#include <gtest/gtest.h>

#include <set>

#include "util/rng.h"

namespace mroce::core {
namespace {

TEST(RxWindow, InOrderAdvancesAcrossWraparound) {
    RxWindow w;
    w.reset(0xFFFFFFFEu);
    EXPECT_EQ(w.cum(), 0xFFFFFFFDu);
    for (uint32_t psn : {0xFFFFFFFEu, 0xFFFFFFFFu, 0u, 1u}) EXPECT_EQ(w.mark(psn), RxWindow::Mark::kNew);
    EXPECT_EQ(w.cum(), 1u);
    EXPECT_FALSE(w.has_gap());
    EXPECT_EQ(w.mark(1u), RxWindow::Mark::kBelowWindow);
}

// [ACK-2] a hole keeps cum; later PSNs set bits cum+1+i, in wire order MSB first.
TEST(RxWindow, HoleAndSackBits) {
    RxWindow w;
    w.reset(100);
    EXPECT_EQ(w.mark(101), RxWindow::Mark::kNew);  // 100 missing
    EXPECT_EQ(w.mark(103), RxWindow::Mark::kNew);
    EXPECT_EQ(w.mark(103), RxWindow::Mark::kDuplicate);
    EXPECT_EQ(w.cum(), 99u);
    wire::Sack s;
    w.to_wire(s);
    EXPECT_FALSE(s.test(0));  // 100
    EXPECT_TRUE(s.test(1));   // 101
    EXPECT_TRUE(s.test(3));   // 103
    EXPECT_EQ(s.bytes[0], 0x50);
    EXPECT_EQ(w.mark(99 + 256), RxWindow::Mark::kNew);        // cum + 256: last bit
    EXPECT_EQ(w.mark(99 + 257), RxWindow::Mark::kAboveWindow);
    EXPECT_EQ(w.mark(100), RxWindow::Mark::kNew);  // fills the hole: cum jumps over 101
    EXPECT_EQ(w.cum(), 101u);
}

// [PATH-6] the floor skips PSNs that never arrived and reports how many.
TEST(RxWindow, FloorSkipsAndCounts) {
    RxWindow w;
    w.reset(10);
    w.mark(12);
    w.mark(14);
    EXPECT_EQ(w.advance_to(13), 3u);  // 10, 11 and 13 skipped; 12 arrived
    EXPECT_EQ(w.cum(), 14u);          // and 14 was already there
    EXPECT_EQ(w.advance_to(5), 0u);   // a floor behind cum changes nothing
    EXPECT_EQ(w.advance_to(14 + 1000), 1000u);
    EXPECT_EQ(w.cum(), 1014u);
}

// Property: against a reference set, for random arrivals in a moving window.
TEST(RxWindow, MatchesReferenceModel) {
    const uint64_t seed = 77;
    SCOPED_TRACE(seed);
    Rng rng(seed);
    RxWindow w;
    const uint32_t start = 0xFFFFFF00u;
    w.reset(start);
    std::set<uint32_t> got;  // offsets from start that arrived
    uint32_t cum_off = 0;    // all offsets < cum_off arrived
    for (int i = 0; i < 30000; ++i) {
        const uint32_t off = cum_off + static_cast<uint32_t>(rng.uniform(300));
        const auto mark = w.mark(start + off);
        if (off >= cum_off + 256) {
            ASSERT_EQ(mark, RxWindow::Mark::kAboveWindow);
            continue;
        }
        const bool seen = off < cum_off || got.count(off);
        ASSERT_EQ(mark == RxWindow::Mark::kNew, !seen)
            << i << " off " << off << " cum_off " << cum_off << " mark " << int(mark);
        got.insert(off);
        while (got.count(cum_off)) got.erase(cum_off++);
        ASSERT_EQ(w.cum(), start + cum_off - 1) << i;
        wire::Sack s;
        w.to_wire(s);
        // bit b is PSN cum + 1 + b, i.e. offset cum_off + b
        for (uint32_t b = 0; b < 256; ++b) ASSERT_EQ(s.test(b), got.count(cum_off + b) != 0);
    }
}

}  // namespace
}  // namespace mroce::core
