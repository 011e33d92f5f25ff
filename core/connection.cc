// core/connection.cc — handshake, lifecycle and timers of a connection (spec §4, §5, §10).
#include "core/connection.h"

#include <algorithm>
#include <utility>

#include "cc/aimd.h"
#include "core/endpoint.h"
#include "util/muldiv.h"
#include "util/seq.h"


namespace mroce::core {

namespace {
// spec §5 [PATH-2]: source ports are drawn from the dynamic range.
constexpr uint16_t kMinSourcePort = 49152;
uint16_t random_port(Rng& rng) {
    return static_cast<uint16_t>(kMinSourcePort + rng.uniform(65536 - kMinSourcePort));
}
uint32_t random_nonzero(Rng& rng) {
    uint32_t v;
    do v = rng.next_u32();
    while (v == 0);
    return v;
}
}  // namespace

namespace {
cc::SendRateConfig send_rate_config(const EndpointConfig& c, uint16_t phase) {
    cc::SendRateConfig r;
    r.phase = phase;
    r.use_hint = c.rate_hint;
    r.pacing = c.pacing;
    r.first_rtt_bytes = c.first_rtt_bytes;
    r.idle_halving_rtts = c.idle_halving_rtts;
    r.grant_interval = c.hint_interval;
    r.max_inflight_bytes = c.max_inflight_bytes;
    r.burst_bytes = c.pacing_burst_bytes;
    r.burst_time = c.hint_interval;
    r.mss = c.max_payload;
    return r;
}
}  // namespace

Connection::Connection(Endpoint& ep, uint32_t id, const Address& peer, uint64_t token, Rng rng,
                       Time now)
    : ep_(ep), cfg_(ep.cfg_), id_(id), peer_(peer), rng_(rng),
      rate_(send_rate_config(ep.cfg_, static_cast<uint16_t>(rng_.fork("pacer").next_u32()))),
      token_(token) {
    if (cfg_.congestion_control == EndpointConfig::Cc::kAimd)
        cc_ = std::make_unique<cc::Aimd>(cfg_.num_paths,
                                         cc::AimdConfig{cfg_.max_payload, cfg_.initial_window_bytes_per_path,
                                                        cfg_.window_bytes_per_path});
    else
        cc_ = std::make_unique<cc::FixedWindow>(cfg_.window_bytes_per_path);
    // spec §4 [CONN-5]: a random 64-bit token (the caller's) and random initial sequence numbers.
    MROCE_DCHECK(token_ != 0);
    isn_ = cfg_.forced_isn ? cfg_.forced_isn : random_nonzero(rng_);
    msg_isn_ = cfg_.forced_isn ? cfg_.forced_isn - 7 : random_nonzero(rng_);
    tx_paths_.resize(cfg_.num_paths);
    path_stats_.resize(cfg_.num_paths);
    for (uint16_t p = 0; p < cfg_.num_paths; ++p) {
        TxPath& path = tx_paths_[p];
        path.id = p;
        // [PATH-1]: paths are spread evenly over the NIC ports (planes).
        path.local_port = static_cast<uint16_t>(p % std::max<uint16_t>(1, cfg_.num_local_ports));
        bool unique;
        do {  // distinct source ports so that distinct paths hash independently
            path.src_port = random_port(rng_);
            unique = std::none_of(tx_paths_.begin(), tx_paths_.begin() + p,
                                  [&](const TxPath& o) { return o.src_port == path.src_port; });
        } while (!unique);
        path.next_psn = path.base = isn_;
        // The record ring starts at 2 and doubles as the path's span grows (make_room),
        // up to kSackBits: a path keeps as many records as it has had in flight, not a
        // preset 16 (32 bytes each: 4,032 connections x 8 paths x 16 were 16.5 MB of
        // bench/sim_bench's all-to-all, whose peak RSS falls from 95 to 81 MB with 2).
        path.ring.resize(2);
    }
    selector_ = make_path_selector(cfg_, cfg_.num_paths);
    (void)now;
}

void Connection::start_connect(Time now) {
    initiator_ = true;
    start_hello_round(now);
    hello_tries_ = 0;
    hello_deadline_ = now + cfg_.handshake_timeout;
    note_deadline(hello_deadline_);
}

void Connection::push_hint() {
    // [CC-14]: only a peer that sent us DATA has a path to answer on, and a hint to hear.
    if (state_ != ConnState::kEstablished || !rx_paths_[last_rx_path_].seen) return;
    ++stats_.hints_pushed;
    queue_ack(last_rx_path_);
}

void Connection::set_meta(const TxPath& path, PacketMeta& m) const {
    m.src.ip = ep_.local_.ip;
    m.src.port = path.src_port;
    m.dst = peer_;
    m.ecn = ecn::kEct0;  // spec §2 [UDP-5]: every packet is sent ECT(0)
    m.local_port = path.local_port;
    // [STREAM-14]: control packets (ACK, NACK, PROBE, HELLO, CLOSE) serve every stream of
    // the connection, so they take its highest class: an ACK stuck behind a paused or
    // congested low class would stall the high-class streams it also acknowledges (RoCE
    // NICs likewise send CNPs and ACKs on a high priority). DATA overrides it.
    m.traffic_class = control_class_;
}

// next_return_path picks the path for a control packet: a seeded random choice among the
// paths that are not failed ([ACK-13]) and whose NIC port has not gone quiet ([PATH-16]);
// if every such path is on a quiet port, among those not failed. Random, not round-robin:
// ACKs arrive in path order, and a round-robin return choice would lock each forward path
// to one return route, so one dead return route could starve a healthy forward path of
// every ACK.
uint16_t Connection::next_return_path(Time now) {
    const uint16_t n = num_paths();
    const uint16_t start = static_cast<uint16_t>(rng_.uniform(n));
    uint16_t quiet = kNoPathChoice;
    for (uint16_t i = 0; i < n; ++i) {
        const uint16_t p = static_cast<uint16_t>((start + i) % n);
        if (tx_paths_[p].state == PathState::kFailed) continue;
        if (!ep_.port_quiet(tx_paths_[p].local_port, now)) return p;
        if (quiet == kNoPathChoice) quiet = p;
    }
    return quiet != kNoPathChoice ? quiet : start;
}

// other_return_path: as next_return_path, for a probe reply's second copy ([PROBE-2]) and a
// repeated HELLO's answer ([CONN-6]): on another plane than `avoid` if one can take it, else
// another path of the same plane. When every path is Failed, a Failed path of another
// plane still beats `avoid` itself: an Established side whose peer is still Connecting
// gets no probe replies, so all its paths fail, and its answers must not all go where the
// last one was lost (with `avoid` returned, scripts/sim_fuzz.py cases 476 and 1190 sent
// every answer into the one dead plane of 2, and the WRITE waited for the peer-dead
// timeout).
uint16_t Connection::other_return_path(uint16_t avoid, Time now) {
    const uint16_t n = num_paths();
    const uint16_t start = static_cast<uint16_t>(rng_.uniform(n));
    uint16_t same_plane = avoid, quiet = kNoPathChoice, failed_other = kNoPathChoice;
    for (uint16_t i = 0; i < n; ++i) {
        const uint16_t p = static_cast<uint16_t>((start + i) % n);
        if (p == avoid) continue;
        const bool other_plane = tx_paths_[p].local_port != tx_paths_[avoid].local_port;
        if (tx_paths_[p].state == PathState::kFailed) {
            if (other_plane && failed_other == kNoPathChoice) failed_other = p;
            continue;
        }
        if (ep_.port_quiet(tx_paths_[p].local_port, now)) {
            if (quiet == kNoPathChoice) quiet = p;
            continue;
        }
        if (other_plane) return p;
        if (same_plane == avoid) same_plane = p;
    }
    if (same_plane != avoid) return same_plane;
    if (quiet != kNoPathChoice) return quiet;
    return failed_other != kNoPathChoice ? failed_other : avoid;
}

size_t Connection::write_hello(std::span<std::byte> buf, PacketMeta& meta, wire::PacketType type,
                               Time now) {
    wire::HelloPacket h;
    h.common.type = type;
    if (type == wire::PacketType::kHelloAck) {
        h.common.dst_conn_id = peer_known_ ? peer_conn_id_ : answer_conn_id_;
        h.common.dst_token = peer_known_ ? peer_token_ : answer_token_;
    }
    h.src_conn_id = id_;
    h.src_token = token_;
    h.isn = isn_;
    h.msg_isn = msg_isn_;
    h.endpoint_port = ep_.local_.port;
    h.num_paths = num_paths();
    h.max_payload = cfg_.max_payload;
    h.capabilities = (cfg_.integrity_check ? wire::kCapIntegrity : 0) |  // [INT-1]
                     (cfg_.coalesce ? wire::kCapCoalesce : 0) |          // [WIRE-10]
                     (cfg_.short_acks ? wire::kCapShortAck : 0) |        // [ACK-21]
                     (cfg_.compact_data ? wire::kCapCompactData : 0);    // [DATA-9]
    // [CC-20]: a HELLO_ACK grants the peer, as a new sender to us, the share it would get
    // now, if the peer's HELLO said it has DATA waiting (SENDING); a HELLO says so.
    if (type == wire::PacketType::kHello) {
        for (uint32_t sid : streams_) {
            const Stream* st = ep_.stream(sid);
            if (st && !st->tx.empty()) h.sending = true;
        }
    }
    if (type == wire::PacketType::kHelloAck && peer_sending_ && cfg_.hello_grant && cfg_.rate_hint) {
        const uint64_t mbps = ep_.fair_share_.grant_bps(slot(), now) / 1'000'000;
        h.grant_mbps = static_cast<uint32_t>(std::clamp<uint64_t>(mbps, 1, UINT32_MAX));
    }
    // [CONN-32]: a HELLO_ACK echoes the number of the peer's latest HELLO (a HELLO takes
    // its own number below, in version 2's form only).
    if (type == wire::PacketType::kHelloAck) h.hello_echo = peer_hello_seq_;
    Result<size_t> n = Error::kInvalidArgument;
    const bool round_first = type == wire::PacketType::kHello && hello_round_first_;
    if (type == wire::PacketType::kHello) hello_round_first_ = false;
    if (round_first && !peer_speaks_v2_ && hello_tries_ % 3 == 2) {
        // [VER-1]: every third retransmission goes in version 1's form (its first copy,
        // [CONN-30]), so that a peer that speaks only version 1 (and drops ours unread)
        // answers, and we can fail with a clear reason instead of a silent timeout.
        n = wire::encode_hello_v1(h, buf);
    } else {
        if (type == wire::PacketType::kHello) {
            h.cookie = cookie_;
            h.hello_seq = hellos_sent_.stamp(now);  // [CONN-32]
        }
        // [CONN-31]: DATA of the peer's dropped while we were opening goes again once the
        // peer hears of it: in our next HELLO, or in the HELLO_ACK that confirms our
        // establishment ([CONN-16]) when the answer that establishes us comes first.
        h.dropped = std::exchange(dropped_opening_, false);
        n = wire::encode_hello(h, buf);
    }
    if (!n) return 0;
    uint16_t path;
    const bool repeat_answer = type == wire::PacketType::kHelloAck && hello_cursor_ >= num_paths() &&
                               last_answer_path_ < num_paths();
    if (repeat_answer) {
        // [CONN-6]: a HELLO answered before is repeated because our answer was lost, so
        // the new answer leaves on another plane than the last one if it can. Drawn at
        // random, the answers to 4 or 5 repeats in a row fell into a plane that had died
        // during the handshake while the peer, still Connecting, dropped our DATA until
        // it failed (scripts/sim_fuzz.py cases 157 and 210: one plane of 4 or 2 cut).
        path = hello_cursor_ = other_return_path(last_answer_path_, now);
    } else {
        path = next_copy_path(now);
    }
    if (type == wire::PacketType::kHelloAck) last_answer_path_ = path;
    handshake_port(tx_paths_[path], type == wire::PacketType::kHello, repeat_answer, now);
    if (type == wire::PacketType::kHelloAck) last_answer_sent_ = now;
    set_meta(tx_paths_[path], meta);
    ++stats_.hello_sent;
    return *n;
}

void Connection::new_source_port(TxPath& path) {
    const uint16_t old_port = path.src_port;
    auto taken = [&](uint16_t port) {
        if (port == old_port) return true;
        for (const TxPath& o : tx_paths_)
            if (&o != &path && o.src_port == port) return true;
        return false;
    };
    do path.src_port = random_port(rng_);
    while (taken(path.src_port));
}

// [CONN-33]: no path can fail before the handshake ends ([PATH-3] judges DATA and PROBEs),
// so without this every HELLO retransmission, and every answer to a repeated HELLO, left
// from the same few source ports: where all of them hashed onto a dead ECMP route (a
// spine's cable cut, routing not told), the connection failed after all its rounds
// (scripts/sim_fuzz.py --spine-cuts, case 1134: 2 paths, each answer lost). A HELLO (a
// Connecting side's HELLOs are all unanswered) or an answer to a repeated HELLO (the
// previous answer was lost) from a port that carried a handshake packet before takes a
// new port, as a re-roll would ([PATH-4] item 1); only on a path that sent no DATA in its
// generation, so nothing in flight is left behind.
void Connection::handshake_port(TxPath& path, bool hello, bool repeat_answer, Time now) {
    // A repeated HELLO shows our answer lost only if it comes a whole retransmission
    // timeout after that answer left: the copies of one round ([CONN-30]) come sooner,
    // whatever became of the answer, and moving ports for them only shuffled the routes of
    // every incast's first round trip.
    const bool answer_lost = repeat_answer && last_answer_sent_ != kNever &&
                             now >= last_answer_sent_ + cfg_.handshake_timeout;
    if (path.handshake_sent && (hello || answer_lost) && !carried_data(path)) {
        new_source_port(path);
        ++stats_.handshake_ports_changed;
    }
    path.handshake_sent = true;
}

void Connection::start_hello_round(Time now) {
    // [CONN-30]: the round's first HELLO now, its other copies one gap of
    // handshake_timeout / hello_copies apart, none once established.
    hellos_pending_ = 1;
    hello_round_first_ = true;
    drop_prompted_ = false;  // [CONN-31]: a drop may prompt one HELLO per scheduled copy
    if (hello_acks_pending_ == 0) hello_cursor_ = kNoPathChoice;
    hello_copies_due_ = cfg_.hello_copies - 1;
    hello_copy_deadline_ = hello_copies_due_ > 0 ? now + hello_copy_gap() : kNever;
    note_deadline(hello_copy_deadline_);
}

void Connection::dropped_while_opening() {
    // [CONN-31]: a HELLO tells the peer, which sends its DATA again behind its answer; the
    // first drop since the last scheduled HELLO copy sends one now, not a copy gap later.
    dropped_opening_ = true;
    if (drop_prompted_) return;
    drop_prompted_ = true;
    ++hellos_pending_;
}

Duration Connection::hello_copy_gap() const {
    return std::max(Duration{1}, cfg_.handshake_timeout / cfg_.hello_copies);
}

void Connection::owe_hello_acks(uint32_t n) {
    // [CONN-30]: one answer per HELLO, never more; the cap bounds what a burst of
    // repeats queues (a HELLO beyond it goes unanswered, as if lost).
    if (hellos_pending_ == 0 && hello_acks_pending_ == 0) hello_cursor_ = kNoPathChoice;
    hello_acks_pending_ = std::min(hello_acks_pending_ + n, EndpointConfig::kMaxHelloCopies);
}

uint16_t Connection::next_copy_path(Time now) {
    const uint16_t n = num_paths();
    if (hello_cursor_ >= n) return hello_cursor_ = next_return_path(now);
    for (uint16_t i = 1; i <= n; ++i) {
        const uint16_t p = static_cast<uint16_t>((hello_cursor_ + i) % n);
        if (tx_paths_[p].state != PathState::kFailed) return hello_cursor_ = p;
    }
    return hello_cursor_;
}

void Connection::on_hello(const wire::HelloPacket& h, Time now) {
    if (state_ == ConnState::kFailed || state_ == ConnState::kClosed) return;
    if (!peer_known_) {
        establish(h, now);
        // [CONN-26]: established by the answer to our HELLO, we confirm with a HELLO_ACK
        // of our own: it carries the peer's token, which proves to an unproven peer that
        // its HELLO_ACK reached us (an idle connection sends nothing else).
        if (h.common.type == wire::PacketType::kHelloAck) owe_hello_acks(1);
    } else if (h.src_conn_id != peer_conn_id_ || h.src_token != peer_token_) {
        ++stats_.malformed;  // a HELLO_ACK that disagrees with what we learnt
        return;
    }
    if (h.common.type == wire::PacketType::kHello) {
        if (h.sending) peer_sending_ = true;  // [CC-20]
        peer_hello_seq_ = h.hello_seq;        // [CONN-32]: our answers echo it
    }
    // [CONN-31]: the peer, while opening, dropped DATA of ours ([CONN-19]) and says so
    // (DROPPED, in its next HELLO or in the HELLO_ACK that confirms its establishment);
    // if no ACK has come back, what is in flight goes again behind our answer (declared
    // lost, it no longer holds the first-RTT budget). A HELLO without DROPPED says nothing
    // of our DATA: it may have left before any reached the peer, which a queue in front of
    // the peer delays (our answer to it waits in the same queue); resending then only
    // doubles what that queue holds.
    if (h.dropped) resend_to_opening_peer(now);
    if (h.common.type == wire::PacketType::kHelloAck) return take_grant(h, now);
    // [CONN-6]: every HELLO is answered with HELLO_ACK (a repeated HELLO means ours was lost).
    if (h.common.type != wire::PacketType::kHello) return;
    owe_hello_acks(1);
}

void Connection::resend_to_opening_peer(Time now) {
    if (state_ != ConnState::kEstablished || in_flight_total_ == 0 || !cfg_.resend_to_opening_peer || acked_any())
        return;
    for (TxPath& p : tx_paths_) declare_all_lost(p, LossReason::kTimeout, now);
}

void Connection::take_grant(const wire::HelloPacket& h, Time now) {
    // [CC-20]: the peer's grant, over the handshake's round trip from the HELLO it answers
    // (its echo; without one, from the latest HELLO we sent, never longer than the truth),
    // while our first round trip lasts: no ACK yet, and no grant taken before.
    const Time from = hellos_sent_.answered_at(h.hello_echo);
    if (!cfg_.hello_grant || !cfg_.rate_hint || h.grant_mbps == 0 || !hellos_sent_.any() ||
        now <= from || state_ != ConnState::kEstablished || acked_any())
        return;
    if (stats_.hello_grants_taken > 0) {
        // A later HELLO_ACK (the answer to another copy of our HELLO, [CONN-30]) carries
        // the grant as the responder computed it then: lower when it has granted others
        // since, as the first HELLOs of an incast were granted A, A/2, ... before the
        // rest were known. Taken, it ends the head start that gave the first sender of
        // an 8 -> 1 incast across racks 196 KB in flight against the others' 65 KB.
        if (rate_.lower_grant(h.grant_mbps)) ++stats_.hello_grants_lowered;
        return;
    }
    // [CC-20]: the grant caps the first round trip unless this endpoint's ports would spread
    // its first round trips anyway (more than one of them, and more than one BDP of them
    // in flight at first_rtt_bytes each): an all-to-all's senders start dozens of
    // connections at once, and the few bytes of their lowest grants would leave their
    // flows unequal at the start, and the run's end late (bench-a2a64: 0.944 -> 0.905). A
    // lone connection is capped whatever its port's rate: an incast's senders at 25 Gbit/s
    // each have a port BDP below first_rtt_bytes, and their ports spread nothing that the
    // receiver's downlink does not get N times.
    bool caps = false;
    if (cfg_.grant_caps_first_rtt) {
        const uint64_t bdp =
            mul_div(ports_bps(cfg_), static_cast<uint64_t>(to_ns(now - from)), 8'000'000'000u);
        const uint64_t fit = bdp / std::max<uint64_t>(cfg_.first_rtt_bytes, 1);
        const size_t most = static_cast<size_t>(std::max<uint64_t>(fit, 1));
        caps = ep_.connections_in_first_round_trip(most + 1) <= most;
    }
    rate_.on_grant(h.grant_mbps, now - from, now, caps);
    ++stats_.hello_grants_taken;
}

void Connection::answer_hello(const wire::HelloPacket& h) {
    if (state_ != ConnState::kConnecting || peer_known_) return;
    peer_speaks_v2_ = true;  // [VER-1]: its own version-2 HELLO says so
    answer_conn_id_ = h.src_conn_id;
    answer_token_ = h.src_token;
    if (h.sending) peer_sending_ = true;  // [CC-20]
    peer_hello_seq_ = h.hello_seq;        // [CONN-32]: our answer echoes it
    owe_hello_acks(1);
}

void Connection::on_retry(const wire::RetryPacket& r, Time now) {
    // Only a connection that is sending HELLOs has a HELLO to repeat; the RETRY passed the
    // token check, so it answers one of ours.
    if (state_ != ConnState::kConnecting || !initiator_) return;
    ++stats_.retries_received;
    peer_speaks_v2_ = true;
    cookie_ = r.cookie;
    // [CONN-33]: the RETRY answered a HELLO, so the ports that carried ours have a route
    // both ways (at least one of them; a round on them is no retry of a lost one).
    for (TxPath& p : tx_paths_) p.handshake_sent = false;
    // At once, but one round per RETRYs however many copies they answer ([CONN-30]); the
    // retransmission timer keeps its schedule.
    if (!retry_round_sent_) {
        retry_round_sent_ = true;
        start_hello_round(now);
    }
}

bool Connection::on_v1_hello_ack(Time now) {
    if (state_ != ConnState::kConnecting || !initiator_) return false;
    fail(Status::kVersionMismatch, now);
    return true;
}

void Connection::set_unproven(Time now) {
    proven_ = false;
    unproven_deadline_ = now + cfg_.peer_dead_timeout;
    note_deadline(unproven_deadline_);
}

void Connection::establish(const wire::HelloPacket& h, Time now) {
    peer_known_ = true;
    peer_conn_id_ = h.src_conn_id;
    peer_token_ = h.src_token;
    peer_isn_ = h.isn;
    peer_msg_isn_ = h.msg_isn;
    // [DATA-4]: both sides segment with the smaller of the two payload sizes.
    segment_size_ = std::min(cfg_.max_payload, h.max_payload);
    // [INT-1]: both HELLOs announce it; fixed for the life of the connection.
    integrity_ = cfg_.integrity_check && (h.capabilities & wire::kCapIntegrity) != 0;
    coalesce_ = cfg_.coalesce && (h.capabilities & wire::kCapCoalesce) != 0;  // [WIRE-10]
    short_acks_ = cfg_.short_acks && (h.capabilities & wire::kCapShortAck) != 0;  // [ACK-21]
    compact_data_ = cfg_.compact_data && (h.capabilities & wire::kCapCompactData) != 0;  // [DATA-9]
    rx_paths_.assign(h.num_paths, RxPath{});
    return_routes_.reset(num_paths(), h.num_paths);
    if (path_stats_.size() < h.num_paths) path_stats_.resize(h.num_paths);
    for (RxPath& rp : rx_paths_) rp.window.reset(peer_isn_);
    state_ = ConnState::kEstablished;
    hellos_pending_ = 0;
    hello_copies_due_ = 0;
    // [CONN-30]: a copy no longer due must not leave a wake-up behind (a timeout run for
    // nothing still starts a new ACK round, [ACK-13]).
    if (cached_deadline_ == hello_copy_deadline_) cached_deadline_ = hello_deadline_;
    hello_copy_deadline_ = kNever;
    hello_deadline_ = kNever;
    for (uint32_t sid : streams_) {
        Stream* s = ep_.stream_mut(sid);
        if (!s || s->seq_ready) continue;
        attach_stream(*s);
    }
    emit_state(EventKind::kConnectionUp, now);
}

void Connection::attach_stream(Stream& s) {
    if (std::find(streams_.begin(), streams_.end(), s.id) == streams_.end()) {
        streams_.push_back(s.id);
        by_remote_[s.remote_id] = s.id;
        control_class_ = std::max(control_class_, s.limits.traffic_class);
    }
    if (!peer_known_ || s.seq_ready) return;
    // [STREAM-2]: the sequence spaces of a stream start at the ISNs of the handshake.
    s.seq_ready = true;
    s.next_msg_seq = s.next_recv_seq = s.acked_seq = msg_isn_;
    s.delivered_seq = s.posted_front_seq = peer_msg_isn_;
    if (!s.tx.empty()) stream_has_work(s);
}

void Connection::detach_stream(Stream& s) {
    // [ACK-14]: a report still waiting for its ACK must not die with the stream. The
    // application may destroy a stream (a queue pair) as soon as its last message completes,
    // from another thread than the one that writes the ACK; the peer would then never learn
    // that its last message arrived and would fail it after its delivery probes.
    if (s.stream_ack_pending) final_reports_.push_back(wire::StreamAck{s.id, s.delivered_seq});
    fail_stream(s, Status::kFlushed);
    streams_.erase(std::remove(streams_.begin(), streams_.end(), s.id), streams_.end());
    auto it = by_remote_.find(s.remote_id);
    if (it != by_remote_.end() && it->second == s.id) by_remote_.erase(it);
    update_control_class();
}

void Connection::update_control_class() {
    control_class_ = 0;
    for (uint32_t sid : streams_)
        if (const Stream* s = ep_.stream_mut(sid))
            control_class_ = std::max(control_class_, s->limits.traffic_class);
}

void Connection::stream_has_work(Stream& s) {
    if (!s.seq_ready) return;
    if (!s.in_ready_list && (s.send_cursor < s.tx.size() || s.answer_cursor < s.answers.size()) &&
        !s.failed) {
        s.in_ready_list = true;
        ready_streams_.push_back(s.id);
    }
}

void Connection::close(Time now) {
    if (state_ == ConnState::kClosed) return;
    // [CONN-21]: one CLOSE now, again only if the peer shows it missed it ([CONN-28]) or
    // while the endpoint lingers ([CONN-29]). A failed connection can still be closed: it
    // was flushed already.
    if (peer_known_ && state_ != ConnState::kConnecting) {
        close_pending_ = true;
        close_reason_ = wire::CloseReason::kNormal;
    }
    if (state_ == ConnState::kFailed) return closed_after_failure(now);
    end(ConnState::kClosed, EventKind::kConnectionClosed, Status::kFlushed, now);
}

// [CONN-28]: the one CLOSE of [CONN-21] may be lost; a peer that still sends shows it was.
// Each such packet may bring the CLOSE again, at most one per min_pto (the peer's packets
// come in bursts) and kMaxCloseRepeats in all, so a peer holding the token cannot turn
// this side into a reflector.
void Connection::peer_spoke_after_close(Time now) {
    // A peer whose own CLOSE arrived knows ([CONN-29]): its later packets were in flight.
    if (state_ != ConnState::kClosed || closes_sent_ == 0 || close_pending_ || peer_closed_) return;
    if (!may_repeat_close(now)) return;
    close_pending_ = true;
    ++stats_.closes_repeated;
}

// [CONN-29]: a lingering endpoint sends an unconfirmed CLOSE again on its own, within the
// same pacing and budget as [CONN-28]: an idle peer sends nothing that would bring it.
bool Connection::repeat_close(Time now) {
    if (!close_unconfirmed() || close_pending_ || !may_repeat_close(now)) return false;
    close_pending_ = true;
    ++stats_.closes_repeated;
    return true;
}

void Connection::on_close(uint32_t reason, Time now) {
    // [CONN-29]: the peer is closed, so this side's own CLOSE (if any) needs no resending.
    // A CLOSE that is not itself an answer is answered with CONFIRM, in every state (a
    // repeated CLOSE means the earlier answer was lost), within [CONN-28]'s limits; a
    // CONFIRM is never answered, so two closed sides do not exchange CLOSEs.
    peer_closed_ = true;
    if (reason != static_cast<uint32_t>(wire::CloseReason::kConfirm) && peer_known_ &&
        !close_pending_ && may_repeat_close(now)) {
        close_pending_ = true;
        close_reason_ = wire::CloseReason::kConfirm;
        ++stats_.closes_answered;
    }
    // [CONN-8]: the peer closed; everything outstanding is flushed.
    if (state_ == ConnState::kClosed) return;
    if (state_ == ConnState::kFailed) return closed_after_failure(now);
    end(ConnState::kClosed, EventKind::kConnectionClosed, Status::kFlushed, now);
}

void Connection::closed_after_failure(Time now) {
    state_ = ConnState::kClosed;
    emit_state(EventKind::kConnectionClosed, now, Status::kFlushed);
}

void Connection::emit_state(EventKind kind, Time now, Status why, uint16_t path) {
    Event e;
    e.kind = kind;
    e.connection = id_;
    e.status = why;
    e.path = path;
    e.peer = peer_;
    ep_.emit(e);
    if (!ep_.trace_) return;
    TraceKind k = TraceKind::kConnectionUp;
    switch (kind) {
        case EventKind::kConnectionUp: k = TraceKind::kConnectionUp; break;
        case EventKind::kConnectionFailed: k = TraceKind::kConnectionFailed; break;
        case EventKind::kConnectionClosed: k = TraceKind::kConnectionClosed; break;
        case EventKind::kPathFailed: k = TraceKind::kPathFailed; break;
        case EventKind::kPathRecovered: k = TraceKind::kPathRecovered; break;
        default: return;
    }
    trace(k, now, path, 0, 0, why);
}

void Connection::trace(TraceKind kind, Time now, uint16_t path, uint64_t before,
                       uint64_t after, Status why) {
    TraceEvent e;
    e.kind = kind;
    e.at = now;
    e.connection = id_;
    e.path = path;
    e.status = why;
    e.before = before;
    e.after = after;
    ep_.trace_->on_trace(e);
}

void Connection::fail(Status why, Time now) {
    end(ConnState::kFailed, EventKind::kConnectionFailed, why, now);
}

// end moves the connection to a final state: every outstanding work request completes
// ([ERR-1]: the oldest of each stream with `why`, the rest kFlushed), every timer stops,
// and one event tells the application.
void Connection::end(ConnState final_state, EventKind kind, Status why, Time now) {
    if (state_ == ConnState::kFailed || state_ == ConnState::kClosed) return;
    state_ = final_state;
    ep_.connection_ended(*this, now);  // [CONN-24]: the quiet period starts
    ep_.fair_share_.forget(slot());
    pace_deadline_ = kNever;
    for (uint32_t sid : streams_) {
        Stream* s = ep_.stream_mut(sid);
        if (!s) continue;
        fail_stream(*s, why);
    }
    retx_.clear();
    retx_copies_.left = 0;
    ready_streams_.clear();
    delivery_timers_.clear();
    rnr_timers_.clear();
    for (TxPath& p : tx_paths_) {
        p.pto_deadline = p.reorder_deadline = p.probe_deadline = kNever;
        p.probe_pending = false;
    }
    probes_pending_ = 0;
    for (RxPath& rp : rx_paths_) rp.ack_deadline = kNever;
    ack_queue_.clear();
    nacks_.clear();
    hellos_pending_ = 0;
    hello_acks_pending_ = 0;
    hello_copies_due_ = 0;
    hello_copy_deadline_ = kNever;
    hello_deadline_ = kNever;
    cached_deadline_ = exact_deadline();
    emit_state(kind, now, why);
}

void Connection::on_timeout(Time now) {
    ack_round_path_ = kNoAckRound;  // delayed ACKs that fall due form a new round [ACK-13]
    run_timers(now);
    cached_deadline_ = exact_deadline();
}

void Connection::run_timers(Time now) {
    if (state_ == ConnState::kConnecting && hello_deadline_ <= now) {
        // [CONN-12]: HELLO is retransmitted with a backoff that doubles up to 32 x the
        // timeout and stays there (many tries soon beat a few late ones under heavy loss),
        // then the connection fails with kPeerDead.
        if (++hello_tries_ > cfg_.handshake_retries) return fail(Status::kPeerDead, now);
        start_hello_round(now);
        retry_round_sent_ = false;
        hello_deadline_ = now + cfg_.handshake_timeout * (int64_t{1} << std::min(hello_tries_, 5u));
        note_deadline(hello_deadline_);
    } else if (state_ == ConnState::kConnecting && hello_copy_deadline_ <= now) {
        // [CONN-30]: the round's next copy falls due.
        ++hellos_pending_;
        drop_prompted_ = false;  // [CONN-31]
        --hello_copies_due_;
        hello_copy_deadline_ = hello_copies_due_ > 0 ? hello_copy_deadline_ + hello_copy_gap() : kNever;
        note_deadline(hello_copy_deadline_);
    }
    if (state_ != ConnState::kEstablished) return;
    if (!proven_ && unproven_deadline_ <= now) {
        // [CONN-26]: nothing carrying our token came back, so the HELLO's sender may not
        // be at its address at all. One no stream uses ends; one the application bound
        // waits for its streams' own timers.
        unproven_deadline_ = kNever;
        if (streams_.empty()) return fail(Status::kPeerDead, now);
    }
    if (pace_deadline_ <= now) {
        // [CC-17]: DATA may go again, unless the rate fell since the timer was brought
        // forward: then the timer follows the pacer, or nothing would ever wake the data.
        const Time t = rate_.send_time(pacing_rate_bps(now), now);
        pace_deadline_ = t > now ? t : kNever;
        if (t > now) note_deadline(t);
    }
    for (TxPath& p : tx_paths_) {
        if (p.reorder_deadline <= now) detect_holes(p, now);
        if (p.pto_deadline <= now) path_timeout(p, now);
        if (p.probe_deadline <= now && p.state == PathState::kFailed) {
            // [PATH-4]: a failed path that did not answer its probe is re-rolled again.
            fail_path(p, now);
        }
    }
    for (uint16_t i = 0; i < rx_paths_.size(); ++i) {
        RxPath& rp = rx_paths_[i];
        if (rp.ack_deadline <= now) {
            rp.ack_deadline = kNever;
            queue_ack(i);
        }
    }
    if (!delivery_timers_.empty() && delivery_timers_.top().at <= now) stream_timer_expired(now);
    if (!rnr_timers_.empty() && rnr_timers_.top().at <= now) rnr_timer_expired(now);
    // [ERR-2]: no ACK on any path answered anything new for peer_dead_timeout while data is
    // outstanding (an ACK that repeats old state shows the peer alive but not progressing).
    if (state_ == ConnState::kEstablished && outstanding_data() && last_progress_ != kNever &&
        now - last_progress_ >= cfg_.peer_dead_timeout)
        return fail(Status::kPeerDead, now);
    // [ERR-2]: work that waits to be sent while every path is Failed is watched too: only a
    // peer that answers a re-probe ([PATH-4]) can take it, and one that never does (it
    // ended the connection, say) must not leave that work pending for ever.
    const bool stranded = state_ == ConnState::kEstablished && !outstanding_data() &&
                          std::all_of(tx_paths_.begin(), tx_paths_.end(),
                                      [](const TxPath& p) { return p.state == PathState::kFailed; }) &&
                          !nothing_unsent();
    if (!stranded) {
        stranded_since_ = kNever;
    } else if (stranded_since_ == kNever) {
        stranded_since_ = now;
        note_deadline(now + cfg_.peer_dead_timeout);
    } else if (now - stranded_since_ >= cfg_.peer_dead_timeout) {
        fail(Status::kPeerDead, now);
    }
}

void Connection::settle_deadline() {
    // [STREAM-5]: the delivery timers are a heap with lazy deletion: a message that
    // completed leaves its entry behind. Those at the top would set the deadline, so they
    // go now (stream_timer_expired skips the same ones when they fall due).
    while (!delivery_timers_.empty()) {
        const Timed& t = delivery_timers_.top();
        const TxMessage* m = live_tx(ep_.stream_mut(t.stream), t.msg_seq);
        if (m && m->delivery_deadline == t.at) break;
        delivery_timers_.pop();
    }
    cached_deadline_ = exact_deadline();
}

Time Connection::exact_deadline() const {
    Time d = kNever;
    if (state_ == ConnState::kConnecting) d = std::min(hello_deadline_, hello_copy_deadline_);
    if (state_ != ConnState::kEstablished) return d;
    d = std::min(d, pace_deadline_);
    if (!proven_) d = std::min(d, unproven_deadline_);
    for (const TxPath& p : tx_paths_) {
        if (p.pto_deadline < d) d = p.pto_deadline;
        if (p.reorder_deadline < d) d = p.reorder_deadline;
        if (p.probe_deadline < d) d = p.probe_deadline;
    }
    for (const RxPath& rp : rx_paths_)
        if (rp.ack_deadline < d) d = rp.ack_deadline;
    if (!delivery_timers_.empty()) d = std::min(d, delivery_timers_.top().at);
    if (!rnr_timers_.empty()) d = std::min(d, rnr_timers_.top().at);
    if (stranded_since_ != kNever) d = std::min(d, stranded_since_ + cfg_.peer_dead_timeout);
    if (last_progress_ != kNever && last_progress_ + cfg_.peer_dead_timeout < d &&
        outstanding_data())
        d = last_progress_ + cfg_.peer_dead_timeout;
    return d;
}

}  // namespace mroce::core
