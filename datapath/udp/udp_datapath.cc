// datapath/udp/udp_datapath.cc — see udp_datapath.h.
#include "datapath/udp/udp_datapath.h"
#include "datapath/udp/steering.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
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
// class (an int), a packet-info struct, the GRO segment size and a timestamp (a timespec),
// with headroom.
constexpr size_t kControlBytes = 256;
// Receive timestamps (UdpOptions::rx_timestamps): a change of the wall clock's offset to
// the monotonic one beyond this between two reads is a step (NTP slews by far less), and a
// datagram is never believed to have waited in the socket buffer longer than a second.
constexpr int64_t kClockStepNs = 1'000'000;
constexpr int64_t kMaxBacklogNs = 1'000'000'000;

int64_t timespec_ns(const timespec& t) { return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; }

// ClockPair: CLOCK_MONOTONIC now and its offset from CLOCK_REALTIME (monotonic − wall), in
// ns. The wall clock is read first: a preemption between the two reads makes the offset too
// large, so a stamp converts to a later arrival than the true one (towards the engine's own
// time), never an earlier one, which could pull [CC-14]'s one-way-delay base down for good.
struct ClockPair {
    int64_t mono_ns;
    int64_t wall_to_mono_ns;
};
ClockPair read_clocks() {
    timespec wall, mono;
    ::clock_gettime(CLOCK_REALTIME, &wall);
    ::clock_gettime(CLOCK_MONOTONIC, &mono);
    return {timespec_ns(mono), timespec_ns(mono) - timespec_ns(wall)};
}

// A receive slot with GRO holds the largest super-packet (the 16-bit IP length).
constexpr size_t kGroSlotBytes = 65536;
// send_run's outcome.
enum class RunOutcome { kDone, kBlocked, kBroken };

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

// set_dont_fragment: spec [UDP-8]: IPv4 packets leave with the Don't-Fragment bit and the
// kernel never fragments a datagram (PMTUDISC_DO; a datagram over the known path MTU is
// refused with EMSGSIZE instead, a counted send error, and [UDP-9]'s path health sees the
// loss). A dual-stack socket takes the IPv4 option too, for IPv4-mapped destinations.
// Returns 0 or -1 with errno set.
int set_dont_fragment(int fd, int family) {
    if (family == AF_INET) return set_int(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);
    if (set_int(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO) != 0) return -1;
    return set_int(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);
}

// set_receive_options: what a receiving socket reports with each datagram (the TOS byte;
// with pktinfo, the local address and the interface it arrived on: wanted when the socket
// is bound to the wildcard, or when plane devices are set). Returns "" or the failure's
// message.
std::string set_receive_options(int fd, int family, bool pktinfo) {
    if (family == AF_INET) {
        if (set_int(fd, IPPROTO_IP, IP_RECVTOS, 1) != 0)
            return "udp: setsockopt IP_RECVTOS: " + error_text(errno);
        if (pktinfo) (void)set_int(fd, IPPROTO_IP, IP_PKTINFO, 1);
        return "";
    }
    (void)set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 0);
    if (set_int(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 1) != 0)
        return "udp: setsockopt IPV6_RECVTCLASS: " + error_text(errno);
    (void)set_int(fd, IPPROTO_IP, IP_RECVTOS, 1);  // IPv4 peers on a dual-stack socket
    if (pktinfo) {
        (void)set_int(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);
        (void)set_int(fd, IPPROTO_IP, IP_PKTINFO, 1);
    }
    return "";
}

}  // namespace

// Scratch holds the arrays of the batched system calls and the receive bounce buffer, all
// allocated once: nothing is allocated per packet.
struct UdpDatapath::Scratch {
    // Send: sendmmsg's messages, rebuilt for each run.
    std::array<mmsghdr, kMaxBatch> msgs{};
    std::array<iovec, 2 * kMaxBatch * kMaxGsoSegments> iovs{};  // two per datagram at most
    std::array<sockaddr_storage, kMaxBatch> addrs{};
    alignas(cmsghdr) std::array<std::array<char, kControlBytes>, kMaxBatch> control{};
    // Send: the first packet (index in the run) and the datagram count of each message.
    std::array<size_t, kMaxBatch> first{}, segments{};
    std::array<bool, kMaxBatch> own_tos{};  // the message carries its TOS in a cmsg
    std::array<bool, kMaxBatch> external{};  // the message has a payload that lies apart
    // Receive: recvmmsg's messages, one slot of the bounce buffer each, built once (by
    // prepare_receive) because a latency-bound loop reads one datagram per call: building
    // all kMaxBatch headers on every call cost about a thousand instructions, a tenth of a
    // ping-pong's round trip. The kernel writes back only each filled message's name and
    // control lengths (and flags); `filled` counts the messages whose lengths to restore.
    std::array<mmsghdr, kMaxBatch> rx_msgs{};
    std::array<iovec, kMaxBatch> rx_iovs{};
    std::array<sockaddr_storage, kMaxBatch> rx_addrs{};
    alignas(cmsghdr) std::array<std::array<char, kControlBytes>, kMaxBatch> rx_control{};
    size_t filled = 0;
    void prepare_receive(size_t slot_bytes) {
        bounce.assign(slot_bytes * kMaxBatch, std::byte{0});
        for (size_t k = 0; k < kMaxBatch; ++k) {
            rx_iovs[k].iov_base = bounce.data() + k * slot_bytes;
            rx_iovs[k].iov_len = slot_bytes;
            msghdr& h = rx_msgs[k].msg_hdr;
            h = msghdr{};
            h.msg_name = &rx_addrs[k];
            h.msg_iov = &rx_iovs[k];
            h.msg_iovlen = 1;
            h.msg_control = rx_control[k].data();
        }
        filled = kMaxBatch;
    }
    void restore_receive_lengths() {
        for (size_t k = 0; k < filled; ++k) {
            rx_msgs[k].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
            rx_msgs[k].msg_hdr.msg_controllen = kControlBytes;
        }
        filled = 0;
    }
    // Receive: what recvmmsg said about each message.
    struct RxInfo {
        size_t len = 0;
        size_t segment = 0;  // GRO segment size; 0: one datagram
        bool ok = false;
        PacketMeta meta;
    };
    std::array<RxInfo, kMaxBatch> rx{};
    std::vector<std::byte> bounce;  // kMaxBatch receive slots
};

UdpDatapath::UdpDatapath(const Address& local, const UdpOptions& options)
    : local_(local), opt_(options), scratch_(std::make_unique<Scratch>()) {}

UdpDatapath::~UdpDatapath() {
    for (auto& [port, s] : paths_)
        if (s.fd >= 0) ::close(s.fd);
    if (endpoint_.fd >= 0) ::close(endpoint_.fd);
    if (handshake_fd_ >= 0) ::close(handshake_fd_);
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

void UdpDatapath::fail(std::string message) { last_error_ = std::move(message); }

// bounded_path_sockets: the per-path socket cap in use. The engine picks source ports, and a
// peer can make it answer from many (every connection a HELLO creates sends its HELLO_ACK
// from one of its own random ports: issue 17, finding 8, saw 1,033 descriptors open), so
// the LRU cap, not the peers, decides how many descriptors the datapath holds. A quarter
// of the soft limit leaves the rest to the application and to a few more devices.
static size_t bounded_path_sockets(size_t asked) {
    constexpr size_t kFloor = 8;  // the default number of paths of one connection
    rlimit rl{};
    size_t cap = asked;
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        cap = std::min<size_t>(cap, std::max<size_t>(kFloor, rl.rlim_cur / 4));
    return std::max<size_t>(cap, 1);
}

size_t UdpDatapath::open_path_sockets() const {
    size_t n = 0;
    for (const auto& [key, s] : paths_) n += s.fd >= 0;
    return n;
}

Result<std::unique_ptr<UdpDatapath>> UdpDatapath::open(const Address& local,
                                                       const UdpOptions& options,
                                                       std::string* error) {
    auto report = [&](std::string msg, Error e) -> Result<std::unique_ptr<UdpDatapath>> {
        if (error) *error = std::move(msg);
        return e;
    };
    for (size_t c = 0; c < options.dscp_by_class.size(); ++c)
        if (options.dscp_by_class[c] > kMaxDscp)
            return report("udp: dscp_by_class[" + std::to_string(c) + "] = " +
                              std::to_string(options.dscp_by_class[c]) + " is not a DSCP (0..63)",
                          Error::kInvalidArgument);
    std::unique_ptr<UdpDatapath> dp(new UdpDatapath(local, options));
    dp->path_socket_limit_ = bounded_path_sockets(options.max_path_sockets);
    dp->family_ = local.is_ipv4() ? AF_INET : AF_INET6;
    const int fd = ::socket(dp->family_, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return report("udp: socket: " + error_text(errno), Error::kIo);
    dp->endpoint_.fd = fd;

    // A large receive buffer absorbs a window's worth of packets arriving at once.
    if (set_int(fd, SOL_SOCKET, SO_RCVBUFFORCE, options.recv_buffer_bytes) != 0)
        (void)set_int(fd, SOL_SOCKET, SO_RCVBUF, options.recv_buffer_bytes);
    (void)set_int(fd, SOL_SOCKET, SO_SNDBUF, options.send_buffer_bytes);
    int granted = 0;
    socklen_t glen = sizeof(granted);
    if (::getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &granted, &glen) == 0 && granted > 0)
        dp->recv_buffer_bytes_ = static_cast<size_t>(granted) / 2;
    if (options.busy_poll_us > 0)
        dp->busy_poll_ = set_int(fd, SOL_SOCKET, SO_BUSY_POLL, options.busy_poll_us) == 0;
    if (options.rx_timestamps)
        dp->rx_timestamps_ = set_int(fd, SOL_SOCKET, SO_TIMESTAMPNS, 1) == 0;
    dp->wall_to_mono_ns_ = read_clocks().wall_to_mono_ns;
    if (set_dont_fragment(fd, dp->family_) != 0)
        return report("udp: setsockopt IP_MTU_DISCOVER: " + error_text(errno), Error::kIo);
    if (std::string why = set_receive_options(fd, dp->family_, dp->wants_pktinfo()); !why.empty())
        return report(why, Error::kIo);
    for (const std::string& dev : options.plane_devices) {
        const unsigned index = dev.empty() || dev.size() >= IF_NAMESIZE ? 0 : ::if_nametoindex(dev.c_str());
        if (index == 0)
            return report("udp: plane device '" + dev + "' is not an interface here",
                          Error::kInvalidArgument);
        dp->plane_ifindex_.push_back(index);
    }
    if (options.reuseport && set_int(fd, SOL_SOCKET, SO_REUSEPORT, 1) != 0)
        return report("udp: setsockopt SO_REUSEPORT: " + error_text(errno), Error::kIo);
    sockaddr_storage ss;
    socklen_t len = to_sockaddr(local, dp->family_, ss);
    if (len != 0 && options.reuseport && local.port == 0) {
        // The kernel's ephemeral port search treats a port that another SO_REUSEPORT group
        // of this user holds as free: a group member bound to port 0 could join a stranger's
        // group. So the port comes from a plain socket's bind, which no group shares, and
        // the group takes it over as soon as that socket is closed.
        const int probe = ::socket(dp->family_, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (probe < 0) return report("udp: socket: " + error_text(errno), Error::kIo);
        sockaddr_storage ps = ss;
        socklen_t plen = len;
        const bool ok = ::bind(probe, reinterpret_cast<sockaddr*>(&ps), plen) == 0 &&
                        ::getsockname(probe, reinterpret_cast<sockaddr*>(&ps), &plen) == 0;
        ::close(probe);
        if (!ok) return report("udp: bind " + local.to_string() + ": " + error_text(errno), Error::kIo);
        len = to_sockaddr(local.with_port(from_sockaddr(ps).port), dp->family_, ss);
    }
    if (len == 0) return report("udp: cannot bind " + local.to_string(), Error::kInvalidArgument);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0)
        return report("udp: bind " + local.to_string() + ": " + error_text(errno), Error::kIo);
    socklen_t got = sizeof(ss);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &got) != 0)
        return report("udp: getsockname: " + error_text(errno), Error::kIo);
    dp->local_ = from_sockaddr(ss);

    // Offloads, detected here: a kernel without them refuses the socket options. GSO can
    // still be refused per send (a device without checksum offload); send_run falls back.
    if (options.gso) dp->gso_ = set_int(fd, SOL_UDP, UDP_SEGMENT, 0) == 0;
    if (options.gro) dp->gro_ = set_int(fd, SOL_UDP, UDP_GRO, 1) == 0;
    dp->rx_slot_bytes_ = dp->gro_ ? kGroSlotBytes : options.max_datagram_bytes;
    dp->scratch_->prepare_receive(dp->rx_slot_bytes_);

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

Error UdpDatapath::attach_steering(uint32_t shards, bool handshake_sockets, std::string* error) {
    return datapath::attach_steering(endpoint_.fd, shards, handshake_sockets, error);
}

Error UdpDatapath::open_handshake_socket(std::string* error) {
    if (!opt_.reuseport || handshake_fd_ >= 0) return Error::kWrongState;
    auto report = [&](const std::string& what) {
        if (error) *error = what + ": " + error_text(errno);
        return Error::kIo;
    };
    const int fd = ::socket(family_, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return report("udp: socket");
    // Handshakes are small: a buffer of a few thousand bounds what a flood queues.
    constexpr int kHandshakeBufferBytes = 1 << 20;
    (void)set_int(fd, SOL_SOCKET, SO_RCVBUF, kHandshakeBufferBytes);
    sockaddr_storage ss;
    const socklen_t len = to_sockaddr(local_, family_, ss);
    if (const std::string why = set_receive_options(fd, family_, wants_pktinfo());
        !why.empty() || set_int(fd, SOL_SOCKET, SO_REUSEPORT, 1) != 0 ||
        ::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
        const Error e = report("udp: handshake socket on " + local_.to_string());
        ::close(fd);
        return e;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
        const Error e = report("udp: epoll_ctl");
        ::close(fd);
        return e;
    }
    handshake_fd_ = fd;
    return Error::kOk;
}

void UdpDatapath::hold_handshakes(bool held) {
    if (handshake_fd_ < 0 || held == handshakes_held_) return;
    handshakes_held_ = held;
    // No interest while held: a level-triggered epoll would wake a sleeper for a queue
    // that recv_batch will not read.
    epoll_event ev{};
    ev.events = held ? 0u : static_cast<uint32_t>(EPOLLIN);
    ev.data.fd = handshake_fd_;
    (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, handshake_fd_, &ev);
}

Time UdpDatapath::now() const {
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return time_from_ns(int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec);
}

UdpDatapath::Socket* UdpDatapath::socket_for(uint16_t src_port, uint16_t plane) {
    if (src_port == 0 || src_port == local_.port) return &endpoint_;
    const bool bound = !opt_.plane_devices.empty();
    const uint32_t key = uint32_t{plane} << 16 | src_port;
    auto it = paths_.find(key);
    if (it != paths_.end()) {
        Socket& s = it->second;
        if (s.fd >= 0) {
            s.last_use = ++use_counter_;
            return &s;
        }
        if (now() < s.retry_after) return nullptr;
    } else if (paths_.size() >= path_socket_limit_) {
        evict_one();
    }
    Socket& s = paths_[key];
    s.last_use = ++use_counter_;
    const Address bind_to = local_.with_port(src_port);
    auto failed = [&](const std::string& what) {
        fail("udp: " + what + " " + bind_to.to_string() + ": " + error_text(errno));
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
    if (set_dont_fragment(s.fd, family_) != 0) return failed("IP_MTU_DISCOVER for");
    if (bound) {
        // Before bind(): sockets bound to different devices may then share a source port.
        const std::string& dev = opt_.plane_devices[plane];
        if (::setsockopt(s.fd, SOL_SOCKET, SO_BINDTODEVICE, dev.c_str(),
                         static_cast<socklen_t>(dev.size())) != 0)
            return failed("SO_BINDTODEVICE " + dev + " for");
    }
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

int UdpDatapath::tos_of(const PacketMeta& meta) const {
    const size_t cls = std::min<size_t>(meta.traffic_class, opt_.dscp_by_class.size() - 1);
    return opt_.dscp_by_class[cls] << 2 | (meta.ecn & 0x3);
}

bool UdpDatapath::set_tos(Socket& s, int tos) {
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
    size_t i = 0;
    while (i < packets.size()) {
        const uint16_t port = packets[i].meta.src.port;
        const bool bound = !opt_.plane_devices.empty();
        const uint16_t plane = bound ? packets[i].meta.local_port : 0;
        if (bound && plane >= opt_.plane_devices.size()) {
            // The engine has more planes than devices were named: a configuration error,
            // counted and named, and a lost packet for the engine.
            ++stats_.no_plane_device;
            fail("udp: no plane device for local port " + std::to_string(plane));
            ++i;
            continue;
        }
        Socket* s = socket_for(port, plane);
        if (!s) {  // the source port is taken: a lost packet for the engine
            ++stats_.bind_failures;
            ++i;
            continue;
        }
        // The socket's TOS follows the first packet of each run (a setsockopt only when it
        // changes: a path carrying one class never needs more); packets of the run with
        // another TOS (another class) carry their own in a cmsg (send_run).
        (void)set_tos(*s, tos_of(packets[i].meta));
        // A run: consecutive packets from the same socket, one sendmmsg call per kMaxBatch.
        size_t j = i + 1;
        while (j < packets.size() && packets[j].meta.src.port == port &&
               (bound ? packets[j].meta.local_port : 0) == plane)
            ++j;
        size_t accepted = 0;
        const auto outcome = send_run(*s, packets.subspan(i, j - i), accepted);
        i += accepted;
        if (!outcome) return outcome.error();
        if (static_cast<RunOutcome>(*outcome) == RunOutcome::kBlocked) return i;
    }
    return packets.size();
}

// send_run sends packets that share a socket, in sendmmsg calls of up to kMaxBatch
// messages. With GSO a message carries consecutive datagrams to one destination with one
// TOS byte (one class, one ECN codepoint), all of the first one's size except possibly a
// shorter last one (UDP_SEGMENT's rule). A message whose TOS is not the socket's carries it
// in an IP_TOS (IPv4 or IPv4-mapped destination) or IPV6_TCLASS cmsg. `accepted` counts the packets sent or dropped. Returns a
// RunOutcome as size_t; Error::kIo when the socket is unusable.
Result<size_t> UdpDatapath::send_run(Socket& s, std::span<const TxPacket> run, size_t& accepted) {
    Scratch& sc = *scratch_;
    size_t k = 0;  // first packet not yet accepted
    while (k < run.size()) {
        size_t m = 0, iov = 0, p = k;
        while (p < run.size() && m < kMaxBatch) {
            const socklen_t alen = to_sockaddr(run[p].meta.dst, family_, sc.addrs[m]);
            if (alen == 0) {
                if (m > 0) break;  // sent first; dropped when it leads the next call
                ++stats_.send_errors;
                fail("udp: cannot send to " + run[p].meta.dst.to_string() + " from " +
                     local_.to_string());
                k = ++p;
                continue;
            }
            const size_t size = run[p].size();
            const int tos = tos_of(run[p].meta);
            size_t segs = 1, bytes = size;
            if (gso_ && size > 0) {
                while (p + segs < run.size() && segs < kMaxGsoSegments) {
                    const TxPacket& next = run[p + segs];
                    const size_t n = next.size();
                    if (n == 0 || n > size || bytes + n > kMaxGsoBytes ||
                        !(next.meta.dst == run[p].meta.dst) || tos_of(next.meta) != tos)
                        break;
                    bytes += n;
                    ++segs;
                    if (n < size) break;  // a shorter datagram ends the super-packet
                }
            }
            // A datagram is one iovec, or two when its payload lies apart (TxPacket).
            const size_t iov0 = iov;
            sc.external[m] = false;
            for (size_t q = 0; q < segs; ++q) {
                const TxPacket& t = run[p + q];
                sc.iovs[iov].iov_base = const_cast<std::byte*>(t.data.data());
                sc.iovs[iov++].iov_len = t.data.size();
                if (!t.payload.empty()) {
                    sc.iovs[iov].iov_base = const_cast<std::byte*>(t.payload.data());
                    sc.iovs[iov++].iov_len = t.payload.size();
                    sc.external[m] = true;
                }
            }
            msghdr& h = sc.msgs[m].msg_hdr;
            h = msghdr{};
            h.msg_name = &sc.addrs[m];
            h.msg_namelen = alen;
            h.msg_iov = &sc.iovs[iov0];
            h.msg_iovlen = iov - iov0;
            const bool own_tos = tos != s.tos;
            const size_t clen = (segs > 1 ? CMSG_SPACE(sizeof(uint16_t)) : 0) +
                                (own_tos ? CMSG_SPACE(sizeof(int)) : 0);
            if (clen > 0) {
                std::memset(sc.control[m].data(), 0, clen);  // CMSG_NXTHDR reads the next header
                h.msg_control = sc.control[m].data();
                h.msg_controllen = clen;
                cmsghdr* c = CMSG_FIRSTHDR(&h);
                if (segs > 1) {
                    c->cmsg_level = SOL_UDP;
                    c->cmsg_type = UDP_SEGMENT;
                    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
                    const auto gso_size = static_cast<uint16_t>(size);
                    std::memcpy(CMSG_DATA(c), &gso_size, sizeof(gso_size));
                    c = CMSG_NXTHDR(&h, c);
                }
                if (own_tos) {
                    const bool v6 = family_ == AF_INET6 && !run[p].meta.dst.is_ipv4();
                    c->cmsg_level = v6 ? IPPROTO_IPV6 : IPPROTO_IP;
                    c->cmsg_type = v6 ? IPV6_TCLASS : IP_TOS;
                    c->cmsg_len = CMSG_LEN(sizeof(int));
                    std::memcpy(CMSG_DATA(c), &tos, sizeof(tos));
                }
            }
            sc.own_tos[m] = own_tos;
            sc.first[m] = p;
            sc.segments[m] = segs;
            p += segs;
            ++m;
        }
        if (m == 0) continue;
        ++stats_.send_calls;
        const int sent = ::sendmmsg(s.fd, sc.msgs.data(), static_cast<unsigned>(m), 0);
        if (sent > 0) {
            for (int q = 0; q < sent; ++q) {
                for (size_t d = 0; d < sc.segments[q]; ++d)
                    stats_.bytes_sent += run[sc.first[q] + d].size();
                stats_.packets_sent += sc.segments[q];
                if (sc.segments[q] > 1) ++stats_.gso_sends;
                if (sc.own_tos[q]) ++stats_.tos_cmsgs;
            }
            k = sc.first[sent - 1] + sc.segments[sent - 1];
            continue;
        }
        const int err = errno;
        if (err == EINTR) continue;
        if (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS || err == ENOMEM) {
            ++stats_.send_would_block;
            accepted = k;
            return static_cast<size_t>(RunOutcome::kBlocked);  // the caller retries the rest
        }
        const Address from = local_.with_port(&s == &endpoint_ ? local_.port : run[k].meta.src.port);
        if (sc.segments[0] > 1 && (err == EIO || err == EINVAL || err == EOPNOTSUPP)) {
            // The route's device cannot segment (no checksum offload, segment above the
            // MTU): send datagram by datagram from now on.
            gso_ = false;
            ++stats_.gso_fallbacks;
            fail("udp: UDP_SEGMENT refused " + from.to_string() + " -> " +
                 run[k].meta.dst.to_string() + ": " + error_text(err) + "; GSO turned off");
            continue;
        }
        fail("udp: send " + from.to_string() + " -> " + run[k].meta.dst.to_string() + ": " +
             error_text(err));
        // EFAULT names our own buffers, unless the message has a payload from elsewhere:
        // memory its owner released while the datagram waited (a bug of the owner's),
        // which costs that message only.
        if (err == EBADF || err == ENOTSOCK || (err == EFAULT && !sc.external[0])) {
            accepted = k;
            return Error::kIo;
        }
        // This message is refused (unreachable, too big...): its datagrams are dropped.
        stats_.send_errors += sc.segments[0];
        k = sc.first[0] + sc.segments[0];
    }
    accepted = run.size();
    return static_cast<size_t>(RunOutcome::kDone);
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
    if (packets.empty()) return size_t{0};
    // Datagrams of the last read not handed out yet live in the bounce buffer: hand them
    // out before reading again (which would overwrite them).
    if (pending_msg_ < pending_count_) return emit_pending(packets);
    Scratch& sc = *scratch_;
    const size_t n = std::min(packets.size(), kMaxBatch);
    sc.restore_receive_lengths();
    // With a handshake socket (open_handshake_socket), every kHandshakeEvery-th call keeps
    // kHandshakeBatch slots for it whatever the endpoint socket holds; other calls read it
    // only when the endpoint socket had nothing: while established traffic flows, a flood
    // gets at most kHandshakeBatch per kHandshakeEvery calls.
    const bool handshakes = handshake_fd_ >= 0 && !handshakes_held_;
    const bool handshake_turn = handshakes && ++handshake_tick_ % kHandshakeEvery == 0 && n > kHandshakeBatch;
    const size_t endpoint_slots = handshake_turn ? n - kHandshakeBatch : n;
    int r;
    do r = ::recvmmsg(endpoint_.fd, sc.rx_msgs.data(), static_cast<unsigned>(endpoint_slots),
                      MSG_DONTWAIT, nullptr);
    while (r < 0 && errno == EINTR);
    if (r < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            ++stats_.receive_errors;
            fail("udp: recvmmsg on " + local_.to_string() + ": " + error_text(errno));
            return Error::kIo;
        }
        r = 0;
    }
    // The kernel wrote back the lengths of the messages it filled; one more, in case a
    // failing receive after them wrote some too.
    sc.filled = std::min(endpoint_slots, static_cast<size_t>(r) + 1);
    if (r > 0) ++stats_.recv_calls;
    if (handshakes && (handshake_turn || r == 0)) {
        const size_t room = std::min(kHandshakeBatch, n - static_cast<size_t>(r));
        int h;
        do h = ::recvmmsg(handshake_fd_, sc.rx_msgs.data() + r, static_cast<unsigned>(room),
                          MSG_DONTWAIT, nullptr);
        while (h < 0 && errno == EINTR);
        sc.filled = std::max(sc.filled, static_cast<size_t>(r) + std::min(room, static_cast<size_t>(std::max(h, 0)) + 1));
        if (h > 0) {
            ++stats_.recv_calls;
            stats_.handshakes_received += static_cast<uint64_t>(h);
            r += h;
        }
    }
    if (r == 0) return size_t{0};
    const bool wildcard = is_unspecified(local_);
    // Kernel timestamps are on the wall clock: the offset to now()'s is read once per call,
    // after the messages were stamped, and compared with the previous call's.
    ClockPair clocks{};
    bool stamps_usable = false;
    if (rx_timestamps_) {
        clocks = read_clocks();
        const int64_t moved = clocks.wall_to_mono_ns - wall_to_mono_ns_;
        stamps_usable = moved < kClockStepNs && moved > -kClockStepNs;
        wall_to_mono_ns_ = clocks.wall_to_mono_ns;
    }
    for (int k = 0; k < r; ++k) {
        msghdr& h = sc.rx_msgs[k].msg_hdr;
        Scratch::RxInfo& info = sc.rx[k];
        info.len = sc.rx_msgs[k].msg_len;
        info.segment = 0;
        info.ok = !(h.msg_flags & MSG_TRUNC);
        if (!info.ok) {
            ++stats_.receive_truncated;
            continue;
        }
        PacketMeta& meta = info.meta;
        meta = PacketMeta{};
        meta.src = from_sockaddr(sc.rx_addrs[k]);
        meta.dst = local_;
        for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
                unsigned char tos;
                std::memcpy(&tos, CMSG_DATA(c), 1);
                meta.ecn = tos & 0x3;
            } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
                int tclass;
                std::memcpy(&tclass, CMSG_DATA(c), sizeof(tclass));
                meta.ecn = static_cast<uint8_t>(tclass & 0x3);
            } else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
                int segment;
                std::memcpy(&segment, CMSG_DATA(c), sizeof(segment));
                if (segment > 0 && static_cast<size_t>(segment) < info.len) {
                    info.segment = static_cast<size_t>(segment);
                    ++stats_.gro_receives;
                }
            } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
                in_pktinfo pi;
                std::memcpy(&pi, CMSG_DATA(c), sizeof(pi));
                if (wildcard) meta.dst = Address::ipv4(ntohl(pi.ipi_addr.s_addr), local_.port);
                meta.local_port = plane_of_interface(pi.ipi_ifindex);
            } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
                in6_pktinfo pi;
                std::memcpy(&pi, CMSG_DATA(c), sizeof(pi));
                if (wildcard) std::memcpy(meta.dst.ip.data(), &pi.ipi6_addr, 16);
                meta.local_port = plane_of_interface(static_cast<int>(pi.ipi6_ifindex));
            } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                timespec ts;
                std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
                const int64_t at = timespec_ns(ts) + clocks.wall_to_mono_ns;
                // A stamp read across a step of the wall clock, or in the future, or
                // older than any backlog the socket can hold, is not trusted: the engine
                // then takes the time it handles the datagram, as without stamps.
                if (stamps_usable && at <= clocks.mono_ns && clocks.mono_ns - at < kMaxBacklogNs)
                    meta.arrival = time_from_ns(at);
                else
                    ++stats_.rx_stamps_unusable;
            }
        }
    }
    pending_msg_ = 0;
    pending_count_ = static_cast<size_t>(r);
    pending_offset_ = 0;
    return emit_pending(packets);
}

bool UdpDatapath::wants_pktinfo() const {
    return is_unspecified(local_) || !opt_.plane_devices.empty();
}

uint16_t UdpDatapath::plane_of_interface(int ifindex) const {
    for (size_t j = 0; j < plane_ifindex_.size(); ++j)
        if (plane_ifindex_[j] == static_cast<unsigned>(ifindex)) return static_cast<uint16_t>(j);
    return plane_ifindex_.empty() ? 0 : kNotAPlane;
}

// emit_pending hands out datagrams of the messages last read, splitting super-packets by
// their segment size, until `packets` is full; returns the count.
size_t UdpDatapath::emit_pending(std::span<RxPacket> packets) {
    Scratch& sc = *scratch_;
    size_t out = 0;
    while (out < packets.size() && pending_msg_ < pending_count_) {
        const Scratch::RxInfo& info = sc.rx[pending_msg_];
        if (info.ok) {
            const std::byte* base = sc.bounce.data() + pending_msg_ * rx_slot_bytes_;
            const size_t segment = info.segment ? info.segment : std::max<size_t>(info.len, 1);
            do {
                const size_t len = std::min(segment, info.len - pending_offset_);
                packets[out].data = std::span<const std::byte>(base + pending_offset_, len);
                packets[out].meta = info.meta;
                stats_.bytes_received += len;
                ++stats_.packets_received;
                ++out;
                pending_offset_ += len;
            } while (out < packets.size() && pending_offset_ < info.len);
            if (pending_offset_ < info.len) break;  // `packets` is full mid-super-packet
        }
        ++pending_msg_;
        pending_offset_ = 0;
    }
    return out;
}

}  // namespace mroce::datapath
