// core/endpoint.h — the MetaRoCE protocol engine of one endpoint (one UDP port).
//
// Implements core::Engine: fed datagrams and time, it emits datagrams, deadlines and
// events. It owns the memory table, the connections (one per peer endpoint) and the
// streams (one per QP). Single-threaded: every method is called from the driver's thread.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <queue>
#include <unordered_map>
#include <vector>

#include "cc/fair_share.h"
#include "core/config.h"
#include "core/connection.h"
#include "core/engine.h"
#include "core/hello_guard.h"
#include "core/path_health.h"
#include "core/quiet_ports.h"
#include "core/memory.h"
#include "core/stats.h"
#include "core/stream.h"
#include "core/trace.h"
#include "core/work.h"
#include "util/address.h"
#include "util/crypto.h"
#include "util/rng.h"

namespace mroce::core {

class Endpoint final : public Engine {
public:
    // local: this endpoint's IP and UDP port (local.port should equal cfg.port). seed
    // feeds the replayable random choices (ISNs, source ports, paths); secret seeds the
    // cryptographic generator of the secrets (tokens, memory-key tags, the cookie key):
    // a deployment passes 32 bytes from the OS. Without it the secret is derived from
    // seed, which suits tests and the simulator (one number replays a run) and nothing
    // facing a network. cfg must be valid: check it with config_error() first.
    Endpoint(const EndpointConfig& cfg, const Address& local, uint64_t seed,
             const CryptoSeed& secret);
    Endpoint(const EndpointConfig& cfg, const Address& local, uint64_t seed)
        : Endpoint(cfg, local, seed, crypto_seed_from(seed)) {}
    ~Endpoint() override;

    const EndpointConfig& config() const { return cfg_; }
    const Address& local_address() const { return local_; }

    // Memory (spec §8). Errors as MemoryTable.
    uint32_t alloc_pd() { return memory_.alloc_pd(); }
    Result<MemoryKeys> register_memory(uint32_t pd, void* addr, uint64_t len, uint32_t access) {
        return memory_.register_region(pd, addr, len, access);
    }
    Error deregister_memory(uint32_t key) { return memory_.deregister(key); }

    // create_stream makes a stream (a QP) in `pd` towards the endpoint at `peer` and
    // binds it to the connection with that peer, creating the connection (and starting
    // its handshake) if this is the first stream towards it [CONN-10]. remote_stream is
    // the peer's id for its side (exchanged out of band, like a QP number).
    // Errors: kInvalidArgument (unknown pd, remote_stream 0 or already bound on that
    // connection), kExhausted (caps).
    Result<uint32_t> create_stream(uint32_t pd, const Address& peer, uint32_t remote_stream,
                                   Time now);
    // reserve_stream makes an unbound stream in `pd` and returns its id (the "QP number"
    // to exchange out of band); bind_stream later joins it to a peer as create_stream
    // does. A destroyed stream's slot is reused once its quiet period has passed, measured
    // against the latest time any call gave the endpoint ([STREAM-15]). Receives may be posted before the bind; sends may not.
    // Errors: reserve: kInvalidArgument (pd), kExhausted; bind: kNotFound (stream),
    // kWrongState (already bound), kInvalidArgument / kExhausted as create_stream.
    Result<uint32_t> reserve_stream(uint32_t pd);
    // adopt_stream makes an unbound stream in `pd` under an id another endpoint gave out:
    // a sharded device (docs/design.md §12) numbers its queue pairs in one shard and
    // moves each to its peer's shard at RTR. That other endpoint keeps the id taken and
    // gives the slot a new generation after [STREAM-15]'s quiet period, so an endpoint
    // that adopts never calls reserve_stream itself. Errors: kInvalidArgument (pd, id 0,
    // slot beyond max_streams), kWrongState (the slot holds a live stream).
    Error adopt_stream(uint32_t pd, uint32_t id);
    Error bind_stream(uint32_t stream, const Address& peer, uint32_t remote_stream, Time now);

    // post_send queues a SEND/SEND_IMM/WRITE/WRITE_IMM/READ/atomic on a stream. The local
    // buffer is checked now (lkey, PD, bounds; LOCAL_WRITE for READ and atomics, whose
    // answer lands there). Errors: kNotFound (stream), kInvalidArgument (opcode, atomic
    // length not 8), kAccessDenied (local buffer), kWrongState (stream or connection
    // failed), kExhausted (over max_outstanding_wrs).
    Error post_send(uint32_t stream, const SendWr& wr, Time now);
    // post_recv queues a receive buffer for incoming SEND/SEND_IMM/WRITE_IMM. Errors as
    // post_send; a stream in error takes no receives (kWrongState).
    Error post_recv(uint32_t stream, const RecvWr& wr, Time now);

    // Shared receive queues (spec [PLACE-24]). create_srq makes one in `pd`; use_srq makes
    // a stream take its receives from it (before the stream is bound and while it has no
    // receives of its own); post_srq_recv queues a receive (checked as post_recv);
    // arm_srq_limit asks for one kSrqLimit event when fewer than `limit` receives remain;
    // destroy_srq frees one no stream uses. Errors: kInvalidArgument (pd, srq), kNotFound,
    // kWrongState (stream bound or has receives; SRQ in use), kExhausted, kAccessDenied.
    Result<uint32_t> create_srq(uint32_t pd);
    Error use_srq(uint32_t stream, uint32_t srq);
    Error post_srq_recv(uint32_t srq, const RecvWr& wr);
    Error arm_srq_limit(uint32_t srq, uint32_t limit);
    Error destroy_srq(uint32_t srq);
    size_t srq_size(uint32_t srq) const;

    // Per-stream settings ([STREAM-12]): a stream starts with default_stream_limits() (the
    // endpoint config's values); set_stream_limits replaces them, effective for whatever
    // the stream does next. Errors: kNotFound, kInvalidArgument (max_rd_atomic or
    // max_dest_rd_atomic 0, retry_limit over 1000, a negative timeout, traffic_class over
    // kMaxTrafficClass).
    StreamLimits default_stream_limits() const;
    Error set_stream_limits(uint32_t stream, const StreamLimits& limits);

    // destroy_stream ends a stream at once, busy or not ([STREAM-10]): every outstanding
    // work request and posted receive completes with kFlushed (reported now, before any
    // other event of it), nothing of it is sent or written again, and its id is never
    // given to another stream (its slot is, with a new generation, after the quiet period:
    // [STREAM-15]). The peer's later messages for it are refused as for an unknown stream.
    // Errors: kNotFound.
    Error destroy_stream(uint32_t stream, Time now);

    // A queue pair that keeps its number through RESET (verbs semantics, [STREAM-13]):
    // hold_stream destroys the stream as destroy_stream does but holds its id, which no
    // other stream gets; reserve_held_stream makes a fresh stream (unbound, default
    // limits, sequences as [STREAM-2] says) under that same id once the quiet period of
    // [STREAM-15], measured from hold_stream, has passed, so no packet or timer of the old
    // incarnation can be about; held_stream_ready says when; release_held_stream gives up
    // the id (its slot then waits out the rest of its quiet period as any other).
    // Errors: hold: kNotFound; reserve: kNotFound (not held), kInvalidArgument (pd),
    // kWrongState (quiet period not over; the stream is not made).
    Error hold_stream(uint32_t stream, Time now);
    std::optional<Time> held_stream_ready(uint32_t id) const;
    Result<uint32_t> reserve_held_stream(uint32_t pd, uint32_t id, Time now);
    void release_held_stream(uint32_t id);

    // close_connection sends CLOSE and flushes every outstanding work request.
    Error close_connection(uint32_t conn, Time now);
    // close_unconfirmed: the connection sent a CLOSE that no CLOSE of the peer has answered
    // yet ([CONN-29]); false for an unknown connection.
    bool close_unconfirmed(uint32_t conn) const;
    // repeat_close: a lingering endpoint sends an unconfirmed CLOSE again, when [CONN-28]'s
    // pacing (min_pto) and budget (8) allow ([CONN-29]). Returns true if one was queued.
    bool repeat_close(uint32_t conn, Time now);

    // Lookups for drivers, tools and tests (nullptr / 0 when unknown).
    const Connection* connection(uint32_t id) const;
    uint32_t connection_to(const Address& peer) const;
    const Stream* stream(uint32_t id) const;
    // stream_bytes_placed: new payload bytes the stream has received into memory (each
    // segment counted once; duplicates are not); 0 for an unknown stream.
    uint64_t stream_bytes_placed(uint32_t id) const {
        const Stream* s = stream(id);
        return s ? s->bytes_placed : 0;
    }
    // retired_stream: `id` names a stream slot of this endpoint that was used but does
    // not hold that id now: a destroyed stream ([STREAM-13], [STREAM-15]); packets for it
    // are stale.
    bool retired_stream(uint32_t id) const {
        const uint32_t slot = (id & kStreamSlotMask) - 1;
        if (slot >= streams_.size()) return false;
        const Stream* s = streams_[slot].get();
        return !s || s->id != id;
    }
    const EndpointStats& stats() const { return stats_; }
    // set_trace_sink installs the observer of RTT samples and connection/path events
    // (core/trace.h); nullptr removes it. The sink must outlive the endpoint or be removed
    // first.
    void set_trace_sink(TraceSink* sink) { trace_ = sink; }
    // for_each_connection calls fn(const Connection&) for every connection slot in use
    // (live ones and ended ones in their quiet period), in slot order. For observers.
    template <class F>
    void for_each_connection(F&& fn) const {
        for (const auto& c : conns_)
            if (c) fn(*c);
    }
    // connections_in_first_round_trip: the live connections that have had no ACK yet
    // (opening, or established and in their first round trip, [CC-20]), counted up to
    // `at_most`.
    size_t connections_in_first_round_trip(size_t at_most) const;
    // work_outstanding: some live stream has posted work that has not completed (sent and
    // acknowledged, or answered). A driver that is about to end lets it finish first.
    bool work_outstanding() const;
    // Engine: work_outstanding, or a receive posted to a live stream or to an SRQ.
    bool awaits_completions() const override;
    // Engine: a stream has an undelivered message with some, not all, of its segments.
    bool receiving() const override;
    // Engine: messages delivered whole, every connection's together (the connections'
    // messages_received and the answers to their READs and atomics, including those of
    // connections since reclaimed).
    uint64_t messages_delivered() const override { return messages_delivered_; }
    // num_connections: the connection slots in use (live connections and ended ones in
    // their quiet period, [CONN-24]); at most max_connections.
    size_t num_connections() const { return conns_.size() - free_conns_.size(); }
    // num_streams: the stream slots in use (live streams and destroyed ones in their quiet
    // period, [STREAM-15]); at most max_streams.
    size_t num_streams() const { return streams_.size() - free_streams_.size(); }

    // Stream ids are (generation << 20) | (slot + 1) ([STREAM-15]).
    static constexpr uint32_t kStreamSlotBits = 20;
    static constexpr uint32_t kStreamSlotMask = (1u << kStreamSlotBits) - 1;

    // core::Engine
    void on_datagram(std::span<const std::byte> datagram, const PacketMeta& meta,
                     Time now) override;
    bool is_handshake(std::span<const std::byte> datagram) const override;
    void on_timeout(Time now) override;
    size_t poll_transmit(std::span<std::byte> buf, PacketMeta& meta, Time now) override;
    size_t poll_transmit_in_place(std::span<std::byte> buf, PacketMeta& meta, Time now,
                                  std::span<const std::byte>& payload) override;
    void set_ready_ports(uint64_t mask) override { ready_ports_ = mask; }
    void set_data_only(bool on) override { data_only_ = on; }
    uint64_t ready_ports() const { return ready_ports_; }

    // [PATH-13]: the loss score of every path of every connection together, kept by the
    // connections: the fabric's random loss as this host sees it, measured from far more
    // packets than one path or one connection carries.
    uint32_t loss_score() const { return loss_score_; }
    void note_loss() { path_health::score_loss(loss_score_); }
    void note_delivery() { path_health::score_delivery(loss_score_); }

    // [PATH-16]: a NIC port that heard nothing while the host's others went on receiving:
    // its plane is likely dead, and no ACK or probe reply is sent on it.
    bool port_quiet(uint16_t port, Time now) const { return quiet_ports_.quiet(port, now); }
    Time next_deadline() const override;
    std::optional<Event> poll_event() override;
    size_t max_datagram_size() const override;

private:
    friend class Connection;

    // produce: poll_transmit and poll_transmit_in_place (in_place null: every payload copied).
    size_t produce(std::span<std::byte> buf, PacketMeta& meta, Time now, Connection::InPlace* in_place);

    // The per-packet lookups, inline: an index and a compare.
    Stream* stream_mut(uint32_t id) {
        const uint32_t slot = (id & kStreamSlotMask) - 1;
        if (slot >= streams_.size()) return nullptr;
        Stream* s = streams_[slot].get();
        return s && s->id == id ? s : nullptr;
    }
    Srq* srq_mut(uint32_t id) {
        return id == 0 || id > srqs_.size() ? nullptr : srqs_[id - 1].get();
    }
    // Connection ids are (random 16 bits << 16) | (slot + 1): a lookup is an index and one
    // compare, and the random half still makes a stale or guessed id miss. A reused slot's
    // random half differs from its previous connection's ([CONN-24]).
    Connection* conn_mut(uint32_t id) {
        const uint32_t slot = (id & 0xFFFF) - 1;
        if (slot >= conns_.size()) return nullptr;
        Connection* c = conns_[slot].get();
        return c && c->id() == id ? c : nullptr;
    }
    Connection* new_connection(const Address& peer, Time now);
    // saw keeps the latest time any call gave the endpoint (reserve_stream has none).
    void saw(Time now) {
        if (now > now_) now_ = now;
    }
    // [CONN-24]: Connection::end calls connection_ended once, when the connection first
    // becomes Failed or Closed; reclaim gives back the slots whose quiet period is over.
    void connection_ended(Connection& c, Time now);
    void reclaim(Time now);
    void emit(const Event& e) { events_.push_back(e); }
    // touched re-evaluates a connection after any change: the ready list now, its timer
    // lazily (flush_deadlines), so a batch of packets costs one deadline computation.
    void touched(Connection& c, Time now, bool may_send = true) {
        if (may_send && !c.in_ready && c.has_work(now)) {
            c.in_ready = true;
            ready_.push_back(c.id());
        }
        // Only a connection whose deadline moved needs flushing. Every change to a
        // connection goes through an Endpoint entry point that ends here, so one whose
        // deadline equals its armed one now has nothing for flush_deadlines to do.
        if (!c.deadline_dirty && c.next_deadline() != c.armed_deadline) {
            c.deadline_dirty = true;
            dirty_.push_back(c.id());
        }
    }
    void flush_deadlines() const;
    // update_fair_share recomputes the receiver's shares when due and pushes the raised
    // ones to their senders ([CC-14]).
    void update_fair_share(Time now) {
        if (now < fair_share_.next_update()) return;
        for (uint32_t slot : fair_share_.update(now)) {
            if (slot >= conns_.size() || !conns_[slot]) continue;
            conns_[slot]->push_hint();
            touched(*conns_[slot], now);
        }
    }
    // hello_names_sender: the HELLO or HELLO_ACK has a non-zero src_conn_id and
    // src_token; counts it (malformed_hello) if not.
    bool hello_names_sender(const wire::HelloPacket& h);
    void on_hello_datagram(std::span<const std::byte> datagram, const PacketMeta& meta,
                           Time now);
    // answer_with_retry: [CONN-25]: the HELLO must prove its address; nothing is kept.
    void answer_with_retry(const Address& peer, const wire::HelloPacket& h, const Connection* c,
                           Time now);
    // on_v1_datagram: a version-1 HELLO or HELLO_ACK gets a clear refusal ([VER-1]).
    void on_v1_datagram(std::span<const std::byte> datagram, const PacketMeta& meta, Time now);
    void count_decode_error(Error e);
    Error queue_receive(LazyDeque<PostedRecv>& queue, uint32_t pd, const RecvWr& wr);
    Error resolve_local(uint32_t pd, uint64_t addr, uint32_t length, uint32_t lkey, const Sge* sg,
                        uint32_t nsge, bool write, std::vector<Piece>& pieces, std::byte*& one,
                        uint32_t& total) const;

    EndpointConfig cfg_;
    Address local_;
    Rng rng_;
    CryptoRng secrets_;  // [CONN-5]: tokens, memory-key tags, the cookie key
    HelloGuard guard_;   // [CONN-25]: cookies and the replies that belong to no connection
    uint32_t unproven_ = 0;  // [CONN-26]: connections (live or in their quiet period) not proven
    MemoryTable memory_;
    EndpointStats stats_;
    TraceSink* trace_ = nullptr;  // set_trace_sink; read by connections
    uint32_t loss_score_ = 0;  // loss_score(), note_loss(), note_delivery()
    uint64_t messages_delivered_ = 0;  // messages_delivered(); counted by the connections
    cc::FairShare fair_share_;  // spec §9.2: this endpoint's inbound capacity, shared
    QuietPorts quiet_ports_;    // [PATH-16] port_quiet(); fed by on_datagram

    std::vector<std::unique_ptr<Connection>> conns_;  // slot = (id & 0xFFFF) - 1
    std::unordered_map<Address, uint32_t, AddressHash> by_peer_;
    std::vector<std::unique_ptr<Stream>> streams_;  // slot = (id & kStreamSlotMask) - 1
    // [CONN-24], [STREAM-15]: ended connections and destroyed streams wait out the quiet
    // period here (in order of their end, which is the order of `at`), then their slots go
    // to the free lists. Each entry keeps the last id the slot had, so the next id differs.
    struct Retired {
        Time at;      // when the slot may be given back
        uint32_t id;  // the slot's last id
    };
    std::deque<Retired> retiring_conns_, retiring_streams_;
    std::vector<Retired> held_streams_;  // hold_stream: ids kept for their queue pair
    std::deque<uint32_t> free_conns_, free_streams_;  // last ids of free slots, oldest first
    Time now_{};  // the latest time given to any call (see saw)
    std::vector<std::unique_ptr<Srq>> srqs_;        // index = id - 1; ids never reused

    // Connections with something to send, round-robin; Connection::in_ready avoids
    // duplicates.
    std::deque<uint32_t> ready_;
    uint64_t ready_ports_ = kAllPorts;  // set_ready_ports; [PATH-15]
    bool data_only_ = false;            // set_data_only
    // [CONN-15] timers scale: a min-heap of (deadline, connection); stale entries are
    // skipped by comparing with Connection::armed_deadline.
    struct TimerEntry {
        Time at;
        uint32_t conn;
        bool operator>(const TimerEntry& o) const { return at > o.at; }
    };
    // mutable: next_deadline() is const for the driver but folds in pending recomputations.
    mutable std::priority_queue<TimerEntry, std::vector<TimerEntry>, std::greater<>> timers_;
    mutable std::vector<uint32_t> dirty_;  // connections whose deadline may have changed
    std::deque<Event> events_;
    // The packet being handled (see on_datagram): decoded in place, reused.
    wire::DataPacket rx_data_;
    wire::AckPacket rx_ack_;
    // [WIRE-10]: the ACK of a coalesced datagram, applied after its DATA, at this
    // endpoint's next input, timer or poll for more than DATA (apply_coalesced_ack): the
    // DATA's events reach the application first, and a request-response driver
    // (api/driver.h, answer_first) sends the answer before the ACK's work (about 1,600
    // instructions, Connection::on_ack) is done.
    wire::AckPacket coalesced_ack_;
    uint32_t coalesced_ack_conn_ = 0;
    bool coalesced_ack_due_ = false;
    void apply_coalesced_ack(Time now);
    void settle_after_ack(Connection& c);  // its deadline made exact at the next flush
    wire::AckPacket tx_ack_;  // the ACK being written (Connection::write_ack)
};

}  // namespace mroce::core
