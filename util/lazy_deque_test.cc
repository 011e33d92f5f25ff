// util/lazy_deque_test.cc — LazyDeque behaves as a std::deque, and an empty one that was
// never pushed to has allocated nothing.
#include "util/lazy_deque.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "util/rng.h"

namespace mroce {
namespace {

TEST(LazyDeque, EmptyOnesAllocateNothing) {
    [[maybe_unused]] const size_t before = mallinfo2().uordblks;
    std::vector<LazyDeque<uint32_t>> many(1000);
    [[maybe_unused]] const size_t after = mallinfo2().uordblks;
    // (ASan's allocator keeps no mallinfo2 counts.)
#if !defined(__SANITIZE_ADDRESS__)
    // The vector's own block only: std::deque would add a map and a 512-byte block each.
    EXPECT_LE(after - before, many.size() * sizeof(LazyDeque<uint32_t>) + 64);
#endif
    for (const auto& q : many) {
        EXPECT_TRUE(q.empty());
        EXPECT_EQ(q.size(), 0u);
        EXPECT_EQ(q.begin(), q.end());
        for ([[maybe_unused]] uint32_t v : q) ADD_FAILURE() << "an element in an empty queue";
    }
}

// Random operations against std::deque.
TEST(LazyDeque, MatchesStdDeque) {
    uint64_t seed = 1;
    if (const char* s = std::getenv("MROCE_SEED")) seed = std::strtoull(s, nullptr, 0);
    SCOPED_TRACE("MROCE_SEED=" + std::to_string(seed));
    Rng rng(seed);
    LazyDeque<uint32_t> q;
    std::deque<uint32_t> ref;
    for (int step = 0; step < 20000; ++step) {
        const uint32_t v = rng.next_u32();
        switch (rng.uniform(8)) {
            case 0: q.push_back(v); ref.push_back(v); break;
            case 1: q.push_front(v); ref.push_front(v); break;
            case 2: if (!ref.empty()) { q.pop_front(); ref.pop_front(); } break;
            case 3: if (!ref.empty()) { q.pop_back(); ref.pop_back(); } break;
            case 4: if (rng.uniform(50) == 0) { q.clear(); ref.clear(); } break;
            case 5:
                if (!ref.empty()) {
                    const size_t i = rng.uniform(ref.size());
                    q.erase(std::next(q.begin(), static_cast<long>(i)));
                    ref.erase(std::next(ref.begin(), static_cast<long>(i)));
                }
                break;
            default: q.push_back(v); ref.push_back(v); break;
        }
        ASSERT_EQ(q.size(), ref.size());
        ASSERT_EQ(q.empty(), ref.empty());
        if (!ref.empty()) {
            ASSERT_EQ(q.front(), ref.front());
            ASSERT_EQ(q.back(), ref.back());
        }
        ASSERT_TRUE(std::equal(q.begin(), q.end(), ref.begin(), ref.end()));
    }
}

}  // namespace
}  // namespace mroce
