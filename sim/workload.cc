// sim/workload.cc — flow lists, their generators and the flow-size CDF sampler.
#include "sim/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>

namespace mroce::sim {

std::string check_workload(const Workload& w, uint32_t hosts) {
    if (w.size() >= kMaxFlows)
        return std::to_string(w.size()) + " flows, the limit is " + std::to_string(kMaxFlows - 1) +
               " (lower the load, duration_us or max_flows)";
    for (size_t i = 0; i < w.size(); ++i) {
        const Flow& f = w[i];
        const std::string name = "flow " + std::to_string(i);
        if (f.id != i) return name + ": id " + std::to_string(f.id) + " is not its index";
        if (f.src >= hosts || f.dst >= hosts)
            return name + ": host index out of range (" + std::to_string(hosts) + " hosts)";
        if (f.src == f.dst) return name + ": src and dst are the same host";
        if (f.bytes == 0) return name + ": zero bytes";
        if (f.bytes > kMaxFlowBytes) return name + ": more than " + std::to_string(kMaxFlowBytes) + " bytes";
        if (f.start < SimDuration::zero()) return name + ": negative start";
        for (uint32_t d : f.depends_on)
            if (d >= f.id) return name + ": depends on flow " + std::to_string(d) + ", not an earlier flow";
    }
    return "";
}

uint32_t add_flow(Workload& w, uint32_t src, uint32_t dst, uint64_t bytes, SimDuration start,
                  uint8_t tc, std::vector<uint32_t> deps) {
    const auto id = static_cast<uint32_t>(w.size());
    w.push_back(Flow{id, src, dst, bytes, start, tc, std::move(deps)});
    return id;
}

void incast(Workload& w, const std::vector<uint32_t>& senders, uint32_t receiver, uint64_t bytes,
            SimDuration start) {
    for (uint32_t s : senders) w[add_flow(w, s, receiver, bytes, start)].hpcc_dport = Flow::kHpccIncast;
}

void permutation(Workload& w, uint32_t hosts, uint64_t bytes, Rng& rng) {
    if (hosts < 2) return;
    // Sattolo's algorithm: a uniformly random single cycle, so nobody sends to itself.
    std::vector<uint32_t> dst(hosts);
    std::iota(dst.begin(), dst.end(), 0u);
    for (uint32_t i = hosts - 1; i > 0; --i) std::swap(dst[i], dst[rng.uniform(i)]);
    for (uint32_t h = 0; h < hosts; ++h) add_flow(w, h, dst[h], bytes);
}

void all_to_all(Workload& w, uint32_t hosts, uint64_t bytes) {
    for (uint32_t a = 0; a < hosts; ++a)
        for (uint32_t b = 0; b < hosts; ++b)
            if (a != b) add_flow(w, a, b, bytes);
}

void ring_allreduce(Workload& w, uint32_t hosts, uint64_t bytes) {
    if (hosts < 2) return;
    const uint64_t chunk = (bytes + hosts - 1) / hosts;
    std::vector<uint32_t> prev(hosts), cur(hosts);  // flow id of each host's previous step
    for (uint32_t step = 0; step < 2 * (hosts - 1); ++step) {
        for (uint32_t i = 0; i < hosts; ++i) {
            std::vector<uint32_t> deps;
            if (step > 0) deps.push_back(prev[(i + hosts - 1) % hosts]);
            cur[i] = add_flow(w, i, (i + 1) % hosts, chunk, {}, 0, std::move(deps));
        }
        prev.swap(cur);
    }
}

bool FlowSizeCdf::load(const std::string& path, std::string& err) {
    std::ifstream in(path);
    if (!in) {
        err = path + ": cannot open";
        return false;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    return parse(ss.str(), path, err);
}

bool FlowSizeCdf::parse(const std::string& text, const std::string& name, std::string& err) {
    points_.clear();
    std::istringstream in(text);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        const std::string where = name + ":" + std::to_string(n) + ": ";
        if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        std::istringstream ls(line);
        double size = 0, p = 0;
        if (!(ls >> size)) continue;  // blank or comment-only
        std::string rest;
        if (!(ls >> p) || (ls >> rest)) {
            err = where + "expected 'size_bytes cum_prob'";
            return false;
        }
        if (!(size >= 0) || !std::isfinite(size)) {
            err = where + "size must be a non-negative number of bytes";
            return false;
        }
        if (!(p >= 0 && p <= 1)) {
            err = where + "cum_prob must be in [0, 1]";
            return false;
        }
        if (!points_.empty() && size <= points_.back().first) {
            err = where + "sizes must increase";
            return false;
        }
        if (!points_.empty() && p < points_.back().second) {
            err = where + "cum_prob must not decrease";
            return false;
        }
        points_.emplace_back(size, p);
    }
    if (points_.empty()) {
        err = name + ": no 'size_bytes cum_prob' lines";
        return false;
    }
    if (points_.back().second != 1.0) {
        err = name + ": the last cum_prob must be 1";
        points_.clear();
        return false;
    }
    // A zero mean would make the background arrival rate infinite; a size beyond the flow
    // limit could not be run.
    if (mean() < 1 || points_.back().first > static_cast<double>(kMaxFlowBytes)) {
        err = name + ": sizes must have a mean of at least 1 byte and stay at most " +
              std::to_string(kMaxFlowBytes) + " bytes";
        points_.clear();
        return false;
    }
    return true;
}

uint64_t FlowSizeCdf::sample(Rng& rng) const {
    const double u = static_cast<double>(rng.next_u64() >> 11) * 0x1.0p-53;  // [0, 1)
    double size = points_.front().first;
    for (size_t i = 1; i < points_.size(); ++i) {
        const auto [s1, p1] = points_[i];
        if (u >= p1) continue;
        const auto [s0, p0] = points_[i - 1];
        size = u <= p0 ? s0 : s0 + (s1 - s0) * (u - p0) / (p1 - p0);
        break;
    }
    return std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(size)));
}

double FlowSizeCdf::mean() const {
    // The first point's mass sits at its size; each segment is uniform between its ends.
    double m = points_.front().first * points_.front().second;
    for (size_t i = 1; i < points_.size(); ++i)
        m += (points_[i].second - points_[i - 1].second) * (points_[i].first + points_[i - 1].first) / 2;
    return m;
}

void background(Workload& w, uint32_t hosts, double load, uint64_t rate_bps,
                const FlowSizeCdf& cdf, SimDuration from, SimDuration until, uint64_t max_flows,
                Rng& rng, uint8_t tc) {
    if (hosts < 2 || load <= 0) return;
    // Aggregate arrival rate (flows per second) that offers `load` of all hosts' capacity.
    const double per_s = load * static_cast<double>(hosts) * static_cast<double>(rate_bps) / 8 / cdf.mean();
    double t_s = static_cast<double>(to_ps(from)) / 1e12;
    const double end_s = static_cast<double>(to_ps(until)) / 1e12;
    const uint64_t cap = max_flows ? std::min(max_flows, kMaxFlows) : kMaxFlows;
    for (uint64_t n = 0; n < cap; ++n) {
        const double u = (static_cast<double>(rng.next_u64() >> 11) + 1) * 0x1.0p-53;  // (0, 1]
        t_s += -std::log(u) / per_s;
        if (t_s >= end_s) break;
        const auto src = static_cast<uint32_t>(rng.uniform(hosts));
        auto dst = static_cast<uint32_t>(rng.uniform(hosts - 1));
        if (dst >= src) ++dst;
        const auto start = SimDuration(static_cast<int64_t>(t_s * 1e12));
        add_flow(w, src, dst, cdf.sample(rng), start, tc);
    }
}

}  // namespace mroce::sim
