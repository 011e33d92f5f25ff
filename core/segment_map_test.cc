// core/segment_map_test.cc — a message's receive state in fixed space: the sliding
// segment window of [PLACE-31] and the held tail of [PLACE-12].
#include "core/segment_map.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <vector>

#include "util/rng.h"

namespace mroce::core {
namespace {

TEST(SegmentMap, OneSegmentMessage) {
    SegmentMap m;
    m.reset(1);
    EXPECT_TRUE(m.others_written());  // a lone segment is never early
    EXPECT_FALSE(m.complete());
    EXPECT_EQ(m.add(0), SegmentMap::Add::kNew);
    EXPECT_TRUE(m.complete());
    EXPECT_EQ(m.add(0), SegmentMap::Add::kDuplicate);
}

// The window is kSegmentWindow segments above the first one not written; it slides as the
// run below it fills, and positions are reused a window later.
TEST(SegmentMap, WindowSlidesWithTheFirstMissingSegment) {
    SegmentMap m;
    m.reset(3 * kSegmentWindow);
    EXPECT_EQ(m.add(kSegmentWindow), SegmentMap::Add::kOutOfWindow);
    EXPECT_EQ(m.add(kSegmentWindow - 1), SegmentMap::Add::kNew);
    EXPECT_EQ(m.base(), 0u);
    for (uint32_t s = 1; s < kSegmentWindow - 1; ++s) ASSERT_EQ(m.add(s), SegmentMap::Add::kNew);
    EXPECT_EQ(m.base(), 0u);
    EXPECT_FALSE(m.others_written());
    EXPECT_EQ(m.add(0), SegmentMap::Add::kNew);
    EXPECT_EQ(m.base(), kSegmentWindow);  // the whole run
    // Position 0 is now segment kSegmentWindow's: its old bit must not read as written.
    EXPECT_EQ(m.add(kSegmentWindow), SegmentMap::Add::kNew);
    EXPECT_EQ(m.add(kSegmentWindow), SegmentMap::Add::kDuplicate);
    EXPECT_EQ(m.add(5), SegmentMap::Add::kDuplicate);  // below base
    EXPECT_EQ(m.add(2 * kSegmentWindow + 1), SegmentMap::Add::kOutOfWindow);
    EXPECT_EQ(m.add(2 * kSegmentWindow), SegmentMap::Add::kNew);  // base + W - 1
}

// Against a reference set: any arrival order within the sender's rule (never more than a
// window above the first segment not yet acknowledged), with duplicates, completes exactly
// when every segment is in, and reports each segment new exactly once.
TEST(SegmentMap, MatchesAReferenceSetInAnyOrder) {
    uint64_t seed = 1;
    if (const char* s = std::getenv("MROCE_SEED")) seed = std::strtoull(s, nullptr, 0);
    for (uint64_t round = 0; round < 200; ++round) {
        SCOPED_TRACE("MROCE_SEED=" + std::to_string(seed + round));
        Rng rng(seed + round);
        const uint32_t nseg = 1 + static_cast<uint32_t>(rng.uniform(5 * kSegmentWindow));
        SegmentMap m;
        m.reset(nseg);
        std::set<uint32_t> in;
        uint32_t floor = 0;  // the sender's: first segment it has not seen acknowledged
        while (in.size() < nseg) {
            const uint32_t hi = std::min<uint32_t>(nseg, floor + kSegmentWindow);
            const uint32_t seg = floor + static_cast<uint32_t>(rng.uniform(hi - floor));
            const bool fresh = !in.count(seg);
            ASSERT_EQ(m.others_written(), floor + 1 >= nseg);
            ASSERT_EQ(m.add(seg), fresh ? SegmentMap::Add::kNew : SegmentMap::Add::kDuplicate);
            in.insert(seg);
            ASSERT_EQ(m.complete(), in.size() == nseg);
            while (floor < nseg && in.count(floor)) ++floor;
            ASSERT_EQ(m.base(), floor);
        }
    }
}

TEST(HeldTail, HoldsTheLastBytesOfTheSegment) {
    std::vector<std::byte> seg(300);
    for (size_t i = 0; i < seg.size(); ++i) seg[i] = static_cast<std::byte>(i);
    HeldTail t;
    EXPECT_FALSE(t.held());
    EXPECT_EQ(t.split(8192, seg.data(), seg.size()), 300u - kHeldTailBytes);
    EXPECT_TRUE(t.held());
    EXPECT_EQ(t.off, 8192u + 300 - kHeldTailBytes);
    EXPECT_EQ(t.len, kHeldTailBytes);
    EXPECT_EQ(t.bytes[0], static_cast<std::byte>(300 - kHeldTailBytes));
    // A segment shorter than the tail is held whole.
    EXPECT_EQ(t.split(4096, seg.data(), 10), 0u);
    EXPECT_EQ(t.off, 4096u);
    EXPECT_EQ(t.len, 10u);
    t.clear();
    EXPECT_FALSE(t.held());
}

}  // namespace
}  // namespace mroce::core
