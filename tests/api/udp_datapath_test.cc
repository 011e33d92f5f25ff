// tests/api/udp_datapath_test.cc — the Linux UDP datapath over loopback: addressing, ECN
// bits on send and receive, batching, lazily bound source-port sockets, the wake fd and
// error reporting. Plumbing only: no timing or loss assertions (STYLE §6).
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "datapath/udp/udp_datapath.h"
#include "tests/api/test_util.h"

namespace mroce::test {
namespace {

using datapath::RxPacket;
using datapath::TxPacket;
using datapath::UdpDatapath;

// RawSocket is a plain IPv4 UDP socket on 127.0.0.1, to look at what the datapath does
// from the outside.
struct RawSocket {
    int fd = -1;
    uint16_t port = 0;
    explicit RawSocket(uint16_t want_port = 0) {
        fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(want_port);
        if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
            ::close(fd);
            fd = -1;
            return;
        }
        socklen_t len = sizeof(a);
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
        port = ntohs(a.sin_port);
    }
    ~RawSocket() {
        if (fd >= 0) ::close(fd);
    }
    Address address() const { return loopback(port); }
    void send_to(const Address& to, const std::string& payload, int tos) {
        ::setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(to.ipv4_host_order());
        a.sin_port = htons(to.port);
        ASSERT_EQ(::sendto(fd, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&a),
                           sizeof(a)),
                  static_cast<ssize_t>(payload.size()));
    }
    // receive waits up to 2 s for one datagram; returns its payload, source port and TOS.
    bool receive(std::string& payload, uint16_t& from_port, int& tos) {
        int one = 1;
        ::setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 2000) != 1) return false;
        char buf[2048];
        alignas(cmsghdr) char control[128];
        sockaddr_in from{};
        iovec iov{buf, sizeof(buf)};
        msghdr h{};
        h.msg_name = &from;
        h.msg_namelen = sizeof(from);
        h.msg_iov = &iov;
        h.msg_iovlen = 1;
        h.msg_control = control;
        h.msg_controllen = sizeof(control);
        const ssize_t n = ::recvmsg(fd, &h, 0);
        if (n < 0) return false;
        payload.assign(buf, static_cast<size_t>(n));
        from_port = ntohs(from.sin_port);
        tos = -1;
        for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c))
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS)
                tos = *reinterpret_cast<unsigned char*>(CMSG_DATA(c));
        return true;
    }
};

std::unique_ptr<UdpDatapath> open_loopback() {
    std::string why;
    auto dp = UdpDatapath::open(loopback(), {}, &why);
    EXPECT_TRUE(dp.ok()) << why;
    return dp.ok() ? std::move(dp).value() : nullptr;
}

std::span<const std::byte> bytes_of(const std::string& s) {
    return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

// receive_some polls recv_batch for up to 2 s until at least `want` datagrams arrived.
size_t receive_some(UdpDatapath& dp, std::vector<RxPacket>& rx, std::vector<std::vector<std::byte>>& bufs,
                    size_t want) {
    size_t got = 0;
    std::vector<RxPacket> batch(UdpDatapath::kMaxBatch);
    eventually(
        [&] {
            auto r = dp.recv_batch(batch);
            EXPECT_TRUE(r.ok());
            for (size_t i = 0; r.ok() && i < *r; ++i) {
                rx.push_back(batch[i]);
                bufs.emplace_back(batch[i].data.begin(), batch[i].data.end());
                ++got;
            }
            return got >= want;
        },
        std::chrono::milliseconds(2000));
    return got;
}

TEST(UdpDatapath, OpenReportsTheEphemeralPortAndAClearBindError) {
    auto dp = open_loopback();
    ASSERT_TRUE(dp);
    EXPECT_NE(dp->local_address().port, 0);
    EXPECT_EQ(dp->local_address().ipv4_host_order(), 0x7f000001u);
    EXPECT_GE(dp->wake_fd(), 0);
    // The same port again: the one-line message names the address and the cause.
    std::string why;
    auto again = UdpDatapath::open(dp->local_address(), {}, &why);
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.error(), Error::kIo);
    EXPECT_EQ(why, "udp: bind " + dp->local_address().to_string() + ": Address already in use");
}

TEST(UdpDatapath, ClockIsMonotonicNanoseconds) {
    auto dp = open_loopback();
    ASSERT_TRUE(dp);
    const Time a = dp->now();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const Time b = dp->now();
    EXPECT_GE(b - a, std::chrono::milliseconds(2));
    EXPECT_LT(b - a, std::chrono::seconds(2));
}

// [UDP-5]: the datapath sends with the ECN bits the engine asked for (ECT(0)), from the
// source port of the path, and reports the TOS byte of what it receives.
TEST(UdpDatapath, SetsEct0OnSendAndReadsTheTosByteOnReceive) {
    auto dp = open_loopback();
    ASSERT_TRUE(dp);
    RawSocket peer;
    ASSERT_GE(peer.fd, 0);

    // Out: through the endpoint socket (source port = endpoint port) and through a lazily
    // bound per-path socket.
    const std::string hello = "ect0 from the endpoint port";
    TxPacket p;
    p.data = bytes_of(hello);
    p.meta.src = dp->local_address();
    p.meta.dst = peer.address();
    p.meta.ecn = ecn::kEct0;
    ASSERT_EQ(*dp->send_batch({&p, 1}), 1u);
    std::string got;
    uint16_t from = 0;
    int tos = -1;
    ASSERT_TRUE(peer.receive(got, from, tos));
    EXPECT_EQ(got, hello);
    EXPECT_EQ(from, dp->local_address().port);
    EXPECT_EQ(tos & 0x3, ecn::kEct0);

    RawSocket reserve;  // find a free port, then free it for the datapath to bind
    const uint16_t path_port = reserve.port;
    ::close(reserve.fd);
    reserve.fd = -1;
    p.meta.src.port = path_port;
    ASSERT_EQ(*dp->send_batch({&p, 1}), 1u);
    ASSERT_TRUE(peer.receive(got, from, tos));
    EXPECT_EQ(from, path_port);
    EXPECT_EQ(tos & 0x3, ecn::kEct0);
    EXPECT_EQ(dp->stats().path_sockets_opened, 1u);

    // In: every codepoint is reported as sent.
    for (int codepoint : {ecn::kNotEct, ecn::kEct1, ecn::kEct0, ecn::kCe}) {
        peer.send_to(dp->local_address(), "tos", codepoint);
        std::vector<RxPacket> rx;
        std::vector<std::vector<std::byte>> bufs;
        ASSERT_EQ(receive_some(*dp, rx, bufs, 1), 1u);
        EXPECT_EQ(rx[0].meta.ecn, codepoint);
        EXPECT_EQ(rx[0].meta.src, peer.address());
        EXPECT_EQ(rx[0].meta.dst, dp->local_address());
        EXPECT_EQ(rx[0].data.size(), 3u);
    }
}

// The engine's view: a datagram sent through the datapath to itself on a path port comes
// back with ECT(0), the path's source port and the local address as destination.
TEST(UdpDatapath, SendsToItselfThroughAPathSocket) {
    auto dp = open_loopback();
    ASSERT_TRUE(dp);
    RawSocket reserve;
    const uint16_t path_port = reserve.port;
    ::close(reserve.fd);
    reserve.fd = -1;

    // A batch of 70 on one path (three sendmmsg calls), ECT(0) then ECT(1): the socket's
    // TOS follows the first packet, the others carry theirs in a cmsg.
    std::vector<std::string> payloads;
    for (int i = 0; i < 70; ++i) payloads.push_back("packet " + std::to_string(i));
    std::vector<TxPacket> tx(payloads.size());
    for (size_t i = 0; i < tx.size(); ++i) {
        tx[i].data = bytes_of(payloads[i]);
        tx[i].meta.src = dp->local_address().with_port(path_port);
        tx[i].meta.dst = dp->local_address();
        tx[i].meta.ecn = i < 40 ? ecn::kEct0 : ecn::kEct1;
    }
    auto sent = dp->send_batch(tx);
    ASSERT_TRUE(sent.ok());
    ASSERT_EQ(*sent, tx.size());
    EXPECT_EQ(dp->stats().tos_changes, 1u);  // 0 -> ECT(0)
    EXPECT_GE(dp->stats().tos_cmsgs, 1u);    // the ECT(1) ones

    std::vector<RxPacket> rx;
    std::vector<std::vector<std::byte>> bufs;
    ASSERT_EQ(receive_some(*dp, rx, bufs, tx.size()), tx.size());
    for (size_t i = 0; i < rx.size(); ++i) {
        // One socket, one route: loopback keeps the order.
        const std::string got(reinterpret_cast<const char*>(bufs[i].data()), bufs[i].size());
        EXPECT_EQ(got, payloads[i]);
        EXPECT_EQ(rx[i].meta.ecn, i < 40 ? ecn::kEct0 : ecn::kEct1);
        EXPECT_EQ(rx[i].meta.src.port, path_port);
        EXPECT_EQ(rx[i].meta.dst, dp->local_address());
    }
    EXPECT_EQ(dp->stats().packets_sent, tx.size());
    EXPECT_EQ(dp->stats().packets_received, tx.size());
}

// A payload that lies apart in memory its owner has unmapped meanwhile (an application
// that freed a buffer with work outstanding): the kernel refuses that datagram (EFAULT),
// which is counted and dropped; the socket is not declared broken and the rest of the
// batch, and later batches, still leave.
TEST(UdpDatapath, APayloadInUnmappedMemoryCostsOnlyItsDatagram) {
    auto dp = open_loopback();
    ASSERT_TRUE(dp);
    const long page = ::sysconf(_SC_PAGESIZE);
    void* gone = ::mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(gone, MAP_FAILED);
    ASSERT_EQ(::munmap(gone, static_cast<size_t>(page)), 0);
    const std::string head_a = "head a", head_b = "head b", body = std::string(600, 'x');
    std::array<TxPacket, 2> tx;
    tx[0].data = bytes_of(head_a);
    tx[0].payload = std::span<const std::byte>(static_cast<const std::byte*>(gone), 600);
    tx[1].data = bytes_of(head_b);
    tx[1].payload = bytes_of(body);
    tx[1].meta.ecn = ecn::kEct1;  // another TOS: a message of its own
    for (TxPacket& t : tx) {
        t.meta.src = dp->local_address();
        t.meta.dst = dp->local_address();
    }
    tx[0].meta.ecn = ecn::kEct0;
    auto sent = dp->send_batch(tx);
    ASSERT_TRUE(sent.ok()) << dp->last_error();
    EXPECT_EQ(*sent, tx.size());
    EXPECT_EQ(dp->stats().send_errors, 1u);
    std::vector<RxPacket> rx;
    std::vector<std::vector<std::byte>> bufs;
    ASSERT_EQ(receive_some(*dp, rx, bufs, 1), 1u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(bufs[0].data()), bufs[0].size()), head_b + body);
}

// [STREAM-14]: each traffic class leaves with its DSCP (default 8c, CS0..CS7; or the
// configured map) and the engine's ECN bits, interleaved classes on one path included: a
// GSO super-packet never mixes two classes.
TEST(UdpDatapath, MarksEachTrafficClassWithItsDscp) {
    datapath::UdpOptions opt;
    opt.dscp_by_class[3] = 46;  // EF instead of CS3
    std::string why;
    auto r = UdpDatapath::open(loopback(), opt, &why);
    ASSERT_TRUE(r.ok()) << why;
    auto dp = std::move(r).value();
    RawSocket peer;
    ASSERT_GE(peer.fd, 0);
    RawSocket reserve;
    const uint16_t path_port = reserve.port;
    ::close(reserve.fd);
    reserve.fd = -1;

    // Equal-size datagrams to one destination (GSO would group them), classes 1,1,5,5,1,3,
    // 0, from a path socket and from the endpoint socket.
    const std::vector<uint8_t> classes{1, 1, 5, 5, 1, 3, 0};
    std::vector<std::string> payloads;
    std::vector<TxPacket> tx(2 * classes.size());
    for (size_t i = 0; i < tx.size(); ++i) payloads.push_back("class packet " + std::to_string(10 + i));
    for (size_t i = 0; i < tx.size(); ++i) {
        tx[i].data = bytes_of(payloads[i]);
        tx[i].meta.src = i < classes.size() ? dp->local_address().with_port(path_port)
                                            : dp->local_address();
        tx[i].meta.dst = peer.address();
        tx[i].meta.ecn = ecn::kEct0;
        tx[i].meta.traffic_class = classes[i % classes.size()];
    }
    ASSERT_EQ(*dp->send_batch(tx), tx.size());
    for (size_t i = 0; i < tx.size(); ++i) {
        std::string got;
        uint16_t from = 0;
        int tos = -1;
        ASSERT_TRUE(peer.receive(got, from, tos)) << "datagram " << i;
        ASSERT_EQ(got, payloads[i]);  // one socket each, loopback: in order
        const int cls = classes[i % classes.size()];
        const int dscp = cls == 3 ? 46 : 8 * cls;
        EXPECT_EQ(tos >> 2, dscp) << "class " << cls;
        EXPECT_EQ(tos & 0x3, ecn::kEct0) << "class " << cls;
    }
    EXPECT_EQ(dp->stats().packets_sent, tx.size());
    EXPECT_GE(dp->stats().tos_cmsgs, 4u);  // per socket: the runs of 5, 1, 3 and 0
}

TEST(UdpDatapath, RefusesADscpAboveSixtyThree) {
    datapath::UdpOptions opt;
    opt.dscp_by_class[6] = 64;
    std::string why;
    auto r = UdpDatapath::open(loopback(), opt, &why);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error(), Error::kInvalidArgument);
    EXPECT_EQ(why, "udp: dscp_by_class[6] = 64 is not a DSCP (0..63)");
}

// A source port taken by someone else: counted, reported, the packet dropped (the engine
// sees a lossy path and re-rolls it); the other packets of the batch still go out.
TEST(UdpDatapath, TakenSourcePortIsCountedAndDropped) {
    auto dp = open_loopback();
    ASSERT_TRUE(dp);
    RawSocket squatter;  // holds the port
    RawSocket peer;
    const std::string a = "dropped", b = "delivered";
    std::array<TxPacket, 2> tx;
    tx[0].data = bytes_of(a);
    tx[0].meta.src = dp->local_address().with_port(squatter.port);
    tx[0].meta.dst = peer.address();
    tx[0].meta.ecn = ecn::kEct0;
    tx[1] = tx[0];
    tx[1].data = bytes_of(b);
    tx[1].meta.src.port = dp->local_address().port;
    auto sent = dp->send_batch(tx);
    ASSERT_TRUE(sent.ok());
    EXPECT_EQ(*sent, 2u);
    EXPECT_EQ(dp->stats().bind_failures, 1u);
    EXPECT_EQ(dp->last_error(), "udp: bind " + loopback(squatter.port).to_string() +
                                    ": Address already in use");
    std::string got;
    uint16_t from;
    int tos;
    ASSERT_TRUE(peer.receive(got, from, tos));
    EXPECT_EQ(got, b);
    // Within bind_retry_after the port is not tried again: still counted per packet.
    ASSERT_EQ(*dp->send_batch({tx.data(), 1}), 1u);
    EXPECT_EQ(dp->stats().bind_failures, 2u);
    EXPECT_EQ(dp->stats().path_sockets_opened, 0u);
}

// [UDP-10] [PATH-1]: with plane devices, meta.local_port picks the interface a path socket is
// bound to; an unknown interface is refused at open, a plane without a device is counted
// and dropped. (That the kernel then really leaves by that plane is checked across the
// testbed: tests/testbed/netns_test.py.)
TEST(UdpDatapath, PlaneDevicesBindPathSocketsAndRefuseUnknownPlanes) {
    std::string why;
    datapath::UdpOptions bad;
    bad.plane_devices = {"lo", "mroce-none0"};
    auto refused = UdpDatapath::open(loopback(), bad, &why);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error(), Error::kInvalidArgument);
    EXPECT_EQ(why, "udp: plane device 'mroce-none0' is not an interface here");

    datapath::UdpOptions opt;
    opt.plane_devices = {"lo"};
    auto opened = UdpDatapath::open(loopback(), opt, &why);
    ASSERT_TRUE(opened.ok()) << why;
    UdpDatapath& dp = **opened;
    RawSocket reserve;
    const uint16_t path_port = reserve.port;
    ::close(reserve.fd);
    reserve.fd = -1;
    const std::string a = "plane 0", b = "plane 1 has no device";
    std::array<TxPacket, 2> tx;
    tx[0].data = bytes_of(a);
    tx[0].meta.src = dp.local_address().with_port(path_port);
    tx[0].meta.dst = dp.local_address();
    tx[0].meta.ecn = ecn::kEct0;
    tx[0].meta.local_port = 0;
    tx[1] = tx[0];
    tx[1].data = bytes_of(b);
    tx[1].meta.local_port = 1;
    auto sent = dp.send_batch(tx);
    ASSERT_TRUE(sent.ok());
    EXPECT_EQ(*sent, 2u);  // the second is dropped and counted, as a lost packet
    EXPECT_EQ(dp.stats().no_plane_device, 1u);
    EXPECT_EQ(dp.last_error(), "udp: no plane device for local port 1");
    EXPECT_EQ(dp.stats().path_sockets_opened, 1u);
    std::vector<RxPacket> rx;
    std::vector<std::vector<std::byte>> bufs;
    ASSERT_EQ(receive_some(dp, rx, bufs, 1), 1u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(bufs[0].data()), bufs[0].size()), a);
    EXPECT_EQ(rx[0].meta.src.port, path_port);
}

// [UDP-10] [PATH-16]: with plane devices, a datagram is received with the plane of the
// interface it arrived on (loopback traffic arrives on "lo"), or kNotAPlane when that
// interface is none of them; without plane devices, with 0.
TEST(UdpDatapath, PlaneDevicesNameThePlaneADatagramArrivedOn) {
    std::string other;  // any interface but lo, to stand for a plane that is not lo's
    if (struct if_nameindex* names = ::if_nameindex()) {
        for (struct if_nameindex* n = names; n->if_index != 0; ++n)
            if (std::string(n->if_name) != "lo") {
                other = n->if_name;
                break;
            }
        ::if_freenameindex(names);
    }
    if (other.empty()) GTEST_SKIP() << "no interface but lo here";
    auto arrival_plane = [](std::vector<std::string> planes) -> int {
        datapath::UdpOptions opt;
        opt.plane_devices = std::move(planes);
        std::string why;
        auto opened = UdpDatapath::open(loopback(), opt, &why);
        EXPECT_TRUE(opened.ok()) << why;
        if (!opened.ok()) return -1;
        RawSocket peer;
        peer.send_to((*opened)->local_address(), "which plane", 0);
        std::vector<RxPacket> rx;
        std::vector<std::vector<std::byte>> bufs;
        if (receive_some(**opened, rx, bufs, 1) != 1) return -2;
        EXPECT_EQ((*opened)->local_address().ip, rx[0].meta.dst.ip);  // still the bound address
        return rx[0].meta.local_port;
    };
    SCOPED_TRACE("other interface: " + other);
    EXPECT_EQ(arrival_plane({other, "lo"}), 1);
    EXPECT_EQ(arrival_plane({"lo", other}), 0);
    EXPECT_EQ(arrival_plane({other}), UdpDatapath::kNotAPlane);
    EXPECT_EQ(arrival_plane({}), 0);
}

// [UDP-11]: a datagram's meta.arrival is when the kernel received it, on now()'s clock, not
// when recv_batch read it: one that waited 20 ms in the socket buffer says so. (One-sided
// bounds only: a loaded machine lengthens the wait, never shortens it.) With the option off,
// arrival is unknown (kNever) and the engine takes its own time.
TEST(UdpDatapath, ArrivalIsWhenTheKernelReceivedTheDatagram) {
    auto dp = open_loopback();
    ASSERT_TRUE(dp);
    ASSERT_TRUE(dp->rx_timestamps_enabled());  // Linux has had SO_TIMESTAMPNS since 2.6.22
    RawSocket peer;
    const Time before = dp->now();
    peer.send_to(dp->local_address(), "stamped", 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const Time read = dp->now();
    std::vector<RxPacket> rx;
    std::vector<std::vector<std::byte>> bufs;
    ASSERT_EQ(receive_some(*dp, rx, bufs, 1), 1u);
    ASSERT_NE(rx[0].meta.arrival, kNever);
    // The wall-to-monotonic conversion is good to microseconds; allow a millisecond.
    EXPECT_GE(rx[0].meta.arrival, before - std::chrono::milliseconds(1));
    EXPECT_LE(rx[0].meta.arrival, read - std::chrono::milliseconds(19));
    EXPECT_EQ(dp->stats().rx_stamps_unusable, 0u);

    datapath::UdpOptions off;
    off.rx_timestamps = false;
    std::string why;
    auto plain = UdpDatapath::open(loopback(), off, &why);
    ASSERT_TRUE(plain.ok()) << why;
    EXPECT_FALSE((*plain)->rx_timestamps_enabled());
    peer.send_to((*plain)->local_address(), "unstamped", 0);
    rx.clear();
    ASSERT_EQ(receive_some(**plain, rx, bufs, 1), 1u);
    EXPECT_EQ(rx[0].meta.arrival, kNever);
}

TEST(UdpDatapath, WakeFdIsReadableWhenDataArrives) {
    auto dp = open_loopback();
    ASSERT_TRUE(dp);
    pollfd p{dp->wake_fd(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 0);
    RawSocket peer;
    peer.send_to(dp->local_address(), "wake", 0);
    p.revents = 0;
    EXPECT_EQ(::poll(&p, 1, 2000), 1);
    std::vector<RxPacket> rx;
    std::vector<std::vector<std::byte>> bufs;
    ASSERT_EQ(receive_some(*dp, rx, bufs, 1), 1u);
    p.revents = 0;
    EXPECT_EQ(::poll(&p, 1, 0), 0);  // drained: not readable any more
}

TEST(UdpDatapath, OversizedDatagramIsDroppedAndCounted) {
    datapath::UdpOptions opt;
    opt.gro = false;  // with GRO a receive slot holds 64 KiB
    opt.max_datagram_bytes = 64;
    std::string why;
    auto opened = UdpDatapath::open(loopback(), opt, &why);
    ASSERT_TRUE(opened.ok()) << why;
    auto& dp = *opened;
    RawSocket peer;
    peer.send_to(dp->local_address(), std::string(1500, 'x'), 0);
    peer.send_to(dp->local_address(), "fits", 0);
    std::vector<RxPacket> batch(4);
    size_t got = 0;
    ASSERT_TRUE(eventually(
        [&] {
            auto r = dp->recv_batch(batch);
            if (r.ok() && *r > 0) {
                EXPECT_EQ(batch[0].data.size(), 4u);
                got += *r;
            }
            return got >= 1;
        },
        std::chrono::milliseconds(2000)));
    EXPECT_EQ(got, 1u);
    EXPECT_EQ(dp->stats().receive_truncated, 1u);
}

TEST(UdpDatapath, StrayDatagramsOnPathSocketsAreDrained) {
    datapath::UdpOptions opt;
    opt.drain_interval = std::chrono::milliseconds(0);
    std::string why;
    auto r = UdpDatapath::open(loopback(), opt, &why);
    ASSERT_TRUE(r.ok()) << why;
    auto& dp = *r;
    RawSocket reserve;
    const uint16_t path_port = reserve.port;
    ::close(reserve.fd);
    reserve.fd = -1;
    RawSocket peer;
    const std::string x = "x";
    TxPacket p;
    p.data = bytes_of(x);
    p.meta.src = dp->local_address().with_port(path_port);
    p.meta.dst = peer.address();
    ASSERT_EQ(*dp->send_batch({&p, 1}), 1u);
    peer.send_to(loopback(path_port), "stray", 0);  // to the path socket, not the endpoint
    std::vector<RxPacket> batch(1);
    ASSERT_TRUE(eventually(
        [&] {
            EXPECT_EQ(*dp->recv_batch(batch), 0u);
            return dp->stats().stray_drained == 1;
        },
        std::chrono::milliseconds(2000)));
}

// udp_sockets_on finds this process's UDP sockets bound to `port` (the datapath keeps its
// descriptors to itself): every fd in /proc/self/fd that getsockname accepts.
std::vector<int> udp_sockets_on(uint16_t port) {
    std::vector<int> found;
    const int dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return found;
    DIR* d = ::fdopendir(dir);
    while (dirent* e = ::readdir(d)) {
        const int fd = std::atoi(e->d_name);
        if (e->d_name[0] == '.' || fd == dir) continue;
        int type = 0;
        socklen_t tlen = sizeof(type);
        sockaddr_storage ss{};
        socklen_t len = sizeof(ss);
        if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 || type != SOCK_DGRAM ||
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
            continue;
        const uint16_t bound = ss.ss_family == AF_INET
                                   ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                   : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
        if (bound == port) found.push_back(fd);
    }
    ::closedir(d);
    return found;
}

size_t open_fds() {
    size_t n = 0;
    DIR* d = ::opendir("/proc/self/fd");
    if (!d) return 0;
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
    return n - 1;  // the directory's own descriptor
}

// Issue 17, finding 8: a HELLO flood made the server answer from a new source port per
// connection it created, and it held 1,033 descriptors, past the soft limit. Whatever
// source ports the engine sends from, the datapath keeps at most a quarter of the soft
// RLIMIT_NOFILE of path sockets open (least recently used ones are closed), so the
// process's other descriptors stay available: 200 distinct source ports under a soft
// limit of 128 leave at most 32 path sockets, and sending still works.
TEST(UdpDatapath, PathSocketsStayUnderAQuarterOfTheDescriptorLimit) {
    rlimit saved{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
    struct Restore {
        rlimit r;
        ~Restore() { (void)::setrlimit(RLIMIT_NOFILE, &r); }
    } restore{saved};
    {
        auto dp = UdpDatapath::open(loopback());
        ASSERT_TRUE(dp.ok());
        const size_t expect = saved.rlim_cur == RLIM_INFINITY
                                  ? 1024
                                  : std::min<size_t>(1024, std::max<size_t>(8, saved.rlim_cur / 4));
        EXPECT_EQ((*dp)->path_socket_limit(), expect);
    }
    rlimit low = saved;
    low.rlim_cur = std::min<rlim_t>(128, saved.rlim_max);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
    RawSocket peer;
    const size_t before = open_fds();
    std::string why;
    auto r = UdpDatapath::open(loopback(), {}, &why);
    ASSERT_TRUE(r.ok()) << why;
    auto& dp = *r;
    EXPECT_EQ(dp->path_socket_limit(), low.rlim_cur / 4);
    const std::string x = "x";
    const uint64_t seed = test_seed();
    std::printf("[ SEED     ] %llu\n", static_cast<unsigned long long>(seed));
    const uint16_t base = static_cast<uint16_t>(20000 + seed % 20000);
    size_t peak = 0;
    for (uint16_t i = 0; i < 200; ++i) {
        TxPacket p;
        p.data = bytes_of(x);
        p.meta.src = dp->local_address().with_port(static_cast<uint16_t>(base + 3 * i));
        p.meta.dst = peer.address();
        ASSERT_EQ(*dp->send_batch({&p, 1}), 1u);
        peak = std::max(peak, open_fds());
    }
    const datapath::UdpStats& st = dp->stats();
    std::printf("  path sockets opened %llu, evicted %llu, bind failures %llu; fds %zu -> peak %zu\n",
                static_cast<unsigned long long>(st.path_sockets_opened),
                static_cast<unsigned long long>(st.path_sockets_evicted),
                static_cast<unsigned long long>(st.bind_failures), before, peak);
    EXPECT_LE(dp->open_path_sockets(), low.rlim_cur / 4);
    // The endpoint socket and its epoll fd, plus the path sockets.
    EXPECT_LE(peak, before + 2 + low.rlim_cur / 4);
    EXPECT_GE(st.path_sockets_opened, 150u);  // a few ports may be taken on this host
    EXPECT_EQ(st.path_sockets_evicted, st.path_sockets_opened - dp->open_path_sockets());
}

int sockopt(int fd, int level, int name) {
    int v = -1;
    socklen_t len = sizeof(v);
    return ::getsockopt(fd, level, name, &v, &len) == 0 ? v : -1;
}

// [UDP-8]: the endpoint socket and every path socket never let the kernel fragment: IPv4
// leaves with the Don't-Fragment bit (IP_PMTUDISC_DO), IPv6 with IPV6_PMTUDISC_DO, and a
// dual-stack socket has the IPv4 setting too for IPv4-mapped peers.
TEST(UdpDatapath, SocketsSetDontFragment) {
    auto check = [](UdpDatapath& dp, bool v6) {
        RawSocket reserve;
        const uint16_t path_port = reserve.port;
        ::close(reserve.fd);
        reserve.fd = -1;
        const std::string msg = "df";
        TxPacket p;
        p.data = bytes_of(msg);
        p.meta.src = dp.local_address().with_port(path_port);  // opens a path socket
        p.meta.dst = dp.local_address();
        ASSERT_EQ(*dp.send_batch({&p, 1}), 1u);
        for (uint16_t port : {dp.local_address().port, path_port}) {
            const std::vector<int> fds = udp_sockets_on(port);
            ASSERT_EQ(fds.size(), 1u) << "port " << port;
            EXPECT_EQ(sockopt(fds[0], IPPROTO_IP, IP_MTU_DISCOVER), IP_PMTUDISC_DO)
                << "port " << port;
            if (v6) {
                EXPECT_EQ(sockopt(fds[0], IPPROTO_IPV6, IPV6_MTU_DISCOVER), IPV6_PMTUDISC_DO)
                    << "port " << port;
            }
        }
    };
    auto dp = open_loopback();
    ASSERT_TRUE(dp);
    check(*dp, false);
    Address v6;
    v6.ip[15] = 1;  // ::1
    auto r6 = UdpDatapath::open(v6);
    if (!r6.ok()) GTEST_SKIP() << "no IPv6 loopback here";
    check(**r6, true);
}

TEST(UdpDatapath, Ipv6LoopbackWhenAvailable) {
    Address v6;
    v6.ip[15] = 1;  // ::1
    std::string why;
    auto r = UdpDatapath::open(v6, {}, &why);
    if (!r.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << why;
    auto& dp = *r;
    EXPECT_FALSE(dp->local_address().is_ipv4());
    const std::string msg = "over ipv6";
    TxPacket p;
    p.data = bytes_of(msg);
    p.meta.src = dp->local_address().with_port(0);
    p.meta.dst = dp->local_address();
    p.meta.ecn = ecn::kEct0;
    ASSERT_EQ(*dp->send_batch({&p, 1}), 1u);
    std::vector<RxPacket> rx;
    std::vector<std::vector<std::byte>> bufs;
    ASSERT_EQ(receive_some(*dp, rx, bufs, 1), 1u);
    EXPECT_EQ(rx[0].meta.ecn, ecn::kEct0);
    EXPECT_EQ(rx[0].meta.src, dp->local_address());
}

}  // namespace
}  // namespace mroce::test
