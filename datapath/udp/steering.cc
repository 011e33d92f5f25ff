// datapath/udp/steering.cc — see steering.h.
#include "datapath/udp/steering.h"

#include <linux/filter.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace mroce::datapath {

namespace {
// The MetaRoCE fields the program reads (offsets in the UDP payload; the kernel runs a
// reuseport program with the payload at offset 0, spec §3.1 and §3.5).
constexpr uint32_t kVersionOffset = 0;
constexpr uint32_t kTypeOffset = 1;
constexpr uint32_t kConnIdOffset = 4;
constexpr uint32_t kHelloEndpointPortOffset = 36;
constexpr uint32_t kVersion2 = 2;
constexpr uint32_t kTypeHello = 4;
// The IP header, through the network-header window of classic BPF.
constexpr uint32_t kIpv4SrcOffset = 12;
constexpr uint32_t kIpv6SrcLowOffset = 8 + 12;  // the last 32 bits of the source address
constexpr uint32_t kHashMultiplier = 0x9E3779B1u;  // Fibonacci hashing: 2^32 / phi

uint32_t hash(uint32_t ip_low, uint32_t port, uint32_t shards) {
    return ((ip_low ^ port) * kHashMultiplier >> 16) % shards;
}
}  // namespace

uint32_t steering_shard(const Address& peer, uint32_t shards) {
    if (shards <= 1) return 0;
    const uint32_t ip_low = uint32_t{peer.ip[12]} << 24 | uint32_t{peer.ip[13]} << 16 |
                            uint32_t{peer.ip[14]} << 8 | peer.ip[15];
    return hash(ip_low, peer.port, shards);
}

uint32_t shard_id_bits(uint32_t shards) {
    uint32_t bits = 0;
    while ((1u << bits) < shards) ++bits;
    return bits;
}

Error attach_steering(int fd, uint32_t shards, bool handshake_sockets, std::string* error) {
    if (shards == 0 || shards > kMaxShards) return Error::kInvalidArgument;
    const uint32_t bits = shard_id_bits(shards);
    const auto net = static_cast<uint32_t>(SKF_NET_OFF);
    // An index at or beyond the group's size (a forged id's shard bits) makes the kernel
    // fall back to its own hash: the shard it reaches counts an unknown connection.
    // With one shard every id maps to socket 0 (a shift by 32 is not allowed).
    const sock_filter by_id = bits == 0 ? sock_filter BPF_STMT(BPF_RET | BPF_K, 0)
                                        : sock_filter BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 32 - bits);
    // Handshakes to the second member of their shard, when there is one.
    const uint32_t handshake_base = handshake_sockets ? shards : 0;
    const std::array<sock_filter, 22> prog{{
        /* 0 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kVersionOffset),
        /* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kVersion2, 0, 19),  // else 21: shard 0
        /* 2 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, kTypeOffset),
        /* 3 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kTypeHello, 3, 0),  // HELLO: 7
        /* 4 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kConnIdOffset),
        /* 5 */ by_id,
        /* 6 */ BPF_STMT(BPF_RET | BPF_A, 0),
        // HELLO: hash(source IP's low 32 bits, endpoint_port), as steering_shard.
        /* 7 */ BPF_STMT(BPF_LD | BPF_H | BPF_ABS, kHelloEndpointPortOffset),
        /* 8 */ BPF_STMT(BPF_MISC | BPF_TAX, 0),
        /* 9 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, net),
        /* 10 */ BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 4),
        /* 11 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 4, 0, 2),  // IPv6: 14
        /* 12 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, net + kIpv4SrcOffset),
        /* 13 */ BPF_JUMP(BPF_JMP | BPF_JA, 1, 0, 0),  // 15
        /* 14 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, net + kIpv6SrcLowOffset),
        /* 15 */ BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0),
        /* 16 */ BPF_STMT(BPF_ALU | BPF_MUL | BPF_K, kHashMultiplier),
        /* 17 */ BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 16),
        /* 18 */ BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, shards),
        /* 19 */ BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, handshake_base),
        /* 20 */ BPF_STMT(BPF_RET | BPF_A, 0),
        /* 21 */ BPF_STMT(BPF_RET | BPF_K, handshake_base),
    }};
    sock_fprog fprog{static_cast<unsigned short>(prog.size()), const_cast<sock_filter*>(prog.data())};
    if (::setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &fprog, sizeof(fprog)) != 0) {
        if (error) *error = std::string("udp: SO_ATTACH_REUSEPORT_CBPF: ") + std::strerror(errno);
        return Error::kIo;
    }
    return Error::kOk;
}

}  // namespace mroce::datapath
