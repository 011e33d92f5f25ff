// conform/tests_header.cc — encapsulation and header rules (spec §2, §3.1): what a target
// must drop without a word, what it must ignore, and what every packet it sends looks like.
//
// A drop is observed, not assumed: the broken DATA takes a PSN, and a PROBE sent after it
// (Fixture::barrier) returns the target's view of the path. Had the target accepted the
// DATA, the reply would acknowledge its PSN. The same segment, sent correctly afterwards,
// must then be written: the control that shows the test can pass.
#include "conform/checks.h"
#include "conform/fixture.h"
#include "conform/ip_capture.h"

namespace mroce::conform {
namespace {

using namespace std::chrono_literals;
using wire::Opcode;
using wire::PacketType;

// Setup: a connected target with one 16 KiB region open to remote writes.
struct WriteSetup {
    Fixture f;
    Region region;
    explicit WriteSetup(Context& ctx) : f(ctx) {
        f.establish();
        region = f.reg_mr(16384, {"local_write", "remote_write"});
    }
    Message write(size_t length, uint32_t seed, uint64_t offset = 0) {
        Message m = f.message(Opcode::kWrite, pattern(length, seed));
        m.rkey = region.rkey;
        m.remote_addr = region.addr + offset;
        return m;
    }
    bool untouched(uint64_t offset, uint64_t length) {
        for (auto b : f.read_mr(region, offset, length))
            if (b != std::byte{0}) return false;
        return true;
    }
};

// expect_dropped sends `bytes` (a broken DATA that took PSN `psn` on path 0) and checks the
// target neither accounted, answered nor placed it.
void expect_dropped(WriteSetup& s, const std::vector<std::byte>& bytes, uint32_t psn,
                    uint64_t length, const char* rule) {
    s.f.peer.send_bytes(bytes);
    const auto ack = s.f.barrier();
    check(!covers(ack, psn), "{}: the broken DATA (PSN {:#x}) was acknowledged (cum {:#x})", rule,
          psn, ack.cum_psn);
    s.f.no_nack(rule);
    check(s.untouched(0, length), "{}: bytes of the broken DATA reached memory", rule);
}

// expect_written sends m correctly and checks its bytes are in memory.
void expect_written(WriteSetup& s, const Message& m, const char* what) {
    s.f.send_message(m);
    const auto ack = s.f.barrier();
    (void)ack;
    check(s.f.read_mr(s.region, m.remote_addr - s.region.addr, m.body.size()) == m.body,
          "control: {} was not written as sent", what);
}

void bad_version(Context& ctx) {
    WriteSetup s(ctx);
    Message m = s.write(300, 11);
    const auto seg = s.f.peer.cut(m)[0];
    const auto h = s.f.peer.next_header(seg);
    auto bytes = Peer::encode_data(h, seg.payload);
    bytes[0] = std::byte{3};
    expect_dropped(s, bytes, h.path_psn, 300, "[WIRE-3] version 3");
    expect_written(s, m, "the same WRITE with version 2");
}

void unknown_type(Context& ctx) {
    WriteSetup s(ctx);
    Message m = s.write(300, 12);
    const auto seg = s.f.peer.cut(m)[0];
    const auto h = s.f.peer.next_header(seg);
    auto bytes = Peer::encode_data(h, seg.payload);
    bytes[1] = std::byte{9};
    expect_dropped(s, bytes, h.path_psn, 300, "[WIRE-4] type 9");
    bytes[1] = std::byte{0};
    expect_dropped(s, bytes, h.path_psn, 300, "[WIRE-4] type 0");
    expect_written(s, m, "the same WRITE with type 1");
}

void unknown_opcode(Context& ctx) {
    WriteSetup s(ctx);
    Message m = s.write(300, 13);
    const auto seg = s.f.peer.cut(m)[0];
    const auto h = s.f.peer.next_header(seg);
    auto bytes = Peer::encode_data(h, seg.payload);
    bytes[16] = std::byte{0x0A};
    expect_dropped(s, bytes, h.path_psn, 300, "[DATA-1] opcode 0x0A");
    expect_written(s, m, "the same WRITE with opcode 0x03");
}

void bad_length(Context& ctx) {
    WriteSetup s(ctx);
    Message m = s.write(300, 14);
    const auto seg = s.f.peer.cut(m)[0];
    auto h = s.f.peer.next_header(seg);
    auto longer = Peer::encode_data(h, seg.payload);
    longer.push_back(std::byte{0x55});  // one byte beyond payload_len
    expect_dropped(s, longer, h.path_psn, 300, "[DATA-3] [UDP-2] a trailing byte");
    h = s.f.peer.next_header(seg);
    auto shorter = Peer::encode_data(h, seg.payload);
    shorter.pop_back();
    expect_dropped(s, shorter, h.path_psn, 300, "[DATA-3] one byte short");
    h = s.f.peer.next_header(seg);
    h.flags &= static_cast<uint8_t>(~wire::data_flag::kLast);  // ends the message without LAST
    expect_dropped(s, Peer::encode_data(h, seg.payload), h.path_psn, 300,
                   "[DATA-3] LAST missing on the final segment");
    expect_written(s, m, "the same WRITE, well formed");
}

void truncated(Context& ctx) {
    WriteSetup s(ctx);
    Message m = s.write(300, 15);
    const auto seg = s.f.peer.cut(m)[0];
    const auto h = s.f.peer.next_header(seg);
    auto bytes = Peer::encode_data(h, seg.payload);
    bytes.resize(60);  // inside the 72-byte DATA header
    expect_dropped(s, bytes, h.path_psn, 300, "[WIRE-7] a 60-byte DATA");
    bytes.resize(10);  // inside the common header
    expect_dropped(s, bytes, h.path_psn, 300, "[WIRE-7] a 10-byte datagram");
    // A fixed-size packet one byte too long: a PROBE of 33 bytes must not be answered.
    wire::ProbePacket probe;
    probe.common = {.type = PacketType::kProbe, .dst_conn_id = s.f.peer.remote().conn_id,
                    .dst_token = s.f.peer.remote().token};
    probe.path_id = 1;
    probe.next_psn = s.f.peer.me().isn;
    probe.psn_floor = s.f.peer.me().isn;
    probe.timestamp = Peer::now_stamp();
    std::vector<std::byte> pb(wire::kProbeSize + 1);
    (void)wire::encode_probe(probe, pb);
    s.f.peer.send_bytes(pb);
    (void)s.f.barrier();
    auto replies = s.f.peer.collect(
        [&](const Rx& r) { return r.is(PacketType::kAck) && r.ack.ts_echo == probe.timestamp; },
        20ms);
    check(replies.empty(), "[WIRE-5] a 33-byte PROBE was answered");
    expect_written(s, m, "the same WRITE, whole");
}

void reserved_ignored(Context& ctx) {
    WriteSetup s(ctx);
    Message m = s.write(500, 16);
    const auto seg = s.f.peer.cut(m)[0];
    const auto h = s.f.peer.next_header(seg, 0, 0x80);  // an undefined flag bit [DATA-2]
    auto bytes = Peer::encode_data(h, seg.payload);
    bytes[2] = std::byte{0xA5};  // common header reserved
    bytes[3] = std::byte{0x5A};
    bytes[21] = std::byte{0xFF};  // return_echo without RETURN_ECHO: meaningless [PATH-12]
    s.f.peer.send_bytes(bytes);
    const auto ack = s.f.barrier();
    check(covers(ack, h.path_psn), "[WIRE-6] a DATA with non-zero reserved bits was not accepted");
    check(s.f.read_mr(s.region, 0, 500) == m.body,
          "[WIRE-6] a DATA with non-zero reserved bits was not written");
}

// target_packets_wellformed provokes one of each packet the target answers with (HELLO_ACK,
// ACK, PROBE_REPLY, NACK) and requires the per-packet checks of Peer to have found nothing,
// and that the ECN field was visible and ECT(0) on each.
void target_packets_wellformed(Context& ctx) {
    WriteSetup s(ctx);
    s.f.send_message(s.write(5000, 17));
    Message bad = s.write(100, 18);
    bad.rkey ^= 0x01;  // provoke a NACK(REMOTE_ACCESS)
    s.f.send_message(bad);
    (void)s.f.expect_nack();
    (void)s.f.barrier(2);
    auto all = s.f.peer.collect([](const Rx&) { return true; }, 30ms);
    int ecn_seen = 0;
    for (const auto& r : all) ecn_seen += r.raw.ecn >= 0;
    // Peer::check_target_packet has already judged each datagram (and the runner fails the
    // test on any violation); here: the kernel reported the ECN field, so [UDP-5] was checked.
    if (!all.empty() && ecn_seen == 0)
        throw Skipped("the kernel did not report the ECN field (IP_RECVTOS): [UDP-5] unchecked");
}

// ip_no_fragments: every datagram the target sends us over IPv4 has Don't Fragment set
// and is no fragment ([UDP-8]); full-size DATA fit 72 + max_payload ([UDP-4]). The IP
// header is invisible to a UDP socket: this needs a packet socket (CAP_NET_RAW).
void ip_no_fragments(Context& ctx) {
    std::string why;
    auto capture = IpCapture::open(&why);
    if (!capture) throw Skipped("cannot see IP headers without CAP_NET_RAW (" + why + ")");
    Fixture f(ctx);
    f.establish();
    // Provoke every kind of packet the target sends us: HELLO_ACK (above), ACK and
    // PROBE_REPLY, NACK, and full-size DATA (a READ response).
    const Region r = f.reg_mr(3 * 4096, {"local_write", "remote_write", "remote_read"});
    Message read = f.read_request(r, 3 * 4096);
    f.send_message(read);
    Message bad = f.message(Opcode::kWrite, pattern(10, 19));
    bad.rkey = r.rkey ^ 1;
    bad.remote_addr = r.addr;
    f.send_message(bad);
    (void)f.barrier();
    const auto seen = capture->collect(f.peer.local(), 50ms);
    auto datagrams = f.peer.collect([](const Rx&) { return true; }, 1ms);
    check(!seen.empty(), "setup: the packet socket saw none of the target's datagrams");
    for (const auto& u : seen)
        check(u.dont_fragment && !u.more_fragments && u.fragment_offset == 0,
              "[UDP-8] the target sent an IPv4 packet with DF {} MF {} offset {}", u.dont_fragment,
              u.more_fragments, u.fragment_offset);
    size_t largest = 0;
    for (const auto& d : datagrams) largest = std::max(largest, d.raw.bytes.size());
    check(largest <= wire::kDataHeaderSize + std::min(f.peer.me().max_payload, f.peer.remote().max_payload),
          "[UDP-4] [UDP-8] a {}-byte datagram exceeds 72 + max_payload", largest);
}

}  // namespace

void add_header_tests(std::vector<TestCase>& out) {
    out.push_back({"header.bad_version", "[WIRE-3] [WIRE-8]",
                   "a DATA with version 3 is dropped unanswered and unplaced", bad_version});
    out.push_back({"header.unknown_type", "[WIRE-2] [WIRE-4]",
                   "types 9 and 0 are dropped unanswered", unknown_type});
    out.push_back({"header.unknown_opcode", "[DATA-1]",
                   "opcode 0x0A is dropped unanswered", unknown_opcode});
    out.push_back({"header.bad_length", "[DATA-3] [UDP-2] [WIRE-5]",
                   "DATA one byte long, one short, or without LAST is dropped", bad_length});
    out.push_back({"header.truncated", "[WIRE-7] [WIRE-5]",
                   "a truncated DATA and datagram, and a 33-byte PROBE are dropped", truncated});
    out.push_back({"header.reserved_ignored", "[WIRE-6] [DATA-2]",
                   "non-zero reserved bytes and unknown flags are ignored", reserved_ignored});
    out.push_back({"header.target_packets_wellformed",
                   "[WIRE-1] [WIRE-6] [UDP-2] [UDP-5] [ACK-8] [CONN-2]",
                   "every packet the target sends decodes exactly, is ECT(0), reserved zero",
                   target_packets_wellformed});
    out.push_back({"header.ip_no_fragments", "[UDP-8] [UDP-4]",
                   "the target's IPv4 packets carry Don't Fragment and no fragment",
                   ip_no_fragments});
}

}  // namespace mroce::conform
