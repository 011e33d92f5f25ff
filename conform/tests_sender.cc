// conform/tests_sender.cc — the target as requester: the suite is the responder and judges
// the DATA the target sends (spec §3.2, §5, §7): source ports and paths, PSNs, the cut,
// the fields every segment repeats, the tail-loss PROBE and the retransmission of a lost
// segment.
#include <chrono>
#include <map>

#include "conform/checks.h"
#include "conform/fixture.h"

namespace mroce::conform {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using wire::Opcode;
using wire::PacketType;

constexpr uint64_t kRemoteAddr = 0x7f0000010000ULL;  // "our" memory: the suite keeps none
constexpr uint32_t kRkey = 0x4242;

struct Sender {
    Fixture f;
    Region src;
    std::vector<std::byte> content;
    explicit Sender(Context& ctx, size_t length, uint32_t seed) : f(ctx) {
        f.establish();
        src = f.reg_mr(length, {"local_write"});
        content = pattern(length, seed);
        f.write_mr(src, 0, content);
        f.call("post_send", {{"qp", f.qp}, {"opcode", "write"}, {"mr", src.mr}, {"offset", 0},
                             {"length", length}, {"remote_addr", kRemoteAddr}, {"rkey", kRkey},
                             {"wr_id", 9}});
    }
    // check_segment: what every DATA of the WRITE must carry ([DATA-4], [DATA-5], [DATA-6]).
    void check_segment(const Rx& rx) {
        const auto& h = rx.data;
        const uint32_t s = f.peer.segment_size();
        check(h.opcode == Opcode::kWrite && h.stream_id == f.my_stream && h.msg_seq == f.peer.remote().msg_isn,
              "[DATA-6] [STREAM-2] segment opcode {:#x} stream {:#x} msg_seq {:#x}", static_cast<int>(h.opcode),
              h.stream_id, h.msg_seq);
        check(h.msg_len == content.size() && h.rkey == kRkey && h.remote_addr == kRemoteAddr,
              "[DATA-6] segment msg_len {} rkey {:#x} remote_addr {:#x} differ from the work request",
              h.msg_len, h.rkey, h.remote_addr);
        check(h.recv_seq == 0 && h.immediate == 0, "[DATA-5] WRITE with recv_seq or immediate set");
        check(h.offset % s == 0 && h.payload_len == std::min<uint64_t>(s, content.size() - h.offset),
              "[DATA-4] segment at offset {} carries {} bytes (segment size {})", h.offset, h.payload_len, s);
        check(std::equal(rx.payload.begin(), rx.payload.end(), content.begin() + h.offset),
              "[DATA-6] segment at offset {} carries other bytes than the source", h.offset);
        const bool last = h.offset + h.payload_len == content.size();
        if (last || (h.flags & wire::data_flag::kRetx))
            check(h.flags & wire::data_flag::kAckNow, "[ACK-12] a {} segment without ACK_NOW",
                  last ? "last" : "retransmitted");
    }
    // completes: report the message delivered and expect the target's completion.
    void completes(const std::set<uint16_t>& paths) {
        f.ack_target_data(paths, f.peer.remote().msg_isn + 1);
        const auto cq = f.poll(f.qp, 500);
        check(cq.size() == 1 && cq[0].at("wr_id") == 9 && cq[0].at("status") == "success" &&
                  cq[0].at("opcode") == "write" && cq[0].at("byte_len") == content.size(),
              "[PLACE-11] after the delivery report the WRITE completed as {}", json(cq).dump());
    }
};

// write_segments: a 40000-byte WRITE, acknowledged as it arrives: ports, paths, PSNs, cut
// and fields of every segment, then completion on our delivery report.
void write_segments(Context& ctx) {
    Sender s(ctx, 40000, 180);
    const uint32_t seg = s.f.peer.segment_size();
    const size_t count = (40000 + seg - 1) / seg;
    std::map<uint16_t, uint16_t> port_of_path;
    std::map<uint16_t, uint32_t> next_psn;
    std::set<uint16_t> paths;
    std::set<uint32_t> offsets;
    while (offsets.size() < count) {
        auto rx = s.f.peer.expect(is_type(PacketType::kData), 500ms);
        check(rx.has_value(), "[PATH-10] only {} of {} segments arrived", offsets.size(), count);
        const auto& h = rx->data;
        s.check_segment(*rx);
        const uint16_t port = rx->raw.from.port;
        check(port >= 49152, "[PATH-2] DATA from source port {} (outside 49152-65535)", port);
        check(rx->raw.from.same_host(ctx.target.udp), "DATA from another host {}", rx->raw.from.to_string());
        check(h.path_id < s.f.peer.remote().num_paths, "[PATH-1] path_id {} of {} paths", h.path_id,
              s.f.peer.remote().num_paths);
        auto [it, fresh] = port_of_path.emplace(h.path_id, port);
        check(it->second == port, "[UDP-6] path {} sent from ports {} and {}", h.path_id, it->second, port);
        if (fresh)
            for (const auto& [p, q] : port_of_path)
                check(p == h.path_id || q != port, "[PATH-2] paths {} and {} share source port {}", p,
                      h.path_id, port);
        auto [n, first] = next_psn.emplace(h.path_id, s.f.peer.remote().isn);
        check(h.path_psn == n->second, "[PATH-9] path {} sent PSN {:#x}, expected {:#x}", h.path_id,
              h.path_psn, n->second);
        n->second = h.path_psn + 1;
        (void)first;
        offsets.insert(h.offset);
        paths.insert(h.path_id);
        s.f.peer.note_target_data(h);
        s.f.peer.send_ack(s.f.peer.ack_for_target_path(h.path_id));
    }
    check(paths.size() > 1, "[PATH-10] {} segments all went on one path", count);
    s.completes(paths);
}

// tail_probe: a one-segment WRITE that we never acknowledge: the first timeout sends a
// PROBE on that path, from its source port, naming the next PSN ([LOSS-5], [LOSS-11],
// [PROBE-1]); our PROBE_REPLY acknowledging the DATA lets it complete.
void tail_probe(Context& ctx) {
    Sender s(ctx, 1000, 181);
    auto data = s.f.peer.expect(is_type(PacketType::kData), 500ms);
    check(data.has_value(), "no DATA for the posted WRITE");
    s.check_segment(*data);
    const auto& h = data->data;
    auto probe = s.f.peer.expect(
        [&](const Rx& r) { return r.is(PacketType::kProbe) || (r.is(PacketType::kData) && r.data.path_id == h.path_id); },
        1000ms);
    check(probe.has_value(), "[LOSS-5] [LOSS-11] no PROBE within 1 s of an unacknowledged DATA");
    check(probe->is(PacketType::kProbe), "[LOSS-5] the first timeout resent DATA instead of probing");
    const auto& p = probe->probe;
    check(p.path_id == h.path_id && p.path_gen == h.path_gen,
          "[LOSS-11] PROBE for path {} gen {}, the DATA went on path {} gen {}", p.path_id, p.path_gen,
          h.path_id, h.path_gen);
    check(probe->raw.from.port == data->raw.from.port,
          "[PROBE-1] [UDP-6] PROBE from port {}, its path's DATA from port {}", probe->raw.from.port,
          data->raw.from.port);
    check(p.next_psn == h.path_psn + 1, "[LOSS-11] PROBE next_psn {:#x}, expected {:#x}", p.next_psn,
          h.path_psn + 1);
    check(p.psn_floor == h.path_psn, "[PATH-6] PROBE psn_floor {:#x} while PSN {:#x} is in flight",
          p.psn_floor, h.path_psn);
    s.f.peer.note_target_data(h);
    auto reply = s.f.peer.probe_reply(p);
    s.f.peer.send_ack(reply);
    s.completes({h.path_id});
}

// retransmit: one segment of a WRITE is "lost" (never acknowledged, its path probed and
// the reply shows the hole): it is sent again with RETX and ACK_NOW, under a new PSN, with
// the same fields and bytes ([LOSS-8], [LOSS-10], [ACK-12], [DATA-6], [PATH-9]).
void retransmit(Context& ctx) {
    Sender s(ctx, 5 * 4096, 182);
    const uint32_t seg = s.f.peer.segment_size();
    const size_t count = (s.content.size() + seg - 1) / seg;
    std::optional<Rx> lost;
    std::set<uint16_t> paths;
    std::set<uint32_t> offsets;
    for (int guard = 0; guard < 200; ++guard) {
        auto rx = s.f.peer.expect([](const Rx& r) { return r.is(PacketType::kData) || r.is(PacketType::kProbe); },
                                  1000ms);
        check(rx.has_value(), "[LOSS-5] [LOSS-8] the unacknowledged segment was neither probed nor resent");
        if (rx->is(PacketType::kProbe)) {
            // Answer truthfully: what we noted (the lost segment is not among it).
            auto reply = s.f.peer.probe_reply(rx->probe);
            s.f.peer.send_ack(reply);
            continue;
        }
        s.check_segment(*rx);
        const auto& h = rx->data;
        if (h.offset == 0 && !lost) {
            lost = std::move(rx);  // dropped: neither noted nor acknowledged
            continue;
        }
        if (h.offset == 0) {
            check(h.flags & wire::data_flag::kRetx, "[LOSS-8] the resent segment lacks RETX");
            check(h.path_id != lost->data.path_id || h.path_psn != lost->data.path_psn ||
                      h.path_gen != lost->data.path_gen,
                  "[PATH-9] the retransmission reused PSN {:#x} of path {}", h.path_psn, h.path_id);
        }
        offsets.insert(h.offset);
        paths.insert(h.path_id);
        s.f.peer.note_target_data(h);
        s.f.peer.send_ack(s.f.peer.ack_for_target_path(h.path_id));
        if (offsets.size() == count) break;
    }
    check(offsets.size() == count, "the WRITE's segments did not all arrive");
    s.completes(paths);
}

// delivery_probe: every segment acknowledged at path level but no delivery report: the
// target's delivery timer sends the last segment again as a retransmission ([STREAM-5]);
// our report then completes the WRITE.
void delivery_probe(Context& ctx) {
    Sender s(ctx, 6000, 183);
    std::set<uint16_t> paths;
    std::set<uint32_t> offsets;
    const uint32_t last_offset = (6000 - 1) / s.f.peer.segment_size() * s.f.peer.segment_size();
    while (offsets.size() < 2) {
        auto rx = s.f.peer.expect(is_type(PacketType::kData), 500ms);
        check(rx.has_value(), "the WRITE's segments did not arrive");
        s.check_segment(*rx);
        offsets.insert(rx->data.offset);
        paths.insert(rx->data.path_id);
        s.f.peer.note_target_data(rx->data);
        s.f.peer.send_ack(s.f.peer.ack_for_target_path(rx->data.path_id));  // no stream entry
    }
    // A copy of a segment already acknowledged may come first: on a loaded host our ACK can
    // be later than the target's first probe timeout, and a drained sender then copies the
    // path's tail ([LOSS-16]). It is a RETX of a segment seen before; anything else is the
    // probe under test.
    std::optional<Rx> probe;
    const auto probe_by = std::chrono::steady_clock::now() + 2000ms;
    for (;;) {
        const auto left = std::chrono::duration_cast<Duration>(probe_by - std::chrono::steady_clock::now());
        probe = s.f.peer.expect(is_type(PacketType::kData), std::max(left, Duration::zero()));
        check(probe.has_value(), "[STREAM-5] no delivery probe within 2 s of the path-level ACKs");
        s.check_segment(*probe);
        const bool tail_copy = (probe->data.flags & wire::data_flag::kRetx) && probe->data.offset != last_offset &&
                               offsets.count(probe->data.offset);
        if (!tail_copy) break;
        s.f.peer.note_target_data(probe->data);
        s.f.peer.send_ack(s.f.peer.ack_for_target_path(probe->data.path_id));
    }
    check(probe->data.offset == last_offset && (probe->data.flags & wire::data_flag::kRetx),
          "[STREAM-5] the delivery probe is segment at {} (flags {:#x}), expected the last, {}, with RETX",
          probe->data.offset, probe->data.flags, last_offset);
    s.f.peer.note_target_data(probe->data);
    paths.insert(probe->data.path_id);
    s.completes(paths);
}

// return_paths: control packets leave from the target's path ports ([PATH-2]), each round
// of ACKs on a path drawn afresh ([ACK-13]), and the second copy of a PROBE_REPLY on
// another path than the first ([PROBE-2]).
//
// Each of the 24 rounds needs both copies of one reply, 48 answers the target sends once.
// Across the testbed they cross a lossy plane, and when its ECMP hash puts most of the
// target's path ports there one attempt in three lost one of them, so all three attempts
// failed about once in 20 runs (CI, seed 1590492621). A round that gets one copy is
// therefore asked again with a fresh PROBE, at most kLostRounds times in the test; a
// target that answers once fails here all the same, and ack.probe_reply requires both
// copies of its one PROBE.
void return_paths(Context& ctx) {
    Sender s(ctx, 8 * 4096, 184);
    std::set<uint16_t> path_ports;
    std::set<uint32_t> offsets;
    std::set<uint16_t> paths;
    while (offsets.size() < 8) {
        auto rx = s.f.peer.expect(is_type(PacketType::kData), 500ms);
        check(rx.has_value(), "the WRITE's segments did not arrive");
        offsets.insert(rx->data.offset);
        path_ports.insert(rx->raw.from.port);
        paths.insert(rx->data.path_id);
        s.f.peer.note_target_data(rx->data);
        s.f.peer.send_ack(s.f.peer.ack_for_target_path(rx->data.path_id));
    }
    s.completes(paths);  // the paths stay healthy: no re-roll changes their ports
    s.f.peer.discard(5ms);
    constexpr int kRounds = 24;
    constexpr int kLostRounds = 3;
    std::set<uint16_t> reply_ports;
    std::set<uint32_t> stamps;
    int differing_twins = 0;
    int lost_rounds = 0;
    for (int round = 0, whole = 0; whole < kRounds; ++round) {
        const uint32_t stamp = s.f.peer.send_probe(static_cast<uint16_t>(round % 4));
        // Both copies, each awaited up to 500 ms: a loaded target may answer late, and a
        // fixed window (it was 15 ms) failed there with no fault in the target. A third
        // copy is caught below, whenever it arrives.
        std::vector<Rx> twins;
        for (int copy = 0; copy < 2; ++copy)
            if (auto t = s.f.peer.expect(
                    [&](const Rx& r) { return r.is(PacketType::kAck) && r.ack.ts_echo == stamp; }, 500ms))
                twins.push_back(std::move(*t));
        for (const auto& t : twins) {
            check(path_ports.count(t.raw.from.port), "[PATH-2] [ACK-13] an ACK from port {}, not one of the "
                  "target's path ports", t.raw.from.port);
            reply_ports.insert(t.raw.from.port);
        }
        if (twins.size() < 2) {
            ++lost_rounds;
            check(lost_rounds <= kLostRounds, "[PROBE-2] {} PROBEs of {} answered fewer than twice within "
                  "500 ms (the last: {} copies)", lost_rounds, round + 1, twins.size());
            continue;
        }
        ++whole;
        stamps.insert(stamp);  // a lost round's late copy is not a third one
        differing_twins += twins[0].raw.from.port != twins[1].raw.from.port;
    }
    check(differing_twins == kRounds, "[PROBE-2] {} of {} PROBE replies sent both copies on one path",
          kRounds - differing_twins, kRounds);
    const auto extra = s.f.peer.collect(
        [&](const Rx& r) { return r.is(PacketType::kAck) && stamps.count(r.ack.ts_echo); }, 20ms);
    check(extra.empty(), "[PROBE-2] a PROBE was answered more than twice ({} extra copies)", extra.size());
    check(reply_ports.size() >= 3, "[ACK-13] {} replies left from only {} ports of {}", 2 * kRounds,
          reply_ports.size(), path_ports.size());
}

// peer_dead: a peer that never answers: the WRITE fails with an error of [ERR-1] (peer
// dead, or retries exhausted first), and the failed connection then sends nothing
// ([CONN-9]).
void peer_dead(Context& ctx) {
    Sender s(ctx, 1000, 185);
    const auto cq = s.f.poll(s.f.qp, 3000);
    check(cq.size() == 1 && (cq[0].at("status") == "peer_dead" || cq[0].at("status") == "retry_exceeded"),
          "[ERR-2] [LOSS-7] a WRITE to a silent peer did not fail within 3 s: {}", json(cq).dump());
    // What the target sent before it failed may still be queued at our socket (a silent
    // peer is probed hard while the stall rule holds, [LOSS-13]): drain it, then require
    // silence. A target that keeps sending never goes quiet, and fails after 5 s.
    const auto give_up = std::chrono::steady_clock::now() + 5s;
    size_t drained = 0;
    for (;;) {
        const size_t n = s.f.peer.collect([](const Rx& r) { return !r.is(PacketType::kClose); }, 50ms).size();
        drained += n;
        if (n == 0) break;
        check(std::chrono::steady_clock::now() < give_up,
              "[CONN-9] the failed connection still sends 5 s after failing ({} packets)", drained);
    }
    auto after = s.f.peer.collect([](const Rx& r) { return !r.is(PacketType::kClose); }, 100ms);
    check(after.empty(), "[CONN-9] the failed connection sent again after 50 ms of silence (type {})",
          after.empty() ? 0 : static_cast<int>(after[0].type));
}

// completion_order: three WRITEs, the middle one unsignaled, reported delivered by one
// stream entry: the signaled ones complete in post order, the unsignaled one not at all
// ([PLACE-7], [PLACE-11]).
void completion_order(Context& ctx) {
    Sender s(ctx, 100, 186);  // wr 9
    for (uint64_t wr : {10, 11})
        s.f.call("post_send", {{"qp", s.f.qp}, {"opcode", "write"}, {"mr", s.src.mr}, {"length", 100},
                               {"remote_addr", kRemoteAddr}, {"rkey", kRkey}, {"wr_id", wr},
                               {"signaled", wr != 10}});
    std::set<uint16_t> paths;
    std::set<uint32_t> msgs;
    while (msgs.size() < 3) {
        auto rx = s.f.peer.expect(is_type(PacketType::kData), 500ms);
        check(rx.has_value(), "[STREAM-11] only {} of 3 messages arrived", msgs.size());
        msgs.insert(rx->data.msg_seq);
        paths.insert(rx->data.path_id);
        s.f.peer.note_target_data(rx->data);
    }
    check(*msgs.begin() == s.f.peer.remote().msg_isn && *msgs.rbegin() == s.f.peer.remote().msg_isn + 2,
          "[STREAM-2] the three messages are not msg_isn .. msg_isn + 2");
    s.f.ack_target_data(paths, s.f.peer.remote().msg_isn + 3);
    std::vector<json> cq;
    for (int i = 0; i < 10 && cq.size() < 2; ++i) {
        auto more = s.f.poll(s.f.qp, 100);
        cq.insert(cq.end(), more.begin(), more.end());
    }
    check(cq.size() == 2 && cq[0].at("wr_id") == 9 && cq[1].at("wr_id") == 11,
          "[PLACE-7] [PLACE-11] completions {} (expected wr 9 then 11; 10 is unsignaled)", json(cq).dump());
}

// path_failure: every packet on one path goes unanswered while the others work: the
// path fails ([PATH-3], kPathFailed), is re-rolled to a new source port and generation
// with PSNs from isn again and probed at once ([PATH-4]); our PROBE_REPLY on the new route
// brings it back (kPathRecovered, [PATH-8]); the WRITE still completes.
void path_failure(Context& ctx) {
    Sender s(ctx, 48 * 4096, 187);
    // The path of the first DATA breaks after its first two packets: answered, they give it
    // an RTT sample, so its PTO follows our real response time. (A path dead from its first
    // packet keeps 2 x initial_rtt as its PTO base, [LOSS-4]; a peer slower than that, as a
    // loaded test host is, holds it in the stall rule, [LOSS-13], and it is never failed.)
    std::optional<uint16_t> dead;
    uint16_t dead_port = 0;
    int dead_answered = 0;
    std::set<uint16_t> paths;
    std::optional<Rx> reroll;
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    // Batches: everything that arrived, then one answer per path for its newest PROBE and
    // one ACK per path that brought DATA, as a receiver answers a receive batch. A peer
    // that answered every PROBE in turn would fall behind a target probing fast while the
    // stall rule ([LOSS-13]) holds (a loaded host), and its late answers would prove
    // nothing sent after the dead path's last timeout.
    while (!reroll) {
        if (std::chrono::steady_clock::now() >= give_up) {
            // Name what the target's ladder did, so a failure under load can be explained.
            const json st = s.f.call("stats", {{"peer", s.f.peer.local().to_string()}});
            const json paths = st.value("paths", json::array());
            (void)s.f.saw_event([](const json&) { return false; }, Duration::zero());
            check(false, "[PATH-3] [PATH-4] the unanswered path {} was not failed and re-rolled within 10 s; target: {} {} events {}",
                  dead ? int(*dead) : -1, dead && *dead < paths.size() ? paths[*dead].dump() : "{}",
                  st.value("connection", json::object()).dump(), json(s.f.events).dump());
        }
        auto batch = s.f.peer.ready(
            [](const Rx& r) { return r.is(PacketType::kData) || r.is(PacketType::kProbe); }, 10ms);
        std::map<uint16_t, const wire::ProbePacket*> newest_probe;
        std::set<uint16_t> acked;
        for (auto& rx : batch) {
            const uint16_t p = rx.is(PacketType::kData) ? rx.data.path_id : rx.probe.path_id;
            const uint8_t gen = rx.is(PacketType::kData) ? rx.data.path_gen : rx.probe.path_gen;
            if (!dead && rx.is(PacketType::kData)) {
                dead = p;
                dead_port = rx.raw.from.port;
            }
            if (p == *dead && gen == 0 && rx.is(PacketType::kData) && dead_answered < 2) {
                ++dead_answered;
            } else if (p == *dead && gen == 0) {
                continue;  // lost on the broken route
            } else if (p == *dead) {
                check(rx.is(PacketType::kProbe), "[PATH-4] a re-rolled path sent DATA before it was probed");
                reroll = std::move(rx);
                break;
            }
            if (rx.is(PacketType::kProbe)) {
                newest_probe[p] = &rx.probe;
                continue;
            }
            s.f.peer.note_target_data(rx.data);
            paths.insert(p);
            acked.insert(p);
        }
        if (reroll) break;
        for (uint16_t p : acked)
            if (!newest_probe.count(p)) s.f.peer.send_ack(s.f.peer.ack_for_target_path(p));
        for (const auto& [p, probe] : newest_probe) s.f.peer.send_ack(s.f.peer.probe_reply(*probe));
    }
    const auto& probe = reroll->probe;
    // Answer the new route at once: a late answer may find the path re-rolled again (an
    // unanswered Failed path is, after its PTO) and rightly count as stale ([PATH-4]).
    auto answer = [&](const wire::ProbePacket& pr) { s.f.peer.send_ack(s.f.peer.probe_reply(pr)); };
    answer(probe);
    check(reroll->raw.from.port != dead_port && reroll->raw.from.port >= 49152,
          "[PATH-4] the re-rolled path probes from port {} (was {})", reroll->raw.from.port, dead_port);
    check(probe.path_gen == 1, "[PATH-4] [PATH-7] the re-rolled path has generation {}", probe.path_gen);
    check(probe.next_psn == s.f.peer.remote().isn && probe.psn_floor == probe.next_psn,
          "[PATH-4] [PATH-9] the re-rolled path's PSNs do not restart at isn (next_psn {:#x}, floor {:#x})",
          probe.next_psn, probe.psn_floor);
    check((probe.flags & wire::kProbeFailed) != 0,
          "[PROBE-4] the Failed path's PROBE does not carry FAILED (flags {:#x})", probe.flags);
    const uint16_t d = *dead;
    auto path_event = [d](const char* kind) {
        return [d, k = std::string(kind)](const json& e) { return e.at("kind").get<std::string>() == k && e.value("path", 0xffff) == d; };
    };
    // The target reported the failure before it probed the new route; its event may still
    // be on the way through the agent on a loaded machine: up to 2 s (found at once when
    // there; the wait was 200 ms).
    const bool failed = s.f.saw_event(path_event("path_failed"), 2s);
    check(failed, "[PATH-3] [ERR-9] no path_failed event for path {}: {}", d, json(s.f.events).dump());
    // Keep answering the newest PROBE of the new route until the target says it recovered,
    // up to 3 s (it was 20 rounds of 10 ms, too short for a loaded target).
    bool recovered = false;
    const auto recover_by = std::chrono::steady_clock::now() + 3s;
    while (!recovered && std::chrono::steady_clock::now() < recover_by) {
        recovered = s.f.saw_event(path_event("path_recovered"), 10ms);
        for (const auto& rx : s.f.peer.ready(is_type(PacketType::kProbe), Duration::zero()))
            if (rx.probe.path_id == d && rx.probe.path_gen != 0) answer(rx.probe);
    }
    check(recovered, "[PATH-4] [PATH-8] our PROBE_REPLY on the new route did not recover path {}", d);
    // Be a working responder again until the WRITE completes: acknowledge what arrives
    // and report the message delivered ([PLACE-11] completes it once every segment was sent).
    const auto until = std::chrono::steady_clock::now() + 5s;
    std::vector<json> cq;
    while (cq.empty() && std::chrono::steady_clock::now() < until) {
        for (const auto& rx : s.f.peer.ready([](const Rx& r) { return r.is(PacketType::kData) || r.is(PacketType::kProbe); },
                                             5ms)) {
            if (rx.is(PacketType::kProbe)) {
                // The dead route's old generation stays unanswered; its new one works.
                if (rx.probe.path_id != d || rx.probe.path_gen != 0) s.f.peer.send_ack(s.f.peer.probe_reply(rx.probe));
                continue;
            }
            if (rx.data.path_id == d && rx.data.path_gen == 0) continue;
            s.f.peer.note_target_data(rx.data);
            paths.insert(rx.data.path_id);
        }
        s.f.ack_target_data(paths, s.f.peer.remote().msg_isn + 1);
        cq = s.f.poll(s.f.qp, 0);
    }
    check(cq.size() == 1 && cq[0].at("status") == "success",
          "[PATH-3] the WRITE did not complete around the failed path: {}", json(cq).dump());
}

}  // namespace

void add_sender_tests(std::vector<TestCase>& out) {
    out.push_back({"sender.write_segments",
                   "[PATH-1] [PATH-2] [UDP-6] [PATH-9] [PATH-10] [DATA-4] [DATA-5] [DATA-6] [ACK-12] [PLACE-11]",
                   "the target's 40000-byte WRITE: ports, paths, PSNs, cut and fields; completion",
                   write_segments});
    out.push_back({"sender.tail_probe", "[LOSS-5] [LOSS-11] [PROBE-1] [UDP-6] [PATH-6]",
                   "an unacknowledged tail segment is probed on its own path and port", tail_probe});
    out.push_back({"sender.delivery_probe", "[STREAM-5] [PLACE-11]",
                   "segments acknowledged but never reported delivered: the last is resent", delivery_probe});
    out.push_back({"sender.return_paths", "[ACK-13] [PATH-2] [PROBE-2]",
                   "control packets leave from path ports, spread over paths; twin replies differ",
                   return_paths});
    out.push_back({"sender.peer_dead", "[ERR-1] [ERR-2] [LOSS-7] [CONN-9]",
                   "a silent peer fails the WRITE within 3 s; the failed connection goes quiet",
                   peer_dead});
    out.push_back({"sender.completion_order", "[PLACE-7] [PLACE-11]",
                   "one delivery report completes signaled WRITEs in post order, unsignaled silently",
                   completion_order});
    out.push_back({"sender.path_failure", "[PATH-3] [PATH-4] [PATH-8] [PATH-7] [ERR-9] [PROBE-4]",
                   "an unanswered path fails, is re-rolled (port, generation, PSNs) and recovers",
                   path_failure});
    out.push_back({"sender.retransmit", "[LOSS-8] [LOSS-10] [ACK-12] [DATA-6] [PATH-9]",
                   "a lost segment is resent with RETX, ACK_NOW, a new PSN, the same bytes",
                   retransmit});
}

}  // namespace mroce::conform
