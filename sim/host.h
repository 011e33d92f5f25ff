// sim/host.h — a simulated host: one IPv4 address, one UDP endpoint port, a NIC that
// serialises at line rate, and the event-driven driver of one core::Engine.
//
// The host is the simulator's counterpart of api/'s driver loop. It calls the engine only
// from inside Sim events (plus kick()/with_engine() from the test), always with
// now = sim time rounded down to nanoseconds, and after every call it:
//   1. drains poll_event() into the event callback (or the stored list),
//   2. if the NIC is idle, calls poll_transmit once; a datagram occupies the NIC for its
//      serialisation time and is handed to the fabric when its last bit has left; then
//      the NIC polls again,
//   3. keeps exactly one timer armed at next_deadline() (re-armed only if it changed);
//      on_timeout is never called twice for the same nanosecond (see stale_deadlines).
// An engine with nothing to send is polled once per call into it and never again until
// something happens (a datagram, its deadline, a kick), so an idle host does not spin.
//
// Threading: single-threaded, like its Sim.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/engine.h"
#include "sim/event_queue.h"
#include "sim/packet.h"
#include "util/address.h"
#include "util/check.h"

namespace mroce::sim {

inline constexpr uint16_t kDefaultUdpPort = 4797;

struct HostConfig {
    uint64_t line_rate_bps = 100'000'000'000;  // NIC serialisation rate; must be > 0
    uint16_t udp_port = kDefaultUdpPort;       // the engine's local UDP port
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
};

class Host final : public PacketSink {
  public:
    using EventCallback = std::function<void(const core::Event&)>;
    // RxTap sees every packet delivered to this host, before the engine does.
    using RxTap = std::function<void(const Packet& packet, const Host& receiver)>;

    // Host sends every datagram to uplink (not owned; the fabric). Normally created by
    // Network::add_host, which picks index and address.
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

    // receive hands a packet arriving from the fabric to the engine (PacketSink).
    void receive(PacketPtr packet) override;

    const HostStats& stats() const { return stats_; }
    bool nic_busy() const { return nic_packet_ != nullptr; }
    // armed_deadline is the engine deadline the timer is armed for (kNever if none).
    Time armed_deadline() const { return armed_deadline_; }

  private:
    Time core_now() const { return to_core_time(sim_.now()); }
    void after_engine_call();
    void drain_events();
    void pump_transmit();
    void rearm_timer();
    void on_nic_done();
    void on_timer();

    Sim& sim_;
    uint32_t index_;
    Address address_;
    HostConfig config_;
    PacketSink* uplink_;
    core::Engine* engine_ = nullptr;

    std::vector<std::byte> tx_buf_;  // reused for every poll_transmit
    PacketPtr nic_packet_{nullptr, {}};
    EventHandle nic_event_;

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
