// verbs/device.cc — the device list, contexts and the query verbs.
//
// There is one device, mroce0: an Ethernet (RoCE-style) port whose GID carries the IPv4
// address and UDP port of a MetaRoCE endpoint. Each ibv_open_device opens its own endpoint
// (api::Device: a UDP socket set, the engine and its progress thread), so two contexts in
// one process, like two processes on one host, are two peers with two GIDs.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <set>

#include "verbs/verbs_internal.h"

#undef ibv_query_port
#undef ibv_get_device_list

using namespace mroce;
using namespace mroce::verbs;

namespace {

// Limits reported to applications. Queue depths follow the engine's per-stream cap
// (EndpointConfig::max_outstanding_wrs); the rest are what a table-driven engine allows.
constexpr int kMaxQp = 1 << 20;
constexpr int kMaxWr = 1 << 15;
constexpr int kMaxCqe = 1 << 22;
constexpr uint64_t kMaxMessage = 1u << 31;  // ibv_port_attr.max_msg_sz
// vendor_part_id: not one a client recognises, so perftest takes its generic paths
// (ibv_post_send, no vendor extensions).
constexpr uint32_t kVendorPartId = 0x4d52;  // "MR"

ibv_device* the_device() {
    // Never freed: ibv_device must stay valid after ibv_free_device_list, for as long as
    // any context opened on it.
    static ibv_device* dev = [] {
        auto* d = new ibv_device{};
        d->node_type = IBV_NODE_CA;
        d->transport_type = IBV_TRANSPORT_IB;  // what RoCE devices report
        std::snprintf(d->name, sizeof(d->name), "mroce0");
        std::snprintf(d->dev_name, sizeof(d->dev_name), "uverbs_mroce0");
        std::snprintf(d->dev_path, sizeof(d->dev_path), "/sys/class/infiniband_verbs/uverbs_mroce0");
        std::snprintf(d->ibdev_path, sizeof(d->ibdev_path), "/sys/class/infiniband/mroce0");
        return d;
    }();
    return dev;
}

// guid_of derives a stable EUI-64 from the endpoint's address (02:00 + IPv4 + port),
// in network order as verbs reports GUIDs.
__be64 guid_of(const Address& a) {
    uint8_t b[8] = {0x02, 0x00, a.ip[12], a.ip[13], a.ip[14], a.ip[15],
                    static_cast<uint8_t>(a.port >> 8), static_cast<uint8_t>(a.port)};
    __be64 g;
    std::memcpy(&g, b, sizeof(g));
    return g;
}

void fill_device_attr(const Context& ctx, ibv_device_attr& a) {
    std::memset(&a, 0, sizeof(a));
    std::snprintf(a.fw_ver, sizeof(a.fw_ver), "mroce");
    a.node_guid = guid_of(ctx.dev->local_address());
    a.sys_image_guid = a.node_guid;
    a.max_mr_size = UINT64_MAX;
    a.page_size_cap = 0xfffff000;  // any page size from 4 KiB
    a.vendor_id = 0;
    a.vendor_part_id = kVendorPartId;
    a.hw_ver = 1;
    const auto& e = ctx.dev->config().endpoint;
    a.max_qp = kMaxQp;
    a.max_qp_wr = kMaxWr;
    a.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT;
    a.max_sge = static_cast<int>(api::kMaxSge);
    a.max_sge_rd = static_cast<int>(api::kMaxSge);
    a.max_cq = kMaxQp;
    a.max_cqe = kMaxCqe;
    a.max_mr = static_cast<int>((uint64_t{1} << (32 - e.memory_key_tag_bits)) - 1);  // [PLACE-29]
    a.max_pd = 1 << 24;
    a.max_qp_rd_atom = static_cast<int>(e.max_rd_atomic);
    a.max_qp_init_rd_atom = static_cast<int>(e.max_rd_atomic);
    a.max_res_rd_atom = static_cast<int>(e.max_dest_rd_atomic) * kMaxQp;
    a.atomic_cap = IBV_ATOMIC_HCA;  // atomics are atomic with respect to this device only
    // A device of several shards (MROCE_THREADS) offers no shared receive queues.
    const bool srqs = ctx.settings.threads <= 1;
    a.max_srq = srqs ? kMaxQp : 0;
    a.max_srq_wr = srqs ? kMaxWr : 0;
    a.max_srq_sge = srqs ? static_cast<int>(api::kMaxSge) : 0;
    a.max_pkeys = 1;
    a.local_ca_ack_delay = 0;
    a.phys_port_cnt = 1;
}

ibv_mtu mtu_of(uint32_t payload) {
    if (payload >= 4096) return IBV_MTU_4096;
    if (payload >= 2048) return IBV_MTU_2048;
    if (payload >= 1024) return IBV_MTU_1024;
    if (payload >= 512) return IBV_MTU_512;
    return IBV_MTU_256;
}

void fill_port_attr(const Context& ctx, ibv_port_attr& p) {
    std::memset(&p, 0, sizeof(p));
    p.state = IBV_PORT_ACTIVE;
    p.max_mtu = IBV_MTU_4096;
    p.active_mtu = mtu_of(ctx.dev->config().endpoint.max_payload);
    p.gid_tbl_len = 1;
    p.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
    p.max_msg_sz = static_cast<uint32_t>(kMaxMessage);
    p.pkey_tbl_len = 1;
    // Ethernet has no LIDs (a RoCE NIC reports 0). The LID is the endpoint's UDP port
    // instead, so programs that address peers by LID alone (qperf, ibv_rc_pingpong
    // without -g) reach a peer with the same IP address: one host (verbs/README.md).
    p.lid = ctx.dev->local_address().port;
    p.max_vl_num = 1;
    p.active_width = 2;   // 4x
    p.active_speed = 32;  // EDR (25 Gbit/s per lane): 100 Gbit/s, the engine's port rate
    p.phys_state = 5;     // LinkUp
    p.link_layer = IBV_LINK_LAYER_ETHERNET;
}

int query_port_ex(ibv_context* context, uint8_t port, ibv_port_attr* attr, size_t len) {
    if (port != 1 || !attr) return EINVAL;
    ibv_port_attr p;
    fill_port_attr(*context_of(context), p);
    std::memcpy(attr, &p, std::min(len, sizeof(p)));
    return 0;
}

// The contexts open now, so that the process can finish their work when it exits.
struct OpenContexts {
    std::mutex mu;
    std::set<Context*> all;
};
// MROCE_STAGES keeps this many stamps per context: the last 5,000 or so round trips of
// ib_write_lat (about 12 stamps per side each).
constexpr size_t kStageStamps = size_t{1} << 16;

OpenContexts& open_contexts() {
    static auto* o = new OpenContexts;  // never destroyed: used by the exit hook below
    return *o;
}

// finish_at_exit runs when the process exits (or the library is unloaded) with contexts
// still open, as most verbs programs leave them. Their last messages may still wait for
// an ACK, and the ACKs their peers wait for may not have left: the progress thread dies
// with the process. Each context lingers until its work is done (verbs/README.md).
__attribute__((destructor)) void finish_at_exit() {
    OpenContexts& o = open_contexts();
    std::lock_guard<std::mutex> g(o.mu);
    for (Context* c : o.all) {
        (void)c->dev->linger(c->settings.linger);
        write_stages(*c);
    }
}

}  // namespace

void mroce::verbs::write_stages(Context& ctx) {
    if (!ctx.trace || ctx.settings.stages_file.empty()) return;
    const std::string path = ctx.settings.stages_file + "." + std::to_string(::getpid());
    ctx.settings.stages_file.clear();  // once
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
        log(1, "MROCE_STAGES: cannot write %s", path.c_str());
        return;
    }
    // The layout of `mroce perf --stages` (tools/perf_rdma.cc): {"stages": [[stage, ns, count, tid], ...]}.
    std::fputs("{\"stages\": [", f);
    bool first = true;
    for (const api::StageStamp& st : ctx.trace->entries()) {
        std::fprintf(f, "%s[\"%.*s\", %lld, %u, %u]", first ? "" : ", ",
                     static_cast<int>(api::stage_name(st.stage).size()), api::stage_name(st.stage).data(),
                     static_cast<long long>(st.ns), st.count, st.tid);
        first = false;
    }
    std::fputs("]}\n", f);
    std::fclose(f);
}

namespace {

int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t len) {
    if (!attr || (input && input->comp_mask)) return EINVAL;
    ibv_device_attr_ex a{};
    fill_device_attr(*context_of(context), a.orig_attr);
    a.max_dm_size = 0;
    std::memcpy(attr, &a, std::min(len, sizeof(a)));
    return 0;
}

}  // namespace

extern "C" {

ibv_device** ibv_get_device_list(int* num_devices) {
    auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
    if (!list) {
        errno = ENOMEM;
        return nullptr;
    }
    list[0] = the_device();
    if (num_devices) *num_devices = 1;
    return list;
}

void ibv_free_device_list(ibv_device** list) { std::free(list); }

const char* ibv_get_device_name(ibv_device* device) { return device ? device->name : nullptr; }

__be64 ibv_get_device_guid(ibv_device* device) {
    (void)device;
    Settings s;
    std::string error;
    return read_settings(s, error) ? guid_of(s.local) : 0;
}

int ibv_get_device_index(ibv_device* device) { return device == the_device() ? 0 : -1; }

ibv_context* ibv_open_device(ibv_device* device) {
    if (device != the_device()) {
        errno = ENODEV;
        return nullptr;
    }
    Settings s;
    std::string error;
    if (!read_settings(s, error)) {
        log(1, "%s", error.c_str());
        errno = EINVAL;
        return nullptr;
    }
    api::DeviceConfig cfg;
    cfg.local = s.local;
    cfg.endpoint.num_paths = s.paths;
    cfg.spin = std::chrono::microseconds(s.spin_us);
    cfg.spin_alone = std::chrono::microseconds(s.spin_alone_us);
    cfg.stand_by = std::chrono::microseconds(s.stand_by_us);
    // A peer whose process ends does not flush our receives on a NIC: no CLOSE either.
    cfg.close_connections = false;
    // verbs: a queue pair keeps its number through RESET and back ([STREAM-13]).
    cfg.keep_qp_number_on_reset = true;
    // ACKs ride with the peer's answer, so an application waiting in ibv_poll_cq receives
    // the answer itself, with no progress thread to wake (MROCE_ACK_WITH_DATA).
    cfg.endpoint.ack_with_reverse_data = s.ack_with_data;
    cfg.endpoint.coalesce = s.coalesce;
    cfg.send_first = s.send_first;
    cfg.send_on_post = true;  // ibv_post_send sends while the progress thread sleeps
    cfg.threads = s.threads;
    api::StageTrace* trace = nullptr;
    if (!s.stages_file.empty()) cfg.stage_trace = trace = new api::StageTrace(kStageStamps);
    std::string why;
    auto dev = api::Device::open(cfg, &why);
    if (!dev) {
        log(1, "cannot open mroce0 on %s: %s", s.local.to_string().c_str(), why.c_str());
        errno = errno_of(dev.error());
        return nullptr;
    }
    auto* ctx = new (std::nothrow) Context{};
    if (!ctx) {
        errno = ENOMEM;
        return nullptr;
    }
    ctx->dev = std::shared_ptr<api::Device>(std::move(dev).value());
    ctx->settings = s;
    ctx->trace = trace;
    log(2, "mroce0 open on %s (%u paths)", ctx->dev->local_address().to_string().c_str(),
        unsigned{s.paths});
    verbs_context& v = ctx->vctx;
    v.sz = sizeof(verbs_context);
    v.query_port = query_port_ex;
    v.query_device_ex = query_device_ex;
    v.create_qp_ex = create_qp_ex;
    v.create_cq_ex = create_cq_ex;
    ibv_context& c = v.context;
    c.device = device;
    c.abi_compat = __VERBS_ABI_IS_EXTENDED;
    c.num_comp_vectors = 1;
    c.cmd_fd = ::eventfd(0, EFD_CLOEXEC);
    c.async_fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    pthread_mutex_init(&c.mutex, nullptr);
    c.ops.poll_cq = poll_cq;
    c.ops.req_notify_cq = req_notify_cq;
    c.ops.post_send = post_send;
    c.ops.post_recv = post_recv;
    c.ops.post_srq_recv = post_srq_recv;
    ctx->dev->set_event_notify(on_device_event, ctx);
    {
        OpenContexts& o = open_contexts();
        std::lock_guard<std::mutex> g(o.mu);
        o.all.insert(ctx);
    }
    return &c;
}

int ibv_close_device(ibv_context* context) {
    if (!context) return EINVAL;
    Context* ctx = context_of(context);
    {
        // Queue pairs and SRQs point back at their context: it must outlive them.
        std::lock_guard<std::mutex> g(ctx->objects_mu);
        if (!ctx->objects->qps.empty() || !ctx->objects->srqs.empty()) return EBUSY;
    }
    {
        OpenContexts& o = open_contexts();
        std::lock_guard<std::mutex> g(o.mu);
        o.all.erase(ctx);
    }
    (void)ctx->dev->linger(ctx->settings.linger);
    write_stages(*ctx);
    if (log_level() >= 3) {
        // How the work was shared between the progress thread and the application's own
        // passes (ibv_poll_cq), and what woke the thread: for latency questions.
        const api::DeviceStats stats = ctx->dev->stats();
        const api::DriverStats& d = stats.driver;
        const datapath::UdpStats& u = stats.udp;
        log(3, "mroce0 closed: passes %llu (by the application %llu, posting %llu), sleeps %llu (standing by "
               "%llu, ended for a message to come %llu; woken by posts %llu, by timers %llu), checks polling "
               "alone %llu, datagrams %llu in %llu out; system calls %llu recv %llu send, GRO receives %llu, "
               "GSO sends %llu",
            static_cast<unsigned long long>(d.passes), static_cast<unsigned long long>(d.assisted_passes),
            static_cast<unsigned long long>(d.posting_passes), static_cast<unsigned long long>(d.sleeps),
            static_cast<unsigned long long>(d.stand_by_sleeps), static_cast<unsigned long long>(d.stand_by_ended),
            static_cast<unsigned long long>(d.wakeups_posted), static_cast<unsigned long long>(d.wakeups_timer),
            static_cast<unsigned long long>(d.alone_polls),
            static_cast<unsigned long long>(d.datagrams_in), static_cast<unsigned long long>(d.datagrams_out),
            static_cast<unsigned long long>(u.recv_calls), static_cast<unsigned long long>(u.send_calls),
            static_cast<unsigned long long>(u.gro_receives), static_cast<unsigned long long>(u.gso_sends));
    }
    ctx->dev->set_event_notify(nullptr, nullptr);
    if (context->cmd_fd >= 0) ::close(context->cmd_fd);
    if (context->async_fd >= 0) ::close(context->async_fd);
    pthread_mutex_destroy(&context->mutex);
    delete ctx;  // the endpoint closes when its last object is gone
    return 0;
}

int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
    if (!context || !attr) return EINVAL;
    fill_device_attr(*context_of(context), *attr);
    return 0;
}

// The exported ibv_query_port is the fallback of the header's inline for contexts
// without verbs_context.query_port; it writes the 48-byte layout of before
// port_cap_flags2 and no further.
int ibv_query_port(ibv_context* context, uint8_t port, _compat_ibv_port_attr* attr) {
    if (!context || !attr) return EINVAL;
    return query_port_ex(context, port, reinterpret_cast<ibv_port_attr*>(attr),
                         offsetof(ibv_port_attr, port_cap_flags2));
}

int ibv_query_gid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) {
    if (!context || !gid || port != 1 || index != 0) return -1;
    *gid = gid_of(context_of(context)->dev->local_address());
    return 0;
}

int _ibv_query_gid_ex(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry,
                      uint32_t flags, size_t entry_size) {
    if (!context || !entry || flags != 0 || port != 1) return EINVAL;
    if (index != 0) return ENODATA;
    ibv_gid_entry e{};
    e.gid = gid_of(context_of(context)->dev->local_address());
    e.gid_index = 0;
    e.port_num = 1;
    e.gid_type = IBV_GID_TYPE_ROCE_V2;
    e.ndev_ifindex = 0;
    std::memcpy(entry, &e, std::min(entry_size, sizeof(e)));
    return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                             uint32_t flags, size_t entry_size) {
    if (!context || flags != 0 || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
    if (max_entries < 1) return -EINVAL;
    const int r = _ibv_query_gid_ex(context, 1, 0, entries, 0, entry_size);
    return r == 0 ? 1 : -r;
}

// ibv_query_gid_type (IBVERBS_PRIVATE_34, used by ibv_devinfo): 1 is
// IBV_GID_TYPE_SYSFS_ROCE_V2 in rdma-core's driver.h, which is not installed.
int ibv_query_gid_type(ibv_context* context, uint8_t port, unsigned int index, uint32_t* type) {
    if (!context || !type || port != 1 || index != 0) return EINVAL;
    *type = 1;
    return 0;
}

int ibv_query_pkey(ibv_context* context, uint8_t port, int index, __be16* pkey) {
    if (!context || !pkey || port != 1 || index != 0) return -1;
    *pkey = 0xffff;  // the default partition, full membership
    return 0;
}

int ibv_get_pkey_index(ibv_context* context, uint8_t port, __be16 pkey) {
    if (!context || port != 1) return -EINVAL;
    return pkey == 0xffff ? 0 : -ENOENT;
}

// sysfs: there is no kernel device, so there are no files to read.
int ibv_read_sysfs_file(const char*, const char*, char*, size_t) { return -1; }
int ibv_read_ibdev_sysfs_file(char*, size_t, void*, const char*, ...) { return -1; }
// rdma-core's signature: the sysfs root, no arguments (librdmacm builds its paths from it;
// it took (char*, size_t) here once, and `ib_send_bw -R` crashed in librdmacm's snprintf).
const char* ibv_get_sysfs_path(void) { return "/sys"; }

// fork support: memory is ordinary process memory (nothing is pinned for a device), so a
// child sees its own copy and there is nothing to protect.
int ibv_fork_init(void) { return 0; }
enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
int ibv_dontfork_range(void*, size_t) { return 0; }
int ibv_dofork_range(void*, size_t) { return 0; }

}  // extern "C"
