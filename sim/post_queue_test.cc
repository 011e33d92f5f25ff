// sim/post_queue_test.cc — the simulated application's send queues: no more posted than
// the depth, the rest posted as completions come back, in order; a refusing stream fails
// the flows still waiting on it.
#include "sim/post_queue.h"

#include <gtest/gtest.h>

namespace mroce::sim {
namespace {

struct Posted {
    uint32_t flow;
    uint32_t len;
};

TEST(PostQueues, PostsUpToTheDepthThenOneMorePerCompletionInOrder) {
    PostQueues q(2);
    std::vector<Posted> got;
    const PostQueues::PostFn post = [&](uint32_t h, uint32_t s, const core::SendWr& wr) {
        EXPECT_EQ(h, 4u);
        EXPECT_EQ(s, 9u);
        EXPECT_EQ(wr.lkey, 77u);  // the template's fields are kept
        got.push_back({static_cast<uint32_t>(wr.wr_id >> 32), wr.length});
        EXPECT_EQ(static_cast<uint32_t>(wr.wr_id), wr.length);
        return Error::kOk;
    };
    core::SendWr tmpl;
    tmpl.lkey = 77;
    EXPECT_EQ(q.add(4, 9, 1, tmpl, 10, 4), 3u);  // 4 + 4 + 2
    EXPECT_EQ(q.add(4, 9, 2, tmpl, 5, 0), 1u);   // piece 0: one WRITE
    EXPECT_TRUE(q.fill(4, 9, post).empty());
    ASSERT_EQ(got.size(), 2u);
    EXPECT_TRUE(q.completed(4, 9));
    EXPECT_TRUE(q.fill(4, 9, post).empty());
    EXPECT_TRUE(q.completed(4, 9));
    EXPECT_TRUE(q.fill(4, 9, post).empty());
    ASSERT_EQ(got.size(), 4u);
    EXPECT_FALSE(q.completed(4, 9));  // nothing waits any more
    const std::vector<Posted> want{{1, 4}, {1, 4}, {1, 2}, {2, 5}};
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(got[i].flow, want[i].flow) << i;
        EXPECT_EQ(got[i].len, want[i].len) << i;
    }
    EXPECT_FALSE(q.completed(1, 1));  // an unknown queue
}

TEST(PostQueues, ARefusingStreamFailsEveryFlowWaitingOnIt) {
    PostQueues q(8);
    int calls = 0;
    const PostQueues::PostFn post = [&](uint32_t, uint32_t, const core::SendWr&) {
        return ++calls <= 2 ? Error::kOk : Error::kWrongState;
    };
    q.add(0, 1, 5, core::SendWr{}, 4, 1);
    q.add(0, 1, 6, core::SendWr{}, 7, 2);
    const auto refused = q.fill(0, 1, post);
    ASSERT_EQ(refused.size(), 2u);
    EXPECT_EQ(refused[0].flow, 5u);
    EXPECT_EQ(refused[0].wrs, 2u);  // two of its four were posted
    EXPECT_EQ(refused[0].error, Error::kWrongState);
    EXPECT_EQ(refused[1].flow, 6u);
    EXPECT_EQ(refused[1].wrs, 4u);
    EXPECT_FALSE(q.completed(0, 1));  // nothing waits: the refused were dropped
}

TEST(PostQueues, AFullStreamWaitsForItsNextCompletion) {
    PostQueues q(8);
    bool full = true;
    int posted = 0;
    const PostQueues::PostFn post = [&](uint32_t, uint32_t, const core::SendWr&) {
        if (posted == 1 && full) return Error::kExhausted;
        ++posted;
        return Error::kOk;
    };
    q.add(0, 0, 3, core::SendWr{}, 3, 1);
    EXPECT_TRUE(q.fill(0, 0, post).empty());  // one posted, then the engine is full
    EXPECT_EQ(posted, 1);
    full = false;
    EXPECT_TRUE(q.completed(0, 0));
    EXPECT_TRUE(q.fill(0, 0, post).empty());
    EXPECT_EQ(posted, 3);
}

}  // namespace
}  // namespace mroce::sim
