#include "tools/demo.h"

#include <fmt/core.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "core/endpoint.h"
#include "sim/event_queue.h"
#include "sim/network.h"

namespace mroce::tools {
namespace {

struct DemoOptions {
    std::vector<double> losses = {0.0, 0.01, 0.10};
    uint32_t paths = 8;
    uint32_t streams = 8;
    uint64_t megabytes = 64;
    uint32_t message_kib = 1024;
    double gbps = 100;
    double delay_us = 1;
    uint64_t seed = 1;
};

struct DemoResult {
    bool ok = false;
    std::string error;
    double seconds = 0;
    uint64_t bytes = 0;
    core::ConnectionStats stats;
    uint64_t packets = 0, lost_sack = 0, lost_timeout = 0, spurious = 0, failures = 0;
};

// run_one moves opts.megabytes from A to B as RDMA WRITEs on opts.streams streams and
// checks every byte that lands.
DemoResult run_one(const DemoOptions& o, double loss) {
    DemoResult r;
    sim::Sim sim(o.seed);
    sim::NetworkConfig nc;
    nc.routes = 8;
    nc.link.rate_bps = static_cast<uint64_t>(o.gbps * 1e9);
    nc.link.delay = std::chrono::nanoseconds(static_cast<int64_t>(o.delay_us * 1000));
    nc.link.queue_capacity_bytes = 4 << 20;
    nc.link.loss_probability = loss;
    nc.host.line_rate_bps = nc.link.rate_bps;
    sim::Network net(sim, nc);
    sim::Host& ha = net.add_host();
    sim::Host& hb = net.add_host();
    core::EndpointConfig cfg;
    cfg.num_paths = static_cast<uint16_t>(o.paths);
    cfg.min_pto = std::chrono::microseconds(50);
    core::Endpoint a(cfg, ha.address(), o.seed * 2 + 1), b(cfg, hb.address(), o.seed * 2 + 2);
    ha.attach(&a);
    hb.attach(&b);

    const uint64_t per_stream = o.megabytes * (1 << 20) / o.streams;
    const uint64_t msg = uint64_t{o.message_kib} * 1024;
    std::vector<std::byte> src(per_stream), dst(per_stream * o.streams);
    for (uint64_t i = 0; i < per_stream; ++i) src[i] = static_cast<std::byte>(i * 131 + (i >> 12));
    const Time t0 = sim::to_core_time(sim.now());
    const uint32_t pa = a.alloc_pd(), pb = b.alloc_pd();
    auto ka = a.register_memory(pa, src.data(), src.size(), core::access::kLocalWrite);
    auto kb = b.register_memory(pb, dst.data(), dst.size(),
                                core::access::kLocalWrite | core::access::kRemoteWrite);
    uint64_t pending = 0;
    for (uint32_t s = 0; s < o.streams; ++s) {
        const uint32_t sa = *a.create_stream(pa, hb.address(), s + 1, t0);
        (void)*b.create_stream(pb, ha.address(), s + 1, t0);
        for (uint64_t off = 0; off < per_stream; off += msg) {
            core::SendWr wr;
            wr.wr_id = off;
            wr.opcode = core::WorkOpcode::kWrite;
            wr.local_addr = reinterpret_cast<uint64_t>(src.data() + off);
            wr.length = static_cast<uint32_t>(std::min(msg, per_stream - off));
            wr.lkey = ka->lkey;
            wr.remote_addr = reinterpret_cast<uint64_t>(dst.data() + s * per_stream + off);
            wr.rkey = kb->rkey;
            if (a.post_send(sa, wr, t0) != Error::kOk) {
                r.error = "post_send failed";
                return r;
            }
            ++pending;
        }
    }
    Time last = t0;
    ha.set_event_callback([&](const core::Event& e) {
        if (e.kind == core::EventKind::kConnectionFailed)
            r.error = std::string("connection failed: ") + core::to_string(e.status);
        if (e.kind != core::EventKind::kCompletion) return;
        if (e.completion.status != core::Status::kSuccess)
            r.error = std::string("completion error: ") + core::to_string(e.completion.status);
        --pending;
        last = sim::to_core_time(sim.now());
    });
    ha.kick();
    sim.run_until([&] { return pending == 0 || !r.error.empty(); },
                  sim::SimTime{} + std::chrono::seconds(10), 500'000'000);
    if (r.error.empty() && pending) r.error = "did not finish within 10 s of simulated time";
    if (!r.error.empty()) return r;
    for (uint32_t s = 0; s < o.streams; ++s)
        if (std::memcmp(dst.data() + s * per_stream, src.data(), per_stream) != 0) {
            r.error = "data mismatch on stream " + std::to_string(s);
            return r;
        }
    const core::Connection* c = a.connection(a.connection_to(hb.address()));
    r.stats = c->stats();
    for (uint16_t p = 0; p < c->num_paths(); ++p) {
        const core::PathStats& ps = c->path_stats(p);
        r.packets += ps.packets_sent;
        r.lost_sack += ps.lost_by_sack;
        r.lost_timeout += ps.lost_by_timeout;
        r.spurious += ps.spurious_retransmits;
        r.failures += ps.failures;
    }
    r.ok = true;
    r.bytes = per_stream * o.streams;
    r.seconds = static_cast<double>(to_ns(last - t0)) * 1e-9;
    return r;
}

int run_demo(const DemoOptions& o) {
    fmt::print("mroce demo: {} MiB of RDMA WRITE on {} streams, {} paths, over the in-process\n"
               "network: 2 hosts, 8 ECMP routes of {} Gbit/s and {} us each, random loss on every\n"
               "link (both directions). Every byte is checked where it lands.\n\n",
               o.megabytes, o.streams, o.paths, o.gbps, o.delay_us);
    fmt::print("{:>6} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "loss", "goodput", "of line",
               "packets", "retx", "by sack", "by timer", "spurious");
    int rc = 0;
    for (double loss : o.losses) {
        const DemoResult r = run_one(o, loss);
        if (!r.ok) {
            fmt::print("{:>5.1f}% FAILED: {}\n", loss * 100, r.error);
            rc = 1;
            continue;
        }
        const double gbps = static_cast<double>(r.bytes) * 8 / r.seconds / 1e9;
        fmt::print("{:>5.1f}% {:>6.1f} Gb/s {:>8.1f}% {:>9} {:>9} {:>9} {:>9} {:>9}\n", loss * 100,
                   gbps, 100 * gbps / o.gbps, r.packets, r.stats.retransmits, r.lost_sack,
                   r.lost_timeout, r.spurious);
    }
    fmt::print("\ngoodput = application bytes / time to the last completion; 'of line' is the\n"
               "fraction of one host's line rate (DATA headers are 72 bytes per 4096).\n");
    return rc;
}

}  // namespace

void register_demo(CLI::App& app) {
    auto opts = std::make_shared<DemoOptions>();
    CLI::App* cmd = app.add_subcommand(
        "demo", "bulk transfer over the in-process lossy multipath network (the make run demo)");
    cmd->add_option("--loss", opts->losses, "random loss rates to run, e.g. --loss 0 0.01 0.1")
        ->check(CLI::Range(0.0, 0.5));
    cmd->add_option("--paths", opts->paths, "paths per connection")->check(CLI::Range(1, 256));
    cmd->add_option("--streams", opts->streams, "streams (QPs)")->check(CLI::Range(1, 1024));
    cmd->add_option("--mib", opts->megabytes, "MiB to transfer per run")->check(CLI::Range(1, 4096));
    cmd->add_option("--message-kib", opts->message_kib, "message size in KiB")
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--gbps", opts->gbps, "link and NIC rate")->check(CLI::Range(0.1, 1000.0));
    cmd->add_option("--delay-us", opts->delay_us, "per-link propagation delay")
        ->check(CLI::Range(0.0, 10000.0));
    cmd->add_option("--seed", opts->seed, "random seed");
    cmd->callback([opts] { std::exit(run_demo(*opts)); });
}

}  // namespace mroce::tools
