#include "sim/host.h"

#include <algorithm>
#include <bit>

#include "sim/link.h"

namespace mroce::sim {

Host::Host(Sim& sim, uint32_t index, uint32_t ipv4, const HostConfig& config, PacketSink* uplink)
    : sim_(sim), index_(index), address_(Address::ipv4(ipv4, config.udp_port)), config_(config) {
    MROCE_DCHECK(config.line_rate_bps > 0);
    MROCE_DCHECK(config.ports >= 1);
    if (config_.ports == 0) config_.ports = 1;
    for (uint16_t p = 0; p < config_.ports; ++p)
        ports_.push_back(std::make_unique<NicPort>(*this, p, config_.line_rate_bps));
    ports_[0]->uplink = uplink;
}

Host::~Host() {
    for (auto& port : ports_) sim_.cancel(port->event);
    sim_.cancel(timer_event_);
    sim_.cancel(kick_event_);
}

size_t Host::port_queued(uint16_t p) const {
    const NicPort& port = *ports_.at(p);
    size_t n = port.in_service ? 1 : 0;
    for (const auto& q : port.waiting) n += q.size();
    return n;
}

bool Host::can_take_past_held() const {
    // Several classes in use: a datagram that may go but waits for its busy port still
    // stops polling; held (paused) ones do not, while some used class has none held.
    uint8_t held = 0;
    for (const auto& port : ports_) {
        if (port->ready_classes() != 0) return false;
        held |= port->waiting_classes;
    }
    return (used_classes_ & static_cast<uint8_t>(~held)) != 0;
}

uint64_t Host::ready_ports() const {
    uint64_t mask = kAllPorts;
    const uint8_t used = used_classes_ ? used_classes_ : 1;
    for (size_t i = 0; i < ports_.size() && i < 64; ++i) {
        const NicPort& port = *ports_[i];
        if (port.in_service || (port.paused_classes & used) == used) mask &= ~(uint64_t{1} << i);
    }
    return mask;
}

void Host::NicPort::set_paused(uint8_t cls, bool pause) {
    if (cls >= kMaxTrafficClasses || ((paused_classes >> cls) & 1) == pause) return;
    const auto bit = static_cast<uint8_t>(1u << cls);
    paused_classes = pause ? (paused_classes | bit) : (paused_classes & ~bit);
    // A pause needs no poll now: if it turned a waiting datagram into a held one, that one
    // waited for this busy port, whose completion polls anyway.
    if (pause) {
        ++host.stats_.pauses_received;
        return;
    }
    if (!in_service && (waiting_classes & bit)) {
        host.start_port(*this);
        if (host.engine_) host.after_engine_call();  // the held datagram left: poll again
    }
}

void Host::attach(core::Engine* engine) {
    sim_.cancel(timer_event_);
    sim_.cancel(kick_event_);
    timer_event_ = {};
    armed_deadline_ = kNever;
    last_timeout_ = Time::min();
    engine_ = engine;
    spare_.reset();  // a detached host holds no packet (the pool's count drops to 0)
    if (!engine_) return;
    kick_event_ = sim_.schedule_in(SimDuration{0}, [this] {
        kick_event_ = {};
        kick();
    });
}

void Host::kick() {
    if (engine_) after_engine_call();
}

void Host::after_engine_call() {
    drain_events();
    pump_transmit();
    drain_events();  // poll_transmit may have produced events too
    rearm_timer();
}

void Host::drain_events() {
    if (!engine_) return;
    while (auto event = engine_->poll_event()) {
        ++stats_.events;
        if (event_callback_) {
            event_callback_(*event);
            if (!engine_) return;  // the callback detached the engine
        } else {
            events_.push_back(*event);
        }
    }
}

void Host::pump_transmit() {
    // Poll while the NIC can take a datagram (can_take_datagram): while a port is idle,
    // and, with several classes, past datagrams that paused classes hold.
    while (engine_ && can_take_datagram()) {
        if (!spare_) spare_ = sim_.packets().acquire();
        PacketBytes& buf = spare_->bytes;
        buf.resize(engine_->max_datagram_size());  // recycled capacity; no zeroing (packet.h)
        PacketMeta meta{};
        ++stats_.polls;
        // [PATH-15]: a multi-port NIC pulls work for the ports that can send first, as a
        // NIC's per-port scheduler does; only when there is none does it take work for a
        // busy port into that port's queue.
        size_t n = 0;
        const uint64_t ready = ports_.size() > 1 ? ready_ports() : kAllPorts;
        if (ready != kAllPorts) {
            engine_->set_ready_ports(ready);
            n = engine_->poll_transmit(buf, meta, core_now());
            engine_->set_ready_ports(kAllPorts);
        }
        if (n == 0) {
            if (ready != kAllPorts) ++stats_.polls;
            n = engine_->poll_transmit(buf, meta, core_now());
        }
        if (n == 0) {
            ++stats_.empty_polls;
            return;
        }
        MROCE_DCHECK(n <= buf.size());
        buf.resize(std::min(n, buf.size()));
        // A control datagram, or a DATA datagram whose payload is one repeated byte
        // value (elided), moves to a small slab (PacketPool::compact); the spare keeps
        // its 4 KB slab for the next datagram. Any other stays in the spare's slab.
        PacketPtr packet = sim_.packets().compact(*spare_);
        if (!packet) packet = std::move(spare_);
        // The host owns its IP: the engine chooses only the source port (the path), the
        // NIC port (the plane) and the traffic class.
        meta.src.ip = address_.ip;
        if (meta.src.port == 0) meta.src.port = config_.udp_port;
        packet->meta = meta;
        // [STREAM-14]: the engine names the class; the switches' priority and PFC class.
        const uint8_t cls = std::min<uint8_t>(meta.traffic_class, kMaxTrafficClasses - 1);
        const auto bit = static_cast<uint8_t>(1u << cls);
        packet->traffic_class = cls;
        used_classes_ |= bit;
        ++stats_.tx_packets;
        stats_.tx_bytes += packet->size();
        packet->data = config_.is_data && config_.is_data(std::span<const std::byte>(buf.data(), buf.size()));
        stats_.tx_data_packets += packet->data;
        NicPort& port = *ports_[meta.local_port % ports_.size()];
        const bool held = (port.paused_classes & bit) != 0;
        // An idle port has nothing waiting that may go (start_port runs on every change),
        // so a datagram of an unpaused class starts at once, without queueing.
        if (!held && !port.in_service) {
            begin_service(port, std::move(packet), cls);
            continue;  // another port may be idle too
        }
        port.waiting[cls].push_back(std::move(packet));
        port.waiting_classes |= bit;
        ++waiting_;  // next on its busy port; can_take_datagram says whether to poll on
    }
}

void Host::begin_service(NicPort& port, PacketPtr packet, uint8_t cls) {
    port.in_service = std::move(packet);
    ++class_tx_packets_[cls];
    ++busy_ports_;
    port.event = sim_.schedule_in(serialization_time(port.in_service->size(), port.rate_bps),
                                  [this, p = &port] { on_port_done(*p); });
}

void Host::start_port(NicPort& port) {
    const uint8_t ready = port.ready_classes();
    if (port.in_service || ready == 0) return;
    // Strict priority: the highest class that may go.
    const auto cls = static_cast<uint8_t>(std::bit_width(ready) - 1);
    RingQueue<PacketPtr>& q = port.waiting[cls];
    PacketPtr packet = std::move(q.front());
    q.pop_front();
    if (q.empty()) port.waiting_classes &= static_cast<uint8_t>(~(1u << cls));
    --waiting_;
    begin_service(port, std::move(packet), cls);
}

void Host::on_port_done(NicPort& port) {
    port.event = {};
    PacketPtr packet = std::move(port.in_service);
    --busy_ports_;
    ++port.tx_packets;
    packet->sent_at = sim_.now();
    start_port(port);  // its waiting datagram, if any, goes next
    if (port.uplink) port.uplink->receive(std::move(packet));
    if (engine_) after_engine_call();  // the NIC can take a datagram: poll for it
}

void Host::rearm_timer() {
    const Time deadline = engine_ ? engine_->next_deadline() : kNever;
    if (deadline == armed_deadline_ && (deadline == kNever || sim_.pending(timer_event_))) return;
    sim_.cancel(timer_event_);
    timer_event_ = {};
    armed_deadline_ = deadline;
    if (deadline == kNever) return;
    Time at = deadline;
    if (deadline <= last_timeout_) {
        // on_timeout(last_timeout_) already ran every timer due by then, so another call
        // for the same instant cannot help. Either the engine waits to send (a pacing
        // deadline while the NIC is busy: the NIC's completion polls it, no timer needed)
        // or it did not advance its deadline although it was polled; then give it the
        // next nanosecond, so time moves on and a broken engine cannot spin in place.
        if (nic_busy()) return;
        ++stats_.stale_deadlines;
        at = last_timeout_ + Duration{1};
    }
    ++stats_.timer_arms;
    timer_event_ =
        sim_.schedule_at(std::max(from_core_time(at), sim_.now()), [this] { on_timer(); });
}

void Host::on_timer() {
    timer_event_ = {};
    armed_deadline_ = kNever;
    if (!engine_) return;
    last_timeout_ = core_now();
    ++stats_.timeouts;
    engine_->on_timeout(last_timeout_);
    after_engine_call();
}

void Host::receive_on(uint16_t port, PacketPtr packet) {
    ++ports_[port]->rx_packets;
    ports_[port]->rx_bytes += packet->size();
    if (rx_tap_) rx_tap_(*packet, *this);
    if (!engine_) {
        ++stats_.rx_dropped_no_engine;
        return;
    }
    if (packet->meta.dst.port != config_.udp_port) {
        ++stats_.rx_dropped_wrong_port;
        return;
    }
    ++stats_.rx_packets;
    stats_.rx_bytes += packet->size();
    // meta.src is the remote sender's address and source port, meta.dst ours, meta.ecn as
    // marked on the way: the orientation the sender's NIC stamped is already the rx one.
    PacketMeta meta = packet->meta;
    meta.local_port = port;
    // The whole datagram, re-made if it travelled elided (the engine keeps no pointer
    // into it, so the pool's one scratch buffer serves every host).
    engine_->on_datagram(sim_.packets().view(*packet), meta, core_now());
    after_engine_call();
}

}  // namespace mroce::sim
