// bench/sim_bench.cc — simulator speed with the real protocol core: events and simulated
// packets per CPU-second through a switched topology where every host runs a
// core::Endpoint. Not a test: it reports numbers (docs/results.md records them).
//
//   sim_bench [--workload a2a|perm] [--leaves N] [--spines N] [--hosts-per-leaf N]
//             [--k N] [--bytes N] [--rate-gbps N] [--seed N] [--time-limit-us N]
//             [--engine core|null]
//
// a2a:  leaf-spine, every host WRITEs --bytes to every other host (one stream each).
// perm: k-ary fat tree, host h WRITEs --bytes to host (h + hosts/2) % hosts.
// --engine null replaces the core by NullEngine (the same flows as 4 KB datagrams sent
// round robin, no ACKs, no retransmission): the simulator's own cost per event.
// Payload memory is shared: one source and one destination buffer of --bytes, which every
// endpoint registers and every flow uses (the benchmark measures speed, it does not check
// data; the tests in sim/topology_test.cc do), so 1024 hosts x 2 MB need 4 MB, not 4 GB.
#include <sys/resource.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "core/endpoint.h"
#include "sim/topology.h"

namespace {

using namespace mroce;

struct Options {
    std::string workload = "a2a";
    std::string engine = "core";
    uint32_t leaves = 8, spines = 8, hosts_per_leaf = 8, k = 16;
    uint64_t bytes = 256 * 1024;
    uint64_t rate_gbps = 100;
    uint64_t seed = 1;
    uint64_t time_limit_us = 100'000;
};

bool parse_u64(const char* s, uint64_t& out) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(s, &end, 0);
    if (!s[0] || *end || s[0] == '-') return false;
    out = v;
    return true;
}

// parse returns an empty string or a one-line error naming the bad argument.
std::string parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) return "missing value after " + a;
        const char* v = argv[++i];
        uint64_t n = 0;
        if (a == "--engine") {
            o.engine = v;
            if (o.engine != "core" && o.engine != "null")
                return "--engine must be core or null, not '" + o.engine + "'";
            continue;
        }
        if (a == "--workload") {
            o.workload = v;
            if (o.workload != "a2a" && o.workload != "perm")
                return "--workload must be a2a or perm, not '" + o.workload + "'";
            continue;
        }
        if (!parse_u64(v, n)) return a + " needs a non-negative integer, not '" + v + "'";
        if (a == "--leaves") o.leaves = static_cast<uint32_t>(n);
        else if (a == "--spines") o.spines = static_cast<uint32_t>(n);
        else if (a == "--hosts-per-leaf") o.hosts_per_leaf = static_cast<uint32_t>(n);
        else if (a == "--k") o.k = static_cast<uint32_t>(n);
        else if (a == "--bytes") o.bytes = n;
        else if (a == "--rate-gbps") o.rate_gbps = n;
        else if (a == "--seed") o.seed = n;
        else if (a == "--time-limit-us") o.time_limit_us = n;
        else return "unknown option " + a;
    }
    if (o.bytes == 0 || o.bytes > UINT32_MAX) return "--bytes must be 1..4294967295";
    if (o.rate_gbps == 0) return "--rate-gbps must be positive";
    return {};
}

// NullEngine sends its flows' bytes as max-size datagrams, one flow after the other in
// round robin, and ignores what it receives: the simulator without the protocol.
class NullEngine final : public core::Engine {
  public:
    static constexpr size_t kDatagram = 4096 + 64;
    void add_flow(const Address& dst, uint64_t bytes) {
        flows_.push_back({dst, (bytes + 4095) / 4096});
    }
    void on_datagram(std::span<const std::byte>, const PacketMeta&, Time) override {}
    void on_timeout(Time) override {}
    size_t poll_transmit(std::span<std::byte>, PacketMeta& meta, Time) override {
        for (size_t tries = 0; tries < flows_.size(); ++tries) {
            Flow& f = flows_[next_++ % flows_.size()];
            if (f.left == 0) continue;
            --f.left;
            meta.dst = f.dst;
            meta.src.port = static_cast<uint16_t>(49152 + (f.left & 7));  // 8 "paths"
            meta.ecn = ecn::kEct0;
            return kDatagram;
        }
        return 0;
    }
    Time next_deadline() const override { return kNever; }
    std::optional<core::Event> poll_event() override { return std::nullopt; }
    size_t max_datagram_size() const override { return kDatagram; }

  private:
    struct Flow {
        Address dst;
        uint64_t left;
    };
    std::vector<Flow> flows_;
    size_t next_ = 0;
};

double cpu_seconds() {
    return static_cast<double>(std::clock()) / CLOCKS_PER_SEC;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (const std::string err = parse(argc, argv, o); !err.empty()) {
        std::fprintf(stderr, "sim_bench: %s\n", err.c_str());
        return 2;
    }
    sim::TopologyConfig tc;
    tc.cable.rate_bps = o.rate_gbps * 1'000'000'000;
    tc.cable.delay = std::chrono::microseconds(1);
    if (o.workload == "a2a") {
        tc.kind = sim::TopologyKind::kLeafSpine;
        tc.leaves = o.leaves;
        tc.spines = o.spines;
        tc.hosts_per_leaf = o.hosts_per_leaf;
    } else {
        tc.kind = sim::TopologyKind::kFatTree;
        tc.k = o.k;
    }
    // One BDP of buffer per port (base RTT of a 4-hop path, ~12 us at 100 Gbit/s as in
    // htsim's reference), ECN marked linearly between 20 % and 80 % of it.
    const uint64_t bdp = tc.cable.rate_bps / 8 * 12 / 1'000'000;
    tc.switches.buffer.port_bytes = bdp;
    tc.switches.ecn = sim::EcnConfig::red(bdp / 5, bdp * 4 / 5, 1.0);
    if (const std::string err = sim::check_topology_config(tc); !err.empty()) {
        std::fprintf(stderr, "sim_bench: %s\n", err.c_str());
        return 2;
    }

    const double cpu0 = cpu_seconds();
    sim::Sim sim(o.seed);
    sim::Topology topo(sim, tc);
    const auto n = static_cast<uint32_t>(topo.host_count());
    core::EndpointConfig ec;
    ec.max_payload = 4096;
    ec.window_bytes_per_path = bdp / ec.num_paths + ec.max_payload;

    std::vector<std::byte> src(o.bytes, std::byte{0x42}), dst(o.bytes);
    struct HostState {
        std::unique_ptr<core::Endpoint> ep;
        uint32_t pd = 0;
        core::MemoryKeys src_keys, dst_keys;
    };
    std::vector<HostState> hosts(n);
    std::vector<NullEngine> null_engines(o.engine == "null" ? n : 0);
    for (uint32_t h = 0; h < n && o.engine == "core"; ++h) {
        HostState& s = hosts[h];
        s.ep = std::make_unique<core::Endpoint>(ec, topo.host(h).address(), o.seed * 7919 + h);
        s.pd = s.ep->alloc_pd();
        s.src_keys = *s.ep->register_memory(s.pd, src.data(), o.bytes, core::access::kLocalWrite);
        s.dst_keys = *s.ep->register_memory(s.pd, dst.data(), o.bytes,
                                            core::access::kLocalWrite | core::access::kRemoteWrite);
    }
    std::vector<std::pair<uint32_t, uint32_t>> flows;
    if (o.workload == "a2a") {
        for (uint32_t a = 0; a < n; ++a)
            for (uint32_t b = 0; b < n; ++b)
                if (a != b) flows.emplace_back(a, b);
    } else {
        for (uint32_t a = 0; a < n; ++a) flows.emplace_back(a, (a + n / 2) % n);
    }
    uint64_t done = 0, failed = 0;
    sim::SimTime last_finish{};
    for (uint32_t h = 0; h < n; ++h) {
        topo.host(h).set_event_callback([&](const core::Event& e) {
            if (e.kind == core::EventKind::kConnectionFailed) ++failed;
            if (e.kind != core::EventKind::kCompletion) return;
            if (e.completion.status != core::Status::kSuccess) ++failed;
            ++done;
            last_finish = sim.now();
        });
        if (o.engine == "core") topo.host(h).attach(hosts[h].ep.get());
    }
    const Time now = sim::to_core_time(sim.now());
    for (auto [a, b] : flows) {
        if (o.engine == "null") {
            null_engines[a].add_flow(topo.host(b).address(), o.bytes);
            continue;
        }
        HostState& sa = hosts[a];
        HostState& sb = hosts[b];
        const uint32_t sid_a = *sa.ep->reserve_stream(sa.pd);
        const uint32_t sid_b = *sb.ep->reserve_stream(sb.pd);
        sa.ep->bind_stream(sid_a, topo.host(b).address(), sid_b, now);
        sb.ep->bind_stream(sid_b, topo.host(a).address(), sid_a, now);
        core::SendWr wr;
        wr.opcode = core::WorkOpcode::kWrite;
        wr.local_addr = reinterpret_cast<uint64_t>(src.data());
        wr.length = static_cast<uint32_t>(o.bytes);
        wr.lkey = sa.src_keys.lkey;
        wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
        wr.rkey = sb.dst_keys.rkey;
        if (sa.ep->post_send(sid_a, wr, now) != Error::kOk) {
            std::fprintf(stderr, "sim_bench: post_send failed for flow %u->%u\n", a, b);
            return 1;
        }
    }
    for (uint32_t h = 0; h < n; ++h) {
        if (o.engine == "null") topo.host(h).attach(&null_engines[h]);
        topo.host(h).kick();
    }
    const double cpu_setup = cpu_seconds() - cpu0;

    const double cpu1 = cpu_seconds();
    const bool stop_when_done = o.engine == "core";  // not a string compare per event
    const sim::RunResult r = sim.run_until(
        [&] { return stop_when_done && (done == flows.size() || failed > 0); },
        sim::SimTime{} + std::chrono::microseconds(o.time_limit_us), UINT64_MAX);
    const double cpu_run = cpu_seconds() - cpu1;

    if (o.engine == "null") {  // no completions: the last delivery ends the run
        last_finish = sim.now();
        done = flows.size();
    }
    const sim::FabricTotals t = topo.totals();
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    // Ideal: the busiest host's payload at line rate (all-to-all: (n-1) flows per host).
    const uint64_t per_host = o.workload == "a2a" ? o.bytes * (n - 1) : o.bytes;
    const double ideal_us = static_cast<double>(per_host) * 8 / static_cast<double>(tc.cable.rate_bps) * 1e6;
    const double finish_us = static_cast<double>(sim::to_ps(last_finish)) / 1e6;
    std::printf("engine %s, workload %s hosts %u switches %zu flows %zu bytes/flow %" PRIu64 " seed %" PRIu64 "\n",
                o.engine.c_str(), o.workload.c_str(), n, topo.switch_count(), flows.size(), o.bytes, o.seed);
    std::printf("stop %s, completions %" PRIu64 "/%zu, failed %" PRIu64 "\n", sim::to_string(r.reason),
                done, flows.size(), failed);
    std::printf("events %" PRIu64 ", packets %" PRIu64 ", cpu_run_s %.3f, cpu_setup_s %.3f\n",
                r.events, t.host_tx_packets, cpu_run, cpu_setup);
    std::printf("events_per_cpu_s %.3g, packets_per_cpu_s %.3g, events_per_packet %.2f\n",
                static_cast<double>(r.events) / cpu_run,
                static_cast<double>(t.host_tx_packets) / cpu_run,
                static_cast<double>(r.events) / static_cast<double>(t.host_tx_packets));
    std::printf("peak_rss_mb %.1f\n", static_cast<double>(ru.ru_maxrss) / 1024);
    std::printf("last_finish_us %.1f, ideal_us %.1f, fraction_of_ideal %.3f\n", finish_us, ideal_us,
                finish_us > 0 ? ideal_us / finish_us : 0.0);
    uint64_t timer_arms = 0, timeouts = 0;
    for (uint32_t h = 0; h < n; ++h) {
        timer_arms += topo.host(h).stats().timer_arms;
        timeouts += topo.host(h).stats().timeouts;
    }
    std::printf("host timer_arms %" PRIu64 ", timeouts %" PRIu64 "\n", timer_arms, timeouts);
    std::printf("switch_drops %" PRIu64 ", ecn_marks %" PRIu64 ", max_queue_bytes %" PRIu64 "\n",
                t.switch_drops, t.ecn_marks, t.max_queue_bytes);
    if (o.engine == "null") return r.reason == sim::StopReason::kQueueEmpty ? 0 : 1;
    return done == flows.size() && failed == 0 ? 0 : 1;
}
