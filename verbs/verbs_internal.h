// verbs/verbs_internal.h — the objects behind the libibverbs C ABI (verbs/README.md).
//
// Each verbs object the application sees (ibv_context, ibv_pd, ibv_mr, ibv_cq, ibv_qp,
// ibv_srq, ibv_comp_channel) is the first member of a standard-layout wrapper, so the
// pointer the application hands back converts to the wrapper with one cast. The wrapper
// holds the native API object (api/device.h) that does the work. Every object keeps the
// api::Device alive through a shared_ptr, so a careless destruction order never frees
// the engine under a live queue pair.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>

#include "api/device.h"
#include "util/address.h"

namespace mroce::verbs {

// Settings read from the environment when a device is opened (verbs/README.md lists them).
struct Settings {
    Address local;               // MROCE_IP and MROCE_PORT
    uint16_t paths = 8;          // MROCE_PATHS
    // MROCE_SPIN_US: progress-thread polling after activity. 0 by default: a sleeping
    // thread woken by a packet preempts an application spinning on memory (ib_write_lat),
    // where a polling one only shares the core with it (p50 78 against 120-290 µs here).
    uint32_t spin_us = 0;
    // MROCE_SPIN_ALONE_US: api::DeviceConfig::spin_alone. A progress thread that works
    // alone (no poll by the application for a millisecond: a READ or atomic target, an
    // application blocked on completion events) polls this long after a small exchange:
    // no polling application's core is taken, and the wake-up it saves is most of a round
    // trip in a VM (ib_read_lat 19 against 7 µs).
    uint32_t spin_alone_us = 50;
    // MROCE_STAND_BY_US: api::DeviceConfig::stand_by. While the application polls a CQ in
    // a loop (ibv_poll_cq, not armed for an event), the progress thread leaves the sockets
    // to it for this long after each poll, so a ping-pong makes no wake-up per message.
    // The thread wakes once per stand-by to see whether the polling goes on: at 50 µs
    // that preempted ib_write_lat often enough to cost its median (5.6-6.6 µs against
    // 4.8 at 200); longer only delays what arrives after the application stopped polling.
    uint32_t stand_by_us = 200;
    // MROCE_LINGER_MS: how long closing a context (or the process exiting) waits for its
    // outstanding work and its last ACKs (api::Device::linger).
    Duration linger = std::chrono::milliseconds(500);
    // MROCE_ACK_WITH_DATA: core::EndpointConfig::ack_with_reverse_data.
    bool ack_with_data = true;
    // MROCE_SEND_FIRST: api::DeviceConfig::send_first.
    bool send_first = true;
    // MROCE_COALESCE: core::EndpointConfig::coalesce (spec [WIRE-10]).
    bool coalesce = true;
    // MROCE_THREADS: api::DeviceConfig::threads, the device's shards (each with its own
    // sockets and progress thread; connections placed by a hash of the peer). Above 1,
    // shared receive queues are refused.
    uint32_t threads = 1;
    // MROCE_STAGES: where to write the stage stamps of each context (api/stage_trace.h) when
    // it closes or the process exits, as FILE.PID; empty: no tracing. For latency
    // questions (scripts/latency-stages.py --verbs).
    std::string stages_file;
};
// read_settings parses the environment. On a bad value it returns false and `error` names
// the variable and the problem in one line.
bool read_settings(Settings& out, std::string& error);

// log_level is MROCE_LOG as read at the first use (1 when unset or invalid).
int log_level();
// log prints "mroce: <text>" on stderr when `level` <= log_level().
void log(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// errno_of maps an API error to the errno value verbs returns for it.
int errno_of(Error e);

// The GID of an endpoint: bytes 0..7 zero, 8..9 the UDP port (big-endian; the protocol's
// default port is written as 0, which makes the standard RoCEv2 GID ::ffff:a.b.c.d),
// 10..11 ff ff, 12..15 the IPv4 address.
ibv_gid gid_of(const Address& a);
// address_of_gid reads such a GID back; false for any other shape (a native IPv6 GID).
bool address_of_gid(const ibv_gid& gid, Address& out);

// Completion channel: a queue of CQs with an event, and an eventfd (semaphore mode) whose
// readiness the application polls. The queue, not the fd, carries the CQs, so destroying
// a CQ can withdraw its pending events: the fd's count may then exceed the queue, and a
// read that finds the queue empty reads again.
struct Channel {
    ibv_comp_channel ibv;  // ibv.fd is the eventfd
    std::mutex mu;
    std::deque<ibv_cq*> pending;
};

struct Context;

struct Cq {
    // ibv_cq, or ibv_cq_ex for ibv_create_cq_ex: the same leading fields (rdma-core's
    // ibv_cq_ex_to_cq is a cast), so either view of the union is the application's.
    union {
        ibv_cq ibv;
        ibv_cq_ex ex;
    };
    std::shared_ptr<api::Device> dev;
    std::unique_ptr<api::CompletionQueue> cq;
    Channel* channel = nullptr;
    std::atomic<bool> armed{false};  // ibv_req_notify_cq was called; the next CQE signals
    api::Completion current;         // the ibv_start_poll interface's current completion

    Cq() : ex{} {}
};
// create_cq makes a CQ (ibv_create_cq and, with its extra fields, ibv_create_cq_ex).
Cq* create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
              int comp_vector);
// create_cq_ex is verbs_context.create_cq_ex (verbs/cq_ex.cc).
ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr);
// The completion's verbs status and opcode (verbs/cq.cc).
ibv_wc_status wc_status_of(api::Status s);
ibv_wc_opcode wc_opcode_of(api::WorkOpcode op);

struct Pd {
    ibv_pd ibv;
    std::shared_ptr<api::Device> dev;
    std::unique_ptr<api::ProtectionDomain> pd;
};

struct Mr {
    ibv_mr ibv;
    std::unique_ptr<api::MemoryRegion> mr;
};

struct Srq {
    ibv_srq ibv;
    Context* ctx = nullptr;
    std::unique_ptr<api::SharedReceiveQueue> srq;
    uint32_t max_wr = 0, max_sge = 0;
    uint32_t limit = 0;  // srq_limit as last armed, 0 once fired (Context::objects_mu)
};

struct WrBatch;  // verbs/qp_ex.cc

struct Qp {
    ibv_qp_ex ex;  // ex.qp_base is the application's ibv_qp (first, so both casts work)
    Context* ctx = nullptr;
    std::shared_ptr<api::Device> dev;
    std::unique_ptr<api::QueuePair> qp;
    bool sq_sig_all = false;
    ibv_qp_cap cap{};  // what create_qp granted (reported by ibv_query_qp)
    // The peer as RTR set it, for ibv_query_qp(IBV_QP_AV), and its address, which
    // names the connection in the device's events.
    ibv_ah_attr ah{};
    uint8_t ah_valid = 0;
    Address peer;
    // The ibv_wr_* interface, for a queue pair created with send_ops_flags.
    std::unique_ptr<WrBatch> batch;
    Qp();
    ~Qp();  // both in verbs/qp_ex.cc, where WrBatch is complete

    ibv_qp& ibv() { return ex.qp_base; }
    const ibv_qp& ibv() const { return ex.qp_base; }
};
// create_qp is ibv_create_qp, and ibv_create_qp_ex with the ibv_wr_* interface when
// send_ops (IBV_QP_EX_WITH_*) is not 0.
ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* init, uint64_t send_ops);
// create_qp_ex is verbs_context.create_qp_ex.
ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr);
// enable_wr_api fills the ibv_wr_* function pointers of an extended queue pair.
void enable_wr_api(Qp& qp);

struct Context {
    verbs_context vctx;  // the application's ibv_context is vctx.context (it must be last
                         // in verbs_context: rdma-core's inline functions step back from it)
    std::shared_ptr<api::Device> dev;
    Settings settings;
    // Asynchronous events for ibv_get_async_event; vctx.context.async_fd (an eventfd in
    // semaphore mode) counts them, as a channel's fd counts CQ events.
    std::mutex async_mu;
    std::deque<ibv_async_event> async_events;
    // The queue pairs and SRQs of this context, which the device's events name by peer
    // address and SRQ id. Taken after the device's own locks (its event hook), before
    // async_mu.
    // (Behind a pointer: std::set would make Context lose its standard layout.)
    struct Objects {
        std::set<Qp*> qps;
        std::set<Srq*> srqs;
    };
    std::mutex objects_mu;
    std::unique_ptr<Objects> objects = std::make_unique<Objects>();
    // MROCE_STAGES: the device stamps here. Never freed: the device (shared with the CQs
    // and queue pairs) may outlive the context.
    api::StageTrace* trace = nullptr;
};
// write_stages writes the context's stage stamps to MROCE_STAGES.PID, once.
void write_stages(Context& ctx);
// push_async_event queues one asynchronous event on the context (async_mu).
void push_async_event(Context& ctx, const ibv_async_event& e);
// on_device_event turns the device's connection and SRQ events into asynchronous events
// (api::Device::set_event_notify's hook; arg is the Context).
void on_device_event(void* arg, const api::Event& e);
// forget_object withdraws a queue pair or SRQ from the context before it is destroyed:
// later events cannot name it, and its unread events are dropped.
void forget_object(Context& ctx, Qp* qp, Srq* srq);

// The wrappers are standard layout, so a pointer to the first member is a pointer to
// the wrapper ([basic.compound]); the casts below rely on it.
template <class W, class C>
W* outer(C* inner) {
    static_assert(std::is_standard_layout_v<W>);
    return reinterpret_cast<W*>(inner);
}
inline Context* context_of(ibv_context* c) {
    return outer<Context>(reinterpret_cast<verbs_context*>(reinterpret_cast<char*>(c) -
                                                           offsetof(verbs_context, context)));
}

// The operations reached through ibv_context's ops table (the header's inline functions).
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc);
int req_notify_cq(ibv_cq* cq, int solicited_only);

}  // namespace mroce::verbs
