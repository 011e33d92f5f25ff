#include "tools/demo.h"

#include <fmt/core.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "api/device.h"
#include "core/endpoint.h"
#include "sim/event_queue.h"
#include "sim/network.h"

namespace mroce::tools {
namespace {

struct DemoOptions {
    uint64_t loopback_mib = 64;
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

// run_loopback moves `mib` MiB of RDMA WRITE between two Devices on 127.0.0.1 over real
// UDP sockets (one process, one thread driving both in manual progress mode) and checks
// the bytes. Returns the goodput in Gbit/s, or a negative value with `error` set.
double run_loopback(const DemoOptions& o, std::string& error, uint64_t& datagrams) {
    api::DeviceConfig cfg;
    cfg.local = Address::ipv4(0x7f000001, 0);
    cfg.progress = api::ProgressMode::kManual;
    cfg.seed = o.seed;
    auto a = api::Device::open(cfg, &error);
    if (!a) return -1;
    cfg.seed = o.seed + 1;
    auto b = api::Device::open(cfg, &error);
    if (!b) return -1;
    const uint64_t bytes = o.loopback_mib << 20, msg = 1 << 20;
    std::vector<std::byte> src(bytes), dst(bytes);
    for (uint64_t i = 0; i < bytes; ++i) src[i] = static_cast<std::byte>(i * 7 + (i >> 16));
    auto pa = (*a)->alloc_pd();
    auto pb = (*b)->alloc_pd();
    auto ma = pa->register_memory(src.data(), bytes, core::access::kLocalWrite);
    auto mb = pb->register_memory(dst.data(), bytes,
                                  core::access::kLocalWrite | core::access::kRemoteWrite);
    auto ca = (*a)->create_cq();
    auto cb = (*b)->create_cq();
    auto qa = pa->create_qp(*ca, *ca);
    auto qb = pb->create_qp(*cb, *cb);
    if (!ma || !mb || !qa || !qb) {
        error = "loopback setup failed";
        return -1;
    }
    (*qa)->connect((*b)->local_address(), (*qb)->number());
    (*qb)->connect((*a)->local_address(), (*qa)->number());
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t posted = 0, done = 0;
    const uint64_t total = bytes / msg;
    core::Completion c[16];
    while (done < total) {
        while (posted < total && posted - done < 16) {
            core::SendWr wr;
            wr.wr_id = posted;
            wr.opcode = core::WorkOpcode::kWrite;
            wr.local_addr = reinterpret_cast<uint64_t>(src.data() + posted * msg);
            wr.length = static_cast<uint32_t>(msg);
            wr.lkey = (*ma)->lkey();
            wr.remote_addr = reinterpret_cast<uint64_t>(dst.data() + posted * msg);
            wr.rkey = (*mb)->rkey();
            if ((*qa)->post_send(wr) != Error::kOk) {
                error = "post_send failed";
                return -1;
            }
            ++posted;
        }
        (*a)->progress();
        (*b)->progress();
        for (size_t i = 0, n = ca->poll(c); i < n; ++i) {
            if (c[i].status != core::Status::kSuccess) {
                error = std::string("completion error: ") + core::to_string(c[i].status);
                return -1;
            }
            ++done;
        }
        if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(60)) {
            error = "loopback transfer did not finish in 60 s";
            return -1;
        }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (src != dst) {
        error = "loopback data mismatch";
        return -1;
    }
    datagrams = (*a)->stats().driver.datagrams_out;
    return static_cast<double>(bytes) * 8 / secs / 1e9;
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
    if (o.loopback_mib > 0) {
        fmt::print("\nLoopback: {} MiB of RDMA WRITE between two devices on 127.0.0.1, real UDP\n"
                   "sockets, one thread driving both (wall clock, this machine):\n",
                   o.loopback_mib);
        std::string error;
        uint64_t datagrams = 0;
        const double gbps = run_loopback(o, error, datagrams);
        if (gbps < 0) {
            fmt::print("  FAILED: {}\n", error);
            rc = 1;
        } else {
            fmt::print("  {:.2f} Gbit/s, {} datagrams sent, every byte checked\n", gbps, datagrams);
        }
    }
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
    cmd->add_option("--loopback-mib", opts->loopback_mib,
                    "MiB for the loopback UDP run (0 skips it)")->check(CLI::Range(0, 4096));
    cmd->callback([opts] { std::exit(run_demo(*opts)); });
}

}  // namespace mroce::tools
