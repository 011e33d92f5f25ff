// conform/tests_streams.cc — the lives of streams (spec §4.4): a destroyed stream, or the
// old incarnation of a queue pair that went back to RESET, is never written again; its
// late DATA is refused as an unknown stream ([STREAM-8], [STREAM-10], [STREAM-13]).
#include "conform/checks.h"
#include "conform/fixture.h"

namespace mroce::conform {
namespace {

using namespace std::chrono_literals;
using wire::NackReason;
using wire::Opcode;

Message write_to(Fixture& f, const Region& r, size_t length, uint64_t offset, uint32_t seed) {
    Message m = f.message(Opcode::kWrite, pattern(length, seed));
    m.rkey = r.rkey;
    m.remote_addr = r.addr + offset;
    return m;
}

// refused_as_unknown: m (for a stream that is gone) is NACKed UNKNOWN_STREAM, counted
// unknown_stream and retired_stream, and not written.
void refused_as_unknown(Fixture& f, const Message& m, const Region& r, uint64_t offset, const char* rule) {
    const uint64_t unknown = f.counter("unknown_stream");
    const uint64_t retired = f.counter("retired_stream");
    f.send_message(m);
    const auto n = f.expect_nack();
    check(n.reason == NackReason::kInvalidRequest && n.detail == wire::kNackDetailUnknownStream &&
              n.stream_id == m.stream_id,
          "{}: expected NACK(INVALID_REQUEST, UNKNOWN_STREAM) for stream {:#x}, got reason {} detail {}",
          rule, m.stream_id, static_cast<int>(n.reason), n.detail);
    (void)f.barrier();
    for (auto b : f.read_mr(r, offset, m.body.size())) check(b == std::byte{0}, "{}: the DATA was written", rule);
    check(f.counter("unknown_stream") == unknown + 1, "{}: unknown_stream not counted", rule);
    check(f.counter("retired_stream") == retired + 1, "[STREAM-13] {}: retired_stream not counted", rule);
}

// destroyed: DATA for a destroyed queue pair's stream ([STREAM-10]).
void destroyed(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(8192, {"local_write", "remote_write"});
    const Message ok = write_to(f, r, 100, 0, 210);
    f.send_message(ok);
    (void)f.barrier();
    check(f.read_mr(r, 0, 100) == ok.body, "control: the WRITE before destruction was not placed");
    f.call("destroy_qp", {{"qp", f.qp}});
    refused_as_unknown(f, write_to(f, r, 100, 1000, 211), r, 1000, "[STREAM-10] a destroyed stream");
}

// reset_incarnation: a queue pair back in RESET gets a new number; the old number's DATA
// is refused, the new incarnation starts its sequences at msg_isn again ([STREAM-13]).
void reset_incarnation(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(8192, {"local_write", "remote_write"});
    f.send_message(write_to(f, r, 100, 0, 212));
    (void)f.barrier();
    const uint32_t old = f.qp;
    const uint32_t fresh = f.call("reset_qp", {{"qp", old}}).at("qp").get<uint32_t>();
    check(fresh != old, "[STREAM-13] the queue pair kept its number {:#x} through RESET", old);
    refused_as_unknown(f, write_to(f, r, 100, 1000, 213), r, 1000, "[STREAM-13] the old incarnation");
    // Both sides start a new incarnation: our new stream, the target's new number.
    f.my_stream += 0x10000;
    f.qp = fresh;
    f.connect_qp(fresh);
    f.next_msg = f.peer.me().msg_isn;
    f.next_recv = f.peer.me().msg_isn;
    const Message again = write_to(f, r, 100, 2000, 214);
    f.send_message(again);
    (void)f.barrier();
    check(f.read_mr(r, 2000, 100) == again.body,
          "[STREAM-13] [STREAM-2] the new incarnation, from msg_isn, was not placed");
}

}  // namespace

void add_stream_tests(std::vector<TestCase>& out) {
    out.push_back({"streams.destroyed", "[STREAM-10] [STREAM-8] [STREAM-13]",
                   "DATA for a destroyed stream: NACK(UNKNOWN_STREAM), counted retired, not written",
                   destroyed});
    out.push_back({"streams.reset_incarnation", "[STREAM-13] [STREAM-2]",
                   "RESET gives a new number; the old one's DATA is refused; the new one starts afresh",
                   reset_incarnation});
}

}  // namespace mroce::conform
