// conform/agent/server.cc — the agent's TCP side: JSON lines, one request and one answer
// per line, one controller at a time (docs/conformance.md §1).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "conform/agent/agent.h"

namespace mroce::conform {
namespace {

// A controller line longer than this is not a request of this protocol (write_mr of a
// megabyte is 2 MiB of hex): the connection is closed instead of growing without bound.
constexpr size_t kMaxLine = 16u << 20;

bool write_all(int fd, const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
        const ssize_t n = ::send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

// serve answers the requests of one controller until it disconnects.
void serve(int fd, Agent& agent) {
    std::string buf;
    char chunk[65536];
    for (;;) {
        size_t nl;
        while ((nl = buf.find('\n')) != std::string::npos) {
            const std::string line = buf.substr(0, nl);
            buf.erase(0, nl + 1);
            if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
            nlohmann::json answer;
            const auto request = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
            if (request.is_discarded())
                answer = nlohmann::json{{"ok", false}, {"error", "request is not valid JSON"}};
            else
                answer = agent.handle(request);
            if (!write_all(fd, answer.dump() + "\n")) return;
        }
        if (buf.size() > kMaxLine) return;
        const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        buf.append(chunk, static_cast<size_t>(n));
    }
}

}  // namespace

int run_agent(const AgentOptions& opts) {
    auto listen_addr = api::parse_address(opts.listen);
    auto udp_addr = api::parse_address(opts.udp);
    if (!listen_addr || !listen_addr->is_ipv4()) {
        std::fprintf(stderr, "mroce conform-agent: --listen '%s' is not an IPv4 ADDR:PORT\n",
                     opts.listen.c_str());
        return 2;
    }
    if (!udp_addr) {
        std::fprintf(stderr, "mroce conform-agent: --udp '%s' is not ADDR:PORT\n",
                     opts.udp.c_str());
        return 2;
    }
    Agent agent(*udp_addr, opts.ack_with_reverse_data, opts.short_acks, opts.compact_data);
    std::string why;
    if (!agent.open(&why)) {
        std::fprintf(stderr, "mroce conform-agent: %s\n", why.c_str());
        return 1;
    }
    const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(listen_addr->port);
    sa.sin_addr.s_addr = htonl(listen_addr->ipv4_host_order());
    socklen_t len = sizeof(sa);
    if (lfd < 0 || ::bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
        ::listen(lfd, 4) != 0 || ::getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
        std::fprintf(stderr, "mroce conform-agent: cannot listen on %s: %s\n",
                     opts.listen.c_str(), std::strerror(errno));
        return 1;
    }
    const Address control = listen_addr->with_port(ntohs(sa.sin_port));
    // The one line a launcher reads to learn the ephemeral ports (tests/conform/).
    std::printf("conform-agent: control %s udp %s\n", control.to_string().c_str(),
                agent.udp_address().to_string().c_str());
    std::fflush(stdout);
    for (;;) {
        const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR) continue;
            std::fprintf(stderr, "mroce conform-agent: accept: %s\n", std::strerror(errno));
            return 1;
        }
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        serve(fd, agent);
        ::close(fd);
    }
}

}  // namespace mroce::conform
