// conform/suite.h — the conformance suite: test cases, the context a test runs in, and the
// runner that prints the table and the JUnit XML (docs/conformance.md §3).
//
// A test is a function that drives the target through the agent (ControlClient) and speaks
// to it on the wire (Peer). It fails by throwing Failure (check() does), skips by throwing
// Skipped; returning is a pass. Every test names the spec ids it checks.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "conform/control.h"
#include "conform/peer.h"
#include "util/address.h"

namespace mroce::conform {

struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};
struct Skipped : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// check fails the running test with the formatted message unless `ok`.
template <typename... Args>
void check(bool ok, fmt::format_string<Args...> f, Args&&... args) {
    if (!ok) throw Failure(fmt::format(f, std::forward<Args>(args)...));
}

// Target: what the agent's `hello` reported.
struct Target {
    Address udp;
    uint32_t max_payload = 0;
    bool endpoint_counters = false;
};

// Context: what every test gets. The seed makes the suite's identities and payloads
// reproducible; each test derives its own from it.
struct Context {
    ControlClient& control;
    Address local_ip;  // our address towards the target, port 0
    Target target;
    uint64_t seed = 1;
    uint32_t test_index = 0;
    unsigned via_ifindex = 0;  // the interface our datagrams leave through (--via), 0: routed
    // The test's peer (made by Fixture). The runner fails a test whose peer recorded a
    // violation, even if the test itself passed, then drops the peer.
    std::optional<Peer> peer;
};

struct TestCase {
    const char* name;     // group.name
    const char* spec_ids; // "[CONN-4] [ERR-7]": what it checks (scripts/spec_coverage.py)
    const char* summary;  // one line: what it does
    void (*run)(Context&);
};

// all_tests: every test, in the order they run (the groups' registration functions).
std::vector<TestCase> all_tests();
void add_header_tests(std::vector<TestCase>& out);
void add_handshake_tests(std::vector<TestCase>& out);
void add_admission_tests(std::vector<TestCase>& out);
void add_placement_tests(std::vector<TestCase>& out);
void add_ack_tests(std::vector<TestCase>& out);
void add_integrity_tests(std::vector<TestCase>& out);
void add_coalesce_tests(std::vector<TestCase>& out);
void add_short_ack_tests(std::vector<TestCase>& out);
void add_compact_tests(std::vector<TestCase>& out);
void add_rdma_tests(std::vector<TestCase>& out);
void add_protection_tests(std::vector<TestCase>& out);
void add_sender_tests(std::vector<TestCase>& out);
void add_requester_tests(std::vector<TestCase>& out);
void add_stream_tests(std::vector<TestCase>& out);
void add_close_tests(std::vector<TestCase>& out);
void add_proof_tests(std::vector<TestCase>& out);

enum class Outcome { kPass, kFail, kSkip };

struct TestResult {
    const TestCase* test = nullptr;
    Outcome outcome = Outcome::kPass;
    std::string reason;
    double seconds = 0;
    int attempts = 1;           // > 1: it failed first and was run again (--retries)
    std::string first_failure;  // the reason of its first failed attempt
};

struct RunOptions {
    Address agent;                 // the control endpoint
    std::vector<std::string> only; // test names (--test)
    std::vector<std::string> groups;  // group names (--group)
    std::string junit;             // JUnit XML file, or empty
    std::string via;               // send every datagram through this interface, or empty
    uint64_t seed = 1;
    // retries: a failed test runs again from a fresh reset up to this many times, and passes
    // if an attempt passes (for a path with loss the suite cannot keep off the target's
    // packets; docs/conformance.md §4). 0 on loopback: one failure fails.
    int retries = 0;
};

// run_suite runs the selected tests and prints the table. Returns the process exit status:
// 0 if every test that ran passed (skips allowed), 1 if one failed or the agent cannot be
// reached, 2 for a selection that names no test (tools/README.md's exit statuses).
int run_suite(const RunOptions& opts);
// list_tests prints every test with its group and spec ids.
void list_tests();

}  // namespace mroce::conform
