#include "sim/post_queue.h"

#include <algorithm>

namespace mroce::sim {

uint64_t PostQueues::add(uint32_t host, uint32_t stream, uint32_t flow, const core::SendWr& wr,
                         uint64_t bytes, uint64_t piece) {
    if (bytes == 0) return 0;
    if (piece == 0 || piece > bytes) piece = bytes;
    queues_[key(host, stream)].waiting.push_back(Pending{flow, bytes, piece, wr});
    return (bytes + piece - 1) / piece;
}

std::vector<PostQueues::Refused> PostQueues::fill(uint32_t host, uint32_t stream,
                                                  const PostFn& post) {
    std::vector<Refused> refused;
    const auto it = queues_.find(key(host, stream));
    if (it == queues_.end()) return refused;
    Queue& q = it->second;
    while (!q.waiting.empty() && q.posted < depth_) {
        Pending& p = q.waiting.front();
        core::SendWr wr = p.wr;
        const auto len = static_cast<uint32_t>(std::min(p.piece, p.left));
        wr.length = len;
        wr.wr_id = (uint64_t{p.flow} << 32) | len;
        if (const Error e = post(host, stream, wr); e != Error::kOk) {
            // A full stream takes the next one at a completion of its own.
            if (e == Error::kExhausted && q.posted > 0) break;
            // A stream that refuses one WRITE refuses the rest: every flow still waiting
            // on it is reported with the WRITEs it will never have.
            for (const Pending& w : q.waiting)
                refused.push_back(Refused{w.flow, (w.left + w.piece - 1) / w.piece, e});
            q.waiting.clear();
            break;
        }
        ++q.posted;
        p.left -= len;
        if (p.left == 0) q.waiting.pop_front();
    }
    return refused;
}

bool PostQueues::completed(uint32_t host, uint32_t stream) {
    const auto it = queues_.find(key(host, stream));
    if (it == queues_.end()) return false;
    Queue& q = it->second;
    if (q.posted > 0) --q.posted;
    return !q.waiting.empty();
}

}  // namespace mroce::sim
