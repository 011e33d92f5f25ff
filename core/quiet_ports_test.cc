// core/quiet_ports_test.cc — [PATH-16]: a NIC port is quiet when the host's other ports go
// on receiving while it hears nothing, for enough arrivals and at least the timer floor.
#include "core/quiet_ports.h"

#include <gtest/gtest.h>

namespace mroce::core {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kNeeded = QuietPorts::kArrivalsPerPort * 4;  // on a 4-port host

TEST(QuietPorts, APortThatStopsHearingWhileTheOthersDoIsQuiet) {
    QuietPorts q(4, 20us);
    Time t{};
    for (int i = 0; i < 400; ++i) q.heard(static_cast<uint16_t>(i % 4), t += 100ns);
    q.heard(1, t += 100ns);  // port 1 heard last
    for (uint16_t p = 0; p < 4; ++p) EXPECT_FALSE(q.quiet(p, t)) << "port " << p;
    // Port 1 dies: the others keep receiving. Quiet needs both kNeeded arrivals and 20 us.
    uint64_t since = 0;
    while (since + 1 < kNeeded) {
        q.heard(static_cast<uint16_t>(since % 3 == 0 ? 0 : since % 3 == 1 ? 2 : 3), t += 1us);
        ++since;
    }
    EXPECT_FALSE(q.quiet(1, t)) << "one arrival short";
    q.heard(0, t += 1us);
    EXPECT_TRUE(q.quiet(1, t));
    EXPECT_FALSE(q.quiet(0, t));
    EXPECT_FALSE(q.quiet(2, t));
    // One packet on the port ends its quiet at once.
    q.heard(1, t += 1us);
    EXPECT_FALSE(q.quiet(1, t));
}

TEST(QuietPorts, ABurstOnTheOtherPortsWithinTheTimerFloorIsNotEnough) {
    QuietPorts q(2, 200us);  // a UDP host's floor
    Time t{};
    q.heard(0, t);
    q.heard(1, t);
    for (uint64_t i = 0; i < 10 * kNeeded; ++i) q.heard(0, t += 1us);  // 640 us on port 0 alone
    EXPECT_TRUE(q.quiet(1, t));
    QuietPorts r(2, 200us);
    Time u{};
    r.heard(1, u);
    for (uint64_t i = 0; i < 10 * kNeeded; ++i) r.heard(0, u += 100ns);  // 64 us: too short
    EXPECT_FALSE(r.quiet(1, u));
    EXPECT_TRUE(r.quiet(1, u + 200us));
}

// A plane that died before anything arrived on it: its port is judged from the host's
// first arrival, as a port that died later is from its last (scripts/sim_fuzz.py case
// 302: left unjudged, the dead port was the one port never quiet, and HELLOs chose it).
TEST(QuietPorts, APortNeverHeardIsJudgedFromTheFirstArrival) {
    QuietPorts q(4, 20us);
    Time t = Time{} + 1ms;
    EXPECT_FALSE(q.quiet(1, t)) << "nothing has arrived: nothing to compare";
    for (uint64_t i = 0; i + 1 < kNeeded; ++i) q.heard(static_cast<uint16_t>(i % 2 ? 0 : 2), t += 1us);
    EXPECT_FALSE(q.quiet(1, t)) << "one arrival short";
    q.heard(3, t += 1us);
    EXPECT_TRUE(q.quiet(1, t));
    EXPECT_FALSE(q.quiet(0, t));
    q.heard(1, t += 1us);
    EXPECT_FALSE(q.quiet(1, t)) << "one packet ends its quiet";
    QuietPorts r(4, 200us);  // and the timer floor counts from the first arrival
    Time u = Time{} + 1ms;
    for (uint64_t i = 0; i < 10 * kNeeded; ++i) r.heard(0, u += 100ns);  // 64 us: too short
    EXPECT_FALSE(r.quiet(1, u));
    EXPECT_TRUE(r.quiet(1, u + 200us));
}

TEST(QuietPorts, OnePortAndStrangePortsAreNotJudged) {
    QuietPorts q(4, 1us);
    Time t{};
    for (int i = 0; i < 1000; ++i) q.heard(0, t += 1us);
    EXPECT_FALSE(q.quiet(0, t));
    EXPECT_FALSE(q.quiet(64, t));
    q.heard(9, t);  // past the host's ports: ignored, and no crash
    EXPECT_FALSE(q.quiet(9, t));
    QuietPorts one(1, 1us);  // a one-port host has nothing to compare
    one.heard(0, t);
    for (int i = 0; i < 1000; ++i) one.heard(1, t += 1us);
    EXPECT_FALSE(one.quiet(0, t));
}

}  // namespace
}  // namespace mroce::core
