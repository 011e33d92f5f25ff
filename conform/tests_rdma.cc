// conform/tests_rdma.cc — READ and atomics (spec §8.1): the response's every field and
// byte, atomics executed exactly once however often the request arrives, and the requests
// a responder must refuse.
#include "conform/checks.h"
#include "conform/fixture.h"

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

std::vector<std::byte> u64_bytes(uint64_t v) {
    std::vector<std::byte> b(8);
    for (int i = 0; i < 8; ++i) b[i] = static_cast<std::byte>(v >> (8 * i));
    return b;
}

Message atomic(Fixture& f, const Region& r, Opcode op, uint64_t swap_add, uint64_t compare,
               uint64_t offset = 0) {
    std::vector<std::byte> body(wire::kAtomicRequestBodySize);
    wire::encode_atomic_request({swap_add, compare},
                                std::span<std::byte, wire::kAtomicRequestBodySize>(body.data(), body.size()));
    Message m = f.message(op, body);
    m.rkey = r.rkey;
    m.remote_addr = r.addr + offset;
    return m;
}

// expect_atomic_response: the target's ATOMIC_RESPONSE to request `msg_seq`; acknowledges
// it. Returns the original value it carries.
uint64_t expect_atomic_response(Fixture& f, uint32_t msg_seq) {
    auto rx = f.peer.expect(is_type(PacketType::kData), 500ms);
    check(rx.has_value(), "[PLACE-18] [PLACE-19] no ATOMIC_RESPONSE within 500 ms");
    const auto& h = rx->data;
    check(h.opcode == Opcode::kAtomicResponse, "[PLACE-19] response opcode {:#x}", static_cast<int>(h.opcode));
    check(h.remote_addr == msg_seq, "[PLACE-16] the response names request {:#x}, expected {:#x}",
          h.remote_addr, msg_seq);
    check(h.stream_id == f.my_stream, "[STREAM-1] the response is for stream {:#x}, not ours {:#x}",
          h.stream_id, f.my_stream);
    check(h.msg_len == wire::kAtomicResponseBodySize && rx->payload.size() == 8 &&
              (h.flags & wire::data_flag::kLast),
          "[DATA-8] ATOMIC_RESPONSE msg_len {} payload {}", h.msg_len, rx->payload.size());
    check(h.rkey == 0 && h.recv_seq == 0 && h.immediate == 0, "[DATA-5] unused response fields not 0");
    f.peer.note_target_data(h);
    f.ack_target_data({h.path_id}, h.msg_seq + 1);
    return wire::decode_atomic_response(std::span<const std::byte, 8>(rx->payload.data(), 8));
}

// read_response: every segment of a 10000-byte READ's response: fields, cut and bytes.
void read_response(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(16384, {"local_write", "remote_read"});
    const auto content = pattern(10000, 150);
    f.write_mr(r, 100, content);
    std::vector<std::byte> body(wire::kReadRequestBodySize);
    wire::encode_read_request(10000, std::span<std::byte, 8>(body.data(), 8));
    Message m = f.message(Opcode::kReadRequest, body);
    m.rkey = r.rkey;
    m.remote_addr = r.addr + 100;
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
        check(h.msg_seq == f.peer.remote().msg_isn,
              "[STREAM-2] the target's first message has msg_seq {:#x}, not its msg_isn {:#x}", h.msg_seq,
              f.peer.remote().msg_isn);
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
    f.ack_target_data(paths, first->msg_seq + 1);
}

// fetch_add_once: one FETCH_ADD, its request arriving three times (a duplicate at once and
// one after the response was delivered): executed exactly once ([PLACE-18]).
void fetch_add_once(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(64, {"local_write", "remote_atomic"});
    f.write_mr(r, 0, u64_bytes(kOld));
    const uint64_t executed = f.counter("atomics_executed");
    const Message m = atomic(f, r, Opcode::kAtomicFetchAdd, kAddend, 0);
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
    Message miss = atomic(f, r, Opcode::kAtomicCompareSwap, kSwap, kOld + 1, 8);
    f.send_message(miss);
    check(expect_atomic_response(f, miss.msg_seq) == kOld, "[PLACE-17] COMPARE_SWAP (miss) answered wrong");
    (void)f.barrier();
    check(f.read_mr(r, 8, 8) == u64_bytes(kOld), "[PLACE-17] COMPARE_SWAP swapped on a mismatch");
    Message hit = atomic(f, r, Opcode::kAtomicCompareSwap, kSwap, kOld, 8);
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
    const Message m = atomic(f, r, Opcode::kAtomicFetchAdd, kAddend, 0, 4);
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

// orphan_response: a READ_RESPONSE that answers no request is refused before anything is
// kept ([PLACE-16]).
void orphan_response(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const uint64_t orphans = f.counter("orphan_responses");
    Message m = f.message(Opcode::kReadResponse, pattern(100, 160));
    m.remote_addr = 0x4242;  // no such request outstanding at the target
    f.send_message(m);
    const auto n = f.expect_nack();
    check(n.reason == NackReason::kInvalidRequest && n.msg_seq == m.msg_seq,
          "[PLACE-16] an orphan READ_RESPONSE got NACK reason {}", static_cast<int>(n.reason));
    check(f.counter("orphan_responses") == orphans + 1, "[PLACE-16] orphan_responses not counted");
}

}  // namespace

void add_rdma_tests(std::vector<TestCase>& out) {
    out.push_back({"rdma.read_response", "[PLACE-15] [PLACE-16] [PLACE-19] [DATA-4] [DATA-5] [DATA-6] [STREAM-1] [STREAM-2]",
                   "a 10000-byte READ: every response field, the cut and the bytes", read_response});
    out.push_back({"rdma.fetch_add_once", "[PLACE-17] [PLACE-18] [STREAM-4]",
                   "a FETCH_ADD sent three times executes once and answers the old value",
                   fetch_add_once});
    out.push_back({"rdma.compare_swap", "[PLACE-17]",
                   "COMPARE_SWAP swaps only on a match and answers the old value", compare_swap});
    out.push_back({"rdma.misaligned_atomic", "[PLACE-17] [ERR-3]",
                   "an atomic off an 8-byte boundary: NACK(INVALID_REQUEST), memory unchanged",
                   misaligned_atomic});
    out.push_back({"rdma.bad_request_body", "[DATA-8]",
                   "a READ_REQUEST with a 12-byte body: malformed, NACK(INVALID_REQUEST)",
                   bad_request_body});
    out.push_back({"rdma.orphan_response", "[PLACE-16]",
                   "a READ_RESPONSE answering no request: NACK(INVALID_REQUEST), counted",
                   orphan_response});
}

}  // namespace mroce::conform
