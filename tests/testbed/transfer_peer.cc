// tests/testbed/transfer_peer.cc — one side of an RDMA WRITE transfer between two testbed
// hosts, driven by tests/testbed/netns_test.py through stdin/stdout (one JSON object a line).
//
//   receiver: prints {addr, qp, rkey, vaddr}; reads the sender's {addr, qp}; connects and
//             prints {ready}; waits until a line (or EOF) arrives on stdin; then checks every
//             byte of its buffer against the pattern and prints its report.
//   sender:   connects to the receiver given on the command line, prints {addr, qp}; waits
//             for a line on stdin; WRITEs the whole buffer in chunks, the last one
//             WRITE_WITH_IMM, keeping --depth outstanding; prints {progress, t} after every
//             completed chunk and its report at the end. With --pause-at B it stops once B
//             bytes are complete, prints {paused} and waits for another line first.
//
// A report carries the verdict (error completions, mismatched bytes) and the engine's
// counters: the connection's and every path's (core/stats.h), plus the connection and path
// events seen. Bytes are a function of (seed, offset), and the receiver's buffer starts as
// their complement, so a byte never written, or written from the wrong offset, is caught
// (STYLE §6). Exit status 0 when the peer did its part without an error, 1 otherwise, 2 on
// bad usage.
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/device.h"

namespace {

using Json = nlohmann::json;
using namespace mroce;
using Clock = std::chrono::steady_clock;

// pattern is the byte at `offset` of the transfer with `seed` (splitmix64 of each 8-byte word).
uint8_t pattern(uint64_t seed, uint64_t offset) {
    uint64_t z = seed + (offset / 8 + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<uint8_t>(z >> (8 * (offset % 8)));
}

void emit(const Json& j) { std::cout << j.dump() << '\n' << std::flush; }

[[noreturn]] void usage(const std::string& why) {
    std::cerr << "transfer_peer: " << why << "\n"
              << "usage: transfer_peer receiver --local IP --bytes N --seed S [options]\n"
              << "       transfer_peer sender --local IP --peer IP:PORT --qp N --rkey K --vaddr V"
                 " --bytes N --seed S [options]\n"
              << "options: --paths P (8) --window-kib W (64) --qp-timeout T (16) --chunk-kib C"
                 " (1024) --depth D (8) --deadline-s S (60) --pause-at BYTES (0: none)"
                 " --detect-overtaken 0|1 (1) --aimd 0|1 (1) --plane-ifs IF,IF,... (none)\n";
    std::exit(2);
}

struct Options {
    std::string role;
    std::map<std::string, std::string> values;

    std::string text(const std::string& key) const {
        auto it = values.find(key);
        if (it == values.end()) usage("missing --" + key);
        return it->second;
    }
    uint64_t number(const std::string& key, std::optional<uint64_t> fallback = {}) const {
        auto it = values.find(key);
        if (it == values.end()) {
            if (fallback) return *fallback;
            usage("missing --" + key);
        }
        try {
            size_t used = 0;
            const uint64_t v = std::stoull(it->second, &used, 0);
            if (used != it->second.size()) throw std::invalid_argument("trailing");
            return v;
        } catch (const std::exception&) {
            usage("bad --" + key + " '" + it->second + "'");
        }
    }
};

Options parse(int argc, char** argv) {
    if (argc < 2) usage("missing role");
    Options o;
    o.role = argv[1];
    if (o.role != "sender" && o.role != "receiver") usage("role must be sender or receiver");
    for (int i = 2; i < argc; i += 2) {
        const std::string key = argv[i];
        if (key.rfind("--", 0) != 0 || i + 1 >= argc) usage("bad argument '" + key + "'");
        o.values[key.substr(2)] = argv[i + 1];
    }
    return o;
}

Json path_json(const core::PathStats& p) {
    return {{"packets_sent", p.packets_sent},
            {"bytes_sent", p.bytes_sent},
            {"retransmits_sent", p.retransmits_sent},
            {"lost_by_sack", p.lost_by_sack},
            {"lost_by_timeout", p.lost_by_timeout},
            {"spurious_retransmits", p.spurious_retransmits},
            {"timeouts", p.timeouts},
            {"stalled_timeouts", p.stalled_timeouts},
            {"overtaken", p.overtaken},
            {"probes_sent", p.probes_sent},
            {"acks_received", p.acks_received},
            {"ecn_echoed", p.ecn_echoed},
            {"failures", p.failures},
            {"rerolls", p.rerolls},
            {"recoveries", p.recoveries},
            {"packets_received", p.packets_received},
            {"bytes_received", p.bytes_received},
            {"duplicate_psns", p.duplicate_psns},
            {"ecn_marks", p.ecn_marks},
            {"acks_sent", p.acks_sent}};
}

Json connection_json(const core::ConnectionStats& c) {
    return {{"messages_sent", c.messages_sent},
            {"messages_received", c.messages_received},
            {"retransmits", c.retransmits},
            {"retransmits_sack", c.retransmits_sack},
            {"retransmits_timeout", c.retransmits_timeout},
            {"retransmits_path_failure", c.retransmits_path_failure},
            {"duplicate_segments", c.duplicate_segments},
            {"stale_duplicates", c.stale_duplicates},
            {"stale_generation", c.stale_generation},
            {"out_of_window", c.out_of_window},
            {"malformed", c.malformed},
            {"nacks_sent", c.nacks_sent},
            {"nacks_received", c.nacks_received},
            {"path_failures", c.path_failures},
            {"path_rerolls", c.path_rerolls}};
}

// Peer is what both roles share: the device, one buffer, one queue pair, the events seen.
struct Peer {
    std::unique_ptr<api::Device> dev;
    std::unique_ptr<api::ProtectionDomain> pd;
    std::unique_ptr<api::MemoryRegion> mr;
    std::unique_ptr<api::CompletionQueue> cq;
    std::unique_ptr<api::QueuePair> qp;
    std::vector<uint8_t> buffer;
    std::map<std::string, uint64_t> events;
    std::vector<std::string> failures;  // one line per error seen
    api::QpAttr base;                   // timeout and retry settings for RTR/RTS

    void drain_events() {
        std::vector<api::Event> out(64);
        const size_t n = dev->poll_events(out);
        for (size_t i = 0; i < n; ++i) {
            switch (out[i].kind) {
                case api::EventKind::kConnectionUp:
                    ++events["connection_up"];
                    break;
                case api::EventKind::kConnectionFailed:
                    ++events["connection_failed"];
                    failures.push_back(std::string("connection failed: ") +
                                       core::to_string(out[i].status));
                    break;
                case api::EventKind::kConnectionClosed:
                    ++events["connection_closed"];
                    break;
                case api::EventKind::kPathFailed:
                    ++events["path_failed"];
                    break;
                case api::EventKind::kPathRecovered:
                    ++events["path_recovered"];
                    break;
                default:
                    ++events["other"];
                    break;
            }
        }
    }

    Error connect(const Address& peer, uint32_t number) {
        std::string why;
        const api::QpModify rtr = api::qp_to_rtr(peer, number, base);
        if (Error e = qp->modify(rtr.attr, rtr.mask, &why); e != Error::kOk) {
            failures.push_back("RTR: " + why);
            return e;
        }
        const api::QpModify rts = api::qp_to_rts(base);
        if (Error e = qp->modify(rts.attr, rts.mask, &why); e != Error::kOk) {
            failures.push_back("RTS: " + why);
            return e;
        }
        return Error::kOk;
    }

    Json report(const std::string& role, const Address& peer) {
        drain_events();
        Json j = {{"role", role}, {"events", events}, {"failures", failures}};
        const auto s = dev->stats();
        j["udp"] = {{"packets_sent", s.udp.packets_sent},
                    {"packets_received", s.udp.packets_received},
                    {"send_errors", s.udp.send_errors},
                    {"send_would_block", s.udp.send_would_block},
                    {"bind_failures", s.udp.bind_failures},
                    {"no_plane_device", s.udp.no_plane_device}};
        if (auto r = dev->connection_report(peer)) {
            j["connection"] = connection_json(r->connection);
            Json paths = Json::array();
            for (const auto& p : r->paths) paths.push_back(path_json(p));
            j["paths"] = paths;
        } else {
            failures.push_back(std::string("no connection report: ") +
                               std::string(mroce::to_string(r.error())));
            j["failures"] = failures;
        }
        return j;
    }
};

bool stdin_ready(int timeout_ms) {
    pollfd p{STDIN_FILENO, POLLIN, 0};
    return ::poll(&p, 1, timeout_ms) > 0;
}

std::optional<std::string> read_line() {
    std::string line;
    if (!std::getline(std::cin, line)) return std::nullopt;
    return line;
}

std::optional<Address> parse_ip(const std::string& text) {
    auto a = api::parse_address(text + ":0");
    if (!a) return std::nullopt;
    return *a;
}

int open_peer(const Options& o, Peer& p, size_t bytes) {
    const auto local = parse_ip(o.text("local"));
    if (!local) usage("bad --local '" + o.text("local") + "'");
    api::DeviceConfig cfg;
    cfg.local = *local;  // port 0: an ephemeral port
    cfg.endpoint.num_paths = static_cast<uint16_t>(o.number("paths", 8));
    // A capped plane's queue is small: the default UDP window (up to 1 MiB per path) would
    // overflow it and turn queue drops into retry exhaustion (docs/testbed.md "Plane rate").
    cfg.endpoint.window_bytes_per_path = o.number("window-kib", 64) << 10;
    cfg.fit_window_to_datapath = false;
    // [PATH-11] on or off (1/0), to compare how paths fail when planes queue unequally.
    cfg.endpoint.detect_overtaken = o.number("detect-overtaken", 1) != 0;
    // Congestion control: 1 ECN AIMD (spec §9.1, the Device's default) capped at the
    // window, 0 the fixed window ([CC-1]).
    cfg.endpoint.congestion_control = o.number("aimd", 1) != 0 ? core::EndpointConfig::Cc::kAimd
                                                               : core::EndpointConfig::Cc::kFixed;
    cfg.seed = o.number("seed") ^ (o.role == "sender" ? 0x5eedu : 0xcafeu);
    // --plane-ifs up0,up1,...: one interface per plane, so the paths are spread evenly over
    // the planes and a re-rolled path stays on its own ([PATH-1], [PATH-4]).
    if (auto it = o.values.find("plane-ifs"); it != o.values.end()) {
        std::stringstream list(it->second);
        for (std::string dev; std::getline(list, dev, ',');) cfg.udp.plane_devices.push_back(dev);
    }
    std::string error;
    auto dev = api::Device::open(cfg, &error);
    if (!dev) {
        emit({{"role", o.role}, {"failures", {"open: " + error}}});
        return 1;
    }
    p.dev = std::move(dev).value();
    p.base.timeout = static_cast<uint8_t>(o.number("qp-timeout", 16));
    p.buffer.resize(bytes);
    const uint64_t seed = o.number("seed");
    for (size_t i = 0; i < bytes; ++i)
        p.buffer[i] =
            o.role == "sender" ? pattern(seed, i) : static_cast<uint8_t>(~pattern(seed, i));
    p.pd = p.dev->alloc_pd();
    auto mr = p.pd->register_memory(p.buffer.data(), p.buffer.size(),
                                    api::access::kLocalWrite | api::access::kRemoteWrite);
    if (!mr) {
        emit({{"role", o.role}, {"failures", {"register_memory failed"}}});
        return 1;
    }
    p.mr = std::move(mr).value();
    p.cq = p.dev->create_cq();
    auto qp = p.pd->create_qp(*p.cq, *p.cq);
    if (!qp) {
        emit({{"role", o.role}, {"failures", {"create_qp failed"}}});
        return 1;
    }
    p.qp = std::move(qp).value();
    const api::QpModify init = api::qp_to_init(api::access::kRemoteWrite);
    if (p.qp->modify(init.attr, init.mask, &error) != Error::kOk) {
        emit({{"role", o.role}, {"failures", {"INIT: " + error}}});
        return 1;
    }
    return 0;
}

int run_receiver(const Options& o) {
    const size_t bytes = o.number("bytes");
    Peer p;
    if (int rc = open_peer(o, p, bytes); rc != 0) return rc;
    // The final WRITE_WITH_IMM consumes this receive (its buffer is not written).
    if (p.qp->post_recv({1, 0, 0, 0}) != Error::kOk) {
        emit({{"role", "receiver"}, {"failures", {"post_recv failed"}}});
        return 1;
    }
    emit({{"role", "receiver"},
          {"addr", p.dev->local_address().to_string()},
          {"qp", p.qp->number()},
          {"rkey", p.mr->rkey()},
          {"vaddr", p.mr->addr()}});

    const auto line = read_line();
    Address peer;
    try {
        const Json j = Json::parse(line.value_or(""));
        auto a = api::parse_address(j.at("addr").get<std::string>());
        if (!a) throw std::invalid_argument("addr");
        peer = *a;
        if (p.connect(peer, j.at("qp").get<uint32_t>()) != Error::kOk) {
            emit({{"role", "receiver"}, {"failures", p.failures}});
            return 1;
        }
    } catch (const std::exception&) {
        emit({{"role", "receiver"}, {"failures", {"bad sender line: " + line.value_or("<EOF>")}}});
        return 1;
    }
    emit({{"ready", true}});

    // Collect completions until the test says it is over (a line or EOF on stdin).
    std::optional<api::Completion> imm;
    uint64_t error_completions = 0;
    std::vector<api::Completion> comps(16);
    while (!stdin_ready(0)) {
        const size_t n = p.cq->wait(comps, std::chrono::milliseconds(20));
        for (size_t i = 0; i < n; ++i) {
            if (comps[i].status != api::Status::kSuccess) {
                ++error_completions;
                p.failures.push_back(std::string("receive completion: ") +
                                     core::to_string(comps[i].status));
            } else if (comps[i].opcode == api::WorkOpcode::kRecvWriteImm) {
                imm = comps[i];
            }
        }
        p.drain_events();
    }
    (void)read_line();

    // Every byte, not a checksum: the first wrong offset says what went wrong.
    const uint64_t seed = o.number("seed");
    uint64_t mismatched = 0;
    int64_t first = -1;
    for (size_t i = 0; i < bytes; ++i) {
        if (p.buffer[i] != pattern(seed, i)) {
            if (first < 0) first = static_cast<int64_t>(i);
            ++mismatched;
        }
    }
    if (!imm) p.failures.push_back("the final WRITE_WITH_IMM never completed");
    if (mismatched) p.failures.push_back(std::to_string(mismatched) + " bytes wrong");
    Json r = p.report("receiver", peer);
    r["bytes_verified"] = bytes;
    r["mismatched_bytes"] = mismatched;
    r["first_mismatch"] = first;
    r["imm"] = imm ? Json(imm->imm) : Json(nullptr);
    r["error_completions"] = error_completions;
    r["ok"] = p.failures.empty();
    emit(r);
    return p.failures.empty() ? 0 : 1;
}

int run_sender(const Options& o) {
    const size_t bytes = o.number("bytes");
    const size_t chunk = o.number("chunk-kib", 1024) << 10;
    const size_t depth = o.number("depth", 8);
    const auto deadline_s = std::chrono::seconds(o.number("deadline-s", 60));
    if (chunk == 0 || bytes == 0 || bytes % chunk != 0 || depth == 0)
        usage("--bytes must be a positive multiple of --chunk-kib, --depth positive");
    auto peer = api::parse_address(o.text("peer"));
    if (!peer) usage("bad --peer '" + o.text("peer") + "'");
    Peer p;
    if (int rc = open_peer(o, p, bytes); rc != 0) return rc;
    if (p.connect(*peer, static_cast<uint32_t>(o.number("qp"))) != Error::kOk) {
        emit({{"role", "sender"}, {"failures", p.failures}});
        return 1;
    }
    emit(
        {{"role", "sender"}, {"addr", p.dev->local_address().to_string()}, {"qp", p.qp->number()}});
    if (!read_line()) {
        emit({{"role", "sender"}, {"failures", {"stdin closed before the start"}}});
        return 1;
    }

    const uint64_t rkey = o.number("rkey");
    const uint64_t vaddr = o.number("vaddr");
    const size_t chunks = bytes / chunk;
    size_t posted = 0, completed = 0;
    uint64_t error_completions = 0;
    const auto t0 = Clock::now();
    std::vector<api::Completion> comps(16);
    const uint64_t pause_at = o.number("pause-at", 0);
    bool paused = false;
    while (completed < chunks && error_completions == 0) {
        // --pause-at: once that many bytes are posted and complete, stop and wait for a line
        // on stdin, so the test can look at (and change) the network between two phases.
        if (!paused && pause_at && completed * chunk >= pause_at) {
            paused = true;
            emit({{"paused", completed * chunk},
                  {"t", std::chrono::duration<double>(Clock::now() - t0).count()}});
            if (!read_line()) {
                p.failures.push_back("stdin closed during the pause");
                break;
            }
        }
        while (posted < chunks && posted - completed < depth &&
               (paused || !pause_at || posted * chunk < pause_at)) {
            api::SendWr w;
            w.wr_id = posted;
            w.opcode = posted + 1 == chunks ? api::WorkOpcode::kWriteImm : api::WorkOpcode::kWrite;
            w.local_addr = p.mr->addr() + posted * chunk;
            w.length = static_cast<uint32_t>(chunk);
            w.lkey = p.mr->lkey();
            w.remote_addr = vaddr + posted * chunk;
            w.rkey = static_cast<uint32_t>(rkey);
            w.imm = static_cast<uint32_t>(chunks);
            if (Error e = p.qp->post_send(w); e != Error::kOk) {
                p.failures.push_back("post_send: " + std::string(mroce::to_string(e)));
                break;
            }
            ++posted;
        }
        if (!p.failures.empty()) break;
        const size_t n = p.cq->wait(comps, std::chrono::milliseconds(20));
        for (size_t i = 0; i < n; ++i) {
            if (comps[i].status != api::Status::kSuccess) {
                ++error_completions;
                p.failures.push_back("send completion " + std::to_string(comps[i].wr_id) + ": " +
                                     core::to_string(comps[i].status));
                continue;
            }
            ++completed;
            emit({{"progress", completed * chunk},
                  {"t", std::chrono::duration<double>(Clock::now() - t0).count()}});
        }
        p.drain_events();
        if (Clock::now() - t0 > deadline_s) {
            p.failures.push_back("deadline: " + std::to_string(completed) + " of " +
                                 std::to_string(chunks) + " chunks completed");
            break;
        }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    Json r = p.report("sender", *peer);
    r["bytes"] = bytes;
    r["completed_bytes"] = completed * chunk;
    r["seconds"] = seconds;
    r["goodput_mbps"] = completed * chunk * 8 / seconds / 1e6;
    r["error_completions"] = error_completions;
    r["ok"] = p.failures.empty();
    emit(r);
    return p.failures.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    return o.role == "sender" ? run_sender(o) : run_receiver(o);
}
