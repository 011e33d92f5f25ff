// conform/tests_placement.cc — direct placement (spec §8): WRITE and SEND bytes land at
// their final place in any order, a segment or message is written at most once, receives
// are consumed in order and complete with the right fields, and refusals are typed NACKs.
#include "conform/checks.h"
#include "conform/fixture.h"

namespace mroce::conform {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using wire::NackReason;
using wire::Opcode;
using wire::PacketType;

struct Setup {
    Fixture f;
    Region region;
    explicit Setup(Context& ctx, FixtureOptions o = {}) : f(ctx, o) {
        f.establish();
        region = f.reg_mr(65536, {"local_write", "remote_write"});
    }
    Message write(size_t length, uint32_t seed, uint64_t offset = 0) {
        Message m = f.message(Opcode::kWrite, pattern(length, seed));
        m.rkey = region.rkey;
        m.remote_addr = region.addr + offset;
        return m;
    }
    std::vector<std::byte> memory(uint64_t offset, uint64_t length) {
        return f.read_mr(region, offset, length);
    }
    // delivered: the newest delivered_seq the target reported for its stream, after
    // taking in what arrives within `wait`.
    int64_t delivered(Duration wait = 20ms) {
        (void)f.peer.collect(is_type(PacketType::kAck), wait);
        const auto d = f.peer.delivered(f.qp);
        return d ? static_cast<int64_t>(*d) : -1;
    }
};

// write_orders: a 5-segment WRITE in order, reversed and interleaved: every byte in place.
void write_orders(Context& ctx) {
    Setup s(ctx);
    const uint32_t seg = s.f.peer.segment_size();
    const std::vector<std::vector<size_t>> orders = {{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {2, 0, 4, 1, 3}};
    uint64_t offset = 0;
    for (size_t k = 0; k < orders.size(); ++k) {
        const size_t len = 4 * size_t{seg} + 123;
        const Message m = s.write(len, 50 + static_cast<uint32_t>(k), offset);
        s.f.send_message(m, orders[k]);
        (void)s.f.barrier();
        check(s.memory(offset, len) == m.body, "[PLACE-3] WRITE sent in order {} misplaced",
              fmt::format("{}{}{}{}{}", orders[k][0], orders[k][1], orders[k][2], orders[k][3], orders[k][4]));
        offset += len;
    }
    const int64_t d = s.delivered();
    check(d == static_cast<int64_t>(s.f.next_msg),
          "[ACK-14] [PLACE-5] expected a stream entry delivered_seq {:#x}, got {}", s.f.next_msg, d);
}

// duplicate_segment: a segment of an incomplete message arriving again is not written
// again ([STREAM-7]): memory changed locally in between keeps the local change.
void duplicate_segment(Context& ctx) {
    Setup s(ctx);
    const uint32_t seg = s.f.peer.segment_size();
    const Message m = s.write(2 * size_t{seg}, 60);
    const auto segs = s.f.peer.cut(m);
    const uint64_t dups = s.f.counter("duplicate_segments");
    s.f.peer.send_segment(segs[0]);
    (void)s.f.barrier();
    check(s.memory(0, seg) == segs[0].payload, "[PLACE-3] the first segment was not placed");
    const auto marker = pattern(seg, 61);
    s.f.write_mr(s.region, 0, marker);
    const uint64_t entries = s.f.peer.entries_seen(s.f.qp);
    s.f.peer.send_segment(segs[0], 1, kEct0, wire::data_flag::kRetx);  // the duplicate, another path
    (void)s.f.barrier(1);
    (void)s.f.peer.collect(is_type(PacketType::kAck), 10ms);
    check(s.memory(0, seg) == marker, "[STREAM-7] a duplicate segment was written again");
    check(s.f.peer.entries_seen(s.f.qp) > entries,
          "[STREAM-9] a DATA with RETX was not answered with the stream's delivery state");
    check(s.f.counter("duplicate_segments") == dups + 1, "[STREAM-7] duplicate_segments not counted");
    s.f.peer.send_segment(segs[1]);
    (void)s.f.barrier();
    check(s.memory(seg, seg) == segs[1].payload, "[PLACE-3] the last segment was not placed");
    check(s.memory(0, seg) == marker, "[STREAM-7] completing the message rewrote its first segment");
}

// stale_duplicate: a message that completed is never written again ([STREAM-4]), and its
// duplicate is answered with the stream's delivery state ([ACK-14]).
void stale_duplicate(Context& ctx) {
    Setup s(ctx);
    const Message m = s.write(3000, 62);
    s.f.send_message(m);
    (void)s.f.barrier();
    check(s.delivered() == static_cast<int64_t>(m.msg_seq + 1),
          "[ACK-14] no stream entry reported the WRITE delivered");
    const uint64_t stale = s.f.counter("stale_duplicates");
    const uint64_t entries = s.f.peer.entries_seen(s.f.qp);
    const auto marker = pattern(3000, 63);
    s.f.write_mr(s.region, 0, marker);
    // A copy the network duplicated, not a retransmission: no RETX, so only [STREAM-4]
    // (not [STREAM-9]) makes the target report delivery again.
    const Sent dup = s.f.peer.send_segment(s.f.peer.cut(m)[0], 2);
    // [ACK-14]: the next ACK the target writes, the one answering the duplicate, reports the
    // stream again. Judged on that ACK, not after a barrier: a PROBE_REPLY repeats the
    // recent reports anyway ([ACK-20]), so it would show an entry even if none was made.
    auto answer = s.f.peer.expect(
        [&](const Rx& r) {
            return r.is(PacketType::kAck) && !(r.ack.flags & wire::ack_flag::kProbeReply) &&
                   r.ack.ts_echo == dup.timestamp;
        },
        500ms);
    check(answer.has_value(), "[ACK-11] the duplicate DATA was not acknowledged within 500 ms");
    bool reported = false;
    for (uint16_t i = 0; i < answer->ack.stream_count; ++i)
        reported |= answer->ack.streams[i].stream_id == s.f.qp &&
                    answer->ack.streams[i].delivered_seq == m.msg_seq + 1;
    check(reported, "[ACK-14] [STREAM-4] the ACK answering the duplicate of a delivered message has no "
          "stream entry with delivered_seq {:#x}", m.msg_seq + 1);
    (void)s.f.barrier(2);
    (void)s.f.peer.collect(is_type(PacketType::kAck), 10ms);
    const int64_t d = s.delivered();
    check(s.memory(0, 3000) == marker, "[STREAM-4] a completed message was written again");
    check(s.f.peer.entries_seen(s.f.qp) > entries,
          "[ACK-14] [STREAM-4] the duplicate of a delivered message was not answered with a stream entry");
    check(d == static_cast<int64_t>(m.msg_seq + 1),
          "[ACK-14] [STREAM-4] the duplicate was not answered with delivered_seq {:#x} (got {})",
          m.msg_seq + 1, d);
    check(s.f.counter("stale_duplicates") == stale + 1, "[STREAM-4] stale_duplicates not counted");
}

// send_receive: SENDs and a SEND_IMM consume the posted receives in order, out-of-order
// segments included, and complete with wr_id, length, opcode and immediate ([PLACE-10]).
void send_receive(Context& ctx) {
    Setup s(ctx);
    const uint32_t seg = s.f.peer.segment_size();
    for (uint64_t i = 0; i < 3; ++i)
        s.f.call("post_recv", {{"qp", s.f.qp}, {"mr", s.region.mr}, {"offset", i * 16384},
                               {"length", 16384}, {"wr_id", 1000 + i}});
    const Message a = s.f.message(Opcode::kSend, pattern(3 * size_t{seg} - 7, 64));
    Message b = s.f.message(Opcode::kSendImm, pattern(77, 65));
    b.immediate = 0xfeedf00d;
    const Message c = s.f.message(Opcode::kSend, {});  // zero-length message [DATA-3]
    s.f.send_message(a, {2, 0, 1});
    s.f.send_message(b);
    s.f.send_message(c);
    (void)s.f.barrier();
    std::vector<json> cq;
    for (int i = 0; i < 20 && cq.size() < 3; ++i) {
        auto more = s.f.poll(s.f.qp, 50);
        cq.insert(cq.end(), more.begin(), more.end());
    }
    check(cq.size() == 3, "[PLACE-10] expected 3 receive completions, got {}", cq.size());
    const uint32_t lens[3] = {static_cast<uint32_t>(a.body.size()), 77, 0};
    for (size_t i = 0; i < 3; ++i) {
        check(cq[i].at("wr_id") == 1000 + i && cq[i].at("status") == "success" &&
                  cq[i].at("opcode") == "recv" && cq[i].at("byte_len") == lens[i],
              "[PLACE-8] [PLACE-10] receive completion {} is {}", i, cq[i].dump());
    }
    check(cq[1].value("imm", 0u) == 0xfeedf00du, "[PLACE-10] SEND_IMM completed without its immediate");
    check(s.memory(0, a.body.size()) == a.body, "[PLACE-3] SEND bytes misplaced");
    check(s.memory(16384, 77) == b.body, "[PLACE-3] SEND_IMM bytes misplaced");
}

// rnr: a SEND with no receive posted is refused with NACK(RECEIVER_NOT_READY), still
// acknowledged at path level, and nothing is written; once a receive is posted the resent
// message is placed.
void rnr(Context& ctx) {
    Setup s(ctx);
    const uint64_t rnrs = s.f.counter("rnr_nacks_sent");
    const Message m = s.f.message(Opcode::kSend, pattern(500, 66));
    const auto sent = s.f.send_message(m, {}, 2);
    const auto nack = s.f.expect_nack();
    check(nack.reason == NackReason::kReceiverNotReady, "[PLACE-6] NACK reason {} (expected 1)",
          static_cast<int>(nack.reason));
    check(nack.path_id == 2 && nack.path_gen == sent[0].gen && nack.path_psn == sent[0].psn &&
              nack.stream_id == s.f.qp && nack.msg_seq == m.msg_seq,
          "[NACK-3] the NACK does not copy the DATA's path, PSN, stream and msg_seq");
    // [NACK-4]: detail is the wait the target suggests, in µs; any value is conformant, but
    // more than the requester's 1 s clamp ([PLACE-6]) is not a wait anyone would take.
    check(nack.detail <= 1000000, "[NACK-4] RNR detail {} µs is above 1 s", nack.detail);
    const auto ack = s.f.barrier(2);
    check(covers(ack, sent[0].psn), "[PLACE-6] the refused DATA was not acknowledged at path level");
    check(s.f.counter("rnr_nacks_sent") == rnrs + 1, "[PLACE-6] rnr_nacks_sent not counted");
    check(s.f.poll(s.f.qp).empty(), "[PLACE-6] a completion without a receive");
    s.f.call("post_recv", {{"qp", s.f.qp}, {"mr", s.region.mr}, {"offset", 0}, {"length", 4096},
                           {"wr_id", 7}});
    for (const auto& seg : s.f.peer.cut(m)) s.f.peer.send_segment(seg, 0, kEct0, wire::data_flag::kRetx);
    const auto cq = s.f.poll(s.f.qp, 500);
    check(cq.size() == 1 && cq[0].at("wr_id") == 7 && cq[0].at("status") == "success",
          "[PLACE-6] the resent SEND did not complete the posted receive");
    check(s.memory(0, 500) == m.body, "[PLACE-3] the resent SEND was misplaced");
}

// send_too_long: a SEND one byte longer than its receive is refused with NACK(INVALID_REQUEST), the
// receive is neither written nor completed ([PLACE-2]), and later messages of the stream
// are refused too ([ERR-3]).
void send_too_long(Context& ctx) {
    Setup s(ctx);
    s.f.call("post_recv", {{"qp", s.f.qp}, {"mr", s.region.mr}, {"offset", 0}, {"length", 100},
                           {"wr_id", 1}});
    // One byte longer than the receive: an off-by-one in the length check shows.
    const Message m = s.f.message(Opcode::kSend, pattern(101, 67));
    s.f.send_message(m);
    auto nack = s.f.expect_nack();
    check(nack.reason == NackReason::kInvalidRequest && nack.detail == 0 && nack.msg_seq == m.msg_seq,
          "[PLACE-2] expected NACK(INVALID_REQUEST, detail 0) for msg {:#x}, got reason {} detail {}",
          m.msg_seq, static_cast<int>(nack.reason), nack.detail);
    // [ERR-3]: the next message of the stream is refused with the same reason.
    const Message next = s.write(64, 68, 8192);
    s.f.send_message(next);
    nack = s.f.expect_nack();
    check(nack.reason == NackReason::kInvalidRequest && nack.msg_seq == next.msg_seq,
          "[ERR-3] the message after a refused one was not refused (reason {}, msg {:#x})",
          static_cast<int>(nack.reason), nack.msg_seq);
    (void)s.f.barrier();
    for (auto b : s.memory(0, 200)) check(b == std::byte{0}, "[PLACE-2] the receive was written");
    for (auto b : s.memory(8192, 64)) check(b == std::byte{0}, "[ERR-3] a refused WRITE was placed");
    check(s.f.poll(s.f.qp, 20).empty(), "[PLACE-2] the receive was completed");
}

// unknown_stream: DATA for a stream the target does not have: NACK(INVALID_REQUEST,
// UNKNOWN_STREAM), acknowledged at path level, counted ([STREAM-8]).
void unknown_stream(Context& ctx) {
    Setup s(ctx);
    const uint64_t unknown = s.f.counter("unknown_stream");
    Message m = s.write(100, 69);
    m.stream_id = s.f.qp + 0x777;
    const auto sent = s.f.send_message(m, {}, 3);
    const auto nack = s.f.expect_nack();
    check(nack.reason == NackReason::kInvalidRequest && nack.detail == wire::kNackDetailUnknownStream &&
              nack.stream_id == m.stream_id,
          "[STREAM-8] expected NACK(INVALID_REQUEST, detail 1) naming stream {:#x}, got reason {} "
          "detail {} stream {:#x}",
          m.stream_id, static_cast<int>(nack.reason), nack.detail, nack.stream_id);
    check(covers(s.f.barrier(3), sent[0].psn), "[STREAM-8] not acknowledged at path level");
    check(s.f.counter("unknown_stream") == unknown + 1, "[STREAM-8] unknown_stream not counted");
    for (auto b : s.memory(0, 100)) check(b == std::byte{0}, "[STREAM-8] the DATA was placed");
}

// inconsistent_segment: a later segment that disagrees with the first ([DATA-6]) is
// dropped as malformed without writing ([PLACE-1]).
void inconsistent_segment(Context& ctx) {
    Setup s(ctx);
    const uint32_t seg = s.f.peer.segment_size();
    const Message m = s.write(2 * size_t{seg}, 70);
    auto segs = s.f.peer.cut(m);
    const uint64_t malformed = s.f.counter("malformed");
    s.f.peer.send_segment(segs[0]);
    Segment bad = segs[1];
    bad.hdr.remote_addr += 64;  // another target address for the same message
    s.f.peer.send_segment(bad);
    Segment bad2 = segs[1];
    bad2.hdr.msg_len += seg;  // another length
    bad2.hdr.flags &= static_cast<uint8_t>(~wire::data_flag::kLast);
    s.f.peer.send_segment(bad2);
    (void)s.f.barrier();
    check(s.f.counter("malformed") >= malformed + 2,
          "[PLACE-1] segments disagreeing with the first were not counted malformed");
    for (auto b : s.memory(seg, seg + 64))
        check(b == std::byte{0}, "[DATA-6] [PLACE-1] a disagreeing segment was written");
    s.f.peer.send_segment(segs[1]);
    (void)s.f.barrier();
    check(s.memory(0, 2 * size_t{seg}) == m.body, "control: the consistent segment was not placed");
}

// wraparound: path PSNs and stream sequences that wrap past 2^32 (spec §1.4).
void wraparound(Context& ctx) {
    Setup s(ctx, FixtureOptions{.isn = 0xfffffffe, .msg_isn = 0xffffffff});
    const uint32_t seg = s.f.peer.segment_size();
    const Message a = s.write(4 * size_t{seg}, 71);   // PSNs 0xfffffffe .. 1
    const Message b = s.write(1000, 72, 5 * size_t{seg});  // msg_seq 0 after 0xffffffff
    s.f.send_message(a, {0, 1, 2, 3});
    s.f.send_message(b);
    const auto ack = s.f.barrier();
    check(ack.cum_psn == 2u, "[ACK-3] [PATH-9] cum_psn {:#x} after PSNs 0xfffffffe..2 (expected 0x2)",
          ack.cum_psn);
    check(sack_count(ack) == 0, "[ACK-2] SACK bits set after an in-order run across the wrap");
    check(s.memory(0, a.body.size()) == a.body && s.memory(5 * size_t{seg}, 1000) == b.body,
          "[PLACE-3] bytes misplaced across the sequence wrap");
    const int64_t d = s.delivered();
    check(d == 1, "[STREAM-2] [PLACE-5] delivered_seq {} after msg_seq 0xffffffff and 0 (expected 1)", d);
}

// stream_window: a message 128 or more above delivered_seq is dropped without a NACK
// ([STREAM-3]); one 127 above is placed.
void stream_window(Context& ctx) {
    Setup s(ctx);
    const uint64_t oow = s.f.counter("out_of_window");
    Message far = s.write(100, 73, 0);
    far.msg_seq = s.f.peer.me().msg_isn + 128;
    Message edge = s.write(100, 74, 200);
    edge.msg_seq = s.f.peer.me().msg_isn + 127;
    s.f.send_message(far);
    s.f.send_message(edge);
    (void)s.f.barrier();
    s.f.no_nack("for a message outside the stream window");
    check(s.f.counter("out_of_window") == oow + 1, "[STREAM-3] out_of_window not counted once");
    for (auto b : s.memory(0, 100)) check(b == std::byte{0}, "[STREAM-3] a message 128 ahead was placed");
    check(s.memory(200, 100) == edge.body, "[STREAM-3] [PLACE-3] a message 127 ahead was not placed");
}

// claimed_receive: two messages naming one receive: the second is refused
// ([PLACE-14]).
void claimed_receive(Context& ctx) {
    Setup s(ctx);
    const uint32_t seg = s.f.peer.segment_size();
    for (uint64_t i = 0; i < 2; ++i)
        s.f.call("post_recv", {{"qp", s.f.qp}, {"mr", s.region.mr}, {"offset", i * 16384},
                               {"length", 16384}, {"wr_id", 20 + i}});
    const Message a = s.f.message(Opcode::kSend, pattern(2 * size_t{seg}, 75));
    Message b = s.f.message(Opcode::kSend, pattern(100, 76));
    b.recv_seq = a.recv_seq;  // the receive a already claimed
    const uint64_t malformed = s.f.counter("malformed");
    s.f.send_message(a, {0});  // a's first segment claims the receive; a stays incomplete
    s.f.send_message(b);
    const auto n = s.f.expect_nack();
    check(n.reason == NackReason::kInvalidRequest && n.msg_seq == b.msg_seq,
          "[PLACE-14] a second message naming a claimed receive got reason {} msg {:#x}",
          static_cast<int>(n.reason), n.msg_seq);
    check(s.f.counter("malformed") == malformed + 1, "[PLACE-14] not counted malformed");
    check(s.memory(0, seg) == std::vector<std::byte>(a.body.begin(), a.body.begin() + seg),
          "[PLACE-14] the claimed receive was overwritten by the second message");
}

// misaligned_offset: a segment whose offset is not a multiple of the segment size is
// malformed and not written ([PLACE-9]).
void misaligned_offset(Context& ctx) {
    Setup s(ctx);
    const uint32_t seg = s.f.peer.segment_size();
    const Message m = s.write(3 * size_t{seg}, 77);
    auto segs = s.f.peer.cut(m);
    const uint64_t malformed = s.f.counter("malformed");
    s.f.peer.send_segment(segs[0]);
    Segment shifted = segs[1];
    // 100 bytes late, a full segment long: not a multiple of the segment size, though its
    // length is what a segment there would have (so only the offset rule refuses it). It
    // ends before msg_len, so it carries no LAST and stays well formed for [DATA-3].
    shifted.hdr.offset += 100;
    shifted.hdr.flags &= static_cast<uint8_t>(~wire::data_flag::kLast);
    std::copy(m.body.begin() + shifted.hdr.offset, m.body.begin() + shifted.hdr.offset + shifted.payload.size(),
              shifted.payload.begin());
    s.f.peer.send_segment(shifted);
    (void)s.f.barrier();
    check(s.f.counter("malformed") == malformed + 1, "[PLACE-9] a misaligned segment was not counted malformed");
    for (auto b : s.memory(seg, 2 * size_t{seg})) check(b == std::byte{0}, "[PLACE-9] a misaligned segment was written");
    s.f.peer.send_segment(segs[1]);
    s.f.peer.send_segment(segs[2]);
    (void)s.f.barrier();
    check(s.memory(0, 3 * size_t{seg}) == m.body, "control: the aligned segments were not placed");
}

// segment_window: a WRITE of kSegmentWindow + 2 segments. Its segment kSegmentWindow sent
// while segment 0 is missing lies outside the receiver's window and is dropped unwritten
// ([PLACE-31]); the window's last segment is written at once; once segment 0 is in, the
// window has slid and the same segment is written. The message then completes.
void segment_window(Context& ctx) {
    Setup s(ctx);
    const uint32_t seg = s.f.peer.segment_size();
    constexpr uint32_t kW = 1024;  // [PLACE-31] W_seg, a protocol constant
    const size_t len = size_t{kW + 2} * seg;
    s.region = s.f.reg_mr(len, {"local_write", "remote_write"});
    const Message m = s.write(len, 81);
    const auto segs = s.f.peer.cut(m);
    auto placed = [&](uint32_t i) {
        const size_t n = segs[i].payload.size();
        return s.memory(uint64_t{i} * seg, n) == std::vector<std::byte>(m.body.begin() + size_t{i} * seg,
                                                                        m.body.begin() + size_t{i} * seg + n);
    };
    const uint64_t oow = s.f.counter("out_of_window");
    s.f.peer.send_segment(segs[kW]);
    (void)s.f.barrier();
    check(s.f.counter("out_of_window") == oow + 1,
          "[PLACE-31] a segment {} segments above the first missing one was not counted out_of_window", kW);
    for (auto b : s.memory(uint64_t{kW} * seg, seg))
        check(b == std::byte{0}, "[PLACE-31] a segment outside the segment window was written");
    s.f.peer.send_segment(segs[kW - 1]);
    s.f.peer.send_segment(segs[0]);
    s.f.peer.send_segment(segs[kW]);  // inside now: the window starts at segment 1
    (void)s.f.barrier();
    check(s.f.counter("out_of_window") == oow + 1, "[PLACE-31] a segment inside the window was refused");
    check(placed(kW - 1) && placed(0) && placed(kW), "[PLACE-31] a segment inside the window was not placed");
    for (uint32_t i = 1; i < kW - 1; ++i) s.f.peer.send_segment(segs[i], static_cast<uint16_t>(i % 4));
    s.f.peer.send_segment(segs[kW + 1]);
    for (uint16_t p = 0; p < 4; ++p) (void)s.f.barrier(p);
    check(s.memory(0, len) == m.body, "[PLACE-31] the WRITE was not placed whole");
    const int64_t d = s.delivered();
    check(d == static_cast<int64_t>(s.f.next_msg), "[PLACE-5] the WRITE was not delivered (delivered_seq {})", d);
}

}  // namespace

void add_placement_tests(std::vector<TestCase>& out) {
    out.push_back({"placement.write_orders", "[PLACE-3] [PLACE-12] [DATA-4] [ACK-14] [PLACE-5]",
                   "5-segment WRITEs in order, reversed and shuffled land exactly", write_orders});
    out.push_back({"placement.duplicate_segment", "[STREAM-7] [STREAM-9]",
                   "a duplicate segment of an incomplete message is not written again",
                   duplicate_segment});
    out.push_back({"placement.stale_duplicate", "[STREAM-4] [ACK-14]",
                   "a duplicate of a completed message is not written and re-reports delivery",
                   stale_duplicate});
    out.push_back({"placement.send_receive", "[PLACE-8] [PLACE-10] [PLACE-3] [DATA-3]",
                   "SEND, SEND_IMM and a zero-length SEND complete their receives in order",
                   send_receive});
    out.push_back({"placement.rnr", "[PLACE-6] [NACK-1] [NACK-3] [NACK-4]",
                   "no receive posted: NACK(RNR) with the DATA's fields, nothing written", rnr});
    out.push_back({"placement.send_too_long", "[PLACE-2] [ERR-3]",
                   "a SEND longer than its receive is refused and the refusal sticks", send_too_long});
    out.push_back({"placement.unknown_stream", "[STREAM-8] [NACK-4]",
                   "DATA for an unknown stream: NACK(INVALID_REQUEST, UNKNOWN_STREAM)", unknown_stream});
    out.push_back({"placement.inconsistent_segment", "[DATA-6] [PLACE-1]",
                   "a segment disagreeing with its message's first is dropped as malformed",
                   inconsistent_segment});
    out.push_back({"placement.stream_window", "[STREAM-3]",
                   "a message 128 above delivered_seq is dropped silently; 127 above is placed",
                   stream_window});
    out.push_back({"placement.claimed_receive", "[PLACE-14]",
                   "a second message naming an already claimed receive is refused", claimed_receive});
    out.push_back({"placement.misaligned_offset", "[PLACE-9]",
                   "a segment at an offset that is not a multiple of the segment size is dropped",
                   misaligned_offset});
    out.push_back({"placement.segment_window", "[PLACE-31] [PLACE-5]",
                   "a segment 1024 above a message's first missing one is dropped; inside the window it is placed",
                   segment_window});
    out.push_back({"placement.wraparound", "[PATH-9] [ACK-3] [STREAM-2]",
                   "PSNs and msg_seq wrapping past 2^32 are placed and acknowledged", wraparound});
}

}  // namespace mroce::conform
