// verbs/cq_ex.cc — extended completion queues: ibv_create_cq_ex and the
// ibv_start_poll / ibv_next_poll / ibv_wc_read_* interface.
//
// The CQ is the same api::CompletionQueue as ibv_create_cq's; start_poll and next_poll take
// one completion at a time into Cq::current, which the read functions decode. Only the
// standard fields are offered: completion timestamps, VLANs, flow tags and tag matching
// are refused when the CQ is created.
#include <cerrno>
#include <span>

#include "verbs/verbs_internal.h"

using namespace mroce;
using namespace mroce::verbs;

namespace {

Cq& cq_of(ibv_cq_ex* x) { return *outer<Cq>(x); }

// take moves the next completion into current; false when the CQ is empty.
bool take(Cq& cq) {
    if (cq.cq->poll(std::span(&cq.current, 1)) == 0) return false;
    cq.ex.status = wc_status_of(cq.current.status);
    cq.ex.wr_id = cq.current.wr_id;
    return true;
}

int start_poll(ibv_cq_ex* x, ibv_poll_cq_attr* attr) {
    if (attr && attr->comp_mask) return EINVAL;
    Cq& cq = cq_of(x);
    // As ibv_poll_cq: an empty CQ makes one progress pass from this thread first.
    if (take(cq) || (cq.dev->try_progress(!cq.armed.load(std::memory_order_relaxed)) && take(cq)))
        return 0;
    return ENOENT;
}
int next_poll(ibv_cq_ex* x) { return take(cq_of(x)) ? 0 : ENOENT; }
void end_poll(ibv_cq_ex*) {}

ibv_wc_opcode read_opcode(ibv_cq_ex* x) { return wc_opcode_of(cq_of(x).current.opcode); }
uint32_t read_vendor_err(ibv_cq_ex* x) { return static_cast<uint32_t>(cq_of(x).current.status); }
uint32_t read_byte_len(ibv_cq_ex* x) { return cq_of(x).current.byte_len; }
__be32 read_imm_data(ibv_cq_ex* x) { return cq_of(x).current.imm; }
uint32_t read_qp_num(ibv_cq_ex* x) { return cq_of(x).current.stream; }
unsigned int read_wc_flags(ibv_cq_ex* x) { return cq_of(x).current.has_imm ? IBV_WC_WITH_IMM : 0; }
// UD and IB addressing fields: an RC completion on Ethernet has none.
uint32_t read_src_qp(ibv_cq_ex*) { return 0; }
uint32_t read_slid(ibv_cq_ex*) { return 0; }
uint8_t read_sl(ibv_cq_ex*) { return 0; }
uint8_t read_dlid_path_bits(ibv_cq_ex*) { return 0; }

}  // namespace

namespace mroce::verbs {

ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr) {
    if (!context || !attr) {
        errno = EINVAL;
        return nullptr;
    }
    if (attr->wc_flags & ~uint64_t{IBV_WC_STANDARD_FLAGS}) {
        log(1, "ibv_create_cq_ex: wc_flags 0x%llx not supported (completion timestamps, "
               "VLAN, flow tag, tag matching)",
            static_cast<unsigned long long>(attr->wc_flags & ~uint64_t{IBV_WC_STANDARD_FLAGS}));
        errno = EOPNOTSUPP;
        return nullptr;
    }
    // Flags (single-threaded use) are hints; parent domains are not offered.
    if (attr->comp_mask & ~uint32_t{IBV_CQ_INIT_ATTR_MASK_FLAGS}) {
        errno = EOPNOTSUPP;
        return nullptr;
    }
    if (attr->cqe == 0 || attr->cqe > static_cast<uint32_t>(INT32_MAX)) {
        errno = EINVAL;
        return nullptr;
    }
    Cq* cq = create_cq(context, static_cast<int>(attr->cqe), attr->cq_context, attr->channel,
                       static_cast<int>(attr->comp_vector));
    if (!cq) return nullptr;
    ibv_cq_ex& x = cq->ex;
    x.start_poll = start_poll;
    x.next_poll = next_poll;
    x.end_poll = end_poll;
    x.read_opcode = read_opcode;
    x.read_vendor_err = read_vendor_err;
    x.read_byte_len = read_byte_len;
    x.read_imm_data = read_imm_data;
    x.read_qp_num = read_qp_num;
    x.read_src_qp = read_src_qp;
    x.read_wc_flags = read_wc_flags;
    x.read_slid = read_slid;
    x.read_sl = read_sl;
    x.read_dlid_path_bits = read_dlid_path_bits;
    return &x;
}

}  // namespace mroce::verbs
