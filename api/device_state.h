// api/device_state.h — internal: the state behind Device, CompletionQueue and QueuePair
// (api/device.cc), and the queue pair state machine (api/qp_state.cc). Not installed.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/device.h"
#include "core/endpoint.h"
#include "datapath/udp/steering.h"
#include "obs/observer.h"
#include "obs/server.h"

namespace mroce::api {

namespace detail {

struct CqState {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Completion> queue;
    size_t waiters = 0;
    // CompletionQueue::set_notify's hook; called with mu held, so that clearing it
    // guarantees no call is still running once set_notify returns.
    void (*notify_fn)(void*) = nullptr;
    void* notify_arg = nullptr;
    // How many queue pairs of each shard complete here (a queue pair whose send and
    // receive CQ this is counts twice): the shards a busy-polling wait drives
    // (CompletionQueue::wait). Changed under the queue pair's engine lock, read without.
    std::array<std::atomic<uint32_t>, datapath::kMaxShards> qps_in_shard{};

    // push queues a completion and tells the waiters; enqueue only queues it, and
    // notify_waiters tells them later (DeviceState::on_event, for a batch of completions).
    void push(const Completion& c) {
        enqueue(c);
        notify_waiters();
    }
    void enqueue(const Completion& c) {
        std::lock_guard<std::mutex> g(mu);
        queue.push_back(c);
    }
    void notify_waiters() {
        std::lock_guard<std::mutex> g(mu);
        if (waiters) cv.notify_all();
        if (notify_fn) notify_fn(notify_arg);
    }
};

// QpRecord is the engine-lock-guarded state of one queue pair.
struct QpRecord {
    uint32_t pd = 0;
    QpAttr attr;               // attr.state is the state the application last set
    bool stream_live = true;   // the engine stream exists (false in ERR: it was destroyed)
    bool held = false;         // the number is held in the engine (Endpoint::hold_stream)
    uint32_t srq = 0;          // the engine SRQ its receives come from, or 0
    // A sharded device (docs/design.md §12): receives posted in INIT, before RTR tells
    // which shard the queue pair goes to; they are posted again in that shard. A receive
    // keeps a copy of its scatter list: the application's may be gone by RTR (verbs posts
    // every ibv_recv_wr as a list, ibv_rc_pingpong's from its stack).
    struct EarlyRecv {
        explicit EarlyRecv(const RecvWr& w) : wr(w), sg(w.sg_list, w.sg_list + (w.sg_list ? w.num_sge : 0)) {
            wr.sg_list = nullptr;
        }
        // the receive as posted, its list pointing at the copy
        RecvWr get() const {
            RecvWr w = wr;
            if (!sg.empty()) w.sg_list = sg.data();
            return w;
        }
        RecvWr wr;
        std::vector<core::Sge> sg;
    };
    std::vector<EarlyRecv> early_recvs;
    std::shared_ptr<CqState> send_cq, recv_cq;

    // count_in: the queue pair now completes from `shard` (+1) or no longer does (-1), for
    // its CQs' qps_in_shard. Under the engine lock of that shard.
    void count_in(uint32_t shard, int delta) const {
        for (const auto* cq : {&send_cq, &recv_cq})
            if (*cq) (*cq)->qps_in_shard[shard].fetch_add(static_cast<uint32_t>(delta), std::memory_order_relaxed);
    }
};

struct DeviceState {
    DeviceConfig cfg;
    Address local;
    // Sharding (DeviceConfig::threads, docs/design.md §12). Every shard is a DeviceState
    // of its own (engine, lock, datapath, driver, queue pair table); shard 0 is the
    // device, which every API object points at, and owns the others.
    uint32_t shard_index = 0;
    std::vector<std::shared_ptr<DeviceState>> other_shards;  // shards 1..N-1 (shard 0 only)
    uint32_t num_shards() const { return 1 + static_cast<uint32_t>(other_shards.size()); }
    DeviceState& shard(uint32_t i) { return i == 0 ? *this : *other_shards[i - 1]; }
    // mirror_mu (shard 0's) serialises what is mirrored in every shard (protection domains,
    // memory regions), so that each shard sees the same registrations in the same order
    // and gives them the same keys. Taken before any engine lock; never on the packet path.
    std::mutex mirror_mu;
    // The next event number of every shard's observer (shard 0's; Observer::share_sequence),
    // so that `mroce stat --events` follows one log for the device (api/metrics.cc).
    std::atomic<uint64_t> event_seq{1};

    // The engine lock guards everything down to `connections`.
    std::mutex engine_mu;
    std::unique_ptr<core::Endpoint> endpoint;
    obs::Observer observer;  // the endpoint's trace sink: RTT histograms, event log
    bool closed = false;
    std::unordered_map<uint32_t, QpRecord> qps;  // by queue pair number
    // CQs that on_event queued completions in and whose waiters notify_cqs has yet to
    // tell. A CQ lives while a queue pair of this shard names it (QpRecord), and a pass's
    // events and their notification happen under one hold of engine_mu.
    std::vector<CqState*> cqs_owed;
    std::set<uint32_t> connections;  // connection ids to close at shutdown
    uint64_t completions_unrouted = 0;

    std::mutex events_mu;
    std::deque<Event> events;
    uint64_t events_dropped = 0;
    void (*event_fn)(void*, const Event&) = nullptr;  // Device::set_event_notify; events_mu
    void* event_arg = nullptr;

    std::unique_ptr<datapath::UdpDatapath> dp;
    std::unique_ptr<Driver> driver;
    datapath::UdpStats final_udp_stats;  // after shutdown
    std::unique_ptr<obs::StatServer> stat_server;  // `mroce stat` and /metrics; may be null

    // on_event routes one engine event; called by the driver with engine_mu held.
    void on_event(const Event& e) {
        if (e.kind == EventKind::kCompletion) {
            const Completion& c = e.completion;
            auto it = qps.find(c.stream);
            if (it == qps.end()) {
                ++completions_unrouted;
                return;
            }
            const bool responder =
                c.opcode == WorkOpcode::kRecv || c.opcode == WorkOpcode::kRecvWriteImm;
            CqState* cq = (responder ? it->second.recv_cq : it->second.send_cq).get();
            cq->enqueue(c);
            if (std::find(cqs_owed.begin(), cqs_owed.end(), cq) == cqs_owed.end()) cqs_owed.push_back(cq);
            return;
        }
        if (e.kind == EventKind::kConnectionUp) connections.insert(e.connection);
        std::lock_guard<std::mutex> g(events_mu);
        if (events.size() >= Device::kMaxEvents) {
            events.pop_front();
            ++events_dropped;
        }
        events.push_back(e);
        if (event_fn) event_fn(event_arg, e);
    }

    Time now() const { return dp->now(); }

    // notify_cqs tells the waiters of every CQ that on_event queued completions in since
    // the last call, once each: after a batch, so that none is told before the batch's
    // other completions are queued (DriverConfig::events_delivered). engine_mu held.
    void notify_cqs() {
        for (CqState* cq : cqs_owed) cq->notify_waiters();
        cqs_owed.clear();
    }

    // drain_events routes the engine's pending events now (engine_mu held), so that
    // completions the API makes itself come after the engine's earlier ones.
    void drain_events() {
        while (auto e = endpoint->poll_event()) on_event(*e);
        notify_cqs();
    }

    // linger_closes drives the endpoint until every connection closed at shutdown has its
    // close confirmed by the peer ([CONN-29]) or cfg.close_linger has passed, sending each
    // unconfirmed CLOSE again with a doubling interval from min_pto. The progress thread
    // is stopped: this thread is the only one driving.
    void linger_closes() {
        if (cfg.close_linger <= Duration::zero()) return;
        const Time start = now();
        const Time deadline = start + cfg.close_linger;
        Duration interval = cfg.endpoint.min_pto;
        Time next_resend = start + interval;
        for (;;) {
            const Time t = now();
            bool waiting = false;
            {
                std::lock_guard<std::mutex> g(engine_mu);
                for (uint32_t id : connections) {
                    if (!endpoint->close_unconfirmed(id)) continue;
                    waiting = true;
                    // The driver's pass reads the engine only when told of work: a CLOSE
                    // queued from here without notify() stayed queued (CI, 7 Dec: the
                    // first CLOSE went out on a path whose source port another socket
                    // held, and no resend left).
                    if (t >= next_resend && endpoint->repeat_close(id, t)) driver->notify();
                }
            }
            if (!waiting || t >= deadline) return;
            if (t >= next_resend) {
                interval *= 2;
                next_resend = t + interval;
            }
            (void)driver->run_once();
            driver->wait(std::min(next_resend, deadline) - now());
        }
    }

    // shutdown: stop progress, close every connection, send the CLOSEs, close sockets;
    // the other shards first, each as a device of its own.
    void shutdown() {
        stat_server.reset();  // no snapshot runs once this returns
        for (auto& other : other_shards) other->driver->stop_thread();
        for (auto& other : other_shards) other->shutdown();
        driver->stop_thread();
        {
            std::lock_guard<std::mutex> g(engine_mu);
            closed = true;
            const Time t = now();
            if (cfg.close_connections)
                for (uint32_t id : connections) (void)endpoint->close_connection(id, t);
        }
        driver->notify();
        // A few passes transmit the CLOSE packets; then wait for the peers' answers.
        for (int i = 0; i < 4; ++i) (void)driver->run_once();
        if (cfg.close_connections) linger_closes();
        driver->with_datapath([&](datapath::Datapath&) { final_udp_stats = dp->stats(); });
        driver->close();
        dp.reset();
    }
};

// snapshot: the device's state for obs/ (api/metrics.cc): the engine's under the engine
// lock, the driver's and datapath's counters, the observer's events after events_after;
// of a sharded device, every shard's, each under its own engine lock in turn, merged
// (obs::merge_shards). Any thread except with an engine lock held.
obs::Snapshot snapshot(DeviceState& st, uint64_t events_after);
// linger_shard is Device::linger for one shard, shard_stats Device::stats (without
// `shards`) of one (api/device.cc).
bool linger_shard(DeviceState& st, Duration max);
DeviceStats shard_stats(DeviceState& st);
// move_to_peer_shard: the INIT -> RTR of a queue pair of a sharded device towards `peer`
// moves it from shard `from` to the peer's shard, if that is another (docs/design.md §12):
// its record and early receives go there, the stream is adopted under its number and
// shard 0 holds the number. Returns the shard it is in. Takes both engine locks.
// Errors: kNotFound, kWrongState (not in INIT), as Endpoint::adopt_stream.
Result<uint32_t> move_to_peer_shard(DeviceState& device, uint32_t from, uint32_t number,
                                    const Address& peer);
// reset_to_shard_zero: RESET of a queue pair that RTR moved out of shard 0 (`from`):
// its stream there ends with its work discarded unreported, and it starts again in
// shard 0 in RESET under a fresh number ([STREAM-13]), which replaces `number`. Takes
// both engine locks. Errors: kWrongState (device closed), kNotFound, kExhausted.
Error reset_to_shard_zero(DeviceState& device, uint32_t from, uint32_t& number);
// start_observability opens the stat socket and the metrics listener the config asks for.
// Errors: kIo with *error naming the socket or address.
Error start_observability(DeviceState& st, std::string* error);

}  // namespace detail

namespace detail {

// SrqHandle owns one engine SRQ; the SharedReceiveQueue and every queue pair using it hold
// it, so the engine SRQ is destroyed only once nothing uses it ([PLACE-24] refuses sooner).
struct SrqHandle {
    std::shared_ptr<DeviceState> st;
    uint32_t id = 0;
    ~SrqHandle() {
        std::lock_guard<std::mutex> g(st->engine_mu);
        if (!st->closed) (void)st->endpoint->destroy_srq(id);
    }
};

// effective_state is the record's state, or kError once the engine failed its stream or
// the stream's connection ended. Engine lock held.
QpState effective_state(const DeviceState& st, uint32_t number, const QpRecord& r);
// flush_posted completes a work request posted in ERR with kFlushed, after the engine's
// pending completions. Engine lock held.
void flush_posted(DeviceState& st, QpRecord& r, uint32_t number, uint64_t wr_id,
                  WorkOpcode opcode);
// modify_qp checks and applies one ibv_modify_qp-style transition of the queue pair
// `number` (which a RESET changes). Engine lock held; see QueuePair::modify.
Error modify_qp(DeviceState& st, uint32_t& number, const QpAttr& attr, uint32_t mask,
                std::string* why);
// held_wait: how long modify_qp must wait before this transition can be made (RESET ->
// INIT of a queue pair whose number is held, DeviceConfig::keep_qp_number_on_reset);
// zero when it can go now. Engine lock held.
Duration held_wait(DeviceState& st, uint32_t number, const QpAttr& attr, uint32_t mask);

}  // namespace detail
}  // namespace mroce::api
