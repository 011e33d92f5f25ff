// verbs/settings.cc — the environment the library reads, its log, and the GID encoding.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "verbs/verbs_internal.h"

namespace mroce::verbs {
namespace {

// parse_uint reads a whole decimal number in [lo, hi].
bool parse_uint(const char* s, unsigned long lo, unsigned long hi, unsigned long& out) {
    if (!s || !*s) return false;
    char* end = nullptr;
    errno = 0;
    const unsigned long v = std::strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0' || s[0] == '-' || v < lo || v > hi) return false;
    out = v;
    return true;
}

// default_ipv4 is the address this host would send from towards the default route: the
// address peers on other hosts most likely reach. A UDP connect sends nothing. Falls back
// to loopback on a host without a route.
uint32_t default_ipv4() {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    uint32_t ip = INADDR_LOOPBACK;
    if (fd < 0) return ip;
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(9);
    dst.sin_addr.s_addr = htonl(0xc0000201);  // 192.0.2.1 (TEST-NET-1): any routed address
    sockaddr_in me{};
    socklen_t len = sizeof(me);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len) == 0 &&
        me.sin_addr.s_addr != htonl(INADDR_ANY))
        ip = ntohl(me.sin_addr.s_addr);
    ::close(fd);
    return ip;
}

int read_log_level() {
    unsigned long v = 1;
    if (const char* s = std::getenv("MROCE_LOG"); s && !parse_uint(s, 0, 3, v)) v = 1;
    return static_cast<int>(v);
}

}  // namespace

int log_level() {
    static const int level = read_log_level();
    return level;
}

void log(int level, const char* fmt, ...) {
    if (level > log_level()) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "mroce: %s\n", line);
}

bool read_settings(Settings& out, std::string& error) {
    Settings s;
    unsigned long v = 0;
    uint32_t ip = 0;
    if (const char* e = std::getenv("MROCE_IP")) {
        in_addr a{};
        if (::inet_pton(AF_INET, e, &a) != 1) {
            error = std::string("MROCE_IP=") + e + ": not an IPv4 address";
            return false;
        }
        ip = ntohl(a.s_addr);
    } else {
        ip = default_ipv4();
    }
    uint16_t port = 0;
    if (const char* e = std::getenv("MROCE_PORT")) {
        if (!parse_uint(e, 0, 65535, v)) {
            error = std::string("MROCE_PORT=") + e + ": not a UDP port (0..65535; 0 = any)";
            return false;
        }
        port = static_cast<uint16_t>(v);
    }
    s.local = Address::ipv4(ip, port);
    // The numeric settings: name, range and what the number is, for the error line.
    const struct {
        const char* name;
        unsigned long lo, hi;
        const char* what;
    } numbers[] = {
        {"MROCE_PATHS", 1, api::kMaxPaths, "a path count"},
        {"MROCE_LOG", 0, 3, "a log level"},
        {"MROCE_SPIN_US", 0, 1'000'000, "a time in µs"},
        {"MROCE_LINGER_MS", 0, 60'000, "a time in ms"},
        {"MROCE_ACK_WITH_DATA", 0, 1, "0 or 1"},
        {"MROCE_STAND_BY_US", 0, 1'000'000, "a time in µs"},
        {"MROCE_SEND_FIRST", 0, 1, "0 or 1"},
        {"MROCE_COALESCE", 0, 1, "0 or 1"},
        {"MROCE_THREADS", 1, api::kMaxThreads, "a thread count"},
        {"MROCE_SPIN_ALONE_US", 0, 1'000'000, "a time in µs"},
    };
    unsigned long values[std::size(numbers)];
    for (size_t i = 0; i < std::size(numbers); ++i) {
        values[i] = ~0ul;  // unset
        const char* e = std::getenv(numbers[i].name);
        if (e && !parse_uint(e, numbers[i].lo, numbers[i].hi, values[i])) {
            error = std::string(numbers[i].name) + "=" + e + ": not " + numbers[i].what + " (" +
                    std::to_string(numbers[i].lo) + ".." + std::to_string(numbers[i].hi) + ")";
            return false;
        }
    }
    if (values[0] != ~0ul) s.paths = static_cast<uint16_t>(values[0]);
    // values[1], MROCE_LOG, is only checked here: log_level() reads it for the logger.
    if (values[2] != ~0ul) s.spin_us = static_cast<uint32_t>(values[2]);
    if (values[3] != ~0ul) s.linger = std::chrono::milliseconds(values[3]);
    if (values[4] != ~0ul) s.ack_with_data = values[4] != 0;
    if (values[5] != ~0ul) s.stand_by_us = static_cast<uint32_t>(values[5]);
    if (values[6] != ~0ul) s.send_first = values[6] != 0;
    if (values[7] != ~0ul) s.coalesce = values[7] != 0;
    if (values[8] != ~0ul) s.threads = static_cast<uint32_t>(values[8]);
    if (values[9] != ~0ul) s.spin_alone_us = static_cast<uint32_t>(values[9]);
    if (const char* e = std::getenv("MROCE_STAGES")) s.stages_file = e;
    out = s;
    return true;
}

int errno_of(Error e) {
    switch (e) {
        case Error::kOk: return 0;
        case Error::kExhausted: return ENOMEM;
        case Error::kNotFound: return ENOENT;
        case Error::kIo: return EIO;
        case Error::kAccessDenied:
        case Error::kWrongState:
        case Error::kInvalidArgument:
        default: return EINVAL;
    }
}

ibv_gid gid_of(const Address& a) {
    ibv_gid g{};
    const uint16_t port = a.port == api::kDefaultPort ? 0 : a.port;
    g.raw[8] = static_cast<uint8_t>(port >> 8);
    g.raw[9] = static_cast<uint8_t>(port);
    g.raw[10] = 0xff;
    g.raw[11] = 0xff;
    std::memcpy(&g.raw[12], &a.ip[12], 4);
    return g;
}

bool address_of_gid(const ibv_gid& gid, Address& out) {
    for (int i = 0; i < 8; ++i)
        if (gid.raw[i] != 0) return false;
    if (gid.raw[10] != 0xff || gid.raw[11] != 0xff) return false;
    const uint16_t port = static_cast<uint16_t>(gid.raw[8] << 8 | gid.raw[9]);
    uint32_t ip = 0;
    for (int i = 12; i < 16; ++i) ip = ip << 8 | gid.raw[i];
    out = Address::ipv4(ip, port == 0 ? api::kDefaultPort : port);
    return true;
}

}  // namespace mroce::verbs
