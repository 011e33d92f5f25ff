#include "wire/data.h"

#include <gtest/gtest.h>

#include <vector>

namespace mroce::wire {
namespace {

TEST(Data, RoundTripSmoke) {
    DataHeader h;
    h.opcode = Opcode::kWrite;
    h.flags = data_flag::kLast;
    h.payload_len = 3;
    h.msg_len = 3;
    h.rkey = 0x11223344;
    h.remote_addr = 0x0102030405060708ULL;
    std::vector<std::byte> buf(kDataHeaderSize + 3, std::byte{0xab});
    ASSERT_TRUE(encode_data_header(h, buf).ok());
    auto p = decode_data(buf);
    ASSERT_TRUE(p.ok()) << to_string(p.error());
    EXPECT_EQ(p->hdr, h);
    EXPECT_EQ(p->payload.size(), 3u);
}

}  // namespace
}  // namespace mroce::wire
