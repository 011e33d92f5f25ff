// Real core::Endpoints moving data over switched topologies: every WRITE lands intact,
// bytes are conserved, nothing is left in flight, queues stay within their buffers, runs
// are identical for one seed, and a transfer survives a dead plane without reconvergence.
#include "sim/topology.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/endpoint.h"
#include "sim/faults.h"
#include "sim/test_seed.h"

namespace mroce::sim {
namespace {

using namespace std::chrono_literals;
using testing::seed_note;
using testing::test_seed;

std::byte pattern(uint32_t flow, uint64_t offset) {
    uint64_t x = (uint64_t{flow} << 40) ^ offset;
    x *= 0x9e3779b97f4a7c15ULL;
    return static_cast<std::byte>(x >> 56);
}

struct Flow {
    uint32_t src, dst;
    uint32_t bytes;
};

// CoreFabric: one core::Endpoint per host of a Topology; each flow is one WRITE of a
// patterned buffer on its own stream. Completions are checked as they come.
class CoreFabric {
  public:
    CoreFabric(uint64_t seed, const TopologyConfig& tc, core::EndpointConfig ec)
        : sim_(seed), topo_(sim_, tc) {
        ec.num_local_ports = static_cast<uint16_t>(tc.planes);
        for (uint32_t h = 0; h < topo_.host_count(); ++h) {
            endpoints_.push_back(
                std::make_unique<core::Endpoint>(ec, topo_.host(h).address(), seed * 7919 + h));
            pds_.push_back(endpoints_.back()->alloc_pd());
            topo_.host(h).attach(endpoints_.back().get());
            topo_.host(h).set_event_callback([this, h](const core::Event& e) { on_event(h, e); });
        }
    }

    void start(const std::vector<Flow>& flows) {
        const Time now = to_core_time(sim_.now());
        for (const Flow& f : flows) {
            State s;
            s.flow = f;
            s.src_buf.resize(f.bytes);
            for (uint32_t i = 0; i < f.bytes; ++i)
                s.src_buf[i] = pattern(static_cast<uint32_t>(states_.size()), i);
            s.dst_buf.assign(f.bytes, std::byte{0});
            states_.push_back(std::move(s));
        }
        for (State& s : states_) {
            core::Endpoint& a = *endpoints_[s.flow.src];
            core::Endpoint& b = *endpoints_[s.flow.dst];
            const auto a_keys = *a.register_memory(pds_[s.flow.src], s.src_buf.data(),
                                                   s.src_buf.size(), core::access::kLocalWrite);
            const auto b_keys = *b.register_memory(
                pds_[s.flow.dst], s.dst_buf.data(), s.dst_buf.size(),
                core::access::kLocalWrite | core::access::kRemoteWrite);
            s.a_stream = *a.reserve_stream(pds_[s.flow.src]);
            const uint32_t b_stream = *b.reserve_stream(pds_[s.flow.dst]);
            ASSERT_EQ(a.bind_stream(s.a_stream, topo_.host(s.flow.dst).address(), b_stream, now),
                      Error::kOk);
            ASSERT_EQ(b.bind_stream(b_stream, topo_.host(s.flow.src).address(), s.a_stream, now),
                      Error::kOk);
            core::SendWr wr;
            wr.wr_id = 1;
            wr.opcode = core::WorkOpcode::kWrite;
            wr.local_addr = reinterpret_cast<uint64_t>(s.src_buf.data());
            wr.length = s.flow.bytes;
            wr.lkey = a_keys.lkey;
            wr.remote_addr = reinterpret_cast<uint64_t>(s.dst_buf.data());
            wr.rkey = b_keys.rkey;
            ASSERT_EQ(a.post_send(s.a_stream, wr, now), Error::kOk);
        }
        for (uint32_t h = 0; h < topo_.host_count(); ++h) topo_.host(h).kick();
    }

    // run until every flow completed (or failed), within a simulated-time and event budget.
    bool run(SimDuration limit = 20ms, uint64_t max_events = 20'000'000) {
        const RunResult r =
            sim_.run_until([this] { return done_ == states_.size() || !failure_.empty(); },
                           sim_.now() + limit, max_events);
        if (failure_.empty() && done_ != states_.size())
            failure_ = std::string("stopped: ") + to_string(r.reason) + " at " +
                       std::to_string(to_ps(sim_.now()) / 1'000'000) + " us after " +
                       std::to_string(r.events) + " events";
        return done_ == states_.size() && failure_.empty();
    }

    // drain detaches every engine and runs until the fabric is empty.
    void drain() {
        for (uint32_t h = 0; h < topo_.host_count(); ++h) topo_.host(h).attach(nullptr);
        sim_.run_until({}, kSimForever, 5'000'000);
    }

    // dump describes every host, connection and path (printed when a run fails).
    std::string dump() {
        std::string out;
        for (uint32_t h = 0; h < topo_.host_count(); ++h) {
            const Host& host = topo_.host(h);
            const core::Endpoint& ep = *endpoints_[h];
            out += "host " + std::to_string(h) + ": tx " + std::to_string(host.stats().tx_packets) +
                   " rx " + std::to_string(host.stats().rx_packets) + " timeouts " +
                   std::to_string(host.stats().timeouts) + " deadline_ns " +
                   std::to_string(ep.next_deadline().time_since_epoch().count()) + " queued " +
                   std::to_string(host.port_queued(0)) + "\n";
            for (const State& st : states_) {
                if (st.flow.dst == h && !st.complete) {
                    const core::Connection* c =
                        ep.connection(ep.connection_to(topo_.host(st.flow.src).address()));
                    if (c) {
                        const core::ConnectionStats& cs = c->stats();
                        out += "  from " + std::to_string(st.flow.src) + " oow " +
                               std::to_string(cs.out_of_window) + " dup " +
                               std::to_string(cs.duplicate_segments) + " stale " +
                               std::to_string(cs.stale_duplicates) + " gen " +
                               std::to_string(cs.stale_generation) + " malformed " +
                               std::to_string(cs.malformed) + " wrong_state " +
                               std::to_string(cs.wrong_state) + " nacks " +
                               std::to_string(cs.nacks_sent) + "\n";
                    }
                }
                if (st.flow.src != h || st.complete) continue;
                const core::Connection* c =
                    ep.connection(ep.connection_to(topo_.host(st.flow.dst).address()));
                if (!c) continue;
                out += "  to " + std::to_string(st.flow.dst) + " state " +
                       std::to_string(static_cast<int>(c->state())) + " rtx " +
                       std::to_string(c->stats().retransmits) + "\n";
                for (uint16_t p = 0; p < c->num_paths(); ++p) {
                    const core::PathStats& ps = c->path_stats(p);
                    out += "    path " + std::to_string(p) + " sent " +
                           std::to_string(ps.packets_sent) + " acks " +
                           std::to_string(ps.acks_received) + " timeouts " +
                           std::to_string(ps.timeouts) + " fail " + std::to_string(ps.failures) +
                           " reroll " + std::to_string(ps.rerolls) + " lostsack " +
                           std::to_string(ps.lost_by_sack) + " lostto " +
                           std::to_string(ps.lost_by_timeout) + "\n";
                }
            }
        }
        return out;
    }

    Sim& sim() { return sim_; }
    Topology& topo() { return topo_; }
    const std::string& failure() const { return failure_; }
    size_t done() const { return done_; }
    core::Endpoint& endpoint(uint32_t h) { return *endpoints_[h]; }

  private:
    struct State {
        Flow flow;
        std::vector<std::byte> src_buf, dst_buf;
        uint32_t a_stream = 0;
        bool complete = false;
    };

    void on_event(uint32_t host, const core::Event& e) {
        if (e.kind == core::EventKind::kConnectionFailed) {
            failure_ = "host " + std::to_string(host) + ": connection failed: " +
                       core::to_string(e.status);
            return;
        }
        if (e.kind != core::EventKind::kCompletion) return;
        for (State& s : states_) {
            if (s.flow.src != host || s.a_stream != e.completion.stream) continue;
            if (s.complete || e.completion.status != core::Status::kSuccess) {
                failure_ = "flow to host " + std::to_string(s.flow.dst) + ": bad completion";
                return;
            }
            // A WRITE completes once acknowledged: every byte must be in place.
            if (s.dst_buf != s.src_buf) {
                failure_ = "flow " + std::to_string(host) + "->" + std::to_string(s.flow.dst) +
                           ": payload differs";
                return;
            }
            s.complete = true;
            ++done_;
            return;
        }
    }

    Sim sim_;
    Topology topo_;
    std::vector<std::unique_ptr<core::Endpoint>> endpoints_;
    std::vector<uint32_t> pds_;
    std::vector<State> states_;
    size_t done_ = 0;
    std::string failure_;
};

core::EndpointConfig endpoint_config() {
    core::EndpointConfig c;
    c.max_payload = 4096;
    c.window_bytes_per_path = 16 * 4096;
    return c;
}

TopologyConfig leaf_spine(uint32_t planes) {
    TopologyConfig c;
    c.kind = TopologyKind::kLeafSpine;
    c.planes = planes;
    c.leaves = 2;
    c.spines = 2;
    c.hosts_per_leaf = 4;
    c.cable.rate_bps = 25'000'000'000;
    c.switches.buffer.port_bytes = 256 * 1024;
    c.switches.ecn = EcnConfig::red(20 * 1024, 80 * 1024, 0.2);
    return c;
}

// A permutation: host h sends to host (h + n/2) % n, so every flow crosses the spines.
std::vector<Flow> cross_permutation(uint32_t n, uint32_t bytes) {
    std::vector<Flow> flows;
    for (uint32_t h = 0; h < n; ++h) flows.push_back(Flow{h, (h + n / 2) % n, bytes});
    return flows;
}

void expect_fabric_invariants(CoreFabric& f) {
    Topology& t = f.topo();
    const FabricTotals tot = t.totals();
    EXPECT_EQ(tot.in_flight, 0u);
    EXPECT_EQ(f.sim().packets().outstanding(), 0u);  // no packet held anywhere
    EXPECT_EQ(tot.host_tx_packets + tot.wire_copies,
              tot.host_rx_packets + tot.switch_drops + tot.wire_drops);
    EXPECT_EQ(tot.host_tx_bytes, tot.host_rx_bytes + tot.switch_drop_bytes + tot.wire_drop_bytes);
    EXPECT_EQ(tot.pfc_overflow_drops, 0u);
    for (size_t s = 0; s < t.switch_count(); ++s) {
        const Switch& sw = t.switch_at(s);
        const BufferConfig& b = sw.config().buffer;
        for (size_t p = 0; p < sw.port_count(); ++p) {
            const PortStats& ps = sw.port(p).stats();
            EXPECT_LE(ps.max_queue_bytes, b.shared ? b.shared_bytes : b.port_bytes);
            EXPECT_EQ(ps.enqueued_packets, ps.tx_packets);  // drained
        }
    }
}

TEST(CoreOnTopology, LeafSpinePermutationDeliversAndDrains) {
    const uint64_t seed = test_seed(101);
    SCOPED_TRACE(seed_note(seed));
    CoreFabric f(seed, leaf_spine(1), endpoint_config());
    f.start(cross_permutation(8, 512 * 1024));
    ASSERT_TRUE(f.run()) << f.failure() << " (" << f.done() << "/8 done)";
    f.drain();
    expect_fabric_invariants(f);
    // Both spines carried traffic: the paths' source ports spread over the ECMP group.
    for (size_t s = 0; s < f.topo().switch_count(); ++s) {
        if (f.topo().switch_tier(s) != 1) continue;
        uint64_t tx = 0;
        for (size_t p = 0; p < f.topo().switch_at(s).port_count(); ++p)
            tx += f.topo().switch_at(s).port(p).stats().tx_packets;
        EXPECT_GT(tx, 0u) << f.topo().switch_at(s).name();
    }
}

// Counters that must match exactly between two runs with one seed.
std::vector<uint64_t> fingerprint(CoreFabric& f) {
    std::vector<uint64_t> v;
    const FabricTotals t = f.topo().totals();
    v.insert(v.end(), {t.host_tx_packets, t.host_tx_bytes, t.host_rx_packets, t.switch_drops,
                       t.wire_drops, t.ecn_marks, t.max_queue_bytes,
                       static_cast<uint64_t>(to_ps(f.sim().now())), f.sim().events_run()});
    for (size_t s = 0; s < f.topo().switch_count(); ++s)
        for (size_t p = 0; p < f.topo().switch_at(s).port_count(); ++p) {
            const PortStats& ps = f.topo().switch_at(s).port(p).stats();
            v.insert(v.end(), {ps.tx_packets, ps.tx_bytes, ps.ecn_marked, ps.max_queue_bytes,
                               ps.dropped_total()});
        }
    return v;
}

std::vector<uint64_t> incast_run(uint64_t seed) {
    TopologyConfig tc = leaf_spine(1);
    tc.switches.buffer.port_bytes = 96 * 1024;  // small: the incast drops and marks
    CoreFabric f(seed, tc, endpoint_config());
    std::vector<Flow> flows;
    for (uint32_t h = 1; h < 8; ++h) flows.push_back(Flow{h, 0, 128 * 1024});
    f.start(flows);
    EXPECT_TRUE(f.run()) << f.failure() << "\n" << f.dump();
    f.drain();
    expect_fabric_invariants(f);
    return fingerprint(f);
}

TEST(CoreOnTopology, SameSeedSameCounters) {
    const uint64_t seed = test_seed(102);
    SCOPED_TRACE(seed_note(seed));
    const std::vector<uint64_t> a = incast_run(seed);
    const std::vector<uint64_t> b = incast_run(seed);
    EXPECT_EQ(a, b);
    // The fingerprint is sensitive: another seed (other jitter, salts, ISNs) differs.
    EXPECT_NE(a, incast_run(seed + 1));
}

TEST(MultiPlane, PathsSpreadOverPlanes) {
    const uint64_t seed = test_seed(103);
    SCOPED_TRACE(seed_note(seed));
    CoreFabric f(seed, leaf_spine(2), endpoint_config());
    f.start(cross_permutation(8, 512 * 1024));
    ASSERT_TRUE(f.run()) << f.failure();
    for (uint32_t h = 0; h < 8; ++h) {
        const uint64_t p0 = f.topo().host(h).port_tx_packets(0);
        const uint64_t p1 = f.topo().host(h).port_tx_packets(1);
        // Paths alternate ports, so each plane carries about half: at least a quarter.
        EXPECT_GT(p0 * 4, p0 + p1) << "host " << h;
        EXPECT_GT(p1 * 4, p0 + p1) << "host " << h;
        EXPECT_GT(f.topo().host(h).port_rx_packets(0), 0u);
        EXPECT_GT(f.topo().host(h).port_rx_packets(1), 0u);
    }
    f.drain();
    expect_fabric_invariants(f);
}

TEST(MultiPlane, PlaneFailureWithoutReconvergenceStillCompletes) {
    for (uint64_t seed : testing::sweep_seeds(110, 2)) {
        SCOPED_TRACE(seed_note(seed));
        std::printf("[   SEED   ] %s\n", seed_note(seed).c_str());
        CoreFabric f(seed, leaf_spine(2), endpoint_config());
        FaultInjector faults(f.topo());
        faults.plane_down(SimTime{} + 50us, 1, std::nullopt);
        f.start(cross_permutation(8, 1024 * 1024));
        ASSERT_TRUE(f.run(200ms)) << f.failure() << " (" << f.done() << "/8 done)";
        EXPECT_EQ(faults.applied(), 1u);
        const FabricTotals t = f.topo().totals();
        EXPECT_GT(t.wire_drops, 0u);  // the dead plane swallowed packets
        f.drain();
        expect_fabric_invariants(f);
    }
}

TEST(FatTree, TransfersSurviveADeadAndALossyCable) {
    const uint64_t seed = test_seed(104);
    SCOPED_TRACE(seed_note(seed));
    TopologyConfig tc;
    tc.kind = TopologyKind::kFatTree;
    tc.k = 4;
    tc.cable.rate_bps = 25'000'000'000;
    tc.switches.buffer.port_bytes = 256 * 1024;
    tc.switches.ecn = EcnConfig::step(40 * 1024);
    CoreFabric f(seed, tc, endpoint_config());
    // The first aggregation-core cable dies at 30 us (routing reconverges 100 us later);
    // another one loses 2 % of its packets and stays up.
    std::vector<size_t> core_cables;
    for (size_t c = 0; c < f.topo().cable_count(); ++c)
        if (!f.topo().cable(c).b.is_host && f.topo().switch_tier(f.topo().cable(c).b.node) == 2)
            core_cables.push_back(c);
    ASSERT_EQ(core_cables.size(), 16u);  // k^3/4
    FaultInjector faults(f.topo());
    faults.cable_down(SimTime{} + 30us, core_cables[0], 100us);
    faults.set_loss(SimTime{}, core_cables[5], 0.02);
    f.start(cross_permutation(16, 256 * 1024));
    ASSERT_TRUE(f.run(100ms)) << f.failure() << " (" << f.done() << "/16 done)";
    EXPECT_EQ(faults.reconvergences(), 1u);
    f.drain();
    expect_fabric_invariants(f);
}

TEST(CoreOnTopology, PfcIncastIsLossless) {
    // 7 -> 1 across a leaf-spine with PFC on class 0 and no ECN: the queue to host 0 fills,
    // pauses propagate back to the senders, and no switch drops a packet. Headroom covers
    // a pause round trip at the 50 Gbit/s uplinks (2 * 6.25 KB on the wire) plus two
    // 4 KB packets; every egress can hold xoff + headroom from each of its 5 ingresses.
    const uint64_t seed = test_seed(105);
    SCOPED_TRACE(seed_note(seed));
    TopologyConfig tc = leaf_spine(1);
    tc.switches.ecn = EcnConfig{};
    tc.switches.pfc = PfcConfig{.lossless_classes = 1, .xoff_bytes = 32 * 1024,
                                .xon_bytes = 16 * 1024, .headroom_bytes = 24 * 1024};
    tc.switches.buffer.port_bytes = 5 * 56 * 1024;
    CoreFabric f(seed, tc, endpoint_config());
    std::vector<Flow> flows;
    for (uint32_t h = 1; h < 8; ++h) flows.push_back(Flow{h, 0, 512 * 1024});
    f.start(flows);
    ASSERT_TRUE(f.run()) << f.failure() << "\n" << f.dump();
    const FabricTotals t = f.topo().totals();
    EXPECT_EQ(t.switch_drops, 0u);
    EXPECT_GT(t.pauses_sent, 0u);
    uint64_t host_pauses = 0;
    for (uint32_t h = 1; h < 8; ++h) host_pauses += f.topo().host(h).stats().pauses_received;
    EXPECT_GT(host_pauses, 0u);
    f.drain();
    expect_fabric_invariants(f);
}

}  // namespace
}  // namespace mroce::sim
