// api/qp_state.cc — the queue pair state machine: ibv_modify_qp's RC transitions, their
// attribute checks, and what each transition asks of the engine (docs/design.md "QP
// lifecycle"; spec [STREAM-12], [STREAM-13]).
#include <algorithm>
#include <array>
#include <string>

#include "api/device_state.h"

namespace mroce::api {

std::string_view to_string(QpState s) {
    switch (s) {
        case QpState::kReset: return "RESET";
        case QpState::kInit: return "INIT";
        case QpState::kRtr: return "RTR";
        case QpState::kRts: return "RTS";
        case QpState::kError: return "ERR";
    }
    return "?";
}

QpModify qp_to_init(uint32_t access_flags) {
    QpModify m;
    m.attr.state = QpState::kInit;
    m.attr.access_flags = access_flags;
    m.mask = qp_attr::kState | qp_attr::kPkeyIndex | qp_attr::kPort | qp_attr::kAccessFlags;
    return m;
}

QpModify qp_to_rtr(const Address& peer, uint32_t dest_qp_num, const QpAttr& base) {
    QpModify m{base, 0};
    m.attr.state = QpState::kRtr;
    m.attr.peer = peer;
    m.attr.dest_qp_num = dest_qp_num;
    m.mask = qp_attr::kState | qp_attr::kPeer | qp_attr::kPathMtu | qp_attr::kDestQpNum |
             qp_attr::kRqPsn | qp_attr::kMaxDestRdAtomic | qp_attr::kMinRnrTimer;
    return m;
}

QpModify qp_to_rts(const QpAttr& base) {
    QpModify m{base, 0};
    m.attr.state = QpState::kRts;
    m.mask = qp_attr::kState | qp_attr::kSqPsn | qp_attr::kTimeout | qp_attr::kRetryCnt |
             qp_attr::kRnrRetry | qp_attr::kMaxRdAtomic;
    return m;
}

namespace detail {
namespace {

using namespace qp_attr;

// The RC rows of verbs' transition table (the kernel's qp_state_table): what each
// transition requires and what it may also take. Any state may go to RESET or ERR with no
// attribute; every other pair is illegal.
struct Transition {
    QpState from, to;
    uint32_t required, optional;
};
constexpr std::array<Transition, 5> kTransitions{{
    {QpState::kReset, QpState::kInit, kPkeyIndex | kPort | kAccessFlags, 0},
    {QpState::kInit, QpState::kInit, 0, kPkeyIndex | kPort | kAccessFlags},
    {QpState::kInit, QpState::kRtr, kPeer | kDestQpNum | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
     kPathMtu | kPkeyIndex | kAccessFlags},
    {QpState::kRtr, QpState::kRts, kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxRdAtomic,
     kAccessFlags | kMinRnrTimer},
    {QpState::kRts, QpState::kRts, 0, kAccessFlags | kMinRnrTimer},
}};

struct FieldName {
    uint32_t bit;
    const char* name;
};
constexpr std::array<FieldName, 15> kFields{{
    {kState, "state"}, {kAccessFlags, "access_flags"}, {kPkeyIndex, "pkey_index"},
    {kPort, "port"}, {kPeer, "peer"}, {kPathMtu, "path_mtu"}, {kTimeout, "timeout"},
    {kRetryCnt, "retry_cnt"}, {kRnrRetry, "rnr_retry"}, {kRqPsn, "rq_psn"},
    {kMaxRdAtomic, "max_rd_atomic"}, {kMinRnrTimer, "min_rnr_timer"}, {kSqPsn, "sq_psn"},
    {kMaxDestRdAtomic, "max_dest_rd_atomic"}, {kDestQpNum, "dest_qp_num"},
}};

std::string field_names(uint32_t bits) {
    std::string out;
    for (const FieldName& f : kFields) {
        if (!(bits & f.bit)) continue;
        if (!out.empty()) out += ", ";
        out += f.name;
    }
    uint32_t known = 0;
    for (const FieldName& f : kFields) known |= f.bit;
    if (bits & ~known) out += (out.empty() ? "" : ", ") + std::string("unknown mask bits");
    return out;
}

Error fail(std::string* why, const std::string& text) {
    if (why) *why = "modify_qp: " + text;
    return Error::kInvalidArgument;
}

// The IB encoding of min_rnr_timer (verbs' IBV_RNR_TIMER_*), in microseconds.
constexpr std::array<uint32_t, 32> kRnrTimerUs{
    655360, 10,    20,    30,    40,    60,    80,     120,    160,    240,    320,
    480,    640,   960,   1280,  1920,  2560,  3840,   5120,   7680,   10240,  15360,
    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};

// check_values: every field in `mask` is in range (device.h QpAttr).
Error check_values(const DeviceState& st, const QpAttr& a, uint32_t mask, std::string* why) {
    const auto& cfg = st.cfg.endpoint;
    constexpr uint32_t kAccessKnown =
        access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;
    if ((mask & kAccessFlags) && (a.access_flags & ~kAccessKnown))
        return fail(why, "access_flags has unknown bits");
    if ((mask & kPort) && a.port != 1) return fail(why, "port must be 1 (one port)");
    if ((mask & kPkeyIndex) && a.pkey_index != 0)
        return fail(why, "pkey_index must be 0 (one partition)");
    if ((mask & kPeer) && (a.peer.port == 0 || a.peer == Address{}))
        return fail(why, "peer must be a device address with a port");
    if ((mask & kPeer) && a.sl > 7) return fail(why, "sl must be 0..7");
    if ((mask & kPathMtu) && (a.path_mtu < 1 || a.path_mtu > 5))
        return fail(why, "path_mtu must be 1..5 (256..4096 bytes)");
    if ((mask & kDestQpNum) && a.dest_qp_num == 0) return fail(why, "dest_qp_num must not be 0");
    if ((mask & kRqPsn) && a.rq_psn >= (1u << 24)) return fail(why, "rq_psn must be below 2^24");
    if ((mask & kSqPsn) && a.sq_psn >= (1u << 24)) return fail(why, "sq_psn must be below 2^24");
    if ((mask & kMaxRdAtomic) && a.max_rd_atomic > cfg.max_rd_atomic)
        return fail(why, "max_rd_atomic above the device's " + std::to_string(cfg.max_rd_atomic));
    if ((mask & kMaxDestRdAtomic) && a.max_dest_rd_atomic > cfg.max_dest_rd_atomic)
        return fail(why, "max_dest_rd_atomic above the device's " +
                             std::to_string(cfg.max_dest_rd_atomic));
    if ((mask & kMinRnrTimer) && a.min_rnr_timer > 31) return fail(why, "min_rnr_timer must be 0..31");
    if ((mask & kTimeout) && a.timeout > 31) return fail(why, "timeout must be 0..31");
    if ((mask & kRetryCnt) && a.retry_cnt > 7) return fail(why, "retry_cnt must be 0..7");
    if ((mask & kRnrRetry) && a.rnr_retry > 7) return fail(why, "rnr_retry must be 0..7");
    return Error::kOk;
}

// merge copies the fields in `mask` from `a` into `into`.
void merge(QpAttr& into, const QpAttr& a, uint32_t mask) {
    if (mask & kAccessFlags) into.access_flags = a.access_flags;
    if (mask & kPkeyIndex) into.pkey_index = a.pkey_index;
    if (mask & kPort) into.port = a.port;
    if (mask & kPeer) {
        into.peer = a.peer;
        into.sl = a.sl;
    }
    if (mask & kPathMtu) into.path_mtu = a.path_mtu;
    if (mask & kDestQpNum) into.dest_qp_num = a.dest_qp_num;
    if (mask & kRqPsn) into.rq_psn = a.rq_psn;
    if (mask & kSqPsn) into.sq_psn = a.sq_psn;
    if (mask & kMaxRdAtomic) into.max_rd_atomic = a.max_rd_atomic;
    if (mask & kMaxDestRdAtomic) into.max_dest_rd_atomic = a.max_dest_rd_atomic;
    if (mask & kMinRnrTimer) into.min_rnr_timer = a.min_rnr_timer;
    if (mask & kTimeout) into.timeout = a.timeout;
    if (mask & kRetryCnt) into.retry_cnt = a.retry_cnt;
    if (mask & kRnrRetry) into.rnr_retry = a.rnr_retry;
}

// limits_for: the engine's per-stream settings ([STREAM-12]) that the attributes give.
core::StreamLimits limits_for(const core::StreamLimits& base, const QpAttr& a) {
    core::StreamLimits l = base;
    l.remote_access = a.access_flags & (access::kRemoteWrite | access::kRemoteRead |
                                        access::kRemoteAtomic);
    l.rnr_delay_us = kRnrTimerUs[a.min_rnr_timer % 32];
    l.traffic_class = a.sl;
    l.max_dest_rd_atomic = std::max<uint32_t>(a.max_dest_rd_atomic, 1);
    l.max_rd_atomic = std::max<uint32_t>(a.max_rd_atomic, 1);
    // retry_cnt 7 is verbs' maximum ("as patient as possible"): keep the endpoint's own
    // limit; lower values lower it for this stream ([STREAM-12]).
    l.retry_limit = a.retry_cnt >= 7 ? base.retry_limit : std::min<uint32_t>(a.retry_cnt, base.retry_limit);
    l.rnr_retry = a.rnr_retry;
    // verbs: 4.096 us * 2^timeout; 0 means "no floor" here (the engine's own timer).
    l.min_delivery_timeout =
        a.timeout == 0 ? Duration::zero() : std::chrono::nanoseconds(uint64_t{4096} << a.timeout);
    return l;
}

}  // namespace

QpState effective_state(const DeviceState& st, uint32_t number, const QpRecord& r) {
    const QpState s = r.attr.state;
    if (s != QpState::kRtr && s != QpState::kRts) return s;
    const core::Stream* stream = st.endpoint->stream(number);
    if (!stream || stream->failed || stream->rx_failed) return QpState::kError;
    const core::Connection* c = st.endpoint->connection(stream->conn);
    if (!c || c->state() == core::ConnState::kFailed || c->state() == core::ConnState::kClosed)
        return QpState::kError;
    return s;
}

void flush_posted(DeviceState& st, QpRecord& r, uint32_t number, uint64_t wr_id,
                  WorkOpcode opcode) {
    st.drain_events();
    Completion c;
    c.wr_id = wr_id;
    c.stream = number;
    c.status = Status::kFlushed;
    c.opcode = opcode;
    (opcode == WorkOpcode::kRecv ? r.recv_cq : r.send_cq)->push(c);
}

namespace {

// end_incarnation: ERR or RESET of a queue pair that keeps its number
// (DeviceConfig::keep_qp_number_on_reset). Its stream ends as at ERR, every outstanding
// work request and posted receive completing with kFlushed on its CQs, and the engine
// holds the number for the next incarnation ([STREAM-13]).
Error end_incarnation(DeviceState& st, QpRecord& r, uint32_t number, QpState to) {
    if (r.stream_live) {
        (void)st.endpoint->hold_stream(number, st.now());
        r.stream_live = false;
        r.held = true;
        st.drain_events();
    }
    if (to == QpState::kReset) {
        QpRecord next;
        next.pd = r.pd;
        next.srq = r.srq;
        next.send_cq = r.send_cq;
        next.recv_cq = r.recv_cq;
        next.stream_live = false;
        next.held = r.held;
        next.attr.max_rd_atomic = next.attr.max_dest_rd_atomic = 0;
        r = std::move(next);
    }
    r.attr.state = to;
    return Error::kOk;
}

// begin_incarnation: RESET -> INIT of a queue pair whose number is held makes its fresh
// stream under that number (QueuePair::modify waited out the quiet period: held_wait).
Error begin_incarnation(DeviceState& st, QpRecord& r, uint32_t number, std::string* why) {
    core::Endpoint& ep = *st.endpoint;
    auto fresh = ep.reserve_held_stream(r.pd, number, st.now());
    if (!fresh) {
        if (why) *why = "modify_qp: the queue pair's number is still in its quiet period";
        return fresh.error();
    }
    if (r.srq) {
        if (Error e = ep.use_srq(number, r.srq); e != Error::kOk) {
            (void)ep.hold_stream(number, st.now());
            if (why) *why = "modify_qp: cannot attach the fresh stream to its SRQ";
            return e;
        }
    }
    r.held = false;
    r.stream_live = true;
    return Error::kOk;
}

}  // namespace

Duration held_wait(DeviceState& st, uint32_t number, const QpAttr& attr, uint32_t mask) {
    auto it = st.qps.find(number);
    if (it == st.qps.end() || !it->second.held || it->second.attr.state != QpState::kReset ||
        !(mask & kState) || attr.state != QpState::kInit)
        return Duration::zero();
    const std::optional<Time> ready = st.endpoint->held_stream_ready(number);
    const Time now = st.now();
    return ready && *ready > now ? *ready - now : Duration::zero();
}

Error modify_qp(DeviceState& st, uint32_t& number, const QpAttr& attr, uint32_t mask,
                std::string* why) {
    auto it = st.qps.find(number);
    if (it == st.qps.end()) return Error::kNotFound;
    QpRecord& r = it->second;
    const QpState from = effective_state(st, number, r);
    const QpState to = (mask & kState) ? attr.state : from;
    const uint32_t fields = mask & ~kState;
    if (to != QpState::kReset && to != QpState::kInit && to != QpState::kRtr &&
        to != QpState::kRts && to != QpState::kError)
        return fail(why, "unknown target state");

    if (to == QpState::kReset || to == QpState::kError) {
        if (fields) return fail(why, std::string("a move to ") + std::string(to_string(to)) +
                                         " takes no attributes, got " + field_names(fields));
    } else {
        const Transition* t = nullptr;
        for (const Transition& x : kTransitions)
            if (x.from == from && x.to == to) t = &x;
        if (!t)
            return fail(why, "illegal transition " + std::string(to_string(from)) + " -> " +
                                 std::string(to_string(to)));
        if (const uint32_t missing = t->required & ~fields)
            return fail(why, std::string(to_string(from)) + " -> " + std::string(to_string(to)) +
                                 " needs " + field_names(missing));
        if (const uint32_t extra = fields & ~(t->required | t->optional))
            return fail(why, std::string(to_string(from)) + " -> " + std::string(to_string(to)) +
                                 " does not take " + field_names(extra));
        if (Error e = check_values(st, attr, fields, why); e != Error::kOk) return e;
    }

    core::Endpoint& ep = *st.endpoint;
    const Time now = st.now();
    if (st.cfg.keep_qp_number_on_reset) {
        if (to == QpState::kReset && from == QpState::kReset) return Error::kOk;
        if (to == QpState::kReset || to == QpState::kError) return end_incarnation(st, r, number, to);
        if (from == QpState::kReset && r.held) {
            if (Error e = begin_incarnation(st, r, number, why); e != Error::kOk) return e;
        }
    }
    if (to == QpState::kReset) {
        if (from == QpState::kReset) return Error::kOk;
        // [STREAM-13]: a fresh stream (a new number) for the next incarnation; the old one
        // is destroyed, its work discarded unreported, and its id never used again.
        auto fresh = ep.reserve_stream(r.pd);
        if (!fresh) {
            if (why) *why = "modify_qp: no stream left for the reset queue pair";
            return fresh.error();
        }
        if (r.srq) {
            if (Error e = ep.use_srq(*fresh, r.srq); e != Error::kOk) {
                (void)ep.destroy_stream(*fresh, now);
                if (why) *why = "modify_qp: cannot attach the fresh stream to its SRQ";
                return e;
            }
        }
        QpRecord next;
        next.pd = r.pd;
        next.srq = r.srq;
        next.send_cq = r.send_cq;
        next.recv_cq = r.recv_cq;
        next.attr.max_rd_atomic = next.attr.max_dest_rd_atomic = 0;
        const bool live = r.stream_live;
        const uint32_t old = number;
        st.qps.erase(it);
        if (live) (void)ep.destroy_stream(old, now);
        st.drain_events();  // the old stream's flushes find no queue pair: dropped
        number = *fresh;
        st.qps.emplace(number, std::move(next));
        return Error::kOk;
    }
    if (to == QpState::kError) {
        // Everything outstanding completes with kFlushed now, receives included; later
        // posts are flushed by the API (QueuePair::post_*).
        if (r.stream_live) {
            (void)ep.destroy_stream(number, now);
            r.stream_live = false;
            st.drain_events();
        }
        r.attr.state = QpState::kError;
        return Error::kOk;
    }

    QpAttr next = r.attr;
    merge(next, attr, fields);
    next.state = to;
    if (from == QpState::kInit && to == QpState::kRtr) {
        if (Error e = ep.bind_stream(number, next.peer, next.dest_qp_num, now); e != Error::kOk) {
            if (why)
                *why = e == Error::kInvalidArgument
                           ? "modify_qp: dest_qp_num " + std::to_string(next.dest_qp_num) +
                                 " is already bound on the connection to " + next.peer.to_string()
                           : "modify_qp: cannot bind to the peer";
            return e;
        }
        if (const uint32_t conn = ep.connection_to(next.peer)) st.connections.insert(conn);
        r.early_recvs.clear();  // a sharded device's copies (QueuePair::post_recv): in place
    }
    // RESET -> INIT sets no timers yet, so the RTS defaults of QpAttr apply until RTS.
    QpAttr for_limits = next;
    if (to != QpState::kRts) {
        const QpAttr defaults;
        for_limits.retry_cnt = defaults.retry_cnt;
        for_limits.rnr_retry = defaults.rnr_retry;
        for_limits.timeout = defaults.timeout;
        for_limits.max_rd_atomic = defaults.max_rd_atomic;
    }
    if (Error e = ep.set_stream_limits(number, limits_for(ep.default_stream_limits(), for_limits));
        e != Error::kOk)
        return e;
    r.attr = next;
    return Error::kOk;
}

}  // namespace detail
}  // namespace mroce::api
