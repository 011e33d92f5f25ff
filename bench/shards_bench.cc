// bench/shards_bench.cc — a device with N threads (DeviceConfig::threads, docs/design.md
// §12) serving two clients at once over loopback: aggregate WRITE goodput and the CPU
// time of every thread of the process (each server shard, each client), from
// /proc/self/task. A plain program, not a loop benchmark; scripts/shards-loopback.py
// alternates thread counts and takes medians (docs/results.md).
//
//   shards_bench [--threads N] [--seconds S] [--size BYTES] [--depth D] [--seed X]
//
// Each client is a manual-progress device driven by its own thread (named client0,
// client1), with one queue pair to the server; their ports are chosen so that with N >= 2
// they land in different shards. Prints one JSON object.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/device.h"
#include "datapath/udp/steering.h"

using namespace mroce;

namespace {

struct Options {
    uint32_t threads = 1;
    double seconds = 3;
    uint32_t size = 64 << 10;
    uint32_t depth = 64;
    uint64_t seed = 1;
};

// thread_cpu: CPU seconds (user + system) of every thread of this process, by name.
std::map<std::string, double> thread_cpu() {
    std::map<std::string, double> out;
    const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
    DIR* d = ::opendir("/proc/self/task");
    if (!d) return out;
    while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/stat");
        std::string line;
        std::getline(f, line);
        const size_t open = line.find('('), close = line.rfind(')');
        if (open == std::string::npos || close == std::string::npos) continue;
        std::string name = line.substr(open + 1, close - open - 1);
        std::istringstream rest(line.substr(close + 2));
        std::string field;
        uint64_t utime = 0, stime = 0;
        for (int i = 3; i <= 15 && rest >> field; ++i) {
            if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
            if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
        }
        out[name + "/" + e->d_name] = static_cast<double>(utime + stime) / tick;
    }
    ::closedir(d);
    return out;
}

struct Client {
    std::unique_ptr<api::Device> dev;
    std::unique_ptr<api::ProtectionDomain> pd;
    std::vector<std::byte> memory;
    std::unique_ptr<api::MemoryRegion> mr;
    std::unique_ptr<api::CompletionQueue> cq;
    std::unique_ptr<api::QueuePair> qp;
    std::atomic<uint64_t> bytes{0};
    std::string error;
};

api::DeviceConfig base_config(uint64_t seed) {
    api::DeviceConfig cfg;
    cfg.local = Address::ipv4(0x7f000001, 0);
    cfg.seed = seed;
    cfg.stat_socket = false;
    cfg.udp.recv_buffer_bytes = 16 << 20;
    return cfg;
}

bool fail(const std::string& what) {
    std::fprintf(stderr, "shards_bench: %s\n", what.c_str());
    return false;
}

// run_client keeps `depth` WRITEs in flight until `stop`, counting completed bytes.
void run_client(Client& c, uint32_t index, const Options& o, uint64_t target, uint32_t rkey,
                const std::atomic<bool>& go, const std::atomic<bool>& stop) {
    const std::string name = "client" + std::to_string(index);
    (void)::pthread_setname_np(::pthread_self(), name.c_str());
    while (!go.load()) std::this_thread::yield();
    uint64_t posted = 0, done = 0;
    std::vector<api::Completion> comps(64);
    while (!stop.load(std::memory_order_relaxed)) {
        while (posted - done < o.depth) {
            api::SendWr wr;
            wr.wr_id = posted;
            wr.opcode = api::WorkOpcode::kWrite;
            const uint64_t slot = posted % o.depth;
            wr.local_addr = c.mr->addr() + slot * o.size;
            wr.length = o.size;
            wr.lkey = c.mr->lkey();
            wr.remote_addr = target + slot * o.size;
            wr.rkey = rkey;
            if (c.qp->post_send(wr) != Error::kOk) {
                c.error = "post_send failed";
                return;
            }
            ++posted;
        }
        (void)c.dev->progress();
        const size_t n = c.cq->poll(comps);
        for (size_t i = 0; i < n; ++i) {
            if (comps[i].status != api::Status::kSuccess) {
                c.error = "a WRITE failed";
                return;
            }
            ++done;
            c.bytes.fetch_add(o.size, std::memory_order_relaxed);
        }
    }
}

bool run(const Options& o) {
    api::DeviceConfig scfg = base_config(o.seed);
    scfg.threads = o.threads;
    std::string why;
    auto server = api::Device::open(scfg, &why);
    if (!server) return fail("server: " + why);
    auto pd = (*server)->alloc_pd();
    const uint64_t region = uint64_t{o.size} * o.depth;
    std::vector<std::byte> memory(2 * region, std::byte{0});
    auto mr = pd->register_memory(memory.data(), memory.size(),
                                  api::access::kLocalWrite | api::access::kRemoteWrite);
    if (!mr) return fail("server: register_memory");
    auto cq = (*server)->create_cq();
    std::vector<std::unique_ptr<Client>> clients;
    std::vector<std::unique_ptr<api::QueuePair>> qps;
    const uint32_t shards = o.threads;
    for (uint32_t i = 0; i < 2; ++i) {
        auto c = std::make_unique<Client>();
        for (uint32_t attempt = 0; attempt < 64 && !c->dev; ++attempt) {
            api::DeviceConfig ccfg = base_config(o.seed * 131 + i * 64 + attempt + 7);
            ccfg.progress = api::ProgressMode::kManual;
            auto dev = api::Device::open(ccfg, &why);
            if (!dev) return fail("client: " + why);
            if (shards > 1 && datapath::steering_shard((*dev)->local_address(), shards) != i % shards)
                continue;
            c->dev = std::move(dev).value();
        }
        if (!c->dev) return fail("no client port in the wanted shard");
        c->pd = c->dev->alloc_pd();
        c->memory.assign(region, std::byte{0x5a});
        auto cmr = c->pd->register_memory(c->memory.data(), c->memory.size(), api::access::kLocalWrite);
        if (!cmr) return fail("client: register_memory");
        c->mr = std::move(cmr).value();
        c->cq = c->dev->create_cq();
        auto cqp = c->pd->create_qp(*c->cq, *c->cq);
        auto sqp = pd->create_qp(*cq, *cq);
        if (!cqp || !sqp) return fail("create_qp");
        c->qp = std::move(cqp).value();
        qps.push_back(std::move(sqp).value());
        clients.push_back(std::move(c));
    }
    for (uint32_t i = 0; i < 2; ++i) {
        if (qps[i]->connect(clients[i]->dev->local_address(), clients[i]->qp->number()) != Error::kOk ||
            clients[i]->qp->connect((*server)->local_address(), qps[i]->number()) != Error::kOk)
            return fail("connect");
    }
    std::atomic<bool> go{false}, stop{false};
    std::vector<std::thread> threads;
    for (uint32_t i = 0; i < 2; ++i)
        threads.emplace_back(run_client, std::ref(*clients[i]), i, std::cref(o),
                             (*mr)->addr() + i * region, (*mr)->rkey(), std::cref(go), std::cref(stop));
    // Warm up (handshake, windows) for a quarter of the run, then measure.
    go.store(true);
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(1.0, o.seconds / 4)));
    const auto cpu0 = thread_cpu();
    std::vector<uint64_t> bytes0;
    for (auto& c : clients) bytes0.push_back(c->bytes.load());
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
    const auto cpu1 = thread_cpu();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<uint64_t> bytes1;
    for (auto& c : clients) bytes1.push_back(c->bytes.load());
    stop.store(true);
    for (auto& t : threads) t.join();
    for (auto& c : clients)
        if (!c->error.empty()) return fail(c->error);

    double total_gbps = 0;
    std::printf("{\"threads\": %u, \"seconds\": %.3f, \"size\": %u, \"depth\": %u, \"clients_gbps\": [",
                o.threads, elapsed, o.size, o.depth);
    for (size_t i = 0; i < clients.size(); ++i) {
        const double g = static_cast<double>(bytes1[i] - bytes0[i]) * 8 / elapsed / 1e9;
        total_gbps += g;
        std::printf("%s%.3f", i ? ", " : "", g);
    }
    std::printf("], \"gbps\": %.3f, \"cpu_s\": {", total_gbps);
    bool first = true;
    double server_cpu = 0;
    for (const auto& [name, t1] : cpu1) {
        auto it = cpu0.find(name);
        const double used = t1 - (it == cpu0.end() ? 0.0 : it->second);
        if (used <= 0) continue;
        if (name.rfind("mroce-shard", 0) == 0 || (o.threads == 1 && name.rfind("mroce-progress", 0) == 0))
            server_cpu += used;
        std::printf("%s\"%s\": %.3f", first ? "" : ", ", name.c_str(), used);
        first = false;
    }
    const double gb = total_gbps * elapsed / 8;
    std::printf("}, \"server_cpu_s\": %.3f, \"server_cpu_s_per_gb\": %.4f",
                server_cpu, gb > 0 ? server_cpu / gb : 0.0);
    const auto st = (*server)->stats();
    std::printf(", \"shard_datagrams_in\": [");
    if (st.shards.empty()) std::printf("%" PRIu64, st.driver.datagrams_in);
    for (size_t s = 0; s < st.shards.size(); ++s)
        std::printf("%s%" PRIu64, s ? ", " : "", st.shards[s].driver.datagrams_in);
    std::printf("]}\n");
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        const char* v = argv[i + 1];
        if (k == "--threads") o.threads = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
        else if (k == "--seconds") o.seconds = std::strtod(v, nullptr);
        else if (k == "--size") o.size = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
        else if (k == "--depth") o.depth = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
        else if (k == "--seed") o.seed = std::strtoull(v, nullptr, 0);
        else {
            std::fprintf(stderr, "usage: shards_bench [--threads N] [--seconds S] [--size B] [--depth D] [--seed X]\n");
            return 2;
        }
    }
    std::fprintf(stderr, "shards_bench: seed %" PRIu64 "\n", o.seed);
    return run(o) ? 0 : 1;
}
