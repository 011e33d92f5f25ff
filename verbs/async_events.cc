// verbs/async_events.cc — ibv_get_async_event / ibv_ack_async_event over the context's
// queue of events and its eventfd (async_fd), which applications may poll.
#include <unistd.h>

#include <cerrno>

#include "verbs/verbs_internal.h"

namespace mroce::verbs {

void push_async_event(Context& ctx, const ibv_async_event& e) {
    {
        std::lock_guard<std::mutex> g(ctx.async_mu);
        ctx.async_events.push_back(e);
    }
    const uint64_t one = 1;
    (void)!::write(ctx.vctx.context.async_fd, &one, sizeof(one));
}

void on_device_event(void* arg, const api::Event& e) {
    Context& ctx = *static_cast<Context*>(arg);
    std::lock_guard<std::mutex> g(ctx.objects_mu);
    ibv_async_event ev{};
    switch (e.kind) {
        case api::EventKind::kSrqLimit:
            for (Srq* s : ctx.objects->srqs) {
                if (s->srq->id() != e.srq) continue;
                s->limit = 0;  // verbs: the limit disarms when it fires
                ev.element.srq = &s->ibv;
                ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
                push_async_event(ctx, ev);
            }
            break;
        case api::EventKind::kConnectionFailed:
            // The peer stopped answering (or refused the connection): every queue pair
            // towards it is in error now.
            for (Qp* q : ctx.objects->qps) {
                if (!q->ah_valid || !(q->peer == e.peer)) continue;
                ev.element.qp = &q->ibv();
                ev.event_type = IBV_EVENT_QP_FATAL;
                push_async_event(ctx, ev);
            }
            break;
        default: break;  // connection up/closed, path events: nothing verbs reports
    }
}

void forget_object(Context& ctx, Qp* qp, Srq* srq) {
    std::lock_guard<std::mutex> g(ctx.objects_mu);
    if (qp) ctx.objects->qps.erase(qp);
    if (srq) ctx.objects->srqs.erase(srq);
    std::lock_guard<std::mutex> a(ctx.async_mu);
    std::erase_if(ctx.async_events, [&](const ibv_async_event& e) {
        const bool names_qp = e.event_type == IBV_EVENT_QP_FATAL && qp && e.element.qp == &qp->ibv();
        const bool names_srq =
            e.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && srq && e.element.srq == &srq->ibv;
        return names_qp || names_srq;
    });
}

}  // namespace mroce::verbs

extern "C" {

int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
    if (!context || !event) {
        errno = EINVAL;
        return -1;
    }
    mroce::verbs::Context* ctx = mroce::verbs::context_of(context);
    for (;;) {
        // Blocks, or fails with EAGAIN (or EINTR), as the application set async_fd.
        uint64_t v;
        if (::read(context->async_fd, &v, sizeof(v)) != static_cast<ssize_t>(sizeof(v))) return -1;
        std::lock_guard<std::mutex> g(ctx->async_mu);
        if (ctx->async_events.empty()) continue;
        *event = ctx->async_events.front();
        ctx->async_events.pop_front();
        return 0;
    }
}

// Nothing waits for acknowledgements: destroying an object never blocks on its events.
void ibv_ack_async_event(ibv_async_event*) {}

}  // extern "C"
