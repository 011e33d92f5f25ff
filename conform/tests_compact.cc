// conform/tests_compact.cc — the COMPACT DATA form of capability COMPACT_DATA ([DATA-9]): a
// DATA whose opcode consumes no receive (WRITE, READ_REQUEST, READ_RESPONSE, the atomics)
// leaves out recv_seq and immediate (flag COMPACT, a 64-byte header). Judged as
// tests_short_ack.cc judges SHORT_ACK: the peer announces the bit or not
// (Peer::compact_data), reads the target's DATA as the negotiated state says (COMPACT where
// it was not negotiated, or on an opcode that consumes a receive, is a violation) and sends
// its own DATA COMPACT where it may.
//
//   - announced: the target's HELLO_ACK announces COMPACT_DATA (optional: SKIP if not;
//     `mroce conform-agent --compact-data` turns it on);
//   - target_write: negotiated, the target's WRITE segments are COMPACT (SHOULD: SKIP if not),
//     64-byte headers whose fields and bytes are right;
//   - target_answers: negotiated, our COMPACT READ_REQUEST and FETCH_ADD are executed, and
//     their answers are COMPACT (SHOULD) with the right bytes;
//   - receive_ops_full: negotiated, the target's SEND, SEND_IMM and WRITE_IMM are never
//     COMPACT (MUST NOT), 72-byte headers with their immediates;
//   - placed: negotiated, our WRITE with COMPACT segments (mixed with one full one) is placed;
//   - receive_op_dropped: negotiated, a SEND or WRITE_IMM with COMPACT (64 or 72 bytes) is
//     dropped as a bad length; the same SEND in full completes the receive (the control);
//   - not_negotiated_full: without our bit, the target's WRITE and SEND are 72-byte headers
//     without COMPACT (MUST NOT);
//   - not_negotiated_dropped: without our bit, a COMPACT WRITE is read at 72 bytes, a bad
//     length, and not placed; the full form with the undefined bit set is (the control).
#include <chrono>
#include <map>
#include <set>

#include "conform/checks.h"
#include "conform/fixture.h"

namespace mroce::conform {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using wire::Opcode;
using wire::PacketType;
namespace data_flag = wire::data_flag;

constexpr uint64_t kRemoteAddr = 0x7f0000030000ULL;  // "our" memory: the suite keeps none
constexpr uint32_t kRkey = 0x5252;

// kOthers: the capabilities we announce where we do not announce COMPACT_DATA, so the tests
// also show that they neither imply it nor change its meaning.
constexpr uint32_t kOthers = wire::kCapIntegrity | wire::kCapCoalesce | wire::kCapShortAck;

constexpr uint64_t kOld = 0x3333333333333333ULL;  // byte-palindromic: any byte order
constexpr uint64_t kAddend = 0x0101010101010101ULL;

bool compact(const wire::DataHeader& h) { return h.flags & data_flag::kCompact; }
bool raw_compact(const Rx& r) {
    return r.raw.bytes.size() > 17 && (static_cast<uint8_t>(r.raw.bytes[17]) & data_flag::kCompact);
}

const char* name_of(Opcode op) {
    switch (op) {
        case Opcode::kSend: return "SEND";
        case Opcode::kSendImm: return "SEND_IMM";
        case Opcode::kWrite: return "WRITE";
        case Opcode::kWriteImm: return "WRITE_IMM";
        case Opcode::kReadRequest: return "READ_REQUEST";
        case Opcode::kReadResponse: return "READ_RESPONSE";
        case Opcode::kAtomicFetchAdd: return "FETCH_ADD";
        case Opcode::kAtomicCompareSwap: return "COMPARE_SWAP";
        case Opcode::kAtomicResponse: return "ATOMIC_RESPONSE";
    }
    return "?";
}

// Set-up: a fresh target, our HELLO with `capabilities`, a queue pair.
struct Setup {
    Fixture f;
    Setup(Context& ctx, uint32_t capabilities) : f(ctx) {
        f.peer.me().capabilities = capabilities;
        f.establish();
        if (capabilities & wire::kCapCompactData) {
            if (!(f.peer.remote().capabilities & wire::kCapCompactData))
                throw Skipped("the target does not announce COMPACT_DATA ([VER-2], [DATA-9]: optional; "
                              "`mroce conform-agent --compact-data` announces it)");
            check(f.peer.compact_data(), "[VER-2] both announced COMPACT_DATA but the peer does not use it");
        } else {
            check(!f.peer.compact_data(), "the peer uses COMPACT_DATA it did not announce");
        }
    }
    // post: a work request of the target to us ("write", "send", ...), from `src`.
    void post(const char* opcode, const Region& src, size_t length, uint64_t wr_id, uint32_t imm = 0) {
        json args{{"qp", f.qp}, {"opcode", opcode}, {"mr", src.mr}, {"offset", 0}, {"length", length},
                  {"wr_id", wr_id}};
        if (std::string_view(opcode).starts_with("write")) {
            args["remote_addr"] = kRemoteAddr;
            args["rkey"] = kRkey;
        }
        if (imm) args["imm"] = imm;
        f.call("post_send", args);
    }
};

// Whole: one message of the target, its segments and bytes.
struct Whole {
    std::vector<Rx> segments;
    std::vector<std::byte> body;
    std::set<uint32_t> offsets;
    uint64_t have = 0;
    bool done() const { return !segments.empty() && have == segments.front().data.msg_len; }
};

// receive_messages: every DATA of the target until `count` messages are whole (by opcode
// and msg_seq), each segment acknowledged at once on its path, PROBEs answered; at most
// 500 ms between two DATA. `paths` gets the paths the DATA came on.
std::map<std::pair<Opcode, uint32_t>, Whole> receive_messages(Fixture& f, size_t count, std::set<uint16_t>& paths) {
    std::map<std::pair<Opcode, uint32_t>, Whole> out;
    auto whole = [&] {
        size_t n = 0;
        for (const auto& [k, w] : out) n += w.done();
        return n;
    };
    while (whole() < count) {
        auto rx = f.peer.expect([](const Rx& r) { return r.is(PacketType::kData) || r.is(PacketType::kProbe); },
                                500ms);
        check(rx.has_value(), "[DATA-9] only {} of the target's {} messages were whole within 500 ms of its last DATA",
              whole(), count);
        if (rx->is(PacketType::kProbe)) {
            f.peer.send_ack(f.peer.probe_reply(rx->probe));
            continue;
        }
        const auto& h = rx->data;
        f.peer.note_target_data(h);
        f.peer.send_ack(f.peer.ack_for_target_path(h.path_id));
        paths.insert(h.path_id);
        Whole& w = out[{h.opcode, h.msg_seq}];
        if (!w.offsets.insert(h.offset).second) continue;  // a retransmission
        if (w.body.size() < h.msg_len) w.body.resize(h.msg_len);
        std::copy(rx->payload.begin(), rx->payload.end(), w.body.begin() + h.offset);
        w.have += rx->payload.size();
        w.segments.push_back(std::move(*rx));
    }
    return out;
}

// check_compact_segment: a DATA of the target as [DATA-9] shapes it: with COMPACT a 64-byte
// header, recv_seq and immediate read as 0; without, 72. Returns whether it was COMPACT.
bool check_compact_segment(const Rx& r) {
    const auto& h = r.data;
    check(wire::may_be_compact(h.opcode), "setup: {} judged as an opcode that may be COMPACT", name_of(h.opcode));
    check(h.recv_seq == 0 && h.immediate == 0, "[DATA-5] [DATA-9] a {} at offset {} with recv_seq {:#x} immediate {:#x}",
          name_of(h.opcode), h.offset, h.recv_seq, h.immediate);
    const size_t want = compact(h) ? wire::kDataCompactHeaderSize : wire::kDataHeaderSize;
    check(r.data_header == want, "[DATA-9] [DATA-3] a {} with flags {:#x} has a {}-byte header ({} expected)",
          name_of(h.opcode), h.flags, r.data_header, want);
    return compact(h);
}

// announced: we announce COMPACT_DATA; the target's HELLO_ACK announces it too (a MAY:
// SKIP if not). Then the connection uses it: the peer's first WRITE goes COMPACT and is
// placed (the rest of the group judges the details).
void announced(Context& ctx) {
    Setup s(ctx, wire::kCapCompactData | wire::kCapShortAck);
    check((s.f.peer.remote().capabilities & ~wire::kCapDefined) == 0, "[VER-2] undefined capability bits {:#x}",
          s.f.peer.remote().capabilities);
    const Region r = s.f.reg_mr(4096, {"local_write", "remote_write"});
    Message m = s.f.message(Opcode::kWrite, pattern(1000, 700));
    m.rkey = r.rkey;
    m.remote_addr = r.addr;
    const uint64_t before = s.f.peer.compact_data_sent();
    s.f.send_message(m);
    check(s.f.peer.compact_data_sent() == before + 1, "setup: the peer's WRITE was not COMPACT");
    (void)s.f.barrier();
    s.f.no_nack("after a COMPACT WRITE");
    check(s.f.read_mr(r, 0, 1000) == m.body, "[DATA-9] a target that announces COMPACT_DATA did not place a "
          "COMPACT WRITE");
}

// target_write: both announce COMPACT_DATA; the target WRITEs 40000 bytes to us. Every
// segment reads right in the form its flags say (the peer checks COMPACT is allowed), its
// fields and bytes are the work request's, and the WRITE completes once acknowledged; each
// segment SHOULD be COMPACT ([DATA-9]; a full one makes the test SKIP).
void target_write(Context& ctx) {
    Setup s(ctx, wire::kCapCompactData);
    Fixture& f = s.f;
    constexpr size_t kLen = 40000;
    const Region src = f.reg_mr(65536, {"local_write"});
    const auto content = pattern(kLen, 701);
    f.write_mr(src, 0, content);
    s.post("write", src, kLen, 9);
    std::set<uint16_t> paths;
    auto got = receive_messages(f, 1, paths);
    check(got.size() == 1, "[STREAM-2] the target's one WRITE came as {} messages", got.size());
    const Whole& w = got.begin()->second;
    size_t full = 0;
    for (const auto& r : w.segments) {
        const auto& h = r.data;
        check(h.opcode == Opcode::kWrite && h.msg_len == kLen && h.rkey == kRkey && h.remote_addr == kRemoteAddr,
              "[DATA-9] [DATA-6] a segment (flags {:#x}) says {} msg_len {} rkey {:#x} remote_addr {:#x} (posted: "
              "WRITE {} {:#x} {:#x})", h.flags, name_of(h.opcode), h.msg_len, h.rkey, h.remote_addr, kLen, kRkey,
              kRemoteAddr);
        full += !check_compact_segment(r);
    }
    check(w.body == content, "[DATA-9] [DATA-6] the bytes of the target's WRITE (each segment read in its form) "
          "differ from the source");
    f.ack_target_data(paths, f.peer.remote().msg_isn + 1);
    const auto cq = f.poll(f.qp, 500);
    check(cq.size() == 1 && cq[0].at("wr_id") == 9 && cq[0].at("status") == "success",
          "[DATA-9] [PLACE-11] the WRITE sent COMPACT completed as {}", json(cq).dump());
    if (full > 0)
        throw Skipped(fmt::format("[DATA-9] SHOULD: {} of the {} segments of the target's WRITE were sent with the "
                                  "full header", full, w.segments.size()));
}

// target_answers: both announce COMPACT_DATA; our READ_REQUEST (10000 bytes) and FETCH_ADD
// go COMPACT. The target executes both (the READ's bytes, the atomic's memory), and its
// READ_RESPONSE and ATOMIC_RESPONSE read right in the form their flags say; they SHOULD be
// COMPACT (SKIP if not).
void target_answers(Context& ctx) {
    Setup s(ctx, wire::kCapCompactData);
    Fixture& f = s.f;
    const Region r = f.reg_mr(16384, {"local_write", "remote_read", "remote_atomic"});
    const auto content = pattern(10000, 702);
    f.write_mr(r, 100, content);
    f.write_mr(r, 12288, u64_bytes(kOld));
    const uint64_t before = f.peer.compact_data_sent();

    Message read = f.read_request(r, 10000, 100);
    f.send_message(read);
    Message add = f.atomic_request(r, Opcode::kAtomicFetchAdd, kAddend, 0, 12288);
    f.send_message(add);
    check(f.peer.compact_data_sent() == before + 2, "setup: the peer's READ_REQUEST and FETCH_ADD were not COMPACT");

    std::set<uint16_t> paths;
    auto got = receive_messages(f, 2, paths);
    f.ack_target_paths(paths);
    const auto resp = got.find({Opcode::kReadResponse, read.msg_seq});
    check(resp != got.end() && resp->second.done(), "[PLACE-19] [DATA-9] no whole READ_RESPONSE to our COMPACT "
          "READ_REQUEST");
    const auto ans = got.find({Opcode::kAtomicResponse, add.msg_seq});
    check(ans != got.end() && ans->second.done(), "[PLACE-17] [DATA-9] no ATOMIC_RESPONSE to our COMPACT FETCH_ADD");
    size_t full = 0, all = 0;
    for (const auto* w : {&resp->second, &ans->second})
        for (const auto& x : w->segments) {
            check(x.data.rkey == 0 && x.data.remote_addr == x.data.msg_seq,
                  "[PLACE-16] [DATA-9] a {} (flags {:#x}) with rkey {:#x} remote_addr {:#x} (msg_seq {:#x})",
                  name_of(x.data.opcode), x.data.flags, x.data.rkey, x.data.remote_addr, x.data.msg_seq);
            full += !check_compact_segment(x);
            ++all;
        }
    check(resp->second.body == content, "[DATA-9] [PLACE-19] the READ_RESPONSE's bytes differ from the region's");
    check(ans->second.body == u64_bytes(kOld), "[DATA-9] [PLACE-17] the FETCH_ADD answered {} (memory held {:#x})",
          hex(ans->second.body), kOld);
    (void)f.barrier();
    check(f.read_mr(r, 12288, 8) == u64_bytes(kOld + kAddend), "[DATA-9] [PLACE-17] memory after a COMPACT "
          "FETCH_ADD");
    if (full > 0)
        throw Skipped(fmt::format("[DATA-9] SHOULD: {} of the target's {} answer segments were sent with the full "
                                  "header", full, all));
}

// receive_ops_full: both announce COMPACT_DATA; the target sends a SEND, a SEND_IMM and a
// WRITE_IMM (each consumes a receive) and a WRITE. None of the first three is COMPACT (MUST
// NOT, [DATA-9]; the peer also records one as a violation): 72-byte headers, the immediates
// as posted. The WRITE beside them may be COMPACT (the control: the connection has the form).
void receive_ops_full(Context& ctx) {
    Setup s(ctx, wire::kCapCompactData);
    Fixture& f = s.f;
    const Region src = f.reg_mr(16384, {"local_write"});
    f.write_mr(src, 0, pattern(6000, 703));
    s.post("send", src, 6000, 1);
    s.post("send_imm", src, 300, 2, 0x11223344);
    s.post("write_imm", src, 5000, 3, 0x55667788);
    s.post("write", src, 5000, 4);
    std::set<uint16_t> paths;
    auto got = receive_messages(f, 4, paths);
    const uint32_t isn = f.peer.remote().msg_isn;
    std::map<Opcode, uint32_t> want_imm{{Opcode::kSend, 0}, {Opcode::kSendImm, 0x11223344},
                                        {Opcode::kWriteImm, 0x55667788}};
    size_t receive_segments = 0, write_compact = 0;
    for (const auto& [key, w] : got) {
        for (const auto& r : w.segments) {
            const auto& h = r.data;
            if (h.opcode == Opcode::kWrite) {
                write_compact += check_compact_segment(r);
                continue;
            }
            check(want_imm.count(h.opcode), "[DATA-1] the target sent a {} (msg_seq {:#x}) nobody posted",
                  name_of(h.opcode), h.msg_seq);
            ++receive_segments;
            check(!raw_compact(r) && !compact(h), "[DATA-9] a {} at offset {} with COMPACT (flags {:#x}): its "
                  "opcode consumes a receive", name_of(h.opcode), h.offset, static_cast<int>(r.raw.bytes[17]));
            check(r.data_header == wire::kDataHeaderSize, "[DATA-9] [DATA-3] a {} with a {}-byte header",
                  name_of(h.opcode), r.data_header);
            check(h.immediate == want_imm[h.opcode], "[DATA-9] [DATA-5] a {} carries immediate {:#x} ({:#x} posted)",
                  name_of(h.opcode), h.immediate, want_imm[h.opcode]);
            check(h.msg_seq - isn < 3, "[STREAM-2] a {} with msg_seq {:#x}", name_of(h.opcode), h.msg_seq);
        }
    }
    check(receive_segments >= 3, "the target's SEND, SEND_IMM and WRITE_IMM came as {} segments", receive_segments);
    f.ack_target_data(paths, isn + 4);
    const auto cq = f.poll(f.qp, 500);
    check(!cq.empty(), "[PLACE-11] none of the four work requests completed once acknowledged");
    (void)write_compact;
}

// placed: both announce COMPACT_DATA. Our 10000-byte WRITE goes as three segments: the
// first and last COMPACT, the middle one with the full header ([DATA-9]: a message may mix
// the forms). The target places every byte, answers no NACK and acknowledges every PSN.
void placed(Context& ctx) {
    Setup s(ctx, wire::kCapCompactData);
    Fixture& f = s.f;
    const Region r = f.reg_mr(16384, {"local_write", "remote_write"});
    Message m = f.message(Opcode::kWrite, pattern(10000, 704));
    m.rkey = r.rkey;
    m.remote_addr = r.addr + 512;
    const auto segs = f.peer.cut(m);
    check(segs.size() >= 3, "setup: the WRITE was cut into {} segments (segment size {})", segs.size(),
          f.peer.segment_size());
    std::vector<uint32_t> psns;
    for (size_t k = 0; k < segs.size(); ++k) {
        if (k == 1) {
            auto h = f.peer.next_header(segs[k], 1);
            check(compact(h), "setup: the peer's header of a WRITE is not COMPACT");
            h.flags &= static_cast<uint8_t>(~data_flag::kCompact);
            f.peer.send_bytes(Peer::encode_data(h, segs[k].payload));
            psns.push_back(h.path_psn);
        } else {
            psns.push_back(f.peer.send_segment(segs[k], 1).psn);
        }
    }
    const auto ack = f.barrier(1);
    for (uint32_t psn : psns)
        check(covers(ack, psn), "[DATA-9] [ACK-3] PSN {:#x} of the WRITE (COMPACT and full segments) is not "
              "acknowledged (cum {:#x})", psn, ack.cum_psn);
    f.no_nack("after a WRITE of COMPACT and full segments");
    check(f.read_mr(r, 512, m.body.size()) == m.body, "[DATA-9] [DATA-6] the WRITE of COMPACT and full segments "
          "was not placed byte for byte");
    check(f.read_mr(r, 0, 512) == std::vector<std::byte>(512), "[DATA-9] the WRITE wrote before its remote_addr");
}

// receive_op_dropped: both announce COMPACT_DATA; a receive is posted. A SEND with COMPACT
// (64-byte header), the same SEND's 72 bytes with the COMPACT bit set, and a WRITE_IMM with
// COMPACT are each dropped as a bad length ([DATA-9]: checked right after the opcode): no
// completion, no NACK, their PSN not acknowledged. The control: the same SEND with the full
// header at the same PSN completes the receive with its bytes.
void receive_op_dropped(Context& ctx) {
    Setup s(ctx, wire::kCapCompactData);
    Fixture& f = s.f;
    const Region r = f.reg_mr(16384, {"local_write", "remote_write"});
    f.call("post_recv", {{"qp", f.qp}, {"mr", r.mr}, {"offset", 0}, {"length", 4096}, {"wr_id", 5}});
    const Message send = f.message(Opcode::kSend, pattern(300, 705));
    const Segment seg = f.peer.cut(send)[0];
    Segment imm = seg;
    imm.hdr.opcode = Opcode::kWriteImm;
    imm.hdr.rkey = r.rkey;
    imm.hdr.remote_addr = r.addr + 8192;
    imm.hdr.immediate = 0x99;
    struct Case {
        const char* what;
        std::function<std::vector<std::byte>(wire::DataHeader)> bytes;
    };
    const std::vector<Case> cases{
        {"a SEND with COMPACT (64-byte header)",
         [&](wire::DataHeader h) {
             h.flags |= data_flag::kCompact;
             return Peer::encode_data(h, seg.payload);
         }},
        {"a SEND of 72-byte header with the COMPACT bit set",
         [&](wire::DataHeader h) {
             h.flags &= static_cast<uint8_t>(~data_flag::kCompact);
             auto b = Peer::encode_data(h, seg.payload);
             b[17] |= std::byte{data_flag::kCompact};
             return b;
         }},
        {"a WRITE_IMM with COMPACT (64-byte header)",
         [&](wire::DataHeader h) {
             h.opcode = Opcode::kWriteImm;
             h.rkey = imm.hdr.rkey;
             h.remote_addr = imm.hdr.remote_addr;
             h.flags |= data_flag::kCompact;
             return Peer::encode_data(h, seg.payload);
         }},
    };
    const uint32_t psn = f.peer.path(2).next_psn;
    for (const auto& c : cases) {
        const auto before = f.endpoint_counter("bad_length");
        const auto h = f.peer.next_header(seg, 2);
        f.peer.send_bytes(c.bytes(h));
        f.peer.path(2).next_psn = psn;  // dropped: the control reuses the PSN
        const auto ack = f.barrier(2);
        check(!covers(ack, psn), "[DATA-9] [WIRE-8] {} was acknowledged (cum {:#x})", c.what, ack.cum_psn);
        f.no_nack(c.what);
        check(f.poll(f.qp, 0).empty(), "[DATA-9] {} completed the receive", c.what);
        if (before) {
            const auto after = f.endpoint_counter("bad_length");
            check(after && *after == *before + 1, "[DATA-9] [DATA-3] {}: bad_length went {} -> {}", c.what, *before,
                  after.value_or(0));
        }
    }
    check(f.read_mr(r, 8192, 300) == std::vector<std::byte>(300), "[DATA-9] a WRITE_IMM with COMPACT was placed");
    // The control: the same SEND in its full form.
    const Sent sent = f.peer.send_segment(seg, 2);
    check(sent.psn == psn, "setup: the control went at PSN {:#x}, not {:#x}", sent.psn, psn);
    const auto cq = f.poll(f.qp, 500);
    check(cq.size() == 1 && cq[0].at("wr_id") == 5 && cq[0].at("status") == "success",
          "[DATA-9] [PLACE-1] the same SEND with its full header did not complete the receive: {}", json(cq).dump());
    check(f.read_mr(r, 0, 300) == send.body, "[PLACE-3] the SEND's bytes were not placed");
}

// not_negotiated_full: we announce INTEGRITY, COALESCE and SHORT_ACK but not COMPACT_DATA.
// The target's WRITE (three segments) and SEND are all 72-byte headers without the COMPACT
// bit (MUST NOT, [DATA-9], whether or not the target announces COMPACT_DATA).
void not_negotiated_full(Context& ctx) {
    Setup s(ctx, kOthers);
    Fixture& f = s.f;
    const Region src = f.reg_mr(16384, {"local_write"});
    const auto content = pattern(10000, 706);
    f.write_mr(src, 0, content);
    s.post("write", src, 10000, 1);
    s.post("send", src, 500, 2);
    std::set<uint16_t> paths;
    auto got = receive_messages(f, 2, paths);
    size_t n = 0;
    for (const auto& [key, w] : got)
        for (const auto& r : w.segments) {
            check(!raw_compact(r), "[DATA-9] [VER-2] a {} at offset {} with COMPACT (flags {:#x}) to a peer that did "
                  "not announce COMPACT_DATA", name_of(r.data.opcode), r.data.offset, static_cast<int>(r.raw.bytes[17]));
            check(r.data_header == wire::kDataHeaderSize, "[DATA-9] [DATA-3] a {} with a {}-byte header",
                  name_of(r.data.opcode), r.data_header);
            ++n;
        }
    const auto write = got.find({Opcode::kWrite, f.peer.remote().msg_isn});
    check(write != got.end() && write->second.body == content, "[DATA-6] the target's WRITE did not arrive whole "
          "with the source's bytes");
    check(n >= 4, "the target's WRITE and SEND came as {} segments", n);
    f.ack_target_data(paths, f.peer.remote().msg_isn + 2);
}

// not_negotiated_dropped: we do not announce COMPACT_DATA. Our one-segment WRITE sent COMPACT
// (64-byte header) is read at 72 bytes: its payload_len is 8 more than what follows, a bad
// length ([DATA-3]), dropped; nothing is placed and its PSN is not acknowledged. The
// control: the same WRITE at the same PSN with its full header and the COMPACT bit set
// (undefined there, [WIRE-6]) is placed.
void not_negotiated_dropped(Context& ctx) {
    Setup s(ctx, kOthers);
    Fixture& f = s.f;
    const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
    Message m = f.message(Opcode::kWrite, pattern(500, 707));
    m.rkey = r.rkey;
    m.remote_addr = r.addr + 1000;
    const Segment seg = f.peer.cut(m)[0];
    auto h = f.peer.next_header(seg, 3);
    check(!compact(h), "setup: the peer's header is COMPACT without COMPACT_DATA");
    f.peer.path(3).next_psn = h.path_psn;  // the control reuses the PSN
    const auto before = f.endpoint_counter("bad_length");
    auto bad = h;
    bad.flags |= data_flag::kCompact;
    const auto bytes = Peer::encode_data(bad, seg.payload);
    check(bytes.size() == wire::kDataCompactHeaderSize + 500, "setup: a COMPACT WRITE of {} bytes", bytes.size());
    f.peer.send_bytes(bytes);
    const auto ack = f.barrier(3);
    check(!covers(ack, h.path_psn), "[DATA-9] [VER-2] a COMPACT WRITE on a connection without COMPACT_DATA was "
          "acknowledged (cum {:#x})", ack.cum_psn);
    f.no_nack("after a COMPACT WRITE without COMPACT_DATA");
    check(f.read_mr(r, 0, 2000) == std::vector<std::byte>(2000), "[DATA-9] [VER-2] a COMPACT WRITE on a connection "
          "without COMPACT_DATA was placed");
    if (before) {
        const auto after = f.endpoint_counter("bad_length");
        check(after && *after == *before + 1, "[DATA-9] [DATA-3] a COMPACT WRITE read at 72 bytes: bad_length went "
              "{} -> {}", *before, after.value_or(0));
    }
    // The control: the full form with the undefined bit set.
    auto full = Peer::encode_data(h, seg.payload);
    full[17] |= std::byte{data_flag::kCompact};
    f.peer.send_bytes(full);
    f.peer.path(3).next_psn = h.path_psn + 1;
    const auto ack2 = f.barrier(3);
    check(covers(ack2, h.path_psn), "[DATA-9] [WIRE-6] the same WRITE with its full header and the undefined "
          "COMPACT bit was not acknowledged (cum {:#x})", ack2.cum_psn);
    check(f.read_mr(r, 1000, 500) == m.body, "[DATA-9] [WIRE-6] the same WRITE with its full header and the "
          "undefined COMPACT bit was not placed");
}

}  // namespace

void add_compact_tests(std::vector<TestCase>& out) {
    out.push_back({"compact.announced", "[DATA-9] [VER-2] [CONN-2]",
                   "the target's HELLO_ACK announces COMPACT_DATA (optional: skipped if not) and a COMPACT WRITE "
                   "then is placed",
                   announced});
    out.push_back({"compact.target_write", "[DATA-9] [DATA-3] [DATA-5] [DATA-6]",
                   "with COMPACT_DATA negotiated the target's WRITE segments are COMPACT (SHOULD), 64-byte "
                   "headers with the work request's fields and bytes",
                   target_write});
    out.push_back({"compact.target_answers", "[DATA-9] [PLACE-16] [PLACE-17] [PLACE-19]",
                   "with COMPACT_DATA negotiated our COMPACT READ_REQUEST and FETCH_ADD are executed and answered "
                   "COMPACT (SHOULD)",
                   target_answers});
    out.push_back({"compact.receive_ops_full", "[DATA-9] [DATA-5]",
                   "with COMPACT_DATA negotiated the target's SEND, SEND_IMM and WRITE_IMM are never COMPACT: "
                   "72-byte headers with their immediates",
                   receive_ops_full});
    out.push_back({"compact.placed", "[DATA-9] [DATA-6] [PLACE-1]",
                   "with COMPACT_DATA negotiated our WRITE of COMPACT and full segments is placed byte for byte",
                   placed});
    out.push_back({"compact.receive_op_dropped", "[DATA-9] [DATA-3] [WIRE-8]",
                   "with COMPACT_DATA negotiated a SEND or WRITE_IMM with COMPACT is dropped as a bad length; the "
                   "full SEND completes the receive",
                   receive_op_dropped});
    out.push_back({"compact.not_negotiated_full", "[DATA-9] [VER-2] [WIRE-6]",
                   "without our COMPACT_DATA the target's WRITE and SEND have 72-byte headers without COMPACT",
                   not_negotiated_full});
    out.push_back({"compact.not_negotiated_dropped", "[DATA-9] [VER-2] [DATA-3] [WIRE-6]",
                   "without COMPACT_DATA a COMPACT WRITE is a bad length and not placed; the full form with the "
                   "undefined bit set is",
                   not_negotiated_dropped});
}

}  // namespace mroce::conform
