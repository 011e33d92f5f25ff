#include "sim/switch.h"

#include <algorithm>
#include <map>

#include "sim/ecmp.h"
#include "sim/host.h"
#include "util/check.h"

namespace mroce::sim {

double EcnConfig::mark_probability(uint64_t q) const {
    switch (mode) {
        case Mode::kOff:
            return 0;
        case Mode::kStep:
            return q >= k_bytes ? 1 : 0;
        case Mode::kRed:
            if (q >= kmax_bytes) return 1;  // also covers kmin == kmax (a step at kmax)
            if (q < kmin_bytes) return 0;
            return pmax * static_cast<double>(q - kmin_bytes) /
                   static_cast<double>(kmax_bytes - kmin_bytes);
    }
    return 0;
}

bool ecn_should_mark(const EcnConfig& ecn, uint64_t queue_bytes, Rng& rng) {
    const double p = ecn.mark_probability(queue_bytes);
    if (p <= 0) return false;
    if (p >= 1) return true;
    return rng.bernoulli(p);
}

namespace {

bool is_ect(uint8_t codepoint) { return codepoint == ecn::kEct0 || codepoint == ecn::kEct1; }

}  // namespace

// ---------------------------------------------------------------------------------------
// SwitchPort

SwitchPort::SwitchPort(Switch& owner, uint16_t index, uint64_t rate_bps)
    : owner_(owner), rate_bps_(rate_bps), index_(index) {
    MROCE_DCHECK(rate_bps > 0);
}

SwitchPort::~SwitchPort() {
    owner_.sim_.cancel(service_event_);
    for (EventHandle h : pause_events_) owner_.sim_.cancel(h);
}

const PortStats& SwitchPort::stats() const {
    // A pause still running counts up to now, so readers need not close it themselves.
    if (paused_count_ > 0) {
        const SimTime now = owner_.sim_.now();
        stats_.paused_time += now - paused_since_;
        paused_since_ = now;
    }
    return stats_;
}

size_t SwitchPort::queued_packets() const {
    size_t n = in_service_.packet ? 1 : 0;
    for (const auto& q : queues_) n += q.size();
    return n;
}

void SwitchPort::receive(PacketPtr packet) { owner_.forward(std::move(packet), index_); }

void SwitchPort::enqueue(PacketPtr packet, uint16_t ingress) {
    Switch& sw = owner_;
    const SwitchConfig& cfg = sw.config_;
    const uint64_t size = packet->size();
    const uint8_t cls = sw.class_of(*packet);
    const bool lossless = cfg.pfc.lossless(cls);
    SwitchPort& in = *sw.ports_[ingress];

    // Admission. Lossless classes are bounded by PFC (ingress xoff + headroom) and the
    // physical buffer; lossy classes by drop-tail on the port or the dynamic threshold.
    bool admit;
    if (lossless) {
        admit = in.ingress_bytes_[cls] + size <= cfg.pfc.xoff_bytes + cfg.pfc.headroom_bytes;
        admit &= cfg.buffer.shared ? sw.buffer_used_ + size <= cfg.buffer.shared_bytes
                                   : queue_bytes_ + size <= cfg.buffer.port_bytes;
    } else if (cfg.buffer.shared) {
        const uint64_t free_bytes = cfg.buffer.shared_bytes - sw.buffer_used_;
        admit = size <= free_bytes && static_cast<double>(queue_bytes_ + size) <=
                                          cfg.buffer.alpha * static_cast<double>(free_bytes);
    } else {
        admit = queue_bytes_ + size <= cfg.buffer.port_bytes;
    }
    if (!admit) {
        const SwitchDrop why = lossless ? SwitchDrop::kPfcOverflow : SwitchDrop::kBufferFull;
        ++stats_.dropped_packets[static_cast<size_t>(why)];
        stats_.dropped_bytes += size;
        stats_.dropped_data_packets += packet->data;
        return;
    }

    // ECN on the packet's own class queue, as switches configure marking per queue: a
    // paused or congested class must not mark another class's packets. With one class
    // that queue is the port's (its bytes are not kept apart).
    const bool per_class = cfg.traffic_classes > 1;
    if (per_class) class_bytes_[cls] += size;
    const uint64_t marking_bytes = per_class ? class_bytes_[cls] - size : queue_bytes_;
    if (is_ect(packet->meta.ecn) && ecn_should_mark(cfg.ecn, marking_bytes, sw.ecn_rng_)) {
        packet->meta.ecn = ecn::kCe;
        ++stats_.ecn_marked;
    }
    ++stats_.enqueued_packets;
    queue_bytes_ += size;
    stats_.max_queue_bytes = std::max(stats_.max_queue_bytes, queue_bytes_);
    if (queue_bytes_ >= watch_.threshold_bytes && !watch_.above) [[unlikely]] {
        watch_.above = true;
        watch_.rose_at = sw.sim_.now();
    }
    sw.buffer_used_ += size;
    sw.max_buffer_used_ = std::max(sw.max_buffer_used_, sw.buffer_used_);
    if (lossless) in.ingress_add(cls, size);
    queues_[cls].push_back(Queued{std::move(packet), static_cast<uint32_t>(size), ingress, cls});
    if (!in_service_.packet) try_start_service();
}

void SwitchPort::try_start_service() {
    // Strict priority: the highest class with a packet and not paused goes next.
    for (int c = owner_.config_.traffic_classes - 1; c >= 0; --c) {
        auto& q = queues_[static_cast<size_t>(c)];
        if (q.empty() || paused_[static_cast<size_t>(c)]) continue;
        in_service_ = std::move(q.front());
        q.pop_front();
        service_event_ = owner_.sim_.schedule_in(
            serialization_time(in_service_.size, rate_bps_), [this] { on_serialized(); });
        return;
    }
}

void SwitchPort::on_serialized() {
    service_event_ = {};
    Queued done = std::move(in_service_);
    in_service_ = Queued{};
    const uint32_t size = done.size;
    queue_bytes_ -= size;
    owner_.buffer_used_ -= size;
    if (watch_.above && queue_bytes_ < watch_.threshold_bytes) [[unlikely]] {
        watch_.above = false;
        watch_.fell_at = owner_.sim_.now();
    }
    ++stats_.tx_packets;
    stats_.tx_bytes += size;
    const uint8_t cls = done.cls;
    if (owner_.config_.traffic_classes > 1) class_bytes_[cls] -= size;
    if (owner_.config_.pfc.lossless(cls)) owner_.ports_[done.ingress]->ingress_remove(cls, size);
    try_start_service();
    if (wire_) wire_->receive(std::move(done.packet), size);
}

void SwitchPort::set_paused(uint8_t cls, bool paused) {
    if (cls >= kMaxTrafficClasses || paused_[cls] == paused) return;
    paused_[cls] = paused;
    const SimTime now = owner_.sim_.now();
    if (paused) {
        ++stats_.pauses_received;
        if (paused_count_++ == 0) paused_since_ = now;
    } else {
        if (--paused_count_ == 0) stats_.paused_time += now - paused_since_;
        if (!in_service_.packet) try_start_service();
    }
}

void SwitchPort::ingress_add(uint8_t cls, uint64_t bytes) {
    ingress_bytes_[cls] += bytes;
    if (!upstream_paused_[cls] && ingress_bytes_[cls] > owner_.config_.pfc.xoff_bytes)
        send_pause(cls, true);
}

void SwitchPort::ingress_remove(uint8_t cls, uint64_t bytes) {
    ingress_bytes_[cls] -= bytes;
    if (upstream_paused_[cls] && ingress_bytes_[cls] <= owner_.config_.pfc.xon_bytes)
        send_pause(cls, false);
}

void SwitchPort::send_pause(uint8_t cls, bool pause) {
    upstream_paused_[cls] = pause;
    pause ? ++stats_.pauses_sent : ++stats_.resumes_sent;
    if (pause) ++stats_.class_pauses_sent[cls];
    if (!upstream_) return;
    // The frame travels on this port's own wire (same cable, other direction). Frames of
    // one port arrive in the order sent as long as the delay does not shrink mid-run.
    while (!pause_events_.empty() && !owner_.sim_.pending(pause_events_.front()))
        pause_events_.pop_front();
    const SimDuration delay = wire_ ? wire_->config().delay : SimDuration{0};
    PauseTarget* target = upstream_;
    pause_events_.push_back(
        owner_.sim_.schedule_in(delay, [target, cls, pause] { target->set_paused(cls, pause); }));
}

// ---------------------------------------------------------------------------------------
// Switch

Switch::Switch(Sim& sim, const SwitchConfig& config, std::string name)
    : sim_(sim),
      config_(config),
      name_(std::move(name)),
      salt_(sim.fork_rng(name_ + "/ecmp-salt").next_u64()),
      ecn_rng_(sim.fork_rng(name_ + "/ecn")) {
    MROCE_DCHECK(config_.traffic_classes >= 1 && config_.traffic_classes <= kMaxTrafficClasses);
    config_.traffic_classes =
        std::clamp<uint8_t>(config_.traffic_classes, 1, kMaxTrafficClasses);
}

Switch::~Switch() = default;

SwitchPort& Switch::add_port(uint64_t rate_bps) {
    MROCE_DCHECK(ports_.size() < UINT16_MAX);
    ports_.push_back(
        std::make_unique<SwitchPort>(*this, static_cast<uint16_t>(ports_.size()), rate_bps));
    return *ports_.back();
}

void Switch::set_routes(const std::vector<std::vector<uint16_t>>& next_hops) {
    std::map<std::vector<uint16_t>, uint32_t> groups;
    groups.emplace(std::vector<uint16_t>{}, 0);
    group_begin_.assign({0, 0});
    group_ports_.clear();
    route_group_.assign(next_hops.size(), 0);
    for (size_t h = 0; h < next_hops.size(); ++h) {
        auto [it, added] = groups.emplace(next_hops[h], static_cast<uint32_t>(groups.size()));
        if (added) {
            group_ports_.insert(group_ports_.end(), next_hops[h].begin(), next_hops[h].end());
            group_begin_.push_back(static_cast<uint32_t>(group_ports_.size()));
        }
        route_group_[h] = it->second;
    }
}

std::span<const uint16_t> Switch::next_hops(uint32_t host) const {
    if (host >= route_group_.size()) return {};
    const uint32_t g = route_group_[host];
    return {group_ports_.data() + group_begin_[g], group_begin_[g + 1] - group_begin_[g]};
}

uint16_t Switch::route_port(uint32_t src_ip, uint32_t dst_ip, uint16_t src_port,
                            uint16_t dst_port) const {
    const std::span<const uint16_t> hops = next_hops(host_index_of(dst_ip));
    if (hops.empty()) return UINT16_MAX;
    if (hops.size() == 1) return hops[0];
    return hops[ecmp_hash(salt_, src_ip, dst_ip, src_port, dst_port) % hops.size()];
}

size_t Switch::in_flight() const {
    size_t n = 0;
    for (const auto& p : ports_) n += p->queued_packets();
    return n;
}

void Switch::forward(PacketPtr packet, uint16_t ingress) {
    const PacketMeta& m = packet->meta;
    const uint16_t out = route_port(m.src.ipv4_host_order(), m.dst.ipv4_host_order(), m.src.port,
                                    m.dst.port);
    if (out == UINT16_MAX) {
        ++stats_.dropped_no_route;
        stats_.dropped_no_route_bytes += packet->size();
        stats_.dropped_no_route_data += packet->data;
        return;
    }
    ++stats_.forwarded_packets;
    ports_[out]->enqueue(std::move(packet), ingress);
}

}  // namespace mroce::sim
