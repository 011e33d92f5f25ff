// tests/core/integrity_test.cc — the integrity trailer of capability INTEGRITY (spec §4.9)
// between two real endpoints on the in-process network: negotiation ([INT-1]), a trailer on
// every packet but the handshake's ([INT-2]), a corrupted DATA counted, dropped and
// recovered ([INT-3]), and a peer that does not announce it ([INT-4]).
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "tests/core/harness.h"
#include "wire/control.h"
#include "wire/data.h"
#include "wire/integrity.h"

namespace mroce::test {
namespace {

using namespace std::chrono_literals;

sim::NetworkConfig quiet_net() {
    sim::NetworkConfig nc;
    nc.routes = 8;
    nc.link.rate_bps = 10'000'000'000;
    nc.link.delay = 2us;
    nc.host.line_rate_bps = 10'000'000'000;
    return nc;
}

// Corrupter wraps B's engine: it flips one bit of the payload of the `flip_nth` DATA
// packet with a payload that B receives (a switch or NIC corrupting a buffer in flight),
// and records the length of every datagram by type, to see whether trailers are there.
class Corrupter final : public EngineTap {
public:
    Corrupter(core::Engine& inner, int flip_nth) : EngineTap(inner), flip_nth_(flip_nth) {}
    void on_datagram(std::span<const std::byte> d, const PacketMeta& m, Time now) override {
        const auto type = static_cast<wire::PacketType>(static_cast<uint8_t>(d[1]));
        extra_bytes(type, d);
        if (type == wire::PacketType::kData && d.size() > wire::kDataHeaderSize + 8 &&
            ++data_seen_ == flip_nth_) {
            std::vector<std::byte> copy(d.begin(), d.end());
            copy[wire::kDataHeaderSize + 5] ^= std::byte{0x10};  // one bit of the payload
            ++flipped;
            inner_.on_datagram(copy, m, now);
            return;
        }
        inner_.on_datagram(d, m, now);
    }
    size_t poll_transmit(std::span<std::byte> buf, PacketMeta& meta, Time now) override {
        const size_t n = inner_.poll_transmit(buf, meta, now);
        if (n > 0)
            extra_bytes(static_cast<wire::PacketType>(static_cast<uint8_t>(buf[1])), buf.first(n));
        return n;
    }

    int flipped = 0;
    // Bytes beyond what §3 defines for the type, per type, as sent and received by B:
    // {0} without trailers, {4} with them.
    std::map<wire::PacketType, std::set<size_t>> extra;

private:
    void extra_bytes(wire::PacketType t, std::span<const std::byte> d) {
        size_t defined = 0;
        switch (t) {
            case wire::PacketType::kData:
                // [DATA-9]: the flags say which header (where COMPACT_DATA is negotiated).
                defined = wire::data_header_size(static_cast<uint8_t>(d[17])) + wire::load_be16(d.data() + 22);
                break;
            case wire::PacketType::kAck: {
                // [ACK-21]: the flags say which fixed part; the count is its last 4 bytes but 2.
                const size_t fixed = wire::ack_fixed_size(static_cast<uint8_t>(d[19]));
                defined = fixed + 8 * static_cast<size_t>(wire::load_be16(d.data() + fixed - 4));
                break;
            }
            case wire::PacketType::kHello:
            case wire::PacketType::kHelloAck: defined = wire::kHelloSize; break;
            case wire::PacketType::kProbe: defined = 32; break;
            default: return;
        }
        extra[t].insert(d.size() - defined);
    }

    int flip_nth_;
    int data_seen_ = 0;
};

struct Transfer {
    Transfer(uint64_t seed, const core::EndpointConfig& ca, const core::EndpointConfig& cb,
             int flip_nth)
        : p(seed, quiet_net(), ca, cb), tap(*p.b, flip_nth) {
        std::printf("[ SEED     ] %llu\n", static_cast<unsigned long long>(seed));
        p.host_b().attach(&tap);
        pa = p.a->alloc_pd();
        pb = p.b->alloc_pd();
        src.resize(kBytes);
        for (size_t i = 0; i < kBytes; ++i) src[i] = pattern_byte(1, 0, i);
        dst.assign(kBytes, kSentinel);
        ka = *p.a->register_memory(pa, src.data(), kBytes, kAllAccess);
        kb = *p.b->register_memory(pb, dst.data(), kBytes, kAllAccess);
        sa = *p.a->create_stream(pa, p.host_b().address(), 1, p.now());
        sb = *p.b->create_stream(pb, p.host_a().address(), 1, p.now());
        p.host_a().set_event_callback([this](const core::Event& e) {
            if (e.kind == core::EventKind::kCompletion) done.push_back(e.completion);
        });
    }
    // write sends the whole buffer as one WRITE of 16 segments and runs to its completion.
    bool write() {
        core::SendWr w;
        w.wr_id = 1;
        w.opcode = core::WorkOpcode::kWrite;
        w.local_addr = reinterpret_cast<uint64_t>(src.data());
        w.lkey = ka.lkey;
        w.length = kBytes;
        w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
        w.rkey = kb.rkey;
        EXPECT_EQ(p.a->post_send(sa, w, p.now()), Error::kOk);
        p.host_a().kick();
        p.sim.run_until([&] { return !done.empty(); }, p.sim.now() + 500ms, 50'000'000);
        return done.size() == 1 && done[0].status == core::Status::kSuccess;
    }
    const core::Connection& conn_a() { return *p.a->connection(p.a->connection_to(p.host_b().address())); }
    const core::Connection& conn_b() { return *p.b->connection(p.b->connection_to(p.host_a().address())); }

    static constexpr size_t kBytes = 16 * 4096;
    Pair p;
    Corrupter tap;
    uint32_t pa = 0, pb = 0, sa = 0, sb = 0;
    std::vector<std::byte> src, dst;
    core::MemoryKeys ka, kb;
    std::vector<core::Completion> done;
};

// [INT-1] [INT-2] [INT-3] [INT-6]: with the check on at both ends, a DATA
// packet whose payload had one bit flipped in flight is counted in bad_integrity and
// dropped: not placed, not acknowledged; the sender retransmits it as lost and the memory
// ends up exactly as sent.
TEST(Integrity, CorruptedDataIsCountedDroppedAndRecovered) {
    EXPECT_FALSE(core::EndpointConfig{}.integrity_check);  // [INT-7]: off by default (2.0)
    core::EndpointConfig cfg;
    cfg.integrity_check = true;
    Transfer t(1, cfg, cfg, 3);
    ASSERT_TRUE(t.write());
    EXPECT_TRUE(t.conn_a().integrity());
    EXPECT_TRUE(t.conn_b().integrity());
    EXPECT_EQ(t.tap.flipped, 1);
    EXPECT_EQ(t.p.b->stats().bad_integrity, 1u);
    EXPECT_EQ(t.p.a->stats().bad_integrity, 0u);
    EXPECT_GE(t.conn_a().stats().retransmits, 1u);
    EXPECT_TRUE(t.dst == t.src) << "placed bytes differ from those sent";
    // [INT-2]: DATA, ACK and PROBE carry the 4-byte trailer; HELLO and HELLO_ACK never do.
    EXPECT_EQ(t.tap.extra[wire::PacketType::kData], std::set<size_t>{4});
    EXPECT_EQ(t.tap.extra[wire::PacketType::kAck], std::set<size_t>{4});
    EXPECT_EQ(t.tap.extra[wire::PacketType::kHello], std::set<size_t>{0});
    EXPECT_EQ(t.tap.extra[wire::PacketType::kHelloAck], std::set<size_t>{0});
    // [INT-6]: the trailer comes on top of a full segment.
    EXPECT_EQ(t.p.a->max_datagram_size(), wire::kDataHeaderSize + cfg.max_payload + 4);
}

// Without the check, the same flipped bit lands in application memory: what [INT-3] is for.
TEST(Integrity, WithoutTheCheckCorruptionReachesMemory) {
    core::EndpointConfig cfg;
    cfg.integrity_check = false;
    Transfer t(1, cfg, cfg, 3);
    ASSERT_TRUE(t.write());
    EXPECT_EQ(t.tap.flipped, 1);
    EXPECT_EQ(t.p.b->stats().bad_integrity, 0u);
    EXPECT_FALSE(t.dst == t.src);
}

// [INT-1] [INT-4]: one side off → not negotiated on either: no trailer in either direction,
// the transfer works. Either side may be the one that turned it off.
TEST(Integrity, OffOnOneSideIsNotNegotiated) {
    for (bool a_on : {false, true}) {
        SCOPED_TRACE(a_on ? "B off" : "A off");
        core::EndpointConfig ca, cb;
        ca.integrity_check = a_on;
        cb.integrity_check = !a_on;
        Transfer t(2, ca, cb, 0);
        ASSERT_TRUE(t.write());
        EXPECT_FALSE(t.conn_a().integrity());
        EXPECT_FALSE(t.conn_b().integrity());
        EXPECT_TRUE(t.dst == t.src);
        EXPECT_EQ(t.tap.extra[wire::PacketType::kData], std::set<size_t>{0});
        EXPECT_EQ(t.tap.extra[wire::PacketType::kAck], std::set<size_t>{0});
        EXPECT_EQ(t.p.a->stats().bad_length + t.p.b->stats().bad_length, 0u);
    }
}

// [INT-1]: the outcome is fixed at establishment: a later HELLO of the same peer that no
// longer announces the bit (a repeated HELLO, [CONN-6]) changes nothing, and traffic keeps
// its trailers.
TEST(Integrity, OutcomeIsFixedForTheConnection) {
    core::EndpointConfig cfg;
    cfg.integrity_check = true;
    Transfer t(3, cfg, cfg, 0);
    ASSERT_TRUE(t.write());
    ASSERT_TRUE(t.conn_b().integrity());
    const core::Connection& ca = t.conn_a();
    wire::HelloPacket h;
    h.common.type = wire::PacketType::kHello;
    h.src_conn_id = ca.id();
    h.src_token = ca.token();
    h.isn = 1;
    h.msg_isn = 1;
    h.endpoint_port = t.p.host_a().address().port;
    h.num_paths = cfg.num_paths;
    h.max_payload = cfg.max_payload;
    h.capabilities = 0;
    std::vector<std::byte> buf(wire::kHelloSize);
    ASSERT_TRUE(wire::encode_hello(h, buf).ok());
    PacketMeta m;
    m.src = t.p.host_a().address();
    m.dst = t.p.host_b().address();
    t.p.b->on_datagram(buf, m, t.p.now());
    EXPECT_TRUE(t.conn_b().integrity());
    t.done.clear();
    std::fill(t.dst.begin(), t.dst.end(), kSentinel);
    ASSERT_TRUE(t.write());
    EXPECT_TRUE(t.dst == t.src);
    EXPECT_EQ(t.p.b->stats().bad_integrity, 0u);
    EXPECT_EQ(t.tap.extra[wire::PacketType::kData], std::set<size_t>{4});
}

}  // namespace
}  // namespace mroce::test
