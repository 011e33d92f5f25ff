// verbs/cq.cc — completion queues, completion channels and ibv_poll_cq.
//
// A CQ is an api::CompletionQueue. Its notify hook (run by whichever thread queues a
// completion, with the CQ's lock held) turns an armed CQ into one event on its channel,
// then disarms it: verbs' "next completion" semantics.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <new>

#include "verbs/verbs_internal.h"

using namespace mroce;
using namespace mroce::verbs;

namespace {

}  // namespace

namespace mroce::verbs {

ibv_wc_status wc_status_of(api::Status s) {
    switch (s) {
        case api::Status::kSuccess: return IBV_WC_SUCCESS;
        case api::Status::kLocalLength: return IBV_WC_LOC_LEN_ERR;
        case api::Status::kLocalProtection: return IBV_WC_LOC_PROT_ERR;
        case api::Status::kRemoteAccess: return IBV_WC_REM_ACCESS_ERR;
        case api::Status::kRemoteInvalid: return IBV_WC_REM_INV_REQ_ERR;
        case api::Status::kRnrRetryExceeded: return IBV_WC_RNR_RETRY_EXC_ERR;
        case api::Status::kRetryExceeded: return IBV_WC_RETRY_EXC_ERR;
        case api::Status::kPeerDead: return IBV_WC_RETRY_EXC_ERR;  // vendor_err tells
        case api::Status::kFlushed: return IBV_WC_WR_FLUSH_ERR;
        // The peer speaks another wire version: it can never answer, as with a dead peer.
        case api::Status::kVersionMismatch: return IBV_WC_RETRY_EXC_ERR;
    }
    return IBV_WC_GENERAL_ERR;
}

ibv_wc_opcode wc_opcode_of(api::WorkOpcode op) {
    switch (op) {
        case api::WorkOpcode::kSend:
        case api::WorkOpcode::kSendImm: return IBV_WC_SEND;
        case api::WorkOpcode::kWrite:
        case api::WorkOpcode::kWriteImm: return IBV_WC_RDMA_WRITE;
        case api::WorkOpcode::kRead: return IBV_WC_RDMA_READ;
        case api::WorkOpcode::kAtomicFetchAdd: return IBV_WC_FETCH_ADD;
        case api::WorkOpcode::kAtomicCompareSwap: return IBV_WC_COMP_SWAP;
        case api::WorkOpcode::kRecv: return IBV_WC_RECV;
        case api::WorkOpcode::kRecvWriteImm: return IBV_WC_RECV_RDMA_WITH_IMM;
    }
    return IBV_WC_SEND;
}

}  // namespace mroce::verbs

namespace {

void to_wc(const api::Completion& c, ibv_wc& wc) {
    wc = ibv_wc{};
    wc.wr_id = c.wr_id;
    wc.status = wc_status_of(c.status);
    wc.opcode = wc_opcode_of(c.opcode);
    // On error verbs defines only wr_id, status, qp_num and vendor_err.
    wc.vendor_err = static_cast<uint32_t>(c.status);
    wc.byte_len = c.byte_len;
    if (c.has_imm) {
        wc.imm_data = c.imm;  // verbatim: both ends pass the application's 32 bits through
        wc.wc_flags = IBV_WC_WITH_IMM;
    }
    wc.qp_num = c.stream;
}

// on_completion is the CQ's notify hook (api CompletionQueue::set_notify).
void on_completion(void* arg) {
    Cq* cq = static_cast<Cq*>(arg);
    if (!cq->channel || !cq->armed.exchange(false)) return;
    Channel* ch = cq->channel;
    {
        std::lock_guard<std::mutex> g(ch->mu);
        ch->pending.push_back(&cq->ibv);
    }
    const uint64_t one = 1;
    (void)!::write(ch->ibv.fd, &one, sizeof(one));
}

}  // namespace

namespace mroce::verbs {

int poll_cq(ibv_cq* ibcq, int num_entries, ibv_wc* wc) {
    if (num_entries < 0 || (num_entries > 0 && !wc)) return -1;
    Cq* cq = outer<Cq>(ibcq);
    std::array<api::Completion, 32> buf;
    int total = 0;
    bool progressed = false;
    while (total < num_entries) {
        const size_t want = std::min<size_t>(buf.size(), static_cast<size_t>(num_entries - total));
        const size_t n = cq->cq->poll(std::span(buf.data(), want));
        for (size_t i = 0; i < n; ++i) to_wc(buf[i], wc[total + static_cast<int>(i)]);
        total += static_cast<int>(n);
        if (n == want) continue;
        // An empty CQ: move packets from this thread once, in case the progress thread is
        // not running (a busy-polling application on a small machine), then look again.
        // A CQ not armed for an event is polled in a loop, so the progress thread stands
        // by for this thread (MROCE_STAND_BY_US); an armed one is polled before a sleep.
        if (total > 0 || progressed) break;
        progressed = true;
        if (!cq->dev->try_progress(!cq->armed.load(std::memory_order_relaxed))) break;
    }
    return total;
}

int req_notify_cq(ibv_cq* ibcq, int /*solicited_only: every completion counts*/) {
    Cq* cq = outer<Cq>(ibcq);
    if (!cq->channel) return EINVAL;
    cq->armed.store(true);
    // The application will sleep on the channel: the progress thread must not stand by.
    cq->dev->release_stand_by();
    return 0;
}

Cq* create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
              int comp_vector) {
    if (!context || cqe < 1 || comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
        errno = EINVAL;
        return nullptr;
    }
    Context* ctx = context_of(context);
    auto* cq = new (std::nothrow) Cq{};
    if (!cq) {
        errno = ENOMEM;
        return nullptr;
    }
    cq->dev = ctx->dev;
    cq->cq = ctx->dev->create_cq();
    cq->ibv.context = context;
    cq->ibv.channel = channel;
    cq->ibv.cq_context = cq_context;
    cq->ibv.cqe = cqe;  // the queue grows as needed; report what was asked for
    pthread_mutex_init(&cq->ibv.mutex, nullptr);
    pthread_cond_init(&cq->ibv.cond, nullptr);
    if (channel) {
        cq->channel = outer<Channel>(channel);
        ++channel->refcnt;
        cq->cq->set_notify(on_completion, cq);
    }
    return cq;
}

}  // namespace mroce::verbs

extern "C" {

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
    if (!context) {
        errno = EINVAL;
        return nullptr;
    }
    auto* ch = new (std::nothrow) Channel{};
    if (!ch) {
        errno = ENOMEM;
        return nullptr;
    }
    ch->ibv.context = context;
    ch->ibv.fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (ch->ibv.fd < 0) {
        const int err = errno;
        delete ch;
        errno = err;
        return nullptr;
    }
    return &ch->ibv;
}

int ibv_destroy_comp_channel(ibv_comp_channel* ibch) {
    if (!ibch) return EINVAL;
    if (ibch->refcnt > 0) return EBUSY;  // CQs still use it
    Channel* ch = outer<Channel>(ibch);
    ::close(ch->ibv.fd);
    delete ch;
    return 0;
}

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
    Cq* cq = create_cq(context, cqe, cq_context, channel, comp_vector);
    return cq ? &cq->ibv : nullptr;
}

int ibv_resize_cq(ibv_cq* ibcq, int cqe) {
    if (!ibcq || cqe < 1) return EINVAL;
    ibcq->cqe = cqe;  // nothing to reallocate: the queue is not bounded by cqe
    return 0;
}

int ibv_destroy_cq(ibv_cq* ibcq) {
    if (!ibcq) return EINVAL;
    Cq* cq = outer<Cq>(ibcq);
    cq->cq->set_notify(nullptr, nullptr);  // from here on_completion no longer runs
    if (Channel* ch = cq->channel) {
        {
            // Withdraw the events not yet read, so get_cq_event never returns this CQ.
            std::lock_guard<std::mutex> g(ch->mu);
            std::erase(ch->pending, ibcq);
        }
        --ch->ibv.refcnt;
    }
    pthread_mutex_destroy(&ibcq->mutex);
    pthread_cond_destroy(&ibcq->cond);
    delete cq;
    return 0;
}

int ibv_get_cq_event(ibv_comp_channel* ibch, ibv_cq** cq_out, void** cq_context) {
    if (!ibch || !cq_out || !cq_context) {
        errno = EINVAL;
        return -1;
    }
    Channel* ch = outer<Channel>(ibch);
    context_of(ibch->context)->dev->release_stand_by();  // this thread sleeps now
    for (;;) {
        // Blocks, or fails with EAGAIN, as the application set the fd (O_NONBLOCK). A
        // signal ends the wait with EINTR, as rdma-core's read does: programs stop a
        // timed test with an alarm (qperf).
        uint64_t v;
        if (::read(ch->ibv.fd, &v, sizeof(v)) != static_cast<ssize_t>(sizeof(v))) return -1;
        std::lock_guard<std::mutex> g(ch->mu);
        if (ch->pending.empty()) continue;  // withdrawn by ibv_destroy_cq
        ibv_cq* cq = ch->pending.front();
        ch->pending.pop_front();
        *cq_out = cq;
        *cq_context = cq->cq_context;
        return 0;
    }
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
    if (!cq) return;
    pthread_mutex_lock(&cq->mutex);
    cq->comp_events_completed += nevents;
    pthread_cond_signal(&cq->cond);
    pthread_mutex_unlock(&cq->mutex);
}

}  // extern "C"
