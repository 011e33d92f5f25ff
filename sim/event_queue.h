// sim/event_queue.h — sim::Sim, the discrete-event core: one clock, one event queue, the
// root random generator and the packet pool of one simulation.
//
// Ordering: events run in (time, insertion sequence) order. Two events scheduled for the
// same picosecond run in the order they were scheduled (FIFO among ties), whoever
// scheduled them; an event scheduled for "now" from inside a callback runs after every
// event already queued for now. This is the multimap order of quiche's and htsim's
// simulators, made explicit, and it is what makes a run reproducible from its seed.
//
// No globals: any number of Sims may exist in one process. A component takes a Sim& and
// must outlive every run of that Sim after the component scheduled something (components
// in sim/ cancel their own pending events when destroyed, so destroying them is safe).
// Destroying a Sim destroys its pending callbacks without running them.
//
// Threading: a Sim and everything attached to it are used from one thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "sim/callback.h"
#include "sim/packet.h"
#include "sim/sim_time.h"
#include "util/rng.h"

namespace mroce::sim {

// EventHandle names one scheduled event. Default-constructed handles name nothing.
// A handle stays safe to use after its event ran or was cancelled (cancel returns false).
struct EventHandle {
    uint32_t slot = 0;
    uint64_t seq = 0;  // 0 = no event; otherwise the event's unique insertion sequence
    bool valid() const { return seq != 0; }
};

// Why run_until returned.
enum class StopReason : uint8_t {
    kPredicate,   // the predicate became true (checked before the first and after each event)
    kTimeLimit,   // the next event is later than the time limit; now() == time limit
    kBudget,      // max_events events ran in this call
    kQueueEmpty,  // nothing left to run; now() stays at the last event's time
};
const char* to_string(StopReason r);

struct RunResult {
    StopReason reason = StopReason::kQueueEmpty;
    uint64_t events = 0;  // events run by this call
};

// A runaway simulation (a livelock, an engine that never stops) must fail, not hang:
// every run has a budget. 10M events is a few seconds even in a sanitizer build.
inline constexpr uint64_t kDefaultMaxEvents = 10'000'000;

class Sim {
  public:
    // Sim(seed) starts at `start` with a root Rng seeded by `seed`. Components derive
    // their streams with fork_rng(label), never from a shared generator.
    explicit Sim(uint64_t seed, SimTime start = SimTime{});
    ~Sim();
    Sim(const Sim&) = delete;
    Sim& operator=(const Sim&) = delete;

    SimTime now() const { return now_; }
    uint64_t seed() const { return seed_; }

    // fork_rng returns an independent stream for `label` (e.g. "link/3>5#2/loss"). It
    // depends only on the seed and the label, never on what was created or drawn before,
    // so adding a component cannot shift another component's random sequence. Labels
    // must be unique per consumer.
    Rng fork_rng(std::string_view label) const { return root_rng_.fork(label); }

    // schedule_at queues cb to run at time t (t >= now(); an earlier t is a caller bug and
    // is clamped to now()). Returns a handle for cancel(). Allocation-free once the
    // queue has warmed up, for callables of up to 48 bytes (see callback.h).
    EventHandle schedule_at(SimTime t, Callback cb);
    // schedule_in queues cb to run at now() + d (d >= 0).
    EventHandle schedule_in(SimDuration d, Callback cb) {
        return schedule_at(now_ + d, std::move(cb));
    }

    // cancel removes a pending event and destroys its callback at once; O(1) (the queue
    // entry is dropped lazily). Returns false if the event already ran, was cancelled,
    // is running now, or h is empty.
    bool cancel(EventHandle h);
    // pending is true while the event named by h is queued and not yet started.
    bool pending(EventHandle h) const;

    // run_until runs events in order until `done` returns true (checked before the first
    // event and after each one; an empty function never stops the run), the next event
    // is later than time_limit (inclusive: events at time_limit run; now() then becomes
    // time_limit), max_events events have run in this call, or the queue is empty.
    // Callbacks must not call run_until recursively.
    RunResult run_until(const std::function<bool()>& done, SimTime time_limit = kSimForever,
                        uint64_t max_events = kDefaultMaxEvents);
    // run_for runs until now() + d (or the budget, or an empty queue).
    RunResult run_for(SimDuration d, uint64_t max_events = kDefaultMaxEvents) {
        return run_until({}, now_ + d, max_events);
    }

    size_t pending_events() const { return live_events_; }
    uint64_t events_run() const { return events_run_; }  // since construction

    // packets is the pool every packet of this simulation comes from.
    PacketPool& packets() { return *packets_; }

  private:
    // One slot per cache line: running an event touches exactly one line of slot memory
    // (the callable, its ops pointer and the seq), never two.
    struct alignas(64) Slot {
        Callback fn;
        uint64_t seq = 0;  // seq of the event held, 0 when free
    };
    static_assert(sizeof(Slot) == 64);
    struct Entry {
        int64_t time_ps;
        uint64_t seq;
        uint32_t slot;
    };
    static constexpr uint32_t kChunkBits = 10;
    static constexpr uint32_t kChunkSize = 1u << kChunkBits;
    // Timing wheel: bucket n holds times [n, n + 1) * 2^kBucketBits ps (4.1 ns); the wheel
    // covers kWheelSlots buckets ahead of the current one (4.2 us: a serialisation plus a
    // wire delay).
    static constexpr int kBucketBits = 12;
    static constexpr size_t kWheelSlots = 1024;
    static constexpr size_t kSlotKeepEntries = 64;  // larger slot buffers are freed when drained

    Slot& slot(uint32_t i) { return chunks_[i >> kChunkBits][i & (kChunkSize - 1)]; }
    const Slot& slot(uint32_t i) const { return chunks_[i >> kChunkBits][i & (kChunkSize - 1)]; }
    uint32_t alloc_slot();
    bool pop_stale_head();  // drops cancelled entries at the head; false if queue empty
    void compact();
    void queue_push(const Entry& e);
    bool queue_settle_head();  // makes the minimum current_[head_]; false if queue empty
    const Entry& queue_head() const { return current_[head_]; }
    void prefetch_next();
    void queue_pop_head() {
        if (++head_ == current_.size()) {
            current_.clear();
            head_ = 0;
        }
        --queued_;
    }
    void current_insert(const Entry& e);
    void sort_current(bool seq_ordered);
    static int64_t bucket_of(const Entry& e) { return e.time_ps >> kBucketBits; }
    // later is the strict (time, seq) order: a runs after b.
    static bool later(const Entry& a, const Entry& b) {
        return a.time_ps != b.time_ps ? a.time_ps > b.time_ps : a.seq > b.seq;
    }

    // The pool is declared first so it is destroyed last: pending callbacks may own
    // packets, and destroying them returns those packets to the pool.
    std::unique_ptr<PacketPool> packets_;
    uint64_t seed_;
    Rng root_rng_;
    SimTime now_;
    uint64_t next_seq_ = 1;
    uint64_t events_run_ = 0;
    size_t live_events_ = 0;
    // Callbacks live in fixed chunks so a running callback never moves when another one is
    // scheduled; the queue holds only 24-byte entries.
    std::vector<std::unique_ptr<Slot[]>> chunks_;
    uint32_t slots_used_ = 0;
    std::vector<uint32_t> free_slots_;
    // The queue is a timing wheel of flat arrays (a calendar queue, as in ns-2): almost
    // every event lands within a few microseconds, so a push is an append to its bucket's
    // array and a pop takes the front of current_, the earliest bucket, sorted once when it
    // becomes current (tens to hundreds of entries), not a sift through a heap of every
    // pending event. Events beyond the wheel (long timers) wait in a small heap. An event
    // for the current bucket or earlier (a zero delay, or one scheduled after run_until
    // stopped at a time limit) is inserted into current_ in order. Entries may be stale
    // (cancelled): their seq no longer matches their slot's.
    std::vector<Entry> current_;  // bucket base_ and earlier, ascending from head_
    size_t head_ = 0;             // current_[head_] is the minimum; earlier ones have run
    std::array<std::vector<Entry>, kWheelSlots> wheel_;  // bucket n in wheel_[n % slots]
    std::array<uint64_t, kWheelSlots / 64> wheel_nonempty_{};
    std::vector<Entry> overflow_;  // min-heap (by later) of buckets >= base_ + kWheelSlots
    int64_t base_ = INT64_MIN;     // the current bucket; only grows
    size_t queued_ = 0;            // entries everywhere, stale ones included
    std::vector<Entry> scratch_;   // sort_current's second buffer
};

}  // namespace mroce::sim
