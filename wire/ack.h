// wire/ack.h — the ACK packet: per-path cumulative PSN, 256-bit SACK, ECN echo, RTT echo,
// receiver rate hint and per-stream cumulative delivery.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
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

// spec §3.3: ACK, 80 bytes + 8 per stream entry.
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
    std::array<StreamAck, kMaxAckStreams> streams{};
    friend bool operator==(const AckPacket&, const AckPacket&) = default;
};
inline constexpr size_t kAckFixedSize = 80;
inline constexpr size_t kAckStreamEntrySize = 8;

size_t encoded_size(const AckPacket& ack);
// encode_ack writes all or nothing. Errors: kBufferTooSmall, kInvalidArgument (too many streams).
Result<size_t> encode_ack(const AckPacket& ack, std::span<std::byte> out);
// decode_ack. Errors: kTruncated, kBadVersion, kBadType, kBadLength (count over cap or
// not matching the datagram length).
Result<AckPacket> decode_ack(std::span<const std::byte> datagram);
// decode_ack with the common header already decoded by the caller (see decode_data).
Result<AckPacket> decode_ack(std::span<const std::byte> datagram, const CommonHeader& common);

}  // namespace mroce::wire
