#include "sim/event_queue.h"

#include <algorithm>

#include "util/check.h"

namespace mroce::sim {

const char* to_string(StopReason r) {
    switch (r) {
        case StopReason::kPredicate:
            return "predicate";
        case StopReason::kTimeLimit:
            return "time limit";
        case StopReason::kBudget:
            return "event budget exhausted";
        case StopReason::kQueueEmpty:
            return "queue empty";
    }
    return "unknown";
}

Sim::Sim(uint64_t seed, SimTime start)
    : packets_(std::make_unique<PacketPool>()), seed_(seed), root_rng_(seed), now_(start) {}

Sim::~Sim() {
    // Destroy callbacks (and the packets they own) while the pool is still alive.
    heap_.clear();
    chunks_.clear();
}

uint32_t Sim::alloc_slot() {
    if (!free_slots_.empty()) {
        uint32_t i = free_slots_.back();
        free_slots_.pop_back();
        return i;
    }
    if ((slots_used_ >> kChunkBits) == chunks_.size())
        chunks_.push_back(std::make_unique<Slot[]>(kChunkSize));
    return slots_used_++;
}

EventHandle Sim::schedule_at(SimTime t, Callback cb) {
    MROCE_DCHECK(t >= now_);
    MROCE_DCHECK(static_cast<bool>(cb));
    if (t < now_) t = now_;
    const uint32_t i = alloc_slot();
    Slot& s = slot(i);
    s.fn = std::move(cb);
    s.seq = next_seq_++;
    heap_push(Entry{to_ps(t), s.seq, i});
    ++live_events_;
    return EventHandle{i, s.seq};
}

bool Sim::pending(EventHandle h) const {
    return h.valid() && (h.slot >> kChunkBits) < chunks_.size() && slot(h.slot).seq == h.seq;
}

bool Sim::cancel(EventHandle h) {
    if (!pending(h)) return false;
    Slot& s = slot(h.slot);
    s.seq = 0;
    s.fn.reset();
    free_slots_.push_back(h.slot);
    --live_events_;
    // The heap entry stays until it reaches the head or a compaction; its seq no longer
    // matches the slot's, which is how it is recognised as stale.
    if (heap_.size() > 4096 && heap_.size() > 2 * live_events_) compact();
    return true;
}

void Sim::compact() {
    std::erase_if(heap_, [this](const Entry& e) { return slot(e.slot).seq != e.seq; });
    // A sorted array is a valid heap of any arity.
    std::sort(heap_.begin(), heap_.end(),
              [](const Entry& a, const Entry& b) { return later(b, a); });
}

// A 4-ary heap: half the depth of a binary one, and the four children of a node share a
// cache line or two, which matters once hundreds of thousands of events are pending.
void Sim::heap_push(Entry e) {
    size_t i = heap_.size();
    heap_.push_back(e);
    while (i > 0) {
        const size_t parent = (i - 1) / kArity;
        if (!later(heap_[parent], e)) break;
        heap_[i] = heap_[parent];
        i = parent;
    }
    heap_[i] = e;
}

void Sim::heap_pop() {
    const Entry last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n == 0) return;
    size_t i = 0;
    for (;;) {
        const size_t first = kArity * i + 1;
        if (first >= n) break;
        size_t best = first;
        const size_t end = std::min(first + kArity, n);
        for (size_t c = first + 1; c < end; ++c)
            if (later(heap_[best], heap_[c])) best = c;
        if (!later(last, heap_[best])) break;
        heap_[i] = heap_[best];
        i = best;
    }
    heap_[i] = last;
}

bool Sim::pop_stale_head() {
    while (!heap_.empty()) {
        const Entry& top = heap_.front();
        if (slot(top.slot).seq == top.seq) return true;
        heap_pop();
    }
    return false;
}

RunResult Sim::run_until(const std::function<bool()>& done, SimTime time_limit,
                         uint64_t max_events) {
    RunResult result;
    if (done && done()) {
        result.reason = StopReason::kPredicate;
        return result;
    }
    const int64_t limit_ps = to_ps(time_limit);
    for (;;) {
        if (result.events >= max_events) {
            result.reason = StopReason::kBudget;
            return result;
        }
        if (!pop_stale_head()) {
            result.reason = StopReason::kQueueEmpty;
            return result;
        }
        const Entry top = heap_.front();
        if (top.time_ps > limit_ps) {
            if (time_limit > now_) now_ = time_limit;
            result.reason = StopReason::kTimeLimit;
            return result;
        }
        heap_pop();

        now_ = sim_time_from_ps(top.time_ps);
        Slot& s = slot(top.slot);
        // The event stops being pending before it runs, so cancelling itself is a no-op;
        // the slot is recycled only after the callback returns, so the callable does not
        // move or die while it runs, whatever it schedules. Chunks never move.
        s.seq = 0;
        --live_events_;
        s.fn();
        s.fn.reset();
        free_slots_.push_back(top.slot);
        ++events_run_;
        ++result.events;

        if (done && done()) {
            result.reason = StopReason::kPredicate;
            return result;
        }
    }
}

}  // namespace mroce::sim
