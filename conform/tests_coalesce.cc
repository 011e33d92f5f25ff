// conform/tests_coalesce.cc — coalesced datagrams of capability COALESCE ([WIRE-10]): an
// ACK with FOLLOWED and a DATA of the same connection in one datagram. The suite plays the
// responder of a WRITE the target posted and the requester of a WRITE_IMM at once, so one
// datagram carries the ACK that completes the target's WRITE and the DATA of ours: whether
// each part took effect shows in the target's completions, its memory and its next ACK.
// A pair is applied whole or not at all ([WIRE-8]); without COALESCE negotiated it is an
// ACK of the wrong length ([ACK-1]). What the target coalesces itself the peer splits and
// checks (Peer::decode_coalesced); coalesce.target_pair makes the target send one. The
// short_* tests repeat the pair with a SHORT ACK ([ACK-21]): its length is then 48 + 8n.
#include <chrono>
#include <functional>

#include "conform/checks.h"
#include "conform/fixture.h"
#include "wire/integrity.h"

namespace mroce::conform {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using wire::Opcode;
using wire::PacketType;

constexpr uint64_t kTargetWrite = 100;  // wr_id of the target's first WRITE (then 101, ...)
constexpr uint64_t kReceive = 5;        // wr_id of the receive our WRITE_IMM consumes
constexpr uint32_t kImmediate = 0xc0a1e5ceu;

// Pair: an established connection with a posted receive at the target and the WRITE_IMM
// segment we coalesce with an ACK. Each pair's ACK completes a WRITE the target posted just
// before (target_write): one at a time, acknowledged within milliseconds, so the target's
// loss recovery never has an unanswered WRITE for long (its probes would crowd out the
// answers the test waits for). Our segment leaves room for one stream entry under
// [WIRE-10]'s bound (72 + max_payload) but not for 32.
struct Pair {
    Fixture f;
    Region src, dst;
    wire::DataHeader theirs;  // the DATA of the target's newest WRITE
    uint32_t writes = 0;      // WRITEs the target posted
    Message m;
    Segment seg;

    Pair(Context& ctx, uint32_t capabilities) : f(ctx) {
        f.peer.me().capabilities = capabilities;
        f.establish();
        if ((capabilities & wire::kCapCoalesce) && !(f.peer.remote().capabilities & wire::kCapCoalesce))
            throw Skipped("the target does not announce COALESCE ([VER-2]: optional)");
        if ((capabilities & wire::kCapShortAck) && !(f.peer.remote().capabilities & wire::kCapShortAck))
            throw Skipped("the target does not announce SHORT_ACK ([VER-2]: optional)");
        src = f.reg_mr(4096, {"local_write"});
        f.write_mr(src, 0, pattern(1000, 230));
        dst = f.reg_mr(16384, {"local_write", "remote_write"});
        f.call("post_recv", {{"qp", f.qp}, {"mr", dst.mr}, {"offset", 8192}, {"length", 64},
                             {"wr_id", kReceive}});
        const uint32_t s = f.peer.segment_size();
        m = f.message(Opcode::kWriteImm, pattern(s > 400 ? s - 200 : s / 2, 231));
        m.rkey = dst.rkey;
        m.remote_addr = dst.addr;
        m.immediate = kImmediate;
        seg = f.peer.cut(m)[0];
    }
    uint64_t write_id() const { return kTargetWrite + writes - 1; }
    // answer_probes: the PROBE_REPLY a responder owes each PROBE of the target received
    // so far ([PROBE-2]). Called between cases, when no WRITE of the target is outstanding:
    // a target whose probes go unanswered fails its paths and probes them ever faster.
    void answer_probes() {
        for (const auto& r : f.peer.ready(is_type(PacketType::kProbe), Duration::zero()))
            f.peer.send_ack(f.peer.probe_reply(r.probe));
    }
    // target_write: the target posts a 1000-byte WRITE to us; its DATA is noted.
    void target_write() {
        answer_probes();
        f.call("post_send", {{"qp", f.qp}, {"opcode", "write"}, {"mr", src.mr}, {"offset", 0},
                             {"length", 1000}, {"remote_addr", 0x10000}, {"rkey", 0x77},
                             {"wr_id", kTargetWrite + writes}});
        ++writes;
        auto rx = f.peer.expect(
            [](const Rx& r) { return r.is(PacketType::kData) && !(r.data.flags & wire::data_flag::kRetx); }, 500ms);
        check(rx.has_value(), "the target sent no DATA for its WRITE {} within 500 ms", writes);
        theirs = rx->data;
        f.peer.note_target_data(theirs);
    }
    // ack: acknowledges the target's newest DATA on its path and reports its WRITE delivered.
    wire::AckPacket ack() {
        auto a = f.peer.ack_for_target_path(theirs.path_id);
        a.stream_count = 1;
        a.streams[0] = {f.my_stream, f.peer.remote().msg_isn + writes};
        return a;
    }
    // data: our segment on path 0 with the next PSN, encoded.
    std::vector<std::byte> data(wire::DataHeader* h = nullptr) {
        const wire::DataHeader next = f.peer.next_header(seg);
        if (h) *h = next;
        return Peer::encode_data(next, seg.payload);
    }
    bool memory_untouched() {
        for (auto b : f.read_mr(dst, 0, m.body.size()))
            if (b != std::byte{0}) return false;
        return true;
    }
    bool write_completed(const std::vector<json>& cq) const {
        for (const auto& c : cq)
            if (c.at("wr_id") == write_id() && c.at("status") == "success" && c.at("opcode") == "write")
                return true;
        return false;
    }
    // nothing_applied: after a barrier, neither part of a dropped pair took effect. Then, as
    // control, the pair's ACK sent alone completes the target's WRITE.
    void nothing_applied(const std::string& what, uint32_t psn) {
        const auto reply = f.peer.barrier();
        check(reply.has_value(), "[PROBE-2] {}: no PROBE_REPLY to the PROBE sent after it within 500 ms", what);
        check(!covers(*reply, psn), "[WIRE-10] [WIRE-8] {}: its DATA (PSN {:#x}) was acknowledged", what, psn);
        f.no_nack(what.c_str());
        const auto cq = f.poll(f.qp, 10);
        check(cq.empty(), "[WIRE-10] [WIRE-8] {}: a part of it was applied, completions {}", what,
              json(cq).dump());
        check(memory_untouched(), "[WIRE-10] [WIRE-8] {}: its DATA's bytes reached memory", what);
        f.peer.send_ack(ack());
        const auto done = f.poll(f.qp, 500);
        check(write_completed(done), "control: after {}, its ACK sent alone did not complete the target's "
              "WRITE: {}", what, json(done).dump());
    }
    // both_applied: the ACK completed the target's WRITE, the DATA was written, completed its
    // receive and is acknowledged with its message delivered.
    void both_applied(const std::string& what, uint32_t psn) {
        std::vector<json> cq;
        for (int i = 0; i < 20 && cq.size() < 2; ++i) {
            auto more = f.poll(f.qp, 25);
            cq.insert(cq.end(), more.begin(), more.end());
        }
        bool imm_done = false;
        for (const auto& c : cq)
            imm_done |= c.at("wr_id") == kReceive && c.at("status") == "success" &&
                        c.at("opcode") == "recv_write_imm" && c.value("imm", 0u) == kImmediate &&
                        c.at("byte_len") == m.body.size();
        check(write_completed(cq), "[WIRE-10] {}: its ACK did not complete the target's WRITE: {}", what,
              json(cq).dump());
        check(imm_done, "[WIRE-10] {}: its WRITE_IMM did not complete the posted receive: {}", what,
              json(cq).dump());
        check(f.read_mr(dst, 0, m.body.size()) == m.body, "[WIRE-10] {}: its DATA was not written as sent",
              what);
        const auto a = f.barrier();
        check(covers(a, psn), "[WIRE-10] {}: its DATA (PSN {:#x}) was not acknowledged", what, psn);
        check(f.peer.delivered(f.qp).value_or(m.msg_seq) == m.msg_seq + 1,
              "[ACK-9] {}: the target did not report the WRITE_IMM delivered", what);
    }
};

// pair_applied: one datagram with the ACK that completes the target's WRITE and our
// WRITE_IMM: both parts take effect, each as if it had arrived alone.
void pair_applied(Context& ctx) {
    Pair p(ctx, wire::kCapCoalesce | wire::kCapIntegrity);
    check(p.f.peer.coalesce(), "[VER-2] both announced COALESCE but the peer does not use it");
    p.target_write();
    wire::DataHeader h;
    p.f.peer.send_bytes(Peer::coalesced(p.ack(), p.data(&h)));
    p.both_applied("an ACK+DATA pair", h.path_psn);
}

// broken_pair: pairs that break a rule of [WIRE-10] (or of the ACK or DATA inside) are
// dropped whole, each counted as its failing packet's error; the intact pair sent after
// them is applied whole.
void broken_pair(Context& ctx) {
    Pair p(ctx, wire::kCapCoalesce | wire::kCapIntegrity);
    Fixture& f = p.f;
    using Bytes = std::vector<std::byte>;
    struct Case {
        std::string what;
        const char* counter;
        // make: the datagram from the pair's ACK and DATA; sets *sealed = false when it
        // carries its own trailer (sent as is).
        std::function<Bytes(wire::AckPacket, Bytes, bool*)> make;
    };
    std::vector<Case> cases;
    cases.push_back({"a FOLLOWED ACK whose count (33) is over the cap", "bad_length",
                     [](wire::AckPacket a, Bytes d, bool*) {
                         auto b = Peer::coalesced(a, d);
                         wire::store_be16(b.data() + 76, 33);  // [ACK-5]
                         return b;
                     }});
    cases.push_back({"a FOLLOWED ACK with nothing after it", "bad_length",
                     [](wire::AckPacket a, Bytes, bool*) { return Peer::coalesced(a, {}); }});
    cases.push_back({"a pair whose DATA lacks its last byte", "bad_length", [](wire::AckPacket a, Bytes d, bool*) {
                         d.pop_back();  // [DATA-3]: payload_len no longer matches
                         return Peer::coalesced(a, d);
                     }});
    cases.push_back({"a pair whose DATA is cut inside its header", "truncated",
                     [](wire::AckPacket a, Bytes d, bool*) {
                         d.resize(40);  // [WIRE-7]
                         return Peer::coalesced(a, d);
                     }});
    cases.push_back({"a pair whose DATA names another connection", "bad_type",
                     [](wire::AckPacket a, Bytes d, bool*) {
                         d[7] ^= std::byte{0x01};  // dst_conn_id
                         return Peer::coalesced(a, d);
                     }});
    cases.push_back({"a pair whose DATA carries another token", "bad_type", [](wire::AckPacket a, Bytes d, bool*) {
                         d[15] ^= std::byte{0x01};  // dst_token
                         return Peer::coalesced(a, d);
                     }});
    cases.push_back({"an ACK followed by an ACK", "bad_type",
                     [](wire::AckPacket a, Bytes, bool*) { return Peer::coalesced(a, Peer::ack_bytes(a)); }});
    cases.push_back({"an ACK followed by a PROBE", "bad_type", [&](wire::AckPacket a, Bytes, bool*) {
                         wire::ProbePacket probe;
                         probe.common = a.common;
                         probe.common.type = PacketType::kProbe;
                         probe.path_id = 1;
                         probe.next_psn = f.peer.path(1).next_psn;
                         probe.psn_floor = f.peer.path(1).floor;
                         probe.timestamp = Peer::now_stamp();
                         Bytes b(wire::kProbeSize);
                         (void)wire::encode_probe(probe, b);
                         return Peer::coalesced(a, b);
                     }});
    // 32 stream entries (31 for streams the target does not know, [ACK-9]) make the pair
    // 248 bytes longer than the intact one: past 72 + max_payload of the target.
    const size_t long_pair = wire::kAckFixedSize + 32 * wire::kAckStreamEntrySize + wire::kDataHeaderSize +
                             p.seg.payload.size();
    if (long_pair > wire::kDataHeaderSize + f.peer.remote().max_payload)
        cases.push_back({"a pair longer than 72 + max_payload", "bad_length", [&](wire::AckPacket a, Bytes d, bool*) {
                             a.stream_count = 32;
                             for (uint16_t i = 1; i < 32; ++i) a.streams[i] = {f.my_stream ^ (0x5a0000u + i), 1};
                             return Peer::coalesced(a, d);
                         }});
    if (f.peer.integrity())
        cases.push_back({"a pair with a bad integrity trailer", "bad_integrity",
                         [](wire::AckPacket a, Bytes d, bool* sealed) {
                             auto b = Peer::coalesced(a, d);
                             const size_t len = b.size();
                             b.resize(len + wire::kIntegritySize);
                             wire::append_integrity(b, len);  // [INT-2]: one trailer over both
                             b[20] ^= std::byte{0x10};         // then a bit of the ACK's cum_psn flips
                             *sealed = false;
                             return b;
                         }});

    for (const auto& c : cases) {
        p.target_write();
        wire::DataHeader h;
        bool sealed = true;
        const auto bytes = c.make(p.ack(), p.data(&h), &sealed);
        const auto before = f.endpoint_counter(c.counter);
        sealed ? f.peer.send_bytes(bytes) : f.peer.send_unsealed(bytes);
        p.nothing_applied(c.what, h.path_psn);
        if (before) {
            const auto after = f.endpoint_counter(c.counter);
            check(after && *after == *before + 1, "[WIRE-10] [WIRE-9] [ERR-7] {}: {} went {} -> {}",
                  c.what, c.counter, *before, after.value_or(0));
        }
    }
    // Control: the intact pair.
    p.target_write();
    wire::DataHeader h;
    f.peer.send_bytes(Peer::coalesced(p.ack(), p.data(&h)));
    p.both_applied("the intact pair after the broken ones", h.path_psn);
}

// not_negotiated: we do not announce COALESCE, so an ACK with FOLLOWED and a DATA in one
// datagram is an ACK of the wrong length ([ACK-1]): dropped whole. The same ACK and DATA
// sent alone take effect.
void not_negotiated(Context& ctx) {
    Pair p(ctx, wire::kCapIntegrity);
    Fixture& f = p.f;
    check(!f.peer.coalesce(), "the peer uses COALESCE it did not announce");
    p.target_write();
    const auto before = f.endpoint_counter("bad_length");
    wire::DataHeader h;
    f.peer.send_bytes(Peer::coalesced(p.ack(), p.data(&h)));
    const auto reply = f.peer.barrier();
    check(reply.has_value(), "[PROBE-2] no PROBE_REPLY to the PROBE sent after the pair within 500 ms");
    check(!covers(*reply, h.path_psn), "[ACK-1] [WIRE-10] the DATA of a pair without COALESCE was acknowledged");
    const auto cq = f.poll(f.qp, 10);
    check(cq.empty(), "[ACK-1] [WIRE-10] a part of a pair without COALESCE was applied: {}", json(cq).dump());
    check(p.memory_untouched(), "[ACK-1] [WIRE-10] the DATA of a pair without COALESCE reached memory");
    if (before) {
        const auto after = f.endpoint_counter("bad_length");
        check(after && *after == *before + 1, "[ACK-1] [WIRE-10] bad_length went {} -> {}", *before,
              after.value_or(0));
    }
    // Control: the ACK (FOLLOWED set: it means nothing here, [WIRE-6]) and the DATA apart.
    auto a = p.ack();
    a.flags |= wire::ack_flag::kFollowed;
    f.peer.send_ack(a);
    f.peer.send_bytes(p.data(&h));
    p.both_applied("the same ACK and DATA sent apart", h.path_psn);
}

// short_pair_applied: both announce COALESCE and SHORT_ACK; the pair's ACK is SHORT
// (FOLLOWED | SHORT, 48 + 8 bytes, [ACK-21]): the receiver finds the DATA where the SHORT
// ACK's count ends, and applies both.
void short_pair_applied(Context& ctx) {
    Pair p(ctx, wire::kCapCoalesce | wire::kCapShortAck | wire::kCapIntegrity);
    check(p.f.peer.coalesce() && p.f.peer.short_ack(), "[VER-2] both announced COALESCE and SHORT_ACK but the "
          "peer does not use them");
    p.target_write();
    auto a = p.ack();
    check(wire::sack_empty(a.sack), "setup: the pair's ACK has SACK bits");
    a.flags |= wire::ack_flag::kShort;
    wire::DataHeader h;
    const auto bytes = Peer::coalesced(a, p.data(&h));
    check(wire::coalesced_ack_size(bytes, true) == wire::kAckShortFixedSize + wire::kAckStreamEntrySize,
          "setup: the pair's SHORT ACK is not 56 bytes");
    p.f.peer.send_bytes(bytes);
    p.both_applied("a SHORT ACK + DATA pair", h.path_psn);
}

// short_pair_not_negotiated: COALESCE but not SHORT_ACK. A SHORT+FOLLOWED ACK is then
// read at its full length ([ACK-21]): its count, at byte 76, lies inside the DATA, and what
// it points at is no DATA of the connection, so the pair is dropped whole ([WIRE-10],
// [WIRE-8]); the ACK sent alone in the full form completes the WRITE (the control).
void short_pair_not_negotiated(Context& ctx) {
    Pair p(ctx, wire::kCapCoalesce | wire::kCapIntegrity);
    check(p.f.peer.coalesce() && !p.f.peer.short_ack(), "the peer's COALESCE / SHORT_ACK state is wrong");
    p.target_write();
    auto a = p.ack();
    a.flags |= wire::ack_flag::kShort;
    wire::DataHeader h;
    p.f.peer.send_bytes(Peer::coalesced(a, p.data(&h)));
    p.nothing_applied("a SHORT ACK + DATA pair without SHORT_ACK", h.path_psn);
}

// target_pair: a READ request without ACK_NOW leaves the target an ACK to delay
// ([ACK-11]) when its READ response, a DATA, is ready: a target that coalesces
// ([ACK-12] with `ack_with_reverse_data`) sends the two in one datagram, which the peer
// splits and checks against [WIRE-10] (a breach fails the test). A target that sends them
// apart is conformant too: the test then skips.
void target_pair_with(Context& ctx, uint32_t capabilities) {
    Fixture f(ctx);
    f.peer.me().capabilities = capabilities;
    f.establish();
    if (!(f.peer.remote().capabilities & wire::kCapCoalesce))
        throw Skipped("the target does not announce COALESCE ([VER-2]: optional)");
    if ((capabilities & wire::kCapShortAck) && !(f.peer.remote().capabilities & wire::kCapShortAck))
        throw Skipped("the target does not announce SHORT_ACK ([VER-2]: optional)");
    const Region region = f.reg_mr(4096, {"local_write", "remote_read"});
    const auto content = pattern(300, 232);
    f.write_mr(region, 0, content);
    const uint64_t seen = f.peer.coalesced_seen();
    Message m = f.read_request(region, 300);
    Segment s = f.peer.cut(m)[0];
    s.hdr.flags = wire::data_flag::kLast;  // no ACK_NOW: the target may delay its ACK
    const Sent sent = f.peer.send_segment(s);
    auto response = f.peer.expect(is_type(PacketType::kData), 500ms);
    check(response.has_value(), "[PLACE-15] no READ response");
    check(response->data.opcode == Opcode::kReadResponse && response->payload == content,
          "[PLACE-15] the READ response does not carry the region's bytes");
    if (!response->coalesced) {
        const auto a = f.barrier();
        check(covers(a, sent.psn), "[ACK-11] the READ request was never acknowledged");
        throw Skipped("the target sent its READ response and its ACK apart (COALESCE is used only "
                      "where the sender chooses, [ACK-12])");
    }
    check(f.peer.coalesced_seen() == seen + 1, "the peer counted {} coalesced datagrams",
          f.peer.coalesced_seen() - seen);
    auto ack = f.peer.expect([](const Rx& r) { return r.is(PacketType::kAck) && r.coalesced; }, 0ms);
    check(ack.has_value(), "the coalesced DATA came without its ACK");
    check(covers(ack->ack, sent.psn), "[WIRE-10] [ACK-12] the ACK coalesced with the READ response "
          "does not acknowledge the READ request (PSN {:#x})", sent.psn);
    check(ack->ack.flags & wire::ack_flag::kFollowed, "[ACK-8] a coalesced ACK without FOLLOWED");
    if (capabilities & wire::kCapShortAck) {
        // [ACK-21]: the READ request arrived alone and in order, so the bitmap is empty.
        check(sack_count(ack->ack) == 0, "[ACK-2] the coalesced ACK has SACK bits after a loss-free request");
        if (!(ack->ack.flags & wire::ack_flag::kShort))
            throw Skipped("[ACK-21] SHOULD: the coalesced ACK, its bitmap empty, was sent in the full form "
                          "(the pair passed every check)");
    }
}

void target_pair(Context& ctx) { target_pair_with(ctx, wire::kCapCoalesce | wire::kCapIntegrity); }

// short_target_pair: target_pair with SHORT_ACK negotiated too: the coalesced ACK is SHORT
// (its length is 48 + 8n, [WIRE-10], [ACK-21]) and the peer finds the DATA after it.
void short_target_pair(Context& ctx) {
    target_pair_with(ctx, wire::kCapCoalesce | wire::kCapShortAck | wire::kCapIntegrity);
}

}  // namespace

void add_coalesce_tests(std::vector<TestCase>& out) {
    out.push_back({"coalesce.pair_applied", "[WIRE-10] [VER-2] [ACK-8] [INT-2]",
                   "an ACK+DATA datagram of a connection with COALESCE: the ACK completes the "
                   "target's WRITE and the DATA is written, completed and acknowledged",
                   pair_applied});
    out.push_back({"coalesce.broken_pair", "[WIRE-10] [WIRE-8] [WIRE-9] [ACK-5] [DATA-3] [INT-3] [ERR-7]",
                   "a pair with a bad count, nothing after the ACK, a cut or foreign DATA, a "
                   "follower that is not DATA, too long, or a bad trailer changes nothing; the "
                   "intact pair then takes effect",
                   broken_pair});
    out.push_back({"coalesce.not_negotiated", "[WIRE-10] [ACK-1] [WIRE-6]",
                   "without COALESCE an ACK+DATA datagram is an ACK of the wrong length, "
                   "dropped; the two sent apart take effect",
                   not_negotiated});
    out.push_back({"coalesce.target_pair", "[WIRE-10] [ACK-12] [ACK-8]",
                   "a READ response the target coalesces with its ACK of the request passes "
                   "every check of [WIRE-10] (skipped if it sends them apart)",
                   target_pair});
    out.push_back({"coalesce.short_pair_applied", "[WIRE-10] [ACK-21] [ACK-8]",
                   "with COALESCE and SHORT_ACK a SHORT ACK + DATA datagram (the DATA after 48 + 8n bytes) "
                   "is applied whole",
                   short_pair_applied});
    out.push_back({"coalesce.short_pair_not_negotiated", "[WIRE-10] [ACK-21] [WIRE-8]",
                   "with COALESCE but not SHORT_ACK a SHORT ACK + DATA datagram is read at full length and "
                   "dropped whole; the ACK alone takes effect",
                   short_pair_not_negotiated});
    out.push_back({"coalesce.short_target_pair", "[WIRE-10] [ACK-21] [ACK-12]",
                   "target_pair with SHORT_ACK too: the coalesced ACK passes the checks and is SHORT "
                   "(skipped if sent apart, or in the full form: SHOULD)",
                   short_target_pair});
}

}  // namespace mroce::conform
