// conform/udp_socket.h — the suite's own UDP socket (IPv4): send with a chosen ECN
// codepoint, receive with the ECN field and source address. Deliberately not datapath/:
// the suite must not share a line of I/O code with the implementation it judges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "util/address.h"
#include "util/time.h"

namespace mroce::conform {

// ECN codepoints of the IP header's two low TOS bits (RFC 3168).
inline constexpr uint8_t kNotEct = 0;
inline constexpr uint8_t kEct0 = 2;
inline constexpr uint8_t kCe = 3;

struct Datagram {
    std::vector<std::byte> bytes;
    Address from;
    int ecn = -1;  // the ECN bits as received; -1 when the kernel did not report them
};

class UdpSocket {
public:
    // open binds `local` (port 0: ephemeral). With `via_ifindex` (an interface index, 0:
    // none) every datagram sent leaves through that interface (IP_PKTINFO), whatever the
    // routes' ECMP choice; receiving is not restricted. Returns nullopt with *why set on
    // failure.
    static std::optional<UdpSocket> open(const Address& local, std::string* why,
                                         unsigned via_ifindex = 0);
    UdpSocket(UdpSocket&& o) noexcept : fd_(o.fd_), local_(o.local_), via_(o.via_) {
        o.fd_ = -1;
    }
    UdpSocket& operator=(UdpSocket&& o) noexcept;
    ~UdpSocket();

    const Address& local() const { return local_; }
    // send one datagram to `to` with the given ECN codepoint. Returns false on error.
    bool send(std::span<const std::byte> bytes, const Address& to, uint8_t ecn = kEct0) const;
    // receive waits up to `timeout` for one datagram.
    std::optional<Datagram> receive(Duration timeout) const;

private:
    UdpSocket(int fd, Address local, unsigned via) : fd_(fd), local_(local), via_(via) {}
    int fd_ = -1;
    Address local_;
    unsigned via_ = 0;
};

// parse_ipv4_endpoint reads "A.B.C.D:PORT" (the agent's `udp`); nullopt if it is not that.
std::optional<Address> parse_ipv4_endpoint(const std::string& text);

// local_address_towards returns the local IPv4 address the kernel would use to reach
// `target` (port 0), so the suite announces an address the target can answer.
std::optional<Address> local_address_towards(const Address& target);

}  // namespace mroce::conform
