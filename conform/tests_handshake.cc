// conform/tests_handshake.cc — opening a connection (spec §4.1–§4.3): the HELLO_ACK the
// target answers with, repeated and conflicting HELLOs, the target's own HELLO and its
// retransmission, DATA before establishment, zero ids, a peer restart, the numbers HELLOs
// carry and HELLO_ACKs echo, and DATA dropped by a peer still opening (DROPPED).
#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "conform/checks.h"
#include "conform/fixture.h"

namespace mroce::conform {
namespace {

using namespace std::chrono_literals;
using wire::Opcode;
using wire::PacketType;

// send_early_data: the next message, a WRITE of `length` bytes of pattern(`seed`) into `r`,
// as one DATA on our path 0 (PSN isn + `nth`, the connection's first PSN for nth 0)
// addressed by id and token to the connection whose HELLO `theirs` we have not answered:
// the target receives it while still Connecting. Returns the message.
Message send_early_data(Fixture& f, const wire::HelloPacket& theirs, const Region& r, size_t length,
                        uint32_t seed, uint32_t nth = 0) {
    Message m = f.message(Opcode::kWrite, pattern(length, seed));
    m.rkey = r.rkey;
    m.remote_addr = r.addr;
    // The peer sends to the target only after a handshake; this one is built by hand.
    const Segment seg = f.peer.cut(m)[0];
    wire::DataHeader h = seg.hdr;
    h.common = {.type = PacketType::kData,
                .dst_conn_id = theirs.src_conn_id,
                .dst_token = theirs.src_token};
    h.path_psn = f.peer.me().isn + nth;  // nth 0: the PSN the connection would expect first
    h.psn_floor = h.path_psn;
    h.timestamp = Peer::now_stamp();
    f.peer.send_bytes(Peer::encode_data(h, seg.payload));
    return m;
}

// is_v1: a HELLO in version 1's form ([VER-1]): no hello_flags, no number.
bool is_v1(const Rx& rx) { return static_cast<uint8_t>(rx.raw.bytes[0]) == wire::kLegacyVersion; }

// hello_ack: the fields of the target's answer to our HELLO.
void hello_ack(Context& ctx) {
    Fixture f(ctx);
    f.peer.send_hello(f.peer.hello_packet(PacketType::kHello));
    auto rx = f.peer.expect(is_type(PacketType::kHelloAck), 500ms);
    check(rx.has_value(), "[CONN-17] no HELLO_ACK to a HELLO from a new peer");
    const auto& h = rx->hello;
    check(h.common.dst_conn_id == f.peer.me().conn_id && h.common.dst_token == f.peer.me().token,
          "[CONN-1] [CONN-2] HELLO_ACK not addressed to our src_conn_id and src_token");
    check(h.src_conn_id != 0 && h.src_token != 0, "[CONN-2] HELLO_ACK with a zero id or token");
    check(h.isn != 0 && h.msg_isn != 0, "[CONN-5] isn or msg_isn is 0");
    check(h.num_paths >= 1 && h.num_paths <= wire::kMaxPaths, "[CONN-3] num_paths {}", h.num_paths);
    check(h.max_payload >= wire::kMinMaxPayload && h.max_payload <= wire::kMaxMaxPayload,
          "[UDP-3] max_payload {}", h.max_payload);
    check(h.endpoint_port == ctx.target.udp.port,
          "[UDP-1] [CONN-2] endpoint_port {} is not the port the target was configured with, {}",
          h.endpoint_port,
          ctx.target.udp.port);
    check((h.capabilities & ~wire::kCapDefined) == 0, "[CONN-2] [VER-2] undefined capability bits {:#x}",
          h.capabilities);
    check(rx->raw.from.same_host(ctx.target.udp), "[CONN-2] HELLO_ACK from another host");
}

// repeated_hello: a lost HELLO_ACK is repaired by our next HELLO, answered the same way;
// a HELLO of the same connection id with another token is not ours and is ignored.
void repeated_hello(Context& ctx) {
    Fixture f(ctx);
    std::optional<wire::HelloPacket> first;
    for (int i = 0; i < 3; ++i) {
        f.peer.send_hello(f.peer.hello_packet(PacketType::kHello));
        auto rx = f.peer.expect(is_type(PacketType::kHelloAck), 500ms);
        check(rx.has_value(), "[CONN-6] HELLO number {} was not answered", i + 1);
        if (!first) first = rx->hello;
        check(rx->hello.src_conn_id == first->src_conn_id && rx->hello.src_token == first->src_token &&
                  rx->hello.isn == first->isn && rx->hello.msg_isn == first->msg_isn,
              "[CONN-6] [CONN-10] a repeated HELLO got another connection's HELLO_ACK");
    }
    f.peer.answer_hello(*first);  // record the target (the HELLO_ACK we sent is harmless)
    f.peer.discard(5ms);
    f.qp = f.create_qp();
    f.connect_qp(f.qp);
    const uint64_t malformed = f.counter("malformed");
    auto other = f.peer.hello_packet(PacketType::kHello);
    other.src_token ^= 0x5a5a;
    f.peer.send_hello(other);
    (void)f.barrier();
    auto answers = f.peer.collect(is_type(PacketType::kHelloAck), 30ms);
    check(answers.empty(), "[CONN-18] a HELLO with a different src_token was answered");
    check(f.counter("malformed") == malformed + 1,
          "[CONN-18] a HELLO with a different src_token was not counted as malformed");
    // The connection still works with the original identity.
    const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
    Message m = f.message(Opcode::kWrite, pattern(700, 21));
    m.rkey = r.rkey;
    m.remote_addr = r.addr;
    f.send_message(m);
    (void)f.barrier();
    check(f.read_mr(r, 0, 700) == m.body, "[CONN-18] the connection broke after the ignored HELLO");
}

// target_hello: the target opens the connection itself when a queue pair connects to us.
void target_hello(Context& ctx) {
    Fixture f(ctx);
    f.qp = f.create_qp();
    f.connect_qp(f.qp);
    auto first = f.peer.expect(is_type(PacketType::kHello), 500ms);
    check(first.has_value(), "[CONN-10] [CONN-1] connect_qp towards a new peer sent no HELLO");
    const auto& h = first->hello;
    check(h.src_conn_id && h.src_token && h.isn && h.msg_isn, "[CONN-5] a zero id, token or ISN");
    check(h.endpoint_port == ctx.target.udp.port, "[CONN-1] endpoint_port {} (target port {})",
          h.endpoint_port, ctx.target.udp.port);
    // Not answered: [CONN-12] resends after handshake_timeout, with the same identity.
    auto again = f.peer.expect(is_type(PacketType::kHello), 500ms);
    check(again.has_value(), "[CONN-12] the unanswered HELLO was not sent again within 500 ms");
    check(again->hello.src_conn_id == h.src_conn_id && again->hello.src_token == h.src_token &&
              again->hello.isn == h.isn && again->hello.msg_isn == h.msg_isn,
          "[CONN-5] [CONN-12] the retransmitted HELLO carries another identity");
    f.peer.answer_hello(h);
    f.peer.discard(5ms);
    const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
    Message m = f.message(Opcode::kWrite, pattern(900, 22));
    m.rkey = r.rkey;
    m.remote_addr = r.addr;
    f.send_message(m);
    (void)f.barrier();
    check(f.read_mr(r, 0, 900) == m.body, "[CONN-16] after our HELLO_ACK the WRITE was not placed");
    // Established: no more HELLOs ([CONN-16] step 4).
    auto late = f.peer.collect(is_type(PacketType::kHello), 30ms);
    check(late.empty(), "[CONN-16] the target kept sending HELLO after our HELLO_ACK");
}

// data_before_established: DATA to a connection still in Connecting is not processed.
void data_before_established(Context& ctx) {
    Fixture f(ctx);
    const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
    f.qp = f.create_qp();
    f.connect_qp(f.qp);
    auto hello = f.peer.expect(is_type(PacketType::kHello), 500ms);
    check(hello.has_value(), "[CONN-1] no HELLO from the target");
    // Address the target's connection with its own id and token, without answering.
    (void)send_early_data(f, hello->hello, r, 400, 23);
    auto answer = f.peer.collect([](const Rx& r) { return r.is(PacketType::kAck) || r.is(PacketType::kNack); }, 30ms);
    check(answer.empty(), "[CONN-19] DATA to a Connecting connection was answered");
    f.peer.answer_hello(hello->hello);
    f.peer.path(0).next_psn = f.peer.me().isn + 1;  // the early DATA took PSN isn
    const auto ack = f.barrier();
    check(!covers(ack, f.peer.me().isn),
          "[CONN-19] the DATA sent before establishment was accounted (cum {:#x})", ack.cum_psn);
    for (auto b : f.read_mr(r, 0, 400))
        check(b == std::byte{0}, "[CONN-19] the DATA sent before establishment was placed");
}

// zero_ids: a HELLO with src_token 0 or src_conn_id 0 makes no connection.
void zero_ids(Context& ctx) {
    Fixture f(ctx);
    auto h = f.peer.hello_packet(PacketType::kHello);
    h.src_token = 0;
    f.peer.send_hello(h);
    h = f.peer.hello_packet(PacketType::kHello);
    h.src_conn_id = 0;
    f.peer.send_hello(h);
    auto answers = f.peer.collect(is_type(PacketType::kHelloAck), 50ms);
    check(answers.empty(), "[CONN-23] a HELLO with a zero src_token or src_conn_id was answered");
    std::string why;
    check(f.peer.handshake(&why), "control: the same HELLO with non-zero ids: {}", why);
}

// restart: a HELLO from the same peer endpoint with another connection id is a restart:
// the old connection fails and a new one is made ([CONN-14]); the old one then ignores
// DATA ([CONN-9]).
void restart(Context& ctx) {
    Fixture f(ctx);
    f.establish();
    const Region r = f.reg_mr(8192, {"local_write", "remote_write"});
    const Identity old_remote = f.peer.remote();
    Identity next = f.peer.me();
    next.conn_id ^= 0x00ff0000;
    next.token = derive(ctx.seed, ctx.test_index, 9);
    const Identity old_me = f.peer.me();
    f.peer.adopt_identity(next);
    auto hello = f.peer.hello_packet(PacketType::kHello);
    f.peer.send_hello(hello);
    // [CONN-25]: a restart must prove its address first: a RETRY, then our HELLO with its
    // cookie; the live connection is untouched until then.
    auto retry = f.peer.expect(is_type(PacketType::kRetry), 500ms);
    check(retry.has_value(), "[CONN-14] [CONN-25] no RETRY to the restarted peer's HELLO");
    hello.cookie = retry->retry.cookie;
    f.peer.send_hello(hello);
    auto ack = f.peer.expect(is_type(PacketType::kHelloAck), 500ms);
    check(ack.has_value(), "[CONN-14] no HELLO_ACK to the restarted peer's HELLO with its cookie");
    check(ack->hello.src_conn_id != old_remote.conn_id,
          "[CONN-14] the restart was answered by the old connection {:#x}", old_remote.conn_id);
    f.peer.answer_hello(ack->hello);  // record the new connection (our HELLO_ACK is ignored)
    auto ev = f.call("events").at("events");
    bool failed = false;
    for (const auto& e : ev) failed |= e.at("kind") == "connection_failed";
    check(failed, "[CONN-14] the old connection did not fail (events: {})", ev.dump());
    // DATA to the old connection, with its valid token: ignored by a Failed connection.
    Message m = f.message(Opcode::kWrite, pattern(300, 24));
    m.rkey = r.rkey;
    m.remote_addr = r.addr;
    Segment seg = f.peer.cut(m)[0];
    wire::DataHeader h = seg.hdr;
    h.common = {.type = PacketType::kData, .dst_conn_id = old_remote.conn_id, .dst_token = old_remote.token};
    h.path_psn = old_me.isn + 100;
    h.psn_floor = h.path_psn;
    h.flags |= wire::data_flag::kAckNow;
    f.peer.send_bytes(Peer::encode_data(h, seg.payload));
    (void)f.barrier();  // on the new connection: the old DATA was handled before
    auto stray = f.peer.collect(
        [&](const Rx& x) { return x.decoded && x.type != PacketType::kHelloAck && x.raw.bytes.size() >= 8 &&
                                  wire::load_be32(x.raw.bytes.data() + 4) == old_me.conn_id; },
        30ms);
    check(stray.empty(), "[CONN-9] the failed connection answered a DATA");
    for (auto b : f.read_mr(r, 0, 300))
        check(b == std::byte{0}, "[CONN-9] the failed connection placed a DATA");
}

// simultaneous_open: both sides send HELLO; the target's connection answers ours with a
// HELLO_ACK under the identity of its own HELLO: one connection ([CONN-7]).
void simultaneous_open(Context& ctx) {
    Fixture f(ctx);
    f.qp = f.create_qp();
    f.connect_qp(f.qp);
    auto theirs = f.peer.expect(is_type(PacketType::kHello), 500ms);
    check(theirs.has_value(), "[CONN-1] no HELLO from the target");
    f.peer.send_hello(f.peer.hello_packet(PacketType::kHello));
    auto ack = f.peer.expect(is_type(PacketType::kHelloAck), 500ms);
    check(ack.has_value(), "[CONN-7] our HELLO to a Connecting target was not answered");
    check(ack->hello.src_conn_id == theirs->hello.src_conn_id && ack->hello.src_token == theirs->hello.src_token &&
              ack->hello.isn == theirs->hello.isn,
          "[CONN-7] the HELLO_ACK comes from another connection than the target's HELLO");
    f.peer.answer_hello(theirs->hello);  // our HELLO_ACK to theirs: agrees, changes nothing
    f.peer.discard(5ms);
    const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
    Message m = f.message(Opcode::kWrite, pattern(256, 25));
    m.rkey = r.rkey;
    m.remote_addr = r.addr;
    f.send_message(m);
    (void)f.barrier();
    check(f.read_mr(r, 0, 256) == m.body, "[CONN-7] the simultaneously opened connection does not work");
    auto late = f.peer.collect(is_type(PacketType::kHello), 30ms);
    check(late.empty(), "[CONN-7] [CONN-16] the target kept sending HELLO after it was established");
}

// distinct_ids: two peer endpoints get two connections with different, non-zero ids and
// tokens ([CONN-11], [CONN-5]).
void distinct_ids(Context& ctx) {
    Fixture f(ctx);
    std::string why;
    check(f.peer.handshake(&why), "{}", why);
    auto socket = open_socket(ctx, &why);
    check(socket.has_value(), "cannot open a second socket: {}", why);
    Identity other = f.peer.me();
    other.conn_id ^= 0x10000;
    other.token ^= 0x1234;
    Peer second(std::move(*socket), f.peer.target(), other);
    check(second.handshake(&why), "[CONN-17] the second peer endpoint: {}", why);
    const auto& a = f.peer.remote();
    const auto& b = second.remote();
    check(a.conn_id != 0 && b.conn_id != 0 && a.conn_id != b.conn_id,
          "[CONN-11] two connections got ids {:#x} and {:#x}", a.conn_id, b.conn_id);
    check(a.token != b.token, "[CONN-5] two connections got the same token");
    check(second.violations().empty(), "target sent a bad packet: {}",
          second.violations().empty() ? "" : second.violations().front());
}

// queued_while_connecting: work posted before the connection is established is kept and
// sent once it is ([STREAM-6]).
void queued_while_connecting(Context& ctx) {
    Fixture f(ctx);
    const Region src = f.reg_mr(4096, {"local_write"});
    const auto content = pattern(500, 26);
    f.write_mr(src, 0, content);
    f.qp = f.create_qp();
    f.connect_qp(f.qp);
    f.call("post_send", {{"qp", f.qp}, {"opcode", "write"}, {"mr", src.mr}, {"length", 500},
                         {"remote_addr", 0x1000}, {"rkey", 0x99}, {"wr_id", 1}});
    auto hello = f.peer.expect(is_type(PacketType::kHello), 500ms);
    check(hello.has_value(), "[CONN-1] no HELLO from the target");
    check(f.peer.collect(is_type(PacketType::kData), 20ms).empty(),
          "[CONN-19] [STREAM-6] DATA left before the connection was established");
    f.peer.answer_hello(hello->hello);
    auto data = f.peer.expect(is_type(PacketType::kData), 500ms);
    check(data.has_value(), "[STREAM-6] the WRITE posted while Connecting was not sent after establishment");
    check(data->payload == content, "[STREAM-6] the queued WRITE carries other bytes");
    f.peer.note_target_data(data->data);
    f.ack_target_data({data->data.path_id}, f.peer.remote().msg_isn + 1);
    const auto cq = f.poll(f.qp, 500);
    check(cq.size() == 1 && cq[0].at("status") == "success", "[STREAM-6] the queued WRITE did not complete");
}

// hello_echo: each HELLO_ACK echoes the number of the latest HELLO the target received
// from us ([CONN-32]): not the first, not the largest, and 0 after a HELLO numbered 0 (a
// peer of an earlier revision, whose byte 3 is reserved). Each HELLO is answered before the
// next leaves, so the latest is the one just sent; then two leave at once: the answer to
// the first may echo either, but the second answer, owed only once both arrived, echoes
// the second.
void hello_echo(Context& ctx) {
    Fixture f(ctx);
    auto hello = f.peer.hello_packet(PacketType::kHello);
    // 7; a repeat numbered 9 (as if 8 was lost); 0; a number below the previous one; 255
    // and the 1 that follows it.
    constexpr uint8_t kNumbers[] = {7, 9, 0, 4, 255, 1};
    for (const uint8_t seq : kNumbers) {
        hello.hello_seq = seq;
        f.peer.send_hello(hello);
        auto rx = f.peer.expect(is_type(PacketType::kHelloAck), 500ms);
        check(rx.has_value(), "[CONN-6] our HELLO numbered {} was not answered", seq);
        check(rx->hello.hello_echo == seq,
              "[CONN-32] the HELLO_ACK to our HELLO numbered {} echoes {}", seq,
              rx->hello.hello_echo);
    }
    hello.hello_seq = 12;
    f.peer.send_hello(hello);
    hello.hello_seq = 13;
    f.peer.send_hello(hello);
    std::vector<uint8_t> echoes;
    while (echoes.size() < 2) {
        auto rx = f.peer.expect(is_type(PacketType::kHelloAck), 500ms);
        check(rx.has_value(), "[CONN-6] [CONN-30] {} HELLO_ACK(s) to two HELLOs", echoes.size());
        echoes.push_back(rx->hello.hello_echo);
    }
    check((echoes[0] == 12 || echoes[0] == 13) && echoes[1] == 13,
          "[CONN-32] HELLOs numbered 12 and 13 sent at once were answered with echoes {} and {} "
          "(the second answer must echo 13)",
          echoes[0], echoes[1]);
}

// hello_numbering: the target's HELLOs, left unanswered for several rounds, are numbered
// 1, 2, 3, ...: copies and rounds alike ([CONN-30], [CONN-12]), never 0 ([CONN-32]; the peer
// checks that of every HELLO). A HELLO in version 1's form ([VER-1], mroce's every third
// round's first copy) has no number and takes none. Each number is the one before plus
// 1, or plus a few where HELLOs were lost on the way (a lossy testbed plane): a repeat, a
// step back or a jump of more than kMaxGap fails. Then our HELLO_ACK establishes the
// connection, and the target's confirmation ([CONN-26]) echoes 0: no HELLO of ours came.
void hello_numbering(Context& ctx) {
    // At [CONN-30]'s default of 4 copies a round, 4 rounds.
    constexpr int kHellos = 14;
    constexpr int kMaxGap = 8;  // HELLOs lost in a row that the check tolerates
    Fixture f(ctx);
    f.qp = f.create_qp();
    f.connect_qp(f.qp);
    std::optional<wire::HelloPacket> latest;
    int previous = 0;  // the number of the previous version-2 HELLO, 0 before the first
    std::string seen;
    for (int i = 0; i < kHellos; ++i) {
        auto rx = f.peer.expect(is_type(PacketType::kHello), 500ms);
        check(rx.has_value(), "[CONN-12] only {} HELLOs arrived unanswered (numbers{})", i, seen);
        const bool v1 = static_cast<uint8_t>(rx->raw.bytes[0]) == wire::kLegacyVersion;
        seen += v1 ? " v1" : fmt::format(" {}", rx->hello.hello_seq);
        if (v1) continue;
        check(!rx->hello.dropped,
              "[CONN-31] HELLO {} says DROPPED (numbers{}), but we sent the target no DATA", i + 1,
              seen);
        const int n = rx->hello.hello_seq;
        const int step = previous == 0 ? n : (n - previous + 255) % 255;  // 255 is followed by 1
        check(n != 0 && step >= 1 && step <= kMaxGap,
              "[CONN-32] HELLO {} is numbered {} after {} (numbers{}): the first is 1 and each "
              "later one the previous plus 1",
              i + 1, n, previous, seen);
        previous = n;
        latest = rx->hello;
    }
    check(latest.has_value(), "[CONN-32] no version-2 HELLO among the first {}", kHellos);
    f.peer.answer_hello(*latest);
    auto ack = f.peer.expect(is_type(PacketType::kHelloAck), 200ms);
    check(ack.has_value(), "[CONN-26] [CONN-16] the initiator did not confirm with a HELLO_ACK");
    check(ack->hello.hello_echo == 0,
          "[CONN-32] the initiator's confirmation echoes {}, but no HELLO of ours reached it (0)",
          ack->hello.hello_echo);
}

// [CONN-31] from the side that drops. The target opens (connect_qp) and we answer nothing
// at first, so its connection stays Connecting; DATA we send to it (its id and token, from
// its HELLO) is dropped ([CONN-19]) and must be reported: by a HELLO sent at once at the
// first drop after a scheduled HELLO copy or round, with DROPPED; or, when our answer
// establishes it before its next HELLO, by DROPPED in the HELLO_ACK confirming its
// establishment ([CONN-16]). A HELLO that left before our DATA arrived crossed it and may
// lack the flag.
//
// "At once" is told from the schedule by time, and only where the schedule leaves time:
// we send the DATA when the target has sent no HELLO for kQuiet, in a pause between two
// rounds ([CONN-12]: their gaps double). mroce's rounds are 4 copies 250 us apart
// ([CONN-30], handshake_timeout 1 ms), and the pauses between them last 1.25, 3.25, 7.25,
// 15.25 and then 31.25 ms (a loaded host stretches them by a few hundred us): the first
// of kQuiet = 20 ms is one of 31.25 ms, which ends 11 ms later. A HELLO sent at once
// arrives about 100 us after our DATA (75 to 135 us in 30 runs on a loaded 2-core host),
// the next scheduled one 11 ms later; kPrompt lies between.
constexpr Duration kQuiet = std::chrono::duration_cast<Duration>(20ms);
constexpr Duration kQuietWithin = std::chrono::duration_cast<Duration>(300ms);
constexpr Duration kPrompt = std::chrono::duration_cast<Duration>(5ms);
constexpr int kPromptAttempts = 3;

// HelloLog: the target's HELLOs as a test saw them, for its messages: each version-2 one's
// number (D when it says DROPPED), v1 for one in version 1's form ([VER-1]: no flags, no
// number), and the test's own steps in parentheses.
struct HelloLog {
    std::string seen;
    std::optional<wire::HelloPacket> latest;  // the latest version-2 HELLO
    // note records rx; returns whether it is a version-2 HELLO that says DROPPED.
    bool note(const Rx& rx) {
        if (is_v1(rx)) {
            seen += " v1";
            return false;
        }
        seen += fmt::format(" {}{}", rx.hello.hello_seq, rx.hello.dropped ? "D" : "");
        latest = rx.hello;
        return rx.hello.dropped;
    }
};

// Quiet: the target's connection opened and left unanswered until a pause.
struct Quiet {
    HelloLog log;
    bool quiet = false;  // it sent no HELLO for kQuiet (within kQuietWithin)
};

// open_until_quiet: connect_qp, then the target's HELLOs until it sends none for kQuiet
// (at most kQuietWithin). None of them may say DROPPED: we sent no DATA yet.
Quiet open_until_quiet(Fixture& f) {
    Quiet q;
    f.qp = f.create_qp();
    f.connect_qp(f.qp);
    auto first = f.peer.expect(is_type(PacketType::kHello), 500ms);
    check(first.has_value(), "[CONN-1] no HELLO from the target");
    q.log.note(*first);
    const auto until = std::chrono::steady_clock::now() + kQuietWithin;
    while (!q.quiet && std::chrono::steady_clock::now() < until) {
        auto rx = f.peer.expect(is_type(PacketType::kHello), kQuiet);
        if (rx) q.log.note(*rx);
        q.quiet = !rx.has_value();
    }
    check(q.log.latest.has_value(), "[CONN-1] no version-2 HELLO from the target (HELLOs:{})",
          q.log.seen);
    check(q.log.seen.find('D') == std::string::npos,
          "[CONN-31] a HELLO of the target says DROPPED, but it dropped nothing (HELLOs:{})",
          q.log.seen);
    return q;
}

// Reported: the HELLO that said DROPPED after our DATA, and how long after it.
struct Reported {
    wire::HelloPacket hello;
    Duration after{};
};

// drop_reported: our DATA to the Connecting target, and the HELLO that reports its drop:
// the first HELLO after it, or the second where one crossed it (any other is a failure).
Reported drop_reported(Fixture& f, HelloLog& log, const Region& r, uint32_t seed) {
    (void)send_early_data(f, *log.latest, r, 400, seed);
    const auto sent = std::chrono::steady_clock::now();
    log.seen += " (our DATA)";
    for (int i = 0; i < 2; ++i) {
        auto rx = f.peer.expect(is_type(PacketType::kHello), 500ms);
        check(rx.has_value(), "[CONN-12] no HELLO after our DATA (HELLOs, D: DROPPED:{})",
              log.seen);
        if (log.note(*rx))
            return {rx->hello,
                    std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - sent)};
    }
    check(false,
          "[CONN-31] neither of the two HELLOs after the DATA the Connecting target dropped says "
          "DROPPED (one may have crossed the DATA; HELLOs, D: DROPPED:{})",
          log.seen);
    return {};
}

// dropped_flag: the first drop makes the Connecting target send a HELLO with DROPPED at
// once, the next HELLO no longer says it (nothing dropped since), and none before our DATA
// did. Where the target paused (kQuiet), the HELLO with DROPPED must come within kPrompt
// of our DATA; one later (the target's, or the suite's host being busy) is asked again
// from a fresh reset, up to kPromptAttempts times: late every time fails.
void dropped_flag(Context& ctx) {
    std::string late;
    for (int attempt = 0; attempt < kPromptAttempts; ++attempt) {
        Fixture f(ctx);
        const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
        Quiet q = open_until_quiet(f);
        const Reported d = drop_reported(f, q.log, r, 27);
        for (;;) {
            auto rx = f.peer.expect(is_type(PacketType::kHello), 500ms);
            check(rx.has_value(), "[CONN-12] no HELLO after the one with DROPPED (HELLOs:{})",
                  q.log.seen);
            const bool dropped = q.log.note(*rx);
            if (is_v1(*rx)) continue;
            check(!dropped,
                  "[CONN-31] the HELLO after the one that said DROPPED says it again, but we sent "
                  "no DATA since (HELLOs, D: DROPPED:{})",
                  q.log.seen);
            break;
        }
        if (!q.quiet || d.after <= kPrompt) return;
        late += fmt::format("{}attempt {}: {} us (HELLOs:{})", late.empty() ? "" : "; ",
                            attempt + 1, d.after.count() / 1000, q.log.seen);
        check(f.peer.violations().empty(), "target sent a bad packet: {}",
              f.peer.violations().empty() ? "" : f.peer.violations().front());
    }
    check(false,
          "[CONN-31] the HELLO with DROPPED came more than {} us after our DATA in each of {} "
          "attempts, though the target had sent no HELLO for {} ms before it: not at once "
          "({})",
          kPrompt.count() / 1000, kPromptAttempts, kQuiet.count() / 1000000, late);
}

// dropped_confirmed: the answer that establishes the target comes before its next HELLO,
// so its confirming HELLO_ACK ([CONN-16], [CONN-26]) says DROPPED for the drop since its
// last HELLO. Our first DATA makes it send a HELLO with DROPPED at once; our second, which
// follows that HELLO at once, is dropped too but prompts none (one HELLO per scheduled
// copy, and the next is kQuiet away), and our HELLO_ACK follows it. Exactly one of the
// target's packets after the second DATA says DROPPED: a HELLO, if it sent one before our
// answer arrived, else the confirmation. A HELLO first leaves the confirmation unjudged:
// asked again from a fresh reset, up to kPromptAttempts times, then skipped.
void dropped_confirmed(Context& ctx) {
    std::string unjudged;
    for (int attempt = 0; attempt < kPromptAttempts; ++attempt) {
        Fixture f(ctx);
        const Region r = f.reg_mr(4096, {"local_write", "remote_write"});
        Quiet q = open_until_quiet(f);
        const Reported d = drop_reported(f, q.log, r, 28);
        (void)send_early_data(f, d.hello, r, 400, 29, 1);
        f.peer.learn_remote(d.hello);
        auto answer = f.peer.hello_packet(PacketType::kHelloAck);
        answer.hello_echo = d.hello.hello_seq;  // [CONN-32]: the latest HELLO we received
        f.peer.send_hello(answer);
        q.log.seen += " (our second DATA, our HELLO_ACK)";
        int hellos_dropped = 0;
        std::optional<wire::HelloPacket> confirmation;
        while (!confirmation) {
            auto rx = f.peer.expect(
                [](const Rx& x) { return x.is(PacketType::kHello) || x.is(PacketType::kHelloAck); },
                500ms);
            check(rx.has_value(),
                  "[CONN-16] [CONN-26] the target, established by our HELLO_ACK, did not confirm "
                  "with a HELLO_ACK (HELLOs:{})",
                  q.log.seen);
            if (rx->is(PacketType::kHello))
                hellos_dropped += q.log.note(*rx) ? 1 : 0;
            else
                confirmation = rx->hello;
        }
        q.log.seen += confirmation->dropped ? " (its HELLO_ACK, D)" : " (its HELLO_ACK)";
        const int said = hellos_dropped + (confirmation->dropped ? 1 : 0);
        check(said > 0,
              "[CONN-31] the Connecting target dropped our second DATA, and neither a HELLO after "
              "it nor the HELLO_ACK confirming its establishment says DROPPED (HELLOs, D: "
              "DROPPED:{})",
              q.log.seen);
        check(said == 1,
              "[CONN-31] the target said DROPPED {} times for our second DATA, dropped once "
              "(HELLOs, D: DROPPED:{})",
              said, q.log.seen);
        if (confirmation->dropped) return;
        unjudged = q.log.seen;
        check(f.peer.violations().empty(), "target sent a bad packet: {}",
              f.peer.violations().empty() ? "" : f.peer.violations().front());
    }
    throw Skipped(fmt::format(
        "[CONN-31] the confirmation not judged: in {} attempts the target sent a HELLO with "
        "DROPPED before our HELLO_ACK arrived (last: HELLOs:{})",
        kPromptAttempts, unjudged));
}

// [CONN-31] from the side of the peer still opening. We play an initiator whose HELLO_ACK
// was lost: our HELLO (numbered 1) made the target's connection Established ([CONN-17]),
// and the WRITE the target then posts reaches us while we are, as far as the target knows,
// still Connecting: we drop its DATA ([CONN-19]), acknowledge nothing, and send our next
// HELLO (numbered 2, the same identity), with DROPPED or without. Or the target's HELLO_ACK
// was only late, overtaken by its DATA: it arrives after the drop and we confirm our
// establishment with a HELLO_ACK ([CONN-16]), with DROPPED or without, and then, being
// Established, send a PROBE, whose reply ([PROBE-2]) plays the answer's part below.
//
// Without an ACK the target resends by its own timers too, so its DATA is judged against
// its first probe timeout, not against a clock: that timeout sends a PROBE, and DATA goes
// again only at the second ([LOSS-5]) or, as a drained sender's tail copies, after the
// first one's PROBE ([LOSS-16]; PROBEs leave before retransmissions, [CONN-22]). A resend
// behind the answer to our HELLO leaves before any PROBE. So what the target sends
// between our HELLO (or HELLO_ACK) and its first PROBE tells the two apart, however long
// its timeout is. That takes our packet arriving before the target's first timeout: a
// PROBE or a retransmission before the target's three segments, or a PROBE before the
// answer (which leaves first when both are due, [CONN-22]; an ACK as a probe reply does,
// too), shows that it came later, and the attempt
// is made again from a fresh reset, up to kOpeningAttempts times (then the test skips).
// mroce's first timeout comes about 300 µs after the DATA (min_pto 200 µs, initial_rtt
// 100 µs, spec §4's defaults): on a loaded host the suite misses it now and then.
constexpr int kOpeningAttempts = 5;
constexpr uint64_t kOpeningAddr = 0x7f0000030000ULL;  // "our" memory: the suite keeps none
constexpr uint32_t kOpeningRkey = 0x3131;

// Stimulus: what we send once the target's segments are in: our second HELLO, or our
// confirming HELLO_ACK and a PROBE; with DROPPED or without.
struct Stimulus {
    PacketType type;
    bool dropped;
    // what: the stimulus, for messages.
    std::string what() const {
        return fmt::format("our {} {} DROPPED",
                           type == PacketType::kHello ? "second HELLO" : "HELLO_ACK",
                           dropped ? "with" : "without");
    }
    // unanswered: the failure when its answer did not come, with the rule that asks for it.
    std::string unanswered() const {
        return type == PacketType::kHello
                   ? fmt::format("[CONN-6] {} was not answered", what())
                   : fmt::format("[PROBE-2] our PROBE after {} got no reply", what());
    }
};

struct Opening {
    Stimulus stimulus;
    std::vector<std::byte> content;              // the WRITE's bytes
    std::map<uint64_t, wire::DataHeader> first;  // its segments as first sent, by offset
    bool answered = false;  // the HELLO_ACK to our second HELLO, or the reply to our PROBE
    std::vector<Rx> sent;   // DATA from our stimulus to the target's first PROBE
    std::string late;       // not empty: the target's timers ran first, no verdict
};

Opening open_with_data(Fixture& f, Stimulus stimulus, uint32_t seed) {
    Opening o{.stimulus = stimulus};
    auto hello = f.peer.hello_packet(PacketType::kHello);
    hello.hello_seq = 1;
    for (int retries = 0;; ++retries) {
        f.peer.send_hello(hello);
        auto rx = f.peer.expect(
            [](const Rx& r) { return r.is(PacketType::kHelloAck) || r.is(PacketType::kRetry); },
            500ms);
        check(rx.has_value(), "[CONN-17] no HELLO_ACK to our HELLO");
        if (rx->is(PacketType::kHelloAck)) {
            f.peer.learn_remote(rx->hello);  // no confirmation ([CONN-26]): "lost" with it
            break;
        }
        // [CONN-25]: prove our address by echoing the cookie.
        check(retries < 3, "[CONN-25] a RETRY answered our HELLO that echoed a RETRY's cookie");
        hello.cookie = rx->retry.cookie;
        ++hello.hello_seq;
    }
    f.qp = f.create_qp();
    f.connect_qp(f.qp);
    // Three segments, well within a first round trip's budget ([CC-15]).
    const uint32_t seg = f.peer.segment_size();
    const size_t length = 2 * size_t{seg} + 1000;
    const Region src = f.reg_mr(length, {"local_write"});
    o.content = pattern(length, seed);
    f.write_mr(src, 0, o.content);
    f.call("post_send", {{"qp", f.qp},
                         {"opcode", "write"},
                         {"mr", src.mr},
                         {"offset", 0},
                         {"length", length},
                         {"remote_addr", kOpeningAddr},
                         {"rkey", kOpeningRkey},
                         {"wr_id", 31}});
    const size_t count = (length + seg - 1) / seg;
    while (o.first.size() < count) {
        auto rx = f.peer.expect(
            [](const Rx& r) { return r.is(PacketType::kData) || r.is(PacketType::kProbe); }, 500ms);
        check(rx.has_value(), "only {} of the {} segments of the target's WRITE arrived",
              o.first.size(), count);
        if (rx->is(PacketType::kProbe) || (rx->data.flags & wire::data_flag::kRetx)) {
            o.late = fmt::format("a {} came after {} of the {} segments",
                                 rx->is(PacketType::kProbe) ? "PROBE" : "retransmission",
                                 o.first.size(), count);
            return o;
        }
        const auto& h = rx->data;
        check(h.opcode == Opcode::kWrite && h.msg_len == length && h.offset % seg == 0 &&
                  h.rkey == kOpeningRkey && h.remote_addr == kOpeningAddr,
              "[DATA-6] a segment of the WRITE with opcode {:#x}, msg_len {}, offset {}",
              static_cast<int>(h.opcode), h.msg_len, h.offset);
        o.first.emplace(h.offset, h);
    }
    std::optional<uint32_t> stamp;  // our PROBE's timestamp, after a HELLO_ACK
    if (stimulus.type == PacketType::kHello) {
        hello.hello_seq += 1;
        hello.dropped = stimulus.dropped;
        f.peer.send_hello(hello);
    } else {
        // The confirmation: to the target's id and token, echoing 0 (it sent no HELLO).
        auto confirmation = f.peer.hello_packet(PacketType::kHelloAck);
        confirmation.dropped = stimulus.dropped;
        f.peer.send_hello(confirmation);
        stamp = f.peer.send_probe(0);
    }
    auto is_answer = [&](const Rx& r) {
        return stamp ? r.is(PacketType::kAck) && (r.ack.flags & wire::ack_flag::kProbeReply) &&
                           r.ack.ts_echo == *stamp
                     : r.is(PacketType::kHelloAck);
    };
    // What the target sends next, in order, up to its first PROBE after the answer.
    const auto until = std::chrono::steady_clock::now() + 500ms;
    for (;;) {
        const auto left = until - std::chrono::steady_clock::now();
        if (left <= Duration::zero()) break;
        auto rx = f.peer.expect(
            [&](const Rx& r) {
                return is_answer(r) || r.is(PacketType::kData) || r.is(PacketType::kProbe);
            },
            std::chrono::duration_cast<Duration>(left));
        if (!rx) break;
        if (is_answer(*rx)) {
            o.answered = true;
        } else if (rx->is(PacketType::kProbe)) {
            if (!o.answered)
                o.late = fmt::format("a PROBE came before the answer to {}", stimulus.what());
            break;
        } else {
            o.sent.push_back(std::move(*rx));
        }
    }
    return o;
}

// opening_attempts: open_with_data until an attempt is judged (`judge`), at most
// kOpeningAttempts times; skips if the target's timers always ran first.
void opening_attempts(Context& ctx, Stimulus stimulus, uint32_t seed,
                      void (*judge)(const Opening&)) {
    std::string late;
    for (int attempt = 0; attempt < kOpeningAttempts; ++attempt) {
        Fixture f(ctx);
        const Opening o = open_with_data(f, stimulus, seed);
        if (o.late.empty()) return judge(o);
        late = o.late;
        // The next attempt's Fixture replaces this peer: its findings must not be lost.
        check(f.peer.violations().empty(), "target sent a bad packet: {}",
              f.peer.violations().empty() ? "" : f.peer.violations().front());
    }
    throw Skipped(fmt::format(
        "[CONN-31] not judged: in {} attempts the target's first probe timeout came before {} "
        "reached it (last: {})",
        kOpeningAttempts, stimulus.what(), late));
}

// all_resent: after a stimulus with DROPPED the target answers it and sends every segment
// it has in flight again, RETX, before its first PROBE ([CONN-31]): the same fields and
// bytes ([DATA-6]), ACK_NOW ([ACK-12]), not under the PSN it had ([PATH-9]).
void all_resent(const Opening& o) {
    check(o.answered, "{}", o.stimulus.unanswered());
    std::set<uint64_t> resent;
    for (const Rx& rx : o.sent) {
        const auto& h = rx.data;
        const auto it = o.first.find(h.offset);
        check(it != o.first.end(), "[DATA-6] a DATA at offset {}, where the WRITE sent none",
              h.offset);
        const auto& was = it->second;
        check(h.flags & wire::data_flag::kRetx,
              "[LOSS-8] the segment at offset {} went again without RETX", h.offset);
        check(h.opcode == was.opcode && h.stream_id == was.stream_id && h.msg_seq == was.msg_seq &&
                  h.msg_len == was.msg_len && h.rkey == was.rkey &&
                  h.remote_addr == was.remote_addr && h.payload_len == was.payload_len,
              "[DATA-6] the segment at offset {} went again with other fields", h.offset);
        check(std::equal(rx.payload.begin(), rx.payload.end(), o.content.begin() + h.offset,
                         o.content.begin() + h.offset + rx.payload.size()),
              "[DATA-6] the segment at offset {} went again with other bytes", h.offset);
        check(h.flags & wire::data_flag::kAckNow,
              "[ACK-12] a retransmitted segment without ACK_NOW");
        check(h.path_id != was.path_id || h.path_gen != was.path_gen || h.path_psn != was.path_psn,
              "[PATH-9] the retransmission reused PSN {:#x} of path {}", h.path_psn, h.path_id);
        resent.insert(h.offset);
    }
    for (const auto& [offset, h] : o.first)
        check(resent.count(offset) == 1,
              "[CONN-31] after {}, the segment at offset {} (path {}, PSN {:#x}) did not go "
              "again before the target's first PROBE ({} of the {} in flight did)",
              o.stimulus.what(), offset, h.path_id, h.path_psn, resent.size(), o.first.size());
}

// none_resent: after a stimulus without DROPPED the target only answers it; its DATA stays
// in flight, and none goes again before its first PROBE ([CONN-31]: a HELLO may have left
// before the DATA reached us; a HELLO_ACK without DROPPED only agrees with what it learnt).
void none_resent(const Opening& o) {
    check(o.answered, "{}", o.stimulus.unanswered());
    const wire::DataHeader* again = o.sent.empty() ? nullptr : &o.sent.front().data;
    check(again == nullptr,
          "[CONN-31] after {}, the target sent the segment at offset {} again ({}; {} DATA in "
          "all) before any timeout of its own (no PROBE yet)",
          o.stimulus.what(), again ? again->offset : 0,
          again && (again->flags & wire::data_flag::kRetx) ? "RETX" : "no RETX", o.sent.size());
}

// dropped_resent: our second HELLO says DROPPED: every segment in flight goes again.
void dropped_resent(Context& ctx) {
    opening_attempts(ctx, {PacketType::kHello, true}, 311, all_resent);
}

// hello_not_dropped: our second HELLO does not say DROPPED: nothing goes again.
void hello_not_dropped(Context& ctx) {
    opening_attempts(ctx, {PacketType::kHello, false}, 312, none_resent);
}

// ack_dropped_resent: our confirming HELLO_ACK says DROPPED: every segment in flight goes
// again, as after a HELLO with DROPPED.
void ack_dropped_resent(Context& ctx) {
    opening_attempts(ctx, {PacketType::kHelloAck, true}, 313, all_resent);
}

// ack_not_dropped: our confirming HELLO_ACK does not say DROPPED: it agrees with what the
// target learnt from our HELLO, and nothing goes again.
void ack_not_dropped(Context& ctx) {
    opening_attempts(ctx, {PacketType::kHelloAck, false}, 314, none_resent);
}

}  // namespace

void add_handshake_tests(std::vector<TestCase>& out) {
    out.push_back({"handshake.hello_ack", "[CONN-2] [CONN-3] [CONN-5] [CONN-17] [UDP-1] [UDP-3]",
                   "a HELLO from a new peer is answered with a well-formed HELLO_ACK", hello_ack});
    out.push_back({"handshake.repeated_hello", "[CONN-6] [CONN-10] [CONN-18]",
                   "repeated HELLOs get the same HELLO_ACK; another token is ignored and counted",
                   repeated_hello});
    out.push_back({"handshake.target_hello", "[CONN-1] [CONN-10] [CONN-12] [CONN-16]",
                   "the target's HELLO, its retransmission, and establishment by our HELLO_ACK",
                   target_hello});
    out.push_back({"handshake.simultaneous_open", "[CONN-7] [CONN-16]",
                   "HELLOs crossing: one connection, answered under the target's own identity",
                   simultaneous_open});
    out.push_back({"handshake.distinct_ids", "[CONN-11] [CONN-5]",
                   "two peer endpoints get connections with distinct ids and tokens", distinct_ids});
    out.push_back({"handshake.queued_while_connecting", "[STREAM-6] [CONN-19]",
                   "a WRITE posted while Connecting waits, then goes out once established",
                   queued_while_connecting});
    out.push_back({"handshake.data_before_established", "[CONN-19]",
                   "DATA to a Connecting connection is neither answered, accounted nor placed",
                   data_before_established});
    out.push_back({"handshake.zero_ids", "[CONN-23]",
                   "a HELLO with a zero src_token or src_conn_id makes no connection", zero_ids});
    out.push_back({"handshake.restart", "[CONN-14] [CONN-9]",
                   "a HELLO with a new connection id fails the old connection, which then ignores DATA",
                   restart});
    out.push_back({"handshake.hello_echo", "[CONN-32]",
                   "each HELLO_ACK echoes the latest HELLO's number (0 after one numbered 0)",
                   hello_echo});
    out.push_back({"handshake.hello_numbering", "[CONN-32] [CONN-31]",
                   "the target's unanswered HELLOs are numbered 1, 2, 3, ...; confirmation echo 0",
                   hello_numbering});
    out.push_back(
        {"handshake.dropped_flag", "[CONN-31] [CONN-19]",
         "a Connecting target that dropped our DATA sends a HELLO with DROPPED at once, only then",
         dropped_flag});
    out.push_back({"handshake.dropped_confirmed", "[CONN-31] [CONN-16] [CONN-26]",
                   "established by our answer after a drop: its confirming HELLO_ACK says DROPPED",
                   dropped_confirmed});
    out.push_back({"handshake.dropped_resent", "[CONN-31] [LOSS-8] [CONN-6]",
                   "a HELLO with DROPPED before any ACK: answered, every segment in flight resent",
                   dropped_resent});
    out.push_back(
        {"handshake.hello_not_dropped", "[CONN-31] [CONN-6]",
         "a HELLO without DROPPED before any ACK: answered, nothing resent before a PROBE",
         hello_not_dropped});
    out.push_back({"handshake.ack_dropped_resent", "[CONN-31] [LOSS-8]",
                   "a HELLO_ACK with DROPPED before any ACK: every segment in flight resent",
                   ack_dropped_resent});
    out.push_back({"handshake.ack_not_dropped", "[CONN-31]",
                   "a HELLO_ACK without DROPPED before any ACK: nothing resent before a PROBE",
                   ack_not_dropped});
}

}  // namespace mroce::conform
