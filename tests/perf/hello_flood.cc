// tests/perf/hello_flood.cc — the two helpers of the HELLO-flood test (hello_flood_test.py;
// issue 17, finding 8):
//
//   hello_flood flood ADDR:PORT [--rate N] [--seconds S] [--count N] [--seed N]
//       sends forged wire-version-2 HELLOs to ADDR:PORT from one UDP socket (one source
//       address and port; 127.0.99.1 when ADDR is a loopback address): random
//       src_conn_id, src_token, ISNs and endpoint_port, 256 announced paths (the most
//       state a HELLO may ask for), no cookie. --rate N paces to N
//       per second (0: as fast as this process can send them), for S seconds or until N
//       are sent (--count, 0: no limit). Prints one JSON line:
//       {"sent": ..., "seconds": ..., "rate": ..., "seed": ...}.
//   hello_flood connect ADDR:PORT [--timeout S]
//       a new client: an api::Device on 127.0.0.1 opens a connection to the endpoint at
//       ADDR:PORT (a queue pair connected to a number the peer has not bound: nothing but
//       the handshake crosses) and waits for it to come up. Prints one JSON line:
//       {"connected": true|false, "ms": ..., "retries_received": ...}; exits 1 if not up.
//
// Exit status 2 on bad arguments, with a one-line message.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/device.h"
#include "util/rng.h"
#include "wire/control.h"

namespace {

using namespace mroce;
using Clock = std::chrono::steady_clock;

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr, "hello_flood: %s\nusage: hello_flood flood|connect ADDR:PORT [--rate N] "
                         "[--seconds S] [--count N] [--seed N] [--timeout S]\n", why.c_str());
    std::exit(2);
}

bool parse_target(const std::string& s, sockaddr_in& sa) {
    const auto colon = s.rfind(':');
    if (colon == std::string::npos) return false;
    sa = sockaddr_in{};
    sa.sin_family = AF_INET;
    const long port = std::strtol(s.c_str() + colon + 1, nullptr, 10);
    if (port < 1 || port > 65535) return false;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    return ::inet_pton(AF_INET, s.substr(0, colon).c_str(), &sa.sin_addr) == 1;
}

int flood(const sockaddr_in& to, double rate, double seconds, uint64_t count, uint64_t seed) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    // The server answers each forged HELLO with a RETRY to the HELLO's source address and
    // its random endpoint_port. From 127.0.0.1 those RETRYs would land on whatever local
    // socket holds that port: the conformance suite's peer, running beside this test,
    // counted them as the target's bad packets. On loopback the flood comes from an
    // address no other test binds, so its answers reach nobody.
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = htonl(0x7f006301);  // 127.0.99.1
    const bool loopback = (ntohl(to.sin_addr.s_addr) >> 24) == 127;
    if (fd < 0 || (loopback && ::bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof(from)) != 0) ||
        ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0) {
        std::fprintf(stderr, "hello_flood: socket: %s\n", std::strerror(errno));
        return 1;
    }
    constexpr size_t kBurst = 32;  // one sendmmsg
    std::vector<std::byte> bufs(kBurst * wire::kHelloSize);
    std::vector<mmsghdr> msgs(kBurst);
    std::vector<iovec> iov(kBurst);
    Rng rng(seed);
    uint64_t sent = 0;
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(seconds);
    for (;;) {
        const auto now = Clock::now();
        if (now >= end || (count && sent >= count)) break;
        if (rate > 0) {  // the next burst leaves when the schedule says
            const auto due = start + std::chrono::duration<double>(static_cast<double>(sent) / rate);
            if (due > now) {
                std::this_thread::sleep_until(std::min(due, end));
                continue;
            }
        }
        for (size_t i = 0; i < kBurst; ++i) {
            wire::HelloPacket h;
            h.common.type = wire::PacketType::kHello;
            h.src_conn_id = rng.next_u32() | 1;
            h.src_token = rng.next_u64() | 1;
            h.isn = rng.next_u32() | 1;
            h.msg_isn = rng.next_u32() | 1;
            h.endpoint_port = static_cast<uint16_t>(1024 + rng.uniform(65536 - 1024));
            h.num_paths = wire::kMaxPaths;
            h.max_payload = 4096;
            const std::span<std::byte> b(bufs.data() + i * wire::kHelloSize, wire::kHelloSize);
            if (!wire::encode_hello(h, b).ok()) {
                std::fprintf(stderr, "hello_flood: encode_hello failed\n");
                return 1;
            }
            iov[i] = iovec{b.data(), b.size()};
            msgs[i] = mmsghdr{};
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        const size_t burst = count ? std::min<uint64_t>(kBurst, count - sent) : kBurst;
        const int n = ::sendmmsg(fd, msgs.data(), static_cast<unsigned>(burst), 0);
        if (n < 0 && errno != EINTR && errno != ECONNREFUSED && errno != ENOBUFS) {
            std::fprintf(stderr, "hello_flood: sendmmsg: %s\n", std::strerror(errno));
            return 1;
        }
        if (n > 0) sent += static_cast<uint64_t>(n);
    }
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    ::close(fd);
    std::printf("{\"sent\": %llu, \"seconds\": %.3f, \"rate\": %.0f, \"seed\": %llu}\n",
                static_cast<unsigned long long>(sent), took, static_cast<double>(sent) / took,
                static_cast<unsigned long long>(seed));
    return 0;
}

int connect_once(const sockaddr_in& to, double timeout_s) {
    api::DeviceConfig cfg;
    cfg.local = Address::ipv4(0x7f000001, 0);
    cfg.stat_socket = false;
    std::string why;
    auto dev = api::Device::open(cfg, &why);
    if (!dev) {
        std::fprintf(stderr, "hello_flood: %s\n", why.c_str());
        return 1;
    }
    auto pd = (*dev)->alloc_pd();
    auto cq = (*dev)->create_cq();
    auto qp = pd->create_qp(*cq, *cq);
    if (!qp) {
        std::fprintf(stderr, "hello_flood: create_qp failed\n");
        return 1;
    }
    const Address server = Address::ipv4(ntohl(to.sin_addr.s_addr), ntohs(to.sin_port));
    const auto start = Clock::now();
    // A number the server has not bound: the handshake runs, and no DATA is sent.
    if (Error e = (*qp)->connect(server, 0xFEDCB); e != Error::kOk) {
        std::fprintf(stderr, "hello_flood: connect failed\n");
        return 1;
    }
    bool up = false, failed = false;
    const auto give_up = start + std::chrono::duration<double>(timeout_s);
    std::vector<api::Event> evs(64);
    while (!up && !failed && Clock::now() < give_up) {
        const size_t n = (*dev)->poll_events(evs);
        for (size_t i = 0; i < n; ++i) {
            if (evs[i].kind == core::EventKind::kConnectionUp) up = true;
            if (evs[i].kind == core::EventKind::kConnectionFailed) failed = true;
        }
        if (!up && !failed) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    uint64_t retries = 0;
    if (auto r = (*dev)->connection_report(server)) retries = r->connection.retries_received;
    std::printf("{\"connected\": %s, \"ms\": %.2f, \"retries_received\": %llu}\n",
                up ? "true" : "false", ms, static_cast<unsigned long long>(retries));
    return up ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) usage("a mode and a target are needed");
    const std::string mode = argv[1];
    sockaddr_in to;
    if (!parse_target(argv[2], to)) usage(std::string("not IPv4ADDR:PORT: ") + argv[2]);
    double rate = 0, seconds = 1, timeout = 5;
    uint64_t seed = static_cast<uint64_t>(::getpid()), count = 0;
    for (int i = 3; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) usage("missing value for " + a);
        const char* v = argv[++i];
        char* endp = nullptr;
        const double d = std::strtod(v, &endp);
        if (*endp != '\0' || d < 0) usage("bad value for " + a + ": " + v);
        if (a == "--rate") rate = d;
        else if (a == "--seconds") seconds = d;
        else if (a == "--timeout") timeout = d;
        else if (a == "--seed") seed = std::strtoull(v, nullptr, 10);
        else if (a == "--count") count = std::strtoull(v, nullptr, 10);
        else usage("unknown option " + a);
    }
    if (mode == "flood") return flood(to, rate, seconds, count, seed);
    if (mode == "connect") return connect_once(to, timeout);
    usage("unknown mode " + mode);
}
