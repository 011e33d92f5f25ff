// conform/tests_short_ack.cc — the SHORT ACK form of capability SHORT_ACK ([ACK-21]): an
// ACK whose SACK bitmap is empty leaves it out (flag SHORT, 48 + 8 × stream_count bytes).
// Judged as tests_coalesce.cc judges COALESCE: the peer announces the bit or not
// (Peer::short_ack), reads the target's ACKs as the negotiated state says (a SHORT ACK where
// it was not negotiated is a violation, [VER-2]) and sends its own ACKs SHORT where it may.
//
//   - not_negotiated_full: without our bit, every ACK of the target is 80 + 8n bytes, no SHORT
//     (MUST NOT);
//   - empty_bitmap_short: with both bits, the ACKs of a loss-free transfer are SHORT (SHOULD:
//     a target that sends them in the full form is conformant, the test then skips);
//   - bits_never_short: with both bits, an ACK whose bitmap has a bit set is never SHORT (MUST
//     NOT): the peer leaves holes and judges each ACK against what had arrived when it left;
//   - applied: with both bits, the target's WRITE is acknowledged by SHORT ACKs and SHORT
//     probe replies only, and completes without retransmission;
//   - not_negotiated_ignored: without our bit, a SHORT ACK is read at full length (truncated,
//     dropped) and acknowledges nothing; the same ACK at full length with the undefined bit
//     set is applied (the control).
#include <chrono>
#include <map>
#include <set>

#include "conform/checks.h"
#include "conform/fixture.h"

namespace mroce::conform {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using wire::PacketType;

constexpr uint64_t kRemoteAddr = 0x7f0000020000ULL;  // "our" memory: the suite keeps none
constexpr uint32_t kRkey = 0x5151;

// kOthers: the capabilities we announce where we do not announce SHORT_ACK: the other two,
// so the tests also show that they neither imply it nor change its meaning.
constexpr uint32_t kOthers = wire::kCapIntegrity | wire::kCapCoalesce;

void need_target_short_ack(Fixture& f) {
    if (!(f.peer.remote().capabilities & wire::kCapShortAck))
        throw Skipped("the target does not announce SHORT_ACK ([VER-2]: optional)");
    check(f.peer.short_ack(), "[VER-2] both announced SHORT_ACK but the peer does not use it");
}

bool is_short(const Rx& r) { return r.ack.flags & wire::ack_flag::kShort; }
bool raw_short(const Rx& r) {
    return r.raw.bytes.size() > 19 && (static_cast<uint8_t>(r.raw.bytes[19]) & wire::ack_flag::kShort);
}

// Receiver: the target receives our WRITEs into a region.
struct Receiver {
    Fixture f;
    Region region;
    Receiver(Context& ctx, uint32_t capabilities) : f(ctx) {
        f.peer.me().capabilities = capabilities;
        f.establish();
        region = f.reg_mr(1 << 20, {"local_write", "remote_write"});
    }
    // one_segment: a fresh single-segment WRITE (ACK_NOW, LAST) of `length` bytes at `offset`.
    Segment one_segment(size_t length, uint32_t seed, uint64_t offset) {
        return f.write_segment(region, length, seed, offset);
    }
    // loss_free: `count` one-segment WRITEs, round-robin over paths 0..3, each in order.
    void loss_free(uint32_t count, uint32_t seed) {
        for (uint32_t k = 0; k < count; ++k)
            f.peer.send_segment(one_segment(200, seed + k, 256 * k), static_cast<uint16_t>(k % 4));
    }
    // acks_until_probed: a PROBE on each of `paths` (after everything sent so far), then every
    // ACK of the target until each PROBE was answered (1 s at most) and 20 ms more. The target
    // handles datagrams in order, so these are all the ACKs of what was sent before.
    std::vector<Rx> acks_until_probed(const std::vector<uint16_t>& paths,
                                      std::map<uint16_t, uint32_t>* stamps_out = nullptr) {
        std::map<uint16_t, uint32_t> stamps;
        for (uint16_t p : paths) stamps[p] = f.peer.send_probe(p);
        if (stamps_out) *stamps_out = stamps;
        auto is_ack = [](const Rx& r) { return r.is(PacketType::kAck); };
        std::vector<Rx> out;
        std::set<uint16_t> answered;
        const auto until = std::chrono::steady_clock::now() + 1s;
        while (answered.size() < paths.size()) {
            const auto left = until - std::chrono::steady_clock::now();
            if (left <= Duration::zero()) break;
            auto r = f.peer.expect(is_ack, std::chrono::duration_cast<Duration>(left));
            if (!r) break;
            const auto it = stamps.find(r->ack.path_id);
            const bool reply = r->ack.flags & wire::ack_flag::kProbeReply;
            if (reply && it != stamps.end() && r->ack.ts_echo == it->second) answered.insert(r->ack.path_id);
            out.push_back(std::move(*r));
        }
        for (auto& r : f.peer.collect(is_ack, 20ms)) out.push_back(std::move(r));
        check(answered.size() == paths.size(), "[PROBE-2] {} of {} PROBEs were answered within 1 s",
              answered.size(), paths.size());
        return out;
    }
};

// not_negotiated_full: we announce INTEGRITY and COALESCE but not SHORT_ACK. Every ACK of
// a loss-free transfer (each with an empty bitmap: what SHORT would shorten) and every probe
// reply is in the full form, 80 + 8 × stream_count bytes, without the SHORT bit.
void not_negotiated_full(Context& ctx) {
    Receiver s(ctx, kOthers);
    check(!s.f.peer.short_ack(), "the peer uses SHORT_ACK it did not announce");
    s.loss_free(12, 240);
    const auto acks = s.acks_until_probed({0, 1, 2, 3});
    size_t empty = 0;
    for (const auto& r : acks) {
        check(!raw_short(r), "[ACK-21] [VER-2] an ACK with SHORT (flags {:#x}) to a peer that did not announce "
              "SHORT_ACK", static_cast<int>(r.raw.bytes[19]));
        const size_t want = wire::kAckFixedSize + wire::kAckStreamEntrySize * r.ack.stream_count;
        check(r.ack_size == want, "[ACK-1] [ACK-21] an ACK of {} bytes with {} entries (the full form is {})",
              r.ack_size, r.ack.stream_count, want);
        empty += sack_count(r.ack) == 0;
    }
    // The control: the target had ACKs that the SHORT form would have shortened.
    check(empty > 0, "no ACK with an empty bitmap among the target's {} ACKs of a loss-free transfer", acks.size());
}

// empty_bitmap_short: both announce SHORT_ACK; a loss-free transfer. Every ACK decodes as
// the negotiated state says (the peer checks); each one with an empty bitmap SHOULD be
// SHORT ([ACK-21]); the probe replies carry their fields at the moved offsets.
void empty_bitmap_short(Context& ctx) {
    Receiver s(ctx, wire::kCapShortAck | wire::kCapIntegrity);
    need_target_short_ack(s.f);
    s.loss_free(12, 241);
    std::map<uint16_t, uint32_t> stamps;
    const auto acks = s.acks_until_probed({0, 1, 2, 3}, &stamps);
    size_t shorts = 0, full_empty = 0;
    for (const auto& r : acks) {
        const auto& a = r.ack;
        const size_t want = wire::ack_fixed_size(a.flags) + wire::kAckStreamEntrySize * a.stream_count;
        check(r.ack_size == want, "[ACK-1] [ACK-21] an ACK of {} bytes with flags {:#x} and {} entries ({} expected)",
              r.ack_size, a.flags, a.stream_count, want);
        check(sack_count(a) == 0, "[ACK-2] a SACK bit in an ACK of a loss-free transfer (cum {:#x})", a.cum_psn);
        if (is_short(r))
            ++shorts;
        else
            ++full_empty;
        if ((a.flags & wire::ack_flag::kProbeReply) && a.ts_echo == stamps[a.path_id]) {
            // [ACK-21]: every field after the bitmap, read 32 bytes up, says what it says in the
            // full form: the PROBE's next_psn and timestamp, the path's cumulative PSN.
            const uint32_t next = s.f.peer.path(a.path_id).next_psn;
            check(a.probe_psn == next && a.cum_psn == next - 1,
                  "[ACK-21] [ACK-8] [ACK-3] the reply to the PROBE of path {} says probe_psn {:#x}, cum {:#x} "
                  "(expected {:#x}, {:#x}; flags {:#x})", a.path_id, a.probe_psn, a.cum_psn, next, next - 1, a.flags);
        }
    }
    check(!acks.empty(), "no ACK from the target");
    if (full_empty > 0)
        throw Skipped(fmt::format("[ACK-21] SHOULD: {} of the target's {} ACKs with an empty bitmap were sent in the "
                                  "full form (the SHORT form is recommended, not required)",
                                  full_empty, acks.size()));
    (void)shorts;
}

// bits_never_short: both announce SHORT_ACK. On path 1 PSNs isn, isn+2, isn+5 arrive, a
// PROBE, then the holes are filled and a PROBE again. Each step waits for the ACK that
// answers it (ACK_NOW, or the probe reply: ts_echo names the step), so that ACK shows exactly
// what had arrived. With a PSN above its cum_psn it MUST be in the full form with that PSN's
// bit ([ACK-21], [ACK-2]); once the holes are filled its bitmap is empty (SHORT then is the
// SHOULD of empty_bitmap_short, not judged here).
void bits_never_short(Context& ctx) {
    Receiver s(ctx, wire::kCapShortAck);
    need_target_short_ack(s.f);
    const uint32_t isn = s.f.peer.me().isn;
    std::set<uint32_t> arrived;  // the PSNs of path 1 sent so far
    size_t judged_with_bits = 0;
    auto judge = [&](const Rx& r, const std::string& what) {
        const auto& a = r.ack;
        std::vector<uint32_t> above;
        for (uint32_t psn : arrived)
            if (serial_before(a.cum_psn, psn)) above.push_back(psn);
        if (above.empty()) return;
        ++judged_with_bits;
        check(!is_short(r), "[ACK-21] the ACK of {} is SHORT (cum {:#x}, flags {:#x}) although PSN {:#x} above it "
              "had arrived: its bitmap would have a bit set", what, a.cum_psn, a.flags, above.front());
        for (uint32_t psn : above)
            check(covers(a, psn), "[ACK-2] [ACK-21] the ACK of {} (cum {:#x}) lacks the SACK bit of PSN {:#x}, "
                  "which had arrived", what, a.cum_psn, psn);
    };
    // answer: the ACKs of path 1 echoing `stamp` (the first within 500 ms, then any copy
    // within 20 ms: a probe reply comes twice, [PROBE-2]), each judged.
    auto answer = [&](uint32_t stamp, const std::string& what) {
        auto mine = [&](const Rx& x) {
            return x.is(PacketType::kAck) && x.ack.path_id == 1 && x.ack.ts_echo == stamp;
        };
        auto r = s.f.peer.expect(mine, 500ms);
        check(r.has_value(), "[ACK-11] [PROBE-2] no ACK of path 1 answered {} within 500 ms", what);
        judge(*r, what);
        for (const auto& more : s.f.peer.collect(mine, 20ms)) judge(more, what);
        return r->ack;
    };
    uint32_t offset = 0;
    auto send = [&](uint32_t k) {
        s.f.peer.path(1).next_psn = isn + k;
        const Sent sent = s.f.peer.send_segment(s.one_segment(100, 250 + k, offset += 128), 1);
        arrived.insert(sent.psn);
        return answer(sent.timestamp, fmt::format("the DATA of PSN isn+{}", k));
    };
    auto probe = [&](const char* what) {
        s.f.peer.path(1).next_psn = isn + 6;
        return answer(s.f.peer.send_probe(1), what);
    };
    for (uint32_t k : {0u, 2u, 5u}) send(k);
    probe("the PROBE with holes at isn+1, isn+3, isn+4");
    for (uint32_t k : {1u, 3u, 4u}) send(k);
    const auto last = probe("the PROBE after the holes were filled");
    // The control: the target sent ACKs the rule applies to (the holes were seen), and the
    // filled path acknowledges everything.
    check(judged_with_bits >= 4, "only {} ACKs of path 1 were sent while PSNs above a hole had arrived",
          judged_with_bits);
    check(last.cum_psn == isn + 5 && sack_count(last) == 0,
          "[ACK-3] after the holes were filled the probe reply says cum {:#x} with {} SACK bits "
          "(expected {:#x}, none)",
          last.cum_psn, sack_count(last), isn + 5);
}

// Sender: the target posts WRITEs to us; we acknowledge them.
struct Sender {
    Fixture f;
    Region src;
    explicit Sender(Context& ctx, uint32_t capabilities) : f(ctx) {
        f.peer.me().capabilities = capabilities;
        f.establish();
        src = f.reg_mr(65536, {"local_write"});
        f.write_mr(src, 0, pattern(65536, 245));
    }
    void post_write(uint64_t wr_id, size_t length) {
        f.call("post_send", {{"qp", f.qp}, {"opcode", "write"}, {"mr", src.mr}, {"offset", 0},
                             {"length", length}, {"remote_addr", kRemoteAddr}, {"rkey", kRkey},
                             {"wr_id", wr_id}});
    }
    static bool completed(const std::vector<json>& cq, uint64_t wr_id) {
        for (const auto& c : cq)
            if (c.at("wr_id") == wr_id && c.at("status") == "success" && c.at("opcode") == "write") return true;
        return false;
    }
};

// applied: both announce SHORT_ACK. The target's 40000-byte WRITE is acknowledged segment
// by segment with SHORT ACKs (its bitmap is empty: nothing is missing), and its delivery
// reported in a SHORT ACK: the WRITE completes, and nothing is retransmitted unless a
// timeout (a PROBE) came first. Then a one-segment WRITE is left unacknowledged until the
// target probes: a SHORT probe reply (PROBE_REPLY | SHORT) acknowledges and completes it.
void applied(Context& ctx) {
    Sender s(ctx, wire::kCapShortAck);
    Fixture& f = s.f;
    need_target_short_ack(f);
    const uint64_t full_before = f.peer.full_acks_sent();
    constexpr size_t kLen = 40000;
    s.post_write(9, kLen);
    const uint32_t seg = f.peer.segment_size();
    const size_t count = (kLen + seg - 1) / seg;
    std::set<uint32_t> offsets;
    std::set<uint16_t> paths;
    bool probed = false;
    while (offsets.size() < count) {
        auto rx = f.peer.expect([](const Rx& r) { return r.is(PacketType::kData) || r.is(PacketType::kProbe); },
                                500ms);
        check(rx.has_value(), "[ACK-21] only {} of {} segments arrived within 500 ms of the last: the SHORT ACKs "
              "did not open the target's window", offsets.size(), count);
        if (rx->is(PacketType::kProbe)) {
            probed = true;
            f.peer.send_ack(f.peer.probe_reply(rx->probe));
            continue;
        }
        const auto& h = rx->data;
        check(!(h.flags & wire::data_flag::kRetx) || probed,
              "[ACK-21] the target retransmitted the segment at offset {} (PSN {:#x}) although every segment it "
              "sent was acknowledged at once by a SHORT ACK and it never probed", h.offset, h.path_psn);
        offsets.insert(h.offset);
        paths.insert(h.path_id);
        f.peer.note_target_data(h);
        f.peer.send_ack(f.peer.ack_for_target_path(h.path_id));
    }
    f.ack_target_data(paths, f.peer.remote().msg_isn + 1);
    auto cq = f.poll(f.qp, 500);
    check(Sender::completed(cq, 9), "[ACK-21] [PLACE-11] after SHORT ACKs of every segment and of its delivery the "
          "WRITE completed as {}", json(cq).dump());
    for (const auto& r : f.peer.collect(is_type(PacketType::kData), 20ms))
        check(!(r.data.flags & wire::data_flag::kRetx) || probed,
              "[ACK-21] a retransmission (PSN {:#x}) after the WRITE was acknowledged by SHORT ACKs",
              r.data.path_psn);
    check(f.peer.full_acks_sent() == full_before, "the peer sent {} ACKs in the full form (all must be SHORT)",
          f.peer.full_acks_sent() - full_before);

    // A SHORT probe reply.
    s.post_write(10, 1000);
    auto data = f.peer.expect(is_type(PacketType::kData), 500ms);
    check(data.has_value(), "no DATA for the second WRITE");
    const auto h = data->data;
    f.peer.note_target_data(h);
    std::optional<Rx> probe;
    const auto until = std::chrono::steady_clock::now() + 1s;
    while (!probe) {
        const auto left = until - std::chrono::steady_clock::now();
        check(left > Duration::zero(), "[LOSS-5] no PROBE of path {} within 1 s of an unacknowledged DATA",
              h.path_id);
        auto r = f.peer.expect(is_type(PacketType::kProbe), std::chrono::duration_cast<Duration>(left));
        check(r.has_value(), "[LOSS-5] no PROBE of path {} within 1 s of an unacknowledged DATA", h.path_id);
        if (r->probe.path_id == h.path_id)
            probe = std::move(r);
        else
            f.peer.send_ack(f.peer.probe_reply(r->probe));
    }
    auto reply = f.peer.probe_reply(probe->probe);
    reply.stream_count = 1;
    reply.streams[0] = {f.my_stream, f.peer.remote().msg_isn + 2};
    const uint64_t shorts = f.peer.short_acks_sent();
    f.peer.send_ack(reply);
    check(f.peer.short_acks_sent() == shorts + 1, "the peer's probe reply was not SHORT");
    cq = f.poll(f.qp, 500);
    check(Sender::completed(cq, 10), "[ACK-21] [PROBE-2] after a SHORT probe reply acknowledging it and reporting it "
          "delivered, the WRITE completed as {}", json(cq).dump());
}

// not_negotiated_ignored: we do not announce SHORT_ACK. The ACK of the target's one-segment
// WRITE, sent SHORT (56 bytes), is read at full length: truncated ([ACK-1], [WIRE-7]) and
// dropped. The WRITE does not complete and its DATA stays in flight (the target probes
// its path). The control: the same ACK at its full length with the SHORT bit set (undefined
// there, [WIRE-6]) is applied and completes the WRITE.
void not_negotiated_ignored(Context& ctx) {
    Sender s(ctx, kOthers);
    Fixture& f = s.f;
    check(!f.peer.short_ack(), "the peer uses SHORT_ACK it did not announce");
    s.post_write(9, 1000);
    auto data = f.peer.expect(is_type(PacketType::kData), 500ms);
    check(data.has_value(), "no DATA for the WRITE");
    const auto h = data->data;
    f.peer.note_target_data(h);
    auto a = f.peer.ack_for_target_path(h.path_id);
    a.stream_count = 1;
    a.streams[0] = {f.my_stream, f.peer.remote().msg_isn + 1};
    check(covers(a, h.path_psn), "setup: the ACK does not cover PSN {:#x}", h.path_psn);
    auto bytes = Peer::ack_bytes([&] {
        auto b = a;
        b.flags |= wire::ack_flag::kShort;
        return b;
    }());
    check(bytes.size() == wire::kAckShortFixedSize + wire::kAckStreamEntrySize, "setup: a SHORT ACK of {} bytes",
          bytes.size());
    const auto before = f.endpoint_counter("truncated");
    f.peer.send_bytes(bytes);
    const auto reply = f.peer.barrier();
    check(reply.has_value(), "[PROBE-2] no PROBE_REPLY to the PROBE sent after the SHORT ACK within 500 ms");
    auto cq = f.poll(f.qp, 10);
    check(cq.empty(), "[ACK-21] [VER-2] a SHORT ACK on a connection without SHORT_ACK was applied: {}",
          json(cq).dump());
    if (before) {
        const auto after = f.endpoint_counter("truncated");
        check(after && *after == *before + 1, "[ACK-1] [WIRE-7] [ACK-21] a 56-byte SHORT ACK read at full length: "
              "truncated went {} -> {}", *before, after.value_or(0));
    }
    // The DATA is still unacknowledged: the target's timeout probes its path ([LOSS-5]).
    auto probe = f.peer.expect(
        [&](const Rx& r) { return r.is(PacketType::kProbe) && r.probe.path_id == h.path_id; }, 1000ms);
    check(probe.has_value(), "[ACK-21] [LOSS-5] no PROBE of path {} within 1 s: the SHORT ACK was taken as an "
          "acknowledgement", h.path_id);
    check(!serial_before(h.path_psn, probe->probe.psn_floor) && serial_before(h.path_psn, probe->probe.next_psn),
          "[ACK-21] [PATH-6] the target's PROBE (floor {:#x}, next {:#x}) no longer counts PSN {:#x} in flight",
          probe->probe.psn_floor, probe->probe.next_psn, h.path_psn);
    cq = f.poll(f.qp, 0);
    check(cq.empty(), "[ACK-21] the WRITE completed without an acknowledgement: {}", json(cq).dump());
    // The control: the full form, the undefined SHORT bit set, is an ACK like any other.
    bytes = Peer::ack_bytes(a);
    bytes[19] |= std::byte{wire::ack_flag::kShort};
    f.peer.send_bytes(bytes);
    cq = f.poll(f.qp, 500);
    check(Sender::completed(cq, 9), "[ACK-21] [WIRE-6] [ACK-1] the same ACK at its full length (88 bytes) with the "
          "undefined SHORT bit set did not complete the WRITE: {}", json(cq).dump());
}

}  // namespace

void add_short_ack_tests(std::vector<TestCase>& out) {
    out.push_back({"short_ack.not_negotiated_full", "[ACK-21] [VER-2] [ACK-1] [ACK-8]",
                   "without our SHORT_ACK every ACK of the target (a loss-free transfer's, probe replies) "
                   "is 80 + 8n bytes without SHORT",
                   not_negotiated_full});
    out.push_back({"short_ack.empty_bitmap_short", "[ACK-21] [ACK-1] [ACK-8] [ACK-3]",
                   "with SHORT_ACK negotiated the ACKs of a loss-free transfer are SHORT (SHOULD: skipped if "
                   "not), their fields at the moved offsets",
                   empty_bitmap_short});
    out.push_back({"short_ack.bits_never_short", "[ACK-21] [ACK-2]",
                   "with SHORT_ACK negotiated an ACK sent while PSNs above a hole had arrived is in the full "
                   "form with their bits",
                   bits_never_short});
    out.push_back({"short_ack.applied", "[ACK-21] [PROBE-2] [PLACE-11]",
                   "with SHORT_ACK negotiated SHORT ACKs and a SHORT probe reply acknowledge the target's "
                   "WRITEs: they complete without retransmission",
                   applied});
    out.push_back({"short_ack.not_negotiated_ignored", "[ACK-21] [VER-2] [ACK-1] [WIRE-6] [WIRE-7]",
                   "without SHORT_ACK a SHORT ACK is truncated at full length and acknowledges nothing; the "
                   "full form with the undefined bit set does",
                   not_negotiated_ignored});
}

}  // namespace mroce::conform
