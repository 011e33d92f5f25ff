// verbs/qp_ex.cc — extended queue pairs: ibv_create_qp_ex and the ibv_wr_* interface
// (ibv_wr_start, an opcode call and its buffer per work request, ibv_wr_complete).
//
// The calls between wr_start and wr_complete build work requests here; wr_complete posts
// them in order. Buffers given with wr_set_sge_list and wr_set_inline_data are copied when
// given (the application may reuse them at once, as on a NIC that writes the WQE then).
#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

#include "verbs/verbs_internal.h"

using namespace mroce;
using namespace mroce::verbs;

namespace mroce::verbs {

struct WrBatch {
    struct Pending {
        api::SendWr wr;
        std::vector<api::Sge> sge;
        std::vector<std::byte> inline_bytes;
        bool has_buffer = false;
    };
    std::vector<Pending> wrs;
    int error = 0;  // the first failure of this batch, reported by wr_complete
    bool open = false;
};

}  // namespace mroce::verbs

namespace {

constexpr uint64_t kSendOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                              IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                              IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                              IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;

Qp& qp_of(ibv_qp_ex* q) { return *outer<Qp>(q); }

void fail(ibv_qp_ex* q, int err) {
    WrBatch& b = *qp_of(q).batch;
    if (!b.error) b.error = err;
}

// begin starts the next work request of the batch with the queue pair's wr_id and
// wr_flags, as the verbs interface defines.
WrBatch::Pending* begin(ibv_qp_ex* q, api::WorkOpcode op) {
    Qp& qp = qp_of(q);
    WrBatch& b = *qp.batch;
    if (!b.open) {
        fail(q, EINVAL);
        return nullptr;
    }
    WrBatch::Pending& p = b.wrs.emplace_back();
    p.wr.wr_id = q->wr_id;
    p.wr.opcode = op;
    p.wr.signaled = qp.sq_sig_all || (q->wr_flags & IBV_SEND_SIGNALED);
    p.wr.fence = q->wr_flags & IBV_SEND_FENCE;
    return &p;
}

// last is the work request a wr_set_* call describes.
WrBatch::Pending* last(ibv_qp_ex* q) {
    WrBatch& b = *qp_of(q).batch;
    if (!b.open || b.wrs.empty()) {
        fail(q, EINVAL);
        return nullptr;
    }
    return &b.wrs.back();
}

void remote(WrBatch::Pending* p, uint32_t rkey, uint64_t addr) {
    if (!p) return;
    p->wr.rkey = rkey;
    p->wr.remote_addr = addr;
}

void wr_send(ibv_qp_ex* q) { begin(q, api::WorkOpcode::kSend); }
void wr_send_imm(ibv_qp_ex* q, __be32 imm) {
    if (auto* p = begin(q, api::WorkOpcode::kSendImm)) p->wr.imm = imm;
}
void wr_rdma_write(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) {
    remote(begin(q, api::WorkOpcode::kWrite), rkey, addr);
}
void wr_rdma_write_imm(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, __be32 imm) {
    auto* p = begin(q, api::WorkOpcode::kWriteImm);
    remote(p, rkey, addr);
    if (p) p->wr.imm = imm;
}
void wr_rdma_read(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) {
    remote(begin(q, api::WorkOpcode::kRead), rkey, addr);
}
void wr_atomic_cmp_swp(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap) {
    auto* p = begin(q, api::WorkOpcode::kAtomicCompareSwap);
    remote(p, rkey, addr);
    if (p) p->wr.compare_add = compare, p->wr.swap = swap;
}
void wr_atomic_fetch_add(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t add) {
    auto* p = begin(q, api::WorkOpcode::kAtomicFetchAdd);
    remote(p, rkey, addr);
    if (p) p->wr.compare_add = add;
}

// What the engine does not do: the batch fails at wr_complete.
void wr_bind_mw(ibv_qp_ex* q, ibv_mw*, uint32_t, const ibv_mw_bind_info*) { fail(q, EOPNOTSUPP); }
void wr_local_inv(ibv_qp_ex* q, uint32_t) { fail(q, EOPNOTSUPP); }
void wr_send_inv(ibv_qp_ex* q, uint32_t) { fail(q, EOPNOTSUPP); }
void wr_send_tso(ibv_qp_ex* q, void*, uint16_t, uint16_t) { fail(q, EOPNOTSUPP); }
void wr_set_ud_addr(ibv_qp_ex* q, ibv_ah*, uint32_t, uint32_t) { fail(q, EOPNOTSUPP); }
void wr_set_xrc_srqn(ibv_qp_ex* q, uint32_t) { fail(q, EOPNOTSUPP); }
void wr_atomic_write(ibv_qp_ex* q, uint32_t, uint64_t, const void*) { fail(q, EOPNOTSUPP); }

void wr_set_sge(ibv_qp_ex* q, uint32_t lkey, uint64_t addr, uint32_t length) {
    if (auto* p = last(q)) {
        p->sge.assign(1, api::Sge{addr, length, lkey});
        p->inline_bytes.clear();
        p->has_buffer = true;
    }
}
void wr_set_sge_list(ibv_qp_ex* q, size_t n, const ibv_sge* list) {
    auto* p = last(q);
    if (!p) return;
    if (n > api::kMaxSge || (n > 0 && !list)) return fail(q, EINVAL);
    p->sge.clear();
    for (size_t i = 0; i < n; ++i) p->sge.push_back(api::Sge{list[i].addr, list[i].length, list[i].lkey});
    p->inline_bytes.clear();
    p->has_buffer = true;
}
void wr_set_inline_data(ibv_qp_ex* q, void* addr, size_t length) {
    auto* p = last(q);
    if (!p) return;
    if (length > 0 && !addr) return fail(q, EINVAL);
    const auto* b = static_cast<const std::byte*>(addr);
    p->inline_bytes.assign(b, b + length);
    p->sge.clear();
    p->has_buffer = true;
}
void wr_set_inline_data_list(ibv_qp_ex* q, size_t n, const ibv_data_buf* bufs) {
    auto* p = last(q);
    if (!p) return;
    if (n > 0 && !bufs) return fail(q, EINVAL);
    p->inline_bytes.clear();
    for (size_t i = 0; i < n; ++i) {
        if (bufs[i].length > 0 && !bufs[i].addr) return fail(q, EINVAL);
        const auto* b = static_cast<const std::byte*>(bufs[i].addr);
        p->inline_bytes.insert(p->inline_bytes.end(), b, b + bufs[i].length);
    }
    p->sge.clear();
    p->has_buffer = true;
}

void wr_start(ibv_qp_ex* q) {
    WrBatch& b = *qp_of(q).batch;
    b.wrs.clear();
    b.error = 0;
    b.open = true;
}

void wr_abort(ibv_qp_ex* q) {
    WrBatch& b = *qp_of(q).batch;
    b.wrs.clear();
    b.error = 0;
    b.open = false;
}

// wr_complete posts the batch in order. A batch that failed while it was built posts
// nothing; one the engine refuses part-way keeps what went before posted (the engine has
// no doorbell to hold them back) and returns the refusal's errno.
int wr_complete(ibv_qp_ex* q) {
    Qp& qp = qp_of(q);
    WrBatch& b = *qp.batch;
    if (!b.open) return EINVAL;
    b.open = false;
    int err = b.error;
    for (size_t i = 0; i < b.wrs.size() && err == 0; ++i) {
        WrBatch::Pending& p = b.wrs[i];
        if (!p.has_buffer && p.wr.opcode != api::WorkOpcode::kSend &&
            p.wr.opcode != api::WorkOpcode::kSendImm) {
            err = EINVAL;  // READ, WRITE and atomics name a local buffer
            break;
        }
        if (!p.inline_bytes.empty()) {
            p.wr.inline_data = true;
            p.wr.local_addr = reinterpret_cast<uintptr_t>(p.inline_bytes.data());
            p.wr.length = static_cast<uint32_t>(p.inline_bytes.size());
        } else if (!p.sge.empty()) {
            p.wr.sg_list = p.sge.data();
            p.wr.num_sge = static_cast<uint32_t>(p.sge.size());
        }
        err = errno_of(qp.qp->post_send(p.wr));
    }
    b.wrs.clear();
    b.error = 0;
    return err;
}

}  // namespace

namespace mroce::verbs {

Qp::Qp() = default;
Qp::~Qp() = default;

void enable_wr_api(Qp& qp) {
    qp.batch = std::make_unique<WrBatch>();
    ibv_qp_ex& x = qp.ex;
    x.comp_mask = 0;
    x.wr_send = wr_send;
    x.wr_send_imm = wr_send_imm;
    x.wr_rdma_write = wr_rdma_write;
    x.wr_rdma_write_imm = wr_rdma_write_imm;
    x.wr_rdma_read = wr_rdma_read;
    x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
    x.wr_atomic_fetch_add = wr_atomic_fetch_add;
    x.wr_bind_mw = wr_bind_mw;
    x.wr_local_inv = wr_local_inv;
    x.wr_send_inv = wr_send_inv;
    x.wr_send_tso = wr_send_tso;
    x.wr_set_ud_addr = wr_set_ud_addr;
    x.wr_set_xrc_srqn = wr_set_xrc_srqn;
    x.wr_atomic_write = wr_atomic_write;
    x.wr_set_sge = wr_set_sge;
    x.wr_set_sge_list = wr_set_sge_list;
    x.wr_set_inline_data = wr_set_inline_data;
    x.wr_set_inline_data_list = wr_set_inline_data_list;
    x.wr_start = wr_start;
    x.wr_complete = wr_complete;
    x.wr_abort = wr_abort;
}

ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr) {
    if (!context || !attr) {
        errno = EINVAL;
        return nullptr;
    }
    constexpr uint32_t kMasks = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if ((attr->comp_mask & ~kMasks) || !(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd ||
        attr->create_flags) {
        log(1, "ibv_create_qp_ex: only a protection domain and send_ops_flags are supported "
               "(comp_mask 0x%x)", attr->comp_mask);
        errno = EOPNOTSUPP;
        return nullptr;
    }
    uint64_t ops = 0;
    if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
        ops = attr->send_ops_flags;
        if (ops & ~kSendOps) {
            log(1, "ibv_create_qp_ex: send_ops_flags 0x%llx not supported",
                static_cast<unsigned long long>(ops & ~kSendOps));
            errno = EOPNOTSUPP;
            return nullptr;
        }
        if (!ops) {
            errno = EINVAL;
            return nullptr;
        }
    }
    ibv_qp_init_attr init{};
    init.qp_context = attr->qp_context;
    init.send_cq = attr->send_cq;
    init.recv_cq = attr->recv_cq;
    init.srq = attr->srq;
    init.cap = attr->cap;
    init.qp_type = attr->qp_type;
    init.sq_sig_all = attr->sq_sig_all;
    ibv_qp* qp = create_qp(attr->pd, &init, ops);
    if (qp) attr->cap = init.cap;
    return qp;
}

}  // namespace mroce::verbs

extern "C" {

// rdma-core answers NULL for a queue pair not created with send_ops_flags.
ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* ibqp) {
    if (!ibqp) return nullptr;
    Qp* qp = outer<Qp>(ibqp);
    return qp->batch ? &qp->ex : nullptr;
}

}  // extern "C"
