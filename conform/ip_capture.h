// conform/ip_capture.h — a packet socket that sees the IPv4 headers of the target's
// datagrams, for the rules a UDP socket hides ([UDP-8]: Don't Fragment, no fragments).
// Needs CAP_NET_RAW; open() says why when it cannot.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/address.h"
#include "util/time.h"

namespace mroce::conform {

struct Ipv4Udp {
    uint32_t src = 0, dst = 0;  // host order
    uint16_t src_port = 0, dst_port = 0;
    uint16_t total_length = 0;  // IP total length
    bool dont_fragment = false;
    bool more_fragments = false;
    uint16_t fragment_offset = 0;
};

class IpCapture {
public:
    static std::optional<IpCapture> open(std::string* why);
    IpCapture(IpCapture&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    ~IpCapture();
    // collect returns the IPv4 UDP packets sent to `to` seen within `window`.
    std::vector<Ipv4Udp> collect(const Address& to, Duration window);

private:
    explicit IpCapture(int fd) : fd_(fd) {}
    int fd_ = -1;
};

}  // namespace mroce::conform
