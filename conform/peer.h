// conform/peer.h — the scripted peer: the suite's own minimal protocol state on one UDP
// socket, built on the codec (wire/) and nothing of the engine (core/). It sends exactly
// the packets a test asks for, including wrong ones, and decodes and checks every datagram
// the target sends back.
//
// State kept: our identity (connection id, token, ISNs), the target's (learnt from its
// HELLO / HELLO_ACK), per path of ours the generation and next PSN, and per path of the
// target what we received (to acknowledge its DATA when a test wants to).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "conform/udp_socket.h"
#include "util/address.h"
#include "util/time.h"
#include "wire/ack.h"
#include "wire/control.h"
#include "wire/data.h"
#include "wire/header.h"

namespace mroce::conform {

// Identity: what a HELLO / HELLO_ACK announces.
struct Identity {
    uint32_t conn_id = 0;
    uint64_t token = 0;
    uint32_t isn = 0;
    uint32_t msg_isn = 0;
    uint16_t endpoint_port = 0;
    uint16_t num_paths = 4;
    uint32_t max_payload = wire::kDefaultMaxPayload;
    uint32_t capabilities = 0;  // [VER-2]: announced in our HELLOs; the target's as received
    bool known = false;  // for the target's: a HELLO or HELLO_ACK was accepted
};

// Rx: one datagram from the target, decoded by its type (only that member is meaningful).
struct Rx {
    Datagram raw;
    bool decoded = false;  // false: it broke the wire format (a violation was recorded)
    wire::PacketType type = wire::PacketType::kData;
    wire::DataHeader data;
    std::vector<std::byte> payload;
    size_t data_header = 0;  // the DATA's header as read: 72, or 64 COMPACT ([DATA-9])
    wire::AckPacket ack;
    size_t ack_size = 0;   // the ACK's own bytes (no trailer, no coalesced DATA)
    wire::NackPacket nack;
    wire::HelloPacket hello;
    wire::ProbePacket probe;
    wire::ClosePacket close;
    wire::RetryPacket retry;
    // coalesced: this ACK, or this DATA, shared its datagram with the other ([WIRE-10]).
    // The ACK's raw holds the whole datagram, the DATA's its own bytes (no trailer).
    bool coalesced = false;

    bool is(wire::PacketType t) const { return decoded && type == t; }
};
using RxFilter = std::function<bool(const Rx&)>;

// Segment: one DATA before the path fields (path, generation, PSN, floor, timestamp) are
// filled in by Peer::send_segment.
struct Segment {
    wire::DataHeader hdr;
    std::vector<std::byte> payload;
};

// Message: what a requester posts, as the wire carries it.
struct Message {
    wire::Opcode opcode = wire::Opcode::kWrite;
    uint32_t stream_id = 0;  // the target's stream (queue pair number)
    uint32_t msg_seq = 0;
    uint32_t recv_seq = 0;
    uint32_t rkey = 0;
    uint64_t remote_addr = 0;
    uint32_t immediate = 0;
    std::vector<std::byte> body;
};

// Sent: where send_segment put a DATA.
struct Sent {
    uint16_t path = 0;
    uint8_t gen = 0;
    uint32_t psn = 0;
    uint32_t timestamp = 0;
};

class Peer {
public:
    Peer(UdpSocket socket, Address target, Identity me);

    const Address& local() const { return socket_.local(); }
    const Address& target() const { return target_; }
    Identity& me() { return me_; }
    const Identity& remote() const { return remote_; }
    // forget_remote: after the target restarted or closed, learn it anew from its HELLO(_ACK).
    void forget_remote() { remote_ = Identity{}; }
    // adopt_identity: our "restart" ([CONN-14]); the old ids stay acceptable as
    // destinations of the target's late packets.
    void adopt_identity(const Identity& next);
    // also_mine: a connection id and token a test puts in a HELLO by hand without adopting
    // them; the target's answers addressed to them are not violations.
    void also_mine(uint32_t conn_id, uint64_t token) { my_ids_.emplace_back(conn_id, token); }

    // Raw I/O. send_bytes goes to the target's endpoint port from our socket; on a
    // connection that negotiated INTEGRITY it appends the trailer ([INT-2]) to the packet
    // types that carry one. send_unsealed sends the bytes exactly as given.
    void send_bytes(std::span<const std::byte> bytes, uint8_t ecn = kEct0);
    void send_unsealed(std::span<const std::byte> bytes, uint8_t ecn = kEct0);
    // integrity: both our HELLOs and the target's announced INTEGRITY ([INT-1]).
    bool integrity() const {
        return remote_.known && (me_.capabilities & remote_.capabilities & wire::kCapIntegrity);
    }
    // coalesce: both our HELLOs and the target's announced COALESCE ([WIRE-10], [VER-2]).
    bool coalesce() const {
        return remote_.known && (me_.capabilities & remote_.capabilities & wire::kCapCoalesce);
    }
    // short_ack: both our HELLOs and the target's announced SHORT_ACK ([ACK-21], [VER-2]).
    // Then the target's ACKs are read in either form, and send_ack sends ours SHORT when
    // their bitmap is empty; otherwise the SHORT bit is undefined ([WIRE-6]): an ACK of the
    // target that sets it is a violation, and its ACKs are read at their full length.
    bool short_ack() const {
        return remote_.known && (me_.capabilities & remote_.capabilities & wire::kCapShortAck);
    }
    // compact_data: both our HELLOs and the target's announced COMPACT_DATA ([DATA-9],
    // [VER-2]). Then the target's DATA is read in either form (COMPACT on an opcode that
    // consumes a receive is a violation), and next_header / send_segment send ours COMPACT
    // where the opcode consumes no receive; otherwise the COMPACT bit is undefined
    // ([WIRE-6]): a DATA of the target that sets it is a violation, and its DATA is read
    // with the full 72-byte header.
    bool compact_data() const {
        return remote_.known && (me_.capabilities & remote_.capabilities & wire::kCapCompactData);
    }
    // compact_data_sent, full_data_sent: the DATA send_segment sent in either form.
    uint64_t compact_data_sent() const { return compact_data_sent_; }
    uint64_t full_data_sent() const { return full_data_sent_; }
    // short_acks_sent, full_acks_sent: the ACKs send_ack sent in either form.
    uint64_t short_acks_sent() const { return short_acks_sent_; }
    uint64_t full_acks_sent() const { return full_acks_sent_; }
    // coalesced_seen: coalesced datagrams of the target that passed every check of [WIRE-10].
    uint64_t coalesced_seen() const { return coalesced_seen_; }
    // trailers_checked: target packets whose integrity trailer was verified (a bad or
    // missing one is a violation, [INT-2]).
    uint64_t trailers_checked() const { return trailers_checked_; }
    void send_bytes_from(const UdpSocket& socket, std::span<const std::byte> bytes,
                         uint8_t ecn = kEct0);

    // Handshake.
    wire::HelloPacket hello_packet(wire::PacketType type) const;
    void send_hello(const wire::HelloPacket& h);
    // handshake sends HELLO (up to 3 times) until a HELLO_ACK answers it; records the
    // target. Returns false with *why on failure.
    bool handshake(std::string* why);
    // answer_hello records the target's HELLO and sends our HELLO_ACK to it.
    void answer_hello(const wire::HelloPacket& theirs);
    // learn_remote records the target's HELLO or HELLO_ACK and sends nothing: for a test
    // that plays a peer whose answer was lost on the way.
    void learn_remote(const wire::HelloPacket& theirs);

    // DATA.
    uint32_t segment_size() const;  // [DATA-4]: min of the two max_payload
    std::vector<Segment> cut(const Message& m) const;
    // send_segment fills the common header and the path fields (next PSN of `path`, floor
    // = the path's floor, our clock) and sends. `flags` are or-ed in (RETX, ACK_NOW; a
    // COMPACT or-ed in, or already in s.hdr.flags, is sent anywhere, a wrong one included).
    Sent send_segment(const Segment& s, uint16_t path = 0, uint8_t ecn = kEct0,
                      uint8_t flags = 0);
    // next_header: the header send_segment would send (it takes the path's next PSN), for a
    // test that breaks a field before sending the bytes itself. Where COMPACT_DATA was
    // negotiated it has COMPACT for an opcode that consumes no receive ([DATA-9]).
    wire::DataHeader next_header(const Segment& s, uint16_t path = 0, uint8_t flags = 0);
    // encode_data: a DATA datagram with every field as given (wrong ones included), in the
    // form its flags say: a 64-byte header with COMPACT ([DATA-9]), else 72.
    static std::vector<std::byte> encode_data(const wire::DataHeader& h,
                                              std::span<const std::byte> payload);
    // send_probe: a PROBE of `path` with next_psn = the path's next PSN. Returns its timestamp.
    uint32_t send_probe(uint16_t path, std::optional<uint32_t> floor = std::nullopt);
    // barrier: a PROBE on `path` and its first PROBE_REPLY (its twin, [PROBE-2], is
    // discarded). The target handles datagrams in order, so the reply shows its state after
    // every packet sent before. nullopt if no reply within the timeout.
    std::optional<wire::AckPacket> barrier(uint16_t path = 0);

    struct PathTx {
        uint8_t gen = 0;
        uint32_t next_psn = 0;
        uint32_t floor = 0;
    };
    PathTx& path(uint16_t p);
    // new_generation: the path moves to its next generation, PSNs from isn again.
    void new_generation(uint16_t p);

    // Receiving. expect returns (and removes) the first datagram matching `filter`, from
    // what arrived before or within `timeout`. collect returns every match within `window`.
    std::optional<Rx> expect(const RxFilter& filter, Duration timeout);
    std::vector<Rx> collect(const RxFilter& filter, Duration window);
    // ready: waits up to `wait` for a first datagram, then takes every datagram already
    // queued without waiting, and returns (and removes) the matches — a receive batch.
    std::vector<Rx> ready(const RxFilter& filter, Duration wait);
    // discard drops everything received so far and anything arriving within `quiet`.
    void discard(Duration quiet);
    const std::vector<std::string>& violations() const { return violations_; }
    // delivered: the newest delivered_seq any ACK from the target reported for its stream
    // `stream` ([ACK-9]), and how many stream entries for it arrived; ACKs consumed by
    // expect/barrier count too.
    std::optional<uint32_t> delivered(uint32_t stream) const;
    uint64_t entries_seen(uint32_t stream) const;

    // Acknowledging the target's DATA (when the suite is the responder).
    void note_target_data(const wire::DataHeader& h);
    // probe_reply: the ACK answering a PROBE of the target ([PROBE-2], [ACK-19]): a newer
    // generation resets the path's receive state ([PATH-7]), the PROBE's floor is applied
    // ([PATH-6]), and the reply carries PROBE_REPLY, probe_psn and ts_echo.
    wire::AckPacket probe_reply(const wire::ProbePacket& probe);
    wire::AckPacket ack_for_target_path(uint16_t path) const;
    // send_ack encodes and sends the ACK; on a connection that negotiated SHORT_ACK one with
    // an empty bitmap goes in the SHORT form ([ACK-21]). A test that sets SHORT itself gets
    // it anywhere (a wrong one included); ack_bytes gives exactly the form asked for.
    void send_ack(wire::AckPacket ack);
    // ack_bytes: the ACK as encoded (type set), without a trailer, in the form its flags say.
    static std::vector<std::byte> ack_bytes(wire::AckPacket ack);
    // coalesced: an ACK with FOLLOWED (set here) immediately followed by `follower` in one
    // datagram ([WIRE-10]), without a trailer: send_bytes adds the one trailer at its end.
    static std::vector<std::byte> coalesced(wire::AckPacket ack, std::span<const std::byte> follower);

    // now_stamp: our clock's low 32 bits of nanoseconds (the DATA/PROBE timestamp).
    static uint32_t now_stamp();

private:
    bool receive_one(Duration timeout);
    Rx decode(Datagram d);
    // decode_coalesced: the ACK with FOLLOWED of a coalesced datagram into rx, its DATA into
    // follower_, every rule of [WIRE-10] checked. False (a violation recorded) if one fails.
    bool decode_coalesced(Rx& rx, std::span<const std::byte> packet, size_t ack_len);
    // decode_target_ack: an ACK of the target as this connection reads it ([ACK-21]: SHORT
    // only where negotiated, else the ACK at its full length).
    Result<wire::AckPacket> decode_target_ack(std::span<const std::byte> packet) const;
    // decode_target_data: a DATA of the target as this connection reads it ([DATA-9]:
    // COMPACT only where negotiated, else the bit cleared and the header read at 72 bytes).
    Result<wire::DataPacket> decode_target_data(std::span<const std::byte> packet) const;
    // check_compact_bit: a violation for a COMPACT bit the target may not set ([DATA-9]:
    // not negotiated, or an opcode that consumes a receive).
    void check_compact_bit(std::span<const std::byte> packet);
    void check_target_packet(const Rx& rx);
    void violation(std::string what);
    wire::CommonHeader to_target() const;

    UdpSocket socket_;
    Address target_;
    Identity me_;
    Identity remote_;
    std::vector<std::pair<uint32_t, uint64_t>> my_ids_;  // every identity we announced
    std::map<uint16_t, PathTx> paths_;
    struct PathRx {
        uint8_t gen = 0;
        uint32_t cum = 0;
        std::set<uint32_t> above;  // received PSNs above cum (as distances from cum)
        uint32_t ts = 0;           // timestamp of the latest DATA noted, for ts_echo
        std::chrono::steady_clock::time_point arrived{};
    };
    std::map<uint16_t, PathRx> target_paths_;
    std::map<uint32_t, uint32_t> delivered_;
    std::map<uint32_t, uint64_t> entries_seen_;
    std::deque<Rx> inbox_;
    std::vector<std::string> violations_;
    uint64_t trailers_checked_ = 0;
    uint64_t coalesced_seen_ = 0;
    uint64_t short_acks_sent_ = 0;
    uint64_t compact_data_sent_ = 0;
    uint64_t full_data_sent_ = 0;
    uint64_t full_acks_sent_ = 0;
    std::optional<Rx> follower_;  // the DATA of the coalesced datagram decode just read
};

// bytes_of: a deterministic pattern for a message body: byte i = f(seed, i), so a byte at
// the wrong offset is caught.
std::vector<std::byte> pattern(size_t length, uint32_t seed);
// u64_bytes: v as 8 bytes, least significant first (the suite's values are byte-palindromic
// where the target's byte order would matter, [PLACE-17]).
std::vector<std::byte> u64_bytes(uint64_t v);
std::string hex(std::span<const std::byte> bytes);

}  // namespace mroce::conform
