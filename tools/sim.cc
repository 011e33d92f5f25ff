// tools/sim.cc — `mroce sim`: load a scenario, run every point, write docs/sim.md's files.
#include "tools/sim.h"

#include <fmt/core.h>
#include <fmt/os.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "obs/export.h"
#include "sim/capture_spec.h"
#include "sim/host.h"
#include "sim/import.h"
#include "sim/pcap.h"
#include "sim/scenario.h"
#include "sim/scenario_run.h"

namespace mroce::tools {
namespace {

struct SimOptions {
    std::string scenario;
    std::vector<std::string> sets;
    std::optional<uint64_t> seed;
    std::string out = "sim-out";
    std::string pcap;
    std::string pcap_at = "host:0";
    uint32_t pcap_snaplen = sim::kPcapDefaultSnaplen;  // bytes kept of each datagram, as tcpdump -s
    double progress_s = 2;  // a progress line on stderr at most this often; 0: none
};

// pcap_path_for is the capture file of one run: FILE itself for a single run, otherwise
// FILE's stem + "-" + the run's label + its extension (cap.pcap -> cap-mroce_loss-0.01.pcap),
// so the runs of a sweep never overwrite each other's capture.
std::filesystem::path pcap_path_for(const std::string& file, const std::string& label, size_t runs) {
    const std::filesystem::path p(file);
    if (runs <= 1) return p;
    return p.parent_path() / (p.stem().string() + "-" + label + p.extension().string());
}

nlohmann::ordered_json param_json(const sim::ParamValue& v) {
    return std::visit([](auto&& x) { return nlohmann::ordered_json(x); }, v);
}

nlohmann::ordered_json metrics_json(const sim::RunMetrics& m) {
    nlohmann::ordered_json j;
    j["goodput_gbps"] = m.goodput_gbps;
    j["goodput_fraction"] = m.goodput_fraction;
    j["completion_time_us"] = m.completion_time_us;
    j["fct_p50_us"] = m.fct_p50_us;
    j["fct_p99_us"] = m.fct_p99_us;
    j["retransmits"] = m.retransmits;
    j["drops"] = m.drops;
    j["ecn_marks"] = m.ecn_marks;
    j["max_queue_bytes"] = m.max_queue_bytes;
    j["failed_ops"] = m.failed_ops;
    j["flows"] = m.flows;
    j["completed_flows"] = m.completed_flows;
    j["slowdown_p50"] = m.slowdown_p50;
    j["slowdown_p99"] = m.slowdown_p99;
    j["slowdown_max"] = m.slowdown_max;
    j["finish_fraction_of_ideal"] = m.finish_fraction_of_ideal;
    j["pauses"] = m.pauses;
    j["pfc_overflow_drops"] = m.pfc_overflow_drops;
    j["events"] = m.events;
    j["sim_packets"] = m.sim_packets;
    j["stop_reason"] = m.stop_reason;
    j["drop_fraction"] = m.drop_fraction;
    j["stall_p99_us"] = m.stall_p99_us;
    if (m.recovery_us) j["recovery_us"] = *m.recovery_us;
    const sim::RetransmitReasons& r = m.retransmits_by_reason;
    j["retransmits_by_reason"] = {{"sack", r.sack}, {"timeout", r.timeout}, {"probe", r.probe},
                                  {"path_failure", r.path_failure}, {"rnr", r.rnr}, {"read_request", r.read_request}};
    j["timeouts"] = m.timeouts;
    j["path_failures"] = m.path_failures;
    if (m.incast) {  // incast workloads only; null = the run never got there
        const auto opt = [](const std::optional<double>& v) { return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(); };
        const sim::IncastMetrics& i = *m.incast;
        j["t_know_us"] = opt(i.t_know_us);
        j["queue_peak_bytes"] = i.queue_peak_bytes;
        j["bdp_bytes"] = i.bdp_bytes;
        j["base_rtt_us"] = i.base_rtt_us;
        j["settle_us"] = opt(i.settle_us);
        j["converge_rtts"] = opt(i.converge_rtts);
        j["jain_index"] = opt(i.jain_index);
        j["jain_window_us"] = i.jain_window_us;
        j["jain_windows"] = i.jain_windows;
    }
    if (!m.counters.empty()) {  // MetaRoCE: obs/'s names, as `mroce stat --json` shows them
        nlohmann::ordered_json c = nlohmann::ordered_json::object();
        for (const auto& [k, v] : m.counters) c[k] = v;
        j["counters"] = std::move(c);
        j["rtt"] = nlohmann::ordered_json::parse(obs::histogram_json(m.rtt).dump());
    }
    if (!m.by_class.empty()) {  // several traffic classes only: one-class output unchanged
        nlohmann::ordered_json classes = nlohmann::ordered_json::array();
        for (const sim::ClassMetrics& c : m.by_class)
            classes.push_back({{"traffic_class", c.traffic_class}, {"flows", c.flows},
                               {"completed_flows", c.completed_flows}, {"fct_p50_us", c.fct_p50_us},
                               {"fct_p99_us", c.fct_p99_us}, {"slowdown_p50", c.slowdown_p50},
                               {"slowdown_p99", c.slowdown_p99}, {"slowdown_max", c.slowdown_max},
                               {"pauses", c.pauses}});
        j["by_class"] = std::move(classes);
    }
    return j;
}

// write_fct_hpcc writes fct_hpcc.txt: HPCC's own fct.txt (third.cc's qp_finish), for its
// analysis/fct_analysis.py as it is: `sip dip sport dport size start_ns fct_ns
// standalone_fct_ns` with HPCC's addresses of the hosts' node ids (an HPCC topology's
// own ids, else the host index), sport HPCC's per-pair counter from 10000 in flow order,
// and dport the flow's (100, or 200 for an incast's flows; an HPCC flow file's own), which
// is how fct_analysis.py tells normal from incast flows; start times are an HPCC flow
// file's own (docs/sim.md).
void write_fct_hpcc(fmt::ostream& out, const sim::RunOutput& r, const sim::RunSpec& spec) {
    const auto node = [&](uint32_t host) {
        return spec.topology.kind == sim::TopologyKind::kGraph ? spec.topology.graph.host_nodes.at(host) : host;
    };
    const int64_t origin_ps = sim::to_ps(spec.workload.time_origin);  // an HPCC flow file's own times
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> next_sport;
    for (const sim::FlowOutcome& o : r.flows) {
        const uint32_t sport = next_sport.try_emplace({o.flow.src, o.flow.dst}, 10000).first->second++;
        if (!o.completed) continue;
        out.print("{:08x} {:08x} {} {} {} {} {} {}\n", sim::hpcc_node_ipv4(node(o.flow.src)),
                  sim::hpcc_node_ipv4(node(o.flow.dst)), sport, o.flow.hpcc_dport, o.flow.bytes,
                  (o.start_ps + origin_ps) / 1000, (o.finish_ps - o.start_ps) / 1000, o.ideal_ps / 1000);
    }
}

// write_run writes one run's directory: fct.txt, fct_hpcc.txt and the three time-series CSVs.
bool write_run(const std::filesystem::path& dir, const sim::RunOutput& r, const sim::RunSpec& spec,
               std::string& err) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
        err = dir.string() + ": " + ec.message();
        return false;
    }
    try {
        auto fct = fmt::output_file((dir / "fct.txt").string());
        for (const sim::FlowOutcome& o : r.flows) {
            if (!o.completed) continue;
            fct.print("{:08x} {:08x} {} {} {} {} {} {}\n", sim::host_ipv4(o.flow.src), sim::host_ipv4(o.flow.dst),
                      o.src_port, o.dst_port, o.flow.bytes, o.start_ps / 1000, (o.finish_ps - o.start_ps) / 1000,
                      o.ideal_ps / 1000);
        }
        auto hpcc = fmt::output_file((dir / "fct_hpcc.txt").string());
        write_fct_hpcc(hpcc, r, spec);
        auto tp = fmt::output_file((dir / "throughput.csv").string());
        tp.print("time_us,flow,gbps\n");
        for (const sim::ThroughputRow& t : r.throughput) {
            if (t.flow < 0) tp.print("{:.3f},all,{:.6g}\n", t.time_us, t.gbps);
            else tp.print("{:.3f},{},{:.6g}\n", t.time_us, t.flow, t.gbps);
        }
        auto q = fmt::output_file((dir / "queue.csv").string());
        q.print("time_us,port,bytes\n");
        for (const sim::QueueRow& row : r.queue) q.print("{:.3f},{},{}\n", row.time_us, r.queue_port_names[row.port], row.bytes);
        auto cc = fmt::output_file((dir / "cc.csv").string());
        // The live system's names and units (docs/observability.md, docs/sim.md).
        cc.print("time_us,conn,path,state,cwnd_bytes,srtt_ns,in_flight_bytes,ecn_alpha,"
                 "window_rate_bps,pacing_rate_bps,rate_hint_mbps\n");
        const auto field = [](int64_t v) { return v < 0 ? std::string() : std::to_string(v); };
        for (const sim::CcRow& row : r.cc) {
            const std::string alpha = row.ecn_alpha < 0 ? "" : fmt::format("{:.4f}", row.ecn_alpha / 1024.0);
            cc.print("{:.3f},{},{},{},{},{},{},{},{},{},{}\n", row.time_us, row.conn, row.path,
                     row.state ? row.state : "", field(row.cwnd_bytes), field(row.srtt_ns),
                     field(row.in_flight_bytes), alpha, field(row.window_rate_bps),
                     field(row.pacing_rate_bps), field(row.rate_hint_mbps));
        }
    } catch (const std::exception& e) {
        err = dir.string() + ": " + e.what();
        return false;
    }
    return true;
}

// write_summary writes summary.json whole (through a temporary file and a rename, so a
// reader never sees half of it): after every run, so a long sweep's finished runs can be
// read while it goes on; "complete" is false until the last run is in.
bool write_summary(const std::filesystem::path& out, const nlohmann::ordered_json& j) {
    const std::filesystem::path tmp = out / "summary.json.tmp";
    {
        std::ofstream f(tmp);
        f << j.dump(2) << "\n";
        if (!f.flush()) return false;
    }
    std::error_code ec;
    std::filesystem::rename(tmp, out / "summary.json", ec);
    return !ec;
}

// ProgressLine prints, on stderr, where a long run is: at most once per `every_s` of wall
// time, and not before the run has lasted that long (short runs print nothing).
class ProgressLine {
public:
    ProgressLine(std::string label, double every_s) : label_(std::move(label)), every_s_(every_s) {}
    void operator()(const sim::RunProgress& p) {
        if (every_s_ <= 0) return;
        const auto now = std::chrono::steady_clock::now();
        if (std::chrono::duration<double>(now - last_).count() < every_s_) return;
        last_ = now;
        std::fprintf(stderr, "mroce sim: %s: %.1f us simulated, %llu/%llu flows done, %.3g M events, %.1f s\n",
                     label_.c_str(), p.sim_us, static_cast<unsigned long long>(p.flows_done),
                     static_cast<unsigned long long>(p.flows), static_cast<double>(p.events) / 1e6,
                     std::chrono::duration<double>(now - start_).count());
        std::fflush(stderr);
    }

private:
    std::string label_;
    double every_s_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_ = start_;
};

int run_sim(const SimOptions& o) {
    const auto wall0 = std::chrono::steady_clock::now();
    std::string err;
    if (std::error_code ec; std::filesystem::is_directory(o.scenario, ec)) {
        std::fprintf(stderr, "mroce sim: %s is a directory (give a scenario file, e.g. %s/*.toml)\n",
                     o.scenario.c_str(), o.scenario.c_str());
        return 2;
    }
    const std::optional<sim::Scenario> sc = sim::load_scenario(o.scenario, o.sets, o.seed, err);
    if (!sc) {
        std::fprintf(stderr, "mroce sim: %s\n", err.c_str());
        return 2;
    }
    const std::filesystem::path out(o.out);
    std::error_code ec;
    std::filesystem::create_directories(out, ec);  // fail before running, not after
    if (ec) {
        std::fprintf(stderr, "mroce sim: --out %s: %s\n", o.out.c_str(), ec.message().c_str());
        return 2;
    }
    nlohmann::ordered_json runs = nlohmann::ordered_json::array();
    uint64_t events = 0, packets = 0;
    auto summary = [&](bool complete) {
        nlohmann::ordered_json j;
        j["scenario"] = sc->name;
        j["scenario_file"] = sc->file;
        j["seed"] = sc->seed;
        j["wall_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
        j["events"] = events;
        j["sim_packets"] = packets;
        j["complete"] = complete;
        j["runs"] = runs;
        return j;
    };
    fmt::print("scenario {} ({}), seed {}, {} run(s), output in {}\n", sc->name, sc->file, sc->seed, sc->runs.size(),
               out.string());
    fmt::print("{:<28} {:>11} {:>12} {:>9} {:>6} {:>10} {:>10} {:>8} {:>8} {:>8} {:>7}\n", "run", "flows", "finish_us",
               "goodput", "frac", "fct_p50us", "fct_p99us", "retx", "drops", "ecn", "pauses");
    for (const sim::RunSpec& spec : sc->runs) {
        sim::RunOutput r;
        std::unique_ptr<sim::PcapWriter> pcap;
        sim::RunHook hook;
        if (!o.pcap.empty()) {
            const std::string path = pcap_path_for(o.pcap, spec.label, sc->runs.size()).string();
            pcap = sim::PcapWriter::open(path, &err, o.pcap_snaplen);
            if (!pcap) {
                std::fprintf(stderr, "mroce sim: --pcap: %s\n", err.c_str());
                return 2;
            }
            hook = [&](sim::Topology& topo, const sim::RunSpec&) -> std::string {
                const std::string why = sim::apply_capture_spec(topo, o.pcap_at, *pcap);
                return why.empty() ? why : "--pcap-at: " + why;
            };
        }
        ProgressLine progress(spec.label, o.progress_s);
        if (!sim::run_spec(spec, sc->seed, r, err, hook, std::ref(progress))) {
            std::fprintf(stderr, "mroce sim: run %s: %s\n", spec.label.c_str(), err.c_str());
            return 1;
        }
        if (pcap) {
            if (const std::string e = pcap->close(); !e.empty()) {
                std::fprintf(stderr, "mroce sim: --pcap: %s\n", e.c_str());
                return 1;
            }
        }
        if (!write_run(out / spec.label, r, spec, err)) {
            std::fprintf(stderr, "mroce sim: %s\n", err.c_str());
            return 1;
        }
        const sim::RunMetrics& m = r.metrics;
        events += m.events;
        packets += m.sim_packets;
        nlohmann::ordered_json run;
        run["protocol"] = sim::to_string(spec.protocol);
        run["label"] = spec.label;
        run["dir"] = spec.label;
        run["params"] = nlohmann::ordered_json::object();
        for (const auto& [k, v] : spec.params) run["params"][k] = param_json(v);
        run["metrics"] = metrics_json(m);
        runs.push_back(std::move(run));
        fmt::print("{:<28} {:>5}/{:<5} {:>12.1f} {:>9.2f} {:>6.3f} {:>10.1f} {:>10.1f} {:>8} {:>8} {:>8} {:>7}\n",
                   spec.label, m.completed_flows, m.flows, m.completion_time_us, m.goodput_gbps, m.goodput_fraction,
                   m.fct_p50_us, m.fct_p99_us, m.retransmits, m.drops, m.ecn_marks, m.pauses);
        if (m.completed_flows < m.flows)
            fmt::print("  {}: {} flow(s) did not complete (stop: {}, failed ops {})\n", spec.label,
                       m.flows - m.completed_flows, m.stop_reason, m.failed_ops);
        std::fflush(stdout);
        if (!write_summary(out, summary(runs.size() == sc->runs.size()))) {
            std::fprintf(stderr, "mroce sim: %s: cannot write\n", (out / "summary.json").string().c_str());
            return 1;
        }
    }
    if (sc->runs.empty() && !write_summary(out, summary(true))) {
        std::fprintf(stderr, "mroce sim: %s: cannot write\n", (out / "summary.json").string().c_str());
        return 1;
    }
    return 0;
}

}  // namespace

void register_sim(CLI::App& app) {
    auto opts = std::make_shared<SimOptions>();
    CLI::App* cmd = app.add_subcommand("sim", "run a scenario file on the packet-level simulator (docs/sim.md)");
    cmd->add_option("scenario", opts->scenario, "scenario file (TOML)")->required();
    cmd->add_option("--set", opts->sets, "override a key by dotted path, e.g. --set workload.bytes=65536")
        ->allow_extra_args(false);  // one key=value per --set, so the scenario may follow
    cmd->add_option("--seed", opts->seed, "random seed (replaces the file's)");
    cmd->add_option("--out", opts->out, "output directory (default sim-out)");
    cmd->add_option("--pcap", opts->pcap,
                    "write the packets seen at --pcap-at to FILE (pcap, ns timestamps; one file per run)");
    cmd->add_option("--pcap-at", opts->pcap_at,
                    "capture points: host:N, cable:N or hosts, comma-separated (default host:0)");
    cmd->add_option("--pcap-snaplen", opts->pcap_snaplen,
                    "bytes kept of each packet, IP and UDP headers included (default 65535)")
        ->check(CLI::Range(sim::kPcapMinSnaplen, sim::kPcapMaxSnaplen));
    cmd->add_option("--progress", opts->progress_s,
                    "print where a long run is on stderr at most every SECONDS (default 2; 0: never)")
        ->check(CLI::NonNegativeNumber);
    cmd->callback([opts] { std::exit(run_sim(*opts)); });
}

}  // namespace mroce::tools
