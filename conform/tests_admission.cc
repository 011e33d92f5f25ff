// conform/tests_admission.cc — which packets reach a connection (spec §4.5): the token and
// the connection id admit a packet, never its source address or port ([CONN-13], [UDP-6]).
#include "conform/checks.h"
#include "conform/fixture.h"

namespace mroce::conform {
namespace {

using namespace std::chrono_literals;
using wire::Opcode;
using wire::PacketType;

struct Setup {
    Fixture f;
    Region region;
    explicit Setup(Context& ctx) : f(ctx) {
        f.establish();
        region = f.reg_mr(8192, {"local_write", "remote_write"});
    }
    Message write(size_t length, uint32_t seed) {
        Message m = f.message(Opcode::kWrite, pattern(length, seed));
        m.rkey = region.rkey;
        m.remote_addr = region.addr;
        return m;
    }
    bool untouched(size_t length) {
        for (auto b : f.read_mr(region, 0, length))
            if (b != std::byte{0}) return false;
        return true;
    }
};

// off_path sends m's one segment with the common header changed by `mutate`, and checks it
// was dropped unanswered; then sends it correctly and checks it was placed.
template <typename Mutate>
void off_path(Setup& s, const Message& m, const char* rule, Mutate mutate) {
    const auto seg = s.f.peer.cut(m)[0];
    auto h = s.f.peer.next_header(seg);
    mutate(h.common);
    s.f.peer.send_bytes(Peer::encode_data(h, seg.payload));
    const auto ack = s.f.barrier();
    check(!covers(ack, h.path_psn), "{}: the DATA was accounted (cum {:#x})", rule, ack.cum_psn);
    s.f.no_nack(rule);
    check(s.untouched(m.body.size()), "{}: the DATA was placed", rule);
    s.f.send_message(m);
    (void)s.f.barrier();
    check(s.f.read_mr(s.region, 0, m.body.size()) == m.body,
          "control: the same DATA with the right header was not placed");
}

void bad_token(Context& ctx) {
    Setup s(ctx);
    const auto before = s.f.endpoint_counter("bad_token");
    off_path(s, s.write(600, 31), "[CONN-4] wrong token",
             [](wire::CommonHeader& c) { c.dst_token ^= 0x8000000000000001ULL; });
    if (before) {
        const auto after = s.f.endpoint_counter("bad_token");
        check(after && *after == *before + 1, "[CONN-4] [ERR-7] bad_token went {} -> {}", *before,
              after.value_or(0));
    }
}

void unknown_connection(Context& ctx) {
    Setup s(ctx);
    const auto before = s.f.endpoint_counter("unknown_connection");
    off_path(s, s.write(600, 32), "[CONN-20] unknown connection id",
             [](wire::CommonHeader& c) { c.dst_conn_id ^= 0x7fff0000; });
    if (before) {
        const auto after = s.f.endpoint_counter("unknown_connection");
        check(after && *after == *before + 1, "[CONN-20] [ERR-7] unknown_connection went {} -> {}",
              *before, after.value_or(0));
    }
}

// drop_counters: [CONN-4] and [CONN-20] require the drops to be counted; the agent must
// report the endpoint counters for this to be checked.
void drop_counters(Context& ctx) {
    Setup s(ctx);
    const auto tok = s.f.endpoint_counter("bad_token");
    const auto unk = s.f.endpoint_counter("unknown_connection");
    if (!tok || !unk)
        throw Skipped("the agent reports no endpoint counters (bad_token, unknown_connection)");
    const auto m = s.write(100, 33);
    const auto seg = s.f.peer.cut(m)[0];
    auto h = s.f.peer.next_header(seg);
    h.common.dst_token ^= 1;
    s.f.peer.send_bytes(Peer::encode_data(h, seg.payload));
    h = s.f.peer.next_header(seg);
    h.common.dst_conn_id ^= 0x00010000;
    s.f.peer.send_bytes(Peer::encode_data(h, seg.payload));
    (void)s.f.barrier();
    check(s.f.endpoint_counter("bad_token") == *tok + 1, "[CONN-4] bad_token not counted once");
    check(s.f.endpoint_counter("unknown_connection") == *unk + 1,
          "[CONN-20] unknown_connection not counted once");
}

// any_source: after the handshake, a packet is matched by connection id and token alone:
// DATA from another UDP port (and, on loopback, another source address) is accepted, and the
// answer goes to our endpoint port, not to the source port.
void any_source(Context& ctx) {
    Setup s(ctx);
    std::string why;
    auto other = open_socket(ctx, &why);
    check(other.has_value(), "cannot open a second socket: {}", why);
    const Message m = s.write(5000, 34);
    const auto segs = s.f.peer.cut(m);
    uint32_t last_psn = 0;
    for (const auto& seg : segs) {
        const auto h = s.f.peer.next_header(seg);
        last_psn = h.path_psn;
        s.f.peer.send_bytes_from(*other, Peer::encode_data(h, seg.payload));
    }
    // A third source address when the target is on loopback (127.0.0.0/8 is all local).
    std::optional<UdpSocket> third;
    if ((ctx.local_ip.ipv4_host_order() >> 24) == 127)
        third = UdpSocket::open(Address::ipv4(0x7f000002, 0), &why);
    const Message m2 = [&] {
        Message x = s.write(300, 35);
        x.remote_addr = s.region.addr + 6000;
        return x;
    }();
    if (third) {
        const auto seg = s.f.peer.cut(m2)[0];
        const auto h = s.f.peer.next_header(seg);
        last_psn = h.path_psn;
        s.f.peer.send_bytes_from(*third, Peer::encode_data(h, seg.payload));
    }
    // The ACK_NOW answers arrive at our endpoint socket (Peer only listens there).
    auto acked = s.f.peer.expect(
        [&](const Rx& r) { return r.is(PacketType::kAck) && r.ack.path_id == 0 && covers(r.ack, last_psn); },
        500ms);
    check(acked.has_value(), "[CONN-13] DATA from another source port was not acknowledged to our endpoint port");
    check(s.f.read_mr(s.region, 0, m.body.size()) == m.body,
          "[CONN-13] [UDP-6] DATA from another source port was not placed");
    if (third)
        check(s.f.read_mr(s.region, 6000, 300) == m2.body,
              "[CONN-13] DATA from another source address (127.0.0.2) was not placed");
}

// path_by_id: the receiver tells paths apart by path_id, not by source port ([UDP-6]):
// two PSNs of path 0 from two ports make one run; path 1 from the same port is another.
void path_by_id(Context& ctx) {
    Setup s(ctx);
    std::string why;
    auto other = open_socket(ctx, &why);
    check(other.has_value(), "cannot open a second socket: {}", why);
    // Three single-segment WRITEs: path 0 from our socket, path 0 from the other, path 1.
    std::vector<Message> ms;
    for (int i = 0; i < 3; ++i) {
        Message x = s.write(1000, 40 + static_cast<uint32_t>(i));
        x.remote_addr = s.region.addr + 1000 * static_cast<uint64_t>(i);
        ms.push_back(x);
    }
    const auto h0 = s.f.peer.next_header(s.f.peer.cut(ms[0])[0], 0);
    s.f.peer.send_bytes(Peer::encode_data(h0, s.f.peer.cut(ms[0])[0].payload));
    const auto h1 = s.f.peer.next_header(s.f.peer.cut(ms[1])[0], 0);
    s.f.peer.send_bytes_from(*other, Peer::encode_data(h1, s.f.peer.cut(ms[1])[0].payload));
    const auto h2 = s.f.peer.next_header(s.f.peer.cut(ms[2])[0], 1);
    s.f.peer.send_bytes_from(*other, Peer::encode_data(h2, s.f.peer.cut(ms[2])[0].payload));
    const auto a0 = s.f.barrier(0);
    check(a0.cum_psn == h1.path_psn,
          "[UDP-6] path 0 from two source ports: cum {:#x}, expected {:#x} (both PSNs on one path)",
          a0.cum_psn, h1.path_psn);
    const auto a1 = s.f.barrier(1);
    check(a1.cum_psn == h2.path_psn, "[UDP-6] path 1: cum {:#x}, expected {:#x}", a1.cum_psn,
          h2.path_psn);
    for (int i = 0; i < 3; ++i)
        check(s.f.read_mr(s.region, 1000 * static_cast<uint64_t>(i), 1000) == ms[i].body,
              "[UDP-6] message {} was not placed", i);
}

}  // namespace

void add_admission_tests(std::vector<TestCase>& out) {
    out.push_back({"admission.bad_token", "[CONN-4] [ERR-7]",
                   "a DATA with a wrong token is dropped unanswered and unplaced", bad_token});
    out.push_back({"admission.unknown_connection", "[CONN-20] [ERR-7]",
                   "a DATA for an unknown connection id is dropped unanswered", unknown_connection});
    out.push_back({"admission.drop_counters", "[CONN-4] [CONN-20] [ERR-7]",
                   "both drops are counted once in the endpoint's counters", drop_counters});
    out.push_back({"admission.any_source", "[CONN-13] [UDP-6]",
                   "DATA from another source port and address is accepted; the ACK goes to our port",
                   any_source});
    out.push_back({"admission.path_by_id", "[UDP-6]",
                   "paths are told apart by path_id, not by the UDP source port", path_by_id});
}

}  // namespace mroce::conform
