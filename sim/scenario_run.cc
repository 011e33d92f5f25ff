// sim/scenario_run.cc — one scenario run: topology, engines, workload, faults, sampling.
#include "sim/scenario_run.h"

#include "sim/recovery.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <tuple>
#include <unordered_map>

#include "baselines/rocev2/engine.h"
#include "baselines/rocev2/packet.h"
#include "core/endpoint.h"
#include "obs/export.h"
#include "core/trace.h"
#include "obs/snapshot.h"
#include "sim/capture.h"
#include "sim/faults.h"
#include "sim/post_queue.h"
#include "sim/recovery.h"
#include "wire/data.h"

namespace mroce::sim {
namespace {

constexpr uint64_t kRoceHeaderBytes = 12 + 4;  // BTH + ICRC per packet (RETH on the first only)

// Shared virtual payload: every flow WRITEs from one source buffer into one destination
// buffer of the largest flow's size (the run measures the network, not the data; the
// engines' own tests check data), so thousands of flows need two buffers, not thousands.
struct Buffers {
    std::vector<std::byte> src, dst;
};

// HostMemory is one host's protection domain and its registrations of the shared source
// and destination buffers (every flow reads src and lands in dst: payload is virtual).
struct HostMemory {
    uint32_t pd = 0;
    core::MemoryKeys src, dst;
};

// register_buffers registers the shared buffers with one engine; both protocol engines
// offer the same alloc_pd / register_memory calls.
template <class EngineT>
HostMemory register_buffers(EngineT& e, const Buffers& b) {
    HostMemory m;
    m.pd = e.alloc_pd();
    m.src = *e.register_memory(m.pd, const_cast<std::byte*>(b.src.data()), b.src.size(), core::access::kLocalWrite);
    m.dst = *e.register_memory(m.pd, const_cast<std::byte*>(b.dst.data()), b.dst.size(),
                               core::access::kLocalWrite | core::access::kRemoteWrite);
    return m;
}

// Driver adapts the workload to one protocol's engines: it owns them and turns a flow
// into streams/QPs and WRITE work requests. wr_id = (flow id << 32) | WR length.
class Driver {
  public:
    explicit Driver(uint32_t depth) : queues_(depth) {}
    virtual ~Driver() = default;
    virtual core::Engine* engine(uint32_t h) = 0;
    // post queues flow f's WRITEs on host f.src and adds how many they are to `wrs`
    // (posted now as far as the stream takes them, the rest by refill); it sets `channel`
    // to where the receiver counts the flow's placed bytes (a stream or a pair's QPs,
    // shared by the flows that share them). Returns "" or a one-line error.
    virtual std::string post(const Flow& f, uint64_t message_bytes, Time now, FlowOutcome& o, uint32_t& wrs,
                             uint32_t& channel) = 0;
    // completed counts a WRITE completion of host h's stream; true when that stream has
    // WRITEs waiting for room, which refill then posts.
    bool completed(uint32_t h, uint32_t stream) { return queues_.completed(h, stream); }
    std::vector<PostQueues::Refused> refill(uint32_t h, uint32_t stream, Time now) {
        return queues_.fill(h, stream, poster(now));
    }
    // channel_placed is the payload bytes placed so far at the receiver of a channel.
    virtual uint64_t channel_placed(uint32_t channel) const = 0;
    // connect opens hosts a and b's connection now, before any flow of theirs (a
    // connectionless baseline has nothing to do). Returns "" or a one-line error.
    virtual std::string connect(uint32_t, uint32_t, Time) { return ""; }
    virtual uint64_t retransmits() const = 0;
    // loss_counters fills retransmits_by_reason, timeouts and path_failures.
    virtual void loss_counters(RunMetrics& m) const = 0;
    // obs_counters fills counters and rtt where the engine has obs/'s names (MetaRoCE).
    virtual void obs_counters(RunMetrics&, Time) {}
    // sample_cc appends congestion state of the first `conns` connections / QPs.
    virtual void sample_cc(double t_us, uint32_t conns, std::vector<CcRow>& rows) const = 0;

  protected:
    // post_one hands one WRITE to host h's engine.
    virtual Error post_one(uint32_t h, uint32_t stream, const core::SendWr& wr, Time now) = 0;
    PostQueues::PostFn poster(Time now) {
        return [this, now](uint32_t h, uint32_t stream, const core::SendWr& wr) { return post_one(h, stream, wr, now); };
    }
    // enqueue queues `bytes` of flow `id` on (h, stream) and posts what fits; the WRITEs'
    // count is added to `wrs`. Returns "" or a one-line error.
    std::string enqueue(uint32_t h, uint32_t stream, uint32_t id, const core::SendWr& wr, uint64_t bytes,
                        uint64_t piece, Time now, uint32_t& wrs) {
        wrs += static_cast<uint32_t>(queues_.add(h, stream, id, wr, bytes, piece));
        if (const auto refused = queues_.fill(h, stream, poster(now)); !refused.empty())
            return "flow " + std::to_string(refused.front().flow) + ": post_send refused (" +
                   std::string(to_string(refused.front().error)) + ")";
        return "";
    }

  private:
    PostQueues queues_;
};

// write_wr: the WRITE from the shared source buffer to the shared destination buffer; the
// post queue gives each its length and wr_id.
core::SendWr write_wr(const Buffers& b, uint32_t lkey, uint32_t rkey) {
    core::SendWr wr;
    wr.opcode = core::WorkOpcode::kWrite;
    wr.local_addr = reinterpret_cast<uint64_t>(b.src.data());
    wr.lkey = lkey;
    wr.remote_addr = reinterpret_cast<uint64_t>(b.dst.data());
    wr.rkey = rkey;
    return wr;
}

// RttSink: every RTT sample of every host's engine in one histogram, the run's "rtt" in
// summary.json (the live `rtt`: obs::Observer's per-path histograms merged). Not an
// obs::Observer per host: that keeps a histogram per path and an event log per endpoint,
// some MB per host on the benchmark fabrics, where the run needs only the merged
// distribution; and this one keeps the samples of connections reclaimed before the end.
class RttSink final : public core::TraceSink {
  public:
    void on_rtt_sample(uint32_t, uint16_t, Duration rtt, Time) override {
        all.record(static_cast<uint64_t>(std::max<int64_t>(0, rtt.count())));
    }
    void on_trace(const core::TraceEvent&) override {}
    obs::Histogram all;  // ns
};

class MroceDriver final : public Driver {
  public:
    MroceDriver(const RunSpec& spec, Topology& topo, const Buffers& b, uint64_t seed)
        : Driver(spec.mroce.endpoint.max_outstanding_wrs), spec_(spec), topo_(topo), buf_(b) {
        for (uint32_t h = 0; h < topo.host_count(); ++h) {
            Host& host = topo.host(h);
            auto ep = std::make_unique<core::Endpoint>(spec.mroce.endpoint, host.address(), seed * 7919 + h);
            ep->set_trace_sink(&rtt_);  // every host's RTT samples, for summary.json
            sides_.push_back(register_buffers(*ep, b));
            eps_.push_back(std::move(ep));
        }
    }
    core::Engine* engine(uint32_t h) override { return eps_[h].get(); }

    std::string post(const Flow& f, uint64_t message_bytes, Time now, FlowOutcome& o, uint32_t& wrs,
                     uint32_t& channel) override {
        uint32_t sid = 0;
        const auto pair = std::make_pair(f.src, f.dst);
        // streams = "pair": one stream per pair and class (a stream has one class).
        const auto key = std::make_tuple(f.src, f.dst, f.traffic_class);
        if (auto it = pair_stream_.find(key); !spec_.mroce.stream_per_flow && it != pair_stream_.end()) {
            sid = it->second;
            channel = pair_channel_[key];
        } else {
            core::Endpoint& a = *eps_[f.src];
            core::Endpoint& b = *eps_[f.dst];
            sid = *a.reserve_stream(sides_[f.src].pd);
            const uint32_t sid_b = *b.reserve_stream(sides_[f.dst].pd);
            // [STREAM-14]: both sides of the flow's stream in its class (as both QPs of a
            // verbs connection get the service level), before they bind.
            core::StreamLimits la = a.default_stream_limits(), lb = b.default_stream_limits();
            la.traffic_class = lb.traffic_class = f.traffic_class;
            if (a.set_stream_limits(sid, la) != Error::kOk || b.set_stream_limits(sid_b, lb) != Error::kOk)
                return "flow " + std::to_string(f.id) + ": cannot set the stream's traffic class";
            if (a.bind_stream(sid, topo_.host(f.dst).address(), sid_b, now) != Error::kOk ||
                b.bind_stream(sid_b, topo_.host(f.src).address(), sid, now) != Error::kOk)
                return "flow " + std::to_string(f.id) + ": cannot bind a stream";
            topo_.host(f.dst).kick();
            pair_stream_[key] = sid;
            channel = pair_channel_[key] = static_cast<uint32_t>(channels_.size());
            channels_.emplace_back(f.dst, sid_b);
            if (!pair_seen_.count(pair)) {
                pair_seen_.insert({pair, pairs_.size()});
                pairs_.push_back(pair);
            }
        }
        o.src_port = o.dst_port = spec_.mroce.endpoint.port;
        return enqueue(f.src, sid, f.id, write_wr(buf_, sides_[f.src].src.lkey, sides_[f.dst].dst.rkey), f.bytes,
                       message_bytes, now, wrs);
    }

    uint64_t channel_placed(uint32_t ch) const override {
        return eps_[channels_[ch].first]->stream_bytes_placed(channels_[ch].second);
    }

    // connect: a spare stream bound on both sides (as post binds a flow's), never used: it
    // only makes the endpoints open their connection now ([CONN-1], [CONN-7]).
    std::string connect(uint32_t a, uint32_t b, Time now) override {
        core::Endpoint& ea = *eps_[a];
        core::Endpoint& eb = *eps_[b];
        const auto sa = ea.reserve_stream(sides_[a].pd);
        const auto sb = eb.reserve_stream(sides_[b].pd);
        if (!sa || !sb || ea.bind_stream(*sa, topo_.host(b).address(), *sb, now) != Error::kOk ||
            eb.bind_stream(*sb, topo_.host(a).address(), *sa, now) != Error::kOk)
            return "mroce.preconnect: cannot connect hosts " + std::to_string(a) + " and " + std::to_string(b);
        topo_.host(a).kick();
        topo_.host(b).kick();
        return "";
    }

    uint64_t retransmits() const override {
        uint64_t n = 0;
        for (const auto& [a, b] : pairs_) {
            const core::Connection* c = eps_[a]->connection(eps_[a]->connection_to(topo_.host(b).address()));
            if (c) n += c->stats().retransmits;
        }
        return n;
    }

    void loss_counters(RunMetrics& m) const override {
        RetransmitReasons& r = m.retransmits_by_reason;
        for (const auto& [a, b] : pairs_) {
            const core::Connection* c = eps_[a]->connection(eps_[a]->connection_to(topo_.host(b).address()));
            if (!c) continue;
            const core::ConnectionStats& s = c->stats();
            r.sack += s.retransmits_sack;
            r.timeout += s.retransmits_timeout;
            r.path_failure += s.retransmits_path_failure;
            r.rnr += s.retransmits_rnr;
            r.read_request += s.retransmits_read_request;
            m.path_failures += s.path_failures;
            for (uint16_t p = 0; p < c->num_paths(); ++p) {
                r.probe += c->path_stats(p).probes_sent;
                m.timeouts += c->path_stats(p).timeouts;
            }
        }
    }

    void obs_counters(RunMetrics& m, Time now) override {
        nlohmann::json sum = nlohmann::json::object();
        for (const auto& ep : eps_) obs::add_counters(sum, obs::counters_json(obs::Snapshot::take(*ep, nullptr, now)));
        m.rtt = rtt_.all;
        for (const auto& [k, v] : sum.items()) m.counters.emplace_back(k, v.get<uint64_t>());
    }

    void sample_cc(double t_us, uint32_t conns, std::vector<CcRow>& rows) const override {
        for (uint32_t i = 0; i < conns && i < pairs_.size(); ++i) {
            const auto [a, b] = pairs_[i];
            const core::Connection* c = eps_[a]->connection(eps_[a]->connection_to(topo_.host(b).address()));
            if (!c) continue;
            // The live gauges of obs::snapshot_of, so a figure from a simulation and one
            // from `mroce stat` plot the same quantity under the same name. A gauge's "none"
            // (0, or -1 for α) is an empty field.
            const obs::ConnectionSnapshot cs =
                obs::snapshot_of(*c, time_from_ns(static_cast<int64_t>(t_us * 1000)));
            const auto known = [](uint64_t v) { return v ? static_cast<int64_t>(v) : int64_t{-1}; };
            for (const obs::PathSnapshot& ps : cs.paths) {
                rows.push_back({.time_us = t_us, .conn = i, .path = ps.id,
                                .state = obs::state_name(ps.state),
                                .cwnd_bytes = static_cast<int64_t>(ps.cwnd_bytes),
                                .srtt_ns = ps.srtt_ns ? ps.srtt_ns : -1,
                                .in_flight_bytes = static_cast<int64_t>(ps.in_flight_bytes),
                                .ecn_alpha = ps.ecn_alpha});
            }
            rows.push_back({.time_us = t_us, .conn = i, .path = -1,
                            .state = obs::state_name(cs.state),
                            .in_flight_bytes = static_cast<int64_t>(cs.in_flight_bytes),
                            .window_rate_bps = known(cs.window_rate_bps),
                            .pacing_rate_bps = known(cs.pacing_rate_bps),
                            .rate_hint_mbps = known(cs.rate_hint_mbps)});
        }
    }

  protected:
    Error post_one(uint32_t h, uint32_t stream, const core::SendWr& wr, Time now) override {
        return eps_[h]->post_send(stream, wr, now);
    }

  private:
    const RunSpec& spec_;
    Topology& topo_;
    const Buffers& buf_;
    RttSink rtt_;  // before eps_: outlives the endpoints that point to it
    std::vector<std::unique_ptr<core::Endpoint>> eps_;
    std::vector<HostMemory> sides_;
    std::map<std::tuple<uint32_t, uint32_t, uint8_t>, uint32_t> pair_stream_;  // (src, dst, class)
    std::map<std::tuple<uint32_t, uint32_t, uint8_t>, uint32_t> pair_channel_;
    std::vector<std::pair<uint32_t, uint32_t>> channels_;  // (receiving host, its stream id)
    std::map<std::pair<uint32_t, uint32_t>, size_t> pair_seen_;
    std::vector<std::pair<uint32_t, uint32_t>> pairs_;  // in order of first use
};

class RoceDriver final : public Driver {
  public:
    RoceDriver(const RunSpec& spec, Topology& topo, const Buffers& b, uint64_t seed)
        : Driver(spec.rocev2.config.max_outstanding_wrs), spec_(spec), topo_(topo), buf_(b) {
        for (uint32_t h = 0; h < topo.host_count(); ++h) {
            Address local = topo.host(h).address();
            auto e = std::make_unique<rocev2::RoceEngine>(spec.rocev2.config, local, seed * 7919 + h);
            sides_.push_back(register_buffers(*e, b));
            engines_.push_back(std::move(e));
        }
    }
    core::Engine* engine(uint32_t h) override { return engines_[h].get(); }

    std::string post(const Flow& f, uint64_t message_bytes, Time now, FlowOutcome& o, uint32_t& wrs,
                     uint32_t& channel) override {
        // A pair's QPs per class: a QP has one class (its service level).
        const auto key = std::make_tuple(f.src, f.dst, f.traffic_class);
        auto it = pair_qps_.find(key);
        if (it == pair_qps_.end()) {
            std::vector<uint32_t> qps;
            pair_channel_[key] = static_cast<uint32_t>(channels_.size());
            channels_.emplace_back();
            rocev2::RoceEngine& a = *engines_[f.src];
            rocev2::RoceEngine& b = *engines_[f.dst];
            for (uint32_t q = 0; q < spec_.rocev2.qps_per_pair; ++q) {
                const uint32_t qa = *a.reserve_stream(sides_[f.src].pd);
                const uint32_t qb = *b.reserve_stream(sides_[f.dst].pd);
                if (a.set_traffic_class(qa, f.traffic_class) != Error::kOk ||
                    b.set_traffic_class(qb, f.traffic_class) != Error::kOk)
                    return "flow " + std::to_string(f.id) + ": cannot set the QP's traffic class";
                if (a.bind_stream(qa, topo_.host(f.dst).address(), qb, now) != Error::kOk ||
                    b.bind_stream(qb, topo_.host(f.src).address(), qa, now) != Error::kOk)
                    return "flow " + std::to_string(f.id) + ": cannot bind a QP";
                qps.push_back(qa);
                all_qps_.emplace_back(f.src, qa);
                channels_.back().emplace_back(f.dst, qb);
            }
            it = pair_qps_.emplace(key, std::move(qps)).first;
        }
        const std::vector<uint32_t>& qps = it->second;
        channel = pair_channel_[key];
        const rocev2::QueuePair* qp0 = engines_[f.src]->qp(qps[0]);
        o.src_port = qp0->src_port;
        o.dst_port = spec_.rocev2.config.port;
        // An even split over the pair's QPs (as a NIC library stripes one message).
        const uint64_t q = qps.size();
        for (uint64_t i = 0; i < q; ++i) {
            const uint64_t part = f.bytes / q + (i < f.bytes % q ? 1 : 0);
            if (part == 0) continue;
            if (std::string e = enqueue(f.src, qps[i], f.id, write_wr(buf_, sides_[f.src].src.lkey, sides_[f.dst].dst.rkey),
                                        part, message_bytes, now, wrs);
                !e.empty())
                return e;
        }
        return "";
    }

    uint64_t channel_placed(uint32_t ch) const override {
        uint64_t n = 0;
        for (const auto& [h, qpn] : channels_[ch]) n += engines_[h]->qp(qpn)->stats.bytes_placed;
        return n;
    }

    uint64_t retransmits() const override {
        uint64_t n = 0;
        for (const auto& e : engines_) n += e->totals().retransmitted_packets;
        return n;
    }

    // Go-back-N has no SACK, probes, paths or READs here: a NAK(PSN sequence error)
    // rewind stands for "sack" (the receiver reported the gap), the retransmit timer for
    // "timeout"; both count rewinds, not packets.
    void loss_counters(RunMetrics& m) const override {
        for (const auto& e : engines_) {
            const rocev2::QpStats s = e->totals();
            m.retransmits_by_reason.sack += s.go_back_nak;
            m.retransmits_by_reason.timeout += s.timeouts;
            m.retransmits_by_reason.rnr += s.rnr_naks_received;
            m.timeouts += s.timeouts;
        }
    }

    void sample_cc(double t_us, uint32_t conns, std::vector<CcRow>& rows) const override {
        for (uint32_t i = 0; i < conns && i < all_qps_.size(); ++i) {
            const auto [h, qpn] = all_qps_[i];
            const rocev2::QueuePair* qp = engines_[h]->qp(qpn);
            // DCQCN's current rate is what the QP's rate limiter paces at: pacing_rate_bps.
            const uint64_t rate = spec_.rocev2.config.dcqcn.enabled ? qp->dcqcn.rate_bps()
                                                                    : spec_.topology.cable.rate_bps;
            rows.push_back({.time_us = t_us, .conn = i, .path = -1,
                            .pacing_rate_bps = static_cast<int64_t>(rate)});
        }
    }

  protected:
    Error post_one(uint32_t h, uint32_t stream, const core::SendWr& wr, Time now) override {
        return engines_[h]->post_send(stream, wr, now);
    }

  private:
    const RunSpec& spec_;
    Topology& topo_;
    const Buffers& buf_;
    std::vector<std::unique_ptr<rocev2::RoceEngine>> engines_;
    std::vector<HostMemory> sides_;
    std::map<std::tuple<uint32_t, uint32_t, uint8_t>, std::vector<uint32_t>> pair_qps_;  // (src, dst, class)
    std::vector<std::pair<uint32_t, uint32_t>> all_qps_;  // (host, qpn) in order of creation
    std::map<std::tuple<uint32_t, uint32_t, uint8_t>, uint32_t> pair_channel_;
    std::vector<std::vector<std::pair<uint32_t, uint32_t>>> channels_;  // (receiving host, its QP)
};

uint32_t host_hops(const TopologyConfig& t, uint32_t a, uint32_t b) {
    switch (t.kind) {
        case TopologyKind::kSingleSwitch: return 2;
        case TopologyKind::kLeafSpine: return a / t.hosts_per_leaf == b / t.hosts_per_leaf ? 2 : 4;
        case TopologyKind::kFatTree: {
            const uint32_t edge = t.k / 2, pod = t.k * t.k / 4;
            if (a / edge == b / edge) return 2;
            return a / pod == b / pod ? 4 : 6;
        }
        case TopologyKind::kGraph: return graph_paths(t.graph, a).at(b).hops;
    }
    return 2;
}

// Workload generation from the spec (explicit flows are copied).
Workload make_workload(const RunSpec& s, uint32_t hosts, Rng rng) {
    const WorkloadSpec& w = s.workload;
    const uint32_t n = w.hosts ? w.hosts : hosts;
    Workload out;
    switch (w.kind) {
        case WorkloadKind::kExplicit: out = w.flows; break;
        case WorkloadKind::kIncast: {
            std::vector<uint32_t> senders;
            for (uint32_t h = w.first_sender; h < n && (w.senders == 0 || senders.size() < w.senders); ++h)
                if (h != w.receiver) senders.push_back(h);
            incast(out, senders, w.receiver, w.bytes, w.start);
            break;
        }
        case WorkloadKind::kPermutation: permutation(out, n, w.bytes, rng); break;
        case WorkloadKind::kAllToAll: all_to_all(out, n, w.bytes); break;
        case WorkloadKind::kRingAllreduce: ring_allreduce(out, n, w.bytes); break;
        case WorkloadKind::kBackground: {
            FlowSizeCdf cdf;
            std::string err;
            cdf.load(w.cdf, err);  // validated when the scenario was parsed
            background(out, n, w.load, s.topology.cable.rate_bps, cdf, w.start, w.start + w.duration,
                       w.max_flows, rng, w.traffic_class);
            break;
        }
    }
    for (Flow& f : out) {
        if (w.kind != WorkloadKind::kExplicit && w.kind != WorkloadKind::kBackground) f.start = w.start;
        if (w.kind != WorkloadKind::kExplicit) f.traffic_class = w.traffic_class;
    }
    if (w.kind != WorkloadKind::kExplicit) {
        // A generator's extra flows (a victim flow beside an incast, an incast within
        // background load) come after its own, their ids and dependencies shifted.
        const auto base = static_cast<uint32_t>(out.size());
        for (Flow f : w.flows) {
            f.id += base;
            for (uint32_t& d : f.depends_on) d += base;
            out.push_back(std::move(f));
        }
    }
    return out;
}

// Percentiles: obs::Histogram, the one histogram of the project (issue 18), so a figure
// here and one of `mroce perf` or `mroce stat` are computed alike: perftest's rank rule,
// the bucket's midpoint, within 3.2% of the exact sample of that rank (min and max exact).
// Times are recorded in ns (rounded from ps); ratios in millionths.
uint64_t ps_to_ns(int64_t ps) { return static_cast<uint64_t>(std::max<int64_t>(0, (ps + 500) / 1000)); }
double ns_to_us(uint64_t ns) { return static_cast<double>(ns) / 1e3; }
constexpr double kRatioScale = 1e6;
uint64_t ratio_units(double r) { return static_cast<uint64_t>(std::llround(std::max(0.0, r) * kRatioScale)); }
double from_ratio_units(uint64_t u) { return static_cast<double>(u) / kRatioScale; }

// FlowTimes: the FCTs and slowdowns of a set of completed flows.
struct FlowTimes {
    obs::Histogram fct_ns, slowdown;
    void add(int64_t fct_ps, int64_t ideal_ps) {
        fct_ns.record(ps_to_ns(fct_ps));
        slowdown.record(ratio_units(static_cast<double>(fct_ps) / static_cast<double>(std::max<int64_t>(1, ideal_ps))));
    }
    template <class M>
    void fill(M& m) const {
        m.fct_p50_us = ns_to_us(fct_ns.quantile(0.5));
        m.fct_p99_us = ns_to_us(fct_ns.quantile(0.99));
        m.slowdown_p50 = from_ratio_units(slowdown.quantile(0.5));
        m.slowdown_p99 = from_ratio_units(slowdown.quantile(0.99));
        m.slowdown_max = from_ratio_units(slowdown.max());
    }
};

std::string port_name(const Topology& topo, size_t sw, size_t port) {
    std::string name = topo.switch_at(sw).name();
    // "topo/p<plane>/leaf0" -> "leaf0", with "P<plane>." in front when there are planes.
    name = name.substr(name.rfind('/') + 1);
    if (topo.config().planes > 1) name = "P" + std::to_string(topo.switch_plane(sw)) + "." + name;
    return name + "/p" + std::to_string(port);
}

// DATA or control, from the first bytes of the datagram (HostConfig::is_data): MetaRoCE's
// common-header type byte (spec §3.1), RoCEv2's BTH opcode (SEND/WRITE carry payload;
// ACK, NAK and CNP do not).
bool is_mroce_data(std::span<const std::byte> d) {
    return d.size() >= wire::kCommonHeaderSize && static_cast<uint8_t>(d[1]) == static_cast<uint8_t>(wire::PacketType::kData);
}
bool is_roce_data(std::span<const std::byte> d) {
    if (d.empty()) return false;
    const auto op = static_cast<uint8_t>(d[0]);
    return rocev2::is_supported_opcode(op) && rocev2::is_data(static_cast<rocev2::Opcode>(op));
}

// PlacedHistory records, at the incast receiver, each sender's placed bytes after every
// DATA arrival (exact: an arrival is placed synchronously, so the next arrival, or flush,
// reads the counter the previous one left), and when every sender was first heard from.
class IncastTap final : public PacketTap {
  public:
    IncastTap(const Address& receiver, std::vector<Address> senders, std::function<uint64_t(size_t)> placed)
        : receiver_(receiver), senders_(std::move(senders)), placed_(std::move(placed)),
          seen_(senders_.size(), false), history_(senders_.size()) {
        for (size_t s = 0; s < senders_.size(); ++s) index_[senders_[s].ipv4_host_order()] = s;
    }

    void on_packet(const Packet& p, SimTime at) override {
        if (!p.data || !(p.meta.dst.ip == receiver_.ip)) return;  // arrivals of DATA only
        flush();
        const auto it = index_.find(p.meta.src.ipv4_host_order());
        if (it == index_.end()) return;
        const size_t s = it->second;
        if (!seen_[s]) {
            seen_[s] = true;
            if (++seen_count_ == senders_.size()) t_know_ = at;
        }
        pending_ = s;
        pending_at_ = at;
    }
    // flush records the last arrival's placement; stop ends recording (first finish).
    void flush() {
        if (pending_ == SIZE_MAX || stopped_) return;
        const uint64_t v = placed_(pending_);
        auto& h = history_[pending_];
        if (h.empty() || h.back().second != v) h.emplace_back(to_ps(pending_at_), v);
        pending_ = SIZE_MAX;
    }
    void stop() {
        flush();
        stopped_ = true;
    }
    std::optional<SimTime> t_know() const { return t_know_; }
    // placed_at is sender s's placed bytes at time t_ps (arrivals at or before it).
    uint64_t placed_at(size_t s, int64_t t_ps) const {
        const auto& h = history_[s];
        auto it = std::upper_bound(h.begin(), h.end(), t_ps, [](int64_t t, const auto& e) { return t < e.first; });
        return it == h.begin() ? 0 : std::prev(it)->second;
    }
    size_t senders() const { return senders_.size(); }

  private:
    Address receiver_;
    std::vector<Address> senders_;
    std::unordered_map<uint32_t, size_t> index_;  // sender's IPv4 -> index
    std::function<uint64_t(size_t)> placed_;
    std::vector<bool> seen_;
    size_t seen_count_ = 0;
    std::optional<SimTime> t_know_;
    size_t pending_ = SIZE_MAX;
    SimTime pending_at_{};
    bool stopped_ = false;
    std::vector<std::vector<std::pair<int64_t, uint64_t>>> history_;  // (time ps, placed)
};

// recovery_after_fault: issue 14's recovery_us for the run's first plane or cable cut.
// A plane cut leaves (planes - 1) / planes of the hosts' capacity; a cable cut is measured
// against the rate before it (what a cut switch-to-switch cable leaves of the fabric
// depends on the traffic, so the full rate is the honest bar).
std::optional<double> recovery_after_fault(const RunSpec& spec, uint32_t planes, const RunOutput& out,
                                           int64_t end_ps) {
    const auto fault = std::find_if(spec.faults.begin(), spec.faults.end(), [](const FaultSpec& f) {
        return f.kind == FaultKind::kPlaneDown || f.kind == FaultKind::kCableDown;
    });
    if (fault == spec.faults.end() || spec.output.sample.count() <= 0) return std::nullopt;
    RecoveryInput in;
    in.width_us = static_cast<double>(to_ps(spec.output.sample)) / 1e6;
    in.fault_us = static_cast<double>(to_ps(fault->at)) / 1e6;
    if (fault->kind == FaultKind::kPlaneDown && planes > 1)
        in.surviving = static_cast<double>(planes - 1) / planes;
    in.before_us = 5 * in.width_us;
    int64_t until_ps = end_ps;
    for (const FlowOutcome& o : out.flows)
        if (o.finish_ps >= 0 && o.finish_ps > to_ps(fault->at)) until_ps = std::min(until_ps, o.finish_ps);
    // Only bins that end a bin before the first finish after the fault: the drain is not
    // recovery. A flow's last bytes are placed about a round trip before its last completion,
    // so the bin that ends at its finish is already part drain (bytes placed no longer
    // count in it), and whether it falls short depends only on where the finish falls.
    in.until_us = static_cast<double>(until_ps) / 1e6 - in.width_us;
    for (const ThroughputRow& r : out.throughput)
        if (r.flow == -1 && r.time_us <= in.until_us) in.bins.push_back({r.time_us, r.gbps});
    return recovery_us(in);
}

}  // namespace

bool run_spec(const RunSpec& spec, uint64_t seed, RunOutput& out, std::string& err, const RunHook& hook,
              const ProgressFn& progress) {
    Sim sim(seed);
    TopologyConfig tc = spec.topology;
    tc.host.is_data = spec.protocol == Protocol::kMroce ? &is_mroce_data : &is_roce_data;
    // Each host receives on its protocol's own UDP port, and peers send there: MetaRoCE's
    // endpoint port (4797, spec [UDP-1]) or RoCEv2's 4791 (IANA), as real NICs do. Captures
    // then show the baseline where Wireshark's RoCEv2 dissector looks for it, and fct.txt's
    // dst_port is the port the packets really went to. The destination port is part of
    // the ECMP hash (sim/ecmp.h), so RoCEv2 routes differ from before this change.
    tc.host.udp_port = spec.protocol == Protocol::kMroce ? spec.mroce.endpoint.port : spec.rocev2.config.port;
    Topology topo(sim, tc);
    const auto hosts = static_cast<uint32_t>(topo.host_count());
    for (size_t c = 0; c < topo.cable_count() && spec.loss > 0; ++c) {
        topo.cable(c).a_to_b->config().loss_probability = spec.loss;
        topo.cable(c).b_to_a->config().loss_probability = spec.loss;
    }
    FaultInjector faults(topo);
    std::map<std::string, size_t> cable_at_port;  // switch port name -> its cable
    for (size_t c = 0; c < topo.cable_count() && !spec.faults.empty(); ++c)
        for (const CableEnd& e : {topo.cable(c).a, topo.cable(c).b})
            if (!e.is_host) cable_at_port[port_name(topo, e.node, e.port)] = c;
    for (size_t i = 0; i < spec.faults.size(); ++i) {
        const FaultSpec& f = spec.faults[i];
        const SimTime at = SimTime{} + f.at;
        size_t cable = topo.host_cable(f.host, f.plane);
        if (!f.port.empty()) {
            auto it = cable_at_port.find(f.port);
            if (it == cable_at_port.end()) {
                err = "faults[" + std::to_string(i) + "].port: no cabled switch port named '" + f.port +
                      "' (e.g. '" + cable_at_port.begin()->first + "')";
                return false;
            }
            cable = it->second;
        }
        switch (f.kind) {
            case FaultKind::kPlaneDown: faults.plane_down(at, f.plane, f.reconverge); break;
            case FaultKind::kPlaneUp: faults.plane_up(at, f.plane, f.reconverge); break;
            case FaultKind::kCableDown: faults.cable_down(at, cable, f.reconverge); break;
            case FaultKind::kCableUp: faults.cable_up(at, cable, f.reconverge); break;
            case FaultKind::kLoss: faults.set_loss(at, cable, f.loss); break;
            case FaultKind::kRate: faults.set_rate(at, cable, f.rate_bps); break;
            case FaultKind::kBurstLoss: faults.set_burst_loss(at, cable, f.burst); break;
        }
    }

    // Observers attach before any engine does, so a refusal leaves nothing to undo.
    if (hook) {
        if (std::string why = hook(topo, spec); !why.empty()) {
            err = std::move(why);
            return false;
        }
    }

    const Workload wl = make_workload(spec, hosts, sim.fork_rng("scenario/workload"));
    if (const std::string e = check_workload(wl, hosts); !e.empty()) {
        err = "workload: " + e;
        return false;
    }
    uint64_t max_bytes = 1, messages = 0;
    const uint64_t piece = spec.workload.message_bytes;
    for (const Flow& f : wl) {
        max_bytes = std::max(max_bytes, f.bytes);
        messages += piece ? (f.bytes + piece - 1) / piece : 1;
    }
    if (messages > kMaxMessages) {
        err = "workload: " + std::to_string(messages) + " messages, the limit is " + std::to_string(kMaxMessages) +
              " (raise workload.message_bytes)";
        return false;
    }
    Buffers buf;
    buf.src.assign(max_bytes, std::byte{0x42});
    buf.dst.resize(max_bytes);

    std::unique_ptr<Driver> drv;
    if (spec.protocol == Protocol::kMroce) drv = std::make_unique<MroceDriver>(spec, topo, buf, seed);
    else drv = std::make_unique<RoceDriver>(spec, topo, buf, seed);

    // propagation_ps: the cables between two hosts, their own host cables included (the
    // slowest plane's when cable_delays give planes different delays).
    // A graph's paths differ per pair: its hops, delays and bottleneck come from the
    // graph itself (graph_paths, per source host as flows need them).
    std::map<uint32_t, std::vector<GraphPath>> graph_from;
    const auto graph_path = [&](uint32_t a, uint32_t b) -> const GraphPath& {
        auto it = graph_from.find(a);
        if (it == graph_from.end()) it = graph_from.emplace(a, graph_paths(tc.graph, a)).first;
        return it->second.at(b);
    };
    const auto hops_between = [&](uint32_t a, uint32_t b) {
        return tc.kind == TopologyKind::kGraph ? graph_path(a, b).hops : host_hops(tc, a, b);
    };
    const auto propagation_ps = [&](uint32_t a, uint32_t b) {
        if (tc.kind == TopologyKind::kGraph) return static_cast<double>(to_ps(graph_path(a, b).delay));
        const uint32_t hops = host_hops(tc, a, b);
        return static_cast<double>((hops - 2) * to_ps(tc.cable.delay) + to_ps(max_host_cable_delay(tc, a)) +
                                   to_ps(max_host_cable_delay(tc, b)));
    };
    // Ideal FCT: propagation over the path's hops, store-and-forward of one packet per
    // switch, and the flow's bytes plus per-packet headers at the rate it can use alone.
    const bool mroce = spec.protocol == Protocol::kMroce;
    const uint64_t mtu = mroce ? spec.mroce.endpoint.max_payload : spec.rocev2.config.mtu;
    // [DATA-9]: the workloads are WRITEs, compact where the endpoints announce COMPACT_DATA.
    const uint64_t hdr = !mroce ? kRoceHeaderBytes
                         : spec.mroce.endpoint.compact_data ? wire::kDataCompactHeaderSize
                                                            : wire::kDataHeaderSize;
    const uint64_t lanes = mroce ? std::min<uint64_t>(tc.planes, spec.mroce.endpoint.num_paths) : 1;
    const double rate = static_cast<double>(tc.cable.rate_bps);
    out.flows.assign(wl.size(), {});
    for (const Flow& f : wl) {
        FlowOutcome& o = out.flows[f.id];
        o.flow = f;
        // A graph's bottleneck may be below the hosts' line rate.
        const double r = tc.kind == TopologyKind::kGraph
                             ? std::min(rate, static_cast<double>(graph_path(f.src, f.dst).rate_bps))
                             : rate;
        const uint64_t pkts = (f.bytes + mtu - 1) / mtu;
        const double ser = static_cast<double>(f.bytes + pkts * hdr) * 8 / (r * static_cast<double>(lanes)) * 1e12;
        const double pkt = static_cast<double>(std::min<uint64_t>(f.bytes, mtu) + hdr) * 8 / r * 1e12;
        o.ideal_ps = static_cast<int64_t>(propagation_ps(f.src, f.dst) + (hops_between(f.src, f.dst) - 1) * pkt + ser);
    }

    // Flow state: WRs outstanding, dependencies outstanding, dependents.
    std::vector<uint32_t> wrs_left(wl.size(), 0), deps_left(wl.size(), 0);
    std::vector<std::vector<uint32_t>> dependents(wl.size());
    std::vector<uint64_t> delivered(wl.size(), 0);
    uint64_t delivered_all = 0, finished = 0;
    RunMetrics& m = out.metrics;
    std::string post_err;
    std::vector<int64_t> last_done_ps(wl.size(), 0);  // stall: the previous completion

    // Placed bytes: a channel (a stream, or a pair's QPs) counts them at the receiver;
    // flows sharing a channel get them in posting order, each up to its size.
    std::vector<std::vector<uint32_t>> channel_flows;
    std::vector<uint64_t> channel_seen;
    std::vector<size_t> channel_cursor;
    auto update_channel = [&](uint32_t ch) {
        const uint64_t now = drv->channel_placed(ch);
        uint64_t add = now - channel_seen[ch];
        channel_seen[ch] = now;
        const std::vector<uint32_t>& fl = channel_flows[ch];
        size_t& cur = channel_cursor[ch];
        while (add > 0 && cur < fl.size()) {
            FlowOutcome& o = out.flows[fl[cur]];
            const uint64_t take = std::min(add, o.flow.bytes - o.bytes_placed);
            o.bytes_placed += take;
            add -= take;
            if (o.bytes_placed == o.flow.bytes) ++cur;
        }
    };
    std::vector<int32_t> sender_index;                 // incast: host -> sender, or -1
    std::vector<std::vector<uint32_t>> sender_channels;  // incast: each sender's channels
    auto update_placed = [&] {
        for (uint32_t ch = 0; ch < channel_flows.size(); ++ch) update_channel(ch);
    };

    std::function<void(uint32_t)> start_at;
    auto start_now = [&](uint32_t id) {
        const Flow& f = wl[id];
        FlowOutcome& o = out.flows[id];
        o.start_ps = to_ps(sim.now());
        last_done_ps[id] = o.start_ps;
        o.longest_gap_ps = 0;
        // Completions come from later events, so counting the WRs as they are posted is safe.
        wrs_left[id] = 0;
        uint32_t ch = UINT32_MAX;
        if (const std::string e =
                drv->post(f, spec.workload.message_bytes, to_core_time(sim.now()), o, wrs_left[id], ch);
            !e.empty() && post_err.empty())
            post_err = e;
        if (ch != UINT32_MAX) {
            if (ch >= channel_flows.size()) {
                channel_flows.resize(ch + 1);
                channel_seen.resize(ch + 1, 0);
                channel_cursor.resize(ch + 1, 0);
            }
            channel_flows[ch].push_back(id);
            if (!sender_index.empty() && sender_index[f.src] >= 0) {
                auto& v = sender_channels[static_cast<size_t>(sender_index[f.src])];
                if (std::find(v.begin(), v.end(), ch) == v.end()) v.push_back(ch);
            }
        }
        topo.host(f.src).kick();
    };

    // Incast: the receiver's ToR downlink in every plane is the bottleneck; its queue is
    // watched across one BDP from the start, and the receiver's DATA arrivals are tapped.
    const bool incast = spec.workload.kind == WorkloadKind::kIncast && !wl.empty();
    const uint32_t receiver = incast ? wl[0].dst : 0;
    std::vector<uint32_t> senders;
    std::vector<std::pair<size_t, size_t>> bottleneck;
    IncastMetrics im;
    std::unique_ptr<IncastTap> tap;
    std::optional<int64_t> first_finish_ps;
    std::vector<SwitchPort::QueueWatch> watch_at_finish;
    if (incast) {
        for (const Flow& f : wl)  // the flows into the receiver; extra flows elsewhere are not
            if (f.dst == receiver && std::find(senders.begin(), senders.end(), f.src) == senders.end())
                senders.push_back(f.src);
        // Base RTT: the ideal one-packet latency (as ideal_fct_ns), doubled, plus one
        // packet's serialisation; over the senders, the longest.
        const double pkt = static_cast<double>(mtu + hdr) * 8 / rate * 1e12;
        double rtt_ps = 0;
        for (uint32_t s : senders)
            rtt_ps = std::max(rtt_ps, 2 * (propagation_ps(s, receiver) + (hops_between(s, receiver) - 1) * pkt) + pkt);
        im.base_rtt_us = rtt_ps / 1e6;
        im.bdp_bytes = static_cast<uint64_t>(rate * static_cast<double>(tc.planes) / 8 * rtt_ps / 1e12);
        for (uint32_t p = 0; p < tc.planes; ++p) {
            const Cable& c = topo.cable(topo.host_cable(receiver, p));
            bottleneck.emplace_back(c.b.node, c.b.port);
            topo.switch_at(c.b.node).port(c.b.port).watch_queue(im.bdp_bytes);
        }
        std::vector<Address> addrs;
        sender_index.assign(hosts, -1);
        sender_channels.resize(senders.size());
        for (size_t i = 0; i < senders.size(); ++i) {
            addrs.push_back(topo.host(senders[i]).address());
            sender_index[senders[i]] = static_cast<int32_t>(i);
        }
        // A sender's placed bytes: every channel of its flows (one, in an incast).
        tap = std::make_unique<IncastTap>(topo.host(receiver).address(), std::move(addrs), [&](size_t s) {
            uint64_t n = 0;
            for (uint32_t ch : sender_channels[s]) n += drv->channel_placed(ch);
            return n;
        });
        topo.capture_host(receiver, *tap);
    }
    start_at = [&](uint32_t id) {
        const SimTime when = std::max(sim.now(), SimTime{} + wl[id].start);
        sim.schedule_at(when, [&start_now, id] { start_now(id); });
    };
    auto flow_done = [&](uint32_t id, bool ok) {
        FlowOutcome& o = out.flows[id];
        ++finished;
        o.finish_ps = to_ps(sim.now());
        o.completed = ok;
        o.failed = !ok;
        if (!ok) return;  // dependents of a failed flow never start
        if (incast && !first_finish_ps && wl[id].dst == receiver) {  // settle and jain end here
            first_finish_ps = o.finish_ps;
            for (auto [s, p] : bottleneck) watch_at_finish.push_back(topo.switch_at(s).port(p).queue_watch());
            tap->stop();
        }
        for (uint32_t d : dependents[id])
            if (--deps_left[d] == 0) start_at(d);
    };
    // refill posts the WRITEs waiting for room on host h's stream; a flow the stream no
    // longer takes (it failed) has failed, its unposted WRITEs with it.
    std::function<void(uint32_t, uint32_t)> refill = [&](uint32_t h, uint32_t stream) {
        for (const PostQueues::Refused& r : drv->refill(h, stream, to_core_time(sim.now()))) {
            m.failed_ops += r.wrs;
            if (wrs_left[r.flow] == 0) continue;
            wrs_left[r.flow] = 0;
            flow_done(r.flow, false);
        }
        topo.host(h).kick();
    };
    for (uint32_t h = 0; h < hosts; ++h) {
        topo.host(h).set_event_callback([&, h](const core::Event& e) {
            if (e.kind != core::EventKind::kCompletion) return;
            const core::Completion& c = e.completion;
            if (c.opcode != core::WorkOpcode::kWrite) return;  // responder side: not ours
            const auto id = static_cast<uint32_t>(c.wr_id >> 32);
            const auto len = static_cast<uint32_t>(c.wr_id);
            if (id >= wl.size()) return;
            // The stream has room for one more: its waiting WRITEs are posted in an event
            // of their own, not from inside the engine that reports this completion.
            if (drv->completed(h, c.stream)) sim.schedule_at(sim.now(), [&refill, h, s = c.stream] { refill(h, s); });
            if (c.status != core::Status::kSuccess) ++m.failed_ops;
            if (wrs_left[id] == 0) return;  // the flow already failed
            if (c.status != core::Status::kSuccess) {
                wrs_left[id] = 0;
                flow_done(id, false);
                return;
            }
            delivered[id] += len;
            delivered_all += len;
            FlowOutcome& o = out.flows[id];
            const int64_t now_ps = to_ps(sim.now());
            o.longest_gap_ps = std::max(o.longest_gap_ps, now_ps - last_done_ps[id]);
            last_done_ps[id] = now_ps;
            if (--wrs_left[id] == 0) flow_done(id, true);
        });
        topo.host(h).attach(drv->engine(h));
    }
    if (mroce && spec.mroce.preconnect) {
        std::set<std::pair<uint32_t, uint32_t>> joined;
        for (const Flow& f : wl)
            if (f.src != f.dst) joined.insert(std::minmax(f.src, f.dst));
        for (auto [a, b] : joined)
            if (const std::string e = drv->connect(a, b, to_core_time(sim.now())); !e.empty()) {
                for (uint32_t h = 0; h < hosts; ++h) topo.host(h).attach(nullptr);
                err = e;
                return false;
            }
    }
    for (const Flow& f : wl) {
        deps_left[f.id] = static_cast<uint32_t>(f.depends_on.size());
        for (uint32_t d : f.depends_on) dependents[d].push_back(f.id);
    }
    for (const Flow& f : wl)
        if (f.depends_on.empty()) start_at(f.id);

    // Queue ports: the named ones, else each plane's ToR port towards the first receivers.
    std::vector<std::pair<size_t, size_t>> qports;
    std::map<std::string, std::pair<size_t, size_t>> by_name;
    for (size_t s = 0; s < topo.switch_count(); ++s)
        for (size_t p = 0; p < topo.switch_at(s).port_count(); ++p) by_name[port_name(topo, s, p)] = {s, p};
    for (const std::string& n : spec.output.queue_ports) {
        auto it = by_name.find(n);
        if (it == by_name.end()) {
            err = "output.queue_ports: no port named '" + n + "' (e.g. '" + by_name.begin()->first + "')";
            for (uint32_t h = 0; h < hosts; ++h) topo.host(h).attach(nullptr);
            return false;
        }
        qports.push_back(it->second);
    }
    if (spec.output.queue_ports.empty()) {
        std::vector<uint32_t> receivers;
        for (const Flow& f : wl)
            if (std::find(receivers.begin(), receivers.end(), f.dst) == receivers.end()) receivers.push_back(f.dst);
        for (uint32_t r : receivers)
            for (uint32_t p = 0; p < tc.planes && qports.size() < spec.output.max_queue_ports; ++p) {
                const Cable& c = topo.cable(topo.host_cable(r, p));
                qports.emplace_back(c.b.node, c.b.port);
            }
    }
    for (auto [s, p] : qports) out.queue_port_names.push_back(port_name(topo, s, p));

    // Sampler: one event per interval while flows remain.
    const int64_t period_ps = to_ps(spec.output.sample);
    std::vector<uint64_t> last(std::min<size_t>(wl.size(), spec.output.flows), 0);
    uint64_t last_all = 0;
    int64_t last_sample_ps = 0;
    bool final_sample = false;
    std::function<void()> sample = [&] {
        const double t_us = static_cast<double>(to_ps(sim.now())) / 1e6;
        // Rates over the time since the previous sample (the last interval may be short).
        const int64_t span_ps = to_ps(sim.now()) - last_sample_ps;
        last_sample_ps = to_ps(sim.now());
        const double per_gbps = 8.0 / (static_cast<double>(span_ps) / 1e12) / 1e9;
        // Goodput where bytes are placed at the receiver (not at the sender's completion,
        // which lands a whole message in one interval).
        update_placed();
        for (size_t i = 0; i < last.size(); ++i) {
            const FlowOutcome& o = out.flows[i];
            const bool active = o.start_ps >= 0 && (o.finish_ps < 0 || o.finish_ps > to_ps(sim.now()) - span_ps);
            if (active) out.throughput.push_back({t_us, static_cast<int64_t>(i), static_cast<double>(o.bytes_placed - last[i]) * per_gbps});
            last[i] = o.bytes_placed;
        }
        uint64_t placed_all = 0;
        for (const FlowOutcome& o : out.flows) placed_all += o.bytes_placed;
        out.throughput.push_back({t_us, -1, static_cast<double>(placed_all - last_all) * per_gbps});
        last_all = placed_all;
        for (uint32_t i = 0; i < qports.size(); ++i)
            out.queue.push_back({t_us, i, topo.switch_at(qports[i].first).port(qports[i].second).queue_bytes()});
        drv->sample_cc(t_us, spec.output.cc_conns, out.cc);
        if (finished < wl.size() && !final_sample) sim.schedule_in(spec.output.sample, [&sample] { sample(); });
    };
    if (period_ps > 0) sim.schedule_in(spec.output.sample, [&sample] { sample(); });

    uint64_t steps = 0;
    const sim::RunResult r = sim.run_until([&] {
                                               if (progress && ++steps % kProgressEvents == 0)
                                                   progress({static_cast<double>(to_ps(sim.now())) / 1e6, finished,
                                                             wl.size(), steps});
                                               return finished == wl.size() || !post_err.empty();
                                           },
                                           SimTime{} + spec.time_limit,
                                           spec.max_events ? spec.max_events : UINT64_MAX);
    if (period_ps > 0 && to_ps(sim.now()) > last_sample_ps) {  // the partial last interval
        final_sample = true;
        sample();
    }
    if (!post_err.empty()) {
        for (uint32_t h = 0; h < hosts; ++h) topo.host(h).attach(nullptr);
        err = post_err;
        return false;
    }

    update_placed();
    if (tap) tap->stop();

    // Metrics from the engines' and the fabric's counters.
    const FabricTotals t = topo.totals();
    m.data_packets_sent = t.host_tx_data_packets;
    m.data_drops = t.data_drops;
    m.drop_fraction = t.host_tx_data_packets ? static_cast<double>(t.data_drops) / static_cast<double>(t.host_tx_data_packets) : 0;
    drv->loss_counters(m);
    drv->obs_counters(m, to_core_time(sim.now()));
    {
        // A flow still running (or failed) stalls from its last completion until the end.
        obs::Histogram stalls_ns;
        const int64_t end = to_ps(sim.now());
        for (const FlowOutcome& o : out.flows) {
            if (o.start_ps < 0) continue;
            const int64_t until = o.completed ? last_done_ps[o.flow.id] : o.failed ? o.finish_ps : end;
            stalls_ns.record(ps_to_ns(std::max(o.longest_gap_ps, until - last_done_ps[o.flow.id])));
        }
        m.stall_p99_us = ns_to_us(stalls_ns.quantile(0.99));
    }
    m.recovery_us = recovery_after_fault(spec, tc.planes, out, to_ps(sim.now()));
    if (incast) {
        for (auto [s, p] : bottleneck)
            im.queue_peak_bytes = std::max(im.queue_peak_bytes, topo.switch_at(s).port(p).stats().max_queue_bytes);
        if (tap->t_know()) im.t_know_us = static_cast<double>(to_ps(*tap->t_know())) / 1e6;
        const int64_t know_ps = tap->t_know() ? to_ps(*tap->t_know()) : -1;
        // Settled: at the first finish every bottleneck port is below one BDP; settle is
        // from t_know to the last time one of them fell below it (0 if before t_know).
        if (know_ps >= 0 && first_finish_ps && *first_finish_ps >= know_ps) {
            bool settled = true;
            int64_t settle_ps = 0;
            for (const SwitchPort::QueueWatch& w : watch_at_finish) {
                settled &= !w.above;
                settle_ps = std::max(settle_ps, to_ps(w.fell_at) - know_ps);
            }
            if (settled) {
                im.settle_us = static_cast<double>(settle_ps) / 1e6;
                const double excess = static_cast<double>(im.queue_peak_bytes > im.bdp_bytes ? im.queue_peak_bytes - im.bdp_bytes : 0);
                const double drain_us = excess * 8 / rate * 1e6;
                im.converge_rtts = (*im.settle_us - drain_us) / im.base_rtt_us;
                // Jain's index of the senders' placed bytes per window, averaged over the
                // whole windows in [t_know + settle, first finish). Window: 8 packets per
                // sender at its fair share, rounded up to a whole microsecond.
                const double n = static_cast<double>(senders.size());
                const double w_ps = 8 * static_cast<double>(mtu + hdr) * 8 * n / (rate * static_cast<double>(tc.planes)) * 1e12;
                const int64_t win = static_cast<int64_t>(std::ceil(w_ps / 1e6)) * 1'000'000;
                im.jain_window_us = static_cast<double>(win) / 1e6;
                double sum_j = 0;
                for (int64_t a = know_ps + settle_ps; a + win <= *first_finish_ps; a += win) {
                    double sx = 0, sxx = 0;
                    for (size_t i = 0; i < senders.size(); ++i) {
                        const auto x = static_cast<double>(tap->placed_at(i, a + win) - tap->placed_at(i, a));
                        sx += x;
                        sxx += x * x;
                    }
                    if (sxx == 0) continue;  // nothing placed: no share to compare
                    sum_j += sx * sx / (n * sxx);
                    ++im.jain_windows;
                }
                if (im.jain_windows) im.jain_index = sum_j / static_cast<double>(im.jain_windows);
            }
        }
        m.incast = im;
    }
    m.events = r.events;
    m.sim_packets = t.host_tx_packets;
    m.stop_reason = to_string(r.reason);
    m.flows = wl.size();
    m.retransmits = drv->retransmits();
    m.drops = t.switch_drops + t.wire_drops;
    m.pfc_overflow_drops = t.pfc_overflow_drops;
    m.ecn_marks = t.ecn_marks;
    m.max_queue_bytes = t.max_queue_bytes;
    m.pauses = t.pauses_sent;
    FlowTimes times;
    int64_t end_ps = 0;
    std::vector<uint64_t> tx(hosts, 0), rx(hosts, 0);
    for (const FlowOutcome& o : out.flows) {
        tx[o.flow.src] += o.flow.bytes;
        rx[o.flow.dst] += o.flow.bytes;
        if (!o.completed) continue;
        ++m.completed_flows;
        times.add(o.finish_ps - o.start_ps, o.ideal_ps);
        end_ps = std::max(end_ps, o.finish_ps);
    }
    m.completion_time_us = static_cast<double>(end_ps) / 1e6;
    times.fill(m);
    if (tc.switches.classes() > 1) {
        for (uint8_t c = 0; c < tc.switches.classes(); ++c) {
            ClassMetrics cm;
            cm.traffic_class = c;
            cm.pauses = t.class_pauses_sent[c];
            FlowTimes ct;
            for (const FlowOutcome& o : out.flows) {
                if (o.flow.traffic_class != c) continue;
                ++cm.flows;
                if (!o.completed) continue;
                ++cm.completed_flows;
                ct.add(o.finish_ps - o.start_ps, o.ideal_ps);
            }
            if (cm.flows == 0 && cm.pauses == 0) continue;
            ct.fill(cm);
            m.by_class.push_back(cm);
        }
    }
    if (end_ps > 0) {
        m.goodput_gbps = static_cast<double>(delivered_all) * 8 / (static_cast<double>(end_ps) / 1e12) / 1e9;
        // Bottleneck: the receivers' NIC capacity (every plane).
        uint64_t receivers = 0, busiest = 0;
        for (uint32_t h = 0; h < hosts; ++h) {
            receivers += rx[h] > 0;
            busiest = std::max({busiest, tx[h], rx[h]});
        }
        const double cap_gbps = rate * static_cast<double>(tc.planes) / 1e9;
        m.goodput_fraction = m.goodput_gbps / (cap_gbps * static_cast<double>(std::max<uint64_t>(1, receivers)));
        const double ideal_ps = static_cast<double>(busiest) * 8 / (cap_gbps * 1e9) * 1e12;
        m.finish_fraction_of_ideal = m.completed_flows == m.flows ? ideal_ps / static_cast<double>(end_ps) : 0;
    }
    for (uint32_t h = 0; h < hosts; ++h) topo.host(h).attach(nullptr);
    return true;
}

}  // namespace mroce::sim
