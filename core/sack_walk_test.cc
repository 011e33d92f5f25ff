// core/sack_walk_test.cc — the walk over one ACK's acknowledged PSNs ([ACK-2]).
#include "core/sack_walk.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace mroce::core {
namespace {

using Acked = std::vector<std::pair<uint32_t, bool>>;

struct Walked {
    Acked acked;
    SackWalk walk;
};

Walked walk(uint32_t base, uint32_t next_psn, uint32_t cum_psn, const wire::Sack& sack) {
    Walked w;
    w.walk = walk_acks(base, next_psn, cum_psn, sack,
                       [&](uint32_t psn, bool by_sack) { w.acked.emplace_back(psn, by_sack); });
    return w;
}

TEST(SackWalk, CumulativePsnAcknowledgesEveryTrackedPsnUpToIt) {
    const Walked w = walk(100, 110, 103, {});
    EXPECT_EQ(w.acked, (Acked{{100, false}, {101, false}, {102, false}, {103, false}}));
    EXPECT_TRUE(w.walk.any);
    EXPECT_EQ(w.walk.highest, 103u);
}

TEST(SackWalk, BitIIsCumPlusOnePlusIInWireOrder) {
    wire::Sack s;
    s.set(0);    // byte 0, mask 0x80
    s.set(9);    // byte 1, mask 0x40
    s.set(70);   // the second 64-bit group
    s.set(255);  // the last bit
    const Walked w = walk(0, 1000, 99, s);
    ASSERT_EQ(w.acked.size(), 100u + 4u);
    EXPECT_EQ(w.acked[99], (std::pair<uint32_t, bool>{99, false}));
    EXPECT_EQ(w.acked[100], (std::pair<uint32_t, bool>{100, true}));
    EXPECT_EQ(w.acked[101], (std::pair<uint32_t, bool>{109, true}));
    EXPECT_EQ(w.acked[102], (std::pair<uint32_t, bool>{170, true}));
    EXPECT_EQ(w.acked[103], (std::pair<uint32_t, bool>{355, true}));
    EXPECT_EQ(w.walk.highest, 355u);
    // The raw byte layout the wire carries: bit 9 is byte 1's second-highest bit.
    EXPECT_EQ(s.bytes[1], 0x40);
}

TEST(SackWalk, PsnsOutsideTheTrackedWindowAreNeverNamed) {
    // A cumulative PSN below the window names nothing; SACK bits below base (released) and
    // at or above next_psn (never sent) are skipped, as a hostile ACK might set them all.
    wire::Sack s;
    for (uint32_t i = 0; i < wire::kSackBits; ++i) s.set(i);
    const Walked w = walk(50, 60, 39, s);  // bits name 40 … 295
    ASSERT_EQ(w.acked.size(), 10u);
    for (uint32_t i = 0; i < 10; ++i) EXPECT_EQ(w.acked[i], (std::pair<uint32_t, bool>{50 + i, true}));
    EXPECT_EQ(w.walk.highest, 59u);
    const Walked none = walk(50, 60, 10, {});
    EXPECT_TRUE(none.acked.empty());
    EXPECT_FALSE(none.walk.any);
    const Walked empty_window = walk(50, 50, 49, s);
    EXPECT_TRUE(empty_window.acked.empty());
    EXPECT_FALSE(empty_window.walk.any);
}

TEST(SackWalk, SerialArithmeticAcrossTheWrap) {
    wire::Sack s;
    s.set(2);  // cum + 3 = 1
    const Walked w = walk(0xFFFFFFFEu, 4, 0xFFFFFFFEu, s);
    EXPECT_EQ(w.acked, (Acked{{0xFFFFFFFEu, false}, {1, true}}));
    EXPECT_EQ(w.walk.highest, 1u);
    EXPECT_TRUE(w.walk.any);
}

TEST(SackWalk, HighestIsTheCumulativePsnWithoutSackBits) {
    const Walked w = walk(10, 20, 14, {});
    EXPECT_EQ(w.walk.highest, 14u);
    EXPECT_EQ(w.acked.size(), 5u);
}

}  // namespace
}  // namespace mroce::core
