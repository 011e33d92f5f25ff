// conform/tests_requester.cc — how the target, as requester, takes what the responder
// (the suite) sends back: malformed ACKs are dropped whole ([ACK-1], [ACK-5], [ACK-17]),
// unknown stream entries ignored ([ACK-9]), NACKs with undefined reasons dropped
// ([NACK-2]), a REMOTE_ACCESS NACK fails the work request and its queue pair ([ERR-8]),
// and an RNR NACK makes it wait before it tries again ([PLACE-6]).
#include <chrono>

#include "conform/checks.h"
#include "conform/fixture.h"

namespace mroce::conform {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using wire::PacketType;

using SteadyClock = std::chrono::steady_clock;

// Requester: a connected target that posted a WRITE of `length` bytes towards us.
struct Requester {
    Fixture f;
    Region src;
    explicit Requester(Context& ctx, size_t length = 1000) : f(ctx) {
        f.establish();
        src = f.reg_mr(65536, {"local_write"});
        f.write_mr(src, 0, pattern(length, 200));
        post(length, 9);
    }
    void post(size_t length, uint64_t wr_id) {
        f.call("post_send", {{"qp", f.qp}, {"opcode", "write"}, {"mr", src.mr}, {"offset", 0},
                             {"length", length}, {"remote_addr", 0x10000}, {"rkey", 0x77},
                             {"wr_id", wr_id}});
    }
    // data: the next DATA of the target, noted for acknowledgement.
    wire::DataHeader data() {
        auto rx = f.peer.expect(is_type(PacketType::kData), 500ms);
        check(rx.has_value(), "the target sent no DATA for the posted WRITE");
        f.peer.note_target_data(rx->data);
        return rx->data;
    }
    // full_ack: the ACK that acknowledges path p and reports the message delivered.
    wire::AckPacket full_ack(uint16_t p) {
        auto a = f.peer.ack_for_target_path(p);
        a.stream_count = 1;
        a.streams[0] = {f.my_stream, f.peer.remote().msg_isn + 1};
        return a;
    }
    void send_raw_ack(const wire::AckPacket& a, size_t extra_bytes, uint16_t claimed_count) {
        std::vector<std::byte> buf(wire::kAckFixedSize + size_t{claimed_count} * 8 + extra_bytes);
        wire::store_ack(a, buf.data());
        wire::store_be16(buf.data() + 76, claimed_count);
        f.peer.send_bytes(buf);
    }
    void no_completion(const char* rule) {
        const auto cq = f.poll(f.qp, 30);
        check(cq.empty(), "{}: the work request completed: {}", rule, json(cq).dump());
    }
};

// bad_acks: an ACK one byte long, one claiming 33 entries and one naming a path beyond the
// target's num_paths each report our delivery, and none may complete the WRITE; the
// well-formed ACK (with an entry for a stream the target does not have) does.
void bad_acks(Context& ctx) {
    Requester r(ctx);
    const auto h = r.data();
    const auto good = r.full_ack(h.path_id);
    r.send_raw_ack(good, 1, 1);
    r.no_completion("[ACK-1] an ACK one byte longer than its entries");
    r.send_raw_ack(good, 0, 33);
    r.no_completion("[ACK-5] an ACK with 33 stream entries");
    auto beyond = good;
    beyond.path_id = r.f.peer.remote().num_paths;
    r.f.peer.send_ack(beyond);
    r.no_completion("[ACK-17] an ACK for a path beyond num_paths");
    auto fine = good;
    fine.stream_count = 2;
    fine.streams[1] = fine.streams[0];
    fine.streams[0] = {r.f.my_stream ^ 0x5a5a00, 3};  // a stream the target does not know
    r.f.peer.send_ack(fine);
    const auto cq = r.f.poll(r.f.qp, 500);
    check(cq.size() == 1 && cq[0].at("status") == "success",
          "[ACK-9] [PLACE-11] a well-formed ACK with an unknown stream entry did not complete the "
          "WRITE: {}", json(cq).dump());
}

wire::NackPacket nack_for(Fixture& f, const wire::DataHeader& h, wire::NackReason reason) {
    wire::NackPacket n;
    n.common = {.type = PacketType::kNack, .dst_conn_id = f.peer.remote().conn_id,
                .dst_token = f.peer.remote().token};
    n.reason = reason;
    n.path_id = h.path_id;
    n.path_gen = h.path_gen;
    n.path_psn = h.path_psn;
    n.stream_id = h.stream_id;
    n.msg_seq = h.msg_seq;
    return n;
}

void send_nack(Fixture& f, const wire::NackPacket& n, std::optional<uint8_t> raw_reason = {}) {
    std::byte buf[wire::kNackSize];
    (void)wire::encode_nack(n, buf);
    if (raw_reason) buf[16] = static_cast<std::byte>(*raw_reason);
    f.peer.send_bytes(buf);
}

// nack_fails: NACKs with reasons 0 and 6 are dropped; NACK(REMOTE_ACCESS) fails the WRITE
// with remote_access, and the queue pair sends nothing more ([ERR-8]).
void nack_fails(Context& ctx) {
    Requester r(ctx);
    const auto h = r.data();
    const auto n = nack_for(r.f, h, wire::NackReason::kRemoteAccess);
    send_nack(r.f, n, 0);
    send_nack(r.f, n, 6);
    r.no_completion("[NACK-2] a NACK with reason 0 or 6");
    send_nack(r.f, n);
    auto cq = r.f.poll(r.f.qp, 500);
    check(cq.size() == 1 && cq[0].at("wr_id") == 9 && cq[0].at("status") == "remote_access",
          "[ERR-8] NACK(REMOTE_ACCESS) did not fail the WRITE with remote_access: {}", json(cq).dump());
    r.f.peer.discard(10ms);
    r.post(100, 10);
    cq = r.f.poll(r.f.qp, 500);
    check(cq.size() == 1 && cq[0].at("wr_id") == 10 && cq[0].at("status") == "flushed",
          "[ERR-8] a WRITE posted after the failure was not flushed: {}", json(cq).dump());
    auto data = r.f.peer.collect(is_type(PacketType::kData), 30ms);
    check(data.empty(), "[ERR-8] the failed queue pair sent DATA again");
}

// rnr_wait: NACK(RECEIVER_NOT_READY, 20 ms): the target resends the message's first
// segment, as a retransmission, and not before the wait ([PLACE-6]).
void rnr_wait(Context& ctx) {
    Requester r(ctx, 3 * 4096);
    // Take the whole first attempt and acknowledge it at path level ([PLACE-6]: refused
    // DATA is still acknowledged), so no loss retransmission can pass for the retry.
    std::optional<wire::DataHeader> first;
    std::set<uint32_t> offsets;
    while (offsets.size() < 3) {
        const auto d = r.data();
        offsets.insert(d.offset);
        if (d.offset == 0) first = d;
        r.f.peer.send_ack(r.f.peer.ack_for_target_path(d.path_id));
    }
    // On a loaded host our ACKs may come after the target's probe timeout, and a target with
    // nothing else to send then copies the path's tail at once ([LOSS-16]): such copies,
    // sent before the NACK, must not pass for the retry. Take and acknowledge them first;
    // once the ACKs are in, nothing is in flight and no timeout can send another.
    for (const auto& c : r.f.peer.collect(is_type(PacketType::kData), 5ms)) {
        r.f.peer.note_target_data(c.data);
        r.f.peer.send_ack(r.f.peer.ack_for_target_path(c.data.path_id));
    }
    const auto h = *first;
    auto n = nack_for(r.f, h, wire::NackReason::kReceiverNotReady);
    n.detail = 20000;  // µs
    send_nack(r.f, n);
    const auto sent_at = SteadyClock::now();
    std::optional<Rx> again;
    for (;;) {
        auto rx = r.f.peer.expect(
            [](const Rx& x) { return x.is(PacketType::kData) || x.is(PacketType::kProbe); }, 2000ms);
        check(rx.has_value(), "[PLACE-6] the message was not tried again within 2 s of the RNR NACK");
        if (rx->is(PacketType::kProbe)) {  // answer probes truthfully (the path lost nothing)
            auto reply = r.f.peer.probe_reply(rx->probe);
            r.f.peer.send_ack(reply);
            continue;
        }
        r.f.peer.note_target_data(rx->data);
        r.f.peer.send_ack(r.f.peer.ack_for_target_path(rx->data.path_id));
        if (rx->data.offset == 0) {
            again = std::move(rx);
            break;
        }
    }
    const auto waited = SteadyClock::now() - sent_at;
    check(waited >= 19ms, "[PLACE-6] the first segment came back {} µs after a 20 ms RNR NACK",
          std::chrono::duration_cast<std::chrono::microseconds>(waited).count());
    check(again->data.flags & wire::data_flag::kRetx, "[PLACE-6] the readiness probe lacks RETX");
    check(again->data.msg_seq == h.msg_seq, "[PLACE-6] the retry is another message");
}

}  // namespace

void add_requester_tests(std::vector<TestCase>& out) {
    out.push_back({"requester.bad_acks", "[ACK-1] [ACK-5] [ACK-17] [ACK-9] [PLACE-11]",
                   "malformed ACKs do not complete a WRITE; an unknown stream entry is ignored",
                   bad_acks});
    out.push_back({"requester.nack_fails", "[NACK-2] [ERR-8]",
                   "NACKs with reasons 0 and 6 are dropped; REMOTE_ACCESS fails the WRITE and the QP",
                   nack_fails});
    out.push_back({"requester.rnr_wait", "[PLACE-6]",
                   "after NACK(RNR, 20 ms) the first segment is resent, not sooner", rnr_wait});
}

}  // namespace mroce::conform
