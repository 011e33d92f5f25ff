// core/rx_ring_test.cc — a stream's receive slots grow with the messages in flight
// ([STREAM-3]), and growing keeps every slot's state where the next lookup finds it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "core/stream.h"
#include "util/rng.h"
#include "util/seq.h"

namespace mroce::core {
namespace {

TEST(RxRing, GrowsOnlyAsFarAsAMessageArrivesAhead) {
    RxRing r;
    EXPECT_TRUE(r.empty());
    r.make_room(7, 0).msg_seq = 7;  // one message in flight: one slot
    EXPECT_EQ(r.size(), 1u);
    r.make_room(8, 1);
    EXPECT_EQ(r.size(), 2u);
    r.make_room(12, 5);
    EXPECT_EQ(r.size(), 8u);
    r.make_room(10, 3);  // within the ring: no growth
    EXPECT_EQ(r.size(), 8u);
    r.make_room(7 + kStreamWindow - 1, kStreamWindow - 1);
    EXPECT_EQ(r.size(), kStreamWindow);  // never past the stream window
}

// A reference model: messages of a stream arrive in any order within the window (their
// msg_seq wrapping past 2^32), each is looked up again while it is in flight, and the
// oldest is delivered when complete. Every active slot keeps its msg_seq and length
// through every growth.
TEST(RxRing, KeepsEveryActiveSlotThroughGrowth) {
    uint64_t seed = 1;
    if (const char* s = std::getenv("MROCE_SEED")) seed = std::strtoull(s, nullptr, 0);
    for (uint64_t round = 0; round < 200; ++round) {
        SCOPED_TRACE("MROCE_SEED=" + std::to_string(seed + round));
        Rng rng(seed + round);
        RxRing r;
        uint32_t delivered = 0xffffffffu - static_cast<uint32_t>(rng.uniform(300));
        std::map<uint32_t, uint32_t> in_flight;  // ahead -> length
        for (int step = 0; step < 2000; ++step) {
            const uint32_t limit = 1 + static_cast<uint32_t>(rng.uniform(kStreamWindow));
            const uint32_t ahead = static_cast<uint32_t>(rng.uniform(limit));
            const uint32_t seq = delivered + ahead;
            if (!in_flight.count(ahead)) {
                RxMessage& m = r.make_room(seq, ahead);
                ASSERT_FALSE(m.active) << "a slot still held by another message";
                m.active = true;
                m.msg_seq = seq;
                m.msg_len = static_cast<uint32_t>(rng.next_u32());
                in_flight[ahead] = m.msg_len;
            }
            ASSERT_LE(r.size(), kStreamWindow);
            for (const auto& [a, len] : in_flight) {
                const RxMessage& m = r.at(delivered + a);
                ASSERT_TRUE(m.active);
                ASSERT_EQ(m.msg_seq, delivered + a);
                ASSERT_EQ(m.msg_len, len);
            }
            if (in_flight.count(0) && rng.uniform(2) == 0) {  // the oldest completes
                r.at(delivered).active = false;
                std::map<uint32_t, uint32_t> moved;
                for (const auto& [a, len] : in_flight)
                    if (a != 0) moved[a - 1] = len;
                in_flight.swap(moved);
                ++delivered;
            }
        }
    }
}

}  // namespace
}  // namespace mroce::core
