#include "wire/ack.h"

#include <gtest/gtest.h>

#include <vector>

namespace mroce::wire {
namespace {

TEST(Ack, RoundTripSmoke) {
    AckPacket a;
    a.cum_psn = 0xFFFFFFFE;
    a.sack.set(0);
    a.sack.set(255);
    a.stream_count = 2;
    a.streams[0] = {1, 2};
    a.streams[1] = {3, 4};
    std::vector<std::byte> buf(encoded_size(a));
    ASSERT_TRUE(encode_ack(a, buf).ok());
    auto d = decode_ack(buf);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, a);
}

}  // namespace
}  // namespace mroce::wire
