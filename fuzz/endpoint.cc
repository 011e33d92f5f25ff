// fuzz/endpoint.cc — arbitrary datagrams into a whole, established core::Endpoint.
//
// Two endpoints are joined back to back and complete a handshake with streams, memory and
// posted receives; then the input is cut into datagrams (2-byte length prefix each) and
// fed to the responder. For a datagram whose first byte is odd, bytes 4..15 are replaced
// by the real connection id and token, so the fuzzer reaches past the token check into
// ACK, NACK, DATA, PROBE and CLOSE handling; likewise for the DATA after a coalesced ACK
// ([WIRE-10], SHORT or not, [ACK-21]) whose own first byte is odd. Between datagrams both endpoints run their
// timers and exchange whatever they send. Invariants: no crash, no sanitizer report, no
// DCHECK, and memory outside the registered window is never written.
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/endpoint.h"
#include "fuzz/fuzz_check.h"
#include "wire/ack.h"
#include "wire/buffer.h"

namespace {

using namespace mroce;

constexpr size_t kGuard = 64;
constexpr size_t kWindow = 16 * 1024;

struct Fixture {
    Fixture() {
        core::EndpointConfig cfg;
        cfg.max_payload = 256;
        cfg.num_paths = 4;
        cfg.forced_isn = 0xFFFFFFF0u;
        a = std::make_unique<core::Endpoint>(cfg, Address::ipv4(0xC6120001, 4797), 1);
        b = std::make_unique<core::Endpoint>(cfg, Address::ipv4(0xC6120002, 4797), 2);
        mem.assign(kGuard + kWindow + kGuard, std::byte{0x5a});
        src.assign(kWindow, std::byte{1});
        const uint32_t pa = a->alloc_pd(), pb = b->alloc_pd();
        ka = *a->register_memory(pa, src.data(), src.size(), core::access::kLocalWrite);
        kb = *b->register_memory(pb, mem.data() + kGuard, kWindow,
                                 core::access::kLocalWrite | core::access::kRemoteWrite);
        for (uint32_t s = 1; s <= 2; ++s) {
            sa[s - 1] = *a->create_stream(pa, b->local_address(), s, now);
            sb[s - 1] = *b->create_stream(pb, a->local_address(), s, now);
            for (uint32_t r = 0; r < 4; ++r) {
                core::RecvWr wr{r, reinterpret_cast<uint64_t>(mem.data() + kGuard + r * 1024), 1024,
                                kb.lkey};
                (void)b->post_recv(sb[s - 1], wr, now);
            }
        }
        core::SendWr wr;
        wr.opcode = core::WorkOpcode::kWrite;
        wr.local_addr = reinterpret_cast<uint64_t>(src.data());
        wr.length = 2000;
        wr.lkey = ka.lkey;
        wr.remote_addr = reinterpret_cast<uint64_t>(mem.data() + kGuard + 8192);
        wr.rkey = kb.rkey;
        (void)a->post_send(sa[0], wr, now);
        exchange(64);
        conn_b = b->connection_to(a->local_address());
        FUZZ_CHECK(conn_b != 0);
        token_b = b->connection(conn_b)->token();
    }
    void exchange(int rounds) {
        std::vector<std::byte> buf(a->max_datagram_size());
        for (int i = 0; i < rounds; ++i) {
            bool moved = false;
            for (auto [from, to] : {std::pair{a.get(), b.get()}, std::pair{b.get(), a.get()}}) {
                PacketMeta m;
                if (size_t n = from->poll_transmit(buf, m, now)) {
                    to->on_datagram(std::span(buf.data(), n), m, now);
                    moved = true;
                }
            }
            while (a->poll_event()) {}
            while (b->poll_event()) {}
            if (!moved) {
                now += std::chrono::microseconds(50);
                a->on_timeout(now);
                b->on_timeout(now);
            }
        }
    }

    Time now = time_from_ns(1'000'000);
    std::unique_ptr<core::Endpoint> a, b;
    std::vector<std::byte> mem, src;
    core::MemoryKeys ka, kb;
    uint32_t sa[2] = {}, sb[2] = {};
    uint32_t conn_b = 0;
    uint64_t token_b = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Fixture f;
    size_t pos = 0;
    std::vector<std::byte> dgram;
    while (pos + 2 <= size) {
        const size_t len = std::min<size_t>(size_t{data[pos]} << 8 | data[pos + 1], size - pos - 2);
        pos += 2;
        dgram.assign(reinterpret_cast<const std::byte*>(data + pos),
                     reinterpret_cast<const std::byte*>(data + pos + len));
        pos += len;
        if (dgram.size() >= 16 && (static_cast<uint8_t>(dgram[0]) & 1)) {
            dgram[0] = std::byte{mroce::wire::kProtocolVersion};  // so it reaches its handler
            mroce::wire::Writer w(std::span(dgram.data() + 4, 12));
            w.u32(f.conn_b);
            w.u64(f.token_b);
            // [WIRE-10]: the DATA after a FOLLOWED ACK (at the length its count gives, SHORT
            // or not: the two sides negotiated COALESCE and SHORT_ACK) names the connection
            // too when its own first byte is odd.
            const size_t at = static_cast<uint8_t>(dgram[1]) == 2 ? mroce::wire::coalesced_ack_size(dgram) : 0;
            if (at > 0 && dgram.size() >= at + 16 && (static_cast<uint8_t>(dgram[at]) & 1)) {
                dgram[at] = std::byte{mroce::wire::kProtocolVersion};
                mroce::wire::Writer v(std::span(dgram.data() + at + 4, 12));
                v.u32(f.conn_b);
                v.u64(f.token_b);
            }
        }
        PacketMeta m;
        m.src = f.a->local_address().with_port(50000);
        m.dst = f.b->local_address();
        m.ecn = static_cast<uint8_t>(len & 3);
        f.b->on_datagram(dgram, m, f.now);
        f.exchange(4);
    }
    f.exchange(32);
    for (size_t i = 0; i < kGuard; ++i) {
        FUZZ_CHECK(f.mem[i] == std::byte{0x5a});
        FUZZ_CHECK(f.mem[kGuard + kWindow + i] == std::byte{0x5a});
    }
    return 0;
}
