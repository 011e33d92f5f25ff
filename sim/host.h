// sim/host.h — a simulated host: one IPv4 address, one UDP endpoint port, a NIC with one
// or more ports (one per plane) that serialise at line rate, and the event-driven driver
// of one core::Engine.
//
// The host is the simulator's counterpart of api/'s driver loop. It calls the engine only
// from inside Sim events (plus kick()/with_engine() from the test), always with
// now = sim time rounded down to nanoseconds, and after every call it:
//   1. drains poll_event() into the event callback (or the stored list),
//   2. if the NIC can take a datagram, calls poll_transmit once; the datagram goes to the
//      NIC port named by meta.local_port (modulo the port count), occupies it for its
//      serialisation time and is handed to that port's uplink when its last bit has left;
//      then the NIC polls again,
//   3. keeps exactly one timer armed at next_deadline() (re-armed only if it changed);
//      on_timeout is never called twice for the same nanosecond (see stale_deadlines).
// An engine with nothing to send is polled once per call into it and never again until
// something happens (a datagram, its deadline, a kick), so an idle host does not spin.
//
// The NIC can take a datagram when some port is idle and fewer datagrams wait than it has
// ports (the engine picked a busy or PFC-paused port for them); polling then stops until
// a port moves on. With several ports, each poll first tells the engine which ports can
// start a datagram (Engine::set_ready_ports, spec [PATH-15]), as a multi-port NIC's
// per-port scheduler pulls work for the port that went idle; only if the engine has
// nothing for those is it polled again for any port. With one port this is exactly "poll
// when the NIC is idle". Port p's datagrams arrive at the engine with meta.local_port = p.
//
// Traffic classes: a datagram leaves in the class the engine put in meta.traffic_class
// (clamped to kMaxTrafficClasses - 1), and each port keeps one FIFO per class. PFC pauses
// a class of a port, not the port: the port serves the highest unpaused class with a
// datagram waiting (strict priority, as the switch ports do, so a class means the same
// priority at every hop; packets of several classes wait at once only after a resume).
// A datagram of a paused class is held there without stopping the NIC, as long as some
// class the engine has used is not held: the NIC cannot tell the engine which classes
// may go, so it keeps polling and holds what the paused classes produce meanwhile (the
// engine's windows bound that). Only when every class the engine has used is held does
// polling stop, which for an engine that uses one class is the rule above exactly.
//
// The engine writes each datagram straight into a pooled packet: an attached host holds
// one spare packet between polls (PacketPool::outstanding counts it; attach(nullptr)
// returns it).
//
// Threading: single-threaded, like its Sim.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/engine.h"
#include "sim/event_queue.h"
#include "sim/packet.h"
#include "sim/ring_queue.h"
#include "util/address.h"
#include "util/check.h"

namespace mroce::sim {

inline constexpr uint16_t kDefaultUdpPort = 4797;

// Hosts get consecutive addresses in 198.18.0.0/15 (RFC 2544 benchmarking space, never
// routed on the Internet): host n is 198.18.0.0 + n + 1, so host 0 is 198.18.0.1. Every
// fabric (the flat Network, the switched topologies) uses this plan, so a switch finds the
// destination host's index from the destination IP with one subtraction.
inline constexpr uint32_t kHostSubnetBase = 0xC6120000;  // 198.18.0.0
inline constexpr uint32_t kMaxHosts = (1u << 17) - 2;
constexpr uint32_t host_ipv4(uint32_t index) { return kHostSubnetBase + index + 1; }
// host_index_of returns the host index of an IPv4 address (host order), or kMaxHosts if
// the address is outside the plan.
constexpr uint32_t host_index_of(uint32_t ipv4) {
    const uint32_t offset = ipv4 - kHostSubnetBase - 1;  // wraps if below the base
    return offset < kMaxHosts ? offset : kMaxHosts;
}

struct HostConfig {
    uint64_t line_rate_bps = 100'000'000'000;  // NIC serialisation rate per port; must be > 0
    uint16_t udp_port = kDefaultUdpPort;       // the engine's local UDP port
    uint16_t ports = 1;                        // NIC ports (planes), >= 1
    // is_data classifies a datagram the engine sent as DATA (payload) or control, for
    // per-kind counters (Packet::data, HostStats::tx_data_packets, DATA drops); nullptr:
    // nothing is DATA. The protocol's wire format decides (the scenario runner sets it).
    bool (*is_data)(std::span<const std::byte> datagram) = nullptr;
};

struct HostStats {
    uint64_t tx_packets = 0;  // datagrams the NIC put on the wire
    uint64_t tx_bytes = 0;
    uint64_t rx_packets = 0;  // datagrams handed to the engine
    uint64_t rx_bytes = 0;
    uint64_t rx_dropped_no_engine = 0;
    uint64_t rx_dropped_wrong_port = 0;  // dst port is not this host's endpoint port
    uint64_t polls = 0;                  // poll_transmit calls
    uint64_t empty_polls = 0;            // ... that returned nothing
    uint64_t timeouts = 0;               // on_timeout calls
    uint64_t timer_arms = 0;             // times the timer was (re)scheduled
    uint64_t events = 0;                 // engine events drained
    // After on_timeout(t) and a poll with the NIC idle, next_deadline() was still <= t
    // (an engine that does not advance its deadline, or a new timer due in the same
    // nanosecond). The host then calls on_timeout again at t + 1 ns, not at t, so time
    // advances and a broken engine cannot spin in place. Expect 0 from a good engine.
    uint64_t stale_deadlines = 0;
    uint64_t pauses_received = 0;  // PFC frames that paused a class of one of its ports
    uint64_t tx_data_packets = 0;  // of tx_packets, DATA (HostConfig::is_data)
};

class Host final : public PacketSink {
  public:
    using EventCallback = std::function<void(const core::Event&)>;
    // RxTap sees every packet delivered to this host, before the engine does.
    using RxTap = std::function<void(const Packet& packet, const Host& receiver)>;

    // Host sends port 0's datagrams to uplink (not owned; the fabric); other ports' uplinks
    // are set with set_uplink. Normally created by Network::add_host or a topology
    // builder, which pick index and address.
    Host(Sim& sim, uint32_t index, uint32_t ipv4, const HostConfig& config, PacketSink* uplink);
    ~Host() override;  // cancels the host's pending events
    Host(const Host&) = delete;
    Host& operator=(const Host&) = delete;

    // attach makes the host drive engine (not owned; must outlive the attachment and every
    // run while attached). A kick is scheduled at now() so the first poll happens inside
    // the event loop. nullptr detaches (a datagram already on the NIC still goes out).
    void attach(core::Engine* engine);
    core::Engine* engine() const { return engine_; }

    uint32_t index() const { return index_; }
    // address is this host's IP with its endpoint UDP port: what peers send to.
    const Address& address() const { return address_; }
    uint32_t ipv4() const { return address_.ipv4_host_order(); }
    const HostConfig& config() const { return config_; }

    // set_event_callback routes engine events to cb, oldest first, as they are drained.
    // Without a callback, events are stored in events(). The callback may call into the
    // engine through with_engine().
    void set_event_callback(EventCallback cb) { event_callback_ = std::move(cb); }
    std::vector<core::Event>& events() { return events_; }

    // kick re-checks the engine now: drain events, poll if the NIC is idle, re-arm the
    // timer. Call it after changing the engine from outside the host (posting work).
    void kick();
    // with_engine runs f(engine) at now() and then does what kick() does.
    template <class F>
    void with_engine(F&& f) {
        MROCE_DCHECK(engine_ != nullptr);
        f(*engine_);
        after_engine_call();
    }

    void set_rx_tap(RxTap tap) { rx_tap_ = std::move(tap); }

    // receive hands a packet arriving on NIC port 0 to the engine (PacketSink).
    void receive(PacketPtr packet) override { receive_on(0, std::move(packet)); }

    uint16_t port_count() const { return static_cast<uint16_t>(ports_.size()); }
    // set_uplink sets where NIC port p sends (not owned).
    void set_uplink(uint16_t p, PacketSink* uplink) { ports_.at(p)->uplink = uplink; }
    PacketSink* uplink(uint16_t p) const { return ports_.at(p)->uplink; }
    // port_sink is NIC port p's receive side, for the fabric to deliver to.
    PacketSink& port_sink(uint16_t p) { return *ports_.at(p); }
    // pause_target is NIC port p's egress, for the PFC switch port it feeds.
    PauseTarget& pause_target(uint16_t p) { return *ports_.at(p); }
    // set_port_rate changes port p's line rate (a degraded link) from the next datagram.
    void set_port_rate(uint16_t p, uint64_t rate_bps) { ports_.at(p)->rate_bps = rate_bps; }
    uint64_t port_rate(uint16_t p) const { return ports_.at(p)->rate_bps; }
    uint64_t port_tx_packets(uint16_t p) const { return ports_.at(p)->tx_packets; }
    uint64_t port_rx_packets(uint16_t p) const { return ports_.at(p)->rx_packets; }
    // port_rx_bytes counts every arrival on port p, whether the engine took it or not.
    uint64_t port_rx_bytes(uint16_t p) const { return ports_.at(p)->rx_bytes; }
    // port_queued is the datagrams on port p: in service plus waiting (every class).
    size_t port_queued(uint16_t p) const;
    // port_waiting is the datagrams of class cls waiting on port p (not in service).
    size_t port_waiting(uint16_t p, uint8_t cls) const { return ports_.at(p)->waiting.at(cls).size(); }
    bool port_paused(uint16_t p, uint8_t cls) const { return (ports_.at(p)->paused_classes >> cls) & 1; }
    // tx_packets_in_class counts datagrams of class cls the NIC started to serialise.
    uint64_t tx_packets_in_class(uint8_t cls) const { return class_tx_packets_.at(cls); }

    const HostStats& stats() const { return stats_; }
    // nic_busy: some port is serialising a datagram.
    bool nic_busy() const { return busy_ports_ > 0; }
    // armed_deadline is the engine deadline the timer is armed for (kNever if none).
    Time armed_deadline() const { return armed_deadline_; }

  private:
    // NicPort is one NIC port: a serialiser with a FIFO of waiting datagrams per traffic
    // class, its uplink, and the receive side the fabric delivers to.
    struct NicPort final : PacketSink, PauseTarget {
        NicPort(Host& h, uint16_t i, uint64_t rate) : host(h), index(i), rate_bps(rate) {}
        void receive(PacketPtr packet) override { host.receive_on(index, std::move(packet)); }
        void set_paused(uint8_t cls, bool paused) override;
        // ready_classes: classes with a datagram waiting that may go (not paused).
        uint8_t ready_classes() const { return waiting_classes & static_cast<uint8_t>(~paused_classes); }
        Host& host;
        uint16_t index;
        uint8_t waiting_classes = 0;  // bit c: waiting[c] is not empty
        uint8_t paused_classes = 0;   // bit c: PFC paused class c
        uint64_t rate_bps;
        PacketSink* uplink = nullptr;
        PacketPtr in_service{nullptr, {}};
        EventHandle event;
        uint64_t tx_packets = 0;
        uint64_t rx_packets = 0;
        uint64_t rx_bytes = 0;
        std::array<RingQueue<PacketPtr>, kMaxTrafficClasses> waiting;
    };

    Time core_now() const { return to_core_time(sim_.now()); }
    void receive_on(uint16_t port, PacketPtr packet);
    void after_engine_call();
    void drain_events();
    bool can_take_datagram() const {
        if (busy_ports_ >= ports_.size()) return false;
        if (waiting_ == 0) return true;
        // One class in use: a port is idle, so keep polling while fewer datagrams wait
        // than the NIC has ports. Each port has its own queue: a datagram waiting for its
        // busy port must not keep the idle ports of the other planes from sending
        // (issue 14: two hosts over 8 planes got 0.62 of capacity this way).
        if ((used_classes_ & (used_classes_ - 1)) == 0) return waiting_ < ports_.size();
        return can_take_past_held();
    }
    bool can_take_past_held() const;
    // ready_ports: the ports that can start a datagram now: idle, and not paused for
    // every class in use (Engine::set_ready_ports).
    uint64_t ready_ports() const;
    void pump_transmit();
    void start_port(NicPort& port);
    void begin_service(NicPort& port, PacketPtr packet, uint8_t cls);
    void rearm_timer();
    void on_port_done(NicPort& port);
    void on_timer();

    Sim& sim_;
    uint32_t index_;
    Address address_;
    HostConfig config_;
    core::Engine* engine_ = nullptr;

    // The packet the next poll_transmit writes into (bytes sized to max_datagram_size);
    // kept across empty polls, so a datagram is written once and never copied.
    PacketPtr spare_{nullptr, {}};
    std::vector<std::unique_ptr<NicPort>> ports_;
    uint32_t busy_ports_ = 0;  // ports serialising
    uint32_t waiting_ = 0;     // datagrams waiting on all ports, every class
    uint8_t used_classes_ = 0; // bit c: the engine has sent a datagram in class c
    std::array<uint64_t, kMaxTrafficClasses> class_tx_packets_{};

    EventHandle timer_event_;
    Time armed_deadline_ = kNever;
    Time last_timeout_ = Time::min();  // now of the last on_timeout call
    EventHandle kick_event_;

    EventCallback event_callback_;
    std::vector<core::Event> events_;
    RxTap rx_tap_;
    HostStats stats_;
};

}  // namespace mroce::sim
