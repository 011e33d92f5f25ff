// wire/ack.h — the ACK packet: per-path cumulative PSN, 256-bit SACK, ECN echo, RTT echo,
// receiver rate hint and per-stream cumulative delivery.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "util/result.h"
#include "wire/header.h"

namespace mroce::wire {

// spec §3.3 [ACK-2]: SACK window; bit i covers PSN cum_psn + 1 + i.
inline constexpr uint32_t kSackBits = 256;
// spec §3.3 [ACK-5]: cap on stream entries in one ACK (peer-controlled count).
inline constexpr uint16_t kMaxAckStreams = 32;

namespace ack_flag {
inline constexpr uint8_t kProbeReply = 0x01;  // answers a PROBE; probe_psn is valid
inline constexpr uint8_t kFollowed = 0x02;    // a DATA of the connection follows ([WIRE-10])
inline constexpr uint8_t kShort = 0x04;       // no `sack` field: the bitmap is all zero ([ACK-21])
}

struct StreamAck {
    uint32_t stream_id = 0;      // the ACK sender's (data receiver's) stream id
    uint32_t delivered_seq = 0;  // every msg_seq before this has completed
    friend bool operator==(const StreamAck&, const StreamAck&) = default;
};

// Sack is the 256-bit bitmap in wire order: bit i is byte i/8, mask 0x80 >> (i % 8).
struct Sack {
    std::array<uint8_t, kSackBits / 8> bytes{};
    bool test(uint32_t i) const { return i < kSackBits && (bytes[i / 8] & (0x80u >> (i % 8))); }
    void set(uint32_t i) {
        if (i < kSackBits) bytes[i / 8] |= static_cast<uint8_t>(0x80u >> (i % 8));
    }
    friend bool operator==(const Sack&, const Sack&) = default;
};

// spec §3.3: ACK, 80 bytes + 8 per stream entry; 48 + 8 per entry with SHORT ([ACK-21]).
struct AckPacket {
    CommonHeader common{.type = PacketType::kAck};
    uint16_t path_id = 0;
    uint8_t path_gen = 0;
    uint8_t flags = 0;
    uint32_t cum_psn = 0;
    Sack sack;
    uint32_t ecn_ce_count = 0;  // CE-marked DATA received on this path, cumulative
    uint32_t ts_echo = 0;       // timestamp of the packet that triggered this ACK
    uint32_t ack_delay_ns = 0;  // time that packet waited at the receiver
    uint32_t rate_hint_mbps = 0;  // [ACK-7] receiver fair share; 0 = no hint
    uint32_t probe_psn = 0;     // with kProbeReply: the PROBE's next_psn
    uint16_t stream_count = 0;
    uint16_t return_path = 0;   // [PATH-12] the ACK sender's path this ACK leaves on
    std::array<StreamAck, kMaxAckStreams> streams{};
    friend bool operator==(const AckPacket&, const AckPacket&) = default;
};
inline constexpr size_t kAckFixedSize = 80;
inline constexpr size_t kAckStreamEntrySize = 8;
// spec §3.3 [ACK-21]: an ACK with SHORT leaves out the 32-byte `sack` field; every field
// after it moves 32 bytes up.
inline constexpr size_t kAckShortFixedSize = kAckFixedSize - kSackBits / 8;
// ack_fixed_size: the fixed part of an ACK with these flags.
constexpr size_t ack_fixed_size(uint8_t flags) {
    return (flags & ack_flag::kShort) ? kAckShortFixedSize : kAckFixedSize;
}
// sack_empty: no bit of the bitmap is set, so the ACK may be sent SHORT.
inline bool sack_empty(const Sack& s) {
    uint64_t w[4];
    std::memcpy(w, s.bytes.data(), sizeof w);
    return (w[0] | w[1] | w[2] | w[3]) == 0;
}

size_t encoded_size(const AckPacket& ack);
// encode_ack writes all or nothing, SHORT ([ACK-21]) when a.flags says so. Errors:
// kBufferTooSmall, kInvalidArgument (too many streams, or SHORT with a SACK bit set).
Result<size_t> encode_ack(const AckPacket& ack, std::span<std::byte> out);
// decode_ack, as on a connection that negotiated SHORT_ACK (either form is read). Errors:
// kTruncated, kBadVersion, kBadType, kBadLength (count over cap or not matching the
// datagram length).
Result<AckPacket> decode_ack(std::span<const std::byte> datagram);
// decode_ack with the common header already decoded by the caller (see decode_data).
Result<AckPacket> decode_ack(std::span<const std::byte> datagram, const CommonHeader& common);

// store_ack writes the whole ACK at p, which has room for encoded_size(a) bytes, with
// a.stream_count <= kMaxAckStreams and, with SHORT, an empty a.sack (all checked by the
// caller). Entries past stream_count
// are not read, so a reused AckPacket needs no clearing. Returns encoded_size(a).
inline size_t store_ack(const AckPacket& a, std::byte* p) {
    store_common_header(p, a.common, PacketType::kAck);
    store_be16(p + 16, a.path_id);
    p[18] = static_cast<std::byte>(a.path_gen);
    p[19] = static_cast<std::byte>(a.flags);
    store_be32(p + 20, a.cum_psn);
    const size_t fixed = ack_fixed_size(a.flags);
    if (fixed == kAckFixedSize) std::memcpy(p + 24, a.sack.bytes.data(), a.sack.bytes.size());  // 24..55
    std::byte* q = p + fixed - 24;  // the 24 bytes after `sack`: at 56, or 24 with SHORT
    store_be32(q, a.ecn_ce_count);
    store_be32(q + 4, a.ts_echo);
    store_be32(q + 8, a.ack_delay_ns);
    store_be32(q + 12, a.rate_hint_mbps);
    store_be32(q + 16, a.probe_psn);
    store_be16(q + 20, a.stream_count);
    store_be16(q + 22, a.return_path);
    std::byte* e = p + fixed;
    for (uint16_t i = 0; i < a.stream_count; ++i, e += kAckStreamEntrySize) {
        store_be32(e, a.streams[i].stream_id);
        store_be32(e + 4, a.streams[i].delivered_seq);
    }
    return fixed + size_t{a.stream_count} * kAckStreamEntrySize;
}

// coalesced_ack_size is, for a datagram that starts with an ACK whose FOLLOWED flag is set,
// the length of that ACK ([WIRE-10]: its count's, not the datagram's); 0 when the flag is
// clear or the datagram is too short to hold an ACK (parse_ack_body then reports it
// truncated). The count is not trusted: at most one above the cap, which parse_ack_body
// refuses. short_ok: the connection negotiated SHORT_ACK ([ACK-21]); without it the SHORT
// flag means nothing.
inline size_t coalesced_ack_size(std::span<const std::byte> datagram, bool short_ok = true) {
    if (datagram.size() < kCommonHeaderSize + 4) return 0;
    const uint8_t flags = static_cast<uint8_t>(datagram[19]);
    const size_t fixed = short_ok ? ack_fixed_size(flags) : kAckFixedSize;
    if (datagram.size() < fixed) return 0;
    if ((flags & ack_flag::kFollowed) == 0) return 0;
    const size_t count = std::min<size_t>(load_be16(datagram.data() + fixed - 4), kMaxAckStreams + 1u);
    return fixed + count * kAckStreamEntrySize;
}

// parse_ack_body is the per-packet decoder: decode_ack's checks and errors for everything
// after the common header, written into `a` (a.common untouched; the rest unspecified on
// error) at fixed offsets. Only the first stream_count entries are written, so one
// AckPacket can be reused for every ACK without clearing its 32 entries.
// short_ok: the connection negotiated SHORT_ACK ([ACK-21]), so the SHORT flag says the
// `sack` field is left out. Without it the flag is an undefined bit ([VER-2], [WIRE-6]):
// cleared, and the ACK read at its full length (a SHORT one then fails the length checks).
inline Error parse_ack_body(std::span<const std::byte> datagram, AckPacket& a, bool short_ok = true) {
    if (datagram.size() < kCommonHeaderSize + 4) return Error::kTruncated;
    const std::byte* p = datagram.data();
    a.flags = static_cast<uint8_t>(p[19]);
    if (!short_ok) a.flags &= static_cast<uint8_t>(~ack_flag::kShort);
    const size_t fixed = ack_fixed_size(a.flags);
    if (datagram.size() < fixed) return Error::kTruncated;
    a.path_id = load_be16(p + 16);
    a.path_gen = static_cast<uint8_t>(p[18]);
    a.cum_psn = load_be32(p + 20);
    if (fixed == kAckFixedSize)
        std::memcpy(a.sack.bytes.data(), p + 24, a.sack.bytes.size());
    else
        a.sack = Sack{};
    const std::byte* q = p + fixed - 24;  // the 24 bytes after `sack`: at 56, or 24 with SHORT
    a.ecn_ce_count = load_be32(q);
    a.ts_echo = load_be32(q + 4);
    a.ack_delay_ns = load_be32(q + 8);
    a.rate_hint_mbps = load_be32(q + 12);
    a.probe_psn = load_be32(q + 16);
    a.stream_count = load_be16(q + 20);
    a.return_path = load_be16(q + 22);  // checked against num_paths by its user
    // spec §3.3 [ACK-5]: never trust the count; cap it and check it against the length.
    if (a.stream_count > kMaxAckStreams) return Error::kBadLength;
    // spec §3.3 [ACK-1]: the entries fill the rest of the datagram exactly; a datagram
    // shorter or longer than stream_count entries disagrees with its count.
    if (datagram.size() - fixed != size_t{a.stream_count} * kAckStreamEntrySize)
        return Error::kBadLength;
    const std::byte* e = p + fixed;
    for (uint16_t i = 0; i < a.stream_count; ++i, e += kAckStreamEntrySize) {
        a.streams[i].stream_id = load_be32(e);
        a.streams[i].delivered_seq = load_be32(e + 4);
    }
    return Error::kOk;
}

}  // namespace mroce::wire
