// verbs/qp.cc — RC queue pairs, shared receive queues and the post verbs.
//
// A queue pair is an api::QueuePair; ibv_modify_qp's mask bits are the API's own
// (api::qp_attr), so the attributes pass through after two translations: the peer's GID
// becomes its UDP address, and the bits that do not apply to an RC queue pair on this
// device are checked and dropped.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

#include "verbs/verbs_internal.h"

using namespace mroce;
using namespace mroce::verbs;

namespace {

static_assert(sizeof(ibv_sge) == sizeof(api::Sge) && offsetof(ibv_sge, addr) == offsetof(api::Sge, addr) &&
                  offsetof(ibv_sge, length) == offsetof(api::Sge, length) &&
                  offsetof(ibv_sge, lkey) == offsetof(api::Sge, lkey),
              "a verbs scatter/gather list is handed to the engine as it is");
const api::Sge* sges(const ibv_sge* s) { return reinterpret_cast<const api::Sge*>(s); }

// Mask bits ibv_modify_qp may carry that the API does not take: checked here, then dropped.
constexpr int kCurState = IBV_QP_CUR_STATE;
constexpr int kDropped = IBV_QP_EN_SQD_ASYNC_NOTIFY | IBV_QP_CAP | IBV_QP_PATH_MIG_STATE;
constexpr int kRefused = IBV_QP_QKEY | IBV_QP_ALT_PATH | IBV_QP_RATE_LIMIT;

bool state_of(ibv_qp_state s, api::QpState& out) {
    switch (s) {
        case IBV_QPS_RESET: out = api::QpState::kReset; return true;
        case IBV_QPS_INIT: out = api::QpState::kInit; return true;
        case IBV_QPS_RTR: out = api::QpState::kRtr; return true;
        case IBV_QPS_RTS: out = api::QpState::kRts; return true;
        case IBV_QPS_ERR: out = api::QpState::kError; return true;
        default: return false;  // SQD, SQE: not modelled
    }
}

bool opcode_of(ibv_wr_opcode op, api::WorkOpcode& out) {
    switch (op) {
        case IBV_WR_RDMA_WRITE: out = api::WorkOpcode::kWrite; return true;
        case IBV_WR_RDMA_WRITE_WITH_IMM: out = api::WorkOpcode::kWriteImm; return true;
        case IBV_WR_SEND: out = api::WorkOpcode::kSend; return true;
        case IBV_WR_SEND_WITH_IMM: out = api::WorkOpcode::kSendImm; return true;
        case IBV_WR_RDMA_READ: out = api::WorkOpcode::kRead; return true;
        case IBV_WR_ATOMIC_CMP_AND_SWP: out = api::WorkOpcode::kAtomicCompareSwap; return true;
        case IBV_WR_ATOMIC_FETCH_AND_ADD: out = api::WorkOpcode::kAtomicFetchAdd; return true;
        default: return false;  // memory windows, invalidation, TSO, driver opcodes
    }
}

// to_send_wr translates one work request; EINVAL/EOPNOTSUPP for what the engine lacks.
int to_send_wr(const Qp& qp, const ibv_send_wr& w, api::SendWr& out) {
    out = api::SendWr{};
    if (!opcode_of(w.opcode, out.opcode)) return EOPNOTSUPP;
    if (w.num_sge < 0 || static_cast<uint32_t>(w.num_sge) > api::kMaxSge) return EINVAL;
    if (w.send_flags & ~static_cast<unsigned>(IBV_SEND_FENCE | IBV_SEND_SIGNALED |
                                              IBV_SEND_SOLICITED | IBV_SEND_INLINE))
        return EINVAL;
    out.wr_id = w.wr_id;
    out.signaled = qp.sq_sig_all || (w.send_flags & IBV_SEND_SIGNALED);
    out.fence = w.send_flags & IBV_SEND_FENCE;
    out.inline_data = w.send_flags & IBV_SEND_INLINE;
    out.imm = w.imm_data;  // verbatim (see to_wc in verbs/cq.cc)
    if (w.num_sge > 0 && !w.sg_list) return EINVAL;
    out.sg_list = sges(w.sg_list);
    out.num_sge = static_cast<uint32_t>(w.num_sge);
    switch (out.opcode) {
        case api::WorkOpcode::kWrite:
        case api::WorkOpcode::kWriteImm:
        case api::WorkOpcode::kRead:
            out.remote_addr = w.wr.rdma.remote_addr;
            out.rkey = w.wr.rdma.rkey;
            break;
        case api::WorkOpcode::kAtomicFetchAdd:
        case api::WorkOpcode::kAtomicCompareSwap:
            out.remote_addr = w.wr.atomic.remote_addr;
            out.rkey = w.wr.atomic.rkey;
            out.compare_add = w.wr.atomic.compare_add;
            out.swap = w.wr.atomic.swap;
            break;
        default: break;
    }
    if (out.num_sge == 0) {
        // A zero-length message: one empty piece, so the engine needs no key.
        out.length = 0;
        out.sg_list = nullptr;
    }
    return 0;
}

int to_recv_wr(const ibv_recv_wr& w, api::RecvWr& out) {
    out = api::RecvWr{};
    if (w.num_sge < 0 || static_cast<uint32_t>(w.num_sge) > api::kMaxSge) return EINVAL;
    if (w.num_sge > 0 && !w.sg_list) return EINVAL;
    out.wr_id = w.wr_id;
    out.sg_list = w.num_sge > 0 ? sges(w.sg_list) : nullptr;
    out.num_sge = static_cast<uint32_t>(w.num_sge);
    return 0;
}

// The engine's limits as verbs capabilities.
ibv_qp_cap device_cap(const api::QpAttr::Cap& c) {
    ibv_qp_cap cap{};
    cap.max_send_wr = std::min<uint32_t>(c.max_send_wr, 1u << 15);
    cap.max_recv_wr = std::min<uint32_t>(c.max_recv_wr, 1u << 15);
    cap.max_send_sge = c.max_send_sge;
    cap.max_recv_sge = c.max_recv_sge;
    cap.max_inline_data = c.max_inline_data;
    return cap;
}

// log_connection prints the counters of the queue pair's connection (MROCE_LOG=3): what
// an operator asks first when a program runs slower than it should.
void log_connection(const Qp& qp) {
    Address peer;
    if (!qp.ah_valid || !address_of_gid(qp.ah.grh.dgid, peer)) return;
    auto r = qp.dev->connection_report(peer);
    if (!r) return;
    const auto& c = r->connection;
    log(3, "qp %u -> %s: messages %llu sent %llu received; retransmits %llu (sack %llu, timeout "
           "%llu, rnr %llu, read requests %llu); rnr nacks sent %llu; nacks %llu sent %llu "
           "received; paced waits %llu", qp.ibv().qp_num, peer.to_string().c_str(),
        (unsigned long long)c.messages_sent, (unsigned long long)c.messages_received,
        (unsigned long long)c.retransmits, (unsigned long long)c.retransmits_sack,
        (unsigned long long)c.retransmits_timeout, (unsigned long long)c.retransmits_rnr,
        (unsigned long long)c.retransmits_read_request, (unsigned long long)c.rnr_nacks_sent,
        (unsigned long long)c.nacks_sent, (unsigned long long)c.nacks_received,
        (unsigned long long)c.paced_waits);
}

}  // namespace

namespace mroce::verbs {

// post_list posts a verbs list of work requests one by one and stops at the first that
// is refused, pointing *bad_wr at it: what went before stays posted.
template <class Wr, class PostOne>
int post_list(Wr* wr, Wr** bad_wr, PostOne post_one) {
    for (Wr* w = wr; w; w = w->next) {
        if (const int err = post_one(*w); err != 0) {
            if (bad_wr) *bad_wr = w;
            return err;
        }
    }
    return 0;
}

int post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
    Qp* qp = outer<Qp>(ibqp);
    return post_list(wr, bad_wr, [qp](const ibv_send_wr& w) {
        api::SendWr s;
        const int err = to_send_wr(*qp, w, s);
        return err ? err : errno_of(qp->qp->post_send(s));
    });
}

int post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    Qp* qp = outer<Qp>(ibqp);
    return post_list(wr, bad_wr, [qp, ibqp](const ibv_recv_wr& w) {
        api::RecvWr r;
        const int err = ibqp->srq ? EINVAL : to_recv_wr(w, r);  // its SRQ takes receives
        return err ? err : errno_of(qp->qp->post_recv(r));
    });
}

int post_srq_recv(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    Srq* srq = outer<Srq>(ibsrq);
    return post_list(wr, bad_wr, [srq](const ibv_recv_wr& w) {
        api::RecvWr r;
        const int err = to_recv_wr(w, r);
        return err ? err : errno_of(srq->srq->post_recv(r));
    });
}

}  // namespace mroce::verbs

extern "C" {

ibv_qp* ibv_create_qp(ibv_pd* ibpd, ibv_qp_init_attr* init) { return create_qp(ibpd, init, 0); }

}  // extern "C"

namespace mroce::verbs {

ibv_qp* create_qp(ibv_pd* ibpd, ibv_qp_init_attr* init, uint64_t send_ops) {
    if (!ibpd || !init || !init->send_cq || !init->recv_cq) {
        errno = EINVAL;
        return nullptr;
    }
    if (init->qp_type != IBV_QPT_RC) {
        log(1, "ibv_create_qp: only RC queue pairs are supported (asked for %s)",
            init->qp_type == IBV_QPT_UD   ? "UD"
            : init->qp_type == IBV_QPT_UC ? "UC"
                                          : "another type");
        errno = EOPNOTSUPP;
        return nullptr;
    }
    Pd* pd = outer<Pd>(ibpd);
    // Checked before the queue pair exists: a refused one should not use up a number.
    const auto& ecfg = pd->dev->config().endpoint;
    const ibv_qp_cap have = device_cap({ecfg.max_outstanding_wrs, ecfg.max_outstanding_wrs,
                                        api::kMaxSge, api::kMaxSge, ecfg.max_inline_data});
    const ibv_qp_cap& want = init->cap;
    if (want.max_send_wr > have.max_send_wr || want.max_recv_wr > have.max_recv_wr ||
        want.max_send_sge > have.max_send_sge || want.max_recv_sge > have.max_recv_sge ||
        want.max_inline_data > have.max_inline_data) {
        log(2, "ibv_create_qp: capabilities beyond the device's (send_wr %u/%u recv_wr %u/%u "
               "inline %u/%u)", want.max_send_wr, have.max_send_wr, want.max_recv_wr,
            have.max_recv_wr, want.max_inline_data, have.max_inline_data);
        errno = EINVAL;
        return nullptr;
    }
    Cq* scq = outer<Cq>(init->send_cq);
    Cq* rcq = outer<Cq>(init->recv_cq);
    Srq* srq = init->srq ? outer<Srq>(init->srq) : nullptr;
    auto r = pd->pd->create_qp(*scq->cq, *rcq->cq, srq ? srq->srq.get() : nullptr);
    if (!r) {
        errno = errno_of(r.error());
        return nullptr;
    }
    auto* qp = new (std::nothrow) Qp{};
    if (!qp) {
        errno = ENOMEM;
        return nullptr;
    }
    qp->ctx = context_of(ibpd->context);
    qp->dev = pd->dev;
    qp->qp = std::move(r).value();
    qp->sq_sig_all = init->sq_sig_all != 0;
    // Report what the queue pair can take: at least what was asked for (verbs' rule), and
    // the whole inline size, which clients read to decide whether to send inline.
    qp->cap = want;
    qp->cap.max_inline_data = have.max_inline_data;
    init->cap = qp->cap;
    ibv_qp& q = qp->ibv();
    q.context = ibpd->context;
    q.qp_context = init->qp_context;
    q.pd = ibpd;
    q.send_cq = init->send_cq;
    q.recv_cq = init->recv_cq;
    q.srq = init->srq;
    q.qp_num = qp->qp->number();
    q.handle = q.qp_num;
    q.state = IBV_QPS_RESET;
    q.qp_type = IBV_QPT_RC;
    pthread_mutex_init(&q.mutex, nullptr);
    pthread_cond_init(&q.cond, nullptr);
    if (send_ops) enable_wr_api(*qp);
    {
        std::lock_guard<std::mutex> g(qp->ctx->objects_mu);
        qp->ctx->objects->qps.insert(qp);
    }
    return &q;
}

}  // namespace mroce::verbs

extern "C" {

int ibv_destroy_qp(ibv_qp* ibqp) {
    if (!ibqp) return EINVAL;
    Qp* qp = outer<Qp>(ibqp);
    if (log_level() >= 3) log_connection(*qp);
    forget_object(*qp->ctx, qp, nullptr);
    pthread_mutex_destroy(&ibqp->mutex);
    pthread_cond_destroy(&ibqp->cond);
    delete qp;
    return 0;
}

int ibv_modify_qp(ibv_qp* ibqp, ibv_qp_attr* a, int mask) {
    if (!ibqp || !a) return EINVAL;
    Qp* qp = outer<Qp>(ibqp);
    if (mask & kRefused) {
        log(1, "ibv_modify_qp: attributes 0x%x do not apply to this device (Q_Key, "
               "alternate path, rate limit)", mask & kRefused);
        return EOPNOTSUPP;
    }
    api::QpAttr attr = qp->qp->query();
    if (mask & kCurState) {
        api::QpState cur;
        if (!state_of(a->cur_qp_state, cur) || cur != attr.state) return EINVAL;
    }
    uint32_t m = static_cast<uint32_t>(mask & ~(kCurState | kDropped));
    if ((m & IBV_QP_STATE) && !state_of(a->qp_state, attr.state)) return EINVAL;
    if (m & IBV_QP_ACCESS_FLAGS) attr.access_flags = a->qp_access_flags &
        (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
    if (m & IBV_QP_PKEY_INDEX) attr.pkey_index = a->pkey_index;
    if (m & IBV_QP_PORT) attr.port = a->port_num;
    if (m & IBV_QP_AV) {
        const ibv_ah_attr& ah = a->ah_attr;
        if (!ah.is_global) {
            // A LID is a UDP port on this device's own address (see ibv_query_port).
            if (ah.dlid == 0) {
                log(1, "ibv_modify_qp: the peer needs a GID (a global route), or a LID for a "
                       "peer on this host (ibv_rc_pingpong: -g 0)");
                return EINVAL;
            }
            attr.peer = qp->dev->local_address().with_port(ah.dlid);
        } else if (!address_of_gid(ah.grh.dgid, attr.peer)) {
            log(1, "ibv_modify_qp: the peer's GID is not an mroce GID (IPv4 and UDP port)");
            return EINVAL;
        }
        attr.sl = ah.sl;
    }
    if (m & IBV_QP_PATH_MTU) attr.path_mtu = static_cast<uint8_t>(a->path_mtu);
    if (m & IBV_QP_DEST_QPN) attr.dest_qp_num = a->dest_qp_num;
    if (m & IBV_QP_RQ_PSN) attr.rq_psn = a->rq_psn;
    if (m & IBV_QP_SQ_PSN) attr.sq_psn = a->sq_psn;
    if (m & IBV_QP_MAX_QP_RD_ATOMIC) attr.max_rd_atomic = a->max_rd_atomic;
    if (m & IBV_QP_MAX_DEST_RD_ATOMIC) attr.max_dest_rd_atomic = a->max_dest_rd_atomic;
    if (m & IBV_QP_MIN_RNR_TIMER) attr.min_rnr_timer = a->min_rnr_timer;
    if (m & IBV_QP_TIMEOUT) attr.timeout = a->timeout;
    if (m & IBV_QP_RETRY_CNT) attr.retry_cnt = a->retry_cnt;
    if (m & IBV_QP_RNR_RETRY) attr.rnr_retry = a->rnr_retry;
    std::string why;
    const Error e = qp->qp->modify(attr, m, &why);
    if (e != Error::kOk) {
        log(2, "ibv_modify_qp: %s", why.c_str());
        return errno_of(e);
    }
    if (m & IBV_QP_AV) {
        std::lock_guard<std::mutex> g(qp->ctx->objects_mu);  // read by on_device_event
        qp->ah = a->ah_attr;
        qp->peer = attr.peer;
        qp->ah_valid = 1;
    }
    if (m & IBV_QP_STATE) ibqp->state = a->qp_state;
    // The number stays through RESET (DeviceConfig::keep_qp_number_on_reset, set in
    // verbs/device.cc; spec [STREAM-13]).
    return 0;
}

int ibv_query_qp(ibv_qp* ibqp, ibv_qp_attr* a, int /*mask: everything is reported*/,
                 ibv_qp_init_attr* init) {
    if (!ibqp || !a) return EINVAL;
    Qp* qp = outer<Qp>(ibqp);
    const api::QpAttr q = qp->qp->query();
    *a = ibv_qp_attr{};
    a->qp_state = static_cast<ibv_qp_state>(q.state);
    a->cur_qp_state = a->qp_state;
    a->path_mtu = static_cast<ibv_mtu>(q.path_mtu);
    a->rq_psn = q.rq_psn;
    a->sq_psn = q.sq_psn;
    a->dest_qp_num = q.dest_qp_num;
    a->qp_access_flags = q.access_flags;
    a->cap = qp->cap;
    if (qp->ah_valid) a->ah_attr = qp->ah;
    a->pkey_index = q.pkey_index;
    a->max_rd_atomic = q.max_rd_atomic;
    a->max_dest_rd_atomic = q.max_dest_rd_atomic;
    a->min_rnr_timer = q.min_rnr_timer;
    a->port_num = q.port;
    a->timeout = q.timeout;
    a->retry_cnt = q.retry_cnt;
    a->rnr_retry = q.rnr_retry;
    if (init) {
        *init = ibv_qp_init_attr{};
        init->qp_context = ibqp->qp_context;
        init->send_cq = ibqp->send_cq;
        init->recv_cq = ibqp->recv_cq;
        init->srq = ibqp->srq;
        init->cap = qp->cap;
        init->qp_type = IBV_QPT_RC;
        init->sq_sig_all = qp->sq_sig_all;
    }
    return 0;
}

ibv_srq* ibv_create_srq(ibv_pd* ibpd, ibv_srq_init_attr* init) {
    if (!ibpd || !init) {
        errno = EINVAL;
        return nullptr;
    }
    if (init->attr.max_sge > api::kMaxSge || init->attr.max_wr > (1u << 15)) {
        errno = EINVAL;
        return nullptr;
    }
    Pd* pd = outer<Pd>(ibpd);
    if (context_of(ibpd->context)->settings.threads > 1) {
        log(1, "ibv_create_srq: no shared receive queues on a device of %u threads (MROCE_THREADS)",
            context_of(ibpd->context)->settings.threads);
        errno = EOPNOTSUPP;
        return nullptr;
    }
    auto r = pd->pd->create_srq();
    if (!r) {
        errno = errno_of(r.error());
        return nullptr;
    }
    auto* srq = new (std::nothrow) Srq{};
    if (!srq) {
        errno = ENOMEM;
        return nullptr;
    }
    srq->ctx = context_of(ibpd->context);
    srq->srq = std::move(r).value();
    srq->max_wr = init->attr.max_wr;
    srq->max_sge = init->attr.max_sge;
    srq->ibv.context = ibpd->context;
    srq->ibv.srq_context = init->srq_context;
    srq->ibv.pd = ibpd;
    pthread_mutex_init(&srq->ibv.mutex, nullptr);
    pthread_cond_init(&srq->ibv.cond, nullptr);
    {
        std::lock_guard<std::mutex> g(srq->ctx->objects_mu);
        srq->ctx->objects->srqs.insert(srq);
    }
    return &srq->ibv;
}

int ibv_modify_srq(ibv_srq* ibsrq, ibv_srq_attr* attr, int mask) {
    if (!ibsrq || !attr) return EINVAL;
    Srq* srq = outer<Srq>(ibsrq);
    if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
    if (mask & IBV_SRQ_MAX_WR) {
        if (attr->max_wr > (1u << 15)) return EINVAL;
        srq->max_wr = attr->max_wr;  // the queue is not bounded by it: nothing to resize
    }
    if (mask & IBV_SRQ_LIMIT) {
        // Recorded before arming: the event may fire at once and disarm it again.
        {
            std::lock_guard<std::mutex> g(srq->ctx->objects_mu);
            srq->limit = attr->srq_limit;
        }
        if (const Error e = srq->srq->arm_limit(attr->srq_limit); e != Error::kOk)
            return errno_of(e);
    }
    return 0;
}

int ibv_query_srq(ibv_srq* ibsrq, ibv_srq_attr* attr) {
    if (!ibsrq || !attr) return EINVAL;
    Srq* srq = outer<Srq>(ibsrq);
    attr->max_wr = srq->max_wr;
    attr->max_sge = srq->max_sge;
    std::lock_guard<std::mutex> g(srq->ctx->objects_mu);
    attr->srq_limit = srq->limit;
    return 0;
}

int ibv_destroy_srq(ibv_srq* ibsrq) {
    if (!ibsrq) return EINVAL;
    Srq* srq = outer<Srq>(ibsrq);
    forget_object(*srq->ctx, nullptr, srq);
    pthread_mutex_destroy(&ibsrq->mutex);
    pthread_cond_destroy(&ibsrq->cond);
    delete srq;
    return 0;
}

}  // extern "C"
