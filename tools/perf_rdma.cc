// tools/perf_rdma.cc — the MetaRoCE side of `mroce perf`: one api::Device in manual
// progress mode (the benchmark thread drives the engine itself, so each process uses one
// core: on a 2-core machine client and server do not compete with progress threads), one
// registered buffer, -q queue pairs on one connection.
//
// Bandwidth: the client keeps -t work requests outstanding per queue pair (WRITE to the
// peer's buffer, or SEND into receives the server keeps posted). Latency: ping-pong on
// queue pair 1, SEND or WRITE_WITH_IMM each way; WRITE uses the immediate because MetaRoCE
// places segments out of order, so polling the buffer's last byte (perftest's write_lat)
// would not prove the message complete. Latency is RTT/2, as perftest reports it.
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fmt/core.h>

#include "api/device.h"
#include "tools/perf_interval.h"
#include "tools/perf_report.h"
#include "tools/perf_side.h"

namespace mroce::tools::perf {

namespace {

using Clock = std::chrono::steady_clock;

// A stalled run fails instead of hanging: no completion for this long is an error.
constexpr auto kStall = std::chrono::seconds(10);
// Receives kept posted per queue pair (perftest's rx depth is 512; the stream window is 128
// messages, so more would only wait).
constexpr uint32_t kRecvDepth = 256;
// Latency ping-pongs run before the measured ones (handshake, caches).
constexpr uint32_t kWarmup = 16;
// The control connection is checked every this many loop iterations.
constexpr uint32_t kOobCheckEvery = 4096;
// The server checks it more often (its passes are cheap when idle), but not every pass:
// a poll(2) per pass would cost as much as the pass.
constexpr uint32_t kServeOobCheckEvery = 256;
// Bandwidth runs poll while there was work within kSpin and then sleep on the device's wake
// fds (CompletionQueue::wait) for at most kIdleSleep, as the progress thread does
// (DeviceConfig::spin). Spinning on an empty socket costs nothing on an idle core, but on
// a shared one it spends the scheduler's share of this process, so that when the peer's
// datagrams arrive this process waits behind the others; a sleeper is woken at once.
// --raw's server uses the same rule.
constexpr auto kSpin = std::chrono::microseconds(50);
constexpr auto kIdleSleep = std::chrono::milliseconds(1);

std::string text(Error e) { return std::string(mroce::to_string(e)); }

// succeeded: true for a successful completion; otherwise the one-line error is set.
bool succeeded(const api::Completion& c, std::string& error) {
    if (c.status == api::Status::kSuccess) return true;
    error = std::string("completion error: ") + core::to_string(c.status);
    return false;
}

int64_t ns_since(Clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

class RdmaSide final : public Side {
public:
    RdmaSide(const Options& o, Oob& oob, bool server) : o_(o), oob_(oob), server_(server) {}

    bool open(std::string& error) {
        api::DeviceConfig cfg;
        cfg.local = oob_.local_ip().with_port(0);
        cfg.progress = api::ProgressMode::kManual;
        cfg.endpoint.num_paths = static_cast<uint16_t>(o_.paths);
        if (o_.window_kib) {
            cfg.endpoint.window_bytes_per_path = uint64_t{o_.window_kib} << 10;
            cfg.fit_window_to_datapath = false;
        }
        if (o_.cc == "aimd") cfg.endpoint.congestion_control = core::EndpointConfig::Cc::kAimd;
        if (o_.cc == "fixed") cfg.endpoint.congestion_control = core::EndpointConfig::Cc::kFixed;
        cfg.endpoint.rate_hint = o_.rate_hint;
        cfg.endpoint.pacing = o_.pacing;
        cfg.endpoint.integrity_check = o_.integrity;
        if (o_.line_rate_gbps > 0)
            cfg.endpoint.port_rate_bps = static_cast<uint64_t>(o_.line_rate_gbps * 1e9);
        for (size_t c = 0; c < o_.dscp_map.size() && c < cfg.udp.dscp_by_class.size(); ++c)
            cfg.udp.dscp_by_class[c] = static_cast<uint8_t>(o_.dscp_map[c]);
        cfg.udp.gso = o_.offload;
        cfg.udp.gro = o_.offload;
        cfg.udp.recv_buffer_bytes = kRecvBufferBytes;
        cfg.udp.plane_devices = o_.plane_ifs;
        cfg.metrics = o_.metrics;
        auto dev = api::Device::open(cfg, &error);
        if (!dev) return false;
        dev_ = std::move(dev).value();
        if (dev_->metrics_port())
            std::fprintf(stderr, "mroce perf: Prometheus metrics on port %u (/metrics)\n",
                         static_cast<unsigned>(dev_->metrics_port()));
        uint32_t max = 0;
        for (uint32_t s : o_.sizes()) max = std::max(max, s);
        buf_.assign(std::max<uint32_t>(max, 64), std::byte{0x5a});  // touched: no page faults
        pd_ = dev_->alloc_pd();
        auto mr = pd_->register_memory(buf_.data(), buf_.size(),
                                       api::access::kLocalWrite | api::access::kRemoteWrite |
                                           api::access::kRemoteRead | api::access::kRemoteAtomic);
        if (!mr) {
            error = std::string("cannot register the buffer: ") + text(mr.error());
            return false;
        }
        mr_ = std::move(mr).value();
        cq_ = dev_->create_cq();
        for (uint32_t i = 0; i < o_.qps; ++i) {
            auto qp = pd_->create_qp(*cq_, *cq_);
            if (!qp) {
                error = std::string("cannot create a queue pair: ") + text(qp.error());
                return false;
            }
            // INIT first: receives are posted before connect (verbs: from INIT on).
            const api::QpModify init = api::qp_to_init(api::access::kRemoteWrite |
                                                       api::access::kRemoteRead |
                                                       api::access::kRemoteAtomic);
            if (const Error e = (*qp)->modify(init.attr, init.mask, &error); e != Error::kOk)
                return false;
            qps_.push_back(std::move(qp).value());
        }
        // Receives: SEND consumes them, and so does WRITE_WITH_IMM (latency). Posted before
        // connect, they are handed to the engine when the queue pair connects.
        const bool need_recvs = o_.verb == Verb::kSend || o_.mode == Mode::kLatency;
        if (need_recvs && (server_ || o_.mode == Mode::kLatency)) {
            for (size_t q = 0; q < qps_.size(); ++q)
                for (uint32_t k = 0; k < kRecvDepth; ++k)
                    if (!post_recv(q, error)) return false;
        }
        return true;
    }

    Json setup() override {
        Json j;
        j["addr"] = dev_->local_address().to_string();
        j["rkey"] = mr_->rkey();
        j["vaddr"] = mr_->addr();
        j["buf_bytes"] = buf_.size();
        Json q = Json::array();
        for (auto& qp : qps_) q.push_back(qp->number());
        j["qps"] = q;
        return j;
    }

    bool connect(const Json& peer, std::string& error) override {
        const auto addr = api::parse_address(peer.value("addr", ""));
        if (!addr || !peer.contains("qps") || !peer["qps"].is_array() ||
            peer["qps"].size() != qps_.size()) {
            error = "the peer's setup message is malformed: " + peer.dump().substr(0, 120);
            return false;
        }
        peer_ = *addr;
        peer_rkey_ = peer.value("rkey", 0u);
        peer_vaddr_ = peer.value("vaddr", uint64_t{0});
        peer_buf_ = peer.value("buf_bytes", uint64_t{0});
        for (size_t i = 0; i < qps_.size(); ++i) {
            peer_qps_.push_back(peer["qps"][i].get<uint32_t>());
            const Error e = qps_[i]->connect(peer_, peer_qps_.back(), static_cast<uint8_t>(o_.tc));
            if (e != Error::kOk) {
                error = std::string("cannot connect queue pair ") +
                        std::to_string(qps_[i]->number()) + ": " + text(e);
                return false;
            }
        }
        return true;
    }

    std::string local_line() const override {
        return fmt::format("{} QPN {:#06x} RKey {:#010x} VAddr {:#016x}",
                           dev_->local_address().to_string(), qps_.front()->number(), mr_->rkey(),
                           mr_->addr());
    }
    std::string remote_line() const override {
        return fmt::format("{} QPN {:#06x} RKey {:#010x} VAddr {:#016x}", peer_.to_string(),
                           peer_qps_.empty() ? 0 : peer_qps_.front(), peer_rkey_, peer_vaddr_);
    }

    std::string offload() const override {
        const auto s = dev_->stats();
        return offload_name(s.gso_enabled, s.gro_enabled, o_.offload);
    }

    void idle() override { dev_->progress(); }

    std::optional<Json> run(uint32_t size, std::string& error) override {
        auto before = report();
        const auto stats_before = dev_->stats();
        std::optional<Json> r = o_.mode == Mode::kBandwidth ? run_bw(size, error)
                                                            : run_lat(size, error);
        if (!r) return r;
        const auto stats_after = dev_->stats();
        (*r)["counters"] = counters_json(before, report());
        (*r)["datapath"] = datapath_json(stats_before.udp, stats_after.udp);
        (*r)["driver"] = driver_json(stats_before.driver, stats_after.driver);
        (*r)["endpoint"] = endpoint_json(stats_before.endpoint, stats_after.endpoint);
        return r;
    }

    Json finish(uint32_t, const Json& mine, const Json& server) override {
        Json r = mine;
        if (server.contains("received_messages")) r["server_received_messages"] = server["received_messages"];
        if (server.contains("counters")) r["server_counters"] = server["counters"];
        if (server.contains("datapath")) r["server_datapath"] = server["datapath"];
        if (server.contains("driver")) r["server_driver"] = server["driver"];
        if (server.contains("endpoint")) r["server_endpoint"] = server["endpoint"];
        return r;
    }

    std::optional<Json> serve(uint32_t size, std::string& error) override {
        auto before = report();
        const auto stats_before = dev_->stats();
        uint64_t received = 0;
        std::vector<api::Completion> comps(64);
        auto last_busy = Clock::now();
        for (uint64_t loop = 0;; ++loop) {
            const bool busy = dev_->progress();
            size_t n = cq_->poll(comps);
            bool slept = false;
            if (o_.mode == Mode::kBandwidth) {
                const auto now = Clock::now();
                if (busy || n > 0) {
                    last_busy = now;
                } else if (now - last_busy > kSpin) {
                    n = cq_->wait(comps, kIdleSleep);
                    slept = true;
                }
            }
            for (size_t i = 0; i < n; ++i) {
                const api::Completion& c = comps[i];
                if (!succeeded(c, error)) return std::nullopt;
                const bool recv = c.opcode == api::WorkOpcode::kRecv ||
                                  c.opcode == api::WorkOpcode::kRecvWriteImm;
                if (!recv) continue;
                ++received;
                const size_t q = qp_index(c.stream);
                if (!post_recv(q, error)) return std::nullopt;
                if (o_.mode == Mode::kLatency && !post_one(q, size, error)) return std::nullopt;
            }
            if (slept || loop % kServeOobCheckEvery == 0) {
                if (auto m = oob_.poll()) {
                    if (message_type(*m) == "end") break;
                    error = "unexpected control message: " + m->dump().substr(0, 80);
                    return std::nullopt;
                }
                if (!oob_.alive()) {
                    error = oob_.error();
                    return std::nullopt;
                }
            }
        }
        Json j;
        j["received_messages"] = received;
        j["counters"] = counters_json(before, report());
        const auto stats_after = dev_->stats();
        j["datapath"] = datapath_json(stats_before.udp, stats_after.udp);
        j["driver"] = driver_json(stats_before.driver, stats_after.driver);
        j["endpoint"] = endpoint_json(stats_before.endpoint, stats_after.endpoint);
        return j;
    }

private:
    api::ConnectionReport report() const {
        auto r = dev_->connection_report(peer_);
        return r ? std::move(r).value() : api::ConnectionReport{};
    }

    size_t qp_index(uint32_t number) const {
        for (size_t i = 0; i < qps_.size(); ++i)
            if (qps_[i]->number() == number) return i;
        return 0;
    }

    bool post_recv(size_t q, std::string& error) {
        api::RecvWr wr;
        wr.addr = mr_->addr();
        wr.length = static_cast<uint32_t>(buf_.size());
        wr.lkey = mr_->lkey();
        const Error e = qps_[q]->post_recv(wr);
        if (e == Error::kOk) return true;
        error = std::string("post_recv failed: ") + text(e);
        return false;
    }

    // post_one posts one message of `size` on queue pair q: SEND, or WRITE to the peer's
    // buffer (WRITE_WITH_IMM in latency mode). Returns false with `error` on a failure
    // other than a full queue (kExhausted: `exhausted_` is set, the caller retries).
    bool post_one(size_t q, uint32_t size, std::string& error) {
        api::SendWr wr;
        wr.wr_id = q;
        wr.local_addr = mr_->addr();
        wr.length = size;
        wr.lkey = mr_->lkey();
        if (o_.verb == Verb::kWrite) {
            wr.opcode = o_.mode == Mode::kLatency ? api::WorkOpcode::kWriteImm
                                                  : api::WorkOpcode::kWrite;
            wr.remote_addr = peer_vaddr_;
            wr.rkey = peer_rkey_;
        } else if (o_.verb == Verb::kRead) {
            wr.opcode = api::WorkOpcode::kRead;  // the peer's buffer into ours
            wr.remote_addr = peer_vaddr_;
            wr.rkey = peer_rkey_;
        } else if (o_.verb == Verb::kAtomic) {
            wr.opcode = api::WorkOpcode::kAtomicFetchAdd;  // on the peer buffer's first 8 bytes
            wr.length = 8;
            wr.remote_addr = peer_vaddr_;
            wr.rkey = peer_rkey_;
            wr.compare_add = 1;
        } else {
            wr.opcode = api::WorkOpcode::kSend;
        }
        const Error e = qps_[q]->post_send(wr);
        exhausted_ = e == Error::kExhausted;
        if (e == Error::kOk || exhausted_) return true;
        error = std::string("post_send failed: ") + text(e);
        return false;
    }


    std::optional<Json> run_bw(uint32_t size, std::string& error) {
        if (o_.verb != Verb::kSend && size > peer_buf_) {
            error = "message larger than the peer's buffer";
            return std::nullopt;
        }
        const bool timed = o_.duration_s > 0;
        const uint64_t per_qp = timed ? UINT64_MAX : o_.iterations_or_default();
        std::vector<uint64_t> posted(qps_.size(), 0), outstanding(qps_.size(), 0);
        std::vector<int64_t> done_ns;
        done_ns.reserve(timed ? 1 << 16 : per_qp * qps_.size());
        std::vector<api::Completion> comps(64);
        const auto t0 = Clock::now();
        const auto stop_at = t0 + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(o_.duration_s));
        auto last_progress = t0;
        bool posting = true;
        uint64_t completed = 0, in_flight = 0;
        auto last_busy = t0;
        IntervalRows rows(o_, size);
        for (uint64_t loop = 0;; ++loop) {
            const auto now = Clock::now();
            if (posting && timed && now >= stop_at) posting = false;
            if (posting) {
                bool more = false;
                for (size_t q = 0; q < qps_.size(); ++q) {
                    while (outstanding[q] < o_.tx_depth && posted[q] < per_qp) {
                        if (!post_one(q, size, error)) return std::nullopt;
                        if (exhausted_) break;
                        ++posted[q];
                        ++outstanding[q];
                        ++in_flight;
                    }
                    more = more || posted[q] < per_qp;
                }
                posting = more;
            }
            const bool busy = dev_->progress();
            size_t n = cq_->poll(comps);
            if (busy || n > 0) {
                last_busy = now;
            } else if (now - last_busy > kSpin) {
                n = cq_->wait(comps, kIdleSleep);
            }
            for (size_t i = 0; i < n; ++i) {
                const api::Completion& c = comps[i];
                if (!succeeded(c, error)) return std::nullopt;
                --outstanding[c.wr_id];
                --in_flight;
                ++completed;
                done_ns.push_back(ns_since(t0));
            }
            if (n > 0) last_progress = Clock::now();
            if (rows.enabled()) rows.bw(ns_since(t0), completed);
            note_path_events(t0);
            if (!posting && in_flight == 0) break;
            if (loop % kOobCheckEvery == 0) {
                if (!oob_.quiet(error)) return std::nullopt;
                if (Clock::now() - last_progress > kStall) {
                    error = "no completion for 10 s (is the peer alive?)";
                    return std::nullopt;
                }
            }
        }
        const double secs = done_ns.empty() ? 0 : static_cast<double>(done_ns.back()) * 1e-9;
        Json r = bw_result(o_, size, completed, completed * size, secs, done_ns);
        if (rows.enabled()) r["intervals"] = rows.finish(ns_since(t0));
        r["path_events"] = std::move(path_events_);
        path_events_ = Json::array();
        return r;
    }

    std::optional<Json> run_lat(uint32_t size, std::string& error) {
        const bool timed = o_.duration_s > 0;
        const uint64_t iters = timed ? UINT64_MAX : o_.iterations_or_default() + kWarmup;
        std::vector<double> samples;
        samples.reserve(timed ? 1 << 16 : iters);
        std::vector<api::Completion> comps(16);
        const auto start = Clock::now();
        const auto stop_at = start + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(o_.duration_s));
        uint64_t sends_outstanding = 0;
        const bool one_sided = o_.verb == Verb::kRead || o_.verb == Verb::kAtomic;
        IntervalRows rows(o_, size);
        for (uint64_t it = 0; it < iters; ++it) {
            if (timed && it >= kWarmup && Clock::now() >= stop_at) break;
            const auto t = Clock::now();
            if (!post_one(0, size, error)) return std::nullopt;
            if (exhausted_) {  // requester completions not drained yet: drain, then retry
                --it;
                dev_->progress();
                (void)drain_sends(comps, sends_outstanding, error);
                continue;
            }
            ++sends_outstanding;
            bool replied = false;
            for (uint64_t loop = 0; !replied; ++loop) {
                dev_->progress();
                const size_t n = cq_->poll(comps);
                for (size_t i = 0; i < n; ++i) {
                    const api::Completion& c = comps[i];
                    if (!succeeded(c, error)) return std::nullopt;
                    if (c.opcode == api::WorkOpcode::kRecv ||
                        c.opcode == api::WorkOpcode::kRecvWriteImm) {
                        replied = true;
                        if (!post_recv(0, error)) return std::nullopt;
                    } else {
                        --sends_outstanding;
                        replied = replied || one_sided;  // READ/atomic: its own completion
                    }
                }
                if (replied) break;
                if (loop % kOobCheckEvery == kOobCheckEvery - 1) {
                    if (!oob_.quiet(error)) return std::nullopt;
                    if (Clock::now() - t > kStall) {
                        error = "no reply for 10 s (is the peer alive?)";
                        return std::nullopt;
                    }
                }
            }
            const double rtt_us =
                std::chrono::duration<double, std::micro>(Clock::now() - t).count();
            // perftest: ping-pong latency is half the round trip; a READ's or atomic's is
            // the whole of it.
            if (it >= kWarmup) {
                samples.push_back(one_sided ? rtt_us : rtt_us / 2);
                rows.lat(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count(),
                         samples.back());
            }
        }
        // Leave no requester completion behind for the next size.
        const auto deadline = Clock::now() + kStall;
        while (sends_outstanding > 0 && Clock::now() < deadline) {
            dev_->progress();
            if (!drain_sends(comps, sends_outstanding, error)) return std::nullopt;
        }
        Json r = lat_result(size, std::move(samples));
        if (rows.enabled())
            r["intervals"] =
                rows.finish(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
        return r;
    }

    // note_path_events records path failures and recoveries with their time since t0 and
    // as wall-clock time (to line them up with an outside event, such as a plane cut).
    void note_path_events(Clock::time_point t0) {
        std::array<api::Event, 16> ev;
        const size_t n = dev_->poll_events(ev);
        for (size_t i = 0; i < n; ++i) {
            if (ev[i].kind != api::EventKind::kPathFailed &&
                ev[i].kind != api::EventKind::kPathRecovered)
                continue;
            Json e;
            e["t_s"] = static_cast<double>(ns_since(t0)) * 1e-9;
            e["unix_s"] = std::chrono::duration<double>(
                              std::chrono::system_clock::now().time_since_epoch()).count();
            e["path"] = ev[i].path;
            e["event"] = ev[i].kind == api::EventKind::kPathFailed ? "failed" : "recovered";
            path_events_.push_back(std::move(e));
        }
    }

    bool drain_sends(std::vector<api::Completion>& comps, uint64_t& outstanding,
                     std::string& error) {
        const size_t n = cq_->poll(comps);
        for (size_t i = 0; i < n; ++i) {
            if (!succeeded(comps[i], error)) return false;
            if (comps[i].opcode == api::WorkOpcode::kRecv ||
                comps[i].opcode == api::WorkOpcode::kRecvWriteImm) {
                error = "unexpected receive completion";
                return false;
            }
            --outstanding;
        }
        return true;
    }

    const Options& o_;
    Oob& oob_;
    bool server_;
    std::unique_ptr<api::Device> dev_;
    std::vector<std::byte> buf_;
    std::unique_ptr<api::ProtectionDomain> pd_;
    std::unique_ptr<api::MemoryRegion> mr_;
    std::unique_ptr<api::CompletionQueue> cq_;
    std::vector<std::unique_ptr<api::QueuePair>> qps_;
    Address peer_;
    std::vector<uint32_t> peer_qps_;
    uint32_t peer_rkey_ = 0;
    uint64_t peer_vaddr_ = 0;
    uint64_t peer_buf_ = 0;
    bool exhausted_ = false;
    Json path_events_ = Json::array();
};

}  // namespace

std::unique_ptr<Side> make_rdma_side(const Options& o, Oob& oob, bool server, std::string& error) {
    auto side = std::make_unique<RdmaSide>(o, oob, server);
    if (!side->open(error)) return nullptr;
    return side;
}

}  // namespace mroce::tools::perf
