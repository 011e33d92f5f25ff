#include "wire/control.h"

#include "wire/codec_internal.h"

namespace mroce::wire {

static_assert(kNackSize == kCommonHeaderSize + 24, "spec §3.4: NACK is 40 bytes");
static_assert(kHelloSize == kCommonHeaderSize + 48, "spec §3.5: HELLO is 64 bytes");
static_assert(kRetrySize == kCommonHeaderSize + 16, "spec §3.8: RETRY is 32 bytes");
static_assert(kProbeSize == kCommonHeaderSize + 16, "spec §3.6: PROBE is 32 bytes");
static_assert(kCloseSize == kCommonHeaderSize + 8, "spec §3.7: CLOSE is 24 bytes");

Result<size_t> encode_nack(const NackPacket& p, std::span<std::byte> out) {
    if (out.size() < kNackSize) return Error::kBufferTooSmall;
    Writer w(out);
    write_common_header(w, p.common, PacketType::kNack);
    w.u8(static_cast<uint8_t>(p.reason));  // 16
    w.u8(0);                               // 17 reserved
    w.u16(p.path_id);                      // 18
    w.u8(p.path_gen);                      // 20
    w.zeros(3);                            // 21 reserved
    w.u32(p.path_psn);                     // 24
    w.u32(p.stream_id);                    // 28
    w.u32(p.msg_seq);                      // 32
    w.u32(p.detail);                       // 36
    MROCE_DCHECK(w.ok() && w.pos() == kNackSize);
    return kNackSize;
}

Result<NackPacket> decode_nack(std::span<const std::byte> datagram) {
    Reader r(datagram);
    auto common = decode_typed_header(r, datagram, PacketType::kNack);
    if (!common) return common.error();
    NackPacket p;
    p.common = *common;
    const uint8_t reason = r.u8();
    r.skip(1);
    p.path_id = r.u16();
    p.path_gen = r.u8();
    r.skip(3);
    p.path_psn = r.u32();
    p.stream_id = r.u32();
    p.msg_seq = r.u32();
    p.detail = r.u32();
    if (Error e = finish_fixed(r); e != Error::kOk) return e;
    // spec §3.4 [NACK-2]: an unknown reason is dropped.
    if (!is_known_nack_reason(reason)) return Error::kBadType;
    p.reason = static_cast<NackReason>(reason);
    return p;
}

namespace {
// The body both versions share (offsets 16..47).
void write_hello_body(Writer& w, const HelloPacket& p) {
    w.u32(p.src_conn_id);    // 16
    w.u64(p.src_token);      // 20
    w.u32(p.isn);            // 28
    w.u32(p.msg_isn);        // 32
    w.u16(p.endpoint_port);  // 36
    w.u16(p.num_paths);      // 38
    w.u32(p.max_payload);    // 40
    w.u32(p.capabilities);   // 44
}
void read_hello_body(Reader& r, HelloPacket& p) {
    p.src_conn_id = r.u32();
    p.src_token = r.u64();
    p.isn = r.u32();
    p.msg_isn = r.u32();
    p.endpoint_port = r.u16();
    p.num_paths = r.u16();
    p.max_payload = r.u32();
    p.capabilities = r.u32();
}
bool is_hello_type(PacketType t) { return t == PacketType::kHello || t == PacketType::kHelloAck; }
// spec §3.5 [CONN-3]: path count and payload size within their caps.
Error check_hello_caps(const HelloPacket& p) {
    if (p.num_paths == 0 || p.num_paths > kMaxPaths) return Error::kBadLength;
    if (p.max_payload < kMinMaxPayload || p.max_payload > kMaxMaxPayload) return Error::kBadLength;
    return Error::kOk;
}
}  // namespace

Result<size_t> encode_hello(const HelloPacket& p, std::span<std::byte> out) {
    if (!is_hello_type(p.common.type)) return Error::kInvalidArgument;
    if (out.size() < kHelloSize) return Error::kBufferTooSmall;
    Writer w(out);
    write_common_header(w, p.common, p.common.type);
    write_hello_body(w, p);
    // [CC-20] [CONN-31]: hello_flags, byte 2: SENDING in a HELLO only, DROPPED in both.
    const bool sending = p.common.type == PacketType::kHello && p.sending;
    out[kHelloFlagsOffset] = std::byte{static_cast<uint8_t>((sending ? kHelloFlagSending : 0) |
                                                            (p.dropped ? kHelloFlagDropped : 0))};
    // [CC-20]: byte 3, the HELLO's number or the HELLO_ACK's echo of one.
    out[kHelloSeqOffset] = std::byte{p.common.type == PacketType::kHello ? p.hello_seq : p.hello_echo};
    if (p.common.type == PacketType::kHelloAck) {
        // [CONN-2] [CC-20]: a HELLO_ACK's cookie is zero but for its grant.
        w.u32(p.grant_mbps);  // 48
        for (size_t i = 4; i < p.cookie.size(); ++i) w.u8(0);
    } else {
        for (uint8_t b : p.cookie) w.u8(b);  // 48
    }
    MROCE_DCHECK(w.ok() && w.pos() == kHelloSize);
    return kHelloSize;
}

Result<HelloPacket> decode_hello(std::span<const std::byte> datagram) {
    auto common = decode_common_header(datagram);
    if (!common) return common.error();
    if (!is_hello_type(common->type)) return Error::kBadType;
    Reader r(datagram);
    r.skip(kCommonHeaderSize);
    HelloPacket p;
    p.common = *common;
    read_hello_body(r, p);
    // [CC-20] [CONN-31]: SENDING and DROPPED; the other bits of hello_flags are reserved,
    // ignored ([WIRE-6]).
    const auto flags = static_cast<uint8_t>(datagram[kHelloFlagsOffset]);
    p.sending = p.common.type == PacketType::kHello && (flags & kHelloFlagSending) != 0;
    p.dropped = (flags & kHelloFlagDropped) != 0;
    const auto byte3 = static_cast<uint8_t>(datagram[kHelloSeqOffset]);
    (p.common.type == PacketType::kHello ? p.hello_seq : p.hello_echo) = byte3;  // [CC-20]
    if (p.common.type == PacketType::kHelloAck) {
        // [CONN-2] [CC-20]: the grant; the rest of the cookie is ignored.
        p.grant_mbps = r.u32();
        r.skip(p.cookie.size() - 4);
    } else {
        for (uint8_t& b : p.cookie) b = r.u8();
    }
    if (Error e = finish_fixed(r); e != Error::kOk) return e;
    if (Error e = check_hello_caps(p); e != Error::kOk) return e;
    return p;
}

Result<size_t> encode_hello_v1(const HelloPacket& p, std::span<std::byte> out) {
    if (!is_hello_type(p.common.type)) return Error::kInvalidArgument;
    if (out.size() < kHelloV1Size) return Error::kBufferTooSmall;
    Writer w(out);
    CommonHeader h = p.common;
    h.version = kLegacyVersion;
    write_common_header(w, h, p.common.type);
    write_hello_body(w, p);
    MROCE_DCHECK(w.ok() && w.pos() == kHelloV1Size);
    return kHelloV1Size;
}

Result<HelloPacket> decode_hello_v1(std::span<const std::byte> datagram) {
    if (datagram.size() < kCommonHeaderSize) return Error::kTruncated;
    if (static_cast<uint8_t>(datagram[0]) != kLegacyVersion) return Error::kBadVersion;
    const auto type = static_cast<PacketType>(datagram[1]);
    if (!is_hello_type(type)) return Error::kBadType;
    Reader r(datagram);
    HelloPacket p;
    p.common.version = kLegacyVersion;
    p.common.type = type;
    r.skip(4);
    p.common.dst_conn_id = r.u32();
    p.common.dst_token = r.u64();
    read_hello_body(r, p);
    if (Error e = finish_fixed(r); e != Error::kOk) return e;
    if (Error e = check_hello_caps(p); e != Error::kOk) return e;
    return p;
}

Result<size_t> encode_retry(const RetryPacket& p, std::span<std::byte> out) {
    if (out.size() < kRetrySize) return Error::kBufferTooSmall;
    Writer w(out);
    write_common_header(w, p.common, PacketType::kRetry);
    for (uint8_t b : p.cookie) w.u8(b);  // 16
    MROCE_DCHECK(w.ok() && w.pos() == kRetrySize);
    return kRetrySize;
}

Result<RetryPacket> decode_retry(std::span<const std::byte> datagram) {
    Reader r(datagram);
    auto common = decode_typed_header(r, datagram, PacketType::kRetry);
    if (!common) return common.error();
    RetryPacket p;
    p.common = *common;
    for (uint8_t& b : p.cookie) b = r.u8();
    if (Error e = finish_fixed(r); e != Error::kOk) return e;
    return p;
}

Result<size_t> encode_probe(const ProbePacket& p, std::span<std::byte> out) {
    if (out.size() < kProbeSize) return Error::kBufferTooSmall;
    Writer w(out);
    write_common_header(w, p.common, PacketType::kProbe);
    w.u16(p.path_id);    // 16
    w.u8(p.path_gen);    // 18
    w.u8(p.flags & kProbeFailed);  // 19 [PROBE-4]; undefined bits sent as zero ([WIRE-6])
    w.u32(p.next_psn);   // 20
    w.u32(p.psn_floor);  // 24
    w.u32(p.timestamp);  // 28
    MROCE_DCHECK(w.ok() && w.pos() == kProbeSize);
    return kProbeSize;
}

Result<ProbePacket> decode_probe(std::span<const std::byte> datagram) {
    Reader r(datagram);
    auto common = decode_typed_header(r, datagram, PacketType::kProbe);
    if (!common) return common.error();
    ProbePacket p;
    p.common = *common;
    p.path_id = r.u16();
    p.path_gen = r.u8();
    p.flags = r.u8() & kProbeFailed;  // [WIRE-6]: undefined bits ignored
    p.next_psn = r.u32();
    p.psn_floor = r.u32();
    p.timestamp = r.u32();
    if (Error e = finish_fixed(r); e != Error::kOk) return e;
    return p;
}

Result<size_t> encode_close(const ClosePacket& p, std::span<std::byte> out) {
    if (out.size() < kCloseSize) return Error::kBufferTooSmall;
    Writer w(out);
    write_common_header(w, p.common, PacketType::kClose);
    w.u32(p.reason);  // 16
    w.u32(0);         // 20 reserved
    MROCE_DCHECK(w.ok() && w.pos() == kCloseSize);
    return kCloseSize;
}

Result<ClosePacket> decode_close(std::span<const std::byte> datagram) {
    Reader r(datagram);
    auto common = decode_typed_header(r, datagram, PacketType::kClose);
    if (!common) return common.error();
    ClosePacket p;
    p.common = *common;
    p.reason = r.u32();
    r.skip(4);
    if (Error e = finish_fixed(r); e != Error::kOk) return e;
    return p;
}

}  // namespace mroce::wire
