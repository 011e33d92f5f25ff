#include "util/seq.h"

#include <gtest/gtest.h>

namespace mroce {
namespace {

TEST(Seq, ComparesAcrossWraparound) {
    EXPECT_TRUE(seq_lt(0xFFFFFFF0u, 5u));
    EXPECT_TRUE(seq_gt(5u, 0xFFFFFFF0u));
    EXPECT_EQ(seq_diff(5u, 0xFFFFFFFBu), 10);
    EXPECT_EQ(seq_max(0xFFFFFFFFu, 1u), 1u);
    EXPECT_TRUE(seq_le(7u, 7u));
    EXPECT_EQ(gen_diff(1, 255), 2);
}

}  // namespace
}  // namespace mroce
