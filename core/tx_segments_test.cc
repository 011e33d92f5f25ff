// core/tx_segments_test.cc — a message's per-segment send state, inline and on the heap.
#include "core/tx_segments.h"

#include <gtest/gtest.h>

#include <utility>

namespace mroce::core {
namespace {

// The same operations on a message of n segments: every bit and count stays its own, and
// the state survives a move (the TxMessage is moved into its stream's queue).
void exercise(uint32_t n) {
    TxSegments t;
    EXPECT_FALSE(t.started());
    t.start(n);
    ASSERT_TRUE(t.started());
    for (uint32_t s = 0; s < n; ++s) {
        EXPECT_FALSE(t.acked(s));
        EXPECT_EQ(t.retries(s), 0u);
    }
    // Every third segment acknowledged, every fifth queued, segment s retried s % 7 times.
    for (uint32_t s = 0; s < n; ++s) {
        if (s % 3 == 0) t.set_acked(s);
        if (s % 5 == 0) {
            EXPECT_TRUE(t.try_queue(s));
        }
        t.retries(s) = static_cast<uint16_t>(s % 7);
    }
    TxSegments moved = std::move(t);
    for (uint32_t s = 0; s < n; ++s) {
        EXPECT_EQ(moved.acked(s), s % 3 == 0) << s;
        EXPECT_EQ(moved.try_queue(s), s % 5 != 0) << s;  // queued ones refuse a second time
        EXPECT_EQ(moved.retries(s), s % 7) << s;
    }
    moved.clear_acked(0);
    moved.unqueue(0);
    EXPECT_FALSE(moved.acked(0));
    EXPECT_TRUE(moved.try_queue(0));
    // A restart (the slot reused for another size) begins clean.
    moved.start(n == 1 ? 300 : 1);
    EXPECT_FALSE(moved.acked(0));
    EXPECT_TRUE(moved.try_queue(0));
    EXPECT_EQ(moved.retries(0), 0u);
}

TEST(TxSegments, InlineAndHeapKeepEverySegmentApart) {
    for (uint32_t n : {1u, 2u, 63u, 64u, 65u, 128u, 129u, 1024u}) {
        SCOPED_TRACE(n);
        exercise(n);
    }
}

}  // namespace
}  // namespace mroce::core
