// RoceEngine: construction, the work API, datagram demultiplexing, the ready list,
// timers and events. The requester is in engine_tx.cc, the responder in engine_rx.cc.
#include "baselines/rocev2/engine.h"

#include <algorithm>

namespace mroce::rocev2 {

RoceEngine::RoceEngine(const RoceConfig& cfg, const Address& local, uint64_t seed)
    : cfg_(cfg), local_(local), memory_(CryptoRng(crypto_seed_from(seed)), 16) {
    MROCE_DCHECK(config_error(cfg).empty());
}

RoceEngine::~RoceEngine() = default;

uint16_t RoceEngine::src_port_for(uint32_t local_qpn, uint32_t remote_qpn) {
    // A fixed mix of both QP numbers: distinct QPs of one host pair land on distinct,
    // uniformly spread ECMP routes, and a QP keeps its route for its whole life.
    uint64_t x = (uint64_t{local_qpn} << 24 | remote_qpn) * 0x9E3779B97F4A7C15ULL;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 32;
    return static_cast<uint16_t>(0xC000 | (x & 0x3FFF));
}

QueuePair* RoceEngine::qp_mut(uint32_t qpn) {
    if (qpn < kFirstQpn || qpn - kFirstQpn >= qps_.size()) return nullptr;
    return qps_[qpn - kFirstQpn].get();
}

const QueuePair* RoceEngine::qp(uint32_t qpn) const {
    return const_cast<RoceEngine*>(this)->qp_mut(qpn);
}

QpStats RoceEngine::totals() const {
    QpStats t;
    for (const auto& q : qps_) {
        const QpStats& s = q->stats;
        t.data_packets_sent += s.data_packets_sent;
        t.data_bytes_sent += s.data_bytes_sent;
        t.retransmitted_packets += s.retransmitted_packets;
        t.go_back_nak += s.go_back_nak;
        t.timeouts += s.timeouts;
        t.rnr_naks_received += s.rnr_naks_received;
        t.acks_received += s.acks_received;
        t.naks_received += s.naks_received;
        t.cnps_received += s.cnps_received;
        t.stale_acks += s.stale_acks;
        t.data_packets_received += s.data_packets_received;
        t.duplicates += s.duplicates;
        t.out_of_sequence += s.out_of_sequence;
        t.naks_sent += s.naks_sent;
        t.rnr_naks_sent += s.rnr_naks_sent;
        t.fatal_naks_sent += s.fatal_naks_sent;
        t.acks_sent += s.acks_sent;
        t.ecn_marked += s.ecn_marked;
        t.cnps_sent += s.cnps_sent;
        t.malformed += s.malformed;
        t.bytes_placed += s.bytes_placed;
    }
    return t;
}

Result<uint32_t> RoceEngine::reserve_stream(uint32_t pd) {
    if (!memory_.pd_exists(pd)) return Error::kInvalidArgument;
    if (qps_.size() >= cfg_.max_qps) return Error::kExhausted;
    auto q = std::make_unique<QueuePair>(cfg_.dcqcn);
    q->qpn = kFirstQpn + static_cast<uint32_t>(qps_.size());
    q->pd = pd;
    q->traffic_class = cfg_.traffic_class;
    const uint64_t start = kPsnBase + cfg_.initial_psn;
    q->next_psn = q->una = q->sent_high = q->end_psn = start;
    q->epsn = start;
    qps_.push_back(std::move(q));
    return qps_.back()->qpn;
}

Error RoceEngine::bind_stream(uint32_t stream, const Address& peer, uint32_t remote_stream,
                              Time now) {
    QueuePair* q = qp_mut(stream);
    if (!q) return Error::kNotFound;
    if (q->bound) return Error::kWrongState;
    if (remote_stream == 0 || remote_stream > kPsnMask) return Error::kInvalidArgument;
    q->bound = true;
    q->peer = peer;
    q->remote_qpn = remote_stream;
    q->src_port = src_port_for(q->qpn, remote_stream);
    const uint32_t port_key = cfg_.port_choice == PortChoice::kRoundRobin ? q->qpn - kFirstQpn : q->src_port;
    q->local_port = static_cast<uint16_t>(port_key % cfg_.num_local_ports);
    last_now_ = now;
    touched(*q);
    return Error::kOk;
}

Error RoceEngine::set_traffic_class(uint32_t stream, uint8_t traffic_class) {
    QueuePair* q = qp_mut(stream);
    if (!q) return Error::kNotFound;
    if (traffic_class > kMaxTrafficClass) return Error::kInvalidArgument;
    q->traffic_class = traffic_class;
    return Error::kOk;
}

Result<uint32_t> RoceEngine::create_stream(uint32_t pd, const Address& peer,
                                           uint32_t remote_stream, Time now) {
    if (remote_stream == 0 || remote_stream > kPsnMask) return Error::kInvalidArgument;
    Result<uint32_t> id = reserve_stream(pd);
    if (!id) return id;
    const Error e = bind_stream(*id, peer, remote_stream, now);
    if (e != Error::kOk) return e;
    return id;
}

Error RoceEngine::post_send(uint32_t stream, const core::SendWr& wr, Time now) {
    QueuePair* q = qp_mut(stream);
    if (!q) return Error::kNotFound;
    if (!q->bound || q->failed) return Error::kWrongState;
    if (wr.opcode != core::WorkOpcode::kSend && wr.opcode != core::WorkOpcode::kSendImm &&
        wr.opcode != core::WorkOpcode::kWrite && wr.opcode != core::WorkOpcode::kWriteImm)
        return Error::kInvalidArgument;
    if (q->sq.size() >= cfg_.max_outstanding_wrs) return Error::kExhausted;
    const std::byte* src = nullptr;
    if (wr.length > 0) {
        Result<std::byte*> r = memory_.check_local(wr.lkey, q->pd, wr.local_addr, wr.length, false);
        if (!r) return r.error();
        src = *r;
    }
    TxWr t;
    t.wr = wr;
    t.src = src;
    t.first_psn = q->end_psn;
    t.packets = wr.length == 0 ? 1 : (wr.length + cfg_.mtu - 1) / cfg_.mtu;
    q->end_psn += t.packets;
    q->sq.push_back(t);
    last_now_ = now;
    touched(*q);
    return Error::kOk;
}

Error RoceEngine::post_recv(uint32_t stream, const core::RecvWr& wr, Time now) {
    QueuePair* q = qp_mut(stream);
    if (!q) return Error::kNotFound;
    if (q->failed) return Error::kWrongState;
    if (q->rq.size() >= cfg_.max_outstanding_wrs) return Error::kExhausted;
    std::byte* dst = nullptr;
    if (wr.length > 0) {
        Result<std::byte*> r = memory_.check_local(wr.lkey, q->pd, wr.addr, wr.length, true);
        if (!r) return r.error();
        dst = *r;
    }
    q->rq.push_back(RxPost{wr, dst});
    last_now_ = now;
    touched(*q);
    return Error::kOk;
}

void RoceEngine::on_datagram(std::span<const std::byte> datagram, const PacketMeta& meta,
                             Time now) {
    last_now_ = now;
    ++stats_.datagrams_received;
    Result<Decoded> d = decode(datagram);
    if (!d) {
        switch (d.error()) {
            case Error::kTruncated: ++stats_.truncated; break;
            case Error::kBadType: ++stats_.bad_type; break;
            case Error::kBadVersion: ++stats_.bad_version; break;
            default: ++stats_.bad_length; break;
        }
        return;
    }
    const Bth& bth = d->h.bth;
    QueuePair* q = qp_mut(bth.dest_qp);
    if (!q || !q->bound) {
        ++stats_.unknown_qp;
        return;
    }
    // The source port differs per QP (ECMP entropy); the peer is named by its IP.
    if (!meta.src.same_host(q->peer)) {
        ++stats_.wrong_peer;
        return;
    }
    if (bth.pkey != cfg_.pkey) {
        ++stats_.bad_pkey;
        return;
    }
    if (bth.opcode == Opcode::kCnp) {
        ++q->stats.cnps_received;
        q->dcqcn.on_cnp(now);
    } else if (bth.opcode == Opcode::kAck) {
        on_ack(*q, d->h.aeth, bth.psn, now);
    } else {
        on_data(*q, *d, meta.ecn, now);
    }
    touched(*q);
}

void RoceEngine::on_timeout(Time now) {
    last_now_ = now;
    flush_deadlines();
    while (!timers_.empty() && timers_.top().at <= now) {
        const TimerEntry e = timers_.top();
        timers_.pop();
        QueuePair& q = *qp_mut(e.qpn);
        if (e.at != q.armed_deadline) continue;  // stale
        q.armed_deadline = kNever;  // touched() below computes and arms the exact one
        if (q.ack_deadline <= now) {
            q.ack_deadline = kNever;
            if (q.unacked > 0) respond(q, Response::kAck, q.epsn - 1);
        }
        if (q.rto_deadline <= now) on_requester_timeout(q, now);
        if (q.rnr_until <= now) q.rnr_until = kNever;
        if (q.dcqcn.next_deadline() <= now) q.dcqcn.on_timeout(now);
        touched(q);
    }
}

size_t RoceEngine::poll_transmit(std::span<std::byte> buf, PacketMeta& meta, Time now) {
    last_now_ = now;
    // Round-robin over the QPs with work; each gets at most one datagram per turn. A QP
    // held back by pacing stays in the list (its pacing time is a deadline).
    for (size_t turns = ready_.size(); turns > 0; --turns) {
        const uint32_t qpn = ready_.front();
        ready_.pop_front();
        QueuePair& q = *qp_mut(qpn);
        q.in_ready = false;
        size_t n = 0;
        if (q.cnp_pending) {
            n = write_cnp(q, buf);
        } else if (q.response != Response::kNone) {
            n = write_response(q, buf);
        } else if (port_ready(ready_ports_, q.local_port) && data_ready(q, now)) {
            n = write_data(q, buf, now);
        }
        touched(q);
        if (n == 0) continue;
        meta = PacketMeta{};
        meta.src = local_.with_port(q.src_port);
        meta.dst = q.peer;
        meta.ecn = ecn::kEct0;
        meta.local_port = q.local_port;
        meta.traffic_class = q.traffic_class;  // data, ACK/NAK and CNP alike (config.h)
        ++stats_.datagrams_sent;
        return n;
    }
    return 0;
}

bool RoceEngine::data_pending(const QueuePair& q) const {
    return !q.failed && q.bound && q.rnr_until == kNever && q.next_psn < q.end_psn &&
           q.next_psn < q.una + cfg_.window_packets;
}

bool RoceEngine::has_work(const QueuePair& q) const {
    // Data that only pacing holds back counts as work: the QP stays in the ready list.
    return q.cnp_pending || q.response != Response::kNone || data_pending(q);
}

void RoceEngine::touched(QueuePair& q) {
    if (!q.deadline_dirty) {
        q.deadline_dirty = true;
        dirty_.push_back(q.qpn);
    }
    if (!q.in_ready && has_work(q)) {
        q.in_ready = true;
        ready_.push_back(q.qpn);
    }
}

Time RoceEngine::qp_deadline(const QueuePair& q) const {
    Time t = std::min({q.ack_deadline, q.rto_deadline, q.rnr_until, q.dcqcn.next_deadline()});
    if (q.dcqcn.limited() && data_pending(q)) {
        const int64_t now_ps = to_ns(last_now_) * 1000;
        if (q.next_send_ps > now_ps) t = std::min(t, time_from_ns((q.next_send_ps + 999) / 1000));
    }
    return t;
}

void RoceEngine::flush_deadlines() const {
    for (const uint32_t qpn : dirty_) {
        QueuePair& q = *qps_[qpn - kFirstQpn];
        q.deadline_dirty = false;
        const Time t = qp_deadline(q);
        if (t < q.armed_deadline) {
            q.armed_deadline = t;
            timers_.push(TimerEntry{t, qpn});
        }
    }
    dirty_.clear();
}

Time RoceEngine::next_deadline() const {
    flush_deadlines();
    while (!timers_.empty() &&
           timers_.top().at != qps_[timers_.top().qpn - kFirstQpn]->armed_deadline)
        timers_.pop();
    return timers_.empty() ? kNever : timers_.top().at;
}

std::optional<core::Event> RoceEngine::poll_event() {
    if (events_.empty()) return std::nullopt;
    core::Event e = events_.front();
    events_.pop_front();
    return e;
}

size_t RoceEngine::max_datagram_size() const {
    return kMaxHeaderSize + cfg_.mtu + 3 + kIcrcSize;
}

void RoceEngine::complete(QueuePair& q, const core::Completion& c) {
    core::Event e;
    e.kind = core::EventKind::kCompletion;
    e.connection = q.qpn;
    e.peer = q.peer;
    e.completion = c;
    e.completion.stream = q.qpn;
    events_.push_back(e);
}

void RoceEngine::fail_qp(QueuePair& q, core::Status first_status) {
    if (q.failed) return;
    q.failed = true;
    // IB: the WR that failed completes with its error, every later one is flushed; error
    // completions are reported even for unsignaled WRs.
    bool first = true;
    for (const TxWr& t : q.sq) {
        core::Completion c;
        c.wr_id = t.wr.wr_id;
        c.status = first ? first_status : core::Status::kFlushed;
        c.opcode = t.wr.opcode;
        complete(q, c);
        first = false;
    }
    q.sq.clear();
    q.cursor = 0;
    q.next_psn = q.una = q.sent_high = q.end_psn;
    for (const RxPost& r : q.rq) {
        core::Completion c;
        c.wr_id = r.wr.wr_id;
        c.status = core::Status::kFlushed;
        c.opcode = core::WorkOpcode::kRecv;
        complete(q, c);
    }
    q.rq.clear();
    q.rto_deadline = q.rnr_until = q.ack_deadline = kNever;
    core::Event e;
    e.kind = core::EventKind::kConnectionFailed;
    e.connection = q.qpn;
    e.status = first_status;
    e.peer = q.peer;
    events_.push_back(e);
}

}  // namespace mroce::rocev2
