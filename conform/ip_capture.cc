// conform/ip_capture.cc — see ip_capture.h.
#include "conform/ip_capture.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace mroce::conform {

std::optional<IpCapture> IpCapture::open(std::string* why) {
    // SOCK_DGRAM: the kernel strips the link header, so every interface looks alike.
    const int fd = ::socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_IP));
    if (fd < 0) {
        if (why) *why = std::string("packet socket: ") + std::strerror(errno);
        return std::nullopt;
    }
    return IpCapture(fd);
}

IpCapture::~IpCapture() {
    if (fd_ >= 0) ::close(fd_);
}

std::vector<Ipv4Udp> IpCapture::collect(const Address& to, Duration window) {
    std::vector<Ipv4Udp> out;
    const auto deadline = std::chrono::steady_clock::now() + window;
    uint8_t buf[256];  // headers only: a longer packet is truncated, which is fine
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
        sockaddr_ll from{};
        socklen_t len = sizeof(from);
        const ssize_t n = ::recvfrom(fd_, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC,
                                     reinterpret_cast<sockaddr*>(&from), &len);
        // Loopback shows each packet twice, leaving and arriving: keep the arrival.
        if (n < 28 || from.sll_pkttype == PACKET_OUTGOING) continue;
        const size_t ihl = size_t{buf[0] & 0x0fu} * 4;
        if ((buf[0] >> 4) != 4 || buf[9] != IPPROTO_UDP || ihl < 20 ||
            static_cast<size_t>(std::min<ssize_t>(n, sizeof(buf))) < ihl + 8)
            continue;
        Ipv4Udp u;
        u.total_length = static_cast<uint16_t>(buf[2] << 8 | buf[3]);
        const uint16_t frag = static_cast<uint16_t>(buf[6] << 8 | buf[7]);
        u.dont_fragment = frag & 0x4000;
        u.more_fragments = frag & 0x2000;
        u.fragment_offset = frag & 0x1fff;
        u.src = uint32_t{buf[12]} << 24 | uint32_t{buf[13]} << 16 | uint32_t{buf[14]} << 8 | buf[15];
        u.dst = uint32_t{buf[16]} << 24 | uint32_t{buf[17]} << 16 | uint32_t{buf[18]} << 8 | buf[19];
        u.src_port = static_cast<uint16_t>(buf[ihl] << 8 | buf[ihl + 1]);
        u.dst_port = static_cast<uint16_t>(buf[ihl + 2] << 8 | buf[ihl + 3]);
        if (u.dst == to.ipv4_host_order() && u.dst_port == to.port) out.push_back(u);
    }
    return out;
}

}  // namespace mroce::conform
