// conform/checks.h — small predicates the tests share.
#pragma once

#include <cstdint>

#include "conform/peer.h"
#include "wire/ack.h"

namespace mroce::conform {

// serial_before: a before b modulo 2^32 (spec §1.4).
inline bool serial_before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

// covers: the ACK acknowledges `psn` (cumulatively or by a SACK bit, spec [ACK-2], [ACK-3]).
inline bool covers(const wire::AckPacket& a, uint32_t psn) {
    if (!serial_before(a.cum_psn, psn)) return true;
    const uint32_t i = psn - a.cum_psn - 1;
    return i < wire::kSackBits && a.sack.test(i);
}

// sack_count: how many SACK bits are set.
inline int sack_count(const wire::AckPacket& a) {
    int n = 0;
    for (uint32_t i = 0; i < wire::kSackBits; ++i) n += a.sack.test(i);
    return n;
}

inline RxFilter is_type(wire::PacketType t) {
    return [t](const Rx& r) { return r.is(t); };
}

// entry_for: the delivered_seq an ACK reports for `stream`, or -1.
inline int64_t entry_for(const wire::AckPacket& a, uint32_t stream) {
    for (uint16_t i = 0; i < a.stream_count; ++i)
        if (a.streams[i].stream_id == stream) return a.streams[i].delivered_seq;
    return -1;
}

}  // namespace mroce::conform
