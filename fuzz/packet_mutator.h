// fuzz/packet_mutator.h — structure-aware mutation of one mroce datagram.
//
// mutate_datagram decodes a datagram with wire/, sets ONE field to a hostile value drawn
// from the input (0, all-ones, off by one, the sign bit, a window's width ahead, or one of
// the real ids, keys and addresses of the run) and encodes it again, repairing the DATA
// length rules of [DATA-3] by default, so the packet passes the decoder and reaches the
// connection state behind it. It reports what the change can affect, which decides the
// invariants the target may still hold the engine to (a peer that lies about where a
// message goes or that it arrived can make a wrong message "succeed"; one that lies about
// PSNs or timestamps cannot).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "wire/ack.h"
#include "wire/control.h"
#include "wire/data.h"

namespace mroce::fuzz {

enum class Effect : uint8_t {
    kPath,       // path-level fields, control packets: no message places other bytes
    kPlacement,  // which message a DATA is, where its bytes go, what it asks for
    kDelivery,   // an ACK's per-stream delivery report: may claim what did not arrive
    kSequence,   // a HELLO's msg_isn: where the receiver starts the sender's streams
};

// hostile_value: a value for a `bits`-wide field that now holds v.
inline uint64_t hostile_value(Input& in, uint64_t v, unsigned bits,
                              const std::vector<uint64_t>& ctx) {
    const uint64_t mask = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    const uint64_t top = uint64_t{1} << (bits - 1);
    auto pick = [&] { return ctx.empty() ? v : ctx[in.below(static_cast<uint32_t>(ctx.size()))]; };
    uint64_t r = v;
    switch (in.u8() % 16) {
        case 0: r = 0; break;
        case 1: r = 1; break;
        case 2: r = v + 1; break;
        case 3: r = v - 1; break;
        case 4: r = v + 2 + in.u8(); break;
        case 5: r = v - 2 - in.u8(); break;
        case 6: r = mask; break;
        case 7: r = mask - 1; break;
        case 8: r = top; break;
        case 9: r = v ^ (uint64_t{1} << in.below(bits)); break;
        case 10: r = in.u64(); break;
        case 11: r = pick(); break;
        case 12: {
            const uint64_t near = pick();
            r = near + static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(in.u8())));
            break;
        }
        case 13: {  // kStreamWindow (128) messages ahead, or one less
            const uint64_t times = 1 + in.below(4);
            r = v + times * 128 - in.below(2);
            break;
        }
        case 14: {  // a SACK window (256 PSNs) ahead, or one less
            const uint64_t times = 1 + in.below(4);
            r = v + times * 256 - in.below(2);
            break;
        }
        case 15: r = v + top; break;                                    // half the space
    }
    return r & mask;
}

namespace detail {

template <typename T>
void set_field(T& field, Input& in, const std::vector<uint64_t>& ctx) {
    field = static_cast<T>(hostile_value(in, field, sizeof(T) * 8, ctx));
}

// mutate_common changes the common header: which connection and token, or version/type.
inline void mutate_common(wire::CommonHeader& h, Input& in, const std::vector<uint64_t>& ctx) {
    switch (in.u8() % 3) {
        case 0: set_field(h.dst_conn_id, in, ctx); break;
        case 1: set_field(h.dst_token, in, ctx); break;
        default: h.version = static_cast<uint8_t>(hostile_value(in, h.version, 8, ctx)); break;
    }
}

inline Effect mutate_data(std::vector<std::byte>& d, Input& in, const std::vector<uint64_t>& ctx) {
    auto p = wire::decode_data(d);
    if (!p) return Effect::kPlacement;
    wire::DataHeader h = p->hdr;
    std::vector<std::byte> payload(p->payload.begin(), p->payload.end());
    Effect effect = Effect::kPlacement;
    switch (in.u8() % 19) {
        case 0: h.opcode = static_cast<wire::Opcode>(in.below(11)); break;
        case 1: set_field(h.flags, in, ctx); effect = Effect::kPath; break;
        case 2: set_field(h.path_id, in, ctx); effect = Effect::kPath; break;
        case 3: set_field(h.path_gen, in, ctx); effect = Effect::kPath; break;
        case 4:
            set_field(h.payload_len, in, ctx);
            payload.resize(h.payload_len, std::byte{0x3c});
            break;
        case 5: set_field(h.path_psn, in, ctx); effect = Effect::kPath; break;
        case 6: set_field(h.psn_floor, in, ctx); effect = Effect::kPath; break;
        case 7: set_field(h.stream_id, in, ctx); break;
        case 8: set_field(h.msg_seq, in, ctx); break;
        case 9: set_field(h.recv_seq, in, ctx); break;
        case 10: set_field(h.msg_len, in, ctx); break;
        case 11: set_field(h.offset, in, ctx); break;
        case 12: set_field(h.timestamp, in, ctx); effect = Effect::kPath; break;
        case 13: set_field(h.rkey, in, ctx); break;
        case 14: set_field(h.remote_addr, in, ctx); break;
        case 15: set_field(h.immediate, in, ctx); break;
        case 16: {  // the body: a READ's length, an atomic's operands or answer
            if (payload.size() >= 4) {
                const size_t at = payload.size() >= 16 ? 4 * in.below(4) : 0;
                uint32_t v = wire::load_be32(payload.data() + at);
                set_field(v, in, ctx);
                wire::store_be32(payload.data() + at, v);
            }
            break;
        }
        case 17: mutate_common(h.common, in, ctx); break;
        default: {  // a valid opcode for another kind of message, same fields
            h.opcode = static_cast<wire::Opcode>(1 + in.below(9));
            break;
        }
    }
    // [DATA-3] repair (three times in four): the payload inside the message, LAST on the
    // segment that ends it, payload_len the bytes that follow.
    if (in.u8() % 4 != 0) {
        if (uint64_t{h.offset} + payload.size() > h.msg_len && h.offset < h.msg_len)
            payload.resize(h.msg_len - h.offset);
        if (uint64_t{h.offset} + payload.size() == h.msg_len)
            h.flags |= wire::data_flag::kLast;
        else
            h.flags &= static_cast<uint8_t>(~wire::data_flag::kLast);
        h.payload_len = static_cast<uint16_t>(payload.size());
    }
    // [DATA-9]: the header the flags name (a flipped COMPACT bit re-lays the fields; on a
    // connection without COMPACT_DATA the receiver reads 72 bytes all the same).
    const size_t header = wire::data_header_size(h.flags);
    d.assign(header + payload.size(), std::byte{0});
    wire::store_data_header(h, d.data());
    if (!payload.empty()) std::memcpy(d.data() + header, payload.data(), payload.size());
    return effect;
}

inline Effect mutate_ack(std::vector<std::byte>& d, Input& in, const std::vector<uint64_t>& ctx) {
    auto r = wire::decode_ack(d);
    if (!r) return Effect::kDelivery;
    wire::AckPacket a = *r;
    Effect effect = Effect::kPath;
    bool raw_count = false;
    switch (in.u8() % 14) {
        case 0: set_field(a.path_id, in, ctx); break;
        case 1: set_field(a.path_gen, in, ctx); break;
        case 2: {
            const uint8_t old = a.flags;
            set_field(a.flags, in, ctx);
            // [ACK-21]: SHORT changes the layout. Set, it leaves the bitmap out (store_ack
            // drops it); cleared, the full form carries it. Where the receiver did not
            // negotiate SHORT_ACK it reads the bytes at full length, entries and count
            // included, so the toggled ACK may report deliveries that did not happen.
            if ((old ^ a.flags) & wire::ack_flag::kShort) effect = Effect::kDelivery;
            break;
        }
        case 3: set_field(a.cum_psn, in, ctx); break;
        case 4:
            switch (in.u8() % 4) {
                case 0: a.sack.bytes.fill(0xff); break;
                case 1: a.sack.bytes.fill(0); break;
                case 2: {
                    const uint32_t byte = in.below(32);
                    a.sack.bytes[byte] ^= static_cast<uint8_t>(1u << in.below(8));
                    break;
                }
                default: a.sack.set(in.u8()); break;
            }
            // [ACK-21]: a SHORT ACK has no bitmap; one with bits set goes in the full form.
            if (!wire::sack_empty(a.sack)) a.flags &= static_cast<uint8_t>(~wire::ack_flag::kShort);
            break;
        case 5: set_field(a.ecn_ce_count, in, ctx); break;
        case 6: set_field(a.ts_echo, in, ctx); break;
        case 7: set_field(a.ack_delay_ns, in, ctx); break;
        case 8: set_field(a.rate_hint_mbps, in, ctx); break;
        case 9: set_field(a.probe_psn, in, ctx); break;
        case 10: {  // the entry count: more entries (real or hostile ids), fewer, or a lie
            effect = Effect::kDelivery;
            const uint16_t old = a.stream_count;
            set_field(a.stream_count, in, ctx);
            if (a.stream_count > wire::kMaxAckStreams && in.u8() % 4 == 0) {
                raw_count = true;  // keep the lie: the decoder must refuse it
            } else {
                a.stream_count = static_cast<uint16_t>(a.stream_count % (wire::kMaxAckStreams + 1));
                for (uint16_t i = old; i < a.stream_count; ++i) {
                    set_field(a.streams[i].stream_id, in, ctx);
                    set_field(a.streams[i].delivered_seq, in, ctx);
                }
            }
            break;
        }
        case 11:
        case 12: {  // one entry's stream or delivered_seq (an entry is added if none)
            effect = Effect::kDelivery;
            if (a.stream_count == 0) {
                a.stream_count = 1;
                a.streams[0] = wire::StreamAck{static_cast<uint32_t>(hostile_value(in, 1, 32, ctx)),
                                               static_cast<uint32_t>(hostile_value(in, 0, 32, ctx))};
            }
            wire::StreamAck& e = a.streams[in.below(a.stream_count)];
            if (in.u8() % 2)
                set_field(e.stream_id, in, ctx);
            else
                set_field(e.delivered_seq, in, ctx);
            break;
        }
        default: effect = Effect::kDelivery; mutate_common(a.common, in, ctx); break;
    }
    if (raw_count) {
        const uint16_t lie = a.stream_count;
        a.stream_count = 0;
        d.assign(wire::encoded_size(a), std::byte{0});
        wire::store_ack(a, d.data());
        // stream_count is the fixed part's last-but-one field: byte 76, or 44 with SHORT ([ACK-21]).
        wire::store_be16(d.data() + wire::ack_fixed_size(a.flags) - 4, lie);
    } else {
        d.assign(wire::encoded_size(a), std::byte{0});
        wire::store_ack(a, d.data());
    }
    return effect;
}

inline Effect mutate_nack(std::vector<std::byte>& d, Input& in, const std::vector<uint64_t>& ctx) {
    auto r = wire::decode_nack(d);
    if (!r) return Effect::kPath;
    wire::NackPacket n = *r;
    switch (in.u8() % 8) {
        case 0: n.reason = static_cast<wire::NackReason>(in.below(7)); break;
        case 1: set_field(n.path_id, in, ctx); break;
        case 2: set_field(n.path_gen, in, ctx); break;
        case 3: set_field(n.path_psn, in, ctx); break;
        case 4: set_field(n.stream_id, in, ctx); break;
        case 5: set_field(n.msg_seq, in, ctx); break;
        case 6: set_field(n.detail, in, ctx); break;
        default: mutate_common(n.common, in, ctx); break;
    }
    d.assign(wire::kNackSize, std::byte{0});
    (void)wire::encode_nack(n, d);
    return Effect::kPath;
}

inline Effect mutate_hello(std::vector<std::byte>& d, Input& in, const std::vector<uint64_t>& ctx) {
    auto r = wire::decode_hello(d);
    if (!r) return Effect::kSequence;
    wire::HelloPacket h = *r;
    Effect effect = Effect::kPath;
    switch (in.u8() % 9) {
        case 0: set_field(h.src_conn_id, in, ctx); break;
        case 1: set_field(h.src_token, in, ctx); break;
        case 2: set_field(h.isn, in, ctx); break;
        case 3: set_field(h.msg_isn, in, ctx); effect = Effect::kSequence; break;
        case 4: set_field(h.endpoint_port, in, ctx); break;
        case 5: set_field(h.num_paths, in, ctx); break;
        case 6: set_field(h.max_payload, in, ctx); break;
        case 7: set_field(h.capabilities, in, ctx); break;
        default: mutate_common(h.common, in, ctx); break;
    }
    d.assign(wire::kHelloSize, std::byte{0});
    (void)wire::encode_hello(h, d);
    return effect;
}

inline Effect mutate_probe(std::vector<std::byte>& d, Input& in, const std::vector<uint64_t>& ctx) {
    auto r = wire::decode_probe(d);
    if (!r) return Effect::kPath;
    wire::ProbePacket p = *r;
    switch (in.u8() % 6) {
        case 0: set_field(p.path_id, in, ctx); break;
        case 1: set_field(p.path_gen, in, ctx); break;
        case 2: set_field(p.next_psn, in, ctx); break;
        case 3: set_field(p.psn_floor, in, ctx); break;
        case 4: set_field(p.timestamp, in, ctx); break;
        default: mutate_common(p.common, in, ctx); break;
    }
    d.assign(wire::kProbeSize, std::byte{0});
    (void)wire::encode_probe(p, d);
    return Effect::kPath;
}

inline Effect mutate_close(std::vector<std::byte>& d, Input& in, const std::vector<uint64_t>& ctx) {
    auto r = wire::decode_close(d);
    if (!r) return Effect::kPath;
    wire::ClosePacket c = *r;
    if (in.bit())
        set_field(c.reason, in, ctx);
    else
        mutate_common(c.common, in, ctx);
    d.assign(wire::kCloseSize, std::byte{0});
    (void)wire::encode_close(c, d);
    return Effect::kPath;
}

// A RETRY: its cookie (a byte of it) or its header.
inline Effect mutate_retry(std::vector<std::byte>& d, Input& in, const std::vector<uint64_t>& ctx) {
    auto r = wire::decode_retry(d);
    if (!r) return Effect::kPath;
    wire::RetryPacket c = *r;
    if (in.bit())
        c.cookie[in.u8() % c.cookie.size()] ^= static_cast<uint8_t>(in.u8() | 1);
    else
        mutate_common(c.common, in, ctx);
    d.assign(wire::kRetrySize, std::byte{0});
    (void)wire::encode_retry(c, d);
    return Effect::kPath;
}

}  // namespace detail

// mutate_datagram changes one field of datagram d (sent by the engine, so it decodes) and
// encodes it again; one time in sixteen it flips a raw byte instead, reported as
// kPlacement (for an ACK: kDelivery). ctx holds the run's real values (ids, tokens, keys,
// addresses, sequence numbers) that hostile values are drawn near.
inline Effect mutate_datagram(std::vector<std::byte>& d, Input& in, const std::vector<uint64_t>& ctx) {
    wire::CommonHeader common;
    const bool ok = wire::parse_common_header(d, common) == Error::kOk;
    if (!ok || in.u8() % 16 == 0) {
        if (!d.empty()) {
            const uint32_t at = in.below(static_cast<uint32_t>(d.size()));
            d[at] ^= std::byte{static_cast<uint8_t>(1u << in.below(8))};
        }
        return ok && common.type == wire::PacketType::kAck ? Effect::kDelivery : Effect::kPlacement;
    }
    switch (common.type) {
        case wire::PacketType::kData: return detail::mutate_data(d, in, ctx);
        case wire::PacketType::kAck: return detail::mutate_ack(d, in, ctx);
        case wire::PacketType::kNack: return detail::mutate_nack(d, in, ctx);
        case wire::PacketType::kHello:
        case wire::PacketType::kHelloAck: return detail::mutate_hello(d, in, ctx);
        case wire::PacketType::kProbe: return detail::mutate_probe(d, in, ctx);
        case wire::PacketType::kClose: return detail::mutate_close(d, in, ctx);
        case wire::PacketType::kRetry: return detail::mutate_retry(d, in, ctx);
    }
    return Effect::kPlacement;
}

}  // namespace mroce::fuzz
