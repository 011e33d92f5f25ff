// sim/switch.h — an output-queued switch: ports with per-class egress queues, a serialiser
// per port onto a wire, drop-tail admission against per-port or shared (dynamic threshold)
// buffers, ECN marking (step or RED) at enqueue, ECMP forwarding and optional PFC.
//
//   wire ─► SwitchPort i (ingress) ─► Switch::forward: dst IP ─► next-hop ports
//                                       ─► ecmp_hash(salt, 5-tuple) % n ─► SwitchPort j
//   SwitchPort j (egress): admit (buffer) ─► ECN mark ─► class queue ─► serialiser (rate,
//                          strict priority over unpaused classes) ─► its wire (a Link)
//
//   PFC: bytes buffered are also counted per (ingress port, class). Above xoff the ingress
//   port sends PAUSE upstream (it arrives after the wire's delay and stops the upstream
//   egress for that class after its current packet); at or below xon it sends RESUME.
//   Headroom above xoff absorbs what is in flight meanwhile; a lossless packet that finds
//   even the headroom full is dropped and counted (kPfcOverflow) — a configuration bug the
//   tests assert never happens.
//
// A packet occupies the buffer from admission until its last bit has left (as in Link:
// occupancy includes the packet in service). The switch forwards in zero time. Routing
// tables are filled by the topology builder (topology.h) and may be replaced at any time
// (reconvergence after a fault).
// Threading: single-threaded, like its Sim.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sim/event_queue.h"
#include "sim/link.h"
#include "sim/packet.h"
#include "sim/ring_queue.h"

namespace mroce::sim {

// EcnConfig: marking on the instantaneous egress queue (bytes, including the packet in
// service) that a packet finds at enqueue; only ECT packets are marked (set to CE). With
// several traffic classes the queue is the packet's class queue at that port.
struct EcnConfig {
    enum class Mode : uint8_t { kOff, kStep, kRed };
    Mode mode = Mode::kOff;
    uint64_t k_bytes = 0;     // kStep: mark when queue >= k_bytes
    uint64_t kmin_bytes = 0;  // kRed: never below kmin, always at or above kmax,
    uint64_t kmax_bytes = 0;  //   pmax * (q - kmin) / (kmax - kmin) in between (DCQCN's RED)
    double pmax = 1.0;

    static EcnConfig step(uint64_t k) { return {Mode::kStep, k, 0, 0, 1.0}; }
    static EcnConfig red(uint64_t kmin, uint64_t kmax, double pmax) {
        return {Mode::kRed, 0, kmin, kmax, pmax};
    }
    // mark_probability is the probability a packet finding queue_bytes is marked.
    double mark_probability(uint64_t queue_bytes) const;
};

// ecn_should_mark decides for one packet; rng is drawn from only where 0 < p < 1, so a
// step marker or a queue outside RED's ramp consumes no randomness.
bool ecn_should_mark(const EcnConfig& ecn, uint64_t queue_bytes, Rng& rng);

// PfcConfig: priority flow control on the classes whose bit is set in lossless_classes.
// Thresholds are per (ingress port, class). Choose headroom >= 2 * wire delay * rate + 2
// MTU (a pause takes one delay to arrive; what is on the wire and in the upstream
// serialiser keeps coming) and the buffer large enough for every ingress's xoff+headroom.
struct PfcConfig {
    uint8_t lossless_classes = 0;  // bit c: class c is lossless (paused, never dropped)
    uint64_t xoff_bytes = 0;       // send PAUSE when the ingress count exceeds this
    uint64_t xon_bytes = 0;        // send RESUME when it falls to or below this
    uint64_t headroom_bytes = 0;   // admitted above xoff before a lossless drop
    bool enabled() const { return lossless_classes != 0; }
    bool lossless(uint8_t cls) const { return (lossless_classes >> cls) & 1; }
};

// BufferConfig: per-port buffers (each egress port owns port_bytes) or one shared pool
// with the dynamic threshold of Choudhury & Hahne: a lossy packet is admitted to egress
// queue q only if q + size <= alpha * (shared_bytes - used). Lossless (PFC) classes are
// limited by the pool (shared) or the port buffer only; PFC keeps them in bounds.
struct BufferConfig {
    bool shared = false;
    uint64_t port_bytes = 1 << 20;    // per-port mode: each egress port's capacity
    uint64_t shared_bytes = 4 << 20;  // shared mode: the switch's pool
    double alpha = 1.0;               // shared mode: dynamic threshold factor
};

struct SwitchConfig {
    uint8_t traffic_classes = 1;  // egress queues per port (packet class is clamped)
    // class_queue[c] is the egress queue of traffic class c ([topology] class_queues):
    // identity by default, so each class has its own strict-priority queue. Classes that
    // map to one queue share its FIFO, its ECN marking and (so) its place in the priority
    // order. mapped_classes is how many classes the map lists (0: the identity, one class
    // per queue); a queue at or above traffic_classes is clamped to the top one, as a class
    // beyond the map is. PFC needs the identity (check_topology_config): a PAUSE names one
    // class, and a host NIC pauses that class alone.
    std::array<uint8_t, kMaxTrafficClasses> class_queue{0, 1, 2, 3, 4, 5, 6, 7};
    uint8_t mapped_classes = 0;
    // classes is the number of traffic classes flows may use: the map's, else one per queue.
    uint8_t classes() const { return mapped_classes ? mapped_classes : traffic_classes; }
    bool class_queue_identity() const {
        for (uint8_t c = 0; c < classes(); ++c)
            if (class_queue[c] != c) return false;
        return true;
    }
    BufferConfig buffer;
    EcnConfig ecn;
    PfcConfig pfc;
};

enum class SwitchDrop : uint8_t {
    kBufferFull,   // drop-tail: port buffer, shared pool or dynamic threshold
    kPfcOverflow,  // a lossless packet beyond xoff + headroom or the buffer (a misconfig)
};
inline constexpr size_t kSwitchDropCount = 2;

// PortStats: egress counters of one port (only grow). Conservation per port:
// enqueued_packets == tx_packets + queued packets.
struct PortStats {
    uint64_t enqueued_packets = 0;
    uint64_t tx_packets = 0;  // serialised onto the wire
    uint64_t tx_bytes = 0;
    uint64_t dropped_packets[kSwitchDropCount] = {};
    uint64_t dropped_bytes = 0;
    uint64_t ecn_marked = 0;
    uint64_t max_queue_bytes = 0;     // the egress queue's peak (all classes)
    SimDuration paused_time{0};       // time with at least one class paused (closed spans)
    uint64_t pauses_received = 0;     // PAUSE frames that paused a class of this egress
    uint64_t pauses_sent = 0;         // PAUSE frames this ingress sent upstream
    uint64_t resumes_sent = 0;
    uint64_t class_pauses_sent[kMaxTrafficClasses] = {};  // pauses_sent by traffic class
    uint64_t dropped_data_packets = 0;  // of the drops, DATA packets (Packet::data)
    uint64_t dropped(SwitchDrop r) const { return dropped_packets[static_cast<size_t>(r)]; }
    uint64_t dropped_total() const { return dropped_packets[0] + dropped_packets[1]; }
};

class Switch;

// SwitchPort is one port of a switch: the ingress side (a PacketSink the upstream wire
// delivers to) and the egress side (queues, serialiser, wire).
class SwitchPort final : public PacketSink, public PauseTarget {
  public:
    SwitchPort(Switch& owner, uint16_t index, uint64_t rate_bps);
    ~SwitchPort() override;
    SwitchPort(const SwitchPort&) = delete;
    SwitchPort& operator=(const SwitchPort&) = delete;

    // receive: a packet arriving at this port's ingress (takes ownership).
    void receive(PacketPtr packet) override;
    // set_paused: a PFC frame from the downstream device for this port's egress.
    void set_paused(uint8_t cls, bool paused) override;

    // connect sets where serialised packets go (the wire, not owned) and, for PFC, the
    // upstream egress feeding this port's ingress (not owned; its pause frames travel on
    // `wire`, so they arrive after wire->config().delay).
    void connect(Link* wire, PauseTarget* upstream) {
        wire_ = wire;
        upstream_ = upstream;
    }
    Link* wire() const { return wire_; }

    uint64_t rate_bps() const { return rate_bps_; }
    // set_rate changes the serialisation rate (a degraded link) from the next packet on.
    void set_rate(uint64_t rate_bps) { rate_bps_ = rate_bps; }

    uint16_t index() const { return index_; }
    const PortStats& stats() const;  // paused_time includes a pause still running
    uint64_t queue_bytes() const { return queue_bytes_; }
    size_t queued_packets() const;
    bool paused(uint8_t cls) const { return paused_[cls]; }

    // QueueWatch follows the queue across one threshold, exactly: checked at every enqueue
    // and departure (the queue changes nowhere else). `above` = queue >= threshold now.
    struct QueueWatch {
        uint64_t threshold_bytes = UINT64_MAX;  // off
        bool above = false;
        SimTime rose_at{};  // the last time it reached the threshold from below
        SimTime fell_at{};  // the last time it fell below the threshold
    };
    // watch_queue sets the threshold (from now on; call it before traffic arrives).
    void watch_queue(uint64_t threshold_bytes) { watch_.threshold_bytes = threshold_bytes; }
    const QueueWatch& queue_watch() const { return watch_; }
    uint64_t ingress_bytes(uint8_t cls) const { return ingress_bytes_[cls]; }

  private:
    friend class Switch;
    // A queue entry carries what serialisation and the accounting on departure need (size,
    // class, ingress), so a packet's header is not loaded again when it leaves the port.
    struct Queued {
        PacketPtr packet{nullptr, {}};
        uint32_t size = 0;     // packet->size()
        uint16_t ingress = 0;  // port it came in on (PFC accounting)
        uint8_t cls = 0;       // the switch class it was queued in (class_of at enqueue)
    };

    void enqueue(PacketPtr packet, uint16_t ingress);
    void try_start_service();
    void on_serialized();
    void ingress_add(uint8_t cls, uint64_t bytes);
    void ingress_remove(uint8_t cls, uint64_t bytes);
    void send_pause(uint8_t cls, bool pause);

    // The members a forwarded packet touches come first and together (owner, wire, rate,
    // occupancy, service, pause state, the first class queue, the counters), so a hop
    // reads a few adjacent cache lines of the port rather than lines spread over ~700 bytes.
    Switch& owner_;
    Link* wire_ = nullptr;
    uint64_t rate_bps_;
    uint64_t queue_bytes_ = 0;
    Queued in_service_;
    EventHandle service_event_;
    std::array<bool, kMaxTrafficClasses> paused_{};
    uint8_t paused_count_ = 0;
    uint16_t index_;
    std::array<RingQueue<Queued>, kMaxTrafficClasses> queues_;
    mutable PortStats stats_;

    PauseTarget* upstream_ = nullptr;
    mutable SimTime paused_since_{};

    // PFC ingress accounting: bytes in this switch's buffer that arrived on this port.
    std::array<uint64_t, kMaxTrafficClasses> ingress_bytes_{};
    std::array<bool, kMaxTrafficClasses> upstream_paused_{};
    std::deque<EventHandle> pause_events_;  // pause frames in flight (cancelled on destroy)
    // Bytes queued (in service included) per class, kept only with several classes: ECN
    // marks on the packet's class queue (with one class, queue_bytes_ is that queue).
    std::array<uint64_t, kMaxTrafficClasses> class_bytes_{};
    QueueWatch watch_;
};

struct SwitchStats {
    uint64_t forwarded_packets = 0;
    uint64_t dropped_no_route = 0;  // unknown destination or no live next hop
    uint64_t dropped_no_route_bytes = 0;
    uint64_t dropped_no_route_data = 0;  // of those, DATA packets (Packet::data)
};

class Switch {
  public:
    // Switch with no ports yet; name labels its random streams (unique within the Sim).
    Switch(Sim& sim, const SwitchConfig& config, std::string name);
    ~Switch();
    Switch(const Switch&) = delete;
    Switch& operator=(const Switch&) = delete;

    // add_port appends a port with the given egress rate (0 = infinitely fast is not
    // allowed: a switch port always serialises). The reference stays valid.
    SwitchPort& add_port(uint64_t rate_bps);
    SwitchPort& port(size_t i) { return *ports_[i]; }
    const SwitchPort& port(size_t i) const { return *ports_[i]; }
    size_t port_count() const { return ports_.size(); }

    // set_routes replaces the routing table: next_hops[h] lists the ports on shortest
    // paths to host h (empty: unreachable). ECMP picks among them by hash.
    void set_routes(const std::vector<std::vector<uint16_t>>& next_hops);
    // next_hops returns the ports towards host index h (empty if none).
    std::span<const uint16_t> next_hops(uint32_t host) const;
    // route_port is the egress port a UDP datagram takes, or UINT16_MAX if unroutable.
    uint16_t route_port(uint32_t src_ip, uint32_t dst_ip, uint16_t src_port,
                        uint16_t dst_port) const;

    uint64_t ecmp_salt() const { return salt_; }
    void set_ecmp_salt(uint64_t salt) { salt_ = salt; }
    const SwitchConfig& config() const { return config_; }
    SwitchConfig& config() { return config_; }  // thresholds may change at any time
    const std::string& name() const { return name_; }
    const SwitchStats& stats() const { return stats_; }
    // buffer_used is the bytes buffered in all egress queues (the shared pool's use).
    uint64_t buffer_used() const { return buffer_used_; }
    uint64_t max_buffer_used() const { return max_buffer_used_; }
    // in_flight is the number of packets buffered in this switch.
    size_t in_flight() const;

  private:
    friend class SwitchPort;
    void forward(PacketPtr packet, uint16_t ingress);
    // class_of is the egress queue of a packet: its class through the class map, clamped
    // to the top queue (a class beyond the map, or a queue the switch lacks).
    uint8_t class_of(const Packet& p) const {
        const uint8_t q = config_.class_queue[std::min<uint8_t>(p.traffic_class, kMaxTrafficClasses - 1)];
        return q < config_.traffic_classes ? q : config_.traffic_classes - 1;
    }

    Sim& sim_;
    SwitchConfig config_;
    std::string name_;
    uint64_t salt_;
    Rng ecn_rng_;
    std::vector<std::unique_ptr<SwitchPort>> ports_;
    // Routing table, compressed: host h uses ECMP group route_group_[h], whose ports are
    // group_ports_[group_begin_[g], group_begin_[g + 1]). Most hosts share a handful of
    // groups (all the uplinks, one downlink each), so the per-host array stays small and
    // in cache even with thousands of hosts; group 0 is empty (unreachable).
    std::vector<uint32_t> route_group_;
    std::vector<uint32_t> group_begin_{0, 0};
    std::vector<uint16_t> group_ports_;
    uint64_t buffer_used_ = 0;
    uint64_t max_buffer_used_ = 0;
    SwitchStats stats_;
};

}  // namespace mroce::sim
