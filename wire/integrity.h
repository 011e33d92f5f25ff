// wire/integrity.h — the integrity trailer of capability INTEGRITY (spec §4.9).
//
// A 4-byte CRC32C (util/crc32c.h) of every byte before it, big-endian, after DATA, ACK,
// NACK, PROBE and CLOSE on a connection that negotiated the capability. The codecs of
// the packet types know nothing of it: a sender appends it after encoding, a receiver
// checks and removes it before decoding ([INT-2], [INT-3]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "util/crc32c.h"
#include "wire/buffer.h"
#include "wire/header.h"

namespace mroce::wire {

// spec §4.9 [INT-2]: the trailer's size.
inline constexpr size_t kIntegritySize = 4;

// carries_integrity: packets of type t carry the trailer on a connection that negotiated
// INTEGRITY; the handshake's (HELLO, HELLO_ACK, RETRY) never do ([INT-2]).
constexpr bool carries_integrity(PacketType t) {
    return t != PacketType::kHello && t != PacketType::kHelloAck && t != PacketType::kRetry;
}

// append_integrity writes the CRC32C of buf[0, len) at buf[len, len + 4) and returns
// len + 4, or 0 when buf has no room for it.
inline size_t append_integrity(std::span<std::byte> buf, size_t len) {
    if (len > buf.size() || buf.size() - len < kIntegritySize) return 0;
    store_be32(buf.data() + len, crc32c(buf.first(len)));
    return len + kIntegritySize;
}

// strip_integrity checks a received datagram's trailer ([INT-3]): on success it returns
// true and sets `packet` to the datagram without its trailer. A datagram too short to hold
// a common header and a trailer, or whose trailer is wrong, returns false.
inline bool strip_integrity(std::span<const std::byte> datagram,
                            std::span<const std::byte>& packet) {
    if (datagram.size() < kCommonHeaderSize + kIntegritySize) return false;
    const size_t len = datagram.size() - kIntegritySize;
    if (load_be32(datagram.data() + len) != crc32c(datagram.first(len))) return false;
    packet = datagram.first(len);
    return true;
}

}  // namespace mroce::wire
