// conform/udp_socket.cc — see udp_socket.h.
#include "conform/udp_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace mroce::conform {
namespace {

sockaddr_in to_sockaddr(const Address& a) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(a.port);
    sa.sin_addr.s_addr = htonl(a.ipv4_host_order());
    return sa;
}

Address from_sockaddr(const sockaddr_in& sa) {
    return Address::ipv4(ntohl(sa.sin_addr.s_addr), ntohs(sa.sin_port));
}

}  // namespace

std::optional<UdpSocket> UdpSocket::open(const Address& local, std::string* why,
                                         unsigned via_ifindex) {
    if (!local.is_ipv4()) {
        if (why) *why = "the suite speaks IPv4 only";
        return std::nullopt;
    }
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        if (why) *why = std::string("socket: ") + std::strerror(errno);
        return std::nullopt;
    }
    const int one = 1;
    // [UDP-5] is checked on every packet the target sends: ask for the TOS byte.
    ::setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
    const int rcvbuf = 4 << 20;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    sockaddr_in sa = to_sockaddr(local);
    socklen_t len = sizeof(sa);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
        if (why) *why = "bind " + local.to_string() + ": " + std::strerror(errno);
        ::close(fd);
        return std::nullopt;
    }
    return UdpSocket(fd, from_sockaddr(sa), via_ifindex);
}

UdpSocket& UdpSocket::operator=(UdpSocket&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.fd_;
        local_ = o.local_;
        via_ = o.via_;
        o.fd_ = -1;
    }
    return *this;
}

UdpSocket::~UdpSocket() {
    if (fd_ >= 0) ::close(fd_);
}

bool UdpSocket::send(std::span<const std::byte> bytes, const Address& to, uint8_t ecn) const {
    sockaddr_in sa = to_sockaddr(to);
    iovec iov{const_cast<std::byte*>(bytes.data()), bytes.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(in_pktinfo))] = {};
    msghdr msg{};
    msg.msg_name = &sa;
    msg.msg_namelen = sizeof(sa);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = via_ ? sizeof(control) : CMSG_SPACE(sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_TOS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    const int tos = ecn & 3;
    std::memcpy(CMSG_DATA(c), &tos, sizeof(tos));
    if (via_) {
        // The outgoing interface, per datagram: the route's next hop through it, not the
        // one the ECMP hash of our ports would pick (the testbed's planes, --via).
        c = CMSG_NXTHDR(&msg, c);
        c->cmsg_level = IPPROTO_IP;
        c->cmsg_type = IP_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
        in_pktinfo info{};
        info.ipi_ifindex = static_cast<int>(via_);
        std::memcpy(CMSG_DATA(c), &info, sizeof(info));
    }
    return ::sendmsg(fd_, &msg, 0) == static_cast<ssize_t>(bytes.size());
}

std::optional<Datagram> UdpSocket::receive(Duration timeout) const {
    const int ms = static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()));
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return std::nullopt;
    Datagram d;
    d.bytes.resize(65536);
    sockaddr_in sa{};
    iovec iov{d.bytes.data(), d.bytes.size()};
    alignas(cmsghdr) char control[256];
    msghdr msg{};
    msg.msg_name = &sa;
    msg.msg_namelen = sizeof(sa);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(fd_, &msg, MSG_DONTWAIT);
    if (n < 0) return std::nullopt;
    d.bytes.resize(static_cast<size_t>(n));
    d.from = from_sockaddr(sa);
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
            uint8_t tos = 0;
            std::memcpy(&tos, CMSG_DATA(c), 1);
            d.ecn = tos & 3;
        }
    }
    return d;
}

std::optional<Address> parse_ipv4_endpoint(const std::string& s) {
    const auto colon = s.rfind(':');
    unsigned b[4] = {};
    unsigned port = 0;
    char tail = 0;
    if (colon == std::string::npos ||
        std::sscanf(s.substr(0, colon).c_str(), "%u.%u.%u.%u%c", &b[0], &b[1], &b[2], &b[3], &tail) != 4 ||
        std::sscanf(s.substr(colon + 1).c_str(), "%u%c", &port, &tail) != 1 || port > 65535 ||
        b[0] > 255 || b[1] > 255 || b[2] > 255 || b[3] > 255)
        return std::nullopt;
    return Address::ipv4(b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3], static_cast<uint16_t>(port));
}

std::optional<Address> local_address_towards(const Address& target) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return std::nullopt;
    sockaddr_in sa = to_sockaddr(target);
    socklen_t len = sizeof(sa);
    std::optional<Address> out;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0)
        out = from_sockaddr(sa).with_port(0);
    ::close(fd);
    return out;
}

}  // namespace mroce::conform
