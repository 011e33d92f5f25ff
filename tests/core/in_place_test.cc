// tests/core/in_place_test.cc — DATA payloads left in the application's memory
// (core::Engine::poll_transmit_in_place; api/driver.h, "Payloads sent from where they
// lie"): the datagrams a datapath assembles from the two pieces are, byte for byte, the
// ones poll_transmit writes, for every kind of message; only the application's own buffers
// are left in place (not inline copies, scatter lists, READ sources or short payloads);
// and with INTEGRITY every payload is copied, the trailer coming after it.
#include <gtest/gtest.h>

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <vector>

#include "tests/core/harness.h"
#include "wire/data.h"

namespace mroce::test {
namespace {

using namespace std::chrono_literals;

// Gather is what a datapath that sends two pieces does with an engine: it asks for
// datagrams with poll_transmit_in_place (in_place) or poll_transmit, and records each
// whole datagram as it would leave, with the pieces it came in.
class Gather final : public EngineTap {
public:
    Gather(core::Engine& inner, bool in_place) : EngineTap(inner), in_place_(in_place) {}
    size_t poll_transmit(std::span<std::byte> buf, PacketMeta& meta, Time now) override {
        if (!in_place_) {
            const size_t n = inner_.poll_transmit(buf, meta, now);
            if (n) sent.emplace_back(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(n));
            return n;
        }
        std::span<const std::byte> payload;
        const size_t n = inner_.poll_transmit_in_place(buf, meta, now, payload);
        if (n == 0) {
            EXPECT_TRUE(payload.empty());
            return 0;
        }
        if (!payload.empty()) {
            ++in_place;
            // Only a DATA's payload, of at least kInPlaceMinBytes, right after its header.
            EXPECT_EQ(static_cast<wire::PacketType>(static_cast<uint8_t>(buf[1])), wire::PacketType::kData);
            EXPECT_GE(payload.size(), core::Engine::kInPlaceMinBytes);
            // [DATA-9]: a WRITE's header is compact where negotiated.
            const size_t header = wire::data_header_size(static_cast<uint8_t>(buf[17]));
            EXPECT_EQ(n, header);
            EXPECT_EQ(wire::load_be16(buf.data() + n - header + 22), payload.size());
            EXPECT_LE(n + payload.size(), buf.size());
            std::memcpy(buf.data() + n, payload.data(), payload.size());  // the kernel's copy
            opcodes.push_back(static_cast<uint8_t>(buf[n - header + 16]));
        }
        const size_t total = n + payload.size();
        sent.emplace_back(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(total));
        return total;
    }

    std::vector<std::vector<std::byte>> sent;  // every datagram, whole, in order
    int in_place = 0;                          // of them, those whose payload stayed in place
    std::vector<uint8_t> opcodes;              // the DATA opcode of each of those

private:
    bool in_place_;
};

// Mix runs one set of messages from A to B and back: WRITEs of 64 KiB, 3000, 700, 511 and
// 512 bytes, an inline WRITE, a WRITE from two pieces, a SEND and a SEND_IMM into posted
// receives, and a READ of B's memory, every byte checked where it lands.
// Buffers: the memory of both ends, shared by the runs compared (DATA names addresses).
struct Buffers {
    static constexpr size_t kBytes = 256 * 1024;
    Buffers() : src(kBytes), bsrc(kBytes) {
        for (size_t i = 0; i < kBytes; ++i) src[i] = pattern_byte(1, 0, i);
        for (size_t i = 0; i < kBytes; ++i) bsrc[i] = pattern_byte(2, 0, i);
    }
    std::vector<std::byte> src, bsrc, dst, back;
};

struct Mix {
    static constexpr size_t kBytes = Buffers::kBytes;

    Mix(uint64_t seed, bool in_place, bool integrity, Buffers& mem, bool compact = false)
        : p(seed, ten_gbit_net(), config(integrity, compact), config(integrity, compact)),
          ga(*p.a, in_place),
          gb(*p.b, in_place),
          src(mem.src),
          bsrc(mem.bsrc),
          dst(mem.dst),
          back(mem.back) {
        p.host_a().attach(&ga);
        p.host_b().attach(&gb);
        pa = p.a->alloc_pd();
        pb = p.b->alloc_pd();
        dst.assign(kBytes, kSentinel);
        back.assign(kBytes, kSentinel);
        ka = *p.a->register_memory(pa, src.data(), kBytes, kAllAccess);
        kback = *p.a->register_memory(pa, back.data(), kBytes, kAllAccess);
        kb = *p.b->register_memory(pb, dst.data(), kBytes, kAllAccess);
        kbsrc = *p.b->register_memory(pb, bsrc.data(), kBytes, kAllAccess);
        sa = *p.a->create_stream(pa, p.host_b().address(), 1, p.now());
        sb = *p.b->create_stream(pb, p.host_a().address(), 1, p.now());
        p.host_a().set_event_callback([this](const core::Event& e) {
            if (e.kind == core::EventKind::kCompletion) done_a.push_back(e.completion);
        });
        p.host_b().set_event_callback([this](const core::Event& e) {
            if (e.kind == core::EventKind::kCompletion) done_b.push_back(e.completion);
        });
    }
    static core::EndpointConfig config(bool integrity, bool compact) {
        core::EndpointConfig c;
        c.integrity_check = integrity;
        c.compact_data = compact;  // [DATA-9]: the payload follows a 64-byte header
        return c;
    }

    // run posts the mix and runs until every work request completed; the layout of dst:
    // [0, 64 KiB) the big WRITE, then each message at its own offset.
    bool run() {
        uint64_t id = 0;
        auto write = [&](uint64_t at, uint32_t len) {
            core::SendWr w = write_wr(++id, src, ka.lkey, dst, kb.rkey, len);
            w.local_addr += at;
            w.remote_addr += at;
            EXPECT_EQ(p.a->post_send(sa, w, p.now()), Error::kOk);
        };
        write(0, 65536);
        write(70000, 3000);
        write(80000, 700);
        write(90000, 511);
        write(100000, 512);
        core::SendWr in = write_wr(++id, src, 0, dst, kb.rkey, 200);  // inline: no lkey
        in.local_addr += 110000;
        in.remote_addr += 110000;
        in.inline_data = true;
        EXPECT_EQ(p.a->post_send(sa, in, p.now()), Error::kOk);
        const core::Sge pieces[2] = {{reinterpret_cast<uint64_t>(src.data()) + 120000, 3000, ka.lkey},
                                     {reinterpret_cast<uint64_t>(src.data()) + 125000, 2000, ka.lkey}};
        core::SendWr sg = write_wr(++id, src, ka.lkey, dst, kb.rkey, 5000);
        sg.sg_list = pieces;
        sg.num_sge = 2;
        sg.remote_addr += 120000;
        EXPECT_EQ(p.a->post_send(sa, sg, p.now()), Error::kOk);
        for (uint64_t r = 0; r < 2; ++r) {
            core::RecvWr rv;
            rv.wr_id = 100 + r;
            rv.addr = reinterpret_cast<uint64_t>(dst.data()) + 140000 + r * 20000;
            rv.length = 20000;
            rv.lkey = kb.lkey;
            EXPECT_EQ(p.b->post_recv(sb, rv, p.now()), Error::kOk);
        }
        core::SendWr send;
        send.wr_id = ++id;
        send.opcode = core::WorkOpcode::kSend;
        send.local_addr = reinterpret_cast<uint64_t>(src.data()) + 140000;
        send.length = 20000;
        send.lkey = ka.lkey;
        EXPECT_EQ(p.a->post_send(sa, send, p.now()), Error::kOk);
        send.wr_id = ++id;
        send.opcode = core::WorkOpcode::kSendImm;
        send.local_addr += 20000;
        send.imm = 7;
        EXPECT_EQ(p.a->post_send(sa, send, p.now()), Error::kOk);
        core::SendWr read = write_wr(++id, back, kback.lkey, bsrc, kbsrc.rkey, 30000);
        read.opcode = core::WorkOpcode::kRead;  // into `back`, from B's `bsrc`
        EXPECT_EQ(p.a->post_send(sa, read, p.now()), Error::kOk);
        p.host_a().kick();
        p.host_b().kick();
        const size_t want = id;
        p.sim.run_until([&] { return done_a.size() == want && done_b.size() == 2; },
                        p.sim.now() + 500ms, 50'000'000);
        for (const auto& c : done_a) EXPECT_EQ(c.status, core::Status::kSuccess) << c.wr_id;
        for (const auto& c : done_b) EXPECT_EQ(c.status, core::Status::kSuccess) << c.wr_id;
        return done_a.size() == want && done_b.size() == 2;
    }

    // placed: every message's bytes are where they belong.
    void expect_placed() const {
        auto same = [&](const std::vector<std::byte>& from, size_t at, const std::vector<std::byte>& to,
                        size_t to_at, size_t len, const char* what) {
            EXPECT_EQ(std::memcmp(from.data() + at, to.data() + to_at, len), 0) << what;
        };
        same(src, 0, dst, 0, 65536, "64 KiB WRITE");
        same(src, 70000, dst, 70000, 3000, "3000-byte WRITE");
        same(src, 80000, dst, 80000, 700, "700-byte WRITE");
        same(src, 90000, dst, 90000, 511, "511-byte WRITE");
        same(src, 100000, dst, 100000, 512, "512-byte WRITE");
        same(src, 110000, dst, 110000, 200, "inline WRITE");
        same(src, 120000, dst, 120000, 3000, "WRITE from two pieces, first");
        same(src, 125000, dst, 123000, 2000, "WRITE from two pieces, second");
        same(src, 140000, dst, 140000, 40000, "SEND and SEND_IMM");
        same(bsrc, 0, back, 0, 30000, "READ");
    }

    Pair p;
    Gather ga, gb;
    uint32_t pa = 0, pb = 0, sa = 0, sb = 0;
    std::vector<std::byte>&src, &bsrc, &dst, &back;
    core::MemoryKeys ka, kback, kb, kbsrc;
    std::vector<core::Completion> done_a, done_b;
};

// same_datagrams: the two runs sent the same datagrams in the same order; names the first
// that differs (the whole lists would print megabytes).
void same_datagrams(const Gather& got, const Gather& want, const char* side) {
    EXPECT_EQ(got.sent.size(), want.sent.size()) << side;
    for (size_t i = 0; i < std::min(got.sent.size(), want.sent.size()); ++i)
        if (got.sent[i] != want.sent[i]) {
            ADD_FAILURE() << side << ": datagram " << i << " of " << want.sent.size() << " differs ("
                          << got.sent[i].size() << " bytes against " << want.sent[i].size() << ")";
            return;
        }
}

TEST(InPlace, DatagramsAreTheBytesPollTransmitWrites) {
    for (uint64_t seed : seeds_from_env(3))
    for (const bool compact : {false, true}) {  // [DATA-9]: both DATA header forms
        std::printf("[ SEED     ] %llu%s\n", static_cast<unsigned long long>(seed), compact ? " compact" : "");
        Buffers mem;
        Mix copied(seed, false, false, mem, compact);
        ASSERT_TRUE(copied.run());
        copied.expect_placed();
        Mix in_place(seed, true, false, mem, compact);
        ASSERT_TRUE(in_place.run());
        in_place.expect_placed();
        // The same datagrams, in the same order, on both sides.
        same_datagrams(in_place.ga, copied.ga, "A");
        same_datagrams(in_place.gb, copied.gb, "B");
        // A's own buffers went in place: 16 segments of 64 KiB, one of 3000 (4096-byte
        // segments), 700, 512, and 5 each of the SENDs; not 511, the inline WRITE, the two
        // pieces or anything of B's (the READ's answer is read from B's memory as it goes).
        EXPECT_EQ(in_place.ga.in_place, 16 + 1 + 1 + 1 + 5 + 5);
        EXPECT_EQ(in_place.gb.in_place, 0);
        for (uint8_t op : in_place.ga.opcodes) {
            const auto o = static_cast<wire::Opcode>(op);
            EXPECT_TRUE(o == wire::Opcode::kWrite || o == wire::Opcode::kSend || o == wire::Opcode::kSendImm)
                << int{op};
        }
    }
}

TEST(InPlace, IntegrityCopiesEveryPayloadForItsTrailer) {
    Buffers mem;
    Mix copied(1, false, true, mem);
    ASSERT_TRUE(copied.run());
    Mix m(1, true, true, mem);
    ASSERT_TRUE(m.run());
    m.expect_placed();
    EXPECT_EQ(m.ga.in_place, 0);
    EXPECT_EQ(m.gb.in_place, 0);
    same_datagrams(m.ga, copied.ga, "A");
    same_datagrams(m.gb, copied.gb, "B");
}

}  // namespace
}  // namespace mroce::test
