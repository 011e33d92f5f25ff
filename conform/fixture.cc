// conform/fixture.cc — see fixture.h.
#include "conform/fixture.h"

#include <chrono>

namespace mroce::conform {

using nlohmann::json;
using namespace std::chrono_literals;

uint64_t derive(uint64_t seed, uint32_t test, uint32_t label) {
    uint64_t z = seed ^ (uint64_t{test} << 32 | label) ^ 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return z ? z : 1;
}

std::optional<UdpSocket> open_socket(const Context& ctx, std::string* why) {
    return UdpSocket::open(ctx.local_ip, why, ctx.via_ifindex);
}

static Peer make_peer(Context& ctx, const FixtureOptions& o) {
    const json hello = ctx.control.call("reset");
    const std::string text = hello.at("udp").get<std::string>();
    const auto parsed = parse_ipv4_endpoint(text);
    if (!parsed) throw Failure("agent reported a UDP address that is not IPv4 HOST:PORT: " + text);
    const Address udp = *parsed;
    ctx.target.udp = udp;
    std::string why;
    auto socket = open_socket(ctx, &why);
    if (!socket) throw Failure("cannot open the suite's UDP socket: " + why);
    Identity me;
    me.conn_id = static_cast<uint32_t>(derive(ctx.seed, ctx.test_index, 1)) | 1;
    me.token = derive(ctx.seed, ctx.test_index, 2);
    me.isn = o.isn.value_or(static_cast<uint32_t>(derive(ctx.seed, ctx.test_index, 3)) | 1);
    me.msg_isn = o.msg_isn.value_or(static_cast<uint32_t>(derive(ctx.seed, ctx.test_index, 4)) | 1);
    me.num_paths = o.num_paths;
    return Peer(std::move(*socket), udp, me);
}

Fixture::Fixture(Context& c, FixtureOptions o)
    : ctx(c), peer(ctx.peer.emplace(make_peer(c, o))) {
    my_stream = 0x100 + ctx.test_index;
    next_msg = peer.me().msg_isn;
    next_recv = peer.me().msg_isn;
}

json Fixture::call(const std::string& cmd, json args) { return ctx.control.call(cmd, std::move(args)); }

Region Fixture::reg_mr(uint64_t length, const std::vector<std::string>& access,
                       std::optional<uint32_t> pd) {
    json args{{"length", length}, {"access", access}};
    if (pd) args["pd"] = *pd;
    const json r = call("reg_mr", args);
    return Region{r.at("mr").get<uint32_t>(), r.at("addr").get<uint64_t>(),
                  r.at("rkey").get<uint32_t>(), r.at("lkey").get<uint32_t>(), length};
}

std::vector<std::byte> Fixture::read_mr(const Region& r, uint64_t offset, uint64_t length) {
    const std::string h =
        call("read_mr", {{"mr", r.mr}, {"offset", offset}, {"length", length}}).at("hex");
    std::vector<std::byte> out(h.size() / 2);
    for (size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<std::byte>(std::stoul(h.substr(2 * i, 2), nullptr, 16));
    return out;
}

void Fixture::write_mr(const Region& r, uint64_t offset, std::span<const std::byte> bytes) {
    call("write_mr", {{"mr", r.mr}, {"offset", offset}, {"hex", hex(bytes)}});
}

uint32_t Fixture::create_qp(std::optional<uint32_t> pd) {
    json args = json::object();
    if (pd) args["pd"] = *pd;
    return call("create_qp", args).at("qp").get<uint32_t>();
}

void Fixture::connect_qp(uint32_t target_qp) {
    call("connect_qp", {{"qp", target_qp}, {"peer", peer.local().to_string()},
                        {"remote_qp", my_stream}});
}

void Fixture::establish(std::optional<uint32_t> pd) {
    std::string why;
    if (!peer.handshake(&why)) throw Failure("[CONN-17] " + why);
    qp = create_qp(pd);
    connect_qp(qp);
}

void Fixture::switch_stream(std::optional<uint32_t> pd) {
    my_stream += 0x10000;
    qp = create_qp(pd);
    connect_qp(qp);
    next_msg = peer.me().msg_isn;
    next_recv = peer.me().msg_isn;
}

void Fixture::ack_target_data(const std::set<uint16_t>& paths, uint32_t delivered_seq) {
    bool first = true;
    for (uint16_t p : paths) {
        auto a = peer.ack_for_target_path(p);
        if (first) {
            a.stream_count = 1;
            a.streams[0] = {my_stream, delivered_seq};
            first = false;
        }
        peer.send_ack(a);
    }
}

void Fixture::ack_target_paths(const std::set<uint16_t>& paths) {
    for (uint16_t p : paths) peer.send_ack(peer.ack_for_target_path(p));
}

Message Fixture::message(wire::Opcode op, std::vector<std::byte> body) {
    Message m;
    m.opcode = op;
    m.stream_id = qp;
    m.msg_seq = next_msg++;
    if (wire::consumes_receive(op)) m.recv_seq = next_recv++;
    m.body = std::move(body);
    return m;
}

Segment Fixture::write_segment(const Region& r, size_t length, uint32_t seed, uint64_t offset) {
    Message m = message(wire::Opcode::kWrite, pattern(length, seed));
    m.rkey = r.rkey;
    m.remote_addr = r.addr + offset;
    return peer.cut(m)[0];
}

Message Fixture::read_request(const Region& r, uint32_t length, uint64_t offset) {
    std::vector<std::byte> body(wire::kReadRequestBodySize);
    wire::encode_read_request(length, std::span<std::byte, wire::kReadRequestBodySize>(body.data(), body.size()));
    Message m = message(wire::Opcode::kReadRequest, std::move(body));
    m.rkey = r.rkey;
    m.remote_addr = r.addr + offset;
    return m;
}

Message Fixture::atomic_request(const Region& r, wire::Opcode op, uint64_t swap_add, uint64_t compare,
                                uint64_t offset) {
    std::vector<std::byte> body(wire::kAtomicRequestBodySize);
    wire::encode_atomic_request({swap_add, compare},
                                std::span<std::byte, wire::kAtomicRequestBodySize>(body.data(), body.size()));
    Message m = message(op, std::move(body));
    m.rkey = r.rkey;
    m.remote_addr = r.addr + offset;
    return m;
}

std::vector<Sent> Fixture::send_message(const Message& m, std::vector<size_t> order,
                                        uint16_t path) {
    const auto segs = peer.cut(m);
    if (order.empty())
        for (size_t i = 0; i < segs.size(); ++i) order.push_back(i);
    std::vector<Sent> sent;
    for (size_t i : order) sent.push_back(peer.send_segment(segs.at(i), path));
    return sent;
}

wire::AckPacket Fixture::barrier(uint16_t path) {
    auto a = peer.barrier(path);
    check(a.has_value(), "[PROBE-2] no PROBE_REPLY to a PROBE on path {} within 500 ms", path);
    return *a;
}

wire::NackPacket Fixture::expect_nack() {
    auto n = peer.expect([](const Rx& r) { return r.is(wire::PacketType::kNack); }, 500ms);
    if (!n) {
        // Name what the target saw, so a failure under load tells a lost datagram from a
        // target that did not answer.
        const json st = call("stats", {{"peer", peer.local().to_string()}});
        const json c = st.value("connection", json::object());
        check(false, "expected a NACK within 500 ms, none arrived (target: {} datagrams received, {} sent; "
                     "connection: nacks_sent {}, access_errors {}, unknown_stream {}, malformed {}; endpoint drops {})",
              st.value("datagrams_received", uint64_t{0}), st.value("datagrams_sent", uint64_t{0}),
              c.value("nacks_sent", uint64_t{0}), c.value("access_errors", uint64_t{0}),
              c.value("unknown_stream", uint64_t{0}), c.value("malformed", uint64_t{0}),
              st.value("endpoint", json::object()).dump());
    }
    return n->nack;
}

void Fixture::no_nack(const char* why) {
    auto n = peer.collect([](const Rx& r) { return r.is(wire::PacketType::kNack); }, 10ms);
    check(n.empty(), "unexpected NACK (reason {}) {}", static_cast<int>(n.empty() ? 0 : static_cast<int>(n[0].nack.reason)), why);
}

std::vector<json> Fixture::poll(uint32_t target_qp, int wait_ms) {
    const json r = call("poll_cq", {{"qp", target_qp}, {"wait_ms", wait_ms}});
    return r.at("completions").get<std::vector<json>>();
}

bool Fixture::saw_event(const std::function<bool(const json&)>& match, Duration wait) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    for (;;) {
        // Keep the answer alive: a range-for over a member of a temporary dangles.
        const json answer = call("events");
        for (const auto& e : answer.at("events")) events.push_back(e);
        for (const auto& e : events)
            if (match(e)) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        (void)peer.collect([](const Rx&) { return false; }, 5ms);  // let the target run
    }
}

json Fixture::connection_stats() {
    const json r = call("stats", {{"peer", peer.local().to_string()}});
    check(r.contains("connection"), "agent reports no connection to {}", peer.local().to_string());
    return r.at("connection");
}

uint64_t Fixture::counter(const char* name) {
    const json c = connection_stats();
    check(c.contains(name), "agent reports no connection counter '{}'", name);
    return c.at(name).get<uint64_t>();
}

std::optional<uint64_t> Fixture::endpoint_counter(const char* name) {
    const json r = call("stats");
    if (!r.contains("endpoint") || !r["endpoint"].is_object() || !r["endpoint"].contains(name))
        return std::nullopt;
    return r["endpoint"][name].get<uint64_t>();
}

}  // namespace mroce::conform
