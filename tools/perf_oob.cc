// tools/perf_oob.cc — see perf_oob.h.
#include "tools/perf_oob.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
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

// A lane that does not connect (or whose header does not arrive) within this is left out.
constexpr int kLaneTimeoutMs = 1000;

// connect_one: one TCP connection to `ai` within timeout_ms (a SYN into a dead route is not
// waited for the kernel's two minutes); -1 with errno set on failure.
int connect_one(const addrinfo* ai, int timeout_ms) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                            ai->ai_protocol);
    if (fd < 0) return -1;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        const int err = errno;
        ::close(fd);
        errno = err;
        return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    int r;
    do r = ::poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    int err = ETIMEDOUT;
    socklen_t len = sizeof(err);
    if (r > 0) (void)::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
        ::close(fd);
        errno = err;
        return -1;
    }
    const int flags = ::fcntl(fd, F_GETFL);
    (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

// wait_readable: poll one fd for input for up to timeout_ms.
bool wait_readable(int fd, int timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    int r;
    do r = ::poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    return r > 0;
}

// read_header reads a lane's first line, {"lanes": n, "lane": i}, byte by byte (so nothing
// after it is consumed); returns n, or 0 if it did not come in time or is not a header.
size_t read_header(int fd, int timeout_ms) {
    std::string line;
    while (line.size() < 256) {
        if (!wait_readable(fd, timeout_ms)) return 0;
        char c;
        if (::recv(fd, &c, 1, 0) != 1) return 0;
        if (c == '\n') break;
        line.push_back(c);
    }
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("lanes") || !j["lanes"].is_number_unsigned()) return 0;
    const size_t n = j["lanes"].get<size_t>();
    return n >= 1 && n <= Oob::kLanes ? n : 0;
}

}  // namespace

Oob::Oob(std::vector<int> fds) {
    for (int fd : fds) {
        set_nodelay(fd);
        lanes_.push_back(Lane{fd, {}});
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    const int fd = fds.front();
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) local_ = address_of(ss);
    len = sizeof(ss);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) peer_ = address_of(ss);
}

Oob::~Oob() {
    for (Lane& l : lanes_) ::close(l.fd);
}

Oob::Oob(Oob&& o) noexcept
    : lanes_(std::move(o.lanes_)), send_seq_(o.send_seq_), recv_seq_(o.recv_seq_),
      error_(std::move(o.error_)), malformed_(o.malformed_), local_(o.local_), peer_(o.peer_) {
    o.lanes_.clear();
}

void Oob::drop_lane(Lane& l) {
    ::close(l.fd);
    l.fd = -1;
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
    if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
        ::listen(fd, static_cast<int>(kLanes)) != 0) {
        error = "cannot listen on TCP port " + std::to_string(port) + ": " + error_text(errno);
        ::close(fd);
        return std::nullopt;
    }
    if (!wait_readable(fd, static_cast<int>(std::chrono::milliseconds(timeout).count()))) {
        error = "no client connected to TCP port " + std::to_string(port) + " within " +
                std::to_string(timeout.count()) + " s";
        ::close(fd);
        return std::nullopt;
    }
    std::vector<int> lanes;
    const int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
        error = "accept on TCP port " + std::to_string(port) + ": " + error_text(errno);
        ::close(fd);
        return std::nullopt;
    }
    lanes.push_back(c);
    const size_t n = read_header(c, static_cast<int>(std::chrono::milliseconds(timeout).count()));
    if (n == 0) {
        error = "the client on TCP port " + std::to_string(port) + " sent no channel header";
        ::close(c);
        ::close(fd);
        return std::nullopt;
    }
    // The client connected its other lanes before sending any header; a lane that does
    // not show up in time (its route is dead) is simply not used.
    while (lanes.size() < n && wait_readable(fd, kLaneTimeoutMs)) {
        const int l = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (l < 0) break;
        if (read_header(l, kLaneTimeoutMs) == n) {
            lanes.push_back(l);
        } else {
            ::close(l);
        }
    }
    ::close(fd);  // one client per run, as perftest
    return Oob(std::move(lanes));
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
            const int fd = connect_one(ai, kLaneTimeoutMs);
            if (fd < 0) {
                last = error_text(errno);
                continue;
            }
            // The first lane is up: the others go to the same address, each from its own
            // ephemeral port. Headers follow once all are connected, so the server knows
            // how many to expect before it reads further.
            std::vector<int> fds{fd};
            for (size_t i = 1; i < kLanes; ++i)
                if (const int l = connect_one(ai, kLaneTimeoutMs); l >= 0) fds.push_back(l);
            ::freeaddrinfo(list);
            for (size_t i = 0; i < fds.size(); ++i) {
                const std::string h = Json{{"lanes", fds.size()}, {"lane", i}}.dump() + "\n";
                (void)!::send(fds[i], h.data(), h.size(), MSG_NOSIGNAL);
            }
            return Oob(std::move(fds));
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
    // After a malformed line from the peer the lanes still work: the error is answered.
    if (lanes_.empty() || (!error_.empty() && !malformed_)) return false;
    const std::string line = Json{{"seq", send_seq_}, {"m", message}}.dump() + "\n";
    ++send_seq_;
    bool sent = false;
    std::string why = "no usable lane";
    for (Lane& l : lanes_) {
        if (l.fd < 0) continue;
        // Messages are small: a lane whose send buffer cannot take one whole is stuck on
        // a dead route (or the peer is gone); it is dropped rather than waited for.
        const ssize_t n = ::send(l.fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n == static_cast<ssize_t>(line.size())) {
            sent = true;
            continue;
        }
        why = n < 0 ? error_text(errno) : "short write";
        drop_lane(l);
    }
    if (!sent && error_.empty()) error_ = "control connection lost: " + why;
    return sent;
}

bool Oob::fill(int timeout_ms) {
    std::vector<pollfd> ps;
    for (const Lane& l : lanes_)
        if (l.fd >= 0) ps.push_back(pollfd{l.fd, POLLIN, 0});
    if (ps.empty()) {
        error_ = "control connection lost: every lane failed";
        return false;
    }
    const int r = ::poll(ps.data(), ps.size(), timeout_ms);
    if (r <= 0) return true;  // nothing yet (or EINTR): not an error
    for (const pollfd& p : ps) {
        if (!p.revents) continue;
        Lane* lane = nullptr;
        for (Lane& l : lanes_)
            if (l.fd == p.fd) lane = &l;
        char buf[4096];
        const ssize_t n = ::recv(p.fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0) {
            // The peer closes every lane at once, after its last message, which each lane
            // delivered before its end: a closed lane means the peer is gone.
            error_ = "the peer closed the control connection";
            return false;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            drop_lane(*lane);  // reset or timed out: the other lanes carry on
            continue;
        }
        lane->in.append(buf, static_cast<size_t>(n));
        if (lane->in.size() > kMaxMessageBytes) {
            error_ = "control message longer than " + std::to_string(kMaxMessageBytes) + " bytes";
            return false;
        }
    }
    return true;
}

std::optional<Json> Oob::take_line() {
    // Each lane is in order; copies of messages already taken from a faster lane are skipped.
    for (Lane& l : lanes_) {
        for (;;) {
            const size_t nl = l.in.find('\n');
            if (nl == std::string::npos) break;
            const std::string line = l.in.substr(0, nl);
            Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
            if (j.is_discarded() || !j.is_object() || !j.contains("seq") ||
                !j["seq"].is_number_unsigned() || !j.contains("m") || !j["m"].is_object()) {
                error_ = "malformed control message: " + line.substr(0, 80);
                malformed_ = true;
                return std::nullopt;
            }
            const uint64_t seq = j["seq"].get<uint64_t>();
            if (seq > recv_seq_) break;  // this lane is ahead: take the missing one elsewhere
            l.in.erase(0, nl + 1);
            if (seq < recv_seq_) continue;  // a copy already taken
            ++recv_seq_;
            return std::move(j["m"]);
        }
    }
    return std::nullopt;
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
