// sim/post_queue.h — the simulated application's send queues.
//
// A flow may have more WRITEs than a stream (or QP) holds at once (the engine's
// max_outstanding_wrs, Verbs' max_send_wr): 4 MiB in 1-byte messages is 4 M of them. As a
// real application does, a queue posts what the stream accepts and the rest as its
// completions free room. A queue is (host, stream); flows sharing a stream share it, in
// posting order.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <unordered_map>
#include <vector>

#include "core/work.h"
#include "util/result.h"

namespace mroce::sim {

class PostQueues {
  public:
    // post hands one WRITE to the engine of `host`.
    using PostFn = std::function<Error(uint32_t host, uint32_t stream, const core::SendWr& wr)>;

    // depth: how many WRITEs a stream may have posted and not completed (>= 1).
    explicit PostQueues(uint32_t depth) : depth_(depth < 1 ? 1 : depth) {}

    // add queues `bytes` of `flow` on (host, stream) as WRITEs of at most `piece` bytes
    // (0: one WRITE), each a copy of `wr` with its length and wr_id (flow << 32 | length),
    // and returns how many WRITEs that is. Nothing is posted until fill.
    uint64_t add(uint32_t host, uint32_t stream, uint32_t flow, const core::SendWr& wr,
                 uint64_t bytes, uint64_t piece);

    // Refused: a flow whose WRITEs the stream would not take (it failed, say), with how
    // many of them were left unposted; its queued WRITEs are dropped.
    struct Refused {
        uint32_t flow = 0;
        uint64_t wrs = 0;
        Error error = Error::kOk;
    };
    // fill posts the queue's WRITEs while the stream has room; the flows refused, if any.
    std::vector<Refused> fill(uint32_t host, uint32_t stream, const PostFn& post);

    // completed counts one completion (success or error) of a WRITE posted on (host,
    // stream); true when WRITEs are still waiting there (fill then posts the next).
    bool completed(uint32_t host, uint32_t stream);

  private:
    struct Pending {
        uint32_t flow = 0;
        uint64_t left = 0;   // bytes not yet posted
        uint64_t piece = 0;  // WRITE size
        core::SendWr wr;     // template: addresses and keys
    };
    struct Queue {
        std::deque<Pending> waiting;
        uint32_t posted = 0;  // posted, not yet completed
    };

    // key: host << 32 | stream. Looked up at every WRITE completion of a run.
    static uint64_t key(uint32_t host, uint32_t stream) { return uint64_t{host} << 32 | stream; }

    uint32_t depth_;
    std::unordered_map<uint64_t, Queue> queues_;
};

}  // namespace mroce::sim
