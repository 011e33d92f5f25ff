// sim/link.h — a unidirectional link: FIFO egress queue (drop-tail, optional ECN marking),
// a serialiser at a fixed rate, a propagation delay, and seeded impairments.
//
//   receive() ──► [ queue: drop-tail at capacity, ECN mark at enqueue ] ──► serialiser
//                                                                              │ rate
//        wire decisions when the last bit leaves: blackhole, pattern,          ▼
//        Bernoulli, Gilbert-Elliott loss; reorder; duplicate; delayed copy ─► pipe (delay
//        + jitter, FIFO) ─► sink.receive()       late packets ─► late heap ─► sink
//
// A link never reorders packets on its own: jitter is clamped so the pipe stays FIFO, as
// one ECMP route is. Only the reorder and delayed-duplicate impairments (and, across
// routes, different delays) reorder. Losses are decided when the packet has been
// serialised, so a lost packet still used queue space and link time, as on a real wire.
//
// Every random impairment draws from its own stream forked from the Sim's seed with the
// link's name, so turning one on never changes the sequence another one sees.
// Threading: single-threaded, like the Sim it belongs to.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/event_queue.h"
#include "sim/packet.h"
#include "sim/ring_queue.h"

namespace mroce::sim {

// serialization_time is how long `bytes` take at rate_bps, rounded up to a picosecond.
// rate_bps == 0 means an infinitely fast link (0 ps).
SimDuration serialization_time(uint64_t bytes, uint64_t rate_bps);

// A time window [from, until). until == kSimForever means "from `from` on, forever".
struct TimeWindow {
    SimTime from{};
    SimTime until = kSimForever;
    bool contains(SimTime t) const { return from <= t && t < until; }
};

// Gilbert-Elliott burst loss. Per packet on the wire: in the bad state the packet is lost
// with probability loss_in_bad; then the state moves good->bad with p_good_to_bad or
// bad->good with p_bad_to_good. Mean loss rate = loss_in_bad * p_gb / (p_gb + p_bg); mean
// bad-state run = 1 / p_bad_to_good packets.
struct GilbertElliott {
    double p_good_to_bad = 0;
    double p_bad_to_good = 1;
    double loss_in_bad = 1;
};

// Deterministic drops by index of the packet on the wire (0 = the first packet this link
// serialised; packets dropped by a full queue are not counted).
struct DropPattern {
    std::vector<uint64_t> indices;  // drop these packet indices (any order)
    uint64_t mask = 0;              // bit i set: drop packet index i (i < 64)
    bool mask_repeats = false;      // apply the mask to every block of 64 packets
    bool empty() const { return indices.empty() && mask == 0; }
};

struct LinkConfig {
    uint64_t rate_bps = 100'000'000'000;  // serialisation rate; 0 = infinite (no queueing)
    SimDuration delay = std::chrono::microseconds(1);  // propagation delay
    uint64_t queue_capacity_bytes = 1 << 20;  // drop-tail: occupancy + size > capacity drops
    // ECN: mark CE on an ECT packet when the occupancy it finds at enqueue >= threshold.
    std::optional<uint64_t> ecn_threshold_bytes;

    // Small uniform random extra delay in [0, jitter_max] on every packet, on by default
    // so that equal-time arrivals from independent sources do not phase-lock (quiche's
    // random delays). 1 ns is below a 64-byte serialisation at 100 Gbit/s, so it neither
    // reorders nor changes throughput. Set 0 for exact-timing tests.
    SimDuration jitter_max = std::chrono::nanoseconds(1);

    double loss_probability = 0;  // Bernoulli loss per packet on the wire
    std::optional<GilbertElliott> burst_loss;
    DropPattern drop_pattern;
    std::optional<TimeWindow> blackhole;  // drop every packet leaving the queue in window

    double duplicate_probability = 0;       // a copy is delivered right after the original
    double late_duplicate_probability = 0;  // a copy arrives late_duplicate_delay later
    SimDuration late_duplicate_delay = std::chrono::microseconds(100);
    double reorder_probability = 0;  // the packet gets reorder_delay extra delay,
    SimDuration reorder_delay = std::chrono::microseconds(10);  // so later ones overtake it
};

enum class DropReason : uint8_t {
    kQueueFull,
    kRandomLoss,
    kBurstLoss,
    kPattern,
    kBlackhole,
};
inline constexpr size_t kDropReasonCount = 5;
const char* to_string(DropReason r);

// Counters only grow. Conservation: offered + duplicated + late_duplicated
//   == delivered + sum(dropped) + in_flight().
struct LinkStats {
    uint64_t offered_packets = 0;
    uint64_t offered_bytes = 0;
    uint64_t delivered_packets = 0;  // every copy handed to the sink, duplicates included
    uint64_t delivered_bytes = 0;
    uint64_t dropped_packets[kDropReasonCount] = {};
    uint64_t dropped_bytes = 0;
    uint64_t duplicated = 0;       // immediate copies made
    uint64_t late_duplicated = 0;  // delayed copies made
    uint64_t reordered = 0;        // packets given the reorder delay
    uint64_t ecn_marked = 0;       // ECT packets set to CE here
    uint64_t max_queue_bytes = 0;
    uint64_t dropped_data_packets = 0;  // of the drops, DATA packets (Packet::data)

    uint64_t dropped(DropReason r) const { return dropped_packets[static_cast<size_t>(r)]; }
    uint64_t dropped_total() const;
};

class Link final : public PacketSink {
  public:
    // Link forwards to sink (not owned, may be set later; must outlive the link's events).
    // name labels the link's random streams and must be unique within the Sim.
    Link(Sim& sim, const LinkConfig& config, std::string name, PacketSink* sink = nullptr);
    ~Link() override;  // cancels the link's pending events; queued packets are freed
    Link(const Link&) = delete;
    Link& operator=(const Link&) = delete;

    // receive offers a packet to the link at sim.now(). Takes ownership.
    void receive(PacketPtr packet) override {
        const uint32_t size = packet_size(*packet);
        receive(std::move(packet), size);
    }
    // receive with the packet's size already known (== packet->size()): a switch port
    // hands on what its queue entry carries, so the hop does not load the packet header.
    void receive(PacketPtr packet, uint32_t size);

    // config may be changed at any time (e.g. blackhole a route mid-run, raise its loss);
    // changes apply to packets serialised (or, for the queue, offered) afterwards.
    LinkConfig& config() { return config_; }
    const LinkConfig& config() const { return config_; }
    void set_sink(PacketSink* sink) { sink_ = sink; }
    PacketSink* sink() const { return sink_; }

    const LinkStats& stats() const { return stats_; }
    const std::string& name() const { return name_; }
    uint64_t queue_bytes() const { return queue_bytes_; }  // includes the packet in service
    size_t in_flight() const;  // queued, in service, or propagating (incl. late copies)

  private:
    struct Late {
        SimTime arrival;
        uint64_t seq;
        PacketPtr packet;
    };

    static uint32_t packet_size(const Packet& p) { return static_cast<uint32_t>(p.size()); }
    // impaired: some loss model, drop pattern, blackhole, copy or reorder impairment is
    // configured (active or not), so put_on_wire must take its general path. Evaluated per
    // packet because config() may be changed at any time.
    bool impaired() const {
        const LinkConfig& c = config_;
        return c.loss_probability > 0 || c.burst_loss.has_value() || c.blackhole.has_value() ||
               !c.drop_pattern.empty() || c.duplicate_probability > 0 ||
               c.late_duplicate_probability > 0 || c.reorder_probability > 0;
    }
    void start_service();
    void on_serialized();
    void put_on_wire(PacketPtr packet, uint32_t size);
    SimTime wire_arrival();  // now + delay + a jitter draw
    std::optional<DropReason> wire_drop_decision();
    void drop(uint32_t size, DropReason why, bool data);
    void pipe_push(SimTime arrival, PacketPtr packet, uint32_t size);
    void on_pipe_head();
    void late_push(SimTime arrival, PacketPtr packet);
    void on_late_head();
    void deliver(PacketPtr packet, uint32_t size);

    // Members in the order a packet on a plain wire (rate 0, no impairments: every
    // switch-to-switch cable) touches them, so that hop reads a few adjacent cache lines
    // of the link instead of one line per member spread over ~760 bytes.
    Sim& sim_;
    PacketSink* sink_;
    // Queue and pipe entries carry the packet's size: serialisation, occupancy and the
    // counters need only that, so a packet's header is loaded once per hop (by whoever
    // receives it next), not again when it leaves the queue or the pipe.
    struct InPipe {
        SimTime arrival{};
        PacketPtr packet{nullptr, {}};
        uint32_t size = 0;
    };
    struct Queued {
        PacketPtr packet{nullptr, {}};
        uint32_t size = 0;
    };
    RingQueue<InPipe> pipe_;  // arrivals non-decreasing: one event for the head only
    SimTime last_pipe_arrival_{};
    EventHandle pipe_event_;
    uint64_t wire_index_ = 0;
    Rng jitter_rng_;
    LinkStats stats_;
    LinkConfig config_;

    RingQueue<Queued> queue_;  // front is in service while service_event_ is pending
    uint64_t queue_bytes_ = 0;
    EventHandle service_event_;

    std::string name_;
    Rng loss_rng_, burst_rng_, duplicate_rng_, late_duplicate_rng_, reorder_rng_;
    bool burst_bad_ = false;

    std::vector<Late> late_;  // min-heap on (arrival, seq); one event for the head only
    uint64_t late_seq_ = 0;
    EventHandle late_event_;
    SimTime late_event_time_ = kSimForever;
};

}  // namespace mroce::sim
