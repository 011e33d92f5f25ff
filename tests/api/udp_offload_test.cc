// tests/api/udp_offload_test.cc — UDP GSO on send and GRO on receive, and the plain
// sendmmsg/recvmmsg fallback: every combination delivers every datagram once, byte for
// byte, with its ECN bits and source port, datagrams sent in two pieces (a header and a
// payload that lies apart) included. Plumbing only (STYLE §6): no timing, and no loss
// assertion beyond "everything sent on loopback arrives" with buffers far larger than the
// burst.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "datapath/udp/udp_datapath.h"
#include "tests/api/test_util.h"

namespace mroce::test {
namespace {

using datapath::RxPacket;
using datapath::TxPacket;
using datapath::UdpDatapath;
using datapath::UdpOptions;

struct Offloads {
    bool gso;
    bool gro;
    bool ipv6;
};

std::string name_of(const ::testing::TestParamInfo<Offloads>& info) {
    return std::string(info.param.gso ? "Gso" : "NoGso") + (info.param.gro ? "Gro" : "NoGro") +
           (info.param.ipv6 ? "V6" : "V4");
}

// kCount datagrams: mostly full 4168-byte DATA-sized ones, every 7th a short ACK-sized
// one (which ends a GSO super-packet), ECN switching every 50, three source ports taking
// turns in blocks of 20 (so runs of one socket are long enough to batch).
constexpr size_t kCount = 400;
constexpr size_t kFull = 4168;

size_t size_of(size_t i) { return i % 7 == 6 ? 90 + i % 5 : kFull; }
uint8_t ecn_of(size_t i) { return (i / 50) % 2 ? ecn::kCe : ecn::kEct0; }
std::byte byte_of(size_t i, size_t k) { return static_cast<std::byte>(i * 31 + k * 7 + (k >> 8)); }

// make_payload: the index in the first 4 bytes, then a pattern of (index, offset), so a
// datagram cut or shifted at a segment boundary is caught.
std::vector<std::byte> make_payload(size_t i) {
    std::vector<std::byte> p(size_of(i));
    const auto idx = static_cast<uint32_t>(i);
    std::memcpy(p.data(), &idx, sizeof(idx));
    for (size_t k = sizeof(idx); k < p.size(); ++k) p[k] = byte_of(i, k);
    return p;
}

class UdpOffload : public ::testing::TestWithParam<Offloads> {};

TEST_P(UdpOffload, DeliversEveryDatagramIntactWithItsEcnBits) {
    const Offloads o = GetParam();
    Address local = loopback();
    if (o.ipv6) {
        local = Address{};
        local.ip[15] = 1;  // ::1
    }
    UdpOptions opt;
    opt.gso = o.gso;
    opt.gro = o.gro;
    std::string why;
    auto tx_dp = UdpDatapath::open(local, opt, &why);
    if (!tx_dp.ok() && o.ipv6) GTEST_SKIP() << "no IPv6 loopback here: " << why;
    ASSERT_TRUE(tx_dp.ok()) << why;
    auto rx_dp = UdpDatapath::open(local, opt, &why);
    ASSERT_TRUE(rx_dp.ok()) << why;
    UdpDatapath& sender = **tx_dp;
    UdpDatapath& receiver = **rx_dp;
    // Detected at run time: never on when not asked for (this kernel offers both).
    if (!o.gso) {
        EXPECT_FALSE(sender.gso_enabled());
    }
    if (!o.gro) {
        EXPECT_FALSE(receiver.gro_enabled());
    }

    const uint16_t base_port = sender.local_address().port;
    std::vector<std::vector<std::byte>> payloads;
    std::vector<TxPacket> tx(kCount);
    for (size_t i = 0; i < kCount; ++i) payloads.push_back(make_payload(i));
    for (size_t i = 0; i < kCount; ++i) {
        // Every third datagram in two pieces, a DATA header and its payload lying apart
        // (core::Engine::poll_transmit_in_place), inside the same super-packets as the rest.
        const std::span<const std::byte> whole(payloads[i]);
        const bool apart = i % 3 == 1 && whole.size() > 72;
        tx[i].data = apart ? whole.first(72) : whole;
        tx[i].payload = apart ? whole.subspan(72) : std::span<const std::byte>{};
        tx[i].meta.src = sender.local_address();
        tx[i].meta.dst = receiver.local_address();
        tx[i].meta.ecn = ecn_of(i);
    }
    // Blocks of 20 take turns on the endpoint socket and two path sockets, bound by the
    // datapath when first used.
    std::vector<uint16_t> extra;
    for (int k = 0; k < 2; ++k) {
        auto probe = UdpDatapath::open(local.with_port(0), opt, &why);
        ASSERT_TRUE(probe.ok()) << why;
        extra.push_back((*probe)->local_address().port);
    }  // closed again: the ports are free for the sender's path sockets
    for (size_t i = 0; i < kCount; ++i) {
        const size_t block = (i / 20) % 3;
        tx[i].meta.src.port = block == 0 ? base_port : extra[block - 1];
    }

    // Send in chunks the driver would use, so several sendmmsg calls and super-packets.
    for (size_t at = 0; at < kCount;) {
        const size_t n = std::min<size_t>(64, kCount - at);
        auto r = sender.send_batch(std::span<const TxPacket>(tx.data() + at, n));
        ASSERT_TRUE(r.ok());
        at += *r;  // back-pressure: retry the rest
    }
    EXPECT_EQ(sender.stats().packets_sent, kCount);
    EXPECT_EQ(sender.stats().send_errors, 0u) << sender.last_error();
    if (sender.gso_enabled()) {
        EXPECT_GT(sender.stats().gso_sends, 0u);
    } else {
        EXPECT_EQ(sender.stats().gso_sends, 0u);
    }

    // Receive in batches of 7, smaller than a super-packet: split super-packets continue
    // in the next call.
    std::map<uint32_t, int> seen;
    std::vector<RxPacket> batch(7);
    ASSERT_TRUE(eventually(
        [&] {
            auto r = receiver.recv_batch(batch);
            EXPECT_TRUE(r.ok());
            for (size_t k = 0; r.ok() && k < *r; ++k) {
                const RxPacket& p = batch[k];
                uint32_t idx = 0;
                if (p.data.size() < sizeof(idx)) {
                    ADD_FAILURE() << "short datagram of " << p.data.size() << " bytes";
                    continue;
                }
                std::memcpy(&idx, p.data.data(), sizeof(idx));
                if (idx >= kCount) {
                    ADD_FAILURE() << "bad index " << idx;
                    continue;
                }
                ++seen[idx];
                EXPECT_EQ(p.data.size(), size_of(idx)) << "datagram " << idx;
                EXPECT_TRUE(std::equal(p.data.begin(), p.data.end(), payloads[idx].begin(),
                                       payloads[idx].end()))
                    << "datagram " << idx << " corrupted";
                EXPECT_EQ(p.meta.ecn, ecn_of(idx)) << "datagram " << idx;
                EXPECT_EQ(p.meta.src, sender.local_address().with_port(tx[idx].meta.src.port))
                    << "datagram " << idx;
                EXPECT_EQ(p.meta.dst, receiver.local_address());
            }
            return seen.size() == kCount;
        },
        std::chrono::milliseconds(5000)));
    for (const auto& [idx, count] : seen) EXPECT_EQ(count, 1) << "datagram " << idx;
    EXPECT_EQ(receiver.stats().packets_received, kCount);
    EXPECT_EQ(receiver.stats().receive_truncated, 0u);
    // GRO only merges what GSO sent as one super-packet on loopback (no NAPI to merge).
    if (receiver.gro_enabled() && sender.gso_enabled()) {
        EXPECT_GT(receiver.stats().gro_receives, 0u);
    }
    if (!receiver.gro_enabled()) {
        EXPECT_EQ(receiver.stats().gro_receives, 0u);
    }
}

INSTANTIATE_TEST_SUITE_P(Combinations, UdpOffload,
                         ::testing::Values(Offloads{true, true, false},
                                           Offloads{true, false, false},
                                           Offloads{false, true, false},
                                           Offloads{false, false, false},
                                           Offloads{true, true, true},
                                           Offloads{false, false, true}),
                         name_of);

}  // namespace
}  // namespace mroce::test
