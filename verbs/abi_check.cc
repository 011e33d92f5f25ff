// verbs/abi_check.cc — the layouts this library fills, checked against rdma-core 44's ABI
// (x86-64). The library compiles against the installed <infiniband/verbs.h>, so the
// structures are whatever those headers say; these assertions make sure they say what
// the programs in the wild were built with (the version script claims rdma-core 44's
// ABI). A build against other headers stops here instead of corrupting memory at run time.
#include <infiniband/verbs.h>

#include <cstddef>

#if defined(__x86_64__)
// Structures the library allocates or fills, whole.
static_assert(sizeof(ibv_device) == 664);
static_assert(sizeof(ibv_context) == 328);
static_assert(sizeof(verbs_context) == 648);
static_assert(sizeof(ibv_device_attr) == 232);
static_assert(sizeof(ibv_device_attr_ex) == 400);
static_assert(sizeof(ibv_port_attr) == 52);
static_assert(offsetof(ibv_port_attr, port_cap_flags2) == 48);  // the compat layout's end
static_assert(sizeof(ibv_pd) == 16);
static_assert(sizeof(ibv_mr) == 48);  // Gloo sends it whole to its peer
static_assert(sizeof(ibv_cq) == 128);
static_assert(sizeof(ibv_qp) == 160);
static_assert(sizeof(ibv_srq) == 128);
static_assert(sizeof(ibv_comp_channel) == 16);
static_assert(sizeof(ibv_wc) == 48);
static_assert(sizeof(ibv_send_wr) == 128);
static_assert(sizeof(ibv_recv_wr) == 32);
static_assert(sizeof(ibv_sge) == 16);
static_assert(sizeof(ibv_gid_entry) == 32);
static_assert(sizeof(ibv_async_event) == 16);
static_assert(sizeof(ibv_qp_attr) == 144);
static_assert(sizeof(ibv_qp_init_attr) == 64);

// verbs_context grows towards lower addresses; the header's inline functions step back
// from ibv_context to it and read `sz` right before.
static_assert(offsetof(verbs_context, sz) == 312);
static_assert(offsetof(verbs_context, context) == 320);
static_assert(offsetof(verbs_context, query_port) == 0);
static_assert(offsetof(verbs_context, query_device_ex) == 216);

// The hot-path inlines jump through the ops table at these offsets of ibv_context
// (objdump of ibv_rc_pingpong and libgloo: context+0x60, +0x68, +0xd0, +0xd8).
static_assert(offsetof(ibv_context, ops) + offsetof(ibv_context_ops, poll_cq) == 0x60);
static_assert(offsetof(ibv_context, ops) + offsetof(ibv_context_ops, req_notify_cq) == 0x68);
static_assert(offsetof(ibv_context, ops) + offsetof(ibv_context_ops, post_send) == 0xd0);
static_assert(offsetof(ibv_context, ops) + offsetof(ibv_context_ops, post_recv) == 0xd8);

// Fields applications read directly.
static_assert(offsetof(ibv_context, cmd_fd) == 264 && offsetof(ibv_context, async_fd) == 268);
static_assert(offsetof(ibv_context, num_comp_vectors) == 272);
static_assert(offsetof(ibv_qp, qp_num) == 52);
static_assert(offsetof(ibv_cq, cq_context) == 16);
static_assert(offsetof(ibv_mr, lkey) == 36 && offsetof(ibv_mr, rkey) == 40);
static_assert(offsetof(ibv_wc, imm_data) == 24 && offsetof(ibv_wc, qp_num) == 28);
#endif
