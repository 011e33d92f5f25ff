#include "core/hello_guard.h"

#include <algorithm>

#include "wire/buffer.h"

namespace mroce::core {

namespace {
// The cookie's layout is ours alone (the peer echoes it unread): bytes 0..3 the issue time
// in milliseconds (wrapping, big-endian), 4..11 the MAC, 12..15 zero.
const std::byte* bytes_of(const wire::Cookie& c) { return reinterpret_cast<const std::byte*>(c.data()); }
uint32_t now_ms(Time now) { return static_cast<uint32_t>(to_ns(now) / 1'000'000); }
}  // namespace

HelloGuard::HelloGuard(CryptoRng& rng, Duration lifetime)
    : k0_(rng.next_u64()), k1_(rng.next_u64()), lifetime_(lifetime) {}

// The MAC covers everything the cookie vouches for: the address the RETRY went to (IP and
// endpoint port), the identity the HELLO claimed (connection id and token) and the time.
uint64_t HelloGuard::mac(const Address& peer, const wire::HelloPacket& h, uint32_t issued_ms) const {
    std::byte msg[16 + 2 + 4 + 8 + 4];
    std::copy(peer.ip.begin(), peer.ip.end(), reinterpret_cast<uint8_t*>(msg));
    wire::store_be16(msg + 16, h.endpoint_port);
    wire::store_be32(msg + 18, h.src_conn_id);
    wire::store_be64(msg + 22, h.src_token);
    wire::store_be32(msg + 30, issued_ms);
    return siphash24(k0_, k1_, msg);
}

wire::Cookie HelloGuard::make(const Address& peer, const wire::HelloPacket& h, Time now) const {
    const uint32_t t = now_ms(now);
    const uint64_t m = mac(peer, h, t);
    wire::Cookie c{};
    auto* p = reinterpret_cast<std::byte*>(c.data());
    wire::store_be32(p, t);
    wire::store_be64(p + 4, m);
    return c;
}

HelloGuard::Proof HelloGuard::check(const Address& peer, const wire::HelloPacket& h, Time now) const {
    if (std::all_of(h.cookie.begin(), h.cookie.end(), [](uint8_t b) { return b == 0; }))
        return Proof::kNone;
    const uint32_t t = wire::load_be32(bytes_of(h.cookie));
    const uint64_t m = wire::load_be64(bytes_of(h.cookie) + 4);
    // Compared in full, not byte by byte with an early exit: the time a comparison takes
    // must not tell a forger how many leading bytes were right.
    if ((m ^ mac(peer, h, t)) != 0 || h.cookie[12] || h.cookie[13] || h.cookie[14] || h.cookie[15])
        return Proof::kForged;
    // Age in wrapping milliseconds: a cookie "from the future" reads as very old.
    const uint32_t age_ms = now_ms(now) - t;
    if (age_ms > static_cast<uint64_t>(lifetime_ / 1ms)) return Proof::kExpired;
    return Proof::kValid;
}

bool HelloGuard::queue_retry(const Address& peer, const wire::HelloPacket& h, Time now,
                             uint8_t traffic_class) {
    if (replies_.size() >= kMaxPendingReplies) return false;
    replies_.push_back(
        Reply{peer, h.src_conn_id, h.src_token, true, traffic_class, make(peer, h, now)});
    return true;
}

bool HelloGuard::queue_v1_close(const Address& peer, const wire::HelloPacket& h) {
    if (replies_.size() >= kMaxPendingReplies) return false;
    replies_.push_back(Reply{peer, h.src_conn_id, h.src_token, false, 0, {}});
    return true;
}

size_t HelloGuard::poll(std::span<std::byte> buf, PacketMeta& meta, const Address& local) {
    while (!replies_.empty()) {
        const Reply r = replies_.front();
        replies_.pop_front();
        Result<size_t> n = Error::kInvalidArgument;
        if (r.retry) {
            wire::RetryPacket p;
            p.common.dst_conn_id = r.conn_id;
            p.common.dst_token = r.token;
            p.cookie = r.cookie;
            n = wire::encode_retry(p, buf);
        } else {
            wire::ClosePacket p;
            p.common.version = wire::kLegacyVersion;
            p.common.dst_conn_id = r.conn_id;
            p.common.dst_token = r.token;
            p.reason = static_cast<uint32_t>(wire::CloseReason::kVersionMismatch);
            n = wire::encode_close(p, buf);
        }
        if (!n) continue;
        // From the endpoint's own port: a reply for no connection opens no path socket.
        meta = PacketMeta{};
        meta.src = local;
        meta.dst = r.to;
        meta.ecn = ecn::kEct0;
        meta.traffic_class = r.traffic_class;
        return *n;
    }
    return 0;
}

}  // namespace mroce::core
