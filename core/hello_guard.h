// core/hello_guard.h — the handshake's proof of address (spec §4.2 [CONN-25]) and the
// replies an endpoint sends for no connection (RETRY, the version-1 refusal of [VER-1]).
//
// A HELLO costs its receiver nothing until its sender has shown that it receives at the
// address it claims: the receiver answers with a RETRY carrying a cookie, a MAC of the
// sender's address and identity and the time, and keeps no state; the sender echoes the
// cookie in its next HELLO. Only the key is stored, so a flood of forged HELLOs fills no
// table, and the replies wait in a bounded queue, so it cannot fill memory either.
#pragma once

#include <cstdint>
#include <deque>
#include <span>

#include "util/address.h"
#include "util/crypto.h"
#include "util/packet_meta.h"
#include "util/time.h"
#include "wire/control.h"

namespace mroce::core {

class HelloGuard {
public:
    // The key is drawn from `rng`; cookies live for `lifetime`.
    HelloGuard(CryptoRng& rng, Duration lifetime);

    enum class Proof : uint8_t {
        kNone,     // the HELLO carries no cookie (all zero)
        kValid,    // ours, for this peer and identity, within its lifetime
        kExpired,  // ours and for this identity, but older than the lifetime
        kForged,   // not ours, or for another address or identity
    };
    Proof check(const Address& peer, const wire::HelloPacket& h, Time now) const;
    wire::Cookie make(const Address& peer, const wire::HelloPacket& h, Time now) const;

    // Replies: at most kMaxPendingReplies wait; queue_* return false (nothing queued) when
    // the queue is full. poll writes the oldest into buf and returns its size (0: none).
    static constexpr size_t kMaxPendingReplies = 256;
    // traffic_class: the priority the RETRY leaves in, as the connection it concerns
    // would send it ([STREAM-14]); 0 for a HELLO that concerns no connection yet.
    bool queue_retry(const Address& peer, const wire::HelloPacket& h, Time now,
                     uint8_t traffic_class);
    // queue_v1_close: a version-1 CLOSE (reason kVersionMismatch) to the connection the
    // version-1 HELLO or HELLO_ACK `h` names as its sender ([VER-1]).
    bool queue_v1_close(const Address& peer, const wire::HelloPacket& h);
    size_t poll(std::span<std::byte> buf, PacketMeta& meta, const Address& local);
    bool has_replies() const { return !replies_.empty(); }

private:
    uint64_t mac(const Address& peer, const wire::HelloPacket& h, uint32_t issued_ms) const;

    struct Reply {
        Address to;
        uint32_t conn_id;   // the addressee's connection id and token
        uint64_t token;
        bool retry;         // RETRY with `cookie`, else a version-1 CLOSE
        uint8_t traffic_class;
        wire::Cookie cookie;
    };
    uint64_t k0_, k1_;
    Duration lifetime_;
    std::deque<Reply> replies_;
};

}  // namespace mroce::core
