#include "wire/integrity.h"

#include <gtest/gtest.h>

#include <vector>

#include "wire/control.h"

namespace mroce::wire {
namespace {

std::vector<std::byte> close_packet() {
    ClosePacket c;
    c.common.dst_conn_id = 0x01020304;
    c.common.dst_token = 0x1122334455667788ULL;
    c.reason = 0;
    std::vector<std::byte> buf(kCloseSize + kIntegritySize);
    auto n = encode_close(c, buf);
    EXPECT_TRUE(n.ok());
    EXPECT_EQ(*n, kCloseSize);
    return buf;
}

// [INT-2]: the trailer is the CRC32C of every byte before it, big-endian. The expected
// bytes were computed independently (Python: crc32c of the 24 CLOSE bytes below).
TEST(Integrity, TrailerIsBigEndianCrc32cOfThePacket) {
    auto buf = close_packet();
    ASSERT_EQ(append_integrity(buf, kCloseSize), kCloseSize + kIntegritySize);
    // 02 07 00 00 01 02 03 04 11 22 33 44 55 66 77 88 00 00 00 00 00 00 00 00
    EXPECT_EQ(buf[24], std::byte{0x42});
    EXPECT_EQ(buf[25], std::byte{0xe6});
    EXPECT_EQ(buf[26], std::byte{0x7c});
    EXPECT_EQ(buf[27], std::byte{0xb5});
}

// [INT-2]: the check value "123456789" goes on the wire as E3 06 92 83.
TEST(Integrity, CheckValueBytes) {
    std::vector<std::byte> buf(13);
    const char* s = "123456789";
    for (int i = 0; i < 9; ++i) buf[i] = static_cast<std::byte>(s[i]);
    ASSERT_EQ(append_integrity(buf, 9), 13u);
    EXPECT_EQ(buf[9], std::byte{0xE3});
    EXPECT_EQ(buf[10], std::byte{0x06});
    EXPECT_EQ(buf[11], std::byte{0x92});
    EXPECT_EQ(buf[12], std::byte{0x83});
}

TEST(Integrity, AppendNeedsRoom) {
    std::vector<std::byte> buf(kCloseSize + 3);
    EXPECT_EQ(append_integrity(buf, kCloseSize), 0u);
    EXPECT_EQ(append_integrity(buf, buf.size() + 1), 0u);
}

// [INT-3]: a good trailer is removed; any flipped bit, of the packet or of the trailer,
// fails the check; a datagram too short for a header and a trailer fails.
TEST(Integrity, StripChecksEveryBit) {
    auto buf = close_packet();
    ASSERT_EQ(append_integrity(buf, kCloseSize), buf.size());
    std::span<const std::byte> packet;
    ASSERT_TRUE(strip_integrity(buf, packet));
    EXPECT_EQ(packet.size(), kCloseSize);
    EXPECT_EQ(packet.data(), buf.data());
    auto decoded = decode_close(packet);
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(decoded->common.dst_conn_id, 0x01020304u);
    for (size_t bit = 0; bit < buf.size() * 8; ++bit) {
        buf[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
        std::span<const std::byte> out;
        EXPECT_FALSE(strip_integrity(buf, out)) << bit;
        buf[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    }
    std::span<const std::byte> out;
    EXPECT_FALSE(strip_integrity(std::span<const std::byte>(buf).first(19), out));
    // [INT-3]: a packet without its trailer is a bad one (its last 4 bytes are no CRC).
    EXPECT_FALSE(strip_integrity(std::span<const std::byte>(buf).first(kCloseSize), out));
}

TEST(Integrity, HandshakePacketsCarryNone) {
    EXPECT_FALSE(carries_integrity(PacketType::kHello));
    EXPECT_FALSE(carries_integrity(PacketType::kHelloAck));
    EXPECT_FALSE(carries_integrity(PacketType::kRetry));
    for (PacketType t : {PacketType::kData, PacketType::kAck, PacketType::kNack, PacketType::kProbe,
                         PacketType::kClose})
        EXPECT_TRUE(carries_integrity(t));
}

}  // namespace
}  // namespace mroce::wire
