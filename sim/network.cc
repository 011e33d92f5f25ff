#include "sim/network.h"

#include <algorithm>

#include "util/check.h"

namespace mroce::sim {

Network::Network(Sim& sim, const NetworkConfig& config)
    : sim_(sim),
      config_(config),
      salt_(config.ecmp_salt ? *config.ecmp_salt
                             : sim.fork_rng(config.name + "/ecmp-salt").next_u64()) {
    MROCE_DCHECK(config_.routes >= 1);
    if (config_.routes == 0) config_.routes = 1;
}

Network::~Network() = default;

Host& Network::add_host(const HostConfig& config) {
    MROCE_DCHECK(hosts_.size() < kMaxHosts);
    const auto index = static_cast<uint32_t>(hosts_.size());
    hosts_.push_back(
        std::make_unique<Host>(sim_, index, kHostSubnetBase + index + 1, config, this));
    if (tap_) hosts_.back()->set_rx_tap(tap_);
    for (auto& row : routes_) row.emplace_back();
    routes_.emplace_back(hosts_.size());
    return *hosts_.back();
}

Host* Network::find_host(const Address& address) {
    if (!address.is_ipv4()) return nullptr;
    const uint32_t offset = address.ipv4_host_order() - kHostSubnetBase - 1;  // wraps if below
    return offset < hosts_.size() ? hosts_[offset].get() : nullptr;
}

uint32_t Network::route_of(const Host& src, const Host& dst, uint16_t src_port,
                           uint16_t dst_port) const {
    return static_cast<uint32_t>(ecmp_hash(salt_, src.ipv4(), dst.ipv4(), src_port, dst_port) %
                                 config_.routes);
}

std::vector<std::unique_ptr<Link>>& Network::routes(uint32_t src, uint32_t dst) {
    MROCE_DCHECK(src != dst);
    auto& links = routes_[src][dst];
    if (links.empty()) {
        // Named by (src, dst, route), so each route's random streams depend only on the
        // seed and its identity, not on which pair happened to talk first.
        const std::string prefix =
            config_.name + "/route/" + std::to_string(src) + ">" + std::to_string(dst) + "#";
        links.reserve(config_.routes);
        for (uint32_t r = 0; r < config_.routes; ++r)
            links.push_back(std::make_unique<Link>(sim_, config_.link, prefix + std::to_string(r),
                                                   hosts_[dst].get()));
    }
    return links;
}

Link& Network::link(const Host& src, const Host& dst, uint32_t route) {
    return *routes(src.index(), dst.index()).at(route);
}

LinkStats Network::route_stats(const Host& src, const Host& dst) {
    LinkStats sum;
    for (const auto& link : routes(src.index(), dst.index())) {
        const LinkStats& s = link->stats();
        sum.offered_packets += s.offered_packets;
        sum.offered_bytes += s.offered_bytes;
        sum.delivered_packets += s.delivered_packets;
        sum.delivered_bytes += s.delivered_bytes;
        for (size_t i = 0; i < kDropReasonCount; ++i)
            sum.dropped_packets[i] += s.dropped_packets[i];
        sum.dropped_bytes += s.dropped_bytes;
        sum.duplicated += s.duplicated;
        sum.late_duplicated += s.late_duplicated;
        sum.reordered += s.reordered;
        sum.ecn_marked += s.ecn_marked;
        sum.max_queue_bytes = std::max(sum.max_queue_bytes, s.max_queue_bytes);
    }
    return sum;
}

void Network::set_tap(Host::RxTap tap) {
    tap_ = std::move(tap);
    for (auto& host : hosts_) host->set_rx_tap(tap_);
}

void Network::receive(PacketPtr packet) {
    Host* src = find_host(packet->meta.src);
    Host* dst = find_host(packet->meta.dst);
    if (src == nullptr || dst == nullptr || src == dst) {
        ++stats_.dropped_no_route;
        return;
    }
    const uint32_t route = route_of(*src, *dst, packet->meta.src.port, packet->meta.dst.port);
    packet->route = route;
    ++stats_.routed_packets;
    routes(src->index(), dst->index())[route]->receive(std::move(packet));
}

}  // namespace mroce::sim
