// tests/core/hardening_test.cc — issue 17's reproduced findings, each as a regression test
// between two real endpoints on the in-process network: memory revoked by deregistration
// while a peer's operation is under way ([PLACE-25], [PLACE-26]), HELLOs that name no
// identity ([CONN-23]), responses that answer nothing ([PLACE-16]) and answers flushed by
// the responder's stream failure ([PLACE-27], found by fuzz/connection.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>

#include "tests/core/harness.h"
#include "util/rng.h"
#include "wire/control.h"
#include "wire/data.h"

namespace mroce::test {
namespace {

using namespace std::chrono_literals;
using core::Status;
using core::WorkOpcode;

sim::NetworkConfig net(double loss) {
    sim::NetworkConfig nc;
    nc.routes = 8;
    nc.link.rate_bps = 10'000'000'000;
    nc.link.delay = 2us;
    nc.link.loss_probability = loss;
    nc.link.reorder_probability = loss;
    nc.host.line_rate_bps = 10'000'000'000;
    return nc;
}

// seed_trace prints the seed as the run starts (STYLE.md §6) and returns the line that
// SCOPED_TRACE repeats on failure.
std::string seed_trace(uint64_t seed) {
    std::printf("[ SEED     ] %llu\n", static_cast<unsigned long long>(seed));
    return "seed " + std::to_string(seed) + " (replay: MROCE_SEED=" + std::to_string(seed) + ")";
}

// Peers is A (requester) and B (responder) with one stream pair, A's completions, and
// registered memory on both sides.
struct Peers {
    explicit Peers(uint64_t seed, double loss = 0, core::EndpointConfig cfg = {})
        : p(seed, net(loss), cfg, cfg) {
        pa = p.a->alloc_pd();
        pb = p.b->alloc_pd();
        a_mem.assign(1 << 20, std::byte{0});
        for (size_t i = 0; i < a_mem.size(); ++i) a_mem[i] = pattern_byte(1, 0, i);
        ka = *p.a->register_memory(pa, a_mem.data(), a_mem.size(), kAllAccess);
        sa = *p.a->create_stream(pa, p.host_b().address(), 1, p.now());
        sb = *p.b->create_stream(pb, p.host_a().address(), 1, p.now());
        p.host_a().set_event_callback([this](const core::Event& e) {
            if (e.kind == core::EventKind::kCompletion) a_done.push_back(e.completion);
        });
        p.host_b().set_event_callback([this](const core::Event& e) {
            if (e.kind == core::EventKind::kCompletion) b_done.push_back(e.completion);
        });
    }
    uint64_t a_addr(size_t off) { return reinterpret_cast<uint64_t>(a_mem.data() + off); }
    // forge_to_b hands B's engine a DATA as if A's endpoint sent it (B's connection id and
    // token filled in, sealed as A would), with `h.payload_len` bytes of `fill`.
    void forge_to_b(wire::DataHeader h, std::byte fill) {
        const uint32_t conn_b = p.b->connection_to(p.host_a().address());
        h.common.dst_conn_id = conn_b;
        h.common.dst_token = p.b->connection(conn_b)->token();
        std::vector<std::byte> pkt(wire::kDataHeaderSize + h.payload_len, fill);
        ASSERT_TRUE(wire::encode_data_header(h, pkt).ok());
        seal_for(*p.b, p.host_a().address(), pkt);
        PacketMeta m;
        m.src = p.host_a().address().with_port(50001);
        m.dst = p.host_b().address();
        p.host_b().with_engine([&](core::Engine& e) { e.on_datagram(pkt, m, p.now()); });
    }
    void post(const core::SendWr& wr) {
        ASSERT_EQ(p.a->post_send(sa, wr, p.now()), Error::kOk);
        p.host_a().kick();
    }
    bool run_until(const std::function<bool()>& done, std::chrono::milliseconds limit = 500ms) {
        p.sim.run_until(done, p.sim.now() + limit, 50'000'000);
        return done();
    }
    const core::Connection& conn_b() {
        return *p.b->connection(p.b->connection_to(p.host_a().address()));
    }
    const core::Connection& conn_a() {
        return *p.a->connection(p.a->connection_to(p.host_b().address()));
    }

    Pair p;
    uint32_t pa = 0, pb = 0, sa = 0, sb = 0;
    std::vector<std::byte> a_mem;
    core::MemoryKeys ka;
    std::vector<core::Completion> a_done, b_done;
};

// revoke_mid_write: A WRITEs kLen bytes into a region of B; once part (not all) of it is
// placed, B deregisters the region and, if `free_it`, frees it. Returns A's completion.
// Under AddressSanitizer a later segment written into the freed heap block is a
// heap-use-after-free (issue 17, finding 6); without it the bytes are compared instead.
void revoke_mid_write(uint64_t seed, bool free_it) {
    SCOPED_TRACE(seed_trace(seed));
    // 96 KiB: below glibc's mmap threshold, so the freed block stays in the heap where
    // AddressSanitizer watches it (and a release build does not fault on an unmapped page).
    constexpr uint32_t kLen = 96 * 1024;
    Peers f(seed, 0.02);
    auto region = std::make_unique<std::byte[]>(kLen);
    std::fill_n(region.get(), kLen, kSentinel);
    const auto kb = *f.p.b->register_memory(f.pb, region.get(), kLen,
                                            core::access::kLocalWrite | core::access::kRemoteWrite);
    core::SendWr w;
    w.wr_id = 7;
    w.opcode = WorkOpcode::kWrite;
    w.local_addr = f.a_addr(0);
    w.length = kLen;
    w.lkey = f.ka.lkey;
    w.remote_addr = reinterpret_cast<uint64_t>(region.get());
    w.rkey = kb.rkey;
    f.post(w);
    // Stop at the first placed segment: the WRITE is under way, most of it still to come.
    ASSERT_TRUE(f.run_until([&] { return f.p.b->stream_bytes_placed(f.sb) > 0; }));
    const uint64_t placed = f.p.b->stream_bytes_placed(f.sb);
    ASSERT_LT(placed, kLen) << "the whole WRITE landed at once: the test proves nothing";
    ASSERT_EQ(f.p.b->deregister_memory(kb.rkey), Error::kOk);
    std::vector<std::byte> at_deregistration;
    if (free_it)
        region.reset();
    else
        at_deregistration.assign(region.get(), region.get() + kLen);

    ASSERT_TRUE(f.run_until([&] { return f.a_done.size() == 1; }));
    EXPECT_EQ(f.a_done[0].wr_id, 7u);
    EXPECT_EQ(f.a_done[0].status, Status::kRemoteAccess) << core::to_string(f.a_done[0].status);
    EXPECT_GE(f.conn_b().stats().access_errors, 1u);
    // Nothing of the WRITE was placed after the deregistration returned.
    EXPECT_EQ(f.p.b->stream_bytes_placed(f.sb), placed);
    if (!free_it) {
        EXPECT_EQ(std::memcmp(at_deregistration.data(), region.get(), kLen), 0)
            << "bytes written into a deregistered region";
    }
    EXPECT_EQ(f.conn_a().state(), core::ConnState::kEstablished);
}

// [PLACE-25] [PLACE-4]: deregistration revokes a WRITE that has begun: its later segments
// are refused with an access error and not one more byte reaches the region.
TEST(Hardening, WriteAfterDeregisterIsRefused) {
    for (uint64_t seed : seeds_from_env(8, 1700)) revoke_mid_write(seed, false);
}

// [PLACE-25]: as above with the region freed right after deregister_memory returns, as an
// application may: the ASan build (build-asan) must stay clean.
TEST(Hardening, WriteIntoFreedRegionIsRefused) {
    for (uint64_t seed : seeds_from_env(8, 1710)) revoke_mid_write(seed, true);
}

// hold_behind_rnr: A posts a SEND that B has no receive for (it waits on RNR), then `wr`;
// runs until B has refused the SEND at least once and `wr` has had time to arrive.
void hold_behind_rnr(Peers& f, const core::SendWr& wr) {
    core::SendWr send;
    send.wr_id = 1;
    send.opcode = WorkOpcode::kSend;
    send.local_addr = f.a_addr(0);
    send.length = 64;
    send.lkey = f.ka.lkey;
    f.post(send);
    f.post(wr);
    ASSERT_TRUE(f.run_until([&] { return f.conn_b().stats().rnr_nacks_sent > 0; }));
    f.p.sim.run_for(50us);  // the request is complete in its slot, waiting for the SEND
    ASSERT_TRUE(f.a_done.empty());
}

// post_receive_at_b posts a 64-byte receive on B's stream so the SEND waiting on RNR goes.
void post_receive_at_b(Peers& f, std::vector<std::byte>& buf) {
    const auto k = *f.p.b->register_memory(f.pb, buf.data(), buf.size(), core::access::kLocalWrite);
    core::RecvWr r{50, reinterpret_cast<uint64_t>(buf.data()), 64, k.lkey};
    f.p.host_b().with_engine([&](core::Engine&) {
        ASSERT_EQ(f.p.b->post_recv(f.sb, r, f.p.now()), Error::kOk);
    });
}

// [PLACE-26] [PLACE-17] [PLACE-18]: an atomic checked on arrival but executed later, at its
// turn in the stream, finds its region deregistered: it is not executed (the memory keeps
// its value) and fails with a remote access error; the SEND before it still succeeds.
TEST(Hardening, AtomicOnDeregisteredRegionFails) {
    for (uint64_t seed : seeds_from_env(4, 1720)) {
        SCOPED_TRACE(seed_trace(seed));
        Peers f(seed);
        std::vector<std::byte> target(64, std::byte{0});
        const uint64_t before = 41;
        std::memcpy(target.data(), &before, 8);
        const auto kt = *f.p.b->register_memory(f.pb, target.data(), target.size(), kAllAccess);
        core::SendWr add;
        add.wr_id = 2;
        add.opcode = WorkOpcode::kAtomicFetchAdd;
        add.local_addr = f.a_addr(4096);
        add.length = 8;
        add.lkey = f.ka.lkey;
        add.remote_addr = reinterpret_cast<uint64_t>(target.data());
        add.rkey = kt.rkey;
        add.compare_add = 1;
        hold_behind_rnr(f, add);
        ASSERT_EQ(f.p.b->deregister_memory(kt.rkey), Error::kOk);
        std::vector<std::byte> rbuf(64);
        post_receive_at_b(f, rbuf);
        ASSERT_TRUE(f.run_until([&] { return f.a_done.size() == 2; }));
        EXPECT_EQ(f.a_done[0].wr_id, 1u);
        EXPECT_EQ(f.a_done[0].status, Status::kSuccess) << core::to_string(f.a_done[0].status);
        EXPECT_EQ(f.a_done[1].wr_id, 2u);
        EXPECT_EQ(f.a_done[1].status, Status::kRemoteAccess) << core::to_string(f.a_done[1].status);
        uint64_t after;
        std::memcpy(&after, target.data(), 8);
        EXPECT_EQ(after, before) << "an atomic changed deregistered memory";
        EXPECT_EQ(f.conn_b().stats().atomics_executed, 0u);
        EXPECT_GE(f.conn_b().stats().access_errors, 1u);
        ASSERT_EQ(f.b_done.size(), 1u);  // the SEND's receive
        EXPECT_EQ(f.b_done[0].status, Status::kSuccess);
    }
}

// [PLACE-26] [PLACE-19]: a READ whose source is deregistered before the READ's turn is not
// answered with zeros as a success: it fails with a remote access error.
TEST(Hardening, ReadOfDeregisteredRegionFails) {
    SCOPED_TRACE(seed_trace(1730));
    Peers f(1730);
    std::vector<std::byte> source(8192, std::byte{0x3c});
    const auto ks = *f.p.b->register_memory(f.pb, source.data(), source.size(), kAllAccess);
    core::SendWr rd;
    rd.wr_id = 2;
    rd.opcode = WorkOpcode::kRead;
    rd.local_addr = f.a_addr(8192);
    rd.length = 8192;
    rd.lkey = f.ka.lkey;
    rd.remote_addr = reinterpret_cast<uint64_t>(source.data());
    rd.rkey = ks.rkey;
    hold_behind_rnr(f, rd);
    ASSERT_EQ(f.p.b->deregister_memory(ks.rkey), Error::kOk);
    std::vector<std::byte> rbuf(64);
    post_receive_at_b(f, rbuf);
    ASSERT_TRUE(f.run_until([&] { return f.a_done.size() == 2; }));
    EXPECT_EQ(f.a_done[0].status, Status::kSuccess) << core::to_string(f.a_done[0].status);
    EXPECT_EQ(f.a_done[1].wr_id, 2u);
    EXPECT_EQ(f.a_done[1].status, Status::kRemoteAccess) << core::to_string(f.a_done[1].status);
    EXPECT_EQ(f.conn_b().stats().read_source_gone, 0u) << "a deregistered source was sent";
}

// write_once WRITEs 4 KiB from A into B's `dst` and runs until A completes it; returns its
// status, or nullopt if it did not complete within 500 ms.
std::optional<Status> write_once(Peers& f, std::vector<std::byte>& dst, const core::MemoryKeys& kd, uint64_t id) {
    core::SendWr w;
    w.wr_id = id;
    w.opcode = WorkOpcode::kWrite;
    w.local_addr = f.a_addr(0);
    w.length = 4096;
    w.lkey = f.ka.lkey;
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    w.rkey = kd.rkey;
    const size_t before = f.a_done.size();
    f.post(w);
    if (!f.run_until([&] { return f.a_done.size() == before + 1; })) return std::nullopt;
    return f.a_done.back().status;
}

// [CONN-23] [CONN-14] [CONN-2]: a HELLO for A's address and port with src_conn_id 0 (a
// "restart" to no connection) or src_token 0, and a HELLO_ACK with src_conn_id 0, are
// counted and dropped: B's live connection stays Established and carries data, no
// connection is made, and A's later traffic is unaffected.
TEST(Hardening, HelloWithoutIdentityIsDropped) {
    for (uint64_t seed : seeds_from_env(4, 1740)) {
        SCOPED_TRACE(seed_trace(seed));
        Peers f(seed);
        std::vector<std::byte> dst(4096);
        const auto kd = *f.p.b->register_memory(f.pb, dst.data(), dst.size(), kAllAccess);
        ASSERT_EQ(write_once(f, dst, kd, 1), std::optional(Status::kSuccess));
        const Address a_addr = f.p.host_a().address();
        const uint32_t conn_b = f.p.b->connection_to(a_addr);
        const uint32_t conn_a = f.p.a->connection_to(f.p.host_b().address());
        const size_t conns_b = f.p.b->num_connections();
        Rng rng(seed);
        auto hello = [&](wire::PacketType type, uint32_t conn_id, uint64_t token, uint16_t port) {
            wire::HelloPacket h;
            h.common.type = type;
            if (type == wire::PacketType::kHelloAck) {  // addressed to A's live connection
                h.common.dst_conn_id = conn_a;
                h.common.dst_token = f.p.a->connection(conn_a)->token();
            }
            h.src_conn_id = conn_id;
            h.src_token = token;
            h.isn = rng.next_u32() | 1;
            h.msg_isn = rng.next_u32() | 1;
            h.endpoint_port = port;
            h.num_paths = 8;
            h.max_payload = 4096;
            std::vector<std::byte> pkt(wire::kHelloSize);
            ASSERT_TRUE(wire::encode_hello(h, pkt).ok());
            PacketMeta m;
            m.src = a_addr.with_port(40000);
            m.dst = type == wire::PacketType::kHello ? f.p.host_b().address() : a_addr;
            auto& host = type == wire::PacketType::kHello ? f.p.host_b() : f.p.host_a();
            host.with_engine([&](core::Engine& e) { e.on_datagram(pkt, m, f.p.now()); });
        };
        // id 0 with a token, from A's own endpoint: taken for a restart on main.
        hello(wire::PacketType::kHello, 0, rng.next_u64() | 1, a_addr.port);
        // token 0 from a new endpoint port of A's address: made a connection on main.
        hello(wire::PacketType::kHello, rng.next_u32() | 1, 0, static_cast<uint16_t>(a_addr.port + 1));
        // id 0 in a HELLO_ACK that carries A's token.
        hello(wire::PacketType::kHelloAck, 0, rng.next_u64() | 1, f.p.host_b().address().port);
        f.p.sim.run_for(100us);
        EXPECT_EQ(f.p.b->stats().malformed_hello, 2u);
        EXPECT_EQ(f.p.a->stats().malformed_hello, 1u);
        EXPECT_EQ(f.p.b->num_connections(), conns_b) << "a HELLO without identity made a connection";
        EXPECT_EQ(f.p.b->connection_to(a_addr), conn_b);
        EXPECT_EQ(f.conn_b().state(), core::ConnState::kEstablished);
        EXPECT_EQ(f.conn_a().state(), core::ConnState::kEstablished);
        EXPECT_EQ(f.conn_b().peer_conn_id(), conn_a);
        EXPECT_EQ(write_once(f, dst, kd, 2), std::optional(Status::kSuccess))
            << "the live connection was hurt";
    }
}

// [PLACE-16] [PLACE-30] [ERR-5]: READ_RESPONSEs that answer no request, with max_payload
// 256 and msg_len 2^32 - 1 (a 2 MiB segment bitmap each on main), as many as the stream
// window: none takes a message slot or allocates anything from its msg_len; each is
// counted and dropped, with no NACK (an answer's msg_seq is the requester's, [PLACE-30]);
// the connection, the stream and another stream carry on.
TEST(Hardening, ResponseToNothingTakesNoSlot) {
    for (uint64_t seed : seeds_from_env(2, 1750)) {
        SCOPED_TRACE(seed_trace(seed));
        core::EndpointConfig cfg;
        cfg.max_payload = 256;
        cfg.forced_isn = 1000;  // isn 1000, msg_isn 993 ([CONN-5])
        Peers f(seed, 0, cfg);
        std::vector<std::byte> dst(4096);
        const auto kd = *f.p.b->register_memory(f.pb, dst.data(), dst.size(), kAllAccess);
        // One 64-byte WRITE establishes the connection, using B's path 0 only.
        core::SendWr w;
        w.wr_id = 1;
        w.opcode = WorkOpcode::kWrite;
        w.local_addr = f.a_addr(0);
        w.length = 64;
        w.lkey = f.ka.lkey;
        w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
        w.rkey = kd.rkey;
        f.post(w);
        ASSERT_TRUE(f.run_until([&] { return f.a_done.size() == 1; }));
        for (uint32_t i = 0; i < core::kStreamWindow; ++i) {
            wire::DataHeader h;
            h.opcode = wire::Opcode::kReadResponse;
            h.path_id = 5;  // unused by the WRITE: its window starts at isn
            h.payload_len = 256;
            h.path_psn = cfg.forced_isn + i;
            h.psn_floor = cfg.forced_isn;
            h.stream_id = f.sb;
            h.msg_len = 0xFFFFFFFF;
            h.remote_addr = 12345 + i;  // no READ of B's has that msg_seq
            h.msg_seq = 12345 + i;      // [PLACE-30] an answer names its request twice
            f.forge_to_b(h, std::byte{0x77});
        }
        f.p.sim.run_for(50us);  // the NACKs leave
        const core::Stream* st = f.p.b->stream(f.sb);
        ASSERT_NE(st, nullptr);
        size_t active = 0;
        for (const core::RxMessage& slot : st->ring) active += slot.active;
        EXPECT_EQ(active, 0u) << "a response to nothing took a message slot";
        EXPECT_EQ(f.conn_b().stats().orphan_responses, core::kStreamWindow);
        EXPECT_EQ(f.conn_b().stats().nacks_sent + f.conn_b().stats().nacks_dropped, 0u);
        EXPECT_EQ(f.conn_b().state(), core::ConnState::kEstablished);
        EXPECT_FALSE(st->rx_failed) << "answers are outside the stream: no refusal";
        // Another stream of the same connection is unaffected.
        const uint32_t a2 = *f.p.a->create_stream(f.pa, f.p.host_b().address(), 2, f.p.now());
        (void)*f.p.b->create_stream(f.pb, f.p.host_a().address(), 2, f.p.now());
        w.wr_id = 2;
        ASSERT_EQ(f.p.a->post_send(a2, w, f.p.now()), Error::kOk);
        f.p.host_a().kick();
        ASSERT_TRUE(f.run_until([&] { return f.a_done.size() == 2; }));
        EXPECT_EQ(f.a_done[1].status, Status::kSuccess) << core::to_string(f.a_done[1].status);
        w.wr_id = 3;  // and so is the stream the answers named
        f.post(w);
        ASSERT_TRUE(f.run_until([&] { return f.a_done.size() == 3; }));
        EXPECT_EQ(f.a_done[2].status, Status::kSuccess) << core::to_string(f.a_done[2].status);
    }
}

// [PLACE-31] [PLACE-12] [ERR-5]: a message's receive state is fixed, whatever the msg_len
// the wire announces. A hostile sender announces a 1 MiB WRITE in 256-byte segments (4096
// segments; on main a bitmap of 4096 bits made from the packet) and sends a segment a whole
// segment window above the first one missing: it is dropped and counted, nothing is
// written. The window's last segment is written at once, and the window slides.
TEST(Hardening, SegmentBeyondTheMessageWindowIsRefused) {
    for (uint64_t seed : seeds_from_env(2, 1770)) {
        SCOPED_TRACE(seed_trace(seed));
        core::EndpointConfig cfg;
        cfg.max_payload = 256;
        cfg.forced_isn = 1000;
        Peers f(seed, 0, cfg);
        constexpr uint32_t kLen = 1 << 20, kSeg = 256;
        std::vector<std::byte> dst(kLen, std::byte{0});
        const auto kd = *f.p.b->register_memory(f.pb, dst.data(), dst.size(), kAllAccess);
        core::SendWr w;  // one real WRITE establishes the connection
        w.wr_id = 1;
        w.opcode = WorkOpcode::kWrite;
        w.local_addr = f.a_addr(0);
        w.length = 64;
        w.lkey = f.ka.lkey;
        w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
        w.rkey = kd.rkey;
        f.post(w);
        ASSERT_TRUE(f.run_until([&] { return f.a_done.size() == 1; }));
        std::fill(dst.begin(), dst.end(), std::byte{0});
        const core::Stream* st = f.p.b->stream(f.sb);
        ASSERT_NE(st, nullptr);
        const uint32_t seq = st->delivered_seq;  // the next message B expects
        uint32_t psn = cfg.forced_isn;
        auto send_seg = [&](uint32_t seg) {
            wire::DataHeader h;
            h.opcode = wire::Opcode::kWrite;
            h.path_id = 6;  // a path the real WRITE did not use: its window starts at isn
            h.payload_len = kSeg;
            h.path_psn = psn++;
            h.psn_floor = cfg.forced_isn;
            h.stream_id = f.sb;
            h.msg_seq = seq;
            h.msg_len = kLen;
            h.offset = seg * kSeg;
            h.remote_addr = reinterpret_cast<uint64_t>(dst.data());
            h.rkey = kd.rkey;
            f.forge_to_b(h, std::byte{0x5A});
        };
        auto written = [&](uint32_t seg) { return dst[size_t{seg} * kSeg] == std::byte{0x5A}; };
        const uint64_t oow = f.conn_b().stats().out_of_window;
        send_seg(core::kSegmentWindow);  // segment 0 is missing: one past the window
        EXPECT_EQ(f.conn_b().stats().out_of_window, oow + 1);
        EXPECT_FALSE(written(core::kSegmentWindow)) << "a segment beyond the window was written";
        send_seg(core::kSegmentWindow - 1);  // the window's last: written at once
        EXPECT_EQ(f.conn_b().stats().out_of_window, oow + 1);
        EXPECT_TRUE(written(core::kSegmentWindow - 1));
        // Segment 0 slides the window by one: segment kSegmentWindow is inside now.
        send_seg(0);
        send_seg(core::kSegmentWindow);
        EXPECT_TRUE(written(core::kSegmentWindow));
        EXPECT_EQ(f.conn_b().stats().out_of_window, oow + 1);
        EXPECT_EQ(f.conn_b().stats().malformed, 0u);
        EXPECT_EQ(f.conn_b().state(), core::ConnState::kEstablished);
    }
}

// [PLACE-27] [PLACE-19] [ERR-8]: B executes A's 256 KiB READ and is answering it when B's
// side of the stream fails (B's own WRITE, sent just before, is refused with a remote
// access error). The answer is flushed with B's stream; A, which has part of it, must get
// an error for the READ. On main it waited for ever: its re-sent request was a stale
// duplicate at B, answered only with a delivery report, and B's ACKs kept [ERR-2] away.
// Found by fuzz/connection.cc.
TEST(Hardening, ReadAnswerFlushedByResponderFailureFails) {
    for (uint64_t seed : seeds_from_env(4, 1760)) {
        SCOPED_TRACE(seed_trace(seed));
        Peers f(seed);
        ASSERT_TRUE(f.run_until([&] {
            return f.conn_a().state() == core::ConnState::kEstablished &&
                   f.conn_b().state() == core::ConnState::kEstablished;
        }));
        constexpr uint32_t kLen = 256 * 1024;
        std::vector<std::byte> source(kLen, std::byte{0x3c});
        const auto ks = *f.p.b->register_memory(f.pb, source.data(), source.size(), kAllAccess);
        core::SendWr bad;  // B's WRITE with a key A never issued
        bad.wr_id = 9;
        bad.opcode = WorkOpcode::kWrite;
        bad.local_addr = reinterpret_cast<uint64_t>(source.data());
        bad.length = 64;
        bad.lkey = ks.lkey;
        bad.remote_addr = f.a_addr(0);
        bad.rkey = f.ka.rkey ^ 0x80;
        ASSERT_EQ(f.p.b->post_send(f.sb, bad, f.p.now()), Error::kOk);
        f.p.host_b().kick();
        core::SendWr rd;
        rd.wr_id = 2;
        rd.opcode = WorkOpcode::kRead;
        rd.local_addr = f.a_addr(0);
        rd.length = kLen;
        rd.lkey = f.ka.lkey;
        rd.remote_addr = reinterpret_cast<uint64_t>(source.data());
        rd.rkey = ks.rkey;
        f.post(rd);
        ASSERT_TRUE(f.run_until([&] { return !f.b_done.empty(); }));
        ASSERT_EQ(f.b_done[0].wr_id, 9u);
        EXPECT_EQ(f.b_done[0].status, Status::kRemoteAccess) << core::to_string(f.b_done[0].status);
        ASSERT_TRUE(f.a_done.empty()) << "the READ was answered before B's stream failed: "
                                         "the test proves nothing";
        ASSERT_TRUE(f.run_until([&] { return f.a_done.size() == 1; }))
            << "the READ whose answer B flushed never completed";
        EXPECT_EQ(f.a_done[0].wr_id, 2u);
        EXPECT_EQ(f.a_done[0].status, Status::kRemoteInvalid) << core::to_string(f.a_done[0].status);
        EXPECT_EQ(f.conn_a().state(), core::ConnState::kEstablished);
    }
}

// [PLACE-28] [PLACE-19]: a forged WRITE takes the msg_seq A's next message will have (an
// on-path attacker with the token; the fuzzer turned A's atomic into a WRITE in flight).
// A's atomic then arrives as a stale duplicate: B reports it delivered but holds no answer
// for it, and A's re-sent request was dropped the same way for ever, the connection
// healthy. B now answers a re-sent request it has no answer for with a NACK, and A fails
// the atomic. Found by fuzz/connection.cc.
TEST(Hardening, RequestWithoutAnswerFailsInsteadOfWaiting) {
    for (uint64_t seed : seeds_from_env(4, 1770)) {
        SCOPED_TRACE(seed_trace(seed));
        core::EndpointConfig cfg;
        cfg.forced_isn = 1000;  // isn 1000, msg_isn 993 ([CONN-5])
        Peers f(seed, 0, cfg);
        std::vector<std::byte> dst(4096, std::byte{0});
        const auto kd = *f.p.b->register_memory(f.pb, dst.data(), dst.size(), kAllAccess);
        core::SendWr w;  // establishes the connection and uses msg_seq 993
        w.wr_id = 1;
        w.opcode = WorkOpcode::kWrite;
        w.local_addr = f.a_addr(0);
        w.length = 64;
        w.lkey = f.ka.lkey;
        w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
        w.rkey = kd.rkey;
        f.post(w);
        ASSERT_TRUE(f.run_until([&] { return f.a_done.size() == 1; }));
        const uint32_t conn_b = f.p.b->connection_to(f.p.host_a().address());
        wire::DataHeader h;  // the forged WRITE, msg_seq 994, on a path A's WRITE left unused
        h.common.dst_conn_id = conn_b;
        h.common.dst_token = f.p.b->connection(conn_b)->token();
        h.opcode = wire::Opcode::kWrite;
        h.flags = wire::data_flag::kLast;
        h.path_id = 5;
        h.payload_len = 16;
        h.path_psn = cfg.forced_isn;
        h.psn_floor = cfg.forced_isn;
        h.stream_id = f.sb;
        h.msg_seq = cfg.forced_isn - 7 + 1;
        h.msg_len = 16;
        h.rkey = kd.rkey;
        h.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + 1024;
        std::vector<std::byte> pkt(wire::kDataHeaderSize + 16, std::byte{0x77});
        ASSERT_TRUE(wire::encode_data_header(h, pkt).ok());
        seal_for(*f.p.b, f.p.host_a().address(), pkt);
        PacketMeta m;
        m.src = f.p.host_a().address().with_port(50001);
        m.dst = f.p.host_b().address();
        f.p.host_b().with_engine([&](core::Engine& e) { e.on_datagram(pkt, m, f.p.now()); });
        f.p.sim.run_for(50us);
        core::SendWr add;  // A's atomic: msg_seq 994, already "delivered" at B
        add.wr_id = 2;
        add.opcode = WorkOpcode::kAtomicFetchAdd;
        add.local_addr = f.a_addr(4096);
        add.length = 8;
        add.lkey = f.ka.lkey;
        add.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + 2048;
        add.rkey = kd.rkey;
        add.compare_add = 1;
        f.post(add);
        ASSERT_TRUE(f.run_until([&] { return f.a_done.size() == 2; }, 2000ms))
            << "the atomic B never answered did not complete";
        EXPECT_EQ(f.a_done[1].wr_id, 2u);
        EXPECT_EQ(f.a_done[1].status, Status::kRemoteInvalid) << core::to_string(f.a_done[1].status);
        EXPECT_EQ(f.conn_b().stats().atomics_executed, 0u);
        EXPECT_EQ(f.conn_a().state(), core::ConnState::kEstablished);
    }
}

// stale_acks: A WRITEs 512 KiB to B; once 64 KiB are placed, every route is cut both ways
// for good, and from then on A gets, every `every`, the same ACK on path 0: one B could
// have sent at the cut, answering nothing A sent since (`probe_reply`: flagged as the
// reply to a PROBE), as a buggy or hostile peer would repeat it. Each ACK shows the peer
// alive; none shows progress. Runs for `span` after the cut, or until A's WRITE completes.
struct StaleAcks {
    std::vector<uint64_t> probes;  // PROBEs A sent in each 100 ms after the cut
    Duration done_after = Duration::max();  // the WRITE's completion, from the cut
    Status status = Status::kSuccess;
    uint64_t stalled = 0;  // [LOSS-13] stalled timeouts
};
StaleAcks stale_acks(bool probe_reply, std::chrono::microseconds every, std::chrono::milliseconds span) {
    Peers f(31);
    std::vector<std::byte> dst(512 * 1024, std::byte{0});
    const auto kd = *f.p.b->register_memory(f.pb, dst.data(), dst.size(), kAllAccess);
    core::SendWr w;
    w.wr_id = 1;
    w.opcode = WorkOpcode::kWrite;
    w.local_addr = f.a_addr(0);
    w.length = static_cast<uint32_t>(dst.size());
    w.lkey = f.ka.lkey;
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    w.rkey = kd.rkey;
    f.post(w);
    EXPECT_TRUE(f.run_until([&] { return f.p.b->stream_bytes_placed(f.sb) >= 64 * 1024; }));
    EXPECT_TRUE(f.a_done.empty()) << "the WRITE completed before the cut: the test proves nothing";
    const auto cut = f.p.sim.now();
    for (uint32_t r = 0; r < 8; ++r) {
        f.p.net.link(f.p.host_a(), f.p.host_b(), r).config().blackhole = sim::TimeWindow{cut, sim::kSimForever};
        f.p.net.link(f.p.host_b(), f.p.host_a(), r).config().blackhole = sim::TimeWindow{cut, sim::kSimForever};
    }
    wire::AckPacket stale = peer_ack(f.p, 0);
    if (probe_reply) {
        stale.flags = wire::ack_flag::kProbeReply;
        stale.probe_psn = f.conn_a().tx_path(0).base;
    }
    const uint32_t conn = f.p.a->connection_to(f.p.host_b().address());
    auto probes = [&] {
        uint64_t n = 0;
        const core::Connection& c = *f.p.a->connection(conn);
        for (uint16_t i = 0; i < c.num_paths(); ++i) n += c.path_stats(i).probes_sent;
        return n;
    };
    StaleAcks r;
    uint64_t counted = probes();
    const auto end = cut + span;
    auto window = cut + 100ms;
    while (f.p.sim.now() < end && f.a_done.empty()) {
        f.p.host_a().with_engine([&](core::Engine&) {
            if (f.p.a->connection(conn)->state() == core::ConnState::kEstablished) give_to_a(f.p, stale);
        });
        f.p.sim.run_for(every);
        if (f.p.sim.now() >= window || !f.a_done.empty()) {
            r.probes.push_back(probes() - counted);
            counted = probes();
            window += 100ms;
        }
    }
    const core::Connection& c = *f.p.a->connection(conn);
    for (uint16_t i = 0; i < c.num_paths(); ++i) r.stalled += c.path_stats(i).stalled_timeouts;
    if (!f.a_done.empty()) {
        r.done_after = sim::to_core_time(f.p.sim.now()) - sim::to_core_time(cut);
        r.status = f.a_done[0].status;
    }
    std::printf("stale %s every %lld us: %llu stalled timeouts; PROBEs per 100 ms:",
                probe_reply ? "probe reply" : "ACK", static_cast<long long>(every.count()),
                static_cast<unsigned long long>(r.stalled));
    for (uint64_t n : r.probes) std::printf(" %llu", static_cast<unsigned long long>(n));
    if (f.a_done.empty())
        std::printf("; no completion after %lld ms\n", static_cast<long long>(span.count()));
    else
        std::printf("; WRITE completed %s %lld ms after the cut\n", core::to_string(r.status),
                    static_cast<long long>(r.done_after.count() / 1'000'000));
    return r;
}

// [LOSS-13] [ERR-2] a peer that keeps sending an old ACK (or an old probe reply), and
// nothing else, is dead all the same: the stall rule holds a path's ladder only while some
// ACK answered something new within stall_tolerance, and only such ACKs hold off
// peer_dead_timeout. Before, the stale ACKs held every path at its first step for ever:
// 17,500 to 19,500 PROBEs a second on the 8 paths, nothing lost, no path failed and no
// completion in 3 s. Now the paths escalate after 50 ms and fail ([PATH-3]), and the WRITE
// fails with kPeerDead peer_dead_timeout after the last answer.
TEST(Hardening, StaleAcksDoNotKeepADeadPeerProbed) {
    for (bool probe_reply : {false, true}) {
        for (auto every : {1000us, 100us}) {
            SCOPED_TRACE(std::string(probe_reply ? "stale probe reply" : "stale ACK") + " every " +
                         std::to_string(every.count()) + " us");
            const StaleAcks r = stale_acks(probe_reply, every, 3000ms);
            ASSERT_FALSE(r.probes.empty());
            EXPECT_EQ(r.status, Status::kPeerDead) << core::to_string(r.status);
            // peer_dead_timeout (1 s) from the last answer, which came just before the cut.
            EXPECT_LT(r.done_after, Duration{1100ms}) << "no error completion";
            uint64_t total = 0;
            for (uint64_t n : r.probes) total += n;
            EXPECT_LT(total, 3000u) << "PROBEs sent after the cut";
            EXPECT_LT(r.probes.back(), 200u) << "PROBEs in the last 100 ms";
        }
    }
}

}  // namespace
}  // namespace mroce::test
