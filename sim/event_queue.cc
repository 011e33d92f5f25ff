#include "sim/event_queue.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdint>

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
    : packets_(std::make_unique<PacketPool>()),
      seed_(seed),
      root_rng_(seed),
      now_(start),
      base_((to_ps(start) >> kBucketBits) - 1) {}

Sim::~Sim() {
    // Destroy callbacks (and the packets they own) while the pool is still alive.
    current_.clear();
    for (auto& w : wheel_) w.clear();
    overflow_.clear();
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
    queue_push(Entry{to_ps(t), s.seq, i});
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
    // The queue entry stays until it reaches the head or a compaction; its seq no longer
    // matches the slot's, which is how it is recognised as stale.
    if (queued_ > 4096 && queued_ > 2 * live_events_) compact();
    return true;
}

void Sim::compact() {
    auto stale = [this](const Entry& e) { return slot(e.slot).seq != e.seq; };
    current_.erase(current_.begin(), current_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
    std::erase_if(current_, stale);  // keeps the order
    for (size_t i = 0; i < kWheelSlots; ++i) {
        std::erase_if(wheel_[i], stale);
        if (wheel_[i].empty()) wheel_nonempty_[i / 64] &= ~(uint64_t{1} << (i % 64));
    }
    std::erase_if(overflow_, stale);
    std::make_heap(overflow_.begin(), overflow_.end(), later);
    queued_ = live_events_;
}

void Sim::current_insert(const Entry& e) {
    // current_ is ascending from head_; e goes after everything that runs before it, which
    // for the usual case (a later time, and always a larger seq) is at or near the end.
    auto pos = std::upper_bound(current_.begin() + static_cast<std::ptrdiff_t>(head_),
                                current_.end(), e,
                                [](const Entry& v, const Entry& x) { return later(x, v); });
    current_.insert(pos, e);
}

void Sim::queue_push(const Entry& e) {
    ++queued_;
    const int64_t b = bucket_of(e);
    if (b <= base_) {
        current_insert(e);
    } else if (b - base_ < static_cast<int64_t>(kWheelSlots)) {
        const size_t i = static_cast<size_t>(b) % kWheelSlots;
        wheel_[i].push_back(e);
        wheel_nonempty_[i / 64] |= uint64_t{1} << (i % 64);
    } else {
        overflow_.push_back(e);
        std::push_heap(overflow_.begin(), overflow_.end(), later);
    }
}

bool Sim::queue_settle_head() {
    if (head_ < current_.size()) return true;
    if (queued_ == 0) return false;
    // The next bucket is the first non-empty wheel slot after base_ (every wheel entry
    // lies in (base_, base_ + kWheelSlots), one bucket per slot) or the overflow's
    // earliest, whichever comes first.
    int64_t next = INT64_MAX;
    const size_t start = static_cast<size_t>(base_ + 1) % kWheelSlots;
    for (size_t n = 0; n <= kWheelSlots; n += 64) {
        // Bits of the 64 slots from start + n on (wrapping), as one word.
        const size_t i = (start + n) % kWheelSlots;
        uint64_t word = wheel_nonempty_[i / 64] >> (i % 64);
        if (i % 64 != 0)
            word |= wheel_nonempty_[(i / 64 + 1) % (kWheelSlots / 64)] << (64 - i % 64);
        if (word != 0) {
            const size_t d = n + static_cast<size_t>(std::countr_zero(word));
            if (d < kWheelSlots) next = base_ + 1 + static_cast<int64_t>(d);
            break;
        }
    }
    if (!overflow_.empty()) next = std::min(next, bucket_of(overflow_.front()));
    MROCE_DCHECK(next != INT64_MAX);
    base_ = next;
    const size_t i = static_cast<size_t>(next) % kWheelSlots;
    if (wheel_nonempty_[i / 64] >> (i % 64) & 1) {
        // Copied, not swapped: swapping would pass the largest buffer from slot to slot
        // until every slot had one (phase-locked ports fill one bucket with a thousand
        // events at start). A slot that held an unusually large bucket frees it.
        current_.assign(wheel_[i].begin(), wheel_[i].end());
        if (wheel_[i].capacity() > kSlotKeepEntries) wheel_[i] = std::vector<Entry>{};
        else wheel_[i].clear();
        wheel_nonempty_[i / 64] &= ~(uint64_t{1} << (i % 64));
    }
    bool from_overflow = false;
    while (!overflow_.empty() && bucket_of(overflow_.front()) == next) {
        std::pop_heap(overflow_.begin(), overflow_.end(), later);
        current_.push_back(overflow_.back());
        overflow_.pop_back();
        from_overflow = true;
    }
    sort_current(!from_overflow);
    return true;
}

// sort_current orders the new current bucket by (time, seq). A wheel slot's entries were
// appended in seq order, so a stable sort on the time offset within the bucket (10 bits)
// is enough: two counting passes of kBucketBits / 2 bits, or an insertion sort when few.
// (Phase-locked ports put a few hundred events into one nanosecond.) Entries taken from the
// overflow heap break the seq order; then it is a plain comparison sort.
void Sim::sort_current(bool seq_ordered) {
    auto earlier = [](const Entry& a, const Entry& b) { return later(b, a); };
    const size_t n = current_.size();
    if (!seq_ordered) {
        std::sort(current_.begin(), current_.end(), earlier);
        return;
    }
    if (n <= 24) {
        for (size_t i = 1; i < n; ++i) {
            const Entry e = current_[i];
            size_t j = i;
            for (; j > 0 && e.time_ps < current_[j - 1].time_ps; --j) current_[j] = current_[j - 1];
            current_[j] = e;
        }
        return;
    }
    constexpr int kDigitBits = kBucketBits / 2;
    constexpr int64_t kDigitMask = (int64_t{1} << kDigitBits) - 1;
    static_assert(kBucketBits % 2 == 0, "two passes cover the offset in a bucket");
    scratch_.resize(n);
    std::vector<Entry>* src = &current_;
    std::vector<Entry>* dst = &scratch_;
    for (int shift = 0; shift < kBucketBits; shift += kDigitBits) {
        std::array<uint32_t, (size_t{1} << kDigitBits) + 1> start{};
        for (const Entry& e : *src)
            ++start[static_cast<size_t>((e.time_ps >> shift) & kDigitMask) + 1];
        for (size_t d = 1; d < start.size(); ++d) start[d] += start[d - 1];
        for (const Entry& e : *src)
            (*dst)[start[static_cast<size_t>((e.time_ps >> shift) & kDigitMask)]++] = e;
        std::swap(src, dst);
    }
    // Two passes: the result is back in current_.
    MROCE_SLOW_DCHECK(std::is_sorted(current_.begin(), current_.end(), earlier));
}

bool Sim::pop_stale_head() {
    while (queue_settle_head()) {
        const Entry& top = queue_head();
        if (slot(top.slot).seq == top.seq) return true;
        queue_pop_head();
    }
    return false;
}

// prefetch_next starts loading, while the current event runs, what the next events will
// touch first: the slot of the event after next, and the object the next event's callable
// points at (its captured `this`: a link, a switch port, a host), read from its slot, which
// the previous event prefetched. With ~100 k packets in flight over thousands of ports and
// links, that object is usually not in cache; one event is enough time to fetch it. Only
// hints: an entry may be stale, a word may not be a pointer; prefetching never faults.
namespace {

// prefetch asks for the line holding address a. GCC 12 drops __builtin_prefetch once
// prefetch_next is inlined into run_until (checked in the disassembly), hence the asm.
inline void prefetch(uintptr_t a) {
#if defined(__x86_64__)
    asm volatile("prefetcht0 (%0)" : : "r"(a));
#else
    __builtin_prefetch(reinterpret_cast<const void*>(a));
#endif
}

}  // namespace

// Inlined into run_until: called once per event, a call would cost as much as its body.
[[gnu::always_inline]] inline void Sim::prefetch_next() {
    const size_t n = current_.size();
    if (head_ + 1 < n) prefetch(reinterpret_cast<uintptr_t>(&slot(current_[head_ + 1].slot)));
    if (head_ < n) {
        // Integer arithmetic: the word may be null or not a pointer at all.
        const auto target = reinterpret_cast<uintptr_t>(slot(current_[head_].slot).fn.first_word());
        prefetch(target);
        prefetch(target + 64);
    }
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
        const Entry top = queue_head();
        if (top.time_ps > limit_ps) {
            if (time_limit > now_) now_ = time_limit;
            result.reason = StopReason::kTimeLimit;
            return result;
        }
        queue_pop_head();
        prefetch_next();

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
