// tests/wireshark/pcap_decode.cc — the ground truth for the dissector test: reads a classic
// pcap file and decodes each UDP datagram with wire/'s own decoders (not with anything the
// Lua dissector shares), printing one JSON object per line:
//
//   {"frame": N, "segment": I, "sport": S, "dport": D, "fields": {"mroce.type": 1, ...},
//    "error": null | "truncated" | "bad_version" | "bad_type" | "bad_length" | "bad_integrity"}
//
// Field names are the dissector's (tools/wireshark/README.md); values are integers,
// lists of integers where a field repeats, hex strings for byte fields and strings for
// SACK ranges ("first-last" or "psn"). `error` is the wire/ decode error, named as the
// dissector's mroce.drop_reason; a packet with an error has no fields. `segment` numbers
// the datagrams of a UDP GSO/GRO aggregate (see main); it is 0 for an ordinary record.
//
// usage: pcap_decode FILE.pcap [PORT ...]   (only datagrams from or to a PORT; all if none)
// Exit status: 0, or 2 with a one-line message for an unreadable or unsupported file.
// Reads classic pcap (µs or ns, either byte order), link types Ethernet (1), raw IP (101,
// 228, 229) and Linux cooked (113): what the simulator and `tshark -F pcap -i lo` write.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "wire/ack.h"
#include "wire/control.h"
#include "wire/data.h"
#include "wire/header.h"
#include "wire/integrity.h"

namespace {

using mroce::Error;
using nlohmann::ordered_json;
namespace wire = mroce::wire;

[[noreturn]] void die(const std::string& why) {
    std::fprintf(stderr, "pcap_decode: %s\n", why.c_str());
    std::exit(2);
}

uint32_t be16(const uint8_t* p) { return uint32_t{p[0]} << 8 | p[1]; }

std::string hex(std::span<const std::byte> b) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (std::byte x : b) {
        s += digits[static_cast<uint8_t>(x) >> 4];
        s += digits[static_cast<uint8_t>(x) & 15];
    }
    return s;
}

const char* error_name(Error e) {
    switch (e) {
        case Error::kTruncated: return "truncated";
        case Error::kBadVersion: return "bad_version";
        case Error::kBadType: return "bad_type";
        case Error::kBadLength: return "bad_length";
        default: return "other";
    }
}

void common_fields(ordered_json& f, const wire::CommonHeader& h) {
    f["mroce.version"] = h.version;
    f["mroce.type"] = static_cast<uint8_t>(h.type);
    f["mroce.conn_id"] = h.dst_conn_id;
    f["mroce.token"] = h.dst_token;
}

// sack_fields lists the SACKed PSNs as the spec defines them ([ACK-2]): bit i is PSN
// cum_psn + 1 + i (mod 2^32); holes are the PSNs up to the highest SACKed one not SACKed.
// An ACK with SHORT ([ACK-21]) has no bitmap on the wire, so no "mroce.ack.sack"; wire/
// reads it as an empty one, so its count and holes are 0.
void sack_fields(ordered_json& f, const wire::AckPacket& a) {
    if (!(a.flags & wire::ack_flag::kShort)) f["mroce.ack.sack"] = hex(std::as_bytes(std::span(a.sack.bytes)));
    uint32_t count = 0;
    int highest = -1;
    ordered_json ranges = ordered_json::array();
    for (uint32_t i = 0; i < wire::kSackBits;) {
        if (!a.sack.test(i)) {
            ++i;
            continue;
        }
        uint32_t j = i;
        while (j + 1 < wire::kSackBits && a.sack.test(j + 1)) ++j;
        const uint32_t first = a.cum_psn + 1 + i, last = a.cum_psn + 1 + j;
        ranges.push_back(first == last ? std::to_string(first)
                                       : std::to_string(first) + "-" + std::to_string(last));
        count += j - i + 1;
        highest = static_cast<int>(j);
        i = j + 1;
    }
    f["mroce.ack.sack.count"] = count;
    if (!ranges.empty()) f["mroce.ack.sack.range"] = ranges;
    f["mroce.ack.sack.holes"] = highest < 0 ? 0 : static_cast<uint32_t>(highest + 1) - count;
}

ordered_json decode_plain(std::span<const std::byte> d, const char** error);

// decode returns the fields of one datagram, or sets *error. A capture does not say which
// connections negotiated INTEGRITY (spec §4.9), so, as the dissector does, a packet of a
// type that carries the trailer ([INT-2]) whose datagram is 4 bytes longer than its header
// says is read as packet + trailer, the trailer checked first ([INT-3]): "mroce.integrity"
// is the trailer, and one that is not the CRC32C of the bytes before it is the error
// "bad_integrity".
ordered_json decode(std::span<const std::byte> d, const char** error) {
    auto common = wire::decode_common_header(d);
    if (common && wire::carries_integrity(common->type) &&
        d.size() >= wire::kCommonHeaderSize + wire::kIntegritySize) {
        size_t plain = 0;
        switch (common->type) {
            case wire::PacketType::kData:
                // [DATA-9]: with COMPACT the header is 64 (d holds the flags, byte 17, here).
                plain = wire::data_header_size(static_cast<uint8_t>(d[17])) +
                        (d.size() >= 24 ? wire::load_be16(d.data() + 22) : 0);
                break;
            case wire::PacketType::kAck: {
                // [ACK-21]: with SHORT the fixed part is 48 and its count 32 bytes up (d holds
                // the 20 bytes up to the flags here).
                const size_t fixed = wire::ack_fixed_size(static_cast<uint8_t>(d[19]));
                plain = fixed + (d.size() >= fixed - 2 ? 8 * size_t{wire::load_be16(d.data() + fixed - 4)} : 0);
                break;
            }
            case wire::PacketType::kNack: plain = wire::kNackSize; break;
            case wire::PacketType::kProbe: plain = wire::kProbeSize; break;
            default: plain = wire::kCloseSize; break;
        }
        if (plain == d.size() - wire::kIntegritySize) {
            std::span<const std::byte> packet;
            if (!wire::strip_integrity(d, packet)) {
                *error = "bad_integrity";
                return ordered_json::object();
            }
            ordered_json g = decode_plain(packet, error);
            if (!*error) g["mroce.integrity"] = wire::load_be32(d.data() + packet.size());
            return g;
        }
    }
    return decode_plain(d, error);
}

ordered_json decode_plain(std::span<const std::byte> d, const char** error) {
    ordered_json f = ordered_json::object();
    auto common = wire::decode_common_header(d);
    if (!common) {
        *error = error_name(common.error());
        return f;
    }
    const auto fail = [&](Error e) {
        *error = error_name(e);
        return ordered_json::object();
    };
    switch (common->type) {
        case wire::PacketType::kData: {
            // [DATA-9]: a capture does not say whether COMPACT_DATA was negotiated, so the
            // flag decides (decode_data's default), as it does for the dissector; a COMPACT
            // DATA has no recv_seq or immediate on the wire, so neither field is printed.
            auto p = wire::decode_data(d);
            if (!p) return fail(p.error());
            const wire::DataHeader& h = p->hdr;
            common_fields(f, h.common);
            f["mroce.data.opcode"] = static_cast<uint8_t>(h.opcode);
            f["mroce.data.flags"] = h.flags;
            f["mroce.data.flags.last"] = (h.flags & wire::data_flag::kLast) != 0;
            f["mroce.data.flags.retx"] = (h.flags & wire::data_flag::kRetx) != 0;
            f["mroce.data.flags.ack_now"] = (h.flags & wire::data_flag::kAckNow) != 0;
            f["mroce.data.flags.return_echo"] = (h.flags & wire::data_flag::kReturnEcho) != 0;
            f["mroce.data.flags.drained"] = (h.flags & wire::data_flag::kDrained) != 0;
            const bool compact = (h.flags & wire::data_flag::kCompact) != 0;
            f["mroce.data.flags.compact"] = compact;
            f["mroce.data.return_echo"] = h.return_echo;
            f["mroce.path_id"] = h.path_id;
            f["mroce.path_gen"] = h.path_gen;
            f["mroce.data.payload_len"] = h.payload_len;
            f["mroce.psn"] = h.path_psn;
            f["mroce.psn_floor"] = h.psn_floor;
            f["mroce.stream_id"] = h.stream_id;
            f["mroce.msg_seq"] = h.msg_seq;
            if (!compact) f["mroce.data.recv_seq"] = h.recv_seq;
            f["mroce.data.msg_len"] = h.msg_len;
            f["mroce.data.offset"] = h.offset;
            f["mroce.timestamp"] = h.timestamp;
            f["mroce.data.rkey"] = h.rkey;
            f["mroce.data.remote_addr"] = h.remote_addr;
            if (!compact) f["mroce.data.immediate"] = h.immediate;
            if (!p->payload.empty()) f["mroce.data.payload"] = hex(p->payload);
            // [DATA-8] bodies, when the packet carries exactly one.
            const size_t n = p->payload.size();
            const auto body = [&](size_t size) { return n == size && h.msg_len == size; };
            using wire::Opcode;
            if (h.opcode == Opcode::kReadRequest && body(wire::kReadRequestBodySize)) {
                f["mroce.data.read_length"] = wire::decode_read_request(
                    p->payload.first<wire::kReadRequestBodySize>());
            } else if ((h.opcode == Opcode::kAtomicFetchAdd ||
                        h.opcode == Opcode::kAtomicCompareSwap) &&
                       body(wire::kAtomicRequestBodySize)) {
                const wire::AtomicRequestBody b = wire::decode_atomic_request(
                    p->payload.first<wire::kAtomicRequestBodySize>());
                if (h.opcode == Opcode::kAtomicFetchAdd) {
                    f["mroce.data.atomic.add"] = b.swap_add;
                } else {
                    f["mroce.data.atomic.swap"] = b.swap_add;
                    f["mroce.data.atomic.compare"] = b.compare;
                }
            } else if (h.opcode == Opcode::kAtomicResponse &&
                       body(wire::kAtomicResponseBodySize)) {
                f["mroce.data.atomic.original"] = wire::decode_atomic_response(
                    p->payload.first<wire::kAtomicResponseBodySize>());
            }
            return f;
        }
        case wire::PacketType::kAck: {
            auto a = wire::decode_ack(d);
            if (!a) return fail(a.error());
            common_fields(f, a->common);
            f["mroce.path_id"] = a->path_id;
            f["mroce.path_gen"] = a->path_gen;
            f["mroce.ack.flags"] = a->flags;
            f["mroce.ack.flags.probe_reply"] = (a->flags & wire::ack_flag::kProbeReply) != 0;
            f["mroce.ack.flags.followed"] = (a->flags & wire::ack_flag::kFollowed) != 0;
            f["mroce.ack.flags.short"] = (a->flags & wire::ack_flag::kShort) != 0;  // [ACK-21]
            f["mroce.ack.cum_psn"] = a->cum_psn;
            sack_fields(f, *a);
            f["mroce.ack.ecn_ce_count"] = a->ecn_ce_count;
            f["mroce.ack.ts_echo"] = a->ts_echo;
            f["mroce.ack.ack_delay_ns"] = a->ack_delay_ns;
            f["mroce.ack.rate_hint_mbps"] = a->rate_hint_mbps;
            f["mroce.ack.probe_psn"] = a->probe_psn;
            f["mroce.ack.stream_count"] = a->stream_count;
            f["mroce.ack.return_path"] = a->return_path;
            if (a->stream_count > 0) {
                ordered_json ids = ordered_json::array(), seqs = ordered_json::array();
                for (uint16_t i = 0; i < a->stream_count; ++i) {
                    ids.push_back(a->streams[i].stream_id);
                    seqs.push_back(a->streams[i].delivered_seq);
                }
                f["mroce.ack.stream.id"] = ids;
                f["mroce.ack.stream.delivered_seq"] = seqs;
            }
            return f;
        }
        case wire::PacketType::kNack: {
            auto n = wire::decode_nack(d);
            if (!n) return fail(n.error());
            common_fields(f, n->common);
            f["mroce.nack.reason"] = static_cast<uint8_t>(n->reason);
            f["mroce.path_id"] = n->path_id;
            f["mroce.path_gen"] = n->path_gen;
            f["mroce.psn"] = n->path_psn;
            f["mroce.stream_id"] = n->stream_id;
            f["mroce.msg_seq"] = n->msg_seq;
            f["mroce.nack.detail"] = n->detail;
            return f;
        }
        case wire::PacketType::kHello:
        case wire::PacketType::kHelloAck: {
            auto h = wire::decode_hello(d);
            if (!h) return fail(h.error());
            common_fields(f, h->common);
            f["mroce.hello.src_conn_id"] = h->src_conn_id;
            f["mroce.hello.src_token"] = h->src_token;
            f["mroce.hello.isn"] = h->isn;
            f["mroce.hello.msg_isn"] = h->msg_isn;
            f["mroce.hello.endpoint_port"] = h->endpoint_port;
            f["mroce.hello.num_paths"] = h->num_paths;
            f["mroce.hello.max_payload"] = h->max_payload;
            f["mroce.hello.capabilities"] = h->capabilities;
            // [VER-2]: the defined bits by name (the undefined ones are [WIRE-6]'s, unchecked).
            f["mroce.hello.capabilities.integrity"] = (h->capabilities & wire::kCapIntegrity) != 0;
            f["mroce.hello.capabilities.coalesce"] = (h->capabilities & wire::kCapCoalesce) != 0;
            f["mroce.hello.capabilities.short_ack"] = (h->capabilities & wire::kCapShortAck) != 0;
            f["mroce.hello.capabilities.compact_data"] = (h->capabilities & wire::kCapCompactData) != 0;
            // [CC-20] [CONN-31]: byte 2, hello_flags, in both types: the whole byte, as the
            // dissector shows it, and the bits wire/ reads: SENDING (0x01, a HELLO's only) and
            // DROPPED (0x02, both types); the others it ignores.
            const bool is_hello = h->common.type == wire::PacketType::kHello;
            const auto flags = static_cast<uint8_t>(d[wire::kHelloFlagsOffset]);
            f["mroce.hello.flags"] = static_cast<unsigned>(flags);
            if (h->sending != (is_hello && (flags & wire::kHelloFlagSending) != 0) ||
                h->dropped != ((flags & wire::kHelloFlagDropped) != 0))
                return fail(Error::kInvalidArgument);
            f["mroce.hello.flags.dropped"] = h->dropped;
            if (is_hello) {
                f["mroce.hello.cookie"] = hex(std::as_bytes(std::span(h->cookie)));
                f["mroce.hello.flags.sending"] = h->sending;
                f["mroce.hello.seq"] = h->hello_seq;  // [CONN-32]: byte 3, 0 = not numbered
            } else {
                f["mroce.hello.grant_mbps"] = h->grant_mbps;  // [CC-20]
                f["mroce.hello.echo"] = h->hello_echo;  // [CONN-32]: byte 3, 0 = none
            }
            return f;
        }
        case wire::PacketType::kRetry: {
            auto r = wire::decode_retry(d);
            if (!r) return fail(r.error());
            common_fields(f, r->common);
            f["mroce.retry.cookie"] = hex(std::as_bytes(std::span(r->cookie)));
            return f;
        }
        case wire::PacketType::kProbe: {
            auto p = wire::decode_probe(d);
            if (!p) return fail(p.error());
            common_fields(f, p->common);
            f["mroce.path_id"] = p->path_id;
            f["mroce.path_gen"] = p->path_gen;
            f["mroce.probe.next_psn"] = p->next_psn;
            // [PROBE-4]: byte 19, flags: the whole byte as the dissector shows it, and the bit
            // wire/ reads (FAILED); the others it ignores.
            f["mroce.probe.flags"] = static_cast<unsigned>(static_cast<uint8_t>(d[19]));
            f["mroce.probe.flags.failed"] = (p->flags & wire::kProbeFailed) != 0;
            f["mroce.psn_floor"] = p->psn_floor;
            f["mroce.timestamp"] = p->timestamp;
            return f;
        }
        case wire::PacketType::kClose: {
            auto c = wire::decode_close(d);
            if (!c) return fail(c.error());
            common_fields(f, c->common);
            f["mroce.close.reason"] = c->reason;
            return f;
        }
    }
    return fail(Error::kBadType);
}

// Piece: one packet of a datagram as printed (fields, or the error that drops it).
struct Piece {
    ordered_json fields = ordered_json::object();
    const char* error = nullptr;
};

// decode_pair reads a datagram that starts with an ACK whose FOLLOWED flag is set as a
// coalesced pair ([WIRE-10]): a capture does not say whether the connection negotiated
// COALESCE, so the flag decides, as it does for the dissector. It mirrors the receiver
// (core/endpoint.cc): one integrity trailer at the end when the lengths say so, checked
// first; then nothing after the ACK or longer than 72 + 9000 (the largest max_payload; the
// receiver's own bound is not in the capture) is a bad length; then the ACK at its count's
// length (its fixed part, 80 or with SHORT 48 ([ACK-21]), plus 8 per entry); then the
// follower must be a version-2 DATA of the same connection and token (a bad type
// otherwise), and decode (the DATA 72 bytes plus payload, or 64 with COMPACT, [DATA-9]; the
// datagram's bound stays a full DATA's). Two pieces (the ACK, the DATA) when a DATA of the connection
// follows, else one; on an error every piece carries the datagram's one error.
std::vector<Piece> decode_pair(std::span<const std::byte> d) {
    const size_t ack_len = wire::coalesced_ack_size(d);
    size_t body = d.size();
    if (d.size() == ack_len + wire::kIntegritySize ||
        (d.size() >= ack_len + 24 &&
         ack_len + wire::data_header_size(static_cast<uint8_t>(d[ack_len + 17])) +
                 wire::load_be16(d.data() + ack_len + 22) ==
             d.size() - wire::kIntegritySize))
        body = d.size() - wire::kIntegritySize;
    const auto packet = d.first(body);
    const auto rest = body > ack_len ? packet.subspan(ack_len) : std::span<const std::byte>{};
    const bool follower = rest.size() >= wire::kCommonHeaderSize &&
                          static_cast<uint8_t>(rest[0]) == wire::kProtocolVersion &&
                          static_cast<uint8_t>(rest[1]) == static_cast<uint8_t>(wire::PacketType::kData) &&
                          std::equal(rest.begin() + 4, rest.begin() + 16, d.begin() + 4);
    const auto failed = [&](const char* error) {
        return std::vector<Piece>(follower ? 2 : 1, Piece{ordered_json::object(), error});
    };
    std::span<const std::byte> checked;
    if (body < d.size() && !wire::strip_integrity(d, checked)) return failed("bad_integrity");
    if (rest.empty() || body > wire::kDataHeaderSize + wire::kMaxMaxPayload) return failed("bad_length");
    auto ack = wire::decode_ack(packet.first(ack_len));
    if (!ack) return failed(error_name(ack.error()));
    wire::CommonHeader inner;
    if (Error e = wire::parse_common_header(rest, inner); e != Error::kOk) return failed(error_name(e));
    if (!follower) return failed("bad_type");
    const char* e = nullptr;
    Piece a{decode_plain(packet.first(ack_len), &e), nullptr};
    Piece b{decode_plain(rest, &e), nullptr};
    if (e) return failed(e);
    b.fields["mroce.coalesced.offset"] = ack_len;
    if (body < d.size()) b.fields["mroce.integrity"] = wire::load_be32(d.data() + body);
    return {a, b};
}

// Pcap file reading: only what the sources above produce.
constexpr uint32_t kLinkEthernet = 1, kLinkRaw = 101, kLinkSll = 113, kLinkIpv4 = 228,
                   kLinkIpv6 = 229;

struct Reader {
    std::vector<uint8_t> data;
    size_t pos = 0;
    bool swap = false;
    uint32_t u32() {
        if (pos + 4 > data.size()) die("file ends inside a header");
        uint32_t v;
        std::memcpy(&v, data.data() + pos, 4);
        pos += 4;
        return swap ? __builtin_bswap32(v) : v;
    }
};

int run(int argc, char** argv) {
    if (argc < 2) die("usage: pcap_decode FILE.pcap [PORT ...]");
    std::set<uint32_t> ports;
    for (int i = 2; i < argc; ++i) {
        char* end = nullptr;
        const unsigned long port = std::strtoul(argv[i], &end, 10);
        if (*argv[i] == '\0' || *end != '\0' || port > 65535)
            die(std::string("not a UDP port: '") + argv[i] + "'");
        ports.insert(static_cast<uint32_t>(port));
    }
    std::ifstream in(argv[1], std::ios::binary);
    if (!in) die(std::string("cannot open ") + argv[1]);
    Reader r;
    r.data.assign(std::istreambuf_iterator<char>(in), {});
    const uint32_t magic = r.u32();
    if (magic == 0xd4c3b2a1 || magic == 0x4d3cb2a1) r.swap = true;
    else if (magic != 0xa1b2c3d4 && magic != 0xa1b23c4d)
        die(std::string(argv[1]) + " is not a classic pcap file (pcapng? write it with -F pcap)");
    r.u32();  // version
    r.u32();  // thiszone
    r.u32();  // sigfigs
    r.u32();  // snaplen
    const uint32_t link = r.u32();
    if (link != kLinkEthernet && link != kLinkRaw && link != kLinkSll && link != kLinkIpv4 &&
        link != kLinkIpv6)
        die("unsupported link type " + std::to_string(link));

    for (uint64_t frame = 1; r.pos < r.data.size(); ++frame) {
        r.u32();  // seconds
        r.u32();  // fraction
        const uint32_t incl = r.u32();
        r.u32();  // orig_len
        if (r.pos + incl > r.data.size()) die("file ends inside record " + std::to_string(frame));
        const uint8_t* p = r.data.data() + r.pos;
        r.pos += incl;
        size_t off = 0;
        if (link == kLinkEthernet || link == kLinkSll) {
            off = link == kLinkEthernet ? 12 : 14;  // the EtherType / protocol field
            if (incl < off + 2) continue;
            while (be16(p + off) == 0x8100 && incl >= off + 6) off += 4;  // VLAN tags
            const uint32_t ethertype = be16(p + off);
            off += 2;
            if (ethertype != 0x0800 && ethertype != 0x86dd) continue;
        }
        if (incl < off + 1) continue;
        size_t udp = 0;
        const uint8_t ipv = p[off] >> 4;
        if (ipv == 4) {
            const size_t ihl = size_t{p[off] & 15u} * 4;
            if (incl < off + 20 || p[off + 9] != 17) continue;
            if ((be16(p + off + 6) & 0x3fff) != 0) continue;  // a fragment
            udp = off + ihl;
        } else if (ipv == 6) {
            if (incl < off + 40 || p[off + 6] != 17) continue;  // no extension headers
            udp = off + 40;
        } else {
            continue;
        }
        if (incl < udp + 8) continue;
        const uint32_t sport = be16(p + udp), dport = be16(p + udp + 2);
        if (!ports.empty() && !ports.count(sport) && !ports.count(dport)) continue;
        const uint32_t udp_len = be16(p + udp + 4);
        if (udp_len < 8 || udp + udp_len > incl) {
            std::fprintf(stderr, "pcap_decode: frame %llu: datagram cut by the snap length\n",
                         static_cast<unsigned long long>(frame));
            continue;
        }
        const auto datagram = std::as_bytes(std::span(p + udp + 8, udp_len - 8));
        const auto print = [&](const ordered_json& fields, const char* error, size_t segment) {
            ordered_json line;
            line["frame"] = frame;
            line["segment"] = segment;
            line["sport"] = sport;
            line["dport"] = dport;
            line["fields"] = fields;
            line["error"] = error ? ordered_json(error) : ordered_json();
            // [VER-1]: a version-1 HELLO probe or the version-1 refusal of one is expected
            // traffic between version-2 endpoints; the test tells it from breakage.
            line["legacy_v1"] = !datagram.empty() && static_cast<uint8_t>(datagram[0]) == 1;
            std::cout << line.dump() << "\n";
        };
        // An ACK with FOLLOWED that holds at least its fixed part (80, or 48 with SHORT,
        // [ACK-21]) starts a coalesced pair; a shorter one is read alone (truncated), as a
        // receiver reads it (wire::coalesced_ack_size is 0 for it).
        if (datagram.size() >= wire::kCommonHeaderSize && static_cast<uint8_t>(datagram[0]) == wire::kProtocolVersion &&
            static_cast<uint8_t>(datagram[1]) == static_cast<uint8_t>(wire::PacketType::kAck) &&
            wire::coalesced_ack_size(datagram) > 0) {
            const auto pieces = decode_pair(datagram);
            for (size_t i = 0; i < pieces.size(); ++i) print(pieces[i].fields, pieces[i].error, i);
            continue;
        }
        const char* error = nullptr;
        ordered_json fields = decode(datagram, &error);
        if (!error) {
            print(fields, nullptr, 0);
            continue;
        }
        // A UDP GSO/GRO aggregate (several datagrams in one record, as a capture before
        // segmentation or after coalescing holds them) is printed as its datagrams, with
        // segment = 0, 1, ... The split is found by trying every size for the first datagram,
        // not from its header, and holds only if every piece of that size (the last one may
        // be shorter) decodes without error. A first datagram may decode at two sizes (with
        // and without the integrity trailer, [INT-5]), so every size is tried.
        size_t size = 0;
        std::vector<ordered_json> pieces;
        for (size_t s = wire::kCommonHeaderSize; s < datagram.size() && !size; ++s) {
            const char* e = nullptr;
            decode(datagram.first(s), &e);
            if (e) continue;
            size = s;
            for (size_t off = 0; size && off < datagram.size(); off += size) {
                const char* pe = nullptr;
                pieces.push_back(decode(datagram.subspan(off, std::min(size, datagram.size() - off)), &pe));
                if (pe) pieces.clear(), size = 0;
            }
        }
        if (pieces.empty()) {
            print(fields, error, 0);
            continue;
        }
        pieces[0]["mroce.gso.segments"] = pieces.size();
        pieces[0]["mroce.gso.size"] = size;
        for (size_t i = 0; i < pieces.size(); ++i) print(pieces[i], nullptr, i);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {  // allocation or JSON output: one line, not a trace
        die(e.what());
    }
}
