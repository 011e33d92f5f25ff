#include "sim/ring_queue.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>

#include "util/rng.h"

namespace mroce::sim {
namespace {

TEST(RingQueue, BehavesLikeADequeThroughGrowthAndWraparound) {
    // Random pushes and pops against std::deque; the ring grows while its head is in the
    // middle, which is where an index slip would show.
    Rng rng(7);
    RingQueue<std::unique_ptr<int>> ring;
    std::deque<int> model;
    int next = 0;
    for (int step = 0; step < 20'000; ++step) {
        if (model.empty() || rng.uniform(100) < 55) {
            ring.push_back(std::make_unique<int>(next));
            model.push_back(next++);
        } else {
            ASSERT_EQ(*ring.front(), model.front());
            ring.pop_front();
            model.pop_front();
        }
        ASSERT_EQ(ring.size(), model.size());
        ASSERT_EQ(ring.empty(), model.empty());
    }
    while (!model.empty()) {
        ASSERT_EQ(*ring.front(), model.front());
        ring.pop_front();
        model.pop_front();
    }
    EXPECT_TRUE(ring.empty());
}

}  // namespace
}  // namespace mroce::sim
