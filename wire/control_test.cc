#include "wire/control.h"

#include <gtest/gtest.h>

#include <vector>

namespace mroce::wire {
namespace {

TEST(Control, HelloRoundTripSmoke) {
    HelloPacket h;
    h.src_conn_id = 9;
    h.src_token = 0xdeadbeefcafef00dULL;
    h.num_paths = 8;
    h.max_payload = 4096;
    std::vector<std::byte> buf(kHelloSize);
    ASSERT_TRUE(encode_hello(h, buf).ok());
    auto d = decode_hello(buf);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, h);
}

}  // namespace
}  // namespace mroce::wire
