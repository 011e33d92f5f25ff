// tests/api/test_util.h — helpers shared by the loopback tests: a per-test watchdog (every
// test is bounded in time: it fails instead of hanging) and the seed of the run.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>

#include "util/address.h"

namespace mroce::test {

// kLoopback is 127.0.0.1 with port 0: an ephemeral port, never a fixed one.
inline Address loopback(uint16_t port = 0) { return Address::ipv4(0x7f000001, port); }

// test_seed: MROCE_SEED replays a run's random choices. By default the seed mixes in the
// process id: the engine draws its paths' UDP source ports from the seed, so two test
// processes running at once (ctest -j2) with one fixed seed would draw the same ports on
// the same host, and every re-roll would collide again. Loopback runs are not replayable
// packet by packet anyway (real sockets and threads). Printed by every test that uses it.
inline uint64_t test_seed() {
    if (const char* s = std::getenv("MROCE_SEED")) return std::strtoull(s, nullptr, 0);
    return (static_cast<uint64_t>(::getpid()) << 20) | 1;
}

// eventually polls `cond` (calling `step` between polls) until it holds or `timeout`
// passes; returns whether it held.
inline bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout,
                       const std::function<void()>& step = {}) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!cond()) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        if (step)
            step();
        else
            std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return true;
}

// Watchdog arms alarm(2) around every test: a test that hangs kills the binary with
// SIGALRM after kTestSeconds, which ctest reports as a failure, instead of hanging CI.
class Watchdog : public ::testing::EmptyTestEventListener {
public:
    static constexpr unsigned kTestSeconds = 60;
    void OnTestStart(const ::testing::TestInfo&) override { ::alarm(kTestSeconds); }
    void OnTestEnd(const ::testing::TestInfo&) override { ::alarm(0); }
};

inline bool install_watchdog() {
    ::testing::UnitTest::GetInstance()->listeners().Append(new Watchdog);
    return true;
}

}  // namespace mroce::test
