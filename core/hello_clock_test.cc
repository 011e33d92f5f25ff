// core/hello_clock_test.cc — [CONN-32] [CC-20]: HELLOs numbered 1..255, and the send time of
// the one a HELLO_ACK answers.
#include "core/hello_clock.h"

#include <gtest/gtest.h>

namespace mroce::core {
namespace {

using namespace std::chrono_literals;

TEST(HelloClock, AnswerIsTimedFromTheHelloItEchoes) {
    HelloClock c;
    EXPECT_FALSE(c.any());
    const Time t0{};
    EXPECT_EQ(c.stamp(t0 + 1us), 1u);
    EXPECT_EQ(c.stamp(t0 + 3us), 2u);
    EXPECT_EQ(c.stamp(t0 + 5us), 3u);
    EXPECT_TRUE(c.any());
    EXPECT_EQ(c.latest(), t0 + 5us);
    EXPECT_EQ(c.answered_at(1), t0 + 1us);
    EXPECT_EQ(c.answered_at(2), t0 + 3us);
    // No echo (an older peer) or a number never sent: the latest HELLO, the shorter round trip.
    EXPECT_EQ(c.answered_at(0), t0 + 5us);
    EXPECT_EQ(c.answered_at(4), t0 + 5us);
}

// Numbers wrap from 255 to 1 (0 means "no number"), and only the last kMemory are kept: an
// echo of a forgotten number reads as the latest HELLO, never as the one that now shares
// its slot.
TEST(HelloClock, NumbersWrapPastZeroAndOldOnesAreForgotten) {
    HelloClock c;
    const Time t0{};
    uint8_t n = 0;
    for (int i = 1; i <= 300; ++i) {
        n = c.stamp(t0 + std::chrono::microseconds(i));
        ASSERT_NE(n, 0u);
        ASSERT_EQ(n, (i - 1) % 255 + 1);
    }
    EXPECT_EQ(c.answered_at(n), t0 + 300us);
    const uint8_t recent = static_cast<uint8_t>(n - (HelloClock::kMemory - 1));
    EXPECT_EQ(c.answered_at(recent), t0 + std::chrono::microseconds(300 - (HelloClock::kMemory - 1)));
    const uint8_t forgotten = static_cast<uint8_t>(n - HelloClock::kMemory);
    EXPECT_EQ(c.answered_at(forgotten), c.latest());
}

}  // namespace
}  // namespace mroce::core
