// api/device.cc — Device, ProtectionDomain, MemoryRegion, CompletionQueue and QueuePair
// over one core::Endpoint, one UdpDatapath and one Driver per shard (one shard unless
// DeviceConfig::threads says more; docs/design.md §12).
//
// Locks, always taken in this order: DeviceState::mirror_mu (registrations only), the
// driver lock (inside Driver), the engine lock
// (DeviceState::engine_mu: the Endpoint and the queue pair table), then leaf locks (a CQ's
// mutex, events_mu). Posting takes only the engine lock of the queue pair's shard; polling
// a CQ only its own. Two shards' engine locks are held at once only to move or reset a
// queue pair, both taken together (std::scoped_lock); registration takes each in turn.
#include "api/device.h"

#include <arpa/inet.h>
#include <sys/random.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "api/device_state.h"
#include "api/udp_tuning.h"
#include "core/endpoint.h"
#include "datapath/udp/steering.h"
#include "util/counters.h"

namespace mroce::api {

static_assert(kMaxThreads == datapath::kMaxShards);
namespace {

// post_chain posts wrs in order through post and stops at the first refusal, as verbs'
// post lists do: what went before stays posted and *bad_wr names the refused one.
template <class Wr, class PostOne>
Error post_chain(std::span<const Wr> wrs, const Wr** bad_wr, PostOne post) {
    if (bad_wr) *bad_wr = nullptr;
    for (const Wr& wr : wrs) {
        if (Error e = post(wr); e != Error::kOk) {
            if (bad_wr) *bad_wr = &wr;
            return e;
        }
    }
    return Error::kOk;
}

}  // namespace


using detail::CqState;
using detail::DeviceState;
using detail::QpRecord;

// ---------------------------------------------------------------------------------------
// Device

Device::Device(std::shared_ptr<DeviceState> state) : state_(std::move(state)) {}

namespace {

// open_shard makes one engine on one datapath bound to `at`, with its driver (not started):
// the whole device when cfg.threads is 1, one shard of it otherwise (docs/design.md §12).
// Every shard has the same secret (so the same memory keys), its own seed (its own source
// ports and connection ids) and its shard number in its connection ids.
Result<std::shared_ptr<DeviceState>> open_shard(const DeviceConfig& cfg, const Address& at,
                                                uint32_t index, uint64_t seed,
                                                const CryptoSeed& secret, std::string* error) {
    const size_t planes = cfg.udp.plane_devices.size();
    auto st = std::make_shared<DeviceState>();
    st->cfg = cfg;
    st->shard_index = index;
    datapath::UdpOptions udp = cfg.udp;
    if (cfg.busy_poll && udp.busy_poll_us == 0) udp.busy_poll_us = kBusyPollSocketUs;
    udp.reuseport = cfg.threads > 1;
    auto dp = datapath::UdpDatapath::open(at, udp, error);
    if (!dp) return dp.error();
    st->dp = std::move(dp).value();
    st->local = st->dp->local_address();

    core::EndpointConfig ecfg = cfg.endpoint;
    ecfg.port = st->local.port;
    if (planes > 0) ecfg.num_local_ports = static_cast<uint16_t>(planes);
    if (cfg.fit_window_to_datapath)
        ecfg.window_bytes_per_path = udp_window_per_path(ecfg, st->dp->recv_buffer_bytes());
    if (cfg.fit_acks_to_datapath) fit_udp_acks(ecfg);
    if (cfg.threads > 1) {
        ecfg.conn_id_shard_bits = datapath::shard_id_bits(cfg.threads);
        ecfg.conn_id_shard = index;
    }
    st->cfg.endpoint = ecfg;  // the settings in effect, as Device::config() reports them
    st->endpoint = std::make_unique<core::Endpoint>(ecfg, st->local, seed, secret);
    st->endpoint->set_trace_sink(&st->observer);

    DeviceState* raw = st.get();
    DriverConfig dcfg;
    // busy_poll: the progress thread's spin never ends, so it never sleeps.
    dcfg.spin = cfg.busy_poll ? Duration::max() : cfg.spin;
    dcfg.spin_alone = cfg.spin_alone;
    dcfg.trace = cfg.stage_trace;
    dcfg.max_handshakes_per_second = cfg.max_handshakes_per_second;
    // Only in manual progress does the application run the passes itself.
    dcfg.answer_first = cfg.answer_first && cfg.progress == ProgressMode::kManual;
    if (cfg.progress == ProgressMode::kThread) {
        dcfg.stand_by = cfg.stand_by;
        dcfg.send_on_post = cfg.send_on_post;
    }
    dcfg.send_first = cfg.send_first;
    if (cfg.threads > 1) dcfg.thread_name = "mroce-shard" + std::to_string(index);
    dcfg.events_delivered = [raw] { raw->notify_cqs(); };
    auto driver = Driver::create(*st->endpoint, *st->dp, st->engine_mu,
                                 [raw](const Event& e) { raw->on_event(e); }, dcfg, error);
    if (!driver) return driver.error();
    st->driver = std::move(driver).value();
    return st;
}

// sharding_error: why cfg.threads cannot be served, or "" (DeviceConfig::threads).
std::string sharding_error(const DeviceConfig& cfg) {
    if (cfg.threads < 1 || cfg.threads > datapath::kMaxShards)
        return "threads must be 1.." + std::to_string(datapath::kMaxShards);
    if (cfg.threads == 1) return "";
    if (cfg.progress != ProgressMode::kThread) return "threads > 1 needs ProgressMode::kThread";
    return "";
}

}  // namespace

Result<std::unique_ptr<Device>> Device::open(const DeviceConfig& cfg, std::string* error) {
    // The endpoint requires a valid config (core/config.h).
    if (const std::string why = core::config_error(cfg.endpoint); !why.empty()) {
        if (error) *error = "device: " + why;
        return Error::kInvalidArgument;
    }
    if (const std::string why = sharding_error(cfg); !why.empty()) {
        if (error) *error = "device: " + why;
        return Error::kInvalidArgument;
    }
    // [PATH-1]: with one interface per plane, the engine's local ports are those planes.
    const size_t planes = cfg.udp.plane_devices.size();
    if (planes > 0 && cfg.endpoint.num_local_ports != 1 && cfg.endpoint.num_local_ports != planes) {
        if (error)
            *error = "device: endpoint.num_local_ports (" +
                     std::to_string(cfg.endpoint.num_local_ports) + ") differs from the " +
                     std::to_string(planes) + " plane devices";
        return Error::kInvalidArgument;
    }
    if (planes > 0xffff) {
        if (error) *error = "device: more than 65535 plane devices";
        return Error::kInvalidArgument;
    }
    // [CONN-5]: the secrets (tokens, the cookie key, memory-key tags) come from 32 bytes of
    // the OS's randomness; a configured seed (tests) derives them instead, to replay a run.
    uint64_t seed = 0;
    CryptoSeed secret{};
    if (cfg.seed) {
        seed = *cfg.seed;
        secret = crypto_seed_from(seed);
    } else if (::getrandom(&seed, sizeof(seed), 0) != sizeof(seed) ||
               ::getrandom(secret.data(), secret.size(), 0) != static_cast<ssize_t>(secret.size())) {
        if (error) *error = "device: getrandom failed";
        return Error::kIo;
    }
    auto first = open_shard(cfg, cfg.local, 0, seed, secret, error);
    if (!first) return first.error();
    std::shared_ptr<DeviceState> st = std::move(first).value();
    // The other shards join shard 0's port (SO_REUSEPORT), in shard order: the kernel
    // numbers the group's sockets in the order they joined, which the steering program's
    // answers index.
    for (uint32_t i = 1; i < cfg.threads; ++i) {
        constexpr uint64_t kShardSeedStep = 0x9E3779B97F4A7C15ULL;  // distinct ports per shard
        auto more = open_shard(cfg, st->local, i, seed + i * kShardSeedStep, secret, error);
        if (!more) return more.error();
        st->other_shards.push_back(std::move(more).value());
    }
    if (cfg.threads > 1) {
        // Then each shard's handshake socket, in shard order too: HELLOs queue apart from
        // established traffic (UdpDatapath::open_handshake_socket).
        for (uint32_t i = 0; i < cfg.threads; ++i) {
            DeviceState& sh = st->shard(i);
            if (const Error e = sh.dp->open_handshake_socket(error); e != Error::kOk) return e;
        }
        if (const Error e = st->dp->attach_steering(cfg.threads, true, error); e != Error::kOk)
            return e;
        // One event log for the device (api/metrics.cc): before any engine runs.
        for (uint32_t i = 0; i < cfg.threads; ++i) st->shard(i).observer.share_sequence(&st->event_seq);
    }
    for (uint32_t i = 0; i < st->num_shards(); ++i) {
        if (cfg.progress != ProgressMode::kThread) break;
        if (const Error e = st->shard(i).driver->start_thread(); e != Error::kOk) {
            if (error) *error = "device: cannot start the progress thread";
            st->shutdown();
            return e;
        }
    }
    if (const Error e = detail::start_observability(*st, error); e != Error::kOk) {
        st->shutdown();
        return e;
    }
    return std::unique_ptr<Device>(new Device(std::move(st)));
}

std::string Device::stat_socket_path() const {
    return state_->stat_server ? state_->stat_server->socket_path() : std::string();
}

uint16_t Device::metrics_port() const {
    return state_->stat_server ? state_->stat_server->metrics_port() : 0;
}

Device::~Device() { state_->shutdown(); }

Address Device::local_address() const { return state_->local; }

const DeviceConfig& Device::config() const { return state_->cfg; }
ProgressMode Device::mode() const { return state_->cfg.progress; }

std::unique_ptr<ProtectionDomain> Device::alloc_pd() {
    // Every shard has every protection domain; ids are sequential, so they agree.
    std::lock_guard<std::mutex> mirror(state_->mirror_mu);
    uint32_t pd = 0;
    for (uint32_t i = 0; i < state_->num_shards(); ++i) {
        DeviceState& sh = state_->shard(i);
        std::lock_guard<std::mutex> g(sh.engine_mu);
        const uint32_t id = sh.endpoint->alloc_pd();
        if (i == 0) pd = id;
        MROCE_DCHECK(id == pd);
    }
    return std::unique_ptr<ProtectionDomain>(new ProtectionDomain(state_, pd));
}

std::unique_ptr<CompletionQueue> Device::create_cq() {
    return std::unique_ptr<CompletionQueue>(
        new CompletionQueue(state_, std::make_shared<CqState>()));
}

bool Device::progress() {
    bool did = false;
    for (uint32_t i = 0; i < state_->num_shards(); ++i) did |= state_->shard(i).driver->run_once();
    return did;
}

bool Device::try_progress(bool polling) {
    bool did = false;
    for (uint32_t i = 0; i < state_->num_shards(); ++i)
        did |= state_->shard(i).driver->try_run_once(polling);
    return did;
}

void Device::release_stand_by() {
    for (uint32_t i = 0; i < state_->num_shards(); ++i) state_->shard(i).driver->release_stand_by();
}

size_t Device::poll_events(std::span<Event> out) {
    // Shard by shard: each shard's events keep their order, as one engine's did.
    size_t n = 0;
    for (uint32_t i = 0; i < state_->num_shards(); ++i) {
        DeviceState& sh = state_->shard(i);
        std::lock_guard<std::mutex> g(sh.events_mu);
        while (n < out.size() && !sh.events.empty()) {
            out[n++] = sh.events.front();
            sh.events.pop_front();
        }
    }
    return n;
}

bool Device::linger(Duration max) {
    const auto start = std::chrono::steady_clock::now();
    bool finished = true;
    for (uint32_t i = 0; i < state_->num_shards(); ++i) {
        const Duration used = std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - start);
        finished &= detail::linger_shard(state_->shard(i), std::max(Duration::zero(), max - used));
    }
    return finished;
}

namespace detail {
// linger_shard: Device::linger for one shard.
bool linger_shard(DeviceState& st, Duration max) {
    const Time start = st.now();
    const Duration quiet = 2 * st.cfg.endpoint.max_ack_delay;
    uint64_t seen_in = ~uint64_t{0};
    Time last_in = start;
    for (;;) {
        (void)st.driver->run_once();
        const Time now = st.now();
        const uint64_t in = st.driver->stats().datagrams_in;
        if (in != seen_in) {
            seen_in = in;
            last_in = now;
        }
        bool outstanding;
        {
            std::lock_guard<std::mutex> g(st.engine_mu);
            if (st.closed) return true;
            outstanding = st.endpoint->work_outstanding();
        }
        if (!outstanding && now - last_in >= quiet) return true;
        if (now - start >= max) return false;
        st.driver->wait(std::min<Duration>(quiet, max - (now - start)));
    }
}

}  // namespace detail

void Device::set_event_notify(void (*fn)(void*, const Event&), void* arg) {
    for (uint32_t i = 0; i < state_->num_shards(); ++i) {
        DeviceState& sh = state_->shard(i);
        std::lock_guard<std::mutex> g(sh.events_mu);
        sh.event_fn = fn;
        sh.event_arg = fn ? arg : nullptr;
    }
}

DeviceStats Device::stats() const {
    DeviceStats s = detail::shard_stats(*state_);
    if (state_->num_shards() == 1) return s;
    s.shards.push_back({s.driver, s.udp, s.endpoint});
    for (uint32_t i = 1; i < state_->num_shards(); ++i) {
        const DeviceStats one = detail::shard_stats(state_->shard(i));
        s.shards.push_back({one.driver, one.udp, one.endpoint});
        add_counters<26>(s.driver, one.driver);
        add_counters<22>(s.udp, one.udp);
        add_counters<22>(s.endpoint, one.endpoint);
        s.completions_unrouted += one.completions_unrouted;
        s.events_dropped += one.events_dropped;
    }
    return s;
}

namespace detail {
// shard_stats: Device::stats of one shard.
DeviceStats shard_stats(DeviceState& st) {
    DeviceStats s;
    s.driver = st.driver->stats();
    s.udp = st.final_udp_stats;
    st.driver->with_datapath([&](datapath::Datapath&) {
        s.udp = st.dp->stats();
        s.gso_enabled = st.dp->gso_enabled();
        s.gro_enabled = st.dp->gro_enabled();
    });
    {
        std::lock_guard<std::mutex> g(st.engine_mu);
        s.completions_unrouted = st.completions_unrouted;
        if (st.endpoint) s.endpoint = st.endpoint->stats();
    }
    std::lock_guard<std::mutex> g(st.events_mu);
    s.events_dropped = st.events_dropped;
    return s;
}

}  // namespace detail

Result<ConnectionReport> Device::connection_report(const Address& peer) const {
    DeviceState& sh = state_->shard(datapath::steering_shard(peer, state_->num_shards()));
    std::lock_guard<std::mutex> g(sh.engine_mu);
    if (sh.closed || !sh.endpoint) return Error::kWrongState;
    const core::Connection* c = sh.endpoint->connection(sh.endpoint->connection_to(peer));
    if (!c) return Error::kNotFound;
    ConnectionReport r;
    r.connection = c->stats();
    r.paths.reserve(c->num_paths());
    for (uint16_t p = 0; p < c->num_paths(); ++p) r.paths.push_back(c->path_stats(p));
    return r;
}

// ---------------------------------------------------------------------------------------
// ProtectionDomain and MemoryRegion

ProtectionDomain::~ProtectionDomain() = default;

Result<std::unique_ptr<MemoryRegion>> ProtectionDomain::register_memory(void* addr, size_t length,
                                                                        uint32_t access_flags) {
    if (!addr && length > 0) return Error::kInvalidArgument;
    // Every shard has every region (a peer's WRITE may reach any of them), under the same
    // keys: the shards' memory tables draw their tags from one secret, in the same order of
    // registrations (docs/design.md §12), which mirror_mu keeps in one order for all of
    // them. Each shard's lock in turn, never two at once.
    std::lock_guard<std::mutex> mirror(state_->mirror_mu);
    Result<core::MemoryKeys> keys = Error::kInvalidArgument;
    for (uint32_t i = 0; i < state_->num_shards(); ++i) {
        DeviceState& sh = state_->shard(i);
        std::lock_guard<std::mutex> g(sh.engine_mu);
        auto k = sh.endpoint->register_memory(pd_, addr, length, access_flags);
        if (i == 0) keys = k;
        if (!k) return k.error();  // only shard 0 can refuse: the tables are mirrors
        MROCE_DCHECK(k->lkey == keys->lkey);
    }
    if (!keys) return keys.error();
    return std::unique_ptr<MemoryRegion>(new MemoryRegion(
        state_, *keys, static_cast<std::byte*>(addr), length, access_flags));
}

MemoryRegion::~MemoryRegion() {
    // [PLACE-25]: once this returns no shard lets a peer reach the region.
    std::lock_guard<std::mutex> mirror(state_->mirror_mu);
    for (uint32_t i = 0; i < state_->num_shards(); ++i) {
        DeviceState& sh = state_->shard(i);
        std::lock_guard<std::mutex> g(sh.engine_mu);
        (void)sh.endpoint->deregister_memory(keys_.lkey);
        // The application may free the memory once this returns (Driver,
        // "Payloads sent from where they lie").
        if (sh.driver) sh.driver->wait_payloads_sent();
    }
}

Result<std::unique_ptr<SharedReceiveQueue>> ProtectionDomain::create_srq() {
    // A shared receive queue would be one shard's, and its queue pairs any shard's.
    if (state_->num_shards() > 1) return Error::kInvalidArgument;
    std::lock_guard<std::mutex> g(state_->engine_mu);
    if (state_->closed) return Error::kWrongState;
    auto id = state_->endpoint->create_srq(pd_);
    if (!id) return id.error();
    auto h = std::make_shared<detail::SrqHandle>();
    h->st = state_;
    h->id = *id;
    return std::unique_ptr<SharedReceiveQueue>(new SharedReceiveQueue(state_, std::move(h)));
}

SharedReceiveQueue::~SharedReceiveQueue() = default;

Error SharedReceiveQueue::post_recv(const RecvWr& wr) {
    std::lock_guard<std::mutex> g(state_->engine_mu);
    if (state_->closed) return Error::kWrongState;
    return state_->endpoint->post_srq_recv(h_->id, wr);
}

Error SharedReceiveQueue::post_recv_chain(std::span<const RecvWr> wrs, const RecvWr** bad_wr) {
    return post_chain(wrs, bad_wr, [this](const RecvWr& wr) { return post_recv(wr); });
}

Error SharedReceiveQueue::arm_limit(uint32_t limit) {
    std::lock_guard<std::mutex> g(state_->engine_mu);
    if (state_->closed) return Error::kWrongState;
    return state_->endpoint->arm_srq_limit(h_->id, limit);
}

uint32_t SharedReceiveQueue::id() const { return h_->id; }

size_t SharedReceiveQueue::size() const {
    std::lock_guard<std::mutex> g(state_->engine_mu);
    return state_->closed ? 0 : state_->endpoint->srq_size(h_->id);
}

Result<std::unique_ptr<QueuePair>> ProtectionDomain::create_qp(CompletionQueue& send_cq,
                                                               CompletionQueue& recv_cq,
                                                               SharedReceiveQueue* srq) {
    if (send_cq.state_ != state_ || recv_cq.state_ != state_) return Error::kInvalidArgument;
    if (srq && srq->state_ != state_) return Error::kInvalidArgument;
    std::lock_guard<std::mutex> g(state_->engine_mu);
    if (state_->closed) return Error::kWrongState;
    // The engine reserves the stream now, so its id is the QP number to exchange out of
    // band, and QPs may be connected in any order.
    auto reserved = state_->endpoint->reserve_stream(pd_);
    if (!reserved) return reserved.error();
    const uint32_t number = *reserved;
    if (srq) {
        if (Error e = state_->endpoint->use_srq(number, srq->h_->id); e != Error::kOk) {
            (void)state_->endpoint->destroy_stream(number, state_->now());
            return e;  // kInvalidArgument: an SRQ of another domain
        }
    }
    QpRecord& r = state_->qps[number];
    r.pd = pd_;
    r.srq = srq ? srq->h_->id : 0;
    r.attr.max_dest_rd_atomic = 0;
    r.attr.max_rd_atomic = 0;
    r.send_cq = send_cq.cq_;
    r.recv_cq = recv_cq.cq_;
    r.count_in(0, +1);
    return std::unique_ptr<QueuePair>(new QueuePair(state_, pd_, number, send_cq.cq_, recv_cq.cq_,
                                                    srq ? srq->h_ : nullptr));
}

// ---------------------------------------------------------------------------------------
// CompletionQueue

CompletionQueue::~CompletionQueue() = default;

size_t CompletionQueue::poll(std::span<Completion> out) {
    std::lock_guard<std::mutex> g(cq_->mu);
    size_t n = 0;
    while (n < out.size() && !cq_->queue.empty()) {
        out[n++] = cq_->queue.front();
        cq_->queue.pop_front();
    }
    if (n && state_->cfg.stage_trace) state_->cfg.stage_trace->stamp(Stage::kPolled, static_cast<uint32_t>(n));
    return n;
}

void CompletionQueue::set_notify(void (*fn)(void*), void* arg) {
    std::lock_guard<std::mutex> g(cq_->mu);
    cq_->notify_fn = fn;
    cq_->notify_arg = fn ? arg : nullptr;
}

size_t CompletionQueue::wait(std::span<Completion> out, Duration timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    if (state_->cfg.busy_poll) {
        // DeviceConfig::busy_poll: no sleep, so no wake-up to wait for. In manual mode this
        // thread moves the packets; otherwise it helps the progress threads of the shards
        // whose queue pairs complete here when they are not running (try_run_once), as an
        // application that busy-polls a CQ would.
        const uint32_t shards = state_->num_shards();
        for (;;) {
            if (size_t n = poll(out)) return n;
            if (std::chrono::steady_clock::now() >= deadline) return 0;
            if (state_->cfg.progress == ProgressMode::kManual) {
                (void)state_->driver->run_once();
                continue;
            }
            for (uint32_t i = 0; i < shards; ++i)
                if (shards == 1 || cq_->qps_in_shard[i].load(std::memory_order_relaxed))
                    (void)state_->shard(i).driver->try_run_once();
        }
    }
    if (state_->cfg.progress == ProgressMode::kManual) {
        // Nobody else moves packets: drive the device while waiting, sleeping on its wake
        // fds whenever a pass found nothing to do.
        for (;;) {
            if (size_t n = poll(out)) return n;
            const auto now = std::chrono::steady_clock::now();
            if (now >= deadline) return 0;
            if (!state_->driver->run_once())
                state_->driver->wait(std::chrono::duration_cast<Duration>(deadline - now));
        }
    }
    // This thread sleeps now: the progress threads must not stand by for it.
    for (uint32_t i = 0; i < state_->num_shards(); ++i) state_->shard(i).driver->release_stand_by();
    std::unique_lock<std::mutex> g(cq_->mu);
    ++cq_->waiters;
    cq_->cv.wait_until(g, deadline, [&] { return !cq_->queue.empty(); });
    --cq_->waiters;
    size_t n = 0;
    while (n < out.size() && !cq_->queue.empty()) {
        out[n++] = cq_->queue.front();
        cq_->queue.pop_front();
    }
    if (n && state_->cfg.stage_trace) state_->cfg.stage_trace->stamp(Stage::kPolled, static_cast<uint32_t>(n));
    return n;
}

namespace detail {

Result<uint32_t> move_to_peer_shard(DeviceState& device, uint32_t from, uint32_t number,
                                    const Address& peer) {
    const uint32_t to = datapath::steering_shard(peer, device.num_shards());
    if (to == from) return to;
    DeviceState& a = device.shard(from);
    DeviceState& b = device.shard(to);
    std::scoped_lock g(a.engine_mu, b.engine_mu);
    if (a.closed || b.closed) return Error::kWrongState;
    auto it = a.qps.find(number);
    if (it == a.qps.end()) return Error::kNotFound;
    // Only INIT -> RTR moves; modify_qp refuses anything else, where it is.
    if (effective_state(a, number, it->second) != QpState::kInit) return from;
    if (to == 0) {
        // Back to shard 0, which has held the number since the queue pair left it
        // (keep_qp_number_on_reset: the queue pair kept its number through a RESET in
        // another shard). Its quiet period there began before the RESET whose quiet period
        // this queue pair waited out at INIT, so it is over.
        auto fresh = b.endpoint->reserve_held_stream(it->second.pd, number, b.now());
        if (!fresh) return fresh.error();
    } else if (Error e = b.endpoint->adopt_stream(it->second.pd, number); e != Error::kOk) {
        return e;
    }
    QpRecord r = std::move(it->second);
    a.qps.erase(it);  // first: the flushes of the stream left behind go nowhere
    r.count_in(from, -1);
    r.count_in(to, +1);
    // Shard 0 numbered the queue pair and keeps the number taken until it is destroyed;
    // an adopted stream left behind (a second move) just ends.
    if (from == 0)
        (void)a.endpoint->hold_stream(number, a.now());
    else
        (void)a.endpoint->destroy_stream(number, a.now());
    a.drain_events();
    for (const QpRecord::EarlyRecv& early : r.early_recvs)
        if (b.endpoint->post_recv(number, early.get(), b.now()) != Error::kOk)
            flush_posted(b, r, number, early.wr.wr_id, WorkOpcode::kRecv);  // checked once already
    b.qps.emplace(number, std::move(r));
    return to;
}

Error reset_to_shard_zero(DeviceState& device, uint32_t from, uint32_t& number) {
    DeviceState& home = device.shard(from);
    std::scoped_lock g(device.engine_mu, home.engine_mu);
    if (device.closed || home.closed) return Error::kWrongState;
    auto it = home.qps.find(number);
    if (it == home.qps.end()) return Error::kNotFound;
    // [STREAM-13]: a fresh number from shard 0 for the next incarnation.
    auto fresh = device.endpoint->reserve_stream(it->second.pd);
    if (!fresh) return fresh.error();
    QpRecord next;
    next.pd = it->second.pd;
    next.send_cq = it->second.send_cq;
    next.recv_cq = it->second.recv_cq;
    next.attr.max_rd_atomic = next.attr.max_dest_rd_atomic = 0;
    const bool live = it->second.stream_live;
    it->second.count_in(from, -1);
    next.count_in(0, +1);
    home.qps.erase(it);  // first: the old stream's work is discarded unreported
    if (live) (void)home.endpoint->destroy_stream(number, home.now());
    home.drain_events();
    // The old number, held in shard 0 since the move, waits out its quiet period there.
    device.endpoint->release_held_stream(number);
    number = *fresh;
    device.qps.emplace(number, std::move(next));
    return Error::kOk;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------
// QueuePair: the state machine is in api/qp_state.cc; this is its use.

detail::DeviceState& QueuePair::home() const { return state_->shard(shard_.load()); }

QueuePair::~QueuePair() {
    DeviceState& st = home();
    {
        std::lock_guard<std::mutex> g(st.engine_mu);
        auto it = st.qps.find(number_);
        if (it == st.qps.end()) return;
        const bool live = it->second.stream_live;
        const bool held = it->second.held;
        it->second.count_in(shard_.load(), -1);
        st.qps.erase(it);  // first: the flush completions below go nowhere
        // The stream ends at once, busy or not: nothing of it runs or writes again.
        if (!st.closed && live) (void)st.endpoint->destroy_stream(number_, st.now());
        if (!st.closed && held) st.endpoint->release_held_stream(number_);
        if (st.driver) st.driver->wait_payloads_sent();  // its buffers are the application's again
    }
    if (&st != state_.get()) {
        // Moved to its peer's shard: shard 0 held the number meanwhile; it now waits out
        // its quiet period there as any destroyed stream's ([STREAM-15]).
        std::lock_guard<std::mutex> g(state_->engine_mu);
        if (!state_->closed) state_->endpoint->release_held_stream(number_);
    }
}

uint32_t QueuePair::number() const {
    DeviceState& st = home();
    std::lock_guard<std::mutex> g(st.engine_mu);
    return number_;
}

QpAttr QueuePair::query() const {
    DeviceState& st = home();
    std::lock_guard<std::mutex> g(st.engine_mu);
    auto it = st.qps.find(number_);
    if (it == st.qps.end()) return QpAttr{};
    QpAttr a = it->second.attr;
    a.state = detail::effective_state(st, number_, it->second);
    const auto& cfg = st.cfg.endpoint;
    a.cap.max_send_wr = a.cap.max_recv_wr = cfg.max_outstanding_wrs;
    a.cap.max_send_sge = a.cap.max_recv_sge = core::kMaxSge;
    a.cap.max_inline_data = cfg.max_inline_data;
    return a;
}

bool QueuePair::connected() const {
    const QpState s = state();
    return s == QpState::kRtr || s == QpState::kRts;
}

Error QueuePair::modify(const QpAttr& attr, uint32_t mask, std::string* why) {
    if (state_->num_shards() > 1 && (mask & qp_attr::kState)) {
        // A sharded device (docs/design.md §12): RTR places the queue pair in its peer's
        // shard first. A peer modify_qp will refuse is left for it to refuse.
        // With keep_qp_number_on_reset it stays where it is: its shard holds the number
        // through the quiet period ([STREAM-13]) as one engine would, and the next RTR
        // moves it to its next peer's shard.
        if (attr.state == QpState::kReset && shard_.load() != 0 && !state_->cfg.keep_qp_number_on_reset) {
            if (mask & ~qp_attr::kState) {
                if (why) *why = "modify_qp: a move to RESET takes no attributes";
                return Error::kInvalidArgument;
            }
            const uint32_t from = shard_.load();
            const Error e = detail::reset_to_shard_zero(*state_, from, number_);
            if (e != Error::kOk) {
                if (why) *why = "modify_qp: cannot reset the queue pair";
                return e;
            }
            shard_.store(0);
            DeviceState& old_home = state_->shard(from);
            if (old_home.driver) old_home.driver->wait_payloads_sent();  // its work ended there
            return Error::kOk;
        }
        if (attr.state == QpState::kRtr && (mask & qp_attr::kPeer) && attr.peer.port != 0) {
            auto at = detail::move_to_peer_shard(*state_, shard_.load(), number_, attr.peer);
            if (!at) {
                if (why) *why = "modify_qp: cannot move the queue pair to its peer's shard";
                return at.error();
            }
            shard_.store(*at);
        }
    }
    for (;;) {
        DeviceState& st = home();
        std::unique_lock<std::mutex> g(st.engine_mu);
        if (st.closed) {
            if (why) *why = "modify: the device is closed";
            return Error::kWrongState;
        }
        // A held number comes back after its quiet period ([STREAM-13]): wait it out
        // without the engine lock, so the progress thread keeps serving other queue pairs.
        if (const Duration wait = detail::held_wait(st, number_, attr, mask);
            wait > Duration::zero()) {
            g.unlock();
            std::this_thread::sleep_for(wait);
            continue;
        }
        if (Error e = detail::modify_qp(st, number_, attr, mask, why); e != Error::kOk)
            return e;
        // ERR and RESET end the work posted: its buffers are the application's again.
        if ((mask & qp_attr::kState) && st.driver) st.driver->wait_payloads_sent();
        break;
    }
    home().driver->notify();
    return Error::kOk;
}

Error QueuePair::connect(const Address& peer, uint32_t remote_number, uint8_t sl) {
    if (remote_number == 0 || sl > 7) return Error::kInvalidArgument;
    const QpState s = state();
    if (s != QpState::kReset && s != QpState::kInit) return Error::kWrongState;
    const auto& cfg = state_->cfg.endpoint;
    QpAttr base;
    base.max_rd_atomic = static_cast<uint8_t>(std::min<uint32_t>(cfg.max_rd_atomic, 255));
    base.max_dest_rd_atomic = static_cast<uint8_t>(std::min<uint32_t>(cfg.max_dest_rd_atomic, 255));
    base.min_rnr_timer = 1;  // 10 us: the requester waits at least its own rnr_delay_us
    base.sl = sl;
    if (s == QpState::kReset) {
        const QpModify init = qp_to_init(access::kRemoteWrite | access::kRemoteRead |
                                         access::kRemoteAtomic);
        if (Error e = modify(init.attr, init.mask); e != Error::kOk) return e;
    }
    const QpModify rtr = qp_to_rtr(peer, remote_number, base);
    if (Error e = modify(rtr.attr, rtr.mask); e != Error::kOk) return e;
    const QpModify rts = qp_to_rts(base);
    return modify(rts.attr, rts.mask);
}

Error QueuePair::post_send(const SendWr& wr) {
    DeviceState& st = home();
    {
        std::lock_guard<std::mutex> g(st.engine_mu);
        auto it = st.qps.find(number_);
        if (st.closed || it == st.qps.end()) return Error::kWrongState;
        const QpState s = detail::effective_state(st, number_, it->second);
        if (s == QpState::kError) {
            detail::flush_posted(st, it->second, number_, wr.wr_id, wr.opcode);
            return Error::kOk;
        }
        if (s != QpState::kRts) return Error::kWrongState;
        const Error e = st.endpoint->post_send(number_, wr, st.now());
        if (e != Error::kOk) return e;
        if (st.cfg.stage_trace) st.cfg.stage_trace->stamp(Stage::kPost);
    }
    st.driver->notify_send();
    return Error::kOk;
}

Error QueuePair::post_recv(const RecvWr& wr) {
    DeviceState& st = home();
    {
        std::lock_guard<std::mutex> g(st.engine_mu);
        auto it = st.qps.find(number_);
        if (st.closed || it == st.qps.end()) return Error::kWrongState;
        const QpState s = detail::effective_state(st, number_, it->second);
        if (s == QpState::kError) {
            detail::flush_posted(st, it->second, number_, wr.wr_id, WorkOpcode::kRecv);
            return Error::kOk;
        }
        if (s == QpState::kReset) return Error::kWrongState;
        const Error e = st.endpoint->post_recv(number_, wr, st.now());
        if (e != Error::kOk) return e;
        // Before RTR a sharded device does not know the queue pair's shard yet: the
        // receive is checked and queued here, and queued again where RTR takes it.
        if (st.num_shards() > 1 && s == QpState::kInit) it->second.early_recvs.emplace_back(wr);
    }
    st.driver->notify();
    return Error::kOk;
}

Error QueuePair::post_send_chain(std::span<const SendWr> wrs, const SendWr** bad_wr) {
    return post_chain(wrs, bad_wr, [this](const SendWr& wr) { return post_send(wr); });
}

Error QueuePair::post_recv_chain(std::span<const RecvWr> wrs, const RecvWr** bad_wr) {
    return post_chain(wrs, bad_wr, [this](const RecvWr& wr) { return post_recv(wr); });
}

// ---------------------------------------------------------------------------------------

Result<Address> parse_address(std::string_view text) {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || colon + 1 >= text.size()) return Error::kInvalidArgument;
    const std::string_view port_text = text.substr(colon + 1);
    uint32_t port = 0;
    for (char c : port_text) {
        if (c < '0' || c > '9') return Error::kInvalidArgument;
        port = port * 10 + static_cast<uint32_t>(c - '0');
        if (port > 65535) return Error::kInvalidArgument;
    }
    std::string host(text.substr(0, colon));
    Address a;
    a.port = static_cast<uint16_t>(port);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
        in6_addr v6;
        if (::inet_pton(AF_INET6, host.c_str(), &v6) != 1) return Error::kInvalidArgument;
        std::memcpy(a.ip.data(), &v6, 16);
        return a;
    }
    in_addr v4;
    if (::inet_pton(AF_INET, host.c_str(), &v4) != 1) return Error::kInvalidArgument;
    return Address::ipv4(ntohl(v4.s_addr), a.port);
}

}  // namespace mroce::api
