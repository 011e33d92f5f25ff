// datapath/udp/udp_datapath.cc — see udp_datapath.h.
#include "datapath/udp/udp_datapath.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>

namespace mroce::datapath {

namespace {

// Room for the ancillary data one received datagram may carry: the TOS byte or traffic
// class (an int) and a packet-info struct, with headroom.
constexpr size_t kControlBytes = 128;

std::string error_text(int err) {
    const char* s = strerrordesc_np(err);  // thread-safe, unlike strerror
    return s ? s : ("errno " + std::to_string(err));
}

bool is_unspecified(const Address& a) {
    if (a.is_ipv4()) return a.ipv4_host_order() == 0;
    return std::all_of(a.ip.begin(), a.ip.end(), [](uint8_t b) { return b == 0; });
}

// to_sockaddr fills `ss` for a socket of `family`; returns 0 when the address cannot be
// reached from such a socket (an IPv6 address from an IPv4 socket).
socklen_t to_sockaddr(const Address& a, int family, sockaddr_storage& ss) {
    std::memset(&ss, 0, sizeof(ss));
    if (family == AF_INET) {
        if (!a.is_ipv4()) return 0;
        auto* s = reinterpret_cast<sockaddr_in*>(&ss);
        s->sin_family = AF_INET;
        s->sin_port = htons(a.port);
        s->sin_addr.s_addr = htonl(a.ipv4_host_order());
        return sizeof(sockaddr_in);
    }
    auto* s = reinterpret_cast<sockaddr_in6*>(&ss);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(a.port);
    std::memcpy(&s->sin6_addr, a.ip.data(), 16);  // IPv4 stays IPv4-mapped: dual-stack
    return sizeof(sockaddr_in6);
}

Address from_sockaddr(const sockaddr_storage& ss) {
    if (ss.ss_family == AF_INET) {
        const auto* s = reinterpret_cast<const sockaddr_in*>(&ss);
        return Address::ipv4(ntohl(s->sin_addr.s_addr), ntohs(s->sin_port));
    }
    Address a;
    if (ss.ss_family == AF_INET6) {
        const auto* s = reinterpret_cast<const sockaddr_in6*>(&ss);
        std::memcpy(a.ip.data(), &s->sin6_addr, 16);
        a.port = ntohs(s->sin6_port);
    }
    return a;
}

int set_int(int fd, int level, int name, int value) {
    return setsockopt(fd, level, name, &value, sizeof(value));
}

}  // namespace

struct UdpDatapath::Scratch {
    std::array<mmsghdr, kMaxBatch> msgs{};
    std::array<iovec, kMaxBatch> iovs{};
    std::array<sockaddr_storage, kMaxBatch> addrs{};
    alignas(cmsghdr) std::array<std::array<char, kControlBytes>, kMaxBatch> control{};
};

UdpDatapath::UdpDatapath(const Address& local, const UdpOptions& options)
    : local_(local), opt_(options), scratch_(std::make_unique<Scratch>()) {}

UdpDatapath::~UdpDatapath() {
    for (auto& [port, s] : paths_)
        if (s.fd >= 0) ::close(s.fd);
    if (endpoint_.fd >= 0) ::close(endpoint_.fd);
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

void UdpDatapath::fail(std::string message) { last_error_ = std::move(message); }

Result<std::unique_ptr<UdpDatapath>> UdpDatapath::open(const Address& local,
                                                       const UdpOptions& options,
                                                       std::string* error) {
    auto report = [&](std::string msg, Error e) -> Result<std::unique_ptr<UdpDatapath>> {
        if (error) *error = std::move(msg);
        return e;
    };
    std::unique_ptr<UdpDatapath> dp(new UdpDatapath(local, options));
    dp->family_ = local.is_ipv4() ? AF_INET : AF_INET6;
    const int fd = ::socket(dp->family_, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return report("udp: socket: " + error_text(errno), Error::kIo);
    dp->endpoint_.fd = fd;

    // A large receive buffer absorbs a window's worth of packets arriving at once.
    if (set_int(fd, SOL_SOCKET, SO_RCVBUFFORCE, options.recv_buffer_bytes) != 0)
        (void)set_int(fd, SOL_SOCKET, SO_RCVBUF, options.recv_buffer_bytes);
    (void)set_int(fd, SOL_SOCKET, SO_SNDBUF, options.send_buffer_bytes);
    const bool wildcard = is_unspecified(local);
    if (dp->family_ == AF_INET) {
        if (set_int(fd, IPPROTO_IP, IP_RECVTOS, 1) != 0)
            return report("udp: setsockopt IP_RECVTOS: " + error_text(errno), Error::kIo);
        if (wildcard) (void)set_int(fd, IPPROTO_IP, IP_PKTINFO, 1);
    } else {
        (void)set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 0);
        if (set_int(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 1) != 0)
            return report("udp: setsockopt IPV6_RECVTCLASS: " + error_text(errno), Error::kIo);
        (void)set_int(fd, IPPROTO_IP, IP_RECVTOS, 1);  // IPv4 peers on a dual-stack socket
        if (wildcard) {
            (void)set_int(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);
            (void)set_int(fd, IPPROTO_IP, IP_PKTINFO, 1);
        }
    }
    sockaddr_storage ss;
    const socklen_t len = to_sockaddr(local, dp->family_, ss);
    if (len == 0) return report("udp: cannot bind " + local.to_string(), Error::kInvalidArgument);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0)
        return report("udp: bind " + local.to_string() + ": " + error_text(errno), Error::kIo);
    socklen_t got = sizeof(ss);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &got) != 0)
        return report("udp: getsockname: " + error_text(errno), Error::kIo);
    dp->local_ = from_sockaddr(ss);

    dp->epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (dp->epoll_fd_ < 0) return report("udp: epoll_create1: " + error_text(errno), Error::kIo);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(dp->epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
        return report("udp: epoll_ctl: " + error_text(errno), Error::kIo);
    dp->next_drain_ = dp->now() + options.drain_interval;
    return dp;
}

Time UdpDatapath::now() const {
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return time_from_ns(int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec);
}

UdpDatapath::Socket* UdpDatapath::socket_for(uint16_t src_port) {
    if (src_port == 0 || src_port == local_.port) return &endpoint_;
    auto it = paths_.find(src_port);
    if (it != paths_.end()) {
        Socket& s = it->second;
        if (s.fd >= 0) {
            s.last_use = ++use_counter_;
            return &s;
        }
        if (now() < s.retry_after) return nullptr;
    } else if (paths_.size() >= opt_.max_path_sockets) {
        evict_one();
    }
    Socket& s = paths_[src_port];
    s.last_use = ++use_counter_;
    const Address bind_to = local_.with_port(src_port);
    auto failed = [&](const char* what) {
        fail("udp: " + std::string(what) + " " + bind_to.to_string() + ": " + error_text(errno));
        if (s.fd >= 0) ::close(s.fd);
        s.fd = -1;
        s.retry_after = now() + opt_.bind_retry_after;
        return nullptr;
    };
    s.fd = ::socket(family_, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s.fd < 0) return failed("socket for");
    s.tos = 0;
    (void)set_int(s.fd, SOL_SOCKET, SO_SNDBUF, opt_.send_buffer_bytes);
    if (family_ == AF_INET6) (void)set_int(s.fd, IPPROTO_IPV6, IPV6_V6ONLY, 0);
    sockaddr_storage ss;
    const socklen_t len = to_sockaddr(bind_to, family_, ss);
    if (::bind(s.fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) return failed("bind");
    ++stats_.path_sockets_opened;
    return &s;
}

void UdpDatapath::evict_one() {
    auto victim = paths_.end();
    for (auto it = paths_.begin(); it != paths_.end(); ++it)
        if (victim == paths_.end() || it->second.last_use < victim->second.last_use) victim = it;
    if (victim == paths_.end()) return;
    if (victim->second.fd >= 0) {
        ::close(victim->second.fd);
        ++stats_.path_sockets_evicted;
    }
    paths_.erase(victim);
}

bool UdpDatapath::set_tos(Socket& s, uint8_t ecn) {
    // Only the ECN bits are ours to set; DSCP stays 0 until traffic classes map to it.
    const int tos = ecn & 0x3;
    if (s.tos == tos) return true;
    int rc;
    if (family_ == AF_INET) {
        rc = set_int(s.fd, IPPROTO_IP, IP_TOS, tos);
    } else {
        rc = set_int(s.fd, IPPROTO_IPV6, IPV6_TCLASS, tos);
        (void)set_int(s.fd, IPPROTO_IP, IP_TOS, tos);  // IPv4-mapped destinations
    }
    ++stats_.tos_changes;
    if (rc != 0) {
        fail("udp: setsockopt IP_TOS " + std::to_string(tos) + ": " + error_text(errno));
        return false;
    }
    s.tos = tos;
    return true;
}

Result<size_t> UdpDatapath::send_batch(std::span<const TxPacket> packets) {
    Scratch& sc = *scratch_;
    size_t i = 0;
    while (i < packets.size()) {
        const uint16_t port = packets[i].meta.src.port;
        const uint8_t ecn = packets[i].meta.ecn & 0x3;
        Socket* s = socket_for(port);
        if (!s) {  // the source port is taken: a lost packet for the engine
            ++stats_.bind_failures;
            ++i;
            continue;
        }
        (void)set_tos(*s, ecn);
        // A run: consecutive packets from the same socket with the same ECN bits.
        size_t n = 0;
        while (i + n < packets.size() && n < kMaxBatch) {
            const TxPacket& p = packets[i + n];
            if (n > 0 && (p.meta.src.port != port || (p.meta.ecn & 0x3) != ecn)) break;
            const socklen_t alen = to_sockaddr(p.meta.dst, family_, sc.addrs[n]);
            if (alen == 0) break;
            sc.iovs[n].iov_base = const_cast<std::byte*>(p.data.data());
            sc.iovs[n].iov_len = p.data.size();
            msghdr& h = sc.msgs[n].msg_hdr;
            h = msghdr{};
            h.msg_name = &sc.addrs[n];
            h.msg_namelen = alen;
            h.msg_iov = &sc.iovs[n];
            h.msg_iovlen = 1;
            ++n;
        }
        if (n == 0) {  // the destination is not reachable from this socket family
            ++stats_.send_errors;
            fail("udp: cannot send to " + packets[i].meta.dst.to_string() + " from " +
                 local_.to_string());
            ++i;
            continue;
        }
        const int sent = ::sendmmsg(s->fd, sc.msgs.data(), static_cast<unsigned>(n), 0);
        if (sent > 0) {
            for (int k = 0; k < sent; ++k) stats_.bytes_sent += packets[i + k].data.size();
            stats_.packets_sent += static_cast<uint64_t>(sent);
            i += static_cast<size_t>(sent);
            continue;
        }
        const int err = errno;
        if (err == EINTR) continue;
        if (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS || err == ENOMEM) {
            ++stats_.send_would_block;
            return i;  // back-pressure: the caller retries the rest
        }
        fail("udp: send " + local_.with_port(s == &endpoint_ ? local_.port : port).to_string() +
             " -> " + packets[i].meta.dst.to_string() + ": " + error_text(err));
        if (err == EBADF || err == ENOTSOCK || err == EFAULT) return Error::kIo;
        ++stats_.send_errors;  // this packet is refused (unreachable, too big...): dropped
        ++i;
    }
    return packets.size();
}

void UdpDatapath::drain_path_sockets() {
    // Peers answer to the endpoint port, so nothing should arrive here; whatever does is
    // read and discarded so the socket buffers never fill. MSG_TRUNC into a small buffer
    // discards the rest of each datagram.
    std::array<char, 64> sink;
    for (auto& [port, s] : paths_) {
        if (s.fd < 0) continue;
        for (int k = 0; k < 4096; ++k) {
            const ssize_t r = ::recv(s.fd, sink.data(), sink.size(), MSG_DONTWAIT | MSG_TRUNC);
            if (r < 0) break;
            ++stats_.stray_drained;
        }
    }
}

Result<size_t> UdpDatapath::recv_batch(std::span<RxPacket> packets) {
    if (!paths_.empty()) {
        const Time t = now();
        if (t >= next_drain_) {
            drain_path_sockets();
            next_drain_ = t + opt_.drain_interval;
        }
    }
    Scratch& sc = *scratch_;
    const size_t n = std::min(packets.size(), kMaxBatch);
    if (n == 0) return size_t{0};
    for (size_t k = 0; k < n; ++k) {
        sc.iovs[k].iov_base = packets[k].buf.data();
        sc.iovs[k].iov_len = packets[k].buf.size();
        msghdr& h = sc.msgs[k].msg_hdr;
        h = msghdr{};
        h.msg_name = &sc.addrs[k];
        h.msg_namelen = sizeof(sockaddr_storage);
        h.msg_iov = &sc.iovs[k];
        h.msg_iovlen = 1;
        h.msg_control = sc.control[k].data();
        h.msg_controllen = kControlBytes;
    }
    int r;
    do r = ::recvmmsg(endpoint_.fd, sc.msgs.data(), static_cast<unsigned>(n), MSG_DONTWAIT, nullptr);
    while (r < 0 && errno == EINTR);
    if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
        ++stats_.receive_errors;
        fail("udp: recvmmsg on " + local_.to_string() + ": " + error_text(errno));
        return Error::kIo;
    }
    size_t out = 0;
    for (int k = 0; k < r; ++k) {
        msghdr& h = sc.msgs[k].msg_hdr;
        const size_t len = sc.msgs[k].msg_len;
        if (h.msg_flags & MSG_TRUNC) {
            ++stats_.receive_truncated;
            continue;
        }
        RxPacket& p = packets[out];
        if (out != static_cast<size_t>(k)) {
            // An earlier datagram was dropped: move this one up so the result stays dense.
            if (len > p.buf.size()) {
                ++stats_.receive_truncated;
                continue;
            }
            std::memmove(p.buf.data(), packets[k].buf.data(), len);
        }
        p.len = len;
        p.meta = PacketMeta{};
        p.meta.src = from_sockaddr(sc.addrs[k]);
        p.meta.dst = local_;
        for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
                unsigned char tos;
                std::memcpy(&tos, CMSG_DATA(c), 1);
                p.meta.ecn = tos & 0x3;
            } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
                int tclass;
                std::memcpy(&tclass, CMSG_DATA(c), sizeof(tclass));
                p.meta.ecn = static_cast<uint8_t>(tclass & 0x3);
            } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
                in_pktinfo pi;
                std::memcpy(&pi, CMSG_DATA(c), sizeof(pi));
                p.meta.dst = Address::ipv4(ntohl(pi.ipi_addr.s_addr), local_.port);
            } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
                in6_pktinfo pi;
                std::memcpy(&pi, CMSG_DATA(c), sizeof(pi));
                std::memcpy(p.meta.dst.ip.data(), &pi.ipi6_addr, 16);
            }
        }
        stats_.bytes_received += len;
        ++stats_.packets_received;
        ++out;
    }
    return out;
}

}  // namespace mroce::datapath
