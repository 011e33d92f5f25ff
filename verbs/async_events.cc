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

}  // namespace mroce::verbs

extern "C" {

int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
    if (!context || !event) {
        errno = EINVAL;
        return -1;
    }
    mroce::verbs::Context* ctx = mroce::verbs::context_of(context);
    for (;;) {
        // Blocks, or fails with EAGAIN, as the application set async_fd.
        uint64_t v;
        const ssize_t r = ::read(context->async_fd, &v, sizeof(v));
        if (r != static_cast<ssize_t>(sizeof(v))) {
            if (r < 0 && errno == EINTR) continue;
            return -1;
        }
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
