// datapath/udp/steering.h — one endpoint address served by N sockets, one per shard of a
// sharded device (docs/design.md §12): the sockets share the port with SO_REUSEPORT and a
// classic BPF program, run by the kernel for every datagram, picks the shard.
//
// The program reads two things of the MetaRoCE header and nothing else of core/: the
// receiver's connection id (spec §3.1, payload bytes 4..7), whose top `id_bits` bits are
// the shard that made it (core EndpointConfig::conn_id_shard_bits), and, for a HELLO (id
// 0, type 4), the sender's endpoint address: its IP source address and the HELLO's
// endpoint_port (payload bytes 36..37, spec §3.5), hashed as steering_shard does.
// Version-1 packets go to shard 0, and so does anything too short to read.
#pragma once

#include <cstdint>
#include <string>

#include "util/address.h"
#include "util/result.h"

namespace mroce::datapath {

// The most shards one endpoint address may have; 4 bits of a connection id name them.
inline constexpr uint32_t kMaxShards = 16;

// steering_shard: the shard (0..shards-1) that holds the connection to the endpoint at
// `peer` (its IP and endpoint port); the same hash the steering program computes for
// the peer's HELLO. 0 when shards <= 1.
uint32_t steering_shard(const Address& peer, uint32_t shards);

// shard_id_bits: how many top bits of a connection id name one of `shards` shards
// (0 for 1, 1 for 2, 2 for 3..4, ...).
uint32_t shard_id_bits(uint32_t shards);

// attach_steering installs the program on `fd`, a socket of the SO_REUSEPORT group whose
// members were bound in shard order (the kernel numbers them in the order they joined).
// With handshake_sockets, the group has a second member per shard, bound after all the
// first ones and in shard order too, and handshakes (HELLO, version 1) go to member
// shards + shard instead (UdpDatapath::open_handshake_socket).
// Errors: kInvalidArgument (shards 0 or over kMaxShards), kIo (setsockopt; `error` says
// why).
Error attach_steering(int fd, uint32_t shards, bool handshake_sockets,
                      std::string* error = nullptr);

}  // namespace mroce::datapath
