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
//
// --check (tools/perf_check.h) lays the buffer out in slots, one per message in flight
// (CheckLayout), fills what this side sends and verifies what it receives or fetches.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/core.h>

#include "api/device.h"
#include "tools/perf_check.h"
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
// Latency runs follow the same rule unless --busy-poll: then both sides spin throughout
// (issue 19; docs/results.md "busy-poll").
// --stages keeps this many stamps per side: about the last 1,500 round trips of a WRITE
// ping-pong (about 11 stamps per side each). The server's go back in its "done" message,
// which must stay below the control channel's 1 MiB (about 42 bytes of JSON a stamp).
constexpr size_t kStageStamps = size_t{1} << 14;

// stages_json: the stamps as [[stage, ns, count, tid], ...] (api/stage_trace.h).
Json stages_json(const api::StageTrace& t) {
    Json a = Json::array();
    for (const api::StageStamp& s : t.entries())
        a.push_back(Json::array({std::string(api::stage_name(s.stage)), s.ns, s.count, s.tid}));
    return a;
}

std::string text(Error e) { return std::string(mroce::to_string(e)); }

// --check's rings (send ring, receive ring) each stay below this per side.
constexpr uint64_t kCheckRingBytes = uint64_t{256} << 20;

// CheckLayout: with --check every message has a slot of its own in the registered buffer,
// so no message is filled, placed or verified while another one uses its bytes:
//   [receive ring: qps x rx_slots x rx_stride][send ring: qps x tx_slots x size]
//   [targets: qps x target_slots x size]
// Message i of queue pair q is sent from send-ring slot i % tx_slots (a READ lands there),
// a SEND lands in the receive ring, a WRITE in target slot i % target_slots of the peer, and
// a READ fetches target slot i % target_slots. Both sides compute the layout from the same
// options, so each knows where the other's targets are.
struct CheckLayout {
    uint32_t size = 0, qps = 1;
    uint64_t rx_slots = 0, rx_stride = 0, tx_slots = 1, target_slots = 0;

    uint64_t rx_offset(size_t q, uint64_t k) const { return (q * rx_slots + k % rx_slots) * rx_stride; }
    uint64_t tx_base() const { return qps * rx_slots * rx_stride; }
    uint64_t tx_offset(size_t q, uint64_t i) const { return tx_base() + (q * tx_slots + i % tx_slots) * size; }
    uint64_t target_base() const { return tx_base() + qps * tx_slots * size; }
    uint64_t target_offset(size_t q, uint64_t i) const {
        return target_base() + (q * target_slots + i % target_slots) * size;
    }
    uint64_t end() const { return target_base() + qps * target_slots * size; }
};

CheckLayout check_layout(const Options& o, uint32_t size) {
    uint32_t max = 0;
    for (uint32_t s : o.sizes()) max = std::max(max, s);
    CheckLayout l;
    l.size = size;
    l.qps = o.qps;
    // The receives are posted before the first size runs and kept across sizes: their
    // slots fit the largest. Only a SEND's data lands in a receive.
    if (o.verb == Verb::kSend) {
        l.rx_stride = max;
        l.rx_slots = std::clamp<uint64_t>(kCheckRingBytes / (uint64_t{o.qps} * max), 1, kRecvDepth);
    }
    // A ping-pong has one message in flight each way (the peer answered the one before),
    // so two slots keep consecutive messages apart.
    l.tx_slots = o.mode == Mode::kLatency
                     ? 2
                     : std::clamp<uint64_t>(kCheckRingBytes / (uint64_t{o.qps} * size), 1, o.tx_depth);
    if (o.verb == Verb::kWrite)  // the target of a bandwidth WRITE learns of none of them
        l.target_slots = o.mode == Mode::kLatency ? 2 : o.iterations_or_default();
    else if (o.verb == Verb::kRead)  // not a multiple of tx_slots: a stale slot mismatches
        l.target_slots = l.tx_slots + 1;
    else if (o.verb == Verb::kAtomic)  // the one counter every FETCH_ADD adds 1 to
        l.target_slots = 1;
    return l;
}

// test_corruption: MROCE_PERF_TEST_CORRUPT=N (test-only, tests/perf/perf_check_test.py)
// flips one bit of message N of queue pair 0 as this side fills it, so that --check's
// detection can be shown end to end (an atomic fills nothing: no effect).
std::optional<uint64_t> test_corruption() {
    const char* v = std::getenv("MROCE_PERF_TEST_CORRUPT");
    if (!v || !*v) return std::nullopt;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v, &end, 10);
    if (*end) return std::nullopt;
    return n;
}

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
        // --threads: the shards' own threads move the packets (a sharded device needs them).
        cfg.threads = o_.threads;
        if (o_.threads > 1) cfg.progress = api::ProgressMode::kThread;
        cfg.endpoint.num_paths = static_cast<uint16_t>(o_.paths);
        if (o_.window_kib) {
            cfg.endpoint.window_bytes_per_path = uint64_t{o_.window_kib} << 10;
            cfg.fit_window_to_datapath = false;
        }
        if (o_.cc == "aimd") cfg.endpoint.congestion_control = core::EndpointConfig::Cc::kAimd;
        if (o_.cc == "fixed") cfg.endpoint.congestion_control = core::EndpointConfig::Cc::kFixed;
        if (o_.path_selection == "room")
            cfg.endpoint.path_selection = core::EndpointConfig::PathSelection::kRoom;
        if (o_.path_selection == "round_robin")
            cfg.endpoint.path_selection = core::EndpointConfig::PathSelection::kRoundRobin;
        if (o_.path_run) cfg.endpoint.path_run_segments = static_cast<uint16_t>(o_.path_run);
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
        cfg.busy_poll = o_.busy_poll;
        // A ping-pong answers every completion at once: its ACK may wait for the answer,
        // and ride with it ([WIRE-10]): one datagram each way per exchange, the ACK
        // applied after the answer's completion is handed over (docs/results.md).
        cfg.answer_first = o_.mode == Mode::kLatency;
        cfg.endpoint.ack_with_reverse_data = o_.mode == Mode::kLatency;
        if (o_.stages) {
            trace_ = std::make_unique<api::StageTrace>(kStageStamps);
            cfg.stage_trace = trace_.get();
        }
        auto dev = api::Device::open(cfg, &error);
        if (!dev) return false;
        dev_ = std::move(dev).value();
        if (dev_->metrics_port())
            std::fprintf(stderr, "mroce perf: Prometheus metrics on port %u (/metrics)\n",
                         static_cast<unsigned>(dev_->metrics_port()));
        uint32_t max = 0;
        for (uint32_t s : o_.sizes()) max = std::max(max, s);
        uint64_t bytes = std::max<uint32_t>(max, 64);
        if (o_.check) {
            // A bandwidth WRITE's targets are the server's alone; a ping-pong's are both's.
            const bool targets = server_ || o_.mode == Mode::kLatency || o_.verb != Verb::kWrite;
            for (uint32_t s : o_.sizes()) {
                const CheckLayout l = check_layout(o_, s);
                bytes = std::max(bytes, targets ? l.end() : l.target_base());
            }
            ck_sent_.assign(o_.qps, 0);
            ck_done_.assign(o_.qps, 0);
            recv_posted_.assign(o_.qps, 0);
            recv_total_.assign(o_.qps, 0);
            recv_base_.assign(o_.qps, 0);
            corrupt_ = test_corruption();
            rx_layout_ = check_layout(o_, max);  // the receive ring is the same for every size
        }
        buf_.assign(bytes, std::byte{0x5a});  // touched: no page faults
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
            // --check: one receive per slot of the receive ring (CheckLayout).
            const uint64_t depth = o_.check && o_.verb == Verb::kSend ? rx_layout_.rx_slots : kRecvDepth;
            for (size_t q = 0; q < qps_.size(); ++q)
                for (uint64_t k = 0; k < depth; ++k)
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
        // --check: this side fills and verifies pattern version kPatternVersion (the
        // client refuses a server that does not say so).
        if (o_.check) j["check"] = kPatternVersion;
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

    // pump makes a pass of the device in manual progress; with --threads its own threads
    // do, and this thread only waits on its CQ.
    bool pump() { return o_.threads > 1 ? false : dev_->progress(); }

    void idle() override { pump(); }

    std::optional<Json> run(uint32_t size, std::string& error) override {
        auto before = report();
        const auto stats_before = dev_->stats();
        if (o_.check) {
            begin_check(size);
            const CheckLayout l = check_layout(o_, size);
            if (o_.verb != Verb::kSend && peer_buf_ < l.end()) {
                error = "--check: the peer's buffer is smaller than its slots (a different layout?)";
                return std::nullopt;
            }
        }
        std::optional<Json> r = o_.mode == Mode::kBandwidth ? run_bw(size, error)
                                                            : run_lat(size, error);
        if (!r) return r;
        if (o_.check) {
            (*r)["check"] = tally_.to_json();
            (*r)["check_sent"] = ck_sent_;
        }
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
        if (server.contains("check")) r["server_check"] = server["check"];
        if (server.contains("stages")) r["server_stages"] = server["stages"];
        return r;
    }

    void prepare(uint32_t size) override {
        if (!o_.check) return;
        begin_check(size);
        if (o_.verb == Verb::kAtomic) {  // the counter starts at 0 for every size
            std::memset(buf_.data() + layout_.target_offset(0, 0), 0, 8);
            return;
        }
        if (o_.verb != Verb::kRead) return;
        // The data READs fetch: target slot s holds message s's pattern.
        const CheckLayout& l = layout_;
        for (size_t q = 0; q < qps_.size(); ++q)
            for (uint64_t s = 0; s < l.target_slots; ++s)
                fill(l.target_offset(q, s), PatternKey{size, static_cast<uint32_t>(q), s, Direction::kFromServer});
    }

    std::optional<Json> serve(uint32_t size, std::string& error) override {
        if (trace_) trace_->clear();
        auto before = report();
        const auto stats_before = dev_->stats();
        uint64_t received = 0;
        std::vector<api::Completion> comps(64);
        std::vector<size_t> owed;  // queue pairs whose receive an answer consumed
        auto repost_owed = [&] {
            for (const size_t q : owed)
                if (!post_recv(q, error)) return false;
            owed.clear();
            return true;
        };
        auto last_busy = Clock::now();
        for (uint64_t loop = 0;; ++loop) {
            const bool busy = pump();
            // The pass above sent the answers: their receives are reposted now, while the
            // answers travel, not between a ping and its answer.
            if (!repost_owed()) return std::nullopt;
            size_t n = cq_->poll(comps);
            bool slept = false;
            if (o_.mode == Mode::kBandwidth || !o_.busy_poll) {
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
                if (o_.check) check_received(c, q, size);
                // A ping-pong answers first: the queue pair holds kRecvDepth receives, so
                // the one consumed is reposted once the answer is sent, off the round trip.
                if (o_.mode == Mode::kLatency) {
                    if (!post_one(q, size, error)) return std::nullopt;
                    owed.push_back(q);
                } else if (!post_recv(q, error)) {
                    return std::nullopt;
                }
            }
            if (slept || loop % kServeOobCheckEvery == 0) {
                if (auto m = oob_.poll()) {
                    if (message_type(*m) == "end") {
                        if (!repost_owed()) return std::nullopt;  // the next size needs them all
                        if (o_.check && !check_after_end(*m, size, comps, error)) return std::nullopt;
                        break;
                    }
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
        if (trace_ && o_.mode == Mode::kLatency) j["stages"] = stages_json(*trace_);
        if (o_.check) j["check"] = tally_.to_json();
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
        wr.length = static_cast<uint32_t>(std::min<uint64_t>(buf_.size(), UINT32_MAX));
        wr.lkey = mr_->lkey();
        if (o_.check && o_.verb == Verb::kSend) {
            // Receive n lands in slot n of the ring: receives complete in posted order.
            wr.addr += rx_layout_.rx_offset(q, recv_posted_[q]++);
            wr.length = static_cast<uint32_t>(rx_layout_.rx_stride);
        }
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
        if (o_.check) check_slots(q, size, wr);
        const Error e = qps_[q]->post_send(wr);
        exhausted_ = e == Error::kExhausted;
        if (o_.check && e == Error::kOk) {
            ++ck_sent_[q];
            atomics_posted_ += o_.verb == Verb::kAtomic;
        }
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
        // --check: a slot is filled again only once the message before it in that slot
        // completed, so at most the send ring's slots are outstanding.
        const uint64_t depth = o_.check ? std::min<uint64_t>(o_.tx_depth, layout_.tx_slots) : o_.tx_depth;
        for (uint64_t loop = 0;; ++loop) {
            const auto now = Clock::now();
            if (posting && timed && now >= stop_at) posting = false;
            if (posting) {
                bool more = false;
                for (size_t q = 0; q < qps_.size(); ++q) {
                    while (outstanding[q] < depth && posted[q] < per_qp) {
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
            const bool busy = pump();
            size_t n = cq_->poll(comps);
            if (busy || n > 0) {
                last_busy = now;
            } else if (now - last_busy > kSpin) {
                n = cq_->wait(comps, kIdleSleep);
            }
            for (size_t i = 0; i < n; ++i) {
                const api::Completion& c = comps[i];
                if (!succeeded(c, error)) return std::nullopt;
                if (o_.check) check_completed(c.wr_id, size);
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
        uint32_t owed_recvs = 0;  // consumed by answers, not yet reposted
        auto repost_owed = [&] {
            for (; owed_recvs > 0; --owed_recvs)
                if (!post_recv(0, error)) return false;
            return true;
        };
        const bool one_sided = o_.verb == Verb::kRead || o_.verb == Verb::kAtomic;
        IntervalRows rows(o_, size);
        if (trace_) trace_->clear();
        for (uint64_t it = 0; it < iters; ++it) {
            if (timed && it >= kWarmup && Clock::now() >= stop_at) break;
            const auto t = Clock::now();
            if (!post_one(0, size, error)) return std::nullopt;
            if (exhausted_) {  // requester completions not drained yet: drain, then retry
                --it;
                pump();
                (void)drain_sends(comps, sends_outstanding, error);
                continue;
            }
            ++sends_outstanding;
            bool replied = false;
            auto last_busy = t;
            for (uint64_t loop = 0; !replied; ++loop) {
                const bool busy = pump();
                // The queue pair holds kRecvDepth receives: the one the last answer consumed
                // is reposted once this ping has left (the pass above sent it), while it
                // travels, not between the answer and the ping.
                if (!repost_owed()) return std::nullopt;
                size_t n = cq_->poll(comps);
                if (!o_.busy_poll) {  // the serve loop's rule: poll for kSpin, then sleep
                    const auto now = Clock::now();
                    if (busy || n > 0)
                        last_busy = now;
                    else if (now - last_busy > kSpin)
                        n = cq_->wait(comps, kIdleSleep);
                }
                for (size_t i = 0; i < n; ++i) {
                    const api::Completion& c = comps[i];
                    if (!succeeded(c, error)) return std::nullopt;
                    if (c.opcode == api::WorkOpcode::kRecv ||
                        c.opcode == api::WorkOpcode::kRecvWriteImm) {
                        replied = true;
                        if (o_.check) check_received(c, 0, size);
                        ++owed_recvs;
                    } else {
                        if (o_.check) check_completed(c.wr_id, size);
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
        if (!repost_owed()) return std::nullopt;
        // Leave no requester completion behind for the next size.
        const auto deadline = Clock::now() + kStall;
        while (sends_outstanding > 0 && Clock::now() < deadline) {
            pump();
            if (!drain_sends(comps, sends_outstanding, error)) return std::nullopt;
        }
        Json r = lat_result(size, std::move(samples));
        if (trace_) r["stages"] = stages_json(*trace_);
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
            if (o_.check) check_completed(comps[i].wr_id, layout_.size);
            --outstanding;
        }
        return true;
    }

    const Options& o_;
    Oob& oob_;
    bool server_;
    std::unique_ptr<api::StageTrace> trace_;  // --stages
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

    // --check (tools/perf_check.h). ck_sent_ / ck_done_: per queue pair, messages posted
    // and requester completions this size; recv_posted_ / recv_total_: receives posted and
    // completed since the start (their ring slot), recv_base_: recv_total_ when this size
    // began (a receive's message index is the difference).
    CheckLayout layout_, rx_layout_;
    CheckTally tally_;
    std::vector<uint64_t> ck_sent_, ck_done_, recv_posted_, recv_total_, recv_base_;
    std::optional<uint64_t> corrupt_;
    // --check --verb atomic: FETCH_ADDs posted this size, the values returned so far, and
    // each queue pair's last one (UINT64_MAX: none yet).
    uint64_t atomics_posted_ = 0;
    std::vector<bool> fetched_;
    std::vector<uint64_t> last_fetched_;

    Direction my_direction() const { return server_ ? Direction::kFromServer : Direction::kFromClient; }
    Direction peer_direction() const { return server_ ? Direction::kFromClient : Direction::kFromServer; }
    std::span<std::byte> at(uint64_t offset, uint32_t size) { return {buf_.data() + offset, size}; }

    void begin_check(uint32_t size) {
        layout_ = check_layout(o_, size);
        atomics_posted_ = 0;
        fetched_.clear();
        last_fetched_.assign(o_.qps, UINT64_MAX);
        tally_ = CheckTally();
        std::fill(ck_sent_.begin(), ck_sent_.end(), 0);
        std::fill(ck_done_.begin(), ck_done_.end(), 0);
        recv_base_ = recv_total_;
    }

    // fill writes message `key`'s pattern at `offset` (and the test-only corruption).
    void fill(uint64_t offset, const PatternKey& key) {
        auto bytes = at(offset, key.size);
        fill_pattern(bytes, key);
        if (corrupt_ && key.qp == 0 && key.index == *corrupt_ && key.size > 0)
            bytes[key.size / 2] ^= std::byte{0x01};
    }

    // check_slots points work request `wr` (message ck_sent_[q] of queue pair q) at its
    // slots (CheckLayout) and fills what it sends.
    void check_slots(size_t q, uint32_t size, api::SendWr& wr) {
        const uint64_t i = ck_sent_[q];
        wr.local_addr = mr_->addr() + layout_.tx_offset(q, i);
        if (o_.verb == Verb::kAtomic) {
            // A value no FETCH_ADD can return: a result that never landed is a mismatch.
            const uint64_t poison = UINT64_MAX;
            std::memcpy(buf_.data() + layout_.tx_offset(q, i), &poison, 8);
            wr.remote_addr = peer_vaddr_ + layout_.target_offset(0, 0);
            return;
        }
        if (o_.verb == Verb::kWrite || o_.verb == Verb::kRead)
            wr.remote_addr = peer_vaddr_ + layout_.target_offset(q, i);
        if (o_.verb != Verb::kRead)
            fill(layout_.tx_offset(q, i), PatternKey{size, static_cast<uint32_t>(q), i, my_direction()});
    }

    // check_completed: a requester completion of queue pair q; a READ's data is verified
    // (completions come in posted order, so it is message ck_done_[q]).
    void check_completed(uint64_t q, uint32_t size) {
        if (q >= ck_done_.size()) return;
        const uint64_t i = ck_done_[q]++;
        if (o_.verb == Verb::kAtomic) return check_fetched(q, i);
        if (o_.verb != Verb::kRead) return;
        const PatternKey key{size, static_cast<uint32_t>(q), i % layout_.target_slots,
                             Direction::kFromServer};
        (void)tally_.verify(at(layout_.tx_offset(q, i), size), key);
    }

    // check_fetched: FETCH_ADD i of queue pair q returned the counter before its add. The
    // counter starts at 0 and only this client adds (1 each), so every value is below the
    // adds posted so far and returned once; one queue pair's adds run in its order, so its
    // values rise, and with one queue pair message i returns exactly i.
    void check_fetched(uint64_t q, uint64_t i) {
        uint64_t v;
        std::memcpy(&v, buf_.data() + layout_.tx_offset(q, i), 8);
        const uint64_t least = last_fetched_[q] == UINT64_MAX ? 0 : last_fetched_[q] + 1;
        bool ok = v < atomics_posted_ && v >= least && (o_.qps > 1 || v == i);
        if (ok) {
            if (v >= fetched_.size()) fetched_.resize(v + 1);
            ok = !fetched_[v];
            fetched_[v] = true;
            last_fetched_[q] = v;
        }
        (void)tally_.verify_value(static_cast<uint32_t>(q), i, ok, o_.qps > 1 ? least : i, v);
    }

    // check_received verifies a receive completion's message: a SEND's in its receive
    // slot, a WRITE_WITH_IMM's in its target slot (complete once the receive completes).
    void check_received(const api::Completion& c, size_t q, uint32_t size) {
        const uint64_t k = recv_total_[q]++;
        const uint64_t i = k - recv_base_[q];
        const PatternKey key{size, static_cast<uint32_t>(q), i, peer_direction()};
        if (c.opcode == api::WorkOpcode::kRecv) {
            // A short message leaves the slot's older bytes beyond it: a mismatch.
            (void)tally_.verify(at(layout_.rx_offset(q, k), size), key);
        } else {
            (void)tally_.verify(at(layout_.target_offset(q, i), size), key);
        }
    }

    // check_after_end: the client's "end" says how many messages each queue pair sent. A
    // SEND still on its way is waited for (a bounded time; the rest count as missing);
    // bandwidth WRITEs, of which this side learnt nothing, are all verified now.
    bool check_after_end(const Json& end, uint32_t size, std::vector<api::Completion>& comps,
                         std::string& error) {
        const auto it = end.find("sent");
        bool ok = it != end.end() && it->is_array() && it->size() == qps_.size();
        for (size_t q = 0; ok && q < qps_.size(); ++q) ok = (*it)[q].is_number_unsigned();
        if (!ok) {
            error = "--check: the client's 'end' does not say how many messages it sent";
            return false;
        }
        std::vector<uint64_t> sent(qps_.size());
        for (size_t q = 0; q < qps_.size(); ++q) sent[q] = (*it)[q].get<uint64_t>();
        if (o_.verb == Verb::kWrite && o_.mode == Mode::kBandwidth) {
            for (size_t q = 0; q < qps_.size(); ++q) {
                const uint64_t n = std::min<uint64_t>(sent[q], layout_.target_slots);
                tally_.missing(sent[q] - n);
                for (uint64_t i = 0; i < n; ++i)
                    (void)tally_.verify(at(layout_.target_offset(q, i), size),
                                        PatternKey{size, static_cast<uint32_t>(q), i, Direction::kFromClient});
            }
            return true;
        }
        if (o_.verb == Verb::kAtomic) {
            // Every FETCH_ADD ran exactly once: the counter is the number sent.
            uint64_t total = 0, counter;
            for (uint64_t n : sent) total += n;
            std::memcpy(&counter, buf_.data() + layout_.target_offset(0, 0), 8);
            (void)tally_.verify_value(0, total, counter == total, total, counter);
            return true;
        }
        if (o_.verb != Verb::kSend) return true;  // a READ's requester verifies; ping-pongs are done
        auto received = [&](size_t q) { return recv_total_[q] - recv_base_[q]; };
        const auto deadline = Clock::now() + std::chrono::seconds(5);
        for (;;) {
            bool all = true;
            for (size_t q = 0; q < qps_.size(); ++q) all = all && received(q) >= sent[q];
            if (all || Clock::now() > deadline) break;
            pump();
            const size_t n = cq_->poll(comps);
            for (size_t i = 0; i < n; ++i) {
                if (!succeeded(comps[i], error)) return false;
                if (comps[i].opcode != api::WorkOpcode::kRecv) continue;
                const size_t q = qp_index(comps[i].stream);
                check_received(comps[i], q, size);
                if (!post_recv(q, error)) return false;
            }
        }
        for (size_t q = 0; q < qps_.size(); ++q)
            if (received(q) < sent[q]) tally_.missing(sent[q] - received(q));
        return true;
    }
};

}  // namespace

std::unique_ptr<Side> make_rdma_side(const Options& o, Oob& oob, bool server, std::string& error) {
    auto side = std::make_unique<RdmaSide>(o, oob, server);
    if (!side->open(error)) return nullptr;
    return side;
}

}  // namespace mroce::tools::perf
