// api/stage_trace.h — timestamps of the stages a message passes through the API, the
// driver loop and the datapath in one process (issue 19: where the latency goes).
//
// Off unless DeviceConfig::stage_trace points at one: each stage is then one branch on a
// null pointer. On, a stamp is a CLOCK_MONOTONIC read (the vDSO, tens of ns) and a store
// into a ring that is allocated up front, so tracing does not allocate, take a lock or
// print on the data path. CLOCK_MONOTONIC is one clock for every process of a host, so
// the stamps of the two ends of a loopback run line up on one time line
// (scripts/latency-stages.py merges them into a per-stage table).
//
// Threading: stamp may be called from any thread (a slot is claimed with one atomic
// add); each stamp names its thread, so a stall can be told apart as the application's or
// the progress thread's. The entries are read with entries() once the traced work is over.
#pragma once

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace mroce::api {

// Stage: what was just done when the stamp was taken. `count` in the entry says how many
// work requests, datagrams or completions it covered.
enum class Stage : uint8_t {
    kPost,       // QueuePair::post_send handed a work request to the engine
    kEngineTx,   // a driver pass collected datagrams from the engine (poll_transmit)
    kSent,       // the datapath's send system call returned with them accepted
    kWoke,       // a sleeping wait() returned (epoll: data, posted work or a timer)
    kReceived,   // the datapath's receive system call returned datagrams
    kEngineRx,   // the engine took them (placement, ACK processing, completions queued)
    kCompleted,  // completions reached their completion queues (the engine's events routed)
    kPolled,     // CompletionQueue::poll returned completions to the application
    kCount
};

constexpr std::string_view stage_name(Stage s) {
    switch (s) {
        case Stage::kPost: return "post";
        case Stage::kEngineTx: return "engine_tx";
        case Stage::kSent: return "sent";
        case Stage::kWoke: return "woke";
        case Stage::kReceived: return "received";
        case Stage::kEngineRx: return "engine_rx";
        case Stage::kCompleted: return "completed";
        case Stage::kPolled: return "polled";
        case Stage::kCount: break;
    }
    return "?";
}

struct StageStamp {
    int64_t ns = 0;  // CLOCK_MONOTONIC
    Stage stage = Stage::kPost;
    uint32_t count = 0;
    uint32_t tid = 0;  // the stamping thread (gettid): an application's or a progress thread
};

// StageTrace keeps the last `capacity` stamps (a ring: a long run keeps its end).
class StageTrace {
public:
    explicit StageTrace(size_t capacity) : ring_(capacity ? capacity : 1) {}

    void stamp(Stage s, uint32_t count = 1) {
        timespec ts;
        ::clock_gettime(CLOCK_MONOTONIC, &ts);
        const uint64_t i = next_.fetch_add(1, std::memory_order_relaxed);
        static thread_local const uint32_t tid = static_cast<uint32_t>(::gettid());
        ring_[i % ring_.size()] = StageStamp{ts.tv_sec * 1'000'000'000 + ts.tv_nsec, s, count, tid};
    }

    // entries: the stamps kept, oldest first. Call when no thread stamps any more.
    std::vector<StageStamp> entries() const {
        const uint64_t n = next_.load();
        const size_t kept = n < ring_.size() ? static_cast<size_t>(n) : ring_.size();
        std::vector<StageStamp> out;
        out.reserve(kept);
        for (uint64_t i = n - kept; i < n; ++i) out.push_back(ring_[i % ring_.size()]);
        return out;
    }
    // clear forgets every stamp (between runs). Same condition as entries().
    void clear() { next_.store(0); }

private:
    std::vector<StageStamp> ring_;
    std::atomic<uint64_t> next_{0};
};

}  // namespace mroce::api
