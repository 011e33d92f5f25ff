// tests/core/traffic_class_test.cc — [STREAM-14]: every DATA packet leaves in its stream's
// traffic class, every packet that serves the whole connection (HELLO, ACK, PROBE, ...) in
// the highest class of the streams bound to the connection, and a class change or a
// destroyed stream moves that control class. Watched on the in-process network's tap.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "tests/core/harness.h"
#include "wire/data.h"
#include "wire/header.h"

namespace mroce::test {
namespace {

using namespace std::chrono_literals;

// Seen: every packet one side sent, by type, with the class its metadata carried.
struct Seen {
    std::map<wire::PacketType, std::set<uint8_t>> classes;  // type -> classes seen
    std::map<uint32_t, std::set<uint8_t>> data_classes;      // DATA stream_id -> classes
    uint64_t data = 0, retx = 0, acks = 0;
};

struct TwoStreams {
    explicit TwoStreams(uint64_t seed, double loss = 0) : pair(seed, net(loss), cfg(), cfg()) {
        src.assign(kLen, std::byte{0x5a});
        dst.assign(2 * kLen, std::byte{0});
        const Time t = pair.now();
        pa = pair.a->alloc_pd();
        pb = pair.b->alloc_pd();
        ka = *pair.a->register_memory(pa, src.data(), src.size(), core::access::kLocalWrite);
        kb = *pair.b->register_memory(pb, dst.data(), dst.size(),
                                      core::access::kLocalWrite | core::access::kRemoteWrite);
        // Reserve first so the classes are set before the streams bind (as a queue pair's
        // attributes are before it connects).
        a_lo = *pair.a->reserve_stream(pa);
        a_hi = *pair.a->reserve_stream(pa);
        b_lo = *pair.b->reserve_stream(pb);
        b_hi = *pair.b->reserve_stream(pb);
        set_class(*pair.a, a_lo, 1);
        set_class(*pair.a, a_hi, 5);
        set_class(*pair.b, b_lo, 1);
        set_class(*pair.b, b_hi, 3);  // B's side of the high stream uses a lower class
        EXPECT_EQ(pair.a->bind_stream(a_lo, pair.host_b().address(), b_lo, t), Error::kOk);
        EXPECT_EQ(pair.a->bind_stream(a_hi, pair.host_b().address(), b_hi, t), Error::kOk);
        EXPECT_EQ(pair.b->bind_stream(b_lo, pair.host_a().address(), a_lo, t), Error::kOk);
        EXPECT_EQ(pair.b->bind_stream(b_hi, pair.host_a().address(), a_hi, t), Error::kOk);
        pair.net.set_tap([this](const sim::Packet& p, const sim::Host& to) {
            Seen& s = to.index() == 1 ? from_a : from_b;
            auto h = wire::decode_common_header(p.bytes.view(scratch));
            ASSERT_TRUE(h.ok());
            s.classes[h->type].insert(p.meta.traffic_class);
            if (h->type == wire::PacketType::kAck) ++s.acks;
            if (h->type != wire::PacketType::kData) return;
            auto d = wire::decode_data(without_trailer(p.bytes.view(scratch)));
            ASSERT_TRUE(d.ok());
            s.data_classes[d->hdr.stream_id].insert(p.meta.traffic_class);
            ++s.data;
            if (d->hdr.flags & wire::data_flag::kRetx) ++s.retx;
        });
        pair.host_a().set_event_callback([this](const core::Event& e) {
            if (e.kind == core::EventKind::kCompletion) {
                EXPECT_EQ(e.completion.status, core::Status::kSuccess);
                ++done;
            }
        });
    }
    static sim::NetworkConfig net(double loss) {
        sim::NetworkConfig nc;
        nc.routes = 4;
        nc.link.rate_bps = 10'000'000'000;
        nc.link.delay = 2us;
        nc.link.loss_probability = loss;
        nc.host.line_rate_bps = 10'000'000'000;
        return nc;
    }
    static core::EndpointConfig cfg() {
        core::EndpointConfig c;
        c.num_paths = 4;
        c.min_pto = 50us;
        return c;
    }
    static void set_class(core::Endpoint& e, uint32_t sid, uint8_t cls) {
        core::StreamLimits l = e.default_stream_limits();
        l.traffic_class = cls;
        ASSERT_EQ(e.set_stream_limits(sid, l), Error::kOk);
    }
    void write(uint32_t sid, uint64_t dst_off) {
        core::SendWr wr;
        wr.opcode = core::WorkOpcode::kWrite;
        wr.local_addr = reinterpret_cast<uint64_t>(src.data());
        wr.length = kLen;
        wr.lkey = ka.lkey;
        wr.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + dst_off;
        wr.rkey = kb.rkey;
        ASSERT_EQ(pair.a->post_send(sid, wr, pair.now()), Error::kOk);
        pair.host_a().kick();
    }
    bool run(uint32_t want) {
        auto r = pair.sim.run_until([&] { return done >= want; }, pair.sim.now() + 50ms, 5'000'000);
        return r.reason == sim::StopReason::kPredicate;
    }

    static constexpr uint32_t kLen = 64 * 1024;
    Pair pair;
    std::vector<std::byte> src, dst;
    uint32_t pa = 0, pb = 0;
    core::MemoryKeys ka, kb;
    uint32_t a_lo = 0, a_hi = 0, b_lo = 0, b_hi = 0;
    Seen from_a, from_b;
    std::vector<std::byte> scratch;  // a datagram re-made (sim::PacketBytes::view)
    uint32_t done = 0;
};

// [STREAM-14]: DATA in the stream's class (B's ids name the streams: DATA carries the
// receiver's id), control in the connection's highest class, on each side independently.
TEST(TrafficClass, DataInStreamClassControlInHighest) {
    TwoStreams t(1);
    t.write(t.a_lo, 0);
    t.write(t.a_hi, TwoStreams::kLen);
    ASSERT_TRUE(t.run(2));
    ASSERT_EQ(t.from_a.data, 2 * TwoStreams::kLen / 4096);
    EXPECT_EQ(t.from_a.data_classes[t.b_lo], (std::set<uint8_t>{1}));
    EXPECT_EQ(t.from_a.data_classes[t.b_hi], (std::set<uint8_t>{5}));
    EXPECT_EQ(t.from_a.classes[wire::PacketType::kHello], (std::set<uint8_t>{5}));
    // B's streams are classes 1 and 3: every ACK and the HELLO_ACK leave in 3.
    ASSERT_GT(t.from_b.acks, 0u);
    EXPECT_EQ(t.from_b.classes[wire::PacketType::kAck], (std::set<uint8_t>{3}));
    EXPECT_EQ(t.from_b.classes[wire::PacketType::kHelloAck], (std::set<uint8_t>{3}));
    EXPECT_EQ(t.pair.b->connection(t.pair.b->connection_to(t.pair.host_a().address()))->control_class(), 3);
}

// [STREAM-14]: with 10 % loss, retransmissions keep their stream's class and every other
// packet (ACKs, probes, ...) still leaves in its side's highest class.
TEST(TrafficClass, RetransmissionsKeepTheStreamClass) {
    uint64_t retx = 0;
    for (uint64_t seed : seeds_from_env(3)) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        TwoStreams t(seed, 0.1);
        t.write(t.a_lo, 0);
        t.write(t.a_hi, TwoStreams::kLen);
        ASSERT_TRUE(t.run(2));
        retx += t.from_a.retx;
        EXPECT_EQ(t.from_a.data_classes[t.b_lo], (std::set<uint8_t>{1}));
        EXPECT_EQ(t.from_a.data_classes[t.b_hi], (std::set<uint8_t>{5}));
        for (const auto& [type, classes] : t.from_a.classes) {
            if (type == wire::PacketType::kData) continue;
            EXPECT_EQ(classes, (std::set<uint8_t>{5})) << "type " << static_cast<int>(type);
        }
        for (const auto& [type, classes] : t.from_b.classes)
            EXPECT_EQ(classes, (std::set<uint8_t>{3})) << "type " << static_cast<int>(type);
    }
    EXPECT_GT(retx, 0u);  // the loss did force retransmissions to be checked
}

// [STREAM-14]: the control class follows the streams bound now: lowering the highest
// stream's class, or destroying that stream, lowers it; a class above 7 is refused.
TEST(TrafficClass, ControlClassFollowsTheBoundStreams) {
    TwoStreams t(2);
    t.write(t.a_lo, 0);
    ASSERT_TRUE(t.run(1));
    core::Endpoint& b = *t.pair.b;
    const core::Connection* cb = b.connection(b.connection_to(t.pair.host_a().address()));
    ASSERT_NE(cb, nullptr);
    EXPECT_EQ(cb->control_class(), 3);
    TwoStreams::set_class(b, t.b_hi, 0);
    EXPECT_EQ(cb->control_class(), 1);
    TwoStreams::set_class(b, t.b_hi, 7);
    EXPECT_EQ(cb->control_class(), 7);
    ASSERT_EQ(b.destroy_stream(t.b_hi, t.pair.now()), Error::kOk);
    EXPECT_EQ(cb->control_class(), 1);

    core::StreamLimits bad = b.default_stream_limits();
    bad.traffic_class = core::kMaxTrafficClass + 1;
    EXPECT_EQ(b.set_stream_limits(t.b_lo, bad), Error::kInvalidArgument);
    EXPECT_EQ(cb->control_class(), 1);

    // B's ACKs for a second write on the low stream now leave in class 1.
    t.from_b = {};
    t.write(t.a_lo, 0);
    ASSERT_TRUE(t.run(2));
    ASSERT_GT(t.from_b.acks, 0u);
    EXPECT_EQ(t.from_b.classes[wire::PacketType::kAck], (std::set<uint8_t>{1}));
}

}  // namespace
}  // namespace mroce::test
