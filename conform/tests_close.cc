// conform/tests_close.cc — ending a connection (spec §4.6): a CLOSE from the peer, the
// target's own CLOSE when its application closes, and a CLOSE that fails the token check.
#include "conform/checks.h"
#include "conform/fixture.h"

namespace mroce::conform {
namespace {

using namespace std::chrono_literals;
using wire::Opcode;
using wire::PacketType;

void send_close(Fixture& f, uint32_t reason, uint64_t token_xor = 0) {
    wire::ClosePacket c;
    c.common = {.type = PacketType::kClose, .dst_conn_id = f.peer.remote().conn_id,
                .dst_token = f.peer.remote().token ^ token_xor};
    c.reason = reason;
    std::byte buf[wire::kCloseSize];
    (void)wire::encode_close(c, buf);
    f.peer.send_bytes(buf);
}

bool event_seen(Fixture& f, const std::string& kind) {
    for (int i = 0; i < 20; ++i) {
        const auto events = f.call("events").at("events");
        for (const auto& e : events)
            if (e.at("kind").get<std::string>() == kind) return true;
        (void)f.peer.collect([](const Rx&) { return false; }, 10ms);
    }
    return false;
}

// peer_close: a CLOSE with a reason this version does not define still closes ([CLOSE-2]);
// the posted receive is flushed ([CONN-8]); the target answers it with one CLOSE(CONFIRM)
// and does not answer a CONFIRM ([CONN-29]); the closed connection ignores DATA and PROBE
// ([CONN-9]).
void peer_close(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
    f.call("post_recv", {{"qp", f.qp}, {"mr", r.mr}, {"length", 4096}, {"wr_id", 5}});
    send_close(f, 77);
    auto answer = f.peer.expect(is_type(PacketType::kClose), 500ms);
    check(answer.has_value(), "[CONN-29] the target did not answer the CLOSE");
    check(answer->close.reason == static_cast<uint32_t>(wire::CloseReason::kConfirm),
          "[CONN-29] the answer to a CLOSE has reason {} (expected CONFIRM, 4)", answer->close.reason);
    check(event_seen(f, "connection_closed"), "[CONN-8] [CLOSE-2] no connection_closed event after CLOSE");
    const auto cq = f.poll(f.qp, 200);
    check(cq.size() == 1 && cq[0].at("wr_id") == 5 && cq[0].at("status") == "flushed",
          "[CONN-8] the posted receive was not flushed: {}", nlohmann::json(cq).dump());
    f.peer.discard(5ms);
    send_close(f, static_cast<uint32_t>(wire::CloseReason::kConfirm));  // never answered
    Message m = f.message(Opcode::kWrite, pattern(100, 190));
    m.rkey = r.rkey;
    m.remote_addr = r.addr;
    f.send_message(m);
    f.peer.send_probe(0);
    auto answers = f.peer.collect([](const Rx&) { return true; }, 50ms);
    check(answers.empty(), "[CONN-9] the closed connection answered (type {})",
          answers.empty() ? 0 : static_cast<int>(answers[0].type));
    for (auto b : f.read_mr(r, 0, 100)) check(b == std::byte{0}, "[CONN-9] the closed connection placed DATA");
}

// app_close: when the target's application closes (the agent's reset destroys the
// device), a CLOSE with reason NORMAL goes to the peer ([CONN-21]). The peer cannot answer
// while the agent's call runs, so a lingering target ([CONN-29]) may send it again: still
// NORMAL, and at most 8 times more in all ([CONN-28]).
void app_close(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    f.peer.discard(5ms);
    f.call("reset");
    auto c = f.peer.expect(is_type(PacketType::kClose), 500ms);
    check(c.has_value(), "[CONN-21] no CLOSE when the target's application closed the connection");
    check(c->close.reason == 0, "[CONN-21] [CLOSE-1] CLOSE reason {} (expected NORMAL, 0)", c->close.reason);
    auto more = f.peer.collect(is_type(PacketType::kClose), 50ms);
    check(more.size() <= 8, "[CONN-28] [CONN-29] {} more CLOSE packets (at most 8)", more.size());
    for (const Rx& r : more)
        check(r.close.reason == 0, "[CONN-29] a repeated CLOSE has reason {} (expected NORMAL, 0)",
              r.close.reason);
}

// bad_token_close: a CLOSE with a wrong token does not end the connection ([CONN-4]).
void bad_token_close(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
    send_close(f, 0, 0x1);
    Message m = f.message(Opcode::kWrite, pattern(300, 191));
    m.rkey = r.rkey;
    m.remote_addr = r.addr;
    f.send_message(m);
    (void)f.barrier();
    check(f.read_mr(r, 0, 300) == m.body, "[CONN-4] a CLOSE with a wrong token closed the connection");
    const auto events = f.call("events");
    for (const auto& e : events.at("events"))
        check(e.at("kind") != "connection_closed", "[CONN-4] a CLOSE with a wrong token closed the connection");
}

}  // namespace

void add_close_tests(std::vector<TestCase>& out) {
    out.push_back({"close.peer_close", "[CONN-8] [CONN-9] [CLOSE-2] [CONN-29]",
                   "CLOSE (unknown reason) closes, flushes the receive, is answered with one CONFIRM; "
                   "then a CONFIRM and DATA are ignored", peer_close});
    out.push_back({"close.app_close", "[CONN-21] [CLOSE-1] [CONN-28]",
                   "the target's application closing sends CLOSE(NORMAL), again at most 8 times", app_close});
    out.push_back({"close.bad_token_close", "[CONN-4]",
                   "a CLOSE with a wrong token is ignored", bad_token_close});
}

}  // namespace mroce::conform
