// conform/tests_proof.cc — the handshake's hardening (spec §4.1 [CONN-25], [CONN-26],
// §4.8 [VER-1], [VER-2]) seen from the wire: cookies that do not prove an address, the
// initiator's echo of a RETRY's cookie and its confirming HELLO_ACK, the end of an
// unproven connection, version-1 HELLOs in both directions, capability bits, and the
// endpoint port a HELLO announces ([CONN-13]).
#include "conform/checks.h"
#include "conform/fixture.h"

namespace mroce::conform {
namespace {

using namespace std::chrono_literals;
using wire::Opcode;
using wire::PacketType;

// write_works: a WRITE on the fixture's connection is placed (the connection is alive).
bool write_works(Fixture& f, const Region& r, uint32_t seed) {
    Message m = f.message(Opcode::kWrite, pattern(200, seed));
    m.rkey = r.rkey;
    m.remote_addr = r.addr;
    f.send_message(m);
    (void)f.barrier();
    return f.read_mr(r, 0, 200) == m.body;
}

// restart_hello: a HELLO from our address with a new connection id and token, as a
// restarted peer's; our own identity (and path state) stays that of the live connection.
wire::HelloPacket restart_hello(Fixture& f, uint32_t label) {
    auto h = f.peer.hello_packet(PacketType::kHello);
    h.src_conn_id ^= 0x00ff0000;
    h.src_token = derive(f.ctx.seed, f.ctx.test_index, label);
    f.peer.also_mine(h.src_conn_id, h.src_token);
    return h;
}

bool is_v1_close(const Rx& r) {
    return r.is(PacketType::kClose) && !r.raw.bytes.empty() &&
           static_cast<uint8_t>(r.raw.bytes[0]) == wire::kLegacyVersion;
}

// forged_cookie: a restart's HELLO carrying a cookie the target did not make for that
// address and identity proves nothing: it is answered with a RETRY and the live connection
// is untouched. A cookie made for another token does not prove this one either. The
// cookie the target made for exactly this HELLO does (the control).
void forged_cookie(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
    const Identity old_remote = f.peer.remote();
    auto hello = restart_hello(f, 9);
    for (size_t i = 0; i < 12; ++i) hello.cookie[i] = static_cast<uint8_t>(derive(ctx.seed, ctx.test_index, 20 + i));
    f.peer.send_hello(hello);
    auto answer = f.peer.expect([](const Rx& x) { return x.is(PacketType::kRetry) || x.is(PacketType::kHelloAck); },
                                500ms);
    check(answer.has_value(), "[CONN-25] a restart's HELLO with a forged cookie was not answered");
    check(answer->is(PacketType::kRetry),
          "[CONN-25] a forged cookie was accepted as proof of address (HELLO_ACK from {:#x})",
          answer->hello.src_conn_id);
    const wire::Cookie genuine = answer->retry.cookie;
    // The genuine cookie, echoed under yet another token: made for another identity.
    auto other = hello;
    other.src_token ^= 0x00f0f0f0f0f0f0f0ULL;
    other.cookie = genuine;
    f.peer.also_mine(other.src_conn_id, other.src_token);
    f.peer.send_hello(other);
    answer = f.peer.expect([](const Rx& x) { return x.is(PacketType::kRetry) || x.is(PacketType::kHelloAck); },
                           500ms);
    check(answer.has_value() && answer->is(PacketType::kRetry),
          "[CONN-25] a cookie made for another src_token was accepted as proof");
    // The live connection was untouched by both.
    check(write_works(f, r, 31), "[CONN-25] the live connection broke after HELLOs without proof");
    // Control: the cookie made for the first HELLO proves it.
    hello.cookie = genuine;
    f.peer.send_hello(hello);
    auto ack = f.peer.expect(is_type(PacketType::kHelloAck), 500ms);
    check(ack.has_value() && ack->hello.src_conn_id != old_remote.conn_id,
          "[CONN-25] control: the HELLO echoing the target's own cookie got no HELLO_ACK of a new connection");
}

// retry_echo: the target's connection, told by a RETRY that its HELLO must prove its
// address, echoes the cookie in its next HELLOs. A RETRY with the wrong token is not an
// answer to its HELLO and is ignored.
void retry_echo(Context& ctx) {
    Fixture f(ctx);
    f.qp = f.create_qp();
    f.connect_qp(f.qp);
    auto first = f.peer.expect(is_type(PacketType::kHello), 500ms);
    check(first.has_value(), "[CONN-1] no HELLO from the target");
    wire::RetryPacket forged;
    forged.common.dst_conn_id = first->hello.src_conn_id;
    forged.common.dst_token = first->hello.src_token ^ 1;
    for (size_t i = 0; i < 12; ++i) forged.cookie[i] = 0xee;
    wire::RetryPacket retry;
    retry.common.dst_conn_id = first->hello.src_conn_id;
    retry.common.dst_token = first->hello.src_token;
    for (size_t i = 0; i < 12; ++i) retry.cookie[i] = static_cast<uint8_t>(0x11 * (i + 1));
    std::byte buf[wire::kRetrySize];
    auto n = wire::encode_retry(forged, buf);
    check(static_cast<bool>(n), "internal: RETRY does not encode");
    f.peer.send_bytes(std::span(buf, *n));
    n = wire::encode_retry(retry, buf);
    f.peer.send_bytes(std::span(buf, *n));
    // Every version-2 HELLO from now on carries the genuine RETRY's cookie (the version-1
    // probe form has no cookie field).
    // HELLOs the target sent before it read our RETRY carry no cookie; from the first that
    // echoes it (the target sends in order), every one does.
    int echoed = 0;
    const auto until = std::chrono::steady_clock::now() + 300ms;
    while (echoed < 2 && std::chrono::steady_clock::now() < until) {
        auto h = f.peer.expect(is_type(PacketType::kHello), 100ms);
        if (!h || h->raw.bytes.size() != wire::kHelloSize) continue;
        check(h->hello.cookie != forged.cookie, "[CONN-25] [CONN-4] the target echoed a RETRY with the wrong token");
        check(h->hello.src_conn_id == first->hello.src_conn_id && h->hello.src_token == first->hello.src_token,
              "[CONN-25] [CONN-12] the HELLO after RETRY carries another identity");
        if (h->hello.cookie == retry.cookie)
            ++echoed;
        else
            check(echoed == 0, "[CONN-25] a HELLO after one that echoed the cookie does not echo it");
    }
    check(echoed >= 1, "[CONN-25] no HELLO echoing our RETRY's cookie within 300 ms");
    // Establish and use it: the RETRY changed nothing else.
    f.peer.answer_hello(first->hello);
    f.peer.discard(5ms);
    const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
    check(write_works(f, r, 32), "[CONN-25] the connection does not work after a RETRY");
}

// confirmation: an initiator established by our HELLO_ACK confirms with a HELLO_ACK of
// its own, addressed to us: only a sender that received our HELLO_ACK knows our token.
void confirmation(Context& ctx) {
    Fixture f(ctx);
    f.qp = f.create_qp();
    f.connect_qp(f.qp);
    auto hello = f.peer.expect(is_type(PacketType::kHello), 500ms);
    check(hello.has_value(), "[CONN-1] no HELLO from the target");
    f.peer.answer_hello(hello->hello);
    auto ack = f.peer.expect(is_type(PacketType::kHelloAck), 200ms);
    check(ack.has_value(), "[CONN-26] [CONN-16] the initiator did not confirm with a HELLO_ACK");
    check(ack->hello.common.dst_conn_id == f.peer.me().conn_id && ack->hello.common.dst_token == f.peer.me().token &&
              ack->hello.src_conn_id == hello->hello.src_conn_id && ack->hello.src_token == hello->hello.src_token,
          "[CONN-26] the confirming HELLO_ACK is not addressed to us from the target's connection");
}

// unproven_ends: a connection made by our HELLO, to which we never send anything carrying
// its token, and which no queue pair uses, ends after peer_dead_timeout (1 s by default;
// the test waits up to 3 s). Control: a fresh handshake that confirms keeps working.
void unproven_ends(Context& ctx) {
    Fixture f(ctx);
    (void)f.call("events");  // drain: only this connection's end counts
    f.peer.send_hello(f.peer.hello_packet(PacketType::kHello));
    auto ack = f.peer.expect(is_type(PacketType::kHelloAck), 500ms);
    check(ack.has_value(), "[CONN-17] no HELLO_ACK to our HELLO");
    const bool ended = f.saw_event(
        [](const nlohmann::json& e) { return e.at("kind") == "connection_failed"; }, 3000ms);
    check(ended, "[CONN-26] an unproven connection no stream uses did not end within 3 s");
    // Nothing carrying its token reaches it any more: a PROBE is not answered.
    wire::ProbePacket p;
    p.common = {.type = PacketType::kProbe, .dst_conn_id = ack->hello.src_conn_id, .dst_token = ack->hello.src_token};
    p.next_psn = f.peer.me().isn;
    p.psn_floor = p.next_psn;
    p.timestamp = Peer::now_stamp();
    std::byte buf[wire::kProbeSize];
    auto n = wire::encode_probe(p, buf);
    check(static_cast<bool>(n), "internal: PROBE does not encode");
    f.peer.send_bytes(std::span(buf, *n));
    check(f.peer.collect(is_type(PacketType::kAck), 30ms).empty(),
          "[CONN-26] [CONN-9] the ended unproven connection answered a PROBE");
    // Control: a new connection whose HELLO_ACK we confirm works.
    Identity next = f.peer.me();
    next.conn_id ^= 0x00ff0000;
    next.token = derive(ctx.seed, ctx.test_index, 9);
    f.peer.adopt_identity(next);
    f.peer.forget_remote();
    std::string why;
    check(f.peer.handshake(&why), "control: a new handshake after the unproven one ended: {}", why);
    check(f.peer.barrier().has_value(), "control: the new connection does not answer a PROBE");
}

// v1_hello: a version-1 HELLO (48 bytes) is refused with a version-1 CLOSE, reason
// VERSION_MISMATCH, addressed to its src_conn_id and src_token at its endpoint_port (sent
// here from another socket), and makes no connection.
void v1_hello(Context& ctx) {
    Fixture f(ctx);
    std::string why;
    auto other = open_socket(ctx, &why);
    check(other.has_value(), "cannot open a second socket: {}", why);
    const auto h = f.peer.hello_packet(PacketType::kHello);
    std::byte buf[wire::kHelloSize];
    auto n = wire::encode_hello_v1(h, buf);
    check(static_cast<bool>(n) && *n == 48, "internal: a version-1 HELLO does not encode to 48 bytes");
    f.peer.send_bytes_from(*other, std::span(buf, *n));
    auto close = f.peer.expect(is_v1_close, 500ms);
    check(close.has_value(), "[VER-1] no version-1 CLOSE to a version-1 HELLO (at its endpoint_port)");
    check(close->raw.bytes.size() == wire::kCloseSize, "[VER-1] the CLOSE is {} bytes", close->raw.bytes.size());
    check(close->close.reason == static_cast<uint32_t>(wire::CloseReason::kVersionMismatch),
          "[VER-1] the CLOSE's reason is {}, not VERSION_MISMATCH (3)", close->close.reason);
    check(close->close.common.dst_conn_id == h.src_conn_id && close->close.common.dst_token == h.src_token,
          "[VER-1] the CLOSE is not addressed to the HELLO's src_conn_id and src_token");
    check(f.peer.collect(is_type(PacketType::kHelloAck), 20ms).empty(), "[VER-1] a version-1 HELLO was accepted");
    // Control: the same identity in version 2 gets a connection.
    check(f.peer.handshake(&why), "[VER-1] control: the version-2 HELLO after it: {}", why);
}

// v1_probe: an initiator that has had no RETRY sends every third HELLO in version 1's
// 48-byte form with the same identity. A version-1 HELLO_ACK with the wrong token does not
// touch its connection; one with the right token fails it (version_mismatch).
void v1_probe(Context& ctx) {
    Fixture f(ctx);
    f.qp = f.create_qp();
    f.connect_qp(f.qp);
    std::optional<Rx> v2, v1;
    const auto until = std::chrono::steady_clock::now() + 400ms;
    while (!v1 && std::chrono::steady_clock::now() < until) {
        auto h = f.peer.expect(is_type(PacketType::kHello), 100ms);
        if (!h) continue;
        if (static_cast<uint8_t>(h->raw.bytes[0]) == wire::kLegacyVersion)
            v1 = h;
        else if (!v2)
            v2 = h;
    }
    check(v2.has_value(), "[CONN-1] no HELLO from the target");
    check(v1.has_value(), "[VER-1] no version-1 HELLO among the target's first retransmissions (400 ms)");
    check(v1->raw.bytes.size() == 48, "[VER-1] the version-1 HELLO is {} bytes, not 48", v1->raw.bytes.size());
    check(v1->hello.src_conn_id == v2->hello.src_conn_id && v1->hello.src_token == v2->hello.src_token &&
              v1->hello.isn == v2->hello.isn && v1->hello.msg_isn == v2->hello.msg_isn,
          "[VER-1] the version-1 HELLO carries another identity");
    // A version-1 HELLO_ACK with the wrong token: ignored.
    auto answer = f.peer.hello_packet(PacketType::kHelloAck);
    answer.common.dst_conn_id = v2->hello.src_conn_id;
    answer.common.dst_token = v2->hello.src_token ^ 0x100;
    std::byte buf[wire::kHelloSize];
    auto n = wire::encode_hello_v1(answer, buf);
    f.peer.send_bytes(std::span(buf, *n));
    f.peer.discard(20ms);
    auto ev = f.call("events").at("events");
    for (const auto& e : ev)
        check(e.at("kind") != "connection_failed",
              "[VER-1] [CONN-4] a version-1 HELLO_ACK with the wrong token failed the connection ({})", e.dump());
    // With the right token: the connection fails with version_mismatch.
    answer.common.dst_token = v2->hello.src_token;
    n = wire::encode_hello_v1(answer, buf);
    f.peer.send_bytes(std::span(buf, *n));
    const bool failed = f.saw_event(
        [](const nlohmann::json& e) {
            return e.at("kind") == "connection_failed" && e.value("status", "") == "version_mismatch";
        },
        500ms);
    check(failed, "[VER-1] a version-1 HELLO_ACK to its HELLO did not fail the connection with version_mismatch");
}

// capabilities: bits of `capabilities` this revision does not define are ignored: the
// HELLO is answered with none of them and the connection works ([VER-2]). (Bits 0,
// INTEGRITY, and 1, COALESCE, are defined; tests_integrity.cc covers the first, and the
// second changes nothing a peer that sends no FOLLOWED sees, so both are left out here.)
void capabilities(Context& ctx) {
    Fixture f(ctx);
    auto h = f.peer.hello_packet(PacketType::kHello);
    h.capabilities = ~wire::kCapDefined;
    f.peer.send_hello(h);
    auto ack = f.peer.expect(is_type(PacketType::kHelloAck), 500ms);
    check(ack.has_value(), "[VER-2] a HELLO with unknown capability bits was not answered");
    check((ack->hello.capabilities & ~wire::kCapDefined) == 0,
          "[VER-2] the HELLO_ACK announces undefined capabilities {:#x}", ack->hello.capabilities);
    f.peer.answer_hello(ack->hello);  // our confirmation (a HELLO_ACK, as an initiator's)
    f.peer.discard(5ms);
    f.qp = f.create_qp();
    f.connect_qp(f.qp);
    const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
    check(write_works(f, r, 33), "[VER-2] the connection does not work after unknown capability bits");
}

// endpoint_port: the peer endpoint is the HELLO's source IP and the port it announces,
// not its source port: a HELLO sent from another socket is answered at endpoint_port.
void endpoint_port(Context& ctx) {
    Fixture f(ctx);
    std::string why;
    auto other = open_socket(ctx, &why);
    check(other.has_value(), "cannot open a second socket: {}", why);
    const auto h = f.peer.hello_packet(PacketType::kHello);
    std::byte buf[wire::kHelloSize];
    auto n = wire::encode_hello(h, buf);
    f.peer.send_bytes_from(*other, std::span(buf, *n));
    auto ack = f.peer.expect(is_type(PacketType::kHelloAck), 500ms);
    check(ack.has_value(), "[CONN-13] no HELLO_ACK at the endpoint_port the HELLO announced");
    auto stray = other->receive(20ms);
    check(!stray.has_value(), "[CONN-13] the target answered at the HELLO's source port");
}

// key_tags: the tags of memory keys are random ([PLACE-29]): eight regions do not share
// the low 8 bits of their rkeys (tags have at least 8 bits; equal by chance: 2^-56), and a
// key with the right region number but another tag is refused with REMOTE_ACCESS.
void key_tags(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    std::vector<Region> regions;
    for (int i = 0; i < 8; ++i) regions.push_back(f.reg_mr(4096, {"local_write", "remote_write"}));
    bool differ = false;
    for (const auto& r : regions) differ |= (r.rkey & 0xff) != (regions[0].rkey & 0xff);
    check(differ, "[PLACE-29] eight rkeys share their low 8 bits ({:#x} ...): tags are not random", regions[0].rkey);
    const Region& r = regions[3];
    Message m = f.message(Opcode::kWrite, pattern(100, 34));
    m.rkey = r.rkey ^ 0x1;  // same region number, another tag
    m.remote_addr = r.addr;
    f.send_message(m);
    const auto nack = f.expect_nack();
    check(nack.reason == wire::NackReason::kRemoteAccess && nack.msg_seq == m.msg_seq,
          "[PLACE-29] [PLACE-4] a key with a wrong tag got NACK reason {}", static_cast<int>(nack.reason));
    for (auto b : f.read_mr(r, 0, 100)) check(b == std::byte{0}, "[PLACE-29] a key with a wrong tag wrote memory");
    // Control: on a new stream, the right key writes.
    f.switch_stream();
    check(write_works(f, regions[3], 35), "[PLACE-29] control: the region's own key does not write");
}

// answerless_request: a READ re-sent after its answer was reported delivered holds no
// answer at the target: NACK(INVALID_REQUEST) for it, not silence. Control: re-sent while
// the target still holds the answer, it is not refused.
void answerless_request(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(4096, {"local_write", "remote_read"});
    f.write_mr(r, 0, pattern(100, 36));
    const Message m = f.read_request(r, 100);
    const auto seg = f.peer.cut(m)[0];
    f.peer.send_segment(seg, 0);
    auto rx = f.peer.expect(is_type(PacketType::kData), 500ms);
    check(rx.has_value() && rx->data.opcode == Opcode::kReadResponse, "[PLACE-19] no READ_RESPONSE");
    f.peer.send_segment(seg, 1, kEct0, wire::data_flag::kRetx);  // the answer is still held
    (void)f.barrier(1);
    f.no_nack("[PLACE-28] a re-sent READ whose answer the target still holds was refused");
    f.peer.note_target_data(rx->data);
    f.ack_target_data({rx->data.path_id}, rx->data.msg_seq + 1);  // the answer is delivered
    (void)f.barrier(0);
    f.peer.discard(10ms);
    f.peer.send_segment(seg, 2, kEct0, wire::data_flag::kRetx);
    const auto n = f.expect_nack();
    check(n.reason == wire::NackReason::kInvalidRequest && n.msg_seq == m.msg_seq && n.stream_id == f.qp,
          "[PLACE-28] a READ re-sent after its answer was delivered got NACK reason {} for {:#x}",
          static_cast<int>(n.reason), n.msg_seq);
    check(f.peer.collect(is_type(PacketType::kData), 20ms).empty(),
          "[PLACE-28] [PLACE-18] the READ re-sent after its answer was delivered was answered again");
}

// flushed_answer: the target owes us a READ answer when its side of the stream fails (we
// refuse its own WRITE with NACK(REMOTE_ACCESS)); the answer is flushed, so the READ we
// re-send must be refused, not taken for a stale duplicate ([PLACE-27]), and so must a
// new message on the stream ([ERR-3]).
void flushed_answer(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region src = f.reg_mr(4096, {"local_write", "remote_read"});
    f.write_mr(src, 0, pattern(300, 37));
    f.call("post_send", {{"qp", f.qp}, {"opcode", "write"}, {"mr", src.mr}, {"offset", 0},
                         {"length", 300}, {"remote_addr", 0x10000}, {"rkey", 0x77}, {"wr_id", 5}});
    auto write = f.peer.expect(is_type(PacketType::kData), 500ms);
    check(write.has_value() && write->data.opcode == Opcode::kWrite, "the target sent no DATA for its WRITE");
    const Message m = f.read_request(src, 100);
    const auto seg = f.peer.cut(m)[0];
    f.peer.send_segment(seg, 0);
    auto answer = f.peer.expect(
        [](const Rx& x) { return x.is(PacketType::kData) && x.data.opcode == Opcode::kReadResponse; }, 500ms);
    check(answer.has_value(), "[PLACE-19] no READ_RESPONSE");
    // Refuse the target's WRITE: its stream fails with the READ's answer unacknowledged.
    wire::NackPacket n;
    n.common = {.type = PacketType::kNack, .dst_conn_id = f.peer.remote().conn_id, .dst_token = f.peer.remote().token};
    n.reason = wire::NackReason::kRemoteAccess;
    n.path_id = write->data.path_id;
    n.path_gen = write->data.path_gen;
    n.path_psn = write->data.path_psn;
    n.stream_id = write->data.stream_id;
    n.msg_seq = write->data.msg_seq;
    std::byte buf[wire::kNackSize];
    (void)wire::encode_nack(n, buf);
    f.peer.send_bytes(buf);
    const auto cq = f.poll(f.qp, 500);
    check(!cq.empty() && cq[0].at("status") == "remote_access",
          "[ERR-8] the refused WRITE did not complete with remote_access");
    f.peer.discard(10ms);
    f.peer.send_segment(seg, 1, kEct0, wire::data_flag::kRetx);
    const auto refusal = f.expect_nack();
    check(refusal.msg_seq == m.msg_seq && refusal.reason == wire::NackReason::kInvalidRequest,
          "[PLACE-27] the READ re-sent after its answer was flushed got NACK reason {} for {:#x}",
          static_cast<int>(refusal.reason), refusal.msg_seq);
    const Region dst = f.reg_mr(4096, {"local_write", "remote_write"});
    Message w = f.message(Opcode::kWrite, pattern(100, 38));
    w.rkey = dst.rkey;
    w.remote_addr = dst.addr;
    f.send_message(w);
    const auto later = f.expect_nack();
    check(later.msg_seq == w.msg_seq, "[PLACE-27] [ERR-3] a NACK for {:#x}, not the later WRITE {:#x}",
          later.msg_seq, w.msg_seq);
    for (auto b : f.read_mr(dst, 0, 100))
        check(b == std::byte{0}, "[PLACE-27] [ERR-3] the failed stream placed a later WRITE");
}


// smaller_max_payload: we announce max_payload 1024, below the target's: the target cuts
// its messages into segments of the smaller size ([DATA-4]), and no datagram exceeds
// 72 + 1024 bytes ([UDP-4]).
void smaller_max_payload(Context& ctx) {
    Fixture f(ctx);
    f.peer.me().max_payload = 1024;
    f.establish();
    check(f.peer.remote().max_payload > 1024, "cannot test: the target's max_payload is {}",
          f.peer.remote().max_payload);
    const Region src = f.reg_mr(8192, {"local_write"});
    f.write_mr(src, 0, pattern(5000, 39));
    f.call("post_send", {{"qp", f.qp}, {"opcode", "write"}, {"mr", src.mr}, {"offset", 0},
                         {"length", 5000}, {"remote_addr", 0x10000}, {"rkey", 0x77}, {"wr_id", 6}});
    std::set<uint32_t> offsets;
    std::set<uint16_t> paths;
    uint32_t msg_seq = 0;
    while (offsets.size() < 5) {
        auto rx = f.peer.expect(is_type(PacketType::kData), 500ms);
        check(rx.has_value(), "[DATA-4] only {} of 5 segments of a 5000-byte WRITE cut at 1024 arrived",
              offsets.size());
        const auto& h = rx->data;
        check(h.payload_len <= 1024 && h.offset % 1024 == 0 &&
                  h.payload_len == std::min<uint32_t>(1024, 5000 - h.offset),
              "[DATA-4] [UDP-4] a segment at offset {} of {} bytes, not cut at our max_payload 1024", h.offset,
              h.payload_len);
        check(rx->raw.bytes.size() <= wire::kDataHeaderSize + 1024, "[UDP-4] a {}-byte datagram",
              rx->raw.bytes.size());
        f.peer.note_target_data(h);
        paths.insert(h.path_id);
        offsets.insert(h.offset);
        msg_seq = h.msg_seq;
    }
    f.ack_target_data(paths, msg_seq + 1);
    const auto cq = f.poll(f.qp, 500);
    check(cq.size() == 1 && cq[0].at("status") == "success", "[DATA-4] the WRITE did not complete");
}


// nack_names_psn: a NACK names the refused DATA's own path, generation and PSN, whatever
// that DATA's psn_floor ([NACK-2]); here the floor lies below the PSN.
void nack_names_psn(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
    Message m = f.message(Opcode::kWrite, pattern(100, 40));
    m.rkey = r.rkey ^ 0x1;  // refused: no such key
    m.remote_addr = r.addr;
    const auto seg = f.peer.cut(m)[0];
    f.peer.path(0).next_psn += 3;  // three PSNs never sent: the floor stays below them
    wire::DataHeader h = f.peer.next_header(seg, 0, wire::data_flag::kAckNow);
    h.psn_floor = h.path_psn - 3;
    f.peer.send_bytes(Peer::encode_data(h, seg.payload));
    const auto n = f.expect_nack();
    check(n.path_id == h.path_id && n.path_gen == h.path_gen && n.path_psn == h.path_psn,
          "[NACK-2] the NACK names path {} gen {} PSN {:#x}, the DATA was path {} gen {} PSN {:#x} (floor {:#x})",
          n.path_id, n.path_gen, n.path_psn, h.path_id, h.path_gen, h.path_psn, h.psn_floor);
    check(n.msg_seq == m.msg_seq && n.stream_id == f.qp, "[NACK-2] the NACK names msg {:#x} stream {:#x}",
          n.msg_seq, n.stream_id);
}

// short_segment: a segment shorter than min(S, msg_len - offset) is malformed and not
// placed ([PLACE-9]); the full one afterwards is (the control).
void short_segment(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(65536, {"local_write", "remote_write"});
    const uint32_t seg = f.peer.segment_size();
    Message m = f.message(Opcode::kWrite, pattern(3 * size_t{seg}, 41));
    m.rkey = r.rkey;
    m.remote_addr = r.addr;
    auto segs = f.peer.cut(m);
    const uint64_t malformed = f.counter("malformed");
    f.peer.send_segment(segs[0]);
    Segment shorter = segs[1];  // a middle segment: no LAST, so only its length is wrong
    shorter.payload.resize(seg - 100);
    f.peer.send_segment(shorter);
    (void)f.barrier();
    check(f.counter("malformed") == malformed + 1, "[PLACE-9] a segment 100 bytes short was not counted malformed");
    for (auto b : f.read_mr(r, seg, seg)) check(b == std::byte{0}, "[PLACE-9] a segment 100 bytes short was placed");
    f.peer.send_segment(segs[1]);
    f.peer.send_segment(segs[2]);
    (void)f.barrier();
    check(f.read_mr(r, 0, 3 * size_t{seg}) == m.body, "control: the full segments were not placed");
}

}  // namespace

void add_proof_tests(std::vector<TestCase>& out) {
    out.push_back({"handshake.forged_cookie", "[CONN-25]",
                   "a restart's HELLO with a forged cookie, or one made for another token, gets a RETRY",
                   forged_cookie});
    out.push_back({"handshake.retry_echo", "[CONN-25] [CONN-4]",
                   "after our RETRY the target's HELLOs echo its cookie; a RETRY with a wrong token is ignored",
                   retry_echo});
    out.push_back({"handshake.confirmation", "[CONN-26] [CONN-16]",
                   "an initiator established by our HELLO_ACK confirms with its own HELLO_ACK", confirmation});
    out.push_back({"handshake.unproven_ends", "[CONN-26]",
                   "an unproven connection no stream uses ends after peer_dead_timeout", unproven_ends});
    out.push_back({"handshake.v1_hello", "[VER-1] [CONN-13]",
                   "a version-1 HELLO gets a version-1 CLOSE(VERSION_MISMATCH) and makes no connection",
                   v1_hello});
    out.push_back({"handshake.v1_probe", "[VER-1]",
                   "the target's every third HELLO is version 1; a version-1 HELLO_ACK fails it, unless forged",
                   v1_probe});
    out.push_back({"handshake.capabilities", "[VER-2]",
                   "unknown capability bits are ignored: HELLO_ACK announces none of them and the connection works",
                   capabilities});
    out.push_back({"handshake.endpoint_port", "[CONN-13]",
                   "a HELLO from another source port is answered at the endpoint_port it announces",
                   endpoint_port});
    out.push_back({"protection.key_tags", "[PLACE-29] [PLACE-4]",
                   "memory-key tags are random, and a wrong tag is refused with REMOTE_ACCESS", key_tags});
    out.push_back({"sender.smaller_max_payload", "[DATA-4] [UDP-4]",
                   "with our max_payload below the target's, its segments are cut at ours",
                   smaller_max_payload});
    out.push_back({"protection.nack_names_psn", "[NACK-2]",
                   "a NACK names the refused DATA's path, generation and PSN, not its floor", nack_names_psn});
    out.push_back({"placement.short_segment", "[PLACE-9]",
                   "a segment shorter than its offset's length is malformed and not placed", short_segment});
    out.push_back({"rdma.answerless_request", "[PLACE-28]",
                   "a READ re-sent after its answer was delivered gets NACK(INVALID_REQUEST)",
                   answerless_request});
    out.push_back({"rdma.flushed_answer", "[PLACE-27] [ERR-3]",
                   "a READ whose answer the target's stream failure flushed is refused when re-sent",
                   flushed_answer});
}

}  // namespace mroce::conform
