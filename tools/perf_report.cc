// tools/perf_report.cc — see perf_report.h.
#include "tools/perf_report.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "obs/histogram.h"

namespace mroce::tools::perf {

namespace {

// perftest drops this many of the largest samples before taking the median (t_typical).
constexpr size_t kLatMeasureTail = 2;

// to_unit converts bytes per second into the table's unit.
double to_unit(const Options& o, double bytes_per_s) {
    return o.report_gbits ? bytes_per_s * 8 / 1e9 : bytes_per_s / (1 << 20);
}

uint64_t get_u64(const Json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<uint64_t>() : 0;
}

double get_double(const Json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

}  // namespace

Json bw_result(const Options& o, uint32_t size, uint64_t messages, uint64_t bytes, double seconds,
               const std::vector<int64_t>& completion_ns) {
    const double avg = seconds > 0 ? static_cast<double>(bytes) / seconds : 0;
    // Peak: the best rate over any window of at least a tenth of the run. (Completions
    // arrive in bursts, several per poll, so a window counted in completions would see
    // bursts as absurd peaks.)
    double peak = avg;
    const size_t n = completion_ns.size();
    if (n >= 2) {
        const int64_t window = std::max<int64_t>(1, completion_ns.back() / 10);
        size_t j = 0;
        for (size_t i = 0; i < n; ++i) {
            while (j < n && completion_ns[j] - completion_ns[i] < window) ++j;
            if (j == n) break;
            const double dt = static_cast<double>(completion_ns[j] - completion_ns[i]);
            peak = std::max(peak, static_cast<double>(j - i) * size * 1e9 / dt);
        }
    }
    Json r;
    r["MsgSize"] = size;
    r["n_iterations"] = messages;
    r["BW_peak"] = to_unit(o, peak);
    r["BW_average"] = to_unit(o, avg);
    r["MsgRate"] = seconds > 0 ? static_cast<double>(messages) / seconds / 1e6 : 0.0;
    r["bytes"] = bytes;
    r["seconds"] = seconds;
    r["goodput_gbps"] = avg * 8 / 1e9;
    // The run as a time series: Gbit/s completed in each 100 ms, to see a path failure
    // and the recovery from it.
    Json series = Json::array();
    constexpr int64_t kBucketNs = 100'000'000;
    size_t k = 0;
    for (int64_t start = 0; k < n; start += kBucketNs) {
        uint64_t in_bucket = 0;
        while (k < n && completion_ns[k] < start + kBucketNs) {
            ++in_bucket;
            ++k;
        }
        series.push_back(static_cast<double>(in_bucket) * size * 8 / 1e9 / 0.1);
    }
    r["gbps_per_100ms"] = series;
    return r;
}

Json lat_result(uint32_t size, const std::vector<double>& samples) {
    // t_typical and the percentiles are exact samples, as perftest prints them: these
    // figures are compared with perftest's own (the Verbs library's ib_write_lat beside
    // mroce perf, issue 15, with a 10% target), and a histogram bucket's midpoint is up to
    // 3.2% off. min, max, mean and standard deviation come from obs::Histogram (exact).
    obs::Histogram h;
    std::vector<uint64_t> ns(samples.size());
    for (size_t i = 0; i < samples.size(); ++i) {
        ns[i] = static_cast<uint64_t>(std::llround(std::max(0.0, samples[i]) * 1000));
        h.record(ns[i]);
    }
    Json r;
    r["MsgSize"] = size;
    r["n_iterations"] = h.count();
    if (h.count() == 0) return r;
    std::sort(ns.begin(), ns.end());
    auto usec = [](uint64_t v) { return static_cast<double>(v) / 1000; };
    const uint64_t n = ns.size();
    const uint64_t kept = n > kLatMeasureTail ? n - kLatMeasureTail : n;
    // The sample of rank ceil(n * q) (1-based): perftest's percentile.
    auto quantile = [&](double q) {
        const auto rank = static_cast<uint64_t>(std::ceil(static_cast<double>(n) * q));
        return ns[std::clamp<uint64_t>(rank, 1, n) - 1];
    };
    r["t_min"] = usec(h.min());
    r["t_max"] = usec(h.max());
    r["t_typical"] = usec(ns[kept / 2]);
    r["t_avg"] = h.mean() / 1000;
    r["t_stdev"] = h.stdev() / 1000;
    r["percentile_99"] = usec(quantile(0.99));
    r["percentile_99.9"] = usec(quantile(0.999));
    return r;
}

Json counters_json(const api::ConnectionReport& a, const api::ConnectionReport& b) {
    Json c;
    c["retransmits"] = b.connection.retransmits - a.connection.retransmits;
    c["retransmits_sack"] = b.connection.retransmits_sack - a.connection.retransmits_sack;
    c["retransmits_timeout"] = b.connection.retransmits_timeout - a.connection.retransmits_timeout;
    c["retransmits_cancelled"] = b.connection.retransmits_cancelled - a.connection.retransmits_cancelled;
    // Every reason (issue 18): READ/atomic request re-sends count in the total too.
    c["retransmits_path_failure"] = b.connection.retransmits_path_failure - a.connection.retransmits_path_failure;
    c["retransmits_rnr"] = b.connection.retransmits_rnr - a.connection.retransmits_rnr;
    c["retransmits_read_request"] = b.connection.retransmits_read_request - a.connection.retransmits_read_request;
    c["duplicate_segments"] = b.connection.duplicate_segments - a.connection.duplicate_segments;
    // Drops at this receiver, by reason (core/stats.h).
    c["dropped_out_of_window"] = b.connection.out_of_window - a.connection.out_of_window;
    c["dropped_wrong_state"] = b.connection.wrong_state - a.connection.wrong_state;
    c["dropped_stale_generation"] = b.connection.stale_generation - a.connection.stale_generation;
    c["dropped_stale_probe_replies"] = b.connection.stale_probe_replies - a.connection.stale_probe_replies;
    c["dropped_unknown_stream"] = b.connection.unknown_stream - a.connection.unknown_stream;
    c["dropped_malformed"] = b.connection.malformed - a.connection.malformed;
    c["rnr_nacks_sent"] = b.connection.rnr_nacks_sent - a.connection.rnr_nacks_sent;
    uint64_t spurious = 0, ecn_echoed = 0, ecn_marks = 0, lost = 0;
    Json paths = Json::array();
    for (size_t p = 0; p < b.paths.size(); ++p) {
        const core::PathStats& y = b.paths[p];
        const core::PathStats x = p < a.paths.size() ? a.paths[p] : core::PathStats{};
        Json j;
        j["path"] = p;
        j["packets_sent"] = y.packets_sent - x.packets_sent;
        j["bytes_sent"] = y.bytes_sent - x.bytes_sent;
        j["retransmits_sent"] = y.retransmits_sent - x.retransmits_sent;
        j["lost"] = (y.lost_by_sack - x.lost_by_sack) + (y.lost_by_timeout - x.lost_by_timeout);
        j["spurious_retransmits"] = y.spurious_retransmits - x.spurious_retransmits;
        j["ecn_echoed"] = y.ecn_echoed - x.ecn_echoed;
        j["packets_received"] = y.packets_received - x.packets_received;
        j["ecn_marks_received"] = y.ecn_marks - x.ecn_marks;
        j["failures"] = y.failures - x.failures;
        j["rerolls"] = y.rerolls - x.rerolls;
        j["timeouts"] = y.timeouts - x.timeouts;
        j["overtaken"] = y.overtaken - x.overtaken;
        j["stalled_timeouts"] = y.stalled_timeouts - x.stalled_timeouts;
        spurious += j["spurious_retransmits"].get<uint64_t>();
        ecn_echoed += j["ecn_echoed"].get<uint64_t>();
        ecn_marks += j["ecn_marks_received"].get<uint64_t>();
        lost += j["lost"].get<uint64_t>();
        paths.push_back(std::move(j));
    }
    c["spurious_retransmits"] = spurious;
    c["lost"] = lost;
    c["ecn_marks"] = ecn_echoed;  // CE marks on our DATA, as the peer reported them
    c["ecn_marks_received"] = ecn_marks;
    c["paths"] = std::move(paths);
    return c;
}

Json datapath_json(const datapath::UdpStats& a, const datapath::UdpStats& b) {
    Json j;
    j["datagrams_sent"] = b.packets_sent - a.packets_sent;
    j["datagrams_received"] = b.packets_received - a.packets_received;
    j["send_calls"] = b.send_calls - a.send_calls;
    j["recv_calls"] = b.recv_calls - a.recv_calls;
    j["gso_sends"] = b.gso_sends - a.gso_sends;
    j["gro_receives"] = b.gro_receives - a.gro_receives;
    j["send_would_block"] = b.send_would_block - a.send_would_block;
    j["receive_truncated"] = b.receive_truncated - a.receive_truncated;
    j["send_errors"] = b.send_errors - a.send_errors;
    j["no_plane_device"] = b.no_plane_device - a.no_plane_device;
    return j;
}

Json driver_json(const api::DriverStats& a, const api::DriverStats& b) {
    Json j;
    j["passes"] = b.passes - a.passes;
    j["busy_passes"] = b.busy_passes - a.busy_passes;
    j["timeouts"] = b.timeouts - a.timeouts;
    j["timeouts_deferred"] = b.timeouts_deferred - a.timeouts_deferred;
    j["handshakes_shed"] = b.handshakes_shed - a.handshakes_shed;
    j["tx_retries"] = b.tx_retries - a.tx_retries;
    j["payloads_in_place"] = b.payloads_in_place - a.payloads_in_place;
    j["payloads_copied_in"] = b.payloads_copied_in - a.payloads_copied_in;
    j["sleeps"] = b.sleeps - a.sleeps;
    j["busy_s"] = static_cast<double>(b.busy_ns - a.busy_ns) * 1e-9;
    j["idle_s"] = static_cast<double>(b.idle_ns - a.idle_ns) * 1e-9;
    return j;
}

Json endpoint_json(const core::EndpointStats& a, const core::EndpointStats& b) {
    Json j;
    j["datagrams_received"] = b.datagrams_received - a.datagrams_received;
    j["truncated"] = b.truncated - a.truncated;
    j["bad_version"] = b.bad_version - a.bad_version;
    j["bad_type"] = b.bad_type - a.bad_type;
    j["bad_length"] = b.bad_length - a.bad_length;
    j["unknown_connection"] = b.unknown_connection - a.unknown_connection;
    j["bad_token"] = b.bad_token - a.bad_token;
    j["bad_integrity"] = b.bad_integrity - a.bad_integrity;
    j["connections_refused"] = b.connections_refused - a.connections_refused;
    j["malformed_hello"] = b.malformed_hello - a.malformed_hello;
    // The handshake under load (issue 17, finding 8): what a HELLO flood cost the endpoint.
    j["retries_sent"] = b.retries_sent - a.retries_sent;
    j["replies_dropped"] = b.replies_dropped - a.replies_dropped;
    j["cookies_accepted"] = b.cookies_accepted - a.cookies_accepted;
    j["bad_cookie"] = b.bad_cookie - a.bad_cookie;
    j["unproven_ended"] = b.unproven_ended - a.unproven_ended;
    return j;
}

Json test_info(const Options& o, const std::string& local, const std::string& remote,
               const std::string& offload) {
    Json t;
    t["test"] = test_name(o);
    t["verb"] = to_string(o.verb);
    t["mode"] = o.mode == Mode::kBandwidth ? "bw" : "lat";
    t["transport"] = o.raw ? "udp-raw" : "mroce";
    t["qps"] = o.qps;
    t["paths"] = o.paths;
    t["window_kib"] = o.window_kib;
    t["cc"] = o.cc.empty() ? "default" : o.cc;
    t["rate_hint"] = o.rate_hint;
    t["pacing"] = o.pacing;
    t["traffic_class"] = o.tc;
    t["dscp_map"] = o.dscp_map;  // [] : the datapath's default (CS0..CS7)
    t["line_rate_gbps"] = o.line_rate_gbps;  // 0: the engine's default
    t["tx_depth"] = o.tx_depth;
    t["mtu"] = 4096;
    t["offload"] = offload;
    t["duration_s"] = o.duration_s;
    t["iterations"] = o.duration_s > 0 ? 0 : o.iterations_or_default();
    t["BW_unit"] = o.report_gbits ? "Gb/sec" : "MB/sec";
    t["lat_unit"] = "usec";
    t["local_address"] = local;
    t["remote_address"] = remote;
    t["oob_port"] = o.port;
    return t;
}

void print_rule() { fmt::print("{}\n", std::string(87, '-')); }

void print_banner(const Options& o, bool server, const std::string& offload,
                  const std::string& local_line, const std::string& remote_line) {
    print_rule();
    fmt::print("                    {} Test{}\n", test_name(o), server ? " (server)" : "");
    fmt::print(" Transport       : {}\t\tPaths          : {}\n",
               o.raw ? "UDP (raw)" : "MetaRoCE/UDP", o.paths);
    fmt::print(" Number of qps   : {}\t\tOffload        : {}\n", o.qps, offload);
    if (o.threads > 1)
        fmt::print(" Connection type : RC\t\tProgress       : {} threads (shards)\n", o.threads);
    else
        fmt::print(" Connection type : RC\t\tProgress       : manual (one thread)\n");
    if (o.mode == Mode::kBandwidth) fmt::print(" TX depth        : {}\n", o.tx_depth);
    fmt::print(" Mtu             : 4096[B]\n");
    fmt::print(" Link type       : Ethernet (UDP)\n");
    fmt::print(" Data ex. method : Ethernet (TCP port {})\n", o.port);
    print_rule();
    fmt::print(" local address:  {}\n", local_line);
    fmt::print(" remote address: {}\n", remote_line);
    print_rule();
}

void print_table_head(const Options& o) {
    if (o.mode == Mode::kBandwidth) {
        const char* unit = o.report_gbits ? "Gb/sec" : "MB/sec";
        fmt::print(" #bytes     #iterations    BW peak[{}]    BW average[{}]   MsgRate[Mpps]\n",
                   unit, unit);
    } else {
        fmt::print(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
                   "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]\n");
    }
}

void print_row(const Options& o, const Json& r) {
    if (o.mode == Mode::kBandwidth) {
        fmt::print(" {:<7}    {:<10}       {:<7.2f}            {:<7.2f}\t\t     {:<7.6f}\n",
                   get_u64(r, "MsgSize"), get_u64(r, "n_iterations"), get_double(r, "BW_peak"),
                   get_double(r, "BW_average"), get_double(r, "MsgRate"));
    } else {
        fmt::print(" {:<7} {:<10}    {:<7.2f}        {:<7.2f}      {:<7.2f}  \t     {:<7.2f}     "
                   "\t{:<7.2f}\t\t{:<7.2f}  \t\t{:<7.2f}\n",
                   get_u64(r, "MsgSize"), get_u64(r, "n_iterations"), get_double(r, "t_min"),
                   get_double(r, "t_max"), get_double(r, "t_typical"), get_double(r, "t_avg"),
                   get_double(r, "t_stdev"), get_double(r, "percentile_99"),
                   get_double(r, "percentile_99.9"));
    }
}

void print_sweep_summary(const std::vector<Json>& results) {
    uint64_t retx = 0, spurious = 0, lost = 0;
    for (const Json& r : results) {
        lost += get_u64(r, "lost_datagrams");
        auto it = r.find("counters");
        if (it == r.end() || !it->is_object()) continue;
        retx += get_u64(*it, "retransmits");
        spurious += get_u64(*it, "spurious_retransmits");
    }
    if (results.front().contains("lost_datagrams"))
        fmt::print(" over {} sizes: {} datagrams lost (raw UDP); per size: --json FILE\n", results.size(), lost);
    else
        fmt::print(" over {} sizes: {} retransmits, {} spurious; per size and path: --json FILE\n",
                   results.size(), retx, spurious);
}

void print_counters(const Json& r) {
    if (r.contains("lost_datagrams"))
        fmt::print(" raw UDP: {} datagrams sent, {} received, {} lost (no retransmission)\n",
                   get_u64(r, "datagrams_sent"), get_u64(r, "datagrams_received"),
                   get_u64(r, "lost_datagrams"));
    auto it = r.find("counters");
    if (it == r.end() || !it->is_object()) return;
    const Json& c = *it;
    fmt::print(" retransmits: {} (sack {}, timeout {}, path failure {}, rnr {}, read request {}), spurious: {}, "
               "lost: {}, ECN marks: {}\n",
               get_u64(c, "retransmits"), get_u64(c, "retransmits_sack"), get_u64(c, "retransmits_timeout"),
               get_u64(c, "retransmits_path_failure"), get_u64(c, "retransmits_rnr"),
               get_u64(c, "retransmits_read_request"), get_u64(c, "spurious_retransmits"),
               get_u64(c, "lost"), get_u64(c, "ecn_marks"));
    auto paths = c.find("paths");
    if (paths == c.end() || !paths->is_array() || paths->empty()) return;
    fmt::print(" {:>5} {:>12} {:>10} {:>8} {:>8} {:>8} {:>8}\n", "path", "packets", "retx", "lost",
               "ecn", "failures", "rerolls");
    for (const Json& p : *paths)
        fmt::print(" {:>5} {:>12} {:>10} {:>8} {:>8} {:>8} {:>8}\n", get_u64(p, "path"),
                   get_u64(p, "packets_sent"), get_u64(p, "retransmits_sent"), get_u64(p, "lost"),
                   get_u64(p, "ecn_echoed"), get_u64(p, "failures"), get_u64(p, "rerolls"));
}

}  // namespace mroce::tools::perf
