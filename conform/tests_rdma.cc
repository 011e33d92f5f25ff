// conform/tests_rdma.cc — READ and atomics (spec §8.1): the response's every field and
// byte, atomics executed exactly once however often the request arrives, and the requests
// a responder must refuse.
#include "conform/checks.h"
#include "conform/fixture.h"
#include "util/seq.h"

namespace mroce::conform {
namespace {

using namespace std::chrono_literals;
using wire::NackReason;
using wire::Opcode;
using wire::PacketType;

// Byte-palindromic 64-bit values read the same in either byte order, so the expected
// memory does not depend on the target's ([PLACE-17]: the responder's order).
constexpr uint64_t kOld = 0x2222222222222222ULL;
constexpr uint64_t kAddend = 0x0101010101010101ULL;
constexpr uint64_t kSwap = 0x5a5a5a5a5a5a5a5aULL;

// expect_atomic_response: the target's ATOMIC_RESPONSE to request `msg_seq`; acknowledges
// it. Returns the original value it carries.
uint64_t expect_atomic_response(Fixture& f, uint32_t msg_seq) {
    std::optional<Rx> rx;
    const auto by = std::chrono::steady_clock::now() + 500ms;
    for (;;) {
        const auto left = std::chrono::duration_cast<Duration>(by - std::chrono::steady_clock::now());
        rx = f.peer.expect(is_type(PacketType::kData), std::max(left, Duration::zero()));
        check(rx.has_value(), "[PLACE-18] [PLACE-19] no ATOMIC_RESPONSE within 500 ms");
        // An answer to an earlier request may be sent again first: on a loaded host our ACK
        // of it can come after the target's probe timeout, and a target with nothing else
        // to send copies that path's tail ([LOSS-16]). It carries RETX and names the
        // earlier request; it is acknowledged and passed over.
        const auto& e = rx->data;
        const bool earlier = e.remote_addr <= UINT32_MAX && seq_lt(static_cast<uint32_t>(e.remote_addr), msg_seq);
        if (!(e.opcode == Opcode::kAtomicResponse && (e.flags & wire::data_flag::kRetx) && earlier)) break;
        f.peer.note_target_data(e);
        f.ack_target_paths({e.path_id});
    }
    const auto& h = rx->data;
    check(h.opcode == Opcode::kAtomicResponse, "[PLACE-19] response opcode {:#x}", static_cast<int>(h.opcode));
    check(h.remote_addr == msg_seq, "[PLACE-16] the response names request {:#x}, expected {:#x}",
          h.remote_addr, msg_seq);
    check(h.msg_seq == msg_seq, "[PLACE-30] the response's msg_seq is {:#x}, not its request's {:#x}",
          h.msg_seq, msg_seq);
    check(h.stream_id == f.my_stream, "[STREAM-1] the response is for stream {:#x}, not ours {:#x}",
          h.stream_id, f.my_stream);
    check(h.msg_len == wire::kAtomicResponseBodySize && rx->payload.size() == 8 &&
              (h.flags & wire::data_flag::kLast),
          "[DATA-8] ATOMIC_RESPONSE msg_len {} payload {}", h.msg_len, rx->payload.size());
    check(h.rkey == 0 && h.recv_seq == 0 && h.immediate == 0, "[DATA-5] unused response fields not 0");
    f.peer.note_target_data(h);
    f.ack_target_paths({h.path_id});
    return wire::decode_atomic_response(std::span<const std::byte, 8>(rx->payload.data(), 8));
}

// read_response: every segment of a 10000-byte READ's response: fields, cut and bytes.
void read_response(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(16384, {"local_write", "remote_read"});
    const auto content = pattern(10000, 150);
    f.write_mr(r, 100, content);
    Message m = f.read_request(r, 10000, 100);
    f.send_message(m);
    const uint32_t s = std::min(f.peer.me().max_payload, f.peer.remote().max_payload);
    std::vector<std::byte> got(10000);
    std::vector<bool> seen((10000 + s - 1) / s);
    std::set<uint16_t> paths;
    std::optional<wire::DataHeader> first;
    size_t have = 0;
    while (have < seen.size()) {
        auto rx = f.peer.expect(is_type(PacketType::kData), 500ms);
        check(rx.has_value(), "[PLACE-19] READ_RESPONSE incomplete: {} of {} segments", have, seen.size());
        const auto& h = rx->data;
        check(h.opcode == Opcode::kReadResponse, "[PLACE-19] opcode {:#x}", static_cast<int>(h.opcode));
        check(h.stream_id == f.my_stream, "[STREAM-1] response stream {:#x}", h.stream_id);
        check(h.remote_addr == m.msg_seq, "[PLACE-16] response names request {:#x}, not {:#x}",
              h.remote_addr, m.msg_seq);
        check(h.msg_len == 10000, "[PLACE-16] response msg_len {}", h.msg_len);
        check(h.rkey == 0 && h.recv_seq == 0 && h.immediate == 0, "[DATA-5] unused fields not 0");
        check(h.offset % s == 0 && h.payload_len == std::min<uint32_t>(s, 10000 - h.offset),
              "[DATA-4] segment at offset {} of {} bytes (segment size {})", h.offset, h.payload_len, s);
        check(h.msg_seq == m.msg_seq, "[PLACE-30] the response's msg_seq is {:#x}, not its request's {:#x}",
              h.msg_seq, m.msg_seq);
        if (first)
            check(h.opcode == first->opcode && h.msg_seq == first->msg_seq && h.msg_len == first->msg_len &&
                      h.remote_addr == first->remote_addr,
                  "[DATA-6] response segments disagree");
        first = h;
        f.peer.note_target_data(h);
        paths.insert(h.path_id);
        const size_t k = h.offset / s;
        std::copy(rx->payload.begin(), rx->payload.end(), got.begin() + h.offset);
        if (!seen[k]) ++have;
        seen[k] = true;
    }
    check(got == content, "[PLACE-15] [PLACE-19] the READ_RESPONSE bytes differ from the region's");
    f.ack_target_paths(paths);
}

// fetch_add_once: one FETCH_ADD, its request arriving three times (a duplicate at once and
// one after the response was delivered): executed exactly once ([PLACE-18]).
void fetch_add_once(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(64, {"local_write", "remote_atomic"});
    f.write_mr(r, 0, u64_bytes(kOld));
    const uint64_t executed = f.counter("atomics_executed");
    const Message m = f.atomic_request(r, Opcode::kAtomicFetchAdd, kAddend, 0);
    const auto seg = f.peer.cut(m)[0];
    f.peer.send_segment(seg, 0);
    f.peer.send_segment(seg, 1, kEct0, wire::data_flag::kRetx);  // duplicate, right behind
    const uint64_t old = expect_atomic_response(f, m.msg_seq);
    check(old == kOld, "[PLACE-17] FETCH_ADD returned {:#x}, memory held {:#x}", old, kOld);
    (void)f.barrier(1);
    check(f.read_mr(r, 0, 8) == u64_bytes(kOld + kAddend), "[PLACE-17] [PLACE-18] memory after one FETCH_ADD");
    f.peer.send_segment(seg, 2, kEct0, wire::data_flag::kRetx);  // after delivery
    (void)f.barrier(2);
    f.peer.discard(10ms);
    check(f.read_mr(r, 0, 8) == u64_bytes(kOld + kAddend),
          "[PLACE-18] [STREAM-4] a duplicated FETCH_ADD was executed again");
    const uint64_t executed_after = f.counter("atomics_executed");
    check(executed_after == executed + 1, "[PLACE-18] atomics_executed moved by {}", executed_after - executed);
}

// compare_swap: a mismatching compare leaves memory alone; a matching one swaps; both
// answer the old value ([PLACE-17]).
void compare_swap(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(64, {"local_write", "remote_atomic"});
    f.write_mr(r, 8, u64_bytes(kOld));
    Message miss = f.atomic_request(r, Opcode::kAtomicCompareSwap, kSwap, kOld + 1, 8);
    f.send_message(miss);
    check(expect_atomic_response(f, miss.msg_seq) == kOld, "[PLACE-17] COMPARE_SWAP (miss) answered wrong");
    (void)f.barrier();
    check(f.read_mr(r, 8, 8) == u64_bytes(kOld), "[PLACE-17] COMPARE_SWAP swapped on a mismatch");
    Message hit = f.atomic_request(r, Opcode::kAtomicCompareSwap, kSwap, kOld, 8);
    f.send_message(hit);
    check(expect_atomic_response(f, hit.msg_seq) == kOld, "[PLACE-17] COMPARE_SWAP (hit) answered wrong");
    (void)f.barrier();
    check(f.read_mr(r, 8, 8) == u64_bytes(kSwap), "[PLACE-17] COMPARE_SWAP did not swap on a match");
}

// misaligned_atomic: an atomic not on an 8-byte boundary is NACK(INVALID_REQUEST).
void misaligned_atomic(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(64, {"local_write", "remote_atomic"});
    f.write_mr(r, 0, u64_bytes(kOld));
    f.write_mr(r, 8, u64_bytes(kOld));
    const Message m = f.atomic_request(r, Opcode::kAtomicFetchAdd, kAddend, 0, 4);
    f.send_message(m);
    const auto n = f.expect_nack();
    check(n.reason == NackReason::kInvalidRequest && n.msg_seq == m.msg_seq,
          "[PLACE-17] a misaligned atomic got NACK reason {}", static_cast<int>(n.reason));
    (void)f.barrier();
    check(f.read_mr(r, 0, 16) == [] { auto a = u64_bytes(kOld), b = u64_bytes(kOld); a.insert(a.end(), b.begin(), b.end()); return a; }(),
          "[PLACE-17] a misaligned atomic changed memory");
    check(f.peer.collect(is_type(PacketType::kData), 10ms).empty(), "[PLACE-17] a refused atomic was answered");
}

// bad_request_body: a READ_REQUEST whose body is not 8 bytes is malformed and refused
// with NACK(INVALID_REQUEST) ([DATA-8]).
void bad_request_body(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(4096, {"local_write", "remote_read"});
    const uint64_t malformed = f.counter("malformed");
    std::vector<std::byte> body(12);
    wire::encode_read_request(100, std::span<std::byte, 8>(body.data(), 8));
    Message m = f.message(Opcode::kReadRequest, body);
    m.rkey = r.rkey;
    m.remote_addr = r.addr;
    f.send_message(m);
    const auto n = f.expect_nack();
    check(n.reason == NackReason::kInvalidRequest, "[DATA-8] a 12-byte READ_REQUEST got NACK reason {}",
          static_cast<int>(n.reason));
    check(f.counter("malformed") == malformed + 1, "[DATA-8] the bad body was not counted malformed");
    check(f.peer.collect(is_type(PacketType::kData), 10ms).empty(), "[DATA-8] the bad READ was answered");
}

// orphan_response: a READ_RESPONSE that answers no request is counted and dropped before
// anything is kept, with no NACK ([PLACE-16], [PLACE-30]); the stream carries on.
void orphan_response(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const uint64_t orphans = f.counter("orphan_responses");
    Message m;
    m.opcode = Opcode::kReadResponse;
    m.stream_id = f.qp;
    // Ahead of everything the target has sent: no such request outstanding ([PLACE-30]; one
    // behind would be the late answer of a completed request, a stale duplicate).
    m.msg_seq = f.peer.remote().msg_isn + 0x4242;
    m.remote_addr = m.msg_seq;
    m.body = pattern(100, 160);
    f.send_message(m);
    (void)f.barrier();
    f.no_nack("[PLACE-30] an orphan READ_RESPONSE was answered with a NACK");
    check(f.counter("orphan_responses") == orphans + 1, "[PLACE-16] orphan_responses not counted");
    const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
    Message w = f.message(Opcode::kWrite, pattern(64, 161));
    w.rkey = r.rkey;
    w.remote_addr = r.addr;
    f.send_message(w);
    (void)f.barrier();
    f.no_nack("[PLACE-30] the stream was refused after an orphan response");
    check(f.read_mr(r, 0, 64) == pattern(64, 161), "[PLACE-30] a WRITE after an orphan response was not placed");
}

// Pump keeps the target's paths healthy while a test waits for one of its packets: each
// DATA is acknowledged at path level at once and each PROBE answered, so no timeout, path
// failure or re-roll of the target gets in the way on a slow machine.
struct Pump {
    Fixture& f;
    // next: the next DATA of the target that `want` accepts, within `timeout`.
    std::optional<Rx> next(const std::function<bool(const wire::DataHeader&)>& want, Duration timeout) {
        const auto until = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            const auto left = until - std::chrono::steady_clock::now();
            if (left <= Duration::zero()) return std::nullopt;
            auto rx = f.peer.expect(
                [](const Rx& r) { return r.is(PacketType::kData) || r.is(PacketType::kProbe); },
                std::chrono::duration_cast<Duration>(left));
            if (!rx) return std::nullopt;
            if (rx->is(PacketType::kProbe)) {
                f.peer.send_ack(f.peer.probe_reply(rx->probe));
                continue;
            }
            f.peer.note_target_data(rx->data);
            f.ack_target_paths({rx->data.path_id});
            if (want(rx->data)) return rx;
        }
    }
};

// answer_outside_window: the target's own READ, answered by nobody yet, heads 127 WRITEs:
// its stream window is full and pinned. Our READ is answered all the same, outside that
// window, its msg_seq our request's; the target then takes our answer to its READ,
// outside our stream, and only then starts its next message ([PLACE-30], [STREAM-3]).
void answer_outside_window(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    Pump pump{f};
    const uint32_t w = 128;  // [STREAM-3] W, a protocol constant
    const Region dst = f.reg_mr(4096, {"local_write"});
    const Region src = f.reg_mr(4096, {"local_write"});
    const Region readable = f.reg_mr(4096, {"local_write", "remote_read"});
    const auto content = pattern(1000, 162);
    f.write_mr(readable, 0, content);
    f.call("post_send", {{"qp", f.qp}, {"opcode", "read"}, {"mr", dst.mr}, {"offset", 0}, {"length", 300},
                         {"remote_addr", 0x5000}, {"rkey", 0x99}, {"wr_id", 1}});
    for (uint32_t i = 1; i <= w; ++i)  // the last one is message w: beyond the window
        f.call("post_send", {{"qp", f.qp}, {"opcode", "write"}, {"mr", src.mr}, {"offset", 0},
                             {"length", 1}, {"remote_addr", 0x10000 + i}, {"rkey", 0x77}, {"wr_id", 1 + i}});
    const uint32_t isn = f.peer.remote().msg_isn;
    auto first = [](const wire::DataHeader& h) { return !(h.flags & wire::data_flag::kRetx); };
    std::set<uint32_t> seen;
    // A message counts as sent from its first copy: a segment lost on the way comes again
    // as a retransmission (RETX), and no message, first copy or not, may be beyond W.
    while (seen.size() < w) {
        auto rx = pump.next([](const wire::DataHeader&) { return true; }, 500ms);
        check(rx.has_value(), "[STREAM-3] the target sent {} of its first {} messages", seen.size(), w);
        const auto& h = rx->data;
        check(seq_lt(h.msg_seq, isn + w), "[STREAM-3] the target started message {} with message 0 unanswered",
              h.msg_seq - isn);
        check(h.msg_seq != isn || h.opcode == Opcode::kReadRequest, "the target's first message is not its READ");
        seen.insert(h.msg_seq);
        // Report delivery up to the first message not seen, as a responder does: without
        // reports the target probes every message for delivery ([STREAM-5]), and when a
        // segment is lost on the way those probes ran out its retries ([LOSS-7]) before
        // the lost segment came again (the testbed with loss, docs/results.md). The READ
        // still pins the window: it completes only with its answer ([PLACE-30]).
        uint32_t upto = isn;
        while (seen.count(upto)) ++upto;
        f.ack_target_data({h.path_id}, upto);
    }
    // Every message of the target is reported delivered: its READ ran here, unanswered.
    f.ack_target_data({0}, isn + w);
    Message m = f.read_request(readable, 1000);
    f.send_message(m);
    auto rx = pump.next([&](const wire::DataHeader& h) { return h.opcode == Opcode::kReadResponse || first(h); },
                        500ms);
    check(rx.has_value(), "[PLACE-30] no answer to our READ while the target's window is full");
    const auto& h = rx->data;
    check(h.opcode == Opcode::kReadResponse,
          "[STREAM-3] the target started message {} (opcode {:#x}) with message 0 unanswered",
          h.msg_seq - isn, static_cast<int>(h.opcode));
    check(h.msg_seq == m.msg_seq && h.remote_addr == m.msg_seq,
          "[PLACE-30] the answer carries msg_seq {:#x} remote_addr {:#x}, not its request's {:#x}", h.msg_seq,
          h.remote_addr, m.msg_seq);
    check(h.msg_len == 1000 && h.offset == 0 && rx->payload.size() == 1000 &&
              std::equal(rx->payload.begin(), rx->payload.end(), content.begin()),
          "[PLACE-19] the answer's bytes differ");
    // Our answer to the target's READ: outside our stream, named by its request's msg_seq.
    Message ans;
    ans.opcode = Opcode::kReadResponse;
    ans.stream_id = f.qp;
    ans.msg_seq = isn;
    ans.remote_addr = isn;
    ans.body = pattern(300, 163);
    f.send_message(ans);
    // The first segment of a message not seen yet (its first copy may have been lost).
    auto next = pump.next([&](const wire::DataHeader& d) { return d.opcode == Opcode::kWrite && !seen.count(d.msg_seq); },
                          500ms);
    check(next.has_value() && next->data.msg_seq == isn + w,
          "[STREAM-3] the target did not start message {} once its READ had its answer", w);
    bool read_done = false;
    for (int i = 0; i < 50 && !read_done; ++i)
        for (const auto& c : f.poll(f.qp, 20))
            if (c.at("wr_id") == 1) {
                check(c.at("status") == "success", "[PLACE-30] the target's READ completed with {}",
                      c.at("status").get<std::string>());
                read_done = true;
            }
    check(read_done, "[PLACE-30] the target's READ did not complete after our answer");
    check(f.read_mr(dst, 0, 300) == pattern(300, 163), "[PLACE-30] our answer's bytes are not in place");
}

// retransmit_pinned: the target's READ, unanswered, and 127 WRITEs fill its stream window
// ([STREAM-3]); the first copy of one WRITE is lost (we never acknowledge it, our ACKs show
// the hole, and we report delivery up to it). The target must send it again ([LOSS-8])
// although no new message may start: a retransmission needs no window.
void retransmit_pinned(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const uint32_t w = 128;  // [STREAM-3] W
    const Region dst = f.reg_mr(4096, {"local_write"});
    const Region src = f.reg_mr(4096, {"local_write"});
    f.call("post_send", {{"qp", f.qp}, {"opcode", "read"}, {"mr", dst.mr}, {"offset", 0}, {"length", 300},
                         {"remote_addr", 0x5000}, {"rkey", 0x99}, {"wr_id", 1}});
    for (uint32_t i = 1; i < w; ++i)
        f.call("post_send", {{"qp", f.qp}, {"opcode", "write"}, {"mr", src.mr}, {"offset", 0},
                             {"length", 1}, {"remote_addr", 0x10000 + i}, {"rkey", 0x77}, {"wr_id", 1 + i}});
    const uint32_t isn = f.peer.remote().msg_isn;
    const uint32_t lost_msg = isn + 100;
    std::optional<wire::DataHeader> lost;
    std::set<uint32_t> seen;
    bool resent = false;
    const auto until = std::chrono::steady_clock::now() + 3s;
    while (!resent && std::chrono::steady_clock::now() < until) {
        for (auto& rx : f.peer.ready([](const Rx& r) { return r.is(PacketType::kData) || r.is(PacketType::kProbe); },
                                     10ms)) {
            if (rx.is(PacketType::kProbe)) {
                f.peer.send_ack(f.peer.probe_reply(rx.probe));  // truthful: the hole stays
                continue;
            }
            const auto& h = rx.data;
            check(seq_lt(h.msg_seq, isn + w), "[STREAM-3] the target started message {} with its READ unanswered",
                  h.msg_seq - isn);
            if (h.msg_seq == lost_msg && !lost) {
                lost = h;  // lost on the way: neither noted nor acknowledged
                continue;
            }
            if (h.msg_seq == lost_msg) {
                check(h.flags & wire::data_flag::kRetx, "[LOSS-8] the lost WRITE came again without RETX");
                resent = true;
            }
            seen.insert(h.msg_seq);
            f.peer.note_target_data(h);
            // As a responder does: everything before the lost message is delivered.
            f.ack_target_data({h.path_id}, lost_msg);
        }
    }
    check(lost.has_value(), "[STREAM-3] the target sent {} of its {} messages, not message 100", seen.size(), w);
    check(resent, "[LOSS-8] a WRITE lost while the READ pins the stream window was not sent again within 3 s "
          "({} other messages seen)", seen.size());
}

}  // namespace

void add_rdma_tests(std::vector<TestCase>& out) {
    out.push_back({"rdma.read_response", "[PLACE-15] [PLACE-16] [PLACE-19] [DATA-4] [DATA-5] [DATA-6] [STREAM-1] [PLACE-30]",
                   "a 10000-byte READ: every response field, the cut and the bytes", read_response});
    out.push_back({"rdma.fetch_add_once", "[PLACE-17] [PLACE-18] [STREAM-4]",
                   "a FETCH_ADD sent three times executes once and answers the old value",
                   fetch_add_once});
    out.push_back({"rdma.compare_swap", "[PLACE-17]",
                   "COMPARE_SWAP swaps only on a match and answers the old value", compare_swap});
    out.push_back({"rdma.misaligned_atomic", "[PLACE-17] [ERR-3]",
                   "an atomic off an 8-byte boundary: NACK(INVALID_REQUEST), memory unchanged",
                   misaligned_atomic});
    out.push_back({"rdma.answer_outside_window", "[PLACE-30] [STREAM-3] [PLACE-16] [PLACE-19]",
                   "answers both ways while each side's window is pinned by its own READ",
                   answer_outside_window});
    out.push_back({"rdma.retransmit_pinned", "[LOSS-8] [STREAM-3] [PLACE-30]",
                   "a WRITE lost while the target's own unanswered READ pins its window is resent",
                   retransmit_pinned});
    out.push_back({"rdma.bad_request_body", "[DATA-8]",
                   "a READ_REQUEST with a 12-byte body: malformed, NACK(INVALID_REQUEST)",
                   bad_request_body});
    out.push_back({"rdma.orphan_response", "[PLACE-16] [PLACE-30]",
                   "a READ_RESPONSE answering no request: counted and dropped, no NACK; the stream goes on",
                   orphan_response});
}

}  // namespace mroce::conform
