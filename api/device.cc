// api/device.cc — Device, ProtectionDomain, MemoryRegion, CompletionQueue and QueuePair
// over one core::Endpoint, one UdpDatapath and one Driver.
//
// Locks, always taken in this order: the driver lock (inside Driver), the engine lock
// (DeviceState::engine_mu: the Endpoint and the queue pair table), then leaf locks (a CQ's
// mutex, events_mu). Posting takes only the engine lock; polling a CQ only its own.
#include "api/device.h"

#include <arpa/inet.h>
#include <sys/random.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "api/window_rule.h"
#include "core/endpoint.h"

namespace mroce::api {

namespace detail {

struct CqState {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Completion> queue;
    size_t waiters = 0;

    void push(const Completion& c) {
        std::lock_guard<std::mutex> g(mu);
        queue.push_back(c);
        if (waiters) cv.notify_all();
    }
};

// QpRecord is the engine-lock-guarded state of one queue pair.
struct QpRecord {
    uint32_t pd = 0;
    bool connected = false;
    std::vector<RecvWr> early_recvs;  // posted before connect
    std::shared_ptr<CqState> send_cq, recv_cq;
};

struct DeviceState {
    DeviceConfig cfg;
    Address local;

    // The engine lock guards everything down to `connections`.
    std::mutex engine_mu;
    std::unique_ptr<core::Endpoint> endpoint;
    bool closed = false;
    std::unordered_map<uint32_t, QpRecord> qps;  // by queue pair number
    std::set<uint32_t> connections;  // connection ids to close at shutdown
    uint64_t completions_unrouted = 0;

    std::mutex events_mu;
    std::deque<Event> events;
    uint64_t events_dropped = 0;

    std::unique_ptr<datapath::UdpDatapath> dp;
    std::unique_ptr<Driver> driver;
    datapath::UdpStats final_udp_stats;  // after shutdown

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
            (responder ? it->second.recv_cq : it->second.send_cq)->push(c);
            return;
        }
        if (e.kind == EventKind::kConnectionUp) connections.insert(e.connection);
        std::lock_guard<std::mutex> g(events_mu);
        if (events.size() >= Device::kMaxEvents) {
            events.pop_front();
            ++events_dropped;
        }
        events.push_back(e);
    }

    Time now() const { return dp->now(); }

    // shutdown: stop progress, close every connection, send the CLOSEs, close sockets.
    void shutdown() {
        driver->stop_thread();
        {
            std::lock_guard<std::mutex> g(engine_mu);
            closed = true;
            const Time t = now();
            for (uint32_t id : connections) (void)endpoint->close_connection(id, t);
        }
        driver->notify();
        // A few passes transmit the CLOSE packets; more is best effort.
        for (int i = 0; i < 4; ++i) (void)driver->run_once();
        driver->with_datapath([&](datapath::Datapath&) { final_udp_stats = dp->stats(); });
        driver->close();
        dp.reset();
    }
};

}  // namespace detail

using detail::CqState;
using detail::DeviceState;
using detail::QpRecord;

// ---------------------------------------------------------------------------------------
// Device

Device::Device(std::shared_ptr<DeviceState> state) : state_(std::move(state)) {}

Result<std::unique_ptr<Device>> Device::open(const DeviceConfig& cfg, std::string* error) {
    // The endpoint requires a valid config (core/config.h).
    if (const std::string why = core::config_error(cfg.endpoint); !why.empty()) {
        if (error) *error = "device: " + why;
        return Error::kInvalidArgument;
    }
    auto st = std::make_shared<DeviceState>();
    st->cfg = cfg;
    auto dp = datapath::UdpDatapath::open(cfg.local, cfg.udp, error);
    if (!dp) return dp.error();
    st->dp = std::move(dp).value();
    st->local = st->dp->local_address();

    uint64_t seed = 0;
    if (cfg.seed) {
        seed = *cfg.seed;
    } else if (::getrandom(&seed, sizeof(seed), 0) != sizeof(seed)) {
        if (error) *error = "device: getrandom failed";
        return Error::kIo;
    }
    core::EndpointConfig ecfg = cfg.endpoint;
    ecfg.port = st->local.port;
    if (cfg.fit_window_to_datapath)
        ecfg.window_bytes_per_path = udp_window_per_path(ecfg, st->dp->recv_buffer_bytes());
    st->cfg.endpoint.window_bytes_per_path = ecfg.window_bytes_per_path;
    st->endpoint = std::make_unique<core::Endpoint>(ecfg, st->local, seed);

    DeviceState* raw = st.get();
    DriverConfig dcfg;
    dcfg.spin = cfg.spin;
    auto driver = Driver::create(*st->endpoint, *st->dp, st->engine_mu,
                                 [raw](const Event& e) { raw->on_event(e); }, dcfg, error);
    if (!driver) return driver.error();
    st->driver = std::move(driver).value();
    if (cfg.progress == ProgressMode::kThread) {
        const Error e = st->driver->start_thread();
        if (e != Error::kOk) {
            if (error) *error = "device: cannot start the progress thread";
            return e;
        }
    }
    return std::unique_ptr<Device>(new Device(std::move(st)));
}

Device::~Device() { state_->shutdown(); }

Address Device::local_address() const { return state_->local; }
ProgressMode Device::mode() const { return state_->cfg.progress; }

std::unique_ptr<ProtectionDomain> Device::alloc_pd() {
    std::lock_guard<std::mutex> g(state_->engine_mu);
    return std::unique_ptr<ProtectionDomain>(
        new ProtectionDomain(state_, state_->endpoint->alloc_pd()));
}

std::unique_ptr<CompletionQueue> Device::create_cq() {
    return std::unique_ptr<CompletionQueue>(
        new CompletionQueue(state_, std::make_shared<CqState>()));
}

bool Device::progress() { return state_->driver->run_once(); }

size_t Device::poll_events(std::span<Event> out) {
    std::lock_guard<std::mutex> g(state_->events_mu);
    size_t n = 0;
    while (n < out.size() && !state_->events.empty()) {
        out[n++] = state_->events.front();
        state_->events.pop_front();
    }
    return n;
}

DeviceStats Device::stats() const {
    DeviceStats s;
    s.driver = state_->driver->stats();
    s.udp = state_->final_udp_stats;
    state_->driver->with_datapath([&](datapath::Datapath&) {
        s.udp = state_->dp->stats();
        s.gso_enabled = state_->dp->gso_enabled();
        s.gro_enabled = state_->dp->gro_enabled();
    });
    {
        std::lock_guard<std::mutex> g(state_->engine_mu);
        s.completions_unrouted = state_->completions_unrouted;
    }
    std::lock_guard<std::mutex> g(state_->events_mu);
    s.events_dropped = state_->events_dropped;
    return s;
}

Result<ConnectionReport> Device::connection_report(const Address& peer) const {
    std::lock_guard<std::mutex> g(state_->engine_mu);
    if (state_->closed || !state_->endpoint) return Error::kWrongState;
    const core::Connection* c =
        state_->endpoint->connection(state_->endpoint->connection_to(peer));
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
    std::lock_guard<std::mutex> g(state_->engine_mu);
    auto keys = state_->endpoint->register_memory(pd_, addr, length, access_flags);
    if (!keys) return keys.error();
    return std::unique_ptr<MemoryRegion>(new MemoryRegion(
        state_, *keys, static_cast<std::byte*>(addr), length, access_flags));
}

MemoryRegion::~MemoryRegion() {
    std::lock_guard<std::mutex> g(state_->engine_mu);
    (void)state_->endpoint->deregister_memory(keys_.lkey);
}

Result<std::unique_ptr<QueuePair>> ProtectionDomain::create_qp(CompletionQueue& send_cq,
                                                               CompletionQueue& recv_cq) {
    if (send_cq.state_ != state_ || recv_cq.state_ != state_) return Error::kInvalidArgument;
    std::lock_guard<std::mutex> g(state_->engine_mu);
    if (state_->closed) return Error::kWrongState;
    // The engine reserves the stream now, so its id is the QP number to exchange out of
    // band, and QPs may be connected in any order.
    auto reserved = state_->endpoint->reserve_stream(pd_);
    if (!reserved) return reserved.error();
    const uint32_t number = *reserved;
    QpRecord& r = state_->qps[number];
    r.pd = pd_;
    r.send_cq = send_cq.cq_;
    r.recv_cq = recv_cq.cq_;
    return std::unique_ptr<QueuePair>(new QueuePair(state_, pd_, number, send_cq.cq_, recv_cq.cq_));
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
    return n;
}

size_t CompletionQueue::wait(std::span<Completion> out, Duration timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
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
    std::unique_lock<std::mutex> g(cq_->mu);
    ++cq_->waiters;
    cq_->cv.wait_until(g, deadline, [&] { return !cq_->queue.empty(); });
    --cq_->waiters;
    size_t n = 0;
    while (n < out.size() && !cq_->queue.empty()) {
        out[n++] = cq_->queue.front();
        cq_->queue.pop_front();
    }
    return n;
}

// ---------------------------------------------------------------------------------------
// QueuePair

QueuePair::~QueuePair() {
    std::lock_guard<std::mutex> g(state_->engine_mu);
    auto it = state_->qps.find(number_);
    if (it == state_->qps.end()) return;
    state_->qps.erase(it);  // first: the flush completions below go nowhere
    // The stream ends at once, busy or not: nothing of it runs or writes again.
    if (!state_->closed) (void)state_->endpoint->destroy_stream(number_, state_->now());
}

bool QueuePair::connected() const {
    std::lock_guard<std::mutex> g(state_->engine_mu);
    auto it = state_->qps.find(number_);
    return it != state_->qps.end() && it->second.connected;
}

Error QueuePair::connect(const Address& peer, uint32_t remote_number) {
    if (remote_number == 0) return Error::kInvalidArgument;
    {
        std::lock_guard<std::mutex> g(state_->engine_mu);
        DeviceState& st = *state_;
        QpRecord& r = st.qps.at(number_);
        if (st.closed || r.connected) return Error::kWrongState;
        const Time now = st.now();
        if (Error e = st.endpoint->bind_stream(number_, peer, remote_number, now); e != Error::kOk)
            return e;
        r.connected = true;
        if (const uint32_t conn = st.endpoint->connection_to(peer)) st.connections.insert(conn);
        for (const RecvWr& wr : r.early_recvs) {
            const Error e = st.endpoint->post_recv(number_, wr, now);
            if (e != Error::kOk) {
                Completion c;
                c.wr_id = wr.wr_id;
                c.stream = number_;
                c.status = e == Error::kAccessDenied ? Status::kLocalProtection
                                                     : Status::kFlushed;
                c.opcode = WorkOpcode::kRecv;
                r.recv_cq->push(c);
            }
        }
        r.early_recvs.clear();
        r.early_recvs.shrink_to_fit();
    }
    state_->driver->notify();
    return Error::kOk;
}

Error QueuePair::post_send(const SendWr& wr) {
    {
        std::lock_guard<std::mutex> g(state_->engine_mu);
        DeviceState& st = *state_;
        auto it = st.qps.find(number_);
        if (st.closed || it == st.qps.end() || !it->second.connected) return Error::kWrongState;
        const Error e = st.endpoint->post_send(number_, wr, st.now());
        if (e != Error::kOk) return e;
    }
    state_->driver->notify();
    return Error::kOk;
}

Error QueuePair::post_recv(const RecvWr& wr) {
    {
        std::lock_guard<std::mutex> g(state_->engine_mu);
        DeviceState& st = *state_;
        auto it = st.qps.find(number_);
        if (st.closed || it == st.qps.end()) return Error::kWrongState;
        if (!it->second.connected) {
            if (it->second.early_recvs.size() >= st.cfg.endpoint.max_outstanding_wrs)
                return Error::kExhausted;
            it->second.early_recvs.push_back(wr);
            return Error::kOk;
        }
        const Error e = st.endpoint->post_recv(number_, wr, st.now());
        if (e != Error::kOk) return e;
    }
    state_->driver->notify();
    return Error::kOk;
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
