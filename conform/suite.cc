// conform/suite.cc — test selection, the run loop, the result table and JUnit XML.
#include "conform/suite.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <net/if.h>
#include <set>
#include <string_view>

namespace mroce::conform {

std::vector<TestCase> all_tests() {
    std::vector<TestCase> t;
    add_header_tests(t);
    add_handshake_tests(t);
    add_admission_tests(t);
    add_placement_tests(t);
    add_ack_tests(t);
    add_integrity_tests(t);
    add_coalesce_tests(t);
    add_short_ack_tests(t);
    add_compact_tests(t);
    add_rdma_tests(t);
    add_protection_tests(t);
    add_sender_tests(t);
    add_requester_tests(t);
    add_stream_tests(t);
    add_close_tests(t);
    add_proof_tests(t);
    return t;
}

namespace {

std::string group_of(const char* name) {
    const std::string s(name);
    return s.substr(0, s.find('.'));
}

const char* outcome_name(Outcome o) {
    switch (o) {
        case Outcome::kPass: return "PASS";
        case Outcome::kFail: return "FAIL";
        case Outcome::kSkip: return "SKIP";
    }
    return "?";
}

std::string xml_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
}

bool write_junit(const std::string& path, const std::vector<TestResult>& results) {
    std::ofstream f(path);
    if (!f) return false;
    size_t failures = 0, skipped = 0;
    double total = 0;
    for (const auto& r : results) {
        failures += r.outcome == Outcome::kFail;
        skipped += r.outcome == Outcome::kSkip;
        total += r.seconds;
    }
    f << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << fmt::format("<testsuite name=\"mroce-conform\" tests=\"{}\" failures=\"{}\" errors=\"0\" "
                     "skipped=\"{}\" time=\"{:.3f}\">\n",
                     results.size(), failures, skipped, total);
    for (const auto& r : results) {
        f << fmt::format("  <testcase classname=\"conform.{}\" name=\"{}\" time=\"{:.3f}\">\n",
                         xml_escape(group_of(r.test->name)), xml_escape(r.test->name), r.seconds);
        f << fmt::format("    <properties><property name=\"spec_ids\" value=\"{}\"/>",
                         xml_escape(r.test->spec_ids));
        if (r.attempts > 1)
            f << fmt::format("<property name=\"attempts\" value=\"{}\"/>"
                             "<property name=\"first_failure\" value=\"{}\"/>",
                             r.attempts, xml_escape(r.first_failure));
        f << "</properties>\n";
        if (r.outcome == Outcome::kFail)
            f << fmt::format("    <failure message=\"{}\"/>\n", xml_escape(r.reason));
        else if (r.outcome == Outcome::kSkip)
            f << fmt::format("    <skipped message=\"{}\"/>\n", xml_escape(r.reason));
        f << "  </testcase>\n";
    }
    f << "</testsuite>\n";
    return static_cast<bool>(f);
}

TestResult run_one(const TestCase& t, Context& ctx) {
    TestResult r;
    r.test = &t;
    const auto start = std::chrono::steady_clock::now();
    try {
        t.run(ctx);
        if (ctx.peer && !ctx.peer->violations().empty()) {
            r.outcome = Outcome::kFail;
            r.reason = "target sent a bad packet: " + ctx.peer->violations().front();
        }
    } catch (const Failure& e) {
        r.outcome = Outcome::kFail;
        r.reason = e.what();
    } catch (const Skipped& e) {
        r.outcome = Outcome::kSkip;
        r.reason = e.what();
    } catch (const ControlError& e) {
        r.outcome = Outcome::kFail;
        r.reason = std::string("control: ") + e.what();
    } catch (const std::exception& e) {
        r.outcome = Outcome::kFail;
        r.reason = std::string("error: ") + e.what();
    }
    // A failure that also broke the wire format says so: the first bad packet is the clue.
    if (r.outcome == Outcome::kFail && ctx.peer && !ctx.peer->violations().empty() &&
        r.reason.find("bad packet") == std::string::npos)
        r.reason += "; target also sent a bad packet: " + ctx.peer->violations().front();
    ctx.peer.reset();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
}

}  // namespace

void list_tests() {
    for (const auto& t : all_tests())
        fmt::print("{:<36} {:<44} {}\n", t.name, t.spec_ids, t.summary);
}

int run_suite(const RunOptions& opts) {
    const auto tests = all_tests();
    std::set<std::string> names, groups;
    for (const auto& t : tests) {
        names.insert(t.name);
        groups.insert(group_of(t.name));
    }
    for (const auto& n : opts.only)
        if (!names.count(n)) {
            fmt::print(stderr, "mroce conform: no test named '{}' (see --list)\n", n);
            return 2;
        }
    for (const auto& g : opts.groups)
        if (!groups.count(g)) {
            fmt::print(stderr, "mroce conform: no group named '{}' (see --list)\n", g);
            return 2;
        }
    std::string why;
    auto control = ControlClient::connect(opts.agent, &why);
    if (!control) {  // a peer unreachable: a run that failed (tools/README.md), not a usage error
        fmt::print(stderr, "mroce conform: {}\n", why);
        return 1;
    }
    Context ctx{*control, Address{}, Target{}, opts.seed};
    std::optional<Address> udp;
    try {
        const auto hello = control->call("hello");
        ctx.target.max_payload = hello.value("max_payload", 0u);
        ctx.target.endpoint_counters = hello.value("endpoint_counters", false);
        udp = parse_ipv4_endpoint(hello.value("udp", ""));
    } catch (const ControlError& e) {
        fmt::print(stderr, "mroce conform: {}\n", e.what());
        return 1;
    }
    if (!udp) {
        fmt::print(stderr, "mroce conform: the agent's hello names no IPv4 udp HOST:PORT\n");
        return 1;
    }
    // Our address is the one towards the target's endpoint, which need not be the agent's:
    // the control connection may run over another network (a management link).
    auto local = local_address_towards(*udp);
    if (!local) {
        fmt::print(stderr, "mroce conform: no local IPv4 address towards {}\n", udp->to_string());
        return 2;
    }
    ctx.local_ip = *local;
    if (!opts.via.empty()) {
        ctx.via_ifindex = if_nametoindex(opts.via.c_str());
        if (ctx.via_ifindex == 0) {
            fmt::print(stderr, "mroce conform: --via: no interface named '{}'\n", opts.via);
            return 2;
        }
    }

    std::vector<TestResult> results;
    // The spec ids column fits most lists; a longer one pushes its row's result right.
    size_t ids_width = 8;
    for (const auto& t : tests) ids_width = std::max(ids_width, std::string_view(t.spec_ids).size());
    ids_width = std::min<size_t>(ids_width, 56);
    fmt::print("{:<36} {:<{}} {:<4}  {}\n", "test", "spec ids", ids_width, "", "reason");
    for (const auto& t : tests) {
        const bool by_name = std::find(opts.only.begin(), opts.only.end(), t.name) != opts.only.end();
        const bool by_group =
            std::find(opts.groups.begin(), opts.groups.end(), group_of(t.name)) != opts.groups.end();
        if ((!opts.only.empty() || !opts.groups.empty()) && !by_name && !by_group) {
            ++ctx.test_index;
            continue;
        }
        auto r = run_one(t, ctx);
        for (int retry = 0; r.outcome == Outcome::kFail && retry < opts.retries; ++retry) {
            const std::string first = r.first_failure.empty() ? r.reason : r.first_failure;
            const int attempts = r.attempts + 1;
            r = run_one(t, ctx);
            r.attempts = attempts;
            r.first_failure = first;
        }
        ++ctx.test_index;
        const std::string reason =
            r.attempts > 1 && r.outcome == Outcome::kPass
                ? fmt::format("passed at attempt {}; first: {}", r.attempts, r.first_failure)
                : r.reason;
        fmt::print("{:<36} {:<{}} {:<4}  {}\n", t.name, t.spec_ids, ids_width, outcome_name(r.outcome),
                   reason);
        std::fflush(stdout);
        results.push_back(std::move(r));
    }
    size_t pass = 0, fail = 0, skip = 0;
    for (const auto& r : results) {
        pass += r.outcome == Outcome::kPass;
        fail += r.outcome == Outcome::kFail;
        skip += r.outcome == Outcome::kSkip;
    }
    fmt::print("conform: {} passed, {} failed, {} skipped (seed {})\n", pass, fail, skip, opts.seed);
    if (opts.retries > 0) {
        size_t retried = 0;
        for (const auto& r : results) retried += r.attempts > 1 && r.outcome == Outcome::kPass;
        fmt::print("conform: {} passed only at a later attempt (--retries {})\n", retried, opts.retries);
    }
    if (!opts.junit.empty() && !write_junit(opts.junit, results)) {
        fmt::print(stderr, "mroce conform: cannot write {}\n", opts.junit);
        return 2;
    }
    return fail ? 1 : 0;
}

}  // namespace mroce::conform
