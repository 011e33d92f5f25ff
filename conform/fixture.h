// conform/fixture.h — the set-up most tests share: a fresh target (agent `reset`), a peer
// with a fresh identity, and helpers for the agent's commands.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "conform/suite.h"

namespace mroce::conform {

// Region: a registered buffer at the target.
struct Region {
    uint32_t mr = 0;
    uint64_t addr = 0;
    uint32_t rkey = 0;
    uint32_t lkey = 0;
    uint64_t length = 0;
};

struct FixtureOptions {
    std::optional<uint32_t> isn;      // our path ISN (default: drawn from the seed)
    std::optional<uint32_t> msg_isn;  // our stream ISN (default: drawn from the seed)
    uint16_t num_paths = 4;
};

class Fixture {
public:
    // Fixture resets the target and opens the test's peer in ctx.peer.
    explicit Fixture(Context& ctx, FixtureOptions o = {});

    Context& ctx;
    Peer& peer;
    uint32_t my_stream = 0;  // our queue pair number: the stream id the target's DATA carries
    uint32_t qp = 0;         // the target's queue pair (its stream id), after establish()
    uint32_t next_msg = 0;   // next msg_seq / recv_seq we send on the stream
    uint32_t next_recv = 0;

    nlohmann::json call(const std::string& cmd, nlohmann::json args = nlohmann::json::object());
    Region reg_mr(uint64_t length, const std::vector<std::string>& access,
                  std::optional<uint32_t> pd = std::nullopt);
    std::vector<std::byte> read_mr(const Region& r, uint64_t offset, uint64_t length);
    void write_mr(const Region& r, uint64_t offset, std::span<const std::byte> bytes);
    uint32_t create_qp(std::optional<uint32_t> pd = std::nullopt);
    void connect_qp(uint32_t target_qp);
    // establish: our HELLO, the target's HELLO_ACK, then a queue pair connected to our
    // stream. Fails the test if the handshake does not complete.
    void establish(std::optional<uint32_t> pd = std::nullopt);
    // switch_stream: a new queue pair at the target, bound to a new stream of ours; later
    // messages go on it, from msg_isn again ([STREAM-2]).
    void switch_stream(std::optional<uint32_t> pd = std::nullopt);
    // ack_target_data: acknowledge every DATA of the target noted so far on `paths` (each
    // path's cumulative state), the first ACK also reporting our stream delivered up to
    // `delivered_seq` ([ACK-9]).
    void ack_target_data(const std::set<uint16_t>& paths, uint32_t delivered_seq);
    // ack_target_paths: acknowledge every DATA of the target noted so far on `paths`, with
    // no stream report: how a READ or atomic answer is acknowledged ([PLACE-30]).
    void ack_target_paths(const std::set<uint16_t>& paths);
    // message: the next message on our stream (msg_seq, and recv_seq when it takes a receive).
    Message message(wire::Opcode op, std::vector<std::byte> body);
    // write_segment: the next message, a WRITE of `length` bytes of pattern(`seed`) into `r`
    // at `offset`, as one segment (LAST; the caller keeps `length` within max_payload).
    Segment write_segment(const Region& r, size_t length, uint32_t seed, uint64_t offset);
    // read_request: the next message, a READ of `length` bytes of `r` at `offset`.
    Message read_request(const Region& r, uint32_t length, uint64_t offset = 0);
    // atomic_request: the next message, an atomic `op` on the 8 bytes of `r` at `offset`
    // (FETCH_ADD: add swap_add; COMPARE_SWAP: swap_add if they hold `compare`).
    Message atomic_request(const Region& r, wire::Opcode op, uint64_t swap_add, uint64_t compare,
                           uint64_t offset = 0);
    // send_message sends every segment in `order` (indexes into the cut; all, in order, when
    // empty) on path `path`. Returns what was sent.
    std::vector<Sent> send_message(const Message& m, std::vector<size_t> order = {},
                                   uint16_t path = 0);
    // barrier: Peer::barrier, failing the test when no PROBE_REPLY arrives.
    wire::AckPacket barrier(uint16_t path = 0);
    // expect_nack: the next NACK within 500 ms, failing the test if none arrives.
    wire::NackPacket expect_nack();
    // no_nack: fails the test if a NACK arrived (call after a barrier).
    void no_nack(const char* why);
    // completions at the target's queue pair (poll_cq), waiting up to wait_ms for the first.
    std::vector<nlohmann::json> poll(uint32_t target_qp, int wait_ms = 0);
    // saw_event: whether the target reported an event matching `match` (agent `events`),
    // polling up to `wait`. Events are drained by the agent, so every one seen is kept in
    // `events` for later questions.
    bool saw_event(const std::function<bool(const nlohmann::json&)>& match, Duration wait);
    std::vector<nlohmann::json> events;
    // connection counters of the target for our connection (stats "connection").
    nlohmann::json connection_stats();
    uint64_t counter(const char* name);
    // endpoint_counter: an endpoint drop counter; skips the test's counter check (returns
    // nullopt) when the agent does not report endpoint counters.
    std::optional<uint64_t> endpoint_counter(const char* name);
};

// open_socket: a UDP socket of the suite at ctx.local_ip (ephemeral port) whose datagrams
// leave through ctx.via_ifindex when set (--via). Every socket of the suite is made here.
std::optional<UdpSocket> open_socket(const Context& ctx, std::string* why);

// derive: a 64-bit value from the suite's seed, the test and a label (splitmix64), never 0.
uint64_t derive(uint64_t seed, uint32_t test, uint32_t label);

}  // namespace mroce::conform
