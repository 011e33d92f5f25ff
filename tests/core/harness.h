// tests/core/harness.h — two core::Endpoints on the in-process multipath network
// (sim::Network), with registered memory whose bytes are a function of (stream, offset),
// and bookkeeping that checks every completion and every placed byte.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/endpoint.h"
#include "sim/event_queue.h"
#include "sim/network.h"
#include "wire/ack.h"
#include "wire/integrity.h"

namespace mroce::test {

// pattern_byte is the payload byte at `offset` of stream `stream`'s message `msg`.
inline std::byte pattern_byte(uint32_t stream, uint32_t msg, uint64_t offset) {
    uint64_t x = (uint64_t{stream} << 40) ^ (uint64_t{msg} << 24) ^ offset;
    x *= 0x9e3779b97f4a7c15ULL;
    return static_cast<std::byte>(x >> 56);
}
inline constexpr std::byte kSentinel{0xA5};
// kAllAccess: every access flag, for memory a test reads, writes and operates on remotely.
inline constexpr uint32_t kAllAccess = core::access::kLocalWrite | core::access::kRemoteWrite |
                                       core::access::kRemoteRead | core::access::kRemoteAtomic;

// seeds_from_env: MROCE_SEED replays one seed; MROCE_SEEDS sets how many to sweep.
inline std::vector<uint64_t> seeds_from_env(uint64_t default_count, uint64_t base = 1) {
    if (const char* one = std::getenv("MROCE_SEED")) return {std::strtoull(one, nullptr, 0)};
    uint64_t n = default_count;
    if (const char* many = std::getenv("MROCE_SEEDS")) n = std::strtoull(many, nullptr, 0);
    std::vector<uint64_t> v;
    for (uint64_t i = 0; i < n; ++i) v.push_back(base + i);
    return v;
}

// ten_gbit_net: 8 routes of 10 Gbit/s and 2 us per pair of hosts, no impairment.
inline sim::NetworkConfig ten_gbit_net() {
    sim::NetworkConfig nc;
    nc.routes = 8;
    nc.link.rate_bps = 10'000'000'000;
    nc.link.delay = std::chrono::microseconds(2);
    nc.host.line_rate_bps = 10'000'000'000;
    return nc;
}

// write_wr: a WRITE of `len` bytes from src (lkey) to dst (rkey).
inline core::SendWr write_wr(uint64_t id, const std::vector<std::byte>& src, uint32_t lkey,
                             const std::vector<std::byte>& dst, uint32_t rkey, uint32_t len) {
    core::SendWr wr;
    wr.wr_id = id;
    wr.opcode = core::WorkOpcode::kWrite;
    wr.local_addr = reinterpret_cast<uint64_t>(src.data());
    wr.length = len;
    wr.lkey = lkey;
    wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    wr.rkey = rkey;
    return wr;
}

struct Pair {
    explicit Pair(uint64_t seed, const sim::NetworkConfig& net_cfg,
                  const core::EndpointConfig& cfg_a, const core::EndpointConfig& cfg_b)
        : sim(seed), net(sim, net_cfg) {
        sim::Host& ha = net.add_host();
        sim::Host& hb = net.add_host();
        a = std::make_unique<core::Endpoint>(cfg_a, ha.address(), seed * 2 + 1);
        b = std::make_unique<core::Endpoint>(cfg_b, hb.address(), seed * 2 + 2);
        ha.attach(a.get());
        hb.attach(b.get());
    }
    sim::Host& host_a() { return net.host(0); }
    sim::Host& host_b() { return net.host(1); }
    Time now() const { return sim::to_core_time(sim.now()); }

    sim::Sim sim;
    sim::Network net;
    std::unique_ptr<core::Endpoint> a, b;
};

// peer_ack: an ACK from B to A's connection on A's `path`, of the path's generation, that
// acknowledges nothing new and echoes now: the late, reordered or forged ACK a test sets
// fields on before give_to_a.
inline wire::AckPacket peer_ack(Pair& p, uint16_t path) {
    const core::Connection& ca = *p.a->connection(p.a->connection_to(p.host_b().address()));
    wire::AckPacket a;
    a.common.type = wire::PacketType::kAck;
    a.common.dst_conn_id = ca.id();
    a.common.dst_token = ca.token();
    a.path_id = path;
    a.path_gen = ca.tx_path(path).gen;
    a.cum_psn = ca.tx_path(path).base - 1;
    a.ts_echo = static_cast<uint32_t>(to_ns(p.now()));
    return a;
}

// EngineTap wraps an engine and forwards everything to it: a test overrides on_datagram
// or poll_transmit to see, change or drop what passes (a lossy link, a corrupting switch).
class EngineTap : public core::Engine {
public:
    explicit EngineTap(core::Engine& inner) : inner_(inner) {}
    void on_datagram(std::span<const std::byte> d, const PacketMeta& m, Time now) override {
        inner_.on_datagram(d, m, now);
    }
    bool is_handshake(std::span<const std::byte> d) const override { return inner_.is_handshake(d); }
    void on_timeout(Time now) override { inner_.on_timeout(now); }
    size_t poll_transmit(std::span<std::byte> buf, PacketMeta& meta, Time now) override {
        return inner_.poll_transmit(buf, meta, now);
    }
    void set_ready_ports(uint64_t mask) override { inner_.set_ready_ports(mask); }
    Time next_deadline() const override { return inner_.next_deadline(); }
    std::optional<core::Event> poll_event() override { return inner_.poll_event(); }
    size_t max_datagram_size() const override { return inner_.max_datagram_size(); }

protected:
    core::Engine& inner_;
};

// without_trailer: a datagram an engine sent, without its integrity trailer ([INT-2]) if it
// ends with a valid one, for a test that decodes it with wire/.
inline std::span<const std::byte> without_trailer(std::span<const std::byte> d) {
    std::span<const std::byte> packet;
    return wire::strip_integrity(d, packet) ? packet : d;
}

// seal_for: a crafted packet gets the integrity trailer when the connection of `to` with the
// endpoint at `from` negotiated INTEGRITY (the default), as the real peer would send it.
inline void seal_for(const core::Endpoint& to, const Address& from, std::vector<std::byte>& pkt) {
    const core::Connection* c = to.connection(to.connection_to(from));
    if (!c || !c->integrity()) return;
    const size_t n = pkt.size();
    pkt.resize(n + wire::kIntegritySize);
    wire::append_integrity(pkt, n);
}

// give_bytes: B's engine (to_b) or A's takes a crafted packet as if the other end sent it,
// sealed as that end would ([INT-2]); no host kick.
inline void give_bytes(Pair& p, bool to_b, std::vector<std::byte> pkt) {
    core::Endpoint& to = to_b ? *p.b : *p.a;
    PacketMeta m;
    m.src = to_b ? p.host_a().address() : p.host_b().address();
    m.dst = to_b ? p.host_b().address() : p.host_a().address();
    seal_for(to, m.src, pkt);
    to.on_datagram(pkt, m, p.now());
}

// give_to_a: A's engine takes the ACK as if it came from B (no host kick).
inline void give_to_a(Pair& p, const wire::AckPacket& a) {
    std::vector<std::byte> buf(256);
    const auto n = wire::encode_ack(a, buf);
    if (!n.ok()) std::abort();  // a test built an ACK the codec refuses
    buf.resize(*n);
    give_bytes(p, false, std::move(buf));
}

}  // namespace mroce::test
