// core/connection_ack.cc — the sending half's feedback: ACK processing, loss detection,
// retransmission, path health and completions (spec §5, §7, §8, §10).
#include <algorithm>

#include "core/connection.h"
#include "core/endpoint.h"
#include "core/sack_walk.h"
#include "util/seq.h"

namespace mroce::core {

namespace {
uint32_t ts32(Time now) { return static_cast<uint32_t>(to_ns(now)); }
}  // namespace

Duration Connection::pto(const TxPath& path) const {
    return probe_timeout(path.rtt, path.backoff, cfg_, !path.newest_asks_ack);  // [LOSS-4]
}

uint32_t Connection::probe_loss_score(const TxPath& p) const {
    return std::max({p.loss_score, tx_loss_score_, return_routes_.rx_loss_score(), ep_.loss_score()});
}

Duration Connection::reorder_window(const TxPath& path) const {
    return core::reorder_window(path.rtt, cfg_);  // [LOSS-2]
}

Duration Connection::delivery_timeout() const {
    // The probe goes on a usable path, so a failed or backed-off path must not stretch it.
    Duration worst = cfg_.min_pto;
    for (const TxPath& p : tx_paths_) {
        if (p.state != PathState::kActive || !p.rtt.has_rtt) continue;
        worst = std::max(worst, p.rtt.srtt + 4 * p.rtt.rttvar + cfg_.max_ack_delay);
    }
    return std::min(worst, cfg_.max_pto);
}

Duration Connection::delivery_timeout(const Stream& s) const {
    // [STREAM-12]: a queue pair's timeout is a floor on its own delivery timer only.
    return std::max(delivery_timeout(), s.limits.min_delivery_timeout);
}

void Connection::arm_pto(TxPath& path, Time now) {
    path.overtaken = false;
    path.pto_deadline = (path.in_flight_pkts > 0 || path.state == PathState::kSuspect)
                            ? now + pto(path)
                            : kNever;
    note_deadline(path.pto_deadline);
}

void Connection::note_overdue(TxPath& path) {
    // [PATH-11]: the oldest DATA still in flight (records below it are answered or lost).
    path.overdue_since = kNever;
    for (uint32_t psn = path.base; psn != path.next_psn; ++psn) {
        const TxRecord& r = path.rec(psn);
        if (r.state == TxRecord::State::kInFlight) {
            set_overdue(path, r.sent);
            return;
        }
    }
}

void Connection::probe_left(TxPath& p, Time now) {
    // A PROBE waits for its connection's turn among the endpoint's ready ones ([CONN-22])
    // and behind its own ACKs: under load, tens of microseconds. Timed from the request,
    // the step would be overtaken ([PATH-11]) by DATA of other paths that left before the
    // PROBE did, and its PTO would run out while the PROBE had barely left, so a path
    // whose PROBEs merely queued would fail. A step asks how long the PROBE has been out.
    if (p.state == PathState::kFailed) {
        if (p.probe_deadline != kNever) {
            p.probe_deadline = std::max(p.probe_deadline, now + pto(p));
            note_deadline(p.probe_deadline);
        }
        return;
    }
    // Only a path in a timeout step has its overdue_since at the step (an idle path probed
    // beside a stalled one, [LOSS-13], has none, and a reply only helps it).
    if (!in_timed_step(p)) return;
    p.overdue_since = now;  // later than before: overdue_floor_ stays a lower bound
    if (p.pto_deadline != kNever) {
        p.pto_deadline = std::max(p.pto_deadline, now + pto(p));
        note_deadline(p.pto_deadline);
    }
}

void Connection::check_overtaken(const TxPath& acked, Time sent, Time now) {
    // [PATH-11]: `acked` has just proved that a packet sent at `sent` arrived. Paths are
    // FIFO routes of similar delay, so a path still waiting for an answer to a packet sent
    // well before that has most likely lost it (a dead route): its PTO is due now. This
    // compares paths with each other, so it ignores what delays all of them alike (queues
    // shared by every path, a peer that was descheduled), which inflates the PTO itself.
    if (sent <= newest_answered_sent_) return;
    newest_answered_sent_ = sent;
    if (!cfg_.detect_overtaken) return;
    // A path is overtaken only if its overdue_since lies more than its margin, which is at
    // least min_pto, before `sent`. overdue_floor_ is at most every path's, so when it is
    // not that old no path can be, and the scan (once per ACK) is skipped.
    if (overdue_floor_ == kNever || sent - overdue_floor_ <= cfg_.min_pto) return;
    Time floor = kNever;
    for (TxPath& p : tx_paths_) {
        floor = std::min(floor, p.overdue_since);
        if (&p == &acked || p.state == PathState::kFailed || p.overtaken || p.probe_pending ||
            p.pto_deadline == kNever || p.pto_deadline <= now || !is_overtaken(p))
            continue;
        p.overtaken = true;
        p.pto_deadline = now;
        note_deadline(now);
    }
    overdue_floor_ = floor;  // exact again
}

void Connection::on_ack(const wire::AckPacket& a, Time now) {
    if (state_ != ConnState::kEstablished) {
        ++stats_.wrong_state;
        return;
    }
    if (a.path_id >= num_paths()) {
        ++stats_.malformed;
        return;
    }
    TxPath& path = tx_paths_[a.path_id];
    PathStats& ps = path_stats_[a.path_id];
    ++ps.acks_received;
    return_routes_.ack_arrived(a.return_path);  // [PATH-12]: echoed in a later DATA
    // [ERR-2] [LOSS-13]: whether this ACK answered anything new (see last_progress_).
    bool answered = false;

    // [PATH-7]: an ACK of an older generation says nothing about the current route.
    if (a.path_gen == path.gen) {
        uint64_t bytes_acked = 0;
        AckedMsg cache;
        const uint32_t before = path.in_flight_pkts;
        const SackWalk walk = walk_acks(path.base, path.next_psn, a.cum_psn, a.sack,
                                        [&](uint32_t psn, bool by_sack) {
                                            // a record in flight or declared lost: news
                                            const TxRecord::State st = path.rec(psn).state;
                                            answered |= st == TxRecord::State::kInFlight ||
                                                        st == TxRecord::State::kLost;
                                            ack_record(path, psn, by_sack, now, bytes_acked, cache);
                                        });
        const uint32_t highest = walk.highest;
        const bool any = walk.any;
        uint32_t passed = path.base;  // [PROBE-3] PSNs below this were passed by a probe
        // [PROBE-3]: a probe reply proves every PSN before probe_psn was passed.
        // Unlike a SACKed PSN, probe_psn - 1 itself may be a hole: a lone packet lost at
        // the tail is found by the probe's reply, not by a second timeout.
        if ((a.flags & wire::ack_flag::kProbeReply) && seq_gt(a.probe_psn, path.base) &&
            seq_le(a.probe_psn, path.next_psn))
            passed = a.probe_psn;
        if (any && (!path.any_acked || seq_gt(highest, path.highest_acked))) {
            path.highest_acked = highest;
            path.any_acked = true;
        }
        // [PATH-4]: a Failed path that was re-rolled again without a new generation (it
        // carried only PROBEs) must not take a late reply to a PROBE of its previous route
        // for proof that the new one works: the echoed timestamp tells them apart.
        const bool stale_reply = path.state == PathState::kFailed && (a.flags & wire::ack_flag::kProbeReply) &&
                                 static_cast<int32_t>(a.ts_echo - path.rerolled_ts) < 0;
        if (stale_reply) ++stats_.stale_probe_replies;
        // ts_echo is our own clock's low 32 bits when the echoed packet left.
        const Duration age{static_cast<uint32_t>(ts32(now) - a.ts_echo)};
        // [ERR-2] [LOSS-13]: a probe reply answers something new only if it echoes a packet
        // sent after all this path had answered before. Later copies of one reply
        // ([PROBE-2]) and late replies still count as progress here, as they always have;
        // but an old reply repeated by a buggy or hostile peer must not keep the peer
        // "progressing", so it restarts neither clock.
        const bool probe_reply = a.flags & wire::ack_flag::kProbeReply;
        const Time echoed = now - age;
        answered |= !stale_reply && probe_reply && echoed > path.answered_sent;
        // RTT sample from the echoed timestamp, less the receiver's ACK delay.
        const bool progress = !stale_reply && (path.in_flight_pkts < before || probe_reply);
        if (progress) {
            path.answered_sent = std::max(path.answered_sent, echoed);
            const int64_t sample = static_cast<int64_t>(static_cast<uint32_t>(ts32(now) - a.ts_echo)) -
                                   static_cast<int64_t>(a.ack_delay_ns);
            if (sample > 0 && sample < 10'000'000'000LL) {
                const Duration r{sample};
                if (ep_.trace_) ep_.trace_->on_rtt_sample(id_, path.id, r, now);
                path.rtt.on_sample(r);  // [LOSS-4]
            }
            path.backoff = 0;
            if (path.state == PathState::kFailed) {
                // [PATH-4]: the re-rolled path answered: back in service.
                ++ps.recoveries;
                emit_state(EventKind::kPathRecovered, now, Status::kSuccess, path.id);
            }
            path.state = PathState::kActive;
            path.probe_deadline = kNever;
        }
        // [CC-4] ECN echo: the count is cumulative per path generation. ACKs travel on
        // random return paths and overtake each other, so only a count that moves forward
        // in serial order is taken: a late ACK's older count must not rewind the stored
        // one, or the next ACK would count the same marks again.
        // With a trace sink, the window and the hint before the controller sees this ACK,
        // to report a cut or a new hint (core/trace.h).
        TraceSink* const tracer = ep_.trace_;
        const uint64_t window_before = tracer ? cc_->window_bytes(path.id) : 0;
        const uint32_t hint_before = tracer ? rate_.last_hint_mbps() : 0;
        const uint32_t ce = a.ecn_ce_count - path.last_ce;
        if (ce > 0 && ce < kCeWindow) {
            ps.ecn_echoed += ce;
            if (ce) ce_echoed_ = true;  // [PATH-13] item 5: the prior is off from now on
            cc_->on_ecn(path.id, ce, now);
            path.last_ce = a.ecn_ce_count;
        }
        if (bytes_acked) {
            cc_->on_ack(path.id, static_cast<uint32_t>(bytes_acked), path.rtt.srtt, now);
            rate_.on_acked(path.rtt.srtt, now);  // [CC-15]: the first RTT is over
        }
        rate_.on_hint(a.rate_hint_mbps, path.rtt.srtt, now);  // [CC-16]
        if (tracer) {
            const uint64_t window = cc_->window_bytes(path.id);
            if (window < window_before)
                trace(TraceKind::kWindowCut, now, path.id, window_before, window);
            if (rate_.last_hint_mbps() != hint_before)
                trace(TraceKind::kRateHintChanged, now, path.id, hint_before,
                      rate_.last_hint_mbps());
        }
        // [CC-17]: a raised rate re-times the held packet earlier than the timer armed at
        // the old rate; the timer follows (a later time is left to the old timer, whose run
        // re-checks the gate). A pacer still behind its virtual time keeps a timer even
        // when none runs: a rise re-timed the gate open and its timer ran and stopped, and a
        // fall now shuts it again; a WRITE posted before the gate reopens finds it shut, and
        // nothing else would wake it.
        if (pace_deadline_ != kNever || !rate_.ahead(now)) arm_pacer(now);
        // Acknowledged records at the bottom go first, so the hole scan below starts at
        // the first unresolved PSN (in the loss-free steady state it scans nothing).
        advance_base(path);
        // [LOSS-1]: in-flight PSNs below the highest acknowledged one are holes; they are
        // lost once the reorder window has passed.
        uint32_t limit = path.any_acked ? path.highest_acked : path.base;
        if (seq_gt(passed, limit)) limit = passed;
        if (limit != path.base && path.reorder_deadline == kNever) {
            uint32_t holes = 0;
            for (uint32_t psn = path.base; psn != path.next_psn && seq_lt(psn, limit); ++psn)
                holes += path.rec(psn).state == TxRecord::State::kInFlight;
            if (holes) {
                ps.sack_holes += holes;
                path.reorder_limit = limit;
                path.reorder_deadline = now + reorder_window(path);
                note_deadline(path.reorder_deadline);
            }
        }
        arm_pto(path, now);
        if (progress) {
            note_overdue(path);
            // [LOSS-9]: the timeout runs from the send time of the oldest DATA still in
            // flight, not from this ACK: the tail of a path is judged one PTO after it left.
            // Only for ACKs that acknowledged data: after a probe reply the path's oldest
            // packet is a hole the reorder window already judges ([LOSS-10]).
            if (path.backoff == 0 && path.in_flight_pkts > 0 && path.in_flight_pkts < before &&
                !(a.flags & wire::ack_flag::kProbeReply) && path.reorder_deadline == kNever &&
                path.overdue_since != kNever) {
                path.pto_deadline = std::max(now, path.overdue_since + pto(path));
                note_deadline(path.pto_deadline);
            }
            check_overtaken(path, now - age, now);
        }
    }
    for (uint16_t i = 0; i < a.stream_count; ++i) {
        Stream* s = stream_by_remote(a.streams[i].stream_id);
        if (s) answered |= stream_delivered(*s, a.streams[i].delivered_seq, now);
    }
    if (answered) last_progress_ = now;
}

void Connection::ack_record(TxPath& path, uint32_t psn, bool by_sack, Time now,
                            uint64_t& bytes_acked, AckedMsg& cache) {
    TxRecord& r = path.rec(psn);
    if (r.state == TxRecord::State::kInFlight) {
        --path.in_flight_pkts;
        --in_flight_total_;
        path.in_flight_bytes -= r.bytes;
        in_flight_bytes_ -= r.bytes;
        bytes_acked += r.bytes;
        path_health::score_delivery(path.loss_score);  // losses are forgotten as packets get through
        path_health::score_delivery(tx_loss_score_);
        path_health::weight_delivery(path.prior_weight);  // [PATH-13] item 5
        path_health::weight_delivery(tx_prior_weight_);
        ep_.note_delivery();
    } else if (r.state == TxRecord::State::kLost) {
        // [LOSS-3]: a SACK bit proves a packet declared lost arrived after all (a spurious
        // retransmission). The cumulative PSN proves nothing about it: the receiver may
        // have moved past it on our psn_floor without ever seeing it.
        r.state = TxRecord::State::kAcked;
        if (!by_sack) return;
        ++path_stats_[path.id].spurious_retransmits;
    } else {
        return;
    }
    r.state = TxRecord::State::kAcked;
    segment_acked(r.stream, r.answer, r.msg_seq, r.seg, now, cache);
}

void Connection::advance_base(TxPath& path) {
    while (path.base != path.next_psn && path.rec(path.base).state == TxRecord::State::kAcked) {
        path.rec(path.base).state = TxRecord::State::kFree;
        ++path.base;
    }
}

void Connection::segment_acked(uint32_t stream, bool answer, uint32_t msg_seq, uint32_t seg,
                               Time now, AckedMsg& cache) {
    if (!cache.valid || cache.stream != stream || cache.msg_seq != msg_seq ||
        cache.answer != answer) {
        Stream* st = ep_.stream_mut(stream);
        TxMessage* found = !st     ? nullptr
                           : answer ? find_answer(*st, msg_seq)
                                    : find_tx(*st, msg_seq);
        cache = AckedMsg{true, answer, stream, msg_seq, st, found};
    }
    Stream* s = cache.s;
    TxMessage* m = cache.m;
    if (!m || m->done || seg >= m->nseg || m->seg_acked(seg)) return;
    m->set_acked(seg);
    if (seg == m->send_floor) raise_send_floor(*s, *m);
    if (answer) {
        // [PLACE-30]: an answer is done when the requester has every segment; that may
        // free it (and its credit), so the cache must not keep pointing at it.
        if (++m->path_acked == m->nseg) {
            cache.valid = false;
            answer_acked(*s, *m);
        }
        return;
    }
    if (++m->path_acked == m->nseg) {
        // [STREAM-5]: every segment reached the peer; completion waits for the stream's
        // delivery report. If it does not come, the message is probed again.
        // (A request awaiting its answer waits longer each round, [PLACE-19].)
        m->delivery_deadline = now + delivery_timeout(*s) * (int64_t{1} << m->answer_wait);
        delivery_timers_.push(Timed{m->delivery_deadline, s->id, m->msg_seq});
        note_deadline(m->delivery_deadline);
    }
}

void Connection::declare_lost(TxPath& path, uint32_t psn, LossReason why, Time now) {
    TxRecord& r = path.rec(psn);
    if (r.state != TxRecord::State::kInFlight) return;
    r.state = TxRecord::State::kLost;
    --path.in_flight_pkts;
    --in_flight_total_;
    path.in_flight_bytes -= r.bytes;
    in_flight_bytes_ -= r.bytes;
    path_health::score_loss(path.loss_score);
    path_health::score_loss(tx_loss_score_);
    ep_.note_loss();
    PathStats& ps = path_stats_[path.id];
    switch (why) {
        case LossReason::kSack: ++ps.lost_by_sack; ++stats_.retransmits_sack; break;
        case LossReason::kTimeout: ++ps.lost_by_timeout; ++stats_.retransmits_timeout; break;
        case LossReason::kPathFailure:
            ++ps.lost_by_timeout;
            ++stats_.retransmits_path_failure;
            break;
    }
    // [CC-2]: loss is reported to congestion control, which may ignore random loss.
    cc_->on_loss(path.id, r.bytes, now);
    requeue(r.stream, r.answer, r.msg_seq, r.seg, why == LossReason::kSack ? 1 : kUnansweredRetryWeight, now);
}

void Connection::declare_all_lost(TxPath& path, LossReason why, Time now) {
    for (uint32_t psn = path.base; psn != path.next_psn; ++psn) declare_lost(path, psn, why, now);
    if (state_ == ConnState::kEstablished) advance_base(path);
}

void Connection::requeue(uint32_t stream, bool answer, uint32_t msg_seq, uint32_t seg,
                         uint32_t retry_weight, Time now) {
    if (state_ != ConnState::kEstablished) return;
    Stream* s = ep_.stream_mut(stream);
    TxMessage* m = live_msg(s, answer, msg_seq);
    if (!m || m->seg_acked(seg)) return;
    // [LOSS-7]: a segment already queued to go again is not retried again. The copies of
    // one retransmission ([LOSS-16], [LOSS-17]) are lost together, and counted one by one
    // they spent a drained sender's retry_limit in a few rounds (scripts/sim_fuzz.py
    // cases 255 and 278: incasts whose 3 or 4 copies went into the queue that dropped them).
    if (!m->try_queue(seg)) return;
    // [LOSS-7]: a loss a SACK found weighs 1/16 of one a timeout or a path failure found:
    // the peer that acknowledged the packets around it is alive, and a queue that
    // overflows may drop one segment's retransmissions round trip after round trip.
    // Counted alike, a congested but live peer spent retry_limit (scripts/sim_fuzz.py,
    // case 8674: a 5 -> 1 incast at 10 Gbit/s, 1 % loss, pacing off, failed at 16.5 ms).
    uint16_t& count = m->segs.retries(seg);
    count = static_cast<uint16_t>(count + retry_weight);
    if (count > cfg_.retry_limit * kUnansweredRetryWeight) {
        // [LOSS-7]: retry exhaustion fails the connection with a typed error.
        return fail(Status::kRetryExceeded, now);
    }
    retx_.push_back(SegRef{stream, msg_seq, seg, answer});
}

void Connection::detect_holes(TxPath& path, Time now) {
    path.reorder_deadline = kNever;
    for (uint32_t psn = path.base; psn != path.next_psn && seq_lt(psn, path.reorder_limit); ++psn)
        declare_lost(path, psn, LossReason::kSack, now);
    if (state_ != ConnState::kEstablished) return;
    advance_base(path);
    // Holes revealed after the window was armed get a window of their own.
    for (uint32_t psn = path.base; psn != path.next_psn && seq_lt(psn, path.highest_acked); ++psn) {
        if (path.rec(psn).state == TxRecord::State::kInFlight) {
            path.reorder_limit = path.highest_acked;
            path.reorder_deadline = now + reorder_window(path);
            note_deadline(path.reorder_deadline);
            break;
        }
    }
}

void Connection::path_timeout(TxPath& path, Time now) {
    path.pto_deadline = kNever;
    if (path.state == PathState::kFailed) return;
    if (path.in_flight_pkts == 0 && path.state == PathState::kActive) return;
    if (path.probe_pending && path.backoff > 0) {
        // [LOSS-5]: the last step's PROBE is still waiting to leave (a busy endpoint,
        // [CONN-22]); nothing has been asked of the route yet. probe_left times the step.
        path.pto_deadline = now + pto(path);
        note_deadline(path.pto_deadline);
        return;
    }
    ++path_stats_[path.id].timeouts;
    if (path.overtaken) ++path_stats_[path.id].overtaken;
    path.overtaken = false;
    // [LOSS-13]: no path has answered anything sent since this path's oldest unanswered
    // packet, and some ACK answered something new less than stall_tolerance ago: nothing
    // singles this route out. Every route going quiet at once is what a descheduled peer
    // looks like, so probe again, holding the ladder at its first step; the replies show
    // holes. A descheduled peer sends nothing at all, so its last ACK is also its last
    // answer; an ACK that only repeats old state (a buggy or hostile peer replaying one)
    // must not count, or it would hold every path here for ever, probing at every PTO with
    // nothing ever declared lost or failed. Answers about packets older than the stall are
    // finite (each acknowledges a record or echoes a newer send time), so the hold ends
    // stall_tolerance after the last of them and the ladder takes over. An idle healthy
    // path sends nothing that could answer for the peer, so one of them is probed too: if
    // the peer is alive its reply proves this route is the silent one, and the next timeout
    // escalates (without it, a dead route beside idle ones would probe forever).
    if (path.backoff >= 1 && newest_answered_sent_ < path.overdue_since && last_progress_ != kNever &&
        now - last_progress_ < cfg_.stall_tolerance) {
        ++path_stats_[path.id].stalled_timeouts;
        path.backoff = 1;
        request_probe(path);
        for (TxPath& other : tx_paths_) {
            if (&other != &path && other.state == PathState::kActive && other.in_flight_pkts == 0) {
                request_probe(other);
                break;
            }
        }
        set_overdue(path, now);
        path.pto_deadline = now + pto(path);
        note_deadline(path.pto_deadline);
        return;
    }
    ++path.backoff;
    if (path.backoff >= cfg_.path_fail_timeouts) return fail_path(path, now);
    if (path.backoff >= 2) {
        // [LOSS-5]: second timeout: everything in flight is lost and goes to other paths;
        // this path carries no new data until it answers.
        declare_all_lost(path, LossReason::kTimeout, now);
        if (state_ != ConnState::kEstablished) return;
        path.state = PathState::kSuspect;
    } else if (cfg_.tail_copies && retx_.empty() && ready_streams_.empty() && nothing_unsent()) {
        resend_tail(path, now);
    }
    // [LOSS-5]: first timeout: a tail-loss probe on this path.
    request_probe(path);
    set_overdue(path, now);  // [PATH-11]: the next step waits for this PROBE to be overtaken
    path.pto_deadline = now + pto(path);
    note_deadline(path.pto_deadline);
}

// [LOSS-16]: the sender has nothing else to send, so this path's packets are the tail of
// what it sent and nothing later will reveal their loss. Waiting for the PROBE's reply to
// show the holes costs a round trip and the reorder window: the tail is copied at once to
// the best path ([LOSS-6]) while the originals stay in flight (nothing is declared lost,
// so the PROBE still asks about them and a loss found later finds the segment repaired).
// A drained sender has the bandwidth for the copies.
void Connection::resend_tail(TxPath& path, Time now) {
    for (uint32_t psn = path.base; psn != path.next_psn; ++psn) {
        const TxRecord& r = path.rec(psn);
        if (r.state != TxRecord::State::kInFlight) continue;
        // A message the receiver refused for now (RNR, an unknown stream) waits out its
        // NACK's delay and is sent again whole by its readiness probe ([PLACE-6],
        // [STREAM-8]): a copy now would be the early resend the NACK forbids.
        const TxMessage* m = live_msg(ep_.stream_mut(r.stream), r.answer, r.msg_seq);
        if (m && m->rnr_wait) continue;
        const size_t queued = retx_.size();
        requeue(r.stream, r.answer, r.msg_seq, r.seg, 0, now);
        stats_.retransmits_tail += retx_.size() - queued;
    }
}

// [PATH-12]: the peer echoes the return paths its ACKs arrived on. An echo shows the peer
// is sending and echoing now; a path of ours whose recent rounds it has not echoed, well
// past the usual echo delay, is losing its ACKs. Only a path with nothing in flight is
// judged here: one that carries DATA has its own timeouts ([LOSS-5]). A wrong judgement
// costs one re-roll and a PROBE; a right one stops a share of every round's ACKs dying.
void Connection::on_return_echo(uint16_t echoed, Time now) {
    return_routes_.echo_arrived(echoed, now);
    if (cfg_.return_fail_rounds == 0) return;
    const uint16_t r = return_routes_.next_to_examine();
    const uint32_t rounds = return_routes_.unechoed_rounds(r);
    if (rounds < cfg_.return_fail_rounds) return;
    // Random loss leaves rounds unechoed too (the ACK or the DATA with its echo lost): the
    // run must also be too long for a live route at the loss measured on the peer's DATA.
    if (!path_health::unechoed_is_dead(rounds, return_routes_.rx_loss_score())) return;
    const Duration limit = return_routes_.echo_timeout(cfg_.min_pto, 2 * cfg_.initial_rtt);
    if (now - return_routes_.unechoed_since(r) <= limit) return;
    fail_return_path(r, now);
}

// [PATH-12]: a peer that gets no ACK sends no DATA, so no echo can tell a receiver that
// every one of its return routes died; the peer's PROBEs still arrive. A PROBE repeated
// unchanged after a reply that acknowledged all it asked about means both copies of that
// reply were lost: their return paths are failed (the next reply takes others).
void Connection::reply_lost(RxPath& rp, Time now) {
    if (cfg_.return_fail_rounds == 0) return;
    for (const uint16_t p : rp.reply_paths)
        if (p != RxPath::kNoPath) fail_return_path(p, now);
}

void Connection::fail_return_path(uint16_t p, Time now) {
    TxPath& path = tx_paths_[p];
    if (path.state != PathState::kActive || path.in_flight_pkts != 0) return;
    return_routes_.forget(p);
    ++stats_.return_route_failures;
    fail_path(path, now);
}

void Connection::fail_path(TxPath& path, Time now) {
    PathStats& ps = path_stats_[path.id];
    if (path.state != PathState::kFailed) {
        // [PATH-3]: declared failed; everything outstanding moves to other paths at once.
        ++ps.failures;
        ++stats_.path_failures;
        emit_state(EventKind::kPathFailed, now, Status::kSuccess, path.id);
    } else {
        ++path.backoff;
    }
    declare_all_lost(path, LossReason::kPathFailure, now);
    if (state_ != ConnState::kEstablished) return;
    // [PATH-4]: re-roll: a new source port (a new ECMP route) and a new generation whose
    // PSNs restart at the isn, so nothing in flight on the old route can look lost.
    const uint16_t old_port = path.src_port;
    new_source_port(path);
    // A path re-rolled again before any DATA went out in its generation keeps the
    // generation: nothing of it can be in flight, and the 8-bit generation must not wrap
    // while a route stays dead for a long time ([PATH-4]).
    if (path.state != PathState::kFailed || carried_data(path)) ++path.gen;
    std::fill(path.ring.begin(), path.ring.end(), TxRecord{});
    path.next_psn = path.base = isn_;
    MROCE_DCHECK(path.in_flight_pkts == 0);  // declare_all_lost took every one
    path.in_flight_bytes = 0;
    path.any_acked = false;
    path.last_ce = 0;
    path.reorder_deadline = kNever;
    path.pto_deadline = kNever;
    path.overdue_since = kNever;
    path.state = PathState::kFailed;
    path.rerolled_ts = ts32(now);
    ++ps.rerolls;
    ++stats_.path_rerolls;
    if (ep_.trace_) trace(TraceKind::kPathRerolled, now, path.id, old_port, path.src_port);
    request_probe(path);
    path.probe_deadline = now + pto(path);
    note_deadline(path.probe_deadline);
}

bool Connection::stream_delivered(Stream& s, uint32_t delivered_seq, Time now) {
    if (!s.seq_ready || seq_gt(delivered_seq, s.next_msg_seq)) return false;  // never trust: unsent
    // [STREAM-5]: the receiver answered a delivery probe and still lacks exactly the
    // message we think it has whole: it dropped some of its segments (no receive was
    // posted, say), so the whole message goes again.
    if (TxMessage* f = find_tx(s, delivered_seq)) {
        if (!f->done && !f->rnr_wait &&
            ((f->stream_probes > 0 && f->path_acked == f->nseg) || f->rnr_probing)) {
            f->stream_probes = 0;
            f->rnr_probing = false;
            ++stats_.retransmits_timeout;
            resend_message(s, *f, true, now);
        }
    }
    const bool news = seq_gt(delivered_seq, s.acked_seq);
    if (news) {
        s.acked_seq = delivered_seq;
        s.stalled_probes = 0;
    }
    pop_completed(s, now);
    return news;
}

// pop_completed completes, in post order ([PLACE-7]), the front messages the peer reports
// delivered and, for READs and atomics, whose answer is in place ([PLACE-19]).
void Connection::pop_completed(Stream& s, Time now) {
    bool popped = false;
    while (!s.tx.empty() && s.tx.front().started() && seq_lt(s.tx.front().msg_seq, s.acked_seq) &&
           s.tx.front().next_new_seg == s.tx.front().nseg) {
        TxMessage& m = s.tx.front();
        if (!m.done && is_request(m.opcode) && !m.resp_done) {
            // Delivered, the answer still on its way: the delivery timer keeps probing so
            // a peer that dies now is noticed ([ERR-2]); see stream_timer_expired.
            if (m.delivery_deadline == kNever) {
                m.delivery_deadline = now + delivery_timeout(s) * (int64_t{1} << m.answer_wait);
                delivery_timers_.push(Timed{m.delivery_deadline, s.id, m.msg_seq});
                note_deadline(m.delivery_deadline);
            }
            break;
        }
        if (!m.done) {
            m.done = true;
            m.status = Status::kSuccess;
        }
        complete_front(s);
        popped = true;
    }
    if (popped) stream_has_work(s);  // the stream window or the READ limit may have opened
}

void Connection::complete_front(Stream& s) {
    TxMessage& m = s.tx.front();
    if (m.wr.signaled || m.status != Status::kSuccess) {
        Event e;
        e.kind = EventKind::kCompletion;
        e.connection = id_;
        e.completion.wr_id = m.wr.wr_id;
        e.completion.stream = s.id;
        e.completion.status = m.status;
        e.completion.opcode = m.wr.opcode;
        e.completion.byte_len = m.wr.length;
        ep_.emit(e);
    }
    if (m.status == Status::kSuccess) ++stats_.messages_sent;
    if (is_request(m.opcode) && m.started()) --s.rd_outstanding;
    s.tx.pop_front();
    if (s.send_cursor > 0) --s.send_cursor;
}

void Connection::fail_stream(Stream& s, Status why) {
    // [ERR-1]: the oldest outstanding work request carries the cause, the rest flush.
    s.failed = true;
    bool first = true;
    while (!s.tx.empty()) {
        TxMessage& m = s.tx.front();
        m.done = true;
        m.status = first ? why : Status::kFlushed;
        if (m.status == Status::kSuccess) m.status = Status::kFlushed;
        first = false;
        complete_front(s);
    }
    s.send_cursor = 0;
    // [PLACE-30]: answers owed to the peer are dropped with the stream (segments still in
    // flight or queued find no live message and are let go). [PLACE-27]: the requester
    // re-sends a request whose answer is dropped here; the re-sent DATA is a stale
    // duplicate for which no answer is held, so it gets the NACK of [PLACE-28].
    s.answers.clear();
    s.answer_cursor = 0;
    // [ERR-3]: the whole stream is in error: its posted receives flush too, and from here
    // on whatever arrives for it is refused, including messages partly placed already
    // (their receive buffers are back with the application).
    for (const PostedRecv& pr : s.posted) ep_.emit(flushed_receive(id_, s.id, pr.wr.wr_id));
    s.posted_front_seq += static_cast<uint32_t>(s.posted.size());
    s.posted.clear();
    for (const Stream::SrqClaim& c : s.srq_claimed)  // [PLACE-24] taken, never delivered
        ep_.emit(flushed_receive(id_, s.id, c.pr.wr.wr_id));
    s.srq_claimed.clear();
    if (!s.rx_failed) s.rx_fail_reason = static_cast<uint8_t>(wire::NackReason::kInvalidRequest);
    s.rx_failed = true;
    s.rx_fail_seq = s.delivered_seq;
    for (RxMessage& slot : s.ring) slot.active = false;
}

// resend_segments queues segments [first, last] of m (clamped to what was sent) again;
// they no longer count as acknowledged at path level. Segments already queued stay queued
// once ([LOSS-12]), so the retransmit queue is bounded by the segments outstanding.
void Connection::resend_segments(Stream& s, TxMessage& m, uint32_t first, uint32_t last,
                                 Time now) {
    const uint32_t sent = m.next_new_seg;
    if (sent == 0) return;
    last = std::min(last, sent - 1);
    if (!outstanding_data()) {
        last_progress_ = now;  // [ERR-2] the dead-peer clock starts
        note_deadline(now + cfg_.peer_dead_timeout);
    }
    for (uint32_t seg = first; seg <= last; ++seg) {
        if (m.seg_acked(seg)) {
            m.segs.clear_acked(seg);
            --m.path_acked;
            m.send_floor = std::min(m.send_floor, seg);  // [PLACE-31]
        }
        if (m.try_queue(seg)) retx_.push_back(SegRef{s.id, m.msg_seq, seg, is_response(m.opcode)});
    }
    m.delivery_deadline = kNever;
}

// raise_send_floor moves m's [PLACE-31] floor over the segments acknowledged at path
// level, and lets what waited for it go: deferred retransmissions, now inside the window,
// and the stream, if m's next new segment was outside it.
void Connection::raise_send_floor(Stream& s, TxMessage& m) {
    const uint32_t old = m.send_floor;
    while (m.send_floor < m.nseg && m.seg_acked(m.send_floor)) ++m.send_floor;
    const uint64_t was_end = uint64_t{old} + kSegmentWindow;
    const uint64_t end = std::min<uint64_t>(uint64_t{m.send_floor} + kSegmentWindow, m.nseg);
    if (!m.deferred.empty()) {
        for (uint64_t seg = was_end; seg < end; ++seg) {
            uint64_t& w = m.deferred[seg / 64];
            const uint64_t bit = uint64_t{1} << (seg % 64);
            if (!(w & bit)) continue;
            w &= ~bit;  // still marked queued: it goes back in the queue as it was
            retx_.push_back(SegRef{s.id, m.msg_seq, static_cast<uint32_t>(seg), is_response(m.opcode)});
        }
    }
    if (m.next_new_seg >= was_end && m.next_new_seg < end) stream_has_work(s);  // it waited
}

// defer_segment: m's segment seg, queued for retransmission, lies beyond the [PLACE-31]
// window; raise_send_floor queues it again.
void Connection::defer_segment(TxMessage& m, uint32_t seg) {
    if (m.deferred.empty()) m.deferred.assign((m.nseg + 63) / 64, 0);
    m.deferred[seg / 64] |= uint64_t{1} << (seg % 64);
}

void Connection::resend_message(Stream& s, TxMessage& m, bool whole, Time now) {
    if (m.next_new_seg == 0) return;
    resend_segments(s, m, whole ? 0 : m.next_new_seg - 1, m.next_new_seg - 1, now);
}

void Connection::stream_timer_expired(Time now) {
    while (!delivery_timers_.empty() && delivery_timers_.top().at <= now) {
        const Timed t = delivery_timers_.top();
        delivery_timers_.pop();
        Stream* s = ep_.stream_mut(t.stream);
        TxMessage* m = live_tx(s, t.msg_seq);
        if (!m || m->delivery_deadline != t.at) continue;
        if (is_request(m->opcode) && !m->resp_done && seq_lt(m->msg_seq, s->acked_seq)) {
            // [PLACE-19]: delivered, awaiting the answer the responder retransmits on its
            // own. Re-send the request (a duplicate the responder drops, [STREAM-4]) so
            // that something is in flight: a live peer acknowledges it, a dead one is
            // found by the dead-peer timer. Not a delivery probe: no retry is counted. The
            // waits double (a long READ answer takes a while), so a slow answer costs a
            // few duplicate requests, not one per timeout.
            ++stats_.retransmits_read_request;
            resend_message(*s, *m, false, now);
            m->answer_wait = std::min<uint32_t>(m->answer_wait + 1, 10);
            continue;
        }
        if (m->rnr_wait) {
            // A resend is already scheduled after a NACK: no probe, no probe count.
            m->delivery_deadline = kNever;
            continue;
        }
        if (seq_lt(m->msg_seq, s->acked_seq)) {
            m->delivery_deadline = kNever;  // delivered; completion waits for earlier ones
            continue;
        }
        // Delivery is reported in stream order: only the first message not yet reported
        // delivered is probed; a later one waits for it.
        if (seq_gt(m->msg_seq, s->acked_seq)) {
            m->delivery_deadline = now + delivery_timeout(*s);
            delivery_timers_.push(Timed{m->delivery_deadline, s->id, m->msg_seq});
            note_deadline(m->delivery_deadline);
            continue;
        }
        // [STREAM-5]: re-send the last segment as a probe: the receiver answers with its
        // delivery state (see stream_delivered for what happens if it is still missing).
        // The limit counts probes without any delivery progress on the stream: a message
        // queued behind slow ones (a responder deferring requests, say) is not a dead peer.
        ++m->stream_probes;
        if (++s->stalled_probes > s->limits.retry_limit) {
            // Past the endpoint's own limit the peer is taken for dead; a stream's lower
            // limit (a queue pair's retry_cnt, [STREAM-12]) ends that stream alone.
            if (s->stalled_probes > cfg_.retry_limit) return fail(Status::kRetryExceeded, now);
            fail_stream(*s, Status::kRetryExceeded);
            continue;
        }
        ++stats_.retransmits_timeout;
        resend_message(*s, *m, false, now);
    }
}

void Connection::on_nack(const wire::NackPacket& n, Time now) {
    if (state_ != ConnState::kEstablished) {
        ++stats_.wrong_state;
        return;
    }
    ++stats_.nacks_received;
    Stream* s = stream_by_remote(n.stream_id);
    TxMessage* m = live_tx(s, n.msg_seq);
    if (!m) return;
    // [PLACE-28]: a request whose whole answer is in place was executed; a NACK about it is
    // late (or forged) and changes nothing.
    if (is_request(m->opcode) && m->resp_done) return;
    switch (n.reason) {
        case wire::NackReason::kRemoteAccess: return fail_stream(*s, Status::kRemoteAccess);
        case wire::NackReason::kInvalidRequest: {
            if (n.detail != wire::kNackDetailUnknownStream)
                return fail_stream(*s, Status::kRemoteInvalid);
            // [STREAM-8]: the peer's stream may not be bound yet: back off and resend.
            if (m->rnr_wait) return;
            if (++m->unknown_stream_retries > cfg_.retry_limit)
                return fail_stream(*s, Status::kRemoteInvalid);
            m->rnr_wait = true;
            m->rnr_probing = false;
            const uint32_t shift = std::min<uint32_t>(m->unknown_stream_retries - 1, 20);
            const Duration wait = std::min<Duration>(
                std::chrono::microseconds(uint64_t{cfg_.rnr_delay_us} << shift), 1s);
            rnr_timers_.push(Timed{now + wait, s->id, m->msg_seq});
            note_deadline(now + wait);
            return;
        }
        case wire::NackReason::kReceiverNotReady:
        case wire::NackReason::kOutOfWindow:
        case wire::NackReason::kNoResources: {
            // [PLACE-6]: wait, then send the whole message again; rnr_retry 7 = forever.
            if (m->rnr_wait) return;
            if (n.reason == wire::NackReason::kReceiverNotReady && s->limits.rnr_retry != 7 &&
                ++m->rnr_retries > s->limits.rnr_retry)
                return fail_stream(*s, Status::kRnrRetryExceeded);
            m->rnr_wait = true;
            m->rnr_probing = false;
            // The segments not yet sent would be refused too: they wait for the readiness
            // probe, which sends the whole message ([PLACE-6]); later messages go on.
            if (m->next_new_seg < m->nseg) {
                if (s->send_cursor < s->tx.size() && &s->tx[s->send_cursor] == m) ++s->send_cursor;
                m->next_new_seg = m->nseg;
                stream_has_work(*s);
            }
            const Duration wait = std::chrono::microseconds(
                std::clamp<uint32_t>(n.detail, cfg_.rnr_delay_us, 1'000'000));
            rnr_timers_.push(Timed{now + wait, s->id, m->msg_seq});
            note_deadline(now + wait);
            return;
        }
    }
}

void Connection::rnr_timer_expired(Time now) {
    while (!rnr_timers_.empty() && rnr_timers_.top().at <= now) {
        const Timed t = rnr_timers_.top();
        rnr_timers_.pop();
        Stream* s = ep_.stream_mut(t.stream);
        TxMessage* m = live_tx(s, t.msg_seq);
        if (!m) continue;
        m->rnr_wait = false;
        m->stream_probes = 0;  // the NACK answered the probes: the peer is alive
        ++stats_.retransmits_rnr;
        // [PLACE-6]: one segment probes readiness; the responder answers a retransmission
        // with its delivery state ([STREAM-9]) and, if still not ready, another NACK. A
        // report without a NACK sends the rest (stream_delivered). Re-sending everything
        // each time would let one unready stream fill the link and the queue.
        m->rnr_probing = true;
        resend_segments(*s, *m, 0, 0, now);
        // [STREAM-5]: and the delivery timer runs, in case the report never comes (the
        // probe's ACK, or the report, lost): its probe asks for the report again. Without
        // it, a message whose other segments' retransmissions the wait dropped had no timer
        // left once the probe was acknowledged, and waited for ever.
        m->delivery_deadline = now + delivery_timeout(*s);
        delivery_timers_.push(Timed{m->delivery_deadline, s->id, m->msg_seq});
        note_deadline(m->delivery_deadline);
    }
}

}  // namespace mroce::core
