// tools/stat.cc — `mroce stat`: see tools/README.md and docs/observability.md.
//
//   mroce stat --list                  every process (endpoint) that answers
//   mroce stat [PID|SOCKET]            counters and per-connection/per-path tables, once
//   mroce stat --watch [-i SEC]        again every SEC seconds, with rates
//   mroce stat --json                  the snapshot as JSON (with --watch: JSON lines)
//   mroce stat --events                the event log as JSON lines (with --watch: follows)
//   mroce stat --prometheus            the Prometheus exposition, as /metrics serves it
#include "tools/stat.h"

#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "obs/server.h"

namespace mroce::tools {

namespace {

using Json = nlohmann::json;

struct StatOptions {
    std::string target;  // pid, socket path, or empty: all
    bool list = false;
    bool json = false;
    bool events = false;
    bool prometheus = false;
    bool watch = false;
    double interval_s = 1.0;
    uint64_t count = 0;  // --watch: stop after this many reports (0: until interrupted)
};

// targets: the sockets the options name. A pid names every socket of that process.
std::vector<std::string> targets(const StatOptions& o) {
    if (!o.target.empty() && o.target.find('/') != std::string::npos) return {o.target};
    std::vector<std::string> out;
    for (const std::string& s : obs::list_sockets()) {
        const std::string base = s.substr(s.rfind('/') + 1);
        if (o.target.empty() || base.rfind(o.target + "-", 0) == 0) out.push_back(s);
    }
    return out;
}

uint64_t u64(const Json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<uint64_t>() : 0;
}
double num(const Json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string us(uint64_t ns) { return ns ? fmt::format("{:.1f}", static_cast<double>(ns) / 1e3) : "-"; }

// Rates need the previous snapshot of the same socket.
struct Previous {
    Json snap;
    double at_s = 0;
};

double seconds_between(const Json& a, const Json& b) {
    return (static_cast<double>(u64(b, "time_ns")) - static_cast<double>(u64(a, "time_ns"))) / 1e9;
}

void print_table(const std::string& socket, const Json& info, const Json& s, const Previous* prev) {
    const double dt = prev ? seconds_between(prev->snap, s) : 0;
    fmt::print("== {} pid {} ({}) endpoint {}\n", socket.substr(socket.rfind('/') + 1),
               info.value("pid", 0), info.value("program", std::string("?")), s.value("endpoint", std::string("?")));
    // Counters that are not zero, with their rate per second when watching.
    const Json& c = s["counters"];
    std::vector<std::string> cells;
    for (auto it = c.begin(); it != c.end(); ++it) {
        const uint64_t v = it->is_number() ? it->get<uint64_t>() : 0;
        if (v == 0) continue;
        std::string cell = fmt::format("{} {}", it.key(), v);
        if (dt > 0 && it.key() != "connections" && it.key() != "streams") {
            const uint64_t was = u64(prev->snap["counters"], it.key().c_str());
            if (v >= was) cell += fmt::format(" ({:.0f}/s)", static_cast<double>(v - was) / dt);
        }
        cells.push_back(cell);
    }
    for (size_t i = 0; i < cells.size(); ++i) {
        fmt::print("{}{}", i % 4 == 0 ? "  " : "   ", cells[i]);
        if (i % 4 == 3 || i + 1 == cells.size()) fmt::print("\n");
    }
    // A sharded device (--threads): how its work is spread, one line per shard.
    if (s.contains("shards")) {
        for (const Json& sh : s["shards"]) {
            const Json* psh = nullptr;
            if (dt > 0 && prev->snap.contains("shards"))
                for (const Json& x : prev->snap["shards"])
                    if (x["shard"] == sh["shard"]) psh = &x;
            auto cell = [&](const char* group, const char* key) {
                const uint64_t v = u64(sh[group], key);
                if (!psh) return fmt::format("{} {}", key, v);
                const uint64_t was = u64((*psh)[group], key);
                return fmt::format("{} {} ({:.0f}/s)", key, v, v >= was ? static_cast<double>(v - was) / dt : 0.0);
            };
            fmt::print("  shard {}: connections {}  streams {}  {}  {}  {}  {}\n", u64(sh, "shard"),
                       u64(sh["counters"], "connections"), u64(sh["counters"], "streams"),
                       cell("counters", "rx_datagrams"), cell("driver", "udp_tx_packets"),
                       cell("driver", "driver_busy_passes"), cell("driver", "driver_handshakes_shed"));
        }
    }
    const Json& rtt = s["rtt"];
    if (u64(rtt, "count"))
        fmt::print("  rtt: {} samples, p50 {} us, p99 {} us, p99.9 {} us, max {} us\n", u64(rtt, "count"),
                   us(u64(rtt, "p50_ns")), us(u64(rtt, "p99_ns")), us(u64(rtt, "p999_ns")), us(u64(rtt, "max_ns")));
    for (const Json& conn : s["connections"]) {
        const Json* pconn = nullptr;
        if (prev)
            for (const Json& pc : prev->snap["connections"])
                if (pc["connection"] == conn["connection"]) pconn = &pc;
        const Json& cc = conn["counters"];
        const std::string shard = conn.contains("shard") ? fmt::format(" shard {}", u64(conn, "shard")) : "";
        fmt::print("  conn {}{} peer {} {}  hint {} Mbit/s  pacing {:.2f} Gbit/s  window rate {:.2f} Gbit/s  "
                   "in flight {} B  retransmits {} (sack {}, timeout {}, path failure {}, rnr {}, read request {})\n",
                   conn.value("connection", std::string()), shard, conn.value("peer", std::string()),
                   conn.value("state", std::string()), u64(conn, "rate_hint_mbps"),
                   num(conn, "pacing_rate_bps") / 1e9, num(conn, "window_rate_bps") / 1e9, u64(conn, "in_flight_bytes"),
                   u64(cc, "retransmits"), u64(cc, "retransmits_sack"), u64(cc, "retransmits_timeout"),
                   u64(cc, "retransmits_path_failure"), u64(cc, "retransmits_rnr"), u64(cc, "retransmits_read_request"));
        fmt::print("  {:>4} {:<7} {:>5} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>11} {:>9} {:>9} {:>7} {:>7} {:>7} {:>6} {:>6}\n",
                   "path", "state", "sport", "srtt_us", "p50_us", "p99_us", "p99.9_us", "cwnd_KiB", "infl_KiB",
                   dt > 0 ? "tx_Gbit/s" : "tx_MB", dt > 0 ? "rx_Gbit/s" : "rx_MB", "lost", "ecn_ce", "ecn_echo",
                   "retx", "tmo", "fail");
        for (const Json& p : conn["paths"]) {
            const Json& pc = p["counters"];
            const Json* pp = nullptr;
            if (pconn)
                for (const Json& x : (*pconn)["paths"])
                    if (x["path"] == p["path"]) pp = &x;
            auto rate_or_total = [&](const char* key) {
                const uint64_t v = u64(pc, key);
                if (dt > 0 && pp) {
                    const uint64_t was = u64((*pp)["counters"], key);
                    return fmt::format("{:.3f}", v >= was ? static_cast<double>(v - was) * 8 / dt / 1e9 : 0.0);
                }
                return fmt::format("{:.1f}", static_cast<double>(v) / 1e6);
            };
            const Json& r = p["rtt"];
            fmt::print("  {:>4} {:<7} {:>5} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>11} {:>9} {:>9} {:>7} {:>7} {:>7} {:>6} {:>6}\n",
                       u64(p, "path"), p.value("state", std::string()), u64(p, "source_port"),
                       us(u64(p, "srtt_ns")), us(u64(r, "p50_ns")), us(u64(r, "p99_ns")), us(u64(r, "p999_ns")),
                       u64(p, "cwnd_bytes") / 1024, u64(p, "in_flight_bytes") / 1024, rate_or_total("tx_data_bytes"),
                       rate_or_total("rx_data_bytes"), u64(pc, "lost_sack_packets") + u64(pc, "lost_timeout_packets"),
                       u64(pc, "ecn_ce_marked_packets"), u64(pc, "ecn_echoed_packets"), u64(pc, "retransmitted_packets"),
                       u64(pc, "timeouts"), u64(pc, "failures"));
        }
    }
}

int run_stat(const StatOptions& o) {
    if (o.list) {
        const auto socks = obs::list_sockets();
        if (o.json) {
            Json all = Json::array();
            for (const auto& s : socks)
                if (auto a = obs::request(s, "info")) all.push_back(Json::parse(*a, nullptr, false));
            fmt::print("{}\n", all.dump());
            return 0;
        }
        fmt::print("{:<8} {:<24} {:>5}  {:<40} {}\n", "PID", "ENDPOINT", "CONNS", "PROGRAM", "SOCKET");
        for (const auto& s : socks) {
            auto a = obs::request(s, "info");
            if (!a) continue;
            const Json j = Json::parse(*a, nullptr, false);
            if (j.is_discarded()) continue;
            fmt::print("{:<8} {:<24} {:>5}  {:<40} {}\n", j.value("pid", 0), j.value("endpoint", std::string()),
                       j.value("connections", 0), j.value("program", std::string()), s);
        }
        if (socks.empty()) std::fprintf(stderr, "mroce stat: no running mroce process in %s\n", obs::stat_dir().c_str());
        return 0;
    }
    std::vector<std::string> socks = targets(o);
    if (socks.empty()) {
        std::fprintf(stderr, "mroce stat: %s in %s\n",
                     o.target.empty() ? "no running mroce process" : ("no process " + o.target).c_str(),
                     obs::stat_dir().c_str());
        return 1;
    }
    std::map<std::string, Previous> prev;
    std::map<std::string, uint64_t> last_event;
    std::map<std::string, Json> infos;
    for (uint64_t round = 0;; ++round) {
        bool any = false;
        for (const std::string& s : socks) {
            if (o.prometheus) {
                if (auto a = obs::request(s, "prometheus")) {
                    fmt::print("{}", *a);
                    any = true;
                }
                continue;
            }
            auto a = obs::request(s, fmt::format("json {}", last_event[s]));
            if (!a) continue;
            Json snap = Json::parse(*a, nullptr, false);
            if (snap.is_discarded()) continue;
            any = true;
            for (const Json& e : snap["events"]) last_event[s] = std::max(last_event[s], u64(e, "seq"));
            if (o.events) {
                for (const Json& e : snap["events"]) fmt::print("{}\n", e.dump());
            } else if (o.json) {
                snap["socket"] = s;
                fmt::print("{}\n", snap.dump());
            } else {
                if (!infos.count(s))
                    if (auto i = obs::request(s, "info")) infos[s] = Json::parse(*i, nullptr, false);
                auto it = prev.find(s);
                print_table(s, infos[s], snap, it == prev.end() ? nullptr : &it->second);
                if (!snap["events"].empty()) {
                    fmt::print("  events:\n");
                    size_t shown = 0;
                    const size_t n = snap["events"].size();
                    for (const Json& e : snap["events"])
                        if (n - shown++ <= 10) fmt::print("    {}\n", e.dump());
                }
            }
            prev[s] = Previous{snap, 0};
        }
        std::fflush(stdout);
        if (!any) {
            std::fprintf(stderr, "mroce stat: the process%s ended\n", socks.size() > 1 ? "es" : "");
            return round == 0 ? 1 : 0;
        }
        if (!o.watch || (o.count && round + 1 >= o.count)) return 0;
        if (!o.json && !o.events && !o.prometheus) fmt::print("\n");
        std::this_thread::sleep_for(std::chrono::duration<double>(o.interval_s));
    }
}

}  // namespace

void register_stat(CLI::App& app) {
    auto o = std::make_shared<StatOptions>();
    CLI::App* cmd = app.add_subcommand("stat", "counters and path state of running mroce processes");
    cmd->add_option("target", o->target, "a process id or a stat socket path (default: every process)");
    cmd->add_flag("-l,--list", o->list, "list the processes (endpoints) that can be read");
    cmd->add_flag("-j,--json", o->json, "print the snapshot as JSON (one line per report)");
    cmd->add_flag("--events", o->events, "print the connection/path event log as JSON lines");
    cmd->add_flag("--prometheus", o->prometheus, "print the Prometheus exposition (/metrics)");
    cmd->add_flag("-w,--watch", o->watch, "report again every interval, with rates");
    cmd->add_option("-i,--interval", o->interval_s, "seconds between reports with --watch (1)")
        ->check(CLI::Range(0.05, 3600.0));
    cmd->add_option("-c,--count", o->count, "with --watch: stop after this many reports");
    cmd->callback([o] { std::exit(run_stat(*o)); });
}

}  // namespace mroce::tools
