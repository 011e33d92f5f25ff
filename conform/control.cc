// conform/control.cc — see control.h.
#include "conform/control.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mroce::conform {

std::optional<ControlClient> ControlClient::connect(const Address& agent, std::string* why) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(agent.port);
    sa.sin_addr.s_addr = htonl(agent.ipv4_host_order());
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
        if (why) *why = "cannot reach the agent at " + agent.to_string() + ": " + std::strerror(errno);
        if (fd >= 0) ::close(fd);
        return std::nullopt;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return ControlClient(fd);
}

ControlClient::~ControlClient() {
    if (fd_ >= 0) ::close(fd_);
}

nlohmann::json ControlClient::call(const std::string& cmd, nlohmann::json args) {
    args["cmd"] = cmd;
    const uint64_t id = next_id_++;
    args["id"] = id;
    const std::string line = args.dump() + "\n";
    size_t done = 0;
    while (done < line.size()) {
        const ssize_t n = ::send(fd_, line.data() + done, line.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw ControlError("agent connection lost while sending '" + cmd + "'");
        done += static_cast<size_t>(n);
    }
    for (;;) {
        const size_t nl = buffer_.find('\n');
        if (nl != std::string::npos) {
            const std::string reply = buffer_.substr(0, nl);
            buffer_.erase(0, nl + 1);
            auto j = nlohmann::json::parse(reply, nullptr, false);
            if (j.is_discarded() || !j.is_object())
                throw ControlError("agent answered '" + cmd + "' with something not JSON");
            if (j.contains("id") && j["id"] != id) continue;  // a late answer: skip it
            if (!j.value("ok", false))
                throw ControlError("agent refused '" + cmd + "': " + j.value("error", "no reason"));
            return j;
        }
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 10000) <= 0)
            throw ControlError("agent did not answer '" + cmd + "' within 10 s");
        char chunk[65536];
        const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw ControlError("agent connection lost waiting for '" + cmd + "'");
        buffer_.append(chunk, static_cast<size_t>(n));
    }
}

}  // namespace mroce::conform
