// verbs/unsupported_private.cc — rdma-core's provider interface (IBVERBS_PRIVATE_34) and
// the kernel-ABI copy helpers. No mroce path calls them: they exist because the providers
// perftest links (libmlx5, libefa) and librdmacm are bound at load time (BIND_NOW) and
// refuse to load without them. Their headers are not installed, so they are declared here
// with generic signatures: the C ABI carries no types, and none of them is ever reached
// with arguments that matter. Each fails with EOPNOTSUPP; registering a provider is a
// silent no-op because libmlx5's and libefa's constructors do it at every start.
#include <cerrno>

extern "C" {

// A data symbol in rdma-core (libmlx5 reads it through the GOT).
__attribute__((visibility("default"))) bool verbs_allow_disassociate_destroy = false;

void verbs_register_driver_34(const void*) {}
void ibv_register_driver(const char*, void*) {}

}  // extern "C"

#define MROCE_UNSUPPORTED(name)      \
    extern "C" int name(...) {       \
        errno = EOPNOTSUPP;          \
        return EOPNOTSUPP;           \
    }
#define MROCE_UNSUPPORTED_PTR(name)  \
    extern "C" void* name(...) {     \
        errno = EOPNOTSUPP;          \
        return nullptr;              \
    }

MROCE_UNSUPPORTED(__ioctl_final_num_attrs)
MROCE_UNSUPPORTED(__verbs_log)
MROCE_UNSUPPORTED_PTR(_verbs_init_and_alloc_context)
MROCE_UNSUPPORTED(execute_ioctl)
MROCE_UNSUPPORTED(verbs_init_cq)
MROCE_UNSUPPORTED_PTR(verbs_open_device)  // struct ibv_context *: NULL, not a number
MROCE_UNSUPPORTED(verbs_set_ops)
MROCE_UNSUPPORTED(verbs_uninit_context)
MROCE_UNSUPPORTED(ibv_copy_ah_attr_from_kern)
MROCE_UNSUPPORTED(ibv_copy_path_rec_from_kern)
MROCE_UNSUPPORTED(ibv_copy_path_rec_to_kern)
MROCE_UNSUPPORTED(ibv_copy_qp_attr_from_kern)
MROCE_UNSUPPORTED(ibv_cmd_advise_mr)
MROCE_UNSUPPORTED(ibv_cmd_alloc_dm)
MROCE_UNSUPPORTED(ibv_cmd_alloc_mw)
MROCE_UNSUPPORTED(ibv_cmd_alloc_pd)
MROCE_UNSUPPORTED(ibv_cmd_attach_mcast)
MROCE_UNSUPPORTED(ibv_cmd_close_xrcd)
MROCE_UNSUPPORTED(ibv_cmd_create_ah)
MROCE_UNSUPPORTED(ibv_cmd_create_counters)
MROCE_UNSUPPORTED(ibv_cmd_create_cq)
MROCE_UNSUPPORTED(ibv_cmd_create_cq_ex)
MROCE_UNSUPPORTED(ibv_cmd_create_flow)
MROCE_UNSUPPORTED(ibv_cmd_create_flow_action_esp)
MROCE_UNSUPPORTED(ibv_cmd_create_qp)
MROCE_UNSUPPORTED(ibv_cmd_create_qp_ex)
MROCE_UNSUPPORTED(ibv_cmd_create_qp_ex2)
MROCE_UNSUPPORTED(ibv_cmd_create_rwq_ind_table)
MROCE_UNSUPPORTED(ibv_cmd_create_srq)
MROCE_UNSUPPORTED(ibv_cmd_create_srq_ex)
MROCE_UNSUPPORTED(ibv_cmd_create_wq)
MROCE_UNSUPPORTED(ibv_cmd_dealloc_mw)
MROCE_UNSUPPORTED(ibv_cmd_dealloc_pd)
MROCE_UNSUPPORTED(ibv_cmd_dereg_mr)
MROCE_UNSUPPORTED(ibv_cmd_destroy_ah)
MROCE_UNSUPPORTED(ibv_cmd_destroy_counters)
MROCE_UNSUPPORTED(ibv_cmd_destroy_cq)
MROCE_UNSUPPORTED(ibv_cmd_destroy_flow)
MROCE_UNSUPPORTED(ibv_cmd_destroy_flow_action)
MROCE_UNSUPPORTED(ibv_cmd_destroy_qp)
MROCE_UNSUPPORTED(ibv_cmd_destroy_rwq_ind_table)
MROCE_UNSUPPORTED(ibv_cmd_destroy_srq)
MROCE_UNSUPPORTED(ibv_cmd_destroy_wq)
MROCE_UNSUPPORTED(ibv_cmd_detach_mcast)
MROCE_UNSUPPORTED(ibv_cmd_free_dm)
MROCE_UNSUPPORTED(ibv_cmd_get_context)
MROCE_UNSUPPORTED(ibv_cmd_modify_cq)
MROCE_UNSUPPORTED(ibv_cmd_modify_flow_action_esp)
MROCE_UNSUPPORTED(ibv_cmd_modify_qp)
MROCE_UNSUPPORTED(ibv_cmd_modify_qp_ex)
MROCE_UNSUPPORTED(ibv_cmd_modify_srq)
MROCE_UNSUPPORTED(ibv_cmd_modify_wq)
MROCE_UNSUPPORTED(ibv_cmd_open_qp)
MROCE_UNSUPPORTED(ibv_cmd_open_xrcd)
MROCE_UNSUPPORTED(ibv_cmd_poll_cq)
MROCE_UNSUPPORTED(ibv_cmd_post_recv)
MROCE_UNSUPPORTED(ibv_cmd_post_send)
MROCE_UNSUPPORTED(ibv_cmd_post_srq_recv)
MROCE_UNSUPPORTED(ibv_cmd_query_context)
MROCE_UNSUPPORTED(ibv_cmd_query_device_any)
MROCE_UNSUPPORTED(ibv_cmd_query_mr)
MROCE_UNSUPPORTED(ibv_cmd_query_port)
MROCE_UNSUPPORTED(ibv_cmd_query_qp)
MROCE_UNSUPPORTED(ibv_cmd_query_srq)
MROCE_UNSUPPORTED(ibv_cmd_read_counters)
MROCE_UNSUPPORTED(ibv_cmd_reg_dm_mr)
MROCE_UNSUPPORTED(ibv_cmd_reg_dmabuf_mr)
MROCE_UNSUPPORTED(ibv_cmd_reg_mr)
MROCE_UNSUPPORTED(ibv_cmd_req_notify_cq)
MROCE_UNSUPPORTED(ibv_cmd_rereg_mr)
MROCE_UNSUPPORTED(ibv_cmd_resize_cq)
