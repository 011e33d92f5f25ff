// tools/perf_oob.cc — see perf_oob.h.
#include "tools/perf_oob.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace mroce::tools::perf {

namespace {

// A message longer than this is not one of ours: the connection is refused.
constexpr size_t kMaxMessageBytes = 1 << 20;

std::string error_text(int err) {
    const char* s = strerrordesc_np(err);
    return s ? s : ("errno " + std::to_string(err));
}

Address address_of(const sockaddr_storage& ss) {
    Address a;
    if (ss.ss_family == AF_INET) {
        const auto* s = reinterpret_cast<const sockaddr_in*>(&ss);
        return Address::ipv4(ntohl(s->sin_addr.s_addr), 0);
    }
    const auto* s = reinterpret_cast<const sockaddr_in6*>(&ss);
    std::memcpy(a.ip.data(), &s->sin6_addr, 16);
    return a;  // an IPv4-mapped address reads as IPv4 (Address::is_ipv4)
}

void set_nodelay(int fd) {
    int one = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

Oob::Oob(int fd) : fd_(fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) local_ = address_of(ss);
    len = sizeof(ss);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) peer_ = address_of(ss);
    set_nodelay(fd);
}

Oob::~Oob() {
    if (fd_ >= 0) ::close(fd_);
}

Oob::Oob(Oob&& o) noexcept
    : fd_(o.fd_), in_(std::move(o.in_)), error_(std::move(o.error_)), local_(o.local_),
      peer_(o.peer_) {
    o.fd_ = -1;
}

std::optional<Oob> Oob::listen(uint16_t port, std::chrono::seconds timeout, std::string& error) {
    int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool v6 = fd >= 0;
    if (!v6) fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        error = "cannot create the control socket: " + error_text(errno);
        return std::nullopt;
    }
    int one = 1, zero = 0;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_storage ss{};
    socklen_t len;
    if (v6) {
        (void)::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        auto* s = reinterpret_cast<sockaddr_in6*>(&ss);
        s->sin6_family = AF_INET6;
        s->sin6_port = htons(port);
        s->sin6_addr = in6addr_any;
        len = sizeof(*s);
    } else {
        auto* s = reinterpret_cast<sockaddr_in*>(&ss);
        s->sin_family = AF_INET;
        s->sin_port = htons(port);
        s->sin_addr.s_addr = htonl(INADDR_ANY);
        len = sizeof(*s);
    }
    if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd, 1) != 0) {
        error = "cannot listen on TCP port " + std::to_string(port) + ": " + error_text(errno);
        ::close(fd);
        return std::nullopt;
    }
    pollfd p{fd, POLLIN, 0};
    const int ms = static_cast<int>(std::chrono::milliseconds(timeout).count());
    int r;
    do r = ::poll(&p, 1, ms);
    while (r < 0 && errno == EINTR);
    if (r <= 0) {
        error = "no client connected to TCP port " + std::to_string(port) + " within " +
                std::to_string(timeout.count()) + " s";
        ::close(fd);
        return std::nullopt;
    }
    const int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    const int err = errno;
    ::close(fd);  // one client per run, as perftest
    if (c < 0) {
        error = "accept on TCP port " + std::to_string(port) + ": " + error_text(err);
        return std::nullopt;
    }
    return Oob(c);
}

std::optional<Oob> Oob::connect(const std::string& host, uint16_t port,
                                std::chrono::seconds timeout, std::string& error) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    const int g = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
    if (g != 0) {
        error = "cannot resolve " + host + ": " + ::gai_strerror(g);
        return std::nullopt;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string last = "no address";
    for (;;) {
        for (addrinfo* ai = list; ai; ai = ai->ai_next) {
            const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
            if (fd < 0) continue;
            if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
                ::freeaddrinfo(list);
                return Oob(fd);
            }
            last = error_text(errno);
            ::close(fd);
        }
        // The server may not be listening yet: retry until the deadline.
        if (std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::freeaddrinfo(list);
    error = "cannot reach " + host + " TCP port " + std::to_string(port) + ": " + last;
    return std::nullopt;
}

bool Oob::send(const Json& message) {
    if (!alive()) return false;
    const std::string line = message.dump() + "\n";
    size_t off = 0;
    while (off < line.size()) {
        const ssize_t n = ::send(fd_, line.data() + off, line.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            error_ = "control connection lost: " + error_text(errno);
            return false;
        }
        off += static_cast<size_t>(n);
    }
    return true;
}

bool Oob::fill(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, timeout_ms);
    if (r <= 0) return true;  // nothing yet (or EINTR): not an error
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) {
        error_ = "the peer closed the control connection";
        return false;
    }
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return true;
        error_ = "control connection lost: " + error_text(errno);
        return false;
    }
    in_.append(buf, static_cast<size_t>(n));
    if (in_.size() > kMaxMessageBytes) {
        error_ = "control message longer than " + std::to_string(kMaxMessageBytes) + " bytes";
        return false;
    }
    return true;
}

std::optional<Json> Oob::take_line() {
    const size_t nl = in_.find('\n');
    if (nl == std::string::npos) return std::nullopt;
    const std::string line = in_.substr(0, nl);
    in_.erase(0, nl + 1);
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
        error_ = "malformed control message: " + line.substr(0, 80);
        return std::nullopt;
    }
    return j;
}

std::optional<Json> Oob::poll() {
    if (!alive()) return std::nullopt;
    if (auto j = take_line()) return j;
    if (!fill(0)) return std::nullopt;
    return take_line();
}

std::optional<Json> Oob::receive(std::chrono::milliseconds timeout,
                                 const std::function<void()>& idle) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (alive()) {
        if (auto j = take_line()) return j;
        if (!error_.empty()) return std::nullopt;
        if (!fill(idle ? 0 : 10)) return std::nullopt;
        if (auto j = take_line()) return j;
        if (!error_.empty()) return std::nullopt;
        if (std::chrono::steady_clock::now() >= deadline) {
            error_ = "no control message from the peer within " +
                     std::to_string(timeout.count()) + " ms";
            return std::nullopt;
        }
        if (idle) idle();
    }
    return std::nullopt;
}

bool Oob::quiet(std::string& error) {
    if (auto m = poll()) {
        error = "unexpected control message: " + m->dump().substr(0, 80);
        return false;
    }
    if (alive()) return true;
    error = error_;
    return false;
}

}  // namespace mroce::tools::perf
