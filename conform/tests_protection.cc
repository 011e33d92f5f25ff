// conform/tests_protection.cc — memory protection (spec [PLACE-4], [PLACE-15],
// [PLACE-17], [PLACE-25], [ERR-10]): a remote access the key, the protection domain, the
// bounds or the access flags do not allow is refused with NACK(REMOTE_ACCESS) and writes
// nothing — not even the part of the range that would have been allowed.
#include "conform/checks.h"
#include "conform/fixture.h"

namespace mroce::conform {
namespace {

using namespace std::chrono_literals;
using wire::NackReason;
using wire::Opcode;
using wire::PacketType;

bool zero(const std::vector<std::byte>& b) {
    for (auto x : b)
        if (x != std::byte{0}) return false;
    return true;
}

// refused checks the NACK for message m (REMOTE_ACCESS, detail 0, [NACK-4]), counts an
// access error, and that the region is untouched.
void refused(Fixture& f, const Message& m, const Region& r, uint64_t errors_before, const char* rule) {
    const auto n = f.expect_nack();
    check(n.reason == NackReason::kRemoteAccess && n.msg_seq == m.msg_seq && n.stream_id == m.stream_id,
          "{}: expected NACK(REMOTE_ACCESS) for msg {:#x}, got reason {} msg {:#x}", rule, m.msg_seq,
          static_cast<int>(n.reason), n.msg_seq);
    check(n.detail == 0, "[NACK-4] REMOTE_ACCESS with detail {}", n.detail);
    (void)f.barrier();
    check(zero(f.read_mr(r, 0, r.length)), "{}: bytes reached the region", rule);
    check(f.counter("access_errors") == errors_before + 1, "{}: access_errors not counted once", rule);
}

Message write_to(Fixture& f, const Region& r, size_t length, uint64_t offset, uint32_t seed) {
    Message m = f.message(Opcode::kWrite, pattern(length, seed));
    m.rkey = r.rkey;
    m.remote_addr = r.addr + offset;
    return m;
}

// control_write: on a fresh stream (a refusal sticks to its stream, [ERR-3]) a WRITE with
// `r`'s own key lands — the refusal was about the access, not the set-up.
void control_write(Fixture& f, const Region& r) {
    f.switch_stream();
    const Message ok = write_to(f, r, 64, 0, 199);
    f.send_message(ok);
    (void)f.barrier();
    check(f.read_mr(r, 0, 64) == ok.body, "control: an allowed WRITE on a fresh stream was not placed");
}

void bad_rkey(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
    const uint64_t errors = f.counter("access_errors");
    for (uint32_t flip : {0x01u, 0x100u}) {  // the key's tag, then its slot
        Message m = write_to(f, r, 100, 0, 170);
        m.rkey ^= flip;
        f.send_message(m);
        refused(f, m, r, errors + (flip == 0x01u ? 0 : 1), "[PLACE-4] [ERR-10] wrong rkey");
        f.switch_stream();
    }
    control_write(f, r);
}

void out_of_bounds(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(8192, {"local_write", "remote_write"});
    const uint64_t errors = f.counter("access_errors");
    // Two segments: the first would fit, the second runs one byte past the end (an
    // off-by-one in the bounds check shows).
    const uint32_t s = f.peer.segment_size();
    const Message m = write_to(f, r, s + 200, 8192 - (s + 200) + 1, 171);
    f.send_message(m);
    refused(f, m, r, errors, "[PLACE-4] range past the region's end");
    control_write(f, r);
}

void no_remote_write(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(4096, {"local_write", "remote_read"});
    const uint64_t errors = f.counter("access_errors");
    const Message m = write_to(f, r, 100, 0, 172);
    f.send_message(m);
    refused(f, m, r, errors, "[PLACE-4] [ERR-10] WRITE without REMOTE_WRITE");
}

void wrong_pd(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const uint32_t other = f.call("alloc_pd").at("pd").get<uint32_t>();
    const Region r = f.reg_mr(4096, {"local_write", "remote_write"}, other);
    const uint64_t errors = f.counter("access_errors");
    const Message m = write_to(f, r, 100, 0, 173);
    f.send_message(m);
    refused(f, m, r, errors, "[ERR-10] WRITE to a region of another protection domain");
    f.switch_stream(other);  // a queue pair of the region's domain may write it
    const Message ok = write_to(f, r, 64, 0, 174);
    f.send_message(ok);
    (void)f.barrier();
    check(f.read_mr(r, 0, 64) == ok.body, "control: a queue pair of the region's domain could not write it");
}

void no_remote_read(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
    const uint64_t errors = f.counter("access_errors");
    Message m = f.read_request(r, 100);
    f.send_message(m);
    refused(f, m, r, errors, "[PLACE-15] READ without REMOTE_READ");
    check(f.peer.collect(is_type(PacketType::kData), 10ms).empty(),
          "[PLACE-15] a refused READ was answered with data");
}

void no_remote_atomic(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(64, {"local_write", "remote_write", "remote_read"});
    const uint64_t errors = f.counter("access_errors");
    Message m = f.atomic_request(r, Opcode::kAtomicFetchAdd, 1, 0);
    f.send_message(m);
    refused(f, m, r, errors, "[PLACE-17] FETCH_ADD without REMOTE_ATOMIC");
}

// stale_key: a deregistered region's key does not reach the region registered after it
// ([ERR-10]: a reused slot never gets its previous key back).
void stale_key(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region a = f.reg_mr(4096, {"local_write", "remote_write"});
    f.call("dereg_mr", {{"mr", a.mr}});
    const Region b = f.reg_mr(4096, {"local_write", "remote_write"});
    check(b.rkey != a.rkey, "[ERR-10] a new region got the deregistered region's key {:#x}", a.rkey);
    const uint64_t errors = f.counter("access_errors");
    Message m = write_to(f, a, 100, 0, 175);
    f.send_message(m);
    refused(f, m, a, errors, "[ERR-10] [PLACE-4] WRITE with a deregistered key");
    check(zero(f.read_mr(b, 0, 4096)), "[ERR-10] a stale key wrote into the new region");
}

// dereg_mid_write: deregistration revokes at once: the rest of a WRITE that began is
// refused and not written ([PLACE-25]).
void dereg_mid_write(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(16384, {"local_write", "remote_write"});
    const uint32_t s = f.peer.segment_size();
    const Message m = write_to(f, r, 2 * size_t{s}, 0, 176);
    const auto segs = f.peer.cut(m);
    f.peer.send_segment(segs[0]);
    (void)f.barrier();
    check(f.read_mr(r, 0, s) == segs[0].payload, "setup: the first segment was not placed");
    f.call("dereg_mr", {{"mr", r.mr}});
    f.peer.send_segment(segs[1]);
    const auto n = f.expect_nack();
    check(n.reason == NackReason::kRemoteAccess && n.msg_seq == m.msg_seq,
          "[PLACE-25] the WRITE's segment after deregistration got NACK reason {}", static_cast<int>(n.reason));
    (void)f.barrier();
    check(zero(f.read_mr(r, s, s)), "[PLACE-25] a segment reached memory after deregistration");
}

// refusal_sticks: after a refused message, later messages of the stream are refused with
// the same reason ([ERR-3]), while another stream is unaffected.
void refusal_sticks(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
    Message bad = write_to(f, r, 100, 0, 177);
    bad.rkey ^= 1;
    f.send_message(bad);
    (void)f.expect_nack();
    const Message next = write_to(f, r, 100, 1000, 178);
    f.send_message(next);
    const auto n = f.expect_nack();
    check(n.reason == NackReason::kRemoteAccess && n.msg_seq == next.msg_seq,
          "[ERR-3] the message after a refused one got reason {} msg {:#x} (expected REMOTE_ACCESS, {:#x})",
          static_cast<int>(n.reason), n.msg_seq, next.msg_seq);
    (void)f.barrier();
    check(zero(f.read_mr(r, 0, 4096)), "[ERR-3] a message after the refused one was written");
    control_write(f, r);
}

// qp_access: a queue pair that grants REMOTE_READ only refuses a WRITE even into a region
// that allows it ([STREAM-12]), and still serves a READ.
void qp_access(Context& ctx) {
    Fixture f(ctx);
    std::string why;
    check(f.peer.handshake(&why), "{}", why);
    f.qp = f.create_qp();
    f.call("connect_qp", {{"qp", f.qp}, {"peer", f.peer.local().to_string()}, {"remote_qp", f.my_stream},
                          {"access", {"remote_read"}}});
    const Region r = f.reg_mr(4096, {"local_write", "remote_write", "remote_read"});
    Message read = f.read_request(r, 64);
    f.send_message(read);
    auto data = f.peer.expect(is_type(PacketType::kData), 500ms);
    check(data.has_value() && data->data.opcode == Opcode::kReadResponse,
          "control: a READ on a queue pair granting REMOTE_READ was not answered");
    f.peer.note_target_data(data->data);
    f.ack_target_paths({data->data.path_id});
    const uint64_t errors = f.counter("access_errors");
    const Message m = write_to(f, r, 100, 0, 179);
    f.send_message(m);
    refused(f, m, r, errors, "[STREAM-12] a WRITE on a queue pair that grants no REMOTE_WRITE");
}

// read_rechecked: a READ that waits in its slot behind an earlier message (a SEND with no
// receive yet) is checked again when its turn comes; its region was deregistered
// meanwhile, so it is not executed and is refused ([PLACE-26]).
void read_rechecked(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region recv = f.reg_mr(4096, {"local_write"});
    const Region r = f.reg_mr(4096, {"local_write", "remote_read"});
    const Message send = f.message(Opcode::kSend, pattern(50, 180));
    f.send_message(send);
    check(f.expect_nack().reason == NackReason::kReceiverNotReady, "setup: the SEND was not RNR-refused");
    Message read = f.read_request(r, 64);
    f.send_message(read);  // accepted (the region is live) and waits behind the SEND
    (void)f.barrier();
    check(f.peer.collect(is_type(PacketType::kData), 10ms).empty(), "[PLACE-18] the READ ran before the SEND");
    f.call("dereg_mr", {{"mr", r.mr}});
    const uint64_t errors = f.counter("access_errors");
    f.call("post_recv", {{"qp", f.qp}, {"mr", recv.mr}, {"length", 4096}, {"wr_id", 1}});
    for (const auto& seg : f.peer.cut(send)) f.peer.send_segment(seg, 0, kEct0, wire::data_flag::kRetx);
    (void)f.barrier();
    check(f.counter("access_errors") == errors + 1, "[PLACE-26] the READ was not checked again at its turn");
    // The request's next DATA (our delivery probe) is refused; no byte of the region is sent.
    for (const auto& seg : f.peer.cut(read)) f.peer.send_segment(seg, 1, kEct0, wire::data_flag::kRetx);
    const auto n = f.expect_nack();
    check(n.reason == NackReason::kRemoteAccess && n.msg_seq == read.msg_seq,
          "[PLACE-26] the deregistered READ's probe got reason {} msg {:#x}", static_cast<int>(n.reason), n.msg_seq);
    check(f.peer.collect(is_type(PacketType::kData), 20ms).empty(), "[PLACE-26] the READ was answered");
    const auto cq = f.poll(f.qp, 200);
    check(cq.size() == 1 && cq[0].at("status") == "success", "[PLACE-26] the SEND before the READ did not complete");
}

}  // namespace

void add_protection_tests(std::vector<TestCase>& out) {
    out.push_back({"protection.bad_rkey", "[PLACE-4] [ERR-10] [NACK-1] [NACK-4]",
                   "a WRITE with a wrong key tag or slot: NACK(REMOTE_ACCESS), nothing written",
                   bad_rkey});
    out.push_back({"protection.out_of_bounds", "[PLACE-4]",
                   "a WRITE running past the region: refused whole, not even its first segment",
                   out_of_bounds});
    out.push_back({"protection.no_remote_write", "[PLACE-4] [ERR-10]",
                   "a WRITE to a region without REMOTE_WRITE is refused", no_remote_write});
    out.push_back({"protection.wrong_pd", "[ERR-10]",
                   "a WRITE to a region of another protection domain is refused", wrong_pd});
    out.push_back({"protection.no_remote_read", "[PLACE-15]",
                   "a READ of a region without REMOTE_READ is refused, no data sent", no_remote_read});
    out.push_back({"protection.no_remote_atomic", "[PLACE-17]",
                   "an atomic on a region without REMOTE_ATOMIC is refused", no_remote_atomic});
    out.push_back({"protection.stale_key", "[ERR-10] [PLACE-4]",
                   "a deregistered key is refused and never reaches the next region", stale_key});
    out.push_back({"protection.dereg_mid_write", "[PLACE-25]",
                   "deregistering mid-WRITE refuses the rest of it", dereg_mid_write});
    out.push_back({"protection.qp_access", "[STREAM-12] [PLACE-4]",
                   "a queue pair granting REMOTE_READ only refuses a WRITE the region allows",
                   qp_access});
    out.push_back({"protection.read_rechecked", "[PLACE-26] [PLACE-18]",
                   "a READ waiting behind a SEND is checked again at its turn, after deregistration",
                   read_rechecked});
    out.push_back({"protection.refusal_sticks", "[ERR-3]",
                   "after a refusal the stream's later messages are refused; other streams work",
                   refusal_sticks});
}

}  // namespace mroce::conform
