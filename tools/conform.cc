// tools/conform.cc — the command lines of the conformance suite and its agent
// (docs/conformance.md). Bad input: one line on stderr and exit status 2.
#include "tools/conform.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "api/device.h"
#include "conform/agent/agent.h"
#include "conform/suite.h"

namespace mroce::tools {
namespace {

// The agent's default control port: next to the protocol's default UDP port 4797 ([UDP-1]).
constexpr uint16_t kDefaultControlPort = 4798;

struct ConformOptions {
    std::string target;
    std::vector<std::string> tests;
    std::vector<std::string> groups;
    std::string junit;
    std::string via;
    uint64_t seed = 1;
    int retries = 0;
    bool list = false;
};

int run_conform(const ConformOptions& o) {
    if (o.list) {
        conform::list_tests();
        return 0;
    }
    if (o.target.empty()) {
        std::fprintf(stderr, "mroce conform: a target HOST[:PORT] is required (see --help)\n");
        return 2;
    }
    // HOST alone takes the default control port; the suite speaks IPv4.
    std::string text = o.target;
    if (text.find(':') == std::string::npos) text += ":" + std::to_string(kDefaultControlPort);
    auto agent = api::parse_address(text);
    if (!agent || !agent->is_ipv4() || agent->port == 0) {
        std::fprintf(stderr, "mroce conform: target '%s' is not an IPv4 HOST[:PORT]\n",
                     o.target.c_str());
        return 2;
    }
    conform::RunOptions r;
    r.agent = *agent;
    r.only = o.tests;
    r.groups = o.groups;
    r.junit = o.junit;
    r.via = o.via;
    r.retries = o.retries;
    r.seed = o.seed;
    return conform::run_suite(r);
}

}  // namespace

void register_conform(CLI::App& app) {
    auto opts = std::make_shared<ConformOptions>();
    CLI::App* cmd = app.add_subcommand(
        "conform", "run the conformance suite against an agent (docs/conformance.md)");
    cmd->add_option("target", opts->target,
                    "the agent's control address HOST[:PORT] (default port 4798)");
    cmd->add_option("--test", opts->tests, "run only this test (repeatable; see --list)");
    cmd->add_option("--group", opts->groups, "run only this group (repeatable; see --list)");
    cmd->add_option("--junit", opts->junit, "also write the results as JUnit XML to FILE");
    cmd->add_option("--seed", opts->seed, "seed of the suite's identities and payloads");
    cmd->add_option("--via", opts->via,
                    "send every datagram of the suite through interface IFNAME (e.g. one "
                    "uplink of scripts/testbed, so the suite's own packets avoid a lossy plane)");
    cmd->add_option("--retries", opts->retries,
                    "run a failed test again from a fresh reset, up to N times (default 0; for a "
                    "lossy network, docs/conformance.md)")
        ->check(CLI::Range(0, 5));
    cmd->add_flag("--list", opts->list, "list the tests with their spec ids and exit");
    cmd->callback([opts] { std::exit(run_conform(*opts)); });

    auto agent = std::make_shared<conform::AgentOptions>();
    agent->listen = "127.0.0.1:" + std::to_string(kDefaultControlPort);
    agent->udp = "127.0.0.1:4797";
    CLI::App* a = app.add_subcommand(
        "conform-agent", "serve the conformance control protocol on this implementation");
    a->add_option("--listen", agent->listen,
                  "control address ADDR:PORT (TCP; default 127.0.0.1:4798; port 0: ephemeral)");
    a->add_option("--udp", agent->udp,
                  "the device's UDP address ADDR:PORT (default 127.0.0.1:4797; port 0: ephemeral)");
    a->add_flag("--ack-with-reverse-data", agent->ack_with_reverse_data,
                "a delayed ACK leaves with the next DATA, coalesced where the peer announced "
                "COALESCE (spec [ACK-12], [WIRE-10]; off: the spec's default ACK rule)");
    a->add_flag("--no-short-acks{false}", agent->short_acks,
                "do not announce SHORT_ACK: every ACK keeps its SACK bitmap (spec [ACK-21])");
    a->add_flag("--compact-data", agent->compact_data,
                "announce COMPACT_DATA: WRITEs, READ and atomic DATA leave out recv_seq and "
                "immediate where the peer announces it too (spec [DATA-9]; off by default)");
    a->callback([agent] { std::exit(conform::run_agent(*agent)); });
}

}  // namespace mroce::tools
