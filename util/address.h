// util/address.h — an IP address and UDP port, value type shared by core and datapaths.
//
// IPv4 is stored IPv4-mapped (::ffff:a.b.c.d) so one type covers both families.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

namespace mroce {

struct Address {
    std::array<uint8_t, 16> ip{};
    uint16_t port = 0;

    static Address ipv4(uint32_t host_order_ip, uint16_t port) {
        Address a;
        a.ip[10] = 0xff;
        a.ip[11] = 0xff;
        a.ip[12] = static_cast<uint8_t>(host_order_ip >> 24);
        a.ip[13] = static_cast<uint8_t>(host_order_ip >> 16);
        a.ip[14] = static_cast<uint8_t>(host_order_ip >> 8);
        a.ip[15] = static_cast<uint8_t>(host_order_ip);
        a.port = port;
        return a;
    }
    bool is_ipv4() const {
        static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        return std::memcmp(ip.data(), kPrefix, 12) == 0;
    }
    uint32_t ipv4_host_order() const {
        return uint32_t{ip[12]} << 24 | uint32_t{ip[13]} << 16 | uint32_t{ip[14]} << 8 | ip[15];
    }
    Address with_port(uint16_t p) const {
        Address a = *this;
        a.port = p;
        return a;
    }
    bool same_host(const Address& o) const { return ip == o.ip; }
    friend bool operator==(const Address&, const Address&) = default;

    // to_string renders "a.b.c.d:port" or "[v6]:port".
    std::string to_string() const;
};

struct AddressHash {
    size_t operator()(const Address& a) const {
        uint64_t h = 0xcbf29ce484222325ULL;
        for (uint8_t b : a.ip) h = (h ^ b) * 0x100000001b3ULL;
        h = (h ^ a.port) * 0x100000001b3ULL;
        return static_cast<size_t>(h);
    }
};

inline std::string Address::to_string() const {
    std::string s;
    if (is_ipv4()) {
        for (int i = 12; i < 16; ++i) {
            s += std::to_string(ip[i]);
            if (i < 15) s += '.';
        }
    } else {
        static constexpr char kHex[] = "0123456789abcdef";
        s = "[";
        for (int i = 0; i < 16; i += 2) {
            if (i) s += ':';
            s += kHex[ip[i] >> 4];
            s += kHex[ip[i] & 15];
            s += kHex[ip[i + 1] >> 4];
            s += kHex[ip[i + 1] & 15];
        }
        s += "]";
    }
    return s + ":" + std::to_string(port);
}

}  // namespace mroce
