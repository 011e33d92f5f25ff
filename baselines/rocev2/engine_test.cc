// Unit tests of the RoCEv2 engine: two engines joined by a scripted in-test wire (fixed
// delay, per-packet drop filter), so each protocol rule is checked on exact packets:
// one NAK per gap and go-back-N from it, the retransmit timeout and its typed error,
// RNR waits, remote access errors, the window limit, pacing, and counted bad input.
#include "baselines/rocev2/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <vector>

namespace mroce::rocev2 {
namespace {

const Address kAddrA = Address::ipv4(0x0A000001, kUdpPort);
const Address kAddrB = Address::ipv4(0x0A000002, kUdpPort);

// Loop moves datagrams between engine 0 (A) and 1 (B) with a fixed one-way delay and
// calls their timers; drop(from, decoded) may discard a datagram as it leaves.
struct Loop {
    explicit Loop(const RoceConfig& cfg)
        : a(cfg, kAddrA, 1), b(cfg, kAddrB, 2) {}

    RoceEngine a, b;
    Time now = time_from_ns(1'000'000);
    Duration delay = 1us;
    struct Flight {
        int to;
        std::vector<std::byte> bytes;
        PacketMeta meta;
        Time at;
    };
    std::deque<Flight> wire;
    std::function<bool(int from, const Decoded&)> drop;
    std::function<void(int from, const Decoded&)> tap;
    std::function<void(int from, const Decoded&, const PacketMeta&)> meta_tap;
    std::vector<core::Event> events[2];
    bool ce_to_b = false;  // mark every datagram towards B CE (a congested hop)

    RoceEngine& engine(int i) { return i == 0 ? a : b; }

    void pump() {
        for (int i = 0; i < 2; ++i) {
            RoceEngine& e = engine(i);
            std::vector<std::byte> buf(e.max_datagram_size());
            PacketMeta meta;
            while (size_t n = e.poll_transmit(buf, meta, now)) {
                buf.resize(n);
                Result<Decoded> d = decode(buf);
                EXPECT_TRUE(d.ok());
                if (tap) tap(i, *d);
                if (meta_tap) meta_tap(i, *d, meta);
                if (ce_to_b && i == 0) meta.ecn = ecn::kCe;
                if (!drop || !drop(i, *d)) wire.push_back(Flight{1 - i, buf, meta, now + delay});
                buf.assign(e.max_datagram_size(), std::byte{0});
            }
            while (auto ev = e.poll_event()) events[i].push_back(*ev);
        }
    }

    // step advances to the next arrival or deadline; false when nothing is left.
    bool step() {
        pump();
        Time t = std::min(a.next_deadline(), b.next_deadline());
        if (!wire.empty()) t = std::min(t, wire.front().at);
        if (t == kNever) return false;
        now = std::max(now, t);
        while (!wire.empty() && wire.front().at <= now) {
            Flight f = std::move(wire.front());
            wire.pop_front();
            engine(f.to).on_datagram(f.bytes, f.meta, now);
        }
        for (int i = 0; i < 2; ++i)
            if (engine(i).next_deadline() <= now) engine(i).on_timeout(now);
        pump();
        return true;
    }

    void run(size_t max_steps = 1'000'000) {
        for (size_t i = 0; i < max_steps && step();) ++i;
    }
};

struct Pair {
    explicit Pair(const RoceConfig& cfg, uint32_t len = 10 * 256) : loop(cfg) {
        src.resize(len);
        for (uint32_t i = 0; i < len; ++i) src[i] = static_cast<std::byte>(i * 7 + 3);
        dst.assign(len, std::byte{0});
        pd_a = loop.a.alloc_pd();
        pd_b = loop.b.alloc_pd();
        keys_a = *loop.a.register_memory(pd_a, src.data(), src.size(), core::access::kLocalWrite);
        keys_b = *loop.b.register_memory(pd_b, dst.data(), dst.size(),
                                         core::access::kLocalWrite | core::access::kRemoteWrite);
        qa = *loop.a.reserve_stream(pd_a);
        qb = *loop.b.reserve_stream(pd_b);
        EXPECT_EQ(loop.a.bind_stream(qa, kAddrB, qb, loop.now), Error::kOk);
        EXPECT_EQ(loop.b.bind_stream(qb, kAddrA, qa, loop.now), Error::kOk);
    }
    core::SendWr write(uint64_t id, uint32_t len) const {
        core::SendWr wr;
        wr.wr_id = id;
        wr.opcode = core::WorkOpcode::kWrite;
        wr.local_addr = reinterpret_cast<uint64_t>(src.data());
        wr.length = len;
        wr.lkey = keys_a.lkey;
        wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
        wr.rkey = keys_b.rkey;
        return wr;
    }
    std::vector<core::Completion> completions(int side) const {
        std::vector<core::Completion> out;
        for (const core::Event& e : loop.events[side])
            if (e.kind == core::EventKind::kCompletion) out.push_back(e.completion);
        return out;
    }

    Loop loop;
    std::vector<std::byte> src, dst;
    uint32_t pd_a, pd_b, qa, qb;
    core::MemoryKeys keys_a, keys_b;
};

RoceConfig small_config() {
    RoceConfig c;
    c.mtu = 256;
    c.retransmit_timeout = 100us;
    return c;
}

TEST(RoceEngine, WriteArrivesAndCompletesOnce) {
    Pair s(small_config());
    ASSERT_EQ(s.loop.a.post_send(s.qa, s.write(42, 10 * 256 - 5), s.loop.now), Error::kOk);
    s.loop.run();
    const auto c = s.completions(0);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].wr_id, 42u);
    EXPECT_EQ(c[0].status, core::Status::kSuccess);
    EXPECT_EQ(c[0].byte_len, 10u * 256 - 5);
    EXPECT_TRUE(std::equal(s.src.begin(), s.src.end() - 5, s.dst.begin()));
    EXPECT_EQ(s.dst.back(), std::byte{0});
    EXPECT_EQ(s.loop.a.qp(s.qa)->stats.retransmitted_packets, 0u);
    EXPECT_TRUE(s.completions(1).empty());  // a plain WRITE completes nothing at B
}

TEST(RoceEngine, OneLossGivesOneNakAndGoBackN) {
    Pair s(small_config());
    bool dropped = false;
    int naks = 0;
    s.loop.drop = [&](int from, const Decoded& d) {
        if (from == 0 && d.h.bth.psn == 3 && !dropped) return dropped = true;
        return false;
    };
    s.loop.tap = [&](int from, const Decoded& d) {
        if (from == 1 && d.h.bth.opcode == Opcode::kAck && d.h.aeth.kind() == AckKind::kNak) {
            ++naks;
            EXPECT_EQ(d.h.bth.psn, 3u);  // the NAK names the expected PSN
        }
    };
    ASSERT_EQ(s.loop.a.post_send(s.qa, s.write(1, 10 * 256), s.loop.now), Error::kOk);
    s.loop.run();
    EXPECT_EQ(naks, 1);  // PSNs 4..9 all arrive out of sequence: still one NAK
    const QueuePair& qa = *s.loop.a.qp(s.qa);
    EXPECT_EQ(qa.stats.go_back_nak, 1u);
    EXPECT_EQ(qa.stats.retransmitted_packets, 7u);  // 3..9 again
    EXPECT_EQ(qa.stats.timeouts, 0u);
    EXPECT_EQ(s.loop.b.qp(s.qb)->stats.out_of_sequence, 6u);
    ASSERT_EQ(s.completions(0).size(), 1u);
    EXPECT_EQ(s.completions(0)[0].status, core::Status::kSuccess);
    EXPECT_EQ(s.src, s.dst);
}

TEST(RoceEngine, LostRetransmissionWaitsForTheTimeoutUnlessRenakIsOn) {
    for (bool renak : {false, true}) {
        SCOPED_TRACE(renak ? "renak on" : "renak off (IBTA)");
        RoceConfig cfg = small_config();
        cfg.renak_after_rewind = renak;
        Pair s(cfg);
        int psn3 = 0;
        s.loop.drop = [&](int from, const Decoded& d) {
            return from == 0 && d.h.bth.psn == 3 && ++psn3 <= 2;  // first two copies lost
        };
        ASSERT_EQ(s.loop.a.post_send(s.qa, s.write(1, 10 * 256), s.loop.now), Error::kOk);
        s.loop.run();
        const QueuePair& qa = *s.loop.a.qp(s.qa);
        EXPECT_EQ(qa.stats.timeouts, renak ? 0u : 1u);
        EXPECT_EQ(qa.stats.go_back_nak, renak ? 2u : 1u);
        ASSERT_EQ(s.completions(0).size(), 1u);
        EXPECT_EQ(s.src, s.dst);
    }
}

TEST(RoceEngine, RetryExceededFailsTheWrAndFlushesTheRest) {
    Pair s(small_config());
    s.loop.drop = [](int from, const Decoded&) { return from == 0; };  // A -> B is dead
    ASSERT_EQ(s.loop.a.post_send(s.qa, s.write(1, 256), s.loop.now), Error::kOk);
    ASSERT_EQ(s.loop.a.post_send(s.qa, s.write(2, 256), s.loop.now), Error::kOk);
    s.loop.run();
    const auto c = s.completions(0);
    ASSERT_EQ(c.size(), 2u);
    EXPECT_EQ(c[0].wr_id, 1u);
    EXPECT_EQ(c[0].status, core::Status::kRetryExceeded);
    EXPECT_EQ(c[1].wr_id, 2u);
    EXPECT_EQ(c[1].status, core::Status::kFlushed);
    EXPECT_EQ(s.loop.a.qp(s.qa)->stats.timeouts, small_config().retry_count + 1u);
    bool failed = false;
    for (const auto& e : s.loop.events[0]) failed |= e.kind == core::EventKind::kConnectionFailed;
    EXPECT_TRUE(failed);
    EXPECT_EQ(s.loop.a.post_send(s.qa, s.write(3, 256), s.loop.now), Error::kWrongState);
}

TEST(RoceEngine, SendWaitsForAReceiveThroughRnrNaks) {
    RoceConfig cfg = small_config();
    cfg.rnr_delay = 50us;
    Pair s(cfg);
    core::SendWr wr = s.write(7, 3 * 256);
    wr.opcode = core::WorkOpcode::kSendImm;
    wr.imm = 0x1234;
    ASSERT_EQ(s.loop.a.post_send(s.qa, wr, s.loop.now), Error::kOk);
    for (int i = 0; i < 50; ++i) s.loop.step();  // a few RNR rounds, no receive posted
    EXPECT_GT(s.loop.b.qp(s.qb)->stats.rnr_naks_sent, 0u);
    EXPECT_TRUE(s.completions(0).empty());
    core::RecvWr r{99, reinterpret_cast<uint64_t>(s.dst.data()), 4 * 256, s.keys_b.lkey};
    ASSERT_EQ(s.loop.b.post_recv(s.qb, r, s.loop.now), Error::kOk);
    s.loop.run();
    ASSERT_EQ(s.completions(0).size(), 1u);
    EXPECT_EQ(s.completions(0)[0].status, core::Status::kSuccess);
    const auto rc = s.completions(1);
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(rc[0].wr_id, 99u);
    EXPECT_EQ(rc[0].opcode, core::WorkOpcode::kRecv);
    EXPECT_EQ(rc[0].byte_len, 3u * 256);
    EXPECT_TRUE(rc[0].has_imm);
    EXPECT_EQ(rc[0].imm, 0x1234u);
    EXPECT_TRUE(std::equal(s.src.begin(), s.src.begin() + 3 * 256, s.dst.begin()));
}

TEST(RoceEngine, BadRkeyIsARemoteAccessError) {
    Pair s(small_config());
    core::SendWr wr = s.write(5, 512);
    wr.rkey ^= 0x1;  // wrong tag
    ASSERT_EQ(s.loop.a.post_send(s.qa, wr, s.loop.now), Error::kOk);
    s.loop.run();
    const auto c = s.completions(0);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, core::Status::kRemoteAccess);
    EXPECT_TRUE(std::all_of(s.dst.begin(), s.dst.end(), [](std::byte b) { return b == std::byte{0}; }));
}

TEST(RoceEngine, ReceiveTooSmallFailsBothSides) {
    Pair s(small_config());
    core::RecvWr r{1, reinterpret_cast<uint64_t>(s.dst.data()), 100, s.keys_b.lkey};
    ASSERT_EQ(s.loop.b.post_recv(s.qb, r, s.loop.now), Error::kOk);
    core::SendWr wr = s.write(5, 300);
    wr.opcode = core::WorkOpcode::kSend;
    ASSERT_EQ(s.loop.a.post_send(s.qa, wr, s.loop.now), Error::kOk);
    s.loop.run();
    ASSERT_EQ(s.completions(0).size(), 1u);
    EXPECT_EQ(s.completions(0)[0].status, core::Status::kRemoteInvalid);
    ASSERT_EQ(s.completions(1).size(), 1u);
    EXPECT_EQ(s.completions(1)[0].status, core::Status::kLocalLength);
}

TEST(RoceEngine, WindowLimitsUnacknowledgedPackets) {
    RoceConfig cfg = small_config();
    cfg.window_packets = 4;
    cfg.ack_every = 1;
    Pair s(cfg, 64 * 256);
    uint64_t max_outstanding = 0;
    s.loop.tap = [&](int from, const Decoded&) {
        if (from != 0) return;
        const QueuePair& q = *s.loop.a.qp(s.qa);
        max_outstanding = std::max(max_outstanding, q.sent_high - q.una);
    };
    ASSERT_EQ(s.loop.a.post_send(s.qa, s.write(1, 64 * 256), s.loop.now), Error::kOk);
    s.loop.run();
    EXPECT_EQ(max_outstanding, 4u);
    EXPECT_EQ(s.src, s.dst);
}

TEST(RoceEngine, CnpSlowsTheSenderWithPacing) {
    RoceConfig cfg = small_config();
    cfg.window_packets = 16;  // ack-clocked, so CNPs act while data is still queued
    Pair s(cfg, 400 * 256);
    s.loop.delay = 10us;
    s.loop.ce_to_b = true;  // B answers with CNPs, at most one per 50 us
    int cnps = 0;
    s.loop.tap = [&](int from, const Decoded& d) { cnps += from == 1 && d.h.bth.opcode == Opcode::kCnp; };
    ASSERT_EQ(s.loop.a.post_send(s.qa, s.write(1, 400 * 256), s.loop.now), Error::kOk);
    const Time start = s.loop.now;
    s.loop.run();
    const QueuePair& qa = *s.loop.a.qp(s.qa);
    EXPECT_GT(qa.stats.cnps_received, 1u);
    EXPECT_LT(qa.dcqcn.stats().min_rate_bps, DcqcnConfig{}.line_rate_bps / 4);
    // The CNP limit: no more CNPs than 50 us intervals in the run (+1 for the first).
    const auto run_us = (s.loop.now - start) / 1us;
    EXPECT_LE(cnps, run_us / 50 + 1);
    EXPECT_EQ(s.src, s.dst);
}

// A QP's class is on every packet it sends: data one way, ACKs and CNPs the other (each
// side's QP has its own class, as each side's verbs QP has its own service level).
TEST(RoceEngine, EveryPacketOfAQpLeavesInItsClass) {
    RoceConfig cfg = small_config();
    cfg.traffic_class = 2;  // the default for new QPs
    cfg.window_packets = 16;
    Pair s(cfg, 64 * 256);
    EXPECT_EQ(s.loop.a.qp(s.qa)->traffic_class, 2);
    ASSERT_EQ(s.loop.b.set_traffic_class(s.qb, 6), Error::kOk);
    EXPECT_EQ(s.loop.b.set_traffic_class(s.qb, 8), Error::kInvalidArgument);
    EXPECT_EQ(s.loop.b.set_traffic_class(999, 1), Error::kNotFound);
    s.loop.ce_to_b = true;  // so B sends CNPs too
    std::map<std::pair<int, Opcode>, std::set<uint8_t>> seen;  // (side, opcode) -> classes
    s.loop.meta_tap = [&](int from, const Decoded& d, const PacketMeta& m) {
        const Opcode op = is_data(d.h.bth.opcode) ? Opcode::kWriteOnly : d.h.bth.opcode;
        seen[{from, op}].insert(m.traffic_class);
    };
    ASSERT_EQ(s.loop.a.post_send(s.qa, s.write(1, 64 * 256), s.loop.now), Error::kOk);
    s.loop.run();
    ASSERT_EQ(s.completions(0).size(), 1u);
    const std::set<uint8_t> two{2}, six{6};
    EXPECT_EQ(seen[std::make_pair(0, Opcode::kWriteOnly)], two);
    EXPECT_EQ(seen[std::make_pair(1, Opcode::kAck)], six);
    EXPECT_EQ(seen[std::make_pair(1, Opcode::kCnp)], six);
    EXPECT_EQ(seen.size(), 3u);  // nothing else was sent
    cfg.traffic_class = 8;
    EXPECT_NE(config_error(cfg), "");
}

TEST(RoceEngine, PacedSenderReportsItsNextSendTimeAsDeadline) {
    Pair s(small_config(), 100 * 256);
    // A CNP from B halves A's rate; then A may send only one packet per gap.
    Headers h;
    h.bth.opcode = Opcode::kCnp;
    h.bth.dest_qp = s.qa;
    std::vector<std::byte> cnp(kCnpSize);
    ASSERT_TRUE(encode(h, {}, cnp).ok());
    PacketMeta m;
    m.src = kAddrB.with_port(1234);
    m.dst = kAddrA;
    s.loop.a.on_datagram(cnp, m, s.loop.now);
    ASSERT_EQ(s.loop.a.qp(s.qa)->dcqcn.rate_bps(), 50'000'000'000u);
    ASSERT_EQ(s.loop.a.post_send(s.qa, s.write(1, 100 * 256), s.loop.now), Error::kOk);
    std::vector<std::byte> buf(s.loop.a.max_datagram_size());
    PacketMeta out;
    const size_t n = s.loop.a.poll_transmit(buf, out, s.loop.now);
    ASSERT_GT(n, 0u);
    EXPECT_EQ(s.loop.a.poll_transmit(buf, out, s.loop.now), 0u);  // paced
    // n bytes at 50 Gbit/s: n * 8 / 50 ns, rounded up to the nanosecond.
    const int64_t gap_ns = static_cast<int64_t>((n * 8 * 1000 / 50 + 999) / 1000);
    EXPECT_EQ(s.loop.a.next_deadline(), s.loop.now + Duration{gap_ns});
    s.loop.a.on_timeout(s.loop.now + Duration{gap_ns});
    EXPECT_GT(s.loop.a.poll_transmit(buf, out, s.loop.now + Duration{gap_ns}), 0u);
}

// OnePair: 256-byte source and destination regions on A and B, for tests that post a
// WRITE on each of several QPs between the pair.
struct OnePair {
    explicit OnePair(Loop& l) : loop(l) {
        pd_a = loop.a.alloc_pd();
        pd_b = loop.b.alloc_pd();
        ka = *loop.a.register_memory(pd_a, src.data(), src.size(), core::access::kLocalWrite);
        kb = *loop.b.register_memory(pd_b, dst.data(), dst.size(),
                                     core::access::kLocalWrite | core::access::kRemoteWrite);
    }
    // new_qp_write binds a new QP on each side and posts one 256-byte WRITE on A's;
    // returns A's QP.
    uint32_t new_qp_write(uint64_t wr_id) {
        const uint32_t qa = *loop.a.reserve_stream(pd_a), qb = *loop.b.reserve_stream(pd_b);
        EXPECT_EQ(loop.a.bind_stream(qa, kAddrB, qb, loop.now), Error::kOk);
        EXPECT_EQ(loop.b.bind_stream(qb, kAddrA, qa, loop.now), Error::kOk);
        core::SendWr wr;
        wr.wr_id = wr_id;
        wr.opcode = core::WorkOpcode::kWrite;
        wr.local_addr = reinterpret_cast<uint64_t>(src.data());
        wr.length = 256;
        wr.lkey = ka.lkey;
        wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
        wr.rkey = kb.rkey;
        EXPECT_EQ(loop.a.post_send(qa, wr, loop.now), Error::kOk);
        return qa;
    }
    // exchange delivers A's datagrams to B, then B's answers to A, showing each with its
    // meta to `seen(side, meta)` (pump() hides meta, so this polls the engines directly).
    template <class Seen>
    void exchange(Seen&& seen) {
        for (int side = 0; side < 2; ++side) {
            RoceEngine& e = loop.engine(side);
            std::vector<std::byte> buf(e.max_datagram_size());
            PacketMeta meta;
            while (size_t n = e.poll_transmit(buf, meta, loop.now)) {
                seen(side, meta);
                loop.engine(1 - side).on_datagram(std::span(buf.data(), n), meta, loop.now);
            }
            loop.now += 10us;  // past B's ACK delay
            loop.engine(1 - side).on_timeout(loop.now);
        }
    }

    Loop& loop;
    std::vector<std::byte> src = std::vector<std::byte>(256), dst = std::vector<std::byte>(256);
    uint32_t pd_a = 0, pd_b = 0;
    core::MemoryKeys ka, kb;
};

TEST(RoceEngine, EachQpStaysOnOnePortAndQpsSpreadOverPorts) {
    // A host with 4 NIC ports (planes): every packet of a QP, data and responses, leaves
    // through port src_port % 4, and 32 QPs between one pair use every port.
    RoceConfig cfg = small_config();
    cfg.num_local_ports = 4;
    Loop loop(cfg);
    OnePair pair(loop);
    for (int i = 0; i < 32; ++i) (void)pair.new_qp_write(static_cast<uint64_t>(i));
    std::set<uint16_t> ports_used[2];
    size_t packets = 0;
    pair.exchange([&](int side, const PacketMeta& meta) {
        ++packets;
        EXPECT_EQ(meta.local_port, meta.src.port % 4) << "side " << side;
        ports_used[side].insert(meta.local_port);
    });
    EXPECT_GE(packets, 64u);  // 32 WRITEs and at least 32 ACKs
    EXPECT_EQ(ports_used[0].size(), 4u);
    EXPECT_EQ(ports_used[1].size(), 4u);
}

TEST(RoceEngine, RoundRobinPortsPutAPairsQpsEvenlyOnThePlanes) {
    // port_choice = kRoundRobin: 8 QPs between one pair, created together, put 2 on each
    // of 4 ports, data and ACKs alike; by source port the same 8 QPs crowd some ports.
    for (const PortChoice choice : {PortChoice::kRoundRobin, PortChoice::kSourcePort}) {
        RoceConfig cfg = small_config();
        cfg.num_local_ports = 4;
        cfg.port_choice = choice;
        Loop loop(cfg);
        OnePair pair(loop);
        for (int i = 0; i < 8; ++i) {
            const uint32_t qa = pair.new_qp_write(static_cast<uint64_t>(i));
            EXPECT_EQ(loop.a.qp(qa)->local_port, choice == PortChoice::kRoundRobin ? i % 4
                                                                                  : loop.a.qp(qa)->src_port % 4);
        }
        std::array<std::array<int, 4>, 2> per_port{};  // [side][port]: packets
        pair.exchange([&](int side, const PacketMeta& meta) {
            ASSERT_LT(meta.local_port, 4);
            ++per_port[side][meta.local_port];
        });
        const auto [lo, hi] = std::minmax_element(per_port[0].begin(), per_port[0].end());
        if (choice == PortChoice::kRoundRobin) {
            EXPECT_EQ(per_port[0], (std::array<int, 4>{2, 2, 2, 2}));  // one WRITE per QP
            EXPECT_EQ(per_port[1], (std::array<int, 4>{2, 2, 2, 2}));  // one ACK per QP
        } else {
            EXPECT_GT(*hi - *lo, 0) << "these 8 source ports happen to split evenly";
        }
    }
}

TEST(RoceEngine, BadDatagramsAreCountedAndDropped) {
    Pair s(small_config());
    PacketMeta m;
    m.src = kAddrB.with_port(1234);
    m.dst = kAddrA;
    RoceEngine& a = s.loop.a;
    std::vector<std::byte> junk(5, std::byte{0});
    a.on_datagram(junk, m, s.loop.now);
    EXPECT_EQ(a.stats().truncated, 1u);
    Headers h;
    h.bth.opcode = Opcode::kAck;
    h.bth.dest_qp = 0x777;  // no such QP
    std::vector<std::byte> ack(kBthSize + kAethSize + kIcrcSize);
    ASSERT_TRUE(encode(h, {}, ack).ok());
    a.on_datagram(ack, m, s.loop.now);
    EXPECT_EQ(a.stats().unknown_qp, 1u);
    h.bth.dest_qp = s.qa;
    ASSERT_TRUE(encode(h, {}, ack).ok());
    PacketMeta stranger = m;
    stranger.src = Address::ipv4(0x0A0000FF, 4791);
    a.on_datagram(ack, stranger, s.loop.now);
    EXPECT_EQ(a.stats().wrong_peer, 1u);
    h.bth.pkey = 0x1234;
    ASSERT_TRUE(encode(h, {}, ack).ok());
    a.on_datagram(ack, m, s.loop.now);
    EXPECT_EQ(a.stats().bad_pkey, 1u);
    ack[0] = std::byte{0x0C};  // RDMA READ request: not supported yet
    a.on_datagram(ack, m, s.loop.now);
    EXPECT_EQ(a.stats().bad_type, 1u);
    EXPECT_EQ(a.stats().datagrams_received, 5u);
    EXPECT_FALSE(a.poll_event().has_value());
}

TEST(RoceEngine, WorkApiChecksLikeTheEndpoint) {
    Pair s(small_config());
    RoceEngine& a = s.loop.a;
    EXPECT_EQ(a.reserve_stream(99).error(), Error::kInvalidArgument);
    EXPECT_EQ(a.bind_stream(s.qa, kAddrB, s.qb, s.loop.now), Error::kWrongState);
    EXPECT_EQ(a.bind_stream(12345, kAddrB, s.qb, s.loop.now), Error::kNotFound);
    core::SendWr wr = s.write(1, 256);
    wr.lkey ^= 0x1;
    EXPECT_EQ(a.post_send(s.qa, wr, s.loop.now), Error::kAccessDenied);
    wr = s.write(1, 256);
    wr.opcode = core::WorkOpcode::kRecv;
    EXPECT_EQ(a.post_send(s.qa, wr, s.loop.now), Error::kInvalidArgument);
    const uint32_t unbound = *a.reserve_stream(s.pd_a);
    EXPECT_EQ(a.post_send(unbound, s.write(1, 256), s.loop.now), Error::kWrongState);
    EXPECT_NE(RoceEngine::src_port_for(2, 3), RoceEngine::src_port_for(3, 2));
    EXPECT_GE(RoceEngine::src_port_for(2, 3), 49152);
    RoceConfig bad;
    bad.mtu = 10;
    EXPECT_NE(config_error(bad).find("mtu"), std::string::npos);
}

}  // namespace
}  // namespace mroce::rocev2
