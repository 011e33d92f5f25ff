// baselines/rocev2/engine.h — the RoCEv2 baseline: a sans-IO engine of reliable-connected
// QPs with go-back-N and DCQCN, behind the same core::Engine contract as core::Endpoint,
// so the simulator drives MetaRoCE and RoCEv2 side by side on the same network.
//
// Work API mirrors core::Endpoint (a "stream" is a QP): alloc_pd, register_memory,
// reserve_stream / bind_stream / create_stream, post_send (SEND, SEND_IMM, WRITE,
// WRITE_IMM), post_recv; completions come out of poll_event as core::Event. Memory checks
// go through core::MemoryTable, so rkey/lkey/PD/bounds behave exactly as in MetaRoCE.
// Differences: there is no connection and no handshake (a QP is bound to its peer QP
// directly, as after modify_qp to RTS); Event::connection carries the local QP number.
//
// Single-threaded: every method is called from the driver's thread.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <queue>
#include <vector>

#include "baselines/rocev2/config.h"
#include "baselines/rocev2/queue_pair.h"
#include "core/engine.h"
#include "core/memory.h"
#include "core/work.h"
#include "util/address.h"
#include "util/rng.h"

namespace mroce::rocev2 {

struct EngineStats {
    uint64_t datagrams_received = 0;
    uint64_t truncated = 0;     // decode errors, by kind
    uint64_t bad_type = 0;
    uint64_t bad_version = 0;
    uint64_t bad_length = 0;
    uint64_t unknown_qp = 0;    // dest QP not bound here
    uint64_t wrong_peer = 0;    // source IP is not the QP's peer
    uint64_t bad_pkey = 0;
    uint64_t datagrams_sent = 0;
};

class RoceEngine final : public core::Engine {
public:
    // local: this engine's IP and UDP port (normally 4791). cfg must be valid (check
    // config_error first). seed feeds the memory keys, the only random choice.
    RoceEngine(const RoceConfig& cfg, const Address& local, uint64_t seed);
    ~RoceEngine() override;

    const RoceConfig& config() const { return cfg_; }
    const Address& local_address() const { return local_; }

    // Memory: as core::MemoryTable.
    uint32_t alloc_pd() { return memory_.alloc_pd(); }
    Result<core::MemoryKeys> register_memory(uint32_t pd, void* addr, uint64_t len, uint32_t access) {
        return memory_.register_region(pd, addr, len, access);
    }
    Error deregister_memory(uint32_t key) { return memory_.deregister(key); }

    // reserve_stream makes an unbound QP in pd and returns its QP number (24 bits, to
    // exchange out of band). Errors: kInvalidArgument (pd), kExhausted (max_qps).
    Result<uint32_t> reserve_stream(uint32_t pd);
    // bind_stream connects QP `stream` to QP `remote_stream` of the engine at `peer`.
    // Errors: kNotFound (stream), kWrongState (already bound), kInvalidArgument
    // (remote_stream 0 or over 24 bits).
    Error bind_stream(uint32_t stream, const Address& peer, uint32_t remote_stream, Time now);
    // set_traffic_class sets the class every packet of QP `stream` leaves in from now on
    // (RoceConfig::traffic_class). Errors: kNotFound, kInvalidArgument (above 7).
    Error set_traffic_class(uint32_t stream, uint8_t traffic_class);
    // create_stream is reserve_stream + bind_stream.
    Result<uint32_t> create_stream(uint32_t pd, const Address& peer, uint32_t remote_stream, Time now);

    // post_send queues SEND/SEND_IMM/WRITE/WRITE_IMM. Errors: kNotFound (stream),
    // kInvalidArgument (opcode), kAccessDenied (local buffer), kWrongState (unbound or
    // failed QP), kExhausted (max_outstanding_wrs).
    Error post_send(uint32_t stream, const core::SendWr& wr, Time now);
    // post_recv queues a receive for SEND/SEND_IMM/WRITE_IMM. Errors: kNotFound,
    // kAccessDenied, kWrongState (failed QP), kExhausted.
    Error post_recv(uint32_t stream, const core::RecvWr& wr, Time now);

    // qp returns QP `qpn` (nullptr if unknown), for drivers, tools and tests.
    const QueuePair* qp(uint32_t qpn) const;
    size_t num_qps() const { return qps_.size(); }
    const EngineStats& stats() const { return stats_; }
    // totals sums the per-QP counters.
    QpStats totals() const;

    // src_port_for is the UDP source port of a QP: fixed, derived from both QP numbers
    // (as NICs hash the QPN), in 49152..65535.
    static uint16_t src_port_for(uint32_t local_qpn, uint32_t remote_qpn);

    // core::Engine
    void on_datagram(std::span<const std::byte> datagram, const PacketMeta& meta,
                     Time now) override;
    void on_timeout(Time now) override;
    size_t poll_transmit(std::span<std::byte> buf, PacketMeta& meta, Time now) override;
    // A NIC's per-port scheduler: a QP's data waits while its port is busy (its ACKs and
    // CNPs do not).
    void set_ready_ports(uint64_t mask) override { ready_ports_ = mask; }
    Time next_deadline() const override;
    std::optional<core::Event> poll_event() override;
    size_t max_datagram_size() const override;

private:
    QueuePair* qp_mut(uint32_t qpn);
    void touched(QueuePair& qp);
    // data_pending: unsent data the window and RNR wait allow (pacing aside).
    bool data_pending(const QueuePair& qp) const;
    bool has_work(const QueuePair& qp) const;
    Time qp_deadline(const QueuePair& qp) const;
    void complete(QueuePair& qp, const core::Completion& c);
    void fail_qp(QueuePair& qp, core::Status first_status);

    // requester (engine_tx.cc)
    bool data_ready(const QueuePair& qp, Time now) const;
    size_t write_data(QueuePair& qp, std::span<std::byte> buf, Time now);
    void on_ack(QueuePair& qp, const Aeth& aeth, uint32_t psn24, Time now);
    void acknowledge_through(QueuePair& qp, uint64_t last_acked, Time now);
    void seek(QueuePair& qp, uint64_t psn);
    void on_requester_timeout(QueuePair& qp, Time now);

    // responder (engine_rx.cc)
    void on_data(QueuePair& qp, const Decoded& d, uint8_t ecn, Time now);
    void place(QueuePair& qp, const Decoded& d, uint64_t psn, Time now);
    void respond(QueuePair& qp, Response r, uint64_t psn);
    size_t write_response(QueuePair& qp, std::span<std::byte> buf);
    size_t write_cnp(QueuePair& qp, std::span<std::byte> buf);

    RoceConfig cfg_;
    Address local_;
    core::MemoryTable memory_;
    EngineStats stats_;
    std::vector<std::unique_ptr<QueuePair>> qps_;  // index = qpn - kFirstQpn
    std::deque<uint32_t> ready_;                   // QPs that may have something to send
    uint64_t ready_ports_ = kAllPorts;             // set_ready_ports
    std::deque<core::Event> events_;
    Time last_now_{};  // the latest `now` handed in (to tell future pacing times from past)
    // Timers scale with the QPs that are due, not with all QPs: a min-heap of (deadline,
    // QP). QueuePair::armed_deadline is a lower bound of the QP's deadline: a later
    // deadline keeps the old entry, which then fires early and re-arms (cheap); an earlier
    // one pushes a new entry. Entries not equal to armed_deadline are stale and skipped.
    // Deadlines are recomputed lazily for the QPs touched since (dirty_), so a batch of
    // packets costs one computation per QP. mutable: next_deadline() is const.
    struct TimerEntry {
        Time at;
        uint32_t qpn;
        bool operator>(const TimerEntry& o) const { return at > o.at; }
    };
    void flush_deadlines() const;
    mutable std::priority_queue<TimerEntry, std::vector<TimerEntry>, std::greater<>> timers_;
    mutable std::vector<uint32_t> dirty_;

    static constexpr uint32_t kFirstQpn = 2;  // QP0 and QP1 are IB's management QPs
};

}  // namespace mroce::rocev2
