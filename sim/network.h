// sim/network.h — hosts on a multipath fabric: for every ordered pair of hosts, R parallel
// routes, each its own Link, chosen per packet by an ECMP hash of the UDP 5-tuple.
//
//   Host A ─NIC─► Network::receive ── hash(salt, 5-tuple) % R ──► Link A→B #r ──► Host B
//
// This is the flat fabric: each route stands for one path through a switched network,
// with its own rate, delay, buffer and impairments. Changing the UDP source port moves a
// flow to another route exactly as ECMP would, which is what MetaRoCE's paths rely on.
// Switched networks (leaf-spine, fat tree, planes) are in topology.h; both use the same
// Host and ecmp_hash().
//
// Threading: single-threaded, like its Sim.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/ecmp.h"
#include "sim/event_queue.h"
#include "sim/host.h"
#include "sim/link.h"

namespace mroce::sim {


struct NetworkConfig {
    uint32_t routes = 8;  // R parallel routes per ordered host pair, >= 1
    LinkConfig link;      // config of every route when it is created
    HostConfig host;      // config of add_host() without arguments
    // ECMP salt; default derived from the Sim's seed (label "<name>/ecmp-salt").
    std::optional<uint64_t> ecmp_salt;
    // Prefix of this network's random-stream labels; distinct per Network in one Sim.
    std::string name = "net";
};

struct NetworkStats {
    uint64_t routed_packets = 0;
    uint64_t dropped_no_route = 0;  // unknown destination address, or src == dst
};

class Network final : public PacketSink {
  public:
    Network(Sim& sim, const NetworkConfig& config = {});
    ~Network() override;
    Network(const Network&) = delete;
    Network& operator=(const Network&) = delete;

    // add_host creates the next host (index host_count(), address 198.18.0.<index+1>,
    // ...). The reference stays valid for the Network's lifetime.
    Host& add_host() { return add_host(config_.host); }
    Host& add_host(const HostConfig& config);
    Host& host(size_t index) { return *hosts_.at(index); }
    size_t host_count() const { return hosts_.size(); }
    // find_host returns the host owning address's IP (any port), or nullptr.
    Host* find_host(const Address& address);

    uint32_t route_count() const { return config_.routes; }
    uint64_t ecmp_salt() const { return salt_; }

    // route_of is the route a datagram src:src_port -> dst:dst_port takes (UDP).
    uint32_t route_of(const Host& src, const Host& dst, uint16_t src_port, uint16_t dst_port) const;

    // link is route `route` of direction src -> dst, to read its stats or change its
    // config (blackhole it, set its loss or delay) at any time. Routes of a pair are
    // created, with config().link, on first use or first access; src != dst.
    Link& link(const Host& src, const Host& dst, uint32_t route);
    // route_stats sums the stats of all routes src -> dst (max_queue_bytes: the maximum).
    LinkStats route_stats(const Host& src, const Host& dst);

    // set_tap installs tap on every host, present and future: it sees every packet
    // delivered, before the receiving engine. An empty function removes it.
    void set_tap(Host::RxTap tap);

    // receive is the fabric ingress the hosts' NICs send to (PacketSink): it routes by
    // the packet's meta (src/dst address and ports) onto the chosen route's link.
    void receive(PacketPtr packet) override;

    const NetworkStats& stats() const { return stats_; }
    const NetworkConfig& config() const { return config_; }

  private:
    std::vector<std::unique_ptr<Link>>& routes(uint32_t src, uint32_t dst);

    Sim& sim_;
    NetworkConfig config_;
    uint64_t salt_;
    Host::RxTap tap_;
    NetworkStats stats_;
    // routes_ is declared after hosts_, so links are destroyed first (each cancels its own
    // events; neither touches the other when destroyed).
    std::vector<std::unique_ptr<Host>> hosts_;
    std::vector<std::vector<std::vector<std::unique_ptr<Link>>>> routes_;  // [src][dst][route]
};

}  // namespace mroce::sim
