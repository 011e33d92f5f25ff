// api/device.h — the native C++ API of mroce: a Device (one protocol endpoint on one UDP
// datapath, plus the driver loop that runs them), protection domains, memory regions,
// completion queues and queue pairs, in the shape of verbs (api/README.md).
//
//   auto dev = api::Device::open(cfg);                 // binds the UDP port, starts progress
//   auto pd = (*dev)->alloc_pd();
//   auto mr = pd->register_memory(buf, len, access::kLocalWrite | access::kRemoteWrite);
//   auto cq = (*dev)->create_cq();
//   auto qp = pd->create_qp(*cq, *cq);                 // qp->number() goes to the peer
//   qp->connect(peer_address, peer_qp_number);         // both sides: INIT -> RTR -> RTS
//   (or qp->modify(attr, mask) step by step, as ibv_modify_qp)
//   qp->post_recv(...); qp->post_send(...); cq->poll(completions);
//
// Errors are mroce::Error values or Result<T>; nothing throws across this API. Work
// request completions report a core::Status. Threading: every method of every object may
// be called from any application thread unless its comment says otherwise; the progress
// model is in docs/design.md §10.
//
// Lifetimes: objects keep the device's internals alive, so they may be destroyed in any
// order; a Device that is destroyed stops its progress, closes its connections and its
// sockets, and every later post on its queue pairs fails with kWrongState. Memory rules are
// the engine's (docs/ownership.md): registered memory must stay valid until every work
// request that names it has completed; deregistering cancels nothing this side posted,
// but ends every peer's access (WRITE, READ, atomic) to it at once.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api/driver.h"
#include "api/udp_tuning.h"
#include "core/config.h"
#include "core/event.h"
#include "core/memory.h"
#include "core/stats.h"
#include "core/work.h"
#include "datapath/udp/udp_datapath.h"
#include "util/address.h"
#include "util/result.h"
#include "util/time.h"

namespace mroce::api {

// The work request, completion and event types are the engine's own (core/work.h,
// core/event.h): SendWr names its local buffer by address + lkey, and a WRITE its target by
// remote address + rkey. Completion::stream is the local queue pair number.
using core::Completion;
using core::Event;
using core::EventKind;
using core::RecvWr;
using core::SendWr;
using core::Sge;
using core::Status;
using core::WorkOpcode;
namespace access = core::access;
// The most scatter/gather pieces one work request may name (spec [PLACE-22]).
inline constexpr uint32_t kMaxSge = core::kMaxSge;
// The protocol's UDP port (spec [UDP-1]) and the most paths a connection may have.
inline constexpr uint16_t kDefaultPort = wire::kDefaultPort;
inline constexpr uint16_t kMaxPaths = wire::kMaxPaths;
// The most shards (DeviceConfig::threads) a device may run: datapath::kMaxShards.
inline constexpr uint32_t kMaxThreads = 16;

enum class ProgressMode : uint8_t {
    kThread,  // a background progress thread per Device (the default)
    kManual,  // the application calls Device::progress() (tests, single-threaded apps)
};

struct DeviceConfig {
    // Local IP and endpoint UDP port. Port 0 picks an ephemeral port. A specific address is
    // better than the wildcard: it is the source address of every packet.
    Address local = Address::ipv4(0, wire::kDefaultPort);
    // Protocol tunables; endpoint.port is overwritten with the port actually bound. The
    // spec's defaults except for congestion control (udp_endpoint_defaults).
    core::EndpointConfig endpoint = udp_endpoint_defaults();
    // When true, open() raises endpoint.window_bytes_per_path to fit the datapath: the
    // rule is udp_window_per_path (api/udp_tuning.h). False keeps the value as given.
    bool fit_window_to_datapath = true;
    // When true, open() then fits the ACK rate to the datapath (fewer, batched ACKs:
    // fit_udp_acks in api/udp_tuning.h). False keeps ack_every, max_ack_delay and
    // ack_now_every_message as given.
    bool fit_acks_to_datapath = true;
    // Seeds every random choice of the engine; by default drawn from getrandom(2).
    std::optional<uint64_t> seed;
    ProgressMode progress = ProgressMode::kThread;
    // threads: how many shards, each with its own engine, sockets and progress thread,
    // share the device's work (docs/design.md §12; issue 19). Connections are placed by
    // a hash of the peer's address, so peers see one address whatever the count, and a
    // connection uses one thread. 1 (the default): one engine, as always. Above 1 (at
    // most datapath::kMaxShards): progress must be kThread, and shared receive queues are
    // refused (kInvalidArgument).
    uint32_t threads = 1;
    // How long the progress thread polls after activity before it sleeps (DriverConfig).
    Duration spin = std::chrono::microseconds(50);
    // How long it polls after a small exchange while no application thread has polled for
    // a millisecond, if longer (DriverConfig::spin_alone: a passive target answers without
    // an idle CPU's wake-up). 0: spin only.
    Duration spin_alone = Duration::zero();
    // The most handshake datagrams (HELLOs) per second each shard's engine answers
    // (DriverConfig::max_handshakes_per_second; 0: no bound): under a flood, the RETRYs
    // they cost and the thread's time stay bounded, and the excess waits and is dropped in
    // the kernel (docs/security.md "HELLO floods").
    uint32_t max_handshakes_per_second = DriverConfig{}.max_handshakes_per_second;
    // busy_poll: for latency-sensitive applications (issue 19), the device never sleeps
    // while it waits for the network: the progress thread (kThread) polls its sockets in a
    // loop instead of sleeping in epoll once `spin` has passed, and CompletionQueue::wait
    // polls the queue (in kManual moving the packets itself) instead of sleeping. The
    // endpoint socket also asks for SO_BUSY_POLL (udp.busy_poll_us, 50 µs unless set),
    // which helps on a NAPI NIC only. It saves a wake-up per message (the scheduler's and,
    // in a VM, the hypervisor's) at the price of a core per progress thread and per waiting
    // thread, busy or not: on a machine with fewer idle cores than spinners it is slower
    // than sleeping (docs/results.md, "busy-poll").
    bool busy_poll = false;
    // answer_first: in manual progress, a pass's ACKs wait for the application's answer
    // to the completions that pass delivered, and leave after it (DriverConfig::
    // answer_first): a request-response application that answers at once saves the ACK's
    // system call on every exchange (mroce perf --lat sets it; docs/results.md). An
    // application that does not call progress() soon after its completions delays its
    // ACKs by as much. No effect with a progress thread.
    bool answer_first = false;
    // stand_by: with a progress thread, how long after an application thread's pass
    // (CompletionQueue::wait busy-polling, Device::try_progress) the progress thread leaves
    // the sockets to that thread and posts do not wake it (DriverConfig::stand_by): a
    // thread that polls in a loop then makes no wake-up per message. Work posted, and
    // datagrams arriving, after the application's last pass wait at most this long unless
    // release_stand_by() is called (CompletionQueue::wait does before it sleeps). 0 (the
    // default): the progress thread always watches the sockets.
    Duration stand_by = Duration::zero();
    // send_first: DriverConfig::send_first, for every shard's driver: a pass sends work
    // posted since the previous one before it reads the sockets.
    bool send_first = false;
    // send_on_post: with a progress thread, a thread that posts a send while that thread
    // sleeps on the sockets sends it itself (DriverConfig::send_on_post) instead of waking
    // it: an application that blocks on a completion channel saves a thread wake-up on
    // the way out of every message.
    bool send_on_post = false;
    // stage_trace: where the device stamps the stages of its work (api/stage_trace.h,
    // issue 19), for a latency breakdown; not owned, it must outlive the device. nullptr
    // (the default): no tracing.
    StageTrace* stage_trace = nullptr;
    // When the Device is destroyed, send CLOSE on every connection: the peers' outstanding
    // work, their posted receives included, flushes at once. false leaves the peers to
    // find out as from a host that vanished: their pending requests fail after the
    // dead-peer timeout and their posted receives stay, as verbs applications expect of a
    // peer whose process ended (the Verbs library sets it).
    bool close_connections = true;
    // When true, a queue pair keeps its number when it returns to RESET, as verbs
    // requires (the Verbs library sets it): RESET (and ERR) flush its outstanding work
    // with kFlushed and hold the number, and the next RESET -> INIT waits, up to the
    // [STREAM-15] quiet period after the reset, until no packet of the old incarnation
    // can be about ([STREAM-13]). False gives it a fresh number at once instead.
    bool keep_qp_number_on_reset = false;
    // close_linger bounds how long destruction waits, after sending those CLOSEs, for each
    // peer to confirm its close with a CLOSE of its own ([CONN-29]), sending the CLOSE again
    // meanwhile (after min_pto, then twice as long each time, within [CONN-28]'s 8), as a
    // TCP socket with SO_LINGER finishes its FIN exchange. A lost CLOSE then costs an idle
    // peer a few min_pto instead of peer_dead_timeout. Destruction returns as soon as every
    // close is confirmed, and never later than this. 0: no linger (one CLOSE, best effort).
    Duration close_linger = std::chrono::milliseconds(20);
    datapath::UdpOptions udp;
    // Observability (docs/observability.md). stat_socket: serve `mroce stat` on a Unix
    // socket in obs::stat_dir() (the environment variable MROCE_STAT=0 turns it off).
    // metrics: "ADDR:PORT" (port 0: any) to serve Prometheus /metrics over HTTP; when
    // empty, the environment variable MROCE_METRICS is used if set. A metrics listener that
    // cannot be opened fails open() (kIo, kInvalidArgument for a malformed address); a stat
    // socket that cannot be made is left out.
    bool stat_socket = true;
    std::string metrics;
};

// DeviceStats: counters of the driver loop and the datapath, plus the API's own drops.
struct DeviceStats {
    DriverStats driver;
    datapath::UdpStats udp;
    // The endpoint's own counters: datagrams dropped before any connection took them
    // (truncated, bad version or type or length, unknown connection, bad token, refused
    // connections, malformed HELLOs), reclaimed slots.
    core::EndpointStats endpoint;
    uint64_t completions_unrouted = 0;  // completion for a destroyed queue pair: dropped
    uint64_t events_dropped = 0;        // connection/path events beyond kMaxEvents: dropped
    bool gso_enabled = false;           // the datapath sends with UDP GSO
    bool gro_enabled = false;           // the datapath receives with UDP GRO
    // With DeviceConfig::threads > 1 the counters above are the sums over the shards
    // (gso_enabled and gro_enabled are shard 0's), and `shards` holds each shard's, shard 0
    // first; empty with one thread.
    struct Shard {
        DriverStats driver;
        datapath::UdpStats udp;
        core::EndpointStats endpoint;
    };
    std::vector<Shard> shards;
};

// ConnectionReport: the engine's counters of one connection and of each of its paths
// (core/stats.h), copied under the engine lock.
struct ConnectionReport {
    core::ConnectionStats connection;
    std::vector<core::PathStats> paths;
};

class CompletionQueue;
class MemoryRegion;
class ProtectionDomain;
class QueuePair;
class SharedReceiveQueue;
namespace detail {
struct DeviceState;
struct CqState;
struct SrqHandle;
}  // namespace detail

class Device {
public:
    // kMaxEvents is how many connection/path events wait for poll_events; older ones are
    // dropped (and counted) beyond it.
    static constexpr size_t kMaxEvents = 4096;

    // open binds the datapath, creates the endpoint and, in thread mode, starts the
    // progress thread. Errors: kIo (socket, bind, thread), kInvalidArgument (address, or
    // an endpoint setting core::config_error rejects); `error`, when given, receives a
    // one-line message naming the problem.
    static Result<std::unique_ptr<Device>> open(const DeviceConfig& cfg,
                                                std::string* error = nullptr);
    // ~Device stops the progress thread, sends CLOSE on every connection (flushing their
    // outstanding work requests with kFlushed; see DeviceConfig::close_connections) and
    // closes the sockets. It must not run concurrently with other calls on this Device
    // object itself.
    ~Device();
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;

    // local_address is where peers reach this device (IP and the endpoint port bound).
    Address local_address() const;
    ProgressMode mode() const;
    // config is the configuration in effect: as given to open(), with the endpoint
    // settings open() fitted to the datapath (port, window, ACK rule, local ports).
    const DeviceConfig& config() const;

    // alloc_pd creates a protection domain.
    std::unique_ptr<ProtectionDomain> alloc_pd();
    // create_cq creates a completion queue. Its size is bounded by the work requests posted
    // to the queue pairs that report to it.
    std::unique_ptr<CompletionQueue> create_cq();

    // progress makes one pass of the driver loop: receive, timers, transmit, route events.
    // Returns true if it moved a datagram or produced an event. Needed in manual mode;
    // harmless in thread mode. Any thread; concurrent calls are serialised.
    bool progress();
    // try_progress is progress() unless another thread is in a pass already, in which case
    // it returns false at once. An application that busy-polls a CQ calls it so that it
    // moves packets itself when the progress thread is not scheduled (a small machine),
    // without queueing behind that thread when it is.
    // `polling` as for Driver::try_run_once: false from a thread about to block.
    bool try_progress(bool polling = true);
    // release_stand_by: the calling application thread stops polling (it is about to
    // block): the progress threads watch the sockets again at once (DeviceConfig::stand_by).
    void release_stand_by();

    // poll_events moves up to out.size() connection and path events (kConnectionUp,
    // kConnectionFailed, kConnectionClosed, kPathFailed, kPathRecovered), oldest first,
    // into out; returns the count. Completions never appear here: they go to CQs.
    size_t poll_events(std::span<Event> out);
    // set_event_notify makes fn(arg, e) be called for each connection or path event as it
    // is queued for poll_events, by the progress thread, with the device's locks held: fn
    // must be quick and must not call into the device. nullptr clears it; once
    // set_event_notify returns, the previous fn is not running and will not be called.
    // (Verbs asynchronous events are built on it.)
    void set_event_notify(void (*fn)(void*, const Event&), void* arg);

    // linger lets the device finish before it is closed, for at most `max`: it makes
    // progress until no queue pair has work outstanding and no datagram arrived for
    // twice the ACK delay (so the ACKs the peers wait for have left). Returns true if it
    // finished, false at the time limit (a peer that no longer answers). Without it, a
    // process that exits right after its last completion can leave a message it sent
    // unacknowledged, and the peer sees a transport error. Any application thread.
    bool linger(Duration max);

    DeviceStats stats() const;
    // connection_report copies the counters of the connection to `peer` (a device's
    // local_address()). Errors: kNotFound (no connection to that peer), kWrongState
    // (device closed).
    Result<ConnectionReport> connection_report(const Address& peer) const;
    // stat_socket_path is the Unix socket `mroce stat` reads ("" when off); metrics_port the
    // port /metrics is served on (0 when off).
    std::string stat_socket_path() const;
    uint16_t metrics_port() const;

private:
    explicit Device(std::shared_ptr<detail::DeviceState> state);
    std::shared_ptr<detail::DeviceState> state_;
};

class ProtectionDomain {
public:
    // The engine has no way to free a protection domain yet; destroying it only drops the
    // handle. Registered regions and queue pairs stay valid.
    ~ProtectionDomain();
    uint32_t id() const { return pd_; }

    // register_memory registers [addr, addr + length) with the access flags (access::*).
    // The memory stays owned by the caller and must outlive the region and every work
    // request that names it. Errors: kInvalidArgument (null addr with length > 0),
    // kExhausted (too many regions).
    Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t length,
                                                          uint32_t access_flags);

    // create_qp creates a queue pair in this domain whose requester completions go to
    // send_cq and responder completions (receives) to recv_cq; both must belong to the
    // same device. The queue pair starts in RESET with its number (a stream reserved in the
    // engine, bound to a peer at RTR). Errors: kInvalidArgument (a CQ of another device), kWrongState (the
    // device was destroyed).
    // With `srq`, the queue pair takes its receives from that shared receive queue (of this
    // domain) and post_recv on it is refused (kInvalidArgument).
    Result<std::unique_ptr<QueuePair>> create_qp(CompletionQueue& send_cq,
                                                 CompletionQueue& recv_cq,
                                                 SharedReceiveQueue* srq = nullptr);
    // create_srq makes a shared receive queue (spec [PLACE-24]). Errors: kExhausted,
    // kWrongState (device closed).
    Result<std::unique_ptr<SharedReceiveQueue>> create_srq();

private:
    friend class Device;
    ProtectionDomain(std::shared_ptr<detail::DeviceState> state, uint32_t pd)
        : state_(std::move(state)), pd_(pd) {}
    std::shared_ptr<detail::DeviceState> state_;
    uint32_t pd_;
};

// MemoryRegion is a registered buffer. Its destructor deregisters it: once it returns no
// peer reaches the buffer any more; work requests this side already posted that name it
// are not cancelled (see the file comment).
class MemoryRegion {
public:
    ~MemoryRegion();
    MemoryRegion(const MemoryRegion&) = delete;
    MemoryRegion& operator=(const MemoryRegion&) = delete;

    uint32_t lkey() const { return keys_.lkey; }
    uint32_t rkey() const { return keys_.rkey; }
    // addr is the region's first byte as the 64-bit address work requests use.
    uint64_t addr() const { return reinterpret_cast<uint64_t>(data_); }
    std::byte* data() const { return data_; }
    size_t length() const { return length_; }
    uint32_t access_flags() const { return access_; }

private:
    friend class ProtectionDomain;
    MemoryRegion(std::shared_ptr<detail::DeviceState> state, core::MemoryKeys keys,
                 std::byte* data, size_t length, uint32_t access)
        : state_(std::move(state)), keys_(keys), data_(data), length_(length), access_(access) {}
    std::shared_ptr<detail::DeviceState> state_;
    core::MemoryKeys keys_;
    std::byte* data_;
    size_t length_;
    uint32_t access_;
};

class CompletionQueue {
public:
    ~CompletionQueue();
    CompletionQueue(const CompletionQueue&) = delete;
    CompletionQueue& operator=(const CompletionQueue&) = delete;

    // poll moves up to out.size() completions, oldest first, into out; returns the count.
    // Completions of one queue pair and direction (send or receive) are in posting order.
    // Takes only this CQ's lock, never the engine's.
    size_t poll(std::span<Completion> out);
    // wait is poll that waits up to `timeout` for at least one completion. In manual mode
    // it drives the device's progress itself while it waits.
    size_t wait(std::span<Completion> out, Duration timeout);
    // set_notify makes fn(arg) be called after completions are queued here, by the thread
    // that queues them (usually the progress thread): once per pass that queued some,
    // after that pass has queued all of its completions in every CQ (so an application
    // woken for a receive finds the send completion that came with it). It runs with this
    // CQ's lock held: fn must be quick and must not call into the device or this CQ (write
    // to an fd, set a flag). nullptr clears it; once set_notify returns, the previous fn is
    // not running and will not be called again. (Verbs completion channels are built on it.)
    void set_notify(void (*fn)(void*), void* arg);

private:
    friend class Device;
    friend class ProtectionDomain;
    CompletionQueue(std::shared_ptr<detail::DeviceState> state,
                    std::shared_ptr<detail::CqState> cq)
        : state_(std::move(state)), cq_(std::move(cq)) {}
    std::shared_ptr<detail::DeviceState> state_;
    std::shared_ptr<detail::CqState> cq_;
};

// Queue pair states, numbered as verbs' ibv_qp_state (SQD and SQE are not modelled).
enum class QpState : uint8_t { kReset = 0, kInit = 1, kRtr = 2, kRts = 3, kError = 6 };
std::string_view to_string(QpState s);

// qp_attr: which QpAttr fields a modify() sets, with the bit values of verbs' IBV_QP_* so
// that ibv_modify_qp's mask passes through unchanged. Bits not listed here are refused.
namespace qp_attr {
inline constexpr uint32_t kState = 1u << 0;
inline constexpr uint32_t kAccessFlags = 1u << 3;
inline constexpr uint32_t kPkeyIndex = 1u << 4;
inline constexpr uint32_t kPort = 1u << 5;
inline constexpr uint32_t kPeer = 1u << 7;  // IBV_QP_AV: the peer device's address and sl
inline constexpr uint32_t kPathMtu = 1u << 8;
inline constexpr uint32_t kTimeout = 1u << 9;
inline constexpr uint32_t kRetryCnt = 1u << 10;
inline constexpr uint32_t kRnrRetry = 1u << 11;
inline constexpr uint32_t kRqPsn = 1u << 12;
inline constexpr uint32_t kMaxRdAtomic = 1u << 13;  // IBV_QP_MAX_QP_RD_ATOMIC
inline constexpr uint32_t kMinRnrTimer = 1u << 15;
inline constexpr uint32_t kSqPsn = 1u << 16;
inline constexpr uint32_t kMaxDestRdAtomic = 1u << 17;
inline constexpr uint32_t kDestQpNum = 1u << 20;
}  // namespace qp_attr

// QpAttr is ibv_qp_attr's RC subset. Ranges (modify refuses anything else):
//   port 1, pkey_index 0 (one port, one partition); access_flags any of access::kRemote*
//   (kLocalWrite is accepted and ignored); path_mtu 1..5 (verbs' 256..4096 bytes; recorded
//   only: segments follow the endpoint's max_payload); dest_qp_num non-zero; rq_psn and
//   sq_psn below 2^24 (recorded only, see docs/design.md "QP lifecycle");
//   max_rd_atomic and max_dest_rd_atomic 0..the endpoint's limits (0 acts as 1);
//   min_rnr_timer, timeout 0..31 and retry_cnt, rnr_retry 0..7 in verbs' encodings.
struct QpAttr {
    QpState state = QpState::kReset;
    uint32_t access_flags = 0;
    uint16_t pkey_index = 0;
    uint8_t port = 1;
    Address peer;
    // Service level, 0..7 (verbs' ah_attr.sl, set with kPeer as part of IBV_QP_AV): the
    // queue pair's traffic class (spec [STREAM-14]); over UDP the datapath marks its
    // packets with the class's DSCP (datapath::UdpOptions::dscp_by_class).
    uint8_t sl = 0;
    uint8_t path_mtu = 5;
    uint32_t dest_qp_num = 0;
    uint32_t rq_psn = 0;
    uint32_t sq_psn = 0;
    uint8_t max_rd_atomic = 1;
    uint8_t max_dest_rd_atomic = 1;
    uint8_t min_rnr_timer = 0;
    uint8_t timeout = 0;
    uint8_t retry_cnt = 7;
    uint8_t rnr_retry = 7;
    // Reported by query (ibv_qp_cap), never set: the engine's per-queue-pair caps.
    struct Cap {
        uint32_t max_send_wr = 0, max_recv_wr = 0;    // EndpointConfig::max_outstanding_wrs
        uint32_t max_send_sge = 0, max_recv_sge = 0;  // core::kMaxSge
        uint32_t max_inline_data = 0;                 // EndpointConfig::max_inline_data
    } cap;
};

// Helpers for the three forward steps (the masks verbs applications use). rtr/rts take
// their numeric settings from `base` (a default QpAttr unless given).
struct QpModify {
    QpAttr attr;
    uint32_t mask = 0;
};
QpModify qp_to_init(uint32_t access_flags);
QpModify qp_to_rtr(const Address& peer, uint32_t dest_qp_num, const QpAttr& base = {});
QpModify qp_to_rts(const QpAttr& base = {});

// SharedReceiveQueue: receives that the messages of every queue pair using it take, in the
// order the messages arrive (spec [PLACE-24]); completions go to each queue pair's recv CQ.
// It is freed when it and every queue pair using it are gone.
class SharedReceiveQueue {
public:
    ~SharedReceiveQueue();
    SharedReceiveQueue(const SharedReceiveQueue&) = delete;
    SharedReceiveQueue& operator=(const SharedReceiveQueue&) = delete;

    // post_recv queues a receive (checked now). Errors: kAccessDenied (buffer),
    // kExhausted (max_outstanding_wrs), kWrongState (device closed).
    Error post_recv(const RecvWr& wr);
    // post_recv_chain: as QueuePair::post_recv_chain.
    Error post_recv_chain(std::span<const RecvWr> wrs, const RecvWr** bad_wr = nullptr);
    // arm_limit asks for one kSrqLimit event (Device::poll_events) when fewer than `limit`
    // receives remain; 0 disarms (ibv_modify_srq's srq_limit).
    Error arm_limit(uint32_t limit);
    // size: receives queued and not yet taken.
    size_t size() const;
    // id names this queue in Event::srq (kSrqLimit).
    uint32_t id() const;

private:
    friend class ProtectionDomain;
    SharedReceiveQueue(std::shared_ptr<detail::DeviceState> state,
                       std::shared_ptr<detail::SrqHandle> h)
        : state_(std::move(state)), h_(std::move(h)) {}
    std::shared_ptr<detail::DeviceState> state_;
    std::shared_ptr<detail::SrqHandle> h_;
};

class QueuePair {
public:
    // ~QueuePair ends the queue pair at once, busy or not: its outstanding work requests
    // are dropped (their completions are not reported) and nothing writes into their
    // buffers afterwards, so they may be freed as soon as it returns.
    ~QueuePair();
    QueuePair(const QueuePair&) = delete;
    QueuePair& operator=(const QueuePair&) = delete;

    // number is this queue pair's number, to give to the peer out of band; it is the
    // stream id the peer's packets carry. It changes when the queue pair returns to RESET
    // from any other state (spec [STREAM-13]): exchange it again before reconnecting.
    // With DeviceConfig::keep_qp_number_on_reset it never changes.
    uint32_t number() const;

    // modify moves the queue pair through RESET -> INIT -> RTR -> RTS, to ERR from any
    // state and to RESET from any state, as ibv_modify_qp does for RC (the table is in
    // docs/design.md "QP lifecycle"). `mask` (qp_attr::*) names the fields of `attr` to
    // apply; without kState it modifies the current state. A transition needs its
    // required fields and takes only its optional ones. On error nothing changes and `why`,
    // when given, receives a one-line reason. Effects: RTR binds the stream to
    // (peer, dest_qp_num) and INIT/RTR/RTS hand the per-QP settings to the engine (spec
    // [STREAM-12]); ERR flushes every outstanding work request (kFlushed); RESET discards
    // them unreported and gives the queue pair a fresh stream and number ([STREAM-13]),
    // or, with DeviceConfig::keep_qp_number_on_reset, flushes them and keeps the number
    // (RESET -> INIT then blocks until the old incarnation's quiet period is over).
    // Errors: kInvalidArgument (transition, mask or value), kWrongState (device closed),
    // kExhausted (caps), kNotFound.
    Error modify(const QpAttr& attr, uint32_t mask, std::string* why = nullptr);
    // query returns the current attributes. The state is ERR once the engine failed the
    // stream or its connection (a completion with an error status says why).
    QpAttr query() const;
    QpState state() const { return query().state; }

    // connect is RESET/INIT -> INIT -> RTR -> RTS in one call, towards the queue pair
    // `remote_number` of the device at `peer` (its local_address()), with every remote
    // access allowed and the endpoint's limits. Both sides must reach RTR before either
    // sends much: a packet for a queue pair the peer has not bound is refused, retried a
    // while, then fails the sender's queue pair (kRemoteInvalid, spec [STREAM-8]).
    // `sl` is the service level (QpAttr::sl): the queue pair's traffic class, 0..7.
    // Errors: kInvalidArgument (remote_number 0; remote_number already bound on that
    // connection; sl above 7), kWrongState (not in RESET or INIT, device closed),
    // kExhausted (caps).
    Error connect(const Address& peer, uint32_t remote_number, uint8_t sl = 0);
    // connected: in RTR or RTS.
    bool connected() const;

    // post_send queues a SEND, SEND_IMM, WRITE, WRITE_IMM, READ or atomic; only in RTS.
    // In ERR it is accepted and completes with kFlushed. The local buffer is checked now.
    // Errors: kWrongState (RESET, INIT, RTR; device closed), kInvalidArgument (opcode),
    // kAccessDenied (local buffer), kExhausted (too many outstanding).
    Error post_send(const SendWr& wr);
    // post_recv queues a receive buffer for SEND, SEND_IMM and WRITE_IMM, from INIT on; in
    // ERR it completes with kFlushed. Errors as post_send (kWrongState only in RESET).
    Error post_recv(const RecvWr& wr);
    // Chains (verbs post lists): the work requests are posted in order; at the first that
    // fails, posting stops, *bad_wr (when given) points at it and its error is returned;
    // the ones before it stay posted. On success *bad_wr is nullptr.
    Error post_send_chain(std::span<const SendWr> wrs, const SendWr** bad_wr = nullptr);
    Error post_recv_chain(std::span<const RecvWr> wrs, const RecvWr** bad_wr = nullptr);

private:
    friend class ProtectionDomain;
    QueuePair(std::shared_ptr<detail::DeviceState> state, uint32_t pd, uint32_t number,
              std::shared_ptr<detail::CqState> send_cq, std::shared_ptr<detail::CqState> recv_cq,
              std::shared_ptr<detail::SrqHandle> srq)
        : state_(std::move(state)), pd_(pd), number_(number), send_cq_(std::move(send_cq)),
          recv_cq_(std::move(recv_cq)), srq_(std::move(srq)) {}
    // home: the shard whose engine holds the queue pair's stream (shard 0 until RTR
    // moves it to its peer's shard; docs/design.md §12).
    detail::DeviceState& home() const;
    std::shared_ptr<detail::DeviceState> state_;  // shard 0 (the device)
    std::atomic<uint32_t> shard_{0};              // home()'s index; set under both locks
    uint32_t pd_;
    uint32_t number_;  // guarded by the engine lock: RESET changes it
    std::shared_ptr<detail::CqState> send_cq_, recv_cq_;
    std::shared_ptr<detail::SrqHandle> srq_;  // released after the stream (its user) is gone
};

// parse_address reads "a.b.c.d:port" or "[v6]:port" (the form Address::to_string
// writes). Errors: kInvalidArgument.
Result<Address> parse_address(std::string_view text);

}  // namespace mroce::api
