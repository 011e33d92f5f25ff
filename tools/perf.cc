// tools/perf.cc — `mroce perf`, a perftest look-alike: `mroce perf` is the server,
// `mroce perf HOST` the client. The two meet on TCP (-p, default 18515), where the client
// sends its options (the server runs with the client's), both exchange their UDP address,
// queue pair numbers, rkey and buffer address, and then run each message size in turn
// (tools/perf_side.h). Both print perftest's tables; the client writes --json.
#include "tools/perf.h"

#include <fmt/core.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

#include "obs/server.h"
#include "tools/perf_check.h"
#include "tools/perf_oob.h"
#include "tools/perf_options.h"
#include "tools/perf_report.h"
#include "tools/perf_side.h"

namespace mroce::tools {
namespace perf {

namespace {

using namespace std::chrono_literals;

// How long the server waits for a client, and either side for a control message.
constexpr auto kAcceptWait = 120s;
constexpr auto kConnectWait = 5s;
constexpr auto kMessageWait = std::chrono::milliseconds(30'000);

Json options_json(const Options& o) {
    Json j;
    j["verb"] = to_string(o.verb);
    j["mode"] = o.mode == Mode::kBandwidth ? "bw" : "lat";
    j["raw"] = o.raw;
    j["all_sizes"] = o.all_sizes;
    j["size"] = o.size;
    j["iterations"] = o.iterations;
    j["duration_s"] = o.duration_s;
    j["qps"] = o.qps;
    j["tx_depth"] = o.tx_depth;
    j["paths"] = o.paths;
    j["window_kib"] = o.window_kib;
    j["cc"] = o.cc;
    j["path_selection"] = o.path_selection;
    j["path_run"] = o.path_run;
    j["rate_hint"] = o.rate_hint;
    j["pacing"] = o.pacing;
    j["integrity"] = o.integrity;
    j["check"] = o.check;
    j["tc"] = o.tc;
    j["dscp_map"] = o.dscp_map;
    j["line_rate_gbps"] = o.line_rate_gbps;
    j["report_gbits"] = o.report_gbits;
    j["offload"] = o.offload;
    j["busy_poll"] = o.busy_poll;
    j["stages"] = o.stages;
    return j;
}

// OptionReader reads the client's options (JSON from the network): a field may be absent
// (its default) but, when present, must have its type; the first field that does not is
// the error. nlohmann's value() would throw instead, which ended the server (issue 17,
// finding 10).
class OptionReader {
public:
    explicit OptionReader(const Json& j) : j_(j) {}
    const std::string& error() const { return error_; }

    bool boolean(const char* key, bool fallback) {
        const Json* v = find(key);
        if (!v) return fallback;
        if (!v->is_boolean()) return wrong(key, "true or false", fallback);
        return v->get<bool>();
    }
    uint64_t u64(const char* key, uint64_t fallback, uint64_t max = UINT64_MAX) {
        const Json* v = find(key);
        if (!v) return fallback;
        if (!v->is_number_unsigned() || v->get<uint64_t>() > max)
            return wrong(key, "an unsigned integer up to " + std::to_string(max), fallback);
        return v->get<uint64_t>();
    }
    uint32_t u32(const char* key, uint32_t fallback) {
        return static_cast<uint32_t>(u64(key, fallback, UINT32_MAX));
    }
    double number(const char* key, double fallback) {
        const Json* v = find(key);
        if (!v) return fallback;
        if (!v->is_number()) return wrong(key, "a number", fallback);
        return v->get<double>();
    }
    std::string text(const char* key, std::string fallback) {
        const Json* v = find(key);
        if (!v) return fallback;
        if (!v->is_string()) return wrong(key, "a string", fallback);
        return v->get<std::string>();
    }
    std::vector<int> ints(const char* key) {
        const Json* v = find(key);
        if (!v) return {};
        bool ok = v->is_array();
        for (size_t i = 0; ok && i < v->size(); ++i)
            ok = (*v)[i].is_number_integer() && (*v)[i].get<int64_t>() >= INT32_MIN &&
                 (*v)[i].get<int64_t>() <= INT32_MAX;
        if (!ok) return wrong(key, "a list of integers", std::vector<int>{});
        return v->get<std::vector<int>>();
    }

private:
    const Json* find(const char* key) const {
        const auto it = j_.find(key);
        return it == j_.end() ? nullptr : &*it;
    }
    template <class T>
    T wrong(const char* key, const std::string& what, T fallback) {
        if (error_.empty()) error_ = std::string("the client's option '") + key + "' is not " + what;
        return fallback;
    }

    const Json& j_;
    std::string error_;
};

// adopt_options takes the client's options into the server's; returns an error line or "".
std::string adopt_options(const Json& j, Options& o) {
    if (!j.is_object()) return "the client's options are malformed";
    OptionReader r(j);
    const auto verb = parse_verb(r.text("verb", ""));
    if (!r.error().empty()) return r.error();
    if (!verb) return "the client asked for an unknown verb";
    o.verb = *verb;
    o.mode = r.text("mode", "bw") == "lat" ? Mode::kLatency : Mode::kBandwidth;
    o.raw = r.boolean("raw", false);
    o.all_sizes = r.boolean("all_sizes", false);
    o.size = r.u32("size", 0);
    o.iterations = r.u64("iterations", 0);
    o.duration_s = r.number("duration_s", 0.0);
    o.qps = r.u32("qps", 1);
    o.tx_depth = r.u32("tx_depth", 128);
    o.paths = r.u32("paths", 8);
    o.window_kib = r.u32("window_kib", 0);
    o.cc = r.text("cc", std::string{});
    o.path_selection = r.text("path_selection", std::string{});
    o.path_run = r.u32("path_run", 0);
    o.rate_hint = r.boolean("rate_hint", true);
    o.pacing = r.boolean("pacing", true);
    o.integrity = r.boolean("integrity", false);
    // --check: both sides must generate and verify the same pattern. A server started with
    // --check verifies, so it refuses a client that would not fill the pattern; a server
    // without it follows the client, as for every other option.
    const bool client_checks = r.boolean("check", false);
    if (o.check && !client_checks && r.error().empty())
        return "this server runs --check and the client does not: give both --check";
    o.check = client_checks;
    o.tc = r.u32("tc", 0);
    o.dscp_map = r.ints("dscp_map");
    o.line_rate_gbps = r.number("line_rate_gbps", 0.0);
    o.report_gbits = r.boolean("report_gbits", false);
    o.offload = r.boolean("offload", true);
    o.busy_poll = r.boolean("busy_poll", false);
    o.stages = r.boolean("stages", false);
    if (!r.error().empty()) return r.error();
    if (!o.cc.empty() && o.cc != "fixed" && o.cc != "aimd") return "the client asked for an unknown --cc";
    if (!o.path_selection.empty() && o.path_selection != "round_robin" &&
        o.path_selection != "room")
        return "the client asked for an unknown --path-selection";
    if (o.path_run > 64) return "the client asked for a --path-run above 64";
    if (auto why = check_cc_options(o); !why.empty()) return "the client's " + why;
    if (o.qps < 1 || o.qps > 1024 || o.paths < 1 || o.paths > 256 || o.size > (1u << 30) ||
        o.tx_depth < 1 || o.tx_depth > 65536 || o.duration_s < 0 || o.duration_s > 86400 ||
        o.iterations > (uint64_t{1} << 40) || o.window_kib > 1024)
        return "the client's options are out of range";
    if (auto why = verb_unavailable(o.verb, o.raw)) return *why;
    if (auto why = check_check_options(o); !why.empty()) return "the client's " + why;
    return "";
}

// Session runs one side of the control protocol; every failure is one line in error_.
class Session {
public:
    explicit Session(Options o) : o_(std::move(o)), server_(o_.host.empty()) {}

    // run plays the whole session; returns the exit status.
    int run() {
        try {
            return run_session();
        } catch (const Json::exception& e) {
            // Backstop: a control message whose fields have types we did not check (the
            // setup or result details) ends the session with one line, never an abort.
            rejected_ = server_ && in_handshake_;
            return fail(std::string("malformed control message: ") + e.what());
        }
    }

    // rejected_client: this server turned a client away for what it sent before the run
    // began (a malformed message, bad options); it may serve the next one.
    bool rejected_client() const { return rejected_; }

private:
    int run_session() {
        if (auto why = verb_unavailable(o_.verb, o_.raw)) return fail(*why);
        if (auto why = check_check_options(o_); !server_ && !why.empty()) return fail(why);
        auto oob = server_ ? Oob::listen(o_.port, kAcceptWait, error_)
                           : Oob::connect(o_.host, o_.port, kConnectWait, error_);
        if (!oob) return fail(error_);
        oob_ = std::make_unique<Oob>(std::move(*oob));
        in_handshake_ = true;
        if (!handshake()) {
            rejected_ = server_ && (rejected_ || bad_message_ || oob_->malformed());
            return fail(error_);
        }
        in_handshake_ = false;
        print_banner(o_, server_, side_->offload(), side_->local_line(), side_->remote_line());
        // With -i the client prints interval rows while a size runs, and the table's
        // head again above each size's row (so the row sits under its own columns).
        const bool intervals = !server_ && o_.interval_s > 0;
        if (!intervals) print_table_head(o_);
        // Now, not after the first row (a -D run's only one): a watcher learns the UDP
        // addresses while the run goes on (tests/perf/hello_flood_test.py).
        std::fflush(stdout);
        std::vector<Json> results;
        for (uint32_t size : o_.sizes()) {
            auto r = server_ ? serve_one(size) : run_one(size);
            if (!r) return fail(error_);
            if (intervals) print_table_head(o_);
            print_row(o_, *r);
            std::fflush(stdout);
            results.push_back(std::move(*r));
        }
        print_rule();
        // One size: its counters under the table. A sweep (-a) prints the table only, as
        // perftest does, and one line that says whether anything was lost; each size's
        // counters are in the JSON (--json / --out_json).
        if (results.size() == 1) print_counters(results.front());
        else print_sweep_summary(results);
        if (!server_) {
            (void)oob_->send({{"type", "bye"}});
            if (!o_.json_path.empty() && !write_json(results)) return fail(error_);
        } else {
            (void)expect("bye");
        }
        // Both sides judge from the same rows (each has both tallies), after the exchange
        // is over, so neither leaves the other waiting.
        if (o_.check && !check_verdict(results)) return 1;
        return 0;
    }

    int fail(const std::string& why) {
        std::fflush(stdout);
        std::fprintf(stderr, "mroce perf: %s\n", why.c_str());
        // Tell the peer, so it stops with the reason instead of waiting.
        if (oob_ && (oob_->alive() || oob_->malformed()))
            (void)oob_->send({{"type", "error"}, {"message", why}});
        return 1;
    }

    // expect waits for a message of `type`, keeping the engine moving meanwhile.
    std::optional<Json> expect(const std::string& type) {
        auto idle = [this] {
            if (side_) side_->idle();
        };
        auto m = oob_->receive(kMessageWait, idle);
        if (!m) {
            error_ = oob_->error();
            return std::nullopt;
        }
        const std::string got = message_type(*m);
        if (got == "error") {
            const auto why = m->find("message");
            error_ = "the peer failed: " +
                     (why != m->end() && why->is_string() ? why->get<std::string>() : "?");
            return std::nullopt;
        }
        if (got != type) {
            error_ = "expected a '" + type + "' control message, got: " + m->dump().substr(0, 80);
            bad_message_ = true;
            return std::nullopt;
        }
        return m;
    }

    bool make_side() {
        side_ = o_.raw ? make_raw_side(o_, *oob_, server_, error_)
                       : make_rdma_side(o_, *oob_, server_, error_);
        return side_ != nullptr;
    }

    bool handshake() {
        if (!server_) {
            if (!oob_->send({{"type", "hello"}, {"options", options_json(o_)}})) {
                error_ = oob_->error();
                return false;
            }
            if (!make_side()) return false;
            auto setup = expect("setup");
            if (!setup || !side_->connect((*setup)["side"], error_)) return false;
            if (o_.check && !server_verifies(*setup)) return false;
            if (!oob_->send({{"type", "setup"}, {"side", side_->setup()}})) {
                error_ = oob_->error();
                return false;
            }
            return expect("ready").has_value();
        }
        auto hello = expect("hello");
        if (!hello) return false;
        const auto options = hello->find("options");
        error_ = options == hello->end() ? "the client sent no options"
                                         : adopt_options(*options, o_);
        if (!error_.empty()) {
            rejected_ = true;
            return false;
        }
        if (!make_side()) return false;
        if (!oob_->send({{"type", "setup"}, {"side", side_->setup()}})) {
            error_ = oob_->error();
            return false;
        }
        auto setup = expect("setup");
        if (!setup || !side_->connect((*setup)["side"], error_)) return false;
        if (!oob_->send({{"type", "ready"}})) {
            error_ = oob_->error();
            return false;
        }
        return true;
    }

    // server_verifies: with --check, the server's setup must confirm that it fills and
    // verifies the same pattern; a server that ignores "check" (an older mroce) would
    // verify nothing while the run looked clean.
    bool server_verifies(const Json& setup) {
        const auto side = setup.find("side");
        const Json* v = nullptr;
        if (side != setup.end() && side->is_object() && side->contains("check")) v = &(*side)["check"];
        if (v && v->is_number_unsigned() && v->get<uint64_t>() == kPatternVersion) return true;
        error_ = fmt::format("the server does not verify --check's pattern (version {}): it must "
                             "be an mroce perf that knows --check and the same pattern",
                             kPatternVersion);
        return false;
    }

    // check_verdict prints what --check verified per size and side; returns false (after a
    // one-line error per failing side) if any byte differed or a message was missing.
    bool check_verdict(const std::vector<Json>& results) {
        bool ok = true;
        for (const Json& r : results) {
            for (const char* who : {"client", "server"}) {
                const char* key = std::string(who) == "client" ? "check" : "server_check";
                const auto t = r.find(key);
                if (t == r.end()) {
                    std::fprintf(stderr, "mroce perf: --check: no tally from the %s\n", who);
                    ok = false;
                    continue;
                }
                const std::string why = check_failure(*t, who);
                if (!why.empty()) {
                    std::fprintf(stderr, "mroce perf: #bytes %u: %s\n", r.value("MsgSize", 0u),
                                 why.c_str());
                    ok = false;
                } else if (t->value("messages", uint64_t{0}) > 0) {
                    fmt::print(" --check #bytes {}: the {} verified {} messages, {} bytes: no mismatch\n",
                               r.value("MsgSize", 0u), who, t->value("messages", uint64_t{0}),
                               t->value("bytes", uint64_t{0}));
                }
            }
        }
        std::fflush(stdout);
        return ok;
    }

    std::optional<Json> run_one(uint32_t size) {
        if (!oob_->send({{"type", "run"}, {"size", size}}) || !expect("go")) {
            if (error_.empty()) error_ = oob_->error();
            return std::nullopt;
        }
        auto mine = side_->run(size, error_);
        if (!mine) return std::nullopt;
        // --check: the server learns how many messages each queue pair sent, so it waits
        // for the last of them and counts any that never arrived.
        Json end = {{"type", "end"}};
        if (mine->contains("check_sent")) {
            end["sent"] = (*mine)["check_sent"];
            mine->erase("check_sent");
        }
        if (!oob_->send(end)) {
            error_ = oob_->error();
            return std::nullopt;
        }
        auto done = expect("done");
        if (!done) return std::nullopt;
        Json r = side_->finish(size, *mine, (*done)["server"]);
        if (!oob_->send({{"type", "result"}, {"result", r}})) {
            error_ = oob_->error();
            return std::nullopt;
        }
        return r;
    }

    std::optional<Json> serve_one(uint32_t size) {
        auto run = expect("run");
        if (!run) return std::nullopt;
        const auto got = run->find("size");
        if (got == run->end() || !got->is_number_unsigned() || got->get<uint64_t>() != size) {
            error_ = "the client runs a different size sequence";
            return std::nullopt;
        }
        side_->prepare(size);  // before "go": a READ may come at once
        if (!oob_->send({{"type", "go"}})) {
            error_ = oob_->error();
            return std::nullopt;
        }
        auto srv = side_->serve(size, error_);
        if (!srv) return std::nullopt;
        if (!oob_->send({{"type", "done"}, {"server", *srv}})) {
            error_ = oob_->error();
            return std::nullopt;
        }
        auto result = expect("result");
        if (!result) return std::nullopt;
        return (*result)["result"];
    }

    bool write_json(const std::vector<Json>& results) {
        Json out;
        out["test_info"] = test_info(o_, side_->local_line(), side_->remote_line(), side_->offload());
        // One shape with or without -a: an array of per-size rows, in size order
        // (tools/README.md, "JSON output"). perftest writes one object and, under -a,
        // rewrites the file per size so only the last survives; an array keeps every size.
        out["results"] = Json(results);
        std::ofstream f(o_.json_path);
        if (f) f << out.dump(2) << "\n";
        if (!f) {
            error_ = "cannot write " + o_.json_path + ": " + std::strerror(errno);
            return false;
        }
        return true;
    }

    Options o_;
    bool server_;
    std::string error_;
    bool bad_message_ = false;  // expect() got a message of the wrong (or no) type
    bool in_handshake_ = false;
    bool rejected_ = false;     // see rejected_client
    std::unique_ptr<Oob> oob_;
    std::unique_ptr<Side> side_;
};

}  // namespace

std::string offload_name(bool gso, bool gro, bool asked) {
    if (!asked) return "none (--no-offload)";
    if (gso && gro) return "GSO+GRO";
    if (gso) return "GSO";
    if (gro) return "GRO";
    return "none (kernel)";
}

}  // namespace perf

void register_perf(CLI::App& app) {
    using perf::Options;
    auto o = std::make_shared<Options>();
    auto verb = std::make_shared<std::string>("write");
    auto lat = std::make_shared<bool>(false);
    CLI::App* cmd = app.add_subcommand(
        "perf", "perftest-style bandwidth and latency between two hosts: `mroce perf` is the "
                "server, `mroce perf HOST` the client");
    cmd->add_option("host", o->host, "server to connect to (omit to be the server)");
    cmd->add_option("-p,--port", o->port, "TCP port of the out-of-band exchange (18515)")
        ->check(CLI::Range(1, 65535));
    cmd->add_option("-s,--size", o->size, "message size in bytes (bw 65536, lat 2); 64K, 1M work")
        ->transform(CLI::AsSizeValue(false))
        ->check(CLI::Range(1u, 1u << 30));
    cmd->add_option("-n,--iters", o->iterations, "messages per queue pair (write bw 5000, else 1000)")
        ->check(CLI::Range(uint64_t{5}, uint64_t{1} << 40));
    cmd->add_option("-D,--duration", o->duration_s, "run for this many seconds instead of -n")
        ->check(CLI::Range(0.01, 86400.0));
    cmd->add_option("-q,--qp", o->qps, "queue pairs (streams), all on one connection")
        ->check(CLI::Range(1, 1024));
    cmd->add_option("-t,--tx-depth", o->tx_depth, "outstanding messages per queue pair (128)")
        ->check(CLI::Range(1, 65536));
    cmd->add_flag("-a,--all", o->all_sizes, "run every size 2 .. 2^23 in powers of two");
    cmd->add_flag("--report_gbits", o->report_gbits, "report Gb/sec instead of MB/sec");
    auto ignored = std::make_shared<bool>(false);
    cmd->add_flag("-F", *ignored, "accepted and ignored, as perftest's cpufreq-warning switch");
    cmd->add_option("--paths", o->paths, "MetaRoCE paths (UDP source ports) per connection (8)")
        ->check(CLI::Range(1, 256));
    cmd->add_option("--window-kib", o->window_kib,
                    "fixed congestion window per path in KiB (default: fitted to the "
                    "receive buffer, at most 256 packets; api/udp_tuning.h)")
        ->check(CLI::Range(4, 1024));
    cmd->add_option("--cc", o->cc,
                    "congestion control: fixed (spec [CC-1]) or aimd (ECN AIMD, spec 9.1); "
                    "the window above is AIMD's cap")
        ->check(CLI::IsMember({"fixed", "aimd"}));
    cmd->add_option("--path-selection", o->path_selection,
                    "which path new data goes to: round_robin (spec [PATH-10], the default) or "
                    "room (round-robin over the paths with at least half the most window "
                    "room, [PATH-14])")
        ->check(CLI::IsMember({"round_robin", "room"}));
    cmd->add_option("--path-run", o->path_run,
                    "consecutive segments a path takes per round-robin turn (spec [PATH-10]; "
                    "default 15 over UDP: one GSO super-packet)")
        ->check(CLI::Range(1u, 64u));
    auto no_hint = std::make_shared<bool>(false);
    cmd->add_flag("--no-hint", *no_hint,
                  "the receiver sends no rate hint (spec 9.2); the sender paces at its window rate");
    auto no_pacing = std::make_shared<bool>(false);
    cmd->add_flag("--no-pacing", *no_pacing, "do not pace: send as the window and ACKs allow");
    cmd->add_flag("--check", o->check,
                  "fill every message with a pattern of (queue pair, message, offset) and verify "
                  "every byte received (READ: by the requester); any mismatch is reported and "
                  "fails the run (the server with --check requires it of the client)");
    auto integrity = std::make_shared<bool>(false);
    cmd->add_flag("--integrity", *integrity,
                  "announce the CRC32C integrity trailer (spec 4.9, off by default; both sides follow the client)");
    cmd->add_option("--tc", o->tc, "traffic class (service level) of every queue pair, 0..7 (0)");
    cmd->add_option("--dscp-map", o->dscp_map,
                    "DSCP of each traffic class 0..7, 8 comma-separated values 0..63 "
                    "(default 0,8,16,...,56: CS0..CS7)")
        ->delimiter(',');
    cmd->add_option("--line-rate", o->line_rate_gbps,
                    "port rate in Gbit/s the receiver's inbound capacity derives from "
                    "(default: the engine's, 100)");
    cmd->add_option("--plane-ifs", o->plane_ifs,
                    "one network interface per plane, comma-separated (this side only): "
                    "the paths are spread evenly over them and each stays on its plane")
        ->delimiter(',')
        ->allow_extra_args(false);  // one argument: the next word is the host, not a plane
    cmd->add_option("--verb", *verb, "write | send | read | atomic (FETCH_ADD, 8 bytes)")
        ->check(CLI::IsMember({"write", "send", "read", "atomic"}));
    auto bw_flag = std::make_shared<bool>(false);
    auto* bw = cmd->add_flag("--bw", *bw_flag, "measure bandwidth (the default)");
    cmd->add_flag("--lat", *lat, "measure latency (ping-pong)")->excludes(bw);
    cmd->add_flag("--raw", o->raw, "the same traffic as plain UDP with no protocol (baseline)");
    auto no_offload = std::make_shared<bool>(false);
    cmd->add_flag("--no-offload", *no_offload, "do not use UDP GSO/GRO");
    auto* json_opt = cmd->add_option("--json", o->json_path, "write the results as JSON to FILE (client)");
    auto out_json_file = std::make_shared<std::string>();
    cmd->add_option("--out_json_file", *out_json_file, "perftest's name for --json FILE")->excludes(json_opt);
    auto out_json = std::make_shared<bool>(false);
    cmd->add_flag("--out_json", *out_json,
                  "as perftest: write the results as JSON, to --out_json_file or perftest_out.json")
        ->excludes(json_opt);
    cmd->add_option("-i,--interval", o->interval_s,
                    "print a row every SECONDS while running, as iperf3 (client; also in --json "
                    "\"intervals\")")
        ->check(CLI::Range(0.01, 86400.0));
    cmd->add_flag("--busy-poll", o->busy_poll,
                  "both sides spin on their sockets while waiting (lower latency, a core each; "
                  "default: poll briefly, then sleep)");
    cmd->add_flag("--stages", o->stages,
                  "latency: time each stage of both sides (post, engine, send, receive, "
                  "completion) into the JSON, for scripts/latency-stages.py");
    cmd->add_option("--threads", o->threads,
                    "this side's device runs N shards, a progress thread each (connections "
                    "placed by a hash of the peer; this side only)")
        ->check(CLI::Range(1, 16));
    cmd->add_option("--metrics", o->metrics,
                    "serve Prometheus /metrics on ADDR:PORT while running (this side)");
    // CLI11 writes into these when it parses, so the callback keeps them alive.
    cmd->callback([o, verb, lat, no_offload, ignored, bw_flag, no_hint, no_pacing, integrity,
                   out_json, out_json_file] {
        if (!out_json_file->empty()) o->json_path = *out_json_file;
        else if (*out_json) o->json_path = "perftest_out.json";  // perftest's default
        o->offload = !*no_offload;
        o->rate_hint = !*no_hint;
        o->pacing = !*no_pacing;
        o->integrity = *integrity;
        if (auto why = perf::check_cc_options(*o); !why.empty()) {
            std::fprintf(stderr, "mroce perf: %s\n", why.c_str());
            std::exit(2);
        }
        o->verb = *perf::parse_verb(*verb);
        o->mode = *lat ? perf::Mode::kLatency : perf::Mode::kBandwidth;
        if (o->all_sizes && o->size != 0) {
            std::fprintf(stderr, "mroce perf: -a and -s exclude each other\n");
            std::exit(2);
        }
        if (o->host.empty() && !o->json_path.empty()) {
            std::fprintf(stderr, "mroce perf: --json is written by the client (give a host)\n");
            std::exit(2);
        }
        if (o->host.empty() && o->interval_s > 0) {
            std::fprintf(stderr, "mroce perf: -i rows are printed by the client (give a host)\n");
            std::exit(2);
        }
        if (!o->metrics.empty() && !obs::parse_listen_address(o->metrics)) {
            std::fprintf(stderr, "mroce perf: --metrics %s: not ADDR:PORT (e.g. 127.0.0.1:9464)\n",
                         o->metrics.c_str());
            std::exit(2);
        }
        if (o->raw && !o->metrics.empty()) {
            std::fprintf(stderr, "mroce perf: --metrics needs the protocol (not --raw)\n");
            std::exit(2);
        }
        if (auto why = perf::check_writable(o->json_path); !why.empty()) {
            // Before the run, not after a long one.
            std::fprintf(stderr, "mroce perf: --json %s: %s\n", o->json_path.c_str(), why.c_str());
            std::exit(2);
        }
        int rc;
        for (;;) {
            perf::Session session(*o);  // closed (devices, sockets) before exiting
            rc = session.run();
            // A server that turned a client away for bad input serves the next one: one
            // line from anyone who can reach the port must not end it (issue 17, 10).
            if (!o->host.empty() || !session.rejected_client()) break;
        }
        std::exit(rc);
    });
}

}  // namespace mroce::tools
