// conform/peer.cc — see peer.h. Every datagram the target sends passes
// check_target_packet, which records a violation (with the spec id) for anything a
// well-behaved sender never sends; the runner fails the test that was running.
#include "conform/peer.h"

#include <algorithm>

#include <fmt/core.h>

#include <chrono>
#include <cstring>

#include "wire/integrity.h"

namespace mroce::conform {

using wire::PacketType;

namespace {

using SteadyClock = std::chrono::steady_clock;

bool reserved_zero(const std::vector<std::byte>& b, size_t from, size_t to) {
    for (size_t i = from; i < to && i < b.size(); ++i)
        if (b[i] != std::byte{0}) return false;
    return true;
}

}  // namespace

std::vector<std::byte> pattern(size_t length, uint32_t seed) {
    std::vector<std::byte> out(length);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < length; ++i) {
        x = x * 1103515245u + 12345u;
        out[i] = static_cast<std::byte>((x >> 16) ^ i);
    }
    return out;
}

std::vector<std::byte> u64_bytes(uint64_t v) {
    std::vector<std::byte> b(8);
    for (int i = 0; i < 8; ++i) b[i] = static_cast<std::byte>(v >> (8 * i));
    return b;
}

std::string hex(std::span<const std::byte> bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string s(2 * bytes.size(), '0');
    for (size_t i = 0; i < bytes.size(); ++i) {
        const auto b = static_cast<uint8_t>(bytes[i]);
        s[2 * i] = kDigits[b >> 4];
        s[2 * i + 1] = kDigits[b & 15];
    }
    return s;
}

Peer::Peer(UdpSocket socket, Address target, Identity me)
    : socket_(std::move(socket)), target_(target), me_(me) {
    me_.endpoint_port = socket_.local().port;
    me_.known = true;
    my_ids_.emplace_back(me_.conn_id, me_.token);
}

void Peer::adopt_identity(const Identity& next) {
    me_ = next;
    me_.endpoint_port = socket_.local().port;
    me_.known = true;
    my_ids_.emplace_back(me_.conn_id, me_.token);
    paths_.clear();
}

uint32_t Peer::now_stamp() {
    return static_cast<uint32_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
            .count());
}

void Peer::send_bytes(std::span<const std::byte> bytes, uint8_t ecn) {
    if (integrity() && bytes.size() >= wire::kCommonHeaderSize &&
        wire::carries_integrity(static_cast<PacketType>(static_cast<uint8_t>(bytes[1])))) {
        std::vector<std::byte> sealed(bytes.begin(), bytes.end());
        sealed.resize(bytes.size() + wire::kIntegritySize);
        wire::append_integrity(sealed, bytes.size());  // [INT-2]
        socket_.send(sealed, target_, ecn);
        return;
    }
    socket_.send(bytes, target_, ecn);
}

void Peer::send_unsealed(std::span<const std::byte> bytes, uint8_t ecn) {
    socket_.send(bytes, target_, ecn);
}

void Peer::send_bytes_from(const UdpSocket& socket, std::span<const std::byte> bytes,
                           uint8_t ecn) {
    socket.send(bytes, target_, ecn);
}

wire::CommonHeader Peer::to_target() const {
    return wire::CommonHeader{.dst_conn_id = remote_.conn_id, .dst_token = remote_.token};
}

// ---------------------------------------------------------------------------------------
// Handshake

wire::HelloPacket Peer::hello_packet(PacketType type) const {
    wire::HelloPacket h;
    h.common.type = type;
    if (type == PacketType::kHelloAck) {
        h.common.dst_conn_id = remote_.conn_id;
        h.common.dst_token = remote_.token;
    }
    h.src_conn_id = me_.conn_id;
    h.src_token = me_.token;
    h.isn = me_.isn;
    h.msg_isn = me_.msg_isn;
    h.endpoint_port = me_.endpoint_port;
    h.num_paths = me_.num_paths;
    h.max_payload = me_.max_payload;
    h.capabilities = me_.capabilities;
    return h;
}

void Peer::send_hello(const wire::HelloPacket& h) {
    std::byte buf[wire::kHelloSize];
    auto n = wire::encode_hello(h, buf);
    if (n) send_bytes(std::span(buf, *n));
}

static Identity identity_of(const wire::HelloPacket& h) {
    Identity id;
    id.conn_id = h.src_conn_id;
    id.token = h.src_token;
    id.isn = h.isn;
    id.msg_isn = h.msg_isn;
    id.endpoint_port = h.endpoint_port;
    id.num_paths = h.num_paths;
    id.max_payload = h.max_payload;
    id.capabilities = h.capabilities;
    id.known = true;
    return id;
}

bool Peer::handshake(std::string* why) {
    auto hello = hello_packet(PacketType::kHello);
    int retries = 0;
    for (int attempt = 0; attempt < 3; ++attempt) {
        send_hello(hello);
        auto ack = expect([&](const Rx& r) {
            return r.is(PacketType::kHelloAck) || r.is(PacketType::kRetry);
        }, std::chrono::milliseconds(300));
        if (ack && ack->is(PacketType::kRetry) && retries++ < 3) {
            // [CONN-25]: prove our address by echoing the cookie; not a lost attempt.
            hello.cookie = ack->retry.cookie;
            --attempt;
            continue;
        }
        if (ack && ack->is(PacketType::kHelloAck)) {
            remote_ = identity_of(ack->hello);
            // [CONN-26]: confirm, as an initiator does, so the target counts us proven.
            send_hello(hello_packet(PacketType::kHelloAck));
            return true;
        }
    }
    if (why) *why = "no HELLO_ACK to 3 HELLOs (300 ms each) from " + target_.to_string();
    return false;
}

void Peer::answer_hello(const wire::HelloPacket& theirs) {
    learn_remote(theirs);
    send_hello(hello_packet(PacketType::kHelloAck));
}

void Peer::learn_remote(const wire::HelloPacket& theirs) { remote_ = identity_of(theirs); }

// ---------------------------------------------------------------------------------------
// DATA and PROBE

uint32_t Peer::segment_size() const {
    return std::min(me_.max_payload, remote_.known ? remote_.max_payload : me_.max_payload);
}

std::vector<Segment> Peer::cut(const Message& m) const {
    const uint32_t s = segment_size();
    const auto len = static_cast<uint32_t>(m.body.size());
    const uint32_t count = len == 0 ? 1 : (len + s - 1) / s;
    std::vector<Segment> out;
    for (uint32_t k = 0; k < count; ++k) {
        Segment seg;
        auto& h = seg.hdr;
        h.opcode = m.opcode;
        h.stream_id = m.stream_id;
        h.msg_seq = m.msg_seq;
        h.recv_seq = m.recv_seq;
        h.msg_len = len;
        h.offset = k * s;
        h.rkey = m.rkey;
        h.remote_addr = m.remote_addr;
        h.immediate = m.immediate;
        const uint32_t n = std::min(s, len - h.offset);
        h.payload_len = static_cast<uint16_t>(n);
        // ACK_NOW on every segment keeps the suite fast: an ACK never waits for a timer.
        h.flags = wire::data_flag::kAckNow | (k + 1 == count ? wire::data_flag::kLast : 0);
        seg.payload.assign(m.body.begin() + h.offset, m.body.begin() + h.offset + n);
        out.push_back(std::move(seg));
    }
    return out;
}

Peer::PathTx& Peer::path(uint16_t p) {
    auto it = paths_.find(p);
    if (it == paths_.end()) it = paths_.emplace(p, PathTx{0, me_.isn, me_.isn}).first;
    return it->second;
}

void Peer::new_generation(uint16_t p) {
    PathTx& t = path(p);
    t.gen = static_cast<uint8_t>(t.gen + 1);
    t.next_psn = me_.isn;
    t.floor = me_.isn;
}

std::vector<std::byte> Peer::encode_data(const wire::DataHeader& h,
                                         std::span<const std::byte> payload) {
    const size_t header = wire::data_header_size(h.flags);  // [DATA-9]
    std::vector<std::byte> out(header + payload.size());
    wire::store_data_header(h, out.data());
    if (!payload.empty()) std::memcpy(out.data() + header, payload.data(), payload.size());
    return out;
}

wire::DataHeader Peer::next_header(const Segment& s, uint16_t p, uint8_t flags) {
    PathTx& t = path(p);
    wire::DataHeader h = s.hdr;
    h.common = to_target();
    h.path_id = p;
    h.path_gen = t.gen;
    h.path_psn = t.next_psn++;
    h.psn_floor = t.floor;
    h.timestamp = now_stamp();
    h.flags |= flags;
    // [DATA-9]: SHOULD be COMPACT where negotiated and the opcode consumes no receive.
    if (compact_data() && wire::may_be_compact(h.opcode)) h.flags |= wire::data_flag::kCompact;
    h.payload_len = static_cast<uint16_t>(s.payload.size());
    return h;
}

Sent Peer::send_segment(const Segment& s, uint16_t p, uint8_t ecn, uint8_t flags) {
    const wire::DataHeader h = next_header(s, p, flags);
    send_bytes(encode_data(h, s.payload), ecn);
    ++((h.flags & wire::data_flag::kCompact) ? compact_data_sent_ : full_data_sent_);
    return Sent{p, h.path_gen, h.path_psn, h.timestamp};
}

uint32_t Peer::send_probe(uint16_t p, std::optional<uint32_t> floor) {
    PathTx& t = path(p);
    wire::ProbePacket probe;
    probe.common = to_target();
    probe.common.type = PacketType::kProbe;
    probe.path_id = p;
    probe.path_gen = t.gen;
    probe.next_psn = t.next_psn;
    probe.psn_floor = floor.value_or(t.floor);
    probe.timestamp = now_stamp();
    std::byte buf[wire::kProbeSize];
    if (auto n = wire::encode_probe(probe, buf)) send_bytes(std::span(buf, *n));
    return probe.timestamp;
}

std::optional<wire::AckPacket> Peer::barrier(uint16_t p) {
    const uint32_t stamp = send_probe(p);
    auto is_reply = [&](const Rx& r) {
        return r.is(PacketType::kAck) && (r.ack.flags & wire::ack_flag::kProbeReply) &&
               r.ack.path_id == p && r.ack.ts_echo == stamp;
    };
    auto reply = expect(is_reply, std::chrono::milliseconds(500));
    if (!reply) return std::nullopt;
    // [PROBE-2] sends the reply twice; the twin must not be taken for a later answer.
    (void)expect(is_reply, std::chrono::milliseconds(20));
    return reply->ack;
}

// ---------------------------------------------------------------------------------------
// Acknowledging the target's DATA

void Peer::note_target_data(const wire::DataHeader& h) {
    auto it = target_paths_.find(h.path_id);
    if (it == target_paths_.end() || static_cast<int8_t>(h.path_gen - it->second.gen) > 0) {
        PathRx fresh;
        fresh.gen = h.path_gen;
        fresh.cum = remote_.isn - 1;
        it = target_paths_.insert_or_assign(h.path_id, fresh).first;
    }
    PathRx& r = it->second;
    if (h.path_gen != r.gen) return;
    r.ts = h.timestamp;
    r.arrived = SteadyClock::now();
    const uint32_t d = h.path_psn - r.cum;
    if (d == 0 || d > 0x80000000u) return;  // at or below cum: a duplicate
    r.above.insert(d);
    while (r.above.count(1)) {
        ++r.cum;
        std::set<uint32_t> shifted;
        for (uint32_t x : r.above)
            if (x > 1) shifted.insert(x - 1);
        r.above = std::move(shifted);
    }
}

wire::AckPacket Peer::probe_reply(const wire::ProbePacket& probe) {
    auto it = target_paths_.find(probe.path_id);
    if (it == target_paths_.end() || static_cast<int8_t>(probe.path_gen - it->second.gen) > 0) {
        PathRx fresh;
        fresh.gen = probe.path_gen;
        fresh.cum = remote_.isn - 1;
        it = target_paths_.insert_or_assign(probe.path_id, fresh).first;
    }
    PathRx& r = it->second;
    if (probe.path_gen == r.gen) {
        // [PATH-6]: every PSN before the floor is settled; cum moves up to floor - 1.
        const uint32_t up = probe.psn_floor - 1 - r.cum;
        if (static_cast<int32_t>(up) > 0) {
            std::set<uint32_t> shifted;
            for (uint32_t x : r.above)
                if (x > up) shifted.insert(x - up);
            r.above = std::move(shifted);
            r.cum = probe.psn_floor - 1;
            while (r.above.count(1)) {
                ++r.cum;
                std::set<uint32_t> next;
                for (uint32_t x : r.above)
                    if (x > 1) next.insert(x - 1);
                r.above = std::move(next);
            }
        }
    }
    auto a = ack_for_target_path(probe.path_id);
    a.path_gen = probe.path_gen;
    a.flags = wire::ack_flag::kProbeReply;
    a.probe_psn = probe.next_psn;
    a.ts_echo = probe.timestamp;
    a.ack_delay_ns = 0;
    return a;
}

wire::AckPacket Peer::ack_for_target_path(uint16_t p) const {
    wire::AckPacket a;
    a.common = to_target();
    a.common.type = PacketType::kAck;
    a.path_id = p;
    auto it = target_paths_.find(p);
    if (it == target_paths_.end()) {
        a.cum_psn = remote_.isn - 1;
        return a;
    }
    a.path_gen = it->second.gen;
    a.cum_psn = it->second.cum;
    // [ACK-6]: echo the latest DATA's timestamp and how long it waited here, so the
    // target's RTT samples are real ones.
    a.ts_echo = it->second.ts;
    a.ack_delay_ns = static_cast<uint32_t>(std::min<int64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - it->second.arrived).count(),
        UINT32_MAX));
    for (uint32_t d : it->second.above)
        if (d >= 2 && d - 2 < wire::kSackBits) a.sack.set(d - 2);  // bit i = cum + 1 + i
    return a;
}

std::vector<std::byte> Peer::ack_bytes(wire::AckPacket ack) {
    ack.common.type = PacketType::kAck;
    std::vector<std::byte> buf(wire::encoded_size(ack));
    auto n = wire::encode_ack(ack, buf);
    buf.resize(n ? *n : 0);
    return buf;
}

std::vector<std::byte> Peer::coalesced(wire::AckPacket ack, std::span<const std::byte> follower) {
    ack.flags |= wire::ack_flag::kFollowed;  // [ACK-8], [WIRE-10]
    auto out = ack_bytes(ack);
    out.insert(out.end(), follower.begin(), follower.end());
    return out;
}

void Peer::send_ack(wire::AckPacket ack) {
    ack.common.type = PacketType::kAck;
    // [ACK-21]: SHOULD leave out an empty bitmap where both announced SHORT_ACK.
    if (short_ack() && wire::sack_empty(ack.sack)) ack.flags |= wire::ack_flag::kShort;
    std::vector<std::byte> buf(wire::encoded_size(ack));
    if (auto n = wire::encode_ack(ack, buf)) {
        ++((ack.flags & wire::ack_flag::kShort) ? short_acks_sent_ : full_acks_sent_);
        send_bytes(std::span(buf.data(), *n));
    }
}

// ---------------------------------------------------------------------------------------
// Receiving

void Peer::violation(std::string what) {
    if (violations_.size() < 32) violations_.push_back(std::move(what));
}

Rx Peer::decode(Datagram d) {
    Rx rx;
    rx.raw = std::move(d);
    const auto& b = rx.raw.bytes;
    if (b.size() < wire::kCommonHeaderSize) {
        violation(fmt::format("[WIRE-7] target sent a {}-byte datagram", b.size()));
        return rx;
    }
    const auto type = static_cast<uint8_t>(b[1]);
    std::span<const std::byte> packet = b;
    if (integrity() && wire::is_known_type(type) &&
        wire::carries_integrity(static_cast<PacketType>(type))) {
        // [INT-2]: every packet of the connection but the handshake's carries a valid trailer.
        if (!wire::strip_integrity(b, packet)) {
            violation(fmt::format("[INT-2] target sent type {} without a valid integrity trailer",
                                  type));
            return rx;
        }
        ++trailers_checked_;
    }
    if (static_cast<uint8_t>(b[0]) == wire::kLegacyVersion) {
        // [VER-1]: an initiator's version-1 probe HELLO is allowed; it carries the same
        // identity as its version-2 HELLOs.
        if (auto v1 = wire::decode_hello_v1(b); v1 && v1->common.type == PacketType::kHello) {
            rx.hello = *v1;
            rx.decoded = true;
            rx.type = PacketType::kHello;
            return rx;
        }
        // [VER-1]: the refusal of a version-1 HELLO or HELLO_ACK is a version-1 CLOSE
        // (§3.7's layout) with reason VERSION_MISMATCH; tests check its fields.
        if (b.size() == wire::kCloseSize && type == static_cast<uint8_t>(PacketType::kClose)) {
            std::vector<std::byte> v2(b.begin(), b.end());
            v2[0] = static_cast<std::byte>(wire::kProtocolVersion);
            if (auto c = wire::decode_close(v2);
                c && c->reason == static_cast<uint32_t>(wire::CloseReason::kVersionMismatch)) {
                rx.close = *c;
                rx.decoded = true;
                rx.type = PacketType::kClose;
                return rx;
            }
        }
    }
    auto fail = [&](std::string_view what, Error e) {
        violation(fmt::format("[UDP-2] [WIRE-5] target sent a {} that does not decode ({})", what,
                              to_string(e)));
    };
    switch (type) {
        case 1: {
            check_compact_bit(packet);
            auto r = decode_target_data(packet);
            if (!r) {
                fail("DATA", r.error());
                return rx;
            }
            rx.data = r->hdr;
            rx.payload.assign(r->payload.begin(), r->payload.end());
            rx.data_header = packet.size() - r->payload.size();
            break;
        }
        case 2: {
            // [ACK-21]: SHORT only where both HELLOs announced SHORT_ACK; elsewhere the bit is
            // undefined and the ACK is read at its full length (a SHORT one then fails [ACK-1]).
            if (packet.size() > 19 && (static_cast<uint8_t>(packet[19]) & wire::ack_flag::kShort) && !short_ack())
                violation(fmt::format("[ACK-21] [VER-2] target sent an ACK with SHORT ({} bytes) on a connection "
                                      "that did not negotiate SHORT_ACK", packet.size()));
            // [WIRE-10]: with COALESCE negotiated, an ACK with FOLLOWED is as long as its count
            // and a DATA follows it; without, the flag is itself a violation (below) and the
            // datagram is read as one ACK.
            if (const size_t ack_len = wire::coalesced_ack_size(packet, short_ack()); ack_len > 0 && coalesce()) {
                if (!decode_coalesced(rx, packet, ack_len)) return rx;
                break;
            }
            auto r = decode_target_ack(packet);
            if (!r) {
                fail("ACK", r.error());
                return rx;
            }
            rx.ack = *r;
            rx.ack_size = packet.size();
            break;
        }
        case 3: {
            auto r = wire::decode_nack(packet);
            if (!r) {
                fail("NACK", r.error());
                return rx;
            }
            rx.nack = *r;
            break;
        }
        case 4:
        case 5: {
            auto r = wire::decode_hello(packet);
            if (!r) {
                fail("HELLO", r.error());
                return rx;
            }
            rx.hello = *r;
            break;
        }
        case 6: {
            auto r = wire::decode_probe(packet);
            if (!r) {
                fail("PROBE", r.error());
                return rx;
            }
            rx.probe = *r;
            break;
        }
        case 7: {
            auto r = wire::decode_close(packet);
            if (!r) {
                fail("CLOSE", r.error());
                return rx;
            }
            rx.close = *r;
            break;
        }
        case 8: {
            auto r = wire::decode_retry(packet);
            if (!r) {
                fail("RETRY", r.error());
                return rx;
            }
            rx.retry = *r;
            break;
        }
        default:
            violation(fmt::format("[WIRE-1] [WIRE-2] target sent version {} type {}",
                                  static_cast<int>(b[0]), type));
            return rx;
    }
    rx.decoded = true;
    rx.type = static_cast<PacketType>(type);
    return rx;
}

bool Peer::decode_coalesced(Rx& rx, std::span<const std::byte> packet, size_t ack_len) {
    if (packet.size() <= ack_len) {
        violation(fmt::format("[WIRE-10] ACK with FOLLOWED and nothing after it ({} bytes, its count "
                              "gives {})", packet.size(), ack_len));
        return false;
    }
    auto ack = decode_target_ack(packet.first(ack_len));
    if (!ack) {
        violation(fmt::format("[WIRE-10] [ACK-1] the ACK of a coalesced datagram does not decode ({})",
                              to_string(ack.error())));
        return false;
    }
    // The sender's bound is a full DATA of our max_payload (with the one trailer).
    const size_t bound = wire::kDataHeaderSize + me_.max_payload + (integrity() ? wire::kIntegritySize : 0);
    if (rx.raw.bytes.size() > bound)
        violation(fmt::format("[WIRE-10] coalesced datagram of {} bytes, longer than a full DATA ({})",
                              rx.raw.bytes.size(), bound));
    const auto rest = packet.subspan(ack_len);
    wire::CommonHeader inner;
    if (Error e = wire::parse_common_header(rest, inner); e != Error::kOk) {
        violation(fmt::format("[WIRE-10] the packet after a FOLLOWED ACK does not decode ({})", to_string(e)));
        return false;
    }
    if (inner.type != PacketType::kData || inner.dst_conn_id != ack->common.dst_conn_id ||
        inner.dst_token != ack->common.dst_token) {
        violation(fmt::format("[WIRE-10] a FOLLOWED ACK followed by type {} to connection {:#x} (the "
                              "ACK's: {:#x}), not a DATA of the same connection and token",
                              static_cast<int>(inner.type), inner.dst_conn_id, ack->common.dst_conn_id));
        return false;
    }
    check_compact_bit(rest);
    auto data = decode_target_data(rest);
    if (!data) {
        violation(fmt::format("[WIRE-10] [DATA-3] the DATA of a coalesced datagram does not decode ({})",
                              to_string(data.error())));
        return false;
    }
    rx.ack = *ack;
    rx.ack_size = ack_len;
    rx.coalesced = true;
    Rx f;
    f.raw.bytes.assign(rest.begin(), rest.end());
    f.raw.from = rx.raw.from;
    f.raw.ecn = rx.raw.ecn;
    f.decoded = true;
    f.type = PacketType::kData;
    f.data = data->hdr;
    f.payload.assign(data->payload.begin(), data->payload.end());
    f.data_header = rest.size() - data->payload.size();
    f.coalesced = true;
    follower_ = std::move(f);
    ++coalesced_seen_;
    return true;
}

Result<wire::AckPacket> Peer::decode_target_ack(std::span<const std::byte> packet) const {
    auto common = wire::decode_common_header(packet);
    if (!common) return common.error();
    if (common->type != PacketType::kAck) return Error::kBadType;
    wire::AckPacket a;
    a.common = *common;
    if (Error e = wire::parse_ack_body(packet, a, short_ack()); e != Error::kOk) return e;
    return a;
}

Result<wire::DataPacket> Peer::decode_target_data(std::span<const std::byte> packet) const {
    return wire::decode_data(packet, compact_data());
}

void Peer::check_compact_bit(std::span<const std::byte> packet) {
    if (packet.size() <= 17 || !(static_cast<uint8_t>(packet[17]) & wire::data_flag::kCompact)) return;
    const auto op = static_cast<uint8_t>(packet[16]);
    if (!compact_data())
        violation(fmt::format("[DATA-9] [VER-2] target sent a DATA (opcode {:#x}, {} bytes) with COMPACT on a "
                              "connection that did not negotiate COMPACT_DATA", op, packet.size()));
    else if (wire::is_known_opcode(op) && !wire::may_be_compact(static_cast<wire::Opcode>(op)))
        violation(fmt::format("[DATA-9] target sent COMPACT on a DATA whose opcode ({:#x}) consumes a receive "
                              "(MUST NOT)", op));
}

// check_target_packet: the rules every datagram a conforming sender produces obeys.
void Peer::check_target_packet(const Rx& rx) {
    const auto& b = rx.raw.bytes;
    // Bytes 2 and 3 of the common header are reserved, but in version 2's HELLO and
    // HELLO_ACK (§3.5): byte 2 is hello_flags, of which SENDING (0x01, a HELLO's only) and
    // DROPPED (0x02) are defined ([CC-20], [CONN-31]); a HELLO's byte 3 is hello_seq, never
    // 0 ([CONN-32]), and a HELLO_ACK's hello_echo, any number (the tests check its value).
    // Version 1's HELLO has neither.
    const bool v2_hello_type = b.size() >= wire::kCommonHeaderSize &&
                               static_cast<uint8_t>(b[0]) == wire::kProtocolVersion &&
                               (rx.type == PacketType::kHello || rx.type == PacketType::kHelloAck);
    size_t reserved_to = 4;
    if (v2_hello_type && rx.type == PacketType::kHello) {
        if ((static_cast<uint8_t>(b[wire::kHelloFlagsOffset]) & ~wire::kHelloFlagsDefined) != 0)
            violation("[WIRE-6] HELLO with hello_flags bits this version does not define");
        if (b[wire::kHelloSeqOffset] == std::byte{0})
            violation("[CONN-32] a version-2 HELLO with hello_seq 0");
        reserved_to = wire::kHelloFlagsOffset;
    } else if (v2_hello_type) {
        if ((static_cast<uint8_t>(b[wire::kHelloFlagsOffset]) & ~wire::kHelloFlagDropped) != 0)
            violation("[WIRE-6] HELLO_ACK with hello_flags bits other than DROPPED");
        reserved_to = wire::kHelloFlagsOffset;
    }
    if (!reserved_zero(b, 2, reserved_to))
        violation("[WIRE-6] common header reserved bytes not zero");
    if (rx.raw.ecn >= 0 && rx.raw.ecn != kEct0)
        violation(fmt::format("[UDP-5] target sent {} with ECN field {} (not ECT(0))",
                              static_cast<int>(rx.type), rx.raw.ecn));
    if (rx.type == PacketType::kHello) {
        if (rx.hello.common.dst_conn_id || rx.hello.common.dst_token)
            violation("[CONN-2] HELLO with non-zero dst_conn_id or dst_token");
    } else {
        bool ours = false;
        for (auto [id, token] : my_ids_)
            ours |= rx.raw.bytes.size() >= 16 && wire::load_be32(b.data() + 4) == id &&
                    wire::load_be64(b.data() + 8) == token;
        if (!ours)
            // The source, against the target's endpoint: a datagram from elsewhere (another
            // process's endpoint that used this port before the suite's socket) is not the
            // target's doing, and the message must tell the two apart.
            violation(fmt::format("[CONN-2] [CONN-4] target sent type {} to connection {:#x} with a "
                                  "token that is not ours (from {}; the target's endpoint is {})",
                                  static_cast<int>(rx.type), wire::load_be32(b.data() + 4),
                                  rx.raw.from.to_string(), target_.to_string()));
    }
    switch (rx.type) {
        case PacketType::kHello:
        case PacketType::kHelloAck:
            if (!rx.hello.src_conn_id || !rx.hello.src_token)
                violation("[CONN-2] HELLO/HELLO_ACK with src_conn_id or src_token 0");
            if (rx.hello.capabilities & ~wire::kCapDefined)
                violation("[CONN-2] [VER-2] capability bits this version does not define");
            if (!rx.hello.isn || !rx.hello.msg_isn) violation("[CONN-5] isn or msg_isn 0");
            // [CONN-2] [CC-20]: a HELLO_ACK's cookie is zero but for its first 4 bytes, the
            // grant (decoded apart, so the raw bytes are checked).
            if (rx.type == PacketType::kHelloAck && b.size() == wire::kHelloSize && !reserved_zero(b, 52, 64))
                violation("[CONN-2] HELLO_ACK with a non-zero cookie beyond its grant");
            break;
        case PacketType::kRetry:
            if (std::all_of(rx.retry.cookie.begin(), rx.retry.cookie.end(), [](uint8_t c) { return !c; }))
                violation("[CONN-27] RETRY with an all-zero cookie");
            break;
        case PacketType::kData:
            // (COMPACT, 0x20, is defined where negotiated; elsewhere check_compact_bit recorded
            // it and decode cleared it.)
            if (rx.data.flags & 0xC0) violation("[WIRE-6] [DATA-2] undefined DATA flag bits set");
            if (rx.data.flags & wire::data_flag::kReturnEcho) {
                // [PATH-12]: the echo names one of this peer's paths, on which an ACK arrived.
                if (rx.data.return_echo >= me_.num_paths)
                    violation("[PATH-12] DATA return_echo names a path this peer does not have");
            } else if (!reserved_zero(b, 21, 22)) {
                violation("[PATH-12] DATA return_echo not zero without RETURN_ECHO");
            }
            if (static_cast<int32_t>(rx.data.path_psn - rx.data.psn_floor) < 0)
                violation("[DATA-7] DATA psn_floor after path_psn");
            break;
        case PacketType::kAck:
            // (SHORT, 0x04, is defined where negotiated; elsewhere decode already recorded it.)
            if (rx.ack.flags & 0xF8) violation("[WIRE-6] [ACK-8] undefined ACK flag bits set");
            // [WIRE-10]: FOLLOWED only where both announced COALESCE (decode_coalesced then
            // read the DATA after it).
            if ((rx.ack.flags & wire::ack_flag::kFollowed) && !coalesce())
                violation("[WIRE-10] ACK with FOLLOWED to a peer that did not announce COALESCE");
            if (!(rx.ack.flags & wire::ack_flag::kProbeReply) && rx.ack.probe_psn)
                violation("[ACK-8] probe_psn not 0 without PROBE_REPLY");
            if (rx.ack.sack.test(0)) violation("[ACK-2] SACK bit 0 set");
            if (remote_.known && rx.ack.return_path >= remote_.num_paths)
                violation("[PATH-12] ACK return_path names a path the target does not have");
            break;
        case PacketType::kNack:
            if (!reserved_zero(b, 17, 18) || !reserved_zero(b, 21, 24))
                violation("[WIRE-6] NACK reserved bytes not zero");
            break;
        case PacketType::kProbe:
            // [PROBE-4]: byte 19 is `flags`; only FAILED is defined.
            if (b.size() > 19 && (static_cast<uint8_t>(b[19]) & ~wire::kProbeFailed) != 0)
                violation("[WIRE-6] PROBE flags bit other than FAILED set");
            if (static_cast<int32_t>(rx.probe.next_psn - rx.probe.psn_floor) < 0)
                violation("[PROBE-1] PROBE psn_floor after next_psn");
            break;
        case PacketType::kClose:
            if (!reserved_zero(b, 20, 24)) violation("[WIRE-6] CLOSE reserved bytes not zero");
            break;
    }
}

bool Peer::receive_one(Duration timeout) {
    auto d = socket_.receive(timeout);
    if (!d) return false;
    // Only the target's endpoint or its path ports (same host) speak to us.
    follower_.reset();
    Rx rx = decode(std::move(*d));
    if (rx.decoded) check_target_packet(rx);
    if (follower_) check_target_packet(*follower_);
    if (rx.is(PacketType::kAck)) {
        for (uint16_t i = 0; i < rx.ack.stream_count; ++i) {
            const auto& e = rx.ack.streams[i];
            ++entries_seen_[e.stream_id];
            auto it = delivered_.find(e.stream_id);
            // ACKs take random return paths and overtake each other: keep the newest.
            if (it == delivered_.end() || static_cast<int32_t>(e.delivered_seq - it->second) > 0)
                delivered_[e.stream_id] = e.delivered_seq;
        }
    }
    inbox_.push_back(std::move(rx));
    if (follower_) {
        inbox_.push_back(std::move(*follower_));
        follower_.reset();
    }
    return true;
}

std::optional<Rx> Peer::expect(const RxFilter& filter, Duration timeout) {
    const auto deadline = SteadyClock::now() + timeout;
    size_t scanned = 0;
    for (;;) {
        for (; scanned < inbox_.size(); ++scanned) {
            if (filter(inbox_[scanned])) {
                Rx out = std::move(inbox_[scanned]);
                inbox_.erase(inbox_.begin() + static_cast<std::ptrdiff_t>(scanned));
                return out;
            }
        }
        const auto left = deadline - SteadyClock::now();
        if (left <= SteadyClock::duration::zero()) return std::nullopt;
        receive_one(std::chrono::duration_cast<Duration>(left));
    }
}

std::vector<Rx> Peer::collect(const RxFilter& filter, Duration window) {
    const auto deadline = SteadyClock::now() + window;
    for (;;) {
        const auto left = deadline - SteadyClock::now();
        if (left <= SteadyClock::duration::zero()) break;
        receive_one(std::chrono::duration_cast<Duration>(left));
    }
    std::vector<Rx> out;
    std::deque<Rx> rest;
    for (auto& rx : inbox_) (filter(rx) ? out.emplace_back(std::move(rx)) : rest.emplace_back(std::move(rx)));
    inbox_ = std::move(rest);
    return out;
}

std::optional<uint32_t> Peer::delivered(uint32_t stream) const {
    auto it = delivered_.find(stream);
    if (it == delivered_.end()) return std::nullopt;
    return it->second;
}

uint64_t Peer::entries_seen(uint32_t stream) const {
    auto it = entries_seen_.find(stream);
    return it == entries_seen_.end() ? 0 : it->second;
}

std::vector<Rx> Peer::ready(const RxFilter& filter, Duration wait) {
    if (receive_one(wait))
        while (receive_one(Duration::zero())) {
        }
    return collect(filter, Duration::zero());
}

void Peer::discard(Duration quiet) {
    (void)collect([](const Rx&) { return true; }, quiet);
}

}  // namespace mroce::conform
