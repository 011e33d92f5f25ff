// tests/api/steering_test.cc — one endpoint address served by several sockets
// (datapath/udp/steering.h): the kernel runs the steering program on every datagram and
// hands it to the shard its connection id names, or, for a HELLO, the shard of its
// sender's endpoint address. Plumbing over loopback, no timing.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "datapath/udp/steering.h"
#include "datapath/udp/udp_datapath.h"
#include "tests/api/test_util.h"

namespace mroce::test {
namespace {

using datapath::UdpDatapath;

// Shards: n datapaths in one SO_REUSEPORT group on 127.0.0.1 with the program attached
// (with handshake sockets when `handshakes`).
struct Shards {
    std::vector<std::unique_ptr<UdpDatapath>> dps;
    explicit Shards(uint32_t n, bool handshakes = false) {
        datapath::UdpOptions o;
        o.reuseport = true;
        o.gro = false;
        Address at = loopback(0);
        for (uint32_t i = 0; i < n; ++i) {
            std::string err;
            auto dp = UdpDatapath::open(at, o, &err);
            EXPECT_TRUE(dp) << err;
            if (!dp) return;
            at = (*dp)->local_address();
            dps.push_back(std::move(dp).value());
        }
        std::string err;
        if (handshakes) {
            for (auto& dp : dps) EXPECT_EQ(dp->open_handshake_socket(&err), Error::kOk) << err;
        }
        EXPECT_EQ(dps.front()->attach_steering(n, handshakes, &err), Error::kOk) << err;
    }
    // which: the shard whose socket received one datagram, or -1; *handshake says whether
    // it came through that shard's handshake socket.
    int which(bool* handshake = nullptr) {
        std::array<datapath::RxPacket, 4> rx;
        for (int tries = 0; tries < 2000; ++tries) {
            for (size_t i = 0; i < dps.size(); ++i) {
                const uint64_t before = dps[i]->stats().handshakes_received;
                auto r = dps[i]->recv_batch(rx);
                if (handshake) *handshake = dps[i]->stats().handshakes_received != before;
                if (r && *r > 0) return static_cast<int>(i);
            }
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        return -1;
    }
};

// send_from: a datagram from a fresh socket on 127.0.0.1 (any source port: a path).
void send_from(const Address& to, const std::vector<uint8_t>& payload) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(to.ipv4_host_order());
    a.sin_port = htons(to.port);
    ASSERT_EQ(::sendto(fd, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&a),
                       sizeof(a)),
              static_cast<ssize_t>(payload.size()));
    ::close(fd);
}

// A version-2 packet of `type` for connection `id` (spec §3.1), 64 bytes, with
// `endpoint_port` where a HELLO carries it (§3.5, bytes 36..37).
std::vector<uint8_t> packet(uint8_t version, uint8_t type, uint32_t id, uint16_t endpoint_port) {
    std::vector<uint8_t> p(64, 0);
    p[0] = version;
    p[1] = type;
    p[4] = static_cast<uint8_t>(id >> 24);
    p[5] = static_cast<uint8_t>(id >> 16);
    p[6] = static_cast<uint8_t>(id >> 8);
    p[7] = static_cast<uint8_t>(id);
    p[36] = static_cast<uint8_t>(endpoint_port >> 8);
    p[37] = static_cast<uint8_t>(endpoint_port);
    return p;
}

constexpr uint8_t kData = 1, kHello = 4;

TEST(Steering, ConnectionIdShardBitsPickTheSocket) {
    for (uint32_t n : {2u, 3u, 4u}) {
        Shards s(n);
        ASSERT_EQ(s.dps.size(), n);
        const Address to = s.dps[0]->local_address();
        const uint32_t bits = datapath::shard_id_bits(n);
        for (uint32_t shard = 0; shard < n; ++shard) {
            // A connection id of that shard: its top bits, a random rest, a slot.
            const uint32_t id = shard << (32 - bits) | 0x00ab0003u;
            send_from(to, packet(2, kData, id, 0));
            EXPECT_EQ(s.which(), static_cast<int>(shard)) << "n " << n << " id " << std::hex << id;
        }
    }
}

TEST(Steering, HelloGoesToTheShardOfItsEndpointAddress) {
    Shards s(2);
    ASSERT_EQ(s.dps.size(), 2u);
    const Address to = s.dps[0]->local_address();
    std::array<int, 2> seen{};
    for (uint16_t port = 40000; port < 40032; ++port) {
        const uint32_t want = datapath::steering_shard(loopback(port), 2);
        send_from(to, packet(2, kHello, 0, port));
        EXPECT_EQ(s.which(), static_cast<int>(want)) << "endpoint port " << port;
        ++seen[want];
    }
    // The hash spreads endpoint ports over both shards.
    EXPECT_GT(seen[0], 4);
    EXPECT_GT(seen[1], 4);
}

TEST(Steering, VersionOneAndRuntsGoToShardZero) {
    Shards s(2);
    ASSERT_EQ(s.dps.size(), 2u);
    const Address to = s.dps[0]->local_address();
    send_from(to, packet(1, kHello, 0x80000001u, 1));
    EXPECT_EQ(s.which(), 0);
    send_from(to, {2});  // too short for the type: the program stops, index 0
    EXPECT_EQ(s.which(), 0);
}

TEST(Steering, HandshakesQueueOnTheirShardsSecondSocket) {
    Shards s(2, true);
    ASSERT_EQ(s.dps.size(), 2u);
    const Address to = s.dps[0]->local_address();
    for (uint16_t port = 41000; port < 41016; ++port) {
        bool handshake = false;
        send_from(to, packet(2, kHello, 0, port));
        EXPECT_EQ(s.which(&handshake), static_cast<int>(datapath::steering_shard(loopback(port), 2)));
        EXPECT_TRUE(handshake) << "endpoint port " << port;
        send_from(to, packet(2, kData, (port & 1u) << 31 | 0x00010001u, 0));
        EXPECT_EQ(s.which(&handshake), static_cast<int>(port & 1u));
        EXPECT_FALSE(handshake);
    }
    bool handshake = false;
    send_from(to, packet(1, kHello, 0, 7));
    EXPECT_EQ(s.which(&handshake), 0);
    EXPECT_TRUE(handshake);
}

// A flood of HELLOs fills the handshake socket, not the endpoint socket: every DATA sent
// after it is still received.
TEST(Steering, AHelloFloodDoesNotCrowdOutData) {
    Shards s(2, true);
    ASSERT_EQ(s.dps.size(), 2u);
    const Address to = s.dps[0]->local_address();
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(to.ipv4_host_order());
    a.sin_port = htons(to.port);
    // Enough HELLOs to overflow any receive buffer several times over, all to one shard.
    const auto hello = packet(2, kHello, 0, 40000);
    const int shard = static_cast<int>(datapath::steering_shard(loopback(40000), 2));
    for (int i = 0; i < 200000; ++i)
        (void)::sendto(fd, hello.data(), hello.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    constexpr int kData = 200;
    const uint32_t id = static_cast<uint32_t>(shard) << 31 | 0x00010001u;
    const auto data = packet(2, 1, id, 0);
    for (int i = 0; i < kData; ++i)
        ASSERT_EQ(::sendto(fd, data.data(), data.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof(a)),
                  static_cast<ssize_t>(data.size()));
    ::close(fd);
    std::array<datapath::RxPacket, 32> rx;
    int data_seen = 0, hellos_seen = 0;
    for (int idle = 0; idle < 200;) {
        auto r = s.dps[shard]->recv_batch(rx);
        ASSERT_TRUE(r.ok());
        if (*r == 0) {
            ++idle;
            std::this_thread::sleep_for(std::chrono::microseconds(100));
            continue;
        }
        for (size_t i = 0; i < *r; ++i) (rx[i].data[1] == std::byte{kHello} ? hellos_seen : data_seen)++;
    }
    std::printf("HELLOs received %d of 200000 (the rest dropped by the kernel), DATA %d of %d\n",
                hellos_seen, data_seen, kData);
    EXPECT_EQ(data_seen, kData);
    EXPECT_LT(hellos_seen, 200000);  // the flood did overflow its socket
}

TEST(Steering, ShardIdBits) {
    EXPECT_EQ(datapath::shard_id_bits(1), 0u);
    EXPECT_EQ(datapath::shard_id_bits(2), 1u);
    EXPECT_EQ(datapath::shard_id_bits(3), 2u);
    EXPECT_EQ(datapath::shard_id_bits(16), 4u);
    EXPECT_EQ(datapath::steering_shard(loopback(4797), 1), 0u);
}

}  // namespace
}  // namespace mroce::test
