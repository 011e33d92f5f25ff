// verbs/unsupported.cc — the exported verbs of <infiniband/verbs.h> that mroce does not
// offer: address handles and multicast (UD), memory re-registration, dma-buf and imported
// objects, ECE. Each fails the way verbs reports "not supported" (NULL or an error with
// errno EOPNOTSUPP), so applications take their fallback instead of crashing.
#include <cerrno>

#include "verbs/verbs_internal.h"

using mroce::verbs::log;

namespace {

// refuse notes the call and sets errno. Optional features that programs probe and then
// do without are noted at MROCE_LOG 2; what a program cannot do without, at 1.
template <class T>
T refuse(const char* what, T value, int level = 2) {
    log(level, "%s: not supported", what);
    errno = EOPNOTSUPP;
    return value;
}

}  // namespace

extern "C" {

ibv_ah* ibv_create_ah(ibv_pd*, ibv_ah_attr*) {
    return refuse<ibv_ah*>("ibv_create_ah (address handles, for UD queue pairs)", nullptr, 1);
}
ibv_ah* ibv_create_ah_from_wc(ibv_pd*, ibv_wc*, ibv_grh*, uint8_t) {
    return refuse<ibv_ah*>("ibv_create_ah_from_wc", nullptr);
}
int ibv_init_ah_from_wc(ibv_context*, uint8_t, ibv_wc*, ibv_grh*, ibv_ah_attr*) {
    return refuse("ibv_init_ah_from_wc", -1);
}
int ibv_destroy_ah(ibv_ah*) { return refuse("ibv_destroy_ah", EOPNOTSUPP); }

int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
    return refuse("ibv_attach_mcast (multicast)", EOPNOTSUPP, 1);
}
int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
    return refuse("ibv_detach_mcast", EOPNOTSUPP);
}

int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t*, uint16_t*) {
    return refuse("ibv_resolve_eth_l2_from_gid", -1);
}

int ibv_rereg_mr(ibv_mr*, int, ibv_pd*, void*, size_t, int) {
    return refuse("ibv_rereg_mr", static_cast<int>(IBV_REREG_MR_ERR_INPUT));
}
ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
    return refuse<ibv_mr*>("ibv_reg_dmabuf_mr", nullptr);
}

ibv_context* ibv_import_device(int) { return refuse<ibv_context*>("ibv_import_device", nullptr); }
ibv_pd* ibv_import_pd(ibv_context*, uint32_t) { return refuse<ibv_pd*>("ibv_import_pd", nullptr); }
void ibv_unimport_pd(ibv_pd*) {}
ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) { return refuse<ibv_mr*>("ibv_import_mr", nullptr); }
void ibv_unimport_mr(ibv_mr*) {}
ibv_dm* ibv_import_dm(ibv_context*, uint32_t) { return refuse<ibv_dm*>("ibv_import_dm", nullptr); }
void ibv_unimport_dm(ibv_dm*) {}

int ibv_query_ece(ibv_qp*, ibv_ece*) { return refuse("ibv_query_ece", EOPNOTSUPP); }
int ibv_set_ece(ibv_qp*, ibv_ece*) { return refuse("ibv_set_ece", EOPNOTSUPP); }

// Data is placed out of order (the packets of one message travel many paths), so only
// the verbs ordering guarantees hold: completion order and last-byte-last for WRITE.
int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) { return 0; }

}  // extern "C"
